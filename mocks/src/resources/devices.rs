//! Devices and VPN sessions (E98–E107): WireGuard peers joining private networks.

use std::time::Instant;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::{delete, get, post, put};
use axum::Router;
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};
use time::OffsetDateTime;

use super::store::devices::{Attachment, DeviceRecord, Session};
use crate::auth::Caller;
use crate::clock::{now, rfc3339};
use crate::envelope::{ok, paginate, ApiError, JsonBody, PageQuery};
use crate::operation::{op, Operation};
use crate::state::AppState;

pub const OPERATIONS: &[Operation] = &[
    op(
        "registerDevice",
        "POST",
        "/v1/devices",
        "resources::devices::register_device",
    ),
    op(
        "listDevices",
        "GET",
        "/v1/devices",
        "resources::devices::list_devices",
    ),
    op(
        "getDevice",
        "GET",
        "/v1/devices/{device_id}",
        "resources::devices::get_device",
    ),
    op(
        "revokeDevice",
        "DELETE",
        "/v1/devices/{device_id}",
        "resources::devices::revoke_device",
    ),
    op(
        "attachDeviceNetwork",
        "POST",
        "/v1/devices/{device_id}/networks",
        "resources::devices::attach_device_network",
    ),
    op(
        "listDeviceNetworks",
        "GET",
        "/v1/devices/{device_id}/networks",
        "resources::devices::list_device_networks",
    ),
    op(
        "detachDeviceNetwork",
        "DELETE",
        "/v1/devices/{device_id}/networks/{network}",
        "resources::devices::detach_device_network",
    ),
    op(
        "openDeviceSession",
        "POST",
        "/v1/devices/{device_id}/sessions",
        "resources::devices::open_device_session",
    ),
    op(
        "renewDeviceSession",
        "PUT",
        "/v1/devices/{device_id}/sessions/{session_id}",
        "resources::devices::renew_device_session",
    ),
    op(
        "closeDeviceSession",
        "DELETE",
        "/v1/devices/{device_id}/sessions/{session_id}",
        "resources::devices::close_device_session",
    ),
];

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/devices", post(register_device).get(list_devices))
        .route(
            "/v1/devices/{device_id}",
            get(get_device).delete(revoke_device),
        )
        .route(
            "/v1/devices/{device_id}/networks",
            post(attach_device_network).get(list_device_networks),
        )
        .route(
            "/v1/devices/{device_id}/networks/{network}",
            delete(detach_device_network),
        )
        .route(
            "/v1/devices/{device_id}/sessions",
            post(open_device_session),
        )
        .route(
            "/v1/devices/{device_id}/sessions/{session_id}",
            put(renew_device_session).delete(close_device_session),
        )
}

fn view(d: &DeviceRecord) -> Value {
    let mut v = json!({
        "id": d.id,
        "name": d.name,
        "client_ip": d.client_ip,
        "pubkey": d.pubkey,
        "created_at": rfc3339(d.created_at),
    });
    if let Some(h) = &d.hostname {
        v["hostname"] = json!(h);
    }
    if let Some(o) = &d.os {
        v["os"] = json!(o);
    }
    if let Some(t) = d.last_seen_at {
        v["last_seen_at"] = json!(rfc3339(t));
    }
    v
}

/// A WireGuard public key: standard base64 of exactly 32 bytes.
fn valid_pubkey(raw: &str) -> bool {
    base64::engine::general_purpose::STANDARD
        .decode(raw)
        .map(|b| b.len() == 32)
        .unwrap_or(false)
}

#[derive(Debug, Default, Deserialize)]
pub struct RegisterDeviceRequest {
    pub name: Option<String>,
    pub pubkey: Option<String>,
    pub hostname: Option<String>,
    pub os: Option<String>,
}

