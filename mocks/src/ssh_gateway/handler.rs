//! One gateway connection: public-key authentication against the sandbox's registered keys,
//! then `direct-tcpip` to the sandbox's `127.0.0.1:22` and nothing else.

use std::net::SocketAddr;

use russh::keys::PublicKey;
use russh::server::{Auth, ChannelOpenHandle, Handler, Msg, PublicKeyOffer, Session, VerifiedPublicKey};
use russh::{Channel, ChannelOpenFailure};

use crate::app::AppState;
use crate::process::netns;
use crate::sandbox::{SandboxRef, Status};

/// The only forward the gateway allows.
const GUEST_SSH_PORT: u32 = 22;

/// State of one client connection.
pub struct GatewayHandler {
    state: AppState,
    peer: SocketAddr,
    /// The sandbox id the client authenticated as.
    sandbox_id: Option<String>,
}

impl GatewayHandler {
    pub fn new(state: AppState, peer: SocketAddr) -> Self {
        GatewayHandler { state, peer, sandbox_id: None }
    }

    /// Whether `key` is registered on the sandbox named `user`.
    fn key_registered(&self, user: &str, key: &PublicKey) -> bool {
        let Some(sandbox) = self.state.sandboxes.get(user) else { return false };
        let registered = sandbox.record().ssh_pubkeys.clone();
        registered.iter().any(|line| same_key(line, key))
    }

    fn running_sandbox(&self) -> Option<SandboxRef> {
        let id = self.sandbox_id.as_deref()?;
        self.state.sandboxes.get(id).filter(|s| s.status() == Status::Running)
    }
}

/// `type base64` of an OpenSSH public key line equals `key`.
fn same_key(line: &str, key: &PublicKey) -> bool {
    let mut fields = line.split_whitespace();
    let (Some(kind), Some(blob)) = (fields.next(), fields.next()) else { return false };
    PublicKey::from_openssh(&format!("{kind} {blob}")).is_ok_and(|registered| registered.key_data() == key.key_data())
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

    async fn auth_publickey_offered(&mut self, user: &str, offer: PublicKeyOffer<'_>) -> Result<Auth, Self::Error> {
        Ok(if self.key_registered(user, offer.public_key) { Auth::Accept } else { Auth::reject() })
    }

    async fn auth_publickey(&mut self, user: &str, key: VerifiedPublicKey<'_>) -> Result<Auth, Self::Error> {
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
        reply.reject(ChannelOpenFailure::AdministrativelyProhibited).await;
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
        let allowed = matches!(host_to_connect, "127.0.0.1" | "localhost") && port_to_connect == GUEST_SSH_PORT;
        if !allowed {
            tracing::debug!(peer = %self.peer, host_to_connect, port_to_connect, "ssh gateway: forward refused");
            reply.reject(ChannelOpenFailure::AdministrativelyProhibited).await;
            return Ok(());
        }
        let Some(sandbox) = self.running_sandbox() else {
            reply.reject(ChannelOpenFailure::ConnectFailed).await;
            return Ok(());
        };
        let upstream = match netns::connect_loopback(sandbox.runtime().netns(), GUEST_SSH_PORT as u16).await {
            Ok(stream) => stream,
            Err(err) => {
                tracing::debug!(sandbox = %sandbox.id, "ssh gateway: port 22 unreachable: {err}");
                reply.reject(ChannelOpenFailure::ConnectFailed).await;
                return Ok(());
            }
        };
        reply.accept().await;
        sandbox.touch();
        sandbox.begin_busy();
        let busy = Busy(sandbox.clone());
        let guard = self.state.processes.session(&sandbox.id);
        let shutdown = self.state.shutdown.clone();
        tokio::spawn(async move {
            let mut client = channel.into_stream();
            let mut upstream = upstream;
            tokio::select! {
                result = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {
                    if let Err(err) = result {
                        tracing::debug!("ssh gateway: forward ended: {err}");
                    }
                }
                _ = guard.cancel.cancelled() => {}
                _ = shutdown.cancelled() => {}
            }
            drop(busy);
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
    fn keys_compare_by_type_and_blob() {
        let key = PrivateKey::from(Ed25519Keypair::from_seed(&[7; 32])).public_key().clone();
        let line = key.to_openssh().unwrap();
        assert!(same_key(&format!("{line} some comment"), &key));
        let other = PrivateKey::from(Ed25519Keypair::from_seed(&[8; 32])).public_key().clone();
        assert!(!same_key(&format!("{line} c"), &other));
        assert!(!same_key("garbage", &key));
    }
}
