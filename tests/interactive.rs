//! Interactive byte streams against the emulator: `/shell` (HTTP/1.1 Upgrade), `/shell-ws`
//! (WebSocket) and `/tunnel/{port}` with local listeners.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use createos_sandbox::api::processes::{Process, ProcessSpec};
use createos_sandbox::pty::{ShellOutput, ShellSession};
use createos_sandbox::stream::process_output::OutputEvent;
use createos_sandbox::tunnel::TunnelListener;
use createos_sandbox::{CreateSandbox, Error, Sandbox};
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const GUARD: Duration = Duration::from_secs(60);

async fn sandbox(env: &common::Env) -> Sandbox {
    env.client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb"))
        .await
        .expect("create")
}

/// Read shell output until `needle` appears.
async fn read_until(output: &mut ShellOutput, needle: &str) -> String {
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(chunk) = output.next().await {
            seen.extend_from_slice(&chunk.expect("shell output"));
            if String::from_utf8_lossy(&seen).contains(needle) {
                return;
            }
        }
        panic!(
            "shell output ended before {needle:?}: {:?}",
            String::from_utf8_lossy(&seen)
        );
    })
    .await
    .unwrap_or_else(|_| panic!("no {needle:?} in {:?}", String::from_utf8_lossy(&seen)));
    String::from_utf8_lossy(&seen).into_owned()
}

/// Exercise a session: initial size, resize, a command, and exit ending the output.
async fn round_trip(mut shell: ShellSession) {
    shell.input.write_all(b"stty size\n").await.unwrap();
    shell.input.flush().await.unwrap();
    read_until(&mut shell.output, "24 80").await;
    shell.resize(40, 120).await.unwrap();
    shell
        .input
        .write_all(b"stty size; echo calc-$((6*7))\n")
        .await
        .unwrap();
    let seen = read_until(&mut shell.output, "calc-42").await;
    assert!(seen.contains("40 120"), "{seen:?}");
    assert!(matches!(
        shell.resize(0, 1).await,
        Err(Error::InvalidInput { .. })
    ));
    // Typing `exit` ends the shell, and with it the output stream.
    shell.input.write_all(b"exit\n").await.unwrap();
    tokio::time::timeout(GUARD, async {
        while let Some(Ok(_)) = shell.output.next().await {}
    })
    .await
    .expect("output ends after exit");
}

#[tokio::test]
async fn shell_round_trip_with_resize() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    round_trip(sb.shell(24, 80).await.unwrap()).await;
    assert_eq!(env.requests("openShell").await, 1);

    // Shutting down the input ends the session from our side.
    let mut shell = sb.shell(24, 80).await.unwrap();
    shell
        .input
        .write_all(b"echo first-$((1+1))\n")
        .await
        .unwrap();
    read_until(&mut shell.output, "first-2").await;
    shell.input.shutdown().await.unwrap();
    tokio::time::timeout(GUARD, async {
        while let Some(Ok(_)) = shell.output.next().await {}
    })
    .await
    .expect("session ends after our close");
    assert!(shell.input.write_all(b"more").await.is_err());
    env.shutdown().await;
}

#[tokio::test]
async fn shell_ws_round_trip() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    round_trip(sb.shell_ws(24, 80).await.unwrap()).await;
    assert_eq!(env.requests("openShellWebSocket").await, 1);
    env.shutdown().await;
}

#[tokio::test]
async fn refusals_become_typed_errors() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let ghost = env.client.sandbox("sb-00000000000000000000000000").unwrap();
    let err = ghost.shell(24, 80).await.unwrap_err();
    let Error::NotFound(api) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(api.fields["sandbox"], "sandbox not found");
    assert!(api.request_id.is_some());
    let err = ghost.shell_ws(24, 80).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert!(matches!(
        sb.shell(0, 80).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        sb.tunnel(0).await,
        Err(Error::InvalidInput { .. })
    ));
    // 503 refusals are retried (the server did not act on them).
    env.add_fault("POST /v1/sandboxes/*/shell status=503 count=2")
        .await;
    let shell = sb.shell(24, 80).await.unwrap();
    drop(shell);
    assert_eq!(env.requests("openShell").await, 4, "404 + 2×503 + success");
    // Nothing listens on this port: 502 before the upgrade, or a stream closed at once.
    match sb.tunnel(9).await {
        Err(err) => assert_eq!(err.status(), Some(502), "{err:?}"),
        Ok(mut conn) => {
            let mut buf = Vec::new();
            assert_eq!(conn.read_to_end(&mut buf).await.unwrap_or(0), 0);
        }
    }
    sb.destroy().await.unwrap();
    env.shutdown().await;
}

// ---------------------------------------------------------------------------------- tunnels

const HTTP_SERVER: &str =
    "mkdir -p /tmp/www && printf '%s' \"$BODY\" > /tmp/www/index.html && cd /tmp/www && \
                           exec python3 -m http.server 8080 --bind 127.0.0.1";

/// Reads until EOF, answers `got <n>` and closes: checks half-close through the tunnel.
const COUNT_SERVER: &str = r#"
import socket, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 9000))
s.listen(256)
print("listening", flush=True)
def serve(c):
    n = 0
    while True:
        b = c.recv(65536)
        if not b:
            break
        n += len(b)
    c.sendall(b"got %d\n" % n)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// Start a server process and wait until a tunnel to `port` connects (the emulator connects to
