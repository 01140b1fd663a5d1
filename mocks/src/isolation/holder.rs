//! One isolated sandbox's namespaces, built by bubblewrap and kept alive by a holder.
//!
//! `bwrap` runs as the sandbox's host uid (not root): it creates the user namespace (we
//! write its uid/gid map: sandbox ids 0..65535 = host ids `SANDBOX_ID_BASE`..), the PID,
//! IPC and UTS namespaces and a mount namespace with the host's root read-only, a fresh
//! `/dev` and `/proc`, and the sandbox's own directories and overlays bound on top. Its
//! PID 1 reaps orphans; PID 2 (`sh`, then `cat` on a pipe the emulator holds) keeps the
//! namespaces alive until the emulator closes the pipe or dies (not `--die-with-parent`:
//! that follows the thread which started `bwrap`, and the emulator's threads come and go).
//!
//! Before `bwrap` starts, its parent (still root, in a mount namespace of its own) mounts
//! the overlays and binds every source below a fresh tmpfs on `/dev/shm`, then hides the
//! emulator's state directory under an empty tmpfs: `bwrap` never needs to walk the state
//! directory, and nothing of it (other sandboxes' files) is visible in the sandbox.
//!
//! Every sandbox command then joins these namespaces (`enter.rs`), as `docker exec` does.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::libc;

use super::layers::{self, BaseLayers, LAYERS, SANDBOX_ID_BASE, SANDBOX_ID_COUNT};
use super::paths::ExtraMount;

/// How long a holder may take to come up.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Where the parent of `bwrap` assembles the sources (a tmpfs in its own mount namespace).
const STAGING: &str = "/dev/shm";

/// Namespaces of a running holder (descriptors of its PID 1's namespaces).
#[derive(Debug)]
pub struct Namespaces {
    pub user: Arc<OwnedFd>,
    pub mnt: Arc<OwnedFd>,
    pub pid: Arc<OwnedFd>,
    pub uts: Arc<OwnedFd>,
    pub ipc: Arc<OwnedFd>,
    /// The sandbox's root directory (`O_PATH`), the anchor of its filesystem view.
    pub root: Arc<OwnedFd>,
}

/// A running holder.
#[derive(Debug)]
pub struct Holder {
    child: Child,
    /// `cat` in the sandbox reads this: dropping it ends the sandbox's namespaces.
    _keepalive: ChildStdin,
    pub ns: Namespaces,
    /// The disks its mount namespace shows: those it was built with, then the live
    /// attaches and detaches (`live_mounts.rs`).
    pub mounts: Vec<ExtraMount>,
}

impl Holder {
    /// True while the holder (and so the sandbox's namespaces) lives.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Ends the holder: every process left in the sandbox's PID namespace dies with it.
    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a holder needs from the emulator and the sandbox.
pub struct HolderSpec<'a> {
    pub bwrap: &'a Path,
    pub base: &'a BaseLayers,
    pub state_dir: &'a Path,
    pub dir: &'a Path,
    pub cgroup: Option<&'a Path>,
    pub netns: Option<RawFd>,
    pub hostname: &'a str,
    pub mounts: &'a [ExtraMount],
}

/// One mount the parent of `bwrap` makes below the staging tmpfs.
struct Stage {
    /// `None`: an overlay with `options`.
    source: Option<CString>,
    options: Option<CString>,
    target: CString,
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)
}

