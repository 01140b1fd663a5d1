//! The sync engine (`createos_sandbox::sync`) against the emulator: every mode, two-way
//! conflicts, incremental transfers, path safety, watch mode.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use createos_sandbox::snapshot::GitMode;
use createos_sandbox::sync::{SyncMode, SyncOptions, Syncer};
use createos_sandbox::transfer::ApiRemote;
use createos_sandbox::{CreateSandbox, Sandbox};
use tokio_util::sync::CancellationToken;

const GUARD: Duration = Duration::from_secs(180);

struct Fixture {
    env: common::Env,
    sb: Sandbox,
    tmp: tempfile::TempDir,
    local: PathBuf,
}

async fn fixture() -> Fixture {
    let env = common::start().await;
    let sb = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb"))
        .await
        .expect("create");
    let tmp = tempfile::TempDir::new().unwrap();
    let local = tmp.path().join("project");
    std::fs::create_dir(&local).unwrap();
    Fixture {
        env,
        sb,
        tmp,
        local,
    }
}

impl Fixture {
    fn options(&self, mode: SyncMode) -> SyncOptions {
        let mut o = SyncOptions::new(mode)
            .home_dir(self.tmp.path().join("home"))
            .state_dir(self.tmp.path().join("state"));
        o.git = GitMode::Off;
        o
    }

    fn syncer(&self, mode: SyncMode, remote: &str) -> Syncer {
        Syncer::new(
            Arc::new(ApiRemote::new(self.sb.clone())),
            &self.local,
            remote,
            self.options(mode),
        )
        .expect("syncer")
    }

    fn write(&self, rel: &str, content: &str) {
        let path = self.local.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.local.join(rel)).ok()
    }

    async fn remote(&self, path: &str) -> Option<String> {
        self.sb.read_to_string(path).await.ok()
    }
}

async fn guarded<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, work)
        .await
        .expect("the test finished in time")
}

