//! E31 `/shell` (HTTP/1.1 Upgrade `tcp-tunnel`) and E32 `/shell-ws` (WebSocket): a fresh
//! login shell on a PTY inside the sandbox. The client sends `/shell` frames (raw bytes on
//! the upgraded connection, or inside binary WebSocket messages); the server sends raw PTY
//! output. The session ends when either side closes; the shell is then hung up.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket};
use futures::{SinkExt, StreamExt};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::fdio::{FdIo, ReadOutcome};
use super::frames::{ClientFrame, FrameDecoder};
use super::pty::{self, DEFAULT_COLS, DEFAULT_ROWS, MAX_DIMENSION};
use super::spawn::{login_shell, spawn_on_pty};
use super::SessionGuard;
use crate::isolation::SandboxRuntime;

const IO_BUF: usize = 16 * 1024;

/// How long a hung-up shell gets to exit before its process group is killed.
const HANGUP_GRACE: Duration = Duration::from_millis(500);

/// A login shell on a PTY, owned by one interactive session.
pub struct ShellProcess {
    master: FdIo,
    pid: i32,
    reaped: watch::Receiver<bool>,
}

impl ShellProcess {
    /// Starts the sandbox's login shell on a new 24×80 PTY.
    pub fn spawn(runtime: &SandboxRuntime) -> std::io::Result<ShellProcess> {
        let (program, args) = login_shell();
        let command = runtime.command(program, &args, None, &BTreeMap::new());
        let (mut started, master) = {
            let _scope = runtime.spawn_scope();
            spawn_on_pty(command, DEFAULT_ROWS, DEFAULT_COLS)?
        };
        runtime.adopt(started.pid as u32);
        let master = match FdIo::new(master) {
            Ok(io) => io,
            Err(err) => {
                let _ = started.child.start_kill();
                tokio::spawn(async move {
                    let _ = started.child.wait().await;
                });
                return Err(err);
            }
        };
        let (tx, reaped) = watch::channel(false);
        let mut child = started.child;
        tokio::spawn(async move {
            let _ = child.wait().await;
            let _ = tx.send(true);
        });
        Ok(ShellProcess {
            master,
            pid: started.pid,
            reaped,
        })
    }

    /// Applies one client frame (input bytes or a resize).
    async fn apply(&self, frame: ClientFrame) -> std::io::Result<()> {
        match frame {
            ClientFrame::Data(bytes) => self.master.write_all(&bytes).await,
            ClientFrame::Resize { rows, cols } => {
                if rows > 0 && cols > 0 {
                    pty::set_window_size(
                        &self.master.raw(),
                        rows.min(MAX_DIMENSION),
                        cols.min(MAX_DIMENSION),
                    )?;
                }
                Ok(())
            }
            ClientFrame::Unknown(_) => Ok(()),
        }
    }

    /// Decodes frames from `bytes` and applies them; false when the session must end
    /// (a malformed frame, or the PTY is gone).
    async fn feed(&self, decoder: &mut FrameDecoder, bytes: &[u8]) -> bool {
        decoder.push(bytes);
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => {
                    if self.apply(frame).await.is_err() {
                        return false;
                    }
                }
                Ok(None) => return true,
                Err(err) => {
                    tracing::debug!("shell session: {err}");
                    return false;
                }
            }
        }
    }

    /// Ends a shell whose session never started (the upgrade failed).
    pub fn abandon(self) {
        Arc::new(self).hang_up();
    }

    /// Hangs the shell up like a closed terminal (SIGHUP to its group), then kills the
    /// group if it has not exited shortly after. Disowned/nohup jobs survive, as they would.
    fn hang_up(self: Arc<Self>) {
        let pid = self.pid;
        let _ = killpg(Pid::from_raw(pid), Signal::SIGHUP);
        let _ = killpg(Pid::from_raw(pid), Signal::SIGCONT);
        let mut reaped = self.reaped.clone();
        tokio::spawn(async move {
            let exited = tokio::time::timeout(HANGUP_GRACE, reaped.wait_for(|done| *done)).await;
            if !matches!(exited, Ok(Ok(_))) {
                let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            }
            // Dropping the master last delivers the terminal hangup to anything left.
            drop(self);
        });
    }
}

