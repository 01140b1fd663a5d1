//! Streamed exec: NDJSON frames turned into ordered [`ExecEvent`]s.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use serde::Deserialize;

use super::ExecOutput;
use crate::error::{Error, Result};

/// Exit code reported when a stream ends without its `exit_code` frame (the spec's convention).
pub const EXIT_UNKNOWN: i32 = -1;

/// One piece of a streamed command's life, in the order the server sent it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecEvent {
    /// A chunk of stdout (UTF-8 text as the server decoded it; chunks follow write boundaries,
    /// not lines).
    Stdout(String),
    /// A chunk of stderr.
    Stderr(String),
    /// An agent-level failure (e.g. the command could not be started), or a stream that ended
    /// without an exit code.
    Error(String),
    /// The exit code; always the last event of a stream that ended normally.
    Exit(i32),
}

/// One NDJSON line. Every key is tested on its own: a frame with several keys yields several
/// events, in the order stdout, stderr, error, exit. Heartbeats (`{"hb": true}`) yield nothing.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ExecFrame {
    #[serde(default)]
    stdout: Option<String>,
    #[serde(default)]
    stderr: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    exit_code: Option<i64>,
}

impl ExecFrame {
    /// Push this frame's events; true when it carried the exit code.
    fn push_events(self, out: &mut VecDeque<ExecEvent>) -> bool {
        if let Some(s) = self.stdout {
            out.push_back(ExecEvent::Stdout(s));
        }
        if let Some(s) = self.stderr {
            out.push_back(ExecEvent::Stderr(s));
        }
        if let Some(s) = self.error {
            out.push_back(ExecEvent::Error(s));
        }
        match self.exit_code {
            Some(code) => {
                out.push_back(ExecEvent::Exit(exit_code(code)));
                true
            }
            None => false,
        }
    }
}

/// A wire exit code as `i32` (out-of-range values become [`EXIT_UNKNOWN`]).
pub(super) fn exit_code(code: i64) -> i32 {
    i32::try_from(code).unwrap_or(EXIT_UNKNOWN)
}

/// The events of a running command: a [`Stream`] of `Result<ExecEvent>`.
///
/// Heartbeats are consumed. A normal stream ends right after [`ExecEvent::Exit`]; a stream the
/// server closed without an exit code yields [`ExecEvent::Error`] then `Exit(-1)`; a broken
/// connection yields one `Err` ([`Error::Connection`]) and ends — the command is not re-run
/// (exec is not idempotent). Dropping the stream closes the connection.
///
/// ```no_run
/// # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
/// use futures::StreamExt;
/// use createos_sandbox::api::exec::{ExecEvent, ExecRequest};
///
/// let mut events = sandbox.exec_stream(ExecRequest::shell("for i in 1 2 3; do echo $i; sleep 1; done")).await?;
/// while let Some(event) = events.next().await {
///     match event? {
///         ExecEvent::Stdout(text) => print!("{text}"),
///         ExecEvent::Stderr(text) => eprint!("{text}"),
///         ExecEvent::Error(message) => eprintln!("error: {message}"),
///         ExecEvent::Exit(code) => println!("exit {code}"),
///     }
/// }
/// # Ok(()) }
/// ```
pub struct ExecStream {
    inner: Inner,
    started: Instant,
    fell_back: bool,
}

enum Inner {
    Live(Box<LiveEvents>),
    /// Events of a buffered answer, replayed; `exec_ms` as the server measured it.
    Replay {
        events: VecDeque<ExecEvent>,
        exec_ms: Option<f64>,
    },
}

impl std::fmt::Debug for ExecStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecStream")
            .field("fell_back", &self.fell_back)
            .finish_non_exhaustive()
    }
}

impl ExecStream {
    pub(super) fn live(
        label: String,
        frames: BoxStream<'static, Result<ExecFrame>>,
        started: Instant,
        deadline: Option<Instant>,
    ) -> Self {
        let deadline =
            deadline.map(|d| (Box::pin(tokio::time::sleep_until(d.into())), d - started));
        ExecStream {
            inner: Inner::Live(Box::new(LiveEvents {
                label,
                frames,
                pending: VecDeque::new(),
                done: false,
                deadline,
            })),
            started,
            fell_back: false,
        }
    }

    pub(super) fn replay(output: ExecOutput, started: Instant) -> Self {
        let mut events = VecDeque::new();
        if !output.stdout.is_empty() {
            events.push_back(ExecEvent::Stdout(output.stdout));
        }
        if !output.stderr.is_empty() {
            events.push_back(ExecEvent::Stderr(output.stderr));
        }
        if let Some(message) = output.error {
            events.push_back(ExecEvent::Error(message));
        }
        events.push_back(ExecEvent::Exit(output.exit_code));
        ExecStream {
            inner: Inner::Replay {
                events,
                exec_ms: Some(output.exec_ms),
            },
            started,
            fell_back: true,
        }
    }

    /// True when the server did not stream (it answered 404 to the streaming form, as some
    /// control-plane versions do, or ignored the flag) and the events are the buffered result
    /// replayed: all output arrives at once, when the command has ended.
    pub fn fell_back(&self) -> bool {
        self.fell_back
    }

