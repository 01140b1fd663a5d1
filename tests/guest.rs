//! Guest file operations (`createos_sandbox::guest`) against the emulator: the real helper,
//! run by a real `python3` in the sandbox, over both channels: managed processes and exec
//! channels of the sandbox's SSH connection (the host's OpenSSH sshd inside the sandbox, as
//! in tests/ssh.rs). Every case runs over both (`over_process` / `over_ssh`).

mod common;

use std::path::Path;
use std::time::Duration;

use createos_sandbox::guest::{
    FileType, GlobOptions, GrepOptions, Guest, GuestChannel, GuestErrorCode, GuestOptions,
    ListOptions, ManifestOptions, PatchAction, PathMap, ReadOptions, ReadResult, EMBEDDED_SOURCE,
};
use createos_sandbox::ssh::{SshFiles, SshOptions, SshSession};
use createos_sandbox::{CreateSandbox, Error, Sandbox};
use serde_json::json;
use sha2::{Digest, Sha256};

/// Upper bound for anything that runs remote processes, so a hang fails the test.
const GUARD: Duration = Duration::from_secs(120);

const ROOT: &str = "/root/work";

/// The channel a test runs the helper over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    Process,
    Ssh,
}

/// Runs `$name(Via)` once per channel.
macro_rules! over_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread")]
            async fn over_process() {
                super::$name(super::Via::Process).await
            }

            #[tokio::test(flavor = "multi_thread")]
            async fn over_ssh() {
                super::$name(super::Via::Ssh).await
            }
        }
    )*};
}

over_both!(
    every_operation_round_trips,
    text_limits_are_enforced,
    refused_changes_leave_files_alone,
    concurrent_edits_of_one_file_are_serialized,
    helper_is_uploaded_once_per_version,
    missing_python_and_broken_helpers_are_typed,
    host_project_paths_map_into_the_guest,
);

/// One emulator, one sandbox, and (over SSH) a connected session whose keys live in a
/// temporary directory.
struct Fx {
    env: common::Env,
    sb: Sandbox,
    via: Via,
    ssh: Option<SshSession>,
    _keys: tempfile::TempDir,
}

fn require_sshd() {
    assert!(
        Path::new("/usr/sbin/sshd").exists(),
        "the SSH cases run the real OpenSSH server inside emulated sandboxes: install it with \
         `apt-get install openssh-server` (the Debian package providing /usr/sbin/sshd)"
    );
}

fn ssh_options(keys: &tempfile::TempDir) -> SshOptions {
    SshOptions::new()
        .files(SshFiles::at(keys.path()))
        .connect_timeout(Duration::from_secs(60))
}

async fn fixture(via: Via) -> Fx {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let keys = tempfile::tempdir().unwrap();
    let ssh = match via {
        Via::Process => None,
        Via::Ssh => {
            require_sshd();
            Some(
                guarded(SshSession::connect(&sb, ssh_options(&keys)))
                    .await
                    .expect("ssh connect"),
            )
        }
    };
    // what the SSH setup did through the control plane is not part of the test
    env.reset_stats().await;
    Fx {
        env,
        sb,
        via,
        ssh,
        _keys: keys,
    }
}

impl Fx {
    /// Options selecting this fixture's channel: over SSH the session is connected, so the
    /// automatic choice picks it; the process variant pins managed processes.
    fn options(&self) -> GuestOptions {
        match &self.ssh {
            Some(session) => GuestOptions::new().ssh_session(session.clone()),
            None => GuestOptions::new().channel(GuestChannel::Process),
        }
    }

    fn guest(&self) -> Guest {
        self.guest_of(&self.sb)
    }

    fn guest_of(&self, sb: &Sandbox) -> Guest {
        Guest::new(sb.clone(), PathMap::new(ROOT).unwrap(), self.options())
    }

    /// The operations so far used the expected channel: over SSH no managed process was
    /// started, over processes some were.
    async fn assert_channel(&self) {
        let started = self.env.requests("createProcess").await;
        match self.via {
            Via::Ssh => assert_eq!(started, 0, "over SSH no managed process is started"),
            Via::Process => assert!(
                started > 0,
                "over processes the helper runs as managed processes"
            ),
        }
    }

