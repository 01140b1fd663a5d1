//! Project snapshots against real `git` repositories, the real file system and the system `tar`.
#![cfg(unix)]

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

use createos_sandbox::snapshot::{
    Compression, DropReason, EntryKind, GitMode, ListingSource, Snapshot, SnapshotOptions,
};
use createos_sandbox::Error;
use futures::StreamExt;
use tempfile::TempDir;

// ---------------------------------------------------------------------------------------------
// fixtures

fn run_git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fresh repository with its own identity (nothing global is touched).
fn git_repo(dir: &Path) {
    std::fs::create_dir_all(dir).expect("repo dir");
    run_git(dir, &["init", "-q"]);
    run_git(dir, &["config", "user.name", "Snapshot Test"]);
    run_git(dir, &["config", "user.email", "snapshot@test.invalid"]);
    run_git(dir, &["config", "commit.gpgsign", "false"]);
}

fn commit_all(dir: &Path) {
    run_git(dir, &["add", "-A"]);
    run_git(dir, &["commit", "-q", "-m", "snapshot test"]);
}

fn write(root: &Path, rel: impl AsRef<Path>, content: &[u8]) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("parent dirs");
    std::fs::write(path, content).expect("write file");
}

/// Options that never consult the real home directory.
fn opts(tmp: &TempDir) -> SnapshotOptions {
    SnapshotOptions {
        home_dir: Some(tmp.path().join("no-such-home")),
        ..SnapshotOptions::default()
    }
}

fn scan(dir: &Path, options: &SnapshotOptions) -> Snapshot {
    Snapshot::scan(dir, options).unwrap_or_else(|e| panic!("scan of {} failed: {e}", dir.display()))
}

fn listed(snapshot: &Snapshot) -> BTreeSet<PathBuf> {
    snapshot.files().iter().map(|e| e.path.clone()).collect()
}

fn set(paths: &[&str]) -> BTreeSet<PathBuf> {
    paths.iter().map(PathBuf::from).collect()
}

fn reason(snapshot: &Snapshot, path: impl AsRef<Path>) -> Option<DropReason> {
    snapshot
        .dropped()
        .iter()
        .find(|(p, _)| p == path.as_ref())
        .map(|(_, r)| r.clone())
}

fn tar_bytes(snapshot: &Snapshot) -> Vec<u8> {
    let mut out = Vec::new();
    snapshot.write_tar(&mut out).expect("archive written");
    out
}

/// (path as stored, kind, link target, content, mode, mtime) of every archive entry.
struct ArchivedEntry {
    path: PathBuf,
    kind: tar::EntryType,
    target: Option<PathBuf>,
    data: Vec<u8>,
    mode: u32,
    mtime: u64,
    uid: u64,
    username: Vec<u8>,
}

fn read_archive(bytes: &[u8]) -> Vec<ArchivedEntry> {
    let mut archive = tar::Archive::new(bytes);
    let mut out = Vec::new();
    for entry in archive.entries().expect("tar entries") {
        let mut entry = entry.expect("tar entry");
        let header = entry.header().clone();
        let path = entry.path().expect("entry path").into_owned();
        let target = entry
            .link_name()
            .expect("link name")
            .map(|t| t.into_owned());
        let mut data = Vec::new();
        entry.read_to_end(&mut data).expect("entry data");
        out.push(ArchivedEntry {
            path,
            kind: header.entry_type(),
            target,
            data,
            mode: header.mode().expect("mode"),
            mtime: header.mtime().expect("mtime"),
            uid: header.uid().expect("uid"),
            username: header.username_bytes().unwrap_or_default().to_vec(),
        });
    }
    out
}

