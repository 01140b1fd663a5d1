//! Linux namespaces + cgroup v2 isolation (root only).
//!
//! Everything a child needs is prepared in the parent (CStrings, directory fds); the
//! `pre_exec` hook then only issues raw syscalls, which keeps it async-signal-safe in
//! this multi-threaded process.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nix::libc;

use super::paths::{self, ExtraMount, PRIVATE_DIRS};

/// Finds the cgroup2 mount point in /proc/mounts.
fn cgroup2_mount() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    mounts.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let _dev = fields.next()?;
        let mount_point = fields.next()?;
        let fstype = fields.next()?;
        (fstype == "cgroup2").then(|| PathBuf::from(mount_point.replace("\\040", " ")))
    })
}

/// Checks that namespaces + cgroup v2 work here; returns the mock's parent cgroup.
pub fn probe(state_dir: &Path) -> Result<PathBuf, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not running as root".into());
    }
    let mount = cgroup2_mount().ok_or("no cgroup2 mount in /proc/mounts")?;
    // Unique per emulator: several emulators may share one process (tests).
    let parent = mount.join(format!(
        "createos-mock-{}-{}",
        std::process::id(),
        crate::ids::random_token(6)
    ));
    std::fs::create_dir_all(&parent)
        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    for dir in PRIVATE_DIRS {
        if !Path::new(dir).exists() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create mount point {dir}: {e}"))?;
            tracing::info!("created mount point {dir} on the host");
        }
    }
    let result = run_probe(state_dir, &parent);
    if let Err(err) = &result {
        remove_cgroup(&parent);
        return Err(err.clone());
    }
    Ok(parent)
}

fn run_probe(state_dir: &Path, parent: &Path) -> Result<(), String> {
    let dir = state_dir.join(".isolation-probe");
    paths::create_private_dirs(&dir).map_err(|e| format!("probe dir: {e}"))?;
    let cg = parent.join("probe");
    std::fs::create_dir_all(&cg).map_err(|e| format!("probe cgroup: {e}"))?;
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", "test -d /root && test -d /workspace"]);
    cmd.env_clear().env("PATH", paths::SANDBOX_PATH);
    configure(&mut cmd, &dir, Some(&cg), &[], "probe", "/root");
    let outcome = cmd.status();
    remove_cgroup(&cg);
    let _ = std::fs::remove_dir_all(&dir);
    match outcome {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("probe command failed: {status}")),
        Err(e) => Err(format!("probe spawn failed: {e}")),
    }
}

/// One bind mount, prepared before fork.
struct Bind {
    source: CString,
    target: CString,
}

fn bind(host: &Path, guest: &str) -> Option<Bind> {
    let source = CString::new(host.as_os_str().as_bytes()).ok()?;
    let target = CString::new(guest).ok()?;
    Some(Bind { source, target })
}

/// Writes `/proc/self/fd/<fd>\0` into `buf` without allocating.
fn fd_path(fd: libc::c_int, buf: &mut [u8; 32]) {
    const PREFIX: &[u8] = b"/proc/self/fd/";
    buf[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut digits = [0u8; 12];
    let mut n = fd.max(0) as u32;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        buf[PREFIX.len() + i] = digits[len - 1 - i];
    }
    buf[PREFIX.len() + len] = 0;
}

