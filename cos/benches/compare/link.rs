//! A modelled network link for the WAN rows: a TCP relay on loopback that holds every byte for
//! a fixed one-way delay in each direction before passing it on. Whatever crosses it (TCP
//! payload, TLS handshakes, HTTP requests and answers, upgrade streams) pays the delay, and the
//! machine's own loopback is left as it is.
//!
//! The kernel completes a TCP handshake to the relay at once, so the relay adds the handshake's
//! round trip itself: nothing crosses a new connection, in either direction, before one RTT
//! after it was accepted (then the one-way delay applies on top). A client that connects and
//! writes at once thus sees its first bytes arrive 1.5 RTT after `connect`, as on a real link.
//!
//! The link has no bandwidth limit and drops nothing: it models latency only. Timers are
//! tokio's (millisecond resolution), so a hop may take up to a millisecond or so longer than
//! asked.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// Bytes read per chunk.
const CHUNK: usize = 64 * 1024;
/// Chunks that may wait in one direction of one connection (the relay stops reading beyond).
const QUEUED_CHUNKS: usize = 1024;

/// What crossed the link so far.
#[derive(Debug, Default)]
pub struct LinkCounters {
    connections: AtomicU64,
    upstream_failures: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
}

/// A running delay link: connections to [`DelayLink::addr`] are relayed to the upstream.
pub struct DelayLink {
    addr: SocketAddr,
    one_way: Duration,
    counters: Arc<LinkCounters>,
    task: JoinHandle<()>,
}

impl DelayLink {
    /// Listen on `listen` (port 0 for any) and relay every connection to `upstream`, holding
    /// bytes `one_way` in each direction.
    pub async fn start(
        listen: SocketAddr,
        upstream: SocketAddr,
        one_way: Duration,
    ) -> io::Result<DelayLink> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let counters = Arc::new(LinkCounters::default());
        let task = tokio::spawn(accept_loop(
            listener,
            upstream,
            one_way,
            Arc::clone(&counters),
        ));
        Ok(DelayLink {
            addr,
            one_way,
            counters,
            task,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The modelled round-trip time (twice the one-way delay).
    pub fn rtt(&self) -> Duration {
        self.one_way * 2
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.counters.connections.load(Ordering::Relaxed)
    }

    /// Accepted connections whose upstream could not be reached (closed at once).
    pub fn upstream_failures(&self) -> u64 {
        self.counters.upstream_failures.load(Ordering::Relaxed)
    }

    /// Bytes delivered towards the upstream.
    pub fn bytes_up(&self) -> u64 {
        self.counters.bytes_up.load(Ordering::Relaxed)
    }

    /// Bytes delivered towards the clients.
    pub fn bytes_down(&self) -> u64 {
        self.counters.bytes_down.load(Ordering::Relaxed)
    }

    /// Stop listening and drop every relayed connection.
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for DelayLink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    one_way: Duration,
    counters: Arc<LinkCounters>,
) {
    // Dropping the set (when this task is aborted) aborts every connection with it.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else { continue };
                counters.connections.fetch_add(1, Ordering::Relaxed);
                let opened_at = Instant::now();
                connections.spawn(relay_connection(client, upstream, opened_at, one_way, Arc::clone(&counters)));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn relay_connection(
    client: TcpStream,
    upstream: SocketAddr,
    opened_at: Instant,
    one_way: Duration,
    counters: Arc<LinkCounters>,
) {
    let server = match TcpStream::connect(upstream).await {
        Ok(server) => server,
        Err(_) => {
            counters.upstream_failures.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    // The handshake's round trip: nothing crosses before one RTT after the accept.
    let open_from = opened_at + one_way * 2;
    let (client_rd, client_wr) = client.into_split();
    let (server_rd, server_wr) = server.into_split();
    let up = relay(client_rd, server_wr, open_from, one_way, &counters.bytes_up);
    let down = relay(
        server_rd,
        client_wr,
        open_from,
        one_way,
        &counters.bytes_down,
    );
    tokio::join!(up, down);
}

/// One direction: read as bytes come, deliver each chunk `one_way` after it was read (never
/// before `open_from + one_way`), then pass the end of the stream on the same way.
async fn relay(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    open_from: Instant,
    one_way: Duration,
    delivered: &AtomicU64,
) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Option<Bytes>)>(QUEUED_CHUNKS);
    let due = move || Instant::now().max(open_from) + one_way;
    let reader = async move {
        let mut buf = BytesMut::with_capacity(CHUNK);
        loop {
            buf.reserve(CHUNK);
            match from.read_buf(&mut buf).await {
                Ok(0) | Err(_) => {
                    let _ = tx.send((due(), None)).await;
                    return;
                }
                Ok(_) => {
                    if tx.send((due(), Some(buf.split().freeze()))).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    let writer = async move {
        while let Some((at, chunk)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            match chunk {
                Some(chunk) => {
                    if to.write_all(&chunk).await.is_err() {
                        return;
                    }
                    delivered.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                }
                None => {
                    let _ = to.shutdown().await;
                    return;
                }
            }
        }
    };
    tokio::join!(reader, writer);
}
