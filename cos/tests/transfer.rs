//! Directory transfers (`createos_sandbox::transfer`) and `cos push`/`pull`/`snapshot` against
//! the emulator: real tar in the guest, real archives on the wire.

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "../../tests/transfer_support/mod.rs"]
mod transfer_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use createos_sandbox::guest::{FileType, ManifestOptions, PathMap};
use createos_sandbox::snapshot::{GitMode, Snapshot, SnapshotOptions};
use createos_sandbox::transfer::{self, ApiRemote};
use createos_sandbox::{CreateSandbox, Sandbox};
use serde_json::Value;
use transfer_support::hex;

const GUARD: Duration = Duration::from_secs(120);

async fn sandbox(env: &common::Env) -> Sandbox {
    env.client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb"))
        .await
        .expect("create")
}

async fn guarded<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, work)
        .await
        .expect("the test finished in time")
}

/// A project with nesting, binary content, a symlink, odd names and a credential file.
fn make_project(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let long = format!("deep/{}/{}.txt", "d".repeat(60), "n".repeat(80));
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert("README.md".into(), b"# hello\n".to_vec());
    files.insert("src/main.rs".into(), b"fn main() {}\n".to_vec());
    files.insert(
        "data/blob.bin".into(),
        (0..=255u8).cycle().take(300_000).collect(),
    );
    files.insert("with space/it's.txt".into(), b"quoted\n".to_vec());
    files.insert(long, b"long name\n".to_vec());
    files.insert("empty".into(), Vec::new());
    transfer_support::write_project(dir, &files);
    files
}

fn options(home: &Path) -> SnapshotOptions {
    SnapshotOptions {
        git: GitMode::Off,
        home_dir: Some(home.to_path_buf()),
        ..SnapshotOptions::default()
    }
}

async fn temp_leftovers(sb: &Sandbox) -> String {
    let out = sb
        .exec("sh", ["-c", "ls -a /tmp | grep cos-transfer || true"])
        .await
        .unwrap();
    out.stdout
}

