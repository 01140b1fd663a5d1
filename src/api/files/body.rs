//! What to upload ([`UploadBody`]) and the counting stream that feeds it to the connection:
//! progress reports, the size cap, and short/long bodies caught on the client side.

use std::fmt;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;
use tokio::io::AsyncRead;

use super::ProgressFn;

/// Size of the chunks read from disk or readers and handed to the connection.
pub(super) const CHUNK: usize = 64 * 1024;

/// The content of an upload.
///
/// - [`UploadBody::bytes`] (also `From<Vec<u8>>`, `From<Bytes>`, `From<String>`, `From<&str>`):
///   in memory, replayable, so a failed attempt is retried like any idempotent PUT.
/// - [`UploadBody::file`]: streamed from disk with its `Content-Length`, never loaded whole;
///   sent once (not retried).
/// - [`UploadBody::reader`]: any `AsyncRead`, with its length when known (chunked otherwise);
///   sent once (not retried).
pub struct UploadBody {
    pub(super) kind: BodyKind,
}

pub(super) enum BodyKind {
    Bytes(Bytes),
    File(PathBuf),
    Reader {
        reader: Pin<Box<dyn AsyncRead + Send>>,
        length: Option<u64>,
    },
}

impl fmt::Debug for UploadBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            BodyKind::Bytes(b) => f
                .debug_struct("UploadBody::Bytes")
                .field("len", &b.len())
                .finish(),
            BodyKind::File(p) => f.debug_struct("UploadBody::File").field("path", p).finish(),
            BodyKind::Reader { length, .. } => f
                .debug_struct("UploadBody::Reader")
                .field("length", length)
                .finish_non_exhaustive(),
        }
    }
}

impl UploadBody {
    /// Bytes held in memory (replayable).
    pub fn bytes(bytes: impl Into<Bytes>) -> Self {
        UploadBody {
            kind: BodyKind::Bytes(bytes.into()),
        }
    }

    /// A local file, streamed from disk when the upload is sent. Its size is read then, and it
    /// must not shrink or grow during the upload.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        UploadBody {
            kind: BodyKind::File(path.into()),
        }
    }

    /// Any async reader. With `length`, exactly that many bytes are sent (`Content-Length`; a
    /// reader ending early fails the upload); without it the body is chunked until EOF.
    pub fn reader<R: AsyncRead + Send + 'static>(reader: R, length: Option<u64>) -> Self {
        UploadBody {
            kind: BodyKind::Reader {
                reader: Box::pin(reader),
                length,
            },
        }
    }

    /// Whether a failed attempt can be sent again.
    pub fn replayable(&self) -> bool {
        matches!(self.kind, BodyKind::Bytes(_))
    }
}

impl From<Bytes> for UploadBody {
    fn from(b: Bytes) -> Self {
        UploadBody::bytes(b)
    }
}

impl From<Vec<u8>> for UploadBody {
    fn from(b: Vec<u8>) -> Self {
        UploadBody::bytes(b)
    }
}

impl From<String> for UploadBody {
    fn from(s: String) -> Self {
        UploadBody::bytes(s)
    }
}

impl From<&'static str> for UploadBody {
    fn from(s: &'static str) -> Self {
        UploadBody::bytes(s)
    }
}

impl From<&'static [u8]> for UploadBody {
    fn from(s: &'static [u8]) -> Self {
        UploadBody::bytes(s)
    }
}

/// Why the client stopped feeding a body (the server then sees a broken request).
#[derive(Debug)]
pub(super) enum LocalFailure {
    /// More than the cap.
    TooLarge { cap: u64 },
    /// The source ended before the declared length.
    Short { sent: u64, expected: u64 },
    /// Reading the source failed.
    Read(std::io::Error),
}

/// What the body stream tells the caller once the request is over.
#[derive(Debug, Default)]
pub(super) struct BodyState {
    /// Bytes handed to the connection.
    pub(super) sent: u64,
    /// Why the client stopped the body, if it did.
    pub(super) failure: Option<LocalFailure>,
}

/// Shared between the body stream (owned by the connection) and the caller.
pub(super) type SharedState = Arc<Mutex<BodyState>>;

/// Wraps a chunk stream: counts, reports progress, enforces the cap and the declared length.
pub(super) struct CountingBody<S> {
    inner: S,
    sent: u64,
    expected: Option<u64>,
    cap: Option<u64>,
    progress: Option<ProgressFn>,
    state: SharedState,
    finished: bool,
}

