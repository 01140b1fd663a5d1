//! Transport resilience against the emulator's fault injection: retries only where safe,
//! `Retry-After` honoured, nothing applied twice, bad input never sent.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use createos_sandbox::{ClientBuilder, CreateSandbox, Error, ListSandboxes, RetryPolicy};
use futures::TryStreamExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn list_calls_survive_30_percent_503s() {
    let env = common::start().await;
    let sb = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb").name("listed"))
        .await
        .unwrap();
    env.add_fault("GET /v1/sandboxes* status=503 rate=0.3")
        .await;
    let client = env.client.clone();
    let tasks: Vec<_> = (0..500)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move {
                c.list_sandboxes(ListSandboxes::default())
                    .try_collect::<Vec<_>>()
                    .await
            })
        })
        .collect();
    for t in tasks {
        let rows = t
            .await
            .unwrap()
            .expect("every list call succeeds despite 503s");
        assert!(rows.iter().any(|v| v.id == sb.id()));
    }
    let stats = env.stats().await;
    let requests = stats["requests"]["listSandboxes"].as_u64().unwrap();
    let injected = stats["faults_injected"].as_u64().unwrap();
    assert!(injected > 50, "the fault rule fired ({injected})");
    assert_eq!(
        requests,
        500 + injected,
        "each 503 cost exactly one extra request"
    );
    env.clear_faults().await;
    sb.destroy().await.unwrap();
    env.shutdown().await;
}

#[tokio::test]
async fn create_is_never_applied_twice_under_connection_resets() {
    let env = common::start().await;
    // Reset after the handler ran: the sandbox exists but the answer is lost. A POST must not be
    // resent, or there would be two.
    env.add_fault("POST /v1/sandboxes reset when=after count=1")
        .await;
    let err = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Connection { .. }), "{err:?}");
    assert_eq!(env.requests("createSandbox").await, 1);
    assert_eq!(env.handled("createSandbox").await, 1);
    assert_eq!(env.stats().await["live_sandboxes"], 1);

    // Reset before the handler: also not resent (the client cannot know it was not applied).
    env.add_fault("POST /v1/sandboxes reset when=before count=1")
        .await;
    let err = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Connection { .. }), "{err:?}");
    assert_eq!(env.requests("createSandbox").await, 2);
    assert_eq!(env.handled("createSandbox").await, 1);

    // A 503 says "not applied": retried, and applied once.
    env.add_fault("POST /v1/sandboxes status=503 count=2").await;
    let sb = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb"))
        .await
        .unwrap();
    assert_eq!(env.requests("createSandbox").await, 5);
    assert_eq!(env.handled("createSandbox").await, 2);
    assert_eq!(env.stats().await["live_sandboxes"], 2);
    sb.destroy().await.unwrap();

    // Idempotent GETs are resent after a reset.
    env.add_fault("GET /v1/sandboxes/* reset when=after count=2")
        .await;
    let again = env.client.get_sandbox(sb.id()).await.unwrap();
    assert_eq!(again.id(), sb.id());
    env.shutdown().await;
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let env = common::start().await;
    env.add_fault("GET /v1/whoami status=429 retry_after=1 count=1")
        .await;
    let started = Instant::now();
    let me = env.client.whoami().await.unwrap();
    assert!(!me.user_id.is_empty());
    // A lower bound only: the client must have waited at least what the server asked.
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "retried after {:?}",
        started.elapsed()
    );
    assert_eq!(env.requests("whoami").await, 2);

    // Without retries the typed error carries the server's hint.
    let strict = ClientBuilder::default()
        .base_url(env.base_url())
        .api_key(env.mock.api_key())
        .retry(RetryPolicy::none())
        .env(|_| None)
        .build()
        .unwrap();
    env.add_fault("GET /v1/whoami status=429 retry_after=7 count=1")
        .await;
    match strict.whoami().await.unwrap_err() {
        Error::RateLimited { retry_after, api } => {
            assert_eq!(retry_after, Some(Duration::from_secs(7)));
            assert_eq!(api.status, 429);
            assert!(api.request_id.is_some(), "request id surfaced");
            assert_eq!(api.endpoint, "GET /v1/whoami");
        }
        other => panic!("{other:?}"),
    }
    env.shutdown().await;
}

