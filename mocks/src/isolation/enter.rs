//! Running a command inside an isolated sandbox (the namespaces its holder keeps), and
//! acting as the sandbox's root from the emulator for file access.
//!
//! A command is forked by a thread whose `pid_ns_for_children` is the sandbox's PID
//! namespace ([`PidNamespaceGuard`]), so the command is a direct child of the emulator
//! (exit status and signals as for any child) that lives in the sandbox's PID namespace.
//! Between fork and exec it joins the sandbox's cgroup, network, user, mount, UTS and IPC
//! namespaces, becomes the sandbox's root (host uid `SANDBOX_ID_BASE`: no host privilege),
//! sets `no_new_privs` and loads the seccomp filters. Raw syscalls only (async-signal-safe).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Arc;

use nix::libc;

use super::layers::SANDBOX_ID_BASE;
use super::seccomp::Filters;

/// Writes `0` (the caller) to a cgroup's `cgroup.procs`. Raw syscalls only.
pub fn join_cgroup(procs: &CString) -> io::Result<()> {
    // SAFETY: open/write/close on a prepared path.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        libc::close(fd);
        if written != 1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The descriptors a command joins, borrowed by raw number while the holder lives.
#[derive(Debug, Clone, Copy)]
pub struct JoinFds {
    pub net: Option<RawFd>,
    /// The PID namespace the child must have been forked into (checked, not joined).
    pub pid: RawFd,
    pub user: RawFd,
    pub mnt: RawFd,
    pub uts: RawFd,
    pub ipc: RawFd,
}

/// Adds the hook that moves the child into the sandbox. `keep` holds the descriptors'
/// owners (the holder's namespaces) until the command was spawned.
pub fn configure(
    cmd: &mut Command,
    procs: Option<CString>,
    fds: JoinFds,
    cwd: &str,
    filters: Arc<Filters>,
    keep: Vec<Arc<OwnedFd>>,
) {
    let cwd = CString::new(cwd).unwrap_or_else(|_| c"/root".to_owned());
    // SAFETY: the hook only issues raw syscalls on data prepared above.
    unsafe {
        cmd.pre_exec(move || {
            let _ = &keep;
            let err = io::Error::last_os_error;
            if libc::setsid() < 0 {
                return Err(err());
            }
            // Forked outside the sandbox's PID namespace (its scope was not entered): refuse
            // rather than run where host processes are visible.
            let mut expected: libc::stat = std::mem::zeroed();
            let mut actual: libc::stat = std::mem::zeroed();
            if libc::fstat(fds.pid, &mut expected) != 0
                || libc::stat(c"/proc/self/ns/pid".as_ptr(), &mut actual) != 0
                || expected.st_ino != actual.st_ino
                || expected.st_dev != actual.st_dev
            {
                return Err(io::Error::from_raw_os_error(libc::EPERM));
            }
            if let Some(procs) = &procs {
                join_cgroup(procs)?;
            }
            if let Some(net) = fds.net {
                if libc::setns(net, libc::CLONE_NEWNET) != 0 {
                    return Err(err());
                }
            }
            for (fd, kind) in [
                (fds.user, libc::CLONE_NEWUSER),
                (fds.mnt, libc::CLONE_NEWNS),
                (fds.uts, libc::CLONE_NEWUTS),
                (fds.ipc, libc::CLONE_NEWIPC),
            ] {
                if libc::setns(fd, kind) != 0 {
                    return Err(err());
                }
            }
            // Sandbox ids now: 0 is the host's SANDBOX_ID_BASE.
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(0, 0, 0) != 0
                || libc::setresuid(0, 0, 0) != 0
            {
                return Err(err());
            }
            if libc::chdir(cwd.as_ptr()) != 0 {
                return Err(err());
            }
            filters.apply()
        });
    }
}

/// While alive, processes forked by this thread start in the sandbox's PID namespace.
pub struct PidNamespaceGuard<'a> {
    own: &'a OwnedFd,
    entered: bool,
}

impl<'a> PidNamespaceGuard<'a> {
    /// Sets this thread's namespace for new children to `target`; `own` is the
    /// emulator's own PID namespace, restored on drop.
    pub fn enter(target: &OwnedFd, own: &'a OwnedFd) -> io::Result<PidNamespaceGuard<'a>> {
        // SAFETY: setns on descriptors we own; it only changes this thread's
        // pid_ns_for_children.
        if unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWPID) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(PidNamespaceGuard { own, entered: true })
    }
}

impl Drop for PidNamespaceGuard<'_> {
    fn drop(&mut self) {
        if self.entered {
            // SAFETY: as above; the emulator's own namespace is always allowed.
            unsafe {
                libc::setns(self.own.as_raw_fd(), libc::CLONE_NEWPID);
            }
        }
    }
}

thread_local! {
    static AS_SANDBOX_ROOT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// While alive, this thread's file accesses are checked as the sandbox's root would be
/// checked on host-owned files: file-system ids `SANDBOX_ID_BASE`, no supplementary
/// groups and no effective capability (so no host privilege). Nested guards are free.
pub struct SandboxRootGuard {
    groups: Option<Vec<libc::gid_t>>,
}

impl SandboxRootGuard {
    /// True while a guard is alive on this thread.
    pub fn active() -> bool {
        AS_SANDBOX_ROOT.with(|d| d.get()) > 0
    }

    pub fn enter() -> io::Result<SandboxRootGuard> {
        if AS_SANDBOX_ROOT.with(|d| d.get()) > 0 {
            AS_SANDBOX_ROOT.with(|d| d.set(d.get() + 1));
            return Ok(SandboxRootGuard { groups: None });
        }
        let groups = nix::unistd::getgroups().map_err(io::Error::from)?;
        let groups: Vec<libc::gid_t> = groups.into_iter().map(|g| g.as_raw()).collect();
        // SAFETY: raw per-thread credential syscalls (glibc's setgroups would change every
        // thread of the process; the raw syscall changes only this one).
        unsafe {
            if libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()) != 0 {
                return Err(io::Error::last_os_error());
            }
            libc::setfsgid(SANDBOX_ID_BASE);
            libc::setfsuid(SANDBOX_ID_BASE);
        }
        let guard = SandboxRootGuard {
            groups: Some(groups),
        };
        caps::clear(None, caps::CapSet::Effective).map_err(|e| io::Error::other(e.to_string()))?;
        AS_SANDBOX_ROOT.with(|d| d.set(1));
        Ok(guard)
    }
}

impl Drop for SandboxRootGuard {
    fn drop(&mut self) {
        AS_SANDBOX_ROOT.with(|d| d.set(d.get().saturating_sub(1)));
        let Some(groups) = self.groups.take() else {
            return;
        };
        if let Ok(permitted) = caps::read(None, caps::CapSet::Permitted) {
            let _ = caps::set(None, caps::CapSet::Effective, &permitted);
        }
        // SAFETY: as in `enter`, restoring this thread's own credentials.
        unsafe {
            libc::setfsuid(0);
            libc::setfsgid(0);
            libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr());
        }
    }
}
