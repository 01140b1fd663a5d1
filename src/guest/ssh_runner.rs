//! Running the helper over an SSH exec channel ([`SshRunner`]): the request goes to the
//! channel's stdin, the answer comes back on its stdout, the exit status (or signal) closes it.
//! Dropping the call (or its timeout passing) stops the remote command and frees the channel.

use std::io::Cursor;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::AsyncWrite;

use super::runner::{keep, HelperOutput, HelperRunner, DEFAULT_MAX_OUTPUT};
use crate::error::{Error, Result};
use crate::ssh::{command_line, SshSession};

/// Runs commands over exec channels of an [`SshSession`] (the sandbox's one connection,
/// multiplexed). The helper is installed through the trait's default (`sh` reading stdin),
/// so nothing but the SSH connection is used.
#[derive(Clone, Debug)]
pub struct SshRunner {
    ssh: SshSession,
    max_output: usize,
}

impl SshRunner {
    /// A runner over `ssh` keeping at most [`DEFAULT_MAX_OUTPUT`] bytes of stdout.
    pub fn new(ssh: SshSession) -> Self {
        SshRunner {
            ssh,
            max_output: DEFAULT_MAX_OUTPUT,
        }
    }

    /// Keep at most `bytes` of stdout.
    pub fn max_output(mut self, bytes: usize) -> Self {
        self.max_output = bytes;
        self
    }

    /// The session commands run on.
    pub fn session(&self) -> &SshSession {
        &self.ssh
    }

    async fn run_exec(
        &self,
        argv: Vec<String>,
        stdin: Vec<u8>,
        timeout: Option<Duration>,
    ) -> Result<HelperOutput> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| Error::invalid("argv", "must name a program"))?;
        let command = command_line(program, args);
        let mut sink = BoundedSink {
            kept: Vec::new(),
            cap: self.max_output,
            truncated: false,
        };
        let work = self
            .ssh
            .exec_streaming(&command, Cursor::new(stdin), &mut sink);
        let exit = match timeout.filter(|t| !t.is_zero()) {
            Some(limit) => {
                tokio::time::timeout(limit, work)
                    .await
                    .map_err(|_| Error::Timeout {
                        endpoint: "guest helper over SSH".to_string(),
                        after: limit,
                    })??
            }
            None => work.await?,
        };
        let signal = exit.exit_signal.map(|s| format!("SIG{}", s.name));
        Ok(HelperOutput {
            stdout: sink.kept,
            stderr: exit.stderr,
            exit_code: if signal.is_some() {
                None
            } else {
                exit.exit_status.map(|c| c as i32)
            },
            signal,
            truncated: sink.truncated,
        })
    }
}

impl HelperRunner for SshRunner {
    fn run(
        &self,
        argv: Vec<String>,
        stdin: Vec<u8>,
        timeout: Option<Duration>,
    ) -> BoxFuture<'_, Result<HelperOutput>> {
        Box::pin(self.run_exec(argv, stdin, timeout))
    }
}

/// Accepts everything, keeps the first `cap` bytes.
struct BoundedSink {
    kept: Vec<u8>,
    cap: usize,
    truncated: bool,
}

impl AsyncWrite for BoundedSink {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        this.truncated |= keep(&mut this.kept, buf, this.cap);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
