//! The embedded guest sshd (`MockConfig::guest_sshd(GuestSshd::Embedded)`), driven by a
//! plain russh client through `/tunnel/22`: exec, SFTP, authentication against the guest's
//! authorized_keys, host keys, pause and destroy. Also the `absent` mode and the
//! ssh-pubkeys merge into authorized_keys. Filesystem confinement is in `guest_sshd_fs.rs`.

mod common;
mod guest_ssh;

use std::sync::Arc;
use std::time::Duration;

use createos_mock::{GuestSshd, MockConfig};
use guest_ssh::{
    connect, embedded, guarded, key, login, open_sftp, pub_line, sandbox_with_key, tunnel, Client,
};
use russh::client::Handle;
use russh::keys::PrivateKeyWithHashAlg;
use russh::ChannelMsg;
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Debug, Default)]
struct Output {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    status: Option<u32>,
    signal: Option<String>,
}

async fn exec(ssh: &Handle<Client>, command: &str, stdin: &[u8]) -> Output {
    let channel = ssh.channel_open_session().await.unwrap();
    channel.exec(true, command).await.unwrap();
    let (mut read, write) = channel.split();
    // Input is sent while output is read: a command may end without reading it all.
    let pump = async {
        if !stdin.is_empty() {
            let _ = write.data(stdin).await;
        }
        let _ = write.eof().await;
    };
    let mut out = Output::default();
    let collect = async {
        while let Some(msg) = read.wait().await {
            match msg {
                ChannelMsg::Data { data } => out.stdout.extend_from_slice(&data),
                ChannelMsg::ExtendedData { data, ext: 1 } => out.stderr.extend_from_slice(&data),
                ChannelMsg::ExitStatus { exit_status } => out.status = Some(exit_status),
                ChannelMsg::ExitSignal { signal_name, .. } => {
                    out.signal = Some(format!("{signal_name:?}"))
                }
                ChannelMsg::Close => break,
                _ => {}
            }
        }
    };
    guarded("command", async {
        tokio::pin!(pump);
        tokio::pin!(collect);
        let mut pumped = false;
        loop {
            tokio::select! {
                _ = &mut pump, if !pumped => pumped = true,
                _ = &mut collect => break,
            }
        }
    })
    .await;
    out
}

fn hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn exec_reports_status_and_keeps_streams_apart() {
    let env = embedded().await;
    let k = key(1);
    let id = sandbox_with_key(&env, &k).await;
    let ssh = login(&env, &id, &k).await;

    let out = exec(&ssh, "echo out; echo err >&2; exit 7", b"").await;
    assert_eq!(
        (out.stdout.as_slice(), out.stderr.as_slice(), out.status),
        (&b"out\n"[..], &b"err\n"[..], Some(7))
    );
    // Runs inside the sandbox, in the user's home, like the exec API.
    let (api_host, _, _) = env.sh(&id, "hostname").await;
    let out = exec(&ssh, "hostname; pwd; echo $HOME", b"").await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{api_host}/root\n/root\n")
    );
    env.sh(&id, "echo from-exec-api > /root/shared.txt").await;
    assert_eq!(
        exec(&ssh, "cat /root/shared.txt", b"").await.stdout,
        b"from-exec-api\n"
    );
    // stdin, large enough to need flow control.
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let out = exec(&ssh, "sha256sum", &big).await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next(),
        Some(hex(&big).as_str())
    );
    // A command ending without reading its input still ends.
    assert_eq!(exec(&ssh, "exit 3", &big).await.status, Some(3));
    // Killed by a signal: exit-signal, no exit-status.
    let out = exec(&ssh, "kill -TERM $$", b"").await;
    assert_eq!((out.status, out.signal.as_deref()), (None, Some("TERM")));
    env.mock.shutdown().await;
}

