//! `/_mock/*`: the emulator's own control API (plain JSON, never subject to faults or
//! stats). Every route needs the emulator's API key (the first tenant's key, printed in the
//! ready line) in `X-Api-Key`: anyone else on the machine gets 401, so no route hands out
//! a credential or changes the emulator for an anonymous caller.

use std::time::Duration;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::sandbox::{apply_status, Status};
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/_mock/stats", get(get_stats).delete(reset_stats))
        .route("/_mock/isolation", get(get_isolation))
        .route(
            "/_mock/faults",
            get(list_faults).post(add_fault).delete(clear_faults),
        )
        .route("/_mock/tenants", post(add_tenant))
        .route("/_mock/oauth/sessions", post(open_oauth_session))
        .route("/_mock/sandboxes/{id}/bandwidth", post(set_bandwidth_usage))
        .route("/_mock/sandboxes/{id}/status", post(force_status))
}

/// Lets a `/_mock` request through only with the emulator's API key in `X-Api-Key`.
pub async fn require_key(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    // What the emulator isolates is no secret: any account's key may read it (a `cos mcp` signed
    // in as a second tenant asks it too). Everything else needs the emulator's own key.
    if req.uri().path() == "/_mock/isolation"
        && presented.is_some_and(|p| state.tenants.tenant_for_key(p).is_some())
    {
        return next.run(req).await;
    }
    let expected = state.tenants.first_key();
    match (presented, expected) {
        (Some(p), Some(k)) if constant_time_eq(p.as_bytes(), k.as_bytes()) => next.run(req).await,
        _ => (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "the emulator's /_mock routes need its API key in X-Api-Key (see the ready line)"})),
        )
            .into_response(),
    }
}

/// Equality whose time does not depend on where the inputs differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn bad_request(msg: impl Into<String>) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": msg.into()}))).into_response()
}

/// Parses an optional JSON body (empty → default).
fn body_or_default<T: for<'de> Deserialize<'de> + Default>(body: &[u8]) -> Result<T, String> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| format!("invalid JSON: {e}"))
}

pub async fn get_stats(State(state): State<AppState>) -> Json<Value> {
    let snap = state.stats.snapshot();
    Json(json!({
        "requests": snap.requests,
        "handled": snap.handled,
        "faults_injected": snap.faults_injected,
        "live_sandboxes": state.sandboxes.live_count(),
        "live_processes": state.processes.live_count(),
        "sandboxes_created": snap.sandboxes_created,
        "oauth_refreshes": snap.oauth_refreshes,
    }))
}

/// What the emulator isolates (the ready line's `"isolation"` object).
pub async fn get_isolation(
    State(state): State<AppState>,
) -> Json<crate::isolation::IsolationReport> {
    Json(state.isolation.report().clone())
}

pub async fn reset_stats(State(state): State<AppState>) -> Json<Value> {
    state.stats.reset();
    Json(json!({"ok": true}))
}

pub async fn list_faults(State(state): State<AppState>) -> Json<Value> {
    Json(json!({"faults": state.faults.list().iter().map(|r| json!(**r)).collect::<Vec<_>>()}))
}

#[derive(Debug, Default, Deserialize)]
struct FaultBody {
    rule: Option<String>,
}

pub async fn add_fault(State(state): State<AppState>, body: axum::body::Bytes) -> Response {
    let req: FaultBody = match body_or_default(&body) {
        Ok(r) => r,
        Err(msg) => return bad_request(msg),
    };
    let Some(rule) = req.rule.filter(|r| !r.trim().is_empty()) else {
        return bad_request("rule is required");
    };
    match state.faults.add(&rule) {
        Ok(parsed) => Json(json!(*parsed)).into_response(),
        Err(e) => bad_request(e),
    }
}

pub async fn clear_faults(State(state): State<AppState>) -> Json<Value> {
    state.faults.clear();
    Json(json!({"ok": true}))
}

#[derive(Debug, Default, Deserialize)]
struct TenantBody {
    credit: Option<bool>,
    api_key: Option<String>,
}

