//! Directory transfers and the sync engine over SSH ([`SshRemote`]): archives stream through
//! exec channels of the sandbox's SSH connection (the host's OpenSSH sshd inside the sandbox,
//! as in tests/ssh.rs), the guest manifest comes from the helper over SSH, and nothing goes
//! through the files API or managed processes.

mod common;
mod transfer_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use createos_sandbox::guest::{FileType, ManifestOptions, PathMap};
use createos_sandbox::snapshot::{GitMode, Snapshot, SnapshotOptions};
use createos_sandbox::ssh::{SshFiles, SshOptions, SshSession};
use createos_sandbox::sync::{SyncMode, SyncOptions, Syncer};
use createos_sandbox::transfer::{self, Remote, SshRemote};
use createos_sandbox::{CreateSandbox, Error};
use transfer_support::hex;

const GUARD: Duration = Duration::from_secs(180);

fn require_sshd() {
    assert!(
        Path::new("/usr/sbin/sshd").exists(),
        "these tests run the real OpenSSH server inside emulated sandboxes: install it with \
         `apt-get install openssh-server` (the Debian package providing /usr/sbin/sshd)"
    );
}

async fn guarded<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, work)
        .await
        .expect("the test finished in time")
}

/// Deterministic pseudo-random bytes (xorshift).
fn pattern(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        out.extend_from_slice(&seed.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// An emulator, a sandbox, a connected SSH session (keys in a temporary directory) and a
/// local scratch directory.
struct Fx {
    env: common::Env,
    ssh: SshSession,
    tmp: tempfile::TempDir,
}

async fn fixture() -> Fx {
    require_sshd();
    let env = common::start().await;
    let sb = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb"))
        .await
        .expect("create");
    let tmp = tempfile::TempDir::new().unwrap();
    let options = SshOptions::new()
        .files(SshFiles::at(tmp.path().join("keys")))
        .connect_timeout(Duration::from_secs(60));
    let ssh = guarded(SshSession::connect(&sb, options))
        .await
        .expect("ssh connect");
    env.reset_stats().await;
    Fx { env, ssh, tmp }
}

impl Fx {
    fn remote(&self) -> SshRemote {
        SshRemote::new(self.ssh.clone())
    }

    fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    /// Nothing went through the files API or managed processes: it was all SSH.
    async fn assert_only_ssh(&self) {
        for op in ["uploadFile", "downloadFile", "createProcess"] {
            assert_eq!(
                self.env.requests(op).await,
                0,
                "{op} was used; everything should go over SSH"
            );
        }
    }

    async fn shutdown(self) {
        self.ssh.disconnect().await;
        self.env.shutdown().await;
    }
}

/// A project with nesting, a large binary file, a symlink, odd names and a credential file.
fn make_project(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let long = format!("deep/{}/{}.txt", "d".repeat(60), "n".repeat(80));
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert("README.md".into(), b"# hello\n".to_vec());
    files.insert("src/main.rs".into(), b"fn main() {}\n".to_vec());
    files.insert("data/blob.bin".into(), pattern(5 << 20, 11));
    files.insert("with space/it's $(odd).txt".into(), b"quoted\n".to_vec());
    files.insert("unicodé/ünï.txt".into(), "ünï\n".as_bytes().to_vec());
    files.insert(long, b"long name\n".to_vec());
    files.insert("empty".into(), Vec::new());
    transfer_support::write_project(dir, &files);
    files
}

fn snapshot_options(home: &Path) -> SnapshotOptions {
    SnapshotOptions {
        git: GitMode::Off,
        home_dir: Some(home.to_path_buf()),
        ..SnapshotOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_snapshot_streams_through_an_exec_channel() {
    let fx = fixture().await;
    let project = fx.tmp.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let files = make_project(&project);
    let snapshot = Snapshot::scan(&project, &snapshot_options(&fx.home())).unwrap();
    guarded(async {
        let size = snapshot.exact_size();
        let reported = Arc::new(AtomicU64::new(0));
        let seen = reported.clone();
        let progress: createos_sandbox::api::files::ProgressFn = Arc::new(move |done, total| {
            assert_eq!(total, Some(size));
            seen.store(done, Ordering::Relaxed);
        });
        let remote = fx.remote();
        let sent = transfer::upload_snapshot(&remote, &snapshot, "/root/up/nested", Some(progress))
            .await
            .unwrap();
        assert_eq!(
            sent.files,
            files.len() as u64 + 1,
            "the files and the symlink"
        );
        assert_eq!(sent.bytes, snapshot.exact_size());
        assert_eq!(
            reported.load(Ordering::Relaxed),
            snapshot.exact_size(),
            "progress reached the end"
        );

        // Read back over SSH too (the helper's manifest over the same connection).
        let manifest = remote
            .guest(PathMap::new("/root/up/nested").unwrap())
            .manifest(ManifestOptions::default().sha256(true))
            .await
            .unwrap();
        let seen: BTreeMap<_, _> = manifest
            .entries
            .iter()
            .map(|e| (e.path.clone(), e.clone()))
            .collect();
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
        assert_eq!(
            (link.kind.clone(), link.target.as_deref()),
            (FileType::Symlink, Some("src/main.rs"))
        );
        assert!(!seen.contains_key(".env"), "the deny-list kept .env home");
        assert_eq!(seen.len(), files.len() + 1);
        // Nothing was staged in the guest.
        let staged = fx
            .ssh
            .exec("ls -a /tmp | grep cos-transfer || true")
            .await
            .unwrap();
        assert_eq!(staged.stdout_text(), "");
    })
    .await;
    fx.assert_only_ssh().await;
    fx.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_extraction_over_ssh_is_reported() {
    let fx = fixture().await;
    let project = fx.tmp.path().join("project");
    std::fs::create_dir(&project).unwrap();
    make_project(&project);
    let snapshot = Snapshot::scan(&project, &snapshot_options(&fx.home())).unwrap();
    guarded(async {
        let remote = fx.remote();
        assert!(fx
            .ssh
            .exec("printf x > /root/plain-file")
            .await
            .unwrap()
            .success());
        let err = transfer::upload_snapshot(&remote, &snapshot, "/root/plain-file/sub", None)
            .await
            .expect_err("a file stands where the directory should be");
        assert!(err.to_string().contains("unpacking the archive"), "{err}");
        // A refused destination sends nothing (checked before any channel opens).
        let err = transfer::upload_snapshot(&remote, &snapshot, "relative/dir", None)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
        // The connection is still good for the next transfer.
        transfer::upload_snapshot(&remote, &snapshot, "/root/ok", None)
            .await
            .unwrap();
        let out = fx.ssh.exec("cat /root/ok/src/main.rs").await.unwrap();
        assert_eq!(out.stdout_text(), "fn main() {}\n");
    })
    .await;
    assert_eq!(fx.ssh.connects(), 1);
    fx.assert_only_ssh().await;
    fx.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guest_directory_comes_back_over_ssh() {
    let fx = fixture().await;
    guarded(async {
        let script = "mkdir -p /root/out/a/b && printf 'one' > /root/out/a/one.txt && \
                      head -c 3000000 /dev/urandom > /root/out/a/b/rand.bin && ln -s a/one.txt /root/out/link && \
                      printf 'top' > '/root/out/top level.txt' && mkdir -p /root/out/emptydir";
        assert!(fx.ssh.exec(script).await.unwrap().success());
        let digest = fx.ssh.exec("sha256sum /root/out/a/b/rand.bin").await.unwrap();
        let want = digest.stdout_text().split_whitespace().next().unwrap().to_string();

        let remote = fx.remote();
        let dest = fx.tmp.path().join("pulled");
        let got = transfer::download_dir(&remote, "/root/out", &dest, None).await.unwrap();
        assert_eq!((got.unpacked.files, got.unpacked.symlinks), (3, 1));
        assert!(got.bytes > 3_000_000);
        assert_eq!(std::fs::read(dest.join("a/one.txt")).unwrap(), b"one");
        assert_eq!(hex(&std::fs::read(dest.join("a/b/rand.bin")).unwrap()), want);
        assert_eq!(std::fs::read(dest.join("top level.txt")).unwrap(), b"top");
        assert_eq!(std::fs::read_link(dest.join("link")).unwrap(), Path::new("a/one.txt"));
        assert!(dest.join("emptydir").is_dir());

        // Into an existing directory: guest files replace, local-only files stay.
        std::fs::write(dest.join("local-only"), "mine").unwrap();
        assert!(fx.ssh.exec("printf changed > /root/out/a/one.txt").await.unwrap().success());
        transfer::download_dir(&remote, "/root/out", &dest, None).await.unwrap();
        assert_eq!(std::fs::read(dest.join("a/one.txt")).unwrap(), b"changed");
        assert_eq!(std::fs::read(dest.join("local-only")).unwrap(), b"mine");

        // A missing guest directory is an error, and nothing is left next to the destination.
        let err = transfer::download_dir(&remote, "/root/absent", &fx.tmp.path().join("nope"), None).await.unwrap_err();
        assert!(err.to_string().contains("packing the archive"), "{err}");
        assert!(!fx.tmp.path().join("nope").exists());
        let stray: Vec<_> = std::fs::read_dir(fx.tmp.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains("cos-incoming"))
            .collect();
        assert!(stray.is_empty(), "{stray:?}");
    })
    .await;
    fx.assert_only_ssh().await;
    fx.shutdown().await;
}

// ------------------------------------------------------------------------------ sync

impl Fx {
    fn local(&self) -> PathBuf {
        self.tmp.path().join("project")
    }

    fn sync_options(&self, mode: SyncMode) -> SyncOptions {
        let mut o = SyncOptions::new(mode)
            .home_dir(self.home())
            .state_dir(self.tmp.path().join("state"));
        o.git = GitMode::Off;
        o
    }

    fn syncer(&self, mode: SyncMode, remote_dir: &str) -> Syncer {
        std::fs::create_dir_all(self.local()).unwrap();
        Syncer::new(
            Arc::new(self.remote()),
            &self.local(),
            remote_dir,
            self.sync_options(mode),
        )
        .expect("syncer")
    }

    fn write(&self, rel: &str, content: &str) {
        let path = self.local().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.local().join(rel)).ok()
    }

    /// A guest file's text, read over SSH.
    async fn guest_text(&self, path: &str) -> Option<String> {
        self.ssh
            .read_to_vec(path, 1 << 20)
            .await
            .ok()
            .map(|b| String::from_utf8(b).unwrap())
    }

    async fn guest_sh(&self, script: &str) -> String {
        let out = self.ssh.exec(script).await.unwrap();
        assert!(out.success(), "{script}: {}", out.stderr_text());
        out.stdout_text().into_owned()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn once_one_way_and_mirror_over_ssh() {
    let fx = fixture().await;
    fx.write("a.txt", "A");
    fx.write("src/b.txt", "B");
    guarded(async {
        let report = fx.syncer(SyncMode::Once, "/root/once").run().await.unwrap();
        assert_eq!(report.pushed, ["a.txt", "src/b.txt"]);
        assert_eq!(fx.guest_text("/root/once/src/b.txt").await.as_deref(), Some("B"));

        fx.guest_sh("mkdir -p /root/ow/old/deep && printf keep > /root/ow/extra.txt && printf x > /root/ow/old/deep/gone.txt && printf stale > /root/ow/a.txt").await;
        let report = fx.syncer(SyncMode::OneWay, "/root/ow").run().await.unwrap();
        assert_eq!(report.pushed, ["a.txt", "src/b.txt"]);
        assert!(report.deleted_remote.is_empty());
        assert_eq!(fx.guest_text("/root/ow/a.txt").await.as_deref(), Some("A"));
        assert_eq!(fx.guest_text("/root/ow/extra.txt").await.as_deref(), Some("keep"));

        let mirror = fx.syncer(SyncMode::Mirror, "/root/ow");
        let report = mirror.run().await.unwrap();
        assert!(report.pushed.is_empty(), "already in step: {:?}", report.pushed);
        assert_eq!(report.deleted_remote, ["extra.txt", "old/deep/gone.txt"]);
        assert_eq!(fx.guest_sh("cd /root/ow && find . | sort").await, ".\n./a.txt\n./src\n./src/b.txt\n");

        // Incremental: only what changed travels.
        fx.write("src/b.txt", "B, changed and longer");
        let report = mirror.run().await.unwrap();
        assert_eq!(report.pushed, ["src/b.txt"]);
        assert!(report.bytes_sent < 10_000, "{}", report.bytes_sent);
        assert_eq!(fx.guest_text("/root/ow/src/b.txt").await.as_deref(), Some("B, changed and longer"));
        assert!(mirror.run().await.unwrap().is_noop());
    })
    .await;
    fx.assert_only_ssh().await;
    fx.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_way_over_ssh_keeps_both_versions_of_a_conflict() {
    let fx = fixture().await;
    for name in [
        "shared",
        "local-edit",
        "remote-edit",
        "to-delete-remotely",
        "to-delete-locally",
    ] {
        fx.write(&format!("{name}.txt"), "base\n");
    }
    guarded(async {
        let syncer = fx.syncer(SyncMode::TwoWay, "/root/tw");
        let first = syncer.run().await.unwrap();
        assert_eq!(first.pushed.len(), 5);

        fx.write("shared.txt", "local version\n");
        fx.write("local-edit.txt", "edited here\n");
        fx.write("new-local.txt", "born local");
        std::fs::remove_file(fx.local().join("to-delete-remotely.txt")).unwrap();
        fx.guest_sh(
            "cd /root/tw && printf 'remote version, longer\\n' > shared.txt && printf 'edited there\\n' > remote-edit.txt \
             && mkdir -p sub && printf 'born remote' > sub/new-remote.txt && rm to-delete-locally.txt",
        )
        .await;

        let report = syncer.run().await.unwrap();
        assert_eq!(report.pushed, ["local-edit.txt", "new-local.txt"]);
        assert_eq!(report.pulled, ["remote-edit.txt", "sub/new-remote.txt"]);
        assert_eq!(report.deleted_remote, ["to-delete-remotely.txt"]);
        assert_eq!(report.deleted_local, ["to-delete-locally.txt"]);
        assert_eq!(report.conflicts.len(), 1, "{report:?}");
        let conflict = &report.conflicts[0];
        assert_eq!(conflict.path, "shared.txt");
        assert_eq!(fx.read("shared.txt").as_deref(), Some("local version\n"));
        assert_eq!(fx.read(&conflict.remote_copy).as_deref(), Some("remote version, longer\n"));
        assert_eq!(fx.guest_text("/root/tw/shared.txt").await.as_deref(), Some("local version\n"));
        let copy = format!("/root/tw/{}", conflict.remote_copy);
        assert_eq!(fx.guest_text(&copy).await.as_deref(), Some("remote version, longer\n"));
        assert_eq!(fx.read("sub/new-remote.txt").as_deref(), Some("born remote"));
        assert_eq!(fx.read("remote-edit.txt").as_deref(), Some("edited there\n"));
        assert_eq!(fx.guest_text("/root/tw/new-local.txt").await.as_deref(), Some("born local"));
        assert_eq!(fx.read("to-delete-locally.txt"), None);
        assert_eq!(fx.guest_text("/root/tw/to-delete-remotely.txt").await, None);

        let again = syncer.run().await.unwrap();
        assert!(again.is_noop(), "{again:?}");
    })
    .await;
    fx.assert_only_ssh().await;
    fx.shutdown().await;
}
