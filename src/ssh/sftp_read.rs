//! The read pipeline behind [`RemoteReader`](super::RemoteReader), as OpenSSH's `sftp` client runs it: up to
//! [`READS_IN_FLIGHT`] read requests outstanding, answers delivered in file order whatever
//! order they arrive in.
//!
//! - With the size known (from `fstat` at open), requests cover exactly `[0, size)` and one
//!   more, at `size`, asks whether the file ends there; so the end of a file costs no extra
//!   round trip. When that last request returns data, the file grew and reading goes on.
//! - A short read (the server's own limit, or a file that shrank) is completed by a request
//!   for the rest, which goes out before anything after it is delivered; the other requests in
//!   flight stay valid. Reads shorter than [`READ_CHUNK`] then become the chunk size, so a server
//!   with a smaller limit is not asked twice for every chunk.
//! - End of file (an `EOF` status or an empty answer) at the head of the queue ends the read;
//!   the answers of requests past it are dropped.
//! - Without a size, the window starts small and grows by one request per full answer.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::FuturesOrdered;
use futures::StreamExt;
use russh_sftp::client::error::Error as SftpClientError;
use russh_sftp::protocol::StatusCode;
use tokio::sync::mpsc;

use crate::ssh::error::{sftp_error, SftpErrorKind, SshError};
use crate::ssh::sftp::SftpChannel;

/// Bytes asked for per read request.
pub const READ_CHUNK: u32 = 64 * 1024;
/// Read requests kept outstanding (OpenSSH's `sftp -R` default).
pub const READS_IN_FLIGHT: usize = 64;
/// The window of a read whose size is unknown starts here.
const INITIAL_WINDOW: usize = 4;
/// Short answers at least this long are taken as the server's read limit.
const MIN_LIMIT: u32 = 4096;

/// Chunks travelling from the read task to the reader; `Ok(None)` marks the end, so a task
/// that died early is never mistaken for the end of the file.
pub(super) type Chunk = io::Result<Option<Bytes>>;

/// Which requests to issue next.
#[derive(Debug)]
struct Plan {
    chunk: u32,
    /// Offset of the next request.
    next: u64,
    /// The size announced at open; `None` once the file turned out larger (or when unknown).
    size: Option<u64>,
    window: usize,
}

impl Plan {
    fn new(size: Option<u64>) -> Plan {
        let window = if size.is_some() {
            READS_IN_FLIGHT
        } else {
            INITIAL_WINDOW
        };
        Plan {
            chunk: READ_CHUNK,
            next: 0,
            size,
            window,
        }
    }

    /// The next request `(offset, length)`, or `None` while the request at the announced end
    /// is out and no data past it has been seen.
    fn next_request(&mut self) -> Option<(u64, u32)> {
        let at = self.next;
        let len = match self.size {
            Some(size) if at > size => return None,
            Some(size) if at < size => {
                u32::try_from(size - at).map_or(self.chunk, |rest| rest.min(self.chunk))
            }
            _ => self.chunk,
        };
        self.next += u64::from(len);
        Some((at, len))
    }

    /// An answer of `got` bytes to a request for `asked` at `at` was delivered.
    fn answered(&mut self, at: u64, asked: u32, got: u32) {
        let end = at + u64::from(got);
        if self.size.is_some_and(|size| end > size) {
            // the file grew: read on as if its size were unknown, from where requests stopped
            self.size = None;
        }
        if got == asked {
            self.window = (self.window + 1).min(READS_IN_FLIGHT);
        } else if got >= MIN_LIMIT && got < self.chunk && self.size != Some(end) {
            self.chunk = got;
        }
    }
}

/// One request's answer, with what it asked for.
type Reply = (u64, u32, Result<Vec<u8>, SftpClientError>);

fn request(sftp: &Arc<SftpChannel>, handle: &str, at: u64, len: u32) -> BoxFuture<'static, Reply> {
    let raw = Arc::clone(&sftp.raw);
    let handle = handle.to_string();
    Box::pin(async move { (at, len, raw.read(handle, at, len).await.map(|d| d.data)) })
}

/// Read `handle` (opened on `path`, `size` bytes long at open if known) from the start to its
/// end into `tx`, then close it. The last message is `Ok(None)` after the whole file, or the
/// error that stopped the read.
pub(super) async fn pump_reads(
    sftp: Arc<SftpChannel>,
    handle: String,
    path: String,
    size: Option<u64>,
    tx: mpsc::Sender<Chunk>,
) {
    let outcome = pump(&sftp, &handle, &path, size, &tx).await;
    let _ = sftp.raw.close(handle).await;
    let last = match outcome {
        Ok(()) => Ok(None),
        Err(e) => Err(io::Error::other(e)),
    };
    let _ = tx.send(last).await;
}

async fn pump(
    sftp: &Arc<SftpChannel>,
    handle: &str,
    path: &str,
    size: Option<u64>,
    tx: &mpsc::Sender<Chunk>,
) -> Result<(), SshError> {
    let mut plan = Plan::new(size);
    let mut inflight: FuturesOrdered<BoxFuture<'static, Reply>> = FuturesOrdered::new();
    let mut delivered: u64 = 0;
    loop {
        while inflight.len() < plan.window {
            let Some((at, len)) = plan.next_request() else {
                break;
            };
            inflight.push_back(request(sftp, handle, at, len));
        }
        let Some((at, asked, answer)) = inflight.next().await else {
            return Ok(());
        };
        let data = match answer {
            Ok(data) => data,
            Err(SftpClientError::Status(s)) if s.status_code == StatusCode::Eof => return Ok(()),
            Err(e) => return Err(sftp_error("read", path, e)),
        };
        if data.is_empty() {
            return Ok(());
        }
        let got = u32::try_from(data.len())
            .ok()
            .filter(|got| *got <= asked)
            .ok_or_else(|| SshError::Sftp {
                op: "read",
                path: path.to_string(),
                kind: SftpErrorKind::Protocol,
                message: format!(
                    "the server answered a read of {asked} bytes with {}",
                    data.len()
                ),
            })?;
        debug_assert_eq!(at, delivered, "answers are delivered in file order");
        delivered = at + u64::from(got);
        plan.answered(at, asked, got);
        if got < asked {
            // the rest of this request comes before anything after it
            inflight.push_front(request(sftp, handle, delivered, asked - got));
        }
        if tx.send(Ok(Some(Bytes::from(data)))).await.is_err() {
            return Ok(()); // the reader was dropped
        }
    }
}

#[cfg(test)]
#[path = "sftp_read_tests.rs"]
mod tests;
