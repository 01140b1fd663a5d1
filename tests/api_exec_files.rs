//! Exec (E18) and files (E19/E20) against the emulator: real processes, real bytes.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use createos_sandbox::api::exec::{ExecEvent, ExecRequest};
use createos_sandbox::api::files::{UploadBody, UploadOptions, MAX_UPLOAD_BYTES};
use createos_sandbox::{CreateSandbox, Error, Sandbox};
use futures::StreamExt;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Upper bound for anything that waits on a remote command, so a broken stream fails the test
/// instead of hanging it.
const GUARD: Duration = Duration::from_secs(60);

async fn sandbox(env: &common::Env) -> Sandbox {
    env.client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb"))
        .await
        .expect("create")
}

fn sha256(data: &[u8]) -> Vec<u8> {
    Sha256::digest(data).to_vec()
}

fn random_bytes(n: usize) -> Vec<u8> {
    let mut data = vec![0u8; n];
    rand::thread_rng().fill_bytes(&mut data);
    data
}

// ------------------------------------------------------------------------------------- exec

#[tokio::test]
async fn exec_returns_real_output_and_timing() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let out = sb.exec("echo", ["hello", "world"]).await.unwrap();
    assert_eq!(out.stdout, "hello world\n");
    assert_eq!(out.stderr, "");
    assert_eq!(out.exit_code, 0);
    assert!(out.error.is_none());
    assert!(out.success());
    assert!(out.exec_ms >= 0.0);
    // No shell: metacharacters reach the program untouched.
    let out = sb.exec("echo", ["$HOME", "*", "a|b"]).await.unwrap();
    assert_eq!(out.stdout, "$HOME * a|b\n");
    sb.destroy().await.unwrap();
}

#[tokio::test]
async fn exit_code_and_stderr_are_kept_apart() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let out = sb
        .exec_with(ExecRequest::shell("echo out; echo err >&2; exit 7"))
        .await
        .unwrap();
    assert_eq!(out.stdout, "out\n");
    assert_eq!(out.stderr, "err\n");
    assert_eq!(out.exit_code, 7);
    assert!(
        out.error.is_none(),
        "a failing command is not an agent error"
    );
    assert!(!out.success());
    // A program that does not exist is an agent-level failure or a shell-style 127, never a
    // transport error.
    let out = sb
        .exec("definitely-not-a-command-xyz", Vec::<String>::new())
        .await
        .unwrap();
    assert!(out.error.is_some() || out.exit_code == 127, "{out:?}");
    assert!(!out.success());
    sb.destroy().await.unwrap();
}

#[tokio::test]
async fn create_envs_reach_commands_and_can_be_overridden() {
    let env = common::start().await;
    let sb = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb").env("GREETING", "hi there"))
        .await
        .unwrap();
    let out = sb.exec("printenv", ["GREETING"]).await.unwrap();
    assert_eq!(out.stdout, "hi there\n");
    let out = sb
        .exec_with(
            ExecRequest::new("printenv")
                .arg("GREETING")
                .env("GREETING", "bye"),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout, "bye\n");
    let out = sb
        .exec_with(ExecRequest::new("cat").stdin("fed through stdin"))
        .await
        .unwrap();
    assert_eq!(out.stdout, "fed through stdin");
    sb.destroy().await.unwrap();
}

#[tokio::test]
async fn undeclared_env_key_is_rejected_by_the_server() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    env.reset_stats().await;
    let err = sb
        .exec_with(ExecRequest::new("true").env("NOT_DECLARED", "x"))
        .await
        .unwrap_err();
    match &err {
        Error::Validation(api) => {
            assert_eq!(api.status, 400);
            assert!(!api.fields.is_empty(), "{api:?}");
            assert!(api.request_id.is_some());
        }
        other => panic!("expected a validation error, got {other:?}"),
    }
    assert_eq!(
        env.requests("exec").await,
        1,
        "the server, not the client, refused it"
    );
    sb.destroy().await.unwrap();
}

#[tokio::test]
async fn bad_commands_are_refused_before_sending() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    env.reset_stats().await;
    for req in [
        ExecRequest::new(""),
        ExecRequest::new("echo").arg("nul\0inside"),
        ExecRequest::new("cat").stdin("a\0b"),
        ExecRequest::new("env").env("1BAD", "v"),
    ] {
        assert!(
            matches!(
                sb.exec_with(req.clone()).await,
                Err(Error::InvalidInput { .. })
            ),
            "{req:?}"
        );
        assert!(matches!(
            sb.exec_stream(req).await,
            Err(Error::InvalidInput { .. })
        ));
    }
    assert_eq!(env.requests("exec").await, 0);
    sb.destroy().await.unwrap();
}

