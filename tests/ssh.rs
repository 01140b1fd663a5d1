//! The SSH layer against the emulator, with each guest sshd the emulator offers: the host's
//! real OpenSSH sshd started inside the sandbox (its own mount and network namespaces) when
//! the machine has `/usr/sbin/sshd` (CI installs openssh-server), and the emulator's
//! embedded SSH server. Reached through `/tunnel/22` or the emulator's SSH gateway.
//!
//! Every test that needs a guest sshd runs once per mode (`mod <test> { openssh, embedded }`).
//! The `openssh` run uses `GuestSshd::Auto`, i.e. real OpenSSH where the machine has it and
//! the embedded server elsewhere, so `cargo test` passes on a fresh machine too.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use createos_sandbox::api::exec::ExecRequest;
use createos_sandbox::ssh::{
    canonical_public_key, public_path, KnownHosts, RemoteFileKind, SshError, SshFiles, SshOptions, SshPool,
    SshSession, WriteOptions,
};
use createos_mock::{GuestSshd, MockConfig};
use createos_sandbox::{CreateSandbox, Error, Sandbox};
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// Bound on anything that could hang, so a broken connection fails the test.
const GUARD: Duration = Duration::from_secs(120);

/// Which guest sshd a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guest {
    /// Real OpenSSH when the machine has it (else the embedded server).
    OpenSsh,
    /// The emulator's embedded server, always.
    Embedded,
}

impl Guest {
    fn config(self) -> MockConfig {
        let mode = match self {
            Guest::OpenSsh => GuestSshd::Auto,
            Guest::Embedded => GuestSshd::Embedded,
        };
        MockConfig::default().guest_sshd(mode)
    }

    async fn start(self) -> common::Env {
        common::start_with(self.config()).await
    }
}

/// Whether `env`'s guests run the embedded server (rather than real OpenSSH).
fn embedded(env: &common::Env) -> bool {
    env.mock.state().guest_sshd.mode() == GuestSshd::Embedded
}

/// Runs the async test fn `$name(guest)` once per guest sshd mode.
macro_rules! each_guest {
    ($name:ident) => {
        mod $name {
            #[tokio::test]
            async fn openssh() {
                super::$name(super::Guest::OpenSsh).await
            }

            #[tokio::test]
            async fn embedded() {
                super::$name(super::Guest::Embedded).await
            }
        }
    };
}

fn options(dir: &tempfile::TempDir) -> SshOptions {
    SshOptions::new().files(SshFiles::at(dir.path())).connect_timeout(Duration::from_secs(60))
}

async fn sandbox(env: &common::Env) -> Sandbox {
    env.client.create_sandbox(CreateSandbox::new("s-1vcpu-1gb")).await.expect("create sandbox")
}

async fn guarded<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, fut).await.unwrap_or_else(|_| panic!("{what} did not finish within {GUARD:?}"))
}

