//! The SSH layer against the emulator, with each guest sshd the emulator offers: the host's
//! real OpenSSH sshd started inside the sandbox (its own mount and network namespaces) when
//! the machine has `/usr/sbin/sshd` (CI installs openssh-server), and the emulator's
//! embedded SSH server. Reached through `/tunnel/22`: commands, SFTP, pooling, reconnects
//! and guests without sshd. Host keys and key files are in `ssh_keys.rs`, the gateway
//! route in `ssh_gateway.rs`; the helpers they share in `ssh_support/`.
//!
//! Every test that needs a guest sshd runs once per mode (`mod <test> { openssh, embedded }`).
//! The `openssh` run uses `GuestSshd::Auto`, i.e. real OpenSSH where the machine has it and
//! the embedded server elsewhere, so `cargo test` passes on a fresh machine too.

#[path = "../../tests/common/mod.rs"]
mod common;
#[macro_use]
#[path = "../../tests/ssh_support/mod.rs"]
mod ssh_support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use createos_mock::{GuestSshd, MockConfig};
use createos_sandbox::ssh::{RemoteFileKind, SshError, SshPool, SshSession, WriteOptions};
use createos_sandbox::{CreateSandbox, Error};
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

use ssh_support::{
    api_sh, embedded, guarded, hex_sha256, options, pattern, sandbox, ssh_error, Guest,
};

// --------------------------------------------------------------------------- commands

each_guest!(exec_over_the_tunnel_keeps_streams_apart_and_reports_status);
async fn exec_over_the_tunnel_keeps_streams_apart_and_reports_status(guest: Guest) {
    let env = guest.start().await;
    let sb = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let ssh = guarded("connect", SshSession::connect(&sb, options(&dir)))
        .await
        .expect("ssh connect");

    let out = guarded("exec", ssh.exec("echo out; echo err >&2; exit 7"))
        .await
        .unwrap();
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
    assert_eq!(out.exit_status, Some(7));
    assert!(!out.success());
    assert_eq!(out.exit_signal, None);

    // The session runs inside this sandbox: its hostname, and its private /root.
    let name = sb.view().name.clone().expect("sandbox name");
    let host = ssh.exec("hostname").await.unwrap();
    assert_eq!(host.stdout_text().trim(), name);
    sb.write("/root/from-api.txt", "via the files API")
        .await
        .unwrap();
    let cat = ssh.exec("cat /root/from-api.txt").await.unwrap();
    assert_eq!(cat.stdout_text(), "via the files API");

    // stdin, in memory and streamed.
    let upper = ssh
        .exec_with_stdin("tr a-z A-Z", "hello ssh")
        .await
        .unwrap();
    assert_eq!(upper.stdout_text(), "HELLO SSH");
    assert!(upper.success());
    let big = pattern(3 << 20, 7);
    let digest = ssh
        .exec_with_stdin_stream("sha256sum", std::io::Cursor::new(big.clone()))
        .await
        .unwrap();
    assert_eq!(
        digest.stdout_text().split_whitespace().next(),
        Some(hex_sha256(&big).as_str())
    );

    // A command that ignores its (large) stdin still ends.
    let ignored = guarded(
        "exit without reading stdin",
        ssh.exec_with_stdin_stream("exit 3", std::io::Cursor::new(big)),
    )
    .await
    .unwrap();
    assert_eq!(ignored.exit_status, Some(3));

    // stdout streamed into a writer; stderr kept apart.
    let mut sink = Vec::new();
    let exit = ssh
        .exec_to_writer(
            "head -c 2000000 /dev/zero | tr '\\0' x; echo done >&2",
            &mut sink,
        )
        .await
        .unwrap();
    assert!(exit.success());
    assert_eq!(sink.len(), 2_000_000);
    assert!(sink.iter().all(|&b| b == b'x'));
    assert_eq!(exit.stderr, b"done\n");

    // A command killed by a signal.
    let killed = ssh.exec("kill -TERM $$").await.unwrap();
    assert_eq!(killed.exit_status, None);
    assert_eq!(
        killed.exit_signal.as_ref().map(|s| s.name.as_str()),
        Some("TERM")
    );

    // Bad input is refused before anything is sent.
    assert!(matches!(
        ssh.exec("  ").await,
        Err(Error::InvalidInput { .. })
    ));
    env.shutdown().await;
}

