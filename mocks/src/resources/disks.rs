//! S3-backed disks (E44–E51). The emulator stores a bucket's objects in a directory of
//! the state dir (one per endpoint + bucket), validates configs instead of contacting
//! the bucket, never returns credentials, and hot-mounts disks into sandboxes.

use std::path::PathBuf;
use std::sync::OnceLock;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::{delete, get};
use axum::Router;
use regex::Regex;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::store::disks::{DiskConfig, DiskCredentials, DiskRecord};
use crate::auth::Caller;
use crate::clock::{now, rfc3339};
use crate::envelope::{ok, paginate, ApiError, JsonBody, PageQuery};
use crate::operation::{op, Operation};
use crate::sandbox::{DiskMount, SandboxRef};
use crate::state::AppState;

pub const OPERATIONS: &[Operation] = &[
    op(
        "listDisks",
        "GET",
        "/v1/disks",
        "resources::disks::list_disks",
    ),
    op(
        "createDisk",
        "POST",
        "/v1/disks",
        "resources::disks::create_disk",
    ),
    op(
        "getDisk",
        "GET",
        "/v1/disks/{disk}",
        "resources::disks::get_disk",
    ),
    op(
        "updateDiskCredentials",
        "PATCH",
        "/v1/disks/{disk}",
        "resources::disks::update_disk_credentials",
    ),
    op(
        "deleteDisk",
        "DELETE",
        "/v1/disks/{disk}",
        "resources::disks::delete_disk",
    ),
    op(
        "listSandboxDisks",
        "GET",
        "/v1/sandboxes/{id}/disks",
        "resources::disks::list_sandbox_disks",
    ),
    op(
        "attachDisk",
        "POST",
        "/v1/sandboxes/{id}/disks",
        "resources::disks::attach_disk",
    ),
    op(
        "detachDisk",
        "DELETE",
        "/v1/sandboxes/{id}/disks/{disk_id}",
        "resources::disks::detach_disk",
    ),
];

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/disks", get(list_disks).post(create_disk))
        .route(
            "/v1/disks/{disk}",
            get(get_disk)
                .patch(update_disk_credentials)
                .delete(delete_disk),
        )
        .route(
            "/v1/sandboxes/{id}/disks",
            get(list_sandbox_disks).post(attach_disk),
        )
        .route("/v1/sandboxes/{id}/disks/{disk_id}", delete(detach_disk))
}

fn name_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^[a-z0-9][a-z0-9-]{0,62}$").expect("valid regex"))
}

fn bucket_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$").expect("valid regex"))
}

/// S3 bucket naming rules: 3–63 chars of `[a-z0-9.-]`, starting and ending with a letter
/// or digit, no `..`, not shaped like an IPv4 address.
fn validate_bucket(bucket: &str) -> Result<(), ApiError> {
    let ip_like = bucket.parse::<std::net::Ipv4Addr>().is_ok();
    if !bucket_re().is_match(bucket)
        || bucket.contains("..")
        || bucket.contains(".-")
        || bucket.contains("-.")
        || ip_like
    {
        return Err(ApiError::validation(
            "config",
            format!("invalid bucket name {bucket:?}"),
        ));
    }
    Ok(())
}

/// `http(s)://host[:port][/path]` with a plausible host.
fn validate_endpoint(endpoint: &str) -> Result<(), ApiError> {
    let bad = || ApiError::validation("config", "endpoint must be an http(s) URL");
    let rest = endpoint
        .strip_prefix("https://")
        .or_else(|| endpoint.strip_prefix("http://"))
        .ok_or_else(bad)?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = match authority.rsplit_once(':') {
        Some((h, port)) if !h.ends_with(']') || authority.starts_with('[') => {
            if port.parse::<u16>().is_err() {
                return Err(bad());
            }
            h
        }
        _ => authority,
    };
    let ok = !host.is_empty()
        && !authority.contains('@')
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']' | ':'));
    if ok {
        Ok(())
    } else {
        Err(bad())
    }
}