#[tokio::test(flavor = "multi_thread")]
async fn once_uploads_everything() {
    let f = fixture().await;
    f.write("a.txt", "A");
    f.write("dir/b.txt", "B");
    guarded(async {
        let report = f.syncer(SyncMode::Once, "/root/once").run().await.unwrap();
        assert_eq!(report.pushed, ["a.txt", "dir/b.txt"]);
        assert!(report.bytes_sent > 0);
        assert_eq!(f.remote("/root/once/dir/b.txt").await.as_deref(), Some("B"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_way_keeps_and_mirror_deletes_guest_extras() {
    let f = fixture().await;
    f.write("a.txt", "A");
    f.write("src/b.txt", "B");
    guarded(async {
        f.sb.write("/root/ow/extra.txt", "keep me").await.unwrap();
        f.sb.write("/root/ow/old/deep/gone.txt", "x").await.unwrap();
        f.sb.write("/root/ow/a.txt", "stale content").await.unwrap();
        let report = f.syncer(SyncMode::OneWay, "/root/ow").run().await.unwrap();
        assert_eq!(report.pushed, ["a.txt", "src/b.txt"]);
        assert!(report.deleted_remote.is_empty());
        assert_eq!(f.remote("/root/ow/a.txt").await.as_deref(), Some("A"));
        assert_eq!(
            f.remote("/root/ow/extra.txt").await.as_deref(),
            Some("keep me")
        );

        let report = f.syncer(SyncMode::Mirror, "/root/ow").run().await.unwrap();
        assert!(
            report.pushed.is_empty(),
            "already in step: {:?}",
            report.pushed
        );
        assert_eq!(report.deleted_remote, ["extra.txt", "old/deep/gone.txt"]);
        assert_eq!(f.remote("/root/ow/extra.txt").await, None);
        let ls =
            f.sb.exec("sh", ["-c", "cd /root/ow && find . | sort"])
                .await
                .unwrap()
                .stdout;
        assert_eq!(
            ls, ".\n./a.txt\n./src\n./src/b.txt\n",
            "emptied directories are gone too"
        );
        // a mirror never deletes what the local side excludes
        f.sb.write("/root/ow/node_modules/pkg.js", "dep")
            .await
            .unwrap();
        let opts = f.options(SyncMode::Mirror).exclude("node_modules");
        let syncer = Syncer::new(
            Arc::new(ApiRemote::new(f.sb.clone())),
            &f.local,
            "/root/ow",
            opts,
        )
        .unwrap();
        let report = syncer.run().await.unwrap();
        assert!(report.is_noop(), "{report:?}");
        assert_eq!(
            f.remote("/root/ow/node_modules/pkg.js").await.as_deref(),
            Some("dep")
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_way_moves_changes_both_ways_and_keeps_conflicts() {
    let f = fixture().await;
    f.write("shared.txt", "base\n");
    f.write("local-edit.txt", "base\n");
    f.write("remote-edit.txt", "base\n");
    f.write("to-delete-remotely.txt", "x");
    f.write("to-delete-locally.txt", "y");
    guarded(async {
        let syncer = f.syncer(SyncMode::TwoWay, "/root/tw");
        let first = syncer.run().await.unwrap();
        assert_eq!(first.pushed.len(), 5);
        assert!(first.conflicts.is_empty());
        assert!(
            syncer.state_path().unwrap().exists(),
            "the state was recorded"
        );

        // changes on both sides
        f.write("shared.txt", "local version\n");
        f.sb.write("/root/tw/shared.txt", "remote version, longer\n")
            .await
            .unwrap();
        f.write("local-edit.txt", "edited here\n");
        f.sb.write("/root/tw/remote-edit.txt", "edited there\n")
            .await
            .unwrap();
        f.sb.write("/root/tw/new-remote.txt", "born remote")
            .await
            .unwrap();
        f.write("new-local.txt", "born local");
        std::fs::remove_file(f.local.join("to-delete-remotely.txt")).unwrap();
        assert!(f
            .sb
            .exec("rm", ["/root/tw/to-delete-locally.txt"])
            .await
            .unwrap()
            .success());

        let report = syncer.run().await.unwrap();
        assert_eq!(report.pushed, ["local-edit.txt", "new-local.txt"]);
        assert_eq!(report.pulled, ["new-remote.txt", "remote-edit.txt"]);
        assert_eq!(report.deleted_remote, ["to-delete-remotely.txt"]);
        assert_eq!(report.deleted_local, ["to-delete-locally.txt"]);
        assert_eq!(report.conflicts.len(), 1, "{report:?}");
        let conflict = &report.conflicts[0];
        assert_eq!(conflict.path, "shared.txt");
        assert!(
            conflict
                .remote_copy
                .starts_with("shared.txt.remote-conflict-"),
            "{conflict:?}"
        );

        // both versions are kept, on both sides
        assert_eq!(f.read("shared.txt").as_deref(), Some("local version\n"));
        assert_eq!(
            f.read(&conflict.remote_copy).as_deref(),
            Some("remote version, longer\n")
        );
        assert_eq!(
            f.remote("/root/tw/shared.txt").await.as_deref(),
            Some("local version\n")
        );
        assert_eq!(
            f.remote(&format!("/root/tw/{}", conflict.remote_copy))
                .await
                .as_deref(),
            Some("remote version, longer\n")
        );
        // the one-sided changes travelled
        assert_eq!(f.read("remote-edit.txt").as_deref(), Some("edited there\n"));
        assert_eq!(f.read("new-remote.txt").as_deref(), Some("born remote"));
        assert_eq!(
            f.remote("/root/tw/local-edit.txt").await.as_deref(),
            Some("edited here\n")
        );
        assert_eq!(
            f.remote("/root/tw/new-local.txt").await.as_deref(),
            Some("born local")
        );
        assert_eq!(f.read("to-delete-locally.txt"), None);
        assert_eq!(f.remote("/root/tw/to-delete-remotely.txt").await, None);

        // settled: the next sync has nothing to do
        let again = syncer.run().await.unwrap();
        assert!(again.is_noop(), "{again:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn only_changed_files_travel() {
    let f = fixture().await;
    for i in 0..200 {
        f.write(&format!("d{}/f{i}.txt", i % 10), &format!("file {i}\n"));
    }
    guarded(async {
        let syncer = f.syncer(SyncMode::OneWay, "/root/inc");
        let first = syncer.run().await.unwrap();
        assert_eq!(first.pushed.len(), 200);

        for i in [3, 77, 150] {
            f.write(
                &format!("d{}/f{i}.txt", i % 10),
                &format!("file {i} changed, and longer\n"),
            );
        }
        f.env.reset_stats().await;
        let second = syncer.run().await.unwrap();
        assert_eq!(second.pushed, ["d0/f150.txt", "d3/f3.txt", "d7/f77.txt"]);
        assert_eq!(f.env.requests("uploadFile").await, 1, "one batch");
        assert!(
            second.bytes_sent < first.bytes_sent / 20,
            "{} vs {}",
            second.bytes_sent,
            first.bytes_sent
        );
        assert_eq!(
            f.remote("/root/inc/d7/f77.txt").await.as_deref(),
            Some("file 77 changed, and longer\n")
        );

        f.env.reset_stats().await;
        let third = syncer.run().await.unwrap();
        assert!(third.is_noop(), "{third:?}");
        assert_eq!(f.env.requests("uploadFile").await, 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_first_sync_travels_as_concurrent_streams_and_arrives_whole() {
    let f = fixture().await;
    // enough files for more than one stream; each file holds its own path
    let files = 8_200;
    let root = f.local.clone();
    tokio::task::spawn_blocking(move || {
        for i in 0..files {
            let dir = root.join(format!("d{:02}", i / 200));
            if i % 200 == 0 {
                std::fs::create_dir_all(&dir).unwrap();
            }
            std::fs::write(
                dir.join(format!("f{i:05}")),
                format!("./d{:02}/f{i:05}\n", i / 200),
            )
            .unwrap();
        }
    })
    .await
    .unwrap();
    guarded(async {
        let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let seen = Arc::clone(&sent);
        let options = f.options(SyncMode::OneWay).progress(move |bytes, _| {
            seen.fetch_max(bytes, std::sync::atomic::Ordering::Relaxed);
        });
        let syncer =
            Syncer::new(Arc::new(ApiRemote::new(f.sb.clone())), &f.local, "/root/big/tree", options).expect("syncer");
        f.env.reset_stats().await;
        let first = syncer.run().await.unwrap();
        assert_eq!(first.pushed.len(), files);
        assert!(f.env.requests("uploadFile").await >= 2, "more than one stream");
        // progress counts every stream's bytes together
        assert_eq!(sent.load(std::sync::atomic::Ordering::Relaxed), first.bytes_sent);

        // every file arrived with its content
        let check = "cd /root/big/tree && find . -type f -exec awk 'FNR == 1 { n++; if ($0 != FILENAME) bad++ } \
                     END { print n + 0, bad + 0 }' {} +  | awk '{ n += $1; bad += $2 } END { print n, bad }'";
        let out = f.sb.exec("sh", ["-c", check]).await.unwrap();
        assert!(out.success(), "{out:?}");
        assert_eq!(out.stdout.trim(), format!("{files} 0"));

        // exact mtimes came through every stream: nothing is left to do
        f.env.reset_stats().await;
        let again = syncer.run().await.unwrap();
        assert!(again.is_noop(), "{again:?}");
        assert_eq!(f.env.requests("uploadFile").await, 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unsafe_paths_are_refused_before_anything_is_sent() {
    let f = fixture().await;
    f.write("a.txt", "A");
    let home = f.tmp.path().join("home");
    std::fs::create_dir_all(home.join(".aws/project")).unwrap();
    f.env.reset_stats().await;
    let remote: Arc<ApiRemote> = Arc::new(ApiRemote::new(f.sb.clone()));
    let try_new = |local: &Path, dir: &str, force: bool| {
        Syncer::new(
            remote.clone(),
            local,
            dir,
            f.options(SyncMode::Mirror).force(force),
        )
        .map(|_| ())
    };
    for dir in [
        "/",
        "/etc/app",
        "/usr/local/x",
        "/root/../etc",
        "relative",
        "/proc/self",
    ] {
        assert!(
            try_new(&f.local, dir, false).is_err(),
            "{dir} must be refused"
        );
    }
    assert!(try_new(Path::new("/"), "/root/x", true).is_err());
    assert!(try_new(&home, "/root/x", true).is_err());
    assert!(try_new(&home.join(".aws/project"), "/root/x", false).is_err());
    assert!(
        try_new(&home.join(".aws/project"), "/root/x", true).is_ok(),
        "--force allows it"
    );
    let stats = f.env.stats().await;
    let sent: u64 = stats["requests"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|v| v.as_u64())
        .sum();
    assert_eq!(sent, 0, "nothing reached the emulator: {stats}");
}

type WatchReports =
    tokio::sync::mpsc::UnboundedReceiver<Result<createos_sandbox::sync::SyncReport, String>>;

/// Run `syncer.watch` (local events only, no poll) in a task: its stop token, its reports and
/// the task.
fn start_watch(
    syncer: Syncer,
) -> (
    CancellationToken,
    WatchReports,
    tokio::task::JoinHandle<createos_sandbox::Result<()>>,
) {
    let cancel = CancellationToken::new();
    let (tx, reports) = tokio::sync::mpsc::unbounded_channel();
    let stop = cancel.clone();
    let task = tokio::spawn(async move {
        syncer
            .watch(stop, None, move |r| {
                drop(tx.send(r.map_err(|e| e.to_string())))
            })
            .await
    });
    (cancel, reports, task)
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_mode_sends_local_edits() {
    let f = fixture().await;
    f.write("start.txt", "0");
    let (cancel, mut reports, task) = start_watch(f.syncer(SyncMode::OneWay, "/root/watched"));
    guarded(async {
        let first = reports
            .recv()
            .await
            .expect("a first report")
            .expect("the first sync works");
        assert_eq!(first.pushed, ["start.txt"]);
        f.write("sub/edited.txt", "hello from the watcher");
        loop {
            if f.remote("/root/watched/sub/edited.txt").await.as_deref()
                == Some("hello from the watcher")
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    cancel.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_edit_made_while_a_watch_sync_runs_is_not_lost() {
    let f = fixture().await;
    f.write("start.txt", "0");
    // No poll: only file events can trigger the sync that carries the second edit.
    let (cancel, mut reports, task) = start_watch(f.syncer(SyncMode::OneWay, "/root/racing"));
    guarded(async {
        reports
            .recv()
            .await
            .expect("a first report")
            .expect("the first sync works");
        // Slow the next upload down so the second edit lands while that sync is running.
        f.env
            .add_fault("PUT /v1/sandboxes/*/files delay=1500ms count=1")
            .await;
        let uploads = f.env.requests("uploadFile").await;
        f.write("first.txt", "1");
        while f.env.requests("uploadFile").await == uploads {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        f.write("second.txt", "2");
        while f.remote("/root/racing/second.txt").await.as_deref() != Some("2") {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            f.remote("/root/racing/first.txt").await.as_deref(),
            Some("1")
        );
    })
    .await;
    cancel.cancel();
    task.await.unwrap().unwrap();
}

fn cos(f: &Fixture, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_cos"))
        .args([
            "--endpoint",
            &f.env.base_url(),
            "--api-key",
            &f.env.mock.api_key(),
            "-o",
            "json",
        ])
        .args(args)
        .env_remove("CREATEOS_API_KEY")
        .env_remove("CREATEOS_SANDBOX_BASE_URL")
        .env_remove("XDG_STATE_HOME")
        .env("HOME", f.tmp.path().join("home"))
        .output()
        .expect("cos runs")
}

#[tokio::test(flavor = "multi_thread")]
async fn cos_sync_runs_and_refuses_unsafe_paths() {
    let f = fixture().await;
    std::fs::create_dir_all(f.tmp.path().join("home")).unwrap();
    f.write("a.txt", "A");
    let local = f.local.to_str().unwrap().to_string();
    f.env.reset_stats().await;
    let out = cos(
        &f,
        &[
            "sync",
            f.sb.id(),
            "--local",
            &local,
            "--remote",
            "/etc/app",
            "--mode",
            "mirror",
        ],
    );
    assert!(!out.status.success());
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("system directory"), "{said}");
    let stats = f.env.stats().await;
    let sent: u64 = stats["requests"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|v| v.as_u64())
        .sum();
    assert_eq!(sent, 0, "nothing reached the emulator: {stats}");

    let out = cos(
        &f,
        &[
            "sync",
            f.sb.id(),
            "--local",
            &local,
            "--remote",
            "/root/cli",
            "--mode",
            "two-way",
            "--exclude",
            "*.tmp",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["mode"], "two-way");
    assert_eq!(v["report"]["pushed"], serde_json::json!(["a.txt"]));
    assert_eq!(f.remote("/root/cli/a.txt").await.as_deref(), Some("A"));
}
