//! Sandbox lifecycle and settings: create validation, pause/resume/fork/destroy,
//! list filters, by-ip, patch, resize, ssh keys, egress, bandwidth, idle auto-pause.

mod common;

use std::time::Duration;

use common::{start, start_with};
use createos_mock::MockConfig;
use serde_json::json;

#[tokio::test]
async fn create_validation() {
    let env = start().await;
    let cases = [
        (json!({}), 400, "shape"),
        (json!({"shape": "s-bad"}), 400, "shape"),
        (
            json!({"shape": "s-1vcpu-1gb", "rootfs": "centos:7"}),
            400,
            "rootfs",
        ),
        (
            json!({"shape": "s-1vcpu-1gb", "rootfs": "nothing:1"}),
            400,
            "rootfs",
        ),
        (
            json!({"shape": "s-1vcpu-1gb", "envs": {"1X": "v"}}),
            400,
            "envs",
        ),
        (
            json!({"shape": "s-1vcpu-1gb", "envs": {"A": "x".repeat(4097)}}),
            400,
            "envs",
        ),
        (
            json!({"shape": "s-1vcpu-1gb", "bandwidth_quota_bytes": 5}),
            400,
            "bandwidth_quota_bytes",
        ),
        (
            json!({"shape": "s-1vcpu-1gb", "auto_pause_after_seconds": 59}),
            400,
            "auto_pause_after_seconds",
        ),
        (
            json!({"shape": "s-1vcpu-1gb", "egress": ["http://bad"]}),
            400,
            "egress",
        ),
        (
            json!({"shape": "s-1vcpu-1gb", "networks": [{"id": "nope"}]}),
            400,
            "networks",
        ),
        (
            json!({"shape": "s-1vcpu-1gb", "disks": [{"disk_id": "nope", "mount_path": "/data"}]}),
            400,
            "disks",
        ),
    ];
    for (body, status, field) in cases {
        let r = env.post("/v1/sandboxes", body.clone()).await;
        assert_eq!(r.status, status, "{body}: {}", r.text);
        assert!(r.data().get(field).is_some(), "{body}: {}", r.text);
    }
    let envs: serde_json::Map<String, serde_json::Value> =
        (0..65).map(|i| (format!("V{i}"), json!("x"))).collect();
    assert_eq!(
        env.post(
            "/v1/sandboxes",
            json!({"shape": "s-1vcpu-1gb", "envs": envs})
        )
        .await
        .status,
        400
    );

    let r = env
        .post(
            "/v1/sandboxes",
            json!({"shape": "s-2vcpu-4gb", "name": "box-one", "envs": {"SECRET": "hunter2"}, "ingress_enabled": true,
                   "egress": ["*.example.com", "10.0.0.0/8:5432"], "auto_pause_after_seconds": 600}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.data();
    assert_eq!(
        (
            v["vcpu"].as_u64(),
            v["mem_mib"].as_u64(),
            v["disk_mib"].as_u64()
        ),
        (Some(2), Some(4096), Some(10240))
    );
    assert_eq!(v["envs"], json!(["SECRET"]));
    assert!(!r.text.contains("hunter2"), "env values are never returned");
    let template = v["ingress_url_template"].as_str().unwrap();
    assert!(template.contains("<port>") && template.starts_with("https://"));
    assert!(v["ip"].as_str().unwrap().starts_with("10."));
    assert_eq!(v["bandwidth_quota_bytes"], 5_368_709_120u64);
    let clash = env
        .post(
            "/v1/sandboxes",
            json!({"shape": "s-1vcpu-1gb", "name": "box-one"}),
        )
        .await;
    assert_eq!(clash.status, 409);
    assert_eq!(clash.data()["name"], "name already in use");
    env.mock.shutdown().await;
}

/// A client that hangs up while its create is in flight does not strand the sandbox in
/// `creating`: the spawn finishes and the sandbox runs (then the caller can find and destroy it).
#[tokio::test]
async fn a_create_whose_client_hangs_up_still_finishes() {
    let env = start_with(MockConfig::default().latencies(createos_mock::Latencies {
        create: Duration::from_millis(800),
        ..Default::default()
    }))
    .await;
    let request = env
        .http
        .post(env.url("/v1/sandboxes"))
        .header("X-Api-Key", common::KEY)
        .json(&json!({"shape": "s-1vcpu-1gb", "name": "hangs-up"}));
    let pending = tokio::spawn(request.send());
    // the sandbox is registered (and still creating) before the client gives up
    let id = loop {
        let list = env.get("/v1/sandboxes?status=creating").await;
        let found = list.data()["data"].as_array().and_then(|all| {
            all.iter()
                .find(|s| s["name"] == "hangs-up")
                .and_then(|s| s["id"].as_str().map(str::to_string))
        });
        if let Some(id) = found {
            break id;
        }
        assert!(
            !pending.is_finished(),
            "the create answered before it was seen creating"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    pending.abort();
    let _ = pending.await;
    env.wait_status(&id, "running").await;
    assert_eq!(env.delete(&format!("/v1/sandboxes/{id}")).await.status, 200);
    env.mock.shutdown().await;
}

#[tokio::test]
async fn pause_resume_fork_destroy() {
    let env = start().await;
    let id = env.create(json!({"envs": {"A": "1"}})).await;
    env.sh(&id, "echo parent > /root/note").await;
    assert_eq!(
        env.post_empty(&format!("/v1/sandboxes/{id}/fork"))
            .await
            .status,
        409,
        "running source"
    );
    assert_eq!(
        env.post_empty(&format!("/v1/sandboxes/{id}/resume"))
            .await
            .status,
        200,
        "already running"
    );

    let r = env.post_empty(&format!("/v1/sandboxes/{id}/pause")).await;
    assert_eq!(r.status, 202);
    assert_eq!(r.data()["status"], "pausing");
    assert_eq!(r.headers.get("x-poll-after").unwrap(), "1");
    env.wait_status(&id, "paused").await;
    assert_eq!(
        env.post_empty(&format!("/v1/sandboxes/{id}/pause"))
            .await
            .status,
        200
    );
    let r = env
        .post(&format!("/v1/sandboxes/{id}/exec"), json!({"cmd": "true"}))
        .await;
    assert_eq!(
        (r.status, r.data()["sandbox"].as_str()),
        (409, Some("sandbox is not running"))
    );

    let fork = env
        .post(
            &format!("/v1/sandboxes/{id}/fork"),
            json!({"envs": {"A": "2"}}),
        )
        .await;
    assert_eq!(fork.status, 200, "{}", fork.text);
    let child = fork.data()["id"].as_str().unwrap().to_string();
    assert_eq!(fork.data()["status"], "forking");
    assert_eq!(fork.data()["forked_from"], id.as_str());
    env.wait_status(&child, "running").await;
    assert_eq!(env.status_of(&id).await, "paused");
    let (out, err, code) = env.sh(&child, "cat /root/note; echo $A").await;
    assert_eq!((out.as_str(), err.as_str(), code), ("parent\n2\n", "", 0));

    let paused_child = env
        .post(
            &format!("/v1/sandboxes/{id}/fork"),
            json!({"start_paused": true}),
        )
        .await;
    let paused_child = paused_child.data()["id"].as_str().unwrap().to_string();
    env.wait_status(&paused_child, "paused").await;

    let r = env.post_empty(&format!("/v1/sandboxes/{id}/resume")).await;
    assert_eq!(
        (r.status, r.data()["status"].as_str()),
        (202, Some("resuming"))
    );
    env.wait_status(&id, "running").await;
    let view = env.get(&format!("/v1/sandboxes/{id}")).await;
    assert!(view.data()["last_resumed_at"].is_string() && view.data()["paused_at"].is_string());

    let list = env.get("/v1/sandboxes?status=paused").await;
    let ids: Vec<&str> = list.data()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![paused_child.as_str()]);

    // Paused rows go straight to destroyed; running ones pass through destroying.
    let r = env.delete(&format!("/v1/sandboxes/{paused_child}")).await;
    assert_eq!(r.data()["status"], "destroyed");
    let r = env.delete(&format!("/v1/sandboxes/{id}")).await;
    assert_eq!(r.data()["status"], "destroying");
    env.wait_status(&id, "destroyed").await;
    let again = env.delete(&format!("/v1/sandboxes/{id}")).await;
    assert_eq!(
        (again.status, again.data()["status"].as_str()),
        (200, Some("destroyed"))
    );
    let view = env.get(&format!("/v1/sandboxes/{id}")).await;
    assert!(view.data()["destroyed_at"].is_string());
    assert_eq!(
        env.post_empty(&format!("/v1/sandboxes/{id}/resume"))
            .await
            .status,
        409
    );
    // The name of a destroyed sandbox is free again.
    env.mock.shutdown().await;
}

#[tokio::test]
async fn resume_from_error_state() {
    let env = start().await;
    let id = env.create(json!({})).await;
    let forced = env
        .http
        .post(env.url(&format!("/_mock/sandboxes/{id}/status")))
        .header("X-Api-Key", common::KEY)
        .json(&json!({"status": "error"}))
        .send()
        .await
        .unwrap();
    assert_eq!(forced.status(), 200);
    assert_eq!(env.status_of(&id).await, "error");
    assert_eq!(
        env.post_empty(&format!("/v1/sandboxes/{id}/resume"))
            .await
            .status,
        202
    );
    env.wait_status(&id, "running").await;
    env.mock.shutdown().await;
}

#[tokio::test]
async fn settings_routes() {
    let env = start().await;
    let id = env.create(json!({})).await;
    let ip = env.get(&format!("/v1/sandboxes/{id}")).await.data()["ip"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        env.get(&format!("/v1/sandboxes/by-ip/{ip}")).await.data()["id"],
        id.as_str()
    );
    assert_eq!(env.get("/v1/sandboxes/by-ip/10.9.9.9").await.status, 404);

    let patch = |body: serde_json::Value| {
        let env = &env;
        let id = id.clone();
        async move {
            env.send(
                "PATCH",
                &format!("/v1/sandboxes/{id}"),
                Some(common::KEY),
                Some(body),
            )
            .await
        }
    };
    let r = patch(json!({"ingress_enabled": true, "auto_pause_after_seconds": 120})).await;
    assert!(r.data()["ingress_url_template"].is_string());
    assert_eq!(r.data()["auto_pause_after_seconds"], 120);
    let r = patch(json!({"ingress_enabled": false, "disable_auto_pause": true})).await;
    assert!(r.data().get("ingress_url_template").is_none());
    assert!(r.data().get("auto_pause_after_seconds").is_none());
    assert_eq!(
        patch(json!({"auto_pause_after_seconds": 90000}))
            .await
            .status,
        400
    );

    let r = env
        .post(
            &format!("/v1/sandboxes/{id}/resize"),
            json!({"disk_mib": 20480}),
        )
        .await;
    assert_eq!(r.data(), &json!({"id": id, "disk_mib": 20480}));
    assert_eq!(
        env.post(
            &format!("/v1/sandboxes/{id}/resize"),
            json!({"disk_mib": 10240})
        )
        .await
        .status,
        400
    );
    assert_eq!(
        env.post(
            &format!("/v1/sandboxes/{id}/resize"),
            json!({"disk_mib": 30000})
        )
        .await
        .status,
        400
    );

    let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f user@host";
    let r = env
        .post(
            &format!("/v1/sandboxes/{id}/ssh-pubkeys"),
            json!({"keys": [key, key]}),
        )
        .await;
    assert_eq!(r.data()["count"], 1);
    let (out, _, _) = env.sh(&id, "cat /root/.ssh/authorized_keys").await;
    assert_eq!(out.trim(), key);
    assert_eq!(
        env.post(
            &format!("/v1/sandboxes/{id}/ssh-pubkeys"),
            json!({"keys": ["nonsense"]})
        )
        .await
        .status,
        400
    );

    let put = |body: serde_json::Value| {
        let env = &env;
        let id = id.clone();
        async move {
            env.send(
                "PUT",
                &format!("/v1/sandboxes/{id}/egress"),
                Some(common::KEY),
                Some(body),
            )
            .await
        }
    };
    let r = put(
        json!({"egress": ["api.example.com:443", "*.github.com", "1.2.3.4", "10.0.0.0/8", "*"]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        env.get(&format!("/v1/sandboxes/{id}/egress")).await.data()["egress"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    assert_eq!(put(json!({"egress": ["bad rule!"]})).await.status, 400);
    assert_eq!(
        put(json!({"egress": null})).await.data()["egress"],
        json!([])
    );

    let bw = env.get(&format!("/v1/sandboxes/{id}/bandwidth")).await;
    assert_eq!(bw.data()["quota_bytes"], 5_368_709_120u64);
    assert_eq!(bw.data()["capped"], false);
    env.http
        .post(env.url(&format!("/_mock/sandboxes/{id}/bandwidth")))
        .header("X-Api-Key", common::KEY)
        .json(&json!({"used_bytes": 5_368_709_120u64 + 10}))
        .send()
        .await
        .unwrap();
    let bw = env.get(&format!("/v1/sandboxes/{id}/bandwidth")).await;
    assert_eq!(
        (
            bw.data()["capped"].as_bool(),
            bw.data()["remaining_bytes"].as_i64()
        ),
        (Some(true), Some(-10))
    );
    assert_eq!(
        env.post(
            &format!("/v1/sandboxes/{id}/bandwidth/recharge"),
            json!({"add_bytes": 0})
        )
        .await
        .status,
        400
    );
    let bw = env
        .post(
            &format!("/v1/sandboxes/{id}/bandwidth/recharge"),
            json!({"add_bytes": 1000}),
        )
        .await;
    assert_eq!(
        (
            bw.data()["capped"].as_bool(),
            bw.data()["remaining_bytes"].as_i64()
        ),
        (Some(false), Some(990))
    );
    env.mock.shutdown().await;
}

#[tokio::test]
async fn idle_sandboxes_auto_pause() {
    // One "second" of auto_pause_after_seconds lasts 2 ms here, so 60 s → 120 ms.
    let env = start_with(MockConfig::default().auto_pause_unit(Duration::from_millis(2))).await;
    let idle = env.create(json!({"auto_pause_after_seconds": 60})).await;
    let plain = env.create(json!({})).await;
    env.wait_status(&idle, "paused").await;
    assert_eq!(env.status_of(&plain).await, "running");
    env.mock.shutdown().await;
}