/// Adds the `pre_exec` hook: new session, join `cgroup`, private mount + UTS
/// namespace, bind mounts of the private dirs and disks, hostname, chdir `cwd`.
pub fn configure(
    cmd: &mut Command,
    dir: &Path,
    cgroup: Option<&Path>,
    mounts: &[ExtraMount],
    hostname: &str,
    cwd: &str,
) {
    let procs =
        cgroup.and_then(|cg| CString::new(cg.join("cgroup.procs").as_os_str().as_bytes()).ok());
    let mut binds: Vec<Bind> = PRIVATE_DIRS
        .iter()
        .filter_map(|guest| bind(&dir.join(guest.trim_start_matches('/')), guest))
        .collect();
    let mut extra: Vec<&ExtraMount> = mounts.iter().collect();
    extra.sort_by_key(|m| m.guest.len());
    binds.extend(extra.into_iter().filter_map(|m| bind(&m.host, &m.guest)));
    let host_name: Vec<u8> = hostname.as_bytes().iter().copied().take(64).collect();
    let cwd = CString::new(cwd).unwrap_or_else(|_| c"/root".to_owned());
    let root = c"/".to_owned();
    let mut source_fds: Vec<libc::c_int> = vec![-1; binds.len()];
    let private_count = PRIVATE_DIRS.len();
    let filters = partial_filters();

    // SAFETY: the hook only calls async-signal-safe syscalls on data prepared above.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(procs) = &procs {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let written = libc::write(fd, b"0".as_ptr().cast(), 1);
                libc::close(fd);
                if written != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWUTS) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // Open every source first (in the new namespace, before any mount can
            // shadow a source path), then bind them through /proc/self/fd.
            for (slot, b) in source_fds.iter_mut().zip(binds.iter()) {
                *slot = libc::open(
                    b.source.as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                );
            }
            let mut path_buf = [0u8; 32];
            for (i, (&fd, b)) in source_fds.iter().zip(binds.iter()).enumerate() {
                if fd < 0 {
                    continue;
                }
                fd_path(fd, &mut path_buf);
                let rc = libc::mount(
                    path_buf.as_ptr().cast(),
                    b.target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                );
                // The private dirs are essential; a disk that fails to mount is skipped.
                if rc != 0 && i < private_count {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for &fd in source_fds.iter() {
                if fd >= 0 {
                    libc::close(fd);
                }
            }
            if !host_name.is_empty() {
                libc::sethostname(host_name.as_ptr().cast(), host_name.len());
            }
            if libc::chdir(cwd.as_ptr()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // No user namespace here: run as the sandbox's unprivileged host uid (which
            // drops every capability), with no_new_privs and the seccomp filter.
            let id = super::layers::SANDBOX_ID_BASE;
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(id, id, id) != 0
                || libc::setresuid(id, id, id) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            match &filters {
                Some(f) => f.apply(),
                None => {
                    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                }
            }
        });
    }
}

/// The seccomp filters, compiled once.
fn partial_filters() -> Option<std::sync::Arc<super::seccomp::Filters>> {
    static FILTERS: std::sync::OnceLock<Option<std::sync::Arc<super::seccomp::Filters>>> =
        std::sync::OnceLock::new();
    FILTERS
        .get_or_init(|| {
            super::seccomp::Filters::build()
                .ok()
                .map(std::sync::Arc::new)
        })
        .clone()
}

pub fn set_frozen(cg: &Path, frozen: bool) -> std::io::Result<()> {
    std::fs::write(cg.join("cgroup.freeze"), if frozen { "1" } else { "0" })
}

pub fn cgroup_pids(cg: &Path) -> Vec<u32> {
    std::fs::read_to_string(cg.join("cgroup.procs"))
        .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

pub fn kill_cgroup(cg: &Path) {
    if std::fs::write(cg.join("cgroup.kill"), "1").is_err() {
        for pid in cgroup_pids(cg) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
            }
        }
        let _ = set_frozen(cg, false);
    }
}

/// `usage_usec` of the cgroup's cpu.stat, in seconds.
pub fn cgroup_cpu_seconds(cg: &Path) -> Option<f64> {
    let stat = std::fs::read_to_string(cg.join("cpu.stat")).ok()?;
    let usec: f64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())?;
    Some(usec / 1e6)
}

/// Kills what is left in `cg` and removes it with its child cgroups (retrying while
/// exiting tasks linger).
pub fn remove_cgroup(cg: &Path) {
    if !cg.exists() {
        return;
    }
    kill_cgroup(cg);
    if let Ok(entries) = std::fs::read_dir(cg) {
        for entry in entries.flatten() {
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                remove_cgroup(&entry.path());
            }
        }
    }
    for _ in 0..100 {
        match std::fs::remove_dir(cg) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    tracing::warn!(cgroup = %cg.display(), "could not remove cgroup");
}
