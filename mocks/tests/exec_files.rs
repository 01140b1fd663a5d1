//! Real command execution (buffered and streamed) and the files API.

mod common;

use std::time::Duration;

use common::{start, start_with, KEY};
use createos_mock::MockConfig;
use futures::StreamExt;
use serde_json::{json, Value};

async fn ndjson_frames(resp: reqwest::Response) -> Vec<Value> {
    let mut body = resp.bytes_stream();
    let mut buf = Vec::new();
    while let Some(chunk) = body.next().await {
        buf.extend_from_slice(&chunk.expect("stream chunk"));
    }
    String::from_utf8(buf)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn buffered_exec_output_exit_codes_env_and_stdin() {
    let env = start().await;
    let id = env
        .create(json!({"envs": {"GREETING": "hello", "OTHER": "x"}}))
        .await;
    let (out, err, code) = env.sh(&id, "echo $GREETING; echo oops >&2; exit 7").await;
    assert_eq!((out.as_str(), err.as_str(), code), ("hello\n", "oops\n", 7));

    let r = env
        .post(
            &format!("/v1/sandboxes/{id}/exec"),
            json!({"cmd": "sh", "args": ["-c", "cat; echo \" $GREETING $OTHER\""], "stdin": "from-stdin", "env": {"GREETING": "override"}}),
        )
        .await;
    assert_eq!(r.data()["result"]["stdout"], "from-stdin override x\n");
    assert!(r.data()["exec_ms"].as_f64().unwrap() > 0.0);

    // Not through a shell: the argument arrives verbatim.
    let r = env
        .post(
            &format!("/v1/sandboxes/{id}/exec"),
            json!({"cmd": "echo", "args": ["$HOME", "a b"]}),
        )
        .await;
    assert_eq!(r.data()["result"]["stdout"], "$HOME a b\n");

    let r = env
        .post(
            &format!("/v1/sandboxes/{id}/exec"),
            json!({"cmd": "sh", "args": ["-c", "printf '\\377ok'"]}),
        )
        .await;
    assert_eq!(r.data()["result"]["stdout"], "\u{FFFD}ok");

    let r = env
        .post(
            &format!("/v1/sandboxes/{id}/exec"),
            json!({"cmd": "definitely-not-a-command"}),
        )
        .await;
    assert_eq!(r.status, 200);
    assert!(r.data()["result"]["error"]
        .as_str()
        .unwrap()
        .contains("definitely-not-a-command"));

    let r = env
        .post(
            &format!("/v1/sandboxes/{id}/exec"),
            json!({"cmd": "env", "env": {"UNDECLARED": "1"}}),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(r.data()["env"].is_string());
    let r = env
        .post(&format!("/v1/sandboxes/{id}/exec"), json!({"args": ["x"]}))
        .await;
    assert_eq!(r.status, 400);
    env.mock.shutdown().await;
}

#[tokio::test]
async fn streamed_exec_frames_and_heartbeats() {
    let env = start_with(MockConfig::default().heartbeat(Duration::from_millis(40))).await;
    let id = env.create(json!({})).await;
    let resp = env
        .http
        .post(env.url(&format!("/v1/sandboxes/{id}/exec?stream=true")))
        .header("X-Api-Key", KEY)
        .json(&json!({"cmd": "sh", "args": ["-c", "echo one; sleep 0.3; echo two >&2; exit 3"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/x-ndjson");
    let frames = ndjson_frames(resp).await;
    assert_eq!(frames.first(), Some(&json!({"stdout": "one\n"})));
    assert!(frames.contains(&json!({"stderr": "two\n"})));
    assert!(
        frames.contains(&json!({"hb": true})),
        "a 300 ms silence yields heartbeats: {frames:?}"
    );
    assert_eq!(frames.last(), Some(&json!({"exit_code": 3})));

    // `"stream": true` in the body selects streaming too; a command that cannot start
    // yields an error frame.
    let resp = env
        .http
        .post(env.url(&format!("/v1/sandboxes/{id}/exec")))
        .header("X-Api-Key", KEY)
        .json(&json!({"cmd": "/nonexistent/tool", "stream": true}))
        .send()
        .await
        .unwrap();
    let frames = ndjson_frames(resp).await;
    assert!(frames[0]["error"]
        .as_str()
        .unwrap()
        .contains("/nonexistent/tool"));
    env.mock.shutdown().await;
}

#[tokio::test]
async fn files_round_trip() {
    let env = start().await;
    let id = env.create(json!({})).await;
    let url = |path: &str| env.url(&format!("/v1/sandboxes/{id}/files?path={path}"));
    let payload: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let resp = env
        .http
        .put(url("/workspace/deep/dir/blob.bin"))
        .header("X-Api-Key", KEY)
        .body(payload.clone())
        .send()
        .await
        .unwrap();
    let r = common::reply(resp).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.data()["bytes"], payload.len());
    let got = env
        .http
        .get(url("/workspace/deep/dir/blob.bin"))
        .header("X-Api-Key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(got.headers()["content-type"], "application/octet-stream");
    assert_eq!(got.bytes().await.unwrap().as_ref(), payload.as_slice());
    let (out, _, _) = env.sh(&id, "wc -c < /workspace/deep/dir/blob.bin").await;
    assert_eq!(out.trim(), payload.len().to_string());

    // Overwrite, then read what a command wrote.
    env.http
        .put(url("/workspace/deep/dir/blob.bin"))
        .header("X-Api-Key", KEY)
        .body("short")
        .send()
        .await
        .unwrap();
    env.sh(&id, "printf 'from exec' > /root/made.txt").await;
    let got = env
        .http
        .get(url("/root/made.txt"))
        .header("X-Api-Key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(got.text().await.unwrap(), "from exec");
    let (out, _, _) = env.sh(&id, "cat /workspace/deep/dir/blob.bin").await;
    assert_eq!(out, "short");

    for (path, status, msg) in [
        ("/root/missing.txt", 404, "file not found"),
        ("/root", 400, "is a directory"),
        ("relative/path", 400, "path must be absolute"),
        ("/root/../etc/passwd", 400, "path must not contain '..'"),
    ] {
        let r = common::reply(
            env.http
                .get(url(path))
                .header("X-Api-Key", KEY)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(
            (r.status, r.data()["path"].as_str()),
            (status, Some(msg)),
            "{path}"
        );
    }
    let r = common::reply(
        env.http
            .put(url("/root"))
            .header("X-Api-Key", KEY)
            .body("x")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 400);
    env.mock.shutdown().await;
}
