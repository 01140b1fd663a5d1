//! Commands over SSH exec channels: stdout and stderr kept apart, the exit status (or the
//! signal that ended the command), stdin from bytes or any `AsyncRead`, and stdout streamed
//! into any `AsyncWrite` (how the sync engine pipes tar archives).
//!
//! The command line is run by the guest user's shell, as with `ssh host <command>`; build
//! one from an argv with [`shell_quote`] / [`command_line`]. Each command also carries
//! [`super::EXEC_MARKER`] in its environment, so that a command whose caller went away
//! (future dropped) can be found and stopped; its channel is then given back.

use std::borrow::Cow;
use std::io::Cursor;

use bytes::Bytes;
use russh::ChannelMsg;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::error::{Error, Result};

use super::error::SshError;
use super::reaper::Running;
use super::session::{OpenChannel, SshSession};

/// Most stderr kept by the streaming calls (the tail is kept).
pub const MAX_STREAMING_STDERR: usize = 1024 * 1024;

/// The signal that ended a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExitSignal {
    /// Signal name without the `SIG` prefix (`TERM`, `KILL`, …).
    pub name: String,
    /// Whether a core was dumped.
    pub core_dumped: bool,
    /// The server's message, if any.
    pub message: String,
}

/// How a command ended, for the streaming calls (stdout went to the caller's writer).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SshExit {
    /// Exit status, when the server reported one.
    pub exit_status: Option<u32>,
    /// The signal that ended the command, if one did.
    pub exit_signal: Option<ExitSignal>,
    /// Stderr (at most [`MAX_STREAMING_STDERR`] bytes, the tail).
    pub stderr: Vec<u8>,
}

impl SshExit {
    /// Exited with status 0.
    pub fn success(&self) -> bool {
        self.exit_status == Some(0)
    }
}

/// The collected result of a command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SshOutput {
    /// Everything the command wrote to stdout.
    pub stdout: Vec<u8>,
    /// Everything it wrote to stderr.
    pub stderr: Vec<u8>,
    /// Exit status, when the server reported one (`None` when a signal ended the command).
    pub exit_status: Option<u32>,
    /// The signal that ended the command, if one did.
    pub exit_signal: Option<ExitSignal>,
}

impl SshOutput {
    /// Exited with status 0.
    pub fn success(&self) -> bool {
        self.exit_status == Some(0)
    }

    /// Stdout as text (invalid UTF-8 replaced).
    pub fn stdout_text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.stdout)
    }

    /// Stderr as text (invalid UTF-8 replaced).
    pub fn stderr_text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.stderr)
    }
}

/// Quoting is shared with the other command-line builders ([`crate::shell`]).
pub use crate::shell::{command_line, quote as shell_quote};

fn check_command(command: &str) -> Result<()> {
    if command.trim().is_empty() {
        return Err(Error::invalid("command", "must not be empty"));
    }
    if command.contains('\0') {
        return Err(Error::invalid("command", "contains a NUL byte"));
    }
    Ok(())
}

/// Where stdout goes and how stderr is kept.
struct Sinks<'a, W> {
    stdout: &'a mut W,
    stderr: Vec<u8>,
    stderr_cap: Option<usize>,
}

impl<W> Sinks<'_, W> {
    fn push_stderr(&mut self, data: &[u8]) {
        self.stderr.extend_from_slice(data);
        if let Some(cap) = self.stderr_cap {
            if self.stderr.len() > cap {
                let excess = self.stderr.len() - cap;
                self.stderr.drain(..excess);
            }
        }
    }
}

/// Run `command` on `open`: feed `stdin` (then EOF), route output, wait for the close.
async fn drive<R, W>(
    open: OpenChannel,
    command: &str,
    stdin: Option<R>,
    sinks: &mut Sinks<'_, W>,
) -> Result<SshExit>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    // Until the command ends, dropping this future stops it and frees the channel.
    let mut running = Running::new(open);
    let write = running.writer();
    let wrapped = running.wrapped(command);
    let read = running.reader()?;
    write
        .exec(true, wrapped.as_bytes())
        .await
        .map_err(|e| SshError::protocol("sending a command", e))?;
    let pump = async {
        if let Some(input) = stdin {
            write.data(input).await?;
        }
        write.eof().await
    };
    tokio::pin!(pump);
    let mut pump_done = false;
    let mut accepted = false;
    let mut exit = SshExit::default();
    loop {
        tokio::select! {
            sent = &mut pump, if !pump_done => {
                pump_done = true;
                if let Err(e) = sent {
                    // The command may legitimately exit without reading all its input.
                    if !matches!(e, russh::Error::SendError) {
                        return Err(match e {
                            russh::Error::IO(io) => Error::io("reading the command's stdin", io),
                            other => SshError::protocol("sending stdin", other).into(),
                        });
                    }
                }
            }
            msg = read.wait() => match msg {
                Some(ChannelMsg::Success) => accepted = true,
                Some(ChannelMsg::Failure) if !accepted => {
                    return Err(SshError::RequestRefused { request: "exec".to_string() }.into());
                }
                Some(ChannelMsg::Data { data }) => {
                    sinks.stdout.write_all(&data).await.map_err(|e| Error::io("writing the command's stdout", e))?;
                }
                Some(ChannelMsg::ExtendedData { data, ext: 1 }) => sinks.push_stderr(&data),
                Some(ChannelMsg::ExitStatus { exit_status }) => exit.exit_status = Some(exit_status),
                Some(ChannelMsg::ExitSignal { signal_name, core_dumped, error_message, .. }) => {
                    exit.exit_signal = Some(ExitSignal { name: signal_name_of(&signal_name), core_dumped, message: error_message });
                }
                Some(ChannelMsg::Close) | None => break,
                Some(_) => {}
            }
        }
    }
    running.finished();
    sinks
        .stdout
        .flush()
        .await
        .map_err(|e| Error::io("writing the command's stdout", e))?;
    if exit.exit_status.is_none() && exit.exit_signal.is_none() {
        return Err(SshError::protocol(
            format!("running {:?}", truncate(command)),
            "the channel closed without an exit status (connection lost?)",
        )
        .into());
    }
    exit.stderr = std::mem::take(&mut sinks.stderr);
    Ok(exit)
}

