//! The emulator's own `/_mock/*` routes need its API key: anyone else on the machine (here
//! `curl`, as a user would try it) gets 401 and no credential.

mod common;

use common::{start, KEY};

/// `curl` against the emulator: (HTTP status, body).
fn curl(args: &[&str]) -> (u16, String) {
    let out = std::process::Command::new("curl")
        .args(["-sS", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl runs (install curl)");
    assert!(
        out.status.success(),
        "curl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.trim().parse().unwrap(), body.to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn mock_routes_refuse_callers_without_the_key() {
    let env = start().await;
    let stats = env.url("/_mock/stats");
    let sessions = env.url("/_mock/oauth/sessions");
    let tenants = env.url("/_mock/tenants");
    let faults = env.url("/_mock/faults");
    let (stats2, faults2) = (stats.clone(), faults.clone());
    let replies = tokio::task::spawn_blocking(move || {
        vec![
            ("stats", curl(&[&stats2])),
            (
                "stats, wrong key",
                curl(&["-H", "X-Api-Key: skp_not_the_key", &stats2]),
            ),
            (
                "stats, key as bearer",
                curl(&["-H", &format!("Authorization: Bearer {KEY}"), &stats2]),
            ),
            (
                "oauth session",
                curl(&[
                    "-X",
                    "POST",
                    "-H",
                    "Content-Type: application/json",
                    "-d",
                    "{}",
                    &sessions,
                ]),
            ),
            (
                "tenant",
                curl(&[
                    "-X",
                    "POST",
                    "-H",
                    "Content-Type: application/json",
                    "-d",
                    "{}",
                    &tenants,
                ]),
            ),
            (
                "fault",
                curl(&[
                    "-X",
                    "POST",
                    "-H",
                    "Content-Type: application/json",
                    "-d",
                    r#"{"rule":"/ status=503"}"#,
                    &faults2,
                ]),
            ),
        ]
    })
    .await
    .unwrap();
    for (what, (status, body)) in &replies {
        assert_eq!(*status, 401, "{what} without the key: {body}");
        assert!(
            !body.contains("access_token") && !body.contains("skp_"),
            "{what} leaked a credential: {body}"
        );
        assert!(
            body.contains("X-Api-Key"),
            "{what}: the refusal says what is needed: {body}"
        );
    }
    // Nothing was changed: no fault armed, no tenant added, and with the key it answers.
    let (status, body) =
        tokio::task::spawn_blocking(move || curl(&["-H", &format!("X-Api-Key: {KEY}"), &faults]))
            .await
            .unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["faults"],
        serde_json::json!([])
    );
    let (status, body) =
        tokio::task::spawn_blocking(move || curl(&["-H", &format!("X-Api-Key: {KEY}"), &stats]))
            .await
            .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("live_sandboxes"));
    env.mock.shutdown().await;
}
