//! One running resident helper: its managed process, the replies waiting for it, and the
//! task that reads its output stream and hands each JSON line to the request it answers.
//!
//! The output stream (`connect`) is open only while some request waits for an answer, plus a
//! short linger: a sandbox with an open stream counts as busy and would never auto-pause.
//! A request that finds it closed opens it again from the last sequence read, concurrently
//! with sending its input, so that costs no extra sequential round trip.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::api::processes::Process;
use crate::error::{Error, Result};
use crate::guest::error::{GuestError, GuestErrorCode, WireError};
use crate::guest::PROTOCOL_VERSION;
use crate::stream::process_output::{OutputEvent, StreamKind};

/// Id under which the `ready` line is delivered (requests count from 1).
pub(super) const READY_ID: u64 = 0;

/// How long the output stream stays open after the last answer (default).
const LINGER: Duration = Duration::from_secs(20);

/// Environment variable that overrides [`LINGER`], in milliseconds (a tuning knob).
pub const LINGER_ENV: &str = "COS_RESIDENT_LINGER_MS";

/// The linger in effect.
fn linger() -> Duration {
    static VALUE: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *VALUE.get_or_init(|| {
        std::env::var(LINGER_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_millis)
            .unwrap_or(LINGER)
    })
}

/// Longest line accepted from the helper (a 1 MiB file read renders well below this).
const MAX_LINE: usize = 24 << 20;

/// Bytes of the helper's stderr kept for error messages.
const STDERR_TAIL: usize = 4096;

/// What the reader hands to a waiting request.
#[derive(Debug)]
pub(super) enum Reply {
    /// Output of a running exec.
    Chunk { stream: StreamKind, bytes: Bytes },
    /// The final answer's `result`.
    Result(Value),
    /// The final answer: the helper refused or failed the request.
    Refused(WireError),
    /// No answer will come (the helper is gone, or its output could not be followed).
    Gone(Error),
}

/// The exit of the helper process, once known.
#[derive(Clone, Debug, Default)]
pub(super) struct Exit {
    pub code: Option<i32>,
    pub signal: Option<String>,
    pub stderr: String,
}

#[derive(Default)]
struct State {
    pending: HashMap<u64, mpsc::UnboundedSender<Reply>>,
    /// A reader task is running.
    reading: bool,
    /// Last output sequence read (resume point).
    last_seq: u64,
    /// An incomplete line carried between chunks.
    partial: Vec<u8>,
    /// The last time a reply was delivered or a request registered.
    active: Option<Instant>,
    stderr: Vec<u8>,
    exit: Option<Exit>,
}

impl State {
    /// Forget requests whose caller is gone (dropped mid-send or past its deadline): nothing
    /// waits for their answers, so they must not keep the stream open or a retired helper alive.
    fn prune_abandoned(&mut self) {
        self.pending.retain(|_, tx| !tx.is_closed());
    }
}

/// A running helper process.
pub(super) struct Link {
    pub process: Process,
    state: Mutex<State>,
    /// Cancelled once the helper is known to be gone (exit seen, input refused, stopped).
    pub dead: CancellationToken,
}

/// One line from the helper.
#[derive(Debug, Deserialize)]
struct Line {
    #[serde(default)]
    v: Option<i64>,
    #[serde(default)]
    id: Option<u64>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<WireError>,
    #[serde(default)]
    stream: Option<String>,
    #[serde(default)]
    data: Option<String>,
    #[serde(default)]
    ready: Option<Value>,
    #[serde(default)]
    bye: Option<String>,
}