fn validate_credentials(c: &DiskCredentials) -> Result<(), ApiError> {
    let filled = |v: &Option<String>| v.as_deref().map(|s| !s.trim().is_empty()).unwrap_or(false);
    if !filled(&c.access_key) || !filled(&c.secret_key) {
        return Err(ApiError::validation(
            "credentials",
            "access_key and secret_key are required",
        ));
    }
    Ok(())
}

fn disks_enabled(state: &AppState) -> Result<(), ApiError> {
    if state.config.disks_configured {
        Ok(())
    } else {
        Err(ApiError::error(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "disks API not configured",
        ))
    }
}

fn not_found() -> ApiError {
    ApiError::not_found("disk", "disk not found")
}

/// Directory holding a bucket's objects (shared by every disk naming that bucket).
fn bucket_dir(state: &AppState, config: &DiskConfig) -> PathBuf {
    let digest = Sha256::digest(format!(
        "{}|{}",
        config.endpoint.trim_end_matches('/'),
        config.bucket
    ));
    state.state_dir.join("buckets").join(format!(
        "{}-{}",
        &hex::encode(digest)[..16],
        config.bucket
    ))
}

fn disk_view(d: &DiskRecord) -> Value {
    json!({
        "id": d.id,
        "name": d.name,
        "kind": "s3",
        "config": d.config,
        "created_at": rfc3339(d.created_at),
    })
}

pub async fn list_disks(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<PageQuery>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    disks_enabled(&state)?;
    let rows = state
        .resources
        .disks
        .rows
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let items: Vec<Value> = rows
        .iter()
        .filter(|d| d.tenant == caller.tenant)
        .map(disk_view)
        .collect();
    paginate(items, &q)
}

#[derive(Debug, Default, Deserialize)]
pub struct CreateDiskRequest {
    pub name: Option<String>,
    pub kind: Option<String>,
    pub config: Option<DiskConfig>,
    pub credentials: Option<DiskCredentials>,
}

pub async fn create_disk(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(req): JsonBody<CreateDiskRequest>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    disks_enabled(&state)?;
    state.require_credit(&caller)?;
    let name = req.name.as_deref().unwrap_or("").trim().to_string();
    if !name_re().is_match(&name) {
        return Err(ApiError::validation(
            "name",
            "name must match ^[a-z0-9][a-z0-9-]{0,62}$",
        ));
    }
    match req.kind.as_deref() {
        None | Some("") | Some("s3") => {}
        Some(other) => {
            return Err(ApiError::validation(
                "kind",
                format!("unsupported disk kind {other:?}"),
            ))
        }
    }
    let config = req
        .config
        .ok_or_else(|| ApiError::validation("config", "config is required"))?;
    validate_bucket(&config.bucket)?;
    validate_endpoint(&config.endpoint)?;
    let credentials = req
        .credentials
        .ok_or_else(|| ApiError::validation("credentials", "credentials are required"))?;
    validate_credentials(&credentials)?;
    std::fs::create_dir_all(bucket_dir(&state, &config))?;
    let record = {
        let mut rows = state
            .resources
            .disks
            .rows
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if rows
            .iter()
            .any(|d| d.tenant == caller.tenant && d.name == name)
        {
            return Err(ApiError::conflict_on("name", "name already in use"));
        }
        let record = DiskRecord {
            id: crate::ids::new_id("disk_"),
            tenant: caller.tenant.clone(),
            name,
            config,
            credentials,
            created_at: now(),
        };
        rows.push(record.clone());
        record
    };
    Ok(ok(disk_view(&record)))
}

pub async fn get_disk(
    State(state): State<AppState>,
    caller: Caller,
    Path(disk): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    disks_enabled(&state)?;
    let d = state
        .resources
        .disks
        .find(&caller.tenant, &disk)
        .ok_or_else(not_found)?;
    Ok(ok(disk_view(&d)))
}