each_guest!(dropping_a_command_stops_it_and_frees_its_channel);
async fn dropping_a_command_stops_it_and_frees_its_channel(guest: Guest) {
    let env = guest.start().await;
    let sb = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let ssh = guarded("connect", SshSession::connect(&sb, options(&dir)))
        .await
        .expect("ssh connect");

    // More abandoned commands than OpenSSH allows sessions per connection (10): if their
    // channels leaked, the last ones could not even open.
    for round in 0..2 {
        let commands = (0..6).map(|i| {
            let ssh = ssh.clone();
            let n = round * 6 + i;
            async move {
                let command = format!("echo $$ > /root/pid-{n}; while :; do sleep 0.05; done");
                tokio::time::timeout(Duration::from_millis(3000), ssh.exec(&command)).await
            }
        });
        for outcome in futures::future::join_all(commands).await {
            assert!(
                outcome.is_err(),
                "the endless command was abandoned by its caller: {outcome:?}"
            );
        }
    }
    let probe = r#"n=0; for f in /root/pid-*; do n=$((n+1)); kill -0 "$(cat "$f")" 2>/dev/null && echo alive; done; echo files=$n"#;
    let mut report = String::new();
    for _ in 0..100 {
        report = guarded("probe", ssh.exec(probe))
            .await
            .expect("channels are free again")
            .stdout_text()
            .into_owned();
        if !report.contains("alive") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Under load a command may be abandoned before it even started; what matters is that every
    // one that did start was stopped (no "alive") and the channels are free again (the probe ran).
    assert!(
        !report.contains("alive"),
        "an abandoned command is still running: {report}"
    );
    let started: u32 = report
        .trim()
        .trim_start_matches("files=")
        .parse()
        .unwrap_or(0);
    assert!((1..=12).contains(&started), "{report}");
    assert_eq!(ssh.connects(), 1);
    env.shutdown().await;
}

// --------------------------------------------------------------------------- SFTP

each_guest!(sftp_moves_20_mb_intact_and_manages_files);
async fn sftp_moves_20_mb_intact_and_manages_files(guest: Guest) {
    let env = guest.start().await;
    let sb = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let ssh = guarded("connect", SshSession::connect(&sb, options(&dir)))
        .await
        .expect("ssh connect");

    let data = pattern(20 * 1024 * 1024 + 123, 42);
    let written = guarded(
        "20 MB upload",
        ssh.write_file(
            "/root/up/big.bin",
            std::io::Cursor::new(data.clone()),
            WriteOptions::new().mode(0o640),
        ),
    )
    .await
    .unwrap();
    assert_eq!(written, data.len() as u64);
    // The guest sees the same bytes.
    let guest_sum = ssh.exec("sha256sum /root/up/big.bin").await.unwrap();
    assert_eq!(
        guest_sum.stdout_text().split_whitespace().next(),
        Some(hex_sha256(&data).as_str())
    );
    // Streaming read back.
    let mut reader = ssh.read_file("/root/up/big.bin").await.unwrap();
    assert_eq!(reader.size(), Some(data.len() as u64));
    let mut back = Vec::new();
    guarded("20 MB download", reader.read_to_end(&mut back))
        .await
        .unwrap();
    assert_eq!(back.len(), data.len());
    assert_eq!(hex_sha256(&back), hex_sha256(&data));

    let meta = ssh.stat("/root/up/big.bin").await.unwrap();
    assert_eq!(meta.kind, RemoteFileKind::File);
    assert_eq!(meta.size, data.len() as u64);
    assert_eq!(meta.mode, 0o640);
    assert!(meta.modified.is_some());
    // The write was atomic: no temporary file is left next to the target.
    let names: Vec<String> = ssh
        .list("/root/up")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, vec!["big.bin".to_string()]);

    // Replacing keeps the existing mode unless told otherwise.
    ssh.write_bytes("/root/up/big.bin", "small now", WriteOptions::new())
        .await
        .unwrap();
    let replaced = ssh.stat("/root/up/big.bin").await.unwrap();
    assert_eq!((replaced.size, replaced.mode), (9, 0o640));
    assert_eq!(
        ssh.read_to_vec("/root/up/big.bin", 1024).await.unwrap(),
        b"small now"
    );
    assert!(matches!(
        ssh.read_to_vec("/root/up/big.bin", 4).await,
        Err(Error::InvalidInput { .. })
    ));

    // mkdir -p, list, rename (replacing), remove.
    ssh.mkdir_p("/root/tree/a/b/c").await.unwrap();
    ssh.mkdir_p("/root/tree/a/b/c").await.unwrap();
    ssh.write_bytes("/root/tree/a/one.txt", "1", WriteOptions::new())
        .await
        .unwrap();
    ssh.write_bytes("/root/tree/a/two.txt", "22", WriteOptions::new())
        .await
        .unwrap();
    let listing = ssh.list("/root/tree/a").await.unwrap();
    let summary: Vec<(String, RemoteFileKind, u64)> = listing
        .iter()
        .map(|e| (e.name.clone(), e.metadata.kind, e.metadata.size))
        .collect();
    assert_eq!(summary[0].0, "b");
    assert_eq!(summary[0].1, RemoteFileKind::Dir);
    assert_eq!(summary[1], ("one.txt".to_string(), RemoteFileKind::File, 1));
    assert_eq!(summary[2], ("two.txt".to_string(), RemoteFileKind::File, 2));
    ssh.rename("/root/tree/a/one.txt", "/root/tree/a/two.txt")
        .await
        .unwrap();
    assert_eq!(
        ssh.read_to_vec("/root/tree/a/two.txt", 10).await.unwrap(),
        b"1"
    );
    assert!(!ssh.exists("/root/tree/a/one.txt").await.unwrap());
    ssh.rename("/root/tree/a/b", "/root/tree/moved")
        .await
        .unwrap();
    assert!(ssh.stat("/root/tree/moved/c").await.unwrap().is_dir());
    ssh.mkdir("/root/tree/single").await.unwrap();
    ssh.remove_dir("/root/tree/single").await.unwrap();
    ssh.remove_file("/root/tree/a/two.txt").await.unwrap();
    ssh.exec("ln -s /etc /root/tree/moved/c/link-to-etc")
        .await
        .unwrap();
    assert_eq!(
        ssh.lstat("/root/tree/moved/c/link-to-etc")
            .await
            .unwrap()
            .kind,
        RemoteFileKind::Symlink
    );
    ssh.remove_dir_all("/root/tree").await.unwrap();
    assert!(!ssh.exists("/root/tree").await.unwrap());
    // The symlink was removed, not followed.
    assert!(ssh.stat("/etc/hostname").await.is_ok() || ssh.stat("/etc/passwd").await.is_ok());

    // Typed errors.
    let missing = ssh.stat("/root/nope").await.unwrap_err();
    assert!(ssh_error(&missing).is_not_found(), "{missing}");
    let err = ssh.read_file("/root/nope").await.unwrap_err();
    assert!(ssh_error(&err).is_not_found(), "{err}");
    assert!(matches!(
        ssh.mkdir("/root/no/parent").await,
        Err(Error::Ssh(_))
    ));
    // Paths are validated before anything is sent.
    for bad in ["relative/path", "/root/../etc/passwd", ""] {
        assert!(
            matches!(ssh.stat(bad).await, Err(Error::InvalidInput { .. })),
            "{bad:?}"
        );
    }
    assert!(matches!(
        ssh.remove_dir_all("/").await,
        Err(Error::InvalidInput { .. })
    ));
    env.shutdown().await;
}