pub async fn register_device(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(req): JsonBody<RegisterDeviceRequest>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let name = req.name.as_deref().unwrap_or("").trim().to_string();
    if name.is_empty() {
        return Err(ApiError::validation("name", "name is required"));
    }
    let pubkey = req.pubkey.as_deref().unwrap_or("").trim().to_string();
    if !valid_pubkey(&pubkey) {
        return Err(ApiError::validation(
            "pubkey",
            "pubkey must be the base64 encoding of 32 bytes",
        ));
    }
    let devices = &state.resources.devices;
    let client_ip = devices.allocate_ip();
    let mut rows = devices.rows.write().unwrap_or_else(|e| e.into_inner());
    if rows
        .iter()
        .any(|d| d.tenant == caller.tenant && d.pubkey == pubkey)
    {
        return Err(ApiError::conflict_on(
            "pubkey",
            "public key already registered",
        ));
    }
    let record = DeviceRecord {
        id: crate::ids::new_id("dev_"),
        tenant: caller.tenant.clone(),
        name,
        client_ip,
        pubkey,
        hostname: req.hostname.filter(|h| !h.is_empty()),
        os: req.os.filter(|o| !o.is_empty()),
        created_at: now(),
        last_seen_at: None,
        networks: Vec::new(),
        sessions: Vec::new(),
    };
    rows.push(record.clone());
    Ok(ok(view(&record)))
}

pub async fn list_devices(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<PageQuery>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let rows = state
        .resources
        .devices
        .rows
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    paginate(
        rows.iter()
            .filter(|d| d.tenant == caller.tenant)
            .map(view)
            .collect(),
        &q,
    )
}

