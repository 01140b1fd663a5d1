//! Computer-use routes (E64–E97) against an in-process emulator over real sockets.

use std::io::Cursor;
use std::time::Duration;

use createos_mock::{IsolationMode, MockConfig, MockHandle};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

/// Upper bound of any single wait in these tests (a hung emulator fails, not hangs).
const STEP: Duration = Duration::from_secs(20);

struct Env {
    mock: MockHandle,
    http: reqwest::Client,
    key: String,
}

struct Reply {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// `data` of a success envelope (asserting 200).
    fn data(&self) -> Value {
        let v = self.json();
        assert_eq!(self.status, StatusCode::OK, "unexpected status, body {v}");
        assert_eq!(v["status"], "success", "{v}");
        v["data"].clone()
    }

    /// `data` of a fail envelope with the given status.
    fn fail(&self, status: StatusCode) -> Value {
        let v = self.json();
        assert_eq!(self.status, status, "body {v}");
        assert_eq!(v["status"], "fail", "{v}");
        v["data"].clone()
    }

    fn assert_ok(&self) {
        assert_eq!(self.data(), json!({"ok": true}));
    }
}

impl Env {
    async fn start() -> Env {
        let mock = createos_mock::start(MockConfig::default().isolation(IsolationMode::None))
            .await
            .expect("mock starts");
        let key = mock.api_key();
        Env {
            mock,
            http: reqwest::Client::new(),
            key,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.mock.base_url())
    }

    async fn send_as(&self, key: &str, method: Method, path: &str, body: Option<Value>) -> Reply {
        let mut req = self
            .http
            .request(method.clone(), self.url(path))
            .header("X-Api-Key", key);
        req = match body {
            Some(b) => req.json(&b),
            None if method == Method::POST || method == Method::PUT => {
                req.header("Content-Length", "0")
            }
            None => req,
        };
        let resp = tokio::time::timeout(STEP, req.send())
            .await
            .expect("request in time")
            .expect("request sent");
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = resp.bytes().await.expect("body").to_vec();
        Reply {
            status,
            headers,
            body,
        }
    }

    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> Reply {
        self.send_as(&self.key, method, path, body).await
    }