// --------------------------------------------------------------------------- pooling and reconnects

each_guest!(concurrent_callers_share_one_connection);
async fn concurrent_callers_share_one_connection(guest: Guest) {
    let env = guest.start().await;
    let sb = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let pool = Arc::new(SshPool::new(options(&dir)));
    env.reset_stats().await;

    let callers = (0..2).map(|i| {
        let pool = pool.clone();
        let sb = sb.clone();
        tokio::spawn(async move {
            let ssh = pool.session(&sb).await.expect("session");
            let out = ssh
                .exec(&format!("sleep 0.2; echo caller-{i}"))
                .await
                .expect("exec");
            (ssh, out)
        })
    });
    let results = guarded("two callers", futures::future::join_all(callers)).await;
    let mut sessions = Vec::new();
    for (i, joined) in results.into_iter().enumerate() {
        let (ssh, out) = joined.unwrap();
        assert_eq!(out.stdout_text().trim(), format!("caller-{i}"));
        sessions.push(ssh);
    }
    assert_eq!(
        env.requests("openTunnel").await,
        1,
        "both callers share one tunnel"
    );
    assert_eq!(sessions[0].connects(), 1);
    assert_eq!(sessions[1].connects(), 1);
    assert_eq!(pool.len(), 1);

    // More concurrent commands than OpenSSH's MaxSessions (10) allows per connection: the
    // session queues them instead of failing.
    let ssh = sessions[0].clone();
    let many = (0..14).map(|i| {
        let ssh = ssh.clone();
        async move { ssh.exec(&format!("sleep 0.1; echo {i}")).await }
    });
    let outs = guarded("14 concurrent commands", futures::future::join_all(many)).await;
    for (i, out) in outs.into_iter().enumerate() {
        assert_eq!(out.unwrap().stdout_text().trim(), i.to_string());
    }
    assert_eq!(env.requests("openTunnel").await, 1);
    assert!(pool.remove(sb.id()).await);
    assert!(pool.is_empty());
    env.shutdown().await;
}

