//! [`ShellSession`]: the output stream, the framing input writer and the resize control of one
//! interactive shell, the same for `/shell` (raw upgrade) and `/shell-ws` (WebSocket).
//!
//! All frames go through one writer task fed by a channel, so a resize frame can never land
//! inside a data frame, whichever handle sent it.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::task::AtomicWaker;
use futures::{Sink, SinkExt, Stream};
use tokio::io::AsyncWrite;
use tokio::sync::mpsc;
use tokio_util::sync::PollSender;

use super::codec::ShellFrame;
use crate::error::{Error, Result};

/// Largest data frame one `write` call produces (a keystroke burst or a paste slice).
pub const INPUT_FRAME: usize = 32 * 1024;
/// Frames queued between the handles and the writer task.
const QUEUE: usize = 32;

enum Command {
    Input { frame: ShellFrame, seq: u64 },
    Resize(ShellFrame),
    Close,
}

/// What the writer task reports back to [`ShellInput`].
#[derive(Default)]
struct Progress {
    /// Sequence of the last input frame written and flushed.
    input_written: AtomicU64,
    /// The writer task ended (closed, failed, or every handle dropped); nothing more is written.
    stopped: AtomicBool,
    /// The write side was closed on request.
    closed: AtomicBool,
    waker: AtomicWaker,
}

fn broken(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        format!("the shell session has ended ({what})"),
    )
}

/// The shell's terminal output: raw PTY bytes (stdout and stderr merged), unframed.
pub struct ShellOutput {
    inner: BoxStream<'static, io::Result<Bytes>>,
}

impl std::fmt::Debug for ShellOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ShellOutput")
    }
}

impl Stream for ShellOutput {
    type Item = io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// Keystrokes for the shell: every write becomes data frames. `flush` returns once the bytes
/// were handed to the connection; `shutdown` closes the session's sending side, which ends the
/// session (the server hangs up the shell).
pub struct ShellInput {
    tx: PollSender<Command>,
    progress: Arc<Progress>,
    sent: u64,
    close_sent: bool,
}

impl std::fmt::Debug for ShellInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShellInput")
            .field("sent_frames", &self.sent)
            .finish()
    }
}

impl ShellInput {
    fn wait_for(
        &self,
        cx: &mut Context<'_>,
        done: impl Fn(&Progress) -> bool,
    ) -> Poll<io::Result<()>> {
        let check = |p: &Progress| {
            if done(p) {
                Some(Ok(()))
            } else if p.stopped.load(Ordering::Acquire) {
                Some(Err(broken("writer stopped")))
            } else {
                None
            }
        };
        if let Some(result) = check(&self.progress) {
            return Poll::Ready(result);
        }
        self.progress.waker.register(cx.waker());
        match check(&self.progress) {
            Some(result) => Poll::Ready(result),
            None => Poll::Pending,
        }
    }
}

impl AsyncWrite for ShellInput {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if this.close_sent {
            return Poll::Ready(Err(broken("input was shut down")));
        }
        if this.progress.stopped.load(Ordering::Acquire) {
            return Poll::Ready(Err(broken("writer stopped")));
        }
        match this.tx.poll_reserve(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(_)) => return Poll::Ready(Err(broken("writer stopped"))),
            Poll::Pending => return Poll::Pending,
        }
        let n = buf.len().min(INPUT_FRAME);
        let seq = this.sent + 1;
        let frame = ShellFrame::Data(Bytes::copy_from_slice(&buf[..n]));
        this.tx
            .send_item(Command::Input { frame, seq })
            .map_err(|_| broken("writer stopped"))?;
        this.sent = seq;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let sent = self.sent;
        self.wait_for(cx, |p| p.input_written.load(Ordering::Acquire) >= sent)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.close_sent {
            let sent = this.sent;
            match this.wait_for(cx, |p| p.input_written.load(Ordering::Acquire) >= sent) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
            match this.tx.poll_reserve(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(_)) => return Poll::Ready(Err(broken("writer stopped"))),
                Poll::Pending => return Poll::Pending,
            }
            this.tx
                .send_item(Command::Close)
                .map_err(|_| broken("writer stopped"))?;
            this.close_sent = true;
        }
        this.wait_for(cx, |p| p.closed.load(Ordering::Acquire))
    }
}