#[tokio::test]
async fn exec_on_a_paused_sandbox_is_a_conflict() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    sb.pause_and_wait().await.unwrap();
    let err = sb.exec("true", Vec::<String>::new()).await.unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err:?}");
    sb.destroy().await.unwrap();
}

// ---------------------------------------------------------------------------------- streams

#[tokio::test]
async fn stream_delivers_output_while_the_command_runs() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    // The command waits for a signal file before each next write, and the test creates it only
    // after receiving the previous write as an event: a server that buffered output could never
    // let this test finish (the timeout turns that into a failure), and the order of events is
    // the order of writes, across stdout and stderr.
    let script = r#"w() { while [ ! -e "$HOME/$1" ]; do sleep 0.02; done; }
echo first; w .go1; echo second >&2; w .go2; echo third; exit 4"#;
    env.reset_stats().await;
    let mut events = sb
        .exec_stream(ExecRequest::shell(script).timeout(GUARD))
        .await
        .unwrap();
    assert!(!events.fell_back());
    let signal = |name: &'static str| {
        let sb = sb.clone();
        async move {
            let out = sb
                .exec_with(ExecRequest::shell(format!(r#"touch "$HOME/{name}""#)))
                .await
                .unwrap();
            assert_eq!(out.exit_code, 0, "{out:?}");
        }
    };
    assert_eq!(
        events.next().await.unwrap().unwrap(),
        ExecEvent::Stdout("first\n".into())
    );
    signal(".go1").await;
    assert_eq!(
        events.next().await.unwrap().unwrap(),
        ExecEvent::Stderr("second\n".into())
    );
    signal(".go2").await;
    assert_eq!(
        events.next().await.unwrap().unwrap(),
        ExecEvent::Stdout("third\n".into())
    );
    assert_eq!(events.next().await.unwrap().unwrap(), ExecEvent::Exit(4));
    assert!(
        events.next().await.is_none(),
        "the stream ends after the exit code"
    );
    assert_eq!(
        env.requests("exec").await,
        3,
        "one stream, two signals; nothing retried"
    );
    sb.destroy().await.unwrap();
}

#[tokio::test]
async fn stream_collects_into_an_output() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let script = "for i in 1 2 3; do echo line$i; sleep 0.05; done; echo done >&2; exit 3";
    let out = tokio::time::timeout(GUARD, async {
        sb.exec_stream(ExecRequest::shell(script))
            .await
            .unwrap()
            .collect_output()
            .await
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.stdout, "line1\nline2\nline3\n");
    assert_eq!(out.stderr, "done\n");
    assert_eq!(out.exit_code, 3);
    assert!(out.error.is_none());
    sb.destroy().await.unwrap();
}

#[tokio::test]
async fn stream_falls_back_to_buffered_on_404() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let script = "echo one; echo two >&2; exit 5";

    // The fault fires on the first exec request only. The streaming request comes first, so it
    // gets the 404; the second (buffered) request runs the command.
    env.reset_stats().await;
    env.add_fault("POST /v1/sandboxes/*/exec status=404 count=1")
        .await;
    let stream = sb.exec_stream(ExecRequest::shell(script)).await.unwrap();
    assert!(
        stream.fell_back(),
        "the events are a replay of the buffered answer"
    );
    let out = stream.collect_output().await.unwrap();
    assert_eq!(
        (out.stdout.as_str(), out.stderr.as_str(), out.exit_code),
        ("one\n", "two\n", 5)
    );
    let stats = env.stats().await;
    assert_eq!(stats["requests"]["exec"], 2, "{stats}");
    assert_eq!(stats["handled"]["exec"], 1, "{stats}");
    assert_eq!(stats["faults_injected"], 1, "{stats}");

    // The same fault on a buffered call is an error: only the streaming form falls back.
    env.clear_faults().await;
    env.add_fault("POST /v1/sandboxes/*/exec status=404 count=1")
        .await;
    let err = sb.exec_with(ExecRequest::shell(script)).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");

    // Without the fault the server streams.
    env.clear_faults().await;
    let stream = sb.exec_stream(ExecRequest::shell(script)).await.unwrap();
    assert!(!stream.fell_back());
    assert_eq!(stream.collect_output().await.unwrap().exit_code, 5);

    // A 404 that names the sandbox is a missing sandbox, not an old server: no second request.
    env.reset_stats().await;
    let ghost = env
        .client
        .sandbox("sb-01JNOTEXISTING0000000000000")
        .unwrap();
    let err = ghost
        .exec_stream(ExecRequest::new("true"))
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert_eq!(env.requests("exec").await, 1);
    sb.destroy().await.unwrap();
}

