//! Attaching a local terminal to a managed process: input bytes go to the process, its output
//! comes back, size changes follow the terminal, and a detach key leaves it running.
//!
//! [`attach`] is independent of any real terminal (it takes an input reader, an output writer
//! and a stream of sizes), so it is tested with pipes; [`super::tty`] provides the raw-mode
//! terminal pieces that `cos attach` plugs in.

use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::api::processes::Process;
use crate::error::{Error, Result};
use crate::stream::process_output::OutputEvent;

/// Ctrl-] (0x1d), the detach key of telnet, docker and the createos CLI.
pub const DETACH_KEY: u8 = 0x1d;

/// Options of [`attach`].
#[derive(Clone, Debug)]
pub struct AttachOptions {
    /// Replay output after this sequence (0: everything the server still holds).
    pub after: u64,
    /// The byte that detaches (`None`: no detach key).
    pub detach_key: Option<u8>,
    /// Longest time input is held to batch keystrokes into one request. Zero (the default)
    /// sends a keystroke at once and only batches what has already arrived (a paste).
    pub input_batch: Duration,
}

impl Default for AttachOptions {
    fn default() -> Self {
        AttachOptions {
            after: 0,
            detach_key: Some(DETACH_KEY),
            input_batch: Duration::ZERO,
        }
    }
}

/// How an attachment ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttachOutcome {
    /// The process exited.
    Exited {
        /// Its exit code.
        code: Option<i32>,
        /// The signal that ended it.
        signal: Option<String>,
    },
    /// The detach key was typed; the process keeps running. Reattach with `after = last_seq`.
    Detached {
        /// Last output sequence shown.
        last_seq: u64,
    },
}

impl AttachOutcome {
    /// The exit status a CLI should end with: the remote code, 128 + signal number for a
    /// signal, 0 when detached.
    pub fn exit_status(&self) -> i32 {
        match self {
            AttachOutcome::Exited { code: Some(c), .. } => *c,
            AttachOutcome::Exited {
                signal: Some(s), ..
            } => 128 + signal_number(s),
            AttachOutcome::Exited { .. } => 1,
            AttachOutcome::Detached { .. } => 0,
        }
    }
}

fn signal_number(name: &str) -> i32 {
    match name.trim_start_matches("SIG") {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "KILL" => 9,
        "USR1" => 10,
        "USR2" => 12,
        "PIPE" => 13,
        "ALRM" => 14,
        "TERM" => 15,
        _ => 0,
    }
}

/// Bridge `input`/`output` to `process` until it exits or the detach key is typed. When
/// `input` ends, output keeps flowing until the process exits.
///
/// Output is written exactly once and in order (the stream resumes from the last sequence if
/// the connection drops); every `(rows, cols)` from `sizes` becomes a resize of the remote
/// PTY (send the initial size first).
pub async fn attach<I, O, S>(
    process: &Process,
    mut input: I,
    mut output: O,
    sizes: S,
    options: AttachOptions,
) -> Result<AttachOutcome>
where
    I: AsyncRead + Unpin,
    O: AsyncWrite + Unpin,
    S: Stream<Item = (u16, u16)> + Unpin,
{
    let mut events = process.connect(options.after).await?;
    let mut sizes = sizes.fuse();
    let mut buf = vec![0u8; 16 * 1024];
    let mut input_open = true;
    let mut pending_resize: Option<(u16, u16)> = None;
    loop {
        tokio::select! {
            biased;
            event = events.next() => {
                match event {
                    Some(Ok(OutputEvent::Data { bytes, .. })) => {
                        output.write_all(&bytes).await.map_err(|e| Error::io("writing to the terminal", e))?;
                        output.flush().await.map_err(|e| Error::io("writing to the terminal", e))?;
                    }
                    Some(Ok(OutputEvent::Exit { code, signal })) => {
                        return Ok(AttachOutcome::Exited { code, signal });
                    }
                    Some(Ok(OutputEvent::Gap { lost_bytes, from_seq, to_seq })) => {
                        let note = match lost_bytes {
                            Some(n) => format!("\r\n[{n} bytes of output were lost (seq {from_seq}-{to_seq})]\r\n"),
                            None => format!("\r\n[output seq {from_seq}-{to_seq} was lost]\r\n"),
                        };
                        output.write_all(note.as_bytes()).await.map_err(|e| Error::io("writing to the terminal", e))?;
                    }
                    Some(Ok(OutputEvent::Error(message))) => {
                        return Err(Error::decode("GET /v1/sandboxes/{id}/processes/{process_id}/connect", message));
                    }
                    Some(Err(e)) => return Err(e),
                    None => {
                        // The stream ended without an exit event: ask the process directly.
                        let info = process.info().await?;
                        if info.leader_exited {
                            return Ok(AttachOutcome::Exited { code: info.exit_code, signal: info.signal });
                        }
                        events = process.connect(events.last_seq()).await?;
                    }
                }
            }
            size = sizes.next(), if pending_resize.is_none() => {
                if let Some(size) = size {
                    pending_resize = Some(size);
                }
            }
            read = input.read(&mut buf), if input_open => {
                let n = read.map_err(|e| Error::io("reading the terminal", e))?;
                if n == 0 {
                    // Nothing more can be typed; keep showing output until the process exits.
                    input_open = false;
                    continue;
                }
                let mut chunk = &buf[..n];
                let mut detach = false;
                if let Some(key) = options.detach_key {
                    if let Some(pos) = chunk.iter().position(|b| *b == key) {
                        chunk = &chunk[..pos];
                        detach = true;
                    }
                }
                if !chunk.is_empty() {
                    let mut batch = chunk.to_vec();
                    if !detach {
                        // Gather a burst of keystrokes (a paste) into one request.
                        while let Ok(Ok(m)) = tokio::time::timeout(options.input_batch, input.read(&mut buf)).await {
                            if m == 0 {
                                break;
                            }
                            let more = &buf[..m];
                            if let Some(pos) = options.detach_key.and_then(|k| more.iter().position(|b| *b == k)) {
                                batch.extend_from_slice(&more[..pos]);
                                detach = true;
                                break;
                            }
                            batch.extend_from_slice(more);
                            if batch.len() >= 64 * 1024 {
                                break;
                            }
                        }
                    }
                    ignore_if_gone(process.write_input(&batch).await.map(drop))?;
                }
                if detach {
                    return Ok(AttachOutcome::Detached { last_seq: events.last_seq() });
                }
            }
        }
        if let Some((rows, cols)) = pending_resize.take() {
            ignore_if_gone(process.resize(rows, cols).await)?;
        }
    }
}

/// Typing into (or resizing) a process that has just exited is refused with a conflict; the
/// exit event is on its way, so that is not an error of the attachment.
fn ignore_if_gone(result: Result<()>) -> Result<()> {
    match result {
        Err(Error::Conflict(_)) => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_status_mapping() {
        assert_eq!(
            AttachOutcome::Exited {
                code: Some(3),
                signal: None
            }
            .exit_status(),
            3
        );
        assert_eq!(
            AttachOutcome::Exited {
                code: None,
                signal: Some("SIGKILL".into())
            }
            .exit_status(),
            137
        );
        assert_eq!(AttachOutcome::Detached { last_seq: 4 }.exit_status(), 0);
    }
}
