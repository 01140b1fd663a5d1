//! How the helper is run in a sandbox: [`GuestTransport`] (argv + stdin in, stdout + stderr +
//! exit status out) and its managed-process implementation, [`ProcessTransport`]. Another
//! channel (an SSH exec channel, say) plugs in by implementing the trait.

use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::StreamExt;
use tokio::time::Instant;

use super::error::{GuestError, GuestErrorCode};
use super::helper::{HelperLocation, FINISH_UPLOAD, INSTALL_FROM_STDIN};
use crate::api::exec::ExecRequest;
use crate::api::processes::{Process, ProcessSpec, ProcessState, WaitScope};
use crate::api::sandboxes::Sandbox;
use crate::error::{Error, Result};
use crate::stream::process_output::{OutputEvent, StreamKind};

/// Default bound of the helper's stdout: 8 MiB.
pub const DEFAULT_MAX_OUTPUT: usize = 8 << 20;
/// Bytes of stderr kept (only shown in error messages).
const MAX_STDERR: usize = 64 * 1024;
/// Budget of one install step.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(120);

/// What a finished command produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransportOutput {
    /// Standard output, up to the transport's bound.
    pub stdout: Vec<u8>,
    /// Standard error (a bounded prefix).
    pub stderr: Vec<u8>,
    /// Exit code; `None` when a signal ended the command.
    pub exit_code: Option<i32>,
    /// The signal that ended it, e.g. `SIGKILL`.
    pub signal: Option<String>,
    /// stdout went over the bound (or was partly lost): it is incomplete.
    pub truncated: bool,
}

/// A way to run a command in one sandbox with piped stdin and collected output.
///
/// Implementations bound the output they keep (setting [`TransportOutput::truncated`]) and stop
/// the remote command when `timeout` passes (failing with [`Error::Timeout`]) or when the
/// returned future is dropped. `timeout` `None` means no limit.
pub trait GuestTransport: Send + Sync {
    /// Run `argv` (program and arguments, no shell), write `stdin` to it and close it, and
    /// collect what it prints until it exits.
    fn run(&self, argv: Vec<String>, stdin: Vec<u8>, timeout: Option<Duration>) -> BoxFuture<'_, Result<TransportOutput>>;

    /// Store `content` as the helper file at `location.file` (directories mode 0700). The
    /// default pipes it through `sh` with [`GuestTransport::run`]; a transport with a cheaper
    /// file path (the files API, SFTP) may override it.
    fn install<'a>(&'a self, location: &'a HelperLocation, content: Bytes) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let argv = vec![
                "sh".to_string(),
                "-c".to_string(),
                INSTALL_FROM_STDIN.to_string(),
                "sh".to_string(),
                location.dir.clone(),
                location.root.clone(),
                location.file.clone(),
            ];
            let out = self.run(argv, content.to_vec(), Some(INSTALL_TIMEOUT)).await?;
            if out.exit_code == Some(0) {
                Ok(())
            } else {
                Err(install_failed(&location.file, out.exit_code, &String::from_utf8_lossy(&out.stderr)))
            }
        })
    }
}

fn install_failed(file: &str, code: Option<i32>, stderr: &str) -> Error {
    let code = code.map_or_else(|| "a signal".to_string(), |c| format!("status {c}"));
    GuestError::new(
        "install",
        GuestErrorCode::InstallFailed,
        format!("could not store the file helper at {file} (exited with {code}): {}", stderr.trim()),
    )
    .into()
}

/// Runs commands as managed processes of the control plane (E21–E30): start, follow the
/// output, send stdin, close it, collect until the exit. Installs the helper with the files
/// API plus one exec.
#[derive(Clone, Debug)]
pub struct ProcessTransport {
    sandbox: Sandbox,
    max_output: usize,
    stop_grace: Duration,
}

impl ProcessTransport {
    /// A transport for `sandbox` keeping at most [`DEFAULT_MAX_OUTPUT`] bytes of stdout.
    pub fn new(sandbox: Sandbox) -> Self {
        ProcessTransport { sandbox, max_output: DEFAULT_MAX_OUTPUT, stop_grace: Duration::from_millis(500) }
    }

    /// Keep at most `bytes` of stdout.
    pub fn max_output(mut self, bytes: usize) -> Self {
        self.max_output = bytes;
        self
    }

    async fn run_managed(&self, argv: Vec<String>, stdin: Vec<u8>, timeout: Option<Duration>) -> Result<TransportOutput> {
        let (cmd, args) = argv.split_first().ok_or_else(|| Error::invalid("argv", "must name a program"))?;
        let limit = timeout.filter(|t| !t.is_zero());
        let deadline = limit.map(|t| Instant::now() + t);
        let spec = ProcessSpec::new(cmd.clone()).args(args.iter().cloned());
        let process = bounded(deadline, limit, self.sandbox.processes().start(spec)).await?;
        let mut guard = StopGuard { process: Some(process.clone()), grace: self.stop_grace };
        match bounded(deadline, limit, self.drive(&process, &stdin)).await {
            Ok(out) => {
                guard.disarm();
                Ok(out)
            }
            Err(err) => {
                guard.stop_now().await;
                Err(err)
            }
        }
    }