impl Link {
    pub fn new(process: Process) -> Arc<Self> {
        Arc::new(Link {
            process,
            state: Mutex::new(State::default()),
            dead: CancellationToken::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait for the answer to `id` (and its output chunks); makes sure a reader is running.
    pub fn register(self: &Arc<Self>, id: u64) -> mpsc::UnboundedReceiver<Reply> {
        let (tx, rx) = mpsc::unbounded_channel();
        let start_reader = {
            let mut st = self.lock();
            if let Some(exit) = &st.exit {
                let _ = tx.send(Reply::Gone(gone(exit)));
                return rx;
            }
            st.pending.insert(id, tx);
            st.active = Some(Instant::now());
            let start = !st.reading;
            st.reading = true;
            start.then_some(st.last_seq)
        };
        if let Some(after) = start_reader {
            tokio::spawn(self.clone().read(after));
        }
        rx
    }

    /// Stop waiting for `id`.
    pub fn unregister(&self, id: u64) {
        self.lock().pending.remove(&id);
    }

    /// Requests still waiting for an answer.
    pub fn pending(&self) -> usize {
        let mut st = self.lock();
        st.prune_abandoned();
        st.pending.len()
    }

    /// The helper's exit, once it is known.
    pub fn exit(&self) -> Option<Exit> {
        self.lock().exit.clone()
    }

    /// The helper is gone (or must be treated so): fail every waiting request.
    pub fn mark_dead(&self, exit: Exit) {
        let pending = {
            let mut st = self.lock();
            if st.exit.is_none() {
                let mut exit = exit;
                if exit.stderr.is_empty() {
                    exit.stderr = String::from_utf8_lossy(&st.stderr).trim().to_string();
                }
                st.exit = Some(exit);
            }
            std::mem::take(&mut st.pending)
        };
        self.dead.cancel();
        let exit = self.exit().unwrap_or_default();
        for (_, tx) in pending {
            let _ = tx.send(Reply::Gone(gone(&exit)));
        }
    }

    /// Fail every waiting request with `err` (the stream could not be followed); the helper
    /// may still be alive.
    fn fail_pending(&self, err: &Error) {
        let pending = std::mem::take(&mut self.lock().pending);
        for (_, tx) in pending {
            let _ = tx.send(Reply::Gone(stream_failed(err)));
        }
    }

    /// The reader task: follow the output from `after` until nothing waits for a while, the
    /// helper exits, or the stream fails.
    async fn read(self: Arc<Self>, after: u64) {
        let mut events = match self.process.connect(after).await {
            Ok(events) => events,
            Err(err) => {
                self.reader_failed(&err);
                return;
            }
        };
        // How often the reader checks whether it may close the stream.
        let mut tick = tokio::time::interval(
            (linger() / 4).clamp(Duration::from_millis(10), Duration::from_secs(1)),
        );
        tick.tick().await;
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(Ok(OutputEvent::Data { seq, stream, bytes })) => {
                        if stream == StreamKind::Stderr {
                            self.keep_stderr(seq, &bytes);
                        } else if let Err(err) = self.feed(seq, &bytes) {
                            // A line too long to be an answer: the helper is not speaking the
                            // protocol. Nothing it says can be trusted any more.
                            tracing::warn!(process = %self.process.id(), error = %err, "stopping a misbehaving file helper");
                            let _ = self.process.stop(Some(Duration::ZERO)).await;
                            self.mark_dead(Exit { stderr: err.to_string(), ..Default::default() });
                            return;
                        }
                    }
                    Some(Ok(OutputEvent::Exit { code, signal })) => {
                        self.mark_dead(Exit { code, signal, stderr: String::new() });
                        self.lock().reading = false;
                        return;
                    }
                    Some(Ok(OutputEvent::Gap { from_seq, to_seq, .. })) => {
                        // Lost answers cannot be recovered: fail whoever waits, resynchronize
                        // at the next line.
                        let err = Error::decode("guest helper output", format!("output {from_seq}..={to_seq} was lost before it was read"));
                        let mut st = self.lock();
                        st.partial.clear();
                        st.last_seq = to_seq;
                        drop(st);
                        self.fail_pending(&err);
                    }
                    Some(Ok(OutputEvent::Error(message))) => {
                        tracing::debug!(process = %self.process.id(), %message, "helper output stream reported an error");
                    }
                    Some(Err(err)) => {
                        self.reader_failed(&err);
                        return;
                    }
                    None => {
                        self.reader_failed(&Error::decode("guest helper output", "the output stream ended without the helper's exit"));
                        return;
                    }
                },
                _ = tick.tick() => {
                    let mut st = self.lock();
                    let idle = st.active.is_none_or(|t| t.elapsed() >= linger());
                    st.prune_abandoned();
                    if st.pending.is_empty() && idle {
                        st.last_seq = st.last_seq.max(events.last_seq());
                        st.reading = false;
                        return;
                    }
                }
            }
        }
    }

    fn reader_failed(&self, err: &Error) {
        // 404/409 on the helper's own stream: the process is gone or the sandbox stopped.
        let gone_now = matches!(err.status(), Some(404) | Some(409));
        self.lock().reading = false;
        if gone_now {
            self.mark_dead(Exit {
                stderr: err.to_string(),
                ..Default::default()
            });
        } else {
            self.fail_pending(err);
        }
    }

