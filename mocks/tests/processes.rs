//! Managed processes, PTYs, /shell, /shell-ws and /tunnel against an in-process emulator,
//! over real sockets with hand-written HTTP clients.

#[path = "processes_support/http.rs"]
mod http;

use std::time::Duration;

use base64::Engine;
use createos_mock::{MockConfig, MockHandle};
use http::{read_head, read_until, within, ws, Api};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Emulators started by this binary share one process id and therefore one parent cgroup
/// name; run the tests one at a time so one emulator's cleanup never hits another's.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn mock(cfg: MockConfig) -> (MockHandle, Api) {
    let handle = createos_mock::start(cfg).await.expect("mock starts");
    let api = Api {
        addr: handle.addr(),
        key: handle.api_key(),
    };
    (handle, api)
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn unb64(v: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(v.as_str().unwrap())
        .unwrap()
}

/// Concatenated payload of `data` events of one stream.
fn stream_bytes(events: &[Value], stream: &str) -> Vec<u8> {
    events
        .iter()
        .filter(|e| e["type"] == "data" && e["stream"] == stream)
        .flat_map(|e| unb64(&e["data_base64"]))
        .collect()
}

fn seqs(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e["type"] == "data")
        .map(|e| e["seq"].as_u64().unwrap())
        .collect()
}

fn proc_path(sb: &str, id: &str, rest: &str) -> String {
    format!("/v1/sandboxes/{sb}/processes/{id}{rest}")
}

async fn wait(api: &Api, sb: &str, id: &str, scope: &str) -> Value {
    let r = api
        .get(&proc_path(
            sb,
            id,
            &format!("/wait?scope={scope}&timeout_ms=15000"),
        ))
        .await;
    assert_eq!(r.status, 200, "wait: {}", String::from_utf8_lossy(&r.body));
    r.data()
}

fn pid_of(details: &Value) -> String {
    details["process_id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn pipe_output_sequences_stderr_replay_and_exit() {
    let _serial = SERIAL.lock().await;
    let (handle, api) = mock(MockConfig::default()).await;
    let sb = api.sandbox().await;
    let created = api
        .process(&sb, json!({"cmd": "sh", "args": ["-c", "echo out1; echo err1 >&2; sleep 0.05; echo out2; exit 7"]}))
        .await;
    assert!(pid_of(&created).starts_with("proc_"));
    assert_eq!(created["kind"], "process");
    assert_eq!(created["cwd"], "/root");
    assert_eq!(created["state"], "running");
    let id = pid_of(&created);

    let events = api.connect(&sb, &id, 0).await.until_end().await;
    assert_eq!(stream_bytes(&events, "stdout"), b"out1\nout2\n");
    assert_eq!(stream_bytes(&events, "stderr"), b"err1\n");
    let s = seqs(&events);
    assert_eq!(s[0], 1, "sequences start at 1");
    assert!(s.windows(2).all(|w| w[1] == w[0] + 1), "contiguous: {s:?}");
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "exit", "exit_code": 7})
    );

    let done = wait(&api, &sb, &id, "tree").await;
    assert_eq!(done["state"], "exited");
    assert_eq!(done["exit_code"], 7);
    assert_eq!(done["leader_exited"], true);
    assert_eq!(done["tree_exited"], true);
    assert!(done["finished_at"].is_string());
    assert_eq!(done["output"]["newest_seq"].as_u64(), s.last().copied());
    assert_eq!(done["output"]["oldest_seq"], 1);

    // Replay after the first chunk: everything later, then exit.
    let replay = api.connect(&sb, &id, 1).await.until_end().await;
    assert_eq!(seqs(&replay), s[1..].to_vec());
    assert_eq!(replay.last().unwrap()["type"], "exit");

    let list = api
        .get(&format!("/v1/sandboxes/{sb}/processes"))
        .await
        .data();
    assert_eq!(list["processes"][0]["process_id"], id.as_str());
    let missing = api.get(&proc_path(&sb, "proc_nope", "")).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["data"]["process"], "process not found");
    handle.shutdown().await;
}

