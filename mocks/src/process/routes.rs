//! HTTP handlers of E21–E33: managed processes, their output stream and controls, and the
//! interactive upgrade routes (`/shell`, `/shell-ws`, `/tunnel/{port}`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use base64::Engine;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::json;

use super::managed::{ControlError, Kind, Launch, ManagedProcess, ALLOWED_SIGNALS};
use super::pty::{self, DEFAULT_COLS, DEFAULT_ROWS, MAX_DIMENSION};
use super::shell::{self, ShellProcess};
use super::{connect, netns, tasks, tunnel};
use crate::auth::Caller;
use crate::envelope::{ok, ApiError, JsonBody};
use crate::operation::{op, Operation};
use crate::sandbox::SandboxRef;
use crate::state::AppState;

/// E21–E33 as served by this module.
pub const OPERATIONS: &[Operation] = &[
    op(
        "createProcess",
        "POST",
        "/v1/sandboxes/{id}/processes",
        "process::routes::create_process",
    ),
    op(
        "listProcesses",
        "GET",
        "/v1/sandboxes/{id}/processes",
        "process::routes::list_processes",
    ),
    op(
        "getProcess",
        "GET",
        "/v1/sandboxes/{id}/processes/{process_id}",
        "process::routes::get_process",
    ),
    op(
        "stopProcess",
        "DELETE",
        "/v1/sandboxes/{id}/processes/{process_id}",
        "process::routes::stop_process",
    ),
    op(
        "connectProcess",
        "GET",
        "/v1/sandboxes/{id}/processes/{process_id}/connect",
        "process::routes::connect_process",
    ),
    op(
        "writeProcessInput",
        "POST",
        "/v1/sandboxes/{id}/processes/{process_id}/input",
        "process::routes::write_process_input",
    ),
    op(
        "closeProcessStdin",
        "POST",
        "/v1/sandboxes/{id}/processes/{process_id}/stdin/close",
        "process::routes::close_process_stdin",
    ),
    op(
        "resizeProcess",
        "POST",
        "/v1/sandboxes/{id}/processes/{process_id}/resize",
        "process::routes::resize_process",
    ),
    op(
        "signalProcess",
        "POST",
        "/v1/sandboxes/{id}/processes/{process_id}/signal",
        "process::routes::signal_process",
    ),
    op(
        "waitProcess",
        "GET",
        "/v1/sandboxes/{id}/processes/{process_id}/wait",
        "process::routes::wait_process",
    ),
    op(
        "openShell",
        "POST",
        "/v1/sandboxes/{id}/shell",
        "process::routes::open_shell",
    ),
    op(
        "openShellWebSocket",
        "GET",
        "/v1/sandboxes/{id}/shell-ws",
        "process::routes::open_shell_websocket",
    ),
    op(
        "openTunnel",
        "POST",
        "/v1/sandboxes/{id}/tunnel/{port}",
        "process::routes::open_tunnel",
    ),
];

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    let p = "/v1/sandboxes/{id}/processes/{process_id}";
    Router::new()
        .route(
            "/v1/sandboxes/{id}/processes",
            post(create_process).get(list_processes),
        )
        .route(p, get(get_process).delete(stop_process))
        .route(&format!("{p}/connect"), get(connect_process))
        .route(&format!("{p}/input"), post(write_process_input))
        .route(&format!("{p}/stdin/close"), post(close_process_stdin))
        .route(&format!("{p}/resize"), post(resize_process))
        .route(&format!("{p}/signal"), post(signal_process))
        .route(&format!("{p}/wait"), get(wait_process))
        .route("/v1/sandboxes/{id}/shell", post(open_shell))
        .route("/v1/sandboxes/{id}/shell-ws", get(open_shell_websocket))
        .route("/v1/sandboxes/{id}/tunnel/{port}", post(open_tunnel))
}

/// Longest `wait` long-poll and longest stop grace period.
const MAX_WAIT: Duration = Duration::from_secs(60);
const DEFAULT_GRACE: Duration = Duration::from_millis(1000);