/// Extract with the system `tar` and check the tree equals the snapshot, entry by entry.
fn extract_and_compare(snapshot: &Snapshot, archive: &[u8], gzip: bool) {
    let tmp = TempDir::new().expect("tmp");
    let file = tmp.path().join(if gzip { "a.tar.gz" } else { "a.tar" });
    std::fs::write(&file, archive).expect("archive file");
    let dest = tmp.path().join("out");
    std::fs::create_dir(&dest).expect("dest");
    let out = Command::new("tar")
        .arg(if gzip { "-xpzf" } else { "-xpf" })
        .arg(&file)
        .arg("-C")
        .arg(&dest)
        .output()
        .expect("tar runs");
    assert!(
        out.status.success(),
        "tar -x failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let (files, dirs) = tree(&dest);
    assert_eq!(
        files,
        listed(snapshot),
        "extracted files equal the snapshot's list"
    );
    let want_dirs: BTreeSet<PathBuf> = snapshot
        .directories()
        .iter()
        .map(|d| d.path.clone())
        .collect();
    assert_eq!(
        dirs, want_dirs,
        "extracted directories equal the implied ones"
    );

    for entry in snapshot.files() {
        let got = dest.join(&entry.path);
        let meta = std::fs::symlink_metadata(&got).expect("extracted entry");
        match &entry.kind {
            EntryKind::File => {
                assert!(meta.is_file(), "{} is a file", entry.path.display());
                let want = std::fs::read(snapshot.root().join(&entry.path)).expect("source");
                assert_eq!(
                    std::fs::read(&got).expect("extracted"),
                    want,
                    "{}",
                    entry.path.display()
                );
                assert_eq!(
                    meta.permissions().mode() & 0o7777,
                    entry.mode,
                    "{} mode",
                    entry.path.display()
                );
                let mtime = meta
                    .modified()
                    .expect("mtime")
                    .duration_since(UNIX_EPOCH)
                    .expect("epoch")
                    .as_secs();
                assert_eq!(mtime, entry.mtime, "{} mtime", entry.path.display());
            }
            EntryKind::Symlink { target } => {
                assert!(
                    meta.file_type().is_symlink(),
                    "{} stays a link",
                    entry.path.display()
                );
                assert_eq!(&std::fs::read_link(&got).expect("link"), target);
            }
            EntryKind::Directory => panic!("files() never holds directories"),
        }
    }
}

/// Non-directory entries and directories below `root`, relative to it.
fn tree(root: &Path) -> (BTreeSet<PathBuf>, BTreeSet<PathBuf>) {
    let (mut files, mut dirs) = (BTreeSet::new(), BTreeSet::new());
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for item in std::fs::read_dir(&dir).expect("read_dir") {
            let path = item.expect("dir entry").path();
            let rel = path.strip_prefix(root).expect("below root").to_path_buf();
            if std::fs::symlink_metadata(&path).expect("lstat").is_dir() {
                dirs.insert(rel);
                stack.push(path);
            } else {
                files.insert(rel);
            }
        }
    }
    (files, dirs)
}

// ---------------------------------------------------------------------------------------------
// listing in Git

#[test]
fn git_lists_tracked_and_untracked_unignored_files() {
    let tmp = TempDir::new().expect("tmp");
    let repo = tmp.path().join("repo");
    git_repo(&repo);
    write(&repo, ".gitignore", b"*.log\nbuild/\n");
    write(&repo, "src/main.rs", b"fn main() {}\n");
    commit_all(&repo);
    write(&repo, "notes.txt", b"untracked but not ignored\n");
    write(&repo, "debug.log", b"ignored\n");
    write(&repo, "build/out.bin", b"ignored dir\n");

    let snap = scan(&repo, &opts(&tmp));
    assert_eq!(
        listed(&snap),
        set(&[".gitignore", "notes.txt", "src/main.rs"])
    );
    assert_eq!(reason(&snap, "debug.log"), Some(DropReason::Ignored));
    assert_eq!(
        reason(&snap, "build"),
        Some(DropReason::Ignored),
        "an ignored directory is reported once"
    );
    assert!(matches!(snap.source(), ListingSource::Git { .. }));
    assert_eq!(snap.directories().len(), 1, "only src/ is implied");
    extract_and_compare(&snap, &tar_bytes(&snap), false);
}

