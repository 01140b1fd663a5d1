//! The face line in the dependency graph: the library package `createos-sandbox` compiles none
//! of the faces' crates, and the faces live in the workspace member `cos` (binary `cos`).
//! Read from `cargo metadata` (the resolved graph, normal edges only), so a face dependency
//! added to the core, directly or through another crate, fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Crates only the faces (`cos`) or the tests may pull in.
const FACE_CRATES: &[&str] = &[
    "rmcp",
    "clap",
    "anyhow",
    "indicatif",
    "toml_edit",
    "tracing-subscriber",
    "createos-mock",
];

/// The host's target triple (`rustc -vV`): the graph is read for this platform only, so no
/// other platform's crates need to be downloaded.
fn host() -> String {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_string()
}

fn metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline", "--locked"])
        .args(["--filter-platform", &host()])
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// Package id → name, and package id → the ids it depends on through normal (not dev, not
/// build) edges.
struct Graph {
    names: BTreeMap<String, String>,
    normal: BTreeMap<String, Vec<String>>,
}

impl Graph {
    fn of(meta: &Value) -> Graph {
        let names = meta["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["id"].as_str().unwrap().to_string(),
                    p["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let normal = meta["resolve"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|node| {
                let deps = node["deps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|dep| {
                        dep["dep_kinds"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|kind| kind["kind"].is_null())
                    })
                    .map(|dep| dep["pkg"].as_str().unwrap().to_string())
                    .collect();
                (node["id"].as_str().unwrap().to_string(), deps)
            })
            .collect();
        Graph { names, normal }
    }

    fn id_of(&self, name: &str) -> String {
        let ids: Vec<&String> = self
            .names
            .iter()
            .filter(|(_, n)| n.as_str() == name)
            .map(|(id, _)| id)
            .collect();
        assert_eq!(ids.len(), 1, "one package named {name}: {ids:?}");
        ids[0].clone()
    }

    /// Names of every package reachable from `root` through normal edges, not walking into
    /// the packages named in `through`.
    fn closure(&self, root: &str, through: &[&str]) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![self.id_of(root)];
        while let Some(id) = todo.pop() {
            if !seen.insert(id.clone()) {
                continue;
            }
            for dep in self.normal.get(&id).into_iter().flatten() {
                if !through.contains(&self.names[dep].as_str()) {
                    todo.push(dep.clone());
                }
            }
        }
        seen.iter().map(|id| self.names[id].clone()).collect()
    }
}

#[test]
fn the_core_compiles_no_face_crate() {
    let graph = Graph::of(&metadata());
    let core = graph.closure("createos-sandbox", &[]);
    let faces: Vec<&&str> = FACE_CRATES
        .iter()
        .filter(|name| core.contains(**name))
        .collect();
    assert!(faces.is_empty(), "the core depends on {faces:?}");
    // and the faces do use them, so the list above names real crates of this graph
    let cos = graph.closure("cos", &[]);
    for name in ["rmcp", "clap", "anyhow", "createos-sandbox"] {
        assert!(cos.contains(name), "cos does not depend on {name}");
    }
}

/// `curve25519-dalek` reaches the core only through SSH: russh's curve25519 key exchange and
/// its ed25519 keys (`ed25519-dalek`, `ssh-key`), which the per-sandbox keys need. Without
/// russh nothing brings it in.
#[test]
fn curve25519_reaches_the_core_only_through_russh() {
    let graph = Graph::of(&metadata());
    assert!(graph
        .closure("createos-sandbox", &[])
        .contains("curve25519-dalek"));
    let without_russh = graph.closure("createos-sandbox", &["russh"]);
    assert!(
        !without_russh.contains("curve25519-dalek"),
        "something besides russh brings curve25519-dalek into the core"
    );
}

#[test]
fn the_workspace_holds_the_cos_binary() {
    let meta = metadata();
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let cos = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "cos")
        .expect("a package named cos");
    assert!(members.contains(cos["id"].as_str().unwrap()));
    assert!(
        cos["targets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "cos" && t["kind"].as_array().unwrap().iter().any(|k| k == "bin")),
        "the cos package has no cos binary"
    );
    let core = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "createos-sandbox")
        .expect("the core package");
    assert!(
        core["targets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| !t["kind"].as_array().unwrap().iter().any(|k| k == "bin")),
        "the core package builds a binary"
    );
}
