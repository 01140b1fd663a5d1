//! `/_mock/sandboxes/{id}/guest-sshd` routes (emulator control API): the embedded
//! server's state, and restarting it.

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::state::AppState;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/_mock/sandboxes/{id}/guest-sshd", get(show))
        .route("/_mock/sandboxes/{id}/guest-sshd/restart", post(restart))
}

fn not_found(what: &str) -> Response {
    (StatusCode::NOT_FOUND, Json(json!({"error": what}))).into_response()
}

fn key_line(key: &russh::keys::PublicKey) -> String {
    key.to_openssh().unwrap_or_default()
}

async fn show(State(state): State<AppState>, UrlPath(id): UrlPath<String>) -> Response {
    if state.sandboxes.get(&id).is_none() {
        return not_found("sandbox not found");
    }
    let mode = format!("{:?}", state.guest_sshd.mode()).to_ascii_lowercase();
    match state.guest_sshd.server(&id) {
        Some(server) => Json(json!({
            "mode": mode,
            "listening": server.is_running(),
            "host_key": key_line(&server.host_key()),
        }))
        .into_response(),
        None => Json(json!({"mode": mode, "listening": false, "host_key": null})).into_response(),
    }
}

#[derive(Debug, Default, Deserialize)]
struct RestartRequest {
    #[serde(default)]
    new_host_key: bool,
}

async fn restart(
    State(state): State<AppState>,
    UrlPath(id): UrlPath<String>,
    body: axum::body::Bytes,
) -> Response {
    let req: RestartRequest = if body.iter().all(u8::is_ascii_whitespace) {
        RestartRequest::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(req) => req,
            Err(err) => {
                return (
                    StatusCode::BAD_REQUEST,
                    Json(json!({"error": format!("invalid JSON: {err}")})),
                )
                    .into_response()
            }
        }
    };
    let Some(server) = state.guest_sshd.server(&id) else {
        return not_found("no embedded sshd runs in this sandbox");
    };
    let key = server.restart(req.new_host_key);
    Json(json!({"host_key": key_line(&key)})).into_response()
}
