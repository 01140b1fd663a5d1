//! Streaming an archive: a blocking thread writes it into a bounded channel, so at most a few
//! chunks are ever held in memory whatever the project's size, and a slow consumer (the
//! upload) paces the reading of files. Dropping the stream stops the thread at its next write.
//!
//! The channel ([`channel`]: a blocking [`ChannelWriter`] and the [`TarStream`] reading it) also
//! carries the tars of chosen files that `transfer` writes for a sync.

use std::io::{self, Write};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::Stream;
use tokio::sync::mpsc;
use tokio_util::io::StreamReader;

use super::archive::{self, Plan};
use super::types::Compression;

/// Bytes per chunk handed to the consumer.
pub(crate) const CHUNK: usize = 64 * 1024;
/// Chunks the channel holds before the writer waits.
pub(crate) const CAPACITY: usize = 4;

/// The archive as a stream of byte chunks (see [`Snapshot::tar_stream`]).
///
/// Its length is not known in advance (use [`Snapshot::exact_size`] for an uncompressed tar).
/// A failure — a file that changed while being read, say — arrives as the stream's last item,
/// an `Err` wrapping the crate's [`Error`](crate::Error) (reach it with
/// `io::Error::get_ref()` and `downcast_ref`); an upload must treat it as fatal.
///
/// [`Snapshot::tar_stream`]: super::Snapshot::tar_stream
/// [`Snapshot::exact_size`]: super::Snapshot::exact_size
#[derive(Debug)]
pub struct TarStream {
    rx: mpsc::Receiver<io::Result<Bytes>>,
    flow: Arc<Flow>,
    /// The writer thread; never joined in normal use (it ends on its own, or at its next
    /// write once the stream is dropped).
    #[cfg_attr(not(test), allow(dead_code))]
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Counters of bytes sent into and taken out of the channel.
#[derive(Debug, Default)]
pub(crate) struct Flow {
    produced: AtomicU64,
    consumed: AtomicU64,
    max_in_flight: AtomicU64,
}

/// A bounded channel of archive chunks: a sender for the producer's final error, the blocking
/// writer a producer thread fills, and the stream that reads them in order.
pub(crate) fn channel() -> (mpsc::Sender<io::Result<Bytes>>, ChannelWriter, TarStream) {
    let (tx, rx) = mpsc::channel(CAPACITY);
    let flow = Arc::new(Flow::default());
    let writer = ChannelWriter {
        tx: tx.clone(),
        buf: BytesMut::with_capacity(CHUNK),
        flow: Arc::clone(&flow),
    };
    (
        tx,
        writer,
        TarStream {
            rx,
            flow,
            thread: None,
        },
    )
}

impl TarStream {
    /// Start writing the archive of `plan` on a new thread.
    pub(crate) fn spawn(plan: Arc<Plan>, compression: Compression) -> Self {
        let (tx, writer, mut stream) = channel();
        let spawned = std::thread::Builder::new()
            .name("snapshot-tar".into())
            .spawn(move || {
                let result = archive::write(&plan, writer, compression).and_then(|mut writer| {
                    writer
                        .finish()
                        .map_err(|e| crate::Error::io("writing the archive", e))
                });
                if let Err(e) = result {
                    // nobody listening any more is not worth reporting
                    let _ = tx.blocking_send(Err(io::Error::other(e)));
                }
            });
        match spawned {
            Ok(thread) => {
                stream.thread = Some(thread);
                stream
            }
            Err(e) => {
                // the closure (and its sender) is gone; report through a fresh one-item channel
                let (tx, rx) = mpsc::channel(1);
                let _ = tx.try_send(Err(io::Error::other(crate::Error::io(
                    "cannot start the archive thread",
                    e,
                ))));
                TarStream {
                    rx,
                    flow: stream.flow,
                    thread: None,
                }
            }
        }
    }

    /// The stream as an [`AsyncRead`](tokio::io::AsyncRead).
    pub fn into_async_read(self) -> StreamReader<TarStream, Bytes> {
        StreamReader::new(self)
    }

    #[cfg(test)]
    pub(crate) fn flow(&self) -> Arc<Flow> {
        Arc::clone(&self.flow)
    }

    /// Drop the receiving side and wait for the writer thread to end.
    #[cfg(test)]
    pub(crate) fn drop_and_join(mut self) {
        let thread = self.thread.take();
        drop(self);
        if let Some(thread) = thread {
            thread.join().expect("the writer thread ends cleanly");
        }
    }
}

impl Stream for TarStream {
    type Item = io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.rx.poll_recv(cx);
        if let Poll::Ready(Some(Ok(chunk))) = &polled {
            self.flow
                .consumed
                .fetch_add(chunk.len() as u64, Ordering::SeqCst);
        }
        polled
    }
}

