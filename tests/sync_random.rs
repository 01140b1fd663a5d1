//! Sync correctness under random change: a tree of 5,000 files, 20 rounds of random edits
//! (some keeping the size), adds, deletes and renames on the local side — and on the guest
//! side too — then one incremental sync per round. After each round both trees are hashed
//! and compared with what the mode promises:
//!
//! - `once`, `one-way`: the guest holds every local file, guest-only files stay;
//! - `mirror`: the guest is identical to the local tree;
//! - `two-way`: both sides are identical; a path changed on one side only carries that change
//!   (deletions included, a modification beating a deletion); a path changed on both sides is
//!   a conflict, reported, with the local version at the path and the guest's version kept as
//!   the reported copy on both sides.
//!
//! The local tree never changes in the one-directional modes. Over the files API for every
//! mode, and over SSH for `mirror`.
//!
//! The random choices come from a seeded generator; the seed is printed and can be replayed
//! with `SYNC_RANDOM_SEED=<seed>`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use createos_sandbox::api::processes::{ProcessSpec, RunOptions};
use createos_sandbox::snapshot::GitMode;
use createos_sandbox::ssh::{SshFiles, SshOptions, SshSession};
use createos_sandbox::sync::{SyncMode, SyncOptions, SyncReport, Syncer};
use createos_sandbox::transfer::{ApiRemote, Remote, SshRemote};
use createos_sandbox::{CreateSandbox, Sandbox};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const FILES: usize = 5_000;
const ROUNDS: usize = 20;
/// Bound of one whole test (20 rounds), so a hang fails.
const GUARD: Duration = Duration::from_secs(900);
const REMOTE_DIR: &str = "/root/tree";

/// A tree: relative path → content.
type Tree = BTreeMap<String, Blob>;

/// File content with its SHA-256, computed once (the test's own hashing stays proportional
/// to what changed).
#[derive(Clone, Debug)]
struct Blob {
    hash: String,
    bytes: Arc<[u8]>,
}

impl Blob {
    fn new(bytes: Vec<u8>) -> Self {
        Blob {
            hash: hex(&bytes),
            bytes: Arc::from(bytes),
        }
    }
}

impl PartialEq for Blob {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash
    }
}

/// splitmix64: small, fast, and the same on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }

    /// Printable text (the guest-side edits travel as JSON strings).
    fn text(&mut self, len: usize) -> Vec<u8> {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ0123456789\n";
        (0..len)
            .map(|_| ALPHABET[self.below(ALPHABET.len())])
            .collect()
    }

    fn pick<'a>(&mut self, keys: &'a [String]) -> &'a String {
        &keys[self.below(keys.len())]
    }
}

fn seed() -> u64 {
    let seed = match std::env::var("SYNC_RANDOM_SEED") {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("SYNC_RANDOM_SEED={text:?} is not a number")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    };
    eprintln!("sync_random seed = {seed} (replay with SYNC_RANDOM_SEED={seed})");
    seed
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A fresh file name: a few directory levels (some shared, some new), odd characters in some.
fn fresh_name(rng: &mut Rng, tag: &str, serial: &mut u64) -> String {
    *serial += 1;
    let n = *serial;
    let top = rng.below(40);
    let file = match rng.below(10) {
        0 => format!("{tag}{n} spaced.txt"),
        1 => format!("{tag}{n}-ünï.txt"),
        _ => format!("{tag}{n}.txt"),
    };
    match rng.below(4) {
        0 => format!("d{top:02}/{file}"),
        1 => format!("d{top:02}/s{}/{file}", rng.below(6)),
        2 => format!("d{top:02}/s{}/t{}/{file}", rng.below(6), rng.below(3)),
        _ => format!("n{}/{file}", rng.below(200)),
    }
}

/// Mostly small files, some empty, a few of 64 KiB.
fn fresh_content(rng: &mut Rng) -> Vec<u8> {
    let len = match rng.below(100) {
        0..=2 => 0,
        3 => 64 * 1024,
        _ => 1 + rng.below(1500),
    };
    rng.bytes(len)
}

// ------------------------------------------------------------------------ local side

fn write_local(root: &Path, rel: &str, content: &[u8]) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// Every regular file under `root`, with the model's hash when its bytes are the model's
/// (read and compared, not hashed), else a marker that cannot match.
fn hash_local(root: &Path, model: &Tree) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                let rel = entry
                    .path()
                    .strip_prefix(root)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_string();
                let bytes = std::fs::read(entry.path()).unwrap();
                let hash = match model.get(&rel) {
                    Some(blob) if *blob.bytes == *bytes => blob.hash.clone(),
                    _ => format!("other content ({} bytes)", bytes.len()),
                };
                out.insert(rel, hash);
            }
        }
    }
    out
}

