//! Resumable output of a managed process (E25).
//!
//! [`OutputStream`] turns the server's NDJSON events into [`OutputEvent`]s and hides dropped
//! connections: it reconnects with `after=<last seq>` so every byte still retained by the
//! server arrives exactly once and in order. Data whose `seq` is not newer than the last one
//! delivered is dropped (a replay after a reconnect), and bytes that can no longer be had are
//! reported as an explicit [`OutputEvent::Gap`] — never skipped silently.
//!
//! Reconnect rules:
//! - a connection is considered dead when it errors, ends without an `exit` event, sends an
//!   undecodable line, or stays silent (not even a heartbeat) for
//!   [`OutputOptions::idle_timeout`];
//! - the first reconnect after a connection that delivered new output is immediate; further
//!   consecutive attempts without progress wait `backoff_initial`, doubling up to
//!   `backoff_max`; after `max_failures` such attempts the stream yields the last error and ends;
//! - 4xx answers other than an expired offset (unknown process, sandbox not running, auth)
//!   end the stream at once with that error.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::macros::open_enum;

open_enum! {
    /// Which output a chunk came from.
    StreamKind {
        /// Standard output of a pipe process.
        Stdout = "stdout",
        /// Standard error of a pipe process.
        Stderr = "stderr",
        /// The terminal of a PTY process (stdout and stderr merged).
        Pty = "pty",
    }
}

/// One thing that happened on a process's output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputEvent {
    /// Output bytes, in sequence order.
    Data {
        /// The chunk's sequence number (one sequence space per process, from 1).
        seq: u64,
        /// Where it came from.
        stream: StreamKind,
        /// The bytes.
        bytes: Bytes,
    },
    /// The leader exited; the last event of the stream.
    Exit {
        /// Exit code (`None` when killed by a signal or not reported).
        code: Option<i32>,
        /// Name of the signal that killed it.
        signal: Option<String>,
    },
    /// Chunks `from_seq..=to_seq` were evicted from the server's journal before they could be
    /// delivered; the stream continues with `to_seq + 1`.
    ///
    /// `lost_bytes` is the exact payload size of those chunks, or `None` when it cannot be
    /// known. Sequence numbers count chunks, not bytes, so the count needs byte offsets: this
    /// project's emulator sends each data event's `offset` and the expired error's
    /// `oldest_available_offset` (an extension; see `api-spec/openapi.yaml`), and a server that
    /// reports the window's `total_bytes` allows the same computation from
    /// [`OutputSource::window`].
    /// Without either (or when resuming from an arbitrary `after` before any byte arrived),
    /// the gap still names the exact sequence range.
    Gap {
        /// First lost sequence.
        from_seq: u64,
        /// Last lost sequence.
        to_seq: u64,
        /// Exact number of lost payload bytes, when known (see above).
        lost_bytes: Option<u64>,
    },
    /// An `error` event other than an expired offset, passed on as the server worded it.
    Error(String),
}

/// Bounds of the output the server still retains for a process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputWindow {
    /// Sequence of the oldest retained chunk (0 before any output).
    #[serde(default)]
    pub oldest_seq: u64,
    /// Sequence of the newest chunk (0 before any output).
    #[serde(default)]
    pub newest_seq: u64,
    /// Payload bytes retained (`oldest_seq..=newest_seq`).
    #[serde(default)]
    pub bytes: u64,
    /// Bytes ever written by the process. NOT in the spec yet (a proposed extension): when a
    /// server sends it, an [`OutputEvent::Gap`] can say exactly how many bytes were lost.
    /// `None` from servers that do not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_bytes: Option<u64>,
}

/// The raw NDJSON body of one output connection.
pub type ByteStream = BoxStream<'static, std::io::Result<Bytes>>;

/// Where an [`OutputStream`] gets its connections from: the caller (the managed process in
/// [`crate::api::processes`]) supplies it, so this module knows no resource type.
pub trait OutputSource: Send + Sync + 'static {
    /// Method and path template of the connection endpoint; labels this stream's errors.
    fn endpoint(&self) -> String;

    /// The process followed, for log lines.
    fn process_id(&self) -> &str;

    /// Open one connection that delivers the chunks with `seq > after` and then live output.
    /// An HTTP refusal is the matching [`Error`] variant (an expired offset is recognised from
    /// its [`crate::ApiError`]).
    fn reopen(&self, after: u64) -> BoxFuture<'_, Result<ByteStream>>;

    /// The window the server retains now; asked after an expired offset.
    fn window(&self) -> BoxFuture<'_, Result<OutputWindow>>;
}