#[derive(Debug, Default, Deserialize)]
struct PtyRequest {
    rows: Option<i64>,
    cols: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
struct CreateRequest {
    cmd: Option<String>,
    args: Option<Vec<String>>,
    cwd: Option<String>,
    env: Option<BTreeMap<String, String>>,
    pty: Option<PtyRequest>,
}

#[derive(Debug, Default, Deserialize)]
struct InputRequest {
    data_base64: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct ResizeRequest {
    rows: Option<i64>,
    cols: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
struct SignalRequest {
    signal: Option<String>,
}

fn process_not_found() -> ApiError {
    ApiError::not_found("process", "process not found")
}

fn find(
    state: &AppState,
    sandbox: &SandboxRef,
    process_id: &str,
) -> Result<Arc<ManagedProcess>, ApiError> {
    state
        .processes
        .get(&sandbox.id, process_id)
        .ok_or_else(process_not_found)
}

fn control_error(err: ControlError) -> ApiError {
    match err {
        ControlError::NotRunning => ApiError::conflict_on("process", "process is not running"),
        ControlError::StdinClosed => ApiError::conflict_on("stdin", "stdin is closed"),
        ControlError::Backlog => ApiError::conflict_on("input", err.to_string()),
        ControlError::NotPty | ControlError::IsPty => {
            ApiError::validation("process", err.to_string())
        }
        ControlError::Io(msg) => ApiError::internal(msg),
    }
}

fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// A guest directory given as `cwd`: absolute, no NUL, no `..`, and existing.
fn validate_cwd(sandbox: &SandboxRef, cwd: &str) -> Result<String, ApiError> {
    if !cwd.starts_with('/') || cwd.contains('\0') || cwd.split('/').any(|s| s == "..") {
        return Err(ApiError::validation("cwd", "cwd must be an absolute path"));
    }
    let fs = crate::guest_fs::GuestFs::new(sandbox.runtime());
    let is_dir = fs
        .resolve(cwd, true)
        .and_then(|resolved| fs.lstat(&resolved))
        .map(|m| m.is_dir())
        .unwrap_or(false);
    if !is_dir {
        return Err(ApiError::validation(
            "cwd",
            format!("no such directory: {cwd}"),
        ));
    }
    Ok(cwd.to_string())
}

/// E21.
async fn create_process(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<CreateRequest>,
) -> Result<Response, ApiError> {
    let sandbox = state.running_sandbox(&caller, &id)?;
    let cmd = body.cmd.filter(|c| !c.trim().is_empty());
    let args = body.args.unwrap_or_default();
    if cmd.as_deref().is_some_and(|c| c.contains('\0')) {
        return Err(ApiError::validation(
            "cmd",
            "cmd must not contain NUL bytes",
        ));
    }
    if args.iter().any(|a| a.contains('\0')) {
        return Err(ApiError::validation(
            "args",
            "args must not contain NUL bytes",
        ));
    }
    let env = body.env.unwrap_or_default();
    if let Some(bad) = env.keys().find(|k| !valid_env_name(k)) {
        return Err(ApiError::validation(
            "env",
            format!("invalid env name {bad:?}"),
        ));
    }
    if let Some((name, _)) = env.iter().find(|(_, v)| v.contains('\0')) {
        return Err(ApiError::validation(
            "env",
            format!("value of {name:?} must not contain NUL bytes"),
        ));
    }
    let pty_size = match &body.pty {
        None => None,
        Some(p) => Some((
            pty::dimension(p.rows, DEFAULT_ROWS, "rows")
                .map_err(|m| ApiError::validation("pty", m))?,
            pty::dimension(p.cols, DEFAULT_COLS, "cols")
                .map_err(|m| ApiError::validation("pty", m))?,
        )),
    };
    let cwd = match body.cwd.as_deref().filter(|c| !c.is_empty()) {
        Some(c) => validate_cwd(&sandbox, c)?,
        None => "/root".to_string(),
    };
    let (cmd, args) = match (cmd, pty_size.is_some()) {
        (Some(cmd), _) => (cmd, args),
        (None, true) => {
            let (shell, login_args) = super::spawn::login_shell();
            (
                shell.to_string(),
                if args.is_empty() { login_args } else { args },
            )
        }
        (None, false) => {
            return Err(ApiError::validation(
                "cmd",
                "cmd is required for a process without a pty",
            ))
        }
    };
    let kind = if pty_size.is_some() {
        Kind::Pty
    } else {
        Kind::Pipes
    };
    let runtime = sandbox.runtime();
    let command = runtime.command(&cmd, &args, Some(&cwd), &env);
    let launch = Launch {
        id: crate::ids::new_id("proc_"),
        kind,
        cmd,
        args,
        cwd,
        journal_bytes: state.config.journal_bytes,
    };
    let proc = tasks::launch(launch, pty_size, command, runtime);
    if proc.pid() > 0 {
        runtime.adopt(proc.pid() as u32);
    }
    state.processes.insert(&sandbox.id, proc.clone());
    Ok(ok(proc.details()))
}

/// E22.
async fn list_processes(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let sandbox = state.running_sandbox(&caller, &id)?;
    let processes: Vec<_> = state
        .processes
        .list(&sandbox.id)
        .iter()
        .map(|p| p.details())
        .collect();
    Ok(ok(json!({ "processes": processes })))
}

/// E23.
async fn get_process(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, process_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let sandbox = state.running_sandbox(&caller, &id)?;
    Ok(ok(find(&state, &sandbox, &process_id)?.details()))
}

/// Parses an optional non-negative integer query parameter.
fn query_u64(query: &HashMap<String, String>, name: &str) -> Result<Option<u64>, ApiError> {
    match query.get(name).map(|v| v.trim()).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(raw) => raw.parse::<u64>().map(Some).map_err(|_| {
            ApiError::validation(name, format!("{name} must be a non-negative integer"))
        }),
    }
}

/// E24: SIGTERM to the whole tree, SIGKILL after `grace_ms`; returns the final details.
async fn stop_process(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, process_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let sandbox = state.running_sandbox(&caller, &id)?;
    let grace = query_u64(&query, "grace_ms")?
        .map(|ms| Duration::from_millis(ms).min(MAX_WAIT))
        .unwrap_or(DEFAULT_GRACE);
    let proc = find(&state, &sandbox, &process_id)?;
    // Run detached so a client hanging up mid-grace cannot leave the tree half-stopped.
    let details = tokio::spawn(async move { proc.stop(grace).await })
        .await
        .map_err(|e| ApiError::internal(format!("stop failed: {e}")))?;
    Ok(ok(details))
}

/// Ends a sandbox's busy mark when a stream or session closes.
struct Busy(SandboxRef);

impl Busy {
    fn start(sandbox: SandboxRef) -> Busy {
        sandbox.begin_busy();
        Busy(sandbox)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.end_busy();
    }
}

/// E25: NDJSON output stream.
async fn connect_process(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, process_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let sandbox = state.running_sandbox(&caller, &id)?;
    let after = query_u64(&query, "after")?.unwrap_or(0);
    let proc = find(&state, &sandbox, &process_id)?;
    let body = connect::output_body(
        proc,
        after,
        state.config.heartbeat,
        state.shutdown.clone(),
        Box::new(Busy::start(sandbox)),
    );
    let mut resp = Response::new(body);
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(resp)
}

/// E26: ordered input; answers with the input's sequence number.
async fn write_process_input(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, process_id)): Path<(String, String)>,
    JsonBody(body): JsonBody<InputRequest>,
) -> Result<Response, ApiError> {
    let sandbox = state.running_sandbox(&caller, &id)?;
    let proc = find(&state, &sandbox, &process_id)?;
    let raw = body
        .data_base64
        .ok_or_else(|| ApiError::validation("data_base64", "data_base64 is required"))?;
    let data = base64::engine::general_purpose::STANDARD
        .decode(raw.as_bytes())
        .map_err(|_| ApiError::validation("data_base64", "data_base64 must be standard base64"))?;
    let input_seq = proc.write_input(data.into()).map_err(control_error)?;
    Ok(ok(json!({ "input_seq": input_seq })))
}

