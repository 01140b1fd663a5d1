//! Scenarios: egress and bandwidth, networks, disks, templates, metrics, access tokens,
//! devices and VPN sessions.

use serde_json::json;

use super::fixtures::{create_sandbox, wait_status, Fixtures};
use super::harness::{Auth, Conformance};
use super::samples::{self, DEVICE_PUBKEY};

pub async fn egress_and_bandwidth(c: &Conformance) {
    let sb = create_sandbox(c, json!({})).await;
    c.op("getEgress").p("id", &sb).send().await.expect(200);
    c.op("setEgress")
        .p("id", &sb)
        .json(json!({"egress": ["example.com", "*.github.com", "10.0.0.0/8:443"]}))
        .send()
        .await
        .expect(200);
    let r = c
        .op("setEgress")
        .p("id", &sb)
        .json(json!({"egress": ["bad rule!"]}))
        .send()
        .await;
    c.want(&r, 400, "malformed egress rule");
    c.op("getBandwidth").p("id", &sb).send().await.expect(200);
    c.op("rechargeBandwidth")
        .p("id", &sb)
        .json(json!({"add_bytes": 4096}))
        .send()
        .await
        .expect(200);
    let r = c
        .op("rechargeBandwidth")
        .p("id", &sb)
        .json(json!({"add_bytes": 0}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "add_bytes must be positive");
    c.op("destroySandbox").p("id", &sb).send().await.expect(200);
    wait_status(c, &sb, "destroyed").await;
    let r = c
        .op("setEgress")
        .p("id", &sb)
        .json(json!({"egress": ["example.com"]}))
        .send()
        .await;
    c.want(&r, 409, "egress of a destroyed sandbox");
    let r = c
        .op("rechargeBandwidth")
        .p("id", &sb)
        .json(json!({"add_bytes": 1}))
        .send()
        .await;
    c.want(&r, 409, "recharge of a destroyed sandbox");
    c.op("getEgress").p("id", &sb).send().await.expect(200);
}

pub async fn networks(c: &Conformance, fx: &Fixtures) {
    let sb = create_sandbox(c, json!({})).await;
    let net = c
        .op("createNetwork")
        .json(json!({"name": "conformance-net"}))
        .send()
        .await
        .expect(200)
        .data();
    let net_id = net["id"].as_str().unwrap().to_string();
    let r = c
        .op("createNetwork")
        .json(json!({"name": "conformance-net"}))
        .send()
        .await;
    c.want(&r, 409, "network name in use");
    let r = c
        .op("createNetwork")
        .json(json!({"name": ""}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "empty name");
    let r = c
        .op("createNetwork")
        .auth(Auth::Key(fx.broke_key.clone()))
        .json(json!({"name": "x"}))
        .send()
        .await;
    c.want(&r, 402, "no credit");
    c.op("listNetworks").send().await.expect(200);
    let r = c.op("listNetworks").q("offset", "-3").send().await;
    c.want(&r, 400, "negative offset");
    c.op("getNetwork")
        .p("network", &net_id)
        .send()
        .await
        .expect(200);
    c.op("getNetwork")
        .p("network", "conformance-net")
        .send()
        .await
        .expect(200);

    c.op("attachNetwork")
        .p("id", &sb)
        .json(json!({"id": net_id}))
        .send()
        .await
        .expect(200);
    let r = c
        .op("attachNetwork")
        .p("id", &sb)
        .json(json!({"id": "net-nope"}))
        .send()
        .await;
    c.want(&r, 404, "unknown network");
    let r = c
        .op("attachNetwork")
        .p("id", &sb)
        .json(json!({}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "network id missing");
    let gone = create_sandbox(c, json!({})).await;
    c.op("destroySandbox")
        .p("id", &gone)
        .send()
        .await
        .expect(200);
    wait_status(c, &gone, "destroyed").await;
    let r = c
        .op("attachNetwork")
        .p("id", &gone)
        .json(json!({"id": net_id}))
        .send()
        .await;
    c.want(&r, 409, "attach to a destroyed sandbox");
    let r = c.op("deleteNetwork").p("network", &net_id).send().await;
    c.want(&r, 409, "network has members");
    c.op("detachNetwork")
        .p("id", &sb)
        .p("network", &net_id)
        .send()
        .await
        .expect(200);
    c.op("deleteNetwork")
        .p("network", &net_id)
        .send()
        .await
        .expect(200);
    c.op("destroySandbox").p("id", &sb).send().await.expect(200);
}

pub async fn disks(c: &Conformance, fx: &Fixtures) {
    let sb = create_sandbox(c, json!({})).await;
    let mut body = samples::body("createDisk").unwrap();
    body["name"] = json!("conformance-disk");
    let disk = c
        .op("createDisk")
        .json(body.clone())
        .send()
        .await
        .expect(200)
        .data();
    let disk_id = disk["id"].as_str().unwrap().to_string();
    let r = c.op("createDisk").json(body.clone()).send().await;
    c.want(&r, 409, "disk name in use");
    let mut bad = body.clone();
    bad["name"] = json!("Bad Name");
    let r = c.op("createDisk").json(bad).invalid().send().await;
    c.want(&r, 400, "invalid disk name");
    let r = c
        .op("createDisk")
        .auth(Auth::Key(fx.broke_key.clone()))
        .json(body)
        .send()
        .await;
    c.want(&r, 402, "no credit");
    c.op("listDisks").send().await.expect(200);
    let r = c.op("listDisks").q("limit", "x").send().await;
    c.want(&r, 400, "non-integer limit");
    c.op("getDisk").p("disk", &disk_id).send().await.expect(200);
    c.op("getDisk")
        .p("disk", "conformance-disk")
        .send()
        .await
        .expect(200);
    c.op("updateDiskCredentials")
        .p("disk", &disk_id)
        .json(samples::body("updateDiskCredentials").unwrap())
        .send()
        .await
        .expect(200);
    let r = c
        .op("updateDiskCredentials")
        .p("disk", &disk_id)
        .json(json!({"credentials": {"access_key": ""}}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "incomplete credentials");

    let mount = "/workspace/conformance";
    c.op("attachDisk")
        .p("id", &sb)
        .json(json!({"disk_id": disk_id, "mount_path": mount}))
        .send()
        .await
        .expect(200);
    let r = c
        .op("attachDisk")
        .p("id", &sb)
        .json(json!({"disk_id": disk_id, "mount_path": "relative"}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "relative mount path");
    let r = c
        .op("attachDisk")
        .p("id", &fx.paused)
        .json(json!({"disk_id": disk_id, "mount_path": mount}))
        .send()
        .await;
    c.want(&r, 409, "attach to a paused sandbox");
    c.op("listSandboxDisks")
        .p("id", &sb)
        .send()
        .await
        .expect(200);
    let r = c
        .op("listSandboxDisks")
        .p("id", &sb)
        .q("limit", "-1")
        .send()
        .await;
    c.want(&r, 400, "negative limit");
    let r = c.op("deleteDisk").p("disk", &disk_id).send().await;
    c.want(&r, 409, "disk is attached");
    let r = c
        .op("detachDisk")
        .p("id", &sb)
        .p("disk_id", &disk_id)
        .q("mount_path", "relative")
        .send()
        .await;
    c.want(&r, 400, "relative mount_path");
    c.op("detachDisk")
        .p("id", &sb)
        .p("disk_id", &disk_id)
        .q("mount_path", mount)
        .send()
        .await
        .expect(200);
    c.op("deleteDisk")
        .p("disk", &disk_id)
        .send()
        .await
        .expect(200);
    c.op("destroySandbox").p("id", &sb).send().await.expect(200);
}

pub async fn templates(c: &Conformance, fx: &Fixtures) {
    let dockerfile = "FROM nodeops/sandbox:debian\nRUN echo conformance\nENV A=b\n";
    let tpl = c
        .op("createTemplate")
        .json(json!({"name": "conformance-tpl", "dockerfile": dockerfile}))
        .send()
        .await
        .expect(200)
        .data();
    let tpl_id = tpl["id"].as_str().unwrap().to_string();
    // Following the log ends when the build ends.
    let follow = c
        .op("getTemplateLogs")
        .p("template", &tpl_id)
        .q("follow", "true")
        .send()
        .await
        .expect(200);
    assert_eq!(
        follow.ndjson().last().unwrap()["final"],
        true,
        "{}",
        follow.text()
    );
    let plain = c
        .op("getTemplateLogs")
        .p("template", &tpl_id)
        .send()
        .await
        .expect(200);
    assert!(plain
        .header("content-type")
        .unwrap_or_default()
        .starts_with("text/plain"));
    c.op("getTemplateLogs")
        .p("template", &tpl_id)
        .q("attempt", "1")
        .send()
        .await
        .expect(200);
    let r = c
        .op("getTemplateLogs")
        .p("template", &tpl_id)
        .q("attempt", "0")
        .send()
        .await;
    c.want(&r, 400, "attempt 0");
    c.op("listTemplates").send().await.expect(200);
    let r = c.op("listTemplates").q("limit", "-1").send().await;
    c.want(&r, 400, "negative limit");
    c.op("getTemplate")
        .p("template", &tpl_id)
        .q("include", "dockerfile")
        .send()
        .await
        .expect(200);
    c.op("getTemplate")
        .p("template", "conformance-tpl")
        .send()
        .await
        .expect(200);
    let r = c
        .op("getTemplate")
        .p("template", &tpl_id)
        .q("include", "everything")
        .send()
        .await;
    c.want(&r, 400, "unknown include");
    let r = c
        .op("createTemplate")
        .json(
            json!({"name": "bad-tpl", "dockerfile": "FROM nodeops/sandbox:debian\nCOPY . /app\n"}),
        )
        .send()
        .await;
    c.want(&r, 400, "COPY is refused");
    let r = c
        .op("createTemplate")
        .auth(Auth::Key(fx.broke_key.clone()))
        .json(json!({"name": "broke-tpl", "dockerfile": dockerfile}))
        .send()
        .await;
    c.want(&r, 402, "no credit");
    c.op("deleteTemplate")
        .p("template", &tpl_id)
        .send()
        .await
        .expect(200);

    // At most two builds run at once per account: a third is 409 while two slow ones build.
    let slow = format!("FROM nodeops/sandbox:debian\n{}", "RUN true\n".repeat(400));
    let mut building = Vec::new();
    for name in ["slow-one", "slow-two"] {
        let t = c
            .op("createTemplate")
            .json(json!({"name": name, "dockerfile": slow}))
            .send()
            .await
            .expect(200)
            .data();
        building.push(t["id"].as_str().unwrap().to_string());
    }
    let r = c
        .op("createTemplate")
        .json(json!({"name": "slow-three", "dockerfile": dockerfile}))
        .send()
        .await;
    c.want(&r, 409, "a third concurrent build");
    for id in building {
        c.op("deleteTemplate")
            .p("template", &id)
            .send()
            .await
            .expect(200);
    }
}

pub async fn metrics(c: &Conformance, fx: &Fixtures) {
    c.op("getSandboxMetrics")
        .p("id", &fx.sandbox)
        .send()
        .await
        .expect(200);
    c.op("getUsageMetrics").send().await.expect(200);
    c.op("getUsageTimeseries").send().await.expect(200);
    for metric in ["cpu_seconds", "sandboxes_running", "exec_total"] {
        c.op("getUsageTimeseries")
            .q("metric", metric)
            .q("step_seconds", "600")
            .send()
            .await
            .expect(200);
    }
    let r = c
        .op("getUsageTimeseries")
        .q("step_seconds", "1")
        .send()
        .await;
    c.want(&r, 400, "step below 10 s");
    let r = c.op("getUsageTimeseries").q("metric", "bogus").send().await;
    c.want(&r, 400, "unknown metric");
}

pub async fn access_tokens(c: &Conformance) {
    let sb = create_sandbox(c, json!({})).await;
    c.op("getAccessToken").p("id", &sb).send().await.expect(200);
    let r = c.op("rotateAccessToken").p("id", &sb).send().await;
    c.want(&r, 404, "rotate without a token");
    c.op("createAccessToken")
        .p("id", &sb)
        .send()
        .await
        .expect(200);
    let r = c.op("createAccessToken").p("id", &sb).send().await;
    c.want(&r, 409, "token exists");
    c.op("getAccessToken").p("id", &sb).send().await.expect(200);
    c.op("rotateAccessToken")
        .p("id", &sb)
        .send()
        .await
        .expect(200);
    c.op("revokeAccessToken")
        .p("id", &sb)
        .send()
        .await
        .expect(200);
    c.op("revokeAccessToken")
        .p("id", &sb)
        .send()
        .await
        .expect(200);
    c.op("destroySandbox").p("id", &sb).send().await.expect(200);
    wait_status(c, &sb, "destroyed").await;
}

pub async fn devices(c: &Conformance) {
    let body = json!({"name": "conformance-laptop", "pubkey": DEVICE_PUBKEY, "hostname": "laptop", "os": "linux"});
    let device = c
        .op("registerDevice")
        .json(body.clone())
        .send()
        .await
        .expect(200)
        .data();
    let dev = device["id"].as_str().unwrap().to_string();
    let r = c.op("registerDevice").json(body).send().await;
    c.want(&r, 409, "device name or key in use");
    let r = c
        .op("registerDevice")
        .json(json!({"name": "x", "pubkey": "short"}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "malformed public key");
    c.op("listDevices").send().await.expect(200);
    let r = c.op("listDevices").q("limit", "-2").send().await;
    c.want(&r, 400, "negative limit");
    c.op("getDevice")
        .p("device_id", &dev)
        .send()
        .await
        .expect(200);

    let net = c
        .op("createNetwork")
        .json(json!({"name": "conformance-vpn"}))
        .send()
        .await
        .expect(200)
        .data();
    let net_id = net["id"].as_str().unwrap().to_string();
    c.op("attachDeviceNetwork")
        .p("device_id", &dev)
        .json(json!({"network_id": "conformance-vpn"}))
        .send()
        .await
        .expect(200);
    let r = c
        .op("attachDeviceNetwork")
        .p("device_id", &dev)
        .json(json!({"network_id": "net-nope"}))
        .send()
        .await;
    c.want(&r, 404, "unknown network");
    let r = c
        .op("attachDeviceNetwork")
        .p("device_id", &dev)
        .json(json!({}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "network_id missing");
    c.op("listDeviceNetworks")
        .p("device_id", &dev)
        .send()
        .await
        .expect(200);
    let session = c
        .op("openDeviceSession")
        .p("device_id", &dev)
        .send()
        .await
        .expect(200)
        .data();
    let session_id = session["session_id"].as_str().unwrap().to_string();
    c.op("renewDeviceSession")
        .p("device_id", &dev)
        .p("session_id", &session_id)
        .send()
        .await
        .expect(200);
    c.op("closeDeviceSession")
        .p("device_id", &dev)
        .p("session_id", &session_id)
        .send()
        .await
        .expect(200);
    let r = c
        .op("renewDeviceSession")
        .p("device_id", &dev)
        .p("session_id", &session_id)
        .send()
        .await;
    c.want(&r, 404, "renew of a closed session");
    let r = c
        .op("detachDeviceNetwork")
        .p("device_id", &dev)
        .p("network", "net-nope")
        .send()
        .await;
    c.want(&r, 404, "detach of an unknown network");
    c.op("detachDeviceNetwork")
        .p("device_id", &dev)
        .p("network", &net_id)
        .send()
        .await
        .expect(200);
    c.op("revokeDevice")
        .p("device_id", &dev)
        .send()
        .await
        .expect(200);
    let r = c.op("getDevice").p("device_id", &dev).send().await;
    c.want(&r, 404, "revoked device");
    c.op("deleteNetwork")
        .p("network", &net_id)
        .send()
        .await
        .expect(200);
}
