//! One sandbox's execution environment ([`SandboxRuntime`]): how its commands are
//! built, entered and tracked, its attached disks, pause/resume/destroy, and the file
//! access of the emulator as the sandbox's root. [`Isolation`](super::Isolation) creates it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use super::paths::{self, normalize_guest_path, ExtraMount, PRIVATE_DIRS, SANDBOX_PATH};
use super::report::IsolationKind;
use super::usage::{self, ResourceUsage};
#[cfg(target_os = "linux")]
use super::{boundary, enter, layers, linux};
use super::{fallback, SandboxLink};
use crate::envelope::ApiError;

pub(super) fn remove_cgroup(path: &Path) {
    #[cfg(target_os = "linux")]
    linux::remove_cgroup(path);
    #[cfg(not(target_os = "linux"))]
    let _ = path;
}

/// One sandbox's execution environment. Every process of the sandbox must be started
/// from [`SandboxRuntime::command`] and registered with [`SandboxRuntime::adopt`].
#[derive(Debug)]
pub struct SandboxRuntime {
    pub(super) kind: IsolationKind,
    pub(super) hostname: String,
    /// Sandbox directory holding `root/ work/ workspace/ tmp/ home/`.
    pub(super) dir: PathBuf,
    /// The sandbox's create-time envs, applied to every command.
    pub(super) base_env: BTreeMap<String, String>,
    pub(super) cgroup: Option<PathBuf>,
    /// Process-group ids of commands started (each command is a session leader).
    pub(super) groups: Mutex<Vec<i32>>,
    /// Attached disks (an isolated sandbox's running processes see a change at once,
    /// other modes' commands from their next start).
    pub(super) mounts: Mutex<Vec<ExtraMount>>,
    /// Mount points created on the host for disks outside the private dirs.
    pub(super) host_mountpoints: Mutex<Vec<PathBuf>>,
    /// The sandbox's network namespace (namespaces mode); `None` = host network.
    pub(super) netns: Option<std::os::fd::OwnedFd>,
    /// The namespace's veth link to the host, when outbound network is available.
    pub(super) link: Option<SandboxLink>,
    /// The emulator's boundary, when sandboxes are isolated.
    #[cfg(target_os = "linux")]
    pub(super) boundary: Option<std::sync::Arc<boundary::Boundary>>,
    /// This sandbox's holder (isolated sandboxes).
    #[cfg(target_os = "linux")]
    pub(super) side: boundary::SandboxBoundary,
}

/// While alive, commands spawned by this thread start in their sandbox's PID namespace.
/// Create it right before the spawn and drop it right after: nothing else may run on the
/// thread meanwhile (no `.await`).
pub struct SpawnScope<'a> {
    #[cfg(target_os = "linux")]
    _guard: Option<enter::PidNamespaceGuard<'a>>,
    #[cfg(not(target_os = "linux"))]
    _runtime: std::marker::PhantomData<&'a ()>,
}