#[derive(Debug, Default, Deserialize)]
pub struct UpdateCredentialsRequest {
    pub credentials: Option<DiskCredentials>,
}

pub async fn update_disk_credentials(
    State(state): State<AppState>,
    caller: Caller,
    Path(disk): Path<String>,
    JsonBody(req): JsonBody<UpdateCredentialsRequest>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    disks_enabled(&state)?;
    let d = state
        .resources
        .disks
        .find(&caller.tenant, &disk)
        .ok_or_else(not_found)?;
    let credentials = req
        .credentials
        .ok_or_else(|| ApiError::validation("credentials", "credentials are required"))?;
    validate_credentials(&credentials)?;
    let mut rows = state
        .resources
        .disks
        .rows
        .write()
        .unwrap_or_else(|e| e.into_inner());
    let row = rows
        .iter_mut()
        .find(|r| r.id == d.id)
        .ok_or_else(not_found)?;
    row.credentials = credentials;
    Ok(ok(disk_view(row)))
}

/// True while any live sandbox mounts `disk_id`.
fn attached_anywhere(state: &AppState, disk_id: &str) -> bool {
    state
        .sandboxes
        .all()
        .iter()
        .any(|s| !s.status().is_terminal() && s.record().disks.iter().any(|m| m.disk_id == disk_id))
}

pub async fn delete_disk(
    State(state): State<AppState>,
    caller: Caller,
    Path(disk): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    disks_enabled(&state)?;
    let d = state
        .resources
        .disks
        .find(&caller.tenant, &disk)
        .ok_or_else(not_found)?;
    if attached_anywhere(&state, &d.id) {
        return Err(ApiError::conflict_on(
            "disk",
            "disk is attached to a sandbox",
        ));
    }
    state
        .resources
        .disks
        .rows
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|r| r.id != d.id);
    Ok(ok(json!({"deleted": true})))
}

fn sandbox_disk_view(state: &AppState, m: &DiskMount) -> Value {
    let disk = state.resources.disks.by_id(&m.disk_id);
    let mut v = json!({
        "disk_id": m.disk_id,
        "kind": "s3",
        "mount_path": m.mount_path,
        "mount_status": m.mount_status,
    });
    if let Some(d) = disk {
        v["name"] = json!(d.name);
        v["config"] = json!(d.config);
    }
    if let Some(sub) = &m.sub_path {
        v["sub_path"] = json!(sub);
    }
    if let Some(err) = &m.mount_error {
        v["mount_error"] = json!(err);
    }
    v
}

pub async fn list_sandbox_disks(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    disks_enabled(&state)?;
    let sandbox = state.sandbox_for(&caller, &id)?;
    let mounts = sandbox.record().disks.clone();
    paginate(
        mounts
            .iter()
            .map(|m| sandbox_disk_view(&state, m))
            .collect(),
        &q,
    )
}

/// Mounts a disk into a sandbox: the bucket directory (or its `sub_path`) appears at
/// `mount_path` (for its running processes too when the sandbox is isolated); the row goes
/// `pending` → `mounted`.
pub fn mount_into(
    state: &AppState,
    sandbox: &SandboxRef,
    mut mount: DiskMount,
) -> Result<(), ApiError> {
    let disk = state
        .resources
        .disks
        .by_id(&mount.disk_id)
        .ok_or_else(not_found)?;
    let mut host = bucket_dir(state, &disk.config);
    if let Some(sub) = mount.sub_path.as_deref() {
        let clean =
            crate::isolation::normalize_guest_path(&format!("/{}", sub.trim_start_matches('/')))
                .map_err(|_| ApiError::validation("sub_path", "sub_path must not contain '..'"))?;
        host = host.join(clean.trim_start_matches('/'));
    }
    let outcome = sandbox.runtime().add_mount(&host, &mount.mount_path);
    mount.mount_status = "pending".into();
    let failed = outcome.as_ref().err().map(|e| e.body.to_string());
    sandbox.record().disks.push(mount.clone());
    let sandbox = std::sync::Arc::clone(sandbox);
    let delay = state.config.latencies.create;
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let mut r = sandbox.record();
        if let Some(m) = r
            .disks
            .iter_mut()
            .find(|m| m.disk_id == mount.disk_id && m.mount_path == mount.mount_path)
        {
            match &failed {
                None => m.mount_status = "mounted".into(),
                Some(err) => {
                    m.mount_status = "error".into();
                    m.mount_error = Some(err.clone());
                }
            }
        }
    });
    Ok(())
}