/// E27: closes stdin of a pipe process (after queued input). Any body is ignored.
async fn close_process_stdin(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, process_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let sandbox = state.running_sandbox(&caller, &id)?;
    find(&state, &sandbox, &process_id)?
        .close_stdin()
        .map_err(control_error)?;
    Ok(ok(json!({ "ok": true })))
}

fn strict_dimension(value: Option<i64>, field: &str) -> Result<u16, ApiError> {
    match value {
        Some(v) if (1..=MAX_DIMENSION as i64).contains(&v) => Ok(v as u16),
        _ => Err(ApiError::validation(
            field,
            format!("{field} must be between 1 and {MAX_DIMENSION}"),
        )),
    }
}

/// E28: PTY window size.
async fn resize_process(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, process_id)): Path<(String, String)>,
    JsonBody(body): JsonBody<ResizeRequest>,
) -> Result<Response, ApiError> {
    let sandbox = state.running_sandbox(&caller, &id)?;
    let proc = find(&state, &sandbox, &process_id)?;
    if proc.kind != Kind::Pty {
        return Err(control_error(ControlError::NotPty));
    }
    let rows = strict_dimension(body.rows, "rows")?;
    let cols = strict_dimension(body.cols, "cols")?;
    proc.resize(rows, cols).map_err(control_error)?;
    Ok(ok(json!({ "ok": true })))
}

