//! The embedded sshd of one sandbox: a listener on `0.0.0.0:22` inside the sandbox's
//! network namespace (so `/tunnel/22`, the gateway's forward and the guest's own
//! `/proc/net/tcp` all see it), an ed25519 host key kept for the sandbox's lifetime, and a
//! russh server per accepted connection.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use russh::keys::PublicKey;
use russh::server::Config;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::gate::Gated;
use super::session::GuestSession;
use crate::process::netns;
use crate::sandbox::SandboxRef;
use crate::ssh_common::{generate_host_key, server_config};

/// The guest's SSH port.
pub const GUEST_SSH_PORT: u16 = 22;

/// Binds `0.0.0.0:22` from a short-lived thread that joined `ns` (the socket stays in the
/// namespace it was created in).
fn bind_in_namespace(ns: &OwnedFd) -> std::io::Result<std::net::TcpListener> {
    let ns = ns.try_clone()?;
    std::thread::Builder::new()
        .name("guest-sshd-bind".into())
        .spawn(move || {
            netns::enter_in_child(ns.as_raw_fd())?;
            let listener =
                std::net::TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], GUEST_SSH_PORT)))?;
            listener.set_nonblocking(true)?;
            Ok(listener)
        })?
        .join()
        .map_err(|_| std::io::Error::other("guest sshd bind thread panicked"))?
}

/// What connections are served with; replaced by a restart.
struct Current {
    host_key: PublicKey,
    config: Arc<Config>,
    /// Cancelled to end every session of this generation (restart, stop).
    sessions: CancellationToken,
}

/// A running embedded sshd.
pub struct GuestServer {
    current: Mutex<Current>,
    frozen: watch::Sender<bool>,
    /// Ends the accept loop and every session (sandbox destroyed, emulator shut down).
    stop: CancellationToken,
}

impl GuestServer {
    /// Starts listening on port 22 of `sandbox`'s network namespace. Stops when `stop` is
    /// cancelled.
    pub fn start(
        sandbox: SandboxRef,
        stop: CancellationToken,
    ) -> std::io::Result<Arc<GuestServer>> {
        let ns = sandbox.runtime().netns().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "the sandbox has no network namespace of its own",
            )
        })?;
        let listener = TcpListener::from_std(bind_in_namespace(ns)?)?;
        let key = generate_host_key();
        let current = Current {
            host_key: key.public_key().clone(),
            config: server_config(key),
            sessions: stop.child_token(),
        };
        let (frozen, _) = watch::channel(false);
        let server = Arc::new(GuestServer {
            current: Mutex::new(current),
            frozen,
            stop,
        });
        tokio::spawn(accept_loop(Arc::clone(&server), listener, sandbox));
        Ok(server)
    }

    fn current(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The host key clients see.
    pub fn host_key(&self) -> PublicKey {
        self.current().host_key.clone()
    }

    /// Pause (`true`) or resume (`false`): a frozen server reads and writes nothing.
    pub fn set_frozen(&self, frozen: bool) {
        self.frozen.send_replace(frozen);
    }

    /// Ends every session, as restarting sshd does; with `new_host_key` the server comes
    /// back with a fresh host key (the listener stays bound throughout).
    pub fn restart(&self, new_host_key: bool) -> PublicKey {
        let mut current = self.current();
        current.sessions.cancel();
        current.sessions = self.stop.child_token();
        if new_host_key {
            let key = generate_host_key();
            current.host_key = key.public_key().clone();
            current.config = server_config(key);
        }
        current.host_key.clone()
    }

    /// Closes the listener and every session.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Whether the server still listens.
    pub fn is_running(&self) -> bool {
        !self.stop.is_cancelled()
    }
}

async fn accept_loop(server: Arc<GuestServer>, listener: TcpListener, sandbox: SandboxRef) {
    let stop = server.stop.clone();
    let mut frozen = server.frozen.subscribe();
    loop {
        // A paused sandbox accepts nothing: connections wait in the backlog, as with a
        // frozen VM.
        tokio::select! {
            _ = stop.cancelled() => break,
            open = frozen.wait_for(|f| !*f) => if open.is_err() { break },
        }
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(err) => {
                tracing::debug!(sandbox = %sandbox.id, "guest sshd: accept failed: {err}");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let (config, sessions) = {
            let current = server.current();
            (current.config.clone(), current.sessions.clone())
        };
        let stream = Gated::new(tcp, server.frozen.subscribe(), sessions.clone());
        let handler = GuestSession::new(sandbox.clone(), sessions.clone());
        let id = sandbox.id.clone();
        tokio::spawn(async move {
            let session = tokio::select! {
                session = russh::server::run_stream(config, stream, handler) => session,
                _ = sessions.cancelled() => return,
            };
            let session = match session {
                Ok(session) => session,
                Err(err) => {
                    tracing::debug!(sandbox = %id, "guest sshd: handshake failed: {err:?}");
                    return;
                }
            };
            tokio::select! {
                ended = session => {
                    if let Err(err) = ended {
                        tracing::debug!(sandbox = %id, "guest sshd: session ended: {err:?}");
                    }
                }
                _ = sessions.cancelled() => {}
            }
        });
    }
    tracing::debug!(sandbox = %sandbox.id, "guest sshd stopped");
}
