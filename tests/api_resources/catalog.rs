//! E1–E6: health, readiness, identity and catalogs.

use createos_sandbox::api::catalog::HostStatus;
use createos_sandbox::{Client, Error};

use crate::common;

#[tokio::test]
async fn healthz_and_readyz_answer_without_credentials() {
    let env = common::start().await;
    let anonymous = Client::builder()
        .base_url(env.base_url())
        .anonymous()
        .env(|_| None)
        .build()
        .unwrap();
    assert!(anonymous.healthz().await.unwrap().up);
    let ready = anonymous.readyz().await.unwrap();
    assert!(ready.ready);
    assert_eq!(ready.reason, None);
    assert_eq!(env.requests("healthz").await, 1);
    assert_eq!(env.requests("readyz").await, 1);
    env.shutdown().await;
}

#[tokio::test]
async fn readyz_503_is_a_verdict_sent_once() {
    let env = common::start().await;
    env.add_fault("GET /readyz status=503").await;
    let verdict = env
        .client
        .readyz()
        .await
        .expect("503 is a verdict, not an error");
    assert!(!verdict.ready);
    assert_eq!(verdict.reason.as_deref(), Some("service unavailable"));
    // A probe must not retry the answer it exists to report.
    assert_eq!(env.requests("readyz").await, 1);
    env.shutdown().await;
}

#[tokio::test]
async fn readyz_other_statuses_are_errors() {
    let env = common::start().await;
    env.add_fault("GET /readyz status=500").await;
    let err = env.client.readyz().await.unwrap_err();
    assert!(
        matches!(err, Error::Server(ref a) if a.status == 500),
        "{err:?}"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn whoami_counts_sandboxes() {
    let env = common::start().await;
    let before = env.client.whoami().await.unwrap();
    assert!(!before.user_id.is_empty());
    assert_eq!(before.stats.total, 0);
    let sandbox = crate::running_sandbox(&env).await;
    let paused = crate::running_sandbox(&env).await;
    paused.pause_and_wait().await.unwrap();
    let after = env.client.whoami().await.unwrap();
    assert_eq!(after.user_id, before.user_id);
    assert_eq!(
        (
            after.stats.running,
            after.stats.paused,
            after.stats.other,
            after.stats.total
        ),
        (1, 1, 0, 2)
    );
    sandbox.destroy().await.unwrap();
    paused.destroy().await.unwrap();
    env.shutdown().await;
}

#[tokio::test]
async fn shapes_rootfs_and_hosts() {
    let env = common::start().await;
    let shapes = env.client.list_shapes().collect_all().await.unwrap();
    let small = shapes
        .iter()
        .find(|s| s.id == "s-1vcpu-1gb")
        .expect("s-1vcpu-1gb listed");
    assert_eq!(
        (small.vcpu, small.mem_mib, small.default_disk_mib),
        (1, 1024, 10240)
    );
    assert!(shapes
        .iter()
        .all(|s| s.id.starts_with("s-") && s.vcpu > 0 && s.mem_mib > 0));
    let mut ids: Vec<_> = shapes.iter().map(|s| s.id.clone()).collect();
    ids.dedup();
    assert_eq!(ids.len(), shapes.len(), "each shape once");

    let catalog = env.client.rootfs().await.unwrap();
    assert_eq!(catalog.default, "devbox:1");
    assert!(catalog.rootfs.contains(&catalog.default));
    let entry = catalog.entry("devbox:1").expect("entry for the default");
    assert!(!entry.deprecated);
    assert!(entry.description.as_deref().is_some_and(|d| !d.is_empty()));
    assert!(catalog
        .entries
        .iter()
        .all(|e| catalog.rootfs.contains(&e.name)));

    let hosts = env.client.list_hosts().collect_all().await.unwrap();
    assert!(!hosts.is_empty());
    assert!(hosts.iter().all(|h| !h.id.is_empty()));
    assert!(hosts
        .iter()
        .any(|h| h.status == HostStatus::Active && h.free_mib > 0));
    env.shutdown().await;
}

#[tokio::test]
async fn whoami_needs_a_valid_key() {
    let env = common::start().await;
    let stranger = common::client_for(&env.base_url(), "skp_not_a_key");
    let err = stranger.whoami().await.unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "{err:?}");
    env.shutdown().await;
}