#[derive(Debug, Default, Deserialize)]
pub struct AttachDiskRequest {
    pub disk_id: Option<String>,
    pub mount_path: Option<String>,
    pub sub_path: Option<String>,
}

pub async fn attach_disk(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<AttachDiskRequest>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    disks_enabled(&state)?;
    let sandbox = state.running_sandbox(&caller, &id)?;
    let wanted = req.disk_id.as_deref().unwrap_or("").trim();
    if wanted.is_empty() {
        return Err(ApiError::validation("disk_id", "disk_id is required"));
    }
    let disk_id = state
        .resources
        .disks
        .resolve(&caller.tenant, wanted)
        .ok_or_else(not_found)?;
    let raw_path = req.mount_path.as_deref().unwrap_or("");
    let mount_path = crate::isolation::normalize_guest_path(raw_path)
        .map_err(|_| ApiError::validation("mount_path", "mount_path must be an absolute path"))?;
    if mount_path == "/" {
        return Err(ApiError::validation("mount_path", "cannot mount over /"));
    }
    if sandbox
        .record()
        .disks
        .iter()
        .any(|m| m.mount_path == mount_path)
    {
        return Err(ApiError::conflict_on(
            "disk",
            format!("mount path {mount_path} is already in use"),
        ));
    }
    mount_into(
        &state,
        &sandbox,
        DiskMount {
            disk_id,
            mount_path,
            sub_path: req.sub_path.filter(|s| !s.is_empty()),
            mount_status: "pending".into(),
            mount_error: None,
        },
    )?;
    Ok(ok(json!({"ok": true, "id": sandbox.id})))
}

#[derive(Debug, Default, Deserialize)]
pub struct DetachQuery {
    pub mount_path: Option<String>,
}

pub async fn detach_disk(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, disk_id)): Path<(String, String)>,
    Query(q): Query<DetachQuery>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    disks_enabled(&state)?;
    let sandbox = state.sandbox_for(&caller, &id)?;
    let wanted_path = match q.mount_path.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => Some(crate::isolation::normalize_guest_path(p)?),
        None => None,
    };
    let removed: Vec<DiskMount> = {
        let mut r = sandbox.record();
        let (gone, kept): (Vec<DiskMount>, Vec<DiskMount>) = r.disks.drain(..).partition(|m| {
            m.disk_id == disk_id && wanted_path.as_ref().is_none_or(|p| &m.mount_path == p)
        });
        r.disks = kept;
        gone
    };
    if removed.is_empty() {
        return Err(ApiError::not_found(
            "disk",
            "disk is not mounted at this path",
        ));
    }
    for m in removed {
        sandbox.runtime().remove_mount(&m.mount_path);
    }
    Ok(ok(json!({"detached": true})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_and_endpoint_rules() {
        assert!(validate_bucket("my-bucket.data").is_ok());
        assert!(validate_bucket("ab").is_err());
        assert!(validate_bucket("Bad_Bucket").is_err());
        assert!(validate_bucket("a..b").is_err());
        assert!(validate_bucket("192.168.1.1").is_err());
        assert!(validate_endpoint("https://s3.example.com").is_ok());
        assert!(validate_endpoint("http://127.0.0.1:9000/").is_ok());
        assert!(validate_endpoint("s3.example.com").is_err());
        assert!(validate_endpoint("https://").is_err());
        assert!(validate_endpoint("https://u:p@host").is_err());
    }
}
