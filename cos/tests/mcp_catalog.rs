//! The whole `cos mcp` tool catalog against the emulator: `tools/list` serves exactly the
//! OpenCode V2 catalog (plugins.md §2.13) plus the documented extras, every schema closed;
//! and the lifecycle and catalog tools (create/info/list/pause/resume/fork/destroy/release,
//! shapes/images) driven through MCP with their results checked.

#[path = "../../tests/common/mod.rs"]
mod common;
mod mcp_client;

use std::collections::BTreeSet;

use mcp_client::{string, Mcp};
use serde_json::{json, Value};

/// The 54 tools of the V2 plugin (plugins.md §2.13), without the `sandbox_` prefix.
const V2_TOOLS: [&str; 54] = [
    "status",
    "create",
    "info",
    "list",
    "pause",
    "resume",
    "fork",
    "destroy",
    "exec",
    "run_code",
    "offload",
    "fanout",
    "read",
    "write",
    "edit",
    "patch",
    "glob",
    "grep",
    "push",
    "pull",
    "process_start",
    "process_list",
    "process_get",
    "process_output",
    "process_stop",
    "process_input",
    "process_close_stdin",
    "sync",
    "tunnel",
    "transport_stop",
    "ingress",
    "preview_url",
    "shapes",
    "images",
    "firewall",
    "bandwidth",
    "network_create",
    "network_list",
    "network_show",
    "network_delete",
    "network_attach",
    "network_detach",
    "disk_create",
    "disk_list",
    "disk_show",
    "disk_delete",
    "disk_attach",
    "disk_detach",
    "device_register",
    "device_status",
    "vpn_up",
    "desktop",
    "computer",
    "screenshot",
];

/// Served beyond V2: session release (issue 6) and the docs-page variant's device tools (§2.14).
const EXTRA_TOOLS: [&str; 3] = ["release", "device_attach", "device_detach"];

/// Routed native tools listed in remote mode only (plugins.md §2.4; aliases are not listed).
const NATIVE_TOOLS: [&str; 7] = [
    "native_bash",
    "native_read",
    "native_write",
    "native_edit",
    "native_apply_patch",
    "native_glob",
    "native_grep",
];

fn names(tools: &[Value]) -> BTreeSet<String> {
    tools.iter().map(|t| string(t, "name")).collect()
}

