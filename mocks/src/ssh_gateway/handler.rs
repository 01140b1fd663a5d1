//! One gateway connection: public-key authentication against the sandbox's registered keys,
//! then `direct-tcpip` to the sandbox's `127.0.0.1:22` and nothing else.

use std::net::SocketAddr;

use russh::keys::PublicKey;
use russh::server::{
    Auth, ChannelOpenHandle, Handler, Msg, PublicKeyOffer, Session, VerifiedPublicKey,
};
use russh::{Channel, ChannelOpenFailure};

use crate::guest_sshd::GUEST_SSH_PORT;
use crate::sandbox::{SandboxRef, Status};
use crate::ssh_common::{connect_forward, line_lists_key, pipe_forward};
use crate::state::AppState;

/// State of one client connection.
pub struct GatewayHandler {
    state: AppState,
    peer: SocketAddr,
    /// The sandbox id the client authenticated as.
    sandbox_id: Option<String>,
}

impl GatewayHandler {
    pub fn new(state: AppState, peer: SocketAddr) -> Self {
        GatewayHandler {
            state,
            peer,
            sandbox_id: None,
        }
    }

    /// Whether `key` is registered on the sandbox named `user`.
    fn key_registered(&self, user: &str, key: &PublicKey) -> bool {
        let Some(sandbox) = self.state.sandboxes.get(user) else {
            return false;
        };
        let registered = sandbox.record().ssh_pubkeys.clone();
        registered.iter().any(|line| line_lists_key(line, key))
    }

    fn running_sandbox(&self) -> Option<SandboxRef> {
        let id = self.sandbox_id.as_deref()?;
        self.state
            .sandboxes
            .get(id)
            .filter(|s| s.status() == Status::Running)
    }
}

/// Marks the sandbox busy (no idle auto-pause) while a forward is open.
struct Busy(SandboxRef);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.end_busy();
    }
}

impl Handler for GatewayHandler {
    type Error = russh::Error;

    async fn auth_publickey_offered(
        &mut self,
        user: &str,
        offer: PublicKeyOffer<'_>,
    ) -> Result<Auth, Self::Error> {
        Ok(if self.key_registered(user, offer.public_key) {
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
        if self.key_registered(user, key.public_key) {
            tracing::debug!(peer = %self.peer, sandbox = user, "ssh gateway: authenticated");
            self.sandbox_id = Some(user.to_string());
            Ok(Auth::Accept)
        } else {
            Ok(Auth::reject())
        }
    }

    async fn channel_open_session(
        &mut self,
        _channel: Channel<Msg>,
        reply: ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        reply
            .reject(ChannelOpenFailure::AdministrativelyProhibited)
            .await;
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
        let allowed = matches!(host_to_connect, "127.0.0.1" | "localhost")
            && port_to_connect == u32::from(GUEST_SSH_PORT);
        if !allowed {
            tracing::debug!(peer = %self.peer, host_to_connect, port_to_connect, "ssh gateway: forward refused");
            reply
                .reject(ChannelOpenFailure::AdministrativelyProhibited)
                .await;
            return Ok(());
        }
        let Some(sandbox) = self.running_sandbox() else {
            reply.reject(ChannelOpenFailure::ConnectFailed).await;
            return Ok(());
        };
        let Some(upstream) =
            connect_forward(reply, sandbox.runtime().netns(), GUEST_SSH_PORT).await
        else {
            return Ok(());
        };
        sandbox.touch();
        sandbox.begin_busy();
        let busy = Busy(sandbox.clone());
        let guard = self.state.processes.session(&sandbox.id);
        let (cancel, shutdown) = (guard.cancel.clone(), self.state.shutdown.clone());
        let stop = async move {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = shutdown.cancelled() => {}
            }
        };
        pipe_forward(channel, upstream, stop, (busy, guard));
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
