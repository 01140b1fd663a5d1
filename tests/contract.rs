//! The spec is the contract: every operation of `api-spec/openapi.yaml` has an `operationId`, a
//! client method, an emulator handler and an integration test that calls the method. The table
//! `api-spec/COVERAGE.md` is generated from the same facts; run
//! `UPDATE_COVERAGE=1 cargo test --test contract` after adding an operation or a test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use createos_sandbox::api::endpoints;

const METHODS: &[&str] = &["get", "put", "post", "delete", "patch", "head", "options"];

#[derive(Debug, Clone)]
struct SpecOp {
    id: String,
    method: String,
    path: String,
    endpoint_no: Option<String>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn spec_ops() -> Vec<SpecOp> {
    let text = std::fs::read_to_string(root().join("api-spec/openapi.yaml"))
        .expect("api-spec/openapi.yaml");
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("spec is YAML");
    let paths = doc["paths"].as_mapping().expect("spec has paths");
    let mut out = Vec::new();
    for (path, item) in paths {
        let path = path.as_str().expect("path key").to_string();
        for method in METHODS {
            let Some(op) = item.get(*method) else {
                continue;
            };
            let id = op
                .get("operationId")
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string();
            assert!(
                !id.is_empty(),
                "{} {path} has no operationId",
                method.to_uppercase()
            );
            out.push(SpecOp {
                id,
                method: method.to_uppercase(),
                path: path.clone(),
                endpoint_no: op
                    .get("x-endpoint")
                    .and_then(|v| v.as_str())
                    .map(str::to_string),
            });
        }
    }
    out
}

/// `{id}` and `{network}` compare equal: only the shape of a template matters.
fn shape(path: &str) -> String {
    let mut out = String::new();
    let mut in_param = false;
    for c in path.chars() {
        match c {
            '{' | ':' if !in_param => {
                in_param = true;
                out.push_str("{}");
            }
            '}' if in_param => in_param = false,
            '/' if in_param => {
                in_param = false;
                out.push('/');
            }
            _ if in_param => {}
            _ => out.push(c),
        }
    }
    out
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Method names defined in `impl <Type>` blocks of the client's api modules.
fn client_methods() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for file in rust_files(&root().join("src/api")) {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut current: Option<String> = None;
        let mut depth = 0i32;
        let mut impl_depth = 0i32;
        for line in text.lines() {
            let trimmed = line.trim_start();
            if current.is_none() {
                if let Some(rest) = trimmed.strip_prefix("impl ") {
                    if !rest.contains(" for ") {
                        let ty: String = rest
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        current = Some(ty);
                        impl_depth = depth;
                    }
                }
            } else if let Some(ty) = &current {
                for prefix in ["pub async fn ", "pub fn "] {
                    if let Some(rest) = trimmed.strip_prefix(prefix) {
                        let name: String = rest
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        found.insert(format!("{ty}::{name}"));
                    }
                }
            }
            depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
            if current.is_some() && depth <= impl_depth && line.contains('}') {
                current = None;
            }
        }
    }
    found
}

/// Integration test files (by name) that call each method name.
fn tests_calling(methods: &BTreeSet<String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // The library's tests, and the `cos` package's (which drive the binary and the tools).
    let files: Vec<_> = [root().join("tests"), root().join("cos/tests")]
        .iter()
        .flat_map(|dir| rust_files(dir))
        .filter(|p| {
            !p.components().any(|c| c.as_os_str() == "common") && !p.ends_with("contract.rs")
        })
        .collect();
    let texts: Vec<(String, String)> = files
        .iter()
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().to_string(),
                std::fs::read_to_string(p).unwrap(),
            )
        })
        .collect();
    for full in methods {
        let name = full.split("::").nth(1).unwrap();
        let needle = format!(".{name}(");
        for (file, text) in &texts {
            if text.contains(&needle) {
                out.entry(full.clone()).or_default().insert(file.clone());
            }
        }
    }
    out
}