    fn keep_stderr(&self, seq: u64, bytes: &[u8]) {
        let mut st = self.lock();
        st.last_seq = st.last_seq.max(seq);
        st.stderr.extend_from_slice(bytes);
        let excess = st.stderr.len().saturating_sub(STDERR_TAIL);
        st.stderr.drain(..excess);
    }

    /// Split stdout into lines and deliver each one.
    fn feed(&self, seq: u64, bytes: &[u8]) -> Result<()> {
        let lines = {
            let mut st = self.lock();
            st.last_seq = st.last_seq.max(seq);
            // Only the new bytes can hold the end of the pending line.
            let scanned = st.partial.len();
            st.partial.extend_from_slice(bytes);
            let mut lines = Vec::new();
            if let Some(last) = st.partial[scanned..].iter().rposition(|b| *b == b'\n') {
                let complete: Vec<u8> = st.partial.drain(..=scanned + last).collect();
                lines.extend(
                    complete
                        .split(|b| *b == b'\n')
                        .filter(|l| !l.is_empty())
                        .map(<[u8]>::to_vec),
                );
            }
            if st.partial.len() > MAX_LINE {
                st.partial.clear();
                return Err(Error::decode(
                    "guest helper output",
                    format!("a line longer than {MAX_LINE} bytes"),
                ));
            }
            lines
        };
        for line in lines {
            self.deliver(&line);
        }
        Ok(())
    }

    fn deliver(&self, raw: &[u8]) {
        let text = raw.trim_ascii();
        if text.is_empty() {
            return;
        }
        let line: Line = match serde_json::from_slice(text) {
            Ok(line) => line,
            Err(err) => {
                tracing::debug!(process = %self.process.id(), error = %err, "ignoring a helper line that is not protocol JSON");
                return;
            }
        };
        if line.v != Some(PROTOCOL_VERSION) {
            tracing::debug!(process = %self.process.id(), v = ?line.v, "ignoring a helper line of another protocol version");
            return;
        }
        if let Some(why) = line.bye {
            tracing::debug!(process = %self.process.id(), %why, "the file helper is ending");
            return;
        }
        let (id, reply, last) = if let Some(ready) = line.ready {
            (READY_ID, Reply::Result(ready), true)
        } else {
            let Some(id) = line.id.filter(|id| *id != READY_ID) else {
                return;
            };
            match (line.stream, line.data, line.error, line.result) {
                (Some(stream), Some(data), _, _) => {
                    let Ok(bytes) =
                        base64::engine::general_purpose::STANDARD.decode(data.as_bytes())
                    else {
                        return;
                    };
                    let stream = if stream == "stderr" {
                        StreamKind::Stderr
                    } else {
                        StreamKind::Stdout
                    };
                    (
                        id,
                        Reply::Chunk {
                            stream,
                            bytes: Bytes::from(bytes),
                        },
                        false,
                    )
                }
                (_, _, Some(error), _) => (id, Reply::Refused(error), true),
                (_, _, None, Some(result)) => (id, Reply::Result(result), true),
                _ => return,
            }
        };
        let mut st = self.lock();
        st.active = Some(Instant::now());
        let tx = if last {
            st.pending.remove(&id)
        } else {
            st.pending.get(&id).cloned()
        };
        drop(st);
        if let Some(tx) = tx {
            let _ = tx.send(reply);
        }
    }
}

/// The error every waiting request gets when the helper is gone.
pub(super) fn gone(exit: &Exit) -> Error {
    let how = match (&exit.code, &exit.signal) {
        (_, Some(signal)) => format!("was killed by {signal}"),
        (Some(code), None) => format!("exited with status {code}"),
        (None, None) => "is gone".to_string(),
    };
    let detail = if exit.stderr.is_empty() {
        String::new()
    } else {
        format!(": {}", exit.stderr)
    };
    GuestError::new(
        "resident",
        GuestErrorCode::HelperFailed,
        format!("the resident file helper {how}{detail}"),
    )
    .into()
}

