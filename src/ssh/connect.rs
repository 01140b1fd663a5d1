//! Establishing an authenticated SSH connection to a guest, over one of two routes:
//!
//! - **tunnel**: a `/tunnel/22` upgrade (a raw byte pipe to the guest's port 22) carries the
//!   SSH session directly;
//! - **gateway**: an outer SSH session to the gateway as user = sandbox id, a `direct-tcpip`
//!   channel to `127.0.0.1:22` inside the sandbox, and the guest session over that channel.
//!
//! Both hops authenticate with the sandbox's key; host keys are checked against our pins
//! (the guest's under the sandbox id, the gateway's under `[host]:port`).

use std::sync::Arc;
use std::time::Duration;

use russh::client::{self, AuthResult, Handle};
use russh::keys::{PrivateKeyWithHashAlg, PublicKey, PublicKeyOrCertificate};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::api::sandboxes::Sandbox;
use crate::error::{Error, Result};

use super::error::SshError;
use super::keys::SandboxKey;
use super::known_hosts::KnownHosts;
use super::options::{SshOptions, SshRoute};

/// Verifies the server's host key against our pins.
pub(crate) struct HostKeyCheck {
    host: String,
    known_hosts: KnownHosts,
}

/// Errors of a session: russh's own, or a refused host key (kept typed).
#[derive(Debug)]
pub(crate) enum HandlerError {
    Russh(russh::Error),
    HostKey(SshError),
}

impl From<russh::Error> for HandlerError {
    fn from(e: russh::Error) -> Self {
        HandlerError::Russh(e)
    }
}

impl client::Handler for HostKeyCheck {
    type Error = HandlerError;

    async fn check_server_key(
        &mut self,
        offered: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let key = match offered {
            PublicKeyOrCertificate::PublicKey { key, .. } => key.clone(),
            PublicKeyOrCertificate::Certificate(cert) => PublicKey::from(cert.public_key().clone()),
        };
        self.known_hosts
            .verify_or_pin(&self.host, &key)
            .map(|_| true)
            .map_err(HandlerError::HostKey)
    }
}

/// An authenticated guest session, plus the gateway session carrying it (if any).
pub(crate) struct Established {
    pub(crate) guest: Handle<HostKeyCheck>,
    pub(crate) gateway: Option<Handle<HostKeyCheck>>,
}

fn client_config(options: &SshOptions) -> Arc<client::Config> {
    Arc::new(client::Config {
        keepalive_interval: options.keepalive,
        keepalive_max: 3,
        // Bulk transfers (tar uploads, SFTP) benefit from a large window.
        window_size: 8 * 1024 * 1024,
        preferred: super::ciphers::preferred(),
        ..Default::default()
    })
}

/// Map a session error of the handshake with `what`.
fn handshake_error(what: &str, err: HandlerError) -> Error {
    match err {
        HandlerError::HostKey(e) => e.into(),
        HandlerError::Russh(e) => SshError::protocol(format!("handshake with {what}"), e).into(),
    }
}

async fn handshake<S>(
    stream: S,
    what: &str,
    pin_as: &str,
    known_hosts: &KnownHosts,
    config: Arc<client::Config>,
) -> Result<Handle<HostKeyCheck>>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let check = HostKeyCheck {
        host: pin_as.to_string(),
        known_hosts: known_hosts.clone(),
    };
    client::connect_stream(config, stream, check)
        .await
        .map_err(|e| handshake_error(what, e))
}

async fn authenticate(
    handle: &mut Handle<HostKeyCheck>,
    what: &str,
    user: &str,
    key: &SandboxKey,
) -> Result<()> {
    let signer = PrivateKeyWithHashAlg::new(key.private_key(), None);
    let outcome = handle
        .authenticate_publickey(user, signer)
        .await
        .map_err(|e| SshError::protocol(format!("authenticating to {what}"), e))?;
    match outcome {
        AuthResult::Success => Ok(()),
        _ => Err(SshError::AuthRejected {
            target: what.to_string(),
            user: user.to_string(),
            fingerprint: key.fingerprint(),
        }
        .into()),
    }
}

/// Connect and authenticate to the guest sshd of `sandbox` over the configured route.
pub(crate) async fn establish(
    sandbox: &Sandbox,
    options: &SshOptions,
    key: &SandboxKey,
    known_hosts: &KnownHosts,
) -> Result<Established> {
    let limit = options.connect_timeout;
    let attempt = async {
        match &options.route {
            SshRoute::Tunnel => via_tunnel(sandbox, options, key, known_hosts).await,
            SshRoute::Gateway { host, port } => {
                via_gateway(sandbox, options, key, known_hosts, host, *port).await
            }
        }
    };
    tokio::time::timeout(limit, attempt)
        .await
        .map_err(|_| timeout_error(sandbox, limit))?
}

fn timeout_error(sandbox: &Sandbox, after: Duration) -> Error {
    SshError::protocol(
        format!("connecting to sandbox {}", sandbox.id()),
        format!("no session after {after:?}"),
    )
    .into()
}

async fn via_tunnel(
    sandbox: &Sandbox,
    options: &SshOptions,
    key: &SandboxKey,
    known_hosts: &KnownHosts,
) -> Result<Established> {
    let stream = crate::tunnel::open(sandbox, 22).await?;
    let what = format!("sandbox {}", sandbox.id());
    let mut guest = handshake(
        stream,
        &what,
        sandbox.id(),
        known_hosts,
        client_config(options),
    )
    .await?;
    authenticate(&mut guest, &what, &options.user, key).await?;
    Ok(Established {
        guest,
        gateway: None,
    })
}

async fn via_gateway(
    sandbox: &Sandbox,
    options: &SshOptions,
    key: &SandboxKey,
    known_hosts: &KnownHosts,
    host: &str,
    port: u16,
) -> Result<Established> {
    let gateway_name = format!("gateway {host}:{port}");
    let tcp = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| Error::Connection {
            endpoint: gateway_name.clone(),
            source: Box::new(e),
        })?;
    let _ = tcp.set_nodelay(true);
    let config = client_config(options);
    let pin_gateway_as = format!("[{host}]:{port}");
    let mut gateway = handshake(
        tcp,
        &gateway_name,
        &pin_gateway_as,
        known_hosts,
        config.clone(),
    )
    .await?;
    // The gateway knows the sandbox by its id and checks the keys registered on it.
    authenticate(&mut gateway, &gateway_name, sandbox.id(), key).await?;
    let channel = gateway
        .channel_open_direct_tcpip("127.0.0.1", 22, "127.0.0.1", 0)
        .await
        .map_err(|e| match e {
            russh::Error::ChannelOpenFailure(reason) => Error::from(SshError::ChannelRefused {
                kind: "direct-tcpip to 127.0.0.1:22".to_string(),
                reason: format!("{reason:?}"),
            }),
            other => SshError::protocol(format!("forwarding through {gateway_name}"), other).into(),
        })?;
    let what = format!("sandbox {} via {gateway_name}", sandbox.id());
    let mut guest = handshake(
        channel.into_stream(),
        &what,
        sandbox.id(),
        known_hosts,
        config,
    )
    .await?;
    authenticate(&mut guest, &what, &options.user, key).await?;
    Ok(Established {
        guest,
        gateway: Some(gateway),
    })
}