/// Reconnect and liveness settings of an [`OutputStream`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputOptions {
    /// A connection with no line at all (data or heartbeat) for this long is dead. Default
    /// 15 s: three times the 5 s heartbeat the control plane uses on streams.
    pub idle_timeout: Duration,
    /// First wait before a reconnect that follows a failed attempt. Default 100 ms.
    pub backoff_initial: Duration,
    /// Longest wait between attempts. Default 5 s.
    pub backoff_max: Duration,
    /// Consecutive attempts without progress before giving up with the last error. Default 8.
    pub max_failures: u32,
}

impl Default for OutputOptions {
    fn default() -> Self {
        OutputOptions {
            idle_timeout: Duration::from_secs(15),
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            max_failures: 8,
        }
    }
}

impl OutputOptions {
    /// Wait before attempt number `failures` (1-based count of consecutive failures).
    fn backoff(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(20));
        self.backoff_initial
            .saturating_mul(factor)
            .min(self.backoff_max)
    }
}

/// One NDJSON line of E25.
#[derive(Debug, Default, Deserialize)]
struct WireEvent {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default)]
    stream: Option<String>,
    #[serde(default)]
    data_base64: Option<String>,
    #[serde(default)]
    exit_code: Option<i64>,
    #[serde(default)]
    signal: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    oldest_available_seq: Option<u64>,
    /// Byte offset of a data event's first byte in the process's whole output (an extension
    /// of this project's emulator; absent from servers that do not send it).
    #[serde(default)]
    offset: Option<u64>,
    /// Byte offset of the oldest retained chunk, next to `oldest_available_seq` (same
    /// extension).
    #[serde(default)]
    oldest_available_offset: Option<u64>,
}

/// Counters shared between the stream and its handle.
#[derive(Debug, Default)]
struct Shared {
    last_seq: AtomicU64,
    connections: AtomicU64,
}

/// The output of a managed process as a `Stream` of [`OutputEvent`]s; from
/// [`crate::api::processes::Process::connect`], or [`OutputStream::open`] with any
/// [`OutputSource`]. Ends after [`OutputEvent::Exit`], or after yielding an error once
/// reconnecting is hopeless. Dropping it closes the connection; the process keeps running.
pub struct OutputStream {
    inner: BoxStream<'static, Result<OutputEvent>>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for OutputStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputStream")
            .field("last_seq", &self.last_seq())
            .field("connections", &self.connections())
            .finish()
    }
}

impl OutputStream {
    /// Connect (the first connection is made here, so a wrong id or a paused sandbox fails
    /// now) and return the stream.
    pub async fn open(
        source: impl OutputSource,
        after: u64,
        options: OutputOptions,
    ) -> Result<Self> {
        let shared = Arc::new(Shared::default());
        shared.last_seq.store(after, Ordering::Relaxed);
        let mut follower = Follower {
            label: source.endpoint(),
            source: Box::new(source),
            options,
            last_seq: after,
            offset: (after == 0).then_some(0),
            frames: None,
            progressed: false,
            failures: 0,
            last_error: None,
            pending: VecDeque::new(),
            done: false,
            shared: shared.clone(),
        };
        follower.ensure_connected().await?;
        let inner = futures::stream::unfold(follower, |mut f| async move {
            let item = f.next_event().await?;
            Some((item, f))
        })
        .boxed();
        Ok(OutputStream { inner, shared })
    }

    /// Sequence of the last chunk delivered (or skipped past by a gap); reconnect later with
    /// `connect(last_seq)` to continue from here.
    pub fn last_seq(&self) -> u64 {
        self.shared.last_seq.load(Ordering::Relaxed)
    }

    /// Connections opened so far (1 + reconnects).
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::Relaxed)
    }
}

