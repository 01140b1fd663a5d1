//! Read and settings routes of sandboxes: list, get, by-ip, patch, resize, ssh-pubkeys.

use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde::Deserialize;

use serde_json::json;

use super::model::{view_of, SandboxRecord, SandboxRef, Status};
use super::validate;
use crate::auth::Caller;
use crate::envelope::{ok, paginate, ApiError, JsonBody, PageQuery};
use crate::state::AppState;

#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    pub status: Option<String>,
    #[serde(flatten)]
    pub page: PageQuery,
}

pub async fn list_sandboxes(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<ListQuery>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let filter = match q.status.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        Some(raw) => Some(
            Status::parse(raw)
                .ok_or_else(|| ApiError::validation("status", format!("unknown status {raw:?}")))?,
        ),
        None => None,
    };
    let views: Vec<serde_json::Value> = state
        .sandboxes
        .of_tenant(&caller.tenant)
        .iter()
        .filter(|s| filter.is_none_or(|f| s.status() == f))
        .map(|s| s.view())
        .collect();
    paginate(views, &q.page)
}

pub async fn get_sandbox(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let sandbox = state.sandbox_for(&caller, &id)?;
    Ok(ok(sandbox.view()))
}

pub async fn get_sandbox_by_ip(
    State(state): State<AppState>,
    caller: Caller,
    Path(ip): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    if ip.parse::<std::net::Ipv4Addr>().is_err() {
        return Err(ApiError::validation(
            "ip",
            format!("invalid IPv4 address {ip:?}"),
        ));
    }
    let found = state
        .sandboxes
        .of_tenant(&caller.tenant)
        .into_iter()
        .rev()
        .find(|s| s.record().ip == ip)
        .ok_or_else(ApiError::not_found_sandbox)?;
    Ok(ok(found.view()))
}

#[derive(Debug, Default, Deserialize)]
pub struct PatchSandboxRequest {
    pub ingress_enabled: Option<bool>,
    pub auto_pause_after_seconds: Option<i64>,
    pub disable_auto_pause: Option<bool>,
}

pub async fn update_sandbox(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<PatchSandboxRequest>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let sandbox = state.sandbox_for(&caller, &id)?;
    let disable = req.disable_auto_pause.unwrap_or(false);
    if disable && req.auto_pause_after_seconds.is_some() {
        return Err(ApiError::validation(
            "auto_pause_after_seconds",
            "cannot be combined with disable_auto_pause",
        ));
    }
    let auto_pause = req
        .auto_pause_after_seconds
        .map(validate::auto_pause)
        .transpose()?;
    let mut r = sandbox.record();
    if r.status.is_terminal() || r.status == Status::Destroying {
        return Err(ApiError::conflict(format!(
            "sandbox is {}",
            r.status.as_str()
        )));
    }
    if let Some(ingress) = req.ingress_enabled {
        r.ingress_enabled = ingress;
    }
    if let Some(secs) = auto_pause {
        r.auto_pause_after_seconds = Some(secs);
        r.last_activity = std::time::Instant::now();
    }
    if disable {
        r.auto_pause_after_seconds = None;
    }
    Ok(ok(view_of(&sandbox.id, &r)))
}

/// Root disk sizes (MiB) a sandbox can grow to: 10, 20, 40, 80 and 100 GiB.
pub const RESIZE_SIZES_MIB: &[u64] = &[10_240, 20_480, 40_960, 81_920, 102_400];

#[derive(Debug, Default, Deserialize)]
pub struct ResizeRequest {
    pub disk_mib: Option<i64>,
}

pub async fn resize_sandbox(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<ResizeRequest>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let sandbox = state.sandbox_for(&caller, &id)?;
    let requested = req
        .disk_mib
        .ok_or_else(|| ApiError::validation("disk_mib", "disk_mib is required"))?;
    let mut r = sandbox.record();
    if r.status.is_terminal() || r.status == Status::Destroying {
        return Err(ApiError::conflict(format!(
            "sandbox is {}",
            r.status.as_str()
        )));
    }
    // The disk grows online, inside the running VM.
    if r.status != Status::Running {
        return Err(ApiError::not_running());
    }
    if requested <= r.disk_mib as i64 {
        return Err(ApiError::validation(
            "disk_mib",
            format!(
                "disk can only grow: requested {requested} MiB, current {} MiB",
                r.disk_mib
            ),
        ));
    }
    if !RESIZE_SIZES_MIB.contains(&(requested as u64)) {
        return Err(ApiError::validation(
            "disk_mib",
            format!("disk_mib must be one of {RESIZE_SIZES_MIB:?}"),
        ));
    }
    r.disk_mib = requested as u64;
    Ok(ok(json!({"id": sandbox.id, "disk_mib": r.disk_mib})))
}

#[derive(Debug, Default, Deserialize)]
pub struct SshKeysRequest {
    pub keys: Option<Vec<String>>,
}

pub async fn add_ssh_pubkeys(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<SshKeysRequest>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let sandbox = state.running_sandbox(&caller, &id)?;
    let keys = req.keys.unwrap_or_default();
    if keys.is_empty() {
        return Err(ApiError::validation("keys", "keys must not be empty"));
    }
    let keys: Vec<String> = keys
        .iter()
        .map(|k| validate::ssh_pubkey(k))
        .collect::<Result<_, _>>()?;
    let all = {
        let mut r = sandbox.record();
        for k in keys {
            if !r.ssh_pubkeys.contains(&k) {
                r.ssh_pubkeys.push(k);
            }
        }
        r.ssh_pubkeys.clone()
    };
    write_authorized_keys(&sandbox, &all);
    Ok(ok(json!({"count": all.len()})))
}

