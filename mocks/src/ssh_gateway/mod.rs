//! The SSH gateway (`gateway.sb.createos.sh:2222` in production): clients log in as user =
//! sandbox id with a key registered on that sandbox (`ssh_pubkeys`), and may then open only
//! `direct-tcpip` channels to `127.0.0.1:22`, which reach the sandbox's own port 22 (inside
//! its network namespace). Sessions, other targets and every other request are refused.
//!
//! Enabled by `MockConfig::ssh_gateway` / `--ssh-gateway`; the address is
//! `MockHandle::ssh_gateway_addr()`.

mod handler;

use std::net::SocketAddr;
use std::time::Duration;

use russh::keys::PublicKey;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::ssh_common::{generate_host_key, server_config};
use crate::state::AppState;

pub use handler::GatewayHandler;

/// A running gateway.
pub struct SshGateway {
    addr: SocketAddr,
    host_key: PublicKey,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for SshGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshGateway")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl SshGateway {
    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its host key (fresh per start).
    pub fn host_key(&self) -> &PublicKey {
        &self.host_key
    }
}

impl Drop for SshGateway {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Bind `listen` and serve until the emulator shuts down.
pub async fn start(state: AppState, listen: SocketAddr) -> anyhow::Result<SshGateway> {
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let private = generate_host_key();
    let host_key = private.public_key().clone();
    let config = server_config(private);
    let shutdown = state.shutdown.clone();
    let task = tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = shutdown.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            let (tcp, peer) = match accepted {
                Ok(pair) => pair,
                Err(err) => {
                    tracing::warn!("ssh gateway: accept failed: {err}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let handler = GatewayHandler::new(state.clone(), peer);
            let config = config.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                let session = match russh::server::run_stream(config, tcp, handler).await {
                    Ok(session) => session,
                    Err(err) => {
                        tracing::debug!(%peer, "ssh gateway: handshake failed: {err:?}");
                        return;
                    }
                };
                tokio::select! {
                    ended = session => {
                        if let Err(err) = ended {
                            tracing::debug!(%peer, "ssh gateway: session ended: {err:?}");
                        }
                    }
                    _ = shutdown.cancelled() => {}
                }
            });
        }
    });
    tracing::info!(%addr, "ssh gateway listening");
    Ok(SshGateway {
        addr,
        host_key,
        task,
    })
}