/// A TCP relay in front of the emulator whose connections can all be cut at once, like a
/// network failure between the client and the control plane.
struct CuttableProxy {
    addr: SocketAddr,
    relays: Arc<Mutex<Vec<AbortHandle>>>,
    accept: AbortHandle,
}

impl CuttableProxy {
    async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let relays: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let tracked = relays.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let relay = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                tracked.lock().unwrap().push(relay.abort_handle());
            }
        })
        .abort_handle();
        CuttableProxy {
            addr,
            relays,
            accept,
        }
    }

    fn cut_all(&self) -> usize {
        let relays = std::mem::take(&mut *self.relays.lock().unwrap());
        let live = relays.iter().filter(|r| !r.is_finished()).count();
        for relay in relays {
            relay.abort();
        }
        live
    }
}

impl Drop for CuttableProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut_all();
    }
}

/// Kill every sshd of this sandbox (those in its network namespace; other sandboxes run
/// sshd too) and wait until port 22 is free.
const KILL_SANDBOX_SSHD: &str = r#"me=$(readlink /proc/self/ns/net)
for d in /proc/[0-9]*; do
  [ "$(cat "$d/comm" 2>/dev/null)" = sshd ] || continue
  [ "$(readlink "$d/ns/net" 2>/dev/null)" = "$me" ] || continue
  kill "${d#/proc/}" 2>/dev/null
done
i=0
while grep -q ":0016 00000000:0000 0A" /proc/net/tcp; do i=$((i+1)); [ $i -lt 100 ] || exit 2; sleep 0.05; done
"#;

