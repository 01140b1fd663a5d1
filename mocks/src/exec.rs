//! E18 `POST /v1/sandboxes/{id}/exec`: runs a real command inside the sandbox, either
//! buffered (JSend result) or streamed (NDJSON frames with heartbeats).

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Instant;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Child;

use crate::auth::Caller;
use crate::envelope::{ok, ApiError, JsonBody};
use crate::ndjson::{channel_response, Utf8Carry};
use crate::operation::{op, Operation};
use crate::sandbox::SandboxRef;
use crate::state::AppState;

pub const OPERATIONS: &[Operation] = &[op("exec", "POST", "/v1/sandboxes/{id}/exec", "exec::exec")];

pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/sandboxes/{id}/exec", post(exec))
}

#[derive(Debug, Default, Deserialize)]
pub struct ExecRequest {
    pub cmd: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    pub stdin: Option<String>,
    pub env: Option<BTreeMap<String, String>>,
    pub stream: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ExecQuery {
    pub stream: Option<String>,
}

fn truthy(raw: Option<&str>) -> bool {
    matches!(
        raw.map(str::to_ascii_lowercase).as_deref(),
        Some("true" | "1" | "yes")
    )
}

/// Exit code of a finished child (128 + signal when killed by one).
fn exit_code_of(status: std::process::ExitStatus) -> i64 {
    if let Some(code) = status.code() {
        return code as i64;
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return 128 + sig as i64;
        }
    }
    -1
}

/// Kills the command's process group if the call is abandoned (client gone) and keeps
/// the sandbox marked busy while the command runs.
struct ExecGuard {
    sandbox: SandboxRef,
    pgid: Option<i32>,
}

impl ExecGuard {
    fn new(sandbox: SandboxRef, pid: Option<u32>) -> Self {
        sandbox.begin_busy();
        ExecGuard {
            sandbox,
            pgid: pid.map(|p| p as i32),
        }
    }

    /// The command finished normally: nothing to kill.
    fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for ExecGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        self.sandbox.end_busy();
    }
}

