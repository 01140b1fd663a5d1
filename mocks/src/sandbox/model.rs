//! The sandbox row: lifecycle status, settings, and its wire view (`SandboxView`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use time::OffsetDateTime;

use crate::auth::TenantId;
use crate::clock::rfc3339;
use crate::isolation::SandboxRuntime;

/// `SandboxStatus` of the reference (§6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Creating,
    Running,
    Pausing,
    Paused,
    Resuming,
    Forking,
    Error,
    Destroying,
    Destroyed,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Creating => "creating",
            Status::Running => "running",
            Status::Pausing => "pausing",
            Status::Paused => "paused",
            Status::Resuming => "resuming",
            Status::Forking => "forking",
            Status::Error => "error",
            Status::Destroying => "destroying",
            Status::Destroyed => "destroyed",
            Status::Failed => "failed",
        }
    }

    pub fn parse(raw: &str) -> Option<Status> {
        serde_json::from_value(Value::String(raw.to_string())).ok()
    }

    /// `destroyed` and `failed` never change again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Destroyed | Status::Failed)
    }

    /// Rows that still hold a name (a name is unique among these).
    pub fn holds_name(self) -> bool {
        !matches!(
            self,
            Status::Destroyed | Status::Failed | Status::Destroying
        )
    }
}

/// A disk mounted into a sandbox (`SandboxDiskView` minus the disk's own fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskMount {
    pub disk_id: String,
    pub mount_path: String,
    pub sub_path: Option<String>,
    /// `pending` | `mounted` | `error` | `unmounting`
    pub mount_status: String,
    pub mount_error: Option<String>,
}

/// Mutable state of one sandbox.
#[derive(Debug, Clone)]
pub struct SandboxRecord {
    pub status: Status,
    pub name: String,
    pub shape: String,
    pub rootfs: String,
    pub vcpu: u32,
    pub mem_mib: u64,
    pub disk_mib: u64,
    pub ip: String,
    pub region: String,
    pub created_at: OffsetDateTime,
    pub running_at: Option<OffsetDateTime>,
    pub destroyed_at: Option<OffsetDateTime>,
    pub paused_at: Option<OffsetDateTime>,
    pub last_resumed_at: Option<OffsetDateTime>,
    pub spawn_ms: f64,
    pub ingress_enabled: bool,
    pub egress: Vec<String>,
    pub envs: BTreeMap<String, String>,
    pub ssh_pubkeys: Vec<String>,
    pub created_by: String,
    pub bandwidth_quota_bytes: i64,
    pub bandwidth_used_bytes: i64,
    pub bandwidth_ingress_bytes: i64,
    pub forked_from: Option<String>,
    pub auto_pause_after_seconds: Option<u32>,
    /// Network ids this sandbox is a member of.
    pub networks: Vec<String>,
    pub disks: Vec<DiskMount>,
    /// Last control-plane activity (idle auto-pause clock).
    pub last_activity: Instant,
    /// Exec/stream calls in flight (a busy sandbox is never idle).
    pub busy: u32,
    /// Bumped on every status change so a delayed transition can tell it is stale.
    pub generation: u64,
}

/// One sandbox: immutable identity, its runtime, and its mutable record.
#[derive(Debug)]
pub struct SandboxEntry {
    pub id: String,
    pub tenant: TenantId,
    runtime: Arc<SandboxRuntime>,
    record: Mutex<SandboxRecord>,
}

pub type SandboxRef = Arc<SandboxEntry>;

impl SandboxEntry {
    pub fn new(
        id: String,
        tenant: TenantId,
        runtime: SandboxRuntime,
        record: SandboxRecord,
    ) -> Self {
        SandboxEntry {
            id,
            tenant,
            runtime: Arc::new(runtime),
            record: Mutex::new(record),
        }
    }

    /// Locks the record (keep the guard short; never hold it across `.await`).
    pub fn record(&self) -> MutexGuard<'_, SandboxRecord> {
        self.record.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn runtime(&self) -> &SandboxRuntime {
        &self.runtime
    }

    pub fn runtime_arc(&self) -> Arc<SandboxRuntime> {
        Arc::clone(&self.runtime)
    }

    pub fn status(&self) -> Status {
        self.record().status
    }

    pub fn name(&self) -> String {
        self.record().name.clone()
    }

    pub fn rootfs(&self) -> String {
        self.record().rootfs.clone()
    }

    /// Env values declared at create (internal use only; never put them on the wire).
    pub fn envs(&self) -> BTreeMap<String, String> {
        self.record().envs.clone()
    }