#[test]
fn submodules_and_nested_repositories_are_dropped_with_their_content() {
    let tmp = TempDir::new().expect("tmp");
    let inner = tmp.path().join("inner");
    git_repo(&inner);
    write(&inner, "lib.rs", b"pub fn x() {}\n");
    write(&inner, ".env", b"SECRET=inner\n");
    commit_all(&inner);

    let outer = tmp.path().join("outer");
    git_repo(&outer);
    write(&outer, "a.txt", b"main\n");
    let inner_url = inner.to_str().expect("utf-8 temp path");
    run_git(
        &outer,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            inner_url,
            "vendor/sub",
        ],
    );
    commit_all(&outer);
    // an untracked repository inside the project (not a submodule)
    git_repo(&outer.join("scratch"));
    write(&outer, "scratch/wip.txt", b"private experiment\n");

    let snap = scan(&outer, &opts(&tmp));
    assert_eq!(listed(&snap), set(&[".gitmodules", "a.txt"]));
    assert_eq!(
        reason(&snap, "vendor/sub"),
        Some(DropReason::Gitlink {
            submodule: "vendor/sub".into()
        })
    );
    assert_eq!(reason(&snap, "scratch"), Some(DropReason::NestedRepository));
    let archive = read_archive(&tar_bytes(&snap));
    assert!(archive
        .iter()
        .all(|e| !e.path.starts_with("vendor") && !e.path.starts_with("scratch")));
}

#[test]
fn user_excludes_beat_every_other_rule() {
    let tmp = TempDir::new().expect("tmp");
    let repo = tmp.path().join("repo");
    git_repo(&repo);
    write(&repo, ".env.example", b"KEY=\n");
    write(&repo, ".env", b"KEY=secret\n");
    write(&repo, "fixtures/big.bin", b"0123456789");
    write(&repo, "media/clip.mp4", b"mp4");
    write(&repo, "docs/a.png", b"png");
    write(&repo, "docs/deep/b.png", b"png");
    write(&repo, "keep.txt", b"keep\n");
    commit_all(&repo);

    let options = SnapshotOptions {
        excludes: vec![
            ".env.example".into(),
            ".env".into(),
            "fixtures/".into(),
            "*.mp4".into(),
            "docs/*.png".into(),
        ],
        ..opts(&tmp)
    };
    let snap = scan(&repo, &options);
    assert_eq!(listed(&snap), set(&["docs/deep/b.png", "keep.txt"]));
    assert_eq!(
        reason(&snap, ".env.example"),
        Some(DropReason::UserExclude(".env.example".into()))
    );
    assert_eq!(
        reason(&snap, ".env"),
        Some(DropReason::UserExclude(".env".into())),
        "user excludes come first"
    );
    assert_eq!(
        reason(&snap, "fixtures/big.bin"),
        Some(DropReason::UserExclude("fixtures/".into()))
    );
    assert_eq!(
        reason(&snap, "media/clip.mp4"),
        Some(DropReason::UserExclude("*.mp4".into()))
    );
    assert_eq!(
        reason(&snap, "docs/a.png"),
        Some(DropReason::UserExclude("docs/*.png".into()))
    );

    let bad = SnapshotOptions {
        excludes: vec!["!keep.txt".into()],
        ..opts(&tmp)
    };
    assert!(matches!(
        Snapshot::scan(&repo, &bad),
        Err(Error::InvalidInput { .. })
    ));
}

#[test]
fn credential_shapes_are_denied_but_env_templates_kept() {
    let tmp = TempDir::new().expect("tmp");
    let repo = tmp.path().join("repo");
    git_repo(&repo);
    for name in [
        ".env",
        ".env.local",
        ".env.example",
        ".env.sample",
        ".env.template",
        "id_rsa",
        "id_rsa.pub",
    ] {
        write(&repo, name, b"x\n");
    }
    write(&repo, "certs/server.pem", b"-----BEGIN\n");
    write(&repo, ".aws/credentials", b"[default]\n");
    write(&repo, ".ssh/config", b"Host x\n");
    write(&repo, "app/main.py", b"print(1)\n");
    commit_all(&repo);

    let snap = scan(&repo, &opts(&tmp));
    assert_eq!(
        listed(&snap),
        set(&[
            ".env.example",
            ".env.sample",
            ".env.template",
            "app/main.py",
            "id_rsa.pub"
        ])
    );
    for (path, rule) in [
        (".env", ".env"),
        (".env.local", ".env.*"),
        ("id_rsa", "id_rsa"),
        ("certs/server.pem", "*.pem"),
        (".aws/credentials", ".aws/"),
        (".ssh/config", ".ssh/"),
    ] {
        assert_eq!(
            reason(&snap, path),
            Some(DropReason::DenyList(rule)),
            "{path}"
        );
    }
    // the same rules outside Git
    let walked = scan(
        &repo,
        &SnapshotOptions {
            git: GitMode::Off,
            ..opts(&tmp)
        },
    );
    assert_eq!(listed(&walked), listed(&snap));
    assert_eq!(reason(&walked, ".git"), Some(DropReason::Vcs));
}

