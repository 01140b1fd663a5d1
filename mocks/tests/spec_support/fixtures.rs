//! Sandboxes and credentials the probes and scenarios share.

use std::time::Duration;

use serde_json::json;

use super::harness::{Auth, Conformance};

pub struct Fixtures {
    /// A running devbox sandbox of the main tenant.
    pub sandbox: String,
    /// A running desktop sandbox of the main tenant.
    pub desktop: String,
    /// A paused devbox sandbox of the main tenant.
    pub paused: String,
    /// A paused desktop sandbox of the main tenant.
    pub paused_desktop: String,
    /// A delegated token of `sandbox`.
    pub delegated: String,
    /// API key of another tenant.
    pub other_key: String,
    /// API key of a tenant without credit.
    pub broke_key: String,
}

/// Creates a running sandbox (`extra` merged into a minimal body) and returns its id.
pub async fn create_sandbox(c: &Conformance, extra: serde_json::Value) -> String {
    let mut body = json!({"shape": "s-1vcpu-1gb"});
    for (k, v) in extra.as_object().into_iter().flatten() {
        body[k] = v.clone();
    }
    let data = c
        .op("createSandbox")
        .json(body)
        .send()
        .await
        .expect(200)
        .data();
    data["id"].as_str().expect("id").to_string()
}

/// Polls getSandbox until the sandbox reaches `want`.
pub async fn wait_status(c: &Conformance, id: &str, want: &str) {
    for _ in 0..2000 {
        let data = c
            .op("getSandbox")
            .p("id", id)
            .send()
            .await
            .expect(200)
            .data();
        if data["status"] == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("sandbox {id} never became {want}");
}

async fn new_tenant(c: &Conformance, credit: bool) -> String {
    let body: serde_json::Value = c
        .http
        .post(format!("{}/_mock/tenants", c.base))
        .header("X-Api-Key", &c.key)
        .json(&json!({"credit": credit}))
        .send()
        .await
        .expect("/_mock/tenants")
        .json()
        .await
        .expect("tenant JSON");
    body["api_key"].as_str().expect("api_key").to_string()
}

impl Fixtures {
    pub async fn prepare(c: &Conformance) -> Fixtures {
        let sandbox = create_sandbox(c, json!({})).await;
        let desktop = create_sandbox(c, json!({"rootfs": "desktop:1"})).await;
        let paused = create_sandbox(c, json!({})).await;
        let paused_desktop =
            create_sandbox(c, json!({"rootfs": "desktop:1", "ingress_enabled": true})).await;
        for id in [&paused, &paused_desktop] {
            c.op("pauseSandbox").p("id", id).send().await.expect(202);
            wait_status(c, id, "paused").await;
        }
        let token = c
            .op("createAccessToken")
            .p("id", &sandbox)
            .send()
            .await
            .expect(200)
            .data();
        let delegated = token["token"].as_str().expect("token").to_string();
        // The delegated token works on its own sandbox's runtime routes.
        c.op("exec")
            .p("id", &sandbox)
            .auth(Auth::Key(delegated.clone()))
            .json(json!({"cmd": "true"}))
            .send()
            .await
            .expect(200);
        Fixtures {
            sandbox,
            desktop,
            paused,
            paused_desktop,
            delegated,
            other_key: new_tenant(c, true).await,
            broke_key: new_tenant(c, false).await,
        }
    }
}