/// One round of random local changes, applied to the disk and to `tree`.
fn change_local(rng: &mut Rng, root: &Path, tree: &mut Tree, serial: &mut u64) -> BTreeSet<String> {
    let mut touched = BTreeSet::new();
    let keys: Vec<String> = tree.keys().cloned().collect();
    // edits: half of them keep the size (only the content and the mtime tell)
    for _ in 0..40 {
        let path = rng.pick(&keys).clone();
        if !tree.contains_key(&path) {
            continue;
        }
        let old = &tree[&path].bytes;
        let new = if rng.below(2) == 0 && !old.is_empty() {
            let mut same = old.to_vec();
            let at = rng.below(same.len());
            same[at] = same[at].wrapping_add(1 + rng.below(255) as u8);
            same
        } else {
            fresh_content(rng)
        };
        if *new == **old {
            continue;
        }
        write_local(root, &path, &new);
        tree.insert(path.clone(), Blob::new(new));
        touched.insert(path);
    }
    for _ in 0..20 {
        let path = fresh_name(rng, "l", serial);
        let content = fresh_content(rng);
        write_local(root, &path, &content);
        tree.insert(path.clone(), Blob::new(content));
        touched.insert(path);
    }
    for _ in 0..20 {
        let path = rng.pick(&keys).clone();
        if tree.remove(&path).is_some() {
            std::fs::remove_file(root.join(&path)).unwrap();
            touched.insert(path);
        }
    }
    for _ in 0..20 {
        let from = rng.pick(&keys).clone();
        let Some(content) = tree.remove(&from) else {
            continue;
        };
        let to = fresh_name(rng, "l", serial);
        std::fs::create_dir_all(root.join(&to).parent().unwrap()).unwrap();
        std::fs::rename(root.join(&from), root.join(&to)).unwrap();
        tree.insert(to.clone(), content);
        touched.insert(from);
        touched.insert(to);
    }
    touched
}

// ------------------------------------------------------------------------ guest side

/// Applies `{"root", "ops": [[op, path, arg], …]}` read from stdin: write (text), delete,
/// rename; then, for `hash`, hashes every regular file under root and prints
/// `{"digest": sha256 of the sorted "path\0hash\n" lines}`, with `"files": {path: sha256}`
/// too when `full` (only needed to show differences).
const GUEST_SCRIPT: &str = r#"
import hashlib, json, os, sys
req = json.load(sys.stdin)
root = req["root"]
for op, path, arg in req["ops"]:
    full = os.path.join(root, path)
    if op == "write":
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(arg.encode("utf-8"))
    elif op == "delete":
        os.remove(full)
    elif op == "rename":
        dest = os.path.join(root, arg)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        os.rename(full, dest)
if req.get("hash"):
    out = {}
    for d, dirs, files in os.walk(root):
        for name in files:
            full = os.path.join(d, name)
            if os.path.isfile(full) and not os.path.islink(full):
                with open(full, "rb") as f:
                    out[os.path.relpath(full, root)] = hashlib.sha256(f.read()).hexdigest()
    digest = hashlib.sha256()
    for path in sorted(out):
        digest.update(("%s\0%s\n" % (path, out[path])).encode("utf-8"))
    answer = {"digest": digest.hexdigest()}
    if req.get("full"):
        answer["files"] = out
    json.dump(answer, sys.stdout)
"#;

/// Run the guest script through a managed process (stdin fed and closed by the run).
async fn guest_script(sb: &Sandbox, ops: Vec<Value>, hash: bool) -> Value {
    guest_request(sb, json!({ "root": REMOTE_DIR, "ops": ops, "hash": hash })).await
}

async fn guest_request(sb: &Sandbox, request: Value) -> Value {
    let hash = request["hash"] == true;
    let spec = ProcessSpec::new("python3").args(["-c", GUEST_SCRIPT]);
    let options = RunOptions::default()
        .timeout(Duration::from_secs(300))
        .stdin(serde_json::to_vec(&request).unwrap());
    let out = sb
        .processes()
        .run(spec, options)
        .await
        .expect("guest script");
    assert!(
        out.success() && !out.truncated,
        "guest script failed: {}",
        out.stderr_lossy()
    );
    if hash {
        serde_json::from_slice(&out.stdout).expect("hash JSON")
    } else {
        Value::Null
    }
}