fn signal_name_of(sig: &russh::Sig) -> String {
    let text = format!("{sig:?}");
    match text
        .strip_prefix("Custom(\"")
        .and_then(|t| t.strip_suffix("\")"))
    {
        Some(custom) => custom.to_string(),
        None => text,
    }
}

fn truncate(command: &str) -> String {
    command.chars().take(80).collect()
}

impl SshSession {
    /// Run `command` (a shell command line) and collect its output.
    ///
    /// ```no_run
    /// # async fn demo(ssh: createos_sandbox::ssh::SshSession) -> createos_sandbox::Result<()> {
    /// let out = ssh.exec("uname -a; echo oops >&2; exit 3").await?;
    /// assert_eq!(out.exit_status, Some(3));
    /// println!("{} / {}", out.stdout_text(), out.stderr_text());
    /// # Ok(()) }
    /// ```
    pub async fn exec(&self, command: &str) -> Result<SshOutput> {
        self.exec_with_stdin_stream(command, tokio::io::empty())
            .await
    }

    /// Run `command` with `stdin` as its input (closed afterwards).
    pub async fn exec_with_stdin(
        &self,
        command: &str,
        stdin: impl Into<Bytes>,
    ) -> Result<SshOutput> {
        self.exec_with_stdin_stream(command, Cursor::new(stdin.into()))
            .await
    }

    /// Run `command`, streaming `stdin` into it (EOF when the reader ends), and collect its
    /// output.
    ///
    /// ```no_run
    /// # async fn demo(ssh: createos_sandbox::ssh::SshSession) -> createos_sandbox::Result<()> {
    /// let archive = tokio::fs::File::open("project.tar").await?;
    /// let out = ssh.exec_with_stdin_stream("mkdir -p /work && tar -x -C /work", archive).await?;
    /// assert!(out.success(), "{}", out.stderr_text());
    /// # Ok(()) }
    /// ```
    pub async fn exec_with_stdin_stream<R>(&self, command: &str, stdin: R) -> Result<SshOutput>
    where
        R: AsyncRead + Unpin + Send,
    {
        check_command(command)?;
        let open = self.open_channel().await?;
        let mut stdout = Vec::new();
        let mut sinks = Sinks {
            stdout: &mut stdout,
            stderr: Vec::new(),
            stderr_cap: None,
        };
        let exit = drive(open, command, Some(stdin), &mut sinks).await?;
        Ok(SshOutput {
            stdout,
            stderr: exit.stderr,
            exit_status: exit.exit_status,
            exit_signal: exit.exit_signal,
        })
    }

    /// Run `command`, streaming its stdout into `stdout` (e.g. `tar -c` into a local file);
    /// stderr is collected (tail of at most [`MAX_STREAMING_STDERR`] bytes).
    ///
    /// ```no_run
    /// # async fn demo(ssh: createos_sandbox::ssh::SshSession) -> createos_sandbox::Result<()> {
    /// let file = tokio::fs::File::create("backup.tar").await?;
    /// let exit = ssh.exec_to_writer("tar -c -C /work .", file).await?;
    /// assert!(exit.success());
    /// # Ok(()) }
    /// ```
    pub async fn exec_to_writer<W>(&self, command: &str, stdout: W) -> Result<SshExit>
    where
        W: AsyncWrite + Unpin + Send,
    {
        self.exec_streaming(command, tokio::io::empty(), stdout)
            .await
    }

    /// Both directions streamed: `stdin` into the command, its stdout into `stdout`.
    pub async fn exec_streaming<R, W>(
        &self,
        command: &str,
        stdin: R,
        mut stdout: W,
    ) -> Result<SshExit>
    where
        R: AsyncRead + Unpin + Send,
        W: AsyncWrite + Unpin + Send,
    {
        check_command(command)?;
        let open = self.open_channel().await?;
        let mut sinks = Sinks {
            stdout: &mut stdout,
            stderr: Vec::new(),
            stderr_cap: Some(MAX_STREAMING_STDERR),
        };
        drive(open, command, Some(stdin), &mut sinks).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_cap_keeps_the_tail() {
        let mut out: Vec<u8> = Vec::new();
        let mut sinks = Sinks {
            stdout: &mut out,
            stderr: Vec::new(),
            stderr_cap: Some(4),
        };
        sinks.push_stderr(b"abc");
        sinks.push_stderr(b"defg");
        assert_eq!(sinks.stderr, b"defg");
    }

    #[test]
    fn commands_are_checked() {
        assert!(check_command("true").is_ok());
        assert!(check_command("  ").is_err());
        assert!(check_command("a\0b").is_err());
    }
}
