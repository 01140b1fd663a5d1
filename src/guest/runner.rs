//! How the helper is run in a sandbox: [`HelperRunner`] (argv + stdin in, stdout + stderr +
//! exit status out) and its managed-process implementation, [`ProcessRunner`]. The SSH
//! implementation is [`super::SshRunner`]; other channels plug in by implementing the trait.

use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;

use super::error::{GuestError, GuestErrorCode};
use super::helper::{HelperLocation, FINISH_UPLOAD, INSTALL_FROM_STDIN};
use crate::api::exec::ExecRequest;
use crate::api::processes::{ProcessSpec, RunOptions};
use crate::api::sandboxes::Sandbox;
use crate::error::{Error, Result};

/// Default bound of the helper's stdout: 8 MiB.
pub const DEFAULT_MAX_OUTPUT: usize = 8 << 20;
/// Budget of one install step.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(120);

/// What a finished command produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HelperOutput {
    /// Standard output, up to the runner's bound.
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
/// Implementations bound the output they keep (setting [`HelperOutput::truncated`]) and stop
/// the remote command when `timeout` passes (failing with [`Error::Timeout`]) or when the
/// returned future is dropped. `timeout` `None` means no limit.
pub trait HelperRunner: Send + Sync {
    /// Run `argv` (program and arguments, no shell), write `stdin` to it and close it, and
    /// collect what it prints until it exits. An empty `stdin` may be left open instead (the
    /// managed-process runner then sends nothing): give it only to commands that do not
    /// read their input, such as the helper's `once` mode.
    fn run(
        &self,
        argv: Vec<String>,
        stdin: Vec<u8>,
        timeout: Option<Duration>,
    ) -> BoxFuture<'_, Result<HelperOutput>>;

    /// Store `content` as the helper file at `location.file` (directories mode 0700). The
    /// default pipes it through `sh` with [`HelperRunner::run`]; a runner with a cheaper
    /// file path (the files API, SFTP) may override it.
    fn install<'a>(
        &'a self,
        location: &'a HelperLocation,
        content: Bytes,
    ) -> BoxFuture<'a, Result<()>> {
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
            let out = self
                .run(argv, content.to_vec(), Some(INSTALL_TIMEOUT))
                .await?;
            if out.exit_code == Some(0) {
                Ok(())
            } else {
                Err(install_failed(
                    &location.file,
                    out.exit_code,
                    &String::from_utf8_lossy(&out.stderr),
                ))
            }
        })
    }
}

fn install_failed(file: &str, code: Option<i32>, stderr: &str) -> Error {
    let code = code.map_or_else(|| "a signal".to_string(), |c| format!("status {c}"));
    GuestError::new(
        "install",
        GuestErrorCode::InstallFailed,
        format!(
            "could not store the file helper at {file} (exited with {code}): {}",
            stderr.trim()
        ),
    )
    .into()
}

/// Runs commands as managed processes of the control plane (E21–E30) through
/// [`Processes::run`](crate::api::processes::Processes::run): start, follow the output, feed
/// stdin and close it (nothing for an empty stdin), collect until the exit event; a timeout or
/// a dropped future stops the process tree. Installs the helper with the files API plus one
/// exec.
#[derive(Clone, Debug)]
pub struct ProcessRunner {
    sandbox: Sandbox,
    max_output: usize,
    stop_grace: Duration,
}

impl ProcessRunner {
    /// A runner for `sandbox` keeping at most [`DEFAULT_MAX_OUTPUT`] bytes of stdout.
    pub fn new(sandbox: Sandbox) -> Self {
        ProcessRunner {
            sandbox,
            max_output: DEFAULT_MAX_OUTPUT,
            stop_grace: Duration::from_millis(500),
        }
    }

    /// Keep at most `bytes` of stdout.
    pub fn max_output(mut self, bytes: usize) -> Self {
        self.max_output = bytes;
        self
    }

    async fn run_managed(
        &self,
        argv: Vec<String>,
        stdin: Vec<u8>,
        timeout: Option<Duration>,
    ) -> Result<HelperOutput> {
        let (cmd, args) = argv
            .split_first()
            .ok_or_else(|| Error::invalid("argv", "must name a program"))?;
        let spec = ProcessSpec::new(cmd.clone()).args(args.iter().cloned());
        let mut options = RunOptions::default()
            .max_output_bytes(self.max_output)
            .stop_grace(self.stop_grace);
        if !stdin.is_empty() {
            options = options.stdin(stdin);
        }
        if let Some(limit) = timeout.filter(|t| !t.is_zero()) {
            options = options.timeout(limit);
        }
        let out = self.sandbox.processes().run(spec, options).await?;
        Ok(HelperOutput {
            stdout: out.stdout,
            stderr: out.stderr,
            exit_code: out.exit_code,
            signal: out.signal,
            truncated: out.truncated,
        })
    }

    async fn install_with_files_api(
        &self,
        location: &HelperLocation,
        content: Bytes,
    ) -> Result<()> {
        let tmp = format!("{}/.upload.{:016x}", location.dir, rand::random::<u64>());
        self.sandbox.write(&tmp, content).await?;
        let request = ExecRequest::new("sh")
            .args([
                "-c",
                FINISH_UPLOAD,
                "sh",
                &location.dir,
                &location.root,
                &tmp,
                &location.file,
            ])
            .timeout(INSTALL_TIMEOUT);
        let out = self.sandbox.exec_with(request).await?;
        if out.success() {
            return Ok(());
        }
        let why = if out.stderr.trim().is_empty() {
            out.error.unwrap_or_default()
        } else {
            out.stderr
        };
        Err(install_failed(&location.file, Some(out.exit_code), &why))
    }
}

impl HelperRunner for ProcessRunner {
    fn run(
        &self,
        argv: Vec<String>,
        stdin: Vec<u8>,
        timeout: Option<Duration>,
    ) -> BoxFuture<'_, Result<HelperOutput>> {
        Box::pin(self.run_managed(argv, stdin, timeout))
    }

    fn install<'a>(
        &'a self,
        location: &'a HelperLocation,
        content: Bytes,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.install_with_files_api(location, content))
    }
}

/// Keep at most `cap` bytes in `into`; true when something was dropped.
pub(super) fn keep(into: &mut Vec<u8>, bytes: &[u8], cap: usize) -> bool {
    let room = cap.saturating_sub(into.len());
    into.extend_from_slice(&bytes[..bytes.len().min(room)]);
    bytes.len() > room
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
