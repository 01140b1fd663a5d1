//! Confined agent arguments: every `cos mcp` tool that takes a local path is called with paths
//! outside the project (absolute, `..`, a symlink leading out, `~/.createos`, `/etc`) and into
//! `.git/`. Each call is refused with an error naming the argument, the emulator sees no request
//! (nothing created, nothing uploaded), and no local file changes. A project that is the home
//! directory still hides `~/.createos`; skill directories are checked when `cos mcp` starts.

#[path = "../../tests/common/mod.rs"]
mod common;
mod mcp_client;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use createos_sandbox::CreateSandbox;
use mcp_client::{error_text, Mcp, Setup};
use serde_json::{json, Value};

/// `<tmp>/home` (the server's HOME and state) holding `~/.createos` and the project
/// `home/code/proj` (with a `.git/`, an app, a symlink leading out), and `<tmp>/outside`.
struct Tree {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
    outside: PathBuf,
}

fn tree() -> Tree {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let (home, outside) = (root.join("home"), root.join("outside"));
    let project = home.join("code/proj");
    let files = [
        (home.join(".createos/.token"), "access-token"),
        (home.join(".createos/.oauth"), "{\"refresh_token\": \"r\"}"),
        (project.join(".git/config"), "[core]\n"),
        (project.join(".git/hooks/README"), "hooks\n"),
        (project.join("app/main.py"), "print(1)\n"),
        (project.join("f.txt"), "f\n"),
        (outside.join("secret.txt"), "secret\n"),
    ];
    for (path, text) in files {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    std::os::unix::fs::symlink(&outside, project.join("link_out")).unwrap();
    std::os::unix::fs::symlink(home.join(".createos"), project.join("creds")).unwrap();
    Tree {
        _tmp: tmp,
        home,
        project,
        outside,
    }
}

/// Every file under `dir` with its content (symlinks by target), to see that nothing changed.
fn contents(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let value = if meta.is_symlink() {
                format!("-> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                stack.push(path.clone());
                "dir".into()
            } else {
                std::fs::read_to_string(&path).unwrap_or_default()
            };
            out.insert(path, value);
        }
    }
    out
}