#[tokio::test]
async fn a_retry_after_longer_than_the_policy_allows_fails_fast() {
    let env = common::start().await;
    env.add_fault("GET /v1/whoami status=503 retry_after=3600 count=1")
        .await;
    let started = Instant::now();
    let err = env.client.whoami().await.unwrap_err();
    assert!(matches!(err, Error::Server(_)), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(60));
    env.shutdown().await;
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_sent() {
    let env = common::start().await;
    env.reset_stats().await;
    let c = &env.client;
    let invalid = |e: Error| assert!(matches!(e, Error::InvalidInput { .. }), "{e:?}");
    invalid(c.get_sandbox("sb-1/../../etc").await.unwrap_err());
    invalid(c.get_sandbox("").await.unwrap_err());
    invalid(
        c.create_sandbox(CreateSandbox::new("huge"))
            .await
            .unwrap_err(),
    );
    invalid(
        c.create_sandbox(CreateSandbox::new("s-1vcpu-1gb").env("1BAD", "x"))
            .await
            .unwrap_err(),
    );
    invalid(
        c.create_sandbox(CreateSandbox::new("s-1vcpu-1gb").env("A-B", "x"))
            .await
            .unwrap_err(),
    );
    invalid(
        c.create_sandbox(CreateSandbox::new("s-1vcpu-1gb").auto_pause_after(5))
            .await
            .unwrap_err(),
    );
    invalid(
        c.create_sandbox(CreateSandbox::new("s-1vcpu-1gb").egress(["not a rule"]))
            .await
            .unwrap_err(),
    );
    invalid(
        c.create_sandbox(CreateSandbox::new("s-1vcpu-1gb").name("bad name"))
            .await
            .unwrap_err(),
    );
    invalid(c.get_sandbox_by_ip("10.0.0.300").await.unwrap_err());
    let sb = c.sandbox("sb-00000000000000000000000000").unwrap();
    invalid(sb.resize_disk(0).await.unwrap_err());
    invalid(
        sb.add_ssh_pubkeys(&["not a key".to_string()])
            .await
            .unwrap_err(),
    );
    invalid(sb.recharge_bandwidth(0).await.unwrap_err());
    let stats = env.stats().await;
    let sent: BTreeMap<String, u64> =
        serde_json::from_value(stats["requests"].clone()).unwrap_or_default();
    assert!(
        sent.values().all(|n| *n == 0),
        "requests were sent: {sent:?}"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn missing_credentials_say_how_to_sign_in() {
    let home = tempfile::tempdir().unwrap();
    let resolver = createos_sandbox::auth::Resolver::new()
        .home(home.path().to_path_buf())
        .env(|_| None);
    let err = ClientBuilder::default()
        .resolver(resolver)
        .env(|_| None)
        .build()
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::NotSignedIn(_)), "{err:?}");
    assert!(
        msg.contains("createos login") && msg.contains("CREATEOS_API_KEY"),
        "{msg}"
    );
}

#[tokio::test]
async fn errors_are_typed_and_carry_the_request() {
    let env = common::start().await;
    let err = env
        .client
        .get_sandbox("sb-01NOTTHERE0000000000000000")
        .await
        .unwrap_err();
    let Error::NotFound(api) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(api.status, 404);
    assert_eq!(api.endpoint, "GET /v1/sandboxes/{id}");
    // the message names the resource; the template stays available for matching
    assert_eq!(
        api.path.as_deref(),
        Some("/v1/sandboxes/sb-01NOTTHERE0000000000000000")
    );
    assert!(
        err.to_string()
            .contains("GET /v1/sandboxes/sb-01NOTTHERE0000000000000000 failed with HTTP 404"),
        "{err}"
    );
    assert!(api.request_id.is_some());
    assert!(api.message.contains("sandbox not found"), "{}", api.message);

    let err = env
        .client
        .create_sandbox(CreateSandbox::new("s-64vcpu-1gb"))
        .await
        .unwrap_err();
    let Error::Validation(api) = &err else {
        panic!("{err:?}")
    };
    assert!(api.fields.contains_key("shape"), "{:?}", api.fields);

    let wrong = common::client_for(&env.base_url(), "skp_wrong");
    let err = wrong.whoami().await.unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "{err:?}");
    assert!(
        !format!("{err:?} {err}").contains("skp_wrong"),
        "the key leaked into the error"
    );

    let (_, broke) = env.new_tenant(false).await;
    let err = broke
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PaymentRequired(_)), "{err:?}");
    env.shutdown().await;
}

#[tokio::test]
async fn body_less_posts_carry_content_length_zero() {
    let env = common::start().await;
    let sb = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb"))
        .await
        .unwrap();
    // The emulator answers 411 to a body-less POST without Content-Length, so success proves it.
    let paused = sb.pause_and_wait().await.unwrap();
    assert_eq!(paused.status, createos_sandbox::SandboxStatus::Paused);
    let resumed = sb.resume_and_wait().await.unwrap();
    assert_eq!(resumed.status, createos_sandbox::SandboxStatus::Running);
    // And the quirk itself is real: a raw POST with neither Content-Length nor a chunked body is
    // refused with 411 and nothing happens.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = env.base_url().trim_start_matches("http://").to_string();
    let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /v1/sandboxes/{}/pause HTTP/1.1\r\nHost: {addr}\r\nX-Api-Key: {}\r\nConnection: close\r\n\r\n",
        sb.id(),
        env.mock.api_key()
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 411"), "{answer}");
    assert!(answer.contains("Content-Length is required"), "{answer}");
    assert_eq!(
        sb.refresh().await.unwrap().status,
        createos_sandbox::SandboxStatus::Running
    );
    sb.destroy().await.unwrap();
    env.shutdown().await;
}

#[tokio::test]
async fn timeouts_are_per_attempt_and_typed() {
    let env = common::start().await;
    env.add_fault("GET /v1/whoami delay=2s count=1").await;
    let impatient = ClientBuilder::default()
        .base_url(env.base_url())
        .api_key(env.mock.api_key())
        .retry(RetryPolicy::none())
        .timeout(Some(Duration::from_millis(200)))
        .env(|_| None)
        .build()
        .unwrap();
    let err = impatient.whoami().await.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    // With retries, the second attempt (no delay) succeeds.
    env.add_fault("GET /v1/whoami delay=2s count=1").await;
    let patient = ClientBuilder::default()
        .base_url(env.base_url())
        .api_key(env.mock.api_key())
        .retry(common::test_retry())
        .timeout(Some(Duration::from_millis(200)))
        .env(|_| None)
        .build()
        .unwrap();
    assert!(patient.whoami().await.is_ok());
    env.shutdown().await;
}

#[tokio::test]
async fn dropping_a_call_cancels_it() {
    let env = common::start().await;
    env.add_fault("GET /v1/whoami delay=30s count=1").await;
    let call = env.client.whoami();
    let outcome = tokio::time::timeout(Duration::from_millis(200), call).await;
    assert!(outcome.is_err(), "the call was still pending when dropped");
    // The client is still usable and nothing is stuck.
    assert!(env.client.healthz().await.unwrap().up);
    env.shutdown().await;
}
