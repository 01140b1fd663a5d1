//! Envelopes, headers, pagination, authentication, ownership, credit, delegated tokens
//! and OAuth — the emulator's wire quirks.

mod common;

use common::{reply, start, KEY};
use serde_json::json;

#[tokio::test]
async fn envelopes_request_ids_and_catalog() {
    let env = start().await;
    let r = env.send("GET", "/healthz", None, None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, json!({"status": "success", "data": {"up": true}}));
    assert!(r.headers.get("x-request-id").is_some());

    let r = env.send("GET", "/v1/rootfs", None, None).await;
    assert_eq!(r.data()["default"], "devbox:1");
    let entries = r.data()["entries"].as_array().unwrap();
    let node = entries.iter().find(|e| e["name"] == "node").unwrap();
    assert_eq!(node["deprecated"], true);
    assert_eq!(node["successor"], "devbox:1");

    let r = env
        .send("GET", "/v1/shapes?limit=2&offset=1", None, None)
        .await;
    let page = r.data();
    assert_eq!(
        page["pagination"],
        json!({"total": 6, "limit": 2, "offset": 1, "count": 2})
    );
    assert_eq!(page["data"][0]["id"], "s-1vcpu-1gb");
    assert_eq!(page["data"][0]["default_disk_mib"], 10240);

    let r = env.send("GET", "/v1/shapes?limit=100000", None, None).await;
    assert_eq!(r.data()["pagination"]["limit"], 500);
    let r = env.send("GET", "/v1/shapes?limit=-3", None, None).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["status"], "fail");

    let r = env.get("/v1/hosts").await;
    let host = &r.data()["data"][0];
    assert_eq!(host["status"], "active");
    assert!(host["free_mib"].as_u64().unwrap() > 0);

    let r = env.send("GET", "/v1/no-such-route", None, None).await;
    assert_eq!(r.status, 404);
    assert!(r.headers.get("x-request-id").is_some());
    env.mock.shutdown().await;
}

#[tokio::test]
async fn authentication_errors() {
    let env = start().await;
    let r = env.send("GET", "/v1/whoami", None, None).await;
    assert_eq!(r.status, 401);
    assert_eq!(
        r.body,
        json!({"status": "fail", "data": {"auth": "missing credentials"}})
    );
    let r = env.send("GET", "/v1/whoami", Some("skp_wrong"), None).await;
    assert_eq!(r.data()["auth"], "invalid api key");
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl";
    let r = env.send("GET", "/v1/whoami", Some(jwt), None).await;
    assert_eq!(
        (r.status, r.data()["auth"].as_str()),
        (401, Some("invalid api key"))
    );

    let id = env.create(json!({})).await;
    let r = env.get("/v1/whoami").await;
    assert_eq!(
        r.data()["stats"],
        json!({"running": 1, "paused": 0, "other": 0, "total": 1})
    );
    assert!(r.data()["user_id"].as_str().unwrap().starts_with("user_"));
    // Unauthenticated catalog routes still answer with a key.
    assert_eq!(env.get("/v1/shapes").await.status, 200);
    let _ = id;
    env.mock.shutdown().await;
}