#[test]
fn tracked_files_ignored_later_are_removed_by_check_ignore() {
    let tmp = TempDir::new().expect("tmp");
    let repo = tmp.path().join("repo");
    git_repo(&repo);
    write(&repo, "secret.txt", b"committed once\n");
    write(&repo, "generated/out.js", b"x\n");
    write(&repo, "keep.txt", b"keep\n");
    commit_all(&repo);
    write(&repo, ".gitignore", b"secret.txt\ngenerated/\n");

    let snap = scan(&repo, &opts(&tmp));
    assert_eq!(listed(&snap), set(&[".gitignore", "keep.txt"]));
    assert_eq!(reason(&snap, "secret.txt"), Some(DropReason::Ignored));
    assert_eq!(reason(&snap, "generated/out.js"), Some(DropReason::Ignored));
}

#[test]
fn a_subdirectory_of_the_work_tree_is_listed_relative_to_itself() {
    let tmp = TempDir::new().expect("tmp");
    let repo = tmp.path().join("repo");
    git_repo(&repo);
    write(&repo, ".gitignore", b"*.tmp\n");
    write(&repo, "top.txt", b"top\n");
    write(&repo, "app/main.rs", b"fn main() {}\n");
    write(&repo, "app/src/lib.rs", b"\n");
    commit_all(&repo);
    write(
        &repo,
        "app/scratch.tmp",
        b"ignored by the top-level rules\n",
    );
    write(&repo, "app/new.rs", b"untracked\n");

    let snap = scan(&repo.join("app"), &opts(&tmp));
    assert_eq!(listed(&snap), set(&["main.rs", "new.rs", "src/lib.rs"]));
    assert_eq!(reason(&snap, "scratch.tmp"), Some(DropReason::Ignored));
    match snap.source() {
        ListingSource::Git { work_tree } => {
            assert_eq!(work_tree, &repo.canonicalize().expect("canonical"))
        }
        other => panic!("expected a Git listing, got {other:?}"),
    }
}

