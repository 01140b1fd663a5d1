//! The emulator proves its answers match `api-spec/openapi.yaml`: every operation is
//! driven by its operationId (method and path from the spec) through success cases and
//! the error cases that are cheap to produce, and every answer is checked for a listed
//! status, the documented headers and content type, and a body valid against the schema
//! the spec gives for that status (JSON Schema 2020-12; NDJSON line by line). Raw HTTP
//! only — the client crate is never used here.

mod spec_support;

use std::collections::BTreeSet;

use createos_mock::{IsolationMode, MockConfig};
use serde_json::json;
use spec_support::fixtures::Fixtures;
use spec_support::harness::Conformance;
use spec_support::spec::Spec;
use spec_support::{probes, scen_computer, scen_core, scen_process, scen_resources};

/// Error statuses an operation lists but this test does not provoke, with the reason.
/// Everything else an operation lists among 400/402/404/408/409/501/502 must be seen.
const NOT_PROVOKED: &[(&str, u16, &str)] = &[
    (
        "resumeSandbox",
        402,
        "needs a sandbox of a tenant without credit",
    ),
    (
        "forkSandbox",
        402,
        "needs a sandbox of a tenant without credit",
    ),
    (
        "rechargeBandwidth",
        402,
        "needs a sandbox of a tenant without credit",
    ),
];

async fn start(config: MockConfig) -> (createos_mock::MockHandle, Conformance) {
    let mock = createos_mock::start(config.isolation(IsolationMode::None))
        .await
        .expect("emulator starts");
    let c = Conformance::new(Spec::load(), mock.base_url(), mock.addr(), mock.api_key());
    (mock, c)
}