    async fn shutdown(self) {
        if let Some(ssh) = &self.ssh {
            ssh.disconnect().await;
        }
        self.env.shutdown().await;
    }
}

async fn sandbox(env: &common::Env) -> Sandbox {
    env.client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb"))
        .await
        .expect("create")
}

/// The raw bytes of a guest file, through the files API (not the helper).
async fn bytes_of(sb: &Sandbox, path: &str) -> Vec<u8> {
    sb.download(path)
        .await
        .expect("download")
        .bytes(16 << 20)
        .await
        .expect("body")
        .to_vec()
}

/// Run a shell script through the exec API (not the helper, not SSH).
async fn api_sh(sb: &Sandbox, script: &str) -> String {
    let out = sb.exec("sh", ["-c", script]).await.expect("exec API");
    assert!(
        out.success(),
        "script failed ({}): {}\n{}",
        out.exit_code,
        out.stderr,
        script
    );
    out.stdout
}

/// Inode and mtime of a guest file: an install (temp file + rename) changes the inode.
async fn identity(sb: &Sandbox, path: &str) -> String {
    api_sh(sb, &format!("stat -c '%i %Y' '{path}'"))
        .await
        .trim()
        .to_string()
}

fn code(err: &Error) -> GuestErrorCode {
    err.guest_code()
        .cloned()
        .unwrap_or_else(|| panic!("expected a guest error, got {err:?}"))
}

async fn guarded<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, work)
        .await
        .expect("the test finished in time")
}

