//! E25 `connect`: the NDJSON output stream of a managed process. Replays retained chunks
//! with `seq > after`, then follows live output; ends after an `exit` event once the
//! process has exited and every earlier output was sent, or after an `error` event when
//! the requested offset was evicted. Idle streams carry `heartbeat` events.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::journal::Replay;
use super::managed::{LeaderExit, ManagedProcess};

/// Payload bytes packed into one body write while replaying.
const REPLAY_BATCH_BYTES: usize = 256 * 1024;

/// Something to keep alive for as long as the stream is open (e.g. a busy marker).
pub type StreamGuard = Box<dyn Send + Sync>;

struct Follow {
    proc: Arc<ManagedProcess>,
    cursor: u64,
    changes: watch::Receiver<u64>,
    heartbeat: Duration,
    last_sent: Instant,
    shutdown: CancellationToken,
    finished: bool,
    _guard: StreamGuard,
}

/// The response body of `connect?after=<after>`.
pub fn output_body(
    proc: Arc<ManagedProcess>,
    after: u64,
    heartbeat: Duration,
    shutdown: CancellationToken,
    guard: StreamGuard,
) -> axum::body::Body {
    let changes = proc.subscribe();
    let state = Follow {
        proc,
        cursor: after,
        changes,
        heartbeat: heartbeat.max(Duration::from_millis(10)),
        last_sent: Instant::now(),
        shutdown,
        finished: false,
        _guard: guard,
    };
    let stream = futures::stream::unfold(state, |mut st| async move {
        let bytes = next_batch(&mut st).await?;
        st.last_sent = Instant::now();
        Some((Ok::<Bytes, Infallible>(bytes), st))
    });
    axum::body::Body::from_stream(stream)
}

fn line(value: Value) -> Vec<u8> {
    let mut out = serde_json::to_vec(&value).unwrap_or_default();
    out.push(b'\n');
    out
}

fn exit_event(exit: &LeaderExit) -> Value {
    match (&exit.signal, exit.code) {
        (Some(sig), _) => json!({"type": "exit", "signal": sig}),
        (None, code) => json!({"type": "exit", "exit_code": code.unwrap_or(-1)}),
    }
}

/// The next piece of the body, `None` at the end of the stream.
async fn next_batch(st: &mut Follow) -> Option<Bytes> {
    if st.finished {
        return None;
    }
    loop {
        let view = st.proc.stream_view(st.cursor, REPLAY_BATCH_BYTES);
        match view.replay {
            Replay::Expired {
                oldest_available,
                oldest_offset,
            } => {
                st.finished = true;
                return Some(Bytes::from(line(json!({
                    "type": "error",
                    "error": "output offset expired",
                    "oldest_available_seq": oldest_available,
                    "oldest_available_offset": oldest_offset,
                }))));
            }
            Replay::Chunks(chunks) if !chunks.is_empty() => {
                let mut out = Vec::new();
                for chunk in chunks {
                    st.cursor = chunk.seq;
                    out.extend(line(json!({
                        "type": "data",
                        "seq": chunk.seq,
                        "stream": chunk.stream.as_str(),
                        "offset": chunk.offset,
                        "data_base64": base64::engine::general_purpose::STANDARD.encode(&chunk.data),
                    })));
                }
                return Some(Bytes::from(out));
            }
            Replay::Chunks(_) => {}
        }
        if let Some((exit_seq, exit)) = view.exit {
            if st.cursor >= exit_seq {
                st.finished = true;
                return Some(Bytes::from(line(exit_event(&exit))));
            }
        }
        let heartbeat_at = st.last_sent + st.heartbeat;
        tokio::select! {
            changed = st.changes.changed() => {
                if changed.is_err() {
                    return None;
                }
            }
            _ = tokio::time::sleep_until(heartbeat_at) => {
                return Some(Bytes::from(line(json!({"type": "heartbeat"}))));
            }
            _ = st.shutdown.cancelled() => return None,
            _ = st.proc.cancel.cancelled() => return None,
        }
    }
}
