//! Starting a child whose `Command` was prepared by the sandbox runtime: either with three
//! pipes or on a fresh PTY (the slave becomes its controlling terminal). Either way the
//! child leads its own session and process group — the handle used to signal and track
//! its whole tree. `SandboxRuntime::command` already makes it a session leader; the hook
//! here only does so when that has not happened yet.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Stdio;

use super::pty::open_pty;

/// The parent's ends of a pipe-mode child.
pub struct PipeEnds {
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

/// The parent's view of a started child.
pub struct Started {
    pub child: tokio::process::Child,
    pub pid: i32,
}

/// A close-on-exec pipe: (read end, write end).
fn cloexec_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    {
        Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    {
        use nix::fcntl::{fcntl, FcntlArg, FdFlag};
        use std::os::fd::AsRawFd;
        let (r, w) = nix::unistd::pipe()?;
        for fd in [&r, &w] {
            fcntl(fd.as_raw_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
        }
        Ok((r, w))
    }
}

/// In the child: `setsid` unless an earlier hook already made it a session leader.
/// Raw syscalls only (async-signal-safe).
fn ensure_session_leader() -> io::Result<()> {
    // SAFETY: getpid/getsid/setsid have no memory-safety preconditions.
    unsafe {
        if nix::libc::getsid(0) != nix::libc::getpid() && nix::libc::setsid() < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Makes the child a session leader (and so a process-group leader without a terminal).
fn become_session_leader(command: &mut std::process::Command) {
    // SAFETY: the hook only issues async-signal-safe syscalls.
    unsafe {
        command.pre_exec(ensure_session_leader);
    }
}

/// Spawns `command` with pipes for stdin, stdout and stderr.
pub fn spawn_with_pipes(mut command: std::process::Command) -> io::Result<(Started, PipeEnds)> {
    let (stdin_read, stdin_write) = cloexec_pipe()?;
    let (stdout_read, stdout_write) = cloexec_pipe()?;
    let (stderr_read, stderr_write) = cloexec_pipe()?;
    command
        .stdin(Stdio::from(stdin_read))
        .stdout(Stdio::from(stdout_write))
        .stderr(Stdio::from(stderr_write));
    become_session_leader(&mut command);
    let started = start(command)?;
    Ok((
        started,
        PipeEnds {
            stdin: stdin_write,
            stdout: stdout_read,
            stderr: stderr_read,
        },
    ))
}

/// Spawns `command` on a new PTY of `rows`×`cols`; returns the child and the master.
pub fn spawn_on_pty(
    mut command: std::process::Command,
    rows: u16,
    cols: u16,
) -> io::Result<(Started, OwnedFd)> {
    let pair = open_pty(rows, cols)?;
    command
        .stdin(Stdio::from(pair.slave.try_clone()?))
        .stdout(Stdio::from(pair.slave.try_clone()?))
        .stderr(Stdio::from(pair.slave));
    // SAFETY: the hook only issues async-signal-safe syscalls; nothing is allocated.
    unsafe {
        command.pre_exec(|| {
            ensure_session_leader()?;
            // fd 0 is the slave by now: make it the controlling terminal of the new session.
            if nix::libc::ioctl(0, nix::libc::TIOCSCTTY as _, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let started = start(command)?;
    Ok((started, pair.master))
}

fn start(command: std::process::Command) -> io::Result<Started> {
    let mut command = tokio::process::Command::from(command);
    command.kill_on_drop(false);
    let child = command.spawn()?;
    // Dropping `command` here closes the parent's copies of the child's pipe/PTY ends.
    drop(command);
    let pid = child.id().map(|p| p as i32).unwrap_or(0);
    Ok(Started { child, pid })
}

/// Exit code conventionally reported when a command could not be started.
pub fn spawn_failure_code(err: &io::Error) -> i32 {
    match err.kind() {
        io::ErrorKind::NotFound => 127,
        io::ErrorKind::PermissionDenied => 126,
        _ => 127,
    }
}

/// The sandbox's login shell: `/bin/bash -l` when bash exists, else `/bin/sh -l`.
pub fn login_shell() -> (&'static str, Vec<String>) {
    let program = if std::path::Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    };
    (program, vec!["-l".to_string()])
}