async fn every_operation_round_trips(via: Via) {
    let fx = fixture(via).await;
    let (sb, g) = (&fx.sb, fx.guest());
    guarded(async {
        let made = g.mkdir("src/nested", true).await.unwrap();
        assert_eq!((made.path.as_str(), made.created), ("/root/work/src/nested", true));
        assert!(!g.mkdir("src/nested", true).await.unwrap().created);

        let w = g.write("src/a.txt", "alpha\nbeta\ngamma\n").await.unwrap();
        assert_eq!((w.path.as_str(), w.bytes, w.created), ("/root/work/src/a.txt", 17, true));
        assert!(!g.write("src/a.txt", "alpha\nbeta\ngamma\nbeta\n").await.unwrap().created);
        assert_eq!(bytes_of(sb, "/root/work/src/a.txt").await, b"alpha\nbeta\ngamma\nbeta\n");

        match g.read("src/a.txt", ReadOptions::default().offset(2).limit(2)).await.unwrap() {
            ReadResult::File(f) => {
                assert_eq!(f.content, "2: beta\n3: gamma");
                assert_eq!((f.offset, f.lines, f.total_lines, f.truncated, f.next_offset), (2, 2, 4, true, Some(4)));
            }
            other => panic!("expected a file, got {other:?}"),
        }
        match g.read("src", ReadOptions::default()).await.unwrap() {
            ReadResult::Directory(d) => assert_eq!(d.entries, ["a.txt", "nested/"]),
            other => panic!("expected a directory, got {other:?}"),
        }

        let e = g.edit("src/a.txt", "gamma", "GAMMA", false).await.unwrap();
        assert_eq!(e.replacements, 1);
        let e = g.edit("src/a.txt", "beta", "BETA", true).await.unwrap();
        assert_eq!(e.replacements, 2);
        assert_eq!(bytes_of(sb, "/root/work/src/a.txt").await, b"alpha\nBETA\nGAMMA\nBETA\n");
        let err = g.edit("src/a.txt", "absent", "x", false).await.unwrap_err();
        assert_eq!(code(&err), GuestErrorCode::NotFound);

        let st = g.stat("src/a.txt").await.unwrap();
        assert_eq!((st.kind.clone(), st.size, st.mode.as_str()), (FileType::File, 22, "0644"));
        assert_eq!(st.path, "/root/work/src/a.txt");
        assert_eq!(g.stat("src").await.unwrap().kind, FileType::Directory);
        let err = g.stat("missing.txt").await.unwrap_err();
        assert!(err.guest().unwrap().is_not_found(), "{err}");

        g.write("src/nested/b.rs", "fn main() {}\n// Beta here\n").await.unwrap();
        let listing = g.list(ListOptions::default().path("src").recursive(true)).await.unwrap();
        let names: Vec<_> = listing.entries.iter().map(|e| (e.name.as_str(), e.kind.clone())).collect();
        assert_eq!(
            names,
            [("a.txt", FileType::File), ("nested", FileType::Directory), ("nested/b.rs", FileType::File)]
        );
        assert_eq!(listing.path, "/root/work/src");

        let globbed = g.glob("**/*.rs", GlobOptions::default()).await.unwrap();
        assert_eq!(globbed.files, ["src/nested/b.rs"]);
        assert!(!globbed.truncated);
        let none = g.glob("*.none", GlobOptions::default()).await.unwrap();
        assert!(none.files.is_empty());
        assert_eq!(none.text, "No matches found");

        let hits = g.grep("beta", GrepOptions::default()).await.unwrap();
        let found: Vec<_> = hits.matches.iter().map(|m| (m.path.as_str(), m.line, m.text.as_str())).collect();
        assert_eq!(found, [("src/a.txt", 2, "BETA"), ("src/a.txt", 4, "BETA"), ("src/nested/b.rs", 2, "// Beta here")]);
        let exact = g.grep("Beta", GrepOptions::default().case_sensitive(true).include("*.rs")).await.unwrap();
        assert_eq!(exact.text, "src/nested/b.rs:2:// Beta here");

        let patch = "*** Begin Patch\n\
                     *** Add File: src/new.txt\n+fresh\n\
                     *** Update File: src/a.txt\n*** Move to: src/renamed.txt\n@@\n alpha\n-BETA\n+beta\n\
                     *** Delete File: src/nested/b.rs\n\
                     *** End Patch\n";
        let changes = g.patch(patch).await.unwrap();
        let summary: Vec<_> = changes.iter().map(|c| (c.action.clone(), c.path.as_str(), c.from.as_deref())).collect();
        assert_eq!(
            summary,
            [
                (PatchAction::Add, "/root/work/src/new.txt", None),
                (PatchAction::Move, "/root/work/src/renamed.txt", Some("/root/work/src/a.txt")),
                (PatchAction::Delete, "/root/work/src/nested/b.rs", None),
            ]
        );
        assert_eq!(bytes_of(sb, "/root/work/src/renamed.txt").await, b"alpha\nbeta\nGAMMA\nBETA\n");
        assert_eq!(bytes_of(sb, "/root/work/src/new.txt").await, b"fresh\n");

        let moved = g.move_path("src/new.txt", "other/new.txt", false).await.unwrap();
        assert_eq!((moved.from.as_str(), moved.to.as_str()), ("/root/work/src/new.txt", "/root/work/other/new.txt"));

        let manifest = g.manifest(ManifestOptions::default().sha256(true).exclude("other/")).await.unwrap();
        assert_eq!(manifest.root, ROOT);
        let entries: Vec<_> = manifest.entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(entries, ["src/renamed.txt"]);
        assert_eq!(manifest.count, 1);
        let want = format!("{:x}", Sha256::digest(b"alpha\nbeta\nGAMMA\nBETA\n"));
        assert_eq!(manifest.entries[0].sha256.as_deref(), Some(want.as_str()));
        assert_eq!(manifest.entries[0].size, 22);

        let removed = g.remove("other/new.txt", false).await.unwrap();
        assert_eq!((removed.path.as_str(), removed.kind.clone()), ("/root/work/other/new.txt", FileType::File));
        let err = g.remove("src", false).await.unwrap_err();
        assert_eq!(code(&err), GuestErrorCode::NotEmpty);
        assert_eq!(g.remove("src", true).await.unwrap().kind, FileType::Directory);
        let err = g.remove(".", true).await.unwrap_err();
        assert_eq!(code(&err), GuestErrorCode::Refused);
        assert!(g.stat("src").await.unwrap_err().guest().unwrap().is_not_found());

        // Pass-through JSON keeps the helper's vocabulary and still maps paths.
        let raw = g.call_json("write", json!({ "path": "raw.txt", "content": "r\n" })).await.unwrap();
        assert_eq!(raw["path"], "/root/work/raw.txt");
        let err = g.call_json("read", json!({ "path": "raw.txt", "bogus": 1 })).await.unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    })
    .await;
    fx.assert_channel().await;
    fx.shutdown().await;
}

