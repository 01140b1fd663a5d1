//! Lifecycle routes: pause (E13), resume (E14), fork (E15), destroy (E12), and the
//! delayed transitions behind them (§6.2 of the reference).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use super::create::{dedup, new_entry};
use super::model::{apply_status, SandboxRef, Status};
use super::validate;
use crate::auth::Caller;
use crate::envelope::{ok, ok_with, ApiError, JsonBody};
use crate::state::AppState;

/// 202 with the view and `X-Poll-After: 1`.
fn accepted(view: serde_json::Value) -> Response {
    let mut resp = ok_with(StatusCode::ACCEPTED, view);
    resp.headers_mut()
        .insert("x-poll-after", HeaderValue::from_static("1"));
    resp
}

/// After `delay`, moves `sandbox` from `from` to `to` unless something else changed
/// its status meanwhile (the generation guards against stale transitions).
fn transition_later(
    state: &AppState,
    sandbox: &SandboxRef,
    generation: u64,
    delay: Duration,
    to: Status,
    before: impl FnOnce(&SandboxRef) + Send + 'static,
) {
    let sandbox = Arc::clone(sandbox);
    let shutdown = state.shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.cancelled() => return,
        }
        if sandbox.record().generation != generation {
            return;
        }
        before(&sandbox);
        let mut r = sandbox.record();
        if r.generation == generation {
            apply_status(&mut r, to);
        }
    });
}

/// running → pausing → paused; every process is frozen at once. Used by the pause
/// route and by idle auto-pause.
pub fn begin_pause(state: &AppState, sandbox: &SandboxRef) -> bool {
    let generation = {
        let mut r = sandbox.record();
        if r.status != Status::Running {
            return false;
        }
        apply_status(&mut r, Status::Pausing);
        r.generation
    };
    sandbox.runtime().freeze();
    state.guest_sshd.set_frozen(&sandbox.id, true);
    transition_later(
        state,
        sandbox,
        generation,
        state.config.latencies.pause,
        Status::Paused,
        |_| {},
    );
    true
}

pub async fn pause_sandbox(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let sandbox = state.sandbox_for(&caller, &id)?;
    match sandbox.status() {
        Status::Paused => Ok(ok(sandbox.view())),
        Status::Pausing => Ok(accepted(sandbox.view())),
        Status::Running => {
            begin_pause(&state, &sandbox);
            Ok(accepted(sandbox.view()))
        }
        _ => Err(ApiError::not_running()),
    }
}

pub async fn resume_sandbox(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let sandbox = state.sandbox_for(&caller, &id)?;
    state.require_credit(&caller)?;
    let generation = {
        let mut r = sandbox.record();
        match r.status {
            Status::Running => return Ok(ok(super::model::view_of(&sandbox.id, &r))),
            Status::Resuming => return Ok(accepted(super::model::view_of(&sandbox.id, &r))),
            Status::Paused | Status::Error => {
                apply_status(&mut r, Status::Resuming);
                r.generation
            }
            other => {
                return Err(ApiError::conflict(format!(
                    "sandbox cannot be resumed from status {}",
                    other.as_str()
                )))
            }
        }
    };
    let thawed = state.clone();
    transition_later(
        &state,
        &sandbox,
        generation,
        state.config.latencies.resume,
        Status::Running,
        move |s| {
            s.runtime().thaw();
            thawed.guest_sshd.set_frozen(&s.id, false);
        },
    );
    Ok(accepted(sandbox.view()))
}

#[derive(Debug, Default, Deserialize)]
pub struct ForkSandboxRequest {
    pub start_paused: Option<bool>,
    pub ssh_pubkeys: Option<Vec<String>>,
    pub egress: Option<Vec<String>>,
    pub ingress_enabled: Option<bool>,
    pub envs: Option<BTreeMap<String, String>>,
    pub bandwidth_quota_bytes: Option<i64>,
    pub name: Option<String>,
}

