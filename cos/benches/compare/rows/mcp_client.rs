//! Driving `cos mcp` as an MCP client does (stdio, newline-delimited JSON-RPC), for the rows
//! that measure the sidecar: loopback (`mcp.rs`) and the modelled WAN link (`wan.rs`).

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context as _};
use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;

use crate::env::Endpoint;
use crate::interleave::{Contender, Sample};

/// Longest wait for one answer of the server.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(600);

/// A `cos mcp` child driven over stdio.
pub(super) struct McpClient {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    pub(super) pid: u32,
    next_id: u64,
}

impl McpClient {
    /// `cos --endpoint <endpoint> mcp --state-dir <state>/state --project <project>`,
    /// initialized.
    pub(super) async fn start(
        cos: &Path,
        endpoint: &Endpoint,
        state: &Path,
        project: &Path,
    ) -> anyhow::Result<McpClient> {
        let mut command = Command::new(cos);
        endpoint.apply(&mut command);
        let mut child = command
            .arg("mcp")
            .arg("--state-dir")
            .arg(state.join("state"))
            .arg("--project")
            .arg(project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("starting cos mcp")?;
        let pid = child.id().context("cos mcp has no pid")?;
        let stdin = child.stdin.take().context("cos mcp stdin")?;
        let stdout = child.stdout.take().context("cos mcp stdout")?;
        let mut client = McpClient {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            pid,
            next_id: 1,
        };
        client
            .request(
                "initialize",
                json!({
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "cos-bench", "version": "0"}
                }),
            )
            .await
            .context("MCP initialize")?;
        client
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(client)
    }

    async fn send(&mut self, message: &Value) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        self.stdin
            .write_all(&line)
            .await
            .context("writing to cos mcp")?;
        self.stdin.flush().await?;
        Ok(())
    }

    /// One request; returns its `result` (notifications in between are skipped).
    pub(super) async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        loop {
            let line = tokio::time::timeout(ANSWER_TIMEOUT, self.lines.next_line())
                .await
                .map_err(|_| {
                    anyhow!("cos mcp did not answer {method} within {ANSWER_TIMEOUT:?}")
                })??;
            let Some(line) = line else {
                let status = self.child.try_wait().ok().flatten();
                bail!("cos mcp exited ({status:?}) before answering {method}");
            };
            let message: Value = serde_json::from_str(&line)
                .with_context(|| format!("cos mcp wrote a non-JSON line {line:?}"))?;
            if message.get("id").and_then(Value::as_u64) != Some(id) {
                continue;
            }
            if let Some(error) = message.get("error") {
                bail!("cos mcp answered {method} with an error: {error}");
            }
            return message
                .get("result")
                .cloned()
                .context("an answer without a result");
        }
    }

    pub(super) async fn tool_names(&mut self) -> anyhow::Result<Vec<String>> {
        let listed = self.request("tools/list", json!({})).await?;
        let tools = listed
            .get("tools")
            .and_then(Value::as_array)
            .context("tools/list without tools")?;
        Ok(tools
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
            .collect())
    }

    /// `tools/call`; a result flagged `isError` fails.
    pub(super) async fn call(&mut self, name: &str, arguments: Value) -> anyhow::Result<Value> {
        let result = self
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .await?;
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            bail!(
                "{name} failed: {}",
                result.get("content").cloned().unwrap_or(Value::Null)
            );
        }
        Ok(result)
    }

    /// `tools/call` whose answer is one JSON text block (`sandbox_status`, say): that JSON.
    pub(super) async fn call_json(
        &mut self,
        name: &str,
        arguments: Value,
    ) -> anyhow::Result<Value> {
        let result = self.call(name, arguments).await?;
        if let Some(structured) = result.get("structuredContent") {
            return Ok(structured.clone());
        }
        let text = result
            .get("content")
            .and_then(Value::as_array)
            .and_then(|blocks| {
                blocks
                    .iter()
                    .find_map(|b| b.get("text").and_then(Value::as_str))
            })
            .with_context(|| format!("{name} answered without a text block: {result}"))?;
        serde_json::from_str(text)
            .with_context(|| format!("{name} answered with non-JSON text {text:?}"))
    }

    pub(super) async fn close(mut self) -> anyhow::Result<()> {
        drop(self.stdin);
        match tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await {
            Ok(status) => {
                status?;
            }
            Err(_) => self.child.kill().await?,
        }
        Ok(())
    }
}

/// One tool call on a warm server, timed from writing the request to reading its answer.
pub(super) struct McpCall {
    pub(super) server: Arc<Mutex<McpClient>>,
    pub(super) tool: &'static str,
    pub(super) arguments: Value,
    pub(super) label: String,
}

impl Contender for McpCall {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move {
            let mut server = self.server.lock().await;
            let started = Instant::now();
            let result = server.call(self.tool, self.arguments.clone()).await?;
            let elapsed = started.elapsed();
            ensure!(
                result.get("content").is_some(),
                "{} answered without content: {result}",
                self.tool
            );
            Ok(Sample::time(elapsed))
        })
    }
}
