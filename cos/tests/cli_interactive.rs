//! `cos tunnel`, `cos shell` and `cos process …` as a user runs them.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::io::{BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use createos_sandbox::api::processes::ProcessSpec;
use createos_sandbox::{CreateSandbox, Sandbox};
use serde_json::Value;

fn cos(env: &common::Env) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cos"));
    c.args([
        "--endpoint",
        &env.base_url(),
        "--api-key",
        &env.mock.api_key(),
    ]);
    c.env_remove("CREATEOS_API_KEY");
    c
}

/// Serve `text` over HTTP on port 8080 inside `sb`.
async fn serve(sb: &Sandbox, text: &str) {
    sb.exec(
        "sh",
        [
            "-c",
            &format!("mkdir -p /root/www && printf '%s' '{text}' > /root/www/index.html"),
        ],
    )
    .await
    .unwrap();
    sb.processes()
        .start(ProcessSpec::new("python3").args([
            "-m",
            "http.server",
            "8080",
            "--bind",
            "127.0.0.1",
            "--directory",
            "/root/www",
        ]))
        .await
        .unwrap();
    // Wait until it listens (bounded).
    for _ in 0..200 {
        let probe = sb
            .exec(
                "python3",
                [
                    "-c",
                    "import socket; socket.create_connection(('127.0.0.1', 8080), 1)",
                ],
            )
            .await
            .unwrap();
        if probe.exit_code == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the server in {} never listened", sb.id());
}

/// Start `cos tunnel` and read the local address it prints.
fn start_tunnel(env: &common::Env, sandbox: &str) -> (Child, String) {
    let mut child = cos(env)
        .args(["-o", "json", "tunnel", sandbox, "--remote", "8080"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut values =
        serde_json::Deserializer::from_reader(BufReader::new(stdout)).into_iter::<Value>();
    let doc = values
        .next()
        .expect("cos tunnel prints its address")
        .unwrap();
    (child, doc["local"].as_str().unwrap().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tunnels_reach_each_sandbox_own_port_and_carry_100_connections() {
    let env = common::start().await;
    let a = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb").name("site-a"))
        .await
        .unwrap();
    let b = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb").name("site-b"))
        .await
        .unwrap();
    serve(&a, "hello from A").await;
    serve(&b, "hello from B").await;
    let (mut ta, la) = tokio::task::block_in_place(|| start_tunnel(&env, "site-a"));
    let (mut tb, lb) = tokio::task::block_in_place(|| start_tunnel(&env, "site-b"));
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    assert_eq!(
        http.get(format!("http://{la}/"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "hello from A"
    );
    assert_eq!(
        http.get(format!("http://{lb}/"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "hello from B"
    );

    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let http = http.clone();
            let url = format!("http://{la}/");
            tokio::spawn(async move { http.get(url).send().await?.text().await })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), "hello from A");
    }
    for child in [&mut ta, &mut tb] {
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        let status = tokio::task::block_in_place(|| child.wait().unwrap());
        assert!(
            status.success(),
            "cos tunnel stops cleanly on Ctrl-C: {status}"
        );
    }
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shell_runs_commands_over_the_upgrade_route() {
    let env = common::start().await;
    env.client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb").name("sh-box"))
        .await
        .unwrap();
    for ws in [false, true] {
        let mut cmd = cos(&env);
        cmd.args(["shell", "sh-box"]);
        if ws {
            cmd.arg("--ws");
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .as_mut()
            .unwrap()
            .write_all(b"echo shell-$((40+2)); exit\n")
            .unwrap();
        drop(child.stdin.take());
        let out = tokio::task::block_in_place(|| child.wait_with_output().unwrap());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("shell-42"), "ws={ws}: {text}");
    }
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn process_commands_round_trip() {
    let env = common::start().await;
    env.client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb").name("procs"))
        .await
        .unwrap();
    let run = |args: &[&str]| {
        let out = cos(&env).args(["-o", "json"]).args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, out, err) = tokio::task::block_in_place(|| {
        run(&[
            "process",
            "start",
            "procs",
            "--",
            "sh",
            "-c",
            "read line; echo got:$line; exit 5",
        ])
    });
    assert_eq!(code, Some(0), "{out}{err}");
    let started: Value = serde_json::from_str(&out).unwrap();
    let pid = started["process_id"].as_str().unwrap().to_string();
    assert_eq!(started["kind"], "process");

    let (_, out, _) = tokio::task::block_in_place(|| run(&["process", "ls", "procs"]));
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert!(listed
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["process_id"] == pid.as_str()));

    let (code, out, _) = tokio::task::block_in_place(|| {
        run(&[
            "process", "input", "procs", &pid, "--text", "ping\n", "--close",
        ])
    });
    assert_eq!(code, Some(0));
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["bytes"], 5);

    let (code, out, _) = tokio::task::block_in_place(|| run(&["process", "wait", "procs", &pid]));
    assert_eq!(code, Some(5), "wait exits with the process's code");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["exit_code"], 5);

    let (_, out, _) = tokio::task::block_in_place(|| run(&["process", "logs", "procs", &pid]));
    assert!(out.contains("got:ping"), "{out}");
    let (_, out, _) = tokio::task::block_in_place(|| run(&["process", "get", "procs", &pid]));
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["state"],
        "exited"
    );

    // A PTY process: resize, signal, stop.
    let (_, out, _) = tokio::task::block_in_place(|| {
        run(&[
            "process", "start", "procs", "--pty", "--rows", "10", "--cols", "40", "--", "sleep",
            "600",
        ])
    });
    let pty: Value = serde_json::from_str(&out).unwrap();
    let ppid = pty["process_id"].as_str().unwrap().to_string();
    assert_eq!(pty["kind"], "pty");
    let (code, _, err) = tokio::task::block_in_place(|| {
        run(&[
            "process", "resize", "procs", &ppid, "--rows", "30", "--cols", "90",
        ])
    });
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) =
        tokio::task::block_in_place(|| run(&["process", "signal", "procs", &ppid, "SIGINT"]));
    assert_eq!(code, Some(0), "{err}");
    let (_, out, _) = tokio::task::block_in_place(|| {
        run(&["process", "wait", "procs", &ppid, "--timeout", "20"])
    });
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["signal"],
        "SIGINT"
    );
    let (code, _, _) =
        tokio::task::block_in_place(|| run(&["process", "signal", "procs", &ppid, "SIGSTOP"]));
    assert_ne!(
        code,
        Some(0),
        "signals outside the allowed list are refused"
    );

    let (_, out, _) =
        tokio::task::block_in_place(|| run(&["process", "start", "procs", "--", "sleep", "600"]));
    let sleeper = serde_json::from_str::<Value>(&out).unwrap()["process_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, out, _) = tokio::task::block_in_place(|| {
        run(&["process", "stop", "procs", &sleeper, "--grace-ms", "200"])
    });
    assert_eq!(code, Some(0));
    let stopped: Value = serde_json::from_str(&out).unwrap();
    assert!(stopped["leader_exited"].as_bool().unwrap());
    env.shutdown().await;
}
