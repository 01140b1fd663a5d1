//! Networks, disks, templates, devices/VPN and metrics.

mod common;

use std::time::Duration;

use common::{start, start_with, KEY};
use createos_mock::MockConfig;
use futures::StreamExt;
use serde_json::{json, Value};

#[tokio::test]
async fn networks_members_and_delete_rules() {
    let env = start().await;
    let net = env.post("/v1/networks", json!({"name": "backend"})).await;
    assert_eq!(net.status, 200, "{}", net.text);
    assert_eq!(net.data()["member_count"], 0);
    let net_id = net.data()["id"].as_str().unwrap().to_string();
    assert!(net_id.starts_with("net-"));
    assert_eq!(
        env.post("/v1/networks", json!({"name": "backend"}))
            .await
            .status,
        409
    );

    let a = env.create(json!({"networks": [{"id": "backend"}]})).await;
    let b = env.create(json!({})).await;
    assert_eq!(
        env.post(
            &format!("/v1/sandboxes/{b}/networks"),
            json!({"id": net_id})
        )
        .await
        .data()["ok"],
        true
    );
    let detail = env.get("/v1/networks/backend").await;
    let members: Vec<&str> = detail.data()["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["sandbox_id"].as_str().unwrap())
        .collect();
    assert_eq!(members, vec![a.as_str(), b.as_str()]);
    assert_eq!(
        env.get("/v1/networks").await.data()["data"][0]["member_count"],
        2
    );

    let r = env.delete("/v1/networks/backend").await;
    assert_eq!(
        (r.status, r.data()["network"].as_str()),
        (409, Some("network has active members"))
    );
    assert_eq!(
        env.delete(&format!("/v1/sandboxes/{a}/networks/backend"))
            .await
            .status,
        200
    );
    assert_eq!(
        env.delete(&format!("/v1/sandboxes/{a}/networks/backend"))
            .await
            .status,
        404
    );
    env.delete(&format!("/v1/sandboxes/{b}")).await;
    env.wait_status(&b, "destroyed").await;
    assert_eq!(
        env.delete(&format!("/v1/networks/{net_id}")).await.data()["ok"],
        true
    );
    assert_eq!(env.get("/v1/networks/backend").await.status, 404);
    env.mock.shutdown().await;
}

fn disk_body(name: &str) -> Value {
    json!({"name": name, "kind": "s3",
           "config": {"bucket": "team-data", "endpoint": "https://s3.example.com", "region": "eu-1"},
           "credentials": {"access_key": "AKIAEXAMPLE", "secret_key": "very-secret-value"}})
}

#[tokio::test]
async fn disks_register_attach_and_share_data() {
    let env = start().await;
    let r = env.post("/v1/disks", disk_body("shared")).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(!r.text.contains("very-secret-value") && !r.text.contains("AKIAEXAMPLE"));
    let disk_id = r.data()["id"].as_str().unwrap().to_string();
    assert_eq!(env.post("/v1/disks", disk_body("shared")).await.status, 409);
    let mut bad = disk_body("other");
    bad["config"]["endpoint"] = json!("s3.example.com");
    assert_eq!(env.post("/v1/disks", bad).await.status, 400);
    let mut bad = disk_body("Bad_Name");
    bad["config"]["bucket"] = json!("ok-bucket");
    assert_eq!(env.post("/v1/disks", bad).await.status, 400);

    let a = env.create(json!({})).await;
    let b = env
        .create(json!({"disks": [{"disk_id": disk_id, "mount_path": "/root/data"}]}))
        .await;
    let r = env
        .post(
            &format!("/v1/sandboxes/{a}/disks"),
            json!({"disk_id": "shared", "mount_path": "/root/data"}),
        )
        .await;
    assert_eq!(r.data(), &json!({"ok": true, "id": a}));
    assert_eq!(
        env.post(
            &format!("/v1/sandboxes/{a}/disks"),
            json!({"disk_id": "shared", "mount_path": "/root/data"})
        )
        .await
        .status,
        409
    );
    for _ in 0..200 {
        let list = env.get(&format!("/v1/sandboxes/{a}/disks")).await;
        if list.data()["data"][0]["mount_status"] == "mounted" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let list = env.get(&format!("/v1/sandboxes/{a}/disks")).await;
    assert_eq!(list.data()["data"][0]["mount_status"], "mounted");
    assert_eq!(list.data()["data"][0]["name"], "shared");

    env.sh(&a, "echo shared-bytes > /root/data/file.txt").await;
    assert_eq!(
        env.sh(&b, "cat /root/data/file.txt").await.0,
        "shared-bytes\n"
    );

    assert_eq!(env.delete("/v1/disks/shared").await.status, 409);
    let r = env
        .delete(&format!(
            "/v1/sandboxes/{a}/disks/{disk_id}?mount_path=/root/data"
        ))
        .await;
    assert_eq!(r.data()["detached"], true);
    assert_eq!(
        env.delete(&format!(
            "/v1/sandboxes/{a}/disks/{disk_id}?mount_path=/root/data"
        ))
        .await
        .status,
        404
    );
    env.delete(&format!("/v1/sandboxes/{b}")).await;
    env.wait_status(&b, "destroyed").await;
    assert_eq!(env.delete("/v1/disks/shared").await.data()["deleted"], true);
    env.mock.shutdown().await;

    let off = start_with(MockConfig::default().disks_configured(false)).await;
    let r = off.get("/v1/disks").await;
    assert_eq!(
        (r.status, r.body["message"].as_str()),
        (503, Some("disks API not configured"))
    );
    off.mock.shutdown().await;
}

async fn wait_template(env: &common::Env, id: &str) -> Value {
    for _ in 0..500 {
        let t = env.get(&format!("/v1/templates/{id}")).await;
        let status = t.data()["status"].as_str().unwrap_or("").to_string();
        if status == "ready" || status == "failed" {
            return t.data().clone();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("template {id} never finished");
}

#[tokio::test]
async fn templates_build_logs_and_rootfs() {
    let env = start().await;
    let dockerfile = "FROM nodeops/sandbox:debian\nRUN apt-get update && \\\n    apt-get install -y jq\nENV A=b\n";
    let r = env
        .post(
            "/v1/templates",
            json!({"name": "tools", "dockerfile": dockerfile}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.data()["status"], "pending");
    let id = r.data()["id"].as_str().unwrap().to_string();

    // Following the log streams every step and ends with the terminal frame.
    let resp = env
        .http
        .get(env.url(&format!("/v1/templates/{id}/logs?follow=true")))
        .header("X-Api-Key", KEY)
        .send()
        .await
        .unwrap();
    let mut text = String::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(events.iter().any(|e| e["line"]
        .as_str()
        .is_some_and(|l| l.starts_with("Step 2/3 : RUN"))));
    assert_eq!(
        events.last(),
        Some(&json!({"final": true, "status": "ready"}))
    );

    let t = wait_template(&env, &id).await;
    assert!(t["built_at"].is_string() && t["ext4_size_bytes"].as_i64().unwrap() > 0);
    assert!(t.get("dockerfile").is_none());
    let with = env.get("/v1/templates/tools?include=dockerfile").await;
    assert_eq!(with.data()["dockerfile"], dockerfile);
    let plain = env
        .http
        .get(env.url(&format!("/v1/templates/{id}/logs")))
        .header("X-Api-Key", KEY)
        .send()
        .await
        .unwrap();
    assert!(plain.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    assert!(plain.text().await.unwrap().contains("Successfully built"));

    let sb = env
        .post(
            "/v1/sandboxes",
            json!({"shape": "s-1vcpu-1gb", "rootfs": "tools"}),
        )
        .await;
    assert_eq!(
        (sb.status, sb.data()["rootfs"].as_str()),
        (200, Some(id.as_str()))
    );

    let broken = env.post("/v1/templates", json!({"name": "broken", "dockerfile": "FROM nodeops/sandbox:alpine\nRUN echo 'unterminated\n"})).await;
    let broken = wait_template(&env, broken.data()["id"].as_str().unwrap()).await;
    assert_eq!(broken["status"], "failed");
    let r = env
        .post(
            "/v1/sandboxes",
            json!({"shape": "s-1vcpu-1gb", "rootfs": "broken"}),
        )
        .await;
    assert_eq!(r.status, 400);

    for bad in [
        "FROM ubuntu:22.04\n",
        "FROM nodeops/sandbox:debian\nCOPY . /app\n",
        "ARG V=1\nFROM nodeops/sandbox:debian\n",
    ] {
        let r = env
            .post("/v1/templates", json!({"name": "bad", "dockerfile": bad}))
            .await;
        assert_eq!(
            (r.status, r.data()["dockerfile"].is_string()),
            (400, true),
            "{bad}"
        );
    }
    assert_eq!(
        env.post(
            "/v1/templates",
            json!({"name": "Bad!", "dockerfile": dockerfile})
        )
        .await
        .status,
        400
    );

    // A re-submitted name is a new version; names resolve to the newest.
    let v2 = env
        .post(
            "/v1/templates",
            json!({"name": "tools", "dockerfile": dockerfile}),
        )
        .await;
    let v2_id = v2.data()["id"].as_str().unwrap().to_string();
    assert_eq!(
        env.get("/v1/templates/tools").await.data()["id"],
        v2_id.as_str()
    );
    assert_eq!(
        env.get("/v1/templates").await.data()["pagination"]["total"],
        3
    );
    assert_eq!(env.delete("/v1/templates/tools").await.data()["ok"], true);
    assert_eq!(env.get(&format!("/v1/templates/{id}")).await.status, 404);
    env.mock.shutdown().await;
}

#[tokio::test]
async fn template_builds_are_limited_per_tenant() {
    let env = start_with(MockConfig::default().latencies(createos_mock::Latencies {
        template_build: Duration::from_millis(300),
        ..Default::default()
    }))
    .await;
    let df = "FROM nodeops/sandbox:ubuntu\nRUN true\n";
    assert_eq!(
        env.post("/v1/templates", json!({"name": "one", "dockerfile": df}))
            .await
            .status,
        200
    );
    assert_eq!(
        env.post("/v1/templates", json!({"name": "two", "dockerfile": df}))
            .await
            .status,
        200
    );
    let r = env
        .post("/v1/templates", json!({"name": "three", "dockerfile": df}))
        .await;
    assert_eq!(
        (r.status, r.data()["templates"].as_str()),
        (409, Some("too many concurrent builds (max 2)"))
    );
    env.mock.shutdown().await;
}

#[tokio::test]
async fn devices_and_vpn_sessions() {
    let env = start_with(MockConfig::default().vpn_session_ttl(Duration::from_millis(300))).await;
    let pubkey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    let r = env
        .post(
            "/v1/devices",
            json!({"name": "laptop", "pubkey": pubkey, "os": "linux"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let dev = r.data()["id"].as_str().unwrap().to_string();
    assert!(r.data()["client_ip"]
        .as_str()
        .unwrap()
        .starts_with("100.64."));
    assert_eq!(
        env.post("/v1/devices", json!({"name": "again", "pubkey": pubkey}))
            .await
            .status,
        409
    );
    assert_eq!(
        env.post("/v1/devices", json!({"name": "bad", "pubkey": "c2hvcnQ="}))
            .await
            .status,
        400
    );

    env.post("/v1/networks", json!({"name": "lan"})).await;
    let sb = env.create(json!({"networks": [{"id": "lan"}]})).await;
    let ip = env.get(&format!("/v1/sandboxes/{sb}")).await.data()["ip"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        env.post(
            &format!("/v1/devices/{dev}/networks"),
            json!({"network_id": "lan"})
        )
        .await
        .status,
        200
    );
    let nets = env.get(&format!("/v1/devices/{dev}/networks")).await;
    assert_eq!(nets.data()[0]["network_name"], "lan");

    let s = env.post_empty(&format!("/v1/devices/{dev}/sessions")).await;
    let config = s.data()["client_config"].as_str().unwrap();
    assert!(config.contains("[Interface]") && config.contains("[Peer]"));
    assert!(!config.contains("PrivateKey"));
    assert!(config.contains(&format!("{ip}/32")));
    let session = s.data()["session_id"].as_str().unwrap().to_string();
    let renew = format!("/v1/devices/{dev}/sessions/{session}");
    assert_eq!(env.send("PUT", &renew, Some(KEY), None).await.status, 200);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let r = env.send("PUT", &renew, Some(KEY), None).await;
    assert_eq!((r.status, r.data()["session"].is_string()), (404, true));

    assert_eq!(
        env.delete(&format!("/v1/devices/{dev}/networks/lan"))
            .await
            .status,
        200
    );
    assert_eq!(env.delete(&format!("/v1/devices/{dev}")).await.status, 200);
    assert_eq!(env.delete(&format!("/v1/devices/{dev}")).await.status, 404);
    env.mock.shutdown().await;
}

#[tokio::test]
async fn metrics_are_real_numbers() {
    let env = start().await;
    let id = env.create(json!({})).await;
    env.sh(&id, "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
        .await;
    env.sh(&id, "setsid sleep 30 >/dev/null 2>&1 </dev/null &")
        .await;
    let m = env.get(&format!("/v1/sandboxes/{id}/metrics")).await;
    assert_eq!(m.status, 200, "{}", m.text);
    assert_eq!(m.data()["sandbox_id"], id.as_str());
    assert!(m.data()["processes"].as_u64().unwrap() >= 1);
    assert!(m.data()["mem_used_bytes"].as_i64().unwrap() > 0);
    assert_eq!(m.data()["mem_limit_bytes"], 1024 * 1024 * 1024);
    let usage = env.get("/v1/metrics").await;
    assert_eq!(usage.data()["created_total"], 1);
    assert_eq!(usage.data()["exec_total"], 2);
    assert_eq!(usage.data()["sandboxes"]["running"], 1);
    let series = env
        .get("/v1/metrics/timeseries?metric=exec_total&step_seconds=60")
        .await;
    assert_eq!(series.data()["points"].as_array().unwrap().len(), 60);
    assert_eq!(series.data()["points"][59]["value"], 2);
    assert_eq!(
        env.get("/v1/metrics/timeseries?step_seconds=5")
            .await
            .status,
        400
    );
    assert_eq!(
        env.get("/v1/metrics/timeseries?metric=bogus").await.status,
        400
    );
    env.mock.shutdown().await;
}
