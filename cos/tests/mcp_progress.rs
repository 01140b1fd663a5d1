//! Progress of long calls (issue 16.2): with a `progressToken`, `cos mcp` sends
//! `notifications/progress` at least every 5 s until the call ends — the session sandbox's
//! creation, a running command (its output size and last line) — and without one it sends
//! nothing.

#[path = "../../tests/common/mod.rs"]
mod common;
mod mcp_client;

use mcp_client::{ok_json, Mcp, Setup};
use serde_json::{json, Value};

/// The progress notifications of `token` seen so far, as (progress, message).
fn progress_of(mcp: &Mcp, token: &str) -> Vec<(f64, String)> {
    mcp.notifications
        .iter()
        .filter(|n| {
            n["method"] == "notifications/progress" && n["params"]["progressToken"] == token
        })
        .map(|n| {
            (
                n["params"]["progress"].as_f64().unwrap_or(-1.0),
                n["params"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_long_exec_with_a_token_reports_progress_and_without_one_nothing() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = Setup::new(&env, dir.path(), dir.path()).start().await;

    // The first call of the session creates its sandbox, then runs a 12 s command.
    let params = json!({
        "name": "sandbox_exec",
        "arguments": {"command": "echo first; sleep 6; echo second line; sleep 6; echo done"},
        "_meta": {"progressToken": "exec-1"},
    });
    let answer = mcp.request("tools/call", params).await;
    let body = ok_json(&answer["result"]);
    assert_eq!(body["stdout"], "first\nsecond line\ndone\n", "{answer}");
    let seen = progress_of(&mcp, "exec-1");
    let messages: Vec<&str> = seen.iter().map(|(_, m)| m.as_str()).collect();
    let running: Vec<&&str> = messages
        .iter()
        .filter(|m| m.starts_with("running `echo first"))
        .collect();
    assert!(
        running.len() >= 2,
        "a 12 s command got {} progress reports: {messages:?}",
        running.len()
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("creating the session sandbox")),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("bytes of output; last line: first")),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("last line: second line")),
        "{messages:?}"
    );
    let values: Vec<f64> = seen.iter().map(|(p, _)| *p).collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "progress must increase: {values:?}"
    );

    // Without a token: nothing, however long the call.
    let before = mcp.notifications.len();
    let quiet = mcp
        .call("sandbox_exec", json!({"command": "sleep 5; echo quiet"}))
        .await;
    assert_eq!(ok_json(&quiet)["stdout"], "quiet\n");
    let extra: Vec<&Value> = mcp.notifications[before..].iter().collect();
    assert!(extra.is_empty(), "{extra:?}");

    // A call that finds the session sandbox paused resumes it, and says so.
    let params =
        json!({"name": "sandbox_pause", "arguments": {}, "_meta": {"progressToken": "pause-1"}});
    let paused = mcp.request("tools/call", params).await;
    assert_ne!(paused["result"]["isError"], true, "{paused}");
    let params = json!({"name": "sandbox_exec", "arguments": {"command": "echo back"}, "_meta": {"progressToken": "resume-1"}});
    let resumed = mcp.request("tools/call", params).await;
    assert_eq!(ok_json(&resumed["result"])["stdout"], "back\n", "{resumed}");
    let messages: Vec<String> = progress_of(&mcp, "resume-1")
        .into_iter()
        .map(|(_, m)| m)
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("resuming the session sandbox")),
        "{messages:?}"
    );
    mcp.stop().await;
    env.shutdown().await;
}