    async fn get(&self, path: &str) -> Reply {
        self.send(Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: Value) -> Reply {
        self.send(Method::POST, path, Some(body)).await
    }

    async fn create(&self, body: Value) -> String {
        let mut req = json!({"shape": "s-1vcpu-1gb"});
        for (k, v) in body.as_object().expect("object") {
            req[k] = v.clone();
        }
        let data = self.post("/v1/sandboxes", req).await.data();
        assert_eq!(data["status"], "running", "{data}");
        data["id"].as_str().expect("id").to_string()
    }

    async fn desktop(&self) -> String {
        self.create(json!({"rootfs": "desktop:1"})).await
    }

    /// Ids of the windows of a screen (`query` e.g. `?screen_id=screen-1`).
    async fn window_ids(&self, id: &str, query: &str) -> Vec<String> {
        let data = self
            .get(&format!("/v1/sandboxes/{id}/computer/windows{query}"))
            .await
            .data();
        data.as_array()
            .expect("bare array")
            .iter()
            .map(|w| w["id"].as_str().unwrap().to_string())
            .collect()
    }

    async fn launch(&self, id: &str, app: &str, uri: Option<&str>) -> Value {
        let mut body = json!({"application": app});
        if let Some(u) = uri {
            body["uri"] = json!(u);
        }
        self.post(&format!("/v1/sandboxes/{id}/computer/launch"), body)
            .await
            .assert_ok();
        self.get(&format!("/v1/sandboxes/{id}/computer/windows/current"))
            .await
            .data()
    }

    async fn press(&self, id: &str, keys: Value) -> Reply {
        self.post(
            &format!("/v1/sandboxes/{id}/computer/keyboard/press"),
            json!({ "keys": keys }),
        )
        .await
    }

    async fn geometry(&self, id: &str, window: &str) -> Value {
        self.get(&format!(
            "/v1/sandboxes/{id}/computer/windows/{window}/geometry"
        ))
        .await
        .data()
    }

    async fn screenshot(&self, id: &str, query: &str) -> Reply {
        self.send(
            Method::GET,
            &format!("/v1/sandboxes/{id}/computer/screenshot{query}"),
            None,
        )
        .await
    }
}

/// (width, height, RGB pixels) of a PNG.
fn decode_png(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let decoder = png::Decoder::new(Cursor::new(bytes));
    let mut reader = decoder.read_info().expect("valid PNG header");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("valid PNG data");
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

fn png_of(reply: &Reply) -> (u32, u32, Vec<u8>) {
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(reply.headers["content-type"], "image/png");
    decode_png(&reply.body)
}

#[tokio::test]
async fn non_desktop_unknown_and_foreign_sandboxes_are_refused() {
    let env = Env::start().await;
    let devbox = env.create(json!({"rootfs": "devbox:1"})).await;
    let r = env
        .get(&format!("/v1/sandboxes/{devbox}/computer/screen"))
        .await;
    assert_eq!(r.status, StatusCode::NOT_IMPLEMENTED);
    let v = r.json();
    assert_eq!(v["status"], "error");
    assert_eq!(v["code"], 501);
    assert!(v["message"].as_str().unwrap().contains("desktop:1"), "{v}");

    let r = env
        .get("/v1/sandboxes/sb-01JZZZZZZZZZZZZZZZZZZZZZZZ/computer/cursor")
        .await;
    assert_eq!(
        r.fail(StatusCode::NOT_FOUND),
        json!({"sandbox": "sandbox not found"})
    );

    let desktop = env.desktop().await;
    let other: Value = env
        .http
        .post(env.url("/_mock/tenants"))
        .header("X-Api-Key", &env.key)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let other_key = other["api_key"].as_str().expect("api_key");
    let r = env
        .send_as(
            other_key,
            Method::GET,
            &format!("/v1/sandboxes/{desktop}/computer/screen"),
            None,
        )
        .await;
    assert_eq!(
        r.fail(StatusCode::NOT_FOUND)["sandbox"],
        "sandbox not found"
    );
    env.mock.shutdown().await;
}

#[tokio::test]
async fn delegated_token_reaches_only_its_own_desktop() {
    let env = Env::start().await;
    let a = env.desktop().await;
    let b = env.desktop().await;
    let token = env
        .post(&format!("/v1/sandboxes/{a}/access-token"), json!({}))
        .await
        .data()["token"]
        .as_str()
        .expect("token")
        .to_string();
    let r = env
        .send_as(
            &token,
            Method::GET,
            &format!("/v1/sandboxes/{a}/computer/cursor"),
            None,
        )
        .await;
    assert_eq!(r.data(), json!({"x": 640, "y": 400}));
    let r = env
        .send_as(
            &token,
            Method::GET,
            &format!("/v1/sandboxes/{b}/computer/cursor"),
            None,
        )
        .await;
    r.fail(StatusCode::NOT_FOUND);
    env.mock.shutdown().await;
}

#[tokio::test]
async fn desktop_is_unavailable_while_starting_or_not_running() {
    let env = Env::start().await;
    env.mock
        .state()
        .computer
        .set_startup_delay(Duration::from_secs(3600));
    let id = env.desktop().await;
    let r = env
        .get(&format!("/v1/sandboxes/{id}/computer/screen"))
        .await;
    assert_eq!(r.fail(StatusCode::CONFLICT)["code"], "desktop_unavailable");
    env.mock.state().computer.set_startup_delay(Duration::ZERO);
    assert_eq!(
        env.get(&format!("/v1/sandboxes/{id}/computer/screen"))
            .await
            .data(),
        json!({"width": 1280, "height": 800})
    );

    let r = env
        .send(Method::POST, &format!("/v1/sandboxes/{id}/pause"), None)
        .await;
    assert!(
        r.status.is_success(),
        "pause: {}",
        String::from_utf8_lossy(&r.body)
    );
    let data = env
        .get(&format!("/v1/sandboxes/{id}/computer/screen"))
        .await
        .fail(StatusCode::CONFLICT);
    assert_eq!(data["code"], "desktop_unavailable");
    assert_eq!(data["sandbox"], "sandbox is not running");
    env.mock.shutdown().await;
}

#[tokio::test]
async fn pointer_moves_and_clamps() {
    let env = Env::start().await;
    let id = env.desktop().await;
    let c = |s: &str| format!("/v1/sandboxes/{id}/computer/{s}");
    assert_eq!(
        env.get(&c("cursor")).await.data(),
        json!({"x": 640, "y": 400})
    );
    env.post(&c("mouse/move"), json!({"x": 100, "y": 200}))
        .await
        .assert_ok();
    assert_eq!(
        env.get(&c("cursor")).await.data(),
        json!({"x": 100, "y": 200})
    );
    // Off-screen points are clamped to the edge, as X does with the real pointer.
    env.post(&c("mouse/move"), json!({"x": 5000, "y": -20}))
        .await
        .assert_ok();
    assert_eq!(
        env.get(&c("cursor")).await.data(),
        json!({"x": 1279, "y": 0})
    );
    env.post(
        &c("mouse/click"),
        json!({"x": 10, "y": 700, "button": "right", "count": 2}),
    )
    .await
    .assert_ok();
    assert_eq!(
        env.get(&c("cursor")).await.data(),
        json!({"x": 10, "y": 700})
    );

    assert!(env
        .post(&c("mouse/move"), json!({"x": 1}))
        .await
        .fail(StatusCode::BAD_REQUEST)["y"]
        .is_string());
    env.post(&c("mouse/click"), json!({"count": 0}))
        .await
        .assert_ok();
    assert!(env
        .post(&c("mouse/click"), json!({"count": 11}))
        .await
        .fail(StatusCode::BAD_REQUEST)["count"]
        .is_string());
    assert!(env
        .post(&c("mouse/click"), json!({"button": "thumb"}))
        .await
        .fail(StatusCode::BAD_REQUEST)["button"]
        .is_string());
    assert!(env
        .post(&c("mouse/scroll"), json!({"direction": "sideways"}))
        .await
        .fail(StatusCode::BAD_REQUEST)["direction"]
        .is_string());
    let r = env
        .http
        .post(env.url(&c("mouse/move")))
        .header("X-Api-Key", &env.key)
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    env.mock.shutdown().await;
}

#[tokio::test]
async fn windows_are_launched_listed_and_managed() {
    let env = Env::start().await;
    let id = env.desktop().await;
    let c = |s: &str| format!("/v1/sandboxes/{id}/computer/{s}");
    assert_eq!(env.get(&c("windows")).await.data(), json!([]));
    env.get(&c("windows/current"))
        .await
        .fail(StatusCode::NOT_FOUND);

    let browser = env
        .launch(&id, "firefox", Some("https://example.com/"))
        .await;
    assert_eq!(
        browser["title"],
        "https://example.com/ \u{2014} Mozilla Firefox"
    );
    assert_eq!(browser["application"], "firefox");
    let term = env.launch(&id, "xfce4-terminal", None).await;
    assert!(
        term["title"]
            .as_str()
            .unwrap()
            .starts_with("Terminal - root@"),
        "{term}"
    );
    assert_eq!(term["application"], "Xfce4-terminal");
    let (bid, tid) = (
        browser["id"].as_str().unwrap(),
        term["id"].as_str().unwrap(),
    );
    assert_ne!(bid, tid);
    assert_eq!(
        env.window_ids(&id, "").await,
        vec![bid.to_string(), tid.to_string()]
    );
    assert_eq!(
        env.window_ids(&id, "?application=firefox").await,
        vec![bid.to_string()]
    );
    assert_eq!(
        env.get(&c(&format!("windows/{bid}"))).await.data()["title"],
        browser["title"]
    );
    env.get(&c("windows/0xdeadbeef"))
        .await
        .fail(StatusCode::NOT_FOUND);
    let r = env
        .post(&c("launch"), json!({"application": "notepad.exe"}))
        .await;
    assert_eq!(
        r.fail(StatusCode::BAD_REQUEST),
        json!({"application": "unknown application \"notepad.exe\""})
    );
    env.post(&c("launch"), json!({}))
        .await
        .fail(StatusCode::BAD_REQUEST);

    env.post(
        &c(&format!("windows/{tid}/move")),
        json!({"x": 300, "y": 200}),
    )
    .await
    .assert_ok();
    env.post(
        &c(&format!("windows/{tid}/resize")),
        json!({"width": 500, "height": 300}),
    )
    .await
    .assert_ok();
    let g = env.geometry(&id, tid).await;
    assert_eq!(
        g,
        json!({"id": tid, "x": 300, "y": 200, "width": 500, "height": 300, "screen": 0})
    );

    env.send(Method::POST, &c(&format!("windows/{tid}/maximize")), None)
        .await
        .assert_ok();
    let g = env.geometry(&id, tid).await;
    assert_eq!(
        (
            g["x"].as_i64(),
            g["y"].as_i64(),
            g["width"].as_i64(),
            g["height"].as_i64()
        ),
        (Some(0), Some(28), Some(1280), Some(772))
    );
    env.send(Method::POST, &c(&format!("windows/{tid}/restore")), None)
        .await
        .assert_ok();
    assert_eq!(env.geometry(&id, tid).await["width"], 500);

    env.send(Method::POST, &c(&format!("windows/{tid}/minimize")), None)
        .await
        .assert_ok();
    assert_eq!(env.get(&c("windows/current")).await.data()["id"], bid);
    env.send(Method::POST, &c(&format!("windows/{tid}/focus")), None)
        .await
        .assert_ok();
    assert_eq!(env.get(&c("windows/current")).await.data()["id"], tid);

    env.send(Method::DELETE, &c(&format!("windows/{tid}")), None)
        .await
        .assert_ok();
    assert_eq!(env.window_ids(&id, "").await, vec![bid.to_string()]);
    assert_eq!(env.get(&c("windows/current")).await.data()["id"], bid);
    env.send(Method::DELETE, &c(&format!("windows/{tid}")), None)
        .await
        .fail(StatusCode::NOT_FOUND);
    env.mock.shutdown().await;
}

#[tokio::test]
async fn open_uses_the_sandbox_files() {
    let env = Env::start().await;
    let id = env.desktop().await;
    let c = |s: &str| format!("/v1/sandboxes/{id}/computer/{s}");
    let sandbox = env.mock.state().sandboxes.get(&id).expect("sandbox");
    let host = sandbox
        .runtime()
        .host_path("/root/notes.txt")
        .expect("host path");
    std::fs::create_dir_all(host.parent().unwrap()).unwrap();
    std::fs::write(&host, "first line\nsecond line\n").unwrap();

    env.post(&c("open"), json!({"target": "/root/notes.txt"}))
        .await
        .assert_ok();
    assert_eq!(
        env.get(&c("windows/current")).await.data()["title"],
        "notes.txt - Mousepad"
    );
    env.post(&c("open"), json!({"target": "/root"}))
        .await
        .assert_ok();
    assert_eq!(
        env.get(&c("windows/current")).await.data()["title"],
        "root - File Manager"
    );
    env.post(&c("open"), json!({"target": "https://example.org"}))
        .await
        .assert_ok();
    assert_eq!(
        env.get(&c("windows/current")).await.data()["title"],
        "https://example.org \u{2014} Mozilla Firefox"
    );

    let r = env
        .post(&c("open"), json!({"target": "/root/missing.txt"}))
        .await;
    assert_eq!(r.fail(StatusCode::CONFLICT)["code"], "desktop_unavailable");
    assert!(env
        .post(&c("open"), json!({"target": "notes.txt"}))
        .await
        .fail(StatusCode::BAD_REQUEST)["target"]
        .is_string());
    env.post(&c("open"), json!({"target": "mailto:a@b.c"}))
        .await
        .fail(StatusCode::CONFLICT);
    assert_eq!(env.window_ids(&id, "").await.len(), 3);
    env.mock.shutdown().await;
}

#[tokio::test]
async fn keyboard_edits_text_and_clipboard() {
    let env = Env::start().await;
    let id = env.desktop().await;
    let c = |s: &str| format!("/v1/sandboxes/{id}/computer/{s}");

    assert_eq!(env.get(&c("clipboard")).await.data(), json!({"text": ""}));
    env.send(Method::PUT, &c("clipboard"), Some(json!({"text": "XY"})))
        .await
        .assert_ok();
    assert_eq!(env.get(&c("clipboard")).await.data(), json!({"text": "XY"}));

    env.launch(&id, "mousepad", None).await;
    env.post(
        &c("keyboard/type"),
        json!({"text": "abc", "delay_in_ms": 1}),
    )
    .await
    .assert_ok();
    env.press(&id, json!(["ctrl", "v"])).await.assert_ok();
    env.press(&id, json!(["shift", "1"])).await.assert_ok();
    env.press(&id, json!(["ctrl", "a"])).await.assert_ok();
    env.press(&id, json!(["ctrl", "c"])).await.assert_ok();
    assert_eq!(env.get(&c("clipboard")).await.data()["text"], "abcXY!");

    // A modifier held with keyboard/down applies to later presses until keyboard/up.
    env.press(&id, json!(["BackSpace"])).await.assert_ok();
    env.post(&c("keyboard/type"), json!({"text": "new"}))
        .await
        .assert_ok();
    env.post(&c("keyboard/down"), json!({"keys": ["ctrl"]}))
        .await
        .assert_ok();
    env.press(&id, json!(["a"])).await.assert_ok();
    env.press(&id, json!(["c"])).await.assert_ok();
    env.post(&c("keyboard/up"), json!({"keys": ["ctrl"]}))
        .await
        .assert_ok();
    assert_eq!(env.get(&c("clipboard")).await.data()["text"], "new");
    env.press(&id, json!(["c"])).await.assert_ok();
    assert_eq!(
        env.get(&c("clipboard")).await.data()["text"],
        "new",
        "ctrl released: plain c types"
    );

    assert!(env
        .press(&id, json!(["ctrl", "bogus"]))
        .await
        .fail(StatusCode::BAD_REQUEST)["keys"]
        .as_str()
        .unwrap()
        .contains("bogus"));
    env.press(&id, json!([]))
        .await
        .fail(StatusCode::BAD_REQUEST);

    // Browser: ctrl+l, type a host, Return navigates and retitles the window.
    let browser = env.launch(&id, "firefox", None).await;
    env.press(&id, json!(["ctrl", "l"])).await.assert_ok();
    env.post(&c("keyboard/type"), json!({"text": "example.net\n"}))
        .await
        .assert_ok();
    let now = env
        .get(&c(&format!("windows/{}", browser["id"].as_str().unwrap())))
        .await
        .data();
    assert_eq!(now["title"], "https://example.net \u{2014} Mozilla Firefox");
    env.mock.shutdown().await;
}

#[tokio::test]
async fn mouse_drives_the_window_manager() {
    let env = Env::start().await;
    let id = env.desktop().await;
    let c = |s: &str| format!("/v1/sandboxes/{id}/computer/{s}");
    let w = env.launch(&id, "mousepad", None).await;
    let wid = w["id"].as_str().unwrap();
    let g = env.geometry(&id, wid).await;
    let (x, y) = (g["x"].as_i64().unwrap(), g["y"].as_i64().unwrap());

    // Drag by the title bar moves the window by the same delta.
    env.post(
        &c("mouse/drag"),
        json!({"from": {"x": x + 30, "y": y + 10}, "to": {"x": x + 130, "y": y + 60}}),
    )
    .await
    .assert_ok();
    let g = env.geometry(&id, wid).await;
    assert_eq!(
        (g["x"].as_i64().unwrap(), g["y"].as_i64().unwrap()),
        (x + 100, y + 50)
    );
    assert_eq!(
        env.get(&c("cursor")).await.data(),
        json!({"x": x + 130, "y": y + 60})
    );

    // The same with explicit down / move / up.
    env.post(&c("mouse/down"), json!({"button": "left"}))
        .await
        .assert_ok();
    env.post(&c("mouse/move"), json!({"x": x + 150, "y": y + 90}))
        .await
        .assert_ok();
    env.post(&c("mouse/up"), json!({})).await.assert_ok();
    let g = env.geometry(&id, wid).await;
    assert_eq!(
        (g["x"].as_i64().unwrap(), g["y"].as_i64().unwrap()),
        (x + 120, y + 80)
    );

    // Scrolling the document under the pointer changes what the screen shows.
    env.post(&c("keyboard/type"), json!({"text": "line\n".repeat(60)}))
        .await
        .assert_ok();
    let (gx, gy) = (g["x"].as_i64().unwrap(), g["y"].as_i64().unwrap());
    env.post(&c("mouse/move"), json!({"x": gx + 60, "y": gy + 120}))
        .await
        .assert_ok();
    let before = env.screenshot(&id, "").await.body;
    env.post(
        &c("mouse/scroll"),
        json!({"direction": "down", "amount": 3}),
    )
    .await
    .assert_ok();
    let after = env.screenshot(&id, "").await.body;
    assert_ne!(before, after);

    // A click on the title bar's close button (top right) closes the window.
    let right = gx + g["width"].as_i64().unwrap();
    env.post(&c("mouse/click"), json!({"x": right - 12, "y": gy + 12}))
        .await
        .assert_ok();
    assert!(env.window_ids(&id, "").await.is_empty());
    env.mock.shutdown().await;
}

#[tokio::test]
async fn screenshots_render_the_screen_state() {
    let env = Env::start().await;
    let id = env.desktop().await;
    let c = |s: &str| format!("/v1/sandboxes/{id}/computer/{s}");
    let (w, h, empty) = png_of(&env.screenshot(&id, "").await);
    assert_eq!((w, h), (1280, 800));
    assert_eq!(
        png_of(&env.screenshot(&id, "").await).2,
        empty,
        "same state, same image"
    );

    let win = env.launch(&id, "mousepad", None).await;
    let wid = win["id"].as_str().unwrap();
    let (_, _, with_window) = png_of(&env.screenshot(&id, "").await);
    assert_ne!(with_window, empty);
    env.post(
        &c(&format!("windows/{wid}/move")),
        json!({"x": 400, "y": 300}),
    )
    .await
    .assert_ok();
    let (_, _, moved) = png_of(&env.screenshot(&id, "").await);
    assert_ne!(moved, with_window);

    let (cw, ch, _) = png_of(&env.screenshot(&id, "?x=10&y=20&width=100&height=50").await);
    assert_eq!((cw, ch), (100, 50));
    // A window crop is the window's frame, clipped to the screen where it hangs off.
    let g = env.geometry(&id, wid).await;
    let (gy, gh) = (g["y"].as_i64().unwrap(), g["height"].as_i64().unwrap());
    assert!(gy + gh > 800, "the window hangs off the bottom edge: {g}");
    let (ww, wh, _) = png_of(&env.screenshot(&id, &format!("?window_id={wid}")).await);
    assert_eq!(
        (ww as i64, wh as i64),
        (g["width"].as_i64().unwrap(), 800 - gy)
    );
    env.post(
        &c(&format!("windows/{wid}/move")),
        json!({"x": 100, "y": 100}),
    )
    .await
    .assert_ok();
    let (ww, wh, whole) = png_of(&env.screenshot(&id, &format!("?window_id={wid}")).await);
    assert_eq!((ww as i64, wh as i64), (g["width"].as_i64().unwrap(), gh));
    // A rectangle with window_id is relative to the window's frame.
    let (rw, rh, part) = png_of(
        &env.screenshot(
            &id,
            &format!("?window_id={wid}&x=10&y=5&width=40&height=30"),
        )
        .await,
    );
    assert_eq!((rw, rh), (40, 30));
    for row in 0..30usize {
        let from = ((row + 5) * ww as usize + 10) * 3;
        assert_eq!(
            &part[row * 40 * 3..(row + 1) * 40 * 3],
            &whole[from..from + 40 * 3],
            "row {row}"
        );
    }
    let r = env
        .screenshot(
            &id,
            &format!(
                "?window_id={wid}&x={}&width=10",
                g["width"].as_i64().unwrap() - 5
            ),
        )
        .await;
    assert!(r.fail(StatusCode::BAD_REQUEST)["region"]
        .as_str()
        .unwrap()
        .contains("window"));

    assert!(env
        .screenshot(&id, "?x=1200&width=200")
        .await
        .fail(StatusCode::BAD_REQUEST)["region"]
        .is_string());
    assert!(env
        .screenshot(&id, "?width=abc")
        .await
        .fail(StatusCode::BAD_REQUEST)["width"]
        .is_string());
    env.screenshot(&id, "?window_id=0x1")
        .await
        .fail(StatusCode::NOT_FOUND);
    env.send(Method::POST, &c(&format!("windows/{wid}/minimize")), None)
        .await
        .assert_ok();
    env.screenshot(&id, &format!("?window_id={wid}"))
        .await
        .fail(StatusCode::CONFLICT);
    env.mock.shutdown().await;
}

#[tokio::test]
async fn screenshots_are_rate_limited() {
    let env = Env::start().await;
    env.mock.state().computer.set_screenshots_per_second(2);
    let id = env.desktop().await;
    let mut limited = None;
    for _ in 0..50 {
        let r = env.screenshot(&id, "?width=64&height=64").await;
        if r.status == StatusCode::TOO_MANY_REQUESTS {
            limited = Some(r);
            break;
        }
        assert_eq!(r.status, StatusCode::OK);
    }
    let r = limited.expect("a 429 within 50 quick screenshots at 2/s");
    let retry: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(retry >= 1);
    assert_eq!(
        r.fail(StatusCode::TOO_MANY_REQUESTS),
        json!({"rate": "rate limited"})
    );
    env.mock.shutdown().await;
}

#[tokio::test]
async fn screens_are_created_resized_and_deleted() {
    let env = Env::start().await;
    let id = env.desktop().await;
    let c = |s: &str| format!("/v1/sandboxes/{id}/computer/{s}");
    let list = env.get(&c("screens")).await.data();
    assert_eq!(
        list,
        json!([{"screen_id": "screen-0", "display": ":0", "width": 1280, "height": 800, "vnc_port": 5900, "novnc_port": 6080}])
    );
    let s1 = env
        .post(&c("screens"), json!({"width": 800, "height": 600}))
        .await
        .data();
    assert_eq!(
        s1,
        json!({"screen_id": "screen-1", "display": ":1", "width": 800, "height": 600, "vnc_port": 5901, "novnc_port": 6081})
    );
    assert_eq!(env.get(&c("screens/screen-1")).await.data(), s1);
    let resized = env
        .post(&c("screens/screen-1/resize"), json!({"width": 1024}))
        .await
        .data();
    assert_eq!(
        (resized["width"].as_i64(), resized["height"].as_i64()),
        (Some(1024), Some(600))
    );
    assert_eq!(
        env.get(&c("screen?screen_id=screen-1")).await.data(),
        json!({"width": 1024, "height": 600})
    );

    // Windows and pointer are per screen.
    env.post(
        &c("launch?screen_id=screen-1"),
        json!({"application": "xterm"}),
    )
    .await
    .assert_ok();
    assert_eq!(env.window_ids(&id, "?screen_id=screen-1").await.len(), 1);
    assert!(env.window_ids(&id, "").await.is_empty());
    let (w, h, _) = png_of(&env.screenshot(&id, "?screen_id=screen-1").await);
    assert_eq!((w, h), (1024, 600));

    env.get(&c("screen?screen_id=screen-9"))
        .await
        .fail(StatusCode::BAD_REQUEST);
    env.get(&c("screen?screen_id=banana"))
        .await
        .fail(StatusCode::BAD_REQUEST);
    assert_eq!(
        env.get(&c("cursor?screen_id=screen-3"))
            .await
            .fail(StatusCode::NOT_FOUND),
        json!({"screen": "screen not found"})
    );
    env.post(&c("screens"), json!({"width": 10}))
        .await
        .fail(StatusCode::BAD_REQUEST);
    env.send(Method::DELETE, &c("screens/screen-0"), None)
        .await
        .fail(StatusCode::BAD_REQUEST);

    // Without a size a new screen copies screen-0's.
    env.post(
        &c("screens/screen-0/resize"),
        json!({"width": 1600, "height": 900}),
    )
    .await
    .data();
    for n in 2..8 {
        let created = env.post(&c("screens"), json!({})).await.data();
        assert_eq!(created["screen_id"], format!("screen-{n}"));
        assert_eq!(
            (created["width"].as_i64(), created["height"].as_i64()),
            (Some(1600), Some(900))
        );
    }
    env.post(&c("screens"), json!({}))
        .await
        .fail(StatusCode::CONFLICT);
    env.send(Method::DELETE, &c("screens/screen-1"), None)
        .await
        .assert_ok();
    env.get(&c("screens/screen-1"))
        .await
        .fail(StatusCode::NOT_FOUND);
    assert_eq!(
        env.get(&c("screens"))
            .await
            .data()
            .as_array()
            .unwrap()
            .len(),
        7
    );
    env.mock.shutdown().await;
}

#[tokio::test]
async fn connect_needs_ingress_and_rotates_tokens() {
    let env = Env::start().await;
    let plain = env.desktop().await;
    let r = env
        .get(&format!(
            "/v1/sandboxes/{plain}/computer/screens/screen-0/connect"
        ))
        .await;
    assert_eq!(
        r.fail(StatusCode::CONFLICT)["ingress"],
        "ingress is not enabled"
    );

    let id = env
        .create(json!({"rootfs": "desktop:1", "ingress_enabled": true}))
        .await;
    let path = format!("/v1/sandboxes/{id}/computer/screens/screen-0/connect");
    let first = env.get(&path).await.data();
    assert_eq!(first["screen_id"], "screen-0");
    assert_eq!(first["port"], 6080);
    assert_eq!(first["path"], "/websockify");
    let token = first["token"].as_str().unwrap();
    assert!(token.len() >= 32);
    let url = first["url"].as_str().unwrap();
    assert!(url.contains("-6080.") && url.contains(token), "{url}");
    assert!(first["expires_at"].as_str().unwrap().ends_with('Z'));

    let state = env.mock.state();
    let computer = &state.computer;
    assert!(computer.verify_connection_token(&id, "screen-0", token));
    let second = env.get(&path).await.data();
    assert_ne!(second["token"], first["token"]);
    assert!(
        !computer.verify_connection_token(&id, "screen-0", token),
        "a new link invalidates the old one"
    );
    assert!(computer.verify_connection_token(&id, "screen-0", second["token"].as_str().unwrap()));
    env.get(&format!(
        "/v1/sandboxes/{id}/computer/screens/screen-5/connect"
    ))
    .await
    .fail(StatusCode::NOT_FOUND);
    env.mock.shutdown().await;
}

#[tokio::test]
async fn operation_table_matches_the_spec_and_feeds_stats() {
    let spec = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../api-spec/OPERATIONS.md"
    ))
    .expect("spec");
    let mut expected = Vec::new();
    for line in spec.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let Some(n) = cols
            .first()
            .and_then(|e| e.strip_prefix('E'))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if (64..=97).contains(&n) {
            let path = cols[2].replacen("C/", "/v1/sandboxes/{id}/computer/", 1);
            expected.push((cols[3].to_string(), cols[1].to_string(), path));
        }
    }
    assert_eq!(expected.len(), 34);
    let mut ours: Vec<(String, String, String)> = createos_mock::computer::routes::OPERATIONS
        .iter()
        .map(|o| {
            (
                o.operation_id.to_string(),
                o.method.to_string(),
                o.path.to_string(),
            )
        })
        .collect();
    ours.sort();
    expected.sort();
    assert_eq!(ours, expected);

    let env = Env::start().await;
    let id = env.desktop().await;
    env.get(&format!("/v1/sandboxes/{id}/computer/screen"))
        .await
        .data();
    let stats: Value = env
        .http
        .get(env.url("/_mock/stats"))
        .header("X-Api-Key", &env.key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["handled"]["getComputerScreenSize"], 1, "{stats}");
    env.mock.shutdown().await;
}
