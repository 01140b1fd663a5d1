//! Sandbox isolation: how a sandbox's processes and files are kept apart from the host
//! and from other sandboxes.
//!
//! * `namespaces` with a boundary (Linux, root, cgroup v2, bubblewrap, user namespaces):
//!   each sandbox is a set of namespaces built by bubblewrap and kept by a holder
//!   (`holder.rs`): its own user namespace (its root is an unprivileged host uid), PID
//!   namespace with `/proc`, IPC and UTS namespaces, and a mount namespace with the host's
//!   root read-only, private `/root /work /workspace /tmp /home /var/tmp`, and overlays on
//!   `/etc /usr/local /opt` (`layers.rs`). Every command joins them and runs under a
//!   seccomp filter with `no_new_privs` (`enter.rs`, `seccomp.rs`), in the sandbox's cgroup
//!   (freeze = pause, `cgroup.kill` = destroy) and network namespace; when the host allows
//!   it (`ip`, and `nft`/`iptables` for NAT) a veth link gives it outbound access
//!   (`outbound.rs`), else it has loopback only. The files API and SFTP resolve paths in
//!   the sandbox's own mount namespace and act with the sandbox root's host uid.
//! * `namespaces` without a boundary (no bubblewrap or no user namespaces): commands run
//!   in a private mount + UTS namespace with the private dirs bound over the host's, as an
//!   unprivileged host uid with `no_new_privs` and the seccomp filter. The rest of the host
//!   is visible (read as an unprivileged user) and not isolated.
//! * `fallback` (elsewhere, or `--isolation none`): each command is its own session /
//!   process group (pause = SIGSTOP, destroy = SIGKILL of every group), HOME and the
//!   working directory point into the sandbox directory. Guest paths outside the
//!   sandbox directory are NOT isolated.
//!
//! [`Isolation::report`] says which of these is in effect ([`IsolationReport`]).

#[cfg(target_os = "linux")]
mod boundary;
#[cfg(target_os = "linux")]
mod enter;
mod fallback;
#[cfg(target_os = "linux")]
mod holder;
#[cfg(target_os = "linux")]
pub mod layers;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod live_mounts;
pub mod outbound;
mod paths;
mod report;
mod runtime;
#[cfg(target_os = "linux")]
mod seccomp;
mod usage;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::config::IsolationMode;

pub use outbound::{OutboundReach, SandboxLink};
pub use paths::{normalize_guest_path, ExtraMount, PRIVATE_DIRS, SANDBOX_PATH};
pub use report::{IsolationKind, IsolationReport};
use runtime::remove_cgroup;
pub use runtime::{as_sandbox_root, SandboxRuntime, SpawnScope};
pub use usage::ResourceUsage;

/// Host-wide isolation state: the mock's parent cgroup (namespaces mode).
#[derive(Debug)]
pub struct Isolation {
    kind: IsolationKind,
    /// `<cgroup2 mount>/createos-mock-<pid>` in namespaces mode.
    cgroup_parent: Option<PathBuf>,
    /// veth links + NAT for sandbox namespaces (namespaces mode only).
    outbound: Option<outbound::Outbound>,
    /// The boundary of isolated sandboxes (namespaces mode, when the host allows it).
    #[cfg(target_os = "linux")]
    boundary: Option<std::sync::Arc<boundary::Boundary>>,
    report: IsolationReport,
}

impl Isolation {
    fn unisolated(report: IsolationReport) -> Isolation {
        Isolation {
            kind: IsolationKind::Fallback,
            cgroup_parent: None,
            outbound: None,
            #[cfg(target_os = "linux")]
            boundary: None,
            report,
        }
    }