pub async fn exec(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<ExecQuery>,
    JsonBody(req): JsonBody<ExecRequest>,
) -> Result<Response, ApiError> {
    let sandbox = state.running_sandbox(&caller, &id)?;
    let program = req.cmd.as_deref().map(str::trim).unwrap_or("");
    if program.is_empty() {
        return Err(ApiError::validation("cmd", "cmd is required"));
    }
    let env = req.env.clone().unwrap_or_default();
    let declared = sandbox.envs();
    if let Some(undeclared) = env.keys().find(|k| !declared.contains_key(*k)) {
        return Err(ApiError::validation(
            "env",
            format!("env var {undeclared:?} was not declared in the sandbox's envs at create"),
        ));
    }
    let streaming = truthy(q.stream.as_deref()) || req.stream.unwrap_or(false);
    state.resources.metrics.exec_started(&sandbox.tenant);

    let mut cmd = sandbox.runtime().command(program, &req.args, None, &env);
    cmd.stdin(if req.stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let spawned = {
        let _scope = sandbox.runtime().spawn_scope();
        tokio::process::Command::from(cmd).spawn()
    };
    let child = match spawned {
        Ok(child) => {
            if let Some(pid) = child.id() {
                sandbox.runtime().adopt(pid);
            }
            child
        }
        Err(err) => {
            let message = format!("exec: {program:?}: {err}");
            if streaming {
                let (tx, resp) = channel_response(4);
                let _ = tx.send(json!({"error": message})).await;
                let _ = tx.send(json!({"exit_code": -1})).await;
                return Ok(resp);
            }
            return Ok(ok(json!({
                "result": {"stdout": "", "stderr": "", "exit_code": -1, "error": message},
                "exec_ms": started.elapsed().as_secs_f64() * 1000.0,
            })));
        }
    };
    let guard = ExecGuard::new(sandbox, child.id());
    if streaming {
        Ok(stream_exec(state, child, req.stdin, guard))
    } else {
        buffered_exec(child, req.stdin, guard, started).await
    }
}

fn feed_stdin(child: &mut Child, stdin: Option<String>) {
    if let (Some(mut pipe), Some(data)) = (child.stdin.take(), stdin) {
        tokio::spawn(async move {
            let _ = pipe.write_all(data.as_bytes()).await;
            let _ = pipe.shutdown().await;
        });
    }
}

async fn buffered_exec(
    mut child: Child,
    stdin: Option<String>,
    mut guard: ExecGuard,
    started: Instant,
) -> Result<Response, ApiError> {
    feed_stdin(&mut child, stdin);
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let read_out = async {
        let mut buf = Vec::new();
        if let Some(s) = stdout.as_mut() {
            let _ = s.read_to_end(&mut buf).await;
        }
        buf
    };
    let read_err = async {
        let mut buf = Vec::new();
        if let Some(s) = stderr.as_mut() {
            let _ = s.read_to_end(&mut buf).await;
        }
        buf
    };
    let (out, err, status) = tokio::join!(read_out, read_err, child.wait());
    guard.disarm();
    let status =
        status.map_err(|e| ApiError::internal(format!("waiting for the command failed: {e}")))?;
    Ok(ok(json!({
        "result": {
            "stdout": String::from_utf8_lossy(&out),
            "stderr": String::from_utf8_lossy(&err),
            "exit_code": exit_code_of(status),
        },
        "exec_ms": started.elapsed().as_secs_f64() * 1000.0,
    })))
}

fn stream_exec(
    state: AppState,
    mut child: Child,
    stdin: Option<String>,
    mut guard: ExecGuard,
) -> Response {
    let (tx, resp) = channel_response(64);
    let heartbeat = state.config.heartbeat;
    let shutdown = state.shutdown.clone();
    feed_stdin(&mut child, stdin);
    tokio::spawn(async move {
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let (mut out_dec, mut err_dec) = (Utf8Carry::default(), Utf8Carry::default());
        let (mut out_buf, mut err_buf) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
        let mut exit: Option<i64> = None;
        let mut silence = Box::pin(tokio::time::sleep(heartbeat));
        loop {
            if stdout.is_none() && stderr.is_none() && exit.is_some() {
                break;
            }
            let frame = tokio::select! {
                n = read_some(&mut stdout, &mut out_buf) => text_frame("stdout", n, &out_buf, &mut out_dec, &mut stdout),
                n = read_some(&mut stderr, &mut err_buf) => text_frame("stderr", n, &err_buf, &mut err_dec, &mut stderr),
                status = child.wait(), if exit.is_none() => {
                    exit = Some(status.map(exit_code_of).unwrap_or(-1));
                    None
                }
                _ = &mut silence => Some(json!({"hb": true})),
                _ = tx.closed() => return,
                _ = shutdown.cancelled() => return,
            };
            if let Some(frame) = frame {
                if tx.send(frame).await.is_err() {
                    return;
                }
                silence
                    .as_mut()
                    .reset(tokio::time::Instant::now() + heartbeat);
            }
        }
        guard.disarm();
        let _ = tx.send(json!({"exit_code": exit.unwrap_or(-1)})).await;
    });
    resp
}

/// Reads from an open pipe; pends forever once the pipe is closed (`None`).
async fn read_some<R: tokio::io::AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buf: &mut [u8],
) -> std::io::Result<usize> {
    match pipe.as_mut() {
        Some(p) => p.read(buf).await,
        None => std::future::pending().await,
    }
}

/// Turns a read into a `{"stdout": …}` frame; closes the pipe at EOF (flushing any
/// incomplete UTF-8 tail).
fn text_frame<R>(
    key: &str,
    read: std::io::Result<usize>,
    buf: &[u8],
    dec: &mut Utf8Carry,
    pipe: &mut Option<R>,
) -> Option<serde_json::Value> {
    let text = match read {
        Ok(0) | Err(_) => {
            *pipe = None;
            dec.finish()
        }
        Ok(n) => dec.push(&buf[..n]),
    };
    if text.is_empty() {
        None
    } else {
        let mut frame = serde_json::Map::new();
        frame.insert(key.to_string(), serde_json::Value::String(text));
        Some(serde_json::Value::Object(frame))
    }
}