impl Stream for OutputStream {
    type Item = Result<OutputEvent>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// The reconnecting state machine behind [`OutputStream`].
struct Follower {
    source: Box<dyn OutputSource>,
    /// [`OutputSource::endpoint`], labelling errors.
    label: String,
    options: OutputOptions,
    /// Newest sequence delivered (or declared lost).
    last_seq: u64,
    /// Byte offset just past `last_seq` in the process's output, when known.
    offset: Option<u64>,
    frames: Option<BoxStream<'static, Result<WireEvent>>>,
    /// The current connection delivered new output.
    progressed: bool,
    /// Consecutive attempts without progress.
    failures: u32,
    last_error: Option<Error>,
    pending: VecDeque<OutputEvent>,
    done: bool,
    shared: Arc<Shared>,
}

/// Whether an error (an `error` event's text or an HTTP refusal) means "output offset expired"
/// (matched case-insensitively, `_` read as a space, as the CLI does).
fn mentions_expired(text: &str) -> bool {
    text.to_ascii_lowercase()
        .replace('_', " ")
        .contains("output offset expired")
}

fn expired_answer(err: &Error) -> Option<Option<u64>> {
    let api = err.api()?;
    if !(400..500).contains(&api.status) {
        return None;
    }
    let hit = mentions_expired(&api.message)
        || api.code.as_deref().is_some_and(mentions_expired)
        || api.fields.values().any(|v| mentions_expired(v));
    hit.then(|| {
        api.fields
            .get("oldest_available_seq")
            .and_then(|v| v.trim().parse().ok())
    })
}

/// Failures worth another connection: the network, the server's 5xx/429, a bad line.
fn is_transient(err: &Error) -> bool {
    match err {
        Error::Connection { .. }
        | Error::Timeout { .. }
        | Error::Decode { .. }
        | Error::Io { .. } => true,
        Error::Server(_) | Error::RateLimited { .. } => true,
        other => other.status() == Some(408),
    }
}

fn lost(label: &str, reason: &str) -> Error {
    let source = Box::new(std::io::Error::other(reason.to_string()));
    Error::Connection {
        endpoint: label.to_string(),
        source,
    }
}

impl Follower {
    async fn next_event(&mut self) -> Option<Result<OutputEvent>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(Ok(event));
            }
            if self.done {
                return None;
            }
            if let Err(err) = self.ensure_connected().await {
                self.done = true;
                return Some(Err(err));
            }
            let Some(frames) = self.frames.as_mut() else {
                continue;
            };
            match tokio::time::timeout(self.options.idle_timeout, frames.next()).await {
                Err(_) => {
                    let after = self.options.idle_timeout;
                    self.connection_lost(Error::Timeout {
                        endpoint: self.label.clone(),
                        after,
                    })
                }
                Ok(None) => {
                    self.connection_lost(self.lost("the output stream ended without an exit event"))
                }
                Ok(Some(Err(err))) if is_transient(&err) => self.connection_lost(err),
                Ok(Some(Err(err))) => {
                    self.done = true;
                    return Some(Err(err));
                }
                Ok(Some(Ok(event))) => self.handle(event).await,
            }
        }
    }

    /// Forget the current connection; the next loop turn reconnects.
    fn connection_lost(&mut self, err: Error) {
        tracing::debug!(process = %self.source.process_id(), last_seq = self.last_seq, error = %err, "output connection lost");
        if self.progressed {
            self.failures = 0;
        } else {
            self.failures += 1;
        }
        self.progressed = false;
        self.frames = None;
        self.last_error = Some(err);
    }

    /// Open a connection unless one is open, resolving expired offsets and backing off.
    async fn ensure_connected(&mut self) -> Result<()> {
        while self.frames.is_none() && self.pending.is_empty() {
            if self.failures > self.options.max_failures {
                let last = self.last_error.take();
                return Err(last.unwrap_or_else(|| self.lost("too many failed reconnects")));
            }
            let delay = self.options.backoff(self.failures);
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            match self.source.reopen(self.last_seq).await {
                Ok(body) => {
                    self.shared.connections.fetch_add(1, Ordering::Relaxed);
                    let events = super::ndjson::decode_bytes::<WireEvent>(self.label.clone(), body);
                    self.frames = Some(events.boxed());
                    self.progressed = false;
                }
                Err(err) => match expired_answer(&err) {
                    Some(oldest) => self.expired(oldest, None).await,
                    None if is_transient(&err) => {
                        self.failures += 1;
                        self.last_error = Some(err);
                    }
                    None => return Err(err),
                },
            }
        }
        Ok(())
    }

    async fn handle(&mut self, event: WireEvent) {
        match event.kind.as_str() {
            "data" => self.data(event),
            "exit" => {
                self.frames = None;
                self.done = true;
                let code = event.exit_code.map(|c| i32::try_from(c).unwrap_or(-1));
                self.pending.push_back(OutputEvent::Exit {
                    code,
                    signal: event.signal.filter(|s| !s.is_empty()),
                });
            }
            "error" => {
                let message = event.error.unwrap_or_default();
                if mentions_expired(&message) {
                    self.frames = None;
                    self.expired(event.oldest_available_seq, event.oldest_available_offset)
                        .await;
                } else {
                    self.last_error = Some(self.lost(&format!("server error event: {message}")));
                    self.pending.push_back(OutputEvent::Error(message));
                }
            }
            // Heartbeats only keep the connection alive; unknown types are ignored (spec).
            _ => {}
        }
    }

    fn data(&mut self, event: WireEvent) {
        let Some(seq) = event.seq else {
            self.connection_lost(Error::decode(&self.label, "a data event without seq"));
            return;
        };
        if seq <= self.last_seq {
            return; // already delivered before a reconnect
        }
        let bytes = match base64::engine::general_purpose::STANDARD
            .decode(event.data_base64.unwrap_or_default())
        {
            Ok(b) => Bytes::from(b),
            Err(e) => {
                let message = format!("data event {seq} is not base64: {e}");
                self.connection_lost(Error::decode(&self.label, message));
                return;
            }
        };
        if seq > self.last_seq + 1 {
            // The server skipped sequences without saying why: report it, never hide it.
            self.pending.push_back(OutputEvent::Gap {
                from_seq: self.last_seq + 1,
                to_seq: seq - 1,
                lost_bytes: None,
            });
            self.offset = None;
        }
        self.advance(seq);
        // A server that says where the chunk starts re-anchors the byte count exactly.
        self.offset = event.offset.or(self.offset).map(|o| o + bytes.len() as u64);
        self.progressed = true;
        let stream = StreamKind::from(event.stream.as_deref().unwrap_or("stdout"));
        self.pending
            .push_back(OutputEvent::Data { seq, stream, bytes });
    }

    fn lost(&self, reason: &str) -> Error {
        lost(&self.label, reason)
    }

    fn advance(&mut self, seq: u64) {
        self.last_seq = seq;
        self.shared.last_seq.store(seq, Ordering::Relaxed);
    }

    /// The server no longer has the chunks after `last_seq`: yield a gap and resume from the
    /// oldest retained chunk (the newer of the server's hint and a fresh window).
    async fn expired(&mut self, hint: Option<u64>, hint_offset: Option<u64>) {
        let window: Option<OutputWindow> = match self.source.window().await {
            Ok(window) => Some(window),
            Err(err) => {
                tracing::debug!(process = %self.source.process_id(), error = %err, "window lookup after an expired offset failed");
                if hint.is_none() {
                    self.failures += 1;
                    self.last_error = Some(err);
                    return;
                }
                None
            }
        };
        let oldest = match (hint, window) {
            (Some(h), Some(w)) => h.max(w.oldest_seq),
            (Some(h), None) => h,
            (None, Some(w)) => w.oldest_seq,
            (None, None) => return,
        };
        if oldest <= self.last_seq + 1 {
            // Nothing is actually missing; a server that keeps saying so must not loop forever.
            self.failures += 1;
            let next = self.last_seq + 1;
            let reason = format!("output offset expired, but seq {next} is retained");
            self.last_error = Some(self.lost(&reason));
            return;
        }
        // Exact when the server said where the oldest retained chunk starts, or when a window
        // starting at the resume point reports its total bytes.
        let from_hint = hint_offset.filter(|_| hint == Some(oldest));
        let from_window = window
            .filter(|w| w.oldest_seq == oldest)
            .and_then(|w| w.total_bytes.map(|t| t.saturating_sub(w.bytes)));
        let start_of_oldest = from_hint.or(from_window);
        let lost_bytes = match (start_of_oldest, self.offset) {
            (Some(start), Some(delivered)) => Some(start.saturating_sub(delivered)),
            _ => None,
        };
        self.pending.push_back(OutputEvent::Gap {
            from_seq: self.last_seq + 1,
            to_seq: oldest - 1,
            lost_bytes,
        });
        self.offset = start_of_oldest;
        self.advance(oldest - 1);
        self.progressed = true;
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let o = OutputOptions::default();
        assert_eq!(o.backoff(0), Duration::ZERO);
        assert_eq!(o.backoff(1), Duration::from_millis(100));
        assert_eq!(o.backoff(2), Duration::from_millis(200));
        assert_eq!(o.backoff(4), Duration::from_millis(800));
        assert_eq!(o.backoff(30), Duration::from_secs(5));
    }

    #[test]
    fn expired_text_forms() {
        assert!(mentions_expired("output offset expired"));
        assert!(mentions_expired("OUTPUT_OFFSET_EXPIRED"));
        assert!(!mentions_expired("process not found"));
    }

    #[test]
    fn expired_offset_as_an_http_refusal() {
        let refusal = |status: u16, body: &[u8]| {
            crate::transport::jsend::error_from_answer(
                "GET /connect",
                status,
                &http::HeaderMap::new(),
                body,
            )
        };
        let err = refusal(410, br#"{"status":"fail","data":{"after":"OUTPUT_OFFSET_EXPIRED","oldest_available_seq":"42"}}"#);
        assert_eq!(expired_answer(&err), Some(Some(42)));
        let err = refusal(400, br#"{"status":"fail","data":"output offset expired"}"#);
        assert_eq!(expired_answer(&err), Some(None));
        assert_eq!(
            expired_answer(&refusal(
                404,
                br#"{"status":"fail","data":{"process":"process not found"}}"#
            )),
            None
        );
        assert_eq!(
            expired_answer(&refusal(503, b"output offset expired")),
            None,
            "5xx is not an expiry"
        );
    }

    /// A process whose output is `chunks` (seq 1..), served over connections that break after
    /// `breaks[n]` lines of connection `n`.
    struct Flaky {
        chunks: Vec<&'static str>,
        breaks: Vec<usize>,
        opened: std::sync::Mutex<Vec<u64>>,
    }

    impl OutputSource for Flaky {
        fn endpoint(&self) -> String {
            "GET /connect".into()
        }

        fn process_id(&self) -> &str {
            "proc-test"
        }

        fn reopen(&self, after: u64) -> BoxFuture<'_, Result<ByteStream>> {
            let mut opened = self.opened.lock().unwrap();
            let cut = self.breaks.get(opened.len()).copied();
            opened.push(after);
            // A reconnect replays one chunk already delivered: it must not come out twice.
            let from = after.saturating_sub(1) as usize;
            let mut lines: Vec<std::io::Result<Bytes>> = Vec::new();
            for (i, chunk) in self.chunks.iter().enumerate().skip(from) {
                let data = base64::engine::general_purpose::STANDARD.encode(chunk);
                let seq = i + 1;
                let line =
                    format!("{{\"type\":\"data\",\"seq\":{seq},\"data_base64\":\"{data}\"}}\n");
                lines.push(Ok(Bytes::from(line)));
            }
            lines.push(Ok(Bytes::from_static(
                b"{\"type\":\"exit\",\"exit_code\":0}\n",
            )));
            if let Some(cut) = cut {
                lines.truncate(cut);
                lines.push(Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "cut",
                )));
            }
            Box::pin(async move { Ok(futures::stream::iter(lines).boxed()) })
        }

        fn window(&self) -> BoxFuture<'_, Result<OutputWindow>> {
            Box::pin(async { Ok(OutputWindow::default()) })
        }
    }

    #[tokio::test]
    async fn a_caller_supplied_source_resumes_without_loss_or_repeats() {
        let source = Flaky {
            chunks: vec!["a", "b", "c", "d", "e"],
            breaks: vec![2, 0, 3],
            opened: std::sync::Mutex::new(Vec::new()),
        };
        let options = OutputOptions {
            backoff_initial: Duration::from_millis(1),
            ..Default::default()
        };
        let mut stream = OutputStream::open(source, 0, options).await.unwrap();
        let mut out = String::new();
        let mut seqs = Vec::new();
        let mut exit = None;
        while let Some(event) = stream.next().await {
            match event.unwrap() {
                OutputEvent::Data { seq, bytes, .. } => {
                    seqs.push(seq);
                    out.push_str(std::str::from_utf8(&bytes).unwrap());
                }
                OutputEvent::Exit { code, .. } => exit = Some(code),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(out, "abcde");
        assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
        assert_eq!(exit, Some(Some(0)));
        assert_eq!(stream.last_seq(), 5);
        // 2 lines, then nothing, then 3 lines (one a replay), then the rest.
        assert_eq!(stream.connections(), 4);
    }

    #[test]
    fn wire_events_decode() {
        let e: WireEvent = serde_json::from_str(
            r#"{"type":"data","seq":3,"stream":"stderr","data_base64":"aGk="}"#,
        )
        .unwrap();
        assert_eq!(
            (e.kind.as_str(), e.seq, e.stream.as_deref()),
            ("data", Some(3), Some("stderr"))
        );
        let e: WireEvent =
            serde_json::from_str(r#"{"type":"exit","exit_code":null,"signal":"SIGKILL"}"#).unwrap();
        assert_eq!((e.exit_code, e.signal.as_deref()), (None, Some("SIGKILL")));
        let e: WireEvent = serde_json::from_str(
            r#"{"type":"error","error":"output offset expired","oldest_available_seq":9}"#,
        )
        .unwrap();
        assert_eq!(e.oldest_available_seq, Some(9));
    }
}