/// Starts the holder of the sandbox in `spec.dir`.
pub fn start(spec: &HolderSpec<'_>) -> io::Result<Holder> {
    let (info_r, info_w) = pipe()?;
    let (block_r, block_w) = pipe()?;
    let mut stages: Vec<Stage> = Vec::new();
    let mut args: Vec<String> = vec![
        "--unshare-user".into(),
        "--userns-block-fd".into(),
        block_r.as_raw_fd().to_string(),
        "--info-fd".into(),
        info_w.as_raw_fd().to_string(),
        "--unshare-pid".into(),
        "--unshare-ipc".into(),
        "--unshare-uts".into(),
        "--hostname".into(),
        spec.hostname.chars().take(64).collect(),
        "--ro-bind".into(),
        "/".into(),
        "/".into(),
        "--dev".into(),
        "/dev".into(),
        "--proc".into(),
        "/proc".into(),
        // A fresh /run, as a booted machine has (the host's sockets stay out of reach).
        "--tmpfs".into(),
        "/run".into(),
        "--perms".into(),
        "1777".into(),
        "--dir".into(),
        "/run/lock".into(),
    ];
    for (i, guest) in super::paths::PRIVATE_DIRS.iter().enumerate() {
        let staged = format!("{STAGING}/p{i}");
        stages.push(Stage {
            source: Some(layers::cstring(
                &spec.dir.join(guest.trim_start_matches('/')),
            )),
            options: None,
            target: layers::cstring(Path::new(&staged)),
        });
        args.extend(["--bind".into(), staged, guest.to_string()]);
    }
    for (i, (guest, name)) in LAYERS.iter().enumerate() {
        let staged = format!("{STAGING}/l{i}");
        stages.push(Stage {
            source: None,
            options: Some(layers::overlay_options(spec.base, spec.dir, guest, name)),
            target: layers::cstring(Path::new(&staged)),
        });
        args.extend(["--bind".into(), staged, guest.to_string()]);
    }
    let mut extra: Vec<&ExtraMount> = spec.mounts.iter().collect();
    extra.sort_by_key(|m| m.guest.len());
    for (i, m) in extra.iter().enumerate() {
        let staged = format!("{STAGING}/d{i}");
        stages.push(Stage {
            source: Some(layers::cstring(&m.host)),
            options: None,
            target: layers::cstring(Path::new(&staged)),
        });
        args.extend(["--bind".into(), staged, m.guest.clone()]);
    }
    args.extend([
        "--chdir".into(),
        "/".into(),
        "--".into(),
        "/bin/sh".into(),
        "-c".into(),
        "echo ready; exec cat".into(),
    ]);

    let procs = spec
        .cgroup
        .map(|cg| layers::cstring(&cg.join("cgroup.procs")));
    let hide = layers::cstring(spec.state_dir);
    let netns = spec.netns;
    let child_fds = [block_r.as_raw_fd(), info_w.as_raw_fd()];
    let mut cmd = Command::new(spec.bwrap);
    cmd.args(&args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the hook only issues raw syscalls on data prepared above.
    unsafe {
        cmd.pre_exec(move || {
            prepare_holder_child(procs.as_ref(), netns, &stages, &hide, &child_fds)
        });
    }
    let mut child = cmd.spawn()?;
    drop(block_r);
    drop(info_w);
    let deadline = Instant::now() + START_TIMEOUT;
    let fail = |child: &mut Child, what: String| -> io::Error {
        let _ = child.kill();
        let _ = child.wait();
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        io::Error::other(format!(
            "bubblewrap: {what}{}",
            if err.trim().is_empty() {
                String::new()
            } else {
                format!(": {}", err.trim())
            }
        ))
    };
    let info = match read_to_end_until(info_r, deadline) {
        Ok(info) => info,
        Err(e) => return Err(fail(&mut child, format!("no namespace info ({e})"))),
    };
    let Some(init_pid) = child_pid(&info) else {
        return Err(fail(&mut child, "no child-pid in its info".into()));
    };
    let map = format!("0 {SANDBOX_ID_BASE} {SANDBOX_ID_COUNT}\n");
    for file in ["uid_map", "gid_map"] {
        if let Err(e) = std::fs::write(format!("/proc/{init_pid}/{file}"), &map) {
            return Err(fail(&mut child, format!("cannot write {file} ({e})")));
        }
    }
    if let Err(e) = File::from(block_w).write_all(b"1") {
        return Err(fail(
            &mut child,
            format!("cannot release the sandbox ({e})"),
        ));
    }
    let stdout = child.stdout.take().map(OwnedFd::from);
    let ready = match stdout {
        Some(out) => read_line_until(out, deadline),
        None => Err(io::Error::other("no stdout")),
    };
    match ready {
        Ok(line) if line.trim() == "ready" => {}
        Ok(line) => return Err(fail(&mut child, format!("unexpected start line {line:?}"))),
        Err(e) => return Err(fail(&mut child, format!("sandbox did not start ({e})"))),
    }
    let ns = match open_namespaces(init_pid) {
        Ok(ns) => ns,
        Err(e) => {
            return Err(fail(
                &mut child,
                format!("cannot open the sandbox's namespaces ({e})"),
            ))
        }
    };
    let keepalive = child
        .stdin
        .take()
        .ok_or_else(|| io::Error::other("no holder stdin"))?;
    Ok(Holder {
        child,
        _keepalive: keepalive,
        ns,
        mounts: spec.mounts.to_vec(),
    })
}

/// In the forked child, as root: own session, the sandbox's cgroup and network, a private
/// mount namespace with the staged sources, the state dir hidden; then the sandbox's host
/// uid for `bwrap`.
fn prepare_holder_child(
    procs: Option<&CString>,
    netns: Option<RawFd>,
    stages: &[Stage],
    hide: &CString,
    child_fds: &[RawFd; 2],
) -> io::Result<()> {
    let err = io::Error::last_os_error;
    // SAFETY: raw syscalls on prepared, NUL-terminated data; nothing is allocated.
    unsafe {
        if libc::setsid() < 0 {
            return Err(err());
        }
        if let Some(procs) = procs {
            super::enter::join_cgroup(procs)?;
        }
        if let Some(ns) = netns {
            if libc::setns(ns, libc::CLONE_NEWNET) != 0 {
                return Err(err());
            }
        }
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(err());
        }
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(err());
        }
        let staging = c"/dev/shm";
        if libc::mount(
            c"tmpfs".as_ptr(),
            staging.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            c"mode=0755".as_ptr().cast(),
        ) != 0
        {
            return Err(err());
        }
        for stage in stages {
            if libc::mkdir(stage.target.as_ptr(), 0o755) != 0 {
                return Err(err());
            }
            let rc = match (&stage.source, &stage.options) {
                (Some(source), _) => libc::mount(
                    source.as_ptr(),
                    stage.target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ),
                (None, Some(options)) => libc::mount(
                    c"overlay".as_ptr(),
                    stage.target.as_ptr(),
                    c"overlay".as_ptr(),
                    0,
                    options.as_ptr().cast(),
                ),
                (None, None) => 0,
            };
            if rc != 0 {
                return Err(err());
            }
        }
        if libc::mount(
            c"tmpfs".as_ptr(),
            hide.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            c"mode=0700".as_ptr().cast(),
        ) != 0
        {
            return Err(err());
        }
        for &fd in child_fds {
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(err());
            }
        }
        let id = SANDBOX_ID_BASE;
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setresgid(id, id, id) != 0
            || libc::setresuid(id, id, id) != 0
        {
            return Err(err());
        }
    }
    Ok(())
}

