//! TLS like the real service: `createos-mock --tls` serves HTTPS with a certificate of a CA
//! it generates; the client, `cos`, `cos mcp`, `cos attach` and tunnels work over it when
//! told to trust that CA (`ca_file`, `--ca-file`, `CREATEOS_CA_FILE`), and refuse it with
//! a clear error when not.

#[path = "../../tests/common/mod.rs"]
mod common;
mod mcp_client;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use createos_sandbox::{Client, CreateSandbox};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn tls_env() -> common::Env {
    let env = common::start_with(createos_mock::MockConfig::default().tls(true)).await;
    assert!(env.base_url().starts_with("https://"), "{}", env.base_url());
    let ca = env.mock.ca_file().expect("a CA file");
    assert!(std::fs::read_to_string(ca)
        .unwrap()
        .contains("BEGIN CERTIFICATE"));
    env
}

fn trusting(env: &common::Env, ca: Option<&Path>) -> Client {
    let mut builder = Client::builder()
        .base_url(env.base_url())
        .api_key(env.mock.api_key())
        .retry(common::test_retry())
        .env(|_| None);
    if let Some(ca) = ca {
        builder = builder.ca_file(ca);
    }
    builder.build().expect("client builds")
}

fn cos(env: &common::Env) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cos"));
    c.args([
        "--endpoint",
        &env.base_url(),
        "--api-key",
        &env.mock.api_key(),
    ]);
    for var in [
        "CREATEOS_API_KEY",
        "CREATEOS_CA_FILE",
        "SSL_CERT_FILE",
        "CREATEOS_SANDBOX_BASE_URL",
    ] {
        c.env_remove(var);
    }
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_client_shell_and_tunnels_work_over_tls_with_the_generated_ca() {
    let env = tls_env().await;
    let client = trusting(&env, env.mock.ca_file());
    let sb = client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb"))
        .await
        .expect("create over TLS");
    let out = sb.exec("sh", ["-c", "echo over-$((40+2))"]).await.unwrap();
    assert_eq!(out.stdout, "over-42\n");

    // /shell: an HTTP/1.1 upgrade over TLS.
    let mut shell = sb.shell(24, 80).await.expect("shell over TLS");
    shell
        .input
        .write_all(b"echo shell-$((6*7))\nexit\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        use futures::StreamExt;
        while let Some(Ok(chunk)) = shell.output.next().await {
            seen.extend_from_slice(&chunk);
        }
    })
    .await
    .expect("the shell ends");
    assert!(
        String::from_utf8_lossy(&seen).contains("shell-42"),
        "{}",
        String::from_utf8_lossy(&seen)
    );

    // /tunnel/{port}: a TCP stream to a port inside the sandbox, over TLS.
    sb.processes()
        .start(createos_sandbox::api::processes::ProcessSpec::new("python3").args([
            "-c",
            "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
             s.bind(('127.0.0.1',7070))\ns.listen(1)\nc,_=s.accept()\nc.sendall(b'echo:'+c.recv(100))\nc.close()\n",
        ]))
        .await
        .unwrap();
    let mut conn = None;
    for _ in 0..200 {
        match sb.tunnel(7070).await {
            Ok(c) => {
                conn = Some(c);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(25)).await,
        }
    }
    let mut conn = conn.expect("tunnel over TLS");
    conn.write_all(b"ping").await.unwrap();
    let mut reply = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut reply))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reply, b"echo:ping");
    sb.destroy().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_ca_is_refused_with_a_clear_error() {
    let env = tls_env().await;
    let err = trusting(&env, None)
        .whoami()
        .await
        .expect_err("an untrusted certificate must be refused");
    let text = err.to_string();
    assert!(
        text.contains("certificate is not trusted") && text.contains("UnknownIssuer"),
        "{text}"
    );
    assert!(
        text.contains("--ca-file")
            && text.contains("CREATEOS_CA_FILE")
            && text.contains("SSL_CERT_FILE"),
        "{text}"
    );
    assert_eq!(
        env.requests("whoami").await,
        0,
        "nothing reached the server"
    );

    // The CLI says the same, and trusts the CA with --ca-file, CREATEOS_CA_FILE or SSL_CERT_FILE.
    let ca = env.mock.ca_file().unwrap().to_path_buf();
    let refused = tokio::task::spawn_blocking({
        let mut cmd = cos(&env);
        move || cmd.args(["whoami"]).output().unwrap()
    })
    .await
    .unwrap();
    assert!(
        !refused.status.success(),
        "{}{}",
        String::from_utf8_lossy(&refused.stdout),
        String::from_utf8_lossy(&refused.stderr)
    );
    // (Text on stderr, or the JSON error on stdout when stdout is not a terminal.)
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&refused.stdout),
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(
        said.contains("certificate is not trusted") && said.contains("--ca-file"),
        "{said}"
    );
    for how in ["flag", "CREATEOS_CA_FILE", "SSL_CERT_FILE"] {
        let mut cmd = cos(&env);
        match how {
            "flag" => {
                cmd.arg("--ca-file").arg(&ca);
            }
            var => {
                cmd.env(var, &ca);
            }
        }
        let out = tokio::task::spawn_blocking(move || {
            cmd.args(["-o", "json", "whoami"]).output().unwrap()
        })
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "{how}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A CA file that is not one is a clear error before anything is sent.
    let bogus = env.mock.state().state_dir.join("not-a-ca.pem");
    std::fs::write(&bogus, "hello\n").unwrap();
    let err = Client::builder()
        .base_url(env.base_url())
        .api_key("k")
        .ca_file(&bogus)
        .env(|_| None)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("no PEM certificate"), "{err}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cos_mcp_works_over_tls_with_the_ca_from_the_environment() {
    let env = tls_env().await;
    let client = trusting(&env, env.mock.ca_file());
    let sb = client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = env.mock.ca_file().unwrap().display().to_string();
    let mut mcp =
        mcp_client::Mcp::start(&env, dir.path(), "{}", &[("CREATEOS_CA_FILE", ca.as_str())]).await;
    let result = mcp
        .ok(
            "sandbox_exec",
            json!({"sandbox_id": sb.id(), "command": "echo via-mcp-$((2*21))"}),
        )
        .await;
    assert!(result.to_string().contains("via-mcp-42"), "{result}");
    mcp.stop().await;
    sb.destroy().await.unwrap();
    env.shutdown().await;
}