async fn text_limits_are_enforced(via: Via) {
    let fx = fixture(via).await;
    let (sb, g, env) = (&fx.sb, fx.guest(), &fx.env);
    guarded(async {
        let latin1 = b"caf\xe9 au lait\n".to_vec();
        sb.write("/root/work/latin1.txt", latin1.clone())
            .await
            .unwrap();
        let err = g
            .read("latin1.txt", ReadOptions::default())
            .await
            .unwrap_err();
        assert_eq!(code(&err), GuestErrorCode::BinaryFile, "{err}");
        let err = g.edit("latin1.txt", "au", "with", false).await.unwrap_err();
        assert_eq!(code(&err), GuestErrorCode::BinaryFile);
        assert_eq!(bytes_of(sb, "/root/work/latin1.txt").await, latin1);

        // Exactly 1 MiB is still text; one byte more is refused.
        let line = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n"; // 64 bytes
        let mib = line.repeat(16 * 1024);
        assert_eq!(mib.len(), 1 << 20);
        sb.write("/root/work/mib.txt", mib.clone()).await.unwrap();
        match g
            .read("mib.txt", ReadOptions::default().limit(1))
            .await
            .unwrap()
        {
            ReadResult::File(f) => assert_eq!((f.total_lines, f.lines), (16 * 1024, 1)),
            other => panic!("expected a file, got {other:?}"),
        }
        let over = format!("{mib}x");
        sb.write("/root/work/over.txt", over.clone()).await.unwrap();
        let err = g
            .read("over.txt", ReadOptions::default())
            .await
            .unwrap_err();
        assert_eq!(code(&err), GuestErrorCode::TooLarge, "{err}");
        let err = g.edit("over.txt", "x", "y", false).await.unwrap_err();
        assert_eq!(code(&err), GuestErrorCode::TooLarge);
        assert_eq!(bytes_of(sb, "/root/work/over.txt").await, over.as_bytes());

        // An answer over the configured bound is refused as such, not cut and misparsed.
        let small = Guest::new(
            sb.clone(),
            PathMap::new(ROOT).unwrap(),
            fx.options().max_output(4096),
        );
        let err = small
            .read("mib.txt", ReadOptions::default())
            .await
            .unwrap_err();
        assert_eq!(code(&err), GuestErrorCode::AnswerTooLarge, "{err}");

        fx.assert_channel().await;
        // Bad arguments are caught before anything runs.
        env.reset_stats().await;
        assert!(matches!(
            g.read("mib.txt", ReadOptions::default().limit(5000)).await,
            Err(Error::InvalidInput { .. })
        ));
        assert!(matches!(
            g.read("../../etc/passwd", ReadOptions::default()).await,
            Err(Error::InvalidInput { .. })
        ));
        assert!(matches!(
            g.edit("mib.txt", "", "x", false).await,
            Err(Error::InvalidInput { .. })
        ));
        assert!(matches!(
            g.grep("a\nb", GrepOptions::default()).await,
            Err(Error::InvalidInput { .. })
        ));
        assert_eq!(env.requests("createProcess").await, 0);
    })
    .await;
    fx.shutdown().await;
}