fn report(c: &Conformance) {
    let violations = c.violations();
    assert!(
        violations.is_empty(),
        "{} disagreement(s) with the spec:\n{}",
        violations.len(),
        violations.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_answers_as_the_spec_says() {
    let (mock, c) = start(MockConfig::default().screenshots_per_second(3)).await;
    let fx = Fixtures::prepare(&c).await;
    tokio::join!(
        probes::run(&c, &fx),
        scen_core::catalog(&c, &fx),
        scen_core::sandboxes(&c, &fx),
        scen_core::exec_and_files(&c),
        scen_process::processes(&c),
        scen_process::interactive(&c),
        scen_resources::egress_and_bandwidth(&c),
        scen_resources::networks(&c, &fx),
        scen_resources::disks(&c, &fx),
        scen_resources::templates(&c, &fx),
        scen_resources::metrics(&c, &fx),
        scen_resources::access_tokens(&c),
        scen_resources::devices(&c),
        scen_computer::computer(&c),
    );

    // Injected faults: 503 and 429 carry their envelopes and Retry-After.
    for rule in [
        "GET /v1/shapes status=503 retry_after=1 count=1",
        "GET /v1/whoami status=429 retry_after=2 count=1",
    ] {
        let r = c
            .http
            .post(format!("{}/_mock/faults", c.base))
            .header("X-Api-Key", &c.key)
            .json(&json!({"rule": rule}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let r = c.op("listShapes").send().await;
    c.want(&r, 503, "injected 503");
    let r = c.op("whoami").send().await;
    c.want(&r, 429, "injected 429");

    let seen = c.seen();
    let mut missing = Vec::new();
    for op in c.spec.operations() {
        let statuses = seen.get(&op.id).cloned().unwrap_or_default();
        if !statuses.iter().any(|s| (200..300).contains(s) || *s == 101) {
            missing.push(format!("{}: no success case", op.id));
        }
        for status in [400u16, 401, 402, 403, 404, 408, 409, 411, 415, 501, 502] {
            let exempt = NOT_PROVOKED
                .iter()
                .any(|(id, s, _)| *id == op.id && *s == status);
            if op.lists(status) && !statuses.contains(&status) && !exempt {
                missing.push(format!(
                    "{}: lists {status} but it was never produced",
                    op.id
                ));
            }
        }
    }
    let exercised: BTreeSet<&str> = c.spec.operations().map(|o| o.id.as_str()).collect();
    assert_eq!(exercised.len(), 107);
    report(&c);
    assert!(missing.is_empty(), "coverage gaps:\n{}", missing.join("\n"));
    mock.shutdown().await;
}

/// The checker itself: each kind of disagreement is reported.
#[test]
fn the_checker_catches_disagreements() {
    use reqwest::header::{HeaderMap, HeaderValue};
    use spec_support::harness::Reply;

    let c = Conformance::new(
        Spec::load(),
        "http://127.0.0.1:9".into(),
        "127.0.0.1:9".parse().unwrap(),
        "k".into(),
    );
    let reply = |op: &str, status: u16, ct: &str, body: &str, request_id: bool| {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_str(ct).unwrap());
        if request_id {
            headers.insert("x-request-id", HeaderValue::from_static("req_1"));
        }
        Reply {
            op: op.into(),
            status,
            headers,
            body: body.as_bytes().to_vec(),
        }
    };
    let view = r#"{"status":"success","data":{"id":"sb-1","status":"running","created_at":"2026-11-30T05:00:00.123Z"}}"#;
    let cases = [
        (
            reply("getSandbox", 200, "application/json", view, true),
            None,
        ),
        (
            reply("getSandbox", 200, "application/json", view, false),
            Some("X-Request-Id missing"),
        ),
        (
            reply("getSandbox", 418, "application/json", view, true),
            Some("not listed"),
        ),
        (
            reply("getSandbox", 200, "text/html", view, true),
            Some("content type"),
        ),
        (
            reply(
                "getSandbox",
                200,
                "application/json",
                r#"{"status":"success","data":{"status":"running"}}"#,
                true,
            ),
            Some("id"),
        ),
        (
            reply(
                "getSandbox",
                200,
                "application/json",
                &view.replace("2026-11-30T05:00:00.123Z", "yesterday"),
                true,
            ),
            Some("date-time"),
        ),
        (
            reply(
                "getSandbox",
                200,
                "application/json",
                &view.replace("running", "snoozing"),
                true,
            ),
            Some("snoozing"),
        ),
        (
            reply(
                "getSandbox",
                404,
                "application/json",
                r#"{"status":"fail","data":{"sandbox":7}}"#,
                true,
            ),
            Some("7"),
        ),
        (
            reply(
                "whoami",
                429,
                "application/json",
                r#"{"status":"fail","data":{"rate":"rate limited"}}"#,
                true,
            ),
            Some("Retry-After"),
        ),
        (
            reply(
                "connectProcess",
                200,
                "application/x-ndjson",
                "{\"type\":\"data\",\"seq\":0}\n",
                true,
            ),
            Some("seq"),
        ),
        (
            reply(
                "exec",
                200,
                "application/x-ndjson",
                "{\"exit_code\":\"3\"}\n",
                true,
            ),
            Some("exit_code"),
        ),
    ];
    let mut before = 0;
    for (r, expected) in cases {
        let what = format!("{} {} {}", r.op, r.status, r.text());
        c.check(&r);
        let violations = c.violations();
        match expected {
            None => assert_eq!(
                violations.len(),
                before,
                "{what}: unexpected {:?}",
                &violations[before..]
            ),
            Some(needle) => {
                assert!(violations.len() > before, "{what}: not caught");
                assert!(
                    violations[before..].iter().any(|v| v.contains(needle)),
                    "{what}: {:?}",
                    &violations[before..]
                );
            }
        }
        before = violations.len();
    }
}

#[tokio::test]
async fn unconfigured_disks_api_answers_503() {
    let (mock, c) = start(MockConfig::default().disks_configured(false)).await;
    for op in ["listDisks", "getDisk"] {
        let mut call = c.op(op);
        if op == "getDisk" {
            call = call.p("disk", "any");
        }
        let r = call.send().await;
        c.want(&r, 503, "disks API not configured");
    }
    report(&c);
    mock.shutdown().await;
}
