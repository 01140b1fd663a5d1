//! Session bindings that recover (issue 16.1): a bound sandbox deleted elsewhere is replaced by
//! a fresh, prepared session sandbox on the next call, which says so; bindings are keyed by
//! control plane, account, project and session, so they never cross endpoints or accounts.

#[path = "../../tests/common/mod.rs"]
mod common;
mod mcp_client;

use mcp_client::{ok_json, sandbox_of, Mcp, Setup};
use serde_json::{json, Value};

/// The text parts of a result, joined.
fn texts(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The sandbox a call in session `s` ran in.
async fn exec_in(mcp: &mut Mcp) -> String {
    sandbox_of(
        &mcp.call_in("sandbox_exec", json!({"command": "true"}), Some("s"))
            .await,
    )
}

async fn destroy(env: &common::Env, id: &str) {
    env.client
        .sandbox(id)
        .unwrap()
        .destroy()
        .await
        .expect("destroy through the API");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deleted_session_sandbox_is_replaced_and_the_result_says_so() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("app.py"), "print('app')\n").unwrap();
    let state = dir.path().join("state");
    let mut setup = Setup::new(&env, &state, &project);
    setup.options = r#"{"sync": "once"}"#;
    let mut mcp = setup.start().await;

    let first = sandbox_of(
        &mcp.call("sandbox_exec", json!({"command": "echo marker > here.txt"}))
            .await,
    );
    // Warm binding, sandbox deleted elsewhere.
    destroy(&env, &first).await;
    let result = mcp
        .call("sandbox_exec", json!({"command": "cat app.py; ls"}))
        .await;
    let second = sandbox_of(&result);
    assert_ne!(second, first);
    assert_eq!(
        ok_json(&result)["stdout"],
        "print('app')\napp.py\n",
        "a fresh sandbox, prepared with sync once: {result}"
    );
    let text = texts(&result);
    assert!(
        text.contains(&format!(
            "the previous session sandbox {first} no longer exists"
        )) && text.contains(&second),
        "{text}"
    );
    assert_eq!(result["_meta"]["previousSandboxId"], first.as_str());
    // Said once.
    let again = mcp.call("sandbox_exec", json!({"command": "true"})).await;
    assert_eq!(sandbox_of(&again), second);
    assert!(!texts(&again).contains("no longer exists"), "{again}");

    // A file tool recovers the same way.
    destroy(&env, &second).await;
    let read = mcp.call("sandbox_read", json!({"path": "app.py"})).await;
    let third = sandbox_of(&read);
    assert!(third != second && third != first);
    assert!(texts(&read).starts_with("1: print('app')"), "{read}");
    assert!(
        texts(&read).contains(&format!("{second} no longer exists")),
        "{read}"
    );
    mcp.stop().await;

    // A stored binding whose sandbox went away while the server was down: the same.
    destroy(&env, &third).await;
    let mut mcp = setup.start().await;
    let result = mcp
        .call("sandbox_exec", json!({"command": "cat app.py"}))
        .await;
    let fourth = sandbox_of(&result);
    assert!(![&first, &second, &third].contains(&&fourth));
    assert_eq!(ok_json(&result)["stdout"], "print('app')\n");
    assert!(
        texts(&result).contains(&format!("{third} no longer exists")),
        "{result}"
    );
    // A paused one is resumed, not replaced.
    ok_json(&mcp.call("sandbox_pause", json!({})).await);
    assert_eq!(
        sandbox_of(&mcp.call("sandbox_exec", json!({"command": "true"})).await),
        fourth
    );
    // forget stays for the deliberate case.
    assert_eq!(
        ok_json(&mcp.call("sandbox_release", json!({"forget": true})).await)["sandbox"],
        fourth.as_str()
    );
    assert_ne!(
        sandbox_of(&mcp.call("sandbox_exec", json!({"command": "true"})).await),
        fourth
    );
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bindings_never_cross_endpoints_or_accounts() {
    let a = common::start().await;
    let b = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (state, project) = (dir.path().join("state"), dir.path().join("project"));
    std::fs::create_dir_all(&project).unwrap();
    let mut on_a = Setup::new(&a, &state, &project).start().await;
    let sandbox_a = exec_in(&mut on_a).await;
    on_a.stop().await;

    // Same state directory, project and session, another control plane.
    let mut on_b = Setup::new(&b, &state, &project).start().await;
    let status = ok_json(&on_b.call_in("sandbox_status", json!({}), Some("s")).await);
    assert_eq!(
        status["stored"],
        Value::Null,
        "a binding of another endpoint showed: {status}"
    );
    let on_b_result = on_b
        .call_in("sandbox_exec", json!({"command": "true"}), Some("s"))
        .await;
    let sandbox_b = sandbox_of(&on_b_result);
    assert_ne!(sandbox_b, sandbox_a);
    // Not a reattach that found A's sandbox missing on B: simply a new binding.
    assert!(
        !texts(&on_b_result).contains("no longer exists"),
        "{on_b_result}"
    );
    on_b.stop().await;

    // Back on A: its own binding is still there.
    let mut on_a = Setup::new(&a, &state, &project).start().await;
    assert_eq!(exec_in(&mut on_a).await, sandbox_a);
    on_a.stop().await;

    // Another account on A: a binding of its own.
    let (key, _) = a.new_tenant(true).await;
    let mut other = Setup::new(&a, &state, &project);
    other.extra_env.push(("CREATEOS_API_KEY", key));
    let mut as_other = other.start().await;
    let sandbox_other = exec_in(&mut as_other).await;
    assert!(sandbox_other != sandbox_a && sandbox_other != sandbox_b);
    as_other.stop().await;
    a.shutdown().await;
    b.shutdown().await;
}