impl<S> CountingBody<S> {
    pub(super) fn new(
        inner: S,
        expected: Option<u64>,
        cap: Option<u64>,
        progress: Option<ProgressFn>,
    ) -> (Self, SharedState) {
        let state = SharedState::default();
        if let Some(report) = &progress {
            report(0, expected);
        }
        let body = CountingBody {
            inner,
            sent: 0,
            expected,
            cap,
            progress,
            state: state.clone(),
            finished: false,
        };
        (body, state)
    }

    fn fail(&mut self, failure: LocalFailure) -> Poll<Option<std::io::Result<Bytes>>> {
        let message = match &failure {
            LocalFailure::TooLarge { cap } => format!("upload body exceeds {cap} bytes"),
            LocalFailure::Short { sent, expected } => {
                format!("upload body ended after {sent} of {expected} bytes")
            }
            LocalFailure::Read(e) => format!("reading the upload body failed: {e}"),
        };
        self.state.lock().unwrap_or_else(|e| e.into_inner()).failure = Some(failure);
        self.finished = true;
        Poll::Ready(Some(Err(std::io::Error::other(message))))
    }
}

impl<S> Stream for CountingBody<S>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    type Item = std::io::Result<Bytes>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_next(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(chunk))) => {
                this.sent += chunk.len() as u64;
                this.state.lock().unwrap_or_else(|e| e.into_inner()).sent = this.sent;
                if let Some(cap) = this.cap {
                    if this.sent > cap {
                        return this.fail(LocalFailure::TooLarge { cap });
                    }
                }
                if let Some(report) = &this.progress {
                    report(this.sent, this.expected);
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => this.fail(LocalFailure::Read(e)),
            Poll::Ready(None) => {
                if let Some(expected) = this.expected {
                    if this.sent < expected {
                        return this.fail(LocalFailure::Short {
                            sent: this.sent,
                            expected,
                        });
                    }
                }
                this.finished = true;
                Poll::Ready(None)
            }
        }
    }
}

/// A replayable buffer cut into chunks (zero-copy slices), for bodies whose progress is watched.
pub(super) fn chunks_of(
    bytes: Bytes,
) -> impl Stream<Item = std::io::Result<Bytes>> + Unpin + Send + 'static {
    let len = bytes.len();
    let pieces: Vec<std::io::Result<Bytes>> = (0..len)
        .step_by(CHUNK)
        .map(|start| Ok(bytes.slice(start..(start + CHUNK).min(len))))
        .collect();
    futures::stream::iter(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[tokio::test]
    async fn counts_and_reports() {
        let seen = Arc::new(AtomicU64::new(0));
        let s = seen.clone();
        let progress: ProgressFn = Arc::new(move |n, total| {
            assert_eq!(total, Some(150_000));
            s.store(n, Ordering::SeqCst);
        });
        let (body, failure) = CountingBody::new(
            chunks_of(Bytes::from(vec![7u8; 150_000])),
            Some(150_000),
            None,
            Some(progress),
        );
        let parts: Vec<_> = body.collect().await;
        assert_eq!(parts.len(), 3);
        assert_eq!(seen.load(Ordering::SeqCst), 150_000);
        let state = failure.lock().unwrap();
        assert!(state.failure.is_none());
        assert_eq!(state.sent, 150_000);
    }

    #[tokio::test]
    async fn cap_and_short_bodies_fail() {
        let (body, failure) = CountingBody::new(
            chunks_of(Bytes::from(vec![0u8; 200_000])),
            None,
            Some(100_000),
            None,
        );
        let parts: Vec<_> = body.collect().await;
        assert!(parts.last().unwrap().is_err());
        assert!(matches!(
            failure.lock().unwrap().failure,
            Some(LocalFailure::TooLarge { cap: 100_000 })
        ));

        let (body, failure) =
            CountingBody::new(chunks_of(Bytes::from_static(b"abc")), Some(10), None, None);
        let parts: Vec<_> = body.collect().await;
        assert!(parts.last().unwrap().is_err());
        assert!(matches!(
            failure.lock().unwrap().failure,
            Some(LocalFailure::Short {
                sent: 3,
                expected: 10
            })
        ));
    }
}