#[cfg(test)]
impl Flow {
    pub(crate) fn max_in_flight(&self) -> u64 {
        self.max_in_flight.load(Ordering::SeqCst)
    }

    pub(crate) fn produced(&self) -> u64 {
        self.produced.load(Ordering::SeqCst)
    }
}

/// `Write` into the channel in chunks of [`CHUNK`] bytes, blocking while the channel is full.
/// Chunks go out when full; [`ChannelWriter::finish`] sends the last, partial one.
pub(crate) struct ChannelWriter {
    tx: mpsc::Sender<io::Result<Bytes>>,
    buf: BytesMut,
    flow: Arc<Flow>,
}

impl ChannelWriter {
    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buf, BytesMut::with_capacity(CHUNK)).freeze();
        let len = chunk.len() as u64;
        self.tx.blocking_send(Ok(chunk)).map_err(|_| {
            io::Error::new(io::ErrorKind::BrokenPipe, "the archive stream was dropped")
        })?;
        let produced = self.flow.produced.fetch_add(len, Ordering::SeqCst) + len;
        let in_flight = produced.saturating_sub(self.flow.consumed.load(Ordering::SeqCst));
        self.flow
            .max_in_flight
            .fetch_max(in_flight, Ordering::SeqCst);
        Ok(())
    }

    /// Send the last, partial chunk.
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        self.send()
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = CHUNK - self.buf.len();
        let n = data.len().min(room);
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == CHUNK {
            self.send()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        // chunks go out when full or at the end; a flush alone does not make the stream chattier
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{Snapshot, SnapshotOptions};
    use futures::StreamExt;

    /// However slow the consumer, the producer never gets more than the channel's capacity
    /// ahead: memory stays bounded by `(CAPACITY + 1) * CHUNK`, not by the archive's size.
    #[test]
    fn a_slow_consumer_bounds_what_is_in_flight() {
        let tmp = tempfile::TempDir::new().expect("tmp");
        let dir = tmp.path().join("p");
        for i in 0..2_000 {
            let path = dir.join(format!("d{}/f{i}.bin", i % 20));
            std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
            std::fs::write(path, vec![(i % 256) as u8; 4096]).expect("file");
        }
        let options = SnapshotOptions {
            home_dir: Some(tmp.path().join("home")),
            ..SnapshotOptions::default()
        };
        let snapshot = Snapshot::scan(&dir, &options).expect("scan");
        let size = snapshot.exact_size();
        assert!(
            size > 20 * (CAPACITY * CHUNK) as u64,
            "the archive dwarfs the channel"
        );

        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let stream = snapshot.tar_stream(Compression::None);
        let flow = stream.flow();
        let received = runtime.block_on(async move {
            let mut stream = stream;
            let mut received = 0u64;
            while let Some(chunk) = stream.next().await {
                received += chunk.expect("chunk").len() as u64;
                // give the producer every chance to run ahead
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            received
        });
        assert_eq!(received, size);
        assert_eq!(flow.produced(), size);
        // The channel holds CAPACITY chunks; the producer may hold one more that it is waiting
        // to hand over, so that is the most that can exist at once.
        let bound = ((CAPACITY + 1) * CHUNK) as u64;
        assert!(
            flow.max_in_flight() <= bound,
            "in flight {} > {bound}",
            flow.max_in_flight()
        );
        assert!(
            flow.max_in_flight() >= CHUNK as u64,
            "the producer did run ahead"
        );
    }

    #[test]
    fn dropping_the_stream_stops_the_writer() {
        let tmp = tempfile::TempDir::new().expect("tmp");
        let dir = tmp.path().join("p");
        std::fs::create_dir_all(&dir).expect("dir");
        for i in 0..50 {
            std::fs::write(dir.join(format!("f{i}")), vec![1u8; 100_000]).expect("file");
        }
        let options = SnapshotOptions {
            home_dir: Some(tmp.path().join("home")),
            ..SnapshotOptions::default()
        };
        let snapshot = Snapshot::scan(&dir, &options).expect("scan");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let mut stream = snapshot.tar_stream(Compression::None);
        let flow = stream.flow();
        runtime.block_on(async {
            stream.next().await.expect("a first chunk").expect("ok");
        });
        stream.drop_and_join();
        // the writer's next send failed and it ended without writing the rest
        assert!(
            flow.produced() <= ((CAPACITY + 1) * CHUNK) as u64,
            "produced {}",
            flow.produced()
        );
        assert!(flow.produced() < snapshot.exact_size());
    }
}
