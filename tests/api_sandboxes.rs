//! Sandboxes (E7–E17), egress and bandwidth (E34–E37), lifecycle waits, and OAuth sessions,
//! through the client against the emulator.

mod common;

use std::time::Duration;

use createos_sandbox::auth::Resolver;
use createos_sandbox::{
    Client, CreateSandbox, Error, ForkOptions, ListSandboxes, SandboxStatus, UpdateSandbox,
};
use futures::TryStreamExt;

#[tokio::test]
async fn create_get_list_and_find_by_ip() {
    let env = common::start().await;
    let c = &env.client;
    let sb = c
        .create_sandbox(
            CreateSandbox::new("s-1vcpu-1gb")
                .name("alpha")
                .env("MODE", "test")
                .egress(["pypi.org:443"])
                .auto_pause_after(600),
        )
        .await
        .unwrap();
    let v = sb.view();
    assert!(v.id.starts_with("sb-"), "{}", v.id);
    assert_eq!(v.status, SandboxStatus::Running);
    assert_eq!(v.name.as_deref(), Some("alpha"));
    assert_eq!(v.vcpu, 1);
    assert_eq!(v.mem_mib, 1024);
    assert_eq!(v.disk_mib, 10240);
    assert_eq!(v.shape.as_deref(), Some("s-1vcpu-1gb"));
    assert_eq!(v.rootfs.as_deref(), Some("devbox:1"));
    assert!(v.ip.is_some());

    let got = c.get_sandbox(sb.id()).await.unwrap().view();
    assert_eq!(
        got.envs,
        Some(vec!["MODE".to_string()]),
        "names only, never values"
    );
    assert_eq!(got.egress, Some(vec!["pypi.org:443".to_string()]));
    assert_eq!(got.auto_pause_after_seconds, Some(600));
    assert!(got.created_at.is_some() && got.running_at.is_some());

    let by_ip = c
        .get_sandbox_by_ip(got.ip.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(by_ip.id(), sb.id());

    let other = c
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb"))
        .await
        .unwrap();
    assert!(
        other.view().name.is_some_and(|n| n.contains('-')),
        "generated adjective-animal name"
    );
    let all: Vec<_> = c
        .list_sandboxes(ListSandboxes::default())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(all.len(), 2);
    other.destroy().await.unwrap();
    let running: Vec<_> = c
        .list_sandboxes(ListSandboxes {
            status: Some(SandboxStatus::Running),
        })
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        running.iter().map(|v| v.id.as_str()).collect::<Vec<_>>(),
        vec![sb.id()]
    );

    // A name clash among live sandboxes is a conflict.
    let clash = c
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb").name("alpha"))
        .await
        .unwrap_err();
    assert!(matches!(clash, Error::Conflict(_)), "{clash:?}");
    // A foreign tenant cannot see it.
    let (_, stranger) = env.new_tenant(true).await;
    assert!(stranger
        .get_sandbox(sb.id())
        .await
        .unwrap_err()
        .is_not_found());
    env.shutdown().await;
}

