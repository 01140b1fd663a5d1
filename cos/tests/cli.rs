//! `cos` end to end: the real binary against the emulator, `-o json` parsed.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::process::{Command, Output};

use common::cli::{json, ok};
use createos_sandbox::CreateSandbox;

fn cos(env: &common::Env, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cos"))
        .args([
            "--endpoint",
            &env.base_url(),
            "--api-key",
            &env.mock.api_key(),
            "-o",
            "json",
        ])
        .args(args)
        .env_remove("CREATEOS_API_KEY")
        .env_remove("CREATEOS_SANDBOX_BASE_URL")
        .env("HOME", std::env::temp_dir())
        .output()
        .expect("cos runs")
}

#[tokio::test(flavor = "multi_thread")]
async fn lifecycle_through_the_cli() {
    let env = common::start().await;
    let e = &env;
    let who = tokio::task::block_in_place(|| ok(cos(e, &["whoami"])));
    assert!(who["user_id"].as_str().is_some_and(|u| !u.is_empty()));
    let shapes = tokio::task::block_in_place(|| ok(cos(e, &["shapes"])));
    assert!(shapes
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["id"] == "s-1vcpu-1gb"));
    let images = tokio::task::block_in_place(|| ok(cos(e, &["images"])));
    assert_eq!(images["default"], "devbox:1");

    let created = tokio::task::block_in_place(|| {
        ok(cos(
            e,
            &[
                "create",
                "--name",
                "cli-box",
                "--shape",
                "s-1vcpu-256mb",
                "--env",
                "GREETING=hi",
            ],
        ))
    });
    let id = created["id"].as_str().unwrap().to_string();
    assert_eq!(created["status"], "running");
    assert_eq!(created["name"], "cli-box");

    let listed = tokio::task::block_in_place(|| ok(cos(e, &["ls"])));
    assert!(listed
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["id"] == id.as_str()));
    let got = tokio::task::block_in_place(|| ok(cos(e, &["get", "cli-box"])));
    assert_eq!(got["id"], id.as_str());

    // exec passes the exit code through, and -o json carries the output.
    let out = tokio::task::block_in_place(|| {
        cos(
            e,
            &[
                "exec",
                "cli-box",
                "--",
                "sh",
                "-c",
                "echo $GREETING; exit 3",
            ],
        )
    });
    assert_eq!(out.status.code(), Some(3));
    let doc = json(&out);
    assert_eq!(doc["stdout"], "hi\n");
    assert_eq!(doc["exit_code"], 3);

    // push / pull round trip.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("in.bin");
    let payload: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&src, &payload).unwrap();
    let pushed = tokio::task::block_in_place(|| {
        ok(cos(
            e,
            &["push", "cli-box", src.to_str().unwrap(), "/root/in.bin"],
        ))
    });
    assert_eq!(pushed["bytes"], 200_000);
    let dst = dir.path().join("out.bin");
    tokio::task::block_in_place(|| {
        ok(cos(
            e,
            &["pull", "cli-box", "/root/in.bin", dst.to_str().unwrap()],
        ))
    });
    assert_eq!(std::fs::read(&dst).unwrap(), payload);

    let edited = tokio::task::block_in_place(|| {
        ok(cos(
            e,
            &[
                "edit",
                "cli-box",
                "--ingress",
                "on",
                "--auto-pause",
                "600",
                "--egress",
                "pypi.org",
            ],
        ))
    });
    assert_eq!(edited["ingress_enabled"], true);
    assert_eq!(edited["auto_pause_after_seconds"], 600);
    assert_eq!(edited["egress"][0], "pypi.org");

    let paused = tokio::task::block_in_place(|| ok(cos(e, &["pause", "cli-box"])));
    assert_eq!(paused["status"], "paused");
    let forks = tokio::task::block_in_place(|| ok(cos(e, &["fork", "cli-box", "--count", "2"])));
    assert_eq!(forks.as_array().unwrap().len(), 2);
    assert_eq!(forks[0]["forked_from"], id.as_str());
    let resumed = tokio::task::block_in_place(|| ok(cos(e, &["resume", "cli-box"])));
    assert_eq!(resumed["status"], "running");

    let mut all = vec![id.clone()];
    all.extend(
        forks
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["id"].as_str().unwrap().to_string()),
    );
    let mut args = vec!["rm", "--yes"];
    args.extend(all.iter().map(String::as_str));
    let removed = tokio::task::block_in_place(|| ok(cos(e, &args)));
    assert_eq!(removed.as_array().unwrap().len(), 3);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn run_destroys_its_sandbox_on_success_and_failure() {
    let env = common::start().await;
    let e = &env;
    let out = tokio::task::block_in_place(|| {
        cos(
            e,
            &["run", "--shape", "s-1vcpu-256mb", "--", "echo", "hello"],
        )
    });
    assert!(out.status.success());
    assert_eq!(json(&out)["stdout"], "hello\n");
    let out = tokio::task::block_in_place(|| {
        cos(
            e,
            &[
                "run",
                "--shape",
                "s-1vcpu-256mb",
                "--",
                "sh",
                "-c",
                "exit 7",
            ],
        )
    });
    assert_eq!(out.status.code(), Some(7));
    let out = tokio::task::block_in_place(|| cos(e, &["run", "--", "/no/such/binary"]));
    assert!(!out.status.success());
    assert_eq!(
        env.settled_live_sandboxes().await,
        0,
        "run left a sandbox behind"
    );
    let stats = env.stats().await;
    assert_eq!(stats["handled"]["createSandbox"], 3);
    assert_eq!(stats["handled"]["destroySandbox"], 3);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn run_destroys_on_sigterm() {
    let env = common::start().await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_cos"))
        .args([
            "--endpoint",
            &env.base_url(),
            "--api-key",
            &env.mock.api_key(),
            "-o",
            "text",
        ])
        .args(["run", "--", "sleep", "60"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the sandbox exists and the command runs, then interrupt.
    for _ in 0..200 {
        if env.stats().await["live_sandboxes"] == 1 && env.handled("exec").await == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    nix_kill(child.id());
    let status = tokio::task::block_in_place(|| child.wait().unwrap());
    assert_eq!(status.code(), Some(130));
    assert_eq!(env.settled_live_sandboxes().await, 0);
    env.shutdown().await;
}

fn nix_kill(pid: u32) {
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
}

#[tokio::test(flavor = "multi_thread")]
async fn names_resolve_beyond_the_first_200() {
    let env = common::start().await;
    for i in 0..230 {
        env.client
            .create_sandbox(CreateSandbox::new("s-1vcpu-256mb").name(format!("bulk-{i:03}")))
            .await
            .unwrap();
    }
    let e = &env;
    let got = tokio::task::block_in_place(|| ok(cos(e, &["get", "bulk-229"])));
    assert_eq!(got["name"], "bulk-229");
    let ambiguous = tokio::task::block_in_place(|| cos(e, &["get", "bulk-22"]));
    assert!(!ambiguous.status.success());
    assert!(json(&ambiguous)["error"]["message"]
        .as_str()
        .unwrap()
        .contains("several"));
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_fails_before_anything_is_created() {
    let env = common::start().await;
    let e = &env;
    env.reset_stats().await;
    let out = tokio::task::block_in_place(|| cos(e, &["create", "--shape", "s-9vcpu-9gb"]));
    assert!(!out.status.success());
    let doc = json(&out);
    assert_eq!(doc["error"]["code"], "bad_request");
    assert!(doc["error"]["message"]
        .as_str()
        .unwrap()
        .contains("unknown shape"));
    let out = tokio::task::block_in_place(|| cos(e, &["create", "--env", "1X=2"]));
    assert_eq!(json(&out)["error"]["code"], "bad_request");
    let out =
        tokio::task::block_in_place(|| cos(e, &["push", "sb-x", "/etc/hostname", "relative/path"]));
    assert_eq!(json(&out)["error"]["code"], "bad_request");
    let out = tokio::task::block_in_place(|| cos(e, &["create", "--no-such-option"]));
    assert_eq!(out.status.code(), Some(2), "clap refuses unknown options");
    assert_eq!(env.requests("createSandbox").await, 0);
    assert_eq!(env.stats().await["sandboxes_created"], 0);
    env.shutdown().await;
}

#[test]
fn local_mode_runs_without_an_account() {
    let out = Command::new(env!("CARGO_BIN_EXE_cos"))
        .args(["--local", "-o", "json", "run", "--", "uname", "-s"])
        .env_remove("CREATEOS_API_KEY")
        .env_remove("RUST_LOG")
        .env("HOME", std::env::temp_dir().join("cos-no-home"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&out);
    assert_eq!(doc["exit_code"], 0);
    assert!(!doc["stdout"].as_str().unwrap().is_empty());
    // nothing the user did not ask about: what the emulator cannot set up (no nft or
    // iptables for NAT, no outbound link) is a debug line, not a message
    assert!(
        out.stderr.is_empty(),
        "a --local run printed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
