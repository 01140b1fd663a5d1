//! Signed out is a state, not a crash (issue 15.4): `cos mcp` starts without any credential,
//! lists its tools, answers each tool that needs the control plane with an error saying how
//! to sign in, and picks up a later sign-in (a `~/.createos/.token` written while it runs)
//! without a restart.

#[path = "../../tests/common/mod.rs"]
mod common;
mod mcp_client;

use mcp_client::{error_text, ok_json, sandbox_of, Setup};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn starts_signed_out_explains_how_to_sign_in_and_picks_up_a_later_login() {
    let env = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let mut setup = Setup::new(&env, home.path(), project.path());
    setup.signed_out = true;
    setup.options = r#"{"mode": "remote"}"#;
    let mut mcp = setup.start().await;

    let names = mcp.tool_names().await;
    assert!(
        names.iter().any(|n| n == "sandbox_exec") && names.iter().any(|n| n == "native_bash"),
        "{names:?}"
    );
    let status = ok_json(&mcp.call("sandbox_status", json!({})).await);
    assert_eq!(status["signedIn"], false, "{status}");
    for (tool, args) in [
        ("sandbox_exec", json!({"command": "true"})),
        ("sandbox_read", json!({"path": "x.txt"})),
        ("sandbox_list", json!({})),
        ("native_bash", json!({"command": "true"})),
    ] {
        let text = error_text(&mcp.call(tool, args).await);
        assert!(
            text.contains("createos login") && text.contains("CREATEOS_API_KEY"),
            "{tool}: {text}"
        );
    }
    assert_eq!(env.requests("createSandbox").await, 0);

    // `createos login` (token path) in another terminal: the next call works.
    let dir = home.path().join(".createos");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(".token"), format!("{}\n", env.mock.api_key())).unwrap();
    let ran = mcp
        .call("sandbox_exec", json!({"command": "echo signed in"}))
        .await;
    assert_eq!(ok_json(&ran)["stdout"], "signed in\n", "{ran}");
    assert!(sandbox_of(&ran).starts_with("sb-"));
    assert_eq!(
        ok_json(&mcp.call("sandbox_status", json!({})).await)["signedIn"],
        true
    );
    mcp.stop().await;
    env.shutdown().await;
}
