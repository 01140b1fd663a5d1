//! Fault injection (status bursts, resets before/after the handler, delays, stream cuts)
//! and the /_mock/stats counters.

mod common;

use std::time::{Duration, Instant};

use common::{start, start_with, KEY};
use createos_mock::MockConfig;
use futures::StreamExt;
use serde_json::json;

async fn add_fault(env: &common::Env, rule: &str) {
    let r = env.http.post(env.url("/_mock/faults")).json(&json!({"rule": rule})).send().await.unwrap();
    assert_eq!(r.status(), 200, "rule {rule}");
}

#[tokio::test]
async fn status_burst_then_success_and_stats() {
    let env = start_with(MockConfig::default().fault("GET /v1/whoami status=503 count=2")).await;
    for _ in 0..2 {
        let r = env.get("/v1/whoami").await;
        assert_eq!(r.status, 503);
        assert_eq!(r.body, json!({"status": "error", "message": "service unavailable", "code": 503}));
    }
    assert_eq!(env.get("/v1/whoami").await.status, 200);
    let stats = env.stats().await;
    assert_eq!(stats["requests"]["whoami"], 3);
    assert_eq!(stats["handled"]["whoami"], 1);
    assert_eq!(stats["faults_injected"], 2);

    add_fault(&env, "* /v1/shapes status=429 retry_after=7 after=1 count=1").await;
    assert_eq!(env.get("/v1/shapes").await.status, 200);
    let r = env.get("/v1/shapes").await;
    assert_eq!((r.status, r.data()["rate"].as_str()), (429, Some("rate limited")));
    assert_eq!(r.headers["retry-after"], "7");
    let listed: serde_json::Value = env.http.get(env.url("/_mock/faults")).send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["faults"].as_array().unwrap().len(), 2);
    let bad = env.http.post(env.url("/_mock/faults")).json(&json!({"rule": "/x explode"})).send().await.unwrap();
    assert_eq!(bad.status(), 400);

    env.http.delete(env.url("/_mock/faults")).send().await.unwrap();
    env.http.delete(env.url("/_mock/stats")).send().await.unwrap();
    let id = env.create(json!({})).await;
    let stats = env.stats().await;
    assert_eq!(stats["requests"]["createSandbox"], 1);
    assert_eq!(stats["sandboxes_created"], 1);
    assert_eq!(stats["live_sandboxes"], 1);
    assert_eq!(stats["faults_injected"], 0);
    // /_mock calls are never counted.
    assert!(stats["requests"].as_object().unwrap().keys().all(|k| !k.contains("_mock")));
    let _ = id;
    env.mock.shutdown().await;
}

#[tokio::test]
async fn reset_before_and_after_the_handler() {
    let env = start().await;
    add_fault(&env, "POST /v1/sandboxes reset count=1").await;
    let err = env
        .http
        .post(env.url("/v1/sandboxes"))
        .header("X-Api-Key", KEY)
        .json(&json!({"shape": "s-1vcpu-1gb"}))
        .send()
        .await;
    assert!(err.is_err(), "connection must be dropped");
    let stats = env.stats().await;
    assert_eq!(stats["sandboxes_created"], 0, "handler must not run");
    assert!(stats["handled"].get("createSandbox").is_none());

    add_fault(&env, "POST /v1/sandboxes reset when=after count=1").await;
    let outcome = async {
        let resp = env
            .http
            .post(env.url("/v1/sandboxes"))
            .header("X-Api-Key", KEY)
            .json(&json!({"shape": "s-1vcpu-1gb"}))
            .send()
            .await?;
        resp.bytes().await
    }
    .await;
    assert!(outcome.is_err(), "the body must be cut: {outcome:?}");
    let stats = env.stats().await;
    assert_eq!(stats["sandboxes_created"], 1, "handler ran and applied its effect");
    assert_eq!(env.get("/v1/sandboxes").await.data()["pagination"]["total"], 1);
    env.mock.shutdown().await;
}

#[tokio::test]
async fn delay_and_stream_cut() {
    let env = start().await;
    add_fault(&env, "GET /healthz delay=250ms").await;
    let t0 = Instant::now();
    assert_eq!(env.send("GET", "/healthz", None, None).await.status, 200);
    assert!(t0.elapsed() >= Duration::from_millis(250));

    let id = env.create(json!({})).await;
    add_fault(&env, "POST /v1/sandboxes/*/exec cut=20").await;
    let resp = env
        .http
        .post(env.url(&format!("/v1/sandboxes/{id}/exec?stream=true")))
        .header("X-Api-Key", KEY)
        .json(&json!({"cmd": "sh", "args": ["-c", "for i in 1 2 3 4 5 6 7 8; do echo line$i; sleep 0.01; done"]}))
        .send()
        .await
        .unwrap();
    let mut body = resp.bytes_stream();
    let mut received = 0usize;
    let mut failed = false;
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(b) => received += b.len(),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "the stream must be cut");
    assert!(received <= 20, "at most 20 bytes before the cut, got {received}");
    env.mock.shutdown().await;
}
