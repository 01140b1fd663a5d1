//! One connection to a sandbox's embedded sshd: public-key authentication against the
//! user's `~/.ssh/authorized_keys` inside the sandbox (read at each attempt, as sshd does),
//! session channels (`channel.rs`) and `direct-tcpip` to the sandbox's own loopback.

use russh::keys::PublicKey;
use russh::server::{Auth, ChannelOpenHandle, Handler, Msg, PublicKeyOffer, Session, VerifiedPublicKey};
use russh::{Channel, ChannelOpenFailure};
use tokio_util::sync::CancellationToken;

use super::guest_fs::GuestFs;
use crate::process::netns;
use crate::sandbox::SandboxRef;

/// The only user the emulated guest has (every sandbox process runs as root).
const GUEST_USER: &str = "root";
const GUEST_HOME: &str = "/root";
/// authorized_keys larger than this is not read (sshd has no such file in practice).
const MAX_AUTHORIZED_KEYS: u64 = 1 << 20;

/// State of one client connection.
pub struct GuestSession {
    sandbox: SandboxRef,
    /// Cancelled when the server stops (sandbox destroyed or sshd restarted).
    stop: CancellationToken,
}

impl GuestSession {
    pub fn new(sandbox: SandboxRef, stop: CancellationToken) -> Self {
        GuestSession { sandbox, stop }
    }

    /// Whether `key` is listed in `user`'s authorized_keys inside the sandbox.
    async fn authorized(&self, user: &str, key: &PublicKey) -> bool {
        if user != GUEST_USER {
            return false;
        }
        let sandbox = self.sandbox.clone();
        let text = tokio::task::spawn_blocking(move || -> std::io::Result<String> {
            let fs = GuestFs::new(sandbox.runtime());
            let host = fs.host_followed(&format!("{GUEST_HOME}/.ssh/authorized_keys"))?;
            let meta = std::fs::metadata(&host)?;
            if meta.len() > MAX_AUTHORIZED_KEYS {
                return Err(std::io::Error::other("authorized_keys too large"));
            }
            std::fs::read_to_string(host)
        })
        .await;
        match text {
            Ok(Ok(text)) => text.lines().any(|line| line_allows(line, key)),
            _ => false,
        }
    }
}

/// Whether one authorized_keys line lists `key`. A line may start with options
/// (`no-pty,command="…" ssh-ed25519 AAAA… comment`): the key is the first `type blob`
/// pair that parses.
pub fn line_allows(line: &str, key: &PublicKey) -> bool {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return false;
    }
    let fields: Vec<&str> = line.split_whitespace().collect();
    fields.windows(2).any(|pair| {
        PublicKey::from_openssh(&format!("{} {}", pair[0], pair[1])).is_ok_and(|listed| listed.key_data() == key.key_data())
    })
}

impl Handler for GuestSession {
    type Error = russh::Error;

    async fn auth_publickey_offered(&mut self, user: &str, offer: PublicKeyOffer<'_>) -> Result<Auth, Self::Error> {
        Ok(if self.authorized(user, offer.public_key).await { Auth::Accept } else { Auth::reject() })
    }

    async fn auth_publickey(&mut self, user: &str, key: VerifiedPublicKey<'_>) -> Result<Auth, Self::Error> {
        Ok(if self.authorized(user, key.public_key).await { Auth::Accept } else { Auth::reject() })
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: ChannelOpenHandle,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        reply.accept().await;
        let handle = session.handle();
        let sandbox = self.sandbox.clone();
        let stop = self.stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = super::channel::serve(channel, handle, sandbox, GUEST_HOME.to_string()) => {}
                _ = stop.cancelled() => {}
            }
        });
        Ok(())
    }

    async fn channel_open_direct_tcpip(
        &mut self,
        channel: Channel<Msg>,
        host_to_connect: &str,
        port_to_connect: u32,
        _originator_address: &str,
        _originator_port: u32,
        reply: ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        // The sandbox's own loopback only: its network namespace has nothing else to reach
        // without outbound access.
        let loopback = matches!(host_to_connect, "127.0.0.1" | "localhost" | "::1" | "[::1]");
        let port = u16::try_from(port_to_connect).ok().filter(|p| *p > 0);
        let (true, Some(port)) = (loopback, port) else {
            reply.reject(ChannelOpenFailure::AdministrativelyProhibited).await;
            return Ok(());
        };
        let upstream = match netns::connect_loopback(self.sandbox.runtime().netns(), port).await {
            Ok(stream) => stream,
            Err(err) => {
                tracing::debug!(sandbox = %self.sandbox.id, port, "guest sshd: direct-tcpip failed: {err}");
                reply.reject(ChannelOpenFailure::ConnectFailed).await;
                return Ok(());
            }
        };
        reply.accept().await;
        let stop = self.stop.clone();
        tokio::spawn(async move {
            let mut client = channel.into_stream();
            let mut upstream = upstream;
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
                _ = stop.cancelled() => {}
            }
        });
        Ok(())
    }

    async fn tcpip_forward(&mut self, _address: &str, _port: &mut u32, _session: &mut Session) -> Result<bool, Self::Error> {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use russh::keys::ssh_key::private::Ed25519Keypair;
    use russh::keys::PrivateKey;

    #[test]
    fn authorized_keys_lines_with_options_and_comments() {
        let key = PrivateKey::from(Ed25519Keypair::from_seed(&[3; 32])).public_key().clone();
        let line = key.to_openssh().unwrap();
        assert!(line_allows(&line, &key));
        assert!(line_allows(&format!("  {line} me@host "), &key));
        assert!(line_allows(&format!("no-pty,no-port-forwarding {line} c"), &key));
        assert!(!line_allows(&format!("# {line}"), &key));
        let other = PrivateKey::from(Ed25519Keypair::from_seed(&[4; 32])).public_key().clone();
        assert!(!line_allows(&line, &other));
        assert!(!line_allows("", &key));
    }
}