/// `/_mock/stats`, sent with the emulator's key (its own routes require it).
async fn stats(env: &common::Env) -> Value {
    let key = env.mock.api_key();
    reqwest::Client::new()
        .get(format!("{}/_mock/stats", env.base_url()))
        .header("X-Api-Key", &key)
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn total(stats: &Value) -> u64 {
    stats["requests"]
        .as_object()
        .map(|m| m.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0)
}

/// Call `tool` with `args`, expect a refusal naming `field`.
async fn refused(mcp: &mut Mcp, tool: &str, args: Value, field: &str) {
    let text = error_text(&mcp.call(tool, args.clone()).await);
    let named =
        text.contains(&format!("{field} \"")) || text.contains(&format!("invalid {field}:"));
    assert!(
        named,
        "{tool} {args}: the error does not name {field}: {text}"
    );
}

/// The local paths each tool takes: (tool, field, base arguments).
fn path_arguments(sandbox: &str) -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("sandbox_offload", "dir", json!({"command": "true"})),
        ("sandbox_fanout", "dir", json!({"commands": ["true"]})),
        (
            "sandbox_sync",
            "local_dir",
            json!({"sandbox_id": sandbox, "remote_dir": "/root/x"}),
        ),
        (
            "sandbox_push",
            "local_path",
            json!({"sandbox_id": sandbox, "remote_path": "/root/x"}),
        ),
        (
            "sandbox_pull",
            "local_path",
            json!({"sandbox_id": sandbox, "remote_path": "/root/x"}),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_local_path_argument_is_confined_to_the_project() {
    let env = common::start().await;
    let t = tree();
    let sandbox = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb"))
        .await
        .unwrap()
        .id()
        .to_string();
    let mut mcp = Mcp::start_in(&env, &t.home, &t.project, r#"{"persist": false}"#, &[]).await;
    let (home_before, outside_before) = (contents(&t.home), contents(&t.outside));
    let before = stats(&env).await;

    let createos = t.home.join(".createos");
    let hostile: Vec<String> = vec![
        t.outside.display().to_string(),
        t.outside.join("secret.txt").display().to_string(),
        "..".into(),
        "../..".into(),
        "app/../../x".into(),
        "link_out".into(),
        "link_out/secret.txt".into(),
        "creds".into(),
        createos.display().to_string(),
        createos.join(".token").display().to_string(),
        "~/.createos".into(),
        "/etc".into(),
        "/etc/passwd".into(),
        ".git".into(),
        ".git/config".into(),
        ".git/hooks/pre-commit".into(),
        "app/.git".into(),
    ];
    let mut calls = 0;
    for (tool, field, base) in path_arguments(&sandbox) {
        for path in &hostile {
            let mut args = base.clone();
            args[field] = json!(path);
            refused(&mut mcp, tool, args, field).await;
            calls += 1;
        }
    }
    // The artifact's local destination, and a pull whose remote name would land in `.git`.
    for out in [
        ".git/hooks/pre-commit",
        "../x",
        "link_out/x",
        "creds/.token",
        "/etc/passwd",
        ".env",
    ] {
        refused(
            &mut mcp,
            "sandbox_offload",
            json!({"command": "true", "out": out}),
            "out",
        )
        .await;
    }
    for (dir, out) in [("app", ".git/config"), ("app", "../.git/config")] {
        refused(
            &mut mcp,
            "sandbox_offload",
            json!({"command": "true", "dir": dir, "out": out}),
            "out",
        )
        .await;
    }
    refused(
        &mut mcp,
        "sandbox_pull",
        json!({"sandbox_id": sandbox, "remote_path": "/root/.git", "local_path": "."}),
        "local_path",
    )
    .await;
    refused(
        &mut mcp,
        "sandbox_pull",
        json!({"sandbox_id": sandbox, "remote_path": "/root/.token", "local_path": "creds"}),
        "local_path",
    )
    .await;
    assert_eq!(calls, 5 * hostile.len());

    let after = stats(&env).await;
    assert_eq!(
        total(&after),
        total(&before),
        "a refused call reached the emulator: {after}"
    );
    assert_eq!(
        after["sandboxes_created"], before["sandboxes_created"],
        "{after}"
    );
    assert_eq!(
        after["requests"]["createSandbox"],
        before["requests"]["createSandbox"]
    );
    assert_eq!(after["live_sandboxes"], 1);
    assert_eq!(contents(&t.home), home_before, "a local file changed");
    assert_eq!(contents(&t.outside), outside_before);
    // The same tools work on the project itself.
    let ok = mcp
        .call(
            "sandbox_push",
            json!({"sandbox_id": sandbox, "local_path": "app", "remote_path": "/root/app"}),
        )
        .await;
    assert_ne!(ok["isError"], true, "{ok}");
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_project_at_home_still_hides_the_credential_folders() {
    let env = common::start().await;
    let t = tree();
    std::fs::create_dir_all(t.home.join(".ssh")).unwrap();
    std::fs::write(t.home.join(".ssh/id_ed25519"), "KEY").unwrap();
    std::fs::create_dir_all(t.home.join(".config/gh")).unwrap();
    std::fs::write(t.home.join(".config/gh/hosts.yml"), "token: x").unwrap();
    let sandbox = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb"))
        .await
        .unwrap()
        .id()
        .to_string();
    let mut mcp = Mcp::start_in(&env, &t.home, &t.home, r#"{"persist": false}"#, &[]).await;
    let home_before = contents(&t.home);
    let before = stats(&env).await;
    for (tool, field, base) in path_arguments(&sandbox) {
        for path in [
            ".",
            ".createos",
            ".createos/.token",
            ".ssh",
            ".ssh/id_ed25519",
            ".config/gh",
            ".config/gh/hosts.yml",
            "code/proj/.git",
        ] {
            let mut args = base.clone();
            args[field] = json!(path);
            refused(&mut mcp, tool, args, field).await;
        }
    }
    let after = stats(&env).await;
    assert_eq!(
        total(&after),
        total(&before),
        "a refused call reached the emulator: {after}"
    );
    assert_eq!(contents(&t.home), home_before);
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn skill_directories_are_checked_before_the_server_starts() {
    let env = common::start().await;
    let t = tree();
    // Bundles: one outside the project (allowed), one planted in ~/.createos (refused).
    let skill = t.home.join(".config/opencode/skills/lint");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(skill.join("SKILL.md"), "# lint\n").unwrap();
    std::fs::write(t.home.join(".createos/SKILL.md"), "# planted\n").unwrap();
    std::os::unix::fs::symlink(&t.outside, t.project.join("skills")).unwrap();
    std::fs::write(t.home.join("SKILL.md"), "# home\n").unwrap();
    let before = stats(&env).await;
    let refusals = [
        (t.outside.clone(), "SKILL.md"),
        (t.home.join(".createos"), ".createos"),
        (t.project.join("skills"), "SKILL.md"),
        (t.project.join(".git"), "version-control"),
        (t.home.clone(), "home directory"),
    ];
    for (dir, needle) in refusals {
        let options = json!({"persist": false, "skillDirs": [skill.display().to_string(), dir.display().to_string()]}).to_string();
        let mut setup = Setup::new(&env, &t.home, &t.project);
        setup.options = &options;
        let out = setup
            .command()
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}: cos mcp started", dir.display());
        assert!(
            stderr.contains("skillDirs[1]") && stderr.contains(needle),
            "{}: {stderr}",
            dir.display()
        );
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let after = stats(&env).await;
    assert_eq!(total(&after), total(&before), "{after}");
    // The allowed bundle alone starts.
    let options = json!({"persist": false, "skillDirs": [skill.display().to_string()]}).to_string();
    let mut setup = Setup::new(&env, &t.home, &t.project);
    setup.options = &options;
    setup.start().await.stop().await;
    env.shutdown().await;
}
