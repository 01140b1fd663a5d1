//! Helpers shared by the embedded guest sshd test binaries (`guest_sshd.rs`,
//! `guest_sshd_fs.rs`): a plain russh client through `/tunnel/22`, keys and sessions.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use createos_mock::{GuestSshd, MockConfig};
use russh::client::{self, Handle};
use russh::keys::ssh_key::private::Ed25519Keypair;
use russh::keys::{PrivateKey, PrivateKeyWithHashAlg, PublicKey, PublicKeyOrCertificate};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{self, Env, KEY};

/// Bound on anything that could hang.
pub const GUARD: Duration = Duration::from_secs(60);

pub async fn guarded<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {GUARD:?}"))
}

pub async fn embedded() -> Env {
    common::start_with(MockConfig::default().guest_sshd(GuestSshd::Embedded)).await
}

pub fn key(seed: u8) -> PrivateKey {
    PrivateKey::from(Ed25519Keypair::from_seed(&[seed; 32]))
}

pub fn pub_line(key: &PrivateKey) -> String {
    key.public_key().to_openssh().unwrap()
}

/// Records the host key the server offers.
#[derive(Clone, Default)]
pub struct Client {
    pub seen: Arc<Mutex<Option<PublicKey>>>,
}

impl client::Handler for Client {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        if let PublicKeyOrCertificate::PublicKey { key, .. } = key {
            *self.seen.lock().unwrap() = Some(key.clone());
        }
        Ok(true)
    }
}

/// Opens `/tunnel/22` of sandbox `id` with a hand-written HTTP/1.1 upgrade; returns the raw
/// stream after the 101 (read byte by byte so no SSH byte is swallowed) or the status.
pub async fn tunnel(env: &Env, id: &str) -> Result<TcpStream, u16> {
    let mut tcp = TcpStream::connect(env.mock.addr()).await.unwrap();
    let request = format!(
        "POST /v1/sandboxes/{id}/tunnel/22 HTTP/1.1\r\nHost: {}\r\nX-Api-Key: {KEY}\r\nConnection: Upgrade\r\n\
         Upgrade: tcp-tunnel\r\nContent-Length: 0\r\n\r\n",
        env.mock.addr()
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        if tcp.read(&mut byte).await.unwrap() == 0 {
            break;
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head);
    let status: u16 = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    if status == 101 {
        Ok(tcp)
    } else {
        Err(status)
    }
}

/// SSH connection to the sandbox's port 22 through the tunnel, plus the host key seen.
pub async fn connect(env: &Env, id: &str) -> (Handle<Client>, PublicKey) {
    let stream = tunnel(env, id).await.expect("tunnel to port 22");
    let handler = Client::default();
    let seen = handler.seen.clone();
    let handle = guarded(
        "handshake",
        client::connect_stream(Arc::new(client::Config::default()), stream, handler),
    )
    .await
    .expect("ssh handshake");
    let host_key = seen
        .lock()
        .unwrap()
        .clone()
        .expect("a host key was offered");
    (handle, host_key)
}

pub async fn login(env: &Env, id: &str, key: &PrivateKey) -> Handle<Client> {
    let (mut handle, _) = connect(env, id).await;
    let auth = handle
        .authenticate_publickey(
            "root",
            PrivateKeyWithHashAlg::new(Arc::new(key.clone()), None),
        )
        .await
        .unwrap();
    assert!(auth.success(), "the key in authorized_keys is accepted");
    handle
}

pub async fn sandbox_with_key(env: &Env, key: &PrivateKey) -> String {
    env.create(json!({"ssh_pubkeys": [pub_line(key)]})).await
}

pub async fn open_sftp(ssh: &Handle<Client>) -> russh_sftp::client::SftpSession {
    let channel = ssh.channel_open_session().await.unwrap();
    channel.request_subsystem(true, "sftp").await.unwrap();
    guarded(
        "sftp init",
        russh_sftp::client::SftpSession::new(channel.into_stream()),
    )
    .await
    .unwrap()
}
