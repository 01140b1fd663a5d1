//! Progress of long calls (MCP `notifications/progress`): a [`Reporter`] sends what the call is
//! doing at least every [`EVERY`] while it lives, so a client that resets its request timeout
//! on progress never gives up on a call that is still working. Without a progress sink (the
//! request carried no `progressToken`) nothing is created and nothing is sent.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::CallCtx;
use super::ProgressSink;
use createos_sandbox::guest::OutputNote;

/// Interval between reports (the promise to clients is "at least every 5 s").
pub const EVERY: Duration = Duration::from_secs(2);

/// What the call is doing now.
#[derive(Default)]
struct Now {
    phase: String,
    output: Option<OutputNote>,
    bytes: Option<(u64, Option<u64>)>,
}

struct Inner {
    sink: ProgressSink,
    started: Instant,
    now: Mutex<Now>,
}

/// Sends periodic progress for one call; cheap to clone. Reporting stops when the last clone
/// is dropped.
#[derive(Clone)]
pub struct Reporter {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Reporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reporter")
            .field("started", &self.inner.started)
            .finish_non_exhaustive()
    }
}

impl Reporter {
    /// A reporter for `ctx` doing `phase`, or `None` when nobody listens.
    pub fn start(ctx: &CallCtx, phase: impl Into<String>) -> Option<Reporter> {
        let sink = ctx.progress.clone()?;
        let inner = Arc::new(Inner {
            sink,
            started: Instant::now(),
            now: Mutex::new(Now {
                phase: phase.into(),
                ..Default::default()
            }),
        });
        tokio::spawn(tick(Arc::downgrade(&inner)));
        Some(Reporter { inner })
    }

    fn now(&self) -> std::sync::MutexGuard<'_, Now> {
        self.inner.now.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The call moved on to `phase` (reported at once, then periodically).
    pub fn phase(&self, phase: impl Into<String>) {
        let message = {
            let mut now = self.now();
            *now = Now {
                phase: phase.into(),
                ..Default::default()
            };
            render(&now, self.inner.started.elapsed())
        };
        (self.inner.sink)(message);
    }

    /// A running command's output so far.
    pub fn output(&self, note: &OutputNote) {
        self.now().output = Some(note.clone());
    }

    /// Bytes moved so far, of `total` when known.
    pub fn bytes(&self, done: u64, total: Option<u64>) {
        self.now().bytes = Some((done, total));
    }
}

/// A [`Reporter`] only when `ctx` listens, reporting `phase` at once.
pub fn announce(ctx: &CallCtx, phase: impl Into<String>) -> Option<Reporter> {
    let reporter = Reporter::start(ctx, phase)?;
    let message = render(&reporter.now(), Duration::ZERO);
    (reporter.inner.sink)(message);
    Some(reporter)
}

async fn tick(inner: Weak<Inner>) {
    let mut every = tokio::time::interval(EVERY);
    every.tick().await;
    loop {
        every.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let message = render(
            &inner.now.lock().unwrap_or_else(|e| e.into_inner()),
            inner.started.elapsed(),
        );
        (inner.sink)(message);
    }
}

fn render(now: &Now, elapsed: Duration) -> String {
    let mut text = format!("{} ({}s)", now.phase, elapsed.as_secs());
    if let Some(note) = &now.output {
        text.push_str(&format!(": {} bytes of output", note.bytes));
        if let Some(line) = &note.last_line {
            text.push_str(&format!("; last line: {line}"));
        }
    }
    if let Some((done, total)) = now.bytes {
        match total {
            Some(total) => text.push_str(&format!(": {done} of {total} bytes")),
            None => text.push_str(&format!(": {done} bytes")),
        }
    }
    text
}

/// Keeps a call's progress alive: returns `ctx` with its sink wrapped so that, whenever the
/// call has reported nothing for [`EVERY`], `<what> (Ns)` is sent, until the returned guard
/// is dropped. Without a sink, `ctx` is returned unchanged and nothing runs.
pub fn heartbeat(ctx: CallCtx, what: &str) -> (CallCtx, Option<Heartbeat>) {
    let Some(sink) = ctx.progress.clone() else {
        return (ctx, None);
    };
    let last = Arc::new(Mutex::new(Instant::now()));
    let wrapped: ProgressSink = {
        let last = last.clone();
        Arc::new(move |message: String| {
            *last.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
            sink(message);
        })
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let started = Instant::now();
    let what = what.to_string();
    let task = {
        let (sink, stop) = (wrapped.clone(), stop.clone());
        tokio::spawn(async move {
            let mut every = tokio::time::interval(EVERY / 2);
            loop {
                tokio::select! {
                    _ = every.tick() => {}
                    _ = stop.cancelled() => return,
                }
                let quiet = last.lock().unwrap_or_else(|e| e.into_inner()).elapsed() >= EVERY;
                if quiet {
                    sink(format!("{what} ({}s)", started.elapsed().as_secs()));
                }
            }
        })
    };
    let ctx = CallCtx {
        progress: Some(wrapped),
        ..ctx
    };
    (ctx, Some(Heartbeat { stop, _task: task }))
}

/// Stops a [`heartbeat`] when dropped.
pub struct Heartbeat {
    stop: tokio_util::sync::CancellationToken,
    _task: tokio::task::JoinHandle<()>,
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A command shortened for a progress line.
pub fn short(command: &str) -> String {
    let first = command.lines().next().unwrap_or_default().trim();
    let mut text: String = first.chars().take(60).collect();
    if text.len() < first.len() || command.lines().nth(1).is_some() {
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_output_and_bytes() {
        let now = Now {
            phase: "running `make`".into(),
            output: Some(OutputNote {
                bytes: 12,
                last_line: Some("ok".into()),
            }),
            bytes: None,
        };
        assert_eq!(
            render(&now, Duration::from_secs(3)),
            "running `make` (3s): 12 bytes of output; last line: ok"
        );
        let now = Now {
            phase: "uploading".into(),
            output: None,
            bytes: Some((5, Some(10))),
        };
        assert_eq!(
            render(&now, Duration::ZERO),
            "uploading (0s): 5 of 10 bytes"
        );
        assert_eq!(short("echo hi\necho there"), "echo hi…");
        assert_eq!(short(&"x".repeat(70)).chars().count(), 61);
    }
}
