//! Fault injection (status bursts, resets before/after the handler, delays, stream cuts)
//! and the /_mock/stats counters.

mod common;

use std::time::{Duration, Instant};

use common::{start, start_with, KEY};
use createos_mock::MockConfig;
use futures::StreamExt;
use serde_json::json;

async fn add_fault(env: &common::Env, rule: &str) {
    let r = env
        .http
        .post(env.url("/_mock/faults"))
        .header("X-Api-Key", common::KEY)
        .json(&json!({"rule": rule}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "rule {rule}");
}

/// Reads a body to its end or its first error: (bytes received, whether it failed).
async fn drain(resp: reqwest::Response) -> (Vec<u8>, bool) {
    let mut body = resp.bytes_stream();
    let mut received = Vec::new();
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(b) => received.extend_from_slice(&b),
            Err(_) => return (received, true),
        }
    }
    (received, false)
}

#[tokio::test]
async fn status_burst_then_success_and_stats() {
    let env = start_with(MockConfig::default().fault("GET /v1/whoami status=503 count=2")).await;
    for _ in 0..2 {
        let r = env.get("/v1/whoami").await;
        assert_eq!(r.status, 503);
        assert_eq!(
            r.body,
            json!({"status": "error", "message": "service unavailable", "code": 503})
        );
    }
    assert_eq!(env.get("/v1/whoami").await.status, 200);
    let stats = env.stats().await;
    assert_eq!(stats["requests"]["whoami"], 3);
    assert_eq!(stats["handled"]["whoami"], 1);
    assert_eq!(stats["faults_injected"], 2);

    add_fault(
        &env,
        "* /v1/shapes status=429 retry_after=7 after=1 count=1",
    )
    .await;
    assert_eq!(env.get("/v1/shapes").await.status, 200);
    let r = env.get("/v1/shapes").await;
    assert_eq!(
        (r.status, r.data()["rate"].as_str()),
        (429, Some("rate limited"))
    );
    assert_eq!(r.headers["retry-after"], "7");
    let listed: serde_json::Value = env
        .http
        .get(env.url("/_mock/faults"))
        .header("X-Api-Key", common::KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["faults"].as_array().unwrap().len(), 2);
    let bad = env
        .http
        .post(env.url("/_mock/faults"))
        .header("X-Api-Key", common::KEY)
        .json(&json!({"rule": "/x explode"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);

    env.http
        .delete(env.url("/_mock/faults"))
        .header("X-Api-Key", common::KEY)
        .send()
        .await
        .unwrap();
    env.http
        .delete(env.url("/_mock/stats"))
        .header("X-Api-Key", common::KEY)
        .send()
        .await
        .unwrap();
    let id = env.create(json!({})).await;
    let stats = env.stats().await;
    assert_eq!(stats["requests"]["createSandbox"], 1);
    assert_eq!(stats["sandboxes_created"], 1);
    assert_eq!(stats["live_sandboxes"], 1);
    assert_eq!(stats["faults_injected"], 0);
    // /_mock calls are never counted.
    assert!(stats["requests"]
        .as_object()
        .unwrap()
        .keys()
        .all(|k| !k.contains("_mock")));
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
    let resp = env
        .http
        .post(env.url("/v1/sandboxes"))
        .header("X-Api-Key", KEY)
        .json(&json!({"shape": "s-1vcpu-1gb"}))
        .send()
        .await
        .expect("status line and headers arrive");
    assert_eq!(resp.status(), 200);
    let declared = resp.content_length().expect("declared Content-Length");
    let (received, failed) = drain(resp).await;
    assert!(failed, "the body must be cut");
    assert!(
        !received.is_empty() && (received.len() as u64) < declared,
        "half the body: {} of {declared}",
        received.len()
    );
    assert!(
        received.starts_with(b"{\""),
        "{}",
        String::from_utf8_lossy(&received)
    );
    let stats = env.stats().await;
    assert_eq!(
        stats["sandboxes_created"], 1,
        "handler ran and applied its effect"
    );
    assert_eq!(
        env.get("/v1/sandboxes").await.data()["pagination"]["total"],
        1
    );
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
    assert!(
        received <= 20,
        "at most 20 bytes before the cut, got {received}"
    );
    env.mock.shutdown().await;
}

#[tokio::test]
async fn cut_of_a_ready_replay_delivers_the_first_part() {
    let env = start().await;
    let id = env.create(json!({})).await;
    let created = env
        .post(
            &format!("/v1/sandboxes/{id}/processes"),
            json!({"cmd": "sh", "args": ["-c", "for i in $(seq 1 40); do echo replay-line-$i; done"]}),
        )
        .await;
    assert_eq!(created.status, 200, "{}", created.text);
    let pid = created.data()["process_id"]
        .as_str()
        .expect("process_id")
        .to_string();
    let waited = env
        .get(&format!(
            "/v1/sandboxes/{id}/processes/{pid}/wait?timeout_ms=15000"
        ))
        .await;
    assert_eq!(waited.data()["state"], "exited", "{}", waited.text);

    // The whole journal is ready at once: the cut piece must still reach the client.
    add_fault(&env, "GET /v1/sandboxes/*/connect cut=150 count=1").await;
    let resp = env
        .http
        .get(env.url(&format!(
            "/v1/sandboxes/{id}/processes/{pid}/connect?after=0"
        )))
        .header("X-Api-Key", KEY)
        .send()
        .await
        .expect("headers arrive");
    assert_eq!(resp.status(), 200);
    let (received, failed) = drain(resp).await;
    assert!(failed, "the stream must be cut");
    assert_eq!(
        received.len(),
        150,
        "exactly the first 150 bytes: {}",
        String::from_utf8_lossy(&received)
    );
    assert!(
        received.starts_with(b"{\"data_base64\":\""),
        "{}",
        String::from_utf8_lossy(&received)
    );

    // Without the fault the same replay is whole and ends with the exit event.
    let resp = env
        .http
        .get(env.url(&format!(
            "/v1/sandboxes/{id}/processes/{pid}/connect?after=0"
        )))
        .header("X-Api-Key", KEY)
        .send()
        .await
        .unwrap();
    let (whole, failed) = drain(resp).await;
    assert!(!failed);
    assert!(whole.len() > 150);
    assert_eq!(
        &whole[..150],
        &received[..],
        "the cut piece is the start of the replay"
    );
    let last = whole
        .trim_ascii_end()
        .rsplit(|b| *b == b'\n')
        .next()
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(last).unwrap()["type"],
        "exit"
    );
    env.mock.shutdown().await;
}

#[tokio::test]
async fn an_answer_before_the_body_was_read_closes_the_connection() {
    let env = start().await;
    add_fault(&env, "POST /v1/sandboxes status=503 count=1").await;
    let body = json!({"shape": "s-1vcpu-1gb", "padding": "x".repeat(64 * 1024)});
    let refused = env
        .http
        .post(env.url("/v1/sandboxes"))
        .header("X-Api-Key", KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(
        refused
            .headers()
            .get("connection")
            .map(|v| v.to_str().unwrap()),
        Some("close"),
        "the unread body ends the connection"
    );
    // A request whose body was read keeps the connection.
    let small = json!({"shape": "s-1vcpu-1gb"});
    let created = env
        .http
        .post(env.url("/v1/sandboxes"))
        .header("X-Api-Key", KEY)
        .json(&small)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 200);
    assert!(
        created.headers().get("connection").is_none(),
        "{:?}",
        created.headers()
    );
    let plain = env
        .http
        .get(env.url("/v1/shapes"))
        .header("X-Api-Key", KEY)
        .send()
        .await
        .unwrap();
    assert!(
        plain.headers().get("connection").is_none(),
        "{:?}",
        plain.headers()
    );
}
