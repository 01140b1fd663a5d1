//! E60–E63: sandbox-scoped delegated access tokens.

use createos_sandbox::Error;

use crate::common;

/// Upload a file with `key` through the raw HTTP API; the status tells whether the key works.
async fn upload_with(env: &common::Env, key: &str, sandbox_id: &str, body: &'static str) -> u16 {
    reqwest::Client::new()
        .put(format!(
            "{}/v1/sandboxes/{sandbox_id}/files",
            env.base_url()
        ))
        .query(&[("path", "/root/delegated.txt")])
        .header("X-Api-Key", key)
        .header("Content-Type", "application/octet-stream")
        .body(body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn create_inspect_rotate_revoke() {
    let env = common::start().await;
    let sandbox = crate::running_sandbox(&env).await;

    let none = sandbox.access_token().await.unwrap();
    assert!(!none.enabled);

    let created = sandbox.create_access_token().await.unwrap();
    assert!(created.expose().starts_with("skp_sb_"), "token format");
    assert!(created.enabled);
    assert!(created.created_at.is_some());
    let debug = format!("{created:?}");
    assert!(
        !debug.contains(created.expose()) && debug.contains("<redacted>"),
        "{debug}"
    );

    let meta = sandbox.access_token().await.unwrap();
    assert!(meta.enabled);
    assert_eq!(meta.created_at, created.created_at);
    let hint = meta.token_hint.expect("hint");
    assert!(!hint.contains(created.expose()), "the hint is redacted");
    assert!(!hint.is_empty());

    // One token per sandbox.
    let err = sandbox.create_access_token().await.unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err:?}");
    assert!(crate::fields(&err).contains_key("token"));

    // The token works on runtime routes of its sandbox only, and never on management routes.
    assert_eq!(
        upload_with(&env, created.expose(), sandbox.id(), "one").await,
        200
    );
    let delegated = common::client_for(&env.base_url(), created.expose());
    let err = delegated.whoami().await.unwrap_err();
    assert!(matches!(err, Error::Permission(_)), "{err:?}");
    let err = delegated
        .sandbox(sandbox.id())
        .unwrap()
        .create_access_token()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Permission(_)), "{err:?}");
    let other = crate::running_sandbox(&env).await;
    assert_eq!(
        upload_with(&env, created.expose(), other.id(), "x").await,
        404
    );

    let rotated = sandbox.rotate_access_token().await.unwrap();
    assert_ne!(rotated.expose(), created.expose());
    assert!(rotated.enabled);
    assert!(rotated.rotated_at.is_some());
    assert_eq!(
        upload_with(&env, created.expose(), sandbox.id(), "old").await,
        401
    );
    assert_eq!(
        upload_with(&env, rotated.expose(), sandbox.id(), "new").await,
        200
    );

    let revoked = sandbox.revoke_access_token().await.unwrap();
    assert!(!revoked.enabled);
    assert!(!sandbox.access_token().await.unwrap().enabled);
    assert_eq!(
        upload_with(&env, rotated.expose(), sandbox.id(), "gone").await,
        401
    );
    // Revoking again succeeds.
    assert!(!sandbox.revoke_access_token().await.unwrap().enabled);
    env.shutdown().await;
}

#[tokio::test]
async fn rotate_without_token_and_foreign_tenant_are_not_found() {
    let env = common::start().await;
    let sandbox = crate::running_sandbox(&env).await;
    let err = sandbox.rotate_access_token().await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert_eq!(
        crate::fields(&err).get("token").map(String::as_str),
        Some("access token not found")
    );

    let (_, other) = env.new_tenant(true).await;
    let foreign = other.sandbox(sandbox.id()).unwrap();
    for err in [
        foreign.create_access_token().await.unwrap_err(),
        foreign.rotate_access_token().await.unwrap_err(),
    ] {
        assert!(err.is_not_found(), "{err:?}");
    }
    assert!(foreign.access_token().await.unwrap_err().is_not_found());
    assert!(foreign
        .revoke_access_token()
        .await
        .unwrap_err()
        .is_not_found());
    assert!(
        !sandbox.access_token().await.unwrap().enabled,
        "nothing was minted"
    );
    env.shutdown().await;
}