/// The digest of a tree's listing, as the guest script computes it.
fn digest_of(hashes: &BTreeMap<String, String>) -> String {
    let mut digest = Sha256::new();
    for (path, hash) in hashes {
        digest.update(format!("{path}\0{hash}\n").as_bytes());
    }
    digest
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The guest tree is `expected`: compared by one digest; only a mismatch fetches every hash
/// to show the differences.
async fn check_remote(sb: &Sandbox, seed: u64, round: usize, expected: &Tree) {
    let expected = hashes(expected);
    let answer = guest_script(sb, Vec::new(), true).await;
    if answer["digest"].as_str() == Some(digest_of(&expected).as_str()) {
        return;
    }
    let full = guest_request(
        sb,
        json!({ "root": REMOTE_DIR, "ops": [], "hash": true, "full": true }),
    )
    .await;
    let actual = full["files"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    compare("guest", seed, round, &expected, &actual);
    panic!("seed {seed}, round {round}: the guest digest differs although the listings agree");
}

/// Random guest-side changes (fewer than local ones); `shared` paths are edited on both sides
/// on purpose (conflicts in two-way). Applied to `tree` (the guest's expected content).
fn change_remote(
    rng: &mut Rng,
    tree: &mut Tree,
    shared: &[String],
    serial: &mut u64,
) -> Vec<Value> {
    let mut ops = Vec::new();
    let keys: Vec<String> = tree.keys().cloned().collect();
    let write = |tree: &mut Tree, ops: &mut Vec<Value>, path: String, content: Vec<u8>| {
        ops.push(json!([
            "write",
            path,
            String::from_utf8(content.clone()).unwrap()
        ]));
        tree.insert(path, Blob::new(content));
    };
    for path in shared {
        let len = 1 + rng.below(400);
        let content = rng.text(len);
        write(tree, &mut ops, path.clone(), content);
    }
    for _ in 0..8 {
        let path = rng.pick(&keys).clone();
        if tree.contains_key(&path) {
            let len = 1 + rng.below(800);
            let content = rng.text(len);
            write(tree, &mut ops, path, content);
        }
    }
    for _ in 0..5 {
        let path = fresh_name(rng, "r", serial);
        let len = rng.below(600);
        let content = rng.text(len);
        write(tree, &mut ops, path, content);
    }
    for _ in 0..5 {
        let path = rng.pick(&keys).clone();
        if !shared.contains(&path) && tree.remove(&path).is_some() {
            ops.push(json!(["delete", path, ""]));
        }
    }
    for _ in 0..3 {
        let from = rng.pick(&keys).clone();
        if shared.contains(&from) {
            continue;
        }
        let Some(content) = tree.remove(&from) else {
            continue;
        };
        let to = fresh_name(rng, "r", serial);
        ops.push(json!(["rename", from, to.clone()]));
        tree.insert(to, content);
    }
    ops
}

// ------------------------------------------------------------------------ the check

fn hashes(tree: &Tree) -> BTreeMap<String, String> {
    tree.iter()
        .map(|(p, c)| (p.clone(), c.hash.clone()))
        .collect()
}

/// Panics with the first differences (and the seed) unless `actual` is `expected`.
fn compare(
    what: &str,
    seed: u64,
    round: usize,
    expected: &BTreeMap<String, String>,
    actual: &BTreeMap<String, String>,
) {
    if expected == actual {
        return;
    }
    let mut diffs = Vec::new();
    for (path, want) in expected {
        match actual.get(path) {
            None => diffs.push(format!("missing {path}")),
            Some(got) if got != want => diffs.push(format!("differs {path}")),
            _ => {}
        }
    }
    for path in actual.keys().filter(|p| !expected.contains_key(*p)) {
        diffs.push(format!("unexpected {path}"));
    }
    let shown: Vec<_> = diffs.iter().take(12).collect();
    panic!(
        "seed {seed}, round {round}: the {what} tree is wrong ({} differences): {shown:#?}",
        diffs.len()
    );
}

/// What two-way promises from the last synced tree `base` and both sides now: the merged
/// tree, and the paths that must be reported as conflicts (with the guest's version).
fn two_way_expectation(base: &Tree, local: &Tree, remote: &Tree) -> (Tree, Tree) {
    let mut merged = Tree::new();
    let mut conflicts = BTreeMap::new();
    let paths: BTreeSet<&String> = local.keys().chain(remote.keys()).collect();
    for path in paths {
        let before = base.get(path);
        match (local.get(path), remote.get(path)) {
            (Some(l), Some(r)) if l == r => {
                merged.insert(path.clone(), l.clone());
            }
            (Some(l), Some(r)) => {
                if before == Some(r) {
                    merged.insert(path.clone(), l.clone());
                } else if before == Some(l) {
                    merged.insert(path.clone(), r.clone());
                } else {
                    merged.insert(path.clone(), l.clone());
                    conflicts.insert(path.clone(), r.clone());
                }
            }
            (Some(l), None) => {
                if before != Some(l) {
                    merged.insert(path.clone(), l.clone());
                }
            }
            (None, Some(r)) => {
                if before != Some(r) {
                    merged.insert(path.clone(), r.clone());
                }
            }
            (None, None) => {}
        }
    }
    (merged, conflicts)
}

// ------------------------------------------------------------------------ the run

enum Channel {
    Api,
    Ssh,
}

async fn random_rounds(mode: SyncMode, channel: Channel) {
    let seed = seed();
    let setup = std::time::Instant::now();
    let mut rng = Rng(seed ^ (mode as u64).wrapping_mul(0x1000_0000_01b3));
    let env = common::start().await;
    let sb = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb"))
        .await
        .expect("create");
    let tmp = tempfile::TempDir::new().unwrap();
    let local_root = tmp.path().join("project");
    std::fs::create_dir(&local_root).unwrap();
    let mut ssh = None;
    let remote: Arc<dyn Remote> = match channel {
        Channel::Api => Arc::new(ApiRemote::new(sb.clone())),
        Channel::Ssh => {
            assert!(
                Path::new("/usr/sbin/sshd").exists(),
                "install openssh-server for the SSH run"
            );
            let options = SshOptions::new()
                .files(SshFiles::at(tmp.path().join("keys")))
                .connect_timeout(Duration::from_secs(60));
            let session = SshSession::connect(&sb, options)
                .await
                .expect("ssh connect");
            ssh = Some(session.clone());
            Arc::new(SshRemote::new(session))
        }
    };
    let mut options = SyncOptions::new(mode)
        .home_dir(tmp.path().join("home"))
        .state_dir(tmp.path().join("state"));
    options.git = GitMode::Off;
    let syncer = Syncer::new(remote, &local_root, REMOTE_DIR, options).expect("syncer");

    // the starting tree, on the local side only
    let mut serial = 0u64;
    let mut local = Tree::new();
    while local.len() < FILES {
        let path = fresh_name(&mut rng, "i", &mut serial);
        let content = fresh_content(&mut rng);
        write_local(&local_root, &path, &content);
        local.insert(path, Blob::new(content));
    }
    let setup = setup.elapsed();
    let work = async {
        let started = std::time::Instant::now();
        let first = syncer.run().await.expect("first sync");
        assert_eq!(
            first.pushed.len(),
            FILES,
            "seed {seed}: the first sync sends everything"
        );
        let mut remote_tree = local.clone();
        check_remote(&sb, seed, 0, &remote_tree).await;
        let mut full_bytes = first.bytes_sent;

        let first_sync = started.elapsed();
        // where the time goes: making changes, syncing, checking
        let (mut changing, mut syncing, mut checking) =
            (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        for round in 1..=ROUNDS {
            let phase = std::time::Instant::now();
            let keys: Vec<String> = local.keys().cloned().collect();
            let base = local.clone();
            let touched = change_local(&mut rng, &local_root, &mut local, &mut serial);
            // two-way conflicts on purpose: paths edited on both sides, one added on both
            let mut shared = Vec::new();
            if mode == SyncMode::TwoWay {
                for _ in 0..2 {
                    let path = rng.pick(&keys).clone();
                    if local.contains_key(&path) && remote_tree.contains_key(&path) {
                        let len = 1 + rng.below(300);
                        let content = rng.text(len);
                        write_local(&local_root, &path, &content);
                        local.insert(path.clone(), Blob::new(content));
                        shared.push(path);
                    }
                }
                let both = fresh_name(&mut rng, "b", &mut serial);
                let content = rng.text(50);
                write_local(&local_root, &both, &content);
                local.insert(both.clone(), Blob::new(content));
                shared.push(both);
            }
            let ops = change_remote(&mut rng, &mut remote_tree, &shared, &mut serial);
            guest_script(&sb, ops, false).await;
            changing += phase.elapsed();

            let phase = std::time::Instant::now();
            let report = syncer
                .run()
                .await
                .unwrap_or_else(|e| panic!("seed {seed}, round {round}: sync failed: {e}"));
            syncing += phase.elapsed();
            let phase = std::time::Instant::now();
            let expected_remote = match mode {
                SyncMode::Once | SyncMode::OneWay => {
                    let mut t = remote_tree.clone();
                    t.extend(local.clone());
                    t
                }
                SyncMode::Mirror => local.clone(),
                SyncMode::TwoWay => {
                    let (mut merged, conflicts) = two_way_expectation(&base, &local, &remote_tree);
                    check_conflicts(seed, round, &report, &conflicts);
                    for c in &report.conflicts {
                        merged.insert(c.remote_copy.clone(), conflicts[&c.path].clone());
                    }
                    local = merged.clone();
                    merged
                }
            };
            check_remote(&sb, seed, round, &expected_remote).await;
            compare(
                "local",
                seed,
                round,
                &hashes(&local),
                &hash_local(&local_root, &local),
            );
            if mode != SyncMode::Once {
                // incremental: what travelled is what changed
                let sent: BTreeSet<&String> = report.pushed.iter().collect();
                for path in &sent {
                    assert!(
                        touched.contains(*path) || shared.contains(*path) || remote_tree.get(*path) != base.get(*path),
                        "seed {seed}, round {round}: {path} was sent although neither side changed it"
                    );
                }
                assert!(
                    report.bytes_sent < full_bytes / 4,
                    "seed {seed}, round {round}: {} bytes sent, the full tree was {full_bytes}",
                    report.bytes_sent
                );
            } else {
                full_bytes = full_bytes.max(report.bytes_sent);
            }
            remote_tree = expected_remote;
            checking += phase.elapsed();
        }
        eprintln!(
            "{mode}: {FILES} files, setup {setup:.1?}, first sync {first_sync:.1?}, {ROUNDS} rounds in {:.1?} (changing {changing:.1?}, \
             syncing {syncing:.1?}, checking {checking:.1?})",
            started.elapsed() - first_sync
        );
    };
    tokio::time::timeout(GUARD, work)
        .await
        .unwrap_or_else(|_| panic!("seed {seed}: {mode} did not finish in {GUARD:?}"));
    if let Some(ssh) = ssh {
        ssh.disconnect().await;
    }
    env.shutdown().await;
}

/// The reported conflicts are exactly the expected ones, each with its own copy name.
fn check_conflicts(seed: u64, round: usize, report: &SyncReport, expected: &Tree) {
    let reported: BTreeSet<&String> = report.conflicts.iter().map(|c| &c.path).collect();
    let wanted: BTreeSet<&String> = expected.keys().collect();
    assert_eq!(reported, wanted, "seed {seed}, round {round}: conflicts");
    assert!(
        !expected.is_empty(),
        "seed {seed}, round {round}: the round makes conflicts on purpose"
    );
    for c in &report.conflicts {
        assert!(
            c.remote_copy
                .starts_with(&format!("{}.remote-conflict-", c.path)),
            "{c:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn once_over_the_files_api() {
    random_rounds(SyncMode::Once, Channel::Api).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_way_over_the_files_api() {
    random_rounds(SyncMode::OneWay, Channel::Api).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mirror_over_the_files_api() {
    random_rounds(SyncMode::Mirror, Channel::Api).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_way_over_the_files_api() {
    random_rounds(SyncMode::TwoWay, Channel::Api).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mirror_over_ssh() {
    random_rounds(SyncMode::Mirror, Channel::Ssh).await;
}

#[test]
fn the_two_way_model_matches_the_promise() {
    let t = |items: &[(&str, &str)]| -> Tree {
        items
            .iter()
            .map(|(p, c)| (p.to_string(), Blob::new(c.as_bytes().to_vec())))
            .collect()
    };
    let base = t(&[
        ("same", "s"),
        ("l", "1"),
        ("r", "1"),
        ("both", "1"),
        ("ldel", "1"),
        ("rdel", "1"),
        ("ldel-redit", "1"),
    ]);
    let local = t(&[
        ("same", "s"),
        ("l", "2"),
        ("r", "1"),
        ("both", "2"),
        ("rdel", "1"),
        ("new", "n"),
        ("ldel-redit", "1"),
    ]);
    let remote = t(&[
        ("same", "s"),
        ("l", "1"),
        ("r", "3"),
        ("both", "3"),
        ("ldel", "1"),
        ("ldel-redit", "9"),
        ("new", "m"),
    ]);
    let (merged, conflicts) = two_way_expectation(&base, &local, &remote);
    assert_eq!(
        merged,
        t(&[
            ("same", "s"),
            ("l", "2"),
            ("r", "3"),
            ("both", "2"),
            ("new", "n"),
            ("ldel-redit", "9")
        ])
    );
    assert_eq!(conflicts, t(&[("both", "3"), ("new", "m")]));
    let mut rng = Rng(7);
    let mut again = Rng(7);
    assert_eq!(
        (0..5).map(|_| rng.next()).collect::<Vec<_>>(),
        (0..5).map(|_| again.next()).collect::<Vec<_>>()
    );
}
