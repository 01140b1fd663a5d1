//! E7 `POST /v1/sandboxes`: validation, the new row, its runtime, its files.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;

use super::model::{DiskMount, SandboxEntry, SandboxRecord, SandboxRef, Status};
use super::validate;
use crate::auth::{Caller, TenantId};
use crate::catalog;
use crate::envelope::{ok, ApiError, JsonBody};
use crate::state::AppState;

/// Default egress quota stamped on every new sandbox (5 GiB).
pub const DEFAULT_BANDWIDTH_QUOTA: i64 = 5 * 1024 * 1024 * 1024;

#[derive(Debug, Deserialize)]
pub struct NetworkRef {
    pub id: String,
}

#[derive(Debug, Deserialize)]
pub struct DiskRef {
    pub disk_id: String,
    pub mount_path: String,
    #[serde(default)]
    pub sub_path: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct CreateSandboxRequest {
    pub shape: Option<String>,
    pub rootfs: Option<String>,
    pub name: Option<String>,
    pub networks: Option<Vec<NetworkRef>>,
    pub disk_mib: Option<i64>,
    pub egress: Option<Vec<String>>,
    pub envs: Option<BTreeMap<String, String>>,
    pub ssh_pubkeys: Option<Vec<String>>,
    pub host_id: Option<String>,
    pub node_selector: Option<BTreeMap<String, String>>,
    pub ingress_enabled: Option<bool>,
    pub disks: Option<Vec<DiskRef>>,
    pub region: Option<String>,
    pub auto_pause_after_seconds: Option<i64>,
    pub bandwidth_quota_bytes: Option<i64>,
}

/// Largest root disk the emulator accepts (MiB).
pub const MAX_DISK_MIB: u64 = 102_400;

/// Resolves a rootfs name (built-in or the tenant's ready template) to the stored name.
fn resolve_rootfs(
    state: &AppState,
    tenant: &TenantId,
    requested: Option<&str>,
) -> Result<String, ApiError> {
    let name = requested
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .unwrap_or(catalog::DEFAULT_ROOTFS);
    if catalog::builtin_rootfs(name).is_some() {
        return Ok(name.to_string());
    }
    if catalog::DISABLED_ROOTFS.contains(&name) {
        return Err(ApiError::validation(
            "rootfs",
            format!("rootfs {name:?} is disabled"),
        ));
    }
    match state.resources.templates.ready_rootfs(tenant, name) {
        Some(Ok(id)) => Ok(id),
        Some(Err(status)) => Err(ApiError::validation(
            "rootfs",
            format!("template {name:?} is not ready (status {status})"),
        )),
        None => Err(ApiError::validation(
            "rootfs",
            format!("unknown rootfs: {name}"),
        )),
    }
}

pub async fn create_sandbox(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(req): JsonBody<CreateSandboxRequest>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    state.require_credit(&caller)?;
    let started = Instant::now();

    let shape_id = req.shape.as_deref().map(str::trim).unwrap_or("");
    if shape_id.is_empty() {
        return Err(ApiError::validation("shape", "shape is required"));
    }
    let shape = catalog::shape(shape_id)
        .ok_or_else(|| ApiError::validation("shape", format!("unknown shape: {shape_id}")))?;
    let rootfs = resolve_rootfs(&state, &caller.tenant, req.rootfs.as_deref())?;
    if req.bandwidth_quota_bytes.unwrap_or(0) != 0 {
        return Err(ApiError::validation(
            "bandwidth_quota_bytes",
            "bandwidth_quota_bytes cannot be set at create",
        ));
    }
    let envs = req.envs.unwrap_or_default();
    validate::envs(&envs)?;
    let auto_pause = req
        .auto_pause_after_seconds
        .map(validate::auto_pause)
        .transpose()?;
    let egress = validate::egress(&req.egress.unwrap_or_default())?;
    let ssh_pubkeys = dedup(
        req.ssh_pubkeys
            .unwrap_or_default()
            .iter()
            .map(|k| validate::ssh_pubkey(k))
            .collect::<Result<_, _>>()?,
    );
    let disk_mib = match req.disk_mib.unwrap_or(0) {
        0 => shape.default_disk_mib,
        n if n < 0 => {
            return Err(ApiError::validation(
                "disk_mib",
                "disk_mib must not be negative",
            ))
        }
        n if (n as u64) < shape.default_disk_mib => {
            return Err(ApiError::validation(
                "disk_mib",
                format!(
                    "disk_mib must be at least {} for shape {}",
                    shape.default_disk_mib, shape.id
                ),
            ))
        }
        n if n as u64 > MAX_DISK_MIB => {
            return Err(ApiError::validation(
                "disk_mib",
                format!("disk_mib must be at most {MAX_DISK_MIB}"),
            ))
        }
        n => n as u64,
    };
    if let Some(region) = req.region.as_deref().filter(|r| !r.is_empty()) {
        if region != state.config.region {
            return Err(ApiError::validation(
                "region",
                format!(
                    "region {region:?} does not match this control plane ({})",
                    state.config.region
                ),
            ));
        }
    }
    if let Some(host) = req.host_id.as_deref().filter(|h| !h.is_empty()) {
        if host != "host-local" {
            return Err(ApiError::validation(
                "host_id",
                format!("unknown host {host:?}"),
            ));
        }
    }
    if let Some(selector) = &req.node_selector {
        if selector.keys().any(|k| k.trim().is_empty()) {
            return Err(ApiError::validation(
                "node_selector",
                "label names must not be empty",
            ));
        }
    }
    let name = match req.name.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
        Some(n) => {
            validate::sandbox_name(n)?;
            n.to_string()
        }
        None => unique_friendly_name(&state, &caller.tenant),
    };
    let mut network_ids = Vec::new();
    for net in req.networks.unwrap_or_default() {
        let found = state
            .resources
            .networks
            .resolve(&caller.tenant, &net.id)
            .ok_or_else(|| {
                ApiError::validation("networks", format!("network {:?} not found", net.id))
            })?;
        if !network_ids.contains(&found) {
            network_ids.push(found);
        }
    }
    let mut disk_mounts = Vec::new();
    for d in req.disks.unwrap_or_default() {
        let disk = state
            .resources
            .disks
            .resolve(&caller.tenant, &d.disk_id)
            .ok_or_else(|| {
                ApiError::validation("disks", format!("disk {:?} not found", d.disk_id))
            })?;
        let mount_path = crate::isolation::normalize_guest_path(&d.mount_path)
            .map_err(|_| ApiError::validation("disks", "mount_path must be an absolute path"))?;
        if disk_mounts
            .iter()
            .any(|m: &DiskMount| m.mount_path == mount_path)
        {
            return Err(ApiError::validation(
                "disks",
                format!("mount path {mount_path} used twice"),
            ));
        }
        disk_mounts.push(DiskMount {
            disk_id: disk,
            mount_path,
            sub_path: d.sub_path.filter(|s| !s.is_empty()),
            mount_status: "pending".into(),
            mount_error: None,
        });
    }
    if state.sandboxes.name_in_use(&caller.tenant, &name, None) {
        return Err(ApiError::conflict_on("name", "name already in use"));
    }

