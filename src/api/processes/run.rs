//! [`Processes::run`]: start → follow the output → result (a `wait` only when the stream did
//! not carry the exit), with a timeout and cancellation that take the whole remote process
//! tree down with them.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::{Process, ProcessSpec, ProcessState, Processes, WaitScope};
use crate::error::{Error, Result};
use crate::stream::process_output::{OutputEvent, StreamKind};

/// Options of [`Processes::run`].
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Bytes kept of stdout and, separately, of stderr (PTY output counts as stdout); the rest
    /// is dropped and [`RunOutput::truncated`] set. Default 16 MiB.
    pub max_output_bytes: usize,
    /// Overall limit; `None` or zero means none. When it passes, the process tree is stopped
    /// and the run fails with [`Error::Timeout`].
    pub timeout: Option<Duration>,
    /// Cancelling it stops the process tree and fails the run with [`Error::Cancelled`] (after
    /// the stop has completed).
    pub cancel: Option<CancellationToken>,
    /// Grace period between SIGTERM and SIGKILL when the tree is stopped. Default 1 s.
    pub stop_grace: Duration,
    /// Input for a pipe process: written to its stdin while the output is followed, then
    /// stdin is closed (end-of-file). `None` (the default) leaves stdin alone.
    pub stdin: Option<Bytes>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            max_output_bytes: 16 << 20,
            timeout: None,
            cancel: None,
            stop_grace: Duration::from_secs(1),
            stdin: None,
        }
    }
}

impl RunOptions {
    /// Set [`Self::max_output_bytes`].
    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = bytes;
        self
    }

    /// Set [`Self::timeout`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Set [`Self::cancel`].
    pub fn cancel(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Set [`Self::stop_grace`].
    pub fn stop_grace(mut self, grace: Duration) -> Self {
        self.stop_grace = grace;
        self
    }

    /// Set [`Self::stdin`]: feed `input`, then close stdin (an empty input just closes it).
    pub fn stdin(mut self, input: impl Into<Bytes>) -> Self {
        self.stdin = Some(input.into());
        self
    }
}

/// The result of a finished [`Processes::run`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunOutput {
    /// The process id (its record stays retained on the server).
    pub process_id: String,
    /// Exit code of the leader; `None` when a signal ended it.
    pub exit_code: Option<i32>,
    /// The signal that ended it, e.g. `SIGKILL`.
    pub signal: Option<String>,
    /// Standard output (PTY output for a PTY process), up to `max_output_bytes`.
    pub stdout: Vec<u8>,
    /// Standard error, up to `max_output_bytes`.
    pub stderr: Vec<u8>,
    /// Some output is missing: cut at `max_output_bytes`, or evicted from the server's journal
    /// before it could be read.
    pub truncated: bool,
}

impl RunOutput {
    /// Exit code 0.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// stdout as text (invalid UTF-8 replaced).
    pub fn stdout_lossy(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// stderr as text (invalid UTF-8 replaced).
    pub fn stderr_lossy(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// Stops the remote tree if the run future is dropped before it finished.
///
/// `Drop` cannot await, so it spawns the stop request on the current Tokio runtime (the one
/// the run was polled on). The request then runs to completion on its own; if the runtime is
/// shutting down at that moment it may not get to send it, which is logged.
struct StopOnDrop {
    process: Option<Process>,
    grace: Duration,
}

impl StopOnDrop {
    /// Stop now and wait for it; the guard stays armed until the stop has been answered, so
    /// dropping the run during this await still stops the tree.
    async fn stop_now(&mut self) {
        if let Some(process) = &self.process {
            if let Err(err) = process.stop(Some(self.grace)).await {
                tracing::warn!(process = %process.id(), error = %err, "stopping the process tree failed");
            }
        }
        self.process = None;
    }

    fn disarm(&mut self) {
        self.process = None;
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let Some(process) = self.process.take() else {
            return;
        };
        let grace = self.grace;
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    if let Err(err) = process.stop(Some(grace)).await {
                        tracing::warn!(process = %process.id(), error = %err, "stopping a dropped run failed");
                    }
                });
            }
            Err(_) => {
                tracing::warn!(process = %process.id(), "run dropped outside a Tokio runtime; the process keeps running")
            }
        }
    }
}

