//! A minimal MCP client for the catalog tests: the real `cos mcp` binary over stdio, JSON-RPC
//! written by hand, one request at a time, against an in-process emulator.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::common::Env;

/// Upper bound for any single protocol answer; generous for a loaded 2-core machine.
const ANSWER_LIMIT: Duration = Duration::from_secs(120);

/// Configuration variables of the tool server that must not leak in from the test's own
/// environment.
const CONFIG_VARS: [&str; 11] = [
    "CREATEOS_SHAPE",
    "CREATEOS_ROOTFS",
    "CREATEOS_CWD",
    "CREATEOS_NETWORK",
    "CREATEOS_AUTO_PAUSE",
    "CREATEOS_PERSIST",
    "CREATEOS_TIMEOUT",
    "CREATEOS_MCP_SESSION",
    "CREATEOS_STATE_DIR",
    "CREATEOS_MODE",
    "CREATEOS_SYNC",
];

/// One running `cos mcp` child after the initialize handshake.
pub struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    /// Responses read while waiting for another one, by id.
    stash: HashMap<u64, Value>,
    /// Notifications (no id) seen while waiting for responses, in order.
    pub notifications: Vec<Value>,
}

/// How a `cos mcp` child is started: against `env`, state (and HOME) in `state`, project
/// `project`, configuration `options` (a JSON object) and extra environment variables.
pub struct Setup<'a> {
    pub env: &'a Env,
    pub state: &'a Path,
    pub project: &'a Path,
    pub options: &'a str,
    pub extra_env: Vec<(&'static str, String)>,
    /// Start without any credential in the environment (HOME is `state`).
    pub signed_out: bool,
    /// More arguments of `cos mcp` (e.g. `--unsafe-host`).
    pub extra_args: Vec<&'static str>,
}

impl<'a> Setup<'a> {
    pub fn new(env: &'a Env, state: &'a Path, project: &'a Path) -> Self {
        Setup {
            env,
            state,
            project,
            options: "{}",
            extra_env: Vec::new(),
            signed_out: false,
            extra_args: Vec::new(),
        }
    }

    /// The command line, not started (for runs that must fail before the protocol starts).
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cos"));
        cmd.arg("mcp")
            .arg("--state-dir")
            .arg(self.state)
            .arg("--project")
            .arg(self.project)
            .arg("--options")
            .arg(self.options)
            .args(&self.extra_args)
            .env("CREATEOS_SANDBOX_BASE_URL", self.env.base_url())
            .env("CREATEOS_API_KEY", self.env.mock.api_key())
            .env("HOME", self.state)
            .env("RUST_LOG", "warn");
        for var in CONFIG_VARS
            .into_iter()
            .chain(cos::tools::config::env_vars())
        {
            cmd.env_remove(var);
        }
        if self.signed_out {
            for var in createos_sandbox::auth::API_KEY_ENV_VARS {
                cmd.env_remove(var);
            }
        }
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Start it and complete the initialize handshake.
    pub async fn start(&self) -> Mcp {
        let mut child = self
            .command()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("cos mcp starts");
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().expect("stdout piped")).lines();
        let mut mcp = Mcp {
            child,
            stdin,
            lines,
            next_id: 0,
            stash: HashMap::new(),
            notifications: Vec::new(),
        };
        let init = mcp
            .request("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "cos-test", "version": "0"}}))
            .await;
        assert_eq!(init["result"]["serverInfo"]["name"], "cos", "{init}");
        mcp.notify("notifications/initialized", json!({})).await;
        mcp
    }
}

impl Mcp {
    /// Start `cos mcp` against `env` with state and project in `dir`, configuration `options`
    /// (a JSON object) and extra environment variables.
    pub async fn start(
        env: &Env,
        dir: &Path,
        options: &str,
        extra_env: &[(&'static str, &str)],
    ) -> Mcp {
        Mcp::start_in(env, dir, dir, options, extra_env).await
    }

    /// Like [`Mcp::start`], with the state (and HOME) in `state` and the project in `project`.
    pub async fn start_in(
        env: &Env,
        state: &Path,
        project: &Path,
        options: &str,
        extra_env: &[(&'static str, &str)],
    ) -> Mcp {
        let mut setup = Setup::new(env, state, project);
        setup.options = options;
        setup.extra_env = extra_env.iter().map(|(k, v)| (*k, v.to_string())).collect();
        setup.start().await
    }

    async fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        let mut line = serde_json::to_vec(&message).expect("JSON");
        line.push(b'\n');
        stdin.write_all(&line).await.expect("write to cos mcp");
        stdin.flush().await.expect("flush to cos mcp");
    }

    /// The response to `id`, keeping other responses for later and notifications in
    /// [`Mcp::notifications`]. Every stdout line must be JSON-RPC.
    pub async fn response(&mut self, id: u64) -> Value {
        if let Some(v) = self.stash.remove(&id) {
            return v;
        }
        loop {
            let line = tokio::time::timeout(ANSWER_LIMIT, self.lines.next_line())
                .await
                .unwrap_or_else(|_| panic!("no answer to request {id} in time"))
                .expect("read stdout")
                .expect("stdout open");
            let msg: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("non-protocol output on stdout {line:?}: {e}"));
            assert_eq!(msg["jsonrpc"], "2.0", "{msg}");
            let Some(got) = msg["id"].as_u64() else {
                self.notifications.push(msg);
                continue;
            };
            if got == id {
                return msg;
            }
            self.stash.insert(got, msg);
        }
    }

    /// Send one request and return its response.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params).await;
        self.response(id).await
    }

    /// Every listed tool.
    pub async fn tools(&mut self) -> Vec<Value> {
        let list = self.request("tools/list", json!({})).await;
        list["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools: {list}"))
            .clone()
    }