async fn refused_changes_leave_files_alone(via: Via) {
    let fx = fixture(via).await;
    let (sb, g) = (&fx.sb, fx.guest());
    guarded(async {
        // An edit whose oldString occurs twice.
        g.write("twice.txt", "x = 1\ny = 2\nx = 1\n").await.unwrap();
        let err = g
            .edit("twice.txt", "x = 1", "x = 3", false)
            .await
            .unwrap_err();
        assert_eq!(code(&err), GuestErrorCode::Ambiguous);
        assert_eq!(err.guest().unwrap().details.as_ref().unwrap()["count"], 2);
        assert_eq!(
            bytes_of(sb, "/root/work/twice.txt").await,
            b"x = 1\ny = 2\nx = 1\n"
        );

        // A three-file patch whose third hunk does not match.
        for name in ["one", "two", "three"] {
            g.write(
                &format!("{name}.txt"),
                &format!("first {name}\nsecond {name}\n"),
            )
            .await
            .unwrap();
        }
        let patch = "*** Begin Patch\n\
                     *** Update File: one.txt\n@@\n-first one\n+FIRST one\n\
                     *** Update File: two.txt\n@@\n-second two\n+SECOND two\n\
                     *** Update File: three.txt\n@@\n-third three\n+THIRD three\n\
                     *** End Patch\n";
        let err = g.patch(patch).await.unwrap_err();
        assert_eq!(code(&err), GuestErrorCode::PatchFailed, "{err}");
        let details = err.guest().unwrap().details.clone().unwrap();
        assert!(
            details["file"].as_str().unwrap().ends_with("three.txt"),
            "{details}"
        );
        for name in ["one", "two", "three"] {
            let want = format!("first {name}\nsecond {name}\n");
            assert_eq!(
                bytes_of(sb, &format!("/root/work/{name}.txt")).await,
                want.as_bytes(),
                "{name}"
            );
        }

        // A move onto an existing target.
        g.write("from.txt", "from\n").await.unwrap();
        g.write("to.txt", "to\n").await.unwrap();
        let err = g.move_path("from.txt", "to.txt", false).await.unwrap_err();
        assert_eq!(code(&err), GuestErrorCode::Exists);
        assert_eq!(bytes_of(sb, "/root/work/from.txt").await, b"from\n");
        assert_eq!(bytes_of(sb, "/root/work/to.txt").await, b"to\n");
        g.move_path("from.txt", "to.txt", true).await.unwrap();
        assert_eq!(bytes_of(sb, "/root/work/to.txt").await, b"from\n");
        assert!(g
            .stat("from.txt")
            .await
            .unwrap_err()
            .guest()
            .unwrap()
            .is_not_found());

        // Adding a file that exists.
        let err = g
            .patch("*** Begin Patch\n*** Add File: to.txt\n+x\n*** End Patch\n")
            .await
            .unwrap_err();
        assert_eq!(code(&err), GuestErrorCode::Exists);
    })
    .await;
    fx.assert_channel().await;
    fx.shutdown().await;
}

async fn concurrent_edits_of_one_file_are_serialized(via: Via) {
    let fx = fixture(via).await;
    let sb = &fx.sb;
    let first = fx.guest();
    // A second, independent handle on the same sandbox: the turn is per sandbox, not per value.
    let second = fx.guest_of(&fx.env.client.sandbox(sb.id()).unwrap());
    let body: String = (0..20).map(|i| format!("slot-{i:02}\n")).collect();
    guarded(async {
        first.write("shared.txt", &body).await.unwrap();
        let edits = |g: Guest, ids: Vec<usize>| async move {
            for i in ids {
                let r = g
                    .edit(
                        "shared.txt",
                        &format!("slot-{i:02}\n"),
                        &format!("done-{i:02}\n"),
                        false,
                    )
                    .await;
                assert_eq!(r.expect("edit").replacements, 1);
            }
        };
        let a = tokio::spawn(edits(first.clone(), (0..20).step_by(2).collect()));
        let b = tokio::spawn(edits(second.clone(), (1..20).step_by(2).collect()));
        a.await.unwrap();
        b.await.unwrap();
    })
    .await;
    let want: String = (0..20).map(|i| format!("done-{i:02}\n")).collect();
    assert_eq!(
        String::from_utf8(bytes_of(sb, "/root/work/shared.txt").await).unwrap(),
        want
    );
    fx.assert_channel().await;
    fx.shutdown().await;
}

