//! `cos mcp` against a local emulator that cannot isolate its sandboxes (issue 13.4): it
//! refuses `sandbox_exec` and the routed native tools unless started with `--unsafe-host`,
//! asking `GET /_mock/isolation` once per server. The emulator side of that route is another
//! change; here a small proxy in front of the real emulator answers it, the contract's way.

#[path = "../../tests/common/mod.rs"]
mod common;
mod mcp_client;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use mcp_client::{error_text, ok_json, Setup};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A proxy to `upstream` that answers `GET /_mock/isolation` itself with `report` (or passes it
/// on when `report` is `None`), counting those requests and refusing them without a key.
struct Proxy {
    base_url: String,
    asked: Arc<AtomicUsize>,
}

async fn proxy(upstream: String, report: Option<Value>) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}", listener.local_addr().unwrap());
    let asked = Arc::new(AtomicUsize::new(0));
    let upstream = upstream
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let count = asked.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            let (upstream, report, count) = (upstream.clone(), report.clone(), count.clone());
            tokio::spawn(async move {
                // The request head decides; everything after it is piped as it is.
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if client.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
                if let (true, Some(report)) = (text.starts_with("get /_mock/isolation "), report) {
                    count.fetch_add(1, Ordering::SeqCst);
                    let keyed =
                        text.contains("\r\nx-api-key:") || text.contains("\r\nauthorization:");
                    let (status, body) = if keyed {
                        ("200 OK", report.to_string())
                    } else {
                        ("401 Unauthorized", "{}".to_string())
                    };
                    let answer = format!("HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
                    let _ = client.write_all(answer.as_bytes()).await;
                    return;
                }
                let Ok(mut server) = TcpStream::connect(&upstream).await else {
                    return;
                };
                if server.write_all(&head).await.is_ok() {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    Proxy { base_url, asked }
}

fn not_isolated() -> Value {
    json!({"isolated": false, "mechanism": "process groups", "missing": ["user namespaces", "seccomp"]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn commands_are_refused_on_an_emulator_that_cannot_isolate_unless_allowed() {
    let env = common::start().await;
    let fake = proxy(env.base_url(), Some(not_isolated())).await;
    let dir = tempfile::tempdir().unwrap();
    let mut setup = Setup::new(&env, dir.path(), dir.path());
    setup.options = r#"{"mode": "remote"}"#;
    setup
        .extra_env
        .push(("CREATEOS_SANDBOX_BASE_URL", fake.base_url.clone()));
    let mut mcp = setup.start().await;
    for (tool, args) in [
        ("sandbox_exec", json!({"command": "touch /tmp/never"})),
        ("native_bash", json!({"command": "true"})),
        ("native_read", json!({"filePath": "x"})),
        (
            "sandbox_exec",
            json!({"command": "true", "sandbox_id": "sb-anything"}),
        ),
    ] {
        let text = error_text(&mcp.call(tool, args).await);
        assert!(
            text.contains(&format!("{tool} refused"))
                && text.contains("--unsafe-host")
                && text.contains("user namespaces, seccomp"),
            "{tool}: {text}"
        );
    }
    // Nothing was created; tools that run no command still work.
    assert_eq!(env.requests("createSandbox").await, 0);
    ok_json(&mcp.call("sandbox_status", json!({})).await);
    ok_json(&mcp.call("sandbox_list", json!({})).await);
    assert_eq!(
        fake.asked.load(Ordering::SeqCst),
        1,
        "asked once per server, not per call"
    );
    mcp.stop().await;

    // --unsafe-host: the user accepts it.
    setup.extra_args.push("--unsafe-host");
    let mut mcp = setup.start().await;
    let ran = ok_json(
        &mcp.call("sandbox_exec", json!({"command": "echo allowed"}))
            .await,
    );
    assert_eq!(ran["stdout"], "allowed\n");
    assert_eq!(
        fake.asked.load(Ordering::SeqCst),
        1,
        "--unsafe-host does not ask"
    );
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_isolating_emulator_or_a_server_without_the_route_is_used_as_usual() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    for report in [
        Some(json!({"isolated": true, "mechanism": "namespaces", "missing": []})),
        None,
    ] {
        let fake = proxy(env.base_url(), report.clone()).await;
        let mut setup = Setup::new(&env, dir.path(), dir.path());
        setup
            .extra_env
            .push(("CREATEOS_SANDBOX_BASE_URL", fake.base_url.clone()));
        let mut mcp = setup.start().await;
        let ran = ok_json(
            &mcp.call("sandbox_exec", json!({"command": "echo fine"}))
                .await,
        );
        assert_eq!(ran["stdout"], "fine\n", "{report:?}");
        ok_json(&mcp.call("sandbox_exec", json!({"command": "true"})).await);
        assert_eq!(
            fake.asked.load(Ordering::SeqCst),
            usize::from(report.is_some())
        );
        ok_json(&mcp.call("sandbox_release", json!({})).await);
        mcp.stop().await;
    }
    env.shutdown().await;
}
