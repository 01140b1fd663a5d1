//! Wire models of the sandbox routes (E7–E17).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::api::open_enum;
use crate::error::Result;
use crate::validate;

open_enum! {
    /// Lifecycle status of a sandbox (api-reference §6). Defaults to `running`: the create answer
    /// may omit it, and it is running then.
    #[derive(Default)]
    SandboxStatus {
        /// Spawn in progress.
        Creating = "creating",
        /// Live: exec, files and processes work.
        #[default]
        Running = "running",
        /// Snapshot in progress.
        Pausing = "pausing",
        /// Snapshot persisted, host freed.
        Paused = "paused",
        /// Restoring from the snapshot.
        Resuming = "resuming",
        /// A fork child being populated.
        Forking = "forking",
        /// Resume or fork ran out of retries; `resume` again or destroy.
        Error = "error",
        /// Delete accepted.
        Destroying = "destroying",
        /// Gone for good (the row stays readable).
        Destroyed = "destroyed",
        /// Terminal failure.
        Failed = "failed",
    }
}

impl SandboxStatus {
    /// `destroyed` or `failed`: nothing will change any more.
    pub fn is_terminal(&self) -> bool {
        matches!(self, SandboxStatus::Destroyed | SandboxStatus::Failed)
    }
}

/// The server's view of a sandbox (E9 and most sandbox answers).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SandboxView {
    /// `sb-…` id.
    pub id: String,
    /// Lifecycle status (the create answer may omit it: it is `running` then).
    #[serde(default)]
    pub status: SandboxStatus,
    /// Name (hostname inside networks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Private IP (absent while creating).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// vCPUs.
    #[serde(default)]
    pub vcpu: u32,
    /// Memory, MiB.
    #[serde(default)]
    pub mem_mib: u64,
    /// Root disk, MiB.
    #[serde(default)]
    pub disk_mib: u64,
    /// Shape id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    /// Base image or template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<String>,
    /// Region of the control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Whether ports are published.
    #[serde(default)]
    pub ingress_enabled: bool,
    /// Preview URL template with a literal `<port>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_url_template: Option<String>,
    /// Egress allow-list (empty: open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<String>>,
    /// Names of the env variables (values are never returned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envs: Option<Vec<String>>,
    /// Authorized SSH public keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_pubkeys: Option<Vec<String>>,
    /// Creator's user id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// Egress quota stamped at create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_quota_bytes: Option<i64>,
    /// Inbound bytes observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_ingress_bytes: Option<i64>,
    /// Idle auto-pause delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_pause_after_seconds: Option<u32>,
    /// Parent of a fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
    /// Boot time, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawn_ms: Option<f64>,
    /// RFC 3339 timestamps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// When it became running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_at: Option<String>,
    /// Last pause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<String>,
    /// Last resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_resumed_at: Option<String>,
    /// Destruction time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destroyed_at: Option<String>,
}

impl SandboxView {
    /// The preview URL of `port`, when ingress is enabled.
    pub fn preview_url(&self, port: u16) -> Option<String> {
        self.ingress_url_template
            .as_ref()
            .map(|t| t.replace("<port>", &port.to_string()))
    }
}

/// A network to join at create.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkRef {
    /// Network id or name.
    pub id: String,
}

/// A disk to mount at create.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskMountRequest {
    /// Disk id (names are silently ignored by some server versions: send ids).
    pub disk_id: String,
    /// Absolute mount path in the guest.
    pub mount_path: String,
    /// Prefix inside the bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_path: Option<String>,
}

/// What to create (E7). Build with [`CreateSandbox::new`] and the setters.
///
/// ```
/// use createos_sandbox::CreateSandbox;
/// let req = CreateSandbox::new("s-1vcpu-1gb").name("build-1").env("CI", "1").auto_pause_after(600);
/// assert!(req.validate().is_ok());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CreateSandbox {
    /// Shape id (`cos shapes`).
    pub shape: String,
    /// Base image or template (server default `devbox:1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<String>,
    /// Unique name among live sandboxes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Networks to join.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<NetworkRef>,
    /// Root disk size, MiB (0: shape default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_mib: Option<u64>,
    /// Egress allow-list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<String>>,
    /// Environment exported into every exec.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub envs: BTreeMap<String, String>,
    /// Authorized SSH keys.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_pubkeys: Vec<String>,
    /// Placement labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Publish ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_enabled: Option<bool>,
    /// Disks to mount.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<DiskMountRequest>,
    /// Must equal the server's region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Idle auto-pause, 60–86400 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_pause_after_seconds: Option<u32>,
}

