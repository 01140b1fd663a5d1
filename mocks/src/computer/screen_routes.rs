//! E92–E97: the screens sub-resource (extra X displays) and noVNC connection links.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};

use super::access;
use super::model::{check_screen_dim, parse_screen_id, Connection, Screen, DEFAULT_SCREEN_SIZE};
use crate::auth::Caller;
use crate::clock;
use crate::envelope::{ok, ApiError, JsonBody};
use crate::state::AppState;

/// How long a minted noVNC link stays valid.
pub const CONNECTION_TTL: Duration = Duration::from_secs(600);
/// websockify's endpoint on the noVNC port.
pub const WEBSOCKIFY_PATH: &str = "/websockify";
/// Length of a connection token (`[a-z0-9]`, ~206 bits).
const TOKEN_LEN: usize = 40;

/// `ComputerScreen`.
fn screen_view(s: &Screen) -> Value {
    json!({
        "screen_id": s.id(),
        "display": s.display(),
        "width": s.width,
        "height": s.height,
        "vnc_port": s.vnc_port(),
        "novnc_port": s.novnc_port(),
    })
}

pub async fn list_screens(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let access = access::open(&s, &c, &id)?;
    let desktop = access.lock();
    let views: Vec<Value> = desktop.screens.values().map(screen_view).collect();
    Ok(ok(views))
}

#[derive(Debug, Default, Deserialize)]
pub struct ScreenSizeBody {
    pub width: Option<i64>,
    pub height: Option<i64>,
}

pub async fn create_screen(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ScreenSizeBody>,
) -> Result<Response, ApiError> {
    let access = access::open(&s, &c, &id)?;
    let mut desktop = access.lock();
    // An omitted dimension copies screen-0's (the primary always exists).
    let (w0, h0) = desktop
        .screen(0)
        .map(|s0| (s0.width, s0.height))
        .unwrap_or(DEFAULT_SCREEN_SIZE);
    let width = check_screen_dim("width", body.width, w0)?;
    let height = check_screen_dim("height", body.height, h0)?;
    let screen = desktop.create_screen(width, height)?;
    Ok(ok(screen_view(screen)))
}

pub async fn get_screen(
    State(s): State<AppState>,
    c: Caller,
    Path((id, screen_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let access = access::open(&s, &c, &id)?;
    let n = parse_screen_id(&screen_id)?;
    let desktop = access.lock();
    Ok(ok(screen_view(desktop.screen(n)?)))
}

pub async fn delete_screen(
    State(s): State<AppState>,
    c: Caller,
    Path((id, screen_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let access = access::open(&s, &c, &id)?;
    let n = parse_screen_id(&screen_id)?;
    access.lock().delete_screen(n)?;
    Ok(ok(json!({"ok": true})))
}

pub async fn resize_screen(
    State(s): State<AppState>,
    c: Caller,
    Path((id, screen_id)): Path<(String, String)>,
    JsonBody(body): JsonBody<ScreenSizeBody>,
) -> Result<Response, ApiError> {
    let access = access::open(&s, &c, &id)?;
    let n = parse_screen_id(&screen_id)?;
    let mut desktop = access.lock();
    let screen = desktop.screen_mut(n)?;
    let width = check_screen_dim("width", body.width, screen.width)?;
    let height = check_screen_dim("height", body.height, screen.height)?;
    screen.set_size(width, height);
    Ok(ok(screen_view(screen)))
}

/// Mints a noVNC link (only with ingress on); the newest link replaces the previous one.
pub async fn connect_screen(
    State(s): State<AppState>,
    c: Caller,
    Path((id, screen_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let access = access::open(&s, &c, &id)?;
    let n = parse_screen_id(&screen_id)?;
    if !access.sandbox.ingress_enabled() {
        return Err(ApiError::fail(
            StatusCode::CONFLICT,
            json!({"ingress": "ingress is not enabled"}),
        ));
    }
    let mut desktop = access.lock();
    let screen = desktop.screen_mut(n)?;
    let token = crate::ids::random_token(TOKEN_LEN);
    let expires_at = clock::now() + CONNECTION_TTL;
    let port = screen.novnc_port();
    let base =
        crate::sandbox::ingress_template(&access.sandbox.id).replace("<port>", &port.to_string());
    let ws_path = WEBSOCKIFY_PATH.trim_start_matches('/');
    let url =
        format!("{base}/vnc.html?autoconnect=true&resize=remote&path={ws_path}%3Ftoken%3D{token}");
    screen.connection = Some(Connection {
        token: token.clone(),
        expires_at,
    });
    Ok(ok(json!({
        "screen_id": screen.id(),
        "port": port,
        "path": WEBSOCKIFY_PATH,
        "token": token,
        "expires_at": clock::rfc3339(expires_at),
        "url": url,
    })))
}