/// E29: one of the allowed signals to the process group (PTY: the foreground group).
async fn signal_process(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, process_id)): Path<(String, String)>,
    JsonBody(body): JsonBody<SignalRequest>,
) -> Result<Response, ApiError> {
    let sandbox = state.running_sandbox(&caller, &id)?;
    let proc = find(&state, &sandbox, &process_id)?;
    let raw = body.signal.unwrap_or_default().trim().to_ascii_uppercase();
    let name = if raw.starts_with("SIG") {
        raw
    } else {
        format!("SIG{raw}")
    };
    let allowed: Vec<&str> = ALLOWED_SIGNALS.iter().map(|s| s.as_str()).collect();
    let sig = ALLOWED_SIGNALS
        .iter()
        .copied()
        .find(|s| s.as_str() == name)
        .ok_or_else(|| {
            ApiError::validation(
                "signal",
                format!(
                    "unsupported signal {name:?} (allowed: {})",
                    allowed.join(", ")
                ),
            )
        })?;
    proc.signal(sig).map_err(control_error)?;
    Ok(ok(json!({ "ok": true })))
}

/// E30: long-poll for the leader or the whole tree; 408 when `timeout_ms` runs out.
async fn wait_process(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, process_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let sandbox = state.running_sandbox(&caller, &id)?;
    let tree = match query
        .get("scope")
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
    {
        None | Some("leader") => false,
        Some("tree") => true,
        Some(other) => {
            return Err(ApiError::validation(
                "scope",
                format!("unknown scope {other:?} (leader|tree)"),
            ));
        }
    };
    let timeout = query_u64(&query, "timeout_ms")?
        .map(|ms| Duration::from_millis(ms).min(MAX_WAIT))
        .unwrap_or(MAX_WAIT);
    let proc = find(&state, &sandbox, &process_id)?;
    match proc.wait(tree, timeout).await {
        Some(details) => Ok(ok(details)),
        None => Err(ApiError::fail(
            StatusCode::REQUEST_TIMEOUT,
            json!({"wait": "timed out waiting for process"}),
        )),
    }
}