#[tokio::test]
async fn stream_is_not_retried_after_a_cut() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    env.reset_stats().await;
    env.add_fault("POST /v1/sandboxes/*/exec cut=8 count=1")
        .await;
    let script = "echo aaaaaaaaaaaaaaaaaaaa; sleep 0.2; echo bbbbbbbbbbbbbbbbbbbbbb";
    let result = tokio::time::timeout(GUARD, async {
        sb.exec_stream(ExecRequest::shell(script))
            .await
            .unwrap()
            .collect_output()
            .await
    })
    .await
    .unwrap();
    assert!(
        matches!(result, Err(Error::Connection { .. })),
        "{result:?}"
    );
    assert_eq!(
        env.requests("exec").await,
        1,
        "a started stream is never sent again"
    );
    sb.destroy().await.unwrap();
}

// ------------------------------------------------------------------------------------ files

#[tokio::test]
async fn five_megabytes_round_trip() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let data = random_bytes(5 * 1024 * 1024);
    let up = sb
        .upload("/root/blob.bin", UploadBody::bytes(data.clone()))
        .await
        .unwrap();
    assert_eq!(up.bytes, data.len() as u64);
    let download = sb.download("/root/blob.bin").await.unwrap();
    assert_eq!(download.content_length(), Some(data.len() as u64));
    let back = download.bytes(10 * 1024 * 1024).await.unwrap();
    assert_eq!(sha256(&back), sha256(&data));
    // The file is really in the sandbox: the guest computes the same digest.
    let out = sb
        .exec_with(ExecRequest::shell(r#"sha256sum "$HOME/blob.bin""#))
        .await
        .unwrap();
    let hex: String = sha256(&data).iter().map(|b| format!("{b:02x}")).collect();
    assert!(out.stdout.starts_with(&hex), "{out:?}");
    // Too small a limit is refused from the announced length.
    let err = sb
        .download("/root/blob.bin")
        .await
        .unwrap()
        .bytes(1024)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    sb.destroy().await.unwrap();
}

#[tokio::test]
async fn upload_streams_a_local_file_and_save_to_writes_one() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("source.bin");
    let data = random_bytes(3 * 1024 * 1024 + 17);
    std::fs::write(&local, &data).unwrap();

    let reports = Arc::new(Mutex::new(Vec::new()));
    let seen = reports.clone();
    let options =
        UploadOptions::new().progress(move |done, total| seen.lock().unwrap().push((done, total)));
    let up = sb
        .upload_with(
            "/root/nested/dir/copy.bin",
            UploadBody::file(&local),
            options,
        )
        .await
        .unwrap();
    assert_eq!(up.bytes, data.len() as u64);
    let reports = reports.lock().unwrap().clone();
    assert!(
        reports.len() > 2,
        "progress is reported per chunk: {}",
        reports.len()
    );
    assert!(reports.windows(2).all(|w| w[0].0 <= w[1].0));
    assert_eq!(
        *reports.last().unwrap(),
        (data.len() as u64, Some(data.len() as u64))
    );

    let received = Arc::new(AtomicU64::new(0));
    let r = received.clone();
    let target = dir.path().join("back.bin");
    let written = sb
        .download("/root/nested/dir/copy.bin")
        .await
        .unwrap()
        .progress(move |done, _| r.store(done, Ordering::SeqCst))
        .save_to(&target)
        .await
        .unwrap();
    assert_eq!(written, data.len() as u64);
    assert_eq!(received.load(Ordering::SeqCst), data.len() as u64);
    assert_eq!(sha256(&std::fs::read(&target).unwrap()), sha256(&data));
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "no temporary file left: {names:?}");

    // Text helpers.
    sb.write("/root/notes.txt", "héllo\n").await.unwrap();
    assert_eq!(
        sb.read_to_string("/root/notes.txt").await.unwrap(),
        "héllo\n"
    );
    sb.destroy().await.unwrap();
}

