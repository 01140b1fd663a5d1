//! One `session` channel of the embedded guest sshd: collects `env` requests, then runs an
//! `exec` (or `shell`) command the way the exec API does (`SandboxRuntime::command`: the
//! sandbox's mount namespace, cgroup, network namespace and env; cwd = the user's home), or
//! serves `subsystem sftp`. Output flows back as data (stdout) and extended data 1
//! (stderr), then `exit-status` / `exit-signal`, EOF and close. Closing the channel kills
//! the command's process group.

use std::collections::BTreeMap;
use std::process::Stdio;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use russh::server::{Handle, Msg};
use russh::{Channel, ChannelId, ChannelMsg, ChannelReadHalf, Sig};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;

use super::sftp::SftpHandler;
use crate::sandbox::SandboxRef;

/// What a session channel was asked to run.
enum Request {
    Command(String),
    Shell,
    Sftp,
}

/// Serves one session channel until it closes.
pub async fn serve(mut channel: Channel<Msg>, handle: Handle, sandbox: SandboxRef, home: String) {
    let id = channel.id();
    let mut env = BTreeMap::new();
    let request = loop {
        match channel.wait().await {
            Some(ChannelMsg::SetEnv {
                variable_name,
                variable_value,
                ..
            }) => {
                env.insert(variable_name, variable_value);
            }
            Some(ChannelMsg::Exec { command, .. }) => {
                break Request::Command(String::from_utf8_lossy(&command).into_owned())
            }
            Some(ChannelMsg::RequestShell { .. }) => break Request::Shell,
            Some(ChannelMsg::RequestSubsystem { name, .. }) if name == "sftp" => {
                break Request::Sftp
            }
            Some(ChannelMsg::RequestSubsystem { .. }) => {
                let _ = handle.channel_failure(id).await;
            }
            Some(ChannelMsg::Close) | None => return,
            Some(_) => {}
        }
    };
    let _ = handle.channel_success(id).await;
    match request {
        Request::Sftp => {
            russh_sftp::server::run(channel.into_stream(), SftpHandler::new(sandbox, home)).await;
        }
        Request::Command(command) => {
            let (read, write) = channel.split();
            run(
                id,
                read,
                write,
                &handle,
                &sandbox,
                "/bin/sh",
                vec!["-c".into(), command],
                &home,
                &env,
            )
            .await
        }
        Request::Shell => {
            let (read, write) = channel.split();
            let shell = if std::path::Path::new("/bin/bash").exists() {
                "/bin/bash"
            } else {
                "/bin/sh"
            };
            run(
                id,
                read,
                write,
                &handle,
                &sandbox,
                shell,
                vec!["-l".into()],
                &home,
                &env,
            )
            .await
        }
    }
}

/// Kills the command's process group unless it ended on its own, and keeps the sandbox
/// marked busy (no idle auto-pause) meanwhile.
struct RunGuard {
    sandbox: SandboxRef,
    pgid: Option<i32>,
}

impl RunGuard {
    fn kill(&self, signal: Signal) {
        if let Some(pgid) = self.pgid {
            let _ = killpg(Pid::from_raw(pgid), signal);
        }
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        self.kill(Signal::SIGKILL);
        self.sandbox.end_busy();
    }
}

fn signal_of(sig: &Sig) -> Option<Signal> {
    Some(match sig {
        Sig::ABRT => Signal::SIGABRT,
        Sig::ALRM => Signal::SIGALRM,
        Sig::FPE => Signal::SIGFPE,
        Sig::HUP => Signal::SIGHUP,
        Sig::ILL => Signal::SIGILL,
        Sig::INT => Signal::SIGINT,
        Sig::KILL => Signal::SIGKILL,
        Sig::PIPE => Signal::SIGPIPE,
        Sig::QUIT => Signal::SIGQUIT,
        Sig::SEGV => Signal::SIGSEGV,
        Sig::TERM => Signal::SIGTERM,
        Sig::USR1 => Signal::SIGUSR1,
        Sig::Custom(name) => format!("SIG{name}").parse().ok()?,
    })
}