/// 400 unless the request asks for `Upgrade: tcp-tunnel` over `Connection: Upgrade`.
fn require_tcp_tunnel_upgrade(headers: &HeaderMap) -> Result<(), ApiError> {
    let has_token = |name: header::HeaderName, token: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    if has_token(header::CONNECTION, "upgrade") && has_token(header::UPGRADE, "tcp-tunnel") {
        Ok(())
    } else {
        Err(ApiError::validation(
            "upgrade",
            "expected Connection: Upgrade and Upgrade: tcp-tunnel",
        ))
    }
}

fn switching_protocols() -> Response {
    let mut resp = StatusCode::SWITCHING_PROTOCOLS.into_response();
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    resp.headers_mut()
        .insert(header::UPGRADE, HeaderValue::from_static("tcp-tunnel"));
    resp
}

/// E31: a login shell on a PTY over the upgraded connection.
async fn open_shell(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    mut req: Request,
) -> Result<Response, ApiError> {
    let sandbox = state.running_sandbox(&caller, &id)?;
    require_tcp_tunnel_upgrade(req.headers())?;
    let upgrade = hyper::upgrade::on(&mut req);
    let shell = ShellProcess::spawn(sandbox.runtime())
        .map_err(|e| ApiError::internal(format!("could not start the shell: {e}")))?;
    let guard = state.processes.session(&sandbox.id);
    let shutdown = state.shutdown.clone();
    let busy = Busy::start(sandbox);
    tokio::spawn(async move {
        // Bytes the client sent right after its headers are replayed by `Upgraded`.
        match upgrade.await {
            Ok(upgraded) => shell::serve_raw(TokioIo::new(upgraded), shell, guard, shutdown).await,
            Err(_) => shell.abandon(),
        }
        drop(busy);
    });
    Ok(switching_protocols())
}

/// E32: the same shell over a WebSocket.
async fn open_shell_websocket(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let sandbox = state.running_sandbox(&caller, &id)?;
    let ws = ws.map_err(|e| {
        ApiError::validation(
            "upgrade",
            format!("expected a WebSocket upgrade: {}", e.body_text()),
        )
    })?;
    let guard = state.processes.session(&sandbox.id);
    let shutdown = state.shutdown.clone();
    let runtime = sandbox.runtime_arc();
    let busy = Busy::start(sandbox);
    Ok(ws.on_upgrade(move |socket| async move {
        shell::serve_ws(socket, runtime, guard, shutdown).await;
        drop(busy);
    }))
}

/// E33: connect to the sandbox port first (502 when refused), then 101 and relay.
async fn open_tunnel(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, port)): Path<(String, String)>,
    mut req: Request,
) -> Result<Response, ApiError> {
    let sandbox = state.running_sandbox(&caller, &id)?;
    let port = tunnel::parse_port(&port)
        .ok_or_else(|| ApiError::validation("port", "port must be between 1 and 65535"))?;
    require_tcp_tunnel_upgrade(req.headers())?;
    let upstream = netns::connect_loopback(sandbox.runtime().netns(), port)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => ApiError::error(
                StatusCode::BAD_GATEWAY,
                format!("connection refused: nothing is listening on port {port} in the sandbox"),
            ),
            std::io::ErrorKind::TimedOut => ApiError::error(
                StatusCode::GATEWAY_TIMEOUT,
                format!("timed out connecting to port {port} in the sandbox"),
            ),
            _ => ApiError::error(
                StatusCode::BAD_GATEWAY,
                format!("cannot reach port {port} in the sandbox: {e}"),
            ),
        })?;
    let upgrade = hyper::upgrade::on(&mut req);
    let guard = state.processes.session(&sandbox.id);
    let shutdown = state.shutdown.clone();
    let busy = Busy::start(sandbox);
    tokio::spawn(async move {
        if let Ok(upgraded) = upgrade.await {
            tunnel::relay(TokioIo::new(upgraded), upstream, guard, shutdown).await;
        }
        drop(busy);
    });
    Ok(switching_protocols())
}
