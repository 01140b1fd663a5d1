//! Port forwarding to a sandbox (E33): [`crate::Sandbox::tunnel`] opens one raw connection;
//! [`TunnelListener`] serves a local port, one upgrade per accepted connection.
//!
//! Each forwarded connection copies both ways with half-close: when one side reaches EOF the
//! other side's write half is shut down, and the connection is finished only when both
//! directions are done (SSH handshakes interleave, so closing early would cut them).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::api::endpoints as ep;
use crate::api::sandboxes::Sandbox;
use crate::error::{Error, Result};
use crate::transport::upgrade::{self, Upgraded, TCP_TUNNEL};
use crate::transport::Call;
use crate::validate;

/// E33: one upgraded connection to `port` in the sandbox.
pub(crate) async fn open(sandbox: &Sandbox, port: u16) -> Result<Upgraded> {
    let port = validate::port("port", u32::from(port))?;
    let call = Call::new(&ep::OPEN_TUNNEL)
        .param(sandbox.id())
        .param(port.to_string());
    upgrade::upgrade(&sandbox.client.transport, call, TCP_TUNNEL).await
}

/// Counters of a listener.
#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicU64,
    failed: AtomicU64,
    finished: AtomicU64,
}

/// A local TCP port forwarded to a port inside a sandbox.
///
/// ```no_run
/// # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
/// use createos_sandbox::tunnel::TunnelListener;
/// let listener = TunnelListener::bind(&sandbox, 8080, None).await?;
/// println!("http://{}/ reaches the sandbox's port 8080", listener.local_addr());
/// let running = listener.spawn(); // forwards until `running` is dropped or stopped
/// # drop(running);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TunnelListener {
    sandbox: Sandbox,
    remote_port: u16,
    listener: TcpListener,
    local_addr: SocketAddr,
    cancel: CancellationToken,
    counters: Arc<Counters>,
}

impl TunnelListener {
    /// Listen on `local_addr` (default `127.0.0.1:0`, an ephemeral port) for connections to
    /// forward to `remote_port` in the sandbox. Nothing is sent to the server until a
    /// connection arrives.
    pub async fn bind(
        sandbox: &Sandbox,
        remote_port: u16,
        local_addr: Option<SocketAddr>,
    ) -> Result<Self> {
        let remote_port = validate::port("remote_port", u32::from(remote_port))?;
        let addr = local_addr.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| Error::io(format!("listening on {addr}"), e))?;
        let local_addr = listener
            .local_addr()
            .map_err(|e| Error::io("reading the listening address", e))?;
        Ok(TunnelListener {
            sandbox: sandbox.clone(),
            remote_port,
            listener,
            local_addr,
            cancel: CancellationToken::new(),
            counters: Arc::default(),
        })
    }

    /// The address connections are accepted on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The sandbox port connections go to.
    pub fn remote_port(&self) -> u16 {
        self.remote_port
    }

    /// A token that stops [`Self::run`] (and every forwarded connection) when cancelled.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Accept and forward until cancelled (or the future is dropped); in-flight connections
    /// are closed when it returns.
    pub async fn run(self) -> Result<()> {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                _ = self.cancel.cancelled() => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                accepted = self.listener.accept() => match accepted {
                    Ok((local, peer)) => {
                        self.counters.accepted.fetch_add(1, Ordering::Relaxed);
                        let sandbox = self.sandbox.clone();
                        let counters = self.counters.clone();
                        let port = self.remote_port;
                        connections.spawn(async move {
                            match forward(&sandbox, port, local).await {
                                Ok(()) => counters.finished.fetch_add(1, Ordering::Relaxed),
                                Err(err) => {
                                    tracing::warn!(sandbox = %sandbox.id(), port, %peer, error = %err, "tunnel connection failed");
                                    counters.failed.fetch_add(1, Ordering::Relaxed)
                                }
                            };
                        });
                    }
                    Err(err) => {
                        // Usually out of descriptors: wait a little instead of spinning.
                        tracing::warn!(error = %err, "accepting a tunnel connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
            }
        }
        connections.shutdown().await;
        Ok(())
    }

    /// Run in a background task; it stops when the returned handle is dropped or stopped.
    pub fn spawn(self) -> RunningTunnel {
        let local_addr = self.local_addr;
        let cancel = self.cancel.clone();
        let counters = self.counters.clone();
        let task = tokio::spawn(self.run());
        RunningTunnel {
            local_addr,
            cancel,
            counters,
            task: Some(task),
        }
    }
}

/// One forwarded connection: upgrade, then copy both ways with half-close.
async fn forward(sandbox: &Sandbox, port: u16, mut local: TcpStream) -> Result<()> {
    let _ = local.set_nodelay(true);
    let mut remote = open(sandbox, port).await?;
    tokio::io::copy_bidirectional(&mut local, &mut remote)
        .await
        .map_err(|e| Error::io(format!("forwarding to port {port}"), e))?;
    Ok(())
}

/// A [`TunnelListener`] running in a background task. Dropping it stops the listener and
/// closes its connections.
#[derive(Debug)]
pub struct RunningTunnel {
    local_addr: SocketAddr,
    cancel: CancellationToken,
    counters: Arc<Counters>,
    task: Option<JoinHandle<Result<()>>>,
}

impl RunningTunnel {
    /// The address connections are accepted on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.counters.accepted.load(Ordering::Relaxed)
    }

    /// Connections whose upgrade or copy failed.
    pub fn failed(&self) -> u64 {
        self.counters.failed.load(Ordering::Relaxed)
    }

    /// Connections that completed both directions.
    pub fn finished(&self) -> u64 {
        self.counters.finished.load(Ordering::Relaxed)
    }

    /// The token that stops this listener (also cancelled when the handle is dropped).
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Stop accepting, close every forwarded connection, and wait for the task to end.
    /// Idempotent; the counters stay readable afterwards.
    pub async fn stop(&mut self) -> Result<()> {
        self.cancel.cancel();
        match self.task.take() {
            Some(task) => task
                .await
                .map_err(|e| Error::io("tunnel task", std::io::Error::other(e)))?,
            None => Ok(()),
        }
    }
}

impl Drop for RunningTunnel {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