pub async fn fork_sandbox(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<ForkSandboxRequest>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let source = state.sandbox_for(&caller, &id)?;
    state.require_credit(&caller)?;
    if !matches!(source.status(), Status::Paused | Status::Pausing) {
        return Err(ApiError::conflict("sandbox must be paused to fork"));
    }
    if let Some(envs) = &req.envs {
        validate::envs(envs)?;
    }
    let egress = req.egress.as_deref().map(validate::egress).transpose()?;
    let ssh_pubkeys = req
        .ssh_pubkeys
        .as_ref()
        .map(|keys| {
            keys.iter()
                .map(|k| validate::ssh_pubkey(k))
                .collect::<Result<Vec<_>, _>>()
                .map(dedup)
        })
        .transpose()?;
    let quota = match req.bandwidth_quota_bytes {
        None | Some(0) => None,
        Some(q) if q == -1 || q > 0 => Some(q),
        Some(_) => {
            return Err(ApiError::validation(
                "bandwidth_quota_bytes",
                "must be positive, or -1 for unmetered",
            ))
        }
    };
    let name = match req.name.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
        Some(n) => {
            validate::sandbox_name(n)?;
            if state.sandboxes.name_in_use(&caller.tenant, n, None) {
                return Err(ApiError::conflict_on("name", "name already in use"));
            }
            n.to_string()
        }
        None => super::create::unique_friendly_name(&state, &caller.tenant),
    };

    let started = Instant::now();
    let mut record = source.record().clone();
    record.status = Status::Forking;
    record.name = name.clone();
    record.ip = state.sandboxes.allocate_ip();
    record.created_at = crate::clock::now();
    record.running_at = None;
    record.destroyed_at = None;
    record.paused_at = None;
    record.last_resumed_at = None;
    record.created_by = caller.user_id.clone();
    record.forked_from = Some(source.id.clone());
    record.disks = Vec::new();
    record.bandwidth_used_bytes = 0;
    record.bandwidth_ingress_bytes = 0;
    record.busy = 0;
    record.generation = 0;
    record.last_activity = Instant::now();
    if let Some(envs) = req.envs {
        record.envs = envs;
    }
    if let Some(egress) = egress {
        record.egress = egress;
    }
    if let Some(keys) = ssh_pubkeys {
        record.ssh_pubkeys = keys;
    }
    if let Some(ingress) = req.ingress_enabled {
        record.ingress_enabled = ingress;
    }
    if let Some(q) = quota {
        record.bandwidth_quota_bytes = q;
    }
    let envs = record.envs.clone();
    let keys = record.ssh_pubkeys.clone();
    let child_id = crate::ids::new_id("sb-");
    let child = new_entry(
        &state,
        child_id.clone(),
        caller.tenant.clone(),
        &name,
        envs,
        record,
    )?;

    // Copy the parent's files (everything but attached disks, which are not carried over).
    let from = source.runtime().dir().to_path_buf();
    let to = child.runtime().dir().to_path_buf();
    let skip: Vec<std::path::PathBuf> = source
        .record()
        .disks
        .iter()
        .map(|d| from.join(d.mount_path.trim_start_matches('/')))
        .collect();
    tokio::task::spawn_blocking(move || crate::fsutil::copy_tree(&from, &to, &skip))
        .await
        .map_err(|e| ApiError::internal(format!("fork copy failed: {e}")))?
        .map_err(|e| ApiError::internal(format!("fork copy failed: {e}")))?;
    super::handlers::write_authorized_keys(&child, &keys);
    // A fork clones the VM's memory: the child's X session is the parent's.
    state.computer.copy_for_fork(&source.id, &child_id);

    state.sandboxes.insert(Arc::clone(&child));
    state.guest_sshd.boot(&state.shutdown, &child);
    state.stats.sandbox_created();
    state.resources.metrics.sandbox_created(&caller.tenant);
    let view = child.view();
    let target = if req.start_paused.unwrap_or(false) {
        Status::Paused
    } else {
        Status::Running
    };
    transition_later(
        &state,
        &child,
        0,
        state.config.latencies.fork,
        target,
        move |c| {
            c.record().spawn_ms = started.elapsed().as_secs_f64() * 1000.0;
        },
    );
    Ok(ok(view))
}

pub async fn destroy_sandbox(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let sandbox = state.sandbox_for(&caller, &id)?;
    let (status, generation) = {
        let mut r = sandbox.record();
        match r.status {
            Status::Destroyed | Status::Failed => {
                return Ok(ok(json!({"id": sandbox.id, "status": "destroyed"})))
            }
            Status::Destroying => return Ok(ok(json!({"id": sandbox.id, "status": "destroying"}))),
            Status::Paused | Status::Error => apply_status(&mut r, Status::Destroyed),
            _ => apply_status(&mut r, Status::Destroying),
        }
        (r.status, r.generation)
    };
    release(&state, &sandbox);
    let runtime = sandbox.runtime_arc();
    if status == Status::Destroyed {
        let _ = tokio::task::spawn_blocking(move || runtime.destroy(true)).await;
    } else {
        let delay = state.config.latencies.destroy;
        let sandbox2 = Arc::clone(&sandbox);
        tokio::spawn(async move {
            runtime.kill_all();
            tokio::time::sleep(delay).await;
            let _ = tokio::task::spawn_blocking(move || runtime.destroy(true)).await;
            let mut r = sandbox2.record();
            if r.generation == generation {
                apply_status(&mut r, Status::Destroyed);
            }
        });
    }
    Ok(ok(json!({"id": sandbox.id, "status": status.as_str()})))
}

/// Frees what a destroyed sandbox holds: processes, desktop, networks, disk mounts,
/// its delegated token.
fn release(state: &AppState, sandbox: &SandboxRef) {
    let cpu_seconds = sandbox.runtime().resource_usage().cpu_seconds;
    state
        .resources
        .metrics
        .sandbox_destroyed(&sandbox.tenant, cpu_seconds);
    state.processes.kill_sandbox(&sandbox.id);
    state.guest_sshd.remove(&sandbox.id);
    state.computer.forget(&sandbox.id);
    sandbox.runtime().kill_all();
    {
        let mut r = sandbox.record();
        r.networks.clear();
        for d in r.disks.drain(..) {
            sandbox.runtime().remove_mount(&d.mount_path);
        }
    }
    state.tenants.disable_delegated(&sandbox.id);
}
