//! Sandboxes are isolated from each other, and pause really freezes their processes.

mod common;

use std::time::Duration;

use common::start;
use createos_mock::isolation::IsolationKind;
use serde_json::json;

#[tokio::test]
async fn sandboxes_see_their_own_files() {
    let env = start().await;
    let a = env.create(json!({})).await;
    let b = env.create(json!({})).await;
    // Without namespaces only HOME is private, so use it there.
    let namespaces = env.mock.state().isolation.kind() == IsolationKind::Namespaces;
    let file = if namespaces { "/root/x" } else { "$HOME/x" };
    env.sh(&a, &format!("echo from-a > {file}")).await;
    env.sh(&b, &format!("echo from-b > {file}")).await;
    assert_eq!(env.sh(&a, &format!("cat {file}")).await.0, "from-a\n");
    assert_eq!(env.sh(&b, &format!("cat {file}")).await.0, "from-b\n");
    if namespaces {
        for dir in ["/tmp", "/work", "/workspace", "/home"] {
            env.sh(&a, &format!("echo a > {dir}/only-a")).await;
            let (_, _, code) = env.sh(&b, &format!("test -e {dir}/only-a")).await;
            assert_eq!(code, 1, "{dir} leaks between sandboxes");
        }
        let (host, _, _) = env.sh(&a, "hostname").await;
        let name = env.get(&format!("/v1/sandboxes/{a}")).await.data()["name"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(host.trim(), name);
    }
    env.mock.shutdown().await;
}

#[tokio::test]
async fn pause_freezes_and_destroy_kills() {
    let env = start().await;
    let id = env.create(json!({})).await;
    env.sh(&id, "setsid sh -c 'while true; do echo t >> $HOME/ticks; sleep 0.02; done' >/dev/null 2>&1 </dev/null &").await;
    let sandbox = env.mock.state().sandboxes.get(&id).unwrap();
    let ticks = sandbox.runtime().dir().join("root/ticks");
    let count = || {
        std::fs::read_to_string(&ticks)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    for _ in 0..200 {
        if count() > 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(count() > 2, "the loop runs");
    assert!(!sandbox.runtime().live_pids().is_empty());

    assert_eq!(
        env.post_empty(&format!("/v1/sandboxes/{id}/pause"))
            .await
            .status,
        202
    );
    env.wait_status(&id, "paused").await;
    // Let an iteration in flight finish, then the count must stay put.
    tokio::time::sleep(Duration::from_millis(60)).await;
    let frozen = count();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(count(), frozen, "a paused sandbox must not run");

    env.post_empty(&format!("/v1/sandboxes/{id}/resume")).await;
    env.wait_status(&id, "running").await;
    for _ in 0..200 {
        if count() > frozen {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(count() > frozen, "resume continues the loop");

    env.delete(&format!("/v1/sandboxes/{id}")).await;
    env.wait_status(&id, "destroyed").await;
    for _ in 0..200 {
        if sandbox.runtime().live_pids().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        sandbox.runtime().live_pids().is_empty(),
        "destroy kills every process"
    );
    assert!(
        !sandbox.runtime().dir().exists(),
        "destroy removes the files"
    );
    env.mock.shutdown().await;
}

#[tokio::test]
async fn fallback_mode_uses_process_groups() {
    let env = common::start_with(
        createos_mock::MockConfig::default().isolation(createos_mock::IsolationMode::None),
    )
    .await;
    assert_eq!(env.mock.state().isolation.kind(), IsolationKind::Fallback);
    let id = env.create(json!({})).await;
    let sandbox = env.mock.state().sandboxes.get(&id).unwrap();
    let (home, _, _) = env.sh(&id, "echo $HOME; pwd").await;
    let root = sandbox.runtime().dir().join("root").display().to_string();
    assert_eq!(home, format!("{root}\n{root}\n"));
    env.sh(&id, "sh -c 'while true; do echo t >> $HOME/ticks; sleep 0.02; done' >/dev/null 2>&1 </dev/null &").await;
    let ticks = sandbox.runtime().dir().join("root/ticks");
    let count = || {
        std::fs::read_to_string(&ticks)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    for _ in 0..200 {
        if count() > 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    env.post_empty(&format!("/v1/sandboxes/{id}/pause")).await;
    env.wait_status(&id, "paused").await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    let frozen = count();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(count(), frozen, "SIGSTOP freezes the group");
    env.delete(&format!("/v1/sandboxes/{id}")).await;
    env.wait_status(&id, "destroyed").await;
    for _ in 0..200 {
        if sandbox.runtime().live_pids().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(sandbox.runtime().live_pids().is_empty());
    env.mock.shutdown().await;
}
