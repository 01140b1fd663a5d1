//! Sandbox isolation: how a sandbox's processes and files are kept apart from the host
//! and from other sandboxes.
//!
//! * `namespaces` (Linux, root, cgroup v2): every command joins the sandbox's cgroup
//!   (freeze = pause, `cgroup.kill` = destroy) and runs in a private mount + UTS
//!   namespace where the sandbox's own `/root /work /workspace /tmp /home` directories
//!   are bind-mounted over the host's, plus any attached disks. Each sandbox has its own
//!   network namespace; when the host allows it (`ip`, and `nft`/`iptables` for NAT) a
//!   veth link gives it outbound access (`outbound.rs`), else it has loopback only.
//! * `fallback` (elsewhere, or `--isolation none`): each command is its own session /
//!   process group (pause = SIGSTOP, destroy = SIGKILL of every group), HOME and the
//!   working directory point into the sandbox directory. Guest paths outside the
//!   sandbox directory are NOT isolated.

mod fallback;
#[cfg(target_os = "linux")]
mod linux;
pub mod outbound;
mod paths;
mod usage;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::config::IsolationMode;
use crate::envelope::ApiError;

pub use outbound::{OutboundReach, SandboxLink};
pub use paths::{normalize_guest_path, PRIVATE_DIRS};
pub use usage::ResourceUsage;

/// The isolation actually in effect after startup probing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationKind {
    Namespaces,
    Fallback,
}

/// Host-wide isolation state: the mock's parent cgroup (namespaces mode).
#[derive(Debug)]
pub struct Isolation {
    kind: IsolationKind,
    /// `<cgroup2 mount>/createos-mock-<pid>` in namespaces mode.
    cgroup_parent: Option<PathBuf>,
    /// veth links + NAT for sandbox namespaces (namespaces mode only).
    outbound: Option<outbound::Outbound>,
}

