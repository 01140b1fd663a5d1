//! [`Resident::run`]: a command through the resident helper, its output streamed back, its
//! process tree stopped by cancellation, a deadline or a dropped call.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::link::{Link, Reply};
use super::Resident;
use crate::error::{Error, Result};
use crate::stream::process_output::StreamKind;

/// Bytes kept of stdout and, separately, of stderr by default (1 MiB each).
pub const DEFAULT_MAX_BYTES: usize = 1 << 20;

/// Longest wait for the helper to confirm a stopped command after its grace period, before the
/// helper itself is stopped.
const STOP_SLACK: Duration = Duration::from_secs(5);

/// What to run: a program and its arguments (no shell), in a working directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandSpec {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Absolute working directory in the guest.
    pub cwd: String,
    /// Bytes kept of stdout and of stderr each; the rest is counted, not kept.
    pub max_bytes: usize,
}

impl CommandSpec {
    /// `argv` in `cwd`, keeping `DEFAULT_MAX_BYTES` (1 MiB) of each stream.
    pub fn new(argv: Vec<String>, cwd: impl Into<String>) -> Self {
        CommandSpec {
            argv,
            cwd: cwd.into(),
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// `bash -lc <script>` with stdin at end-of-file, in `cwd`.
    pub fn shell(script: &str, cwd: impl Into<String>) -> Self {
        Self::new(vec!["bash".into(), "-lc".into(), script.to_string()], cwd)
    }

    /// Keep at most `bytes` of each stream.
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes;
        self
    }
}

/// What a running command has produced so far (for progress reports).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputNote {
    /// Bytes received so far, both streams.
    pub bytes: u64,
    /// The last complete non-empty line seen on either stream (at most 200 characters).
    pub last_line: Option<String>,
}

/// Called with each new piece of output.
pub type OutputWatcher = Arc<dyn Fn(&OutputNote) + Send + Sync>;

/// How a run is stopped and watched.
#[derive(Clone, Default)]
pub struct RunControl {
    /// Overall limit; `None` or zero means none. When it passes the tree is stopped and the run
    /// fails with [`Error::Timeout`].
    pub timeout: Option<Duration>,
    /// Cancelling it stops the tree and fails the run with [`Error::Cancelled`].
    pub cancel: Option<CancellationToken>,
    /// SIGTERM → SIGKILL grace when stopping. Default 1 s.
    pub grace: Option<Duration>,
    /// Told about output as it arrives.
    pub watch: Option<OutputWatcher>,
}

impl std::fmt::Debug for RunControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunControl")
            .field("timeout", &self.timeout)
            .field("grace", &self.grace)
            .finish_non_exhaustive()
    }
}

/// The result of a finished command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandOutput {
    /// Exit code; `None` when a signal ended it.
    pub exit_code: Option<i32>,
    /// The signal that ended it, e.g. `SIGKILL`.
    pub signal: Option<String>,
    /// Standard output, up to the spec's bound.
    pub stdout: Vec<u8>,
    /// Standard error, up to the spec's bound.
    pub stderr: Vec<u8>,
    /// Some output was not kept.
    pub truncated: bool,
    /// Bytes written to stdout and stderr in all (kept or not).
    pub total_bytes: u64,
}

#[derive(Debug, Default, Deserialize)]
struct WireResult {
    #[serde(default)]
    exit_code: Option<i32>,
    #[serde(default)]
    signal: Option<String>,
    #[serde(default)]
    truncated: bool,
    #[serde(default)]
    bytes: WireBytes,
}

#[derive(Debug, Default, Deserialize)]
struct WireBytes {
    #[serde(default)]
    stdout: u64,
    #[serde(default)]
    stderr: u64,
}

/// Tells the helper to stop run `id` if the run is dropped before it finished.
struct StopOnDrop {
    link: Option<Arc<Link>>,
    id: u64,
    grace: Duration,
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let Some(link) = self.link.take() else { return };
        let (id, grace) = (self.id, self.grace);
        link.unregister(id);
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if let Err(err) = send_cancel(&link, id, grace).await {
                    tracing::warn!(process = %link.process.id(), error = %err, "stopping a dropped command failed; stopping the helper");
                    let _ = link.process.stop(Some(Duration::ZERO)).await;
                }
            });
        }
    }
}

/// A `cancel` line for run `id` (its own id is never waited for).
async fn send_cancel(link: &Link, id: u64, grace: Duration) -> Result<()> {
    let grace_ms = u64::try_from(grace.as_millis())
        .unwrap_or(u64::MAX)
        .min(60_000);
    let line = json!({"v": super::PROTOCOL_VERSION, "id": u64::MAX - id, "op": "cancel", "cwd": "/", "args": {"target": id, "grace_ms": grace_ms}});
    let mut bytes =
        serde_json::to_vec(&line).map_err(|e| Error::invalid("cancel", e.to_string()))?;
    bytes.push(b'\n');
    link.process.write_input(&bytes).await.map(drop)
}