    /// Resolves `mode` into the isolation to use, probing what the host allows. When
    /// sandboxes cannot be isolated this says so once, here.
    pub fn init(mode: IsolationMode, state_dir: &Path) -> anyhow::Result<Isolation> {
        if mode == IsolationMode::None {
            tracing::info!(
                "isolation disabled (--isolation none): sandbox commands run as plain host processes; \
                 only /root /work /workspace /tmp /home /var/tmp are mapped into each sandbox's directory"
            );
            return Ok(Isolation::unisolated(IsolationReport::none(
                "none (--isolation none): plain host processes",
            )));
        }
        #[cfg(target_os = "linux")]
        {
            match linux::probe(state_dir) {
                Ok(parent) => {
                    let outbound = outbound::Outbound::probe();
                    outbound.announce();
                    let (boundary, report) = match boundary::Boundary::probe(state_dir, &parent) {
                        Ok(b) => {
                            let report = IsolationReport {
                                isolated: true,
                                mechanism: format!(
                                    "{}: user, PID, mount, IPC, UTS and network namespaces; read-only host root \
                                     with private /root /work /workspace /tmp /home /var/tmp and overlays on \
                                     /etc /usr/local /opt; seccomp; cgroup v2",
                                    b.version
                                ),
                                missing: Vec::new(),
                            };
                            tracing::debug!(cgroup = %parent.display(), "isolation: {}", report.mechanism);
                            (Some(std::sync::Arc::new(b)), report)
                        }
                        Err(err) if mode == IsolationMode::Namespaces => {
                            remove_cgroup(&parent);
                            anyhow::bail!("--isolation namespaces requested but sandboxes cannot be isolated: {err}");
                        }
                        Err(err) => {
                            let report = IsolationReport {
                                isolated: false,
                                mechanism: "mount, UTS and network namespaces; unprivileged host uid, no_new_privs, \
                                            seccomp; cgroup v2"
                                    .into(),
                                missing: vec![
                                    format!("user and PID namespaces ({err})"),
                                    "read-only host root: host files outside the private dirs are visible, \
                                     guarded only by their permissions"
                                        .into(),
                                    "private /etc /usr/local /opt".into(),
                                ],
                            };
                            tracing::warn!(
                                "sandboxes are only partly isolated ({err}): host processes and host files \
                                 outside /root /work /workspace /tmp /home /var/tmp are visible to them. Install \
                                 bubblewrap (`bwrap`) and allow user namespaces for a full boundary"
                            );
                            (None, report)
                        }
                    };
                    Ok(Isolation {
                        kind: IsolationKind::Namespaces,
                        cgroup_parent: Some(parent),
                        outbound: Some(outbound),
                        boundary,
                        report,
                    })
                }
                Err(err) if mode == IsolationMode::Namespaces => {
                    anyhow::bail!("--isolation namespaces requested but unavailable: {err}");
                }
                Err(err) => {
                    tracing::warn!(
                        "sandboxes are NOT isolated ({err}): their commands run as plain host processes that \
                         see and can change the host's files. Run the emulator as root on Linux with cgroup v2 \
                         and bubblewrap for isolated sandboxes"
                    );
                    Ok(Isolation::unisolated(IsolationReport::none(&format!(
                        "process groups only (namespaces unavailable: {err})"
                    ))))
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = state_dir;
            if mode == IsolationMode::Namespaces {
                anyhow::bail!("--isolation namespaces requested but this is not Linux");
            }
            tracing::warn!(
                "sandboxes are NOT isolated (isolation needs Linux): their commands run as plain host \
                 processes that see and can change the host's files"
            );
            Ok(Isolation::unisolated(IsolationReport::none(
                "process groups only (not Linux)",
            )))
        }
    }

    /// What this emulator isolates.
    pub fn report(&self) -> &IsolationReport {
        &self.report
    }

    /// True when sandboxes are a full boundary (see [`IsolationReport::isolated`]).
    pub fn is_isolated(&self) -> bool {
        self.report.isolated
    }

    pub fn kind(&self) -> IsolationKind {
        self.kind
    }

    /// What sandbox processes reach beyond their own loopback. `None` in fallback
    /// mode, where they share the host's network.
    pub fn outbound_reach(&self) -> Option<OutboundReach> {
        match self.kind {
            IsolationKind::Fallback => None,
            IsolationKind::Namespaces => Some(
                self.outbound
                    .as_ref()
                    .map_or(OutboundReach::LoopbackOnly, outbound::Outbound::reach),
            ),
        }
    }

    /// Creates the runtime of a new sandbox whose files live under `dir`
    /// (sub-directories `root work workspace tmp home` are created if missing).
    pub fn new_runtime(
        &self,
        sandbox_id: &str,
        hostname: &str,
        dir: &Path,
        envs: BTreeMap<String, String>,
    ) -> std::io::Result<SandboxRuntime> {
        paths::create_private_dirs(dir)?;
        #[cfg(target_os = "linux")]
        if self.kind == IsolationKind::Namespaces {
            // The sandbox's root owns its directories (host uid `SANDBOX_ID_BASE`).
            if self.boundary.is_some() {
                layers::create_sandbox_layers(dir)?;
            }
            paths::own_private_dirs(dir)?;
        }
        let cgroup = match &self.cgroup_parent {
            Some(parent) => {
                let cg = parent.join(sandbox_id);
                std::fs::create_dir_all(&cg)?;
                Some(cg)
            }
            None => None,
        };
        // Own network view per sandbox (crate::process::netns), linked to the host when
        // the host allows it (outbound.rs).
        let netns = match self.kind {
            IsolationKind::Namespaces => match crate::process::netns::create() {
                Ok(fd) => Some(fd),
                Err(err) => {
                    tracing::warn!("no network namespace for sandbox {sandbox_id} ({err}); it shares the host network");
                    None
                }
            },
            IsolationKind::Fallback => None,
        };
        let link = match (&netns, &self.outbound) {
            (Some(ns), Some(outbound)) => outbound.attach(ns),
            _ => None,
        };
        Ok(SandboxRuntime {
            netns,
            link,
            kind: self.kind,
            hostname: hostname.to_string(),
            dir: dir.to_path_buf(),
            base_env: envs,
            cgroup,
            groups: Mutex::new(Vec::new()),
            mounts: Mutex::new(Vec::new()),
            host_mountpoints: Mutex::new(Vec::new()),
            #[cfg(target_os = "linux")]
            boundary: self.boundary.clone(),
            #[cfg(target_os = "linux")]
            side: boundary::SandboxBoundary::default(),
        })
    }

    /// Removes the mock's parent cgroup (after every sandbox was removed).
    pub fn cleanup(&self) {
        if let Some(parent) = &self.cgroup_parent {
            if let Ok(entries) = std::fs::read_dir(parent) {
                for entry in entries.flatten() {
                    if entry.path().is_dir() {
                        remove_cgroup(&entry.path());
                    }
                }
            }
            remove_cgroup(parent);
        }
    }
}