    let id = crate::ids::new_id("sb-");
    let record = SandboxRecord {
        status: Status::Creating,
        name: name.clone(),
        shape: shape.id.to_string(),
        rootfs,
        vcpu: shape.vcpu,
        mem_mib: shape.mem_mib,
        disk_mib,
        ip: state.sandboxes.allocate_ip(),
        region: state.config.region.clone(),
        created_at: crate::clock::now(),
        running_at: None,
        destroyed_at: None,
        paused_at: None,
        last_resumed_at: None,
        spawn_ms: 0.0,
        ingress_enabled: req.ingress_enabled.unwrap_or(false),
        egress,
        envs: envs.clone(),
        ssh_pubkeys,
        created_by: caller.user_id.clone(),
        bandwidth_quota_bytes: DEFAULT_BANDWIDTH_QUOTA,
        bandwidth_used_bytes: 0,
        bandwidth_ingress_bytes: 0,
        forked_from: None,
        auto_pause_after_seconds: auto_pause,
        networks: network_ids,
        disks: Vec::new(),
        last_activity: Instant::now(),
        busy: 0,
        generation: 0,
    };
    let keys = record.ssh_pubkeys.clone();
    let entry = new_entry(&state, id, caller.tenant.clone(), &name, envs, record)?;
    super::handlers::write_authorized_keys(&entry, &keys);
    state.sandboxes.insert(Arc::clone(&entry));
    state.guest_sshd.boot(&state.shutdown, &entry);
    state.stats.sandbox_created();
    state.resources.metrics.sandbox_created(&caller.tenant);

    // The spawn finishes in a task of its own: a client that hangs up mid-create must not
    // strand the sandbox in `creating` (the real service finishes the spawn either way).
    let spawn = tokio::spawn(finish_spawn(
        state,
        Arc::clone(&entry),
        disk_mounts,
        started,
    ));
    match spawn.await {
        Ok(result) => result,
        Err(e) => {
            super::model::apply_status(&mut entry.record(), Status::Failed);
            Err(ApiError::internal(format!("the spawn task ended: {e}")))
        }
    }
}

/// The rest of a create once the sandbox is registered: the spawn latency, the disks, then
/// `running`; a disk that cannot be mounted ends it `failed` (`creating ──► failed`).
async fn finish_spawn(
    state: AppState,
    entry: SandboxRef,
    disk_mounts: Vec<DiskMount>,
    started: Instant,
) -> Result<Response, ApiError> {
    tokio::time::sleep(state.config.latencies.create).await;
    for mount in disk_mounts {
        if let Err(e) = crate::resources::disks::mount_into(&state, &entry, mount) {
            let mut r = entry.record();
            if r.status == Status::Creating {
                super::model::apply_status(&mut r, Status::Failed);
            }
            return Err(e);
        }
    }
    {
        let mut r = entry.record();
        r.spawn_ms = started.elapsed().as_secs_f64() * 1000.0;
        // a destroy that came in meanwhile wins
        if r.status == Status::Creating {
            super::model::apply_status(&mut r, Status::Running);
        }
    }
    Ok(ok(entry.view()))
}

/// Builds the entry (runtime + directories) of a new sandbox.
pub fn new_entry(
    state: &AppState,
    id: String,
    tenant: TenantId,
    hostname: &str,
    envs: BTreeMap<String, String>,
    record: SandboxRecord,
) -> Result<SandboxRef, ApiError> {
    let dir = state.sandbox_dir(&id);
    let runtime = state
        .isolation
        .new_runtime(&id, hostname, &dir, envs)
        .map_err(|e| ApiError::internal(format!("cannot prepare sandbox files: {e}")))?;
    Ok(Arc::new(SandboxEntry::new(id, tenant, runtime, record)))
}

pub(crate) fn unique_friendly_name(state: &AppState, tenant: &TenantId) -> String {
    for _ in 0..32 {
        let candidate = crate::ids::friendly_name();
        if !state.sandboxes.name_in_use(tenant, &candidate, None) {
            return candidate;
        }
    }
    format!(
        "{}-{}",
        crate::ids::friendly_name(),
        crate::ids::random_token(4)
    )
}

pub fn dedup(keys: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(keys.len());
    for k in keys {
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}
