//! [`SshSession`]: one SSH connection to a sandbox, shared by every clone and reconnected
//! transparently when it drops.
//!
//! Channels are multiplexed over the connection. Before a channel is opened the connection
//! is checked (cheaply: is russh's session task still alive?); if opening fails because the
//! connection died in the meantime, it is reconnected and the open is tried once more.
//! Nothing is retried once a command was sent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use russh::client::{Handle, Msg};
use russh::Channel;
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};

use crate::api::sandboxes::Sandbox;
use crate::error::{Error, Result};

use super::connect::{self, HostKeyCheck};
use super::error::SshError;
use super::files::SshFiles;
use super::guest;
use super::keys::SandboxKey;
use super::known_hosts::KnownHosts;
use super::options::{SshOptions, SshRoute};
use super::sftp::SftpChannel;

/// How long opening a channel may take before the connection is presumed dead.
const CHANNEL_OPEN_TIMEOUT: Duration = Duration::from_secs(20);

/// A live connection.
pub(crate) struct Connection {
    pub(crate) guest: Handle<HostKeyCheck>,
    /// Keeps the gateway session (which carries `guest`) open.
    gateway: Option<Handle<HostKeyCheck>>,
    generation: u64,
    pub(crate) sftp: Mutex<Option<Arc<SftpChannel>>>,
    /// One clean-up command at a time per connection, and the tokens waiting for it (see
    /// `reaper`).
    pub(crate) reaper: Mutex<()>,
    pub(crate) reap_queue: std::sync::Mutex<Vec<String>>,
}

impl Connection {
    fn is_alive(&self) -> bool {
        !self.guest.is_closed() && self.gateway.as_ref().is_none_or(|g| !g.is_closed())
    }
}

struct State {
    conn: Option<Arc<Connection>>,
    guest_ready: bool,
    generation: u64,
}

struct Inner {
    sandbox: Sandbox,
    options: SshOptions,
    key: SandboxKey,
    known_hosts: KnownHosts,
    state: Mutex<State>,
    channels: Arc<Semaphore>,
    connects: AtomicU64,
}

/// An SSH connection to one sandbox's guest sshd. Cheap to clone; clones share the
/// connection. See the [module docs](super) for an example.
#[derive(Clone)]
pub struct SshSession {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SshSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshSession")
            .field("sandbox", &self.inner.sandbox.id())
            .field("user", &self.inner.options.user)
            .field("route", &self.inner.options.route)
            .field("connects", &self.connects())
            .finish()
    }
}

/// A channel with its slot and the connection it belongs to.
pub(crate) struct OpenChannel {
    pub(crate) channel: Channel<Msg>,
    pub(crate) slot: OwnedSemaphorePermit,
    pub(crate) conn: Arc<Connection>,
}

impl SshSession {
    /// A session to `sandbox` that connects on first use. Loads (or generates) the
    /// sandbox's key; nothing is sent yet.
    pub fn new(sandbox: &Sandbox, options: SshOptions) -> Result<Self> {
        guest::validate_user(&options.user)?;
        let files = match &options.files {
            Some(files) => files.clone(),
            None => SshFiles::default_location()?,
        };
        let key = SandboxKey::load_or_generate(&files, sandbox.id())?;
        let known_hosts = KnownHosts::new(files.known_hosts_path());
        let channels = Arc::new(Semaphore::new(options.max_channels));
        Ok(SshSession {
            inner: Arc::new(Inner {
                sandbox: sandbox.clone(),
                options,
                key,
                known_hosts,
                state: Mutex::new(State {
                    conn: None,
                    guest_ready: false,
                    generation: 0,
                }),
                channels,
                connects: AtomicU64::new(0),
            }),
        })
    }

    /// [`SshSession::new`] and connect right away, so setup errors (no sshd in the image, a
    /// changed host key, …) surface here.
    pub async fn connect(sandbox: &Sandbox, options: SshOptions) -> Result<Self> {
        let session = Self::new(sandbox, options)?;
        session.ensure_connected().await?;
        Ok(session)
    }

    /// The sandbox.
    pub fn sandbox(&self) -> &Sandbox {
        &self.inner.sandbox
    }

    /// The key this session authenticates with.
    pub fn key(&self) -> &SandboxKey {
        &self.inner.key
    }

    /// The known-hosts file host keys are pinned in.
    pub fn known_hosts(&self) -> &KnownHosts {
        &self.inner.known_hosts
    }

    /// The options.
    pub fn options(&self) -> &SshOptions {
        &self.inner.options
    }

    /// SSH connections made so far (1 after the first connect; +1 per reconnect).
    pub fn connects(&self) -> u64 {
        self.inner.connects.load(Ordering::Relaxed)
    }

    /// Whether a connection is open right now.
    pub async fn is_connected(&self) -> bool {
        let state = self.inner.state.lock().await;
        state.conn.as_ref().is_some_and(|c| c.is_alive())
    }

    /// Connect unless connected.
    pub async fn ensure_connected(&self) -> Result<()> {
        self.connection().await.map(|_| ())
    }

