//! Desktop settings from `MockConfig` (startup delay, screenshot budget) and the desktop a
//! fork child inherits.

mod common;

use std::time::Duration;

use common::start_with;
use createos_mock::{IsolationMode, MockConfig};
use serde_json::json;

fn fast() -> MockConfig {
    MockConfig::default().isolation(IsolationMode::None)
}

#[tokio::test]
async fn config_sets_the_desktop_startup_delay_and_screenshot_budget() {
    let env = start_with(
        fast()
            .desktop_startup(Duration::from_secs(3600))
            .screenshots_per_second(1),
    )
    .await;
    let state = env.mock.state();
    assert_eq!(state.computer.startup_delay(), Duration::from_secs(3600));
    assert_eq!(state.computer.screenshots_per_second(), 1);
    let id = env.create(json!({"rootfs": "desktop:1"})).await;
    let r = env
        .get(&format!("/v1/sandboxes/{id}/computer/screen"))
        .await;
    assert_eq!(
        (r.status, r.data()["code"].as_str()),
        (409, Some("desktop_unavailable")),
        "{}",
        r.text
    );

    state.computer.set_startup_delay(Duration::ZERO);
    let shot = |env: &common::Env| {
        let url = env.url(&format!(
            "/v1/sandboxes/{id}/computer/screenshot?width=8&height=8"
        ));
        let req = env.http.get(url).header("X-Api-Key", common::KEY);
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(shot(&env).await, 200);
    // One per second: an immediate second one is refused (a slow machine may cross the
    // second boundary once, never twice in a row).
    let second = shot(&env).await;
    let third = if second == 200 {
        shot(&env).await
    } else {
        second
    };
    assert_eq!(third, 429);
    env.mock.shutdown().await;

    let defaults = MockConfig::default();
    assert_eq!(defaults.journal_bytes, 8 << 20);
    assert_eq!(defaults.desktop_startup, Duration::ZERO);
    assert_eq!(
        defaults.screenshots_per_second,
        createos_mock::computer::DEFAULT_SCREENSHOTS_PER_SECOND
    );
}

#[tokio::test]
async fn a_fork_child_inherits_the_parents_desktop() {
    let env = start_with(fast()).await;
    let parent = env.create(json!({"rootfs": "desktop:1"})).await;
    let c = |id: &str, s: &str| format!("/v1/sandboxes/{id}/computer/{s}");
    assert_eq!(
        env.post(&c(&parent, "launch"), json!({"application": "mousepad"}))
            .await
            .status,
        200
    );
    assert_eq!(
        env.post(&c(&parent, "keyboard/type"), json!({"text": "kept"}))
            .await
            .status,
        200
    );
    assert_eq!(
        env.send(
            "PUT",
            &c(&parent, "clipboard"),
            Some(common::KEY),
            Some(json!({"text": "clip"}))
        )
        .await
        .status,
        200
    );
    assert_eq!(
        env.post(&c(&parent, "screens"), json!({"width": 640, "height": 480}))
            .await
            .status,
        200
    );
    let windows = env.get(&c(&parent, "windows")).await.data().clone();

    assert_eq!(
        env.post_empty(&format!("/v1/sandboxes/{parent}/pause"))
            .await
            .status,
        202
    );
    env.wait_status(&parent, "paused").await;
    let fork = env
        .post_empty(&format!("/v1/sandboxes/{parent}/fork"))
        .await;
    assert_eq!(fork.status, 200, "{}", fork.text);
    let child = fork.data()["id"].as_str().unwrap().to_string();
    env.wait_status(&child, "running").await;

    assert_eq!(env.get(&c(&child, "windows")).await.data(), &windows);
    assert_eq!(
        env.get(&c(&child, "clipboard")).await.data()["text"],
        "clip"
    );
    assert_eq!(
        env.get(&c(&child, "screens"))
            .await
            .data()
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // From here on the two desktops are independent.
    assert_eq!(
        env.post(&c(&child, "launch"), json!({"application": "xterm"}))
            .await
            .status,
        200
    );
    assert_eq!(
        env.get(&c(&child, "windows"))
            .await
            .data()
            .as_array()
            .unwrap()
            .len(),
        2
    );
    env.post_empty(&format!("/v1/sandboxes/{parent}/resume"))
        .await;
    env.wait_status(&parent, "running").await;
    assert_eq!(env.get(&c(&parent, "windows")).await.data(), &windows);
    env.mock.shutdown().await;
}
