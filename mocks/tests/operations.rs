//! The operation table matches api-spec/openapi.yaml, and every operation is routed.

mod common;

use std::collections::BTreeSet;

use common::start;

/// (operationId, METHOD, path) of every operation in the spec (a line scan of the
/// `paths:` section: path keys at 2 spaces, methods at 4, operationId at 6).
fn spec_operations() -> BTreeSet<(String, String, String)> {
    let spec = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../api-spec/openapi.yaml"
    ))
    .expect("api-spec/openapi.yaml is readable");
    let mut out = BTreeSet::new();
    let (mut in_paths, mut path, mut method) = (false, String::new(), String::new());
    for line in spec.lines() {
        if line.starts_with("paths:") {
            in_paths = true;
            continue;
        }
        if in_paths && line.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) {
            in_paths = false;
        }
        if !in_paths {
            continue;
        }
        if let Some(p) = line.strip_prefix("  /") {
            if !line.starts_with("   ") {
                path = format!("/{}", p.trim_end().trim_end_matches(':'));
                continue;
            }
        }
        for m in ["get", "post", "put", "patch", "delete"] {
            if line.starts_with(&format!("    {m}:")) {
                method = m.to_ascii_uppercase();
            }
        }
        if let Some(id) = line.strip_prefix("      operationId:") {
            out.insert((id.trim().to_string(), method.clone(), path.clone()));
        }
    }
    out
}

#[test]
fn table_matches_the_spec() {
    let spec = spec_operations();
    assert_eq!(spec.len(), 107, "the spec lists 107 operations");
    let served: BTreeSet<(String, String, String)> = createos_mock::routes::all_operations()
        .iter()
        .map(|op| {
            (
                op.operation_id.to_string(),
                op.method.to_string(),
                op.path.to_string(),
            )
        })
        .collect();
    assert_eq!(
        served.len(),
        createos_mock::routes::all_operations().len(),
        "duplicate operations"
    );
    let missing: Vec<_> = spec.difference(&served).collect();
    let extra: Vec<_> = served.difference(&spec).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}\nextra {extra:?}"
    );
}

#[tokio::test]
async fn every_operation_is_routed() {
    let env = start().await;
    for op in createos_mock::routes::all_operations() {
        let path = op
            .path
            .split('/')
            .map(|seg| if seg.starts_with('{') { "x1" } else { seg })
            .collect::<Vec<_>>()
            .join("/");
        let method = reqwest::Method::from_bytes(op.method.as_bytes()).unwrap();
        let resp = env
            .http
            .request(method, env.url(&path))
            .header("Content-Length", "0")
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let body = resp.text().await.unwrap_or_default();
        assert_ne!(status, 405, "{} {} not routed", op.method, op.path);
        assert!(
            !body.contains("no such route"),
            "{} {} not routed",
            op.method,
            op.path
        );
        let stats = env.stats().await;
        assert!(
            stats["requests"].get(op.operation_id).is_some(),
            "{} not counted under its id",
            op.operation_id
        );
    }
    env.mock.shutdown().await;
}