    /// Close the connection (the next call reconnects).
    pub async fn disconnect(&self) {
        let conn = self.inner.state.lock().await.conn.take();
        if let Some(conn) = conn {
            let _ = conn
                .guest
                .disconnect(russh::Disconnect::ByApplication, "", "en")
                .await;
            if let Some(gateway) = &conn.gateway {
                let _ = gateway
                    .disconnect(russh::Disconnect::ByApplication, "", "en")
                    .await;
            }
        }
    }

    /// The live connection, connecting (and on the first time preparing the guest) as needed.
    /// Concurrent callers wait for the same attempt.
    pub(crate) async fn connection(&self) -> Result<Arc<Connection>> {
        let mut state = self.inner.state.lock().await;
        if let Some(conn) = &state.conn {
            if conn.is_alive() {
                return Ok(conn.clone());
            }
            tracing::debug!(sandbox = %self.inner.sandbox.id(), "SSH connection dropped; reconnecting");
        }
        state.conn = None;
        let opts = &self.inner.options;
        if opts.prepare_guest && !state.guest_ready {
            self.prepare_guest().await?;
            state.guest_ready = true;
        }
        let established = match self.establish().await {
            // Nothing listens on port 22 any more (sshd died or the sandbox was resumed):
            // start it again and retry once.
            Err(err) if opts.prepare_guest && nothing_listening(&err) => {
                guest::prepare_sshd(&self.inner.sandbox, &opts.sshd_path, &opts.user).await?;
                self.establish().await?
            }
            other => other?,
        };
        state.generation += 1;
        self.inner.connects.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Connection {
            guest: established.guest,
            gateway: established.gateway,
            generation: state.generation,
            sftp: Mutex::new(None),
            reaper: Mutex::new(()),
            reap_queue: std::sync::Mutex::new(Vec::new()),
        });
        state.conn = Some(conn.clone());
        Ok(conn)
    }

    async fn establish(&self) -> Result<connect::Established> {
        let inner = &self.inner;
        connect::establish(
            &inner.sandbox,
            &inner.options,
            &inner.key,
            &inner.known_hosts,
        )
        .await
    }

    async fn prepare_guest(&self) -> Result<()> {
        let inner = &self.inner;
        let home = guest::home_of(&inner.options.user);
        match guest::ensure_registered(&inner.sandbox, &inner.key).await {
            Ok(_) => {}
            // A sandbox-scoped token may not manage keys; the tunnel route only needs the
            // guest's authorized_keys, the gateway needs the registration.
            Err(Error::Permission(api)) if inner.options.route == SshRoute::Tunnel => {
                tracing::debug!(sandbox = %inner.sandbox.id(), error = %api, "key not registered; going on over the tunnel");
            }
            Err(err) => return Err(err),
        }
        guest::ensure_authorized_key(&inner.sandbox, &home, &inner.key).await?;
        guest::prepare_sshd(
            &inner.sandbox,
            &inner.options.sshd_path,
            &inner.options.user,
        )
        .await
    }

    /// Forget `conn` if it is still the current connection.
    pub(crate) async fn invalidate(&self, conn: &Connection) {
        let mut state = self.inner.state.lock().await;
        if state
            .conn
            .as_ref()
            .is_some_and(|c| c.generation == conn.generation)
        {
            state.conn = None;
        }
    }

    /// Open a session channel (waiting for a free slot), reconnecting once if the
    /// connection turned out to be dead.
    pub(crate) async fn open_channel(&self) -> Result<OpenChannel> {
        let slot = self
            .inner
            .channels
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::Cancelled)?;
        let mut last = None;
        for _ in 0..2 {
            let conn = self.connection().await?;
            match open_session_channel(&conn.guest).await {
                Ok(channel) => {
                    return Ok(OpenChannel {
                        channel,
                        slot,
                        conn,
                    })
                }
                Err(err) if err.is_connection_lost() => {
                    tracing::debug!(sandbox = %self.inner.sandbox.id(), error = %err, "channel open failed; reconnecting");
                    self.invalidate(&conn).await;
                    last = Some(err);
                }
                Err(err) => return Err(err.into()),
            }
        }
        Err(last.map(Error::from).unwrap_or(Error::Cancelled))
    }
}

/// Open a session channel; a dead connection shows as [`SshError::Protocol`].
pub(crate) async fn open_session_channel(
    handle: &Handle<HostKeyCheck>,
) -> std::result::Result<Channel<Msg>, SshError> {
    match tokio::time::timeout(CHANNEL_OPEN_TIMEOUT, handle.channel_open_session()).await {
        Err(_) => Err(SshError::protocol(
            "opening a channel",
            format!("no answer within {CHANNEL_OPEN_TIMEOUT:?}"),
        )),
        Ok(Ok(channel)) => Ok(channel),
        Ok(Err(russh::Error::ChannelOpenFailure(reason))) => Err(SshError::ChannelRefused {
            kind: "session".to_string(),
            reason: format!("{reason:?}"),
        }),
        Ok(Err(e)) => Err(SshError::protocol("opening a channel", e)),
    }
}

/// Port 22 of the guest refused the connection: a 502 from the tunnel route, a refused
/// forward from the gateway.
fn nothing_listening(err: &Error) -> bool {
    matches!(err.status(), Some(502))
        || matches!(err.ssh(), Some(SshError::ChannelRefused { kind, .. }) if kind.starts_with("direct-tcpip"))
}
