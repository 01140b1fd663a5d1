//! `cos push`, `cos pull` and `cos sync` with `--ssh`: the data travels over the sandbox's SSH
//! connection (SFTP for one file, tar through an exec channel for a directory), never through
//! the files API; keys and the pinned host key land in the user's config dir. Run against real
//! OpenSSH and against the emulator's embedded server.

#[path = "../../tests/common/mod.rs"]
mod common;
#[macro_use]
#[path = "../../tests/ssh_support/mod.rs"]
mod ssh_support;

use std::path::Path;
use std::process::Output;

use common::cli::ok;
use createos_sandbox::CreateSandbox;
use serde_json::Value;
use ssh_support::{guarded, pattern, Guest};

/// `cos` against `env` with `home` as the user's home (SSH keys and known hosts go there).
async fn cos(env: &common::Env, home: &Path, args: &[&str]) -> Output {
    let command = tokio::process::Command::new(env!("CARGO_BIN_EXE_cos"))
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
        .env_remove("XDG_CONFIG_HOME")
        .env("HOME", home)
        .kill_on_drop(true)
        .output();
    guarded("cos", command).await.expect("cos runs")
}

async fn run(env: &common::Env, home: &Path, args: &[&str]) -> Value {
    ok(cos(env, home, args).await)
}

async fn cli_moves_files_over_ssh(guest: Guest) {
    let env = guest.start().await;
    let sb = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb").name("ssh-cli"))
        .await
        .expect("create");
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let h = home.path();

    // one file up over SFTP, checked through the files API
    let payload = pattern(300_000, 7);
    let src = work.path().join("blob.bin");
    std::fs::write(&src, &payload).unwrap();
    let pushed = run(
        &env,
        h,
        &[
            "push",
            "--ssh",
            "ssh-cli",
            src.to_str().unwrap(),
            "/root/up/blob.bin",
        ],
    )
    .await;
    assert_eq!(pushed["via"], "ssh");
    assert_eq!(pushed["bytes"], 300_000);
    let stored = guarded("download", sb.download("/root/up/blob.bin"))
        .await
        .unwrap()
        .bytes(1 << 20)
        .await
        .unwrap();
    assert_eq!(&stored[..], &payload[..]);

    // and back down over SFTP
    let back = work.path().join("back.bin");
    let pulled = run(
        &env,
        h,
        &[
            "pull",
            "--ssh",
            "ssh-cli",
            "/root/up/blob.bin",
            back.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(pulled["via"], "ssh");
    assert_eq!(std::fs::read(&back).unwrap(), payload);

    // a directory up through the snapshot filters (the credential file stays home)
    let project = work.path().join("project");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(project.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(project.join("README.md"), "hello\n").unwrap();
    std::fs::write(project.join(".env"), "SECRET=1\n").unwrap();
    let pushed = run(
        &env,
        h,
        &[
            "push",
            "--ssh",
            "--no-git",
            "ssh-cli",
            project.to_str().unwrap(),
            "/root/proj",
        ],
    )
    .await;
    assert_eq!(pushed["via"], "ssh");
    assert_eq!(pushed["files"], 2);
    let listed = guarded(
        "exec",
        sb.exec("sh", ["-c", "cd /root/proj && find . -type f | sort"]),
    )
    .await
    .unwrap();
    assert_eq!(listed.stdout, "./README.md\n./src/main.rs\n");

    // the directory back down
    let copy = work.path().join("copy");
    let pulled = run(
        &env,
        h,
        &[
            "pull",
            "--ssh",
            "ssh-cli",
            "/root/proj",
            copy.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(pulled["via"], "ssh");
    assert_eq!(
        std::fs::read_to_string(copy.join("src/main.rs")).unwrap(),
        "fn main() {}\n"
    );
    assert_eq!(
        std::fs::read_to_string(copy.join("README.md")).unwrap(),
        "hello\n"
    );

    // a sync over the same connection model
    std::fs::write(project.join("README.md"), "changed\n").unwrap();
    let synced = run(
        &env,
        h,
        &[
            "sync",
            "--ssh",
            "ssh-cli",
            "--local",
            project.to_str().unwrap(),
            "--remote",
            "/root/proj",
            "--mode",
            "mirror",
        ],
    )
    .await;
    assert_eq!(synced["via"], "ssh");
    let readme = guarded("download", sb.download("/root/proj/README.md"))
        .await
        .unwrap()
        .bytes(1 << 20)
        .await
        .unwrap();
    assert_eq!(&readme[..], b"changed\n");

    // none of it went through the files API, and the host key was pinned in our config dir
    assert_eq!(
        env.requests("uploadFile").await,
        0,
        "an upload used the files API"
    );
    assert_eq!(
        env.requests("downloadFile").await,
        2,
        "only the test's own two checks download"
    );
    let known = std::fs::read_to_string(h.join(".config/createos-sandbox/known_hosts"))
        .expect("known_hosts written");
    assert!(
        known.contains(sb.id()),
        "the host key is pinned under the sandbox id: {known}"
    );

    // without --ssh the same command takes the files API
    let pushed = run(
        &env,
        h,
        &["push", "ssh-cli", src.to_str().unwrap(), "/root/up/api.bin"],
    )
    .await;
    assert_eq!(pushed["via"], "files-api");
    assert_eq!(env.requests("uploadFile").await, 1);
}

each_guest!(cli_moves_files_over_ssh);