/// Runs `f` as the sandbox's root when the sandbox is isolated (file access from the
/// emulator: the kernel checks it as it checks the sandbox's own root on host files).
pub fn as_sandbox_root<T>(
    runtime: &SandboxRuntime,
    f: impl FnOnce() -> std::io::Result<T>,
) -> std::io::Result<T> {
    #[cfg(target_os = "linux")]
    if runtime.boundary.is_some() {
        if !enter::SandboxRootGuard::active() {
            // Starting the holder needs the emulator's own privileges: do it first.
            if let Some(view) = runtime.view_root() {
                view?;
            }
        }
        let _guard = enter::SandboxRootGuard::enter()?;
        return f();
    }
    let _ = runtime;
    f()
}

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

    /// True when the normalised guest path lies on an attached disk that the sandbox's own
    /// view does not show (its live mount failed): its host directory holds it.
    pub fn on_disk(&self, guest: &str) -> bool {
        let mounts = self
            .mounts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let Some(disk) = mounts
            .iter()
            .filter(|m| paths::is_under(guest, &m.guest))
            .max_by_key(|m| m.guest.len())
        else {
            return false;
        };
        #[cfg(target_os = "linux")]
        if self.boundary.is_some() {
            // The view is started here when needed: it then shows every disk.
            if let Some(Err(_)) = self.view_root() {
                return true;
            }
            return !self
                .side
                .holder_mounts()
                .is_some_and(|shown| shown.contains(disk));
        }
        let _ = disk;
        true
    }

    /// Maps a guest path to the host path holding it (attached disks first, then the
    /// private dirs, else the host path itself). 400 for relative paths, NUL or `..`.
    pub fn host_path(&self, guest: &str) -> Result<PathBuf, ApiError> {
        let guest = normalize_guest_path(guest)?;
        let mounts = self.mounts.lock().unwrap_or_else(|e| e.into_inner());
        Ok(paths::map_guest(&self.dir, &mounts, &guest))
    }

    /// True when the sandbox is a full boundary: its files are seen through
    /// [`view_root`](Self::view_root), its commands join its namespaces.
    pub fn isolated(&self) -> bool {
        #[cfg(target_os = "linux")]
        return self.boundary.is_some();
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// The root of the sandbox's own filesystem view (`O_PATH`): the host's root read-only
    /// with the sandbox's private dirs, layers and disks, as its processes see it. `None`
    /// when the sandbox is not isolated (guest paths map to host paths).
    pub fn view_root(&self) -> Option<std::io::Result<std::sync::Arc<std::os::fd::OwnedFd>>> {
        #[cfg(target_os = "linux")]
        if let Some(b) = &self.boundary {
            return Some(self.with_place(|place| self.side.view_root(b, place)));
        }
        None
    }

    /// Where this sandbox lives, for its holder.
    #[cfg(target_os = "linux")]
    fn with_place<T>(&self, f: impl FnOnce(&boundary::Place<'_>) -> T) -> T {
        let mounts = self
            .mounts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        f(&boundary::Place {
            dir: &self.dir,
            cgroup: self.cgroup.as_deref(),
            netns: self.netns.as_ref(),
            hostname: &self.hostname,
            mounts: &mounts,
        })
    }

    /// Scope for spawning one of this sandbox's commands (see [`SpawnScope`]).
    pub fn spawn_scope(&self) -> SpawnScope<'_> {
        #[cfg(target_os = "linux")]
        return SpawnScope {
            _guard: self
                .boundary
                .as_ref()
                .and_then(|b| self.side.pid_namespace(b)),
        };
        #[cfg(not(target_os = "linux"))]
        SpawnScope {
            _runtime: std::marker::PhantomData,
        }
    }

    /// Makes a file the emulator wrote into the sandbox directory the sandbox root's own.
    pub fn give_to_sandbox(&self, host: &Path) {
        #[cfg(target_os = "linux")]
        if self.kind == IsolationKind::Namespaces {
            let _ = layers::own(host);
        }
        let _ = host;
    }

    /// Like [`host_path`](Self::host_path) but only for places a sandbox may write
    /// through the files API: the private dirs and attached disks (400 elsewhere, so
    /// the host's own files are never overwritten). An isolated sandbox writes anywhere
    /// its own processes may (the kernel refuses the read-only host root).
    pub fn writable_host_path(&self, guest: &str) -> Result<PathBuf, ApiError> {
        let guest = normalize_guest_path(guest)?;
        let mounts = self.mounts.lock().unwrap_or_else(|e| e.into_inner());
        if !self.isolated()
            && !paths::is_private(&guest)
            && !mounts.iter().any(|m| paths::is_under(&guest, &m.guest))
        {
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
            IsolationKind::Namespaces if self.boundary.is_some() => {
                let guest_cwd = normalize_guest_path(cwd).unwrap_or_else(|_| "/root".to_string());
                if let Some(b) = &self.boundary {
                    if let Err(err) =
                        self.with_place(|place| self.side.configure(b, place, &mut cmd, &guest_cwd))
                    {
                        tracing::warn!("sandbox namespaces unavailable: {err}");
                        fail_spawn(&mut cmd, err);
                    }
                }
            }
            #[cfg(target_os = "linux")]
            IsolationKind::Namespaces => {
                let mounts = self
                    .mounts
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                let guest_cwd = normalize_guest_path(cwd).unwrap_or_else(|_| "/root".to_string());
                linux::configure(
                    &mut cmd,
                    &self.dir,
                    self.cgroup.as_deref(),
                    &mounts,
                    &self.hostname,
                    &guest_cwd,
                );
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

    /// Kills every process of the sandbox (an isolated sandbox's namespaces end too and
    /// are made anew by the next command).
    pub fn kill_all(&self) {
        if let Some(cg) = &self.cgroup {
            #[cfg(target_os = "linux")]
            linux::kill_cgroup(cg);
            #[cfg(not(target_os = "linux"))]
            let _ = cg;
        }
        fallback::kill_groups(&self.live_groups());
        #[cfg(target_os = "linux")]
        self.side.stop();
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

    /// Shows the host directory `host` at guest path `guest` (disk attach). Isolated: a
    /// mount in the sandbox's mount namespace, seen by its running processes too
    /// (`live_mounts.rs`); namespaces without a boundary: a bind mount in each new
    /// command's mount namespace; fallback: a symlink inside the sandbox directory
    /// (private dirs only), seen at once.
    pub fn add_mount(&self, host: &Path, guest: &str) -> Result<(), ApiError> {
        let guest = normalize_guest_path(guest)?;
        std::fs::create_dir_all(host)?;
        // The sandbox's root writes to its disks.
        self.give_to_sandbox(host);
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
                        self.host_mountpoints
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(target);
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
        let mount = ExtraMount {
            host: host.to_path_buf(),
            guest,
        };
        self.mounts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(mount.clone());
        #[cfg(target_os = "linux")]
        if self.boundary.is_some() {
            if let Err(err) = self.side.attach(&mount) {
                tracing::warn!(guest = %mount.guest, "cannot mount a disk in a running sandbox: {err}");
                self.renew_view_when_idle();
            }
        }
        Ok(())
    }

    /// After a failed live change: an isolated sandbox with nothing running gets new
    /// namespaces at its next use, which show the current disks (with processes running,
    /// the files API uses the disks' host directories until they end).
    #[cfg(target_os = "linux")]
    fn renew_view_when_idle(&self) {
        if self.live_pids().is_empty() {
            self.side.stop();
        }
    }

    /// Undoes [`add_mount`](Self::add_mount) for `guest` (an isolated sandbox's running
    /// processes no longer see the disk either).
    pub fn remove_mount(&self, guest: &str) {
        let Ok(guest) = normalize_guest_path(guest) else {
            return;
        };
        let mut mounts = self.mounts.lock().unwrap_or_else(|e| e.into_inner());
        mounts.retain(|m| m.guest != guest);
        #[cfg(target_os = "linux")]
        if self.boundary.is_some() {
            drop(mounts);
            if let Err(err) = self.side.detach(&guest) {
                tracing::warn!(guest = %guest, "cannot unmount a disk in a running sandbox: {err}");
                self.renew_view_when_idle();
            }
            return;
        }
        if self.kind == IsolationKind::Fallback && paths::is_private(&guest) {
            let link = paths::map_guest(&self.dir, &mounts, &guest);
            if link
                .symlink_metadata()
                .map(|m| m.file_type().is_symlink())
                .unwrap_or(false)
            {
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
        for mp in self
            .host_mountpoints
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = std::fs::remove_dir(mp);
        }
        if remove_files {
            // Disk symlinks must not be followed: remove_dir_all does not follow them.
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Makes `cmd` fail at spawn with `err` (its sandbox cannot be entered).
#[cfg(target_os = "linux")]
fn fail_spawn(cmd: &mut Command, err: std::io::Error) {
    use std::os::unix::process::CommandExt;
    let code = err.raw_os_error().unwrap_or(nix::libc::EIO);
    // SAFETY: the hook allocates nothing and only returns an error.
    unsafe {
        cmd.pre_exec(move || Err(std::io::Error::from_raw_os_error(code)));
    }
}