#[test]
fn nothing_to_upload_is_an_error() {
    let tmp = TempDir::new().expect("tmp");
    let repo = tmp.path().join("repo");
    git_repo(&repo);
    write(&repo, ".env", b"SECRET=1\n");
    commit_all(&repo);
    let err = Snapshot::scan(&repo, &opts(&tmp)).expect_err("only a denied file");
    assert!(err.to_string().contains("nothing to upload"), "{err}");

    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(empty.join("only/dirs")).expect("dirs");
    let err = Snapshot::scan(&empty, &opts(&tmp)).expect_err("no files at all");
    assert!(
        matches!(&err, Error::InvalidInput { message, .. } if message.contains("no files")),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// outside Git

#[test]
fn outside_git_the_walk_honours_ignore_files_and_keeps_hidden_files() {
    let tmp = TempDir::new().expect("tmp");
    let dir = tmp.path().join("plain");
    write(&dir, ".gitignore", b"*.tmp\nbuild/\n");
    write(&dir, ".ignore", b"!keep.tmp\n");
    write(&dir, "keep.tmp", b"re-included by .ignore\n");
    write(&dir, "drop.tmp", b"ignored\n");
    write(&dir, "build/x.o", b"ignored dir\n");
    write(&dir, ".hidden", b"hidden files travel\n");
    write(&dir, "sub/.gitignore", b"local.txt\n");
    write(&dir, "sub/local.txt", b"ignored by the nested file\n");
    write(&dir, "sub/kept.txt", b"kept\n");
    write(&dir, ".hg/store", b"vcs\n");
    write(&dir, ".ssh/id_ed25519", b"key\n");
    write(&dir, "fixtures/huge.bin", b"excluded\n");
    std::fs::create_dir_all(dir.join("empty")).expect("empty dir");

    let snap = scan(
        &dir,
        &SnapshotOptions {
            excludes: vec!["fixtures/".into()],
            ..opts(&tmp)
        },
    );
    assert_eq!(snap.source(), &ListingSource::Walk);
    assert_eq!(
        listed(&snap),
        set(&[
            ".gitignore",
            ".hidden",
            ".ignore",
            "keep.tmp",
            "sub/.gitignore",
            "sub/kept.txt"
        ])
    );
    assert_eq!(reason(&snap, "drop.tmp"), Some(DropReason::Ignored));
    assert_eq!(reason(&snap, "build"), Some(DropReason::Ignored));
    assert_eq!(reason(&snap, "sub/local.txt"), Some(DropReason::Ignored));
    assert_eq!(
        reason(&snap, ".hg"),
        Some(DropReason::Vcs),
        "pruned directories are reported once"
    );
    assert_eq!(reason(&snap, ".ssh"), Some(DropReason::DenyList(".ssh/")));
    assert_eq!(
        reason(&snap, "fixtures"),
        Some(DropReason::UserExclude("fixtures/".into()))
    );
    extract_and_compare(&snap, &tar_bytes(&snap), false);
}

// ---------------------------------------------------------------------------------------------
// symlinks, odd names, modes

#[test]
fn symlinks_are_archived_as_links_never_followed() {
    let tmp = TempDir::new().expect("tmp");
    let outside = tmp.path().join("outside-secret.txt");
    std::fs::write(&outside, b"must not travel").expect("outside file");
    for git in [true, false] {
        let dir = tmp.path().join(if git { "repo" } else { "plain" });
        if git {
            git_repo(&dir);
        }
        write(&dir, "a.txt", b"a\n");
        write(&dir, "sub/b.txt", b"b\n");
        symlink("a.txt", dir.join("inside")).expect("link");
        symlink("sub", dir.join("dirlink")).expect("dir link");
        symlink(&outside, dir.join("outside")).expect("outside link");
        symlink("../../../nowhere", dir.join("dangling")).expect("dangling link");
        if git {
            commit_all(&dir);
        }

        let options = SnapshotOptions {
            git: if git { GitMode::Auto } else { GitMode::Off },
            ..opts(&tmp)
        };
        let snap = scan(&dir, &options);
        assert_eq!(
            listed(&snap),
            set(&[
                "a.txt",
                "dangling",
                "dirlink",
                "inside",
                "outside",
                "sub/b.txt"
            ])
        );
        let bytes = tar_bytes(&snap);
        let archive = read_archive(&bytes);
        let link = |name: &str| {
            let e = archive
                .iter()
                .find(|e| e.path == Path::new(name))
                .unwrap_or_else(|| panic!("{name} archived"));
            assert_eq!(e.kind, tar::EntryType::Symlink, "{name} is a link");
            assert!(e.data.is_empty(), "{name} carries no content");
            e.target.clone().expect("target")
        };
        assert_eq!(link("inside"), Path::new("a.txt"));
        assert_eq!(link("dirlink"), Path::new("sub"));
        assert_eq!(link("outside"), outside);
        assert_eq!(link("dangling"), Path::new("../../../nowhere"));
        assert!(archive.iter().all(|e| e.data != b"must not travel"));
        extract_and_compare(&snap, &bytes, false);
    }
}

#[test]
fn tracked_files_behind_a_symlinked_directory_are_refused() {
    let tmp = TempDir::new().expect("tmp");
    let repo = tmp.path().join("repo");
    git_repo(&repo);
    write(&repo, "d/f.txt", b"tracked\n");
    write(&repo, "keep.txt", b"keep\n");
    commit_all(&repo);
    // replace the directory by a link to a place outside the project holding the same name
    let elsewhere = tmp.path().join("elsewhere");
    write(&elsewhere, "f.txt", b"outside content\n");
    std::fs::remove_dir_all(repo.join("d")).expect("rm d");
    symlink(&elsewhere, repo.join("d")).expect("link d");

    let snap = scan(&repo, &opts(&tmp));
    assert!(
        matches!(reason(&snap, "d/f.txt"), Some(DropReason::Escapes(_))),
        "{:?}",
        snap.dropped()
    );
    assert!(
        listed(&snap).contains(Path::new("d")),
        "the link itself is untracked-unignored and kept as a link"
    );
    assert!(!tar_bytes(&snap)
        .windows(15)
        .any(|w| w == b"outside content"));
}

#[test]
fn odd_file_names_survive_the_round_trip() {
    let tmp = TempDir::new().expect("tmp");
    let mut odd: Vec<OsString> = vec![
        OsString::from("with space.txt"),
        OsString::from("new\nline.txt"),
        OsString::from("dir with space/inner\ttab.txt"),
        OsString::from(":colon *star [br].txt"),
        OsString::from(":!bang.txt"),
    ];
    // APFS (macOS) refuses names that are not UTF-8; Linux file systems take any bytes
    if cfg!(target_os = "linux") {
        odd.push(OsString::from_vec(b"latin1-\xe9t\xe9.txt".to_vec()));
    }
    for git in [true, false] {
        let dir = tmp.path().join(if git { "repo" } else { "plain" });
        if git {
            git_repo(&dir);
        }
        for (i, name) in odd.iter().enumerate() {
            write(&dir, name, format!("content {i}\n").as_bytes());
        }
        if git {
            // half tracked, half untracked
            run_git(&dir, &["add", "--", "with space.txt", "new\nline.txt"]);
            run_git(&dir, &["commit", "-q", "-m", "odd"]);
        }
        let options = SnapshotOptions {
            git: if git { GitMode::Auto } else { GitMode::Off },
            ..opts(&tmp)
        };
        let snap = scan(&dir, &options);
        let want: BTreeSet<PathBuf> = odd.iter().map(PathBuf::from).collect();
        assert_eq!(listed(&snap), want, "git={git}");
        let bytes = tar_bytes(&snap);
        let archived: BTreeSet<Vec<u8>> = read_archive(&bytes)
            .into_iter()
            .filter(|e| e.kind == tar::EntryType::Regular)
            .map(|e| e.path.as_os_str().as_bytes().to_vec())
            .collect();
        assert_eq!(
            archived,
            odd.iter().map(|n| n.as_bytes().to_vec()).collect()
        );
        extract_and_compare(&snap, &bytes, false);
    }
}

#[test]
fn headers_keep_modes_and_mtimes_with_anonymous_owners() {
    let tmp = TempDir::new().expect("tmp");
    let dir = tmp.path().join("plain");
    write(&dir, "bin/run.sh", b"#!/bin/sh\necho hi\n");
    write(&dir, "ro.txt", b"read only\n");
    std::fs::set_permissions(
        dir.join("bin/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    std::fs::set_permissions(dir.join("ro.txt"), std::fs::Permissions::from_mode(0o440))
        .expect("chmod");
    std::fs::set_permissions(dir.join("bin"), std::fs::Permissions::from_mode(0o750))
        .expect("chmod dir");
    let when = UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    std::fs::File::options()
        .write(true)
        .open(dir.join("bin/run.sh"))
        .expect("open")
        .set_modified(when)
        .expect("mtime");

    let snap = scan(&dir, &opts(&tmp));
    let archive = read_archive(&tar_bytes(&snap));
    let find = |name: &str| {
        archive
            .iter()
            .find(|e| e.path == Path::new(name))
            .expect("entry")
    };
    assert_eq!(
        find("bin/").kind,
        tar::EntryType::Directory,
        "directories get explicit entries"
    );
    assert_eq!(find("bin/").mode, 0o750);
    assert_eq!(find("bin/run.sh").mode, 0o755);
    assert_eq!(find("bin/run.sh").mtime, 1_600_000_000);
    assert_eq!(find("ro.txt").mode, 0o440);
    assert!(archive.iter().all(|e| e.uid == 0 && e.username.is_empty()));
    // the directory entry comes before what it holds
    let pos = |name: &str| {
        archive
            .iter()
            .position(|e| e.path == Path::new(name))
            .expect("entry")
    };
    assert!(pos("bin/") < pos("bin/run.sh"));
}

#[test]
fn long_names_and_link_targets_use_gnu_extensions_and_exact_size_holds() {
    let tmp = TempDir::new().expect("tmp");
    let dir = tmp.path().join("plain");
    let deep = format!("{}/{}/{}", "a".repeat(60), "b".repeat(60), "c".repeat(90));
    write(&dir, &deep, b"deep\n");
    write(&dir, "x".repeat(100), b"exactly one hundred\n");
    write(&dir, "short.txt", &vec![7u8; 1000]);
    symlink(
        format!("{deep}/../../{}", "t".repeat(150)),
        dir.join("longlink"),
    )
    .expect("long link");

    let snap = scan(&dir, &opts(&tmp));
    let bytes = tar_bytes(&snap);
    assert_eq!(bytes.len() as u64, snap.exact_size());
    assert_eq!(bytes.len() % 512, 0);
    let archive = read_archive(&bytes);
    assert!(archive
        .iter()
        .any(|e| e.path == Path::new(&deep) && e.data == b"deep\n"));
    extract_and_compare(&snap, &bytes, false);
}

// ---------------------------------------------------------------------------------------------
// refusing places

#[test]
fn refuses_the_root_home_sensitive_folders_and_non_directories() {
    let tmp = TempDir::new().expect("tmp");
    let invalid = |dir: &Path, options: &SnapshotOptions| match Snapshot::scan(dir, options) {
        Err(Error::InvalidInput { message, .. }) => message,
        other => panic!("{} should be refused, got {other:?}", dir.display()),
    };
    assert!(invalid(Path::new("/"), &opts(&tmp)).contains("root"));

    // the real home directory, with the default options
    if let Some(home) = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_dir())
    {
        assert!(invalid(&home, &SnapshotOptions::default()).contains("home"));
    }
    let home = tmp.path().join("home");
    write(&home, "project/main.rs", b"\n");
    write(&home, ".ssh/keys/id.txt", b"\n");
    let with_home = SnapshotOptions {
        home_dir: Some(home.clone()),
        ..SnapshotOptions::default()
    };
    assert!(invalid(&home, &with_home).contains("home"));
    assert!(
        invalid(&home.join("project/.."), &with_home).contains("home"),
        "compared after realpath"
    );
    assert!(invalid(tmp.path(), &with_home).contains("contains your home"));
    assert!(invalid(&home.join(".ssh/keys"), &with_home).contains(".ssh"));
    let forced = SnapshotOptions {
        allow_sensitive_root: true,
        ..with_home.clone()
    };
    assert_eq!(
        listed(&scan(&home.join(".ssh/keys"), &forced)),
        set(&["id.txt"])
    );
    assert_eq!(
        listed(&scan(&home.join("project"), &with_home)),
        set(&["main.rs"])
    );

    assert!(invalid(&home.join("project/main.rs"), &with_home).contains("not a directory"));
    assert!(matches!(
        Snapshot::scan(tmp.path().join("missing"), &with_home),
        Err(Error::Io { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// archive output

#[test]
fn a_file_that_changed_since_the_scan_fails_the_archive() {
    let tmp = TempDir::new().expect("tmp");
    let dir = tmp.path().join("plain");
    write(&dir, "a.txt", b"a\n");
    write(&dir, "b.txt", b"short\n");
    let snap = scan(&dir, &opts(&tmp));
    write(&dir, "b.txt", b"much longer now\n");

    let err = snap.write_tar(Vec::new()).expect_err("size changed");
    assert!(err.to_string().contains("b.txt"), "{err}");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let items: Vec<_> = runtime.block_on(snap.tar_stream(Compression::gzip()).collect::<Vec<_>>());
    let last = items
        .last()
        .expect("items")
        .as_ref()
        .expect_err("the stream ends with the error");
    let inner = last
        .get_ref()
        .and_then(|e| e.downcast_ref::<Error>())
        .expect("the crate's error inside");
    assert!(matches!(inner, Error::Io { .. }), "{inner}");
}

/// Each file is opened once and judged through that handle against the scan: a file swapped
/// for another of the same size (an editor's save-by-rename), for a symlink, or for a fifo
/// fails the archive — the fifo without hanging the writer.
#[test]
fn a_file_replaced_since_the_scan_fails_the_archive() {
    let tmp = TempDir::new().expect("tmp");
    let dir = tmp.path().join("plain");
    for i in 0..50 {
        write(&dir, format!("f{i:02}.txt"), b"same size\n");
    }
    type Change = fn(&Path);
    let cases: [(&str, Change); 3] = [
        ("replaced", |path| {
            let fresh = path.with_extension("new");
            std::fs::write(&fresh, b"other one\n").expect("new file");
            std::fs::rename(&fresh, path).expect("rename over");
        }),
        ("symlink", |path| {
            std::fs::remove_file(path).expect("remove");
            symlink("/etc/hostname", path).expect("symlink");
        }),
        ("regular file", |path| {
            std::fs::remove_file(path).expect("remove");
            let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
            assert!(status.success());
        }),
    ];
    for (i, (expected, change)) in cases.iter().enumerate() {
        let snap = scan(&dir, &opts(&tmp));
        let victim = format!("f{:02}.txt", 10 + i * 10);
        change(&dir.join(&victim));
        for compression in [Compression::None, Compression::gzip()] {
            let err = snap
                .write_archive(Vec::new(), compression)
                .expect_err("the archive must fail");
            let text = err.to_string();
            assert!(
                text.contains(&victim) && text.contains(expected),
                "{compression:?}: {text}"
            );
        }
        std::fs::remove_file(dir.join(&victim)).expect("clean up");
        write(&dir, &victim, b"same size\n");
    }
}

#[tokio::test]
async fn the_stream_equals_write_tar_byte_for_byte() {
    let tmp = TempDir::new().expect("tmp");
    let repo = tmp.path().join("repo");
    git_repo(&repo);
    for i in 0..40 {
        // some bigger than a chunk, so chunk boundaries fall inside files
        let size = if i % 7 == 0 { 150_000 + i } else { i * 13 };
        write(
            &repo,
            format!("d{}/f{i}.bin", i % 5),
            &(0..size).map(|b| (b % 251) as u8).collect::<Vec<_>>(),
        );
    }
    commit_all(&repo);
    let snap = scan(&repo, &opts(&tmp));

    for compression in [
        Compression::None,
        Compression::gzip(),
        Compression::Gzip { level: 1 },
    ] {
        let mut written = Vec::new();
        snap.write_archive(&mut written, compression)
            .expect("write_archive");
        let mut streamed = Vec::new();
        let mut stream = snap.tar_stream(compression);
        while let Some(chunk) = stream.next().await {
            streamed.extend_from_slice(&chunk.expect("chunk"));
        }
        assert_eq!(streamed, written, "{compression:?}");
        let mut via_read = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(
            &mut snap.tar_stream(compression).into_async_read(),
            &mut via_read,
        )
        .await
        .expect("AsyncRead");
        assert_eq!(via_read, written, "{compression:?} as AsyncRead");
        if compression == Compression::None {
            assert_eq!(written.len() as u64, snap.exact_size());
        }
        extract_and_compare(&snap, &written, compression != Compression::None);
    }
    // and writing twice is deterministic
    assert_eq!(tar_bytes(&snap), tar_bytes(&snap));
}

#[tokio::test]
async fn ten_thousand_files_stream_through() {
    let tmp = TempDir::new().expect("tmp");
    let dir = tmp.path().join("many");
    for i in 0..10_000 {
        write(
            &dir,
            format!("d{:03}/f{i:05}.txt", i % 100),
            format!("file {i}\n").as_bytes(),
        );
    }
    let snap = scan(&dir, &opts(&tmp));
    assert_eq!(snap.files().len(), 10_000);
    assert_eq!(snap.directories().len(), 100);

    let mut total = 0u64;
    let mut largest_chunk = 0usize;
    let mut stream = snap.tar_stream(Compression::None);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("chunk");
        total += chunk.len() as u64;
        largest_chunk = largest_chunk.max(chunk.len());
    }
    assert_eq!(total, snap.exact_size());
    assert!(
        largest_chunk <= 64 * 1024,
        "chunks stay small: {largest_chunk}"
    );

    let mut gz = Vec::new();
    let mut stream = snap.tar_stream(Compression::gzip());
    while let Some(chunk) = stream.next().await {
        gz.extend_from_slice(&chunk.expect("chunk"));
    }
    let mut tar = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut tar)
        .expect("gunzip");
    let entries = read_archive(&tar);
    assert_eq!(
        entries
            .iter()
            .filter(|e| e.kind == tar::EntryType::Regular)
            .count(),
        10_000
    );
}
