//! The file tools of `cos mcp` end to end (real binary over stdio, hand-written JSON-RPC,
//! in-process emulator): `sandbox_read`/`write`/`edit`/`patch`/`glob`/`grep`, `sandbox_push`/
//! `sandbox_pull`, and the routed native tools of remote mode (`native_*`).

#[path = "../../tests/common/mod.rs"]
mod common;
mod mcp_client;

use std::path::Path;
use std::time::Duration;

use mcp_client::{error_text, ok_json, ok_text, sandbox_of, Mcp};
use serde_json::{json, Value};

/// Start `cos mcp` for `project` with `options`, state kept in `state`.
async fn start(env: &common::Env, state: &Path, project: &Path, options: &str) -> Mcp {
    Mcp::start_in(env, state, project, options, &[]).await
}

async fn creates(env: &common::Env) -> u64 {
    env.requests("createSandbox").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_write_edit_patch_glob_grep_on_the_session_sandbox() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let mut mcp = start(&env, dir.path(), project.path(), "{}").await;
    // Local mode: the routed tools are neither listed nor served.
    let names = mcp.tool_names().await;
    for want in [
        "sandbox_read",
        "sandbox_write",
        "sandbox_edit",
        "sandbox_patch",
        "sandbox_glob",
        "sandbox_grep",
        "sandbox_push",
        "sandbox_pull",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing");
    }
    assert!(!names.iter().any(|n| n.starts_with("native_")), "{names:?}");
    assert!(
        error_text(&mcp.call("native_read", json!({"filePath": "a"})).await)
            .contains("remote mode")
    );

    let wrote = mcp
        .call(
            "sandbox_write",
            json!({"path": "notes.txt", "content": "alpha\nbeta\ngamma\ndelta\n"}),
        )
        .await;
    assert_eq!(
        ok_text(&wrote),
        "Created /root/workspace/notes.txt (23 bytes)"
    );
    assert_eq!(wrote["_meta"]["created"], true);
    let sandbox = sandbox_of(&wrote);

    // Reading: numbered lines, windows, continuation hint.
    let window = mcp
        .call(
            "sandbox_read",
            json!({"path": "notes.txt", "offset": 2, "limit": 2}),
        )
        .await;
    assert_eq!(
        ok_text(&window),
        "2: beta\n3: gamma\n\n(Showing lines 2-3 of 4. Continue with offset 4.)"
    );
    assert_eq!(
        (
            window["_meta"]["truncated"].clone(),
            window["_meta"]["nextOffset"].clone()
        ),
        (json!(true), json!(4))
    );
    assert_eq!(sandbox_of(&window), sandbox);
    let whole = mcp
        .call("sandbox_read", json!({"path": "/root/workspace/notes.txt"}))
        .await;
    assert_eq!(ok_text(&whole), "1: alpha\n2: beta\n3: gamma\n4: delta");
    let listing = ok_text(&mcp.call("sandbox_read", json!({"path": "."})).await);
    assert_eq!(listing, "notes.txt");

    // A binary file is refused, not mangled.
    ok_json(
        &mcp.call(
            "sandbox_exec",
            json!({"command": "printf 'a\\000b' > bin.dat"}),
        )
        .await,
    );
    assert!(
        error_text(&mcp.call("sandbox_read", json!({"path": "bin.dat"})).await)
            .contains("binary_file")
    );

    // Edits: a unique match, then a twice-occurring one refused without changes.
    ok_text(
        &mcp.call(
            "sandbox_write",
            json!({"path": "dup.txt", "content": "x y x\n"}),
        )
        .await,
    );
    let once = mcp
        .call(
            "sandbox_edit",
            json!({"path": "dup.txt", "oldString": "y", "newString": "Y"}),
        )
        .await;
    assert_eq!(
        ok_text(&once),
        "Edited /root/workspace/dup.txt: replaced 1 occurrence"
    );
    let twice = error_text(
        &mcp.call(
            "sandbox_edit",
            json!({"path": "dup.txt", "oldString": "x", "newString": "z"}),
        )
        .await,
    );
    assert!(twice.contains("ambiguous"), "{twice}");
    assert_eq!(
        ok_text(&mcp.call("sandbox_read", json!({"path": "dup.txt"})).await),
        "1: x Y x"
    );
    let all = mcp
        .call(
            "sandbox_edit",
            json!({"path": "dup.txt", "oldString": "x", "newString": "z", "replaceAll": true}),
        )
        .await;
    assert_eq!(all["_meta"]["replacements"], 2);
    assert!(error_text(
        &mcp.call(
            "sandbox_edit",
            json!({"path": "dup.txt", "oldString": "nope", "newString": "z"})
        )
        .await
    )
    .contains("not_found"));

    // One patch: add, update, move, delete.
    ok_text(
        &mcp.call(
            "sandbox_write",
            json!({"path": "src/old.rs", "content": "fn a() {}\nfn b() {}\n"}),
        )
        .await,
    );
    let patch = "*** Begin Patch\n\
                 *** Add File: src/new.txt\n+fresh\n+file\n\
                 *** Update File: notes.txt\n@@\n alpha\n-beta\n+BETA\n gamma\n\
                 *** Update File: src/old.rs\n*** Move to: src/moved.rs\n@@\n fn a() {}\n-fn b() {}\n+fn c() {}\n\
                 *** Delete File: dup.txt\n\
                 *** End Patch\n";
    let applied = ok_text(&mcp.call("sandbox_patch", json!({"patchText": patch})).await);
    assert_eq!(
        applied,
        "Patch applied to 4 file(s):\nA /root/workspace/src/new.txt\nM /root/workspace/notes.txt\n\
         R /root/workspace/src/old.rs -> /root/workspace/src/moved.rs\nD /root/workspace/dup.txt"
    );
    assert_eq!(
        ok_text(
            &mcp.call("sandbox_read", json!({"path": "notes.txt", "limit": 2}))
                .await
        ),
        "1: alpha\n2: BETA\n\n(Showing lines 1-2 of 4. Continue with offset 3.)"
    );
    assert_eq!(
        ok_text(
            &mcp.call("sandbox_read", json!({"path": "src/moved.rs"}))
                .await
        ),
        "1: fn a() {}\n2: fn c() {}"
    );
    assert!(
        error_text(&mcp.call("sandbox_read", json!({"path": "dup.txt"})).await)
            .contains("no_such_file")
    );
    // A hunk that does not apply changes nothing, not even the files before it.
    let bad = "*** Begin Patch\n*** Add File: src/never.txt\n+x\n*** Update File: notes.txt\n@@\n-not there\n+y\n*** End Patch\n";
    assert!(
        error_text(&mcp.call("sandbox_patch", json!({"patchText": bad})).await)
            .contains("patch_failed")
    );
    assert!(error_text(
        &mcp.call("sandbox_read", json!({"path": "src/never.txt"}))
            .await
    )
    .contains("no_such_file"));

    // Searches.
    let txt = mcp
        .call("sandbox_glob", json!({"pattern": "**/*.txt"}))
        .await;
    assert_eq!(ok_text(&txt), "notes.txt\nsrc/new.txt");
    assert_eq!(txt["_meta"]["count"], 2);
    assert_eq!(
        ok_text(
            &mcp.call("sandbox_glob", json!({"pattern": "*.rs", "path": "src"}))
                .await
        ),
        "src/moved.rs"
    );
    assert_eq!(
        ok_text(
            &mcp.call("sandbox_glob", json!({"pattern": "*.nothing"}))
                .await
        ),
        "No matches found"
    );
    assert_eq!(
        ok_text(&mcp.call("sandbox_grep", json!({"pattern": "beta"})).await),
        "notes.txt:2:BETA"
    );
    assert_eq!(
        ok_text(
            &mcp.call(
                "sandbox_grep",
                json!({"pattern": "beta", "caseSensitive": true})
            )
            .await
        ),
        "No matches found"
    );
    assert_eq!(
        ok_text(
            &mcp.call(
                "sandbox_grep",
                json!({"pattern": "fn .()", "include": "*.rs"})
            )
            .await
        ),
        "src/moved.rs:1:fn a() {}\nsrc/moved.rs:2:fn c() {}"
    );
    assert_eq!(
        ok_text(
            &mcp.call(
                "sandbox_grep",
                json!({"pattern": "fn a()", "literal": true, "path": "src/moved.rs"})
            )
            .await
        ),
        "src/moved.rs:1:fn a() {}"
    );

    // An absolute path inside the local project lands in the sandbox working directory.
    let host = project.path().join("mapped.txt");
    let mapped = mcp
        .call(
            "sandbox_write",
            json!({"path": host.to_str().unwrap(), "content": "m\n"}),
        )
        .await;
    assert_eq!(
        ok_text(&mapped),
        "Created /root/workspace/mapped.txt (2 bytes)"
    );
    assert!(!host.exists(), "a file tool wrote on the host");
    assert_eq!(creates(&env).await, 1);
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn push_and_pull_files_and_directories() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let root = project.path();
    let blob: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    std::fs::write(root.join("data.bin"), &blob).unwrap();
    std::fs::create_dir_all(root.join("tree/sub")).unwrap();
    std::fs::write(root.join("tree/top.txt"), "top\n").unwrap();
    std::fs::write(root.join("tree/sub/deep.txt"), "deep\n").unwrap();
    std::fs::write(root.join("tree/.env"), "SECRET=1\n").unwrap();
    let mut mcp = start(&env, dir.path(), root, "{}").await;
    let sandbox = sandbox_of(&mcp.call("sandbox_exec", json!({"command": "true"})).await);

    // A file, by a path relative to the project, to an explicit name and into a directory.
    let pushed = mcp.call("sandbox_push", json!({"sandbox_id": sandbox, "local_path": "data.bin", "remote_path": "/root/up/blob.bin"})).await;
    assert!(ok_text(&pushed).ends_with("(70000 bytes)"), "{pushed}");
    let kept = mcp.call("sandbox_push", json!({"sandbox_id": sandbox, "local_path": root.join("data.bin").to_str().unwrap(), "remote_path": "/root/up/"})).await;
    assert_eq!(kept["_meta"]["path"], "/root/up/data.bin");
    let sums = ok_json(&mcp.call("sandbox_exec", json!({"command": "cmp /root/up/blob.bin /root/up/data.bin && wc -c < /root/up/data.bin"})).await);
    assert_eq!(sums["stdout"], "70000\n");
    // A symlink that stays inside the project is fine, and keeps its own name.
    std::os::unix::fs::symlink("data.bin", root.join("alias.bin")).unwrap();
    let linked = mcp
        .call(
            "sandbox_push",
            json!({"sandbox_id": sandbox, "local_path": "alias.bin", "remote_path": "/root/up/"}),
        )
        .await;
    assert_eq!(
        (
            linked["_meta"]["path"].as_str(),
            linked["_meta"]["bytes"].as_u64()
        ),
        (Some("/root/up/alias.bin"), Some(70000)),
        "{linked}"
    );

    // A directory, through the snapshot filters.
    let tree = mcp
        .call(
            "sandbox_push",
            json!({"sandbox_id": sandbox, "local_path": "tree", "remote_path": "/root/tree"}),
        )
        .await;
    ok_text(&tree);
    assert_eq!(tree["_meta"]["files"], 2);
    assert!(tree["_meta"]["leftOut"].as_u64().unwrap() >= 1, "{tree}");
    let listed = ok_json(
        &mcp.call(
            "sandbox_exec",
            json!({"command": "cd /root/tree && find . -type f | sort"}),
        )
        .await,
    );
    assert_eq!(listed["stdout"], "./sub/deep.txt\n./top.txt\n");

    // Pull a file back, byte for byte.
    let pulled = mcp.call("sandbox_pull", json!({"sandbox_id": sandbox, "remote_path": "/root/up/blob.bin", "local_path": "back.bin"})).await;
    assert_eq!(pulled["_meta"]["bytes"], 70000, "{pulled}");
    assert_eq!(std::fs::read(root.join("back.bin")).unwrap(), blob);
    // A directory: to a new local path, then into an existing directory (keeps its name).
    ok_json(&mcp.call("sandbox_exec", json!({"command": "mkdir -p /root/out/n && echo made > /root/out/n/r.txt && echo one > /root/out/one.txt"})).await);
    let got = mcp
        .call(
            "sandbox_pull",
            json!({"sandbox_id": sandbox, "remote_path": "/root/out", "local_path": "fresh"}),
        )
        .await;
    assert_eq!(got["_meta"]["files"], 2, "{got}");
    assert_eq!(
        std::fs::read_to_string(root.join("fresh/n/r.txt")).unwrap(),
        "made\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("fresh/one.txt")).unwrap(),
        "one\n"
    );
    std::fs::create_dir(root.join("into")).unwrap();
    ok_text(
        &mcp.call(
            "sandbox_pull",
            json!({"sandbox_id": sandbox, "remote_path": "/root/out/", "local_path": "into"}),
        )
        .await,
    );
    assert_eq!(
        std::fs::read_to_string(root.join("into/out/n/r.txt")).unwrap(),
        "made\n"
    );
    // Missing things fail clearly.
    assert!(!error_text(
        &mcp.call(
            "sandbox_pull",
            json!({"sandbox_id": sandbox, "remote_path": "/root/none", "local_path": "x"})
        )
        .await
    )
    .is_empty());
    assert!(!root.join("x").exists());
    assert!(error_text(
        &mcp.call(
            "sandbox_push",
            json!({"sandbox_id": sandbox, "local_path": "absent", "remote_path": "/root/a"})
        )
        .await
    )
    .contains("absent"));
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn routed_native_tools_run_in_the_session_sandbox() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let root = project.path();
    let mut mcp = start(&env, dir.path(), root, r#"{"mode": "remote"}"#).await;
    let names = mcp.tool_names().await;
    for want in [
        "native_bash",
        "native_read",
        "native_write",
        "native_edit",
        "native_apply_patch",
        "native_glob",
        "native_grep",
        "sandbox_exec",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }
    assert_eq!(creates(&env).await, 0, "listing allocates nothing");
    // The plugin names its session with `createos/session`; `sessionId` is the fallback key.
    let s1 = json!({"createos/session": "ses_one"});
    let s2 = json!({"sessionId": "ses_two"});

    let ran = mcp
        .call_with(
            "native_bash",
            json!({"command": "pwd; echo hi; exit 4", "description": "print the cwd"}),
            s1.clone(),
        )
        .await;
    let body = ok_json(&ran);
    assert_eq!(
        (body["stdout"].as_str(), body["code"].as_i64()),
        (Some("/root/workspace\nhi\n"), Some(4))
    );
    assert_eq!(ran["_meta"]["exitCode"], 4);
    let sandbox = sandbox_of(&ran);

    // Host project paths map onto the sandbox working directory; nothing lands on the host.
    let host_file = root.join("src/app.txt");
    let wrote = mcp
        .call_with(
            "native_write",
            json!({"filePath": host_file.to_str().unwrap(), "content": "one\ntwo\nthree\n"}),
            s1.clone(),
        )
        .await;
    assert_eq!(
        ok_text(&wrote),
        "Created /root/workspace/src/app.txt (14 bytes)"
    );
    assert_eq!(sandbox_of(&wrote), sandbox);
    assert!(!host_file.exists());
    let read = mcp
        .call_with(
            "native_read",
            json!({"filePath": "src/app.txt", "offset": 2, "limit": 1}),
            s1.clone(),
        )
        .await;
    assert_eq!(
        ok_text(&read),
        "2: two\n\n(Showing lines 2-2 of 3. Continue with offset 3.)"
    );
    assert_eq!(
        ok_text(
            &mcp.call_with(
                "native_read",
                json!({"filePath": "src/app.txt", "offset": 0}),
                s1.clone()
            )
            .await
        ),
        "1: one\n2: two\n3: three"
    );
    let edited = mcp
        .call_with(
            "native_edit",
            json!({"filePath": "src/app.txt", "oldString": "two", "newString": "TWO"}),
            s1.clone(),
        )
        .await;
    assert_eq!(
        ok_text(&edited),
        "Edited /root/workspace/src/app.txt: replaced 1 occurrence"
    );
    let header = root.join("src/app.txt");
    let patch = format!("*** Begin Patch\n*** Update File: {}\n@@\n-three\n+3\n*** Add File: src/b.txt\n+bee\n*** End Patch", header.display());
    let patched = mcp
        .call_with(
            "native_apply_patch",
            json!({"patchText": patch}),
            s1.clone(),
        )
        .await;
    assert!(
        ok_text(&patched).contains("M /root/workspace/src/app.txt\nA /root/workspace/src/b.txt"),
        "{patched}"
    );
    let alias = "*** Begin Patch\n*** Delete File: src/b.txt\n*** End Patch";
    assert!(ok_text(
        &mcp.call_with("native_patch", json!({"patchText": alias}), s1.clone())
            .await
    )
    .contains("D /root/workspace/src/b.txt"));
    assert_eq!(
        ok_text(
            &mcp.call_with(
                "native_glob",
                json!({"pattern": "**/*.txt", "path": root.to_str().unwrap()}),
                s1.clone()
            )
            .await
        ),
        "src/app.txt"
    );
    assert_eq!(
        ok_text(
            &mcp.call_with(
                "native_grep",
                json!({"pattern": "TWO|3", "include": "*.txt"}),
                s1.clone()
            )
            .await
        ),
        "src/app.txt:2:TWO\nsrc/app.txt:3:3"
    );
    assert_eq!(
        ok_text(
            &mcp.call_with("native_grep", json!({"pattern": "absent"}), s1.clone())
                .await
        ),
        "No matches found"
    );
    // The shell alias, from a working directory given as a host project path.
    let shell = mcp.call_with("native_shell", json!({"command": "pwd; cat app.txt", "workdir": root.join("src").to_str().unwrap(), "timeout": 0}), s1.clone()).await;
    assert_eq!(
        ok_json(&shell)["stdout"],
        "/root/workspace/src\none\nTWO\n3\n"
    );
    // The fallback key names the same session.
    let same = mcp
        .call_with(
            "native_bash",
            json!({"command": "cat src/app.txt"}),
            json!({"sessionId": "ses_one"}),
        )
        .await;
    assert_eq!(
        (sandbox_of(&same), ok_json(&same)["stdout"].clone()),
        (sandbox.clone(), json!("one\nTWO\n3\n"))
    );

    // Another session gets another sandbox, by either key; `createos/session` wins over `sessionId`.
    let other = mcp
        .call_with("native_bash", json!({"command": "ls"}), s2)
        .await;
    assert_ne!(sandbox_of(&other), sandbox);
    assert_eq!(ok_json(&other)["stdout"], "");
    let both = mcp
        .call_with(
            "native_bash",
            json!({"command": "true"}),
            json!({"createos/session": "ses_two", "sessionId": "ses_one"}),
        )
        .await;
    assert_eq!(sandbox_of(&both), sandbox_of(&other));
    assert_eq!(creates(&env).await, 2);
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn routed_background_commands_run_as_managed_processes() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let root = project.path();
    let mut mcp = start(&env, dir.path(), root, r#"{"mode": "remote"}"#).await;
    ok_text(
        &mcp.call(
            "native_write",
            json!({"filePath": "src/in.txt", "content": "x\n"}),
        )
        .await,
    );

    // It answers at once with the process to follow; the command keeps running in the mapped workdir.
    let cmd = "pwd > where.txt; echo started; while [ ! -e go ]; do sleep 0.05; done; echo finished; echo oops >&2; exit 3";
    let started = mcp.call("native_bash", json!({"command": cmd, "workdir": root.join("src").to_str().unwrap(), "background": true})).await;
    let body = ok_json(&started);
    let (sandbox, process) = (
        sandbox_of(&started),
        body["processId"].as_str().expect("processId").to_string(),
    );
    assert_eq!(body["sandboxId"], sandbox.as_str());
    assert_eq!(started["_meta"]["processId"], process.as_str());
    let next = body["next"].as_str().unwrap();
    assert!(
        next.contains("sandbox_process_output")
            && next.contains("sandbox_process_stop")
            && next.contains(&process),
        "{next}"
    );
    let listed = ok_json(
        &mcp.call("sandbox_process_list", json!({"sandbox_id": sandbox}))
            .await,
    );
    assert!(listed.to_string().contains(&process), "{listed}");

    // Still running until told to finish; then its output and exit code are there to read.
    let follow = json!({"sandbox_id": sandbox, "process_id": process});
    ok_json(&mcp.call("native_bash", json!({"command": "for i in $(seq 400); do [ -e where.txt ] && break; sleep 0.05; done; cat where.txt; touch go", "workdir": "src"})).await);
    let mut out = Value::Null;
    for _ in 0..400 {
        out = ok_json(&mcp.call("sandbox_process_output", follow.clone()).await);
        if out["state"] == "exited" || out["state"] == "failed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        (
            out["stdout"].as_str(),
            out["stderr"].as_str(),
            out["exit_code"].as_i64()
        ),
        (Some("started\nfinished\n"), Some("oops\n"), Some(3)),
        "{out}"
    );
    assert_eq!(
        ok_text(
            &mcp.call("native_read", json!({"filePath": "src/where.txt"}))
                .await
        ),
        "1: /root/workspace/src"
    );

    // A second one is stopped through the process tools.
    let sleeper = ok_json(
        &mcp.call(
            "native_bash",
            json!({"command": "sleep 600", "background": true}),
        )
        .await,
    );
    let stop = json!({"sandbox_id": sandbox, "process_id": sleeper["processId"]});
    ok_json(&mcp.call("sandbox_process_stop", stop.clone()).await);
    let gone = ok_json(&mcp.call("sandbox_process_get", stop).await);
    assert_ne!(gone["state"], "running", "{gone}");

    // `timeout` does not apply to a background command: refused, nothing started.
    let before = env.requests("createProcess").await;
    let refused = error_text(
        &mcp.call(
            "native_bash",
            json!({"command": "sleep 1", "background": true, "timeout": 5000}),
        )
        .await,
    );
    assert!(refused.contains("timeout"), "{refused}");
    assert_eq!(env.requests("createProcess").await, before);
    assert_eq!(creates(&env).await, 1);
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_remote_side_fails_the_routed_call_and_runs_nothing_locally() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let marker = project.path().join("marker");
    let mut mcp = start(&env, dir.path(), project.path(), r#"{"mode": "remote"}"#).await;
    ok_json(&mcp.call("native_bash", json!({"command": "true"})).await);
    // The control plane now refuses process input (the resident helper's requests) and new
    // processes: shell and file tools both fail.
    env.add_fault("POST /v1/sandboxes/*/processes/*/input status=500")
        .await;
    env.add_fault("POST /v1/sandboxes/*/processes status=500")
        .await;
    let (asked, ran) = (
        env.requests("writeProcessInput").await,
        env.handled("writeProcessInput").await,
    );
    let touch = format!("touch {}", marker.display());
    let failed = error_text(&mcp.call("native_bash", json!({"command": touch})).await);
    assert!(failed.contains("500"), "{failed}");
    let failed = error_text(
        &mcp.call(
            "native_write",
            json!({"filePath": marker.to_str().unwrap(), "content": "x"}),
        )
        .await,
    );
    assert!(failed.contains("500"), "{failed}");
    // Both calls went to the sandbox (and were refused there); none was run anywhere.
    assert!(env.requests("writeProcessInput").await >= asked + 2);
    assert_eq!(env.handled("writeProcessInput").await, ran);
    assert!(!marker.exists(), "a routed call ran on the host");
    env.clear_faults().await;
    // The same calls work again once the remote side does, still without touching the host.
    ok_text(
        &mcp.call(
            "native_write",
            json!({"filePath": marker.to_str().unwrap(), "content": "x"}),
        )
        .await,
    );
    assert!(!marker.exists());
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_is_refused_before_anything_is_created() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("f.txt"), "x").unwrap();
    // A key in the server's HOME (outside the project), a symlink leading to it, and
    // credential-shaped files inside the project.
    let home_key = dir.path().join(".ssh/id_ed25519");
    std::fs::create_dir_all(home_key.parent().unwrap()).unwrap();
    std::fs::write(&home_key, "PRIVATE").unwrap();
    std::os::unix::fs::symlink(&home_key, project.path().join("escape")).unwrap();
    std::os::unix::fs::symlink(dir.path(), project.path().join("home")).unwrap();
    std::fs::create_dir_all(project.path().join("~/.ssh")).unwrap();
    std::fs::write(project.path().join("~/.ssh/id_ed25519"), "PRIVATE").unwrap();
    std::fs::write(project.path().join(".env"), "TOKEN=1").unwrap();
    let bashrc = dir.path().join(".bashrc");
    std::fs::write(&bashrc, "# mine\n").unwrap();
    let (key, rc) = (home_key.to_str().unwrap(), bashrc.to_str().unwrap());
    let mut mcp = start(&env, dir.path(), project.path(), r#"{"mode": "remote"}"#).await;
    let before = mcp_client::total_requests(&env).await;
    let cases = [
        (
            "sandbox_push",
            json!({"sandbox_id": "sb-123", "local_path": key, "remote_path": "/root/k"}),
            "outside the project",
        ),
        (
            "sandbox_push",
            json!({"sandbox_id": "sb-123", "local_path": "../x", "remote_path": "/root/k"}),
            "outside the project",
        ),
        (
            "sandbox_push",
            json!({"sandbox_id": "sb-123", "local_path": "escape", "remote_path": "/root/k"}),
            "outside the project",
        ),
        (
            "sandbox_push",
            json!({"sandbox_id": "sb-123", "local_path": "home", "remote_path": "/root/k"}),
            "outside the project",
        ),
        (
            "sandbox_push",
            json!({"sandbox_id": "sb-123", "local_path": "~/.ssh/id_ed25519", "remote_path": "/root/k"}),
            "deny-list",
        ),
        (
            "sandbox_push",
            json!({"sandbox_id": "sb-123", "local_path": "~/.ssh", "remote_path": "/root/k"}),
            "deny-list",
        ),
        (
            "sandbox_push",
            json!({"sandbox_id": "sb-123", "local_path": ".env", "remote_path": "/root/k"}),
            "deny-list",
        ),
        (
            "sandbox_pull",
            json!({"sandbox_id": "sb-123", "local_path": rc, "remote_path": "/root/.bashrc"}),
            "outside the project",
        ),
        (
            "sandbox_pull",
            json!({"sandbox_id": "sb-123", "local_path": "../x", "remote_path": "/root/x"}),
            "outside the project",
        ),
        (
            "sandbox_pull",
            json!({"sandbox_id": "sb-123", "local_path": "escape", "remote_path": "/root/x"}),
            "outside the project",
        ),
        (
            "sandbox_pull",
            json!({"sandbox_id": "sb-123", "local_path": "home/.bashrc", "remote_path": "/root/x"}),
            "outside the project",
        ),
        // into the project directory, where the remote name is a symlink leading out
        (
            "sandbox_pull",
            json!({"sandbox_id": "sb-123", "local_path": ".", "remote_path": "/root/escape"}),
            "outside the project",
        ),
        (
            "sandbox_pull",
            json!({"sandbox_id": "sb-123", "local_path": "new/../../x", "remote_path": "/root/x"}),
            "..",
        ),
        (
            "sandbox_push",
            json!({"sandbox_id": "sb-123", "local_path": "f.txt", "remote_path": "relative/dir"}),
            "absolute",
        ),
        (
            "sandbox_pull",
            json!({"sandbox_id": "sb-123", "local_path": "f.txt", "remote_path": "/root/../etc"}),
            "..",
        ),
        (
            "sandbox_push",
            json!({"sandbox_id": "sb-123", "local_path": "f.txt", "remote_path": "/root/x", "mode": "fast"}),
            "mode",
        ),
        ("sandbox_read", json!({"path": "../outside"}), "escapes"),
        (
            "sandbox_write",
            json!({"path": "a/../../b", "content": ""}),
            "escapes",
        ),
        (
            "sandbox_write",
            json!({"path": "a.txt", "content": "", "extra": 1}),
            "extra",
        ),
        (
            "sandbox_edit",
            json!({"path": "a.txt", "oldString": "same", "newString": "same"}),
            "identical",
        ),
        (
            "sandbox_patch",
            json!({"patchText": "*** Begin Patch\n*** Delete File: ../x\n*** End Patch"}),
            "escapes",
        ),
        (
            "sandbox_patch",
            json!({"patchText": "not a patch"}),
            "Begin Patch",
        ),
        ("sandbox_grep", json!({"pattern": "a\nb"}), "single line"),
        ("sandbox_glob", json!({"pattern": "*", "limit": 0}), "limit"),
        (
            "native_read",
            json!({"filePath": "../../etc/passwd"}),
            "escapes",
        ),
        (
            "native_bash",
            json!({"command": "true", "workdir": "../up"}),
            "escapes",
        ),
        ("native_bash", json!({"command": "true", "cwd": "/"}), "cwd"),
        (
            "native_edit",
            json!({"filePath": "a", "oldString": "", "newString": "b"}),
            "oldString",
        ),
    ];
    for (tool, args, needle) in cases {
        let text = error_text(&mcp.call(tool, args.clone()).await);
        assert!(text.contains(needle), "{tool} {args}: {text}");
    }
    assert_eq!(creates(&env).await, 0);
    assert_eq!(env.requests("uploadFile").await, 0);
    assert_eq!(env.requests("downloadFile").await, 0);
    assert_eq!(
        mcp_client::total_requests(&env).await,
        before,
        "a refused call reached the control plane"
    );
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# mine\n");
    mcp.stop().await;
    env.shutdown().await;
}

/// Live processes once they settle, each as its argv.
async fn settled_processes(env: &common::Env) -> Vec<String> {
    use createos_sandbox::api::sandboxes::ListSandboxes;
    use futures::TryStreamExt as _;
    let mut previous = u64::MAX;
    for _ in 0..600 {
        let live = env.stats().await["live_processes"].as_u64().unwrap_or(0);
        if live == previous {
            break;
        }
        previous = live;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let views: Vec<_> = env
        .client
        .list_sandboxes(ListSandboxes::default())
        .try_collect()
        .await
        .unwrap();
    let mut running = Vec::new();
    for view in views.into_iter().filter(|v| !v.status.is_terminal()) {
        let sandbox = env.client.sandbox(&view.id).unwrap();
        for p in sandbox.processes().list().await.unwrap() {
            if !p.state.is_finished() {
                running.push(format!(
                    "{} {}",
                    p.cmd.unwrap_or_default(),
                    p.args.join(" ")
                ));
            }
        }
    }
    running
}

/// A call past its deadline fails; what it started is either stopped or is the session's one
/// resident helper, which the next call reuses (never one more per call), and which ends with
/// the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_file_call_past_its_deadline_fails_and_leaves_only_the_resident_helper() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let mut mcp = start(&env, dir.path(), project.path(), r#"{"timeout": 1}"#).await;
    // The sandbox is allocated outside the call's deadline; the operation itself cannot finish in 1 ms.
    for round in 0..3 {
        let late = error_text(
            &mcp.call("sandbox_write", json!({"path": "a.txt", "content": "x"}))
                .await,
        );
        assert!(late.contains("timed out"), "{late}");
        let running = settled_processes(&env).await;
        assert!(
            running.len() <= 1,
            "round {round}: processes outlived their calls: {running:?}"
        );
        assert!(
            running
                .iter()
                .all(|p| p.contains("python3") && p.ends_with(" serve")),
            "round {round}: only the resident helper may stay: {running:?}"
        );
    }
    mcp.stop().await;
    let mut live = u64::MAX;
    for _ in 0..600 {
        live = env.stats().await["live_processes"].as_u64().unwrap_or(0);
        if live == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        live,
        0,
        "the resident helper outlived its session: {:?}",
        settled_processes(&env).await
    );
    env.shutdown().await;
}