/// Sends resize frames; cheap to clone, usable while another task writes input.
#[derive(Clone, Debug)]
pub struct ShellControl {
    tx: mpsc::Sender<Command>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Input { seq, .. } => write!(f, "Input#{seq}"),
            Command::Resize(frame) => write!(f, "{frame:?}"),
            Command::Close => f.write_str("Close"),
        }
    }
}

impl ShellControl {
    /// Tell the shell its terminal is now `rows`×`cols` (both at least 1).
    pub async fn resize(&self, rows: u16, cols: u16) -> Result<()> {
        if rows == 0 || cols == 0 {
            return Err(Error::invalid(
                "size",
                format!("{rows}x{cols} is not a terminal size (rows and cols ≥ 1)"),
            ));
        }
        self.tx
            .send(Command::Resize(ShellFrame::Resize { rows, cols }))
            .await
            .map_err(|_| Error::Io {
                context: "resizing the shell".into(),
                source: broken("connection closed"),
            })
    }
}

/// An interactive shell on a fresh PTY: [`Self::output`] (raw terminal bytes),
/// [`Self::input`] (an `AsyncWrite` of keystrokes) and [`Self::resize`].
///
/// The session ends when either side closes: the shell exits (output ends), or the input is
/// shut down or every handle is dropped (the server then hangs up the shell). There is no
/// exit status on these routes; use a managed PTY process when you need one.
#[derive(Debug)]
pub struct ShellSession {
    /// Raw PTY output.
    pub output: ShellOutput,
    /// Framing keystroke writer.
    pub input: ShellInput,
    /// Resize handle (clone it to keep resizing after splitting the session).
    pub control: ShellControl,
}

impl ShellSession {
    /// Start the writer task over `sink` and queue the initial resize.
    pub(crate) fn start<S>(
        output: BoxStream<'static, io::Result<Bytes>>,
        sink: S,
        rows: u16,
        cols: u16,
    ) -> Self
    where
        S: Sink<ShellFrame, Error = io::Error> + Send + Unpin + 'static,
    {
        let (tx, rx) = mpsc::channel(QUEUE);
        // The channel is empty, so the first resize always fits: it goes out before any input.
        let _ = tx.try_send(Command::Resize(ShellFrame::Resize { rows, cols }));
        let progress = Arc::new(Progress::default());
        tokio::spawn(write_frames(rx, sink, progress.clone()));
        ShellSession {
            output: ShellOutput { inner: output },
            input: ShellInput {
                tx: PollSender::new(tx.clone()),
                progress,
                sent: 0,
                close_sent: false,
            },
            control: ShellControl { tx },
        }
    }

    /// Send a resize frame (same as `self.control.resize`).
    pub async fn resize(&self, rows: u16, cols: u16) -> Result<()> {
        self.control.resize(rows, cols).await
    }

    /// The three parts, for handing to different tasks.
    pub fn into_parts(self) -> (ShellOutput, ShellInput, ShellControl) {
        (self.output, self.input, self.control)
    }
}

/// The writer task: frames from every handle, in queue order, batched per flush.
async fn write_frames<S>(mut rx: mpsc::Receiver<Command>, mut sink: S, progress: Arc<Progress>)
where
    S: Sink<ShellFrame, Error = io::Error> + Unpin,
{
    let result: io::Result<()> = async {
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while batch.len() < QUEUE {
                match rx.try_recv() {
                    Ok(next) => batch.push(next),
                    Err(_) => break,
                }
            }
            let mut written = None;
            let mut close = false;
            for command in batch {
                match command {
                    Command::Input { frame, seq } => {
                        sink.feed(frame).await?;
                        written = Some(seq);
                    }
                    Command::Resize(frame) => sink.feed(frame).await?,
                    Command::Close => {
                        close = true;
                        break;
                    }
                }
            }
            sink.flush().await?;
            if let Some(seq) = written {
                progress.input_written.store(seq, Ordering::Release);
                progress.waker.wake();
            }
            if close {
                sink.close().await?;
                progress.closed.store(true, Ordering::Release);
                progress.waker.wake();
                return Ok(());
            }
        }
        // Every handle is gone: close our side so the server ends the session.
        sink.close().await
    }
    .await;
    if let Err(err) = result {
        tracing::debug!(error = %err, "shell input writer stopped");
    }
    progress.stopped.store(true, Ordering::Release);
    progress.waker.wake();
}