#[tokio::test]
async fn update_ingress_and_auto_pause() {
    let env = common::start().await;
    let sb = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb"))
        .await
        .unwrap();
    assert!(sb.view().ingress_url_template.is_none());
    let v = sb
        .update(UpdateSandbox {
            ingress_enabled: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(v.ingress_enabled);
    let template = v.ingress_url_template.clone().unwrap();
    assert!(template.contains("<port>"), "{template}");
    assert!(v.preview_url(8080).unwrap().contains("8080"));
    assert!(
        sb.view().ingress_enabled,
        "the handle's cache follows mutations"
    );

    let v = sb
        .update(UpdateSandbox {
            auto_pause_after_seconds: Some(120),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(v.auto_pause_after_seconds, Some(120));
    let v = sb
        .update(UpdateSandbox {
            disable_auto_pause: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(v.auto_pause_after_seconds, None);
    let v = sb
        .update(UpdateSandbox {
            ingress_enabled: Some(false),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(v.ingress_url_template.is_none());
    // Client-side refusals.
    assert!(matches!(
        sb.update(UpdateSandbox::default()).await.unwrap_err(),
        Error::InvalidInput { .. }
    ));
    let bad = UpdateSandbox {
        auto_pause_after_seconds: Some(10),
        ..Default::default()
    };
    assert!(matches!(
        sb.update(bad).await.unwrap_err(),
        Error::InvalidInput { .. }
    ));
    env.shutdown().await;
}

#[tokio::test]
async fn pause_resume_fork_destroy() {
    let env = common::start().await;
    let sb = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb").name("parent"))
        .await
        .unwrap();
    sb.exec("sh", ["-c", "echo kept > /root/state.txt"])
        .await
        .unwrap();

    // Fork of a running sandbox is refused.
    let err = sb.fork(ForkOptions::default()).await.unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err:?}");

    let v = sb.pause().await.unwrap();
    assert!(
        matches!(v.status, SandboxStatus::Pausing | SandboxStatus::Paused),
        "{}",
        v.status
    );
    let v = sb
        .wait_until_paused(Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(v.status, SandboxStatus::Paused);
    assert!(v.paused_at.is_some());
    // Pausing again is a no-op success; exec on a paused sandbox is a conflict.
    assert_eq!(sb.pause().await.unwrap().status, SandboxStatus::Paused);
    assert!(matches!(
        sb.exec("true", Vec::<String>::new()).await.unwrap_err(),
        Error::Conflict(_)
    ));

    let child = sb
        .fork(ForkOptions {
            envs: Some([("CHILD".to_string(), "1".to_string())].into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(child.view().forked_from.as_deref(), Some(sb.id()));
    let child_view = child
        .wait_until_running(Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(child_view.status, SandboxStatus::Running);
    let out = child.exec("cat", ["/root/state.txt"]).await.unwrap();
    assert_eq!(out.stdout, "kept\n", "the fork carries the parent's files");
    let paused_child = sb
        .fork(ForkOptions {
            start_paused: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    let pc = paused_child
        .wait_until_paused(Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(pc.status, SandboxStatus::Paused);

    let v = sb.resume().await.unwrap();
    assert!(
        matches!(v.status, SandboxStatus::Resuming | SandboxStatus::Running),
        "{}",
        v.status
    );
    let v = sb
        .wait_until_running(Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(v.last_resumed_at.is_some());
    assert_eq!(
        sb.resume().await.unwrap().status,
        SandboxStatus::Running,
        "already running: 200"
    );
    assert_eq!(
        sb.exec("cat", ["/root/state.txt"]).await.unwrap().stdout,
        "kept\n"
    );

    // Pause+wait and resume+wait in one call each (honouring X-Poll-After).
    assert_eq!(
        sb.pause_and_wait().await.unwrap().status,
        SandboxStatus::Paused
    );
    assert_eq!(
        sb.resume_and_wait().await.unwrap().status,
        SandboxStatus::Running
    );

    for s in [&sb, &child, &paused_child] {
        let d = s.destroy().await.unwrap();
        assert_eq!(d.id, s.id());
        assert!(matches!(
            d.status,
            SandboxStatus::Destroying | SandboxStatus::Destroyed
        ));
        let gone = s
            .wait_until_destroyed(Some(Duration::from_secs(30)))
            .await
            .unwrap();
        assert_eq!(gone.status, SandboxStatus::Destroyed);
        assert!(gone.destroyed_at.is_some());
        // Repeat deletes succeed; the row stays readable.
        assert_eq!(s.destroy().await.unwrap().status, SandboxStatus::Destroyed);
        assert_eq!(
            env.client.get_sandbox(s.id()).await.unwrap().status(),
            SandboxStatus::Destroyed
        );
    }
    assert_eq!(env.settled_live_sandboxes().await, 0);
    // Waiting for a state that can no longer come fails at once instead of timing out.
    let err = sb
        .wait_until_running(Some(Duration::from_secs(30)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    env.shutdown().await;
}

#[tokio::test]
async fn resize_and_ssh_keys() {
    let env = common::start().await;
    let sb = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb"))
        .await
        .unwrap();
    let r = sb.resize_disk(20480).await.unwrap();
    assert_eq!((r.id.as_str(), r.disk_mib), (sb.id(), 20480));
    assert_eq!(sb.view().disk_mib, 20480);
    let err = sb.resize_disk(10240).await.unwrap_err();
    assert!(
        matches!(err, Error::Validation(_) | Error::Conflict(_)),
        "shrinking is refused: {err:?}"
    );

    let k1 = ed25519_line(1, "one");
    let k2 = ed25519_line(2, "two");
    assert_eq!(
        sb.add_ssh_pubkeys(std::slice::from_ref(&k1))
            .await
            .unwrap()
            .count,
        1
    );
    assert_eq!(
        sb.add_ssh_pubkeys(&[k1.clone(), k2.clone()])
            .await
            .unwrap()
            .count,
        2,
        "deduplicated"
    );
    let keys = sb.refresh().await.unwrap().ssh_pubkeys.unwrap_or_default();
    assert_eq!(keys.len(), 2);
    env.shutdown().await;
}

/// A well-formed OpenSSH ed25519 public key line (the key bytes are arbitrary).
fn ed25519_line(seed: u8, comment: &str) -> String {
    use base64::Engine;
    let mut blob = Vec::new();
    for part in [&b"ssh-ed25519"[..], &[seed; 32][..]] {
        blob.extend_from_slice(&(part.len() as u32).to_be_bytes());
        blob.extend_from_slice(part);
    }
    format!(
        "ssh-ed25519 {} {comment}",
        base64::engine::general_purpose::STANDARD.encode(blob)
    )
}

#[tokio::test]
async fn egress_and_bandwidth() {
    let env = common::start().await;
    let sb = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb"))
        .await
        .unwrap();
    let e = sb.egress().await.unwrap();
    assert_eq!(e.id, sb.id());
    assert!(e.egress.is_empty(), "no rules: open");
    let rules = vec![
        "api.github.com".to_string(),
        "*.npmjs.org".to_string(),
        "10.0.0.0/8:443".to_string(),
    ];
    let e = sb.set_egress(&rules).await.unwrap();
    assert_eq!(e.egress, rules);
    assert_eq!(sb.egress().await.unwrap().egress, rules);
    assert!(sb.set_egress(&[]).await.unwrap().egress.is_empty());
    assert!(matches!(
        sb.set_egress(&["bad rule".into()]).await.unwrap_err(),
        Error::InvalidInput { .. }
    ));

    let b = sb.bandwidth().await.unwrap();
    assert_eq!(b.id, sb.id());
    assert_eq!(b.quota_bytes, 5 << 30);
    assert_eq!(b.remaining_bytes, b.quota_bytes - b.used_bytes);
    assert!(!b.capped);
    let b2 = sb.recharge_bandwidth(1 << 30).await.unwrap();
    assert_eq!(b2.quota_bytes, b.quota_bytes + (1 << 30), "recharges add");
    // Recharge is never resent after a reset (each call adds).
    env.add_fault("POST /v1/sandboxes/*/bandwidth/recharge reset when=after count=1")
        .await;
    assert!(sb.recharge_bandwidth(1).await.is_err());
    assert_eq!(env.handled("rechargeBandwidth").await, 2);
    env.shutdown().await;
}

#[tokio::test]
async fn oauth_session_is_refreshed_and_sent_as_access_token() {
    let env = common::start().await;
    // A stored session that expires within the 60 s skew: the first call refreshes it (the
    // issuer's new tokens live an hour).
    let session = env
        .mock_post("/_mock/oauth/sessions", serde_json::json!({}))
        .await;
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join(".createos");
    std::fs::create_dir_all(&dir).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let oauth = serde_json::json!({
        "access_token": session["access_token"],
        "refresh_token": session["refresh_token"],
        "expires_at": now + 30,
        "token_endpoint": session["token_endpoint"],
    });
    std::fs::write(dir.join(".oauth"), serde_json::to_vec(&oauth).unwrap()).unwrap();
    std::fs::write(dir.join(".token"), "skp_should_not_be_used").unwrap();
    let resolver = Resolver::new()
        .home(home.path().to_path_buf())
        .env(|_| None);
    let client = Client::builder()
        .base_url(env.base_url())
        .resolver(resolver)
        .env(|_| None)
        .build()
        .unwrap();
    assert_eq!(
        client.credentials().unwrap().kind(),
        createos_sandbox::CredentialKind::AccessToken
    );
    let me = client.whoami().await.unwrap();
    assert_eq!(
        me.user_id,
        env.client.whoami().await.unwrap().user_id,
        "same tenant as the session's key"
    );
    assert_eq!(env.stats().await["oauth_refreshes"], 1);
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join(".oauth")).unwrap()).unwrap();
    assert_ne!(
        saved["access_token"], session["access_token"],
        "the refreshed token was written back"
    );
    assert_ne!(
        saved["refresh_token"], session["refresh_token"],
        "the rotated refresh token was kept"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(".oauth"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
    }
    // Further calls reuse it without refreshing.
    client.whoami().await.unwrap();
    assert_eq!(env.stats().await["oauth_refreshes"], 1);
    env.shutdown().await;
}
