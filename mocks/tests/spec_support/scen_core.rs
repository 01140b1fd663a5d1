//! Scenarios: health, catalog and identity; sandbox lifecycle; exec and files.

use serde_json::json;

use super::fixtures::{create_sandbox, wait_status, Fixtures};
use super::harness::{Auth, Conformance};
use super::samples::SSH_KEY;

pub async fn catalog(c: &Conformance, fx: &Fixtures) {
    for op in ["healthz", "readyz", "listShapes", "listRootfs"] {
        c.op(op).auth(Auth::None).send().await.expect(200);
    }
    c.op("whoami").send().await.expect(200);
    c.op("listHosts").send().await.expect(200);
    for op in ["listShapes", "listHosts"] {
        let r = c.op(op).q("limit", "-1").send().await;
        c.want(&r, 400, "negative limit");
        c.op(op)
            .q("limit", "1")
            .q("offset", "1")
            .send()
            .await
            .expect(200);
    }
    // An OAuth access token works where an API key does.
    let session: serde_json::Value = c
        .http
        .post(format!("{}/_mock/oauth/sessions", c.base))
        .header("X-Api-Key", &c.key)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let access = session["access_token"]
        .as_str()
        .expect("access_token")
        .to_string();
    c.op("whoami")
        .auth(Auth::AccessToken(access.clone()))
        .send()
        .await
        .expect(200);
    c.op("getSandbox")
        .p("id", &fx.sandbox)
        .auth(Auth::AccessToken(access.clone()))
        .send()
        .await
        .expect(200);
    // A JWT in X-Api-Key is refused.
    let r = c.op("whoami").auth(Auth::Key(access)).send().await;
    c.want(&r, 401, "a JWT sent as X-Api-Key");
}

