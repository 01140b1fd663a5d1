//! Host-key pinning and key files of the SSH layer against the emulator, with each guest
//! sshd it offers (real OpenSSH where the machine has it, and the embedded server): the
//! guest's host key is pinned on first use and a changed one refused; the client's key
//! files are private and its key lands in authorized_keys exactly once.

mod common;
#[macro_use]
mod ssh_support;

use std::path::Path;

use createos_sandbox::ssh::{
    canonical_public_key, public_path, KnownHosts, SshError, SshFiles, SshSession,
};
use serde_json::json;

use ssh_support::{api_sh, embedded, guarded, options, sandbox, ssh_error, Guest};

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
    let ssh = guarded("connect", SshSession::connect(&sb, options(&dir)))
        .await
        .expect("ssh connect");

    // Pinned under the sandbox id, equal to the guest's host key.
    let known = KnownHosts::new(dir.path().join("known_hosts"));
    let text = std::fs::read_to_string(known.path()).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{} ", sb.id())))
        .expect("a pin for the sandbox");
    assert_eq!(line.split_whitespace().count(), 3, "{line}");
    let pinned = known.lookup(sb.id()).unwrap().expect("pinned key");
    let guest_pub = if embedded(&env) {
        let shown = env
            .mock_get(&format!("/_mock/sandboxes/{}/guest-sshd", sb.id()))
            .await;
        shown["host_key"]
            .as_str()
            .expect("the embedded server's host key")
            .to_string()
    } else {
        ssh.exec("cat /etc/ssh/ssh_host_ed25519_key.pub")
            .await
            .unwrap()
            .stdout_text()
            .into_owned()
    };
    assert_eq!(
        canonical_public_key(&pinned.to_openssh().unwrap()),
        canonical_public_key(&guest_pub),
        "the pin is the guest's ed25519 host key"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(known.path())
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o600
        );
    }
    // Reconnecting with the same key is fine.
    let again = guarded("reconnect", SshSession::connect(&sb, options(&dir)))
        .await
        .unwrap();
    assert!(again.exec("true").await.unwrap().success());

    // The guest's host key changes (sshd restarted with another key).
    let new_pub = if embedded(&env) {
        let restarted = env
            .mock_post(
                &format!("/_mock/sandboxes/{}/guest-sshd/restart", sb.id()),
                json!({"new_host_key": true}),
            )
            .await;
        restarted["host_key"]
            .as_str()
            .expect("the new host key")
            .to_string()
    } else {
        api_sh(&sb, SWAP_HOST_KEY).await
    };
    let err = guarded(
        "connect after the change",
        SshSession::connect(&sb, options(&dir)),
    )
    .await
    .unwrap_err();
    match ssh_error(&err) {
        SshError::HostKeyChanged {
            host,
            pinned,
            offered,
            known_hosts,
        } => {
            assert_eq!(host, sb.id());
            assert_ne!(pinned, offered);
            assert_eq!(known_hosts, known.path());
        }
        other => panic!("expected HostKeyChanged, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains("changed") && message.contains(&known.path().display().to_string()),
        "{message}"
    );
    assert!(
        message.contains(&format!("`{} `", sb.id())),
        "the message says which line to delete: {message}"
    );
    // The pin was not overwritten by the refused key.
    assert_eq!(
        known.lookup(sb.id()).unwrap().unwrap().key_data(),
        pinned.key_data()
    );

    // Resetting the pin (what the message says to do) accepts the new key.
    assert!(known.forget(sb.id()).unwrap());
    let fresh = guarded(
        "connect after reset",
        SshSession::connect(&sb, options(&dir)),
    )
    .await
    .unwrap();
    assert!(fresh.exec("true").await.unwrap().success());
    let repinned = known.lookup(sb.id()).unwrap().unwrap();
    assert_eq!(
        canonical_public_key(&repinned.to_openssh().unwrap()),
        canonical_public_key(&new_pub)
    );
    env.shutdown().await;
}

each_guest!(keys_are_private_files_and_authorized_keys_is_appended_once);
async fn keys_are_private_files_and_authorized_keys_is_appended_once(guest: Guest) {
    let env = guest.start().await;
    let sb = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let ssh = guarded("connect", SshSession::connect(&sb, options(&dir)))
        .await
        .expect("ssh connect");

    let files = SshFiles::at(dir.path());
    let key_path = files.key_path(sb.id());
    assert_eq!(ssh.key().path(), key_path);
    let public = std::fs::read_to_string(public_path(&key_path)).unwrap();
    assert_eq!(public.trim(), ssh.key().public_key_line());
    assert!(
        public.starts_with("ssh-ed25519 ")
            && public
                .trim()
                .ends_with(&format!("createos-sandbox {}", sb.id()))
    );
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
    assert_eq!(
        registered
            .iter()
            .filter(|k| canonical_public_key(k).as_deref() == Some(ours.as_str()))
            .count(),
        1
    );

    let count_ours = |text: &str| {
        text.lines()
            .filter(|l| canonical_public_key(l).as_deref() == Some(ours.as_str()))
            .count()
    };
    let authorized = api_sh(&sb, "cat /root/.ssh/authorized_keys").await;
    assert_eq!(count_ours(&authorized), 1, "{authorized}");

    // Someone else's key in the file (no trailing newline), ours gone: the next connect
    // appends ours and keeps theirs.
    let theirs = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherKeyOtherKeyOtherKeyOtherKeyOtherKey0 someone@else";
    api_sh(
        &sb,
        &format!("printf '%s' '{theirs}' > /root/.ssh/authorized_keys"),
    )
    .await;
    env.reset_stats().await;
    for round in 0..2 {
        let dir_again = options(&dir);
        let session = guarded("connect", SshSession::connect(&sb, dir_again))
            .await
            .unwrap();
        assert!(
            session.exec("true").await.unwrap().success(),
            "round {round}"
        );
        let authorized = api_sh(&sb, "cat /root/.ssh/authorized_keys").await;
        assert_eq!(count_ours(&authorized), 1, "round {round}: {authorized}");
        assert_eq!(
            authorized.lines().next(),
            Some(theirs),
            "round {round}: the other key is kept"
        );
        assert_eq!(authorized.lines().count(), 2, "round {round}: {authorized}");
        let mode = api_sh(&sb, "stat -c %a /root/.ssh/authorized_keys /root/.ssh").await;
        assert_eq!(
            mode.split_whitespace().collect::<Vec<_>>(),
            vec!["600", "700"]
        );
    }
    // Already listed on the sandbox: not registered again.
    assert_eq!(env.requests("addSshPubkeys").await, 0);
    env.shutdown().await;
}
