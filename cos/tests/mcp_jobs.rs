//! The jobs tools (`sandbox_offload`, `sandbox_fanout`, `sandbox_run_code`) through `cos mcp`
//! over stdio against the emulator: results and metadata, artifacts in the project, retention,
//! cancellation, and refusals before anything is created.

#[path = "../../tests/common/mod.rs"]
mod common;
mod mcp_client;

use std::path::Path;
use std::time::Duration;

use createos_sandbox::{ListSandboxes, SandboxStatus};
use futures::TryStreamExt;
use mcp_client::{error_text, ok_json};
use serde_json::json;

/// How long the job commands may take to start under load.
const START_LIMIT: Duration = Duration::from_secs(180);

/// `cos mcp` with its state (and HOME) in `state` and the project in `project`.
async fn start(env: &common::Env, state: &Path, project: &Path) -> mcp_client::Mcp {
    mcp_client::Mcp::start_in(env, state, project, r#"{"persist": false}"#, &[]).await
}

/// A project directory apart from the server's state and HOME.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("app")).unwrap();
    std::fs::write(dir.path().join("app/data.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(dir.path().join("top.txt"), "top\n").unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn offload_returns_output_metadata_and_the_artifact() {
    let env = common::start().await;
    let (state, proj) = (tempfile::tempdir().unwrap(), project());
    let mut mcp = start(&env, state.path(), proj.path()).await;

    // `dir` relative to the project: only app/ travels
    let result = mcp
        .call("sandbox_offload", json!({"command": "ls; mkdir -p out && sort -r data.txt > out/sorted.txt", "dir": "app", "out": "out/sorted.txt"}))
        .await;
    let body = ok_json(&result);
    assert_eq!(body["stdout"], "data.txt\n", "{body}");
    assert_eq!(body["code"], 0);
    assert_eq!(body["kept"], false);
    assert_eq!(result["_meta"]["exitCode"], 0);
    assert_eq!(result["_meta"]["sandboxId"], body["sandboxId"]);
    assert_eq!(
        std::fs::read_to_string(proj.path().join("app/out/sorted.txt")).unwrap(),
        "beta\nalpha\n"
    );

    // a directory artifact, the whole project
    let result = mcp
        .call(
            "sandbox_offload",
            json!({"command": "mkdir -p report/x && cp top.txt report/x/", "out": "report"}),
        )
        .await;
    assert_eq!(ok_json(&result)["artifact"]["kind"], "directory");
    assert_eq!(
        std::fs::read_to_string(proj.path().join("report/x/top.txt")).unwrap(),
        "top\n"
    );

    // keep_on_fail keeps and names the sandbox; without it a failure destroys
    let result = mcp
        .call(
            "sandbox_offload",
            json!({"command": "exit 5", "keep_on_fail": true}),
        )
        .await;
    let body = ok_json(&result);
    let kept = body["sandboxId"].as_str().unwrap().to_string();
    assert_eq!(
        (body["code"].as_i64(), body["kept"].as_bool()),
        (Some(5), Some(true))
    );
    assert!(body["sandbox"].as_str().unwrap().contains(&kept));
    assert_eq!(
        env.client.get_sandbox(&kept).await.unwrap().status(),
        SandboxStatus::Running
    );
    ok_json(
        &mcp.call("sandbox_destroy", json!({"sandbox_id": kept}))
            .await,
    );
    let body = ok_json(
        &mcp.call("sandbox_offload", json!({"command": "exit 5"}))
            .await,
    );
    assert_eq!(body["kept"], false);
    assert_eq!(env.settled_live_sandboxes().await, 0);
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fanout_and_run_code_through_the_tools() {
    let env = common::start().await;
    let (state, proj) = (tempfile::tempdir().unwrap(), project());
    let mut mcp = start(&env, state.path(), proj.path()).await;

    let result = mcp
        .call(
            "sandbox_fanout",
            json!({"commands": ["cat top.txt", "exit 9", "echo e >&2"], "jobs": 3}),
        )
        .await;
    let body = ok_json(&result);
    let entries = body["results"].as_array().unwrap();
    let codes: Vec<i64> = entries
        .iter()
        .map(|e| e["code"].as_i64().unwrap())
        .collect();
    assert_eq!(codes, vec![0, 9, 0]);
    assert_eq!(entries[0]["stdout"], "top\n");
    assert_eq!(entries[2]["stderr"], "e\n");
    assert_eq!(result["_meta"]["exitCodes"], json!([0, 9, 0]));
    assert_eq!(result["_meta"]["sandboxIds"].as_array().unwrap().len(), 3);
    assert_eq!(
        env.settled_live_sandboxes().await,
        0,
        "failing commands leave nothing behind"
    );

    let result = mcp
        .call(
            "sandbox_fanout",
            json!({"commands": ["true", "false"], "keep_on_fail": true}),
        )
        .await;
    let kept = result["_meta"]["kept"].as_array().unwrap().clone();
    assert_eq!(kept.len(), 1, "{result}");
    ok_json(
        &mcp.call("sandbox_destroy", json!({"sandbox_id": kept[0]}))
            .await,
    );

    let result = mcp.call("sandbox_run_code", json!({"lang": "py", "code": "print(sum(int(x) for x in input().split()))", "stdin": "2 3 4\n"})).await;
    let body = ok_json(&result);
    assert_eq!(body["stdout"], "9\n");
    assert_eq!(result["_meta"]["exitCode"], 0);
    let result = mcp
        .call(
            "sandbox_run_code",
            json!({"lang": "sh", "code": "echo $0 in $(pwd)"}),
        )
        .await;
    assert_eq!(ok_json(&result)["stdout"], "main.sh in /work\n");
    assert_eq!(env.settled_live_sandboxes().await, 0);
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_job_input_is_refused_before_anything_is_created() {
    let env = common::start().await;
    let (state, proj) = (tempfile::tempdir().unwrap(), project());
    let mut mcp = start(&env, state.path(), proj.path()).await;
    let many: Vec<String> = (0..26).map(|i| format!("echo {i}")).collect();
    let cases = [
        (
            "sandbox_offload",
            json!({"command": "true", "extra": 1}),
            "unknown argument",
        ),
        ("sandbox_offload", json!({"command": ""}), "empty"),
        (
            "sandbox_offload",
            json!({"command": "true", "out": "../escape"}),
            "..",
        ),
        (
            "sandbox_offload",
            json!({"command": "true", "out": "/etc/passwd"}),
            "outside /work",
        ),
        (
            "sandbox_offload",
            json!({"command": "true", "dir": "/"}),
            "outside the project directory",
        ),
        (
            "sandbox_offload",
            json!({"command": "true", "dir": "missing"}),
            "does not exist",
        ),
        (
            "sandbox_fanout",
            json!({"commands": ["true"], "dir": "../.."}),
            "outside the project directory",
        ),
        (
            "sandbox_offload",
            json!({"command": "true", "timeout": 3_600_001}),
            "timeout",
        ),
        ("sandbox_fanout", json!({"commands": []}), "at least"),
        ("sandbox_fanout", json!({"commands": many}), "at most"),
        (
            "sandbox_fanout",
            json!({"commands": ["true"], "jobs": 11}),
            "jobs",
        ),
        (
            "sandbox_fanout",
            json!({"commands": ["true"], "jobs": 0}),
            "jobs",
        ),
        (
            "sandbox_fanout",
            json!({"commands": ["true", "  "]}),
            "commands[1]",
        ),
        (
            "sandbox_run_code",
            json!({"lang": "cobol", "code": "x"}),
            "lang",
        ),
        ("sandbox_run_code", json!({"lang": "py"}), "code"),
    ];
    for (tool, args, want) in cases {
        let text = error_text(&mcp.call(tool, args.clone()).await);
        assert!(text.contains(want), "{tool} {args}: {text}");
    }
    assert_eq!(env.requests("createSandbox").await, 0);
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelling_a_job_call_destroys_its_sandboxes() {
    let env = common::start().await;
    let (state, proj) = (tempfile::tempdir().unwrap(), project());
    let mut mcp = start(&env, state.path(), proj.path()).await;
    for (tool, args, sandboxes) in [
        (
            "sandbox_offload",
            json!({"command": "touch /work/started; sleep 600", "keep_on_fail": true, "timeout": 0}),
            1,
        ),
        (
            "sandbox_fanout",
            json!({"commands": ["touch /work/started; sleep 600", "touch /work/started; sleep 600", "sleep 600"], "jobs": 2, "timeout": 0}),
            2,
        ),
    ] {
        let before = env.requests("createSandbox").await;
        let id = mcp
            .send_request("tools/call", json!({"name": tool, "arguments": args}))
            .await;
        // wait until the commands run
        tokio::time::timeout(START_LIMIT, async {
            loop {
                let views: Vec<_> = env
                    .client
                    .list_sandboxes(ListSandboxes::default())
                    .try_collect()
                    .await
                    .unwrap();
                let mut running = 0;
                for v in views.iter().filter(|v| v.status == SandboxStatus::Running) {
                    if env
                        .client
                        .sandbox(&v.id)
                        .unwrap()
                        .read_to_string("/work/started")
                        .await
                        .is_ok()
                    {
                        running += 1;
                    }
                }
                if running >= sandboxes {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the job commands start");
        mcp.notify(
            "notifications/cancelled",
            json!({"requestId": id, "reason": "test"}),
        )
        .await;
        assert_eq!(
            env.settled_live_sandboxes().await,
            0,
            "{tool}: a sandbox survived the cancellation"
        );
        assert_eq!(
            env.requests("createSandbox").await - before,
            sandboxes as u64,
            "{tool}: dispatch continued"
        );
        // the server stays usable
        ok_json(&mcp.call("sandbox_status", json!({})).await);
    }
    mcp.stop().await;
    env.shutdown().await;
}
