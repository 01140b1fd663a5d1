//! Disk attach and detach reach an isolated sandbox's processes that are already running,
//! as on a VM: a shell loop started before the attach sees the disk (through its own
//! redirections and the children it starts afterwards), and no longer sees it after the
//! detach.

mod common;

use std::time::Duration;

use common::{start_with, Env, KEY};
use createos_mock::{IsolationMode, MockConfig};
use serde_json::{json, Value};

/// Emulators started by this binary share one process id: one test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn disk_body(name: &str) -> Value {
    json!({"name": name, "kind": "s3",
           "config": {"bucket": "live-data", "endpoint": "https://s3.example.com", "region": "eu-1"},
           "credentials": {"access_key": "AKIAEXAMPLE", "secret_key": "very-secret-value"}})
}

/// What the watcher of `watcher_script` last wrote (empty while it has not yet).
async fn seen(env: &Env, id: &str) -> String {
    env.sh(id, "cat /tmp/seen 2>/dev/null")
        .await
        .0
        .trim()
        .to_string()
}

/// Polls the watcher's report until it is `want` (panics after ~15 s).
async fn wait_seen(env: &Env, id: &str, want: &str) {
    let mut last = String::new();
    for _ in 0..750 {
        last = seen(env, id).await;
        if last == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the running watcher never reported {want:?} (last {last:?})");
}

/// A long-running shell that reports, over and over, what it reads at each path: once
/// with its own redirection (no new process) and once through a `cat` it starts then.
fn watcher_script(paths: &[&str]) -> String {
    format!(
        "echo $$ > /tmp/watcher.pid; while :; do out=; for p in {}; do \
         if read -r v 2>/dev/null < \"$p\"; then own=$v; else own=absent; fi; \
         child=$(cat \"$p\" 2>/dev/null || printf absent); out=\"$out$own:$child|\"; done; \
         printf '%s\\n' \"$out\" > /tmp/seen.new; mv /tmp/seen.new /tmp/seen; sleep 0.02; done",
        paths.join(" ")
    )
}

async fn isolated_env() -> Env {
    let env = start_with(MockConfig::default().isolation(IsolationMode::Namespaces)).await;
    assert!(
        env.mock.state().isolation.is_isolated(),
        "this test needs isolated sandboxes (root, bubblewrap)"
    );
    env
}

async fn wait_mounted(env: &Env, id: &str) {
    for _ in 0..500 {
        let list = env.get(&format!("/v1/sandboxes/{id}/disks")).await;
        let rows = list.data()["data"].as_array().cloned().unwrap_or_default();
        if !rows.is_empty() && rows.iter().all(|r| r["mount_status"] == "mounted") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("disks of {id} never mounted");
}

async fn file_status(env: &Env, id: &str, path: &str) -> (u16, String) {
    let url = env.url(&format!("/v1/sandboxes/{id}/files?path={path}"));
    let r = common::reply(
        env.http
            .get(url)
            .header("X-Api-Key", KEY)
            .send()
            .await
            .unwrap(),
    )
    .await;
    (r.status, r.text)
}

/// Registers the disk `name`, creates a sandbox without disks and starts the watcher of
/// `paths` in it; returns (disk id, sandbox id).
async fn disk_and_watcher(env: &Env, name: &str, paths: &[&str]) -> (String, String) {
    let r = env.post("/v1/disks", disk_body(name)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let disk_id = r.data()["id"].as_str().unwrap().to_string();
    let id = env.create(json!({})).await;
    let script = watcher_script(paths);
    let watcher = env
        .post(
            &format!("/v1/sandboxes/{id}/processes"),
            json!({"cmd": "sh", "args": ["-c", script]}),
        )
        .await;
    assert_eq!(watcher.status, 200, "{}", watcher.text);
    (disk_id, id)
}

#[tokio::test]
async fn running_processes_see_attach_and_detach() {
    let _serial = SERIAL.lock().await;
    let env = isolated_env().await;
    // Started before any attach: outside the private dirs and inside one.
    let (disk_id, a) =
        disk_and_watcher(&env, "live", &["/mnt/live/note.txt", "/root/data/note.txt"]).await;
    wait_seen(&env, &a, "absent:absent|absent:absent|").await;
    let watcher_pid = env
        .sh(&a, "cat /tmp/watcher.pid")
        .await
        .0
        .trim()
        .to_string();

    for path in ["/mnt/live", "/root/data"] {
        let r = env
            .post(
                &format!("/v1/sandboxes/{a}/disks"),
                json!({"disk_id": disk_id, "mount_path": path}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    wait_mounted(&env, &a).await;
    let (_, _, code) = env.sh(&a, "echo live-note > /mnt/live/note.txt").await;
    assert_eq!(code, 0);
    wait_seen(&env, &a, "live-note:live-note|live-note:live-note|").await;
    assert_eq!(
        file_status(&env, &a, "/root/data/note.txt").await,
        (200, "live-note\n".to_string())
    );

    // Detach one: the running watcher loses it at once, the other stays.
    let r = env
        .delete(&format!(
            "/v1/sandboxes/{a}/disks/{disk_id}?mount_path=/mnt/live"
        ))
        .await;
    assert_eq!(r.data()["detached"], true, "{}", r.text);
    wait_seen(&env, &a, "absent:absent|live-note:live-note|").await;
    assert_ne!(env.sh(&a, "cat /mnt/live/note.txt").await.2, 0);
    assert_eq!(file_status(&env, &a, "/mnt/live/note.txt").await.0, 404);
    let r = env
        .delete(&format!(
            "/v1/sandboxes/{a}/disks/{disk_id}?mount_path=/root/data"
        ))
        .await;
    assert_eq!(r.data()["detached"], true, "{}", r.text);
    wait_seen(&env, &a, "absent:absent|absent:absent|").await;
    assert_eq!(file_status(&env, &a, "/root/data/note.txt").await.0, 404);

    // The same watcher ran throughout, and the disk kept its data.
    assert_eq!(
        env.sh(&a, "cat /tmp/watcher.pid").await.0.trim(),
        watcher_pid
    );
    let b = env
        .create(json!({"disks": [{"disk_id": disk_id, "mount_path": "/mnt/live"}]}))
        .await;
    assert_eq!(env.sh(&b, "cat /mnt/live/note.txt").await.0, "live-note\n");
    for id in [&a, &b] {
        env.delete(&format!("/v1/sandboxes/{id}")).await;
        env.wait_status(id, "destroyed").await;
    }
    env.mock.shutdown().await;
}

#[tokio::test]
async fn nested_disks_follow_live_changes() {
    let _serial = SERIAL.lock().await;
    let env = isolated_env().await;
    let (disk_id, a) = disk_and_watcher(&env, "outer", &["/mnt/nest/inner/mark.txt"]).await;
    wait_seen(&env, &a, "absent:absent|").await;

    // The inner disk first (a sub-directory of the bucket), then the outer one over it:
    // the deeper disk stays on top, as when a sandbox starts with both.
    let inner = json!({"disk_id": disk_id, "mount_path": "/mnt/nest/inner", "sub_path": "sub"});
    assert_eq!(
        env.post(&format!("/v1/sandboxes/{a}/disks"), inner)
            .await
            .status,
        200
    );
    wait_mounted(&env, &a).await;
    assert_eq!(
        env.sh(&a, "echo inner-mark > /mnt/nest/inner/mark.txt")
            .await
            .2,
        0
    );
    wait_seen(&env, &a, "inner-mark:inner-mark|").await;
    let outer = json!({"disk_id": disk_id, "mount_path": "/mnt/nest"});
    assert_eq!(
        env.post(&format!("/v1/sandboxes/{a}/disks"), outer)
            .await
            .status,
        200
    );
    wait_mounted(&env, &a).await;
    // The outer disk is the bucket's root: the inner one is its `sub/`.
    assert_eq!(
        env.sh(&a, "cat /mnt/nest/sub/mark.txt").await.0,
        "inner-mark\n"
    );
    assert_eq!(
        env.sh(&a, "cat /mnt/nest/inner/mark.txt").await.0,
        "inner-mark\n"
    );
    wait_seen(&env, &a, "inner-mark:inner-mark|").await;

    // Detaching the outer disk keeps the inner one.
    let r = env
        .delete(&format!(
            "/v1/sandboxes/{a}/disks/{disk_id}?mount_path=/mnt/nest"
        ))
        .await;
    assert_eq!(r.data()["detached"], true, "{}", r.text);
    assert_ne!(env.sh(&a, "cat /mnt/nest/sub/mark.txt").await.2, 0);
    assert_eq!(
        env.sh(&a, "cat /mnt/nest/inner/mark.txt").await.0,
        "inner-mark\n"
    );
    wait_seen(&env, &a, "inner-mark:inner-mark|").await;
    let r = env
        .delete(&format!(
            "/v1/sandboxes/{a}/disks/{disk_id}?mount_path=/mnt/nest/inner"
        ))
        .await;
    assert_eq!(r.data()["detached"], true, "{}", r.text);
    wait_seen(&env, &a, "absent:absent|").await;
    env.delete(&format!("/v1/sandboxes/{a}")).await;
    env.wait_status(&a, "destroyed").await;
    env.mock.shutdown().await;
}