/// Keeps the bounded output and the progress note.
struct Collector {
    out: CommandOutput,
    cap: usize,
    note: OutputNote,
    tail: Vec<u8>,
}

impl Collector {
    fn push(&mut self, stream: StreamKind, bytes: &[u8]) {
        let into = if stream == StreamKind::Stderr {
            &mut self.out.stderr
        } else {
            &mut self.out.stdout
        };
        self.out.truncated |= super::super::runner::keep(into, bytes, self.cap);
        self.note.bytes += bytes.len() as u64;
        self.tail.extend_from_slice(bytes);
        if let Some(end) = self.tail.iter().rposition(|b| *b == b'\n') {
            let complete = &self.tail[..end];
            let line = complete
                .rsplit(|b| *b == b'\n')
                .map(|l| l.trim_ascii())
                .find(|l| !l.is_empty());
            if let Some(line) = line {
                let text: String = String::from_utf8_lossy(line).chars().take(200).collect();
                self.note.last_line = Some(text);
            }
            self.tail.drain(..=end);
        }
        if self.tail.len() > 4096 {
            let excess = self.tail.len() - 4096;
            self.tail.drain(..excess);
        }
    }
}

impl Resident {
    /// Run `spec` to completion (or until `control` stops it) and collect its output. The
    /// command runs in its own session with stdin at end-of-file; a command the leader left
    /// running in the background after a normal exit is not touched.
    pub async fn run(&self, spec: CommandSpec, control: RunControl) -> Result<CommandOutput> {
        if spec.argv.first().is_none_or(|p| p.is_empty()) {
            return Err(Error::invalid("argv", "must name a program"));
        }
        let body = json!({"op": "exec", "cwd": spec.cwd, "args": {"argv": spec.argv, "max_bytes": spec.max_bytes}});
        let grace = control.grace.unwrap_or(Duration::from_secs(1));
        let (link, id, mut replies) = self.send(body).await?;
        let mut guard = StopOnDrop {
            link: Some(link.clone()),
            id,
            grace,
        };
        let mut collected = Collector {
            out: CommandOutput::default(),
            cap: spec.max_bytes,
            note: OutputNote {
                bytes: 0,
                last_line: None,
            },
            tail: Vec::new(),
        };
        let cancel = control.cancel.clone().unwrap_or_default();
        let timeout = control.timeout.filter(|t| !t.is_zero());
        let deadline = crate::wait::sleep_or_forever(timeout);
        tokio::pin!(deadline);
        let stopped = loop {
            tokio::select! {
                reply = replies.recv() => match reply {
                    Some(Reply::Chunk { stream, bytes }) => {
                        collected.push(stream, &bytes);
                        if let Some(watch) = &control.watch {
                            watch(&collected.note);
                        }
                    }
                    Some(Reply::Result(value)) => {
                        guard.link = None;
                        return Ok(finish(collected, value));
                    }
                    Some(Reply::Refused(wire)) => {
                        guard.link = None;
                        return Err(wire.into_error("exec"));
                    }
                    Some(Reply::Gone(err)) => {
                        // The output could not be followed, but the helper may still run the
                        // command: the guard stops it. A helper that is gone took it along.
                        if link.dead.is_cancelled() {
                            guard.link = None;
                        }
                        return Err(err);
                    }
                    None => {
                        guard.link = None;
                        return Err(super::link::gone(&link.exit().unwrap_or_default()));
                    }
                },
                _ = cancel.cancelled() => break Error::Cancelled,
                _ = &mut deadline => break Error::Timeout { endpoint: "guest exec".into(), after: timeout.unwrap_or_default() },
            }
        };
        // Stop the tree and wait for the helper to confirm; failing that, stop the helper.
        guard.link = None;
        let confirmed = async {
            send_cancel(&link, id, grace).await?;
            loop {
                match replies.recv().await {
                    Some(Reply::Chunk { .. }) => continue,
                    Some(Reply::Result(_)) | Some(Reply::Refused(_)) => return Ok(()),
                    Some(Reply::Gone(err)) => return Err(err),
                    None => return Err(Error::Cancelled),
                }
            }
        };
        match tokio::time::timeout(grace + STOP_SLACK, confirmed).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                tracing::warn!(sandbox = %self.sandbox.id(), error = %err, "the helper did not confirm the stop; stopping the helper");
                self.kill().await;
            }
            Err(_) => {
                tracing::warn!(sandbox = %self.sandbox.id(), "the helper did not confirm the stop in time; stopping the helper");
                self.kill().await;
            }
        }
        link.unregister(id);
        Err(stopped)
    }
}

fn finish(collected: Collector, value: serde_json::Value) -> CommandOutput {
    let wire: WireResult = serde_json::from_value(value).unwrap_or_default();
    let mut out = collected.out;
    out.exit_code = if wire.signal.is_some() {
        None
    } else {
        wire.exit_code
    };
    out.signal = wire.signal;
    out.truncated |= wire.truncated;
    out.total_bytes = wire.bytes.stdout.saturating_add(wire.bytes.stderr);
    out
}