/// Serves a `/shell` session on an upgraded connection.
pub async fn serve_raw<S>(
    io: S,
    shell: ShellProcess,
    guard: SessionGuard,
    shutdown: CancellationToken,
) where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let shell = Arc::new(shell);
    let (mut rd, mut wr) = tokio::io::split(io);
    let input = async {
        let mut decoder = FrameDecoder::default();
        let mut buf = vec![0u8; IO_BUF];
        loop {
            let n = match rd.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if !shell.feed(&mut decoder, &buf[..n]).await {
                return;
            }
        }
    };
    let output = async {
        let mut buf = vec![0u8; IO_BUF];
        while let Ok(ReadOutcome::Data(n)) = shell.master.read(&mut buf).await {
            if wr.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
        let _ = wr.shutdown().await;
    };
    tokio::select! {
        _ = input => {}
        _ = output => {}
        _ = guard.cancel.cancelled() => {}
        _ = shutdown.cancelled() => {}
    }
    shell.hang_up();
    drop(guard);
}

fn close(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }))
}

/// Serves a `/shell-ws` session (binary messages carry `/shell` frames; text → 1003).
pub async fn serve_ws(
    socket: WebSocket,
    runtime: Arc<SandboxRuntime>,
    guard: SessionGuard,
    shutdown: CancellationToken,
) {
    let (mut sink, mut stream) = socket.split();
    let shell = match ShellProcess::spawn(&runtime) {
        Ok(shell) => Arc::new(shell),
        Err(err) => {
            tracing::warn!("shell-ws: could not start the shell: {err}");
            let _ = sink
                .send(close(close_code::ERROR, "could not start the shell"))
                .await;
            return;
        }
    };
    let (tx, mut rx) = mpsc::channel::<Message>(16);
    let writer = tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            let closing = matches!(msg, Message::Close(_));
            if sink.send(msg).await.is_err() || closing {
                break;
            }
        }
    });
    let input_tx = tx.clone();
    let input = async {
        let mut decoder = FrameDecoder::default();
        while let Some(msg) = stream.next().await {
            match msg {
                Ok(Message::Binary(bytes)) => {
                    let fed = shell.feed(&mut decoder, &bytes).await;
                    if !fed || !decoder.is_empty() {
                        let _ = input_tx
                            .send(close(
                                close_code::PROTOCOL,
                                "each message must hold complete frames",
                            ))
                            .await;
                        return;
                    }
                }
                Ok(Message::Text(_)) => {
                    let _ = input_tx
                        .send(close(
                            close_code::UNSUPPORTED,
                            "text messages are not supported",
                        ))
                        .await;
                    return;
                }
                Ok(Message::Close(_)) | Err(_) => return,
                Ok(Message::Ping(_)) | Ok(Message::Pong(_)) => {}
            }
        }
    };
    let output = async {
        let mut buf = vec![0u8; IO_BUF];
        while let Ok(ReadOutcome::Data(n)) = shell.master.read(&mut buf).await {
            if tx
                .send(Message::Binary(bytes::Bytes::copy_from_slice(&buf[..n])))
                .await
                .is_err()
            {
                return;
            }
        }
        let _ = tx.send(close(close_code::NORMAL, "shell exited")).await;
    };
    let cancelled = tokio::select! {
        _ = input => false,
        _ = output => false,
        _ = guard.cancel.cancelled() => true,
        _ = shutdown.cancelled() => true,
    };
    if cancelled {
        let _ = tx.try_send(close(close_code::AWAY, "sandbox is going away"));
    }
    drop(tx);
    drop(input_tx);
    shell.hang_up();
    // Let queued output and the close frame reach a client that is still reading.
    let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
    drop(guard);
}
