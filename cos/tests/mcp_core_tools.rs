//! The resource, process and desktop tools of `cos mcp` driven through MCP against the
//! emulator, each result checked: ingress, preview URLs, firewall, bandwidth, networks,
//! disks, managed processes, desktop and computer.

#[path = "../../tests/common/mod.rs"]
mod common;
mod mcp_client;

use std::time::Duration;

use base64::Engine;
use mcp_client::{ok_json, string, total_requests, Mcp};
use serde_json::{json, Value};

/// An explicit sandbox created through the tools.
async fn create(mcp: &mut Mcp, args: Value) -> String {
    string(&mcp.ok("sandbox_create", args).await, "sandbox_id")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ingress_preview_firewall_and_bandwidth() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = Mcp::start(&env, dir.path(), "{}", &[]).await;
    let id = create(&mut mcp, json!({})).await;

    // ingress on/off is what info reports afterwards.
    let on = mcp
        .ok(
            "sandbox_ingress",
            json!({"sandbox_id": id, "enabled": true}),
        )
        .await;
    assert_eq!(on["ingress_enabled"], true, "{on}");
    let template = string(&on, "ingress_url_template");
    assert!(template.contains("<port>"), "{template}");
    assert_eq!(
        mcp.ok("sandbox_info", json!({"sandbox_id": id})).await["ingress_enabled"],
        true
    );

    // preview_url fills the port into the template, says unverified and changes nothing.
    let updates = env.requests("updateSandbox").await;
    let preview = mcp
        .ok(
            "sandbox_preview_url",
            json!({"sandbox_id": id, "port": 8080}),
        )
        .await;
    assert_eq!(
        preview["url"],
        template.replace("<port>", "8080"),
        "{preview}"
    );
    assert!(!preview["url"].as_str().unwrap().contains("<port>"));
    assert_eq!(
        (
            preview["verified"].as_bool(),
            preview["ingress_enabled"].as_bool()
        ),
        (Some(false), Some(true)),
        "{preview}"
    );
    let off = mcp
        .ok(
            "sandbox_ingress",
            json!({"sandbox_id": id, "enabled": false}),
        )
        .await;
    assert_eq!(off["ingress_enabled"], false, "{off}");
    assert_eq!(
        env.requests("updateSandbox").await,
        updates + 1,
        "preview_url must not enable ingress"
    );
    assert_eq!(
        mcp.ok("sandbox_info", json!({"sandbox_id": id})).await["ingress_enabled"],
        false
    );
    let bad_port = mcp
        .refused("sandbox_preview_url", json!({"sandbox_id": id, "port": 0}))
        .await;
    assert!(bad_port.contains("port"), "{bad_port}");

    // firewall: a hostname rule (even beside a valid one) is refused before any request;
    // IP/CIDR rules are applied and shown by info.
    let before = total_requests(&env).await;
    for rules in [
        json!(["example.com"]),
        json!(["10.0.0.0/8", "*.example.com"]),
        json!(["10.0.0.0/33"]),
    ] {
        let refused = mcp
            .refused(
                "sandbox_firewall",
                json!({"sandbox_id": id, "rules": rules}),
            )
            .await;
        assert!(
            refused.contains("IP") && refused.contains("CIDR"),
            "{refused}"
        );
    }
    mcp.refused_with(
        "sandbox_firewall",
        json!({"sandbox_id": id, "rules": []}),
        "rules",
    )
    .await;
    assert_eq!(
        total_requests(&env).await,
        before,
        "a refused rule reached the control plane"
    );
    let applied = mcp
        .ok(
            "sandbox_firewall",
            json!({"sandbox_id": id, "rules": ["10.0.0.0/8", "2001:db8::/32"]}),
        )
        .await;
    assert_eq!(
        applied["egress"],
        json!(["10.0.0.0/8", "2001:db8::/32"]),
        "{applied}"
    );
    assert_eq!(env.requests("setEgress").await, 1);
    assert_eq!(
        mcp.ok("sandbox_info", json!({"sandbox_id": id})).await["egress"],
        json!(["10.0.0.0/8", "2001:db8::/32"])
    );

    // bandwidth: the quota info reports, and usage that adds up.
    let quota = mcp.ok("sandbox_info", json!({"sandbox_id": id})).await["bandwidth_quota_bytes"]
        .as_i64()
        .expect("quota in info");
    let bw = mcp.ok("sandbox_bandwidth", json!({"sandbox_id": id})).await;
    assert_eq!(
        (bw["id"].as_str(), bw["quota_bytes"].as_i64()),
        (Some(id.as_str()), Some(quota)),
        "{bw}"
    );
    let used = bw["used_bytes"].as_i64().expect("used bytes");
    assert!(
        used >= 0 && bw["remaining_bytes"].as_i64() == Some(quota - used),
        "{bw}"
    );
    mcp.refused_with(
        "sandbox_bandwidth",
        json!({"sandbox_id": "sb-doesnotexist"}),
        "sandbox not found",
    )
    .await;

    mcp.ok("sandbox_destroy", json!({"sandbox_id": id})).await;
    mcp.stop().await;
    env.shutdown().await;
}

