//! Background tasks (sync watchers, tunnels) and device tools through `cos mcp` (the real
//! binary over stdio, JSON-RPC by hand) against the in-process emulator: sync once / one-way /
//! mirror with excludes, tunnels carrying real bytes, transport_stop, shutdown stopping
//! everything, unsafe directories refused before anything is sent, and the VPN device tools.

#[path = "../../tests/common/mod.rs"]
mod common;
mod mcp_client;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use cos::tools::{self, CallCtx, Runtime, ToolsConfig};
use createos_sandbox::CreateSandbox;
use mcp_client::{total_requests, Mcp};

/// A home (state) directory and a separate project directory.
struct Dirs {
    _tmp: tempfile::TempDir,
    home: std::path::PathBuf,
    project: std::path::PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = home.join("code/project");
    std::fs::create_dir_all(&project).unwrap();
    Dirs {
        home,
        project,
        _tmp: tmp,
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

async fn new_sandbox(env: &common::Env) -> String {
    env.client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb"))
        .await
        .unwrap()
        .id()
        .to_string()
}

/// stdout of `command` in `sandbox`.
async fn run(mcp: &mut Mcp, sandbox: &str, command: &str) -> String {
    let out = mcp
        .ok(
            "sandbox_exec",
            json!({"sandbox_id": sandbox, "command": command}),
        )
        .await;
    out["stdout"].as_str().unwrap().to_string()
}

/// Poll `command` until its stdout is `want` (bounded).
async fn wait_for(mcp: &mut Mcp, sandbox: &str, command: &str, want: &str) {
    let mut seen = String::new();
    for _ in 0..400 {
        seen = run(mcp, sandbox, command).await;
        if seen == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("`{command}` printed {seen:?}, never {want:?}");
}

/// Wait until watcher `id` reports at least `files` files sent.
async fn wait_pushed(mcp: &mut Mcp, id: &str, files: u64) {
    let mut last = Value::Null;
    for _ in 0..400 {
        let status = mcp.ok("sandbox_status", json!({})).await;
        last = status["transports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["transport_id"] == id)
            .expect("listed")
            .clone();
        if last["files_pushed"].as_u64().unwrap() >= files {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("watcher {id} never reported {files} files sent: {last}");
}

/// Wait until watcher `id` has finished its first pass (it watches for events from then on).
async fn wait_watching(mcp: &mut Mcp, id: &str) {
    for _ in 0..400 {
        let status = mcp.ok("sandbox_status", json!({})).await;
        let me = status["transports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["transport_id"] == id)
            .expect("listed")
            .clone();
        assert_eq!(me["running"], true, "{me}");
        if me["syncs"].as_u64().unwrap() >= 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("watcher {id} never finished its first pass");
}

fn transport_ids(status: &Value) -> Vec<String> {
    status["transports"]
        .as_array()
        .expect("transports listed")
        .iter()
        .map(|t| t["transport_id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sync_once_uploads_and_unsafe_directories_are_refused_before_anything_is_sent() {
    let env = common::start().await;
    let d = dirs();
    write(&d.project.join("app/main.py"), "print('hi')\n");
    write(&d.project.join("app/lib/util.py"), "X = 1\n");
    write(&d.project.join("app/debug.log"), "noise\n");
    write(&d.project.join("app/.env"), "SECRET=1\n");
    for unsafe_dir in [".ssh/keys", ".config/app", ".config-extra", ".sshkeys"] {
        std::fs::create_dir_all(d.home.join(unsafe_dir)).unwrap();
    }
    let sandbox = new_sandbox(&env).await;
    let mut mcp = Mcp::start_in(&env, &d.home, &d.project, "{}", &[]).await;

    let before = total_requests(&env).await;
    let refused = [
        (json!("/"), json!("/root/x")),
        (json!(d.home.to_str().unwrap()), json!("/root/x")),
        (
            json!(d.home.join(".ssh/keys").to_str().unwrap()),
            json!("/root/x"),
        ),
        (
            json!(d.home.join(".config/app").to_str().unwrap()),
            json!("/root/x"),
        ),
        (
            json!(d.home.join(".config-extra").to_str().unwrap()),
            json!("/root/x"),
        ),
        (
            json!(d.home.join(".sshkeys").to_str().unwrap()),
            json!("/root/x"),
        ),
        (json!("../.."), json!("/root/x")),
        (json!("app"), json!("relative/dir")),
        (json!("app"), json!("/root/../etc")),
        (json!("app"), json!("/")),
    ];
    for (local, remote) in refused {
        let text = mcp
            .refused(
                "sandbox_sync",
                json!({"sandbox_id": sandbox, "local_dir": local, "remote_dir": remote}),
            )
            .await;
        assert!(
            text.contains("local_dir")
                || text.contains("remote directory")
                || text.contains("local directory"),
            "{local} → {remote}: {text}"
        );
    }
    let text = mcp.refused("sandbox_sync", json!({"sandbox_id": sandbox, "local_dir": "app", "remote_dir": "/root/x", "mode": "sideways"})).await;
    assert!(text.contains("mode"), "{text}");
    assert_eq!(
        total_requests(&env).await,
        before,
        "a refused sync sent something"
    );

    // once: relative to the project directory, excludes and the deny-list honoured.
    let done = mcp.ok("sandbox_sync", json!({"sandbox_id": sandbox, "local_dir": "app", "remote_dir": "/root/app", "exclude": ["*.log"]})).await;
    assert_eq!(done["mode"], "once");
    assert!(done.get("transport_id").is_none(), "{done}");
    assert_eq!(done["report"]["pushed"], 2, "{done}");
    assert_eq!(
        done["local_dir"],
        d.project
            .join("app")
            .canonicalize()
            .unwrap()
            .to_str()
            .unwrap()
    );
    assert_eq!(
        run(&mut mcp, &sandbox, "cd /root/app && find . -type f | sort").await,
        "./lib/util.py\n./main.py\n"
    );
    assert_eq!(
        run(&mut mcp, &sandbox, "cat /root/app/main.py").await,
        "print('hi')\n"
    );
    let status = mcp.ok("sandbox_status", json!({})).await;
    assert!(
        transport_ids(&status).is_empty(),
        "once leaves nothing running: {status}"
    );
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_one_way_watcher_follows_local_edits_until_stopped() {
    let env = common::start().await;
    let d = dirs();
    write(&d.project.join("site/index.html"), "v1\n");
    let sandbox = new_sandbox(&env).await;
    let mut mcp = Mcp::start_in(&env, &d.home, &d.project, "{}", &[]).await;

    let started = mcp.ok("sandbox_sync", json!({"sandbox_id": sandbox, "local_dir": "site", "remote_dir": "/root/site", "mode": "one-way"})).await;
    let id = started["transport_id"]
        .as_str()
        .expect("a transport id")
        .to_string();
    assert!(id.starts_with("tr-"), "{id}");
    assert_eq!(started["report"]["pushed"], 1, "{started}");
    assert_eq!(
        run(&mut mcp, &sandbox, "cat /root/site/index.html").await,
        "v1\n"
    );
    let status = mcp.ok("sandbox_status", json!({})).await;
    assert_eq!(transport_ids(&status), vec![id.clone()]);
    assert_eq!(status["transports"][0]["kind"], "sync");
    assert_eq!(status["transports"][0]["running"], true);

    // Once the watch has made its own first pass, only its file events can carry an edit.
    wait_watching(&mut mcp, &id).await;
    write(&d.project.join("site/index.html"), "v2\n");
    write(&d.project.join("site/new.txt"), "fresh\n");
    wait_for(
        &mut mcp,
        &sandbox,
        "cat /root/site/index.html /root/site/new.txt 2>/dev/null",
        "v2\nfresh\n",
    )
    .await;

    // The watcher reports what it sent (its report lands just after the files do).
    wait_pushed(&mut mcp, &id, 2).await;
    let stopped = mcp
        .ok("sandbox_transport_stop", json!({"transport_id": id}))
        .await;
    assert_eq!(stopped["stopped"], true);
    assert!(stopped["syncs"].as_u64().unwrap() >= 2, "{stopped}");
    let again = mcp
        .refused("sandbox_transport_stop", json!({"transport_id": id}))
        .await;
    assert!(again.contains("unknown background task"), "{again}");
    assert!(transport_ids(&mcp.ok("sandbox_status", json!({})).await).is_empty());

    // After the stop, an edit travels nowhere: no upload request reaches the emulator.
    let uploads = env.requests("uploadFile").await;
    let processes = env.requests("createProcess").await;
    write(&d.project.join("site/index.html"), "v3\n");
    // Several debounce periods (300 ms) of quiet: a live watcher would have synced by now.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(env.requests("uploadFile").await, uploads);
    assert_eq!(env.requests("createProcess").await, processes);
    assert_eq!(
        run(&mut mcp, &sandbox, "cat /root/site/index.html").await,
        "v2\n"
    );
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mirror_deletes_sandbox_extras_and_excludes_stay_out_on_both_sides() {
    let env = common::start().await;
    let d = dirs();
    write(&d.project.join("m/keep.txt"), "local\n");
    write(&d.project.join("m/build.log"), "local log\n");
    write(&d.project.join("m/cache/blob.bin"), "cached\n");
    let sandbox = new_sandbox(&env).await;
    let mut mcp = Mcp::start_in(&env, &d.home, &d.project, "{}", &[]).await;
    run(
        &mut mcp,
        &sandbox,
        "mkdir -p /root/m && echo old > /root/m/extra.txt && echo remote > /root/m/server.log",
    )
    .await;

    let args = json!({"sandbox_id": sandbox, "local_dir": d.project.join("m").to_str().unwrap(), "remote_dir": "/root/m/", "mode": "mirror", "exclude": ["*.log", "cache/"]});
    let started = mcp.ok("sandbox_sync", args).await;
    assert_eq!(
        started["report"]["paths"]["deleted_remote"],
        json!(["extra.txt"]),
        "{started}"
    );
    assert_eq!(started["remote_dir"], "/root/m");
    // extra.txt is gone; the excluded server.log is out of scope and kept; nothing excluded travelled.
    assert_eq!(
        run(&mut mcp, &sandbox, "cd /root/m && find . -type f | sort").await,
        "./keep.txt\n./server.log\n"
    );

    // The watcher keeps mirroring: a local deletion follows.
    wait_watching(&mut mcp, started["transport_id"].as_str().unwrap()).await;
    std::fs::write(d.project.join("m/second.txt"), "2\n").unwrap();
    wait_for(
        &mut mcp,
        &sandbox,
        "cd /root/m && find . -type f | sort",
        "./keep.txt\n./second.txt\n./server.log\n",
    )
    .await;
    std::fs::remove_file(d.project.join("m/keep.txt")).unwrap();
    wait_for(
        &mut mcp,
        &sandbox,
        "cd /root/m && find . -type f | sort",
        "./second.txt\n./server.log\n",
    )
    .await;
    mcp.ok(
        "sandbox_transport_stop",
        json!({"transport_id": started["transport_id"]}),
    )
    .await;
    mcp.stop().await;
    env.shutdown().await;
}

/// Serve `/root/www` over HTTP on `port` inside `sandbox` with a background process.
async fn serve(mcp: &mut Mcp, sandbox: &str, port: u16, text: &str) {
    run(
        mcp,
        sandbox,
        &format!("mkdir -p /root/www && printf '%s' '{text}' > /root/www/index.html"),
    )
    .await;
    let command = format!("python3 -m http.server {port} --bind 127.0.0.1 --directory /root/www");
    mcp.ok(
        "sandbox_process_start",
        json!({"sandbox_id": sandbox, "command": command}),
    )
    .await;
    let probe = format!("python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 1)\" 2>/dev/null && echo up");
    wait_for(mcp, sandbox, &probe, "up\n").await;
}

async fn get(url: &str) -> Result<String, reqwest::Error> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    http.get(url).send().await?.text().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tunnel_carries_real_bytes_until_stopped() {
    let env = common::start().await;
    let d = dirs();
    let sandbox = new_sandbox(&env).await;
    let mut mcp = Mcp::start_in(&env, &d.home, &d.project, "{}", &[]).await;
    serve(&mut mcp, &sandbox, 8080, "hello through the tunnel").await;

    let refused = mcp
        .refused(
            "sandbox_tunnel",
            json!({"sandbox_id": sandbox, "remote_port": 0}),
        )
        .await;
    assert!(refused.contains("remote_port"), "{refused}");
    let tunnel = mcp
        .ok(
            "sandbox_tunnel",
            json!({"sandbox_id": sandbox, "remote_port": 8080}),
        )
        .await;
    assert_eq!(tunnel["verified"], false);
    let port = tunnel["local_port"].as_u64().unwrap();
    assert!(port > 0);
    let url = tunnel["url"].as_str().unwrap().to_string();
    assert_eq!(url, format!("http://127.0.0.1:{port}"));
    assert_eq!(
        get(&format!("{url}/")).await.unwrap(),
        "hello through the tunnel"
    );
    let status = mcp.ok("sandbox_status", json!({})).await;
    assert_eq!(status["transports"][0]["kind"], "tunnel");
    assert!(
        status["transports"][0]["connections"].as_u64().unwrap() >= 1,
        "{status}"
    );

    // A second tunnel on the same local port is refused clearly.
    let busy = mcp
        .refused(
            "sandbox_tunnel",
            json!({"sandbox_id": sandbox, "remote_port": 8080, "local_port": port}),
        )
        .await;
    assert!(busy.contains("in use"), "{busy}");

    mcp.ok(
        "sandbox_transport_stop",
        json!({"transport_id": tunnel["transport_id"]}),
    )
    .await;
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", port as u16))
            .await
            .is_err(),
        "the tunnel still accepts"
    );

    // Destroying the sandbox stops the background tasks to it.
    let again = mcp
        .ok(
            "sandbox_tunnel",
            json!({"sandbox_id": sandbox, "remote_port": 8080}),
        )
        .await;
    let again_port = again["local_port"].as_u64().unwrap() as u16;
    let destroyed = mcp
        .ok("sandbox_destroy", json!({"sandbox_id": sandbox}))
        .await;
    assert_eq!(
        destroyed["stopped_transports"],
        json!([again["transport_id"]]),
        "{destroyed}"
    );
    assert!(transport_ids(&mcp.ok("sandbox_status", json!({})).await).is_empty());
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", again_port))
            .await
            .is_err(),
        "a tunnel to a destroyed sandbox still accepts"
    );
    mcp.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn closing_stdin_stops_every_background_task() {
    let env = common::start().await;
    let d = dirs();
    write(&d.project.join("w/a.txt"), "a\n");
    let sandbox = new_sandbox(&env).await;
    let mut mcp = Mcp::start_in(&env, &d.home, &d.project, "{}", &[]).await;
    serve(&mut mcp, &sandbox, 8081, "up").await;
    let tunnel = mcp
        .ok(
            "sandbox_tunnel",
            json!({"sandbox_id": sandbox, "remote_port": 8081}),
        )
        .await;
    let port = tunnel["local_port"].as_u64().unwrap() as u16;
    mcp.ok("sandbox_sync", json!({"sandbox_id": sandbox, "local_dir": "w", "remote_dir": "/root/w", "mode": "two-way"})).await;
    assert_eq!(
        get(&format!("http://127.0.0.1:{port}/")).await.unwrap(),
        "up"
    );
    assert_eq!(
        transport_ids(&mcp.ok("sandbox_status", json!({})).await).len(),
        2
    );
    mcp.stop().await;
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err(),
        "the tunnel outlived the server"
    );
    env.shutdown().await;
}

fn ctx(cancel: &CancellationToken) -> CallCtx {
    CallCtx::new("default", cancel.clone())
}

fn object(value: Value) -> Option<Map<String, Value>> {
    value.as_object().cloned()
}

fn body(out: &tools::ToolOutput) -> Value {
    match &out.content[0] {
        tools::Part::Json(v) => v.clone(),
        other => panic!("not JSON: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn runtime_shutdown_stops_background_tasks_in_process() {
    let env = common::start().await;
    let d = dirs();
    write(&d.project.join("p/f.txt"), "1\n");
    let sandbox = new_sandbox(&env).await;
    let config = ToolsConfig::resolve(&Map::new(), |_| None).unwrap();
    let rt: Arc<Runtime> = Runtime::new(
        env.client.clone(),
        config,
        d.home.join("state"),
        d.project.clone(),
    );
    let cancel = rt.lifetime().child_token();
    let tunnel = tools::call(
        &rt,
        "sandbox_tunnel",
        object(json!({"sandbox_id": sandbox, "remote_port": 9000})),
        ctx(&cancel),
    )
    .await
    .unwrap();
    let port = body(&tunnel)["local_port"].as_u64().unwrap() as u16;
    let local = d.project.join("p");
    tools::call(&rt, "sandbox_sync", object(json!({"sandbox_id": sandbox, "local_dir": local.to_str().unwrap(), "remote_dir": "/root/p", "mode": "one-way"})), ctx(&cancel))
        .await
        .unwrap();
    assert_eq!(rt.background().list().len(), 2);
    tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("the tunnel listens");

    rt.shutdown().await;
    assert!(rt.background().list().is_empty());
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err(),
        "the tunnel survived shutdown"
    );
    let uploads = env.requests("uploadFile").await;
    let processes = env.requests("createProcess").await;
    std::fs::write(local.join("f.txt"), "2\n").unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        env.requests("uploadFile").await,
        uploads,
        "the watcher survived shutdown"
    );
    assert_eq!(
        env.requests("createProcess").await,
        processes,
        "the watcher survived shutdown"
    );
    // Nothing new starts once shut down.
    let refused = tools::call(
        &rt,
        "sandbox_tunnel",
        object(json!({"sandbox_id": sandbox, "remote_port": 9000})),
        ctx(&cancel),
    )
    .await;
    assert!(refused.is_err());
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn device_tools_round_trip() {
    let env = common::start().await;
    let d = dirs();
    let mut mcp = Mcp::start_in(&env, &d.home, &d.project, "{}", &[]).await;

    let before = env.requests("registerDevice").await;
    let bad = mcp
        .refused(
            "sandbox_device_register",
            json!({"name": "laptop", "pubkey": "not-a-key"}),
        )
        .await;
    assert!(bad.contains("pubkey"), "{bad}");
    assert_eq!(env.requests("registerDevice").await, before);
    assert!(mcp
        .refused("sandbox_vpn_up", json!({}))
        .await
        .contains("sandbox_device_register"));

    let result = mcp
        .call("sandbox_device_register", json!({"name": "laptop"}))
        .await;
    let text = result["content"][0]["text"].as_str().unwrap().to_string();
    let device: Value = serde_json::from_str(&text).unwrap();
    let id = device["device_id"].as_str().unwrap().to_string();
    assert_eq!(device["name"], "laptop");
    let key_file =
        std::path::PathBuf::from(device["private_key_file"].as_str().expect("a key file"));
    assert!(key_file.starts_with(&d.home), "{}", key_file.display());
    let key = std::fs::read_to_string(&key_file).unwrap();
    assert!(
        !text.contains(key.trim()),
        "the private key leaked into the result"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    // The registered public key is the private key's.
    let server_view = env.client.get_device(&id).await.unwrap();
    assert_eq!(server_view.pubkey, device["pubkey"]);

    mcp.ok("sandbox_network_create", json!({"name": "vpn-net"}))
        .await;
    mcp.ok(
        "sandbox_device_attach",
        json!({"device": id, "network": "vpn-net"}),
    )
    .await;
    let status = mcp.ok("sandbox_device_status", json!({})).await;
    let mine = status
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["device_id"] == id.as_str())
        .expect("listed")
        .clone();
    assert_eq!(mine["local_private_key"], true);
    assert_eq!(mine["networks"][0]["name"], "vpn-net", "{mine}");
    mcp.ok(
        "sandbox_device_detach",
        json!({"device": id, "network": "vpn-net"}),
    )
    .await;
    let status = mcp.ok("sandbox_device_status", json!({})).await;
    assert_eq!(status[0]["networks"], json!([]), "{status}");

    let advice = mcp.ok("sandbox_vpn_up", json!({})).await;
    assert_eq!(advice["connected"], false);
    assert_eq!(advice["device_id"], id.as_str());
    let command = advice["run_in_your_terminal"][0].as_str().unwrap();
    assert!(
        command.contains(&id)
            && command.contains("wg-quick up")
            && command.contains(key_file.to_str().unwrap()),
        "{command}"
    );
    assert!(!command.contains(key.trim()));
    let unknown = mcp
        .refused(
            "sandbox_device_attach",
            json!({"device": "dev-missing", "network": "vpn-net"}),
        )
        .await;
    assert!(!unknown.is_empty());
    mcp.stop().await;
    env.shutdown().await;
}