    /// A `tools/call` result (the `result` member) in the default session.
    pub async fn call(&mut self, name: &str, args: Value) -> Value {
        let answer = self
            .request("tools/call", json!({"name": name, "arguments": args}))
            .await;
        answer
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{name}: no result: {answer}"))
    }

    /// The JSON body of a successful call.
    pub async fn ok(&mut self, name: &str, args: Value) -> Value {
        let result = self.call(name, args).await;
        ok_json(&result)
    }

    /// The error text of a call that must fail.
    pub async fn refused(&mut self, name: &str, args: Value) -> String {
        let result = self.call(name, args).await;
        assert_eq!(
            result["isError"], true,
            "{name} should have failed: {result}"
        );
        result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Close stdin and wait for a clean exit.
    pub async fn stop(mut self) {
        drop(self.stdin.take());
        let status = tokio::time::timeout(ANSWER_LIMIT, self.child.wait())
            .await
            .expect("cos mcp exits in time")
            .expect("wait");
        assert!(status.success(), "cos mcp exit status {status}");
    }
}

/// The JSON text content of a successful result.
pub fn ok_json(result: &Value) -> Value {
    assert_ne!(result["isError"], true, "tool failed: {result}");
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content: {result}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// A string member, or a panic naming the value.
pub fn string(value: &Value, key: &str) -> String {
    value[key]
        .as_str()
        .unwrap_or_else(|| panic!("no string {key:?} in {value}"))
        .to_string()
}

/// Total requests that reached the emulator, all operations together.
pub async fn total_requests(env: &Env) -> u64 {
    let stats = env.stats().await;
    stats["requests"]
        .as_object()
        .map(|m| m.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0)
}

impl Mcp {
    /// A call that must fail with an error text containing `needle`.
    pub async fn refused_with(&mut self, name: &str, args: Value, needle: &str) {
        let text = self.refused(name, args).await;
        assert!(
            text.contains(needle),
            "{name}: error {text:?} does not mention {needle:?}"
        );
    }
}

impl Mcp {
    /// A notification (no answer expected), e.g. `notifications/cancelled`.
    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// Send a request without waiting for its answer; returns its id (for a cancellation).
    pub async fn send_request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// A `tools/call` result with `meta` as the request's `_meta` (session ids); `Null` sends none.
    pub async fn call_with(&mut self, name: &str, args: Value, meta: Value) -> Value {
        let mut params = json!({"name": name, "arguments": args});
        if !meta.is_null() {
            params["_meta"] = meta;
        }
        let answer = self.request("tools/call", params).await;
        answer
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{name}: no result: {answer}"))
    }

    /// A `tools/call` result in session `session` (sent as `_meta`; `None` = the default one).
    pub async fn call_in(&mut self, name: &str, args: Value, session: Option<&str>) -> Value {
        let answer = self
            .request("tools/call", Self::call_params(name, args, session))
            .await;
        answer
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{name}: no result: {answer}"))
    }

    /// `tools/call` parameters, with the session as `_meta` when given.
    pub fn call_params(name: &str, args: Value, session: Option<&str>) -> Value {
        let mut params = json!({"name": name, "arguments": args});
        if let Some(s) = session {
            params["_meta"] = json!({"createos/session": s});
        }
        params
    }

    /// The names of every listed tool.
    pub async fn tool_names(&mut self) -> Vec<String> {
        self.tools()
            .await
            .iter()
            .map(|t| string(t, "name"))
            .collect()
    }
}

/// The text content of a successful result.
pub fn ok_text(result: &Value) -> String {
    assert_ne!(result["isError"], true, "tool failed: {result}");
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content: {result}"))
        .to_string()
}

/// The error text of a result that must be a tool error.
pub fn error_text(result: &Value) -> String {
    assert_eq!(result["isError"], true, "expected a tool error: {result}");
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The `sandboxId` of a result's metadata.
pub fn sandbox_of(result: &Value) -> String {
    result["_meta"]["sandboxId"]
        .as_str()
        .unwrap_or_else(|| panic!("no sandboxId: {result}"))
        .to_string()
}