/// Adds the sandbox's keys to its `/root/.ssh/authorized_keys`: keys already there (same
/// type and blob, whatever the comment or options) are not added again, and every other
/// line of the file is kept.
pub fn write_authorized_keys(sandbox: &SandboxRef, keys: &[String]) {
    if keys.is_empty() {
        return;
    }
    // Through the sandbox's own view (as its root when it is isolated): the guest owns
    // /root and may have made .ssh a link, which resolves inside the sandbox, never on the
    // host.
    const FILE: &str = "/root/.ssh/authorized_keys";
    let fs = crate::guest_fs::GuestFs::new(sandbox.runtime());
    let write = || -> std::io::Result<()> {
        let mut body = match fs.read_head(FILE, 1 << 20)? {
            Some((head, _)) => String::from_utf8_lossy(&head).into_owned(),
            None => String::new(),
        };
        let missing: Vec<&String> = keys
            .iter()
            .filter(|key| !authorized_keys_lists(&body, key))
            .collect();
        if missing.is_empty() && !body.is_empty() {
            return Ok(());
        }
        if !body.is_empty() && !body.ends_with('\n') {
            body.push('\n');
        }
        for key in missing {
            body.push_str(key.trim());
            body.push('\n');
        }
        fs.create_dir_all("/root/.ssh")?;
        fs.write_file(FILE, body.as_bytes(), 0o600)
    };
    if let Err(e) = write() {
        tracing::warn!(sandbox = %sandbox.id, "cannot update authorized_keys: {e}");
    }
}

/// Whether the authorized_keys text `body` already lists `key` (an OpenSSH key line).
fn authorized_keys_lists(body: &str, key: &str) -> bool {
    let mut fields = key.split_whitespace();
    let (Some(kind), Some(blob)) = (fields.next(), fields.next()) else {
        return false;
    };
    match russh::keys::PublicKey::from_openssh(&format!("{kind} {blob}")) {
        Ok(parsed) => body
            .lines()
            .any(|line| crate::guest_sshd::line_allows(line, &parsed)),
        // Not a key we can parse: compare the text.
        Err(_) => body.lines().any(|line| {
            line.split_whitespace()
                .collect::<Vec<_>>()
                .windows(2)
                .any(|w| w[0] == kind && w[1] == blob)
        }),
    }
}

pub async fn get_egress(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let sandbox = state.sandbox_for(&caller, &id)?;
    let egress = sandbox.record().egress.clone();
    Ok(ok(json!({"id": sandbox.id, "egress": egress})))
}

#[derive(Debug, Default, Deserialize)]
pub struct SetEgressRequest {
    pub egress: Option<Vec<String>>,
}

pub async fn set_egress(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<SetEgressRequest>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let sandbox = state.sandbox_for(&caller, &id)?;
    let rules = validate::egress(&req.egress.unwrap_or_default())?;
    let mut r = sandbox.record();
    if r.status.is_terminal() || r.status == Status::Destroying {
        return Err(ApiError::conflict(format!(
            "sandbox is {}",
            r.status.as_str()
        )));
    }
    r.egress = rules.clone();
    Ok(ok(json!({"id": sandbox.id, "egress": rules})))
}

/// `BandwidthView` of a locked record.
pub fn bandwidth_view(id: &str, r: &SandboxRecord) -> serde_json::Value {
    let quota = r.bandwidth_quota_bytes;
    let used = r.bandwidth_used_bytes;
    let (remaining, capped) = if quota < 0 {
        (-1, false)
    } else {
        (quota - used, used >= quota)
    };
    json!({
        "id": id,
        "quota_bytes": quota,
        "used_bytes": used,
        "ingress_bytes": r.bandwidth_ingress_bytes,
        "remaining_bytes": remaining,
        "capped": capped,
    })
}

pub async fn get_bandwidth(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let sandbox = state.sandbox_for(&caller, &id)?;
    let r = sandbox.record();
    Ok(ok(bandwidth_view(&sandbox.id, &r)))
}

#[derive(Debug, Default, Deserialize)]
pub struct RechargeRequest {
    pub add_bytes: Option<i64>,
}

pub async fn recharge_bandwidth(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<RechargeRequest>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let sandbox = state.sandbox_for(&caller, &id)?;
    state.require_credit(&caller)?;
    let add = match req.add_bytes {
        Some(n) if n > 0 => n,
        _ => {
            return Err(ApiError::validation(
                "add_bytes",
                "add_bytes must be a positive integer",
            ))
        }
    };
    let mut r = sandbox.record();
    if r.status.is_terminal() || r.status == Status::Destroying {
        return Err(ApiError::conflict(format!(
            "sandbox is {}",
            r.status.as_str()
        )));
    }
    if r.bandwidth_quota_bytes >= 0 {
        r.bandwidth_quota_bytes = r.bandwidth_quota_bytes.saturating_add(add);
    }
    Ok(ok(bandwidth_view(&sandbox.id, &r)))
}
