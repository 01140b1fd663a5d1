//! `cos fs` end to end: the real binary against the emulator, `-o json` parsed.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::cli::{json, ok};
use createos_sandbox::CreateSandbox;

fn cos(env: &common::Env, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cos"))
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
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cos runs");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    child.wait_with_output().expect("cos finishes")
}

#[tokio::test(flavor = "multi_thread")]
async fn fs_commands_through_the_cli() {
    let env = common::start().await;
    let sb = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb").name("fs-box"))
        .await
        .unwrap();
    let e = &env;
    let fs = |args: &[&str], stdin: Option<&str>| {
        let mut all = vec!["fs", "fs-box", "--cwd", "/root/app"];
        all.extend_from_slice(args);
        tokio::task::block_in_place(|| cos(e, &all, stdin))
    };

    let made = ok(fs(&["mkdir", "src"], None));
    assert_eq!(made["path"], "/root/app/src");
    assert_eq!(made["created"], true);

    let written = ok(fs(
        &[
            "write",
            "src/main.py",
            "--content",
            "print('hi')\nprint('bye')\n",
        ],
        None,
    ));
    assert_eq!(written["path"], "/root/app/src/main.py");
    assert_eq!(written["bytes"], 25);
    assert_eq!(written["created"], true);
    let piped = ok(fs(&["write", "notes.txt"], Some("from stdin\n")));
    assert_eq!(piped["bytes"], 11);

    let read = ok(fs(&["read", "src/main.py"], None));
    assert_eq!(read["type"], "file");
    assert_eq!(read["content"], "1: print('hi')\n2: print('bye')");
    assert_eq!(read["total_lines"], 2);

    let edited = ok(fs(
        &["edit", "src/main.py", "--old", "'hi'", "--new", "'hello'"],
        None,
    ));
    assert_eq!(edited["replacements"], 1);

    let patch = "*** Begin Patch\n*** Update File: src/main.py\n@@\n-print('bye')\n+print('later')\n*** End Patch\n";
    let changes = ok(fs(&["patch"], Some(patch)));
    assert_eq!(changes[0]["action"], "update");
    assert_eq!(changes[0]["path"], "/root/app/src/main.py");
    assert_eq!(
        sb.download("/root/app/src/main.py")
            .await
            .unwrap()
            .bytes(1024)
            .await
            .unwrap()
            .as_ref(),
        b"print('hello')\nprint('later')\n"
    );

    let globbed = ok(fs(&["glob", "**/*.py"], None));
    assert_eq!(globbed["files"], serde_json::json!(["src/main.py"]));
    let hits = ok(fs(&["grep", "LATER"], None));
    assert_eq!(hits["matches"][0]["path"], "src/main.py");
    assert_eq!(hits["matches"][0]["line"], 2);
    // Case-sensitive: no match, exit status 1, still a JSON answer.
    let miss = fs(&["grep", "-s", "LATER"], None);
    assert_eq!(miss.status.code(), Some(1));
    assert_eq!(json(&miss)["text"], "No matches found");

    let listed = ok(fs(&["ls", "-r"], None));
    let names: Vec<&str> = listed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["notes.txt", "src", "src/main.py"]);
    let stat = ok(fs(&["stat", "notes.txt"], None));
    assert_eq!(stat["type"], "file");
    assert_eq!(stat["size"], 11);

    // A refused move: exit 1 and the helper's error code in the JSON envelope.
    let refused = fs(&["mv", "notes.txt", "src/main.py"], None);
    assert_eq!(refused.status.code(), Some(1));
    let doc = json(&refused);
    assert_eq!(doc["error"]["code"], "exists");
    assert_eq!(doc["error"]["op"], "move");
    let moved = ok(fs(&["mv", "notes.txt", "docs/notes.txt"], None));
    assert_eq!(moved["to"], "/root/app/docs/notes.txt");

    let manifest = ok(fs(&["manifest", "--sha256", "--exclude", "docs/"], None));
    assert_eq!(manifest["count"], 1);
    assert_eq!(manifest["entries"][0]["path"], "src/main.py");

    let removed = ok(fs(&["rm", "-r", "docs"], None));
    assert_eq!(removed["type"], "directory");
    let gone = fs(&["stat", "docs"], None);
    assert_eq!(gone.status.code(), Some(1));
    assert_eq!(json(&gone)["error"]["code"], "no_such_file");

    // An escape is refused as bad input before anything runs.
    let escape = fs(&["read", "../../etc/passwd"], None);
    assert_eq!(escape.status.code(), Some(1));
    assert_eq!(json(&escape)["error"]["code"], "bad_request");

    // Text mode prints the numbered lines.
    let text = tokio::task::block_in_place(|| {
        Command::new(env!("CARGO_BIN_EXE_cos"))
            .args([
                "--endpoint",
                &e.base_url(),
                "--api-key",
                &e.mock.api_key(),
                "-o",
                "text",
            ])
            .args(["fs", "fs-box", "read", "/root/app/src/main.py"])
            .env_remove("CREATEOS_API_KEY")
            .env("HOME", std::env::temp_dir())
            .output()
            .unwrap()
    });
    assert!(
        text.status.success(),
        "{}",
        String::from_utf8_lossy(&text.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&text.stdout),
        "1: print('hello')\n2: print('later')\n"
    );
    env.shutdown().await;
}