/// the port before answering 101, so success means the server is listening).
async fn serve(sb: &Sandbox, spec: ProcessSpec, port: u16) -> Process {
    let p = sb.processes().start(spec).await.unwrap();
    let mut last_error = None;
    let ready = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match sb.tunnel(port).await {
                Ok(mut probe) => {
                    let _ = probe.shutdown().await;
                    let mut sink = Vec::new();
                    let _ = probe.read_to_end(&mut sink).await;
                    return;
                }
                Err(err) => last_error = Some(err),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    if ready.is_err() {
        let info = p.info().await;
        let output = tokio::time::timeout(Duration::from_secs(2), async {
            let mut seen = Vec::new();
            if let Ok(mut out) = p.connect(0).await {
                while let Some(Ok(OutputEvent::Data { bytes, .. })) = out.next().await {
                    seen.extend_from_slice(&bytes);
                }
            }
            seen
        })
        .await
        .unwrap_or_default();
        panic!(
            "server on port {port} never listened: last error {last_error:?}; process {info:?}; output {:?}",
            String::from_utf8_lossy(&output)
        );
    }
    p
}

async fn http_get(addr: SocketAddr) -> String {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"GET /index.html HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn each_local_port_reaches_its_own_sandbox() {
    let env = common::start().await;
    let (a, b) = (sandbox(&env).await, sandbox(&env).await);
    let http = |body: &str| {
        ProcessSpec::new("sh")
            .args(["-c", HTTP_SERVER])
            .env("BODY", body)
    };
    let server_a = serve(&a, http("hello from A"), 8080).await;
    let server_b = serve(&b, http("hello from B"), 8080).await;

    let listener_a = TunnelListener::bind(&a, 8080, None).await.unwrap();
    let listener_b = TunnelListener::bind(&b, 8080, Some("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    assert!(listener_a.local_addr().ip().is_loopback());
    assert_eq!(listener_a.remote_port(), 8080);
    let (addr_a, addr_b) = (listener_a.local_addr(), listener_b.local_addr());
    assert_ne!(addr_a, addr_b);
    let stop_a = listener_a.cancel_token();
    let running_a = listener_a.spawn();
    let mut running_b = listener_b.spawn();

    for _ in 0..3 {
        let answer_a = http_get(addr_a).await;
        assert!(
            answer_a.starts_with("HTTP/1.0 200") && answer_a.ends_with("hello from A"),
            "{answer_a}"
        );
        let answer_b = http_get(addr_b).await;
        assert!(answer_b.ends_with("hello from B"), "{answer_b}");
    }
    assert_eq!((running_a.accepted(), running_b.accepted()), (3, 3));
    assert_eq!(running_a.failed(), 0);

    // A stopped listener accepts nothing more (the port may be refused, or already reused by
    // another test's listener: either way, not by this one).
    running_b.stop().await.unwrap();
    running_b.stop().await.unwrap();
    if let Ok(mut conn) = TcpStream::connect(addr_b).await {
        // Had this listener accepted it, the count would have moved before the peer closed.
        let _ = conn.shutdown().await;
        let mut sink = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut sink)).await;
    }
    assert_eq!(running_b.accepted(), 3);
    // Dropping the handle cancels the listener.
    drop(running_a);
    assert!(stop_a.is_cancelled());
    server_a.stop(Some(Duration::ZERO)).await.unwrap();
    server_b.stop(Some(Duration::ZERO)).await.unwrap();
    env.shutdown().await;
}

#[tokio::test]
async fn half_close_and_a_hundred_concurrent_connections() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let server = serve(
        &sb,
        ProcessSpec::new("python3").args(["-c", COUNT_SERVER]),
        9000,
    )
    .await;

    // One raw tunnel: write, half-close, and the answer still comes back.
    let mut conn = sb.tunnel(9000).await.unwrap();
    let payload = vec![7u8; 1 << 20];
    conn.write_all(&payload).await.unwrap();
    conn.shutdown().await.unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).await.unwrap();
    assert_eq!(answer, "got 1048576\n");

    let running = TunnelListener::bind(&sb, 9000, None).await.unwrap().spawn();
    let addr = running.local_addr();
    let clients: Vec<_> = (0..100usize)
        .map(|i| {
            tokio::spawn(async move {
                let mut conn = TcpStream::connect(addr).await.unwrap();
                let body = vec![b'x'; 1000 + i * 37];
                conn.write_all(&body).await.unwrap();
                conn.shutdown().await.unwrap();
                let mut answer = String::new();
                conn.read_to_string(&mut answer).await.unwrap();
                assert_eq!(answer, format!("got {}\n", body.len()));
            })
        })
        .collect();
    tokio::time::timeout(GUARD, futures::future::join_all(clients))
        .await
        .expect("all connections complete")
        .into_iter()
        .for_each(|r| r.expect("client task"));
    assert_eq!(running.accepted(), 100);
    tokio::time::timeout(GUARD, async {
        while running.finished() < 100 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("every forwarded connection finished both directions");
    assert_eq!(running.failed(), 0);
    assert!(env.requests("openTunnel").await >= 101);
    drop(running);
    server.stop(Some(Duration::ZERO)).await.unwrap();
    env.shutdown().await;
}
