//! Scenario: every computer-use route on a desktop sandbox, with its validation errors.

use serde_json::json;

use super::fixtures::create_sandbox;
use super::harness::Conformance;

pub async fn computer(c: &Conformance) {
    let sb = create_sandbox(c, json!({"rootfs": "desktop:1", "ingress_enabled": true})).await;
    let on = |op: &str| c.op(op).p("id", &sb);

    on("getComputerScreenSize").send().await.expect(200);
    on("getComputerCursor").send().await.expect(200);
    let r = on("getComputerCursor")
        .q("screen_id", "screen-9")
        .send()
        .await;
    c.want(&r, 400, "screen id out of range");
    let r = on("getComputerCursor")
        .q("screen_id", "screen-3")
        .send()
        .await;
    c.want(&r, 404, "screen not created");
    on("getComputerClipboard").send().await.expect(200);
    on("setComputerClipboard")
        .json(json!({"text": "copied"}))
        .send()
        .await
        .expect(200);
    let r = on("setComputerClipboard")
        .json(json!({}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "text missing");

    on("computerLaunch")
        .json(json!({"application": "mousepad"}))
        .send()
        .await
        .expect(200);
    let r = on("computerLaunch")
        .json(json!({"application": "no-such-app"}))
        .send()
        .await;
    c.want(&r, 400, "unknown application");
    on("computerOpen")
        .json(json!({"target": "https://example.com"}))
        .send()
        .await
        .expect(200);
    let r = on("computerOpen")
        .json(json!({"target": ""}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "empty target");

    on("computerMouseMove")
        .json(json!({"x": 100, "y": 120}))
        .send()
        .await
        .expect(200);
    on("computerMouseMove")
        .json(json!({"x": 99999, "y": -5}))
        .send()
        .await
        .expect(200);
    let r = on("computerMouseMove")
        .json(json!({"x": 1}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "y missing");
    on("computerMouseClick")
        .json(json!({"button": "left", "x": 200, "y": 300, "count": 2}))
        .send()
        .await
        .expect(200);
    on("computerMouseClick")
        .json(json!({}))
        .send()
        .await
        .expect(200);
    let r = on("computerMouseClick").json(json!({"x": 5})).send().await;
    c.want(&r, 400, "x without y");
    on("computerMouseScroll")
        .json(json!({"direction": "down", "amount": 2}))
        .send()
        .await
        .expect(200);
    let r = on("computerMouseScroll")
        .json(json!({"direction": "sideways", "amount": 1}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "unknown direction");
    on("computerMouseDrag")
        .json(json!({"from": {"x": 10, "y": 40}, "to": {"x": 30, "y": 60}}))
        .send()
        .await
        .expect(200);
    let r = on("computerMouseDrag")
        .json(json!({"from": {"x": 10, "y": 40}}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "to missing");
    on("computerMouseDown")
        .json(json!({"button": "left"}))
        .send()
        .await
        .expect(200);
    on("computerMouseUp")
        .json(json!({}))
        .send()
        .await
        .expect(200);
    let r = on("computerMouseDown")
        .json(json!({"button": "thumb"}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "unknown button");

    on("computerKeyboardType")
        .json(json!({"text": "typed", "delay_in_ms": 0}))
        .send()
        .await
        .expect(200);
    let r = on("computerKeyboardType")
        .json(json!({}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "text missing");
    on("computerKeyboardPress")
        .json(json!({"keys": ["ctrl", "a"]}))
        .send()
        .await
        .expect(200);
    let r = on("computerKeyboardPress")
        .json(json!({"keys": ["nokey"]}))
        .send()
        .await;
    c.want(&r, 400, "unknown key");
    on("computerKeyboardDown")
        .json(json!({"keys": ["shift"]}))
        .send()
        .await
        .expect(200);
    on("computerKeyboardUp")
        .json(json!({"keys": ["shift"]}))
        .send()
        .await
        .expect(200);
    let r = on("computerKeyboardDown")
        .json(json!({"keys": []}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "no keys");
    let r = on("computerKeyboardUp")
        .json(json!({"keys": ["bogus-key"]}))
        .send()
        .await;
    c.want(&r, 400, "unknown key");

    let windows = on("listComputerWindows").send().await.expect(200).data();
    assert!(
        windows.as_array().is_some_and(|w| w.len() >= 2),
        "{windows}"
    );
    on("listComputerWindows")
        .q("application", "mousepad")
        .send()
        .await
        .expect(200);
    let wid = windows[0]["id"].as_str().unwrap().to_string();
    let win = |op: &str| c.op(op).p("id", &sb).p("window_id", &wid);
    win("getComputerWindow").send().await.expect(200);
    win("getComputerWindowGeometry").send().await.expect(200);
    win("focusComputerWindow").send().await.expect(200);
    let current = on("getComputerCurrentWindow")
        .send()
        .await
        .expect(200)
        .data();
    assert_eq!(current["id"].as_str(), Some(wid.as_str()));
    win("moveComputerWindow")
        .json(json!({"x": 50, "y": 60}))
        .send()
        .await
        .expect(200);
    let r = win("moveComputerWindow")
        .json(json!({"x": 50}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "y missing");
    win("resizeComputerWindow")
        .json(json!({"width": 400, "height": 300}))
        .send()
        .await
        .expect(200);
    let r = win("resizeComputerWindow")
        .json(json!({"width": 0, "height": 300}))
        .invalid()
        .send()
        .await;
    c.want(&r, 400, "zero width");
    win("maximizeComputerWindow").send().await.expect(200);
    win("restoreComputerWindow").send().await.expect(200);

    let shot = on("getComputerScreenshot").send().await.expect(200);
    assert_eq!(shot.header("content-type").as_deref(), Some("image/png"));
    c.op("getComputerScreenshot")
        .p("id", &sb)
        .q("window_id", &wid)
        .q("x", "1")
        .q("y", "1")
        .q("width", "20")
        .q("height", "10")
        .send()
        .await
        .expect(200);
    let r = on("getComputerScreenshot")
        .q("x", "5000")
        .q("width", "10")
        .send()
        .await;
    c.want(&r, 400, "rectangle outside the screen");
    win("minimizeComputerWindow").send().await.expect(200);
    let r = c
        .op("getComputerScreenshot")
        .p("id", &sb)
        .q("window_id", &wid)
        .send()
        .await;
    c.want(&r, 409, "a minimized window is not viewable");
    win("closeComputerWindow").send().await.expect(200);
    let r = win("getComputerWindow").send().await;
    c.want(&r, 404, "closed window");

    on("listComputerScreens").send().await.expect(200);
    let screen = on("createComputerScreen")
        .json(json!({"width": 800, "height": 600}))
        .send()
        .await
        .expect(200)
        .data();
    let screen_id = screen["screen_id"].as_str().unwrap().to_string();
    on("createComputerScreen").send().await.expect(200);
    let r = on("createComputerScreen")
        .json(json!({"width": 1}))
        .send()
        .await;
    c.want(&r, 400, "screen too small");
    let scr = |op: &str| c.op(op).p("id", &sb).p("screen_id", &screen_id);
    scr("getComputerScreen").send().await.expect(200);
    scr("resizeComputerScreen")
        .json(json!({"width": 1024}))
        .send()
        .await
        .expect(200);
    let r = scr("resizeComputerScreen")
        .json(json!({"height": 5}))
        .send()
        .await;
    c.want(&r, 400, "screen too small");
    scr("connectComputerScreen").send().await.expect(200);
    scr("deleteComputerScreen").send().await.expect(200);
    let r = scr("getComputerScreen").send().await;
    c.want(&r, 404, "deleted screen");
    let r = c
        .op("deleteComputerScreen")
        .p("id", &sb)
        .p("screen_id", "screen-0")
        .send()
        .await;
    c.want(&r, 400, "screen-0 stays");
    let r = c
        .op("getComputerScreen")
        .p("id", &sb)
        .p("screen_id", "screen-x")
        .send()
        .await;
    c.want(&r, 400, "malformed screen id");
    for _ in 0..8 {
        let r = on("createComputerScreen").send().await;
        if r.status == 409 {
            break;
        }
        r.expect(200);
    }
    let r = on("createComputerScreen").send().await;
    c.want(&r, 409, "all eight screens exist");

    // Screenshots are rate limited: 429 with Retry-After (checked by the harness). The shots
    // of a burst are sent at once, so they all arrive inside the one-second window however
    // slowly a loaded machine answers each.
    let mut limited = false;
    for _ in 0..3 {
        let burst = (0..20).map(|_| {
            on("getComputerScreenshot")
                .q("width", "8")
                .q("height", "8")
                .send()
        });
        for r in futures::future::join_all(burst).await {
            if r.status == 429 {
                limited = true;
            } else {
                r.expect(200);
            }
        }
        if limited {
            break;
        }
    }
    assert!(limited, "no 429 within three bursts of 20 screenshots");

    // connect needs ingress.
    let plain = create_sandbox(c, json!({"rootfs": "desktop:1"})).await;
    let r = c
        .op("connectComputerScreen")
        .p("id", &plain)
        .p("screen_id", "screen-0")
        .send()
        .await;
    c.want(&r, 409, "ingress is not enabled");
    c.op("destroySandbox")
        .p("id", &plain)
        .send()
        .await
        .expect(200);
    c.op("destroySandbox").p("id", &sb).send().await.expect(200);
}
