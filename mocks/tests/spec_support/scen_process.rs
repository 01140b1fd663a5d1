//! Scenarios: managed processes (pipes and PTY) and the upgrade routes (shell, shell-ws,
//! tunnel).

use base64::Engine;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::fixtures::create_sandbox;
use super::harness::Conformance;

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

pub async fn processes(c: &Conformance) {
    let sb = create_sandbox(c, json!({})).await;
    let proc_op = |op: &str, pid: &str| c.op(op).p("id", &sb).p("process_id", pid);

    // A short pipe process: wait, then replay its whole output.
    let short = c
        .op("createProcess")
        .p("id", &sb)
        .json(json!({"cmd": "sh", "args": ["-c", "echo out; echo err >&2; exit 4"], "cwd": "/root", "env": {"A": "b"}}))
        .send()
        .await
        .expect(200)
        .data();
    let short_id = short["process_id"].as_str().unwrap().to_string();
    let done = proc_op("waitProcess", &short_id)
        .q("scope", "tree")
        .q("timeout_ms", "15000")
        .send()
        .await
        .expect(200);
    assert_eq!(done.data()["exit_code"], 4, "{}", done.text());
    let replay = proc_op("connectProcess", &short_id)
        .q("after", "0")
        .send()
        .await
        .expect(200);
    assert_eq!(
        replay.ndjson().last().unwrap()["type"],
        "exit",
        "{}",
        replay.text()
    );
    proc_op("connectProcess", &short_id)
        .q("after", "1")
        .send()
        .await
        .expect(200);
    let r = proc_op("connectProcess", &short_id)
        .q("after", "-1")
        .send()
        .await;
    c.want(&r, 400, "negative after");

    // A long one: list, inspect, wait with a tiny budget (408), signal, stop.
    let long = c
        .op("createProcess")
        .p("id", &sb)
        .json(json!({"cmd": "sleep", "args": ["30"]}))
        .send()
        .await
        .expect(200)
        .data();
    let long_id = long["process_id"].as_str().unwrap().to_string();
    c.op("listProcesses").p("id", &sb).send().await.expect(200);
    proc_op("getProcess", &long_id).send().await.expect(200);
    let r = proc_op("waitProcess", &long_id)
        .q("timeout_ms", "20")
        .send()
        .await;
    c.want(&r, 408, "wait budget ran out");
    let r = proc_op("waitProcess", &long_id)
        .q("scope", "everything")
        .q("timeout_ms", "20")
        .send()
        .await;
    c.want(&r, 400, "unknown wait scope");
    let r = proc_op("signalProcess", &long_id)
        .json(json!({"signal": "SIGBOGUS"}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "unknown signal");
    proc_op("signalProcess", &long_id)
        .json(json!({"signal": "SIGUSR1"}))
        .send()
        .await
        .expect(200);
    let r = proc_op("stopProcess", &long_id)
        .q("grace_ms", "-5")
        .send()
        .await;
    c.want(&r, 400, "negative grace");
    proc_op("stopProcess", &long_id)
        .q("grace_ms", "0")
        .send()
        .await
        .expect(200);
    proc_op("waitProcess", &long_id)
        .q("timeout_ms", "15000")
        .send()
        .await
        .expect(200);
    let r = proc_op("getProcess", "proc_nope").send().await;
    c.want(&r, 404, "unknown process");

    // stdin: write, close, and the output echoes it.
    let cat = c
        .op("createProcess")
        .p("id", &sb)
        .json(json!({"cmd": "cat"}))
        .send()
        .await
        .expect(200)
        .data();
    let cat_id = cat["process_id"].as_str().unwrap().to_string();
    proc_op("writeProcessInput", &cat_id)
        .json(json!({"data_base64": b64(b"piped\n")}))
        .send()
        .await
        .expect(200);
    let r = proc_op("writeProcessInput", &cat_id)
        .json(json!({"data_base64": "***"}))
        .send()
        .await;
    c.want(&r, 400, "data_base64 is not base64");
    proc_op("closeProcessStdin", &cat_id)
        .send()
        .await
        .expect(200);
    proc_op("waitProcess", &cat_id)
        .q("timeout_ms", "15000")
        .send()
        .await
        .expect(200);
    let r = proc_op("writeProcessInput", &cat_id)
        .json(json!({"data_base64": b64(b"late")}))
        .send()
        .await;
    c.want(&r, 409, "input to an exited process");
    let r = proc_op("resizeProcess", &cat_id)
        .json(json!({"rows": 30, "cols": 90}))
        .send()
        .await;
    c.want(&r, 400, "resize of a pipe process");

    // A PTY: resize, then stop.
    let pty = c
        .op("createProcess")
        .p("id", &sb)
        .json(json!({"cmd": "sh", "pty": {"rows": 24, "cols": 80}}))
        .send()
        .await
        .expect(200)
        .data();
    let pty_id = pty["process_id"].as_str().unwrap().to_string();
    proc_op("resizeProcess", &pty_id)
        .json(json!({"rows": 40, "cols": 120}))
        .send()
        .await
        .expect(200);
    let r = proc_op("closeProcessStdin", &pty_id).send().await;
    c.want(&r, 400, "a PTY has no separate stdin to close");
    let r = proc_op("resizeProcess", &pty_id)
        .json(json!({"rows": 0, "cols": 120}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "zero rows");
    proc_op("stopProcess", &pty_id)
        .q("grace_ms", "0")
        .send()
        .await
        .expect(200);

    let r = c
        .op("createProcess")
        .p("id", &sb)
        .json(json!({"cmd": "ls", "cwd": "relative"}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "relative cwd");
    c.op("destroySandbox").p("id", &sb).send().await.expect(200);
}

pub async fn interactive(c: &Conformance) {
    let sb = create_sandbox(c, json!({})).await;

    // /shell: 101, then PTY bytes flow.
    let mut up = c
        .op("openShell")
        .p("id", &sb)
        .header("Connection", "Upgrade")
        .header("Upgrade", "tcp-tunnel")
        .header("Content-Length", "0")
        .upgrade()
        .await;
    assert_eq!(up.reply.status, 101, "{}", up.reply.text());
    let mut socket = up.socket.take().expect("upgraded socket");
    let mut frame = vec![0u8];
    let input = b"echo conformance-$((40+2))\n";
    frame.extend_from_slice(&(input.len() as u32).to_be_bytes());
    frame.extend_from_slice(input);
    socket.write_all(&frame).await.unwrap();
    let mut seen = up.early.clone();
    let found = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains("conformance-42") {
            let n = socket.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return false;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        true
    })
    .await
    .unwrap_or(false);
    assert!(found, "shell output: {}", String::from_utf8_lossy(&seen));
    drop(socket);
    let r = c.op("openShell").p("id", &sb).send().await;
    c.want(&r, 400, "shell without upgrade headers");

    // /shell-ws: an RFC 6455 handshake.
    let key = b64(b"conformance-key!");
    let up = c
        .op("openShellWebSocket")
        .p("id", &sb)
        .header("Connection", "Upgrade")
        .header("Upgrade", "websocket")
        .header("Sec-WebSocket-Version", "13")
        .header("Sec-WebSocket-Key", &key)
        .upgrade()
        .await;
    assert_eq!(up.reply.status, 101, "{}", up.reply.text());
    let accept = up.reply.header("sec-websocket-accept").unwrap_or_default();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(&accept)
        .unwrap_or_default();
    assert_eq!(
        decoded.len(),
        20,
        "Sec-WebSocket-Accept is a base64 SHA-1: {accept:?}"
    );
    let r = c.op("openShellWebSocket").p("id", &sb).send().await;
    c.want(&r, 400, "shell-ws without a WebSocket handshake");

    // /tunnel: isolation is off here, so a host listener is the sandbox's port.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf).await.unwrap();
        conn.write_all(b"pong").await.unwrap();
        buf
    });
    let mut up = c
        .op("openTunnel")
        .p("id", &sb)
        .p("port", port)
        .header("Connection", "Upgrade")
        .header("Upgrade", "tcp-tunnel")
        .header("Content-Length", "0")
        .upgrade()
        .await;
    assert_eq!(up.reply.status, 101, "{}", up.reply.text());
    let mut socket = up.socket.take().unwrap();
    socket.write_all(b"ping").await.unwrap();
    let mut got = up.early.clone();
    while got.len() < 4 {
        let mut buf = [0u8; 16];
        let n = socket.read(&mut buf).await.unwrap();
        assert!(n > 0, "tunnel closed early");
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(&got, b"pong");
    assert_eq!(&server.await.unwrap(), b"ping");

    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let up = c
        .op("openTunnel")
        .p("id", &sb)
        .p("port", closed)
        .header("Connection", "Upgrade")
        .header("Upgrade", "tcp-tunnel")
        .header("Content-Length", "0")
        .upgrade()
        .await;
    c.want(&up.reply, 502, "nothing listens on the port");
    let r = c.op("openTunnel").p("id", &sb).p("port", "0").send().await;
    c.want(&r, 400, "port 0");
    c.op("destroySandbox").p("id", &sb).send().await.expect(200);
}
