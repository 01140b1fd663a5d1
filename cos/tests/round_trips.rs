//! Round trips per warm tool call (issue 14): the control-plane requests each `cos mcp` tool
//! call and each `cos exec` / `cos fs` process makes once the session is warm, counted at the
//! emulator (`/_mock/stats`), against the limits of the design: `sandbox_exec` and the plain
//! file tools at most 2, edit and patch at most 3, no `GET` of the bound sandbox, and no
//! interpreter (process) start in the guest per file call.

#[path = "../../tests/common/mod.rs"]
mod common;
mod mcp_client;

use std::collections::BTreeMap;
use std::process::Command;

use mcp_client::{ok_json, sandbox_of, string, total_requests, Mcp, Setup};
use serde_json::{json, Value};

/// Requests per operation id since the last reset, and their sum.
async fn counted(env: &common::Env) -> (BTreeMap<String, u64>, u64) {
    let stats = env.stats().await;
    let by_op: BTreeMap<String, u64> = stats["requests"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                .collect()
        })
        .unwrap_or_default();
    let total = by_op.values().sum();
    (by_op, total)
}

/// One warm call: its result must succeed and stay within `limit` requests, none of them a
/// sandbox lookup; file calls must not start a process.
async fn measure(
    env: &common::Env,
    mcp: &mut Mcp,
    tool: &str,
    args: Value,
    limit: u64,
    file_call: bool,
) -> u64 {
    env.reset_stats().await;
    let result = mcp.call(tool, args.clone()).await;
    assert_ne!(result["isError"], true, "{tool} {args}: {result}");
    let (by_op, total) = counted(env).await;
    eprintln!("{tool}: {total} request(s) {by_op:?}");
    assert!(
        total <= limit,
        "{tool} made {total} requests (limit {limit}): {by_op:?}"
    );
    assert_eq!(
        by_op.get("getSandbox"),
        None,
        "{tool} looked the bound sandbox up: {by_op:?}"
    );
    if file_call {
        assert_eq!(
            by_op.get("createProcess"),
            None,
            "{tool} started a process (an interpreter) in the guest: {by_op:?}"
        );
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn warm_tool_calls_stay_within_their_round_trip_limits() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let mut setup = Setup::new(&env, dir.path(), project.path());
    setup.options = r#"{"mode": "remote"}"#;
    let mut mcp = setup.start().await;

    // Cold: the session sandbox is created and its helper started.
    let first = mcp
        .call(
            "sandbox_exec",
            json!({"command": "mkdir -p src && printf 'one\\ntwo\\n' > src/two.txt"}),
        )
        .await;
    let sandbox = sandbox_of(&first);
    assert_eq!(ok_json(&first)["code"], 0, "{first}");
    let background = ok_json(
        &mcp.call(
            "native_bash",
            json!({"command": "echo started; sleep 300", "background": true}),
        )
        .await,
    );
    let process = string(&background, "processId");
    let before = total_requests(&env).await;
    assert!(before > 0);

    let patch = |from: &str, to: &str| {
        format!("*** Begin Patch\n*** Update File: src/new.txt\n@@\n-{from}\n+{to}\n*** End Patch")
    };
    let calls: Vec<(&str, Value, u64, bool)> = vec![
        ("sandbox_exec", json!({"command": "true"}), 2, false),
        ("sandbox_read", json!({"path": "src/two.txt"}), 2, true),
        (
            "sandbox_write",
            json!({"path": "src/new.txt", "content": "a\n"}),
            2,
            true,
        ),
        ("sandbox_glob", json!({"pattern": "**/*.txt"}), 2, true),
        ("sandbox_grep", json!({"pattern": "two"}), 2, true),
        (
            "sandbox_edit",
            json!({"path": "src/new.txt", "oldString": "a", "newString": "b"}),
            3,
            true,
        ),
        (
            "sandbox_patch",
            json!({"patchText": patch("b", "c")}),
            3,
            true,
        ),
        (
            "sandbox_process_output",
            json!({"sandbox_id": sandbox, "process_id": process}),
            2,
            true,
        ),
        ("native_bash", json!({"command": "true"}), 2, false),
        ("native_read", json!({"filePath": "src/two.txt"}), 2, true),
        (
            "native_write",
            json!({"filePath": "src/new.txt", "content": "d\n"}),
            2,
            true,
        ),
        ("native_glob", json!({"pattern": "**/*.txt"}), 2, true),
        ("native_grep", json!({"pattern": "two"}), 2, true),
        (
            "native_edit",
            json!({"filePath": "src/new.txt", "oldString": "d", "newString": "e"}),
            3,
            true,
        ),
        (
            "native_apply_patch",
            json!({"patchText": patch("e", "f")}),
            3,
            true,
        ),
    ];
    let mut table = Vec::new();
    for (tool, args, limit, file_call) in calls {
        table.push((
            tool,
            measure(&env, &mut mcp, tool, args, limit, file_call).await,
        ));
    }
    // What the calls did is really there.
    let read = mcp
        .call("sandbox_read", json!({"path": "src/new.txt"}))
        .await;
    assert_eq!(read["content"][0]["text"], "1: f", "{read}");
    // Warm exec is one request while the helper's output stream is open.
    assert_eq!(table[0], ("sandbox_exec", 1), "{table:?}");
    eprintln!("requests per warm call: {table:?}");

    // The CLI takes the same paths: `cos exec` by id is one request (no lookup), `cos fs` a
    // managed process started and followed (its request in argv: no input, no wait).
    let cos = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cos"))
            .args([
                "--endpoint",
                &env.base_url(),
                "--api-key",
                &env.mock.api_key(),
            ])
            .args(args)
            .env_remove("CREATEOS_API_KEY")
            .env_remove("CREATEOS_SANDBOX_BASE_URL")
            .env("HOME", dir.path())
            .output()
            .expect("cos runs");
        assert!(
            out.status.success(),
            "cos {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for (args, limit, want) in [
        (vec!["exec", sandbox.as_str(), "--", "true"], 1, ""),
        (
            vec![
                "fs",
                sandbox.as_str(),
                "--cwd",
                "/root/workspace",
                "read",
                "src/two.txt",
            ],
            2,
            "1: one",
        ),
    ] {
        env.reset_stats().await;
        let printed = tokio::task::block_in_place(|| cos(&args));
        // (text or JSON, whichever the output convention of the day gives on a pipe)
        assert!(printed.contains(want), "cos {args:?} printed {printed:?}");
        let (by_op, total) = counted(&env).await;
        eprintln!("cos {}: {total} request(s) {by_op:?}", args[0]);
        assert!(
            total <= limit,
            "cos {args:?} made {total} requests (limit {limit}): {by_op:?}"
        );
        assert_eq!(
            by_op.get("getSandbox"),
            None,
            "cos {args:?} looked the sandbox up: {by_op:?}"
        );
    }
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_after_the_stream_closed_reopens_it_alongside_its_input() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut setup = Setup::new(&env, dir.path(), dir.path());
    // The helper's output stream closes 100 ms after the last answer (20 s by default).
    setup
        .extra_env
        .push(("COS_RESIDENT_LINGER_MS", "100".into()));
    let mut mcp = setup.start().await;
    ok_json(
        &mcp.call("sandbox_exec", json!({"command": "echo warm"}))
            .await,
    );
    for round in 0..3 {
        tokio::time::sleep(std::time::Duration::from_millis(600)).await;
        env.reset_stats().await;
        let out = ok_json(
            &mcp.call(
                "sandbox_exec",
                json!({"command": format!("echo round {round}")}),
            )
            .await,
        );
        assert_eq!(out["stdout"], format!("round {round}\n"));
        let (by_op, total) = counted(&env).await;
        eprintln!("after the linger: {total} request(s) {by_op:?}");
        assert_eq!(
            (by_op.get("writeProcessInput"), by_op.get("connectProcess")),
            (Some(&1), Some(&1)),
            "{by_op:?}"
        );
        assert_eq!(total, 2, "{by_op:?}");
    }
    mcp.stop().await;
    env.shutdown().await;
}