each_guest!(a_dropped_connection_is_reconnected_transparently);
async fn a_dropped_connection_is_reconnected_transparently(guest: Guest) {
    let env = guest.start().await;
    let proxy = CuttableProxy::start(env.mock.addr()).await;
    let client = common::client_for(&format!("http://{}", proxy.addr), &env.mock.api_key());
    let sb = client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pool = SshPool::new(options(&dir));
    let ssh = guarded("connect", pool.session(&sb)).await.unwrap();
    assert_eq!(
        ssh.exec("echo before").await.unwrap().stdout_text(),
        "before\n"
    );
    ssh.write_bytes("/root/kept.txt", "survives", WriteOptions::new())
        .await
        .unwrap();
    env.reset_stats().await;

    // Cut every connection, the tunnel carrying SSH included.
    assert!(proxy.cut_all() >= 1);
    let after = guarded("exec after the cut", ssh.exec("echo after"))
        .await
        .expect("reconnected");
    assert_eq!(after.stdout_text(), "after\n");
    assert_eq!(ssh.connects(), 2);
    assert_eq!(env.requests("openTunnel").await, 1, "one new tunnel");
    // SFTP comes back too.
    assert_eq!(
        ssh.read_to_vec("/root/kept.txt", 100).await.unwrap(),
        b"survives"
    );

    // And again, this time for SFTP first.
    proxy.cut_all();
    assert_eq!(
        guarded("sftp after the cut", ssh.stat("/root/kept.txt"))
            .await
            .unwrap()
            .size,
        8
    );
    assert_eq!(ssh.connects(), 3);
    // The session handed out by the pool is the same one.
    assert_eq!(pool.session(&sb).await.unwrap().connects(), 3);

    // sshd itself dies (every sshd of this sandbox, so our connection too): the reconnect
    // finds nothing listening on port 22, starts sshd again and goes on. The embedded server
    // is restarted instead (it runs from boot and cannot be started from the guest), which
    // drops every connection the same way.
    if embedded(&env) {
        env.mock_post(
            &format!("/_mock/sandboxes/{}/guest-sshd/restart", sb.id()),
            json!({}),
        )
        .await;
    } else {
        api_sh(&sb, KILL_SANDBOX_SSHD).await;
    }
    let revived = guarded("exec after sshd died", ssh.exec("echo revived"))
        .await
        .expect("sshd restarted");
    assert_eq!(revived.stdout_text(), "revived\n");
    assert_eq!(ssh.connects(), 4);
    env.shutdown().await;
}

// --------------------------------------------------------------------------- guest without sshd

#[tokio::test]
async fn a_sandbox_without_sshd_gives_a_clear_error() {
    let env = common::start_with(MockConfig::default().guest_sshd(GuestSshd::Absent)).await;
    let sb = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let err = guarded("connect", SshSession::connect(&sb, options(&dir)))
        .await
        .unwrap_err();
    match ssh_error(&err) {
        SshError::SshdMissing {
            sandbox_id,
            sshd_path,
        } => {
            assert_eq!(sandbox_id, sb.id());
            assert_eq!(sshd_path, "/usr/sbin/sshd");
        }
        other => panic!("expected SshdMissing, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains("devbox:1") && message.contains("/usr/sbin/sshd"),
        "{message}"
    );
    assert_eq!(env.requests("openTunnel").await, 0, "no tunnel was opened");
    env.shutdown().await;
}

#[tokio::test]
async fn a_guest_whose_sshd_already_listens_needs_no_sshd_binary() {
    // The embedded server listens from boot: the sshd path is never looked at.
    let env = Guest::Embedded.start().await;
    let sb = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let ssh = guarded(
        "connect",
        SshSession::connect(&sb, options(&dir).sshd_path("/usr/sbin/no-such-sshd")),
    )
    .await
    .expect("connects to the sshd that already listens");
    assert_eq!(ssh.exec("echo up").await.unwrap().stdout_text(), "up\n");
    env.shutdown().await;
}