impl Processes {
    /// Run a process to completion and collect its output: start, then follow the output until
    /// its exit event (two requests; a `wait` follows only when the stream ended without one).
    ///
    /// stdout and stderr are kept apart. The output stream reconnects by itself, so a flaky
    /// network costs nothing that the server still retains. When the run ends early — the
    /// `timeout` passes, the `cancel` token fires, the output cannot be followed, or the future
    /// is dropped — the whole remote process tree is stopped (SIGTERM, then SIGKILL after
    /// `stop_grace`). On a token, timeout or error the stop is awaited before returning; on a
    /// drop it is spawned on the runtime (see the type docs of the internal guard). A tree the
    /// leader left behind after a normal exit is not touched.
    ///
    /// ```no_run
    /// # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
    /// use std::time::Duration;
    /// use createos_sandbox::api::processes::{ProcessSpec, RunOptions};
    /// let out = sandbox
    ///     .processes()
    ///     .run(ProcessSpec::new("cargo").arg("test"), RunOptions::default().timeout(Duration::from_secs(600)))
    ///     .await?;
    /// println!("exit {:?}\n{}", out.exit_code, out.stdout_lossy());
    /// # Ok(()) }
    /// ```
    pub async fn run(&self, spec: ProcessSpec, options: RunOptions) -> Result<RunOutput> {
        spec.validate()?;
        let process = self.start(spec).await?;
        let mut guard = StopOnDrop {
            process: Some(process.clone()),
            grace: options.stop_grace,
        };
        let cancel = options.cancel.clone().unwrap_or_default();
        let timeout = options.timeout.filter(|t| !t.is_zero());
        let outcome = tokio::select! {
            result = follow(&process, options.max_output_bytes, options.stdin.as_deref()) => result,
            _ = cancel.cancelled() => Err(Error::Cancelled),
            _ = crate::wait::sleep_or_forever(timeout) => Err(Error::Timeout {
                endpoint: format!("process run {}", process.id()),
                after: timeout.unwrap_or_default(),
            }),
        };
        match outcome {
            Ok(output) => {
                guard.disarm();
                Ok(output)
            }
            Err(err) => {
                guard.stop_now().await;
                Err(err)
            }
        }
    }
}

/// Keep at most `cap` bytes of `bytes` in `into`; true when something was dropped.
fn keep(into: &mut Vec<u8>, bytes: &[u8], cap: usize) -> bool {
    let room = cap.saturating_sub(into.len());
    into.extend_from_slice(&bytes[..bytes.len().min(room)]);
    bytes.len() > room
}

async fn follow(process: &Process, cap: usize, stdin: Option<&[u8]>) -> Result<RunOutput> {
    let mut output = RunOutput {
        process_id: process.id().to_string(),
        ..Default::default()
    };
    // Follow first, so the output streams live while the input goes in.
    let mut events = process.connect(0).await?;
    let feeding = async {
        match stdin {
            Some(input) => feed(process, input).await,
            None => Ok(()),
        }
    };
    tokio::pin!(feeding);
    let mut fed = stdin.is_none() || process.details().state == ProcessState::Failed;
    let mut exit = None;
    loop {
        let event = tokio::select! {
            sent = &mut feeding, if !fed => {
                fed = true;
                if let Err(err) = sent {
                    // A command that already ended cannot take input; its output says why.
                    if !has_ended(process).await {
                        return Err(err);
                    }
                }
                continue;
            }
            event = events.next() => event,
        };
        let Some(event) = event else { break };
        match event? {
            OutputEvent::Data {
                stream: StreamKind::Stderr,
                bytes,
                ..
            } => {
                output.truncated |= keep(&mut output.stderr, &bytes, cap);
            }
            OutputEvent::Data { bytes, .. } => {
                output.truncated |= keep(&mut output.stdout, &bytes, cap)
            }
            OutputEvent::Gap { .. } => output.truncated = true,
            OutputEvent::Exit { code, signal } => exit = Some((code, signal)),
            OutputEvent::Error(message) => {
                tracing::warn!(process = %process.id(), %message, "process output reported an error");
            }
        }
    }
    match exit {
        // The exit event already says how the leader ended: no `wait` round trip.
        Some((code, signal)) if code.is_some() || signal.is_some() => {
            output.exit_code = if signal.is_some() { None } else { code };
            output.signal = signal;
        }
        // The stream ended without saying how: the `wait` answer is the record.
        _ => {
            let details = process.wait(WaitScope::Leader, None).await?;
            output.signal = details.signal;
            output.exit_code = if output.signal.is_some() {
                None
            } else {
                details.exit_code
            };
        }
    }
    Ok(output)
}

/// Send all of `input`, then end-of-file.
async fn feed(process: &Process, input: &[u8]) -> Result<()> {
    if !input.is_empty() {
        process.write_input(input).await?;
    }
    process.close_stdin().await
}

/// Whether the leader is gone (asked of the server; an error counts as "no").
async fn has_ended(process: &Process) -> bool {
    matches!(process.info().await, Ok(d) if d.leader_exited || d.state.is_finished())
}
