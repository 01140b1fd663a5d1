//! Shared helpers of the emulator's integration tests: a fast emulator and a small
//! JSON client over real sockets.
#![allow(dead_code)]

use std::time::Duration;

use createos_mock::{MockConfig, MockHandle};
use serde_json::{json, Value};

pub const KEY: &str = "skp_test_key";

pub struct Env {
    pub mock: MockHandle,
    pub base: String,
    pub http: reqwest::Client,
}

pub async fn start_with(config: MockConfig) -> Env {
    let mock = createos_mock::start(config.api_key(KEY))
        .await
        .expect("emulator starts");
    let base = mock.base_url();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    Env { mock, base, http }
}

pub async fn start() -> Env {
    start_with(MockConfig::default()).await
}

/// A response reduced to what tests look at.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Reply {
    pub fn data(&self) -> &Value {
        &self.body["data"]
    }
}

pub async fn reply(resp: reqwest::Response) -> Reply {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let text = resp.text().await.unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        body,
        text,
    }
}

impl Env {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self.http.request(method, self.url(path));
        if let Some(k) = key {
            req = req.header("X-Api-Key", k);
        }
        req = match body {
            Some(b) => req.json(&b),
            None => req.header("Content-Length", "0"),
        };
        reply(req.send().await.expect("request sent")).await
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send("GET", path, Some(KEY), None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.send("POST", path, Some(KEY), Some(body)).await
    }

    pub async fn post_empty(&self, path: &str) -> Reply {
        self.send("POST", path, Some(KEY), None).await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.send("DELETE", path, Some(KEY), None).await
    }

    /// Creates a running sandbox and returns its id.
    pub async fn create(&self, extra: Value) -> String {
        let mut body = json!({"shape": "s-1vcpu-1gb"});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                b.insert(k.clone(), v.clone());
            }
        }
        let r = self.post("/v1/sandboxes", body).await;
        assert_eq!(r.status, 200, "create failed: {}", r.text);
        assert_eq!(r.data()["status"], "running");
        r.data()["id"].as_str().unwrap().to_string()
    }

    pub async fn status_of(&self, id: &str) -> String {
        self.get(&format!("/v1/sandboxes/{id}")).await.data()["status"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    /// Polls until the sandbox reaches `want` (panics after ~10 s).
    pub async fn wait_status(&self, id: &str, want: &str) {
        for _ in 0..1000 {
            if self.status_of(id).await == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "sandbox {id} never reached {want} (now {})",
            self.status_of(id).await
        );
    }

    /// Buffered exec of `sh -c script`; returns (stdout, stderr, exit_code).
    pub async fn sh(&self, id: &str, script: &str) -> (String, String, i64) {
        let r = self
            .post(
                &format!("/v1/sandboxes/{id}/exec"),
                json!({"cmd": "sh", "args": ["-c", script]}),
            )
            .await;
        assert_eq!(r.status, 200, "exec failed: {}", r.text);
        let res = &r.data()["result"];
        (
            res["stdout"].as_str().unwrap_or("").to_string(),
            format!(
                "{}{}",
                res["stderr"].as_str().unwrap_or(""),
                res["error"].as_str().unwrap_or("")
            ),
            res["exit_code"].as_i64().unwrap_or(i64::MIN),
        )
    }

    pub async fn stats(&self) -> Value {
        self.http
            .get(self.url("/_mock/stats"))
            .header("X-Api-Key", KEY)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}