#[tokio::test]
async fn bad_paths_and_oversize_bodies_send_nothing() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    env.reset_stats().await;
    for path in ["root/relative.txt", "/root/../etc/passwd", "", "/root/a\0b"] {
        let err = sb.upload(path, "x".into()).await.unwrap_err();
        assert!(
            matches!(err, Error::InvalidInput { .. }),
            "{path:?}: {err:?}"
        );
        let err = sb.download(path).await.unwrap_err();
        assert!(
            matches!(err, Error::InvalidInput { .. }),
            "{path:?}: {err:?}"
        );
    }
    let err = sb
        .upload(
            "/root/huge",
            UploadBody::reader(tokio::io::empty(), Some(MAX_UPLOAD_BYTES + 1)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    let dir = tempfile::tempdir().unwrap();
    let sparse = dir.path().join("sparse.img");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(MAX_UPLOAD_BYTES + 1)
        .unwrap();
    let err = sb
        .upload("/root/huge", UploadBody::file(&sparse))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("allow_large"), "{err}");
    assert_eq!(env.requests("uploadFile").await, 0);
    assert_eq!(env.requests("downloadFile").await, 0);
    sb.destroy().await.unwrap();
}

#[tokio::test]
async fn missing_file_is_not_found_and_a_reader_that_ends_early_fails() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let err = sb.download("/root/does-not-exist").await.unwrap_err();
    match &err {
        Error::NotFound(api) => assert_eq!(
            api.fields.get("path").map(String::as_str),
            Some("file not found")
        ),
        other => panic!("expected NotFound, got {other:?}"),
    }
    let err = sb
        .upload("/root/short", UploadBody::reader(&b"abc"[..], Some(10)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    // A reader without a length goes chunked.
    let up = sb
        .upload(
            "/root/chunked",
            UploadBody::reader(&b"chunked body"[..], None),
        )
        .await
        .unwrap();
    assert_eq!(up.bytes, 12);
    assert_eq!(
        sb.read_to_string("/root/chunked").await.unwrap(),
        "chunked body"
    );
    sb.destroy().await.unwrap();
}

#[tokio::test]
async fn save_to_leaves_nothing_behind_when_the_body_breaks() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    sb.write("/root/big.bin", random_bytes(2 * 1024 * 1024))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("big.bin");
    std::fs::write(&target, b"previous content").unwrap();

    // Cut well past the first buffers so the headers have surely been sent: the failure then
    // happens inside save_to, while the temporary file is being written.
    env.add_fault("GET /v1/sandboxes/*/files cut=1000000").await;
    let download = sb.download("/root/big.bin").await.unwrap();
    let err = download.save_to(&target).await.unwrap_err();
    assert!(matches!(err, Error::Connection { .. }), "{err:?}");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "temporary file removed: {names:?}");
    assert_eq!(
        std::fs::read(&target).unwrap(),
        b"previous content",
        "target untouched"
    );
    sb.destroy().await.unwrap();
}

#[tokio::test]
async fn upload_503_is_retried_for_bytes_but_not_for_streams() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let fault = "PUT /v1/sandboxes/*/files status=503 count=1";

    env.reset_stats().await;
    env.add_fault(fault).await;
    sb.upload("/root/a.txt", "bytes body".into()).await.unwrap();
    assert_eq!(env.requests("uploadFile").await, 2);
    assert_eq!(env.handled("uploadFile").await, 1);
    assert_eq!(
        sb.read_to_string("/root/a.txt").await.unwrap(),
        "bytes body"
    );

    // Watched byte bodies take another path through the client; still retried.
    env.clear_faults().await;
    env.reset_stats().await;
    env.add_fault(fault).await;
    let options = UploadOptions::new().progress(|_, _| {});
    sb.upload_with(
        "/root/b.txt",
        UploadBody::bytes(random_bytes(200_000)),
        options,
    )
    .await
    .unwrap();
    assert_eq!(env.requests("uploadFile").await, 2);
    assert_eq!(env.handled("uploadFile").await, 1);

    for body in [
        UploadBody::reader(&b"stream body"[..], Some(11)),
        UploadBody::reader(&b"stream body"[..], None),
    ] {
        env.clear_faults().await;
        env.reset_stats().await;
        env.add_fault(fault).await;
        let err = sb.upload("/root/c.txt", body).await.unwrap_err();
        assert_eq!(err.status(), Some(503), "{err:?}");
        assert_eq!(
            env.requests("uploadFile").await,
            1,
            "a stream body is sent once"
        );
        assert_eq!(env.handled("uploadFile").await, 0);
    }

    env.clear_faults().await;
    env.reset_stats().await;
    env.add_fault(fault).await;
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("f.txt");
    std::fs::write(&local, b"file body").unwrap();
    let err = sb
        .upload("/root/d.txt", UploadBody::file(&local))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(503), "{err:?}");
    assert_eq!(
        env.requests("uploadFile").await,
        1,
        "file bodies are not replayed"
    );
    sb.destroy().await.unwrap();
}
