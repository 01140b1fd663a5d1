//! One connection to a sandbox's embedded sshd: public-key authentication against the
//! user's `~/.ssh/authorized_keys` inside the sandbox (read at each attempt, as sshd does),
//! session channels (`channel.rs`) and `direct-tcpip` to the sandbox's own loopback.

use russh::keys::PublicKey;
use russh::server::{
    Auth, ChannelOpenHandle, Handler, Msg, PublicKeyOffer, Session, VerifiedPublicKey,
};
use russh::{Channel, ChannelOpenFailure};
use tokio_util::sync::CancellationToken;

use crate::guest_fs::GuestFs;
use crate::sandbox::SandboxRef;
use crate::ssh_common::{connect_forward, line_lists_key, pipe_forward};

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
            use std::io::Read;
            let fs = GuestFs::new(sandbox.runtime());
            let resolved = fs.resolve(&format!("{GUEST_HOME}/.ssh/authorized_keys"), true)?;
            let file = std::fs::File::from(fs.open(
                &resolved,
                nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_NONBLOCK,
                0,
            )?);
            if file.metadata()?.len() > MAX_AUTHORIZED_KEYS {
                return Err(std::io::Error::other("authorized_keys too large"));
            }
            let mut text = String::new();
            file.take(MAX_AUTHORIZED_KEYS).read_to_string(&mut text)?;
            Ok(text)
        })
        .await;
        match text {
            Ok(Ok(text)) => text.lines().any(|line| line_lists_key(line, key)),
            _ => false,
        }
    }
}

impl Handler for GuestSession {
    type Error = russh::Error;

    async fn auth_publickey_offered(
        &mut self,
        user: &str,
        offer: PublicKeyOffer<'_>,
    ) -> Result<Auth, Self::Error> {
        Ok(if self.authorized(user, offer.public_key).await {
            Auth::Accept
        } else {
            Auth::reject()
        })
    }

    async fn auth_publickey(
        &mut self,
        user: &str,
        key: VerifiedPublicKey<'_>,
    ) -> Result<Auth, Self::Error> {
        Ok(if self.authorized(user, key.public_key).await {
            Auth::Accept
        } else {
            Auth::reject()
        })
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
            reply
                .reject(ChannelOpenFailure::AdministrativelyProhibited)
                .await;
            return Ok(());
        };
        let Some(upstream) = connect_forward(reply, self.sandbox.runtime().netns(), port).await
        else {
            return Ok(());
        };
        let stop = self.stop.clone();
        pipe_forward(channel, upstream, async move { stop.cancelled().await }, ());
        Ok(())
    }

    async fn tcpip_forward(
        &mut self,
        _address: &str,
        _port: &mut u32,
        _session: &mut Session,
    ) -> Result<bool, Self::Error> {
        Ok(false)
    }
}