pub async fn sandboxes(c: &Conformance, fx: &Fixtures) {
    let body = json!({"shape": "s-1vcpu-1gb", "name": "conformance-a", "envs": {"GREETING": "hi"},
                      "egress": ["example.com"], "auto_pause_after_seconds": 600});
    let created = c
        .op("createSandbox")
        .json(body.clone())
        .send()
        .await
        .expect(200)
        .data();
    let id = created["id"].as_str().unwrap().to_string();
    let r = c.op("createSandbox").json(body).send().await;
    c.want(&r, 409, "name already in use");
    let r = c
        .op("createSandbox")
        .json(json!({"shape": "s-bogus"}))
        .send()
        .await;
    c.want(&r, 400, "unknown shape");
    let r = c
        .op("createSandbox")
        .json(json!({"rootfs": "devbox:1"}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "shape is required");
    let r = c
        .op("createSandbox")
        .auth(Auth::Key(fx.broke_key.clone()))
        .json(json!({"shape": "s-1vcpu-1gb"}))
        .send()
        .await;
    c.want(&r, 402, "no credit");

    c.op("listSandboxes").send().await.expect(200);
    c.op("listSandboxes")
        .q("status", "running")
        .q("limit", "2")
        .send()
        .await
        .expect(200);
    let r = c.op("listSandboxes").q("status", "sleepy").send().await;
    c.want(&r, 400, "unknown status filter");
    let view = c
        .op("getSandbox")
        .p("id", &id)
        .send()
        .await
        .expect(200)
        .data();
    let ip = view["ip"].as_str().expect("ip").to_string();
    c.op("getSandboxByIp").p("ip", &ip).send().await.expect(200);
    let r = c.op("getSandboxByIp").p("ip", "not-an-ip").send().await;
    c.want(&r, 400, "malformed ip");

    c.op("updateSandbox")
        .p("id", &id)
        .json(json!({"ingress_enabled": true}))
        .send()
        .await
        .expect(200);
    let r = c
        .op("updateSandbox")
        .p("id", &id)
        .json(json!({"auto_pause_after_seconds": 5}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "auto_pause_after_seconds out of range");
    let disk = view["disk_mib"].as_i64().unwrap_or(10240);
    c.op("resizeSandbox")
        .p("id", &id)
        .json(json!({"disk_mib": disk * 2}))
        .send()
        .await
        .expect(200);
    let r = c
        .op("resizeSandbox")
        .p("id", &id)
        .json(json!({"disk_mib": 1}))
        .send()
        .await;
    c.want(&r, 400, "shrinking the disk");
    c.op("addSshPubkeys")
        .p("id", &id)
        .json(json!({"keys": [SSH_KEY]}))
        .send()
        .await
        .expect(200);
    let r = c
        .op("addSshPubkeys")
        .p("id", &id)
        .json(json!({"keys": ["nonsense"]}))
        .send()
        .await;
    c.want(&r, 400, "not a public key");

    let r = c.op("forkSandbox").p("id", &id).send().await;
    c.want(&r, 409, "fork of a running sandbox");
    c.op("pauseSandbox").p("id", &id).send().await.expect(202);
    wait_status(c, &id, "paused").await;
    c.op("pauseSandbox").p("id", &id).send().await.expect(200);
    let r = c
        .op("forkSandbox")
        .p("id", &id)
        .json(json!({"envs": {"1BAD": "x"}}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "invalid env name");
    let child = c
        .op("forkSandbox")
        .p("id", &id)
        .send()
        .await
        .expect(200)
        .data();
    let child = child["id"].as_str().unwrap().to_string();
    let paused_child = c
        .op("forkSandbox")
        .p("id", &id)
        .json(json!({"start_paused": true}))
        .send()
        .await
        .expect(200)
        .data();
    let paused_child = paused_child["id"].as_str().unwrap().to_string();
    c.op("resumeSandbox").p("id", &id).send().await.expect(202);
    wait_status(c, &id, "running").await;
    c.op("resumeSandbox").p("id", &id).send().await.expect(200);

    wait_status(c, &child, "running").await;
    c.op("destroySandbox")
        .p("id", &child)
        .send()
        .await
        .expect(200);
    wait_status(c, &paused_child, "paused").await;
    c.op("destroySandbox")
        .p("id", &paused_child)
        .send()
        .await
        .expect(200);
    c.op("destroySandbox")
        .p("id", &paused_child)
        .send()
        .await
        .expect(200);
    let r = c.op("resumeSandbox").p("id", &paused_child).send().await;
    c.want(&r, 409, "resume of a destroyed sandbox");
    let r = c.op("pauseSandbox").p("id", &paused_child).send().await;
    c.want(&r, 409, "pause of a destroyed sandbox");
    let r = c
        .op("updateSandbox")
        .p("id", &paused_child)
        .json(json!({"ingress_enabled": false}))
        .send()
        .await;
    c.want(&r, 409, "update of a destroyed sandbox");
    let r = c
        .op("resizeSandbox")
        .p("id", &paused_child)
        .json(json!({"disk_mib": 40960}))
        .send()
        .await;
    c.want(&r, 409, "resize of a destroyed sandbox");
    c.op("destroySandbox").p("id", &id).send().await.expect(200);
}

pub async fn exec_and_files(c: &Conformance) {
    let sb = create_sandbox(c, json!({"envs": {"GREETING": "hello"}})).await;
    let script =
        json!({"cmd": "sh", "args": ["-c", "echo out; echo err >&2; echo $GREETING; exit 3"]});
    let r = c
        .op("exec")
        .p("id", &sb)
        .json(script.clone())
        .send()
        .await
        .expect(200);
    assert_eq!(r.data()["result"]["exit_code"], 3, "{}", r.text());
    let r = c
        .op("exec")
        .p("id", &sb)
        .q("stream", "true")
        .json(script.clone())
        .send()
        .await
        .expect(200);
    assert_eq!(r.ndjson().last().unwrap()["exit_code"], 3, "{}", r.text());
    let mut body_stream = script;
    body_stream["stream"] = json!(true);
    let r = c
        .op("exec")
        .p("id", &sb)
        .json(body_stream)
        .send()
        .await
        .expect(200);
    assert!(r
        .header("content-type")
        .unwrap_or_default()
        .starts_with("application/x-ndjson"));
    let r = c
        .op("exec")
        .p("id", &sb)
        .json(json!({"cmd": "true", "env": {"UNDECLARED": "x"}}))
        .send()
        .await;
    c.want(&r, 400, "env key not declared at create");
    let r = c
        .op("exec")
        .p("id", &sb)
        .json(json!({"args": ["x"]}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "cmd is required");
    let missing = c
        .op("exec")
        .p("id", &sb)
        .json(json!({"cmd": "/no/such/binary"}))
        .send()
        .await
        .expect(200);
    assert!(
        missing.data()["result"]["error"].is_string(),
        "{}",
        missing.text()
    );

    let path = "/root/conformance/hello.txt";
    c.op("uploadFile")
        .p("id", &sb)
        .q("path", path)
        .raw("application/octet-stream", "hello\n")
        .send()
        .await
        .expect(200);
    let r = c
        .op("downloadFile")
        .p("id", &sb)
        .q("path", path)
        .send()
        .await
        .expect(200);
    assert_eq!(r.body, b"hello\n");
    for (bad, why) in [
        ("/root", "a directory"),
        ("relative.txt", "a relative path"),
        ("/root/../etc/passwd", "a .. segment"),
    ] {
        let r = c
            .op("downloadFile")
            .p("id", &sb)
            .q("path", bad)
            .send()
            .await;
        c.want(&r, 400, why);
    }
    let r = c
        .op("uploadFile")
        .p("id", &sb)
        .q("path", "/root")
        .raw("application/octet-stream", "x")
        .send()
        .await;
    c.want(&r, 400, "upload onto a directory");
    let r = c
        .op("downloadFile")
        .p("id", &sb)
        .q("path", "/root/nothing-here")
        .send()
        .await;
    c.want(&r, 404, "missing file");
    let r = c
        .op("uploadFile")
        .p("id", &sb)
        .raw("application/octet-stream", "x")
        .send()
        .await;
    c.want(&r, 400, "path query missing");
    c.op("destroySandbox").p("id", &sb).send().await.expect(200);
}