#[tokio::test]
async fn body_rules_411_415_400() {
    let env = start().await;
    let id = env.create(json!({})).await;
    // A body-less POST without Content-Length.
    let raw = env
        .http
        .post(env.url(&format!("/v1/sandboxes/{id}/pause")))
        .header("X-Api-Key", KEY)
        .send()
        .await
        .unwrap();
    let r = reply(raw).await;
    assert_eq!(r.status, 411);
    assert_eq!(r.data()["body"], "Content-Length is required");

    let raw = env
        .http
        .post(env.url("/v1/sandboxes"))
        .header("X-Api-Key", KEY)
        .header("Content-Type", "text/plain")
        .body(r#"{"shape":"s-1vcpu-1gb"}"#)
        .send()
        .await
        .unwrap();
    let r = reply(raw).await;
    assert_eq!(r.status, 415);
    assert_eq!(r.data()["content_type"], "expected application/json");

    let raw = env
        .http
        .post(env.url("/v1/sandboxes"))
        .header("X-Api-Key", KEY)
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let r = reply(raw).await;
    assert_eq!(r.status, 400);
    assert!(r.data()["body"]
        .as_str()
        .unwrap()
        .starts_with("invalid JSON"));
    env.mock.shutdown().await;
}

async fn new_tenant(env: &common::Env, body: serde_json::Value) -> String {
    let v: serde_json::Value = env
        .http
        .post(env.url("/_mock/tenants"))
        .header("X-Api-Key", common::KEY)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["api_key"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn tenants_ownership_and_credit() {
    let env = start().await;
    let id = env.create(json!({})).await;
    let other = new_tenant(&env, json!({})).await;
    let r = env
        .send("GET", &format!("/v1/sandboxes/{id}"), Some(&other), None)
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.data()["sandbox"], "sandbox not found");
    let r = env.send("GET", "/v1/sandboxes", Some(&other), None).await;
    assert_eq!(r.data()["pagination"]["total"], 0);

    let broke = new_tenant(&env, json!({"credit": false})).await;
    let r = env
        .send(
            "POST",
            "/v1/sandboxes",
            Some(&broke),
            Some(json!({"shape": "s-1vcpu-1gb"})),
        )
        .await;
    assert_eq!(r.status, 402);
    assert_eq!(r.data()["code"], "PAYMENT_REQUIRED");
    let r = env
        .send(
            "POST",
            "/v1/networks",
            Some(&broke),
            Some(json!({"name": "n1"})),
        )
        .await;
    assert_eq!(r.status, 402);
    // Owner check before credit: someone else's sandbox is 404, not 402.
    let r = env
        .send(
            "POST",
            &format!("/v1/sandboxes/{id}/bandwidth/recharge"),
            Some(&broke),
            Some(json!({"add_bytes": 1})),
        )
        .await;
    assert_eq!(r.status, 404);
    env.mock.shutdown().await;
}

#[tokio::test]
async fn delegated_tokens_are_scoped_to_runtime_routes() {
    let env = start().await;
    let id = env.create(json!({})).await;
    let other_id = env.create(json!({})).await;
    let r = env
        .post_empty(&format!("/v1/sandboxes/{id}/access-token"))
        .await;
    assert_eq!(r.status, 200);
    let token = r.data()["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("skp_sb_"));
    assert_eq!(
        env.post_empty(&format!("/v1/sandboxes/{id}/access-token"))
            .await
            .status,
        409
    );
    let meta = env.get(&format!("/v1/sandboxes/{id}/access-token")).await;
    assert_eq!(meta.data()["enabled"], true);
    assert!(
        !meta.text.contains(&token),
        "metadata must not leak the token"
    );

    let exec = json!({"cmd": "echo", "args": ["hi"]});
    let r = env
        .send(
            "POST",
            &format!("/v1/sandboxes/{id}/exec"),
            Some(&token),
            Some(exec.clone()),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.data()["result"]["stdout"], "hi\n");
    let r = env
        .send(
            "POST",
            &format!("/v1/sandboxes/{other_id}/exec"),
            Some(&token),
            Some(exec.clone()),
        )
        .await;
    assert_eq!(r.status, 404);
    for (method, path) in [
        ("GET", format!("/v1/sandboxes/{id}")),
        ("DELETE", format!("/v1/sandboxes/{id}")),
        ("GET", "/v1/sandboxes".to_string()),
    ] {
        let r = env.send(method, &path, Some(&token), None).await;
        assert_eq!(r.status, 403, "{method} {path}");
        assert_eq!(r.data()["code"], "FORBIDDEN");
    }

    let rotated = env
        .post_empty(&format!("/v1/sandboxes/{id}/access-token/rotate"))
        .await;
    let new_token = rotated.data()["token"].as_str().unwrap().to_string();
    assert_ne!(new_token, token);
    let r = env
        .send(
            "POST",
            &format!("/v1/sandboxes/{id}/exec"),
            Some(&token),
            Some(exec.clone()),
        )
        .await;
    assert_eq!(r.status, 401);
    let revoked = env
        .delete(&format!("/v1/sandboxes/{id}/access-token"))
        .await;
    assert_eq!(revoked.data()["enabled"], false);
    let r = env
        .send(
            "POST",
            &format!("/v1/sandboxes/{id}/exec"),
            Some(&new_token),
            Some(exec),
        )
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(
        env.post_empty(&format!("/v1/sandboxes/{id}/access-token/rotate"))
            .await
            .status,
        404
    );
    env.mock.shutdown().await;
}

#[tokio::test]
async fn oauth_access_tokens_and_refresh_rotation() {
    let env = start().await;
    let session: serde_json::Value = env
        .http
        .post(env.url("/_mock/oauth/sessions"))
        .header("X-Api-Key", common::KEY)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let access = session["access_token"].as_str().unwrap();
    let refresh = session["refresh_token"].as_str().unwrap().to_string();
    assert_eq!(
        session["token_endpoint"],
        format!("{}/oauth2/token", env.base)
    );

    let whoami = |token: String| {
        let env = &env;
        async move {
            reply(
                env.http
                    .get(env.url("/v1/whoami"))
                    .header("X-Access-Token", token)
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    assert_eq!(whoami(access.to_string()).await.status, 200);

    let form = |rt: &str| format!("grant_type=refresh_token&refresh_token={rt}&client_id=cli");
    let post_form = |body: String| {
        let env = &env;
        async move {
            env.http
                .post(env.url("/oauth2/token"))
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(body)
                .send()
                .await
                .unwrap()
        }
    };
    let resp = post_form(form(&refresh)).await;
    assert_eq!(resp.status(), 200);
    let rotated: serde_json::Value = resp.json().await.unwrap();
    let new_refresh = rotated["refresh_token"].as_str().unwrap().to_string();
    assert_ne!(new_refresh, refresh);
    assert_eq!(rotated["token_type"], "Bearer");
    assert_eq!(
        whoami(access.to_string()).await.status,
        401,
        "old access token is replaced"
    );
    assert_eq!(
        whoami(rotated["access_token"].as_str().unwrap().to_string())
            .await
            .status,
        200
    );

    // Reusing a rotated refresh token revokes the whole session.
    let resp = post_form(form(&refresh)).await;
    assert_eq!(resp.status(), 400);
    let err: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(err["error"], "invalid_grant");
    assert_eq!(post_form(form(&new_refresh)).await.status(), 400);
    assert_eq!(
        whoami(rotated["access_token"].as_str().unwrap().to_string())
            .await
            .status,
        401
    );
    assert_eq!(env.stats().await["oauth_refreshes"], 1);
    env.mock.shutdown().await;
}