#[tokio::test(flavor = "multi_thread")]
async fn a_snapshot_arrives_byte_exact_in_one_upload() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let tmp = tempfile::TempDir::new().unwrap();
    let project = tmp.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let files = make_project(&project);
    let snapshot = Snapshot::scan(&project, &options(&tmp.path().join("home"))).unwrap();
    env.reset_stats().await;
    guarded(async {
        let sent =
            transfer::upload_snapshot(&ApiRemote::new(sb.clone()), &snapshot, "/root/up", None)
                .await
                .unwrap();
        assert_eq!(
            sent.files,
            files.len() as u64 + 1,
            "the files and the symlink"
        );
        assert_eq!(sent.bytes, snapshot.exact_size());
        assert_eq!(env.requests("uploadFile").await, 1, "one streamed upload");

        let manifest = sb
            .guest(PathMap::new("/root/up").unwrap())
            .manifest(ManifestOptions::default().path("/root/up").sha256(true))
            .await
            .unwrap();
        let mut seen = BTreeMap::new();
        for entry in &manifest.entries {
            seen.insert(entry.path.clone(), entry.clone());
        }
        for (path, content) in &files {
            let entry = seen
                .get(path)
                .unwrap_or_else(|| panic!("{path} missing in the guest"));
            assert_eq!(entry.kind, FileType::File);
            assert_eq!(entry.size, content.len() as u64, "{path}");
            assert_eq!(
                entry.sha256.as_deref(),
                Some(hex(content).as_str()),
                "{path}"
            );
        }
        let link = seen.get("link-to-main").expect("the symlink arrived");
        assert_eq!(link.kind, FileType::Symlink);
        assert_eq!(link.target.as_deref(), Some("src/main.rs"));
        assert!(!seen.contains_key(".env"), "the deny-list kept .env home");
        assert_eq!(seen.len(), files.len() + 1);
        assert_eq!(
            temp_leftovers(&sb).await,
            "",
            "the temporary archive was removed"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_extraction_reports_and_cleans_up() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let tmp = tempfile::TempDir::new().unwrap();
    let project = tmp.path().join("project");
    std::fs::create_dir(&project).unwrap();
    make_project(&project);
    let snapshot = Snapshot::scan(&project, &options(&tmp.path().join("home"))).unwrap();
    guarded(async {
        sb.write("/root/plain-file", "x").await.unwrap();
        let err = transfer::upload_snapshot(
            &ApiRemote::new(sb.clone()),
            &snapshot,
            "/root/plain-file/sub",
            None,
        )
        .await
        .expect_err("a file stands where the directory should be");
        assert!(err.to_string().contains("unpacking the archive"), "{err}");
        assert_eq!(
            temp_leftovers(&sb).await,
            "",
            "the temporary archive was removed after the failure"
        );
        // a refused destination sends nothing
        env.reset_stats().await;
        assert!(transfer::upload_snapshot(
            &ApiRemote::new(sb.clone()),
            &snapshot,
            "relative/dir",
            None
        )
        .await
        .is_err());
        assert_eq!(env.requests("uploadFile").await, 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guest_directory_comes_back_and_merges() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let tmp = tempfile::TempDir::new().unwrap();
    guarded(async {
        let script = "mkdir -p /root/out/a/b && printf 'one' > /root/out/a/one.txt && \
                      head -c 200000 /dev/urandom > /root/out/a/b/rand.bin && ln -s a/one.txt /root/out/link && \
                      printf 'top' > '/root/out/top level.txt'";
        assert!(sb.exec("sh", ["-c", script]).await.unwrap().success());
        let rand = sb.download("/root/out/a/b/rand.bin").await.unwrap().bytes(1 << 20).await.unwrap();

        let dest = tmp.path().join("pulled");
        let got = transfer::download_dir(&ApiRemote::new(sb.clone()), "/root/out", &dest, None).await.unwrap();
        assert_eq!((got.unpacked.files, got.unpacked.symlinks), (3, 1));
        assert_eq!(std::fs::read(dest.join("a/one.txt")).unwrap(), b"one");
        assert_eq!(std::fs::read(dest.join("a/b/rand.bin")).unwrap(), rand.to_vec());
        assert_eq!(std::fs::read(dest.join("top level.txt")).unwrap(), b"top");
        assert_eq!(std::fs::read_link(dest.join("link")).unwrap(), Path::new("a/one.txt"));

        // into an existing directory: guest files replace, local-only files stay
        std::fs::write(dest.join("local-only"), "mine").unwrap();
        sb.write("/root/out/a/one.txt", "changed").await.unwrap();
        transfer::download_dir(&ApiRemote::new(sb.clone()), "/root/out", &dest, None).await.unwrap();
        assert_eq!(std::fs::read(dest.join("a/one.txt")).unwrap(), b"changed");
        assert_eq!(std::fs::read(dest.join("local-only")).unwrap(), b"mine");
        assert_eq!(temp_leftovers(&sb).await, "");
        // nothing staged is left next to the destination
        let stray: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains("cos-incoming"))
            .collect();
        assert!(stray.is_empty(), "{stray:?}");
    })
    .await;
}

fn cos(env: &common::Env, home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cos"))
        .args([
            "--endpoint",
            &env.base_url(),
            "--api-key",
            &env.mock.api_key(),
            "-o",
            "json",
        ])
        .args(args)
        .env_remove("CREATEOS_API_KEY")
        .env_remove("CREATEOS_SANDBOX_BASE_URL")
        .env("HOME", home)
        .output()
        .expect("cos runs")
}

fn ok(out: Output) -> Value {
    assert!(
        out.status.success(),
        "cos failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

#[tokio::test(flavor = "multi_thread")]
async fn cos_snapshot_lists_and_explains() {
    let env = common::start().await;
    let tmp = tempfile::TempDir::new().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let project = tmp.path().join("project");
    std::fs::create_dir(&project).unwrap();
    make_project(&project);
    std::fs::create_dir_all(project.join("logs")).unwrap();
    std::fs::write(project.join("logs/run.log"), "x").unwrap();
    let dir = project.to_str().unwrap();
    let v = ok(cos(
        &env,
        &home,
        &[
            "snapshot",
            dir,
            "--list",
            "--explain",
            "--exclude",
            "logs/",
            "--no-git",
        ],
    ));
    let files: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(
        files.contains(&"src/main.rs") && files.contains(&"link-to-main"),
        "{files:?}"
    );
    assert!(!files.contains(&".env") && !files.iter().any(|f| f.starts_with("logs")));
    assert_eq!(v["count"].as_u64().unwrap() as usize, files.len());
    let dropped: BTreeMap<&str, &str> = v["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["path"].as_str().unwrap(), d["reason"].as_str().unwrap()))
        .collect();
    assert!(
        dropped[".env"].contains("credential deny-list"),
        "{dropped:?}"
    );
    assert!(dropped.iter().any(|(p, r)| p.starts_with("logs") && r.contains("excluded by your pattern \"logs/\"")), "{dropped:?}");
    // without --explain the reasons are not printed
    let v = ok(cos(&env, &home, &["snapshot", dir, "--list", "--no-git"]));
    assert!(v.get("dropped").is_none() && v["files"].is_array());
}

#[tokio::test(flavor = "multi_thread")]
async fn cos_push_and_pull_directories() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let tmp = tempfile::TempDir::new().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let project = tmp.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let files = make_project(&project);
    let env_ref = &env;
    let v = ok(cos(
        env_ref,
        &home,
        &[
            "push",
            sb.id(),
            project.to_str().unwrap(),
            "/root/pushed",
            "--exclude",
            "data/",
            "--no-git",
        ],
    ));
    assert_eq!(
        v["files"].as_u64(),
        Some(files.len() as u64),
        "all but data/blob.bin, plus the link"
    );
    assert_eq!(
        sb.read_to_string("/root/pushed/src/main.rs").await.unwrap(),
        "fn main() {}\n"
    );
    assert!(
        sb.download("/root/pushed/data/blob.bin").await.is_err(),
        "excluded"
    );
    assert!(sb.download("/root/pushed/.env").await.is_err(), "denied");

    let local = tmp.path().join("back");
    std::fs::create_dir(&local).unwrap();
    let v = ok(cos(
        env_ref,
        &home,
        &["pull", sb.id(), "/root/pushed", local.to_str().unwrap()],
    ));
    assert_eq!(v["files"].as_u64(), Some(files.len() as u64 - 1));
    assert_eq!(
        std::fs::read(local.join("pushed/with space/it's.txt")).unwrap(),
        b"quoted\n"
    );
    // a refused system directory sends nothing
    env.reset_stats().await;
    let out = cos(
        env_ref,
        &home,
        &["push", sb.id(), project.to_str().unwrap(), "/etc/app"],
    );
    assert!(!out.status.success());
    assert_eq!(env.requests("uploadFile").await, 0);
}