impl CreateSandbox {
    /// A sandbox of `shape` with every other option at the server default.
    pub fn new(shape: impl Into<String>) -> Self {
        CreateSandbox {
            shape: shape.into(),
            ..Default::default()
        }
    }
    /// Base image or template.
    pub fn rootfs(mut self, rootfs: impl Into<String>) -> Self {
        self.rootfs = Some(rootfs.into());
        self
    }
    /// Name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Add an env variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.envs.insert(key.into(), value.into());
        self
    }
    /// Join a network.
    pub fn network(mut self, id_or_name: impl Into<String>) -> Self {
        self.networks.push(NetworkRef {
            id: id_or_name.into(),
        });
        self
    }
    /// Egress allow-list.
    pub fn egress(mut self, rules: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.egress = Some(rules.into_iter().map(Into::into).collect());
        self
    }
    /// Publish ports.
    pub fn ingress(mut self, enabled: bool) -> Self {
        self.ingress_enabled = Some(enabled);
        self
    }
    /// Idle auto-pause.
    pub fn auto_pause_after(mut self, secs: u32) -> Self {
        self.auto_pause_after_seconds = Some(secs);
        self
    }
    /// Root disk size.
    pub fn disk_mib(mut self, mib: u64) -> Self {
        self.disk_mib = Some(mib);
        self
    }
    /// Authorize an SSH key.
    pub fn ssh_pubkey(mut self, key: impl Into<String>) -> Self {
        self.ssh_pubkeys.push(key.into());
        self
    }
    /// Mount a disk.
    pub fn disk(mut self, disk_id: impl Into<String>, mount_path: impl Into<String>) -> Self {
        self.disks.push(DiskMountRequest {
            disk_id: disk_id.into(),
            mount_path: mount_path.into(),
            sub_path: None,
        });
        self
    }

    /// Everything checkable without asking the server.
    pub fn validate(&self) -> Result<()> {
        validate::shape("shape", &self.shape)?;
        if let Some(name) = &self.name {
            validate::sandbox_name("name", name)?;
        }
        validate::envs("envs", &self.envs)?;
        if let Some(secs) = self.auto_pause_after_seconds {
            validate::auto_pause("auto_pause_after_seconds", secs)?;
        }
        for net in &self.networks {
            validate::id("networks", &net.id)?;
        }
        for disk in &self.disks {
            validate::id("disks.disk_id", &disk.disk_id)?;
            validate::guest_path("disks.mount_path", &disk.mount_path)?;
        }
        if let Some(rules) = &self.egress {
            for rule in rules {
                crate::api::security::validate_egress_rule(rule)?;
            }
        }
        Ok(())
    }
}

/// Settings to change (E11). Unset fields are left alone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateSandbox {
    /// Publish ports or stop publishing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_enabled: Option<bool>,
    /// New idle auto-pause delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_pause_after_seconds: Option<u32>,
    /// Clear the auto-pause delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_auto_pause: Option<bool>,
}

impl UpdateSandbox {
    /// Check the values.
    pub fn validate(&self) -> Result<()> {
        if let Some(secs) = self.auto_pause_after_seconds {
            validate::auto_pause("auto_pause_after_seconds", secs)?;
            if self.disable_auto_pause == Some(true) {
                return Err(crate::Error::invalid(
                    "auto_pause",
                    "cannot both set and disable auto-pause",
                ));
            }
        }
        if self == &UpdateSandbox::default() {
            return Err(crate::Error::invalid("update", "nothing to change"));
        }
        Ok(())
    }
}

/// Options of a fork (E15). Unset fields are inherited from the source.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ForkOptions {
    /// Leave the child paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_paused: Option<bool>,
    /// Replace the SSH keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_pubkeys: Option<Vec<String>>,
    /// Replace the egress list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<String>>,
    /// Publish ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_enabled: Option<bool>,
    /// Replace the env.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envs: Option<BTreeMap<String, String>>,
}

/// Answer of a destroy (E12).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Destroyed {
    /// Sandbox id.
    pub id: String,
    /// `destroying` or `destroyed`.
    #[serde(default)]
    pub status: SandboxStatus,
}

/// Answer of a disk resize (E16).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resized {
    /// Sandbox id.
    pub id: String,
    /// New size, MiB.
    pub disk_mib: u64,
}

/// Answer of adding SSH keys (E17).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SshKeyCount {
    /// Keys authorized after the add.
    pub count: u32,
}

/// Filter of [`crate::Client::list_sandboxes`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListSandboxes {
    /// Only this status.
    pub status: Option<SandboxStatus>,
}