pub async fn get_device(
    State(state): State<AppState>,
    caller: Caller,
    Path(device_id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let v = state
        .resources
        .devices
        .with_device(&caller.tenant, &device_id, |d| Ok(view(d)))?;
    Ok(ok(v))
}

pub async fn revoke_device(
    State(state): State<AppState>,
    caller: Caller,
    Path(device_id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let mut rows = state
        .resources
        .devices
        .rows
        .write()
        .unwrap_or_else(|e| e.into_inner());
    let before = rows.len();
    rows.retain(|d| !(d.tenant == caller.tenant && d.id == device_id));
    if rows.len() == before {
        return Err(ApiError::not_found("device", "device not found"));
    }
    Ok(ok(json!({"ok": true})))
}

#[derive(Debug, Default, Deserialize)]
pub struct AttachDeviceNetworkRequest {
    pub network_id: Option<String>,
}

pub async fn attach_device_network(
    State(state): State<AppState>,
    caller: Caller,
    Path(device_id): Path<String>,
    JsonBody(req): JsonBody<AttachDeviceNetworkRequest>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let wanted = req.network_id.as_deref().unwrap_or("").trim();
    if wanted.is_empty() {
        return Err(ApiError::validation("network_id", "network_id is required"));
    }
    let network_id = state
        .resources
        .networks
        .resolve(&caller.tenant, wanted)
        .ok_or_else(|| ApiError::not_found("network", "network not found"))?;
    state
        .resources
        .devices
        .with_device(&caller.tenant, &device_id, |d| {
            if !d.networks.iter().any(|a| a.network_id == network_id) {
                d.networks.push(Attachment {
                    network_id,
                    attached_at: now(),
                });
            }
            Ok(())
        })?;
    Ok(ok(json!({"ok": true})))
}

pub async fn list_device_networks(
    State(state): State<AppState>,
    caller: Caller,
    Path(device_id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let attachments = state
        .resources
        .devices
        .with_device(&caller.tenant, &device_id, |d| Ok(d.networks.clone()))?;
    let items: Vec<Value> = attachments
        .iter()
        .map(|a| {
            let name = state.resources.networks.lookup(&caller.tenant, &a.network_id).map(|(_, n)| n);
            json!({"network_id": a.network_id, "network_name": name.unwrap_or_default(), "attached_at": rfc3339(a.attached_at)})
        })
        .collect();
    Ok(ok(items))
}

pub async fn detach_device_network(
    State(state): State<AppState>,
    caller: Caller,
    Path((device_id, network)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let network_id = state
        .resources
        .networks
        .resolve(&caller.tenant, &network)
        .unwrap_or(network);
    state
        .resources
        .devices
        .with_device(&caller.tenant, &device_id, |d| {
            let before = d.networks.len();
            d.networks.retain(|a| a.network_id != network_id);
            if d.networks.len() == before {
                return Err(ApiError::not_found(
                    "network",
                    "device is not attached to this network",
                ));
            }
            Ok(())
        })?;
    Ok(ok(json!({"ok": true})))
}

/// The wg-quick configuration of a session, without the `PrivateKey` line: the device
/// address, the relay peer, and routes to the private IPs of the attached networks.
fn client_config(state: &AppState, d: &DeviceRecord, relay_pubkey: &str) -> String {
    let mut allowed: Vec<String> = vec!["100.64.0.1/32".to_string()];
    for a in &d.networks {
        for s in state.sandboxes.of_tenant(&d.tenant) {
            let r = s.record();
            if !r.status.is_terminal() && r.networks.contains(&a.network_id) {
                let route = format!("{}/32", r.ip);
                if !allowed.contains(&route) {
                    allowed.push(route);
                }
            }
        }
    }
    format!(
        "[Interface]\nAddress = {}/32\nDNS = 100.64.0.1\n\n[Peer]\nPublicKey = {}\nEndpoint = 127.0.0.1:51820\nAllowedIPs = {}\nPersistentKeepalive = 25\n",
        d.client_ip,
        relay_pubkey,
        allowed.join(", ")
    )
}

fn session_ttl(state: &AppState) -> (Instant, OffsetDateTime) {
    let ttl = state.config.vpn_session_ttl;
    (Instant::now() + ttl, now() + ttl)
}

pub async fn open_device_session(
    State(state): State<AppState>,
    caller: Caller,
    Path(device_id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let devices = &state.resources.devices;
    let relay = devices.relay_pubkey.clone();
    let v = devices.with_device(&caller.tenant, &device_id, |d| {
        d.sessions.retain(|s| s.expires > Instant::now());
        let (expires, expires_at) = session_ttl(&state);
        let session = Session {
            id: crate::ids::new_id("vpn_"),
            expires,
            expires_at,
        };
        d.sessions.push(session.clone());
        d.last_seen_at = Some(now());
        Ok(json!({
            "session_id": session.id,
            "device_id": d.id,
            "relay_host_id": "relay-local",
            "client_config": client_config(&state, d, &relay),
            "expires_at": rfc3339(session.expires_at),
        }))
    })?;
    Ok(ok(v))
}

fn session_gone() -> ApiError {
    ApiError::not_found("session", "session not found or expired")
}

pub async fn renew_device_session(
    State(state): State<AppState>,
    caller: Caller,
    Path((device_id, session_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    state
        .resources
        .devices
        .with_device(&caller.tenant, &device_id, |d| {
            d.sessions.retain(|s| s.expires > Instant::now());
            let (expires, expires_at) = session_ttl(&state);
            let s = d
                .sessions
                .iter_mut()
                .find(|s| s.id == session_id)
                .ok_or_else(session_gone)?;
            s.expires = expires;
            s.expires_at = expires_at;
            d.last_seen_at = Some(now());
            Ok(())
        })?;
    Ok(ok(json!({"ok": true})))
}

pub async fn close_device_session(
    State(state): State<AppState>,
    caller: Caller,
    Path((device_id, session_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    state
        .resources
        .devices
        .with_device(&caller.tenant, &device_id, |d| {
            d.sessions.retain(|s| s.expires > Instant::now());
            let before = d.sessions.len();
            d.sessions.retain(|s| s.id != session_id);
            if d.sessions.len() == before {
                return Err(session_gone());
            }
            Ok(())
        })?;
    Ok(ok(json!({"ok": true})))
}