    async fn drive(&self, process: &Process, stdin: &[u8]) -> Result<TransportOutput> {
        // Follow first: the answer then streams live and never depends on journal retention.
        let mut events = process.connect(0).await?;
        if process.details().state != ProcessState::Failed {
            if let Err(err) = feed(process, stdin).await {
                // A command that already ended cannot take input; its output says why.
                match process.info().await {
                    Ok(d) if d.leader_exited || d.state.is_finished() => {}
                    _ => return Err(err),
                }
            }
        }
        let mut out = TransportOutput::default();
        let mut exit = None;
        while let Some(event) = events.next().await {
            match event? {
                OutputEvent::Data { stream: StreamKind::Stderr, bytes, .. } => {
                    keep(&mut out.stderr, &bytes, MAX_STDERR);
                }
                OutputEvent::Data { bytes, .. } => out.truncated |= keep(&mut out.stdout, &bytes, self.max_output),
                OutputEvent::Gap { .. } => out.truncated = true,
                OutputEvent::Exit { code, signal } => exit = Some((code, signal)),
                OutputEvent::Error(message) => {
                    tracing::debug!(process = %process.id(), %message, "helper output reported an error");
                }
            }
        }
        match exit {
            Some((code, signal)) if code.is_some() || signal.is_some() => {
                out.exit_code = if signal.is_some() { None } else { code };
                out.signal = signal;
            }
            _ => {
                let details = process.wait(WaitScope::Leader, None).await?;
                out.exit_code = if details.signal.is_some() { None } else { details.exit_code };
                out.signal = details.signal;
            }
        }
        Ok(out)
    }

    async fn install_with_files_api(&self, location: &HelperLocation, content: Bytes) -> Result<()> {
        let tmp = format!("{}/.upload.{:016x}", location.dir, rand::random::<u64>());
        self.sandbox.write(&tmp, content).await?;
        let request = ExecRequest::new("sh")
            .args(["-c", FINISH_UPLOAD, "sh", &location.dir, &location.root, &tmp, &location.file])
            .timeout(INSTALL_TIMEOUT);
        let out = self.sandbox.exec_with(request).await?;
        if out.success() {
            return Ok(());
        }
        let why = if out.stderr.trim().is_empty() { out.error.unwrap_or_default() } else { out.stderr };
        Err(install_failed(&location.file, Some(out.exit_code), &why))
    }
}

impl GuestTransport for ProcessTransport {
    fn run(&self, argv: Vec<String>, stdin: Vec<u8>, timeout: Option<Duration>) -> BoxFuture<'_, Result<TransportOutput>> {
        Box::pin(self.run_managed(argv, stdin, timeout))
    }

    fn install<'a>(&'a self, location: &'a HelperLocation, content: Bytes) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.install_with_files_api(location, content))
    }
}

/// Send all of stdin, then end-of-file.
async fn feed(process: &Process, stdin: &[u8]) -> Result<()> {
    if !stdin.is_empty() {
        process.write_input(stdin).await?;
    }
    process.close_stdin().await
}

/// `work` within the deadline (none: unbounded).
async fn bounded<T>(
    deadline: Option<Instant>,
    limit: Option<Duration>,
    work: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match deadline {
        Some(d) => tokio::time::timeout_at(d, work).await.map_err(|_| Error::Timeout {
            endpoint: "guest helper process".to_string(),
            after: limit.unwrap_or_default(),
        })?,
        None => work.await,
    }
}

/// Keep at most `cap` bytes in `into`; true when something was dropped.
fn keep(into: &mut Vec<u8>, bytes: &[u8], cap: usize) -> bool {
    let room = cap.saturating_sub(into.len());
    into.extend_from_slice(&bytes[..bytes.len().min(room)]);
    bytes.len() > room
}

/// Stops the remote process tree unless disarmed; a drop (the caller gave up) spawns the stop.
struct StopGuard {
    process: Option<Process>,
    grace: Duration,
}

impl StopGuard {
    async fn stop_now(&mut self) {
        if let Some(process) = &self.process {
            if let Err(err) = process.stop(Some(self.grace)).await {
                tracing::warn!(process = %process.id(), error = %err, "stopping the guest helper failed");
            }
        }
        self.process = None;
    }

    fn disarm(&mut self) {
        self.process = None;
    }
}

impl Drop for StopGuard {
    fn drop(&mut self) {
        let Some(process) = self.process.take() else { return };
        let grace = self.grace;
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    if let Err(err) = process.stop(Some(grace)).await {
                        tracing::warn!(process = %process.id(), error = %err, "stopping an abandoned guest helper failed");
                    }
                });
            }
            Err(_) => tracing::warn!(process = %process.id(), "guest helper abandoned outside a Tokio runtime"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::keep;

    #[test]
    fn keep_bounds_and_reports() {
        let mut v = Vec::new();
        assert!(!keep(&mut v, b"abc", 5));
        assert!(keep(&mut v, b"def", 5));
        assert_eq!(v, b"abcde");
        assert!(keep(&mut v, b"x", 5));
    }
}
