//! [`ProgressReader`]: any `AsyncRead` that reports how much has passed through it.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

use super::ProgressFn;

/// Wraps a reader and calls `progress(bytes so far, total)` after every read that returned
/// data (nothing is called when `progress` is `None`).
///
/// ```no_run
/// # async fn demo(ssh: createos_sandbox::ssh::SshSession) -> createos_sandbox::Result<()> {
/// use std::sync::Arc;
/// use createos_sandbox::api::files::ProgressReader;
/// use createos_sandbox::ssh::WriteOptions;
/// let file = tokio::fs::File::open("big.iso").await?;
/// let size = file.metadata().await?.len();
/// let report = Arc::new(|done: u64, total: Option<u64>| eprintln!("{done}/{total:?}"));
/// ssh.write_file("/root/big.iso", ProgressReader::new(file, Some(size), Some(report)), WriteOptions::new()).await?;
/// # Ok(()) }
/// ```
pub struct ProgressReader<R> {
    inner: R,
    done: u64,
    total: Option<u64>,
    progress: Option<ProgressFn>,
}

impl<R> ProgressReader<R> {
    /// Report reads of `inner` against `total` (when known).
    pub fn new(inner: R, total: Option<u64>, progress: Option<ProgressFn>) -> Self {
        ProgressReader {
            inner,
            done: 0,
            total,
            progress,
        }
    }

    /// Bytes read so far.
    pub fn done(&self) -> u64 {
        self.done
    }
}

impl<R> std::fmt::Debug for ProgressReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressReader")
            .field("done", &self.done)
            .field("total", &self.total)
            .finish_non_exhaustive()
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for ProgressReader<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let read = (buf.filled().len() - before) as u64;
        if read > 0 {
            self.done += read;
            if let Some(report) = &self.progress {
                report(self.done, self.total);
            }
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::io::AsyncReadExt;

    use super::*;

    #[tokio::test]
    async fn every_read_is_reported_with_the_running_total() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let report: ProgressFn =
            Arc::new(move |done, total| sink.lock().unwrap().push((done, total)));
        let data = vec![7u8; 10_000];
        let mut reader = ProgressReader::new(&data[..], Some(10_000), Some(report));
        let mut chunk = [0u8; 4096];
        let mut got = 0;
        loop {
            let n = reader.read(&mut chunk).await.unwrap();
            if n == 0 {
                break;
            }
            got += n;
        }
        assert_eq!(got, 10_000);
        assert_eq!(reader.done(), 10_000);
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![
                (4096, Some(10_000)),
                (8192, Some(10_000)),
                (10_000, Some(10_000))
            ]
        );
    }
}
