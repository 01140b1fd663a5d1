//! OAuth token endpoint (`POST /oauth2/token`, refresh grant with rotation). Answers in
//! OAuth's own JSON format, not JSend.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::json;

use crate::auth::RefreshError;
use crate::operation::Operation;
use crate::state::AppState;

/// Not a control-plane operation (kept out of the operation table on purpose).
pub const OPERATIONS: &[Operation] = &[];

pub fn routes() -> Router<AppState> {
    Router::new().route("/oauth2/token", post(token))
}

fn oauth_error(code: &str, description: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": code, "error_description": description})),
    )
        .into_response()
}

/// `grant_type=refresh_token&refresh_token=…&client_id=…` (form or JSON).
pub async fn token(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.starts_with("application/json"))
        .unwrap_or(false);
    let params: HashMap<String, String> = if is_json {
        match serde_json::from_slice::<HashMap<String, serde_json::Value>>(&body) {
            Ok(map) => map
                .into_iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k, s.to_string())))
                .collect(),
            Err(_) => return oauth_error("invalid_request", "malformed JSON body"),
        }
    } else {
        form_urlencoded::parse(&body).into_owned().collect()
    };
    match params.get("grant_type").map(String::as_str) {
        Some("refresh_token") => {}
        Some(_) => return oauth_error("unsupported_grant_type", "only refresh_token is supported"),
        None => return oauth_error("invalid_request", "grant_type is required"),
    }
    let Some(refresh) = params.get("refresh_token").filter(|t| !t.is_empty()) else {
        return oauth_error("invalid_request", "refresh_token is required");
    };
    match state.tenants.refresh(refresh) {
        Ok(issued) => {
            state.stats.oauth_refreshed();
            Json(json!({
                "access_token": issued.access_token,
                "refresh_token": issued.refresh_token,
                "token_type": "Bearer",
                "expires_in": issued.expires_in,
            }))
            .into_response()
        }
        Err(RefreshError::Reused) => oauth_error(
            "invalid_grant",
            "refresh token was already used; the session is revoked",
        ),
        Err(RefreshError::Unknown) => {
            oauth_error("invalid_grant", "unknown or revoked refresh token")
        }
    }
}