/// `cos attach` in a real terminal (tmux), over TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cos_attach_works_over_tls() {
    let env = tls_env().await;
    let client = trusting(&env, env.mock.ca_file());
    client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb").name("tls-tty"))
        .await
        .unwrap();
    let socket = std::env::temp_dir()
        .join(format!("cos-tls-{}.sock", std::process::id()))
        .display()
        .to_string();
    let tmux = |args: &[&str]| -> String {
        let out = Command::new("tmux")
            .args(["-S", &socket])
            .args(args)
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    tmux(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "tls",
        "-x",
        "100",
        "-y",
        "30",
        "sh",
    ]);
    let line = format!(
        "{} --endpoint {} --api-key {} --ca-file {} attach tls-tty; echo local-status=$?",
        env!("CARGO_BIN_EXE_cos"),
        env.base_url(),
        env.mock.api_key(),
        env.mock.ca_file().unwrap().display()
    );
    let wait_for = |needle: &str| {
        let mut screen = String::new();
        for _ in 0..600 {
            screen = tmux(&["capture-pane", "-p", "-J", "-S", "-200", "-t", "tls"]);
            if screen.contains(needle) {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("{needle:?} never appeared; screen:\n{screen}");
    };
    let type_line = |text: &str| {
        tmux(&["send-keys", "-t", "tls", "-l", text]);
        tmux(&["send-keys", "-t", "tls", "Enter"]);
    };
    tokio::task::block_in_place(|| {
        type_line(&line);
        wait_for("started proc_");
        type_line("echo remote-$((6*7))");
        wait_for("remote-42");
        type_line("exit 7");
        wait_for("local-status=7");
    });
    tmux(&["kill-server"]);
    let _ = std::fs::remove_file(&socket);
    env.shutdown().await;
}