/// Deterministic pseudo-random bytes (xorshift), so a mismatch is reproducible.
fn pattern(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        out.extend_from_slice(&seed.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn hex_sha256(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// Run a shell script in the sandbox through the exec API (not SSH).
async fn api_sh(sb: &Sandbox, script: &str) -> String {
    let out = sb.exec_with(ExecRequest::new("sh").args(["-c", script])).await.expect("exec API");
    assert!(out.success(), "script failed ({}): {}\n{}", out.exit_code, out.stderr, script);
    out.stdout
}

fn ssh_error(err: &Error) -> &SshError {
    err.ssh().unwrap_or_else(|| panic!("expected an SSH error, got {err:?}"))
}

// --------------------------------------------------------------------------- commands

each_guest!(exec_over_the_tunnel_keeps_streams_apart_and_reports_status);
async fn exec_over_the_tunnel_keeps_streams_apart_and_reports_status(guest: Guest) {
    let env = guest.start().await;
    let sb = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let ssh = guarded("connect", SshSession::connect(&sb, options(&dir))).await.expect("ssh connect");

    let out = guarded("exec", ssh.exec("echo out; echo err >&2; exit 7")).await.unwrap();
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
    assert_eq!(out.exit_status, Some(7));
    assert!(!out.success());
    assert_eq!(out.exit_signal, None);

    // The session runs inside this sandbox: its hostname, and its private /root.
    let name = sb.view().name.clone().expect("sandbox name");
    let host = ssh.exec("hostname").await.unwrap();
    assert_eq!(host.stdout_text().trim(), name);
    sb.write("/root/from-api.txt", "via the files API").await.unwrap();
    let cat = ssh.exec("cat /root/from-api.txt").await.unwrap();
    assert_eq!(cat.stdout_text(), "via the files API");

    // stdin, in memory and streamed.
    let upper = ssh.exec_with_stdin("tr a-z A-Z", "hello ssh").await.unwrap();
    assert_eq!(upper.stdout_text(), "HELLO SSH");
    assert!(upper.success());
    let big = pattern(3 << 20, 7);
    let digest = ssh.exec_with_stdin_stream("sha256sum", std::io::Cursor::new(big.clone())).await.unwrap();
    assert_eq!(digest.stdout_text().split_whitespace().next(), Some(hex_sha256(&big).as_str()));

    // A command that ignores its (large) stdin still ends.
    let ignored = guarded("exit without reading stdin", ssh.exec_with_stdin_stream("exit 3", std::io::Cursor::new(big)))
        .await
        .unwrap();
    assert_eq!(ignored.exit_status, Some(3));

    // stdout streamed into a writer; stderr kept apart.
    let mut sink = Vec::new();
    let exit = ssh.exec_to_writer("head -c 2000000 /dev/zero | tr '\\0' x; echo done >&2", &mut sink).await.unwrap();
    assert!(exit.success());
    assert_eq!(sink.len(), 2_000_000);
    assert!(sink.iter().all(|&b| b == b'x'));
    assert_eq!(exit.stderr, b"done\n");

    // A command killed by a signal.
    let killed = ssh.exec("kill -TERM $$").await.unwrap();
    assert_eq!(killed.exit_status, None);
    assert_eq!(killed.exit_signal.as_ref().map(|s| s.name.as_str()), Some("TERM"));

    // Bad input is refused before anything is sent.
    assert!(matches!(ssh.exec("  ").await, Err(Error::InvalidInput { .. })));
    env.shutdown().await;
}

each_guest!(dropping_a_command_stops_it_and_frees_its_channel);
async fn dropping_a_command_stops_it_and_frees_its_channel(guest: Guest) {
    let env = guest.start().await;
    let sb = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let ssh = guarded("connect", SshSession::connect(&sb, options(&dir))).await.expect("ssh connect");

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
            assert!(outcome.is_err(), "the endless command was abandoned by its caller: {outcome:?}");
        }
    }
    let probe = r#"n=0; for f in /root/pid-*; do n=$((n+1)); kill -0 "$(cat "$f")" 2>/dev/null && echo alive; done; echo files=$n"#;
    let mut report = String::new();
    for _ in 0..100 {
        report = guarded("probe", ssh.exec(probe)).await.expect("channels are free again").stdout_text().into_owned();
        if !report.contains("alive") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Under load a command may be abandoned before it even started; what matters is that every
    // one that did start was stopped (no "alive") and the channels are free again (the probe ran).
    assert!(!report.contains("alive"), "an abandoned command is still running: {report}");
    let started: u32 = report.trim().trim_start_matches("files=").parse().unwrap_or(0);
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
    let ssh = guarded("connect", SshSession::connect(&sb, options(&dir))).await.expect("ssh connect");

    let data = pattern(20 * 1024 * 1024 + 123, 42);
    let written = guarded(
        "20 MB upload",
        ssh.write_file("/root/up/big.bin", std::io::Cursor::new(data.clone()), WriteOptions::new().mode(0o640)),
    )
    .await
    .unwrap();
    assert_eq!(written, data.len() as u64);
    // The guest sees the same bytes.
    let guest_sum = ssh.exec("sha256sum /root/up/big.bin").await.unwrap();
    assert_eq!(guest_sum.stdout_text().split_whitespace().next(), Some(hex_sha256(&data).as_str()));
    // Streaming read back.
    let mut reader = ssh.read_file("/root/up/big.bin").await.unwrap();
    assert_eq!(reader.size(), Some(data.len() as u64));
    let mut back = Vec::new();
    guarded("20 MB download", reader.read_to_end(&mut back)).await.unwrap();
    assert_eq!(back.len(), data.len());
    assert_eq!(hex_sha256(&back), hex_sha256(&data));

    let meta = ssh.stat("/root/up/big.bin").await.unwrap();
    assert_eq!(meta.kind, RemoteFileKind::File);
    assert_eq!(meta.size, data.len() as u64);
    assert_eq!(meta.mode, 0o640);
    assert!(meta.modified.is_some());
    // The write was atomic: no temporary file is left next to the target.
    let names: Vec<String> = ssh.list("/root/up").await.unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, vec!["big.bin".to_string()]);

    // Replacing keeps the existing mode unless told otherwise.
    ssh.write_bytes("/root/up/big.bin", "small now", WriteOptions::new()).await.unwrap();
    let replaced = ssh.stat("/root/up/big.bin").await.unwrap();
    assert_eq!((replaced.size, replaced.mode), (9, 0o640));
    assert_eq!(ssh.read_to_vec("/root/up/big.bin", 1024).await.unwrap(), b"small now");
    assert!(matches!(ssh.read_to_vec("/root/up/big.bin", 4).await, Err(Error::InvalidInput { .. })));

    // mkdir -p, list, rename (replacing), remove.
    ssh.mkdir_p("/root/tree/a/b/c").await.unwrap();
    ssh.mkdir_p("/root/tree/a/b/c").await.unwrap();
    ssh.write_bytes("/root/tree/a/one.txt", "1", WriteOptions::new()).await.unwrap();
    ssh.write_bytes("/root/tree/a/two.txt", "22", WriteOptions::new()).await.unwrap();
    let listing = ssh.list("/root/tree/a").await.unwrap();
    let summary: Vec<(String, RemoteFileKind, u64)> =
        listing.iter().map(|e| (e.name.clone(), e.metadata.kind, e.metadata.size)).collect();
    assert_eq!(summary[0].0, "b");
    assert_eq!(summary[0].1, RemoteFileKind::Dir);
    assert_eq!(summary[1], ("one.txt".to_string(), RemoteFileKind::File, 1));
    assert_eq!(summary[2], ("two.txt".to_string(), RemoteFileKind::File, 2));
    ssh.rename("/root/tree/a/one.txt", "/root/tree/a/two.txt").await.unwrap();
    assert_eq!(ssh.read_to_vec("/root/tree/a/two.txt", 10).await.unwrap(), b"1");
    assert!(!ssh.exists("/root/tree/a/one.txt").await.unwrap());
    ssh.rename("/root/tree/a/b", "/root/tree/moved").await.unwrap();
    assert!(ssh.stat("/root/tree/moved/c").await.unwrap().is_dir());
    ssh.mkdir("/root/tree/single").await.unwrap();
    ssh.remove_dir("/root/tree/single").await.unwrap();
    ssh.remove_file("/root/tree/a/two.txt").await.unwrap();
    ssh.exec("ln -s /etc /root/tree/moved/c/link-to-etc").await.unwrap();
    assert_eq!(ssh.lstat("/root/tree/moved/c/link-to-etc").await.unwrap().kind, RemoteFileKind::Symlink);
    ssh.remove_dir_all("/root/tree").await.unwrap();
    assert!(!ssh.exists("/root/tree").await.unwrap());
    // The symlink was removed, not followed.
    assert!(ssh.stat("/etc/hostname").await.is_ok() || ssh.stat("/etc/passwd").await.is_ok());

    // Typed errors.
    let missing = ssh.stat("/root/nope").await.unwrap_err();
    assert!(ssh_error(&missing).is_not_found(), "{missing}");
    let err = ssh.read_file("/root/nope").await.unwrap_err();
    assert!(ssh_error(&err).is_not_found(), "{err}");
    assert!(matches!(ssh.mkdir("/root/no/parent").await, Err(Error::Ssh(_))));
    // Paths are validated before anything is sent.
    for bad in ["relative/path", "/root/../etc/passwd", ""] {
        assert!(matches!(ssh.stat(bad).await, Err(Error::InvalidInput { .. })), "{bad:?}");
    }
    assert!(matches!(ssh.remove_dir_all("/").await, Err(Error::InvalidInput { .. })));
    env.shutdown().await;
}

// --------------------------------------------------------------------------- keys and host keys

/// Kill the sshd listening on port 22 in this sandbox only (found through its socket inode,
/// never by name: other sandboxes run sshd too), then start one with a new host key.
const SWAP_HOST_KEY: &str = r#"set -e
rm -rf /root/newhostkey && mkdir -p /root/newhostkey
ssh-keygen -q -t ed25519 -N '' -f /root/newhostkey/key
inode=$(while read -r _ local _ state _ _ _ _ _ ino _; do
  case "$local" in *:0016) [ "$state" = 0A ] && echo "$ino" ;; esac
done < /proc/net/tcp | head -n 1)
[ -n "$inode" ] || { echo "no listener on :22" >&2; exit 1; }
for fd in /proc/[0-9]*/fd/*; do
  if [ "$(readlink "$fd" 2>/dev/null)" = "socket:[$inode]" ]; then
    pid=${fd#/proc/}; pid=${pid%%/*}; kill "$pid"
  fi
done
i=0
while grep -q ":0016 00000000:0000 0A" /proc/net/tcp; do i=$((i+1)); [ $i -lt 100 ] || exit 2; sleep 0.05; done
/usr/sbin/sshd -h /root/newhostkey/key
cat /root/newhostkey/key.pub
"#;

each_guest!(host_key_is_pinned_on_first_use_and_a_changed_key_is_refused);
async fn host_key_is_pinned_on_first_use_and_a_changed_key_is_refused(guest: Guest) {
    let env = guest.start().await;
    let sb = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let ssh = guarded("connect", SshSession::connect(&sb, options(&dir))).await.expect("ssh connect");

    // Pinned under the sandbox id, equal to the guest's host key.
    let known = KnownHosts::new(dir.path().join("known_hosts"));
    let text = std::fs::read_to_string(known.path()).unwrap();
    let line = text.lines().find(|l| l.starts_with(&format!("{} ", sb.id()))).expect("a pin for the sandbox");
    assert_eq!(line.split_whitespace().count(), 3, "{line}");
    let pinned = known.lookup(sb.id()).unwrap().expect("pinned key");
    let guest_pub = if embedded(&env) {
        let shown = env.mock_get(&format!("/_mock/sandboxes/{}/guest-sshd", sb.id())).await;
        shown["host_key"].as_str().expect("the embedded server's host key").to_string()
    } else {
        ssh.exec("cat /etc/ssh/ssh_host_ed25519_key.pub").await.unwrap().stdout_text().into_owned()
    };
    assert_eq!(
        canonical_public_key(&pinned.to_openssh().unwrap()),
        canonical_public_key(&guest_pub),
        "the pin is the guest's ed25519 host key"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(known.path()).unwrap().permissions().mode() & 0o777, 0o600);
    }
    // Reconnecting with the same key is fine.
    let again = guarded("reconnect", SshSession::connect(&sb, options(&dir))).await.unwrap();
    assert!(again.exec("true").await.unwrap().success());

    // The guest's host key changes (sshd restarted with another key).
    let new_pub = if embedded(&env) {
        let restarted =
            env.mock_post(&format!("/_mock/sandboxes/{}/guest-sshd/restart", sb.id()), json!({"new_host_key": true})).await;
        restarted["host_key"].as_str().expect("the new host key").to_string()
    } else {
        api_sh(&sb, SWAP_HOST_KEY).await
    };
    let err = guarded("connect after the change", SshSession::connect(&sb, options(&dir))).await.unwrap_err();
    match ssh_error(&err) {
        SshError::HostKeyChanged { host, pinned, offered, known_hosts } => {
            assert_eq!(host, sb.id());
            assert_ne!(pinned, offered);
            assert_eq!(known_hosts, known.path());
        }
        other => panic!("expected HostKeyChanged, got {other:?}"),
    }
    let message = err.to_string();
    assert!(message.contains("changed") && message.contains(&known.path().display().to_string()), "{message}");
    assert!(message.contains(&format!("`{} `", sb.id())), "the message says which line to delete: {message}");
    // The pin was not overwritten by the refused key.
    assert_eq!(known.lookup(sb.id()).unwrap().unwrap().key_data(), pinned.key_data());

    // Resetting the pin (what the message says to do) accepts the new key.
    assert!(known.forget(sb.id()).unwrap());
    let fresh = guarded("connect after reset", SshSession::connect(&sb, options(&dir))).await.unwrap();
    assert!(fresh.exec("true").await.unwrap().success());
    let repinned = known.lookup(sb.id()).unwrap().unwrap();
    assert_eq!(canonical_public_key(&repinned.to_openssh().unwrap()), canonical_public_key(&new_pub));
    env.shutdown().await;
}

each_guest!(keys_are_private_files_and_authorized_keys_is_appended_once);
async fn keys_are_private_files_and_authorized_keys_is_appended_once(guest: Guest) {
    let env = guest.start().await;
    let sb = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let ssh = guarded("connect", SshSession::connect(&sb, options(&dir))).await.expect("ssh connect");

    let files = SshFiles::at(dir.path());
    let key_path = files.key_path(sb.id());
    assert_eq!(ssh.key().path(), key_path);
    let public = std::fs::read_to_string(public_path(&key_path)).unwrap();
    assert_eq!(public.trim(), ssh.key().public_key_line());
    assert!(public.starts_with("ssh-ed25519 ") && public.trim().ends_with(&format!("createos-sandbox {}", sb.id())));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&key_path), 0o600);
        assert_eq!(mode(&public_path(&key_path)), 0o600);
        assert_eq!(mode(&files.keys_dir()), 0o700);
        assert_eq!(mode(dir.path()), 0o700);
    }
    // Registered with the control plane.
    let view = sb.refresh().await.unwrap();
    let ours = ssh.key().canonical_public_key().to_string();
    let registered = view.ssh_pubkeys.unwrap_or_default();
    assert_eq!(registered.iter().filter(|k| canonical_public_key(k).as_deref() == Some(ours.as_str())).count(), 1);

    let count_ours = |text: &str| text.lines().filter(|l| canonical_public_key(l).as_deref() == Some(ours.as_str())).count();
    let authorized = api_sh(&sb, "cat /root/.ssh/authorized_keys").await;
    assert_eq!(count_ours(&authorized), 1, "{authorized}");

    // Someone else's key in the file (no trailing newline), ours gone: the next connect
    // appends ours and keeps theirs.
    let theirs = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherKeyOtherKeyOtherKeyOtherKeyOtherKey0 someone@else";
    api_sh(&sb, &format!("printf '%s' '{theirs}' > /root/.ssh/authorized_keys")).await;
    env.reset_stats().await;
    for round in 0..2 {
        let dir_again = options(&dir);
        let session = guarded("connect", SshSession::connect(&sb, dir_again)).await.unwrap();
        assert!(session.exec("true").await.unwrap().success(), "round {round}");
        let authorized = api_sh(&sb, "cat /root/.ssh/authorized_keys").await;
        assert_eq!(count_ours(&authorized), 1, "round {round}: {authorized}");
        assert_eq!(authorized.lines().next(), Some(theirs), "round {round}: the other key is kept");
        assert_eq!(authorized.lines().count(), 2, "round {round}: {authorized}");
        let mode = api_sh(&sb, "stat -c %a /root/.ssh/authorized_keys /root/.ssh").await;
        assert_eq!(mode.split_whitespace().collect::<Vec<_>>(), vec!["600", "700"]);
    }
    // Already listed on the sandbox: not registered again.
    assert_eq!(env.requests("addSshPubkeys").await, 0);
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
            let out = ssh.exec(&format!("sleep 0.2; echo caller-{i}")).await.expect("exec");
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
    assert_eq!(env.requests("openTunnel").await, 1, "both callers share one tunnel");
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
        CuttableProxy { addr, relays, accept }
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
    let sb = client.create_sandbox(CreateSandbox::new("s-1vcpu-1gb")).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pool = SshPool::new(options(&dir));
    let ssh = guarded("connect", pool.session(&sb)).await.unwrap();
    assert_eq!(ssh.exec("echo before").await.unwrap().stdout_text(), "before\n");
    ssh.write_bytes("/root/kept.txt", "survives", WriteOptions::new()).await.unwrap();
    env.reset_stats().await;

    // Cut every connection, the tunnel carrying SSH included.
    assert!(proxy.cut_all() >= 1);
    let after = guarded("exec after the cut", ssh.exec("echo after")).await.expect("reconnected");
    assert_eq!(after.stdout_text(), "after\n");
    assert_eq!(ssh.connects(), 2);
    assert_eq!(env.requests("openTunnel").await, 1, "one new tunnel");
    // SFTP comes back too.
    assert_eq!(ssh.read_to_vec("/root/kept.txt", 100).await.unwrap(), b"survives");

    // And again, this time for SFTP first.
    proxy.cut_all();
    assert_eq!(guarded("sftp after the cut", ssh.stat("/root/kept.txt")).await.unwrap().size, 8);
    assert_eq!(ssh.connects(), 3);
    // The session handed out by the pool is the same one.
    assert_eq!(pool.session(&sb).await.unwrap().connects(), 3);

    // sshd itself dies (every sshd of this sandbox, so our connection too): the reconnect
    // finds nothing listening on port 22, starts sshd again and goes on. The embedded server
    // is restarted instead (it runs from boot and cannot be started from the guest), which
    // drops every connection the same way.
    if embedded(&env) {
        env.mock_post(&format!("/_mock/sandboxes/{}/guest-sshd/restart", sb.id()), json!({})).await;
    } else {
        api_sh(&sb, KILL_SANDBOX_SSHD).await;
    }
    let revived = guarded("exec after sshd died", ssh.exec("echo revived")).await.expect("sshd restarted");
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
    let err = guarded("connect", SshSession::connect(&sb, options(&dir))).await.unwrap_err();
    match ssh_error(&err) {
        SshError::SshdMissing { sandbox_id, sshd_path } => {
            assert_eq!(sandbox_id, sb.id());
            assert_eq!(sshd_path, "/usr/sbin/sshd");
        }
        other => panic!("expected SshdMissing, got {other:?}"),
    }
    let message = err.to_string();
    assert!(message.contains("devbox:1") && message.contains("/usr/sbin/sshd"), "{message}");
    assert_eq!(env.requests("openTunnel").await, 0, "no tunnel was opened");
    env.shutdown().await;
}

#[tokio::test]
async fn a_guest_whose_sshd_already_listens_needs_no_sshd_binary() {
    // The embedded server listens from boot: the sshd path is never looked at.
    let env = Guest::Embedded.start().await;
    let sb = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let ssh = guarded("connect", SshSession::connect(&sb, options(&dir).sshd_path("/usr/sbin/no-such-sshd")))
        .await
        .expect("connects to the sshd that already listens");
    assert_eq!(ssh.exec("echo up").await.unwrap().stdout_text(), "up\n");
    env.shutdown().await;
}

// --------------------------------------------------------------------------- the gateway route

/// A bare russh client that trusts any host key, to probe what the gateway refuses.
struct TrustAll;

impl russh::client::Handler for TrustAll {
    type Error = russh::Error;

    async fn check_server_key(&mut self, _key: &russh::keys::PublicKeyOrCertificate) -> Result<bool, Self::Error> {
        Ok(true)
    }
}

each_guest!(the_gateway_route_works_end_to_end_and_refuses_everything_else);
async fn the_gateway_route_works_end_to_end_and_refuses_everything_else(guest: Guest) {
    use tokio::io::AsyncWriteExt;

    let env = common::start_with(guest.config().ssh_gateway(true)).await;
    let gateway = env.mock.ssh_gateway_addr().expect("the emulator runs a gateway");
    let sb = sandbox(&env).await;
    let other = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let via_gateway = options(&dir).via_gateway(gateway.ip().to_string(), gateway.port());
    env.reset_stats().await;

    let ssh = guarded("connect via the gateway", SshSession::connect(&sb, via_gateway.clone())).await.expect("connect");
    let host = ssh.exec("hostname; echo err >&2; exit 4").await.unwrap();
    assert_eq!(host.stdout_text().trim(), sb.view().name.unwrap());
    assert_eq!((host.stderr_text().as_ref(), host.exit_status), ("err\n", Some(4)));
    let data = pattern(3 << 20, 99);
    ssh.write_file("/root/via-gateway.bin", std::io::Cursor::new(data.clone()), WriteOptions::new()).await.unwrap();
    let mut back = Vec::new();
    ssh.read_file("/root/via-gateway.bin").await.unwrap().read_to_end(&mut back).await.unwrap();
    assert_eq!(hex_sha256(&back), hex_sha256(&data));
    assert_eq!(env.requests("openTunnel").await, 0, "the gateway route does not use the tunnel");
    // Both hops are pinned: the gateway under [host]:port, the guest under the sandbox id.
    let known = KnownHosts::new(dir.path().join("known_hosts"));
    assert!(known.lookup(&format!("[{}]:{}", gateway.ip(), gateway.port())).unwrap().is_some());
    assert!(known.lookup(sb.id()).unwrap().is_some());

    // The gateway checks the key against the sandbox named as user: sandbox A's key does not
    // open sandbox B.
    let borrowed = tempfile::tempdir().unwrap();
    let borrowed_files = SshFiles::at(borrowed.path());
    std::fs::create_dir_all(borrowed_files.keys_dir()).unwrap();
    std::fs::copy(ssh.key().path(), borrowed_files.key_path(other.id())).unwrap();
    let refused = SshSession::connect(
        &other,
        SshOptions::new().files(borrowed_files).via_gateway(gateway.ip().to_string(), gateway.port()).prepare_guest(false),
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
    let mut raw = russh::client::connect(config, gateway, TrustAll).await.unwrap();
    let auth = raw
        .authenticate_publickey(sb.id(), russh::keys::PrivateKeyWithHashAlg::new(Arc::new(key), None))
        .await
        .unwrap();
    assert!(auth.success());
    assert!(matches!(raw.channel_open_session().await, Err(russh::Error::ChannelOpenFailure(_))));
    for (host, port) in [("127.0.0.1", 80), ("10.0.0.1", 22), ("example.com", 22)] {
        let opened = raw.channel_open_direct_tcpip(host, port, "127.0.0.1", 0).await;
        assert!(matches!(opened, Err(russh::Error::ChannelOpenFailure(_))), "{host}:{port} must be refused");
    }
    let channel = raw.channel_open_direct_tcpip("127.0.0.1", 22, "127.0.0.1", 0).await.expect("the one allowed forward");
    let mut stream = channel.into_stream();
    let mut banner = [0u8; 8];
    guarded("guest banner", stream.read_exact(&mut banner)).await.unwrap();
    assert_eq!(&banner, b"SSH-2.0-", "the forward reaches the guest sshd");
    stream.shutdown().await.unwrap();
    env.shutdown().await;
}
