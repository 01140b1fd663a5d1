//! Shared test support: an in-process emulator on a real loopback socket and a client for it.
#![allow(dead_code)]

pub mod cli;

use std::time::Duration;

use createos_sandbox::{Client, RetryPolicy};
use serde_json::Value;

/// One emulator and a client authenticated as its first tenant.
pub struct Env {
    pub mock: createos_mock::MockHandle,
    pub client: Client,
    http: reqwest::Client,
}

/// Retries fast enough for tests, generous enough for fault injection.
pub fn test_retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 10,
        base_delay: Duration::from_millis(2),
        max_delay: Duration::from_millis(50),
        max_retry_after: Duration::from_secs(5),
    }
}

pub async fn start() -> Env {
    start_with(createos_mock::MockConfig::default()).await
}

pub async fn start_with(config: createos_mock::MockConfig) -> Env {
    let mock = createos_mock::start(config).await.expect("emulator starts");
    let client = client_for(&mock.base_url(), &mock.api_key());
    let http = mock_http(&mock);
    Env { mock, client, http }
}

/// A plain HTTP client for the emulator's `/_mock` routes (they need its key; with `--tls`
/// it trusts the emulator's CA).
pub fn mock_http(mock: &createos_mock::MockHandle) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        "x-api-key",
        reqwest::header::HeaderValue::from_str(&mock.api_key()).expect("key is a header value"),
    );
    let mut builder = reqwest::Client::builder().default_headers(headers);
    if let Some(ca) = mock.ca_file() {
        let pem = std::fs::read(ca).expect("the emulator's CA file");
        builder =
            builder.add_root_certificate(reqwest::Certificate::from_pem(&pem).expect("a PEM CA"));
    }
    builder.build().expect("HTTP client builds")
}

/// A client for `base` with `key`, never touching the real environment or home directory.
pub fn client_for(base: &str, key: &str) -> Client {
    Client::builder()
        .base_url(base)
        .api_key(key)
        .retry(test_retry())
        .env(|_| None)
        .build()
        .expect("client builds")
}

impl Env {
    pub fn base_url(&self) -> String {
        self.mock.base_url()
    }

    /// `/_mock/stats`.
    pub async fn stats(&self) -> Value {
        self.mock_get("/_mock/stats").await
    }

    /// Requests that reached the emulator for an operation id.
    pub async fn requests(&self, operation_id: &str) -> u64 {
        self.stats().await["requests"][operation_id]
            .as_u64()
            .unwrap_or(0)
    }

    /// Requests whose handler ran for an operation id.
    pub async fn handled(&self, operation_id: &str) -> u64 {
        self.stats().await["handled"][operation_id]
            .as_u64()
            .unwrap_or(0)
    }

    /// Live sandboxes once asynchronous reclaims settle (a destroy answers `destroying` first).
    pub async fn settled_live_sandboxes(&self) -> u64 {
        let mut live = u64::MAX;
        for _ in 0..200 {
            live = self.stats().await["live_sandboxes"]
                .as_u64()
                .unwrap_or(u64::MAX);
            if live == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        live
    }

    pub async fn reset_stats(&self) {
        self.http
            .delete(format!("{}/_mock/stats", self.base_url()))
            .send()
            .await
            .unwrap()
            .error_for_status()
            .unwrap();
    }

    pub async fn add_fault(&self, rule: &str) {
        self.http
            .post(format!("{}/_mock/faults", self.base_url()))
            .json(&serde_json::json!({ "rule": rule }))
            .send()
            .await
            .unwrap()
            .error_for_status()
            .unwrap();
    }

    pub async fn clear_faults(&self) {
        self.http
            .delete(format!("{}/_mock/faults", self.base_url()))
            .send()
            .await
            .unwrap()
            .error_for_status()
            .unwrap();
    }

    /// A second tenant: (api key, client).
    pub async fn new_tenant(&self, credit: bool) -> (String, Client) {
        let v: Value = self
            .http
            .post(format!("{}/_mock/tenants", self.base_url()))
            .json(&serde_json::json!({ "credit": credit }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let key = v["api_key"].as_str().unwrap().to_string();
        let client = client_for(&self.base_url(), &key);
        (key, client)
    }

    pub async fn mock_get(&self, path: &str) -> Value {
        self.http
            .get(format!("{}{path}", self.base_url()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub async fn mock_post(&self, path: &str, body: Value) -> Value {
        self.http
            .post(format!("{}{path}", self.base_url()))
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub async fn shutdown(self) {
        self.mock.shutdown().await;
    }
}
