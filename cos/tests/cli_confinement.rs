//! What a person may name on the command line: any directory, except the home directory itself
//! and its credential folders (`~/.createos` always; `~/.ssh`, `~/.aws`, `~/.config`, … unless
//! `--force` where the command has it). Refusals come before any request.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Output;

use createos_sandbox::CreateSandbox;
use serde_json::Value;

async fn cos(env: &common::Env, home: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_cos"))
        .args([
            "--endpoint",
            &env.base_url(),
            "--api-key",
            &env.mock.api_key(),
            "-o",
            "text",
        ])
        .args(args)
        .current_dir(home)
        .env("HOME", home)
        .env("RUST_LOG", "warn")
        .env_remove("CREATEOS_API_KEY")
        .env_remove("CREATEOS_SANDBOX_BASE_URL")
        .env_remove("CREATEOS_SHAPE")
        .env_remove("CREATEOS_ROOTFS")
        .output()
        .await
        .expect("cos runs")
}

/// Requests that reached the emulator, all operations together (sent with its key).
async fn requests(env: &common::Env) -> u64 {
    let key = env.mock.api_key();
    let url = format!("{}/_mock/stats", env.base_url());
    let stats: Value = reqwest::Client::new()
        .get(url)
        .header("X-Api-Key", &key)
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    stats["requests"]
        .as_object()
        .map(|m| m.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn home_and_credential_folders_are_refused_before_any_request() {
    let env = common::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().canonicalize().unwrap().join("home");
    for (file, text) in [
        (".createos/.token", "t"),
        (".ssh/id_ed25519", "k"),
        (".aws/credentials", "c"),
        ("code/app/main.py", "print(1)\n"),
    ] {
        std::fs::create_dir_all(home.join(file).parent().unwrap()).unwrap();
        std::fs::write(home.join(file), text).unwrap();
    }
    let sandbox = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb").name("conf-box"))
        .await
        .unwrap();
    sandbox.write("/root/in.txt", "remote\n").await.unwrap();
    let (h, createos, ssh, aws) = (
        home.display().to_string(),
        home.join(".createos"),
        home.join(".ssh"),
        home.join(".aws"),
    );
    let (createos, ssh, aws) = (
        createos.to_str().unwrap(),
        ssh.to_str().unwrap(),
        aws.to_str().unwrap(),
    );
    let token = home.join(".createos/.token");
    let token = token.to_str().unwrap();
    let shot_in_git = home.join("code/app/.git/shot.png").display().to_string();
    let before = requests(&env).await;
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["offload", "-C", &h, "--", "true"], "home directory"),
        (vec!["offload", "-C", createos, "--", "true"], "~/.createos"),
        (vec!["offload", "-C", ssh, "--", "true"], "~/.ssh"),
        (vec!["fanout", "-C", ".", "true"], "home directory"),
        (vec!["fanout", "-C", aws, "true"], "~/.aws"),
        (
            vec!["sync", "conf-box", "--local", ".", "--remote", "/root/s"],
            "home directory",
        ),
        (
            vec![
                "sync", "conf-box", "--local", createos, "--remote", "/root/s", "--force",
            ],
            "~/.createos",
        ),
        (
            vec!["sync", "conf-box", "--local", ssh, "--remote", "/root/s"],
            "pass --force",
        ),
        (vec!["push", "conf-box", createos, "/root/c"], "~/.createos"),
        (
            vec!["push", "conf-box", token, "/root/t", "--force"],
            "~/.createos",
        ),
        (vec!["push", "conf-box", ssh, "/root/s"], "pass --force"),
        (
            vec!["pull", "conf-box", "/root/in.txt", "."],
            "home directory",
        ),
        (
            vec!["pull", "conf-box", "/root/in.txt", token],
            "~/.createos",
        ),
        (
            vec!["pull", "conf-box", "/root/.token", createos],
            "~/.createos",
        ),
        (vec!["pull", "conf-box", "/root/in.txt", ssh], "~/.ssh"),
        // a screenshot is the sandbox's bytes too
        (
            vec!["computer", "conf-box", "screenshot", "-f", token],
            "never written from a sandbox",
        ),
        (
            vec!["computer", "conf-box", "screenshot", "-f", &shot_in_git],
            "version-control metadata",
        ),
    ];
    for (args, needle) in cases {
        let out = cos(&env, &home, &args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    assert_eq!(
        requests(&env).await,
        before,
        "a refused command reached the emulator"
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".createos/.token")).unwrap(),
        "t"
    );
    assert!(!home.join("code/app/.git").exists());

    // A person may name other places, also outside any project: a pull into the home
    // directory's ordinary folders, a push from it, and --force for ~/.aws.
    let out = cos(
        &env,
        &home,
        &["pull", "conf-box", "/root/in.txt", "code/in.txt"],
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(home.join("code/in.txt")).unwrap(),
        "remote\n"
    );
    let out = cos(&env, &home, &["push", "conf-box", "code/app", "/root/app"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cos(
        &env,
        &home,
        &["push", "conf-box", "--force", "--no-git", aws, "/root/aws"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("~/.aws"),
        "--force lifts the folder rule: {stderr}"
    );
    env.shutdown().await;
}