fn sig_of(signal: Signal) -> Sig {
    match signal {
        Signal::SIGABRT => Sig::ABRT,
        Signal::SIGALRM => Sig::ALRM,
        Signal::SIGFPE => Sig::FPE,
        Signal::SIGHUP => Sig::HUP,
        Signal::SIGILL => Sig::ILL,
        Signal::SIGINT => Sig::INT,
        Signal::SIGKILL => Sig::KILL,
        Signal::SIGPIPE => Sig::PIPE,
        Signal::SIGQUIT => Sig::QUIT,
        Signal::SIGSEGV => Sig::SEGV,
        Signal::SIGTERM => Sig::TERM,
        Signal::SIGUSR1 => Sig::USR1,
        other => Sig::Custom(other.as_str().trim_start_matches("SIG").to_string()),
    }
}

/// Feeds channel data to the command's stdin until EOF; a close (or the connection
/// going away) kills the process group. Signals from the client are delivered.
async fn pump_input(mut read: ChannelReadHalf, mut stdin: Option<ChildStdin>, pgid: i32) {
    loop {
        match read.wait().await {
            Some(ChannelMsg::Data { data }) => {
                if let Some(pipe) = stdin.as_mut() {
                    // A command that stopped reading: the rest of the input is dropped.
                    if pipe.write_all(&data).await.is_err() {
                        stdin = None;
                    }
                }
            }
            Some(ChannelMsg::Eof) => {
                if let Some(mut pipe) = stdin.take() {
                    let _ = pipe.shutdown().await;
                }
            }
            Some(ChannelMsg::Signal { signal }) => {
                if let Some(signal) = signal_of(&signal) {
                    let _ = killpg(Pid::from_raw(pgid), signal);
                }
            }
            Some(ChannelMsg::Close) | None => {
                let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
                return;
            }
            Some(_) => {}
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn run(
    id: ChannelId,
    read: ChannelReadHalf,
    write: russh::ChannelWriteHalf<Msg>,
    handle: &Handle,
    sandbox: &SandboxRef,
    program: &str,
    args: Vec<String>,
    home: &str,
    env: &BTreeMap<String, String>,
) {
    let mut cmd = sandbox.runtime().command(program, &args, Some(home), env);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let spawned = {
        let _scope = sandbox.runtime().spawn_scope();
        tokio::process::Command::from(cmd).spawn()
    };
    let mut child = match spawned {
        Ok(child) => child,
        Err(err) => {
            let message = format!("cannot start {program}: {err}\n");
            let _ = write.extended_data_bytes(1, message.into_bytes()).await;
            let _ = handle.exit_status_request(id, 127).await;
            let _ = write.eof().await;
            let _ = write.close().await;
            return;
        }
    };
    let pid = child.id().unwrap_or(0) as i32;
    if pid > 0 {
        sandbox.runtime().adopt(pid as u32);
    }
    sandbox.begin_busy();
    let mut guard = RunGuard {
        sandbox: sandbox.clone(),
        pgid: (pid > 0).then_some(pid),
    };
    let input = tokio::spawn(pump_input(read, child.stdin.take(), pid));

    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let mut out_writer = write.make_writer();
    let mut err_writer = write.make_writer_ext(Some(1));
    let copy_out = async {
        if let Some(mut pipe) = stdout {
            let _ = tokio::io::copy(&mut pipe, &mut out_writer).await;
        }
        let _ = out_writer.flush().await;
    };
    let copy_err = async {
        if let Some(mut pipe) = stderr {
            let _ = tokio::io::copy(&mut pipe, &mut err_writer).await;
        }
        let _ = err_writer.flush().await;
    };
    let (_, _, status) = tokio::join!(copy_out, copy_err, child.wait());
    // The command ended on its own: nothing left to kill.
    guard.pgid = None;
    drop(guard);
    input.abort();
    match status {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            if let Some(code) = status.code() {
                let _ = handle.exit_status_request(id, code as u32).await;
            } else if let Some(signal) = status.signal().and_then(|s| Signal::try_from(s).ok()) {
                let core = status.core_dumped();
                let _ = handle
                    .exit_signal_request(id, sig_of(signal), core, String::new(), "en".into())
                    .await;
            }
        }
        Err(err) => {
            tracing::debug!(sandbox = %sandbox.id, "waiting for an ssh command failed: {err}")
        }
    }
    let _ = write.eof().await;
    let _ = write.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_map_both_ways() {
        for sig in [
            Signal::SIGTERM,
            Signal::SIGKILL,
            Signal::SIGUSR2,
            Signal::SIGINT,
        ] {
            assert_eq!(signal_of(&sig_of(sig)), Some(sig));
        }
        assert_eq!(signal_of(&Sig::Custom("NOPE".into())), None);
    }
}