fn member_ids(network: &Value) -> Vec<String> {
    network["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["sandbox_id"].as_str().map(String::from))
        .collect()
}

fn named<'a>(list: &'a Value, name: &str) -> Option<&'a Value> {
    list.as_array()
        .expect("a list")
        .iter()
        .find(|n| n["name"] == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn networks_and_disks() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let creds = [
        ("CATALOG_S3_ACCESS", "AKIACATALOGTEST"),
        ("CATALOG_S3_SECRET", "catalog-secret-value"),
    ];
    let mut mcp = Mcp::start(&env, dir.path(), "{}", &creds).await;
    let a = create(&mut mcp, json!({"name": "net-a"})).await;
    let b = create(&mut mcp, json!({"name": "net-b"})).await;

    // networks: create, list, attach both, show members, detach, delete.
    let net = mcp
        .ok("sandbox_network_create", json!({"name": "lab"}))
        .await;
    assert_eq!(net["name"], "lab", "{net}");
    let listed = mcp.ok("sandbox_network_list", json!({})).await;
    assert_eq!(
        named(&listed, "lab").map(|n| n["id"].clone()),
        Some(net["id"].clone()),
        "{listed}"
    );
    for member in [&a, &b] {
        let attached = mcp
            .ok(
                "sandbox_network_attach",
                json!({"network": "lab", "member": member}),
            )
            .await;
        assert_eq!(attached["ok"], true, "{attached}");
    }
    let shown = mcp.ok("sandbox_network_show", json!({"name": "lab"})).await;
    let mut members = member_ids(&shown);
    members.sort();
    let mut both = vec![a.clone(), b.clone()];
    both.sort();
    assert_eq!(members, both, "{shown}");
    mcp.ok(
        "sandbox_network_detach",
        json!({"network": "lab", "member": b}),
    )
    .await;
    assert_eq!(
        member_ids(
            &mcp.ok("sandbox_network_show", json!({"name": net["id"]}))
                .await
        ),
        vec![a.clone()]
    );
    mcp.ok(
        "sandbox_network_detach",
        json!({"network": "lab", "member": a}),
    )
    .await;
    mcp.ok("sandbox_network_delete", json!({"name": "lab"}))
        .await;
    assert!(named(&mcp.ok("sandbox_network_list", json!({})).await, "lab").is_none());
    mcp.refused_with(
        "sandbox_network_show",
        json!({"name": "lab"}),
        "network not found",
    )
    .await;

    // disks: credentials come from the named server variables and never come back.
    let created = mcp
        .call("sandbox_disk_create", json!({"name": "scratch", "bucket": "scratch-bucket", "endpoint": "https://s3.example.test", "access_key_env": "CATALOG_S3_ACCESS", "secret_key_env": "CATALOG_S3_SECRET", "region": "eu-west-1"}))
        .await;
    let disk = ok_json(&created);
    assert_eq!(
        (disk["name"].as_str(), disk["config"]["bucket"].as_str()),
        (Some("scratch"), Some("scratch-bucket")),
        "{disk}"
    );
    let shown = mcp
        .call("sandbox_disk_show", json!({"name": "scratch"}))
        .await;
    for text in [&created, &shown].map(|r| {
        r["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }) {
        assert!(
            !text.contains("catalog-secret-value") && !text.contains("AKIACATALOGTEST"),
            "{text}"
        );
    }
    let shown = ok_json(&shown);
    assert_eq!(
        (shown["id"].clone(), shown["config"]["region"].as_str()),
        (disk["id"].clone(), Some("eu-west-1")),
        "{shown}"
    );
    assert!(named(&mcp.ok("sandbox_disk_list", json!({})).await, "scratch").is_some());

    // attach mounts the bucket: a file written in one sandbox is visible in the other.
    for member in [&a, &b] {
        let attached = mcp
            .ok(
                "sandbox_disk_attach",
                json!({"sandbox_id": member, "disk": "scratch", "mount_path": "/mnt/scratch"}),
            )
            .await;
        assert_eq!(attached["ok"], true, "{attached}");
    }
    let write = mcp
        .ok(
            "sandbox_exec",
            json!({"sandbox_id": a, "command": "echo shared > /mnt/scratch/note.txt"}),
        )
        .await;
    assert_eq!(write["code"], 0, "{write}");
    let read = mcp
        .ok(
            "sandbox_exec",
            json!({"sandbox_id": b, "command": "cat /mnt/scratch/note.txt"}),
        )
        .await;
    assert_eq!(read["stdout"], "shared\n", "{read}");
    // detach unmounts it: b no longer sees the bucket.
    mcp.ok(
        "sandbox_disk_detach",
        json!({"sandbox_id": b, "disk": "scratch", "mount_path": "/mnt/scratch"}),
    )
    .await;
    let after = mcp
        .ok(
            "sandbox_exec",
            json!({"sandbox_id": b, "command": "cat /mnt/scratch/note.txt"}),
        )
        .await;
    assert_ne!(after["code"], 0, "{after}");
    mcp.refused_with(
        "sandbox_disk_detach",
        json!({"sandbox_id": b, "disk": "scratch", "mount_path": "/mnt/scratch"}),
        "mount",
    )
    .await;
    // A disk still mounted somewhere cannot be deleted.
    mcp.refused("sandbox_disk_delete", json!({"name": "scratch"}))
        .await;
    mcp.ok(
        "sandbox_disk_detach",
        json!({"sandbox_id": a, "disk": "scratch", "mount_path": "/mnt/scratch"}),
    )
    .await;
    assert_eq!(
        mcp.ok("sandbox_disk_delete", json!({"name": "scratch"}))
            .await["deleted"],
        true
    );
    assert!(named(&mcp.ok("sandbox_disk_list", json!({})).await, "scratch").is_none());
    mcp.refused_with("sandbox_disk_show", json!({"name": "scratch"}), "not found")
        .await;

    for id in [&a, &b] {
        mcp.ok("sandbox_destroy", json!({"sandbox_id": id})).await;
    }
    mcp.stop().await;
    env.shutdown().await;
}

/// `sandbox_process_output` once the process has exited.
async fn final_output(mcp: &mut Mcp, id: &str, pid: &str) -> Value {
    for _ in 0..600 {
        let out = mcp
            .ok(
                "sandbox_process_output",
                json!({"sandbox_id": id, "process_id": pid}),
            )
            .await;
        if out["state"] == "exited" || out["state"] == "failed" {
            return out;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("process {pid} did not exit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn managed_processes_take_input_and_report_output() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = Mcp::start(&env, dir.path(), "{}", &[]).await;
    let id = create(&mut mcp, json!({})).await;
    let ids = |pid: &str| json!({"sandbox_id": id, "process_id": pid});

    // cat echoes its input and exits at EOF.
    let cat = mcp
        .ok(
            "sandbox_process_start",
            json!({"sandbox_id": id, "command": "cat; echo \"eof in $PWD\" >&2", "cwd": "/tmp"}),
        )
        .await;
    let cat_pid = string(&cat, "process_id");
    assert!(cat["pid"].as_i64().is_some_and(|p| p > 0), "{cat}");
    assert_eq!(
        mcp.ok(
            "sandbox_process_input",
            json!({"sandbox_id": id, "process_id": cat_pid, "text": "hello\n"})
        )
        .await["bytes"],
        6
    );
    mcp.ok(
        "sandbox_process_input",
        json!({"sandbox_id": id, "process_id": cat_pid, "text": "wörld"}),
    )
    .await;
    let running = mcp.ok("sandbox_process_get", ids(&cat_pid)).await;
    assert_eq!(
        (running["state"].as_str(), running["cwd"].as_str()),
        (Some("running"), Some("/tmp")),
        "{running}"
    );
    assert_eq!(
        mcp.ok("sandbox_process_close_stdin", ids(&cat_pid)).await["closed"],
        true
    );
    let out = final_output(&mut mcp, &id, &cat_pid).await;
    assert_eq!(
        (out["stdout"].as_str(), out["stderr"].as_str()),
        (Some("hello\nwörld"), Some("eof in /tmp\n")),
        "{out}"
    );
    assert_eq!(
        (out["exit_code"].as_i64(), out["truncated"].as_bool()),
        (Some(0), Some(false)),
        "{out}"
    );
    let done = mcp.ok("sandbox_process_get", ids(&cat_pid)).await;
    assert_eq!(
        (done["state"].as_str(), done["exit_code"].as_i64()),
        (Some("exited"), Some(0)),
        "{done}"
    );
    // Input to a finished process fails and says so.
    mcp.refused(
        "sandbox_process_input",
        json!({"sandbox_id": id, "process_id": cat_pid, "text": "late"}),
    )
    .await;

    // A long-running server: listed while it runs, stopped with its whole tree.
    let server = mcp
        .ok(
            "sandbox_process_start",
            json!({"sandbox_id": id, "command": "echo up; sleep 3017 & sleep 3017; wait"}),
        )
        .await;
    let server_pid = string(&server, "process_id");
    let mut seen = Value::Null;
    for _ in 0..600 {
        seen = mcp.ok("sandbox_process_output", ids(&server_pid)).await;
        if seen["stdout"] == "up\n" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        (seen["stdout"].as_str(), seen["state"].as_str()),
        (Some("up\n"), Some("running")),
        "{seen}"
    );
    let listed = mcp
        .ok("sandbox_process_list", json!({"sandbox_id": id}))
        .await;
    let state_of = |pid: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["process_id"] == pid)
            .map(|p| p["state"].clone())
    };
    assert_eq!(
        (state_of(&cat_pid), state_of(&server_pid)),
        (Some(json!("exited")), Some(json!("running"))),
        "{listed}"
    );
    mcp.ok("sandbox_process_stop", ids(&server_pid)).await;
    let stopped = final_output(&mut mcp, &id, &server_pid).await;
    assert_ne!(stopped["exit_code"], 0, "{stopped}");
    // Neither sleep of the tree survives (the bracket keeps pgrep's own shell from matching).
    let mut live = Value::Null;
    for _ in 0..200 {
        live = mcp
            .ok(
                "sandbox_exec",
                json!({"sandbox_id": id, "command": "pgrep -c -f 'sleep 301[7]' || true"}),
            )
            .await;
        if live["stdout"] == "0\n" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        live["stdout"], "0\n",
        "the stopped tree left processes behind: {live}"
    );
    mcp.refused_with(
        "sandbox_process_get",
        ids("proc-unknown"),
        "process not found",
    )
    .await;

    mcp.ok("sandbox_destroy", json!({"sandbox_id": id})).await;
    mcp.stop().await;
    env.shutdown().await;
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(png: &[u8]) -> (u64, u64) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&png[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u64;
    (be(&png[16..20]), be(&png[20..24]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn desktop_computer_and_screenshot() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = Mcp::start(&env, dir.path(), "{}", &[]).await;
    let id = create(&mut mcp, json!({"rootfs": "desktop:1"})).await;
    let op = |op: &str, extra: Value| {
        let mut args = json!({"sandbox_id": id, "op": op});
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        args
    };

    // desktop: ingress on, the screen up, a noVNC link.
    let desk = mcp.ok("sandbox_desktop", json!({"sandbox_id": id})).await;
    assert_eq!(
        (
            desk["ingress_enabled"].as_bool(),
            desk["verified"].as_bool()
        ),
        (Some(true), Some(false)),
        "{desk}"
    );
    assert_eq!(
        mcp.ok("sandbox_info", json!({"sandbox_id": id})).await["ingress_enabled"],
        true
    );
    let screen = mcp.ok("sandbox_computer", op("screen", json!({}))).await;
    let (w, h) = (
        screen["width"].as_u64().unwrap_or(0),
        screen["height"].as_u64().unwrap_or(0),
    );
    assert!(w > 100 && h > 100, "{screen}");
    assert_eq!(desk["screen"], screen);

    // The screenshot is a PNG of exactly that screen.
    let shot = mcp
        .call("sandbox_screenshot", json!({"sandbox_id": id}))
        .await;
    assert_eq!(
        (
            shot["content"][0]["type"].as_str(),
            shot["content"][0]["mimeType"].as_str()
        ),
        (Some("image"), Some("image/png")),
        "{shot}"
    );
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["content"][0]["data"].as_str().unwrap())
        .unwrap();
    assert_eq!(png_size(&png), (w, h));

    // Pointer: move and click land where asked (raw pixels); cursor reports it.
    mcp.ok(
        "sandbox_computer",
        op("move", json!({"x": w / 4, "y": h / 4})),
    )
    .await;
    let cursor = mcp.ok("sandbox_computer", op("cursor", json!({}))).await;
    assert_eq!(
        (cursor["x"].as_u64(), cursor["y"].as_u64()),
        (Some(w / 4), Some(h / 4)),
        "{cursor}"
    );
    assert_eq!(
        mcp.ok(
            "sandbox_computer",
            op("click", json!({"x": w / 2, "y": h / 2}))
        )
        .await["clicked"],
        true
    );
    let cursor = mcp.ok("sandbox_computer", op("cursor", json!({}))).await;
    assert_eq!(
        (cursor["x"].as_u64(), cursor["y"].as_u64()),
        (Some(w / 2), Some(h / 2)),
        "{cursor}"
    );
    mcp.refused_with("sandbox_computer", op("move", json!({"x": 5})), "x and y")
        .await;
    mcp.refused_with("sandbox_computer", op("click", json!({"y": 5})), "x and y")
        .await;

    // open adds a window; type and key reach the desktop.
    let windows_before = mcp.ok("sandbox_computer", op("windows", json!({}))).await;
    let count = |v: &Value| {
        v.as_array()
            .map(Vec::len)
            .or_else(|| v["windows"].as_array().map(Vec::len))
            .expect("window list")
    };
    let opened = mcp
        .ok(
            "sandbox_computer",
            op("open", json!({"target": "https://example.com"})),
        )
        .await;
    assert_eq!(opened["opened"], "https://example.com");
    let windows_after = mcp.ok("sandbox_computer", op("windows", json!({}))).await;
    assert_eq!(
        count(&windows_after),
        count(&windows_before) + 1,
        "{windows_after}"
    );
    assert_eq!(
        mcp.ok("sandbox_computer", op("type", json!({"text": "héllo"})))
            .await["typed"],
        5
    );
    assert_eq!(
        mcp.ok(
            "sandbox_computer",
            op("key", json!({"keys": ["ctrl", "a"]}))
        )
        .await["pressed"],
        json!(["ctrl", "a"])
    );
    mcp.refused_with("sandbox_computer", op("type", json!({})), "text")
        .await;
    mcp.refused_with(
        "sandbox_computer",
        op("scroll", json!({})),
        "\"op\" must be one of",
    )
    .await;

    mcp.ok("sandbox_destroy", json!({"sandbox_id": id})).await;
    mcp.stop().await;
    env.shutdown().await;
}