fn child_pid(info: &str) -> Option<i32> {
    let value: serde_json::Value = serde_json::from_str(info).ok()?;
    value.get("child-pid")?.as_i64().map(|p| p as i32)
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    let raw = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(raw, libc::F_GETFL);
        if flags < 0 || libc::fcntl(raw, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Reads `fd` until `stop` says the data is complete, EOF, or `deadline`.
fn read_until(fd: OwnedFd, deadline: Instant, stop: impl Fn(&[u8]) -> bool) -> io::Result<String> {
    set_nonblocking(&fd)?;
    let mut file = File::from(fd);
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                data.extend_from_slice(&buf[..n]);
                if stop(&data) {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "timed out"));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(data).map_err(|_| io::Error::other("not UTF-8"))
}

fn read_to_end_until(fd: OwnedFd, deadline: Instant) -> io::Result<String> {
    read_until(fd, deadline, |d| d.ends_with(b"}\n"))
}

fn read_line_until(fd: OwnedFd, deadline: Instant) -> io::Result<String> {
    read_until(fd, deadline, |d| d.contains(&b'\n'))
}

fn open_namespaces(pid: i32) -> io::Result<Namespaces> {
    let open = |what: &str, flags: i32| -> io::Result<Arc<OwnedFd>> {
        let path = CString::new(format!("/proc/{pid}/{what}"))
            .map_err(|_| io::Error::other("bad path"))?;
        // SAFETY: open with a valid path; the descriptor is owned by the result.
        let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nobody else.
        Ok(Arc::new(unsafe { OwnedFd::from_raw_fd(fd) }))
    };
    Ok(Namespaces {
        user: open("ns/user", libc::O_RDONLY)?,
        mnt: open("ns/mnt", libc::O_RDONLY)?,
        pid: open("ns/pid", libc::O_RDONLY)?,
        uts: open("ns/uts", libc::O_RDONLY)?,
        ipc: open("ns/ipc", libc::O_RDONLY)?,
        root: open("root", libc::O_PATH | libc::O_DIRECTORY)?,
    })
}

/// Finds `bwrap` (bubblewrap) on the usual paths.
pub fn find_bwrap() -> Option<PathBuf> {
    ["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}