async fn helper_is_uploaded_once_per_version(via: Via) {
    let fx = fixture(via).await;
    let (sb, env, g) = (&fx.sb, &fx.env, fx.guest());
    // Uploads through the files API (the process channel's install) are counted; over SSH the
    // helper goes through the exec channel, which the files API never sees.
    let api_uploads = |n: u64| if via == Via::Process { n } else { 0 };
    guarded(async {
        g.write("a.txt", "a\n").await.unwrap();
        let location = g.helper_location().clone();
        let installed = identity(sb, &location.file).await;
        for _ in 0..3 {
            g.read("a.txt", ReadOptions::default()).await.unwrap();
        }
        // A fresh Guest (as a new `cos fs` process would make) finds the installed copy.
        let fresh = fx.guest_of(&env.client.sandbox(sb.id()).unwrap());
        fresh.stat("a.txt").await.unwrap();
        fresh.glob("*.txt", GlobOptions::default()).await.unwrap();
        assert_eq!(
            identity(sb, &location.file).await,
            installed,
            "not installed again"
        );
        assert_eq!(env.requests("uploadFile").await, api_uploads(1));

        assert!(
            location.file.starts_with("/tmp/.cos-guest/")
                && location.file.ends_with("/cos_guest.py")
        );
        let dir = g.stat(&location.dir).await.unwrap();
        assert_eq!((dir.kind, dir.mode.as_str()), (FileType::Directory, "0700"));
        assert_eq!(g.stat("/tmp/.cos-guest").await.unwrap().mode, "0700");
        assert_eq!(g.stat(&location.file).await.unwrap().mode, "0600");
        assert_eq!(
            bytes_of(sb, &location.file).await,
            EMBEDDED_SOURCE.as_bytes()
        );

        // Another helper version goes to its own directory and is uploaded once.
        let variant = Guest::new(
            sb.clone(),
            PathMap::new(ROOT).unwrap(),
            fx.options()
                .helper_source(format!("{EMBEDDED_SOURCE}\n# test variant\n")),
        );
        assert_ne!(variant.helper_location().dir, location.dir);
        variant.stat("a.txt").await.unwrap();
        let variant_installed = identity(sb, &variant.helper_location().file).await;
        variant.read("a.txt", ReadOptions::default()).await.unwrap();
        assert_eq!(
            identity(sb, &variant.helper_location().file).await,
            variant_installed
        );
        assert_eq!(env.requests("uploadFile").await, api_uploads(2));

        // A copy that vanished or was damaged is noticed and replaced.
        api_sh(sb, &format!("echo broken > {}", location.file)).await;
        g.stat("a.txt").await.unwrap();
        assert_eq!(env.requests("uploadFile").await, api_uploads(3));
        assert_eq!(
            bytes_of(sb, &location.file).await,
            EMBEDDED_SOURCE.as_bytes()
        );
        let replaced = identity(sb, &location.file).await;
        g.stat("a.txt").await.unwrap();
        assert_eq!(identity(sb, &location.file).await, replaced);
        api_sh(sb, &format!("rm -rf {}", location.dir)).await;
        g.stat("a.txt").await.unwrap();
        assert_eq!(
            bytes_of(sb, &location.file).await,
            EMBEDDED_SOURCE.as_bytes()
        );
        assert_eq!(env.requests("uploadFile").await, api_uploads(4));
    })
    .await;
    fx.assert_channel().await;
    fx.shutdown().await;
}

/// Command lines of the sandbox's live processes that mention `needle`.
async fn live_commands_with(sb: &Sandbox, needle: &str) -> String {
    // `[x]yz` matches "xyz" but not the grep's own command line
    let (first, rest) = needle.split_at(1);
    let script = format!(
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -e '[{first}]{rest}' || true"
    );
    api_sh(sb, &script).await
}