impl Isolation {
    /// Resolves `mode` into the isolation to use, probing namespaces support.
    pub fn init(mode: IsolationMode, state_dir: &Path) -> anyhow::Result<Isolation> {
        if mode == IsolationMode::None {
            tracing::warn!(
                "isolation disabled (--isolation none): sandbox commands run as plain host processes; \
                 only /root /work /workspace /tmp /home are mapped into each sandbox's directory and \
                 guest paths outside it are NOT isolated"
            );
            return Ok(Isolation { kind: IsolationKind::Fallback, cgroup_parent: None, outbound: None });
        }
        #[cfg(target_os = "linux")]
        {
            match linux::probe(state_dir) {
                Ok(parent) => {
                    tracing::info!(cgroup = %parent.display(), "isolation: cgroup v2 + mount namespaces");
                    let outbound = outbound::Outbound::probe();
                    outbound.announce();
                    return Ok(Isolation {
                        kind: IsolationKind::Namespaces,
                        cgroup_parent: Some(parent),
                        outbound: Some(outbound),
                    });
                }
                Err(err) if mode == IsolationMode::Namespaces => {
                    anyhow::bail!("--isolation namespaces requested but unavailable: {err}");
                }
                Err(err) => {
                    tracing::warn!(
                        "namespace isolation unavailable ({err}); falling back to process groups: \
                         guest paths outside the sandbox directory are NOT isolated"
                    );
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
                "namespace isolation needs Linux; falling back to process groups: guest paths outside \
                 the sandbox directory are NOT isolated"
            );
        }
        Ok(Isolation { kind: IsolationKind::Fallback, cgroup_parent: None, outbound: None })
    }

    pub fn kind(&self) -> IsolationKind {
        self.kind
    }

    /// What sandbox processes reach beyond their own loopback. `None` in fallback
    /// mode, where they share the host's network.
    pub fn outbound_reach(&self) -> Option<OutboundReach> {
        match self.kind {
            IsolationKind::Fallback => None,
            IsolationKind::Namespaces => {
                Some(self.outbound.as_ref().map_or(OutboundReach::LoopbackOnly, outbound::Outbound::reach))
            }
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

fn remove_cgroup(path: &Path) {
    #[cfg(target_os = "linux")]
    linux::remove_cgroup(path);
    #[cfg(not(target_os = "linux"))]
    let _ = path;
}

/// An extra bind mount of an attached disk: host directory shown at a guest path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraMount {
    pub host: PathBuf,
    pub guest: String,
}

/// One sandbox's execution environment. Every process of the sandbox must be started
/// from [`SandboxRuntime::command`] and registered with [`SandboxRuntime::adopt`].
#[derive(Debug)]
pub struct SandboxRuntime {
    kind: IsolationKind,
    hostname: String,
    /// Sandbox directory holding `root/ work/ workspace/ tmp/ home/`.
    dir: PathBuf,
    /// The sandbox's create-time envs, applied to every command.
    base_env: BTreeMap<String, String>,
    cgroup: Option<PathBuf>,
    /// Process-group ids of commands started (each command is a session leader).
    groups: Mutex<Vec<i32>>,
    /// Attached disks, applied to commands started after the attach.
    mounts: Mutex<Vec<ExtraMount>>,
    /// Mount points created on the host for disks outside the private dirs.
    host_mountpoints: Mutex<Vec<PathBuf>>,
    /// The sandbox's network namespace (namespaces mode); `None` = host network.
    netns: Option<std::os::fd::OwnedFd>,
    /// The namespace's veth link to the host, when outbound network is available.
    link: Option<SandboxLink>,
}

/// The PATH every sandbox command gets.
pub const SANDBOX_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

impl SandboxRuntime {
    pub fn kind(&self) -> IsolationKind {
        self.kind
    }

    /// The sandbox's network namespace (`None`: processes share the host network).
    pub fn netns(&self) -> Option<&std::os::fd::OwnedFd> {
        self.netns.as_ref()
    }

    /// The namespace's link to the host (`None`: loopback only, or the host network in
    /// fallback mode).
    pub fn link(&self) -> Option<&SandboxLink> {
        self.link.as_ref()
    }

    /// The sandbox directory on the host (parent of `root/`, `tmp/`, …).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The hostname commands see.
    pub fn hostname(&self) -> &str {
        &self.hostname
    }

    /// The sandbox's create-time envs.
    pub fn base_env(&self) -> &BTreeMap<String, String> {
        &self.base_env
    }

    /// Maps a guest path to the host path holding it (attached disks first, then the
    /// private dirs, else the host path itself). 400 for relative paths, NUL or `..`.
    pub fn host_path(&self, guest: &str) -> Result<PathBuf, ApiError> {
        let guest = normalize_guest_path(guest)?;
        let mounts = self.mounts.lock().unwrap_or_else(|e| e.into_inner());
        Ok(paths::map_guest(&self.dir, &mounts, &guest))
    }

    /// Like [`host_path`](Self::host_path) but only for places a sandbox may write
    /// through the files API: the private dirs and attached disks (400 elsewhere, so
    /// the host's own files are never overwritten).
    pub fn writable_host_path(&self, guest: &str) -> Result<PathBuf, ApiError> {
        let guest = normalize_guest_path(guest)?;
        let mounts = self.mounts.lock().unwrap_or_else(|e| e.into_inner());
        if !paths::is_private(&guest) && !mounts.iter().any(|m| paths::is_under(&guest, &m.guest)) {
            return Err(ApiError::validation(
                "path",
                format!(
                    "the emulator only writes inside the sandbox's own directories ({}) and attached disks",
                    PRIVATE_DIRS.join(", ")
                ),
            ));
        }
        Ok(paths::map_guest(&self.dir, &mounts, &guest))
    }

    /// A command configured to run inside the sandbox: its own session and process
    /// group, the sandbox's cgroup and mount/UTS namespace (namespaces mode), env =
    /// PATH, HOME=/root, HOSTNAME, TERM, the sandbox envs, then `env` on top; working
    /// directory `cwd` (guest path, default `/root`). Register the spawned child with
    /// [`adopt`](Self::adopt). Do not call `setsid`/`setpgid`/`current_dir` on it
    /// again: the child is already a session leader (a PTY child only needs
    /// `TIOCSCTTY`, which a later `pre_exec` may do).
    pub fn command(
        &self,
        program: &str,
        args: &[String],
        cwd: Option<&str>,
        env: &BTreeMap<String, String>,
    ) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args);
        cmd.env_clear();
        let mut full_env: BTreeMap<String, String> = BTreeMap::new();
        full_env.insert("PATH".into(), SANDBOX_PATH.into());
        full_env.insert("HOSTNAME".into(), self.hostname.clone());
        full_env.insert("TERM".into(), "xterm-256color".into());
        full_env.insert("LANG".into(), "C.UTF-8".into());
        full_env.insert("USER".into(), "root".into());
        full_env.insert("SHELL".into(), "/bin/sh".into());
        let cwd = cwd.filter(|c| !c.is_empty()).unwrap_or("/root");
        match self.kind {
            IsolationKind::Namespaces => {
                full_env.insert("HOME".into(), "/root".into());
            }
            IsolationKind::Fallback => {
                let dir = &self.dir;
                full_env.insert("HOME".into(), dir.join("root").display().to_string());
                full_env.insert("TMPDIR".into(), dir.join("tmp").display().to_string());
                if let Ok(host_path) = std::env::var("PATH") {
                    full_env.insert("PATH".into(), format!("{SANDBOX_PATH}:{host_path}"));
                }
            }
        }
        for (k, v) in self.base_env.iter().chain(env.iter()) {
            full_env.insert(k.clone(), v.clone());
        }
        cmd.envs(&full_env);
        match self.kind {
            #[cfg(target_os = "linux")]
            IsolationKind::Namespaces => {
                let mounts = self.mounts.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let guest_cwd = normalize_guest_path(cwd).unwrap_or_else(|_| "/root".to_string());
                linux::configure(&mut cmd, &self.dir, self.cgroup.as_deref(), &mounts, &self.hostname, &guest_cwd);
                if let Some(ns) = &self.netns {
                    let raw = std::os::fd::AsRawFd::as_raw_fd(ns);
                    // SAFETY: enter_in_child only issues setns(2) (async-signal-safe).
                    unsafe {
                        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                            crate::process::netns::enter_in_child(raw)
                        });
                    }
                }
            }
            _ => {
                let mounts = self.mounts.lock().unwrap_or_else(|e| e.into_inner());
                let host_cwd = normalize_guest_path(cwd)
                    .map(|g| paths::map_guest(&self.dir, &mounts, &g))
                    .unwrap_or_else(|_| self.dir.join("root"));
                cmd.current_dir(host_cwd);
                fallback::configure(&mut cmd);
            }
        }
        cmd
    }

    /// Records a spawned child (its pid is also its process-group id).
    pub fn adopt(&self, pid: u32) {
        let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        groups.retain(|&g| fallback::group_alive(g));
        groups.push(pid as i32);
    }

    /// Stops every process of the sandbox (pause).
    pub fn freeze(&self) {
        if let Some(cg) = &self.cgroup {
            #[cfg(target_os = "linux")]
            if linux::set_frozen(cg, true).is_ok() {
                return;
            }
            #[cfg(not(target_os = "linux"))]
            let _ = cg;
        }
        fallback::signal_groups(&self.live_groups(), fallback::Stop::Stop);
    }

    /// Continues every process of the sandbox (resume).
    pub fn thaw(&self) {
        if let Some(cg) = &self.cgroup {
            #[cfg(target_os = "linux")]
            if linux::set_frozen(cg, false).is_ok() {
                return;
            }
            #[cfg(not(target_os = "linux"))]
            let _ = cg;
        }
        fallback::signal_groups(&self.live_groups(), fallback::Stop::Continue);
    }

    /// Kills every process of the sandbox.
    pub fn kill_all(&self) {
        if let Some(cg) = &self.cgroup {
            #[cfg(target_os = "linux")]
            linux::kill_cgroup(cg);
            #[cfg(not(target_os = "linux"))]
            let _ = cg;
        }
        fallback::kill_groups(&self.live_groups());
    }

    /// Pids of the sandbox's live processes.
    pub fn live_pids(&self) -> Vec<u32> {
        if let Some(cg) = &self.cgroup {
            #[cfg(target_os = "linux")]
            return linux::cgroup_pids(cg);
            #[cfg(not(target_os = "linux"))]
            let _ = cg;
        }
        fallback::group_members(&self.live_groups())
    }

    /// CPU time, resident memory and process count of the sandbox right now.
    pub fn resource_usage(&self) -> ResourceUsage {
        let pids = self.live_pids();
        let mut usage = usage::from_pids(&pids);
        if let Some(cg) = &self.cgroup {
            #[cfg(target_os = "linux")]
            if let Some(cpu) = linux::cgroup_cpu_seconds(cg) {
                usage.cpu_seconds = cpu;
            }
            #[cfg(not(target_os = "linux"))]
            let _ = cg;
        }
        usage
    }

    fn live_groups(&self) -> Vec<i32> {
        let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        groups.retain(|&g| fallback::group_alive(g));
        groups.clone()
    }

    /// Shows the host directory `host` at guest path `guest` for commands started from
    /// now on (disk attach). Namespaces: a bind mount in each new command's mount
    /// namespace; fallback: a symlink inside the sandbox directory (private dirs only).
    pub fn add_mount(&self, host: &Path, guest: &str) -> Result<(), ApiError> {
        let guest = normalize_guest_path(guest)?;
        std::fs::create_dir_all(host)?;
        let private_target = paths::is_private(&guest);
        match self.kind {
            IsolationKind::Namespaces => {
                let target = if private_target {
                    paths::map_guest(&self.dir, &[], &guest)
                } else {
                    PathBuf::from(&guest)
                };
                if !target.exists() {
                    std::fs::create_dir_all(&target)?;
                    if !private_target {
                        self.host_mountpoints.lock().unwrap_or_else(|e| e.into_inner()).push(target);
                    }
                }
            }
            IsolationKind::Fallback => {
                if private_target {
                    let link = paths::map_guest(&self.dir, &[], &guest);
                    if let Some(parent) = link.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    if link.symlink_metadata().is_ok() {
                        let _ = std::fs::remove_dir(&link).or_else(|_| std::fs::remove_file(&link));
                    }
                    fallback::symlink_dir(host, &link)?;
                }
            }
        }
        self.mounts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ExtraMount { host: host.to_path_buf(), guest });
        Ok(())
    }

    /// Undoes [`add_mount`](Self::add_mount) for `guest`.
    pub fn remove_mount(&self, guest: &str) {
        let Ok(guest) = normalize_guest_path(guest) else { return };
        let mut mounts = self.mounts.lock().unwrap_or_else(|e| e.into_inner());
        mounts.retain(|m| m.guest != guest);
        if self.kind == IsolationKind::Fallback && paths::is_private(&guest) {
            let link = paths::map_guest(&self.dir, &mounts, &guest);
            if link.symlink_metadata().map(|m| m.file_type().is_symlink()).unwrap_or(false) {
                let _ = std::fs::remove_file(&link);
            }
        }
    }

    /// Kills everything, removes the cgroup, host mount points and (optionally) files.
    pub fn destroy(&self, remove_files: bool) {
        self.kill_all();
        if let Some(link) = &self.link {
            link.teardown();
        }
        if let Some(cg) = &self.cgroup {
            remove_cgroup(cg);
        }
        for mp in self.host_mountpoints.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            let _ = std::fs::remove_dir(mp);
        }
        if remove_files {
            // Disk symlinks must not be followed: remove_dir_all does not follow them.
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
