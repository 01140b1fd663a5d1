//! Runs each example against the emulator, as a user would (`cargo run --example NAME`), and
//! checks what it printed and that it left no sandbox behind.

mod common;

use std::process::Output;

/// `cargo run --quiet --example NAME` with the emulator's URL and key in the environment.
async fn run_example(env: &common::Env, name: &str) -> Output {
    tokio::process::Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--example", name])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("CREATEOS_SANDBOX_BASE_URL", env.base_url())
        .env("CREATEOS_API_KEY", env.mock.api_key())
        .env_remove("CREATEOS_SANDBOX_URL")
        .env_remove("RUST_LOG")
        .kill_on_drop(true)
        .output()
        .await
        .expect("cargo runs")
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The example created one sandbox and destroyed it. Destruction finishes on the server after
/// the DELETE is answered (`destroying`), so the live count is polled until it reaches zero.
async fn assert_nothing_left(env: &common::Env) {
    let stats = env.stats().await;
    assert_eq!(stats["sandboxes_created"], 1, "{stats}");
    assert_eq!(stats["requests"]["destroySandbox"], 1, "{stats}");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let stats = env.stats().await;
        if stats["live_sandboxes"] == 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a sandbox is still alive: {stats}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn create_exec_destroy_example() {
    let env = common::start().await;
    let output = run_example(&env, "create_exec_destroy").await;
    let (stdout, stderr) = text(&output);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("created sandbox sb"), "{stdout}");
    assert!(stdout.contains("uname -s -> Linux"), "{stdout}");
    assert!(
        stdout.contains("GREETING -> hello from the sandbox"),
        "{stdout}"
    );
    assert!(
        stdout.contains(r#"stdout "to-stdout", stderr "to-stderr", exit 3"#),
        "{stdout}"
    );
    assert!(stdout.contains("destroyed sandbox"), "{stdout}");
    assert_nothing_left(&env).await;
}

#[tokio::test]
async fn streaming_exec_example() {
    let env = common::start().await;
    let output = run_example(&env, "streaming_exec").await;
    let (stdout, stderr) = text(&output);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let ticks: Vec<_> = stdout
        .lines()
        .filter(|l| l.starts_with("stdout | tick"))
        .collect();
    assert_eq!(
        ticks,
        ["stdout | tick 1", "stdout | tick 2", "stdout | tick 3"],
        "{stdout}"
    );
    assert!(stdout.contains("stderr | finished"), "{stdout}");
    assert!(stdout.contains("exit code 2"), "{stdout}");
    assert!(stdout.contains(r#"collected: "15" exit 0"#), "{stdout}");
    assert!(stdout.contains("destroyed sandbox"), "{stdout}");
    assert_nothing_left(&env).await;
}

#[tokio::test]
async fn files_example() {
    let env = common::start().await;
    let output = run_example(&env, "files").await;
    let (stdout, stderr) = text(&output);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains(r#"read back: "hello, sandbox""#),
        "{stdout}"
    );
    assert!(
        stdout.contains("upload progress: 2000000/2000000 bytes"),
        "{stdout}"
    );
    assert!(
        stdout.contains("uploaded 2000000 bytes to /root/data/payload.bin"),
        "{stdout}"
    );
    assert!(
        stdout.contains("size seen by the sandbox: 2000000"),
        "{stdout}"
    );
    assert!(
        stdout.contains("downloaded 2000000 bytes, identical: true"),
        "{stdout}"
    );
    assert_nothing_left(&env).await;
}

#[tokio::test]
async fn example_destroys_its_sandbox_when_it_fails() {
    let env = common::start().await;
    // Every exec fails with a non-retryable server error: the example must still clean up.
    env.add_fault("POST /v1/sandboxes/*/exec status=500").await;
    let output = run_example(&env, "create_exec_destroy").await;
    let (stdout, stderr) = text(&output);
    assert!(
        !output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("destroyed sandbox"), "{stdout}");
    assert!(stderr.contains("500"), "the error is reported: {stderr}");
    assert_nothing_left(&env).await;
}
