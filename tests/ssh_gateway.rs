//! The SSH gateway route against the emulator (`MockConfig::ssh_gateway`), with each guest
//! sshd it offers: an end-to-end session through the gateway, per-sandbox key checks, and
//! every forward but `127.0.0.1:22` refused.

mod common;
#[macro_use]
mod ssh_support;

use std::sync::Arc;

use createos_sandbox::ssh::{KnownHosts, SshError, SshFiles, SshOptions, SshSession, WriteOptions};
use tokio::io::AsyncReadExt;

use ssh_support::{guarded, hex_sha256, options, pattern, sandbox, ssh_error, Guest};

/// A bare russh client that trusts any host key, to probe what the gateway refuses.
struct TrustAll;

impl russh::client::Handler for TrustAll {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        _key: &russh::keys::PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        Ok(true)
    }
}

each_guest!(the_gateway_route_works_end_to_end_and_refuses_everything_else);
async fn the_gateway_route_works_end_to_end_and_refuses_everything_else(guest: Guest) {
    use tokio::io::AsyncWriteExt;

    let env = common::start_with(guest.config().ssh_gateway(true)).await;
    let gateway = env
        .mock
        .ssh_gateway_addr()
        .expect("the emulator runs a gateway");
    let sb = sandbox(&env).await;
    let other = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let via_gateway = options(&dir).via_gateway(gateway.ip().to_string(), gateway.port());
    env.reset_stats().await;

    let ssh = guarded(
        "connect via the gateway",
        SshSession::connect(&sb, via_gateway.clone()),
    )
    .await
    .expect("connect");
    let host = ssh.exec("hostname; echo err >&2; exit 4").await.unwrap();
    assert_eq!(host.stdout_text().trim(), sb.view().name.unwrap());
    assert_eq!(
        (host.stderr_text().as_ref(), host.exit_status),
        ("err\n", Some(4))
    );
    let data = pattern(3 << 20, 99);
    ssh.write_file(
        "/root/via-gateway.bin",
        std::io::Cursor::new(data.clone()),
        WriteOptions::new(),
    )
    .await
    .unwrap();
    let mut back = Vec::new();
    ssh.read_file("/root/via-gateway.bin")
        .await
        .unwrap()
        .read_to_end(&mut back)
        .await
        .unwrap();
    assert_eq!(hex_sha256(&back), hex_sha256(&data));
    assert_eq!(
        env.requests("openTunnel").await,
        0,
        "the gateway route does not use the tunnel"
    );
    // Both hops are pinned: the gateway under [host]:port, the guest under the sandbox id.
    let known = KnownHosts::new(dir.path().join("known_hosts"));
    assert!(known
        .lookup(&format!("[{}]:{}", gateway.ip(), gateway.port()))
        .unwrap()
        .is_some());
    assert!(known.lookup(sb.id()).unwrap().is_some());

    // The gateway checks the key against the sandbox named as user: sandbox A's key does not
    // open sandbox B.
    let borrowed = tempfile::tempdir().unwrap();
    let borrowed_files = SshFiles::at(borrowed.path());
    std::fs::create_dir_all(borrowed_files.keys_dir()).unwrap();
    std::fs::copy(ssh.key().path(), borrowed_files.key_path(other.id())).unwrap();
    let refused = SshSession::connect(
        &other,
        SshOptions::new()
            .files(borrowed_files)
            .via_gateway(gateway.ip().to_string(), gateway.port())
            .prepare_guest(false),
    )
    .await
    .unwrap_err();
    match ssh_error(&refused) {
        SshError::AuthRejected { target, user, .. } => {
            assert!(target.starts_with("gateway "), "{target}");
            assert_eq!(user, other.id());
        }
        other => panic!("expected AuthRejected, got {other:?}"),
    }

    // Everything but direct-tcpip to 127.0.0.1:22 is refused.
    let key = russh::keys::load_secret_key(ssh.key().path(), None).unwrap();
    let config = Arc::new(russh::client::Config::default());
    let mut raw = russh::client::connect(config, gateway, TrustAll)
        .await
        .unwrap();
    let auth = raw
        .authenticate_publickey(
            sb.id(),
            russh::keys::PrivateKeyWithHashAlg::new(Arc::new(key), None),
        )
        .await
        .unwrap();
    assert!(auth.success());
    assert!(matches!(
        raw.channel_open_session().await,
        Err(russh::Error::ChannelOpenFailure(_))
    ));
    for (host, port) in [("127.0.0.1", 80), ("10.0.0.1", 22), ("example.com", 22)] {
        let opened = raw
            .channel_open_direct_tcpip(host, port, "127.0.0.1", 0)
            .await;
        assert!(
            matches!(opened, Err(russh::Error::ChannelOpenFailure(_))),
            "{host}:{port} must be refused"
        );
    }
    let channel = raw
        .channel_open_direct_tcpip("127.0.0.1", 22, "127.0.0.1", 0)
        .await
        .expect("the one allowed forward");
    let mut stream = channel.into_stream();
    let mut banner = [0u8; 8];
    guarded("guest banner", stream.read_exact(&mut banner))
        .await
        .unwrap();
    assert_eq!(&banner, b"SSH-2.0-", "the forward reaches the guest sshd");
    stream.shutdown().await.unwrap();
    env.shutdown().await;
}
