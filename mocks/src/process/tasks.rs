//! Starting a managed process and the tasks that serve it: one output pump per stream,
//! one ordered input writer, and a watcher that reaps the leader.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::fdio::{FdIo, ReadOutcome};
use super::journal::OutputStream;
use super::managed::{InputOp, Launch, LeaderExit, ManagedProcess};
use super::spawn::{spawn_on_pty, spawn_with_pipes, Started};

/// Starts `command` (prepared by the sandbox runtime) as a managed process. A command that
/// cannot be started yields a `failed` record rather than an error.
pub fn launch(
    launch: Launch,
    pty_size: Option<(u16, u16)>,
    command: std::process::Command,
    runtime: &crate::isolation::SandboxRuntime,
) -> Arc<ManagedProcess> {
    let (tx, rx) = mpsc::unbounded_channel();
    match pty_size {
        Some((rows, cols)) => {
            let spawned = {
                let _scope = runtime.spawn_scope();
                spawn_on_pty(command, rows, cols)
            };
            let (started, master) = match spawned {
                Ok(ok) => ok,
                Err(err) => return ManagedProcess::new_failed(launch, &err),
            };
            let master = match FdIo::new(master) {
                Ok(io) => Arc::new(io),
                Err(err) => return abandon(launch, started, &err),
            };
            let proc =
                ManagedProcess::new_started(launch, started.pid, Some(master.clone()), 1, tx);
            tokio::spawn(pump(proc.clone(), master.clone(), OutputStream::Pty));
            tokio::spawn(write_input(
                master,
                rx,
                proc.input_backlog(),
                proc.cancel.clone(),
            ));
            tokio::spawn(watch_leader(proc.clone(), started));
            proc
        }
        None => {
            let spawned = {
                let _scope = runtime.spawn_scope();
                spawn_with_pipes(command)
            };
            let (started, ends) = match spawned {
                Ok(ok) => ok,
                Err(err) => return ManagedProcess::new_failed(launch, &err),
            };
            let ios = FdIo::new(ends.stdin)
                .and_then(|i| Ok((i, FdIo::new(ends.stdout)?)))
                .and_then(|(i, o)| Ok((i, o, FdIo::new(ends.stderr)?)));
            let (stdin, stdout, stderr) = match ios {
                Ok(ios) => ios,
                Err(err) => return abandon(launch, started, &err),
            };
            let proc = ManagedProcess::new_started(launch, started.pid, None, 2, tx);
            tokio::spawn(pump(proc.clone(), Arc::new(stdout), OutputStream::Stdout));
            tokio::spawn(pump(proc.clone(), Arc::new(stderr), OutputStream::Stderr));
            tokio::spawn(write_input(
                Arc::new(stdin),
                rx,
                proc.input_backlog(),
                proc.cancel.clone(),
            ));
            tokio::spawn(watch_leader(proc.clone(), started));
            proc
        }
    }
}

/// The child started but its I/O could not be set up: kill it and report a failure.
fn abandon(launch: Launch, mut started: Started, err: &std::io::Error) -> Arc<ManagedProcess> {
    let _ = started.child.start_kill();
    tokio::spawn(async move {
        let _ = started.child.wait().await;
    });
    ManagedProcess::new_failed(launch, err)
}

/// Copies one output stream into the journal. After the leader exits, drains what is
/// buffered right then and reports, so the exit event follows the leader's last output;
/// output of surviving background children keeps being journaled until EOF.
async fn pump(proc: Arc<ManagedProcess>, io: Arc<FdIo>, stream: OutputStream) {
    let mut leader_done = proc.leader_done();
    let mut buf = vec![0u8; proc.max_chunk()];
    let mut reported = false;
    loop {
        if !reported && *leader_done.borrow() {
            if drain(&proc, &io, stream, &mut buf) {
                break;
            }
            reported = true;
            proc.reader_finished();
            continue;
        }
        tokio::select! {
            _ = proc.cancel.cancelled() => break,
            read = io.read(&mut buf) => match read {
                Ok(ReadOutcome::Data(n)) => proc.push_output(stream, &buf[..n]),
                Ok(ReadOutcome::WouldBlock) => {}
                Ok(ReadOutcome::Eof) | Err(_) => break,
            },
            changed = leader_done.changed(), if !reported => {
                if changed.is_err() {
                    break;
                }
            }
        }
    }
    if !reported {
        proc.reader_finished();
    }
}

/// Reads until the descriptor would block; true when it reached EOF.
fn drain(proc: &ManagedProcess, io: &FdIo, stream: OutputStream, buf: &mut [u8]) -> bool {
    loop {
        match io.try_read(buf) {
            Ok(ReadOutcome::Data(n)) => proc.push_output(stream, &buf[..n]),
            Ok(ReadOutcome::WouldBlock) => return false,
            Ok(ReadOutcome::Eof) | Err(_) => return true,
        }
    }
}

/// Writes queued input in order. A write error (the reader is gone) discards later
/// input; `Close` (pipes) drops the write end once everything before it was written.
async fn write_input(
    target: Arc<FdIo>,
    mut rx: mpsc::UnboundedReceiver<InputOp>,
    backlog: Arc<AtomicUsize>,
    cancel: CancellationToken,
) {
    let mut broken = false;
    loop {
        let op = tokio::select! {
            _ = cancel.cancelled() => break,
            op = rx.recv() => op,
        };
        let data = match op {
            None | Some(InputOp::Close) => break,
            Some(InputOp::Data(data)) => data,
        };
        if !broken {
            tokio::select! {
                _ = cancel.cancelled() => break,
                written = target.write_all(&data) => broken = written.is_err(),
            }
        }
        backlog.fetch_sub(data.len(), Ordering::SeqCst);
    }
}

/// Reaps the leader, then records its exit together with whether its tree is empty.
async fn watch_leader(proc: Arc<ManagedProcess>, mut started: Started) {
    let status = started.child.wait().await;
    let exit = LeaderExit::from_status(status);
    let probe = proc.clone();
    let empty = tokio::task::spawn_blocking(move || probe.live_members().is_empty())
        .await
        .unwrap_or(false);
    proc.on_leader_exit(exit, empty);
}