fn stream_failed(err: &Error) -> Error {
    GuestError::new(
        "resident",
        GuestErrorCode::HelperFailed,
        format!("following the helper's output failed: {err}"),
    )
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link whose reader is never started (lines are fed by hand).
    fn quiet_link() -> Arc<Link> {
        let client = crate::Client::builder()
            .base_url("http://127.0.0.1:9")
            .anonymous()
            .build()
            .unwrap();
        let process = client
            .sandbox("sb-test")
            .unwrap()
            .processes()
            .handle("proc-1")
            .unwrap();
        let link = Link::new(process);
        link.lock().reading = true;
        link
    }

    fn drain(rx: &mut mpsc::UnboundedReceiver<Reply>) -> Vec<Reply> {
        let mut out = Vec::new();
        while let Ok(reply) = rx.try_recv() {
            out.push(reply);
        }
        out
    }

    #[test]
    fn lines_split_across_chunks_reach_their_request() {
        let link = quiet_link();
        let mut one = link.register(1);
        let mut two = link.register(2);
        let data = base64::engine::general_purpose::STANDARD.encode(b"out");
        let text = format!("{{\"v\":1,\"id\":2,\"stream\":\"stdout\",\"data\":\"{data}\"}}\n{{\"v\":1,\"id\":1,\"result\":{{\"ok\":true}}}}\n{{\"v\":1,\"id\":2,\"res");
        let (a, b) = text.as_bytes().split_at(17);
        link.feed(1, a).unwrap();
        link.feed(2, b).unwrap();
        link.feed(3, b"ult\":{\"exit_code\":0}}\n").unwrap();
        assert!(matches!(drain(&mut one).as_slice(), [Reply::Result(v)] if v["ok"] == true));
        let replies = drain(&mut two);
        assert!(
            matches!(&replies[0], Reply::Chunk { stream: StreamKind::Stdout, bytes } if bytes.as_ref() == b"out"),
            "{replies:?}"
        );
        assert!(
            matches!(&replies[1], Reply::Result(v) if v["exit_code"] == 0),
            "{replies:?}"
        );
        assert_eq!(link.lock().last_seq, 3);
        assert!(link.lock().pending.is_empty());
    }

    #[test]
    fn hostile_lines_are_ignored_or_refused() {
        let link = quiet_link();
        let mut one = link.register(1);
        for line in [
            "not json at all",
            "{\"v\":2,\"id\":1,\"result\":1}",
            "{\"id\":1,\"result\":1}",
            "{\"v\":1,\"id\":99,\"result\":1}",
            "{\"v\":1,\"id\":0,\"result\":\"a forged ready answer\"}",
            "{\"v\":1,\"id\":1,\"stream\":\"stdout\",\"data\":\"!!not base64!!\"}",
            "{\"v\":1,\"id\":1}",
            "{\"v\":1,\"bye\":\"idle\"}",
            "[1,2,3]",
        ] {
            link.feed(1, format!("{line}\n").as_bytes()).unwrap();
        }
        assert!(
            drain(&mut one).is_empty(),
            "nothing valid was addressed to request 1"
        );
        link.feed(
            2,
            b"{\"v\":1,\"id\":1,\"error\":{\"code\":\"no_such_file\",\"message\":\"gone\"}}\n",
        )
        .unwrap();
        assert!(
            matches!(drain(&mut one).as_slice(), [Reply::Refused(w)] if w.code == "no_such_file")
        );
        // A line that never ends is refused before it grows without bound.
        let mut two = link.register(2);
        let chunk = vec![b'x'; 1 << 20];
        let mut refused = false;
        for seq in 0..(MAX_LINE / chunk.len() + 2) as u64 {
            if link.feed(10 + seq, &chunk).is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused, "an endless line was accepted");
        assert!(link.lock().partial.is_empty());
        assert!(drain(&mut two).is_empty());
    }

    #[test]
    fn a_dead_helper_fails_every_waiter_and_every_later_request() {
        let link = quiet_link();
        let mut one = link.register(1);
        link.keep_stderr(1, b"Traceback: boom\n");
        link.mark_dead(Exit {
            code: Some(1),
            signal: None,
            stderr: String::new(),
        });
        let replies = drain(&mut one);
        assert!(
            matches!(&replies[..], [Reply::Gone(e)] if e.to_string().contains("exited with status 1") && e.to_string().contains("boom")),
            "{replies:?}"
        );
        assert!(link.dead.is_cancelled());
        let mut later = link.register(2);
        assert!(matches!(drain(&mut later).as_slice(), [Reply::Gone(_)]));
    }
}
