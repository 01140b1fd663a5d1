//! The boundary of isolated sandboxes: what the host allows (probed once at start) and
//! each sandbox's holder, started on first use and again after a kill.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use nix::libc;

use super::enter::{self, JoinFds, PidNamespaceGuard};
use super::holder::{self, Holder, HolderSpec};
use super::layers::{self, BaseLayers};
use super::live_mounts;
use super::paths::{self, ExtraMount};
use super::seccomp::Filters;

/// Emulator-wide state of the boundary.
#[derive(Debug)]
pub struct Boundary {
    bwrap: PathBuf,
    pub version: String,
    base: BaseLayers,
    state_dir: PathBuf,
    own_pidns: OwnedFd,
    pub filters: Arc<Filters>,
}

fn open_own_pidns() -> std::io::Result<OwnedFd> {
    // SAFETY: open with a literal path; the descriptor is owned by the result.
    let fd = unsafe {
        libc::open(
            c"/proc/self/ns/pid".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Boundary {
    /// Checks that isolated sandboxes work here (a probe sandbox runs one command).
    pub fn probe(state_dir: &Path, cgroup_parent: &Path) -> Result<Boundary, String> {
        let bwrap = holder::find_bwrap().ok_or("bubblewrap (`bwrap`) is not installed")?;
        let version = Command::new(&bwrap)
            .arg("--version")
            .env_clear()
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .map_err(|e| format!("cannot run {}: {e}", bwrap.display()))?;
        if !Path::new("/dev/shm").is_dir() {
            return Err("/dev/shm is missing".into());
        }
        let filters = Arc::new(Filters::build()?);
        let own_pidns = open_own_pidns()
            .map_err(|e| format!("cannot open the emulator's PID namespace: {e}"))?;
        let base = BaseLayers::build(state_dir)
            .map_err(|e| format!("cannot prepare the /etc, /usr/local, /opt layers: {e}"))?;
        let boundary = Boundary {
            bwrap,
            version,
            base,
            state_dir: state_dir.to_path_buf(),
            own_pidns,
            filters,
        };
        let dir = state_dir.join(".boundary-probe");
        let cg = cgroup_parent.join("boundary-probe");
        let outcome = boundary.run_probe(&dir, &cg);
        super::linux::remove_cgroup(&cg);
        let _ = std::fs::remove_dir_all(&dir);
        outcome.map(|()| boundary)
    }

    fn run_probe(&self, dir: &Path, cg: &Path) -> Result<(), String> {
        super::paths::create_private_dirs(dir).map_err(|e| format!("probe dir: {e}"))?;
        layers::create_sandbox_layers(dir).map_err(|e| format!("probe layers: {e}"))?;
        super::paths::own_private_dirs(dir).map_err(|e| format!("probe dir: {e}"))?;
        std::fs::create_dir_all(cg).map_err(|e| format!("probe cgroup: {e}"))?;
        let side = SandboxBoundary::default();
        let place = Place {
            dir,
            cgroup: Some(cg),
            netns: None,
            hostname: "probe",
            mounts: &[],
        };
        let mut cmd = Command::new("/bin/sh");
        cmd.args([
            "-c",
            "test \"$(id -u)\" = 0 && test -d /proc/1 && test -d /var/tmp",
        ]);
        cmd.env_clear().env("PATH", super::paths::SANDBOX_PATH);
        side.configure(self, &place, &mut cmd, "/")
            .map_err(|e| format!("probe sandbox: {e}"))?;
        let status = {
            let _scope = side.pid_namespace(self);
            cmd.status()
        };
        side.stop();
        match status {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(format!("probe command failed: {s}")),
            Err(e) => Err(format!("probe command could not start: {e}")),
        }
    }
}

/// Where a sandbox lives, for starting its holder.
pub struct Place<'a> {
    pub dir: &'a Path,
    pub cgroup: Option<&'a Path>,
    pub netns: Option<&'a OwnedFd>,
    pub hostname: &'a str,
    pub mounts: &'a [ExtraMount],
}

/// One sandbox's holder (started on first use).
#[derive(Debug, Default)]
pub struct SandboxBoundary {
    holder: Mutex<Option<Holder>>,
}

impl SandboxBoundary {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Holder>> {
        self.holder.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The running holder, started (or restarted: after a kill, or when its mounts differ
    /// from the sandbox's disks, a live change having failed, while nothing ran) as needed.
    /// Returns its namespaces.
    fn ensure(
        &self,
        b: &Boundary,
        place: &Place<'_>,
        idle: bool,
    ) -> std::io::Result<holder::Namespaces> {
        let mut slot = self.lock();
        let reuse = match slot.as_mut() {
            Some(h) => h.alive() && (h.mounts == place.mounts || !idle),
            None => false,
        };
        if !reuse {
            if let Some(old) = slot.take() {
                old.stop();
            }
            let holder_cg = place.cgroup.map(|cg| cg.join("holder"));
            if let Some(cg) = &holder_cg {
                std::fs::create_dir_all(cg)?;
            }
            let spec = HolderSpec {
                bwrap: &b.bwrap,
                base: &b.base,
                state_dir: &b.state_dir,
                dir: place.dir,
                cgroup: holder_cg.as_deref(),
                netns: place.netns.map(|n| n.as_raw_fd()),
                hostname: place.hostname,
                mounts: place.mounts,
            };
            *slot = Some(holder::start(&spec)?);
        }
        let h = slot
            .as_ref()
            .ok_or_else(|| std::io::Error::other("no holder"))?;
        Ok(holder::Namespaces {
            user: h.ns.user.clone(),
            mnt: h.ns.mnt.clone(),
            pid: h.ns.pid.clone(),
            uts: h.ns.uts.clone(),
            ipc: h.ns.ipc.clone(),
            root: h.ns.root.clone(),
        })
    }

    /// Makes `cmd` run inside the sandbox (working directory `cwd`, a guest path).
    pub fn configure(
        &self,
        b: &Boundary,
        place: &Place<'_>,
        cmd: &mut Command,
        cwd: &str,
    ) -> std::io::Result<()> {
        let idle = place
            .cgroup
            .map(|cg| super::linux::cgroup_pids(cg).is_empty())
            .unwrap_or(false);
        let ns = self.ensure(b, place, idle)?;
        let procs = place
            .cgroup
            .map(|cg| layers::cstring(&cg.join("cgroup.procs")));
        let fds = JoinFds {
            net: place.netns.map(|n| n.as_raw_fd()),
            pid: ns.pid.as_raw_fd(),
            user: ns.user.as_raw_fd(),
            mnt: ns.mnt.as_raw_fd(),
            uts: ns.uts.as_raw_fd(),
            ipc: ns.ipc.as_raw_fd(),
        };
        let keep = vec![ns.user, ns.mnt, ns.uts, ns.ipc, ns.pid];
        enter::configure(cmd, procs, fds, cwd, Arc::clone(&b.filters), keep);
        Ok(())
    }

    /// While the result lives, children forked by this thread start in the sandbox's PID
    /// namespace (none when the holder is not running).
    pub fn pid_namespace<'b>(&self, b: &'b Boundary) -> Option<PidNamespaceGuard<'b>> {
        let pid = self.lock().as_ref().map(|h| h.ns.pid.clone())?;
        match PidNamespaceGuard::enter(&pid, &b.own_pidns) {
            Ok(guard) => Some(guard),
            Err(err) => {
                tracing::warn!("cannot enter a sandbox's PID namespace: {err}");
                None
            }
        }
    }

    /// The root of the sandbox's filesystem view (its holder started as needed).
    pub fn view_root(&self, b: &Boundary, place: &Place<'_>) -> std::io::Result<Arc<OwnedFd>> {
        Ok(self.ensure(b, place, false)?.root)
    }

    /// The mounts the running holder shows (`None`: no holder runs).
    pub fn holder_mounts(&self) -> Option<Vec<ExtraMount>> {
        self.lock().as_ref().map(|h| h.mounts.clone())
    }

    /// Mounts the disk `m` in the running holder's namespace, for the processes already
    /// running too. The disks below its guest path are unmounted first and mounted again
    /// on top of it (a deeper disk stays on top, as when a holder starts). Nothing to do
    /// without a running holder (the next one is built with every disk) or when it already
    /// shows `m`.
    pub fn attach(&self, m: &ExtraMount) -> std::io::Result<()> {
        let mut slot = self.lock();
        let Some(h) = slot
            .as_mut()
            .filter(|h| h.mounts.iter().all(|shown| shown != m))
        else {
            return Ok(());
        };
        if !h.alive() {
            return Ok(());
        }
        let mut deepest_first = below(h, &m.guest);
        deepest_first.reverse();
        for d in &deepest_first {
            if let Err(err) = live_mounts::detach(&h.ns.mnt, &d.guest) {
                // Left in place: it stays on top of `m` anyway.
                tracing::debug!(guest = %d.guest, "cannot lift a deeper disk: {err}");
            }
        }
        let attached = live_mounts::attach(&h.ns.mnt, &m.host, &m.guest);
        if attached.is_ok() {
            h.mounts.push(m.clone());
        }
        let remounted = remount_below(h, &m.guest);
        attached.and(remounted)
    }

    /// Unmounts the disk at `guest` in the running holder's namespace, for the processes
    /// already running too, then mounts again the other disks that were below it. Nothing
    /// to do without a running holder or when it does not show a disk there.
    pub fn detach(&self, guest: &str) -> std::io::Result<()> {
        let mut slot = self.lock();
        let Some(h) = slot.as_mut() else {
            return Ok(());
        };
        let Some(pos) = h.mounts.iter().position(|shown| shown.guest == guest) else {
            return Ok(());
        };
        if !h.alive() {
            return Ok(());
        }
        live_mounts::detach(&h.ns.mnt, guest)?;
        h.mounts.remove(pos);
        remount_below(h, guest)
    }

    /// Ends the holder (its PID namespace dies with every process in it).
    pub fn stop(&self) {
        if let Some(h) = self.lock().take() {
            h.stop();
        }
    }
}

/// Mounts again, shallowest first, the disks of `h` strictly below `guest` (an attach over
/// them hid them, a detach removed them with it). A disk that cannot be mounted is no
/// longer counted as shown (the files API then uses its host directory, and the holder is
/// renewed once nothing runs); the first error is returned.
fn remount_below(h: &mut Holder, guest: &str) -> std::io::Result<()> {
    let mut outcome = Ok(());
    for m in below(h, guest) {
        if let Err(err) = live_mounts::attach(&h.ns.mnt, &m.host, &m.guest) {
            h.mounts.retain(|shown| shown != &m);
            if outcome.is_ok() {
                outcome = Err(err);
            }
        }
    }
    outcome
}

/// The disks `h` shows strictly below `guest`, shallowest first.
fn below(h: &Holder, guest: &str) -> Vec<ExtraMount> {
    let mut below: Vec<ExtraMount> = h
        .mounts
        .iter()
        .filter(|m| m.guest != guest && paths::is_under(&m.guest, guest))
        .cloned()
        .collect();
    below.sort_by_key(|m| m.guest.len());
    below
}