fn coverage_table() -> (String, Vec<String>) {
    let spec = spec_ops();
    let methods = client_methods();
    let by_id: BTreeMap<_, _> = endpoints::ALL.iter().map(|e| (e.operation_id, e)).collect();
    let mock: BTreeMap<String, (String, String, String)> = createos_mock::routes::all_operations()
        .into_iter()
        .map(|o| {
            (
                o.operation_id.to_string(),
                (
                    o.method.to_string(),
                    o.path.to_string(),
                    o.handler.to_string(),
                ),
            )
        })
        .collect();
    let used = tests_calling(&methods);
    let mut gaps = Vec::new();
    let mut rows = String::new();
    rows.push_str("# Coverage of the control-plane contract\n\n");
    rows.push_str("Generated by `UPDATE_COVERAGE=1 cargo test --test contract` from `api-spec/openapi.yaml`, ");
    rows.push_str("`src/transport/endpoints.rs`, the emulator's route table and the integration tests. Do not edit by hand.\n\n");
    rows.push_str(
        "| # | operation | method and path | client method | emulator handler | tests |\n",
    );
    rows.push_str("|---|---|---|---|---|---|\n");
    for op in &spec {
        let client = match by_id.get(op.id.as_str()) {
            Some(e) => {
                if e.method.as_str() != op.method || shape(e.path) != shape(&op.path) {
                    gaps.push(format!(
                        "{}: client sends {} {} but the spec says {} {}",
                        op.id, e.method, e.path, op.method, op.path
                    ));
                }
                if !methods.contains(e.client_method) {
                    gaps.push(format!(
                        "{}: client method {} is not defined in src/api",
                        op.id, e.client_method
                    ));
                }
                e.client_method.to_string()
            }
            None => {
                gaps.push(format!("{}: no client endpoint", op.id));
                String::from("—")
            }
        };
        let handler = match mock.get(&op.id) {
            Some((m, p, h)) => {
                if m != &op.method || shape(p) != shape(&op.path) {
                    gaps.push(format!(
                        "{}: emulator serves {m} {p} but the spec says {} {}",
                        op.id, op.method, op.path
                    ));
                }
                h.clone()
            }
            None => {
                gaps.push(format!("{}: the emulator does not serve it", op.id));
                String::from("—")
            }
        };
        let tests = used
            .get(&client)
            .map(|s| s.iter().cloned().collect::<Vec<_>>().join(", "))
            .unwrap_or_default();
        if tests.is_empty() {
            gaps.push(format!("{}: no integration test calls {client}", op.id));
        }
        rows.push_str(&format!(
            "| {} | `{}` | `{} {}` | `{}` | `{}` | {} |\n",
            op.endpoint_no.as_deref().unwrap_or(""),
            op.id,
            op.method,
            op.path,
            client,
            handler,
            if tests.is_empty() {
                "**none**".to_string()
            } else {
                tests
            }
        ));
    }
    for e in endpoints::ALL {
        if !spec.iter().any(|s| s.id == e.operation_id) {
            gaps.push(format!(
                "client endpoint {} is not in the spec",
                e.operation_id
            ));
        }
    }
    for id in mock.keys() {
        if !spec.iter().any(|s| &s.id == id) {
            gaps.push(format!("emulator operation {id} is not in the spec"));
        }
    }
    (rows, gaps)
}

#[test]
fn every_spec_operation_has_an_id_a_client_method_a_handler_and_a_test() {
    let spec = spec_ops();
    assert_eq!(
        spec.len(),
        endpoints::ALL.len(),
        "spec and client disagree on the number of operations"
    );
    let mut seen = BTreeSet::new();
    for op in &spec {
        assert!(
            seen.insert(op.id.clone()),
            "operationId {} appears twice",
            op.id
        );
    }
    let (table, gaps) = coverage_table();
    let path = root().join("api-spec/COVERAGE.md");
    if std::env::var_os("UPDATE_COVERAGE").is_some() {
        std::fs::write(&path, &table).unwrap();
    }
    assert!(gaps.is_empty(), "contract gaps:\n{}", gaps.join("\n"));
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == table,
        "api-spec/COVERAGE.md is stale: run `UPDATE_COVERAGE=1 cargo test --test contract`"
    );
}

#[test]
fn path_shapes_compare_templates_only() {
    assert_eq!(
        shape("/v1/sandboxes/{id}/networks/{network}"),
        shape("/v1/sandboxes/{sb}/networks/{n}")
    );
    assert_eq!(shape("/v1/sandboxes/:id/x"), "/v1/sandboxes/{}/x");
    assert_ne!(shape("/v1/sandboxes/{id}"), shape("/v1/sandboxes"));
}