#[tokio::test]
async fn create_validation() {
    let _serial = SERIAL.lock().await;
    let (handle, api) = mock(MockConfig::default()).await;
    let sb = api.sandbox().await;
    let path = format!("/v1/sandboxes/{sb}/processes");
    let cases = [
        (json!({}), "cmd"),
        (json!({"cmd": "ls", "cwd": "relative"}), "cwd"),
        (json!({"cmd": "ls", "cwd": "/no/such/dir"}), "cwd"),
        (json!({"cmd": "ls", "env": {"1X": "v"}}), "env"),
        (json!({"pty": {"rows": 1001, "cols": 80}}), "pty"),
    ];
    for (body, field) in cases {
        let r = api.post(&path, &body).await;
        assert_eq!(r.status, 400, "{body}");
        assert!(r.json()["data"][field].is_string(), "{body} → {}", r.json());
    }
    // A command that does not exist: a failed record with its reason as output.
    let failed = api
        .process(&sb, json!({"cmd": "/definitely/not/here"}))
        .await;
    assert_eq!(failed["state"], "failed");
    assert_eq!(failed["exit_code"], 127);
    assert_eq!(failed["tree_exited"], true);
    let events = api
        .connect(&sb, &pid_of(&failed), 0)
        .await
        .until_end()
        .await;
    assert!(String::from_utf8_lossy(&stream_bytes(&events, "stderr")).contains("failed to start"));
    assert_eq!(events.last().unwrap()["exit_code"], 127);
    handle.shutdown().await;
}