/// Every object in `schema` (the root and any nested one) is closed and every property says
/// what it is for.
fn assert_closed(tool: &str, schema: &Value) {
    if schema["type"] == "object" {
        assert_eq!(
            schema["additionalProperties"], false,
            "{tool}: open object {schema}"
        );
        let props = schema["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("{tool}: no properties map"));
        for (name, prop) in props {
            assert!(
                prop["description"]
                    .as_str()
                    .is_some_and(|d| !d.trim().is_empty()),
                "{tool}.{name} has no description"
            );
            assert_closed(tool, prop);
        }
        for req in schema["required"].as_array().into_iter().flatten() {
            let req = req.as_str().unwrap_or_default();
            assert!(
                props.contains_key(req),
                "{tool}: required {req:?} is not a property"
            );
        }
    }
    if schema.get("items").is_some() {
        assert_closed(tool, &schema["items"]);
    }
}

fn assert_well_formed(tools: &[Value]) {
    for tool in tools {
        let name = string(tool, "name");
        assert!(
            tool["description"].as_str().is_some_and(|d| d.len() > 20),
            "{name}: no useful description"
        );
        assert_eq!(tool["inputSchema"]["type"], "object", "{name}");
        assert_closed(&name, &tool["inputSchema"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tools_list_serves_exactly_the_v2_catalog_and_extras() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut want: BTreeSet<String> = V2_TOOLS
        .iter()
        .chain(EXTRA_TOOLS.iter())
        .map(|n| format!("sandbox_{n}"))
        .collect();
    assert_eq!(want.len(), 57, "the reference lists are unique");

    let mut local = Mcp::start(&env, dir.path(), "{}", &[]).await;
    let tools = local.tools().await;
    let served = names(&tools);
    assert_eq!(tools.len(), served.len(), "a tool is listed twice");
    let missing: Vec<&String> = want.difference(&served).collect();
    let unexpected: Vec<&String> = served.difference(&want).collect();
    assert!(
        missing.is_empty() && unexpected.is_empty(),
        "local mode: missing {missing:?}, unexpected {unexpected:?}"
    );
    assert_well_formed(&tools);
    local.stop().await;

    let remote_dir = tempfile::tempdir().unwrap();
    let mut remote = Mcp::start(&env, remote_dir.path(), r#"{"mode": "remote"}"#, &[]).await;
    let tools = remote.tools().await;
    want.extend(NATIVE_TOOLS.iter().map(|n| n.to_string()));
    let served = names(&tools);
    assert_eq!(tools.len(), served.len(), "a tool is listed twice");
    let missing: Vec<&String> = want.difference(&served).collect();
    let unexpected: Vec<&String> = served.difference(&want).collect();
    assert!(
        missing.is_empty() && unexpected.is_empty(),
        "remote mode: missing {missing:?}, unexpected {unexpected:?}"
    );
    assert_well_formed(&tools);
    remote.stop().await;

    // Listing is free: no sandbox was created by either server.
    assert_eq!(env.requests("createSandbox").await, 0);
    env.shutdown().await;
}

/// `sandbox_info` of an explicit sandbox (never resumes it).
async fn info(mcp: &mut Mcp, id: &str) -> Value {
    let view = mcp.ok("sandbox_info", json!({"sandbox_id": id})).await;
    assert_eq!(view["id"], id, "{view}");
    view
}

fn gone(view: &Value) -> bool {
    view["status"] == "destroyed" || view["status"] == "destroying"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shapes_images_and_explicit_sandboxes() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = Mcp::start(&env, dir.path(), "{}", &[]).await;
    let config = mcp.ok("sandbox_status", json!({})).await;

    // shapes and images list what create accepts, the configured defaults included.
    let shapes = mcp.ok("sandbox_shapes", json!({})).await;
    let shape_names: Vec<&str> = shapes
        .as_array()
        .expect("shape list")
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert!(
        shapes
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["vcpu"].as_u64() > Some(0) && s["mem_mib"].as_u64() > Some(0)),
        "{shapes}"
    );
    assert!(
        shape_names.contains(&config["shape"].as_str().unwrap()),
        "{shapes}"
    );
    let images = mcp.ok("sandbox_images", json!({})).await;
    let image_text = images.to_string();
    for image in [config["rootfs"].as_str().unwrap(), "desktop:1"] {
        assert!(
            image_text.contains(&format!("\"{image}\"")),
            "{image} missing from {images}"
        );
    }

    // create: a named, running sandbox of the requested shape that list and info show.
    let small = shape_names
        .iter()
        .copied()
        .find(|s| *s != config["shape"])
        .unwrap_or(shape_names[0])
        .to_string();
    let created = mcp
        .ok("sandbox_create", json!({"name": "alpha", "shape": small}))
        .await;
    let alpha = string(&created, "sandbox_id");
    let view = info(&mut mcp, &alpha).await;
    assert_eq!(
        (
            view["status"].as_str(),
            view["name"].as_str(),
            view["shape"].as_str()
        ),
        (Some("running"), Some("alpha"), Some(small.as_str())),
        "{view}"
    );
    let listed = mcp.ok("sandbox_list", json!({})).await;
    let row = listed
        .as_array()
        .expect("sandbox list")
        .iter()
        .find(|s| s["id"] == alpha.as_str())
        .cloned();
    assert_eq!(
        row.unwrap_or_else(|| panic!("{alpha} not listed: {listed}"))["status"],
        "running"
    );
    // An explicit sandbox is not the session's.
    assert_eq!(
        mcp.ok("sandbox_status", json!({})).await["sandbox"],
        Value::Null
    );

    // An empty shape is refused before anything is created.
    let before = env.requests("createSandbox").await;
    mcp.refused("sandbox_create", json!({"name": "alpha", "shape": ""}))
        .await;
    assert_eq!(env.requests("createSandbox").await, before);

    // pause/resume with an explicit id.
    let paused = mcp.ok("sandbox_pause", json!({"sandbox_id": alpha})).await;
    assert_eq!(paused["status"], "paused", "{paused}");
    assert_eq!(info(&mut mcp, &alpha).await["status"], "paused");
    let resumed = mcp.ok("sandbox_resume", json!({"sandbox_id": alpha})).await;
    assert_eq!(resumed["status"], "running", "{resumed}");
    let ran = mcp
        .ok(
            "sandbox_exec",
            json!({"sandbox_id": alpha, "command": "hostname; pwd"}),
        )
        .await;
    assert_eq!(ran["stdout"], "alpha\n/root\n");

    // destroy: gone for good; info says so and a second destroy fails.
    let destroyed = mcp
        .ok("sandbox_destroy", json!({"sandbox_id": alpha}))
        .await;
    assert_eq!(destroyed["destroyed"], alpha.as_str(), "{destroyed}");
    assert!(gone(&info(&mut mcp, &alpha).await));
    mcp.refused("sandbox_resume", json!({"sandbox_id": alpha}))
        .await;
    mcp.stop().await;
    assert_eq!(env.settled_live_sandboxes().await, 0);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn session_sandbox_pause_fork_release_and_destroy() {
    let env = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = Mcp::start(&env, dir.path(), "{}", &[]).await;

    // info without an id allocates the session sandbox.
    let first = mcp.ok("sandbox_info", json!({})).await;
    let session = string(&first, "id");
    assert_eq!(first["status"], "running");
    assert_eq!(
        mcp.ok("sandbox_status", json!({})).await["sandbox"],
        session.as_str()
    );
    mcp.ok("sandbox_exec", json!({"command": "echo seed > seed.txt"}))
        .await;

    // pause: info (explicit id) shows it paused; the next session call resumes it.
    let paused = mcp.ok("sandbox_pause", json!({})).await;
    assert_eq!(
        (paused["id"].as_str(), paused["status"].as_str()),
        (Some(session.as_str()), Some("paused")),
        "{paused}"
    );
    assert_eq!(info(&mut mcp, &session).await["status"], "paused");
    let out = mcp
        .ok("sandbox_exec", json!({"command": "cat seed.txt"}))
        .await;
    assert_eq!(out["stdout"], "seed\n");
    assert_eq!(info(&mut mcp, &session).await["status"], "running");
    // resume without an id on a paused session sandbox.
    mcp.ok("sandbox_pause", json!({"sandbox_id": session}))
        .await;
    assert_eq!(
        mcp.ok("sandbox_resume", json!({})).await["status"],
        "running"
    );

    // fork: a new sandbox with the source's files; the source is left running.
    let forked = mcp.ok("sandbox_fork", json!({})).await;
    let fork = string(&forked, "sandbox_id");
    assert_ne!(fork, session);
    assert_eq!(forked["forked_from"], session.as_str());
    let fork_view = info(&mut mcp, &fork).await;
    assert_eq!(fork_view["forked_from"], session.as_str(), "{fork_view}");
    assert_eq!(info(&mut mcp, &session).await["status"], "running");
    let copy = mcp
        .ok(
            "sandbox_exec",
            json!({"sandbox_id": fork, "command": "cat /root/workspace/seed.txt"}),
        )
        .await;
    assert_eq!(copy["stdout"], "seed\n");
    // The fork is independent of its source.
    mcp.ok(
        "sandbox_exec",
        json!({"sandbox_id": fork, "command": "echo fork > /root/workspace/seed.txt"}),
    )
    .await;
    assert_eq!(
        mcp.ok("sandbox_exec", json!({"command": "cat seed.txt"}))
            .await["stdout"],
        "seed\n"
    );

    // release destroys the session sandbox only: the fork persists.
    let released = mcp.ok("sandbox_release", json!({})).await;
    assert_eq!(
        (
            released["sandbox"].as_str(),
            released["destroyed"].as_bool()
        ),
        (Some(session.as_str()), Some(true)),
        "{released}"
    );
    assert!(gone(&info(&mut mcp, &session).await));
    assert_eq!(info(&mut mcp, &fork).await["status"], "running");
    let listed = mcp.ok("sandbox_list", json!({})).await;
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == fork.as_str() && s["status"] == "running"),
        "{listed}"
    );

    // destroy of the session's sandbox drops the binding: status says none, the next call
    // allocates a fresh one.
    let second = string(&mcp.ok("sandbox_info", json!({})).await, "id");
    assert_ne!(second, session);
    let destroyed = mcp
        .ok("sandbox_destroy", json!({"sandbox_id": second}))
        .await;
    assert_eq!(destroyed["destroyed"], second.as_str());
    assert_eq!(
        mcp.ok("sandbox_status", json!({})).await["sandbox"],
        Value::Null
    );
    assert!(gone(&info(&mut mcp, &second).await));
    let third = string(&mcp.ok("sandbox_info", json!({})).await, "id");
    assert!(third != second && third != session);

    // A restarted server does not bring the destroyed binding back: it reattaches the live one.
    mcp.stop().await;
    let mut mcp = Mcp::start(&env, dir.path(), "{}", &[]).await;
    assert_eq!(
        string(&mcp.ok("sandbox_info", json!({})).await, "id"),
        third
    );
    mcp.ok("sandbox_release", json!({})).await;
    mcp.ok("sandbox_destroy", json!({"sandbox_id": fork})).await;
    mcp.stop().await;
    assert_eq!(env.settled_live_sandboxes().await, 0);
    env.shutdown().await;
}
