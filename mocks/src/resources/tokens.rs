//! Delegated sandbox access tokens (E60–E63): one `skp_sb_…` token per sandbox that
//! authorizes the runtime routes of that sandbox only.

use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};

use crate::auth::{Caller, DelegatedToken};
use crate::clock::now_rfc3339;
use crate::envelope::{ok, ApiError};
use crate::operation::{op, Operation};
use crate::state::AppState;

pub const OPERATIONS: &[Operation] = &[
    op(
        "createAccessToken",
        "POST",
        "/v1/sandboxes/{id}/access-token",
        "resources::tokens::create_access_token",
    ),
    op(
        "getAccessToken",
        "GET",
        "/v1/sandboxes/{id}/access-token",
        "resources::tokens::get_access_token",
    ),
    op(
        "rotateAccessToken",
        "POST",
        "/v1/sandboxes/{id}/access-token/rotate",
        "resources::tokens::rotate_access_token",
    ),
    op(
        "revokeAccessToken",
        "DELETE",
        "/v1/sandboxes/{id}/access-token",
        "resources::tokens::revoke_access_token",
    ),
];

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/sandboxes/{id}/access-token",
            post(create_access_token)
                .get(get_access_token)
                .delete(revoke_access_token),
        )
        .route(
            "/v1/sandboxes/{id}/access-token/rotate",
            post(rotate_access_token),
        )
}

fn new_token() -> String {
    format!("skp_sb_{}", crate::ids::random_token(40))
}

fn created_view(t: &DelegatedToken) -> Value {
    let mut v = json!({"token": t.token, "enabled": t.enabled, "created_at": t.created_at});
    if let Some(r) = &t.rotated_at {
        v["rotated_at"] = json!(r);
    }
    v
}

fn metadata_view(t: Option<&DelegatedToken>) -> Value {
    match t {
        None => json!({"enabled": false}),
        Some(t) => {
            let tail: String = t
                .token
                .chars()
                .rev()
                .take(4)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let mut v = json!({"enabled": t.enabled, "token_hint": format!("skp_sb_…{tail}"), "created_at": t.created_at});
            if let Some(r) = &t.rotated_at {
                v["rotated_at"] = json!(r);
            }
            v
        }
    }
}

pub async fn create_access_token(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let sandbox = state.sandbox_for(&caller, &id)?;
    if sandbox.status().is_terminal() {
        return Err(ApiError::conflict(format!(
            "sandbox is {}",
            sandbox.status().as_str()
        )));
    }
    if state.tenants.delegated_of(&id).is_some_and(|t| t.enabled) {
        return Err(ApiError::conflict_on(
            "token",
            "access token already exists",
        ));
    }
    let token = DelegatedToken {
        token: new_token(),
        sandbox_id: sandbox.id.clone(),
        tenant: sandbox.tenant.clone(),
        enabled: true,
        created_at: now_rfc3339(),
        rotated_at: None,
    };
    state.tenants.put_delegated(token.clone());
    Ok(ok(created_view(&token)))
}

pub async fn get_access_token(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    state.sandbox_for(&caller, &id)?;
    Ok(ok(metadata_view(state.tenants.delegated_of(&id).as_ref())))
}

pub async fn rotate_access_token(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    state.sandbox_for(&caller, &id)?;
    let mut token = state
        .tenants
        .delegated_of(&id)
        .filter(|t| t.enabled)
        .ok_or_else(|| ApiError::not_found("token", "access token not found"))?;
    token.token = new_token();
    token.rotated_at = Some(now_rfc3339());
    state.tenants.put_delegated(token.clone());
    Ok(ok(created_view(&token)))
}

pub async fn revoke_access_token(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    state.sandbox_for(&caller, &id)?;
    let token = state.tenants.disable_delegated(&id);
    Ok(ok(metadata_view(token.as_ref())))
}
