//! What the SSH gateway (`ssh_gateway`) and each sandbox's embedded sshd (`guest_sshd`)
//! share: host keys, the server configuration, authorized-key matching and `direct-tcpip`
//! forwards to a sandbox's loopback.

use std::future::Future;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use rand::RngCore;
use russh::keys::ssh_key::private::Ed25519Keypair;
use russh::keys::{PrivateKey, PublicKey};
use russh::server::{ChannelOpenHandle, Config, Msg};
use russh::{Channel, ChannelOpenFailure, MethodKind, MethodSet};
use tokio::net::TcpStream;

use crate::process::netns;

/// A fresh ed25519 host key (the seed is wiped once the key holds it).
pub fn generate_host_key() -> PrivateKey {
    let mut seed = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut seed);
    let key = PrivateKey::from(Ed25519Keypair::from_seed(&seed));
    seed.fill(0);
    key
}

/// Server settings: public-key authentication only, keepalives so dead peers are noticed.
pub fn server_config(host_key: PrivateKey) -> Arc<Config> {
    let mut methods = MethodSet::empty();
    methods.push(MethodKind::PublicKey);
    Arc::new(Config {
        methods,
        keys: vec![host_key],
        // A local emulator, not an Internet-facing server: refusals need not be slowed down.
        auth_rejection_time: Duration::from_millis(20),
        auth_rejection_time_initial: Some(Duration::ZERO),
        inactivity_timeout: None,
        keepalive_interval: Some(Duration::from_secs(30)),
        nodelay: true,
        ..Default::default()
    })
}

/// Whether one OpenSSH public-key line (`authorized_keys` or a registered key) lists `key`.
/// A line may start with options (`no-pty,command="…" ssh-ed25519 AAAA… comment`): the key
/// is the first `type blob` pair that parses. Blank lines and `#` comments list nothing.
pub fn line_lists_key(line: &str, key: &PublicKey) -> bool {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return false;
    }
    let fields: Vec<&str> = line.split_whitespace().collect();
    fields.windows(2).any(|pair| {
        PublicKey::from_openssh(&format!("{} {}", pair[0], pair[1]))
            .is_ok_and(|listed| listed.key_data() == key.key_data())
    })
}

/// Answers a `direct-tcpip` open by connecting `port` on the loopback of `ns` (the host's
/// when `None`): accepted with the connection, or rejected (`ConnectFailed`) when nothing
/// listens there.
pub async fn connect_forward(
    reply: ChannelOpenHandle,
    ns: Option<&OwnedFd>,
    port: u16,
) -> Option<TcpStream> {
    match netns::connect_loopback(ns, port).await {
        Ok(stream) => {
            reply.accept().await;
            Some(stream)
        }
        Err(err) => {
            tracing::debug!(port, "ssh: direct-tcpip to loopback failed: {err}");
            reply.reject(ChannelOpenFailure::ConnectFailed).await;
            None
        }
    }
}

/// Copies between `channel` and `upstream` in a task until either side ends or `stop`
/// completes; `hold` (guards that must live as long as the forward) is dropped then.
pub fn pipe_forward<S, H>(channel: Channel<Msg>, mut upstream: TcpStream, stop: S, hold: H)
where
    S: Future<Output = ()> + Send + 'static,
    H: Send + 'static,
{
    tokio::spawn(async move {
        let mut client = channel.into_stream();
        tokio::select! {
            result = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {
                if let Err(err) = result {
                    tracing::debug!("ssh: forward ended: {err}");
                }
            }
            _ = stop => {}
        }
        drop(hold);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_lines_with_options_comments_and_garbage() {
        let key = PrivateKey::from(Ed25519Keypair::from_seed(&[3; 32]))
            .public_key()
            .clone();
        let line = key.to_openssh().unwrap();
        assert!(line_lists_key(&line, &key));
        assert!(line_lists_key(&format!("  {line} me@host "), &key));
        assert!(line_lists_key(
            &format!("no-pty,no-port-forwarding {line} c"),
            &key
        ));
        assert!(!line_lists_key(&format!("# {line}"), &key));
        let other = PrivateKey::from(Ed25519Keypair::from_seed(&[4; 32]))
            .public_key()
            .clone();
        assert!(!line_lists_key(&line, &other));
        assert!(!line_lists_key("", &key));
        assert!(!line_lists_key("garbage", &key));
    }

    #[test]
    fn host_keys_are_fresh() {
        assert_ne!(
            generate_host_key().public_key(),
            generate_host_key().public_key()
        );
        assert!(server_config(generate_host_key())
            .keepalive_interval
            .is_some());
    }
}