#[tokio::test]
async fn journal_eviction_reports_expired_offset() {
    let _serial = SERIAL.lock().await;
    let (handle, api) = mock(MockConfig::default().journal_bytes(256)).await;
    let sb = api.sandbox().await;
    let script = "for i in $(seq 1 40); do echo line-$i-padding-padding; sleep 0.005; done";
    let id = pid_of(
        &api.process(&sb, json!({"cmd": "sh", "args": ["-c", script]}))
            .await,
    );
    let done = wait(&api, &sb, &id, "tree").await;
    let oldest = done["output"]["oldest_seq"].as_u64().unwrap();
    assert!(oldest > 1, "output was evicted: {done}");
    assert!(done["output"]["bytes"].as_u64().unwrap() <= 256);

    let mut expired = api.connect(&sb, &id, 0).await;
    let first = expired.next().await.unwrap();
    // The oldest retained byte sits after everything evicted: total written minus retained.
    let total = done["output"]["total_bytes"].as_u64().unwrap();
    let retained = done["output"]["bytes"].as_u64().unwrap();
    assert_eq!(
        first,
        json!({
            "type": "error",
            "error": "output offset expired",
            "oldest_available_seq": oldest,
            "oldest_available_offset": total - retained,
        })
    );
    assert!(
        expired.next().await.is_none(),
        "stream ends after the error"
    );
    assert!(expired.clean_end);

    let resumed = api.connect(&sb, &id, oldest - 1).await.until_end().await;
    assert_eq!(seqs(&resumed).first().copied(), Some(oldest));
    let tail = String::from_utf8(stream_bytes(&resumed, "stdout")).unwrap();
    assert!(tail.ends_with("line-40-padding-padding\n"), "{tail:?}");
    assert_eq!(
        resumed.last().unwrap(),
        &json!({"type": "exit", "exit_code": 0})
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn wait_times_out_with_408_then_succeeds_and_heartbeats_flow() {
    let _serial = SERIAL.lock().await;
    let (handle, api) = mock(MockConfig::default().heartbeat(Duration::from_millis(50))).await;
    let sb = api.sandbox().await;
    let id = pid_of(
        &api.process(
            &sb,
            json!({"cmd": "sh", "args": ["-c", "read line; echo got-$line; exit 3"]}),
        )
        .await,
    );

    let r = api
        .get(&proc_path(&sb, &id, "/wait?scope=leader&timeout_ms=50"))
        .await;
    assert_eq!(r.status, 408);
    assert_eq!(
        r.json(),
        json!({"status": "fail", "data": {"wait": "timed out waiting for process"}})
    );

    let mut live = api.connect(&sb, &id, 0).await;
    assert_eq!(live.next().await.unwrap(), json!({"type": "heartbeat"}));

    let r = api
        .post(
            &proc_path(&sb, &id, "/input"),
            &json!({"data_base64": b64(b"hello\n")}),
        )
        .await;
    assert_eq!(r.data(), json!({"input_seq": 1}));
    let done = wait(&api, &sb, &id, "leader").await;
    assert_eq!(done["leader_exited"], true);
    assert_eq!(done["exit_code"], 3);
    let rest = live.until_end().await;
    assert_eq!(stream_bytes(&rest, "stdout"), b"got-hello\n");
    assert_eq!(
        rest.last().unwrap(),
        &json!({"type": "exit", "exit_code": 3})
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn leader_and_tree_exit_separately() {
    let _serial = SERIAL.lock().await;
    let (handle, api) = mock(MockConfig::default()).await;
    let sb = api.sandbox().await;
    let gate = format!("/tmp/gate-{}", std::process::id());
    let script =
        format!("(while [ ! -f {gate} ]; do sleep 0.02; done) >/dev/null 2>&1 & echo started");
    let id = pid_of(
        &api.process(&sb, json!({"cmd": "sh", "args": ["-c", script]}))
            .await,
    );

    let leader = wait(&api, &sb, &id, "leader").await;
    assert_eq!(leader["leader_exited"], true);
    assert_eq!(leader["exit_code"], 0);
    assert_eq!(
        leader["tree_exited"], false,
        "the background child is alive: {leader}"
    );
    assert_eq!(leader["state"], "running");
    let r = api
        .get(&proc_path(&sb, &id, "/wait?scope=tree&timeout_ms=100"))
        .await;
    assert_eq!(r.status, 408);

    api.process(&sb, json!({"cmd": "touch", "args": [gate]}))
        .await;
    let tree = wait(&api, &sb, &id, "tree").await;
    assert_eq!(tree["tree_exited"], true);
    assert_eq!(tree["state"], "exited");
    handle.shutdown().await;
}

/// Live processes of the session led by `sid` (read independently of the emulator).
#[cfg(target_os = "linux")]
fn session_members(sid: i64) -> Vec<i64> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if fields.len() > 3 && fields[3] == sid.to_string() && fields[0] != "Z" {
            out.push(stat.split_whitespace().next().unwrap().parse().unwrap());
        }
    }
    out
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn stop_kills_the_whole_tree_after_grace() {
    let _serial = SERIAL.lock().await;
    let (handle, api) = mock(MockConfig::default()).await;
    let sb = api.sandbox().await;
    let created = api
        .process(
            &sb,
            json!({"cmd": "sh", "args": ["-c", "trap '' TERM; sleep 300 & echo ready; wait"]}),
        )
        .await;
    let id = pid_of(&created);
    let leader_pid = created["pid"].as_i64().unwrap();
    let mut events = api.connect(&sb, &id, 0).await;
    assert_eq!(
        unb64(&events.next().await.unwrap()["data_base64"]),
        b"ready\n"
    );
    assert!(
        session_members(leader_pid).len() >= 2,
        "leader and sleep are alive"
    );

    let r = api
        .send("DELETE", &proc_path(&sb, &id, "?grace_ms=100"), None)
        .await;
    assert_eq!(r.status, 200);
    let fin = r.data();
    assert_eq!(fin["tree_exited"], true, "{fin}");
    assert_eq!(fin["state"], "exited");
    assert_eq!(fin["signal"], "SIGKILL", "the leader ignored SIGTERM");
    assert!(session_members(leader_pid).is_empty());
    let rest = events.until_end().await;
    assert_eq!(
        rest.last().unwrap(),
        &json!({"type": "exit", "signal": "SIGKILL"})
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn one_mebibyte_of_input_arrives_in_order() {
    let _serial = SERIAL.lock().await;
    let (handle, api) = mock(MockConfig::default().journal_bytes(4 << 20)).await;
    let sb = api.sandbox().await;
    let id = pid_of(&api.process(&sb, json!({"cmd": "cat"})).await);
    let data: Vec<u8> = (0..(1u32 << 20))
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for (n, chunk) in data.chunks(64 * 1024).enumerate() {
        let r = api
            .post(
                &proc_path(&sb, &id, "/input"),
                &json!({"data_base64": b64(chunk)}),
            )
            .await;
        assert_eq!(r.data()["input_seq"], n as u64 + 1);
    }
    let r = api
        .send("POST", &proc_path(&sb, &id, "/stdin/close"), None)
        .await;
    assert_eq!(r.data(), json!({"ok": true}));
    let late = api
        .post(
            &proc_path(&sb, &id, "/input"),
            &json!({"data_base64": b64(b"x")}),
        )
        .await;
    assert_eq!(late.status, 409);
    let events = api.connect(&sb, &id, 0).await.until_end().await;
    let echoed = stream_bytes(&events, "stdout");
    assert_eq!(echoed.len(), data.len());
    assert!(echoed == data, "cat echoed the input byte for byte");
    assert_eq!(events.last().unwrap()["exit_code"], 0);
    handle.shutdown().await;
}

/// Reads PTY events until the accumulated output contains `needle`.
async fn pty_until(events: &mut http::Events, acc: &mut String, needle: &str) {
    while !acc.contains(needle) {
        let ev = events
            .next()
            .await
            .unwrap_or_else(|| panic!("stream ended before {needle:?}: {acc:?}"));
        if ev["type"] == "data" {
            assert_eq!(ev["stream"], "pty");
            acc.push_str(&String::from_utf8_lossy(&unb64(&ev["data_base64"])));
        }
    }
}

#[tokio::test]
async fn pty_size_follows_create_and_resize() {
    let _serial = SERIAL.lock().await;
    let (handle, api) = mock(MockConfig::default()).await;
    let sb = api.sandbox().await;
    let created = api
        .process(
            &sb,
            json!({"cmd": "sh", "args": ["-c", "stty size; read x; stty size"], "pty": {"rows": 31, "cols": 97}}),
        )
        .await;
    assert_eq!(created["kind"], "pty");
    let id = pid_of(&created);
    let mut events = api.connect(&sb, &id, 0).await;
    let mut acc = String::new();
    pty_until(&mut events, &mut acc, "31 97").await;

    let r = api
        .post(
            &proc_path(&sb, &id, "/resize"),
            &json!({"rows": 40, "cols": 120}),
        )
        .await;
    assert_eq!(r.data(), json!({"ok": true}));
    api.post(
        &proc_path(&sb, &id, "/input"),
        &json!({"data_base64": b64(b"\n")}),
    )
    .await;
    pty_until(&mut events, &mut acc, "40 120").await;
    assert_eq!(events.until_end().await.last().unwrap()["exit_code"], 0);

    let bad = api
        .post(
            &proc_path(&sb, &id, "/resize"),
            &json!({"rows": 0, "cols": 10}),
        )
        .await;
    assert_eq!(bad.status, 400);
    let pipe = pid_of(
        &api.process(&sb, json!({"cmd": "sleep", "args": ["5"]}))
            .await,
    );
    let r = api
        .post(
            &proc_path(&sb, &pipe, "/resize"),
            &json!({"rows": 10, "cols": 10}),
        )
        .await;
    assert_eq!(r.status, 400, "pipe processes cannot be resized");
    handle.shutdown().await;
}

/// Polls the PTY's foreground job until `pred` holds for its command.
async fn foreground_until(api: &Api, sb: &str, id: &str, pred: impl Fn(&str) -> bool) -> Value {
    within("foreground change", async {
        loop {
            let d = api.get(&proc_path(sb, id, "")).await.data();
            if let Some(cmd) = d["foreground"]["cmd"].as_str() {
                if pred(cmd) {
                    return d;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

#[tokio::test]
async fn sigint_reaches_the_pty_foreground_job() {
    let _serial = SERIAL.lock().await;
    let (handle, api) = mock(MockConfig::default()).await;
    let sb = api.sandbox().await;
    let shell = api
        .process(&sb, json!({"pty": {"rows": 24, "cols": 80}}))
        .await;
    assert!(
        shell["cmd"].as_str().unwrap().ends_with("sh"),
        "default login shell: {shell}"
    );
    let id = pid_of(&shell);
    let idle = foreground_until(&api, &sb, &id, |c| c.ends_with("sh")).await;
    assert_eq!(idle["foreground"]["pid"], shell["pid"]);

    api.post(
        &proc_path(&sb, &id, "/input"),
        &json!({"data_base64": b64(b"sleep 120\n")}),
    )
    .await;
    let busy = foreground_until(&api, &sb, &id, |c| c.contains("sleep")).await;
    assert_ne!(busy["foreground"]["pid"], shell["pid"]);

    let r = api
        .post(
            &proc_path(&sb, &id, "/signal"),
            &json!({"signal": "SIGINT"}),
        )
        .await;
    assert_eq!(r.data(), json!({"ok": true}));
    foreground_until(&api, &sb, &id, |c| c.ends_with("sh")).await;
    let echo = b"echo after-sleep-$?\n";
    api.post(
        &proc_path(&sb, &id, "/input"),
        &json!({"data_base64": b64(echo)}),
    )
    .await;
    let mut events = api.connect(&sb, &id, 0).await;
    let mut acc = String::new();
    pty_until(&mut events, &mut acc, "after-sleep-130").await;
    let d = api.get(&proc_path(&sb, &id, "")).await.data();
    assert_eq!(
        d["leader_exited"], false,
        "the shell survived the job's SIGINT"
    );

    let bad = api
        .post(
            &proc_path(&sb, &id, "/signal"),
            &json!({"signal": "SIGSTOP"}),
        )
        .await;
    assert_eq!(bad.status, 400);
    handle.shutdown().await;
}

fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

fn resize_frame(rows: u16, cols: u16) -> Vec<u8> {
    let mut p = rows.to_be_bytes().to_vec();
    p.extend_from_slice(&cols.to_be_bytes());
    frame(1, &p)
}

const UPGRADE: &[(&str, &str)] = &[("Connection", "Upgrade"), ("Upgrade", "tcp-tunnel")];

#[tokio::test]
async fn shell_upgrade_round_trip_with_resize() {
    let _serial = SERIAL.lock().await;
    let (handle, api) = mock(MockConfig::default()).await;
    let sb = api.sandbox().await;
    // Frames sent in the same write as the request head must not be lost.
    let mut early = resize_frame(33, 111);
    early.extend(frame(0, b"stty size; echo marker-$((6*7))\n"));
    let mut s = api
        .raw(
            "POST",
            &format!("/v1/sandboxes/{sb}/shell"),
            UPGRADE,
            &early,
        )
        .await;
    let (status, headers, mut acc) = read_head(&mut s).await;
    assert_eq!(status, 101);
    assert!(headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("upgrade") && v == "tcp-tunnel"));
    read_until(&mut s, &mut acc, "33 111").await;
    read_until(&mut s, &mut acc, "marker-42").await;

    s.write_all(&resize_frame(50, 132)).await.unwrap();
    s.write_all(&frame(0, b"stty size\n")).await.unwrap();
    read_until(&mut s, &mut acc, "50 132").await;

    assert_eq!(
        handle.state().processes.live_count(),
        1,
        "the session is counted"
    );
    drop(s);
    within("session cleanup", async {
        while handle.state().processes.live_count() != 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;

    let plain = api
        .send("POST", &format!("/v1/sandboxes/{sb}/shell"), None)
        .await;
    assert_eq!(plain.status, 400, "no upgrade headers");
    handle.shutdown().await;
}

#[tokio::test]
async fn shell_websocket_round_trip() {
    let _serial = SERIAL.lock().await;
    let (handle, api) = mock(MockConfig::default()).await;
    let sb = api.sandbox().await;
    let ws_headers = [
        ("Connection", "Upgrade"),
        ("Upgrade", "websocket"),
        ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];
    let path = format!("/v1/sandboxes/{sb}/shell-ws");
    let mut s = api.raw("GET", &path, &ws_headers, b"").await;
    let (status, _, mut leftover) = read_head(&mut s).await;
    assert_eq!(status, 101);
    let mut msg = resize_frame(27, 99);
    msg.extend(frame(0, b"stty size; echo ws-$((5*5))\n"));
    ws::send(&mut s, ws::BINARY, &msg).await;
    let mut acc = String::new();
    while !(acc.contains("27 99") && acc.contains("ws-25")) {
        let (op, payload) = ws::recv(&mut s, &mut leftover)
            .await
            .expect("output message");
        assert_eq!(op, ws::BINARY);
        acc.push_str(&String::from_utf8_lossy(&payload));
    }
    ws::send(&mut s, ws::TEXT, b"nope").await;
    let code = loop {
        let (op, payload) = ws::recv(&mut s, &mut leftover).await.expect("close frame");
        if op == ws::CLOSE {
            break u16::from_be_bytes([payload[0], payload[1]]);
        }
    };
    assert_eq!(code, 1003);
    handle.shutdown().await;
}

const ECHO_SERVER: &str = r#"
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8080))
s.listen(8)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(sys.argv[1].encode() + b"\n")
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d)
    c.shutdown(socket.SHUT_WR)
    c.close()
"#;

/// Starts the echo server in a sandbox and waits until it listens.
async fn start_echo(api: &Api, sb: &str, tag: &str) {
    let id = pid_of(
        &api.process(
            sb,
            json!({"cmd": "python3", "args": ["-c", ECHO_SERVER, tag]}),
        )
        .await,
    );
    let mut events = api.connect(sb, &id, 0).await;
    let first = events.next().await.unwrap();
    assert_eq!(
        unb64(&first["data_base64"]),
        b"listening\n",
        "echo server started: {first}"
    );
}

/// Opens a tunnel to port 8080, sends `msg`, half-closes, and returns everything read.
async fn tunnel_exchange(api: &Api, sb: &str, msg: &[u8]) -> Vec<u8> {
    let mut s = api
        .raw(
            "POST",
            &format!("/v1/sandboxes/{sb}/tunnel/8080"),
            UPGRADE,
            b"",
        )
        .await;
    let (status, _, mut got) = read_head(&mut s).await;
    assert_eq!(status, 101);
    s.write_all(msg).await.unwrap();
    s.shutdown().await.unwrap();
    within("tunnel EOF", s.read_to_end(&mut got)).await.unwrap();
    got
}

#[tokio::test]
async fn tunnels_reach_each_sandboxs_own_port() {
    let _serial = SERIAL.lock().await;
    let (handle, api) = mock(MockConfig::default()).await;
    let a = api.sandbox().await;
    let refused = api
        .send("POST", &format!("/v1/sandboxes/{a}/tunnel/8080"), None)
        .await;
    assert_eq!(refused.status, 400, "upgrade headers are required");
    let mut s = api
        .raw(
            "POST",
            &format!("/v1/sandboxes/{a}/tunnel/8080"),
            UPGRADE,
            b"",
        )
        .await;
    let (status, _, _) = read_head(&mut s).await;
    assert_eq!(status, 502, "nothing listens yet");
    let mut s = api
        .raw("POST", &format!("/v1/sandboxes/{a}/tunnel/0"), UPGRADE, b"")
        .await;
    assert_eq!(read_head(&mut s).await.0, 400);

    start_echo(&api, &a, "sandbox-a").await;
    assert_eq!(
        tunnel_exchange(&api, &a, b"hello").await,
        b"sandbox-a\nhello"
    );

    let own_network = handle
        .state()
        .sandboxes
        .get(&a)
        .unwrap()
        .runtime()
        .netns()
        .is_some();
    if own_network {
        let b = api.sandbox().await;
        start_echo(&api, &b, "sandbox-b").await;
        assert_eq!(tunnel_exchange(&api, &b, b"one").await, b"sandbox-b\none");
        assert_eq!(tunnel_exchange(&api, &a, b"two").await, b"sandbox-a\ntwo");
    }
    handle.shutdown().await;
}

#[tokio::test]
async fn cut_stream_resumes_from_the_last_seq() {
    let _serial = SERIAL.lock().await;
    let (handle, api) =
        mock(MockConfig::default().fault("GET /v1/sandboxes/*/connect cut=200 count=1")).await;
    let sb = api.sandbox().await;
    let script = "for i in 1 2 3 4 5 6 7 8; do echo chunk-$i; sleep 0.05; done";
    let id = pid_of(
        &api.process(&sb, json!({"cmd": "sh", "args": ["-c", script]}))
            .await,
    );

    // Follow live output; the fault aborts the connection after 200 body bytes.
    let mut cut = api.connect(&sb, &id, 0).await;
    let mut first = Vec::new();
    while let Some(ev) = cut.next().await {
        first.push(ev);
    }
    assert!(!cut.clean_end, "the fault cut the stream");
    assert!(
        first.iter().all(|e| e["type"] == "data"),
        "no exit before the cut"
    );
    let last = seqs(&first).last().copied().unwrap_or(0);
    let rest = api.connect(&sb, &id, last).await.until_end().await;
    let mut all = stream_bytes(&first, "stdout");
    all.extend(stream_bytes(&rest, "stdout"));
    let expected: String = (1..=8).map(|i| format!("chunk-{i}\n")).collect();
    assert_eq!(String::from_utf8(all).unwrap(), expected);
    assert_eq!(
        rest.last().unwrap(),
        &json!({"type": "exit", "exit_code": 0})
    );
    handle.shutdown().await;
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn destroying_the_sandbox_kills_its_processes() {
    let _serial = SERIAL.lock().await;
    let (handle, api) = mock(MockConfig::default()).await;
    let sb = api.sandbox().await;
    let created = api
        .process(&sb, json!({"cmd": "sleep", "args": ["300"]}))
        .await;
    let pid = created["pid"].as_i64().unwrap();
    assert_eq!(handle.state().processes.live_count(), 1);
    let r = api
        .send("DELETE", &format!("/v1/sandboxes/{sb}"), None)
        .await;
    assert!(r.status == 200 || r.status == 202, "destroy: {}", r.status);
    within("sleep killed", async {
        while std::path::Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z")
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(handle.state().processes.live_count(), 0);
    handle.shutdown().await;
}

#[tokio::test]
async fn fallback_isolation_runs_pipes_ptys_and_stops_trees() {
    let _serial = SERIAL.lock().await;
    let (handle, api) =
        mock(MockConfig::default().isolation(createos_mock::IsolationMode::None)).await;
    let sb = api.sandbox().await;
    let id = pid_of(
        &api.process(
            &sb,
            json!({"cmd": "sh", "args": ["-c", "echo fb-$((2+3)); pwd"]}),
        )
        .await,
    );
    let events = api.connect(&sb, &id, 0).await.until_end().await;
    let out = String::from_utf8(stream_bytes(&events, "stdout")).unwrap();
    assert!(out.starts_with("fb-5\n"), "{out:?}");
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "exit", "exit_code": 0})
    );

    let pty = api
        .process(
            &sb,
            json!({"cmd": "stty", "args": ["size"], "pty": {"rows": 12, "cols": 34}}),
        )
        .await;
    let mut stream = api.connect(&sb, &pid_of(&pty), 0).await;
    let mut acc = String::new();
    pty_until(&mut stream, &mut acc, "12 34").await;

    let tree = pid_of(
        &api.process(
            &sb,
            json!({"cmd": "sh", "args": ["-c", "sleep 300 & sleep 300"]}),
        )
        .await,
    );
    let r = api
        .send("DELETE", &proc_path(&sb, &tree, "?grace_ms=50"), None)
        .await;
    let fin = r.data();
    assert_eq!(fin["tree_exited"], true, "{fin}");
    assert_eq!(fin["signal"], "SIGTERM");
    handle.shutdown().await;
}
