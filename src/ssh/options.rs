//! [`SshOptions`]: how to reach a guest and as whom.

use std::time::Duration;

use super::files::SshFiles;
use super::guest::DEFAULT_SSHD_PATH;

/// The production SSH gateway (`--sandbox-gateway` of the CLI).
pub const DEFAULT_GATEWAY_HOST: &str = "gateway.sb.createos.sh";
/// Its port.
pub const DEFAULT_GATEWAY_PORT: u16 = 2222;

/// Which path the SSH bytes take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SshRoute {
    /// A `/tunnel/22` upgrade through the control plane (the default; no extra port needed).
    Tunnel,
    /// The SSH gateway: an outer session as user = sandbox id, then `direct-tcpip` to the
    /// guest's `127.0.0.1:22`.
    Gateway {
        /// Gateway host name or address.
        host: String,
        /// Gateway port.
        port: u16,
    },
}

/// How an [`super::SshSession`] connects.
///
/// ```
/// use std::time::Duration;
/// use createos_sandbox::ssh::{SshFiles, SshOptions};
///
/// let options = SshOptions::new()
///     .files(SshFiles::at("/tmp/cos-ssh-demo"))
///     .connect_timeout(Duration::from_secs(20));
/// assert_eq!(options.user_name(), "root");
/// ```
#[derive(Clone, Debug)]
pub struct SshOptions {
    pub(crate) user: String,
    pub(crate) route: SshRoute,
    pub(crate) files: Option<SshFiles>,
    pub(crate) sshd_path: String,
    pub(crate) prepare_guest: bool,
    pub(crate) connect_timeout: Duration,
    pub(crate) keepalive: Option<Duration>,
    pub(crate) max_channels: usize,
}

impl Default for SshOptions {
    fn default() -> Self {
        SshOptions {
            user: "root".to_string(),
            route: SshRoute::Tunnel,
            files: None,
            sshd_path: DEFAULT_SSHD_PATH.to_string(),
            prepare_guest: true,
            connect_timeout: Duration::from_secs(60),
            keepalive: Some(Duration::from_secs(15)),
            // OpenSSH allows 10 sessions per connection (MaxSessions); one is the SFTP channel.
            max_channels: 8,
        }
    }
}

impl SshOptions {
    /// Root over the tunnel, keys under [`SshFiles::default_location`], guest prepared on the
    /// first connect.
    pub fn new() -> Self {
        Self::default()
    }

    /// Log in to the guest as `user` (default `root`); the key goes to its
    /// `~/.ssh/authorized_keys` (`/root` or `/home/<user>`).
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = user.into();
        self
    }

    /// Go through an SSH gateway instead of the control-plane tunnel.
    pub fn via_gateway(mut self, host: impl Into<String>, port: u16) -> Self {
        self.route = SshRoute::Gateway {
            host: host.into(),
            port,
        };
        self
    }

    /// Go through the production gateway (`gateway.sb.createos.sh:2222`).
    pub fn via_default_gateway(self) -> Self {
        self.via_gateway(DEFAULT_GATEWAY_HOST, DEFAULT_GATEWAY_PORT)
    }

    /// Where keys and pinned host keys live (default: [`SshFiles::default_location`]).
    pub fn files(mut self, files: SshFiles) -> Self {
        self.files = Some(files);
        self
    }

    /// The guest's sshd binary (default `/usr/sbin/sshd`).
    pub fn sshd_path(mut self, path: impl Into<String>) -> Self {
        self.sshd_path = path.into();
        self
    }

    /// Whether the first connect registers the key, fixes `authorized_keys` and starts sshd
    /// through the exec API (default true). Turn it off when the guest is already set up.
    pub fn prepare_guest(mut self, on: bool) -> Self {
        self.prepare_guest = on;
        self
    }

    /// Upper bound of one connection attempt, handshake and authentication included
    /// (default 60 s).
    pub fn connect_timeout(mut self, limit: Duration) -> Self {
        self.connect_timeout = limit;
        self
    }

    /// Keepalive interval; three unanswered keepalives close the connection (default 15 s).
    pub fn keepalive(mut self, every: Option<Duration>) -> Self {
        self.keepalive = every;
        self
    }

    /// Command channels open at once on one connection (default 8, at least 1); further
    /// callers wait for a free slot.
    pub fn max_channels(mut self, n: usize) -> Self {
        self.max_channels = n.max(1);
        self
    }

    /// The guest user.
    pub fn user_name(&self) -> &str {
        &self.user
    }

    /// The route.
    pub fn route(&self) -> &SshRoute {
        &self.route
    }
}