#[tokio::test]
async fn closing_the_channel_kills_the_command() {
    let env = embedded().await;
    let k = key(2);
    let id = sandbox_with_key(&env, &k).await;
    let ssh = login(&env, &id, &k).await;
    let channel = ssh.channel_open_session().await.unwrap();
    channel
        .exec(true, "echo $$ > /root/pid; exec sleep 600")
        .await
        .unwrap();
    // Wait until the command runs.
    let mut pid = String::new();
    for _ in 0..500 {
        pid = env
            .sh(&id, "cat /root/pid 2>/dev/null")
            .await
            .0
            .trim()
            .to_string();
        if !pid.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!pid.is_empty(), "the command started");
    channel.close().await.unwrap();
    let mut alive = true;
    for _ in 0..500 {
        alive = env
            .sh(&id, &format!("kill -0 {pid} 2>/dev/null && echo alive"))
            .await
            .0
            .contains("alive");
        if !alive {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!alive, "the command was killed when its channel closed");
    env.mock.shutdown().await;
}

#[tokio::test]
async fn sftp_round_trip_and_file_operations() {
    let env = embedded().await;
    let k = key(3);
    let id = sandbox_with_key(&env, &k).await;
    let ssh = login(&env, &id, &k).await;
    let sftp = open_sftp(&ssh).await;

    let data: Vec<u8> = (0..5_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    sftp.create_dir("/root/up").await.unwrap();
    let mut file = sftp.create("/root/up/big.bin").await.unwrap();
    guarded("upload", file.write_all(&data)).await.unwrap();
    file.shutdown().await.unwrap();
    drop(file);
    // The guest sees the same bytes.
    let (sum, _, code) = env.sh(&id, "sha256sum /root/up/big.bin").await;
    assert_eq!(code, 0);
    assert_eq!(sum.split_whitespace().next(), Some(hex(&data).as_str()));
    let mut back = Vec::new();
    guarded("download", async {
        sftp.open("/root/up/big.bin")
            .await
            .unwrap()
            .read_to_end(&mut back)
            .await
    })
    .await
    .unwrap();
    assert_eq!(hex(&back), hex(&data));

    let meta = sftp.metadata("/root/up/big.bin").await.unwrap();
    assert_eq!(meta.size, Some(data.len() as u64));
    assert!(meta.is_regular());
    // setstat: mode and mtime.
    let mut change = russh_sftp::protocol::FileAttributes::empty();
    change.permissions = Some(0o640);
    change.mtime = Some(1_000_000_000);
    change.atime = Some(1_000_000_000);
    sftp.set_metadata("/root/up/big.bin", change).await.unwrap();
    let (stat, _, _) = env.sh(&id, "stat -c '%a %Y' /root/up/big.bin").await;
    assert_eq!(stat.trim(), "640 1000000000");

    // Listing, rename, symlinks (created in the guest: absolute targets are guest paths).
    sftp.create("/root/up/small.txt")
        .await
        .unwrap()
        .write_all(b"hi")
        .await
        .unwrap();
    let mut names: Vec<String> = sftp
        .read_dir("/root/up")
        .await
        .unwrap()
        .map(|e| e.file_name())
        .collect();
    names.sort();
    assert_eq!(names, vec!["big.bin".to_string(), "small.txt".to_string()]);
    sftp.rename("/root/up/small.txt", "/root/up/renamed.txt")
        .await
        .unwrap();
    assert!(!sftp.try_exists("/root/up/small.txt").await.unwrap());
    env.sh(&id, "ln -s /root/up /root/link-to-up").await;
    assert_eq!(
        sftp.read_link("/root/link-to-up").await.unwrap(),
        "/root/up"
    );
    assert!(sftp
        .symlink_metadata("/root/link-to-up")
        .await
        .unwrap()
        .is_symlink());
    assert!(
        sftp.metadata("/root/link-to-up").await.unwrap().is_dir(),
        "followed in the guest's view"
    );
    let mut through_link = String::new();
    sftp.open("/root/link-to-up/renamed.txt")
        .await
        .unwrap()
        .read_to_string(&mut through_link)
        .await
        .unwrap();
    assert_eq!(through_link, "hi");
    assert_eq!(
        sftp.canonicalize("/root/link-to-up/../up/./renamed.txt")
            .await
            .unwrap(),
        "/root/up/renamed.txt"
    );
    sftp.symlink("/root/up/renamed.txt", "/root/made-link")
        .await
        .unwrap();
    let (target, _, _) = env.sh(&id, "readlink /root/made-link").await;
    assert_eq!(target.trim(), "/root/up/renamed.txt");

    // Removal and typed errors.
    sftp.remove_file("/root/made-link").await.unwrap();
    sftp.remove_file("/root/up/renamed.txt").await.unwrap();
    sftp.remove_file("/root/up/big.bin").await.unwrap();
    sftp.remove_dir("/root/up").await.unwrap();
    let (left, _, _) = env.sh(&id, "ls -A /root | grep -c up; true").await;
    assert_eq!(
        left.trim(),
        "1",
        "only the symlink made in the guest is left: {left}"
    );
    assert!(sftp.metadata("/root/nope").await.is_err());
    assert!(sftp.create_dir("/root/no/parent").await.is_err());
    // Outside the sandbox's own directories and layers nothing is written; its /etc is its own
    // (when it is isolated), never the host's.
    assert!(sftp.create("/usr/bin/written-by-sftp").await.is_err());
    assert!(!std::path::Path::new("/usr/bin/written-by-sftp").exists());
    let etc = sftp.create("/etc/written-by-sftp").await;
    assert_eq!(
        etc.is_ok(),
        env.mock.isolation().isolated,
        "/etc is writable exactly when it is the sandbox's own"
    );
    drop(etc);
    assert!(!std::path::Path::new("/etc/written-by-sftp").exists());
    env.mock.shutdown().await;
}

#[tokio::test]
async fn only_keys_in_authorized_keys_log_in() {
    let env = embedded().await;
    let listed = key(4);
    let id = sandbox_with_key(&env, &listed).await;
    let stranger = key(5);
    let (mut handle, _) = connect(&env, &id).await;
    let auth = handle
        .authenticate_publickey(
            "root",
            PrivateKeyWithHashAlg::new(Arc::new(stranger.clone()), None),
        )
        .await
        .unwrap();
    assert!(!auth.success(), "a key not in authorized_keys is refused");
    // Another user's name is refused even with the listed key.
    let auth = handle
        .authenticate_publickey(
            "nobody",
            PrivateKeyWithHashAlg::new(Arc::new(listed.clone()), None),
        )
        .await
        .unwrap();
    assert!(!auth.success());

    // authorized_keys is read at each attempt: once the guest lists the stranger's key it works.
    env.sh(
        &id,
        &format!(
            "echo '{}' >> /root/.ssh/authorized_keys",
            pub_line(&stranger)
        ),
    )
    .await;
    let ssh = login(&env, &id, &stranger).await;
    assert_eq!(exec(&ssh, "echo in", b"").await.stdout, b"in\n");
    env.mock.shutdown().await;
}

#[tokio::test]
async fn the_host_key_is_stable_per_sandbox_and_restart_can_change_it() {
    let env = embedded().await;
    let k = key(6);
    let id = sandbox_with_key(&env, &k).await;
    let other = sandbox_with_key(&env, &k).await;
    let (_a, first) = connect(&env, &id).await;
    let (_b, second) = connect(&env, &id).await;
    assert_eq!(first, second, "same host key across reconnects");
    let (_c, others) = connect(&env, &other).await;
    assert_ne!(first, others, "each sandbox has its own host key");
    let shown: serde_json::Value = env
        .http
        .get(env.url(&format!("/_mock/sandboxes/{id}/guest-sshd")))
        .header("X-Api-Key", common::KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown["listening"], true);
    assert_eq!(
        shown["host_key"].as_str().unwrap(),
        first.to_openssh().unwrap()
    );

    // Pause and resume keep it too.
    assert_eq!(
        env.post_empty(&format!("/v1/sandboxes/{id}/pause"))
            .await
            .status,
        202
    );
    env.wait_status(&id, "paused").await;
    env.post_empty(&format!("/v1/sandboxes/{id}/resume")).await;
    env.wait_status(&id, "running").await;
    let (_d, after_resume) = connect(&env, &id).await;
    assert_eq!(first, after_resume);

    // A restart with a new key (like sshd restarted with another host key) ends sessions.
    let ssh = login(&env, &id, &k).await;
    let restarted: serde_json::Value = env
        .http
        .post(env.url(&format!("/_mock/sandboxes/{id}/guest-sshd/restart")))
        .header("X-Api-Key", common::KEY)
        .json(&json!({"new_host_key": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    guarded("old session closed", async {
        while !ssh.is_closed() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let (_e, changed) = connect(&env, &id).await;
    assert_ne!(first, changed);
    assert_eq!(
        restarted["host_key"].as_str().unwrap(),
        changed.to_openssh().unwrap()
    );
    env.mock.shutdown().await;
}

#[tokio::test]
async fn a_paused_sandbox_does_not_answer_until_resumed() {
    let env = embedded().await;
    let k = key(7);
    let id = sandbox_with_key(&env, &k).await;
    let ssh = login(&env, &id, &k).await;
    assert_eq!(exec(&ssh, "echo before", b"").await.stdout, b"before\n");
    env.post_empty(&format!("/v1/sandboxes/{id}/pause")).await;
    env.wait_status(&id, "paused").await;
    let mut command = Box::pin(exec(&ssh, "echo after", b""));
    let early = tokio::time::timeout(Duration::from_millis(300), &mut command).await;
    assert!(early.is_err(), "a paused sandbox's sshd answered");
    env.post_empty(&format!("/v1/sandboxes/{id}/resume")).await;
    let out = guarded("after resume", command).await;
    assert_eq!(out.stdout, b"after\n");
    env.mock.shutdown().await;
}

#[tokio::test]
async fn destroying_the_sandbox_closes_the_server_and_its_sessions() {
    let env = embedded().await;
    let k = key(8);
    let id = sandbox_with_key(&env, &k).await;
    let ssh = login(&env, &id, &k).await;
    assert!(exec(&ssh, "true", b"").await.status == Some(0));
    let sandbox = env.mock.state().sandboxes.get(&id).expect("the sandbox");
    assert!(
        createos_mock::process::netns::connect_loopback(sandbox.runtime().netns(), 22)
            .await
            .is_ok()
    );

    assert_eq!(env.delete(&format!("/v1/sandboxes/{id}")).await.status, 200);
    guarded("session closed", async {
        while !ssh.is_closed() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let mut refused = false;
    for _ in 0..200 {
        match createos_mock::process::netns::connect_loopback(sandbox.runtime().netns(), 22).await {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                refused = true;
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    assert!(
        refused,
        "nothing listens on the destroyed sandbox's port 22"
    );
    let shown: serde_json::Value = env
        .http
        .get(env.url(&format!("/_mock/sandboxes/{id}/guest-sshd")))
        .header("X-Api-Key", common::KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown["listening"], false);
    env.mock.shutdown().await;
}

#[tokio::test]
async fn direct_tcpip_reaches_the_sandbox_loopback() {
    let env = embedded().await;
    let k = key(9);
    let id = sandbox_with_key(&env, &k).await;
    let ssh = login(&env, &id, &k).await;
    let channel = ssh
        .channel_open_direct_tcpip("127.0.0.1", 22, "127.0.0.1", 0)
        .await
        .expect("forward to :22");
    let mut stream = channel.into_stream();
    let mut banner = [0u8; 8];
    guarded("banner", stream.read_exact(&mut banner))
        .await
        .unwrap();
    assert_eq!(&banner, b"SSH-2.0-");
    assert!(ssh
        .channel_open_direct_tcpip("10.1.2.3", 22, "127.0.0.1", 0)
        .await
        .is_err());
    env.mock.shutdown().await;
}

#[tokio::test]
async fn an_image_without_sshd_has_no_listener_and_no_binary() {
    let env = common::start_with(MockConfig::default().guest_sshd(GuestSshd::Absent)).await;
    let id = env.create(json!({})).await;
    let (out, _, code) = env.sh(&id, "test -e /usr/sbin/sshd && echo present; grep -c ':0016 00000000:0000 0A' /proc/net/tcp; true").await;
    assert_eq!(code, 0);
    assert_eq!(
        out.trim(),
        "0",
        "no sshd binary and nothing listening: {out}"
    );
    assert_eq!(
        tunnel(&env, &id).await.err(),
        Some(502),
        "the tunnel finds nothing on port 22"
    );
    env.mock.shutdown().await;
}

#[tokio::test]
async fn adding_ssh_pubkeys_merges_into_authorized_keys() {
    let env = embedded().await;
    let first = key(10);
    let id = sandbox_with_key(&env, &first).await;
    // A key the guest added on its own, without a trailing newline.
    let own = pub_line(&key(11));
    env.sh(
        &id,
        &format!("printf '%s' '{own} guest-added' >> /root/.ssh/authorized_keys"),
    )
    .await;
    let second = key(12);
    let r = env
        .post(
            &format!("/v1/sandboxes/{id}/ssh-pubkeys"),
            json!({"keys": [pub_line(&second), pub_line(&first)]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (text, _, _) = env.sh(&id, "cat /root/.ssh/authorized_keys").await;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[0], pub_line(&first));
    assert_eq!(lines[1], format!("{own} guest-added"));
    assert_eq!(lines[2], pub_line(&second));
    // Adding again changes nothing; both registered keys log in.
    env.post(
        &format!("/v1/sandboxes/{id}/ssh-pubkeys"),
        json!({"keys": [pub_line(&second)]}),
    )
    .await;
    assert_eq!(env.sh(&id, "cat /root/.ssh/authorized_keys").await.0, text);
    let ssh = login(&env, &id, &second).await;
    assert_eq!(exec(&ssh, "echo ok", b"").await.stdout, b"ok\n");
    env.mock.shutdown().await;
}