/// A new tenant: `{"credit": false}` makes cost-incurring routes answer 402.
pub async fn add_tenant(State(state): State<AppState>, body: axum::body::Bytes) -> Response {
    let req: TenantBody = match body_or_default(&body) {
        Ok(r) => r,
        Err(msg) => return bad_request(msg),
    };
    let key = match req.api_key.filter(|k| !k.is_empty()) {
        Some(k) if state.tenants.tenant_for_key(&k).is_some() => {
            return bad_request("api_key already in use")
        }
        Some(k) => k,
        None => format!("skp_{}", crate::ids::random_token(40)),
    };
    let tenant = state.tenants.add(key.clone(), req.credit.unwrap_or(true));
    Json(json!({"api_key": key, "user_id": tenant.0})).into_response()
}

#[derive(Debug, Default, Deserialize)]
struct OAuthBody {
    api_key: Option<String>,
    expires_in: Option<u64>,
}

pub async fn open_oauth_session(
    State(state): State<AppState>,
    body: axum::body::Bytes,
) -> Response {
    let req: OAuthBody = match body_or_default(&body) {
        Ok(r) => r,
        Err(msg) => return bad_request(msg),
    };
    let key = match req.api_key.or_else(|| state.tenants.first_key()) {
        Some(k) => k,
        None => return bad_request("no tenant"),
    };
    let Some(tenant) = state.tenants.tenant_for_key(&key) else {
        return bad_request("unknown api_key");
    };
    let lifetime = Duration::from_secs(req.expires_in.unwrap_or(3600));
    let issued = state.tenants.open_oauth_session(tenant, lifetime);
    Json(json!({
        "access_token": issued.access_token,
        "refresh_token": issued.refresh_token,
        "expires_in": issued.expires_in,
        "token_endpoint": format!("{}/oauth2/token", state.base_url()),
    }))
    .into_response()
}

#[derive(Debug, Default, Deserialize)]
struct BandwidthUsageBody {
    used_bytes: Option<i64>,
    ingress_bytes: Option<i64>,
}

/// Test hook: sets a sandbox's metered egress/ingress byte counters.
pub async fn set_bandwidth_usage(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let req: BandwidthUsageBody = match body_or_default(&body) {
        Ok(r) => r,
        Err(msg) => return bad_request(msg),
    };
    let Some(sandbox) = state.sandboxes.get(&id) else {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"error": "sandbox not found"})),
        )
            .into_response();
    };
    let mut r = sandbox.record();
    if let Some(used) = req.used_bytes {
        r.bandwidth_used_bytes = used.max(0);
    }
    if let Some(ingress) = req.ingress_bytes {
        r.bandwidth_ingress_bytes = ingress.max(0);
    }
    Json(crate::sandbox::handlers::bandwidth_view(&sandbox.id, &r)).into_response()
}

#[derive(Debug, Default, Deserialize)]
struct StatusBody {
    status: Option<String>,
}

/// Test hook: forces a sandbox into `error` or `failed` (faults the real service can hit).
pub async fn force_status(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let req: StatusBody = match body_or_default(&body) {
        Ok(r) => r,
        Err(msg) => return bad_request(msg),
    };
    let Some(sandbox) = state.sandboxes.get(&id) else {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"error": "sandbox not found"})),
        )
            .into_response();
    };
    let target = match req.status.as_deref().and_then(Status::parse) {
        Some(s @ (Status::Error | Status::Failed)) => s,
        _ => return bad_request("status must be \"error\" or \"failed\""),
    };
    if target == Status::Error {
        sandbox.runtime().freeze();
    } else {
        state.processes.kill_sandbox(&sandbox.id);
        sandbox.runtime().kill_all();
    }
    let mut r = sandbox.record();
    if r.status.is_terminal() {
        return bad_request("sandbox is already terminal");
    }
    apply_status(&mut r, target);
    Json(crate::sandbox::model::view_of(&sandbox.id, &r)).into_response()
}