    /// Drain the stream into one [`ExecOutput`] (stdout and stderr concatenated, error messages
    /// joined by newlines). Fails on the first `Err` event. `exec_ms` is the server's figure for
    /// a replayed answer and the client-side wall time otherwise.
    pub async fn collect_output(mut self) -> Result<ExecOutput> {
        let mut out = ExecOutput {
            exit_code: EXIT_UNKNOWN,
            ..Default::default()
        };
        while let Some(event) = self.next().await {
            match event? {
                ExecEvent::Stdout(s) => out.stdout.push_str(&s),
                ExecEvent::Stderr(s) => out.stderr.push_str(&s),
                ExecEvent::Error(message) => match &mut out.error {
                    Some(existing) => {
                        existing.push('\n');
                        existing.push_str(&message);
                    }
                    None => out.error = Some(message),
                },
                ExecEvent::Exit(code) => out.exit_code = code,
            }
        }
        out.exec_ms = match &self.inner {
            Inner::Replay {
                exec_ms: Some(ms), ..
            } => *ms,
            _ => self.started.elapsed().as_secs_f64() * 1000.0,
        };
        Ok(out)
    }
}

impl Stream for ExecStream {
    type Item = Result<ExecEvent>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match &mut self.get_mut().inner {
            Inner::Replay { events, .. } => Poll::Ready(events.pop_front().map(Ok)),
            Inner::Live(live) => live.poll_event(cx),
        }
    }
}

struct LiveEvents {
    label: String,
    frames: BoxStream<'static, Result<ExecFrame>>,
    pending: VecDeque<ExecEvent>,
    /// No more frames will be read (exit seen, error yielded, or end of body).
    done: bool,
    deadline: Option<(Pin<Box<tokio::time::Sleep>>, Duration)>,
}

impl LiveEvents {
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<ExecEvent>>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Poll::Ready(Some(Ok(event)));
            }
            if self.done {
                return Poll::Ready(None);
            }
            if let Some((sleep, limit)) = &mut self.deadline {
                if sleep.as_mut().poll(cx).is_ready() {
                    let after = *limit;
                    self.finish();
                    return Poll::Ready(Some(Err(Error::Timeout {
                        endpoint: self.label.clone(),
                        after,
                    })));
                }
            }
            match self.frames.poll_next_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    if frame.push_events(&mut self.pending) {
                        self.finish();
                    }
                }
                Poll::Ready(Some(Err(err))) => {
                    self.finish();
                    return Poll::Ready(Some(Err(err)));
                }
                Poll::Ready(None) => {
                    self.finish();
                    self.pending.push_back(ExecEvent::Error(
                        "stream ended without an exit code".to_string(),
                    ));
                    self.pending.push_back(ExecEvent::Exit(EXIT_UNKNOWN));
                }
            }
        }
    }

    /// Stop reading: release the connection now rather than when the stream is dropped.
    fn finish(&mut self) {
        self.done = true;
        self.deadline = None;
        self.frames = futures::stream::empty().boxed();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(lines: &[&str]) -> BoxStream<'static, Result<ExecFrame>> {
        let parsed: Vec<Result<ExecFrame>> = lines
            .iter()
            .map(|l| Ok(serde_json::from_str::<ExecFrame>(l).unwrap()))
            .collect();
        futures::stream::iter(parsed).boxed()
    }

    async fn events(stream: ExecStream) -> Vec<ExecEvent> {
        stream.map(|e| e.unwrap()).collect().await
    }

    #[tokio::test]
    async fn order_within_a_frame_and_heartbeats() {
        let s = ExecStream::live(
            "t".into(),
            frames(&[
                r#"{"hb":true}"#,
                r#"{"exit_code":3,"error":"e","stderr":"b","stdout":"a"}"#,
                r#"{"stdout":"after exit is ignored"}"#,
            ]),
            Instant::now(),
            None,
        );
        assert_eq!(
            events(s).await,
            vec![
                ExecEvent::Stdout("a".into()),
                ExecEvent::Stderr("b".into()),
                ExecEvent::Error("e".into()),
                ExecEvent::Exit(3)
            ]
        );
    }

    #[tokio::test]
    async fn missing_exit_is_reported() {
        let s = ExecStream::live(
            "t".into(),
            frames(&[r#"{"stdout":"x"}"#]),
            Instant::now(),
            None,
        );
        let out = s.collect_output().await.unwrap();
        assert_eq!(out.stdout, "x");
        assert_eq!(out.exit_code, EXIT_UNKNOWN);
        assert!(out.error.unwrap().contains("without an exit code"));
    }

    #[tokio::test]
    async fn errors_end_the_stream() {
        let items: Vec<Result<ExecFrame>> = vec![
            Ok(ExecFrame {
                stdout: Some("x".into()),
                ..Default::default()
            }),
            Err(Error::Cancelled),
        ];
        let mut s = ExecStream::live(
            "t".into(),
            futures::stream::iter(items).boxed(),
            Instant::now(),
            None,
        );
        assert_eq!(
            s.next().await.unwrap().unwrap(),
            ExecEvent::Stdout("x".into())
        );
        assert!(s.next().await.unwrap().is_err());
        assert!(s.next().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn deadline_ends_a_silent_stream() {
        let start = Instant::now();
        let s = ExecStream::live(
            "t".into(),
            futures::stream::pending().boxed(),
            start,
            Some(start + Duration::from_secs(2)),
        );
        let err = s.collect_output().await.unwrap_err();
        assert!(matches!(err, Error::Timeout { after, .. } if after == Duration::from_secs(2)));
    }

    #[tokio::test]
    async fn replay_of_a_buffered_answer() {
        let out = ExecOutput {
            stdout: "o".into(),
            stderr: String::new(),
            exit_code: 0,
            error: None,
            exec_ms: 12.5,
        };
        let s = ExecStream::replay(out.clone(), Instant::now());
        assert!(s.fell_back());
        assert_eq!(s.collect_output().await.unwrap(), out);
    }
}