    pub fn env_names(&self) -> Vec<String> {
        self.record().envs.keys().cloned().collect()
    }

    pub fn ingress_enabled(&self) -> bool {
        self.record().ingress_enabled
    }

    /// Marks control-plane activity (resets the idle auto-pause clock).
    pub fn touch(&self) {
        self.record().last_activity = Instant::now();
    }

    /// Marks the start of a long call (exec, stream); pair with [`end_busy`](Self::end_busy).
    pub fn begin_busy(&self) {
        let mut r = self.record();
        r.busy += 1;
        r.last_activity = Instant::now();
    }

    pub fn end_busy(&self) {
        let mut r = self.record();
        r.busy = r.busy.saturating_sub(1);
        r.last_activity = Instant::now();
    }

    /// Sets a new status (timestamps included) and returns the new generation.
    pub fn set_status(&self, status: Status) -> u64 {
        let mut r = self.record();
        apply_status(&mut r, status);
        r.generation
    }

    /// The `SandboxView` JSON.
    pub fn view(&self) -> Value {
        let r = self.record();
        view_of(&self.id, &r)
    }
}

/// Changes `r.status`, stamping the matching timestamp and bumping the generation.
pub fn apply_status(r: &mut SandboxRecord, status: Status) {
    let now = crate::clock::now();
    match status {
        Status::Running => {
            if r.running_at.is_none() {
                r.running_at = Some(now);
            }
            if matches!(r.status, Status::Resuming) {
                r.last_resumed_at = Some(now);
            }
            r.last_activity = Instant::now();
        }
        Status::Paused => r.paused_at = Some(now),
        Status::Destroyed => r.destroyed_at = Some(now),
        _ => {}
    }
    r.status = status;
    r.generation += 1;
}

/// `https://<ulid lowercase>-<port>.app.sb.localhost` (the literal `<port>` stays).
pub fn ingress_template(id: &str) -> String {
    let ulid = id.strip_prefix("sb-").unwrap_or(id).to_ascii_lowercase();
    format!("https://{ulid}-<port>.app.sb.localhost")
}

/// The `SandboxView` of a locked record.
pub fn view_of(id: &str, r: &SandboxRecord) -> Value {
    let mut v = Map::new();
    v.insert("id".into(), json!(id));
    v.insert("status".into(), json!(r.status.as_str()));
    if r.status != Status::Creating {
        v.insert("ip".into(), json!(r.ip));
    }
    v.insert("vcpu".into(), json!(r.vcpu));
    v.insert("mem_mib".into(), json!(r.mem_mib));
    v.insert("disk_mib".into(), json!(r.disk_mib));
    v.insert("created_at".into(), json!(rfc3339(r.created_at)));
    v.insert("ingress_enabled".into(), json!(r.ingress_enabled));
    if r.ingress_enabled {
        v.insert("ingress_url_template".into(), json!(ingress_template(id)));
    }
    v.insert("name".into(), json!(r.name));
    if let Some(t) = r.running_at {
        v.insert("running_at".into(), json!(rfc3339(t)));
    }
    if let Some(t) = r.destroyed_at {
        v.insert("destroyed_at".into(), json!(rfc3339(t)));
    }
    v.insert("spawn_ms".into(), json!(r.spawn_ms));
    v.insert("shape".into(), json!(r.shape));
    v.insert("rootfs".into(), json!(r.rootfs));
    v.insert("region".into(), json!(r.region));
    v.insert("egress".into(), json!(r.egress));
    v.insert("envs".into(), json!(r.envs.keys().collect::<Vec<_>>()));
    v.insert("ssh_pubkeys".into(), json!(r.ssh_pubkeys));
    v.insert("created_by".into(), json!(r.created_by));
    v.insert(
        "bandwidth_quota_bytes".into(),
        json!(r.bandwidth_quota_bytes),
    );
    v.insert(
        "bandwidth_ingress_bytes".into(),
        json!(r.bandwidth_ingress_bytes),
    );
    if let Some(t) = r.paused_at {
        v.insert("paused_at".into(), json!(rfc3339(t)));
    }
    if let Some(t) = r.last_resumed_at {
        v.insert("last_resumed_at".into(), json!(rfc3339(t)));
    }
    if let Some(parent) = &r.forked_from {
        v.insert("forked_from".into(), json!(parent));
    }
    if let Some(secs) = r.auto_pause_after_seconds {
        v.insert("auto_pause_after_seconds".into(), json!(secs));
    }
    Value::Object(v)
}
