//! Private networks (E38–E43): tenant-scoped, members are sandboxes, addressed by id or name.

use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::{delete, get, post};
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};

use super::store::networks::NetworkRecord;
use crate::auth::{Caller, TenantId};
use crate::clock::{now, rfc3339};
use crate::envelope::{ok, paginate, ApiError, JsonBody, PageQuery};
use crate::operation::{op, Operation};
use crate::sandbox::Status;
use crate::state::AppState;

pub const OPERATIONS: &[Operation] = &[
    op(
        "listNetworks",
        "GET",
        "/v1/networks",
        "resources::networks::list_networks",
    ),
    op(
        "createNetwork",
        "POST",
        "/v1/networks",
        "resources::networks::create_network",
    ),
    op(
        "getNetwork",
        "GET",
        "/v1/networks/{network}",
        "resources::networks::get_network",
    ),
    op(
        "deleteNetwork",
        "DELETE",
        "/v1/networks/{network}",
        "resources::networks::delete_network",
    ),
    op(
        "attachNetwork",
        "POST",
        "/v1/sandboxes/{id}/networks",
        "resources::networks::attach_network",
    ),
    op(
        "detachNetwork",
        "DELETE",
        "/v1/sandboxes/{id}/networks/{network}",
        "resources::networks::detach_network",
    ),
];

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/networks", get(list_networks).post(create_network))
        .route(
            "/v1/networks/{network}",
            get(get_network).delete(delete_network),
        )
        .route("/v1/sandboxes/{id}/networks", post(attach_network))
        .route(
            "/v1/sandboxes/{id}/networks/{network}",
            delete(detach_network),
        )
}

fn not_found() -> ApiError {
    ApiError::not_found("network", "network not found")
}

/// Live sandboxes that are members of `network_id`.
fn members(state: &AppState, tenant: &TenantId, network_id: &str) -> Vec<Value> {
    state
        .sandboxes
        .of_tenant(tenant)
        .iter()
        .filter_map(|s| {
            let r = s.record();
            (!r.status.is_terminal() && r.networks.iter().any(|n| n == network_id)).then(|| {
                json!({"sandbox_id": s.id, "status": r.status.as_str(), "ip": r.ip, "name": r.name})
            })
        })
        .collect()
}

fn view(state: &AppState, n: &NetworkRecord, with_members: bool) -> Value {
    let members = members(state, &n.tenant, &n.id);
    let mut v = json!({
        "id": n.id,
        "name": n.name,
        "created_at": rfc3339(n.created_at),
        "member_count": members.len(),
    });
    if with_members {
        v["members"] = Value::Array(members);
    }
    v
}

pub async fn list_networks(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<PageQuery>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let items: Vec<Value> = state
        .resources
        .networks
        .of_tenant(&caller.tenant)
        .iter()
        .map(|n| view(&state, n, false))
        .collect();
    paginate(items, &q)
}

#[derive(Debug, Default, Deserialize)]
pub struct CreateNetworkRequest {
    pub name: Option<String>,
}

pub async fn create_network(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(req): JsonBody<CreateNetworkRequest>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    state.require_credit(&caller)?;
    let name = req.name.as_deref().map(str::trim).unwrap_or("");
    if name.is_empty() {
        return Err(ApiError::validation("name", "name is required"));
    }
    crate::sandbox::validate::sandbox_name(name).map_err(|_| {
        ApiError::validation(
            "name",
            "name must be a DNS label: lowercase letters, digits and '-'",
        )
    })?;
    let record = {
        let mut rows = state
            .resources
            .networks
            .rows
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if rows
            .iter()
            .any(|n| n.tenant == caller.tenant && n.name == name)
        {
            return Err(ApiError::conflict_on("name", "name already in use"));
        }
        let record = NetworkRecord {
            id: crate::ids::new_id("net-"),
            tenant: caller.tenant.clone(),
            name: name.to_string(),
            created_at: now(),
        };
        rows.push(record.clone());
        record
    };
    Ok(ok(view(&state, &record, false)))
}

pub async fn get_network(
    State(state): State<AppState>,
    caller: Caller,
    Path(network): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let n = state
        .resources
        .networks
        .find(&caller.tenant, &network)
        .ok_or_else(not_found)?;
    Ok(ok(view(&state, &n, true)))
}

pub async fn delete_network(
    State(state): State<AppState>,
    caller: Caller,
    Path(network): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let n = state
        .resources
        .networks
        .find(&caller.tenant, &network)
        .ok_or_else(not_found)?;
    if !members(&state, &caller.tenant, &n.id).is_empty() {
        return Err(ApiError::conflict_on(
            "network",
            "network has active members",
        ));
    }
    state
        .resources
        .networks
        .rows
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|r| r.id != n.id);
    state.resources.devices.forget_network(&n.id);
    Ok(ok(json!({"ok": true})))
}

#[derive(Debug, Default, Deserialize)]
pub struct AttachNetworkRequest {
    pub id: Option<String>,
}

pub async fn attach_network(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<AttachNetworkRequest>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let sandbox = state.sandbox_for(&caller, &id)?;
    let wanted = req.id.as_deref().map(str::trim).unwrap_or("");
    if wanted.is_empty() {
        return Err(ApiError::validation("id", "id is required"));
    }
    let network_id = state
        .resources
        .networks
        .resolve(&caller.tenant, wanted)
        .ok_or_else(not_found)?;
    let mut r = sandbox.record();
    if r.status.is_terminal() || r.status == Status::Destroying {
        return Err(ApiError::conflict(format!(
            "sandbox is {}",
            r.status.as_str()
        )));
    }
    if !r.networks.contains(&network_id) {
        r.networks.push(network_id);
    }
    Ok(ok(json!({"ok": true})))
}

pub async fn detach_network(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, network)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let sandbox = state.sandbox_for(&caller, &id)?;
    let network_id = state
        .resources
        .networks
        .resolve(&caller.tenant, &network)
        .ok_or_else(not_found)?;
    let mut r = sandbox.record();
    let before = r.networks.len();
    r.networks.retain(|n| n != &network_id);
    if r.networks.len() == before {
        return Err(ApiError::not_found(
            "network",
            "sandbox is not a member of this network",
        ));
    }
    Ok(ok(json!({"ok": true})))
}