async fn missing_python_and_broken_helpers_are_typed(via: Via) {
    let fx = fixture(via).await;
    let sb = &fx.sb;
    let paths = PathMap::new(ROOT).unwrap();
    guarded(async {
        let no_python = Guest::new(
            sb.clone(),
            paths.clone(),
            fx.options().python("python3-not-installed"),
        );
        let err = no_python.stat("/").await.unwrap_err();
        assert_eq!(code(&err), GuestErrorCode::PythonMissing, "{err}");

        let garbage = Guest::new(
            sb.clone(),
            paths.clone(),
            fx.options().helper_source(
                "import sys\ndef main():\n    sys.stdout.write('not json')\n    return 0\n",
            ),
        );
        let err = garbage.stat("/").await.unwrap_err();
        assert_eq!(code(&err), GuestErrorCode::HelperFailed, "{err}");
        assert!(err.to_string().contains("not json"), "{err}");

        // A helper that hangs is stopped when the timeout passes.
        let slow = Guest::new(
            sb.clone(),
            paths.clone(),
            fx.options()
                .timeout(Duration::from_millis(1500))
                .helper_source("import time\ntime.sleep(300)\ndef main():\n    return 0\n"),
        );
        let err = slow.stat("/").await.unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
        let marker = slow.helper_location().dir.clone();
        let mut live = String::new();
        for _ in 0..100 {
            live = live_commands_with(sb, &marker).await;
            if live.trim().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(live.trim(), "", "the hung helper was stopped");
        if via == Via::Process {
            let list = sb.processes().list().await.unwrap();
            assert_eq!(
                list.iter().filter(|p| !p.state.is_finished()).count(),
                0,
                "no managed process is left"
            );
        }
    })
    .await;
    fx.assert_channel().await;
    fx.shutdown().await;
}

async fn host_project_paths_map_into_the_guest(via: Via) {
    let fx = fixture(via).await;
    let sb = &fx.sb;
    let project = tempfile::tempdir().unwrap();
    let host = project.path().to_str().unwrap().to_string();
    let g = Guest::new(
        sb.clone(),
        PathMap::new("/root/proj").unwrap().with_host_root(&host),
        fx.options(),
    );
    guarded(async {
        let w = g.write(&format!("{host}/lib/mod.txt"), "one\n").await.unwrap();
        assert_eq!(w.path, "/root/proj/lib/mod.txt");
        let patch = format!(
            "*** Begin Patch\n*** Update File: {host}/lib/mod.txt\n*** Move to: lib/moved.txt\n@@\n-one\n+two\n\
             *** Add File: /tmp/outside.txt\n+guest path\n*** End Patch\n"
        );
        let changes = g.patch(&patch).await.unwrap();
        assert_eq!(changes[0].path, "/root/proj/lib/moved.txt");
        assert_eq!(changes[0].from.as_deref(), Some("/root/proj/lib/mod.txt"));
        assert_eq!(changes[1].path, "/tmp/outside.txt");
        assert_eq!(bytes_of(sb, "/root/proj/lib/moved.txt").await, b"two\n");
        assert_eq!(bytes_of(sb, "/tmp/outside.txt").await, b"guest path\n");
        // Escapes are refused before anything runs.
        let escape = format!("{host}/../elsewhere.txt");
        assert!(matches!(g.write(&escape, "x").await, Err(Error::InvalidInput { .. })));
        let bad_patch = "*** Begin Patch\n*** Delete File: ../up.txt\n*** End Patch\n";
        assert!(matches!(g.patch(bad_patch).await, Err(Error::InvalidInput { .. })));
    })
    .await;
    fx.assert_channel().await;
    fx.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_channel_follows_the_ssh_connection() {
    require_sshd();
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let keys = tempfile::tempdir().unwrap();
    let session = SshSession::new(&sb, ssh_options(&keys)).expect("session");
    let paths = PathMap::new(ROOT).unwrap();
    let g = Guest::new(
        sb.clone(),
        paths.clone(),
        GuestOptions::new().ssh_session(session.clone()),
    );
    assert_eq!(g.channel(), GuestChannel::Auto);
    guarded(async {
        // Not connected: a managed process, and no SSH connection is opened for it.
        assert!(!g.uses_ssh().await);
        env.reset_stats().await;
        g.write("auto.txt", "one\n").await.unwrap();
        assert!(env.requests("createProcess").await > 0);
        assert_eq!(session.connects(), 0);
        assert!(!session.is_connected().await);
        let location = g.helper_location().clone();
        let installed = identity(&sb, &location.file).await;

        // Connected: over SSH, reusing the copy of the helper the process run installed.
        session.ensure_connected().await.expect("connect");
        assert!(g.uses_ssh().await);
        env.reset_stats().await;
        g.edit("auto.txt", "one", "two", false).await.unwrap();
        assert_eq!(bytes_of(&sb, "/root/work/auto.txt").await, b"two\n");
        assert_eq!(env.requests("createProcess").await, 0);
        assert_eq!(identity(&sb, &location.file).await, installed);

        // Dropped: back to managed processes, without reconnecting.
        session.disconnect().await;
        assert!(!g.uses_ssh().await);
        env.reset_stats().await;
        assert_eq!(g.stat("auto.txt").await.unwrap().size, 4);
        assert!(env.requests("createProcess").await > 0);
        assert_eq!(session.connects(), 1);

        // Asked for SSH: it connects when needed.
        let forced = Guest::new(
            sb.clone(),
            paths.clone(),
            GuestOptions::new()
                .channel(GuestChannel::Ssh)
                .ssh_session(session.clone()),
        );
        env.reset_stats().await;
        match forced
            .read("auto.txt", ReadOptions::default())
            .await
            .unwrap()
        {
            ReadResult::File(f) => assert_eq!(f.content, "1: two"),
            other => panic!("expected a file, got {other:?}"),
        }
        assert_eq!(env.requests("createProcess").await, 0);
        assert_eq!(session.connects(), 2);

        // Asked for processes: a live connection is not used.
        let pinned = Guest::new(
            sb.clone(),
            paths,
            GuestOptions::new()
                .channel(GuestChannel::Process)
                .ssh_session(session.clone()),
        );
        assert!(!pinned.uses_ssh().await);
        env.reset_stats().await;
        pinned.stat("auto.txt").await.unwrap();
        assert!(env.requests("createProcess").await > 0);
    })
    .await;
    session.disconnect().await;
    env.shutdown().await;
}

#[test]
fn path_mapping_rules() {
    let map = PathMap::new("/root/workspace")
        .unwrap()
        .with_host_root("/home/dev/app");
    assert_eq!(
        map.to_guest("src/main.rs").unwrap(),
        "/root/workspace/src/main.rs"
    );
    assert_eq!(
        map.to_guest("./src/../Cargo.toml").unwrap(),
        "/root/workspace/Cargo.toml"
    );
    assert_eq!(
        map.to_guest("/home/dev/app/src/lib.rs").unwrap(),
        "/root/workspace/src/lib.rs"
    );
    assert_eq!(map.to_guest("/home/dev/app").unwrap(), "/root/workspace");
    assert_eq!(
        map.to_guest("/home/dev/application/x").unwrap(),
        "/home/dev/application/x"
    );
    assert_eq!(map.to_guest("/var/log/syslog").unwrap(), "/var/log/syslog");
    for escape in [
        "..",
        "../x",
        "src/../../x",
        "/home/dev/app/../secret",
        "/../etc",
    ] {
        assert!(
            matches!(map.to_guest(escape), Err(Error::InvalidInput { .. })),
            "{escape} must be refused"
        );
    }
    let patch = "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: /home/dev/app/b.txt\n*** Move to: c/d.txt\n\
                 @@\n-*** Delete File: not/a/header\n+y\n*** Delete File: /etc/motd\n*** End Patch\n";
    assert_eq!(
        map.rewrite_patch(patch).unwrap(),
        "*** Begin Patch\n*** Add File: /root/workspace/a.txt\n+x\n*** Update File: /root/workspace/b.txt\n\
         *** Move to: /root/workspace/c/d.txt\n@@\n-*** Delete File: not/a/header\n+y\n*** Delete File: /etc/motd\n\
         *** End Patch\n"
    );
    assert!(map
        .rewrite_patch("*** Begin Patch\n*** Move to: ../../x\n*** End Patch\n")
        .is_err());
}
