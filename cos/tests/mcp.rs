//! `cos mcp` end to end: the real binary over stdio, JSON-RPC written by hand, against the
//! in-process emulator.

#[path = "../../tests/common/mod.rs"]
mod common;
mod mcp_client;

use std::process::Stdio;
use std::time::Duration;

use base64::Engine;
use mcp_client::{error_text, ok_json, sandbox_of, Mcp, Setup};
use serde_json::{json, Value};

async fn creates(env: &common::Env) -> u64 {
    env.requests("createSandbox").await
}

async fn wait_live_processes(env: &common::Env, want_zero: bool) -> u64 {
    let mut live = 0;
    for _ in 0..600 {
        live = env.stats().await["live_processes"].as_u64().unwrap_or(0);
        if (live == 0) == want_zero {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    live
}

/// Processes of sandbox `id` whose command line contains `marker` (a unique string), as the
/// sandbox itself sees them.
async fn running_in(env: &common::Env, id: &str, marker: &str) -> usize {
    let out = env
        .client
        .sandbox(id)
        .unwrap()
        .exec("pgrep", ["-f", marker])
        .await
        .unwrap();
    out.stdout.lines().filter(|l| !l.trim().is_empty()).count()
}

/// Wait until `running_in` is zero (`want_zero`) or at least 2, up to 15 s.
async fn wait_running_in(env: &common::Env, id: &str, marker: &str, want_zero: bool) -> usize {
    let mut n = 0;
    for _ in 0..600 {
        n = running_in(env, id, marker).await;
        if if want_zero { n == 0 } else { n >= 2 } {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    n
}

async fn sandbox_status(env: &common::Env, id: &str) -> String {
    env.client
        .get_sandbox(id)
        .await
        .unwrap()
        .status()
        .as_str()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn catalog_is_closed_and_listing_allocates_nothing() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = Setup::new(&env, dir.path(), dir.path()).start().await;
    let list = mcp.request("tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for want in [
        "sandbox_status",
        "sandbox_exec",
        "sandbox_process_start",
        "sandbox_screenshot",
        "sandbox_release",
        "sandbox_create",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for tool in tools {
        let schema = &tool["inputSchema"];
        assert_eq!(schema["type"], "object", "{tool}");
        assert_eq!(schema["additionalProperties"], false, "{tool}");
        assert!(tool["name"].as_str().unwrap().starts_with("sandbox_"));
        assert!(
            tool["description"].as_str().is_some_and(|d| d.len() > 20),
            "{tool}"
        );
    }
    // Arguments outside the schema are refused before anything runs.
    let refused = mcp
        .call_in("sandbox_exec", json!({"command": "true", "bogus": 1}), None)
        .await;
    assert!(error_text(&refused).contains("bogus"));
    let unknown = mcp
        .request(
            "tools/call",
            Mcp::call_params("sandbox_nope", json!({}), None),
        )
        .await;
    assert!(unknown.get("error").is_some(), "{unknown}");
    let status = ok_json(&mcp.call_in("sandbox_status", json!({}), None).await);
    assert_eq!(status["sandbox"], Value::Null);
    assert_eq!(creates(&env).await, 0);
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_calls_share_one_sandbox_and_sessions_do_not() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = Setup::new(&env, dir.path(), dir.path()).start().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            mcp.send_request(
                "tools/call",
                Mcp::call_params(
                    "sandbox_exec",
                    json!({"command": format!("echo {i}")}),
                    Some("s1"),
                ),
            )
            .await,
        );
    }
    let mut sandboxes = Vec::new();
    for (i, id) in ids.into_iter().enumerate() {
        let result = mcp.response(id).await["result"].clone();
        assert_eq!(ok_json(&result)["stdout"], format!("{i}\n"));
        sandboxes.push(sandbox_of(&result));
    }
    sandboxes.dedup();
    assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
    assert_eq!(creates(&env).await, 1);

    let other = mcp
        .call_in("sandbox_exec", json!({"command": "true"}), Some("s2"))
        .await;
    assert_ne!(sandbox_of(&other), sandboxes[0]);
    assert_eq!(creates(&env).await, 2);
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exec_returns_output_exit_code_and_runs_in_the_session_cwd() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = Setup::new(&env, dir.path(), dir.path()).start().await;
    let result = mcp
        .call_in(
            "sandbox_exec",
            json!({"command": "echo out; echo err >&2; pwd >&2; exit 3"}),
            None,
        )
        .await;
    let body = ok_json(&result);
    assert_eq!(body["stdout"], "out\n");
    assert_eq!(body["stderr"], "err\n/root/workspace\n");
    assert_eq!(body["code"], 3);
    assert_eq!(body["truncated"], false);
    assert_eq!(result["_meta"]["exitCode"], 3);
    // Stdin is at EOF: a command that reads it does not hang.
    let cat = ok_json(
        &mcp.call_in(
            "sandbox_exec",
            json!({"command": "cat; echo done", "cwd": "/tmp"}),
            None,
        )
        .await,
    );
    assert_eq!(cat["stdout"], "done\n");
    // Output beyond the bound is cut and flagged.
    let big = ok_json(
        &mcp.call_in(
            "sandbox_exec",
            json!({"command": "head -c 1100000 /dev/zero | tr '\\0' x"}),
            None,
        )
        .await,
    );
    assert_eq!(big["truncated"], true);
    assert_eq!(big["stdout"].as_str().unwrap().len(), 1 << 20);
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelling_a_call_stops_the_remote_process_tree() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = Setup::new(&env, dir.path(), dir.path()).start().await;
    let sandbox = sandbox_of(
        &mcp.call_in("sandbox_exec", json!({"command": "true"}), None)
            .await,
    );
    // A unique duration marks this test's processes (`sleep` takes fractions).
    let marker = "sleep 301.25";
    let command = format!("{marker} & {marker}; wait");
    let id = mcp
        .send_request(
            "tools/call",
            Mcp::call_params(
                "sandbox_exec",
                json!({"command": command, "timeout": 0}),
                None,
            ),
        )
        .await;
    assert!(
        wait_running_in(&env, &sandbox, marker, false).await >= 2,
        "the exec never started"
    );
    // Release is refused while the session has a call in flight.
    let refused = mcp.call_in("sandbox_release", json!({}), None).await;
    assert!(error_text(&refused).contains("in flight"), "{refused}");
    mcp.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "test"}),
    )
    .await;
    assert_eq!(
        wait_running_in(&env, &sandbox, marker, true).await,
        0,
        "the remote tree survived the cancellation"
    );
    // The server stays usable.
    ok_json(&mcp.call_in("sandbox_status", json!({}), None).await);
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_timeout_stops_the_remote_process_tree() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = Setup::new(&env, dir.path(), dir.path()).start().await;
    let marker = "sleep 302.75";
    let result = mcp
        .call_in(
            "sandbox_exec",
            json!({"command": format!("{marker} & {marker}"), "timeout": 1500}),
            None,
        )
        .await;
    assert!(error_text(&result).contains("timed out"));
    let status = ok_json(&mcp.call_in("sandbox_status", json!({}), None).await);
    let sandbox = status["sandbox"].as_str().expect("bound").to_string();
    assert_eq!(
        wait_running_in(&env, &sandbox, marker, true).await,
        0,
        "the remote tree survived the deadline"
    );
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn release_destroys_and_forget_keeps_the_sandbox() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = Setup::new(&env, dir.path(), dir.path()).start().await;
    let first = sandbox_of(
        &mcp.call_in("sandbox_exec", json!({"command": "true"}), None)
            .await,
    );
    let forgot = ok_json(
        &mcp.call_in("sandbox_release", json!({"forget": true}), None)
            .await,
    );
    assert_eq!(forgot["sandbox"], first);
    assert_eq!(sandbox_status(&env, &first).await, "running");

    let second = sandbox_of(
        &mcp.call_in("sandbox_exec", json!({"command": "true"}), None)
            .await,
    );
    assert_ne!(first, second);
    let released = ok_json(&mcp.call_in("sandbox_release", json!({}), None).await);
    assert_eq!(released["destroyed"], true);
    let status = sandbox_status(&env, &second).await;
    assert!(status == "destroyed" || status == "destroying", "{status}");
    let status = ok_json(&mcp.call_in("sandbox_status", json!({}), None).await);
    assert_eq!(status["sandbox"], Value::Null);
    // Nothing bound: a second release says so.
    assert_eq!(
        ok_json(&mcp.call_in("sandbox_release", json!({}), None).await)["released"],
        false
    );
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bindings_survive_a_restart_unless_persist_is_off() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let setup = Setup::new(&env, dir.path(), dir.path());
    let mut mcp = setup.start().await;
    let first = sandbox_of(
        &mcp.call_in(
            "sandbox_exec",
            json!({"command": "touch /root/workspace/marker"}),
            Some("p"),
        )
        .await,
    );
    mcp.stop().await;
    assert_eq!(sandbox_status(&env, &first).await, "running");

    let mut mcp = setup.start().await;
    let again = mcp
        .call_in(
            "sandbox_exec",
            json!({"command": "ls /root/workspace"}),
            Some("p"),
        )
        .await;
    assert_eq!(sandbox_of(&again), first);
    assert_eq!(ok_json(&again)["stdout"], "marker\n");
    assert_eq!(creates(&env).await, 1);
    // A paused sandbox is resumed on reattach.
    ok_json(&mcp.call_in("sandbox_pause", json!({}), Some("p")).await);
    mcp.stop().await;
    let mut mcp = setup.start().await;
    assert_eq!(
        sandbox_of(
            &mcp.call_in("sandbox_exec", json!({"command": "true"}), Some("p"))
                .await
        ),
        first
    );
    mcp.stop().await;

    // persist: false destroys the session sandbox at shutdown and leaves explicit ones alone.
    let other = tempfile::tempdir().unwrap();
    let mut ephemeral = Setup::new(&env, other.path(), other.path());
    ephemeral.options = r#"{"persist": false}"#;
    let mut mcp = ephemeral.start().await;
    let session_box = sandbox_of(
        &mcp.call_in("sandbox_exec", json!({"command": "true"}), None)
            .await,
    );
    let explicit = ok_json(&mcp.call_in("sandbox_create", json!({}), None).await)["sandbox_id"]
        .as_str()
        .unwrap()
        .to_string();
    mcp.stop().await;
    let status = sandbox_status(&env, &session_box).await;
    assert!(status == "destroyed" || status == "destroying", "{status}");
    assert_eq!(sandbox_status(&env, &explicit).await, "running");
    assert_eq!(sandbox_status(&env, &first).await, "running");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn invalid_configuration_is_refused_at_start() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut setup = Setup::new(&env, dir.path(), dir.path());
    setup.options = r#"{"shape": "s-2vcpu-2gb", "bogus": true}"#;
    let out = setup.command().stdin(Stdio::null()).output().await.unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "stdout must stay protocol-only");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown option \"bogus\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut setup = Setup::new(&env, dir.path(), dir.path());
    setup.extra_env.push(("CREATEOS_PERSIST", "yes".into()));
    let out = setup.command().stdin(Stdio::null()).output().await.unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("CREATEOS_PERSIST"));

    // The environment wins over options.
    let mut setup = Setup::new(&env, dir.path(), dir.path());
    setup.options = r#"{"cwd": "/srv/a"}"#;
    setup.extra_env.push(("CREATEOS_CWD", "/srv/b".into()));
    let mut mcp = setup.start().await;
    assert_eq!(
        ok_json(&mcp.call_in("sandbox_status", json!({}), None).await)["cwd"],
        "/srv/b"
    );
    mcp.stop().await;
    assert_eq!(creates(&env).await, 0);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn screenshot_is_an_inline_png_and_processes_run_in_the_background() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = Setup::new(&env, dir.path(), dir.path()).start().await;
    let desk = ok_json(
        &mcp.call_in("sandbox_create", json!({"rootfs": "desktop:1"}), None)
            .await,
    );
    let id = desk["sandbox_id"].as_str().unwrap().to_string();
    let shot = mcp
        .call_in("sandbox_screenshot", json!({"sandbox_id": id}), None)
        .await;
    assert_ne!(shot["isError"], true, "{shot}");
    let part = &shot["content"][0];
    assert_eq!(part["type"], "image");
    assert_eq!(part["mimeType"], "image/png");
    let png = base64::engine::general_purpose::STANDARD
        .decode(part["data"].as_str().unwrap())
        .unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let screen = ok_json(
        &mcp.call_in(
            "sandbox_computer",
            json!({"sandbox_id": id, "op": "screen"}),
            None,
        )
        .await,
    );
    assert!(screen["width"].as_u64().unwrap() > 0, "{screen}");

    // A background process outlives its call; its output is readable; stop ends it.
    let started = ok_json(&mcp.call_in("sandbox_process_start", json!({"sandbox_id": id, "command": "echo ready; read line; echo got $line; sleep 300"}), None).await);
    let pid = started["process_id"].as_str().unwrap().to_string();
    ok_json(
        &mcp.call_in(
            "sandbox_process_input",
            json!({"sandbox_id": id, "process_id": pid, "text": "hello\n"}),
            None,
        )
        .await,
    );
    let mut seen = String::new();
    for _ in 0..200 {
        let out = ok_json(
            &mcp.call_in(
                "sandbox_process_output",
                json!({"sandbox_id": id, "process_id": pid}),
                None,
            )
            .await,
        );
        seen = out["stdout"].as_str().unwrap().to_string();
        if seen.contains("got hello") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(seen, "ready\ngot hello\n");
    let listed = ok_json(
        &mcp.call_in("sandbox_process_list", json!({"sandbox_id": id}), None)
            .await,
    );
    assert!(listed
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["process_id"] == pid.as_str()));
    ok_json(
        &mcp.call_in(
            "sandbox_process_stop",
            json!({"sandbox_id": id, "process_id": pid}),
            None,
        )
        .await,
    );
    assert_eq!(wait_live_processes(&env, true).await, 0);

    let desktop = ok_json(
        &mcp.call_in("sandbox_desktop", json!({"sandbox_id": id}), None)
            .await,
    );
    assert_eq!(desktop["ingress_enabled"], true, "{desktop}");
    assert!(
        desktop["novnc"]["port"].as_u64().is_some_and(|p| p > 0),
        "{desktop}"
    );

    let refused = mcp
        .call_in(
            "sandbox_firewall",
            json!({"sandbox_id": id, "rules": ["example.com"]}),
            None,
        )
        .await;
    assert!(error_text(&refused).contains("IP"));
    ok_json(
        &mcp.call_in(
            "sandbox_firewall",
            json!({"sandbox_id": id, "rules": ["10.0.0.0/8"]}),
            None,
        )
        .await,
    );
    ok_json(
        &mcp.call_in("sandbox_destroy", json!({"sandbox_id": id}), None)
            .await,
    );
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn disk_credentials_come_from_server_environment_variables() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut setup = Setup::new(&env, dir.path(), dir.path());
    setup
        .extra_env
        .push(("TEST_S3_ACCESS", "AKIATESTACCESS".into()));
    setup
        .extra_env
        .push(("TEST_S3_SECRET", "very-secret-value".into()));
    let mut mcp = setup.start().await;
    let base = json!({"name": "data", "bucket": "data-bucket", "endpoint": "https://s3.example.test", "access_key_env": "TEST_S3_ACCESS"});
    let mut missing = base.clone();
    missing["secret_key_env"] = json!("TEST_S3_UNSET");
    assert!(
        error_text(&mcp.call_in("sandbox_disk_create", missing, None).await)
            .contains("TEST_S3_UNSET")
    );
    let mut args = base.clone();
    args["secret_key_env"] = json!("TEST_S3_SECRET");
    let created = mcp.call_in("sandbox_disk_create", args, None).await;
    let text = created["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        !text.contains("very-secret-value") && !text.contains("AKIATESTACCESS"),
        "{text}"
    );
    assert_eq!(ok_json(&created)["name"], "data");
    let listed = ok_json(&mcp.call_in("sandbox_disk_list", json!({}), None).await);
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["name"] == "data"),
        "{listed}"
    );
    ok_json(
        &mcp.call_in("sandbox_disk_delete", json!({"name": "data"}), None)
            .await,
    );
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_progress_token_gets_ordered_progress_before_the_result() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("hello.txt"), "hi\n").unwrap();
    let state = dir.path().join("state");
    let mut mcp = Setup::new(&env, &state, &project).start().await;
    let params = json!({"name": "sandbox_offload", "arguments": {"command": "cat hello.txt"}, "_meta": {"progressToken": "job-1"}});
    let answer = mcp.request("tools/call", params).await;
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    let progress: Vec<&Value> = mcp
        .notifications
        .iter()
        .filter(|n| {
            n["method"] == "notifications/progress" && n["params"]["progressToken"] == "job-1"
        })
        .collect();
    let messages: Vec<&str> = progress
        .iter()
        .map(|n| n["params"]["message"].as_str().unwrap_or_default())
        .collect();
    for want in [
        "created sandbox",
        "uploaded 1 files",
        "running",
        "exited 0",
        "destroyed sandbox",
    ] {
        assert!(
            messages.iter().any(|m| m.contains(want)),
            "no {want:?} in {messages:?}"
        );
    }
    let values: Vec<f64> = progress
        .iter()
        .map(|n| n["params"]["progress"].as_f64().unwrap())
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "progress must increase: {values:?}"
    );
    // Without a token, nothing is sent.
    let before = mcp.notifications.len();
    mcp.call_in("sandbox_offload", json!({"command": "true"}), None)
        .await;
    assert_eq!(
        mcp.notifications.len(),
        before,
        "{:?}",
        &mcp.notifications[before..]
    );
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sync_once_copies_the_project_once_and_skills_at_every_attach() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(project.join("src/main.py"), "print(1)\n").unwrap();
    std::fs::write(project.join(".env"), "SECRET=1\n").unwrap();
    // Dependencies, virtualenvs and tool state stay home, at any depth.
    for left_out in [
        "node_modules/pkg/index.js",
        "src/node_modules/x.js",
        ".venv/bin/python",
        ".opencode/state.json",
        ".createos/cache",
    ] {
        let path = project.join(left_out);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x\n").unwrap();
    }
    let skill = dir.path().join("skills/review");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(skill.join("SKILL.md"), "v1\n").unwrap();
    let state = dir.path().join("state");
    let options = json!({"sync": "once", "skillDirs": [skill, dir.path().join("skills/missing")]})
        .to_string();
    let mut setup = Setup::new(&env, &state, &project);
    setup.options = &options;

    let mut mcp = setup.start().await;
    let skill_md = skill.join("SKILL.md");
    let script = format!(
        "cat /root/workspace/src/main.py; cat {}; ls -A /root/workspace; ls -A /root/workspace/src",
        skill_md.display()
    );
    let first = mcp
        .call_in("sandbox_exec", json!({"command": script}), None)
        .await;
    assert_eq!(
        ok_json(&first)["stdout"],
        "print(1)\nv1\nsrc\nmain.py\n",
        "the project (without .env and the excluded trees) and the skill arrived"
    );
    mcp.stop().await;

    // A restart reattaches: the project is not copied again, the skill is refreshed.
    std::fs::write(project.join("src/main.py"), "print(2)\n").unwrap();
    std::fs::write(&skill_md, "v2\n").unwrap();
    let mut mcp = setup.start().await;
    let status = ok_json(&mcp.call_in("sandbox_status", json!({}), None).await);
    assert_eq!(
        status["stored"],
        sandbox_of(&first),
        "the stored binding shows before reattaching: {status}"
    );
    let again = mcp
        .call_in("sandbox_exec", json!({"command": script}), None)
        .await;
    assert_eq!(sandbox_of(&again), sandbox_of(&first));
    assert_eq!(ok_json(&again)["stdout"], "print(1)\nv2\nsrc\nmain.py\n");
    mcp.stop().await;
    env.shutdown().await;
}
