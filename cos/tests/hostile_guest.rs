//! The trust boundary against a hostile guest: its `tar`, `find`, `python3` and `git` are
//! replaced by programs that answer with crafted archives, listings and patches (see
//! tests/hostile_support). Every way back from a sandbox is tried: `cos pull` (a directory and
//! single files, files API and SSH), `cos sync` in every mode over both, offload artifacts,
//! `sandbox_pull` through `cos mcp`, and `herdr apply`. Each asserts that nothing outside the
//! requested paths changed, nothing under `.git/` changed, no host file was read into the
//! project, and that every refused entry is named.

#[path = "../../tests/common/mod.rs"]
mod common;
mod hostile_support;
mod mcp_client;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use createos_sandbox::ssh::{SshFiles, SshOptions, SshSession};
use createos_sandbox::transfer::{self, ApiRemote, Remote, SshRemote};
use serde_json::{json, Value};

use hostile_support::{
    changed, every_case, expected, ok, refusals, sorted, tree, Guest, Host, SECRET,
};

const GUARD: Duration = Duration::from_secs(600);

async fn guarded<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, work)
        .await
        .expect("the test finished in time")
}

fn rel(path: &str) -> PathBuf {
    PathBuf::from(path)
}

/// The files, links and directories that must arrive from [`every_case`], below `root`.
fn arrived(arrive: &[&str], root: &str) -> BTreeSet<PathBuf> {
    let mut out: BTreeSet<PathBuf> = arrive.iter().map(|a| Path::new(root).join(a)).collect();
    out.insert(Path::new(root).join("dir"));
    if !root.is_empty() {
        out.insert(PathBuf::from(root));
    }
    out
}

/// `cos pull` of a directory whose archive holds every case, into a new directory and
/// (through the library) straight into the project; then single files onto protected paths.
async fn pull_every_case(ssh: bool) {
    let env = common::start().await;
    let guest = Guest::create(&env).await;
    let host = Host::new();
    let (archive, refused, arrive) = every_case(&host.outside);
    guest.serve_archive(&archive).await;
    guest
        .sh("mkdir -p /root/app && echo real > /root/app/x.txt")
        .await;
    let id = guest.sandbox.id().to_string();
    let via = if ssh { "ssh" } else { "files API" };
    guarded(async {
        let before = host.guarded();
        let project_before = tree(&host.project);
        let dest = host.project.join("pulled");
        let mut args = vec!["pull", &id, "/root/app", dest.to_str().unwrap()];
        if ssh {
            args.push("--ssh");
        }
        let v = ok(host.cos(&env, &args));
        assert_eq!(
            sorted(refusals(&v["refused"])),
            expected(&refused),
            "cos pull over the {via}: {v}"
        );
        assert_eq!(v["skipped"], refused.len());
        let changes: BTreeSet<PathBuf> = changed(&project_before, &tree(&host.project))
            .into_iter()
            .collect();
        assert_eq!(
            changes,
            arrived(&arrive, "pulled"),
            "cos pull over the {via}: only the benign entries arrived"
        );
        assert_eq!(
            std::fs::read_to_string(dest.join("new\nline.txt")).unwrap(),
            "newline\n"
        );
        assert_eq!(
            std::fs::read_to_string(dest.join("ok-copy.txt")).unwrap(),
            "ok\n"
        );
        host.assert_guarded(&before, "cos pull");
        assert!(guest.calls("tar").await >= 1, "the hostile tar answered");

        // straight into the project root: .git, .env and the rest stay as they are
        let remote: Box<dyn Remote> = if ssh {
            let options = SshOptions::new()
                .files(SshFiles::at(host.tmp.path().join("keys")))
                .connect_timeout(Duration::from_secs(60));
            Box::new(SshRemote::new(
                SshSession::connect(&guest.sandbox, options).await.unwrap(),
            ))
        } else {
            Box::new(ApiRemote::new(guest.sandbox.clone()))
        };
        let project_before = tree(&host.project);
        let got = transfer::download_dir(&*remote, "/root/app", &host.project, None)
            .await
            .unwrap();
        let named: Vec<(String, String)> = got
            .unpacked
            .refused
            .iter()
            .map(|r| (r.path.clone(), r.reason.code().to_string()))
            .collect();
        assert_eq!(sorted(named), expected(&refused));
        let changes: BTreeSet<PathBuf> = changed(&project_before, &tree(&host.project))
            .into_iter()
            .collect();
        assert_eq!(
            changes,
            arrived(&arrive, ""),
            "a merge into the project over the {via}"
        );
        assert_eq!(
            std::fs::read_to_string(host.project.join(".env")).unwrap(),
            "API_TOKEN=local\n"
        );
        host.assert_guarded(&before, "a merge into the project");

        // one file onto a protected path: refused before anything is written
        let project_before = tree(&host.project);
        for target in [
            ".git/config",
            ".git/hooks/pre-commit",
            ".env",
            "keys.pem",
            "vendor/.hg/hgrc",
        ] {
            let local = host.project.join(target);
            let mut args = vec!["pull", &id, "/root/app/x.txt", local.to_str().unwrap()];
            if ssh {
                args.push("--ssh");
            }
            let out = host.cos(&env, &args);
            assert!(
                !out.status.success(),
                "pulling onto {target} over the {via} was accepted"
            );
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(said.contains("refusing to write"), "{target}: {said}");
        }
        assert_eq!(
            changed(&project_before, &tree(&host.project)),
            Vec::<PathBuf>::new()
        );
        host.assert_guarded(&before, "single-file pulls");
    })
    .await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cos_pull_over_the_files_api_refuses_every_hostile_entry() {
    pull_every_case(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cos_pull_over_ssh_refuses_every_hostile_entry() {
    pull_every_case(true).await;
}

/// Manifest entries the hostile helper adds to every listing of the guest directory.
fn hostile_listing() -> Value {
    let entry = |path: &str| json!({"path": path, "type": "file", "size": 3, "mtime": 1_700_000_000.0, "mtime_ns": 1_700_000_000_000_000_000i64, "mode": "0644"});
    Value::Array(
        [
            ".git/hooks/post-commit",
            ".git/config",
            "../escape.txt",
            "/abs.txt",
            ".env",
            "sub/.hg/hgrc",
            "a//b",
            "wanted.txt",
            "new\nline.txt",
        ]
        .into_iter()
        .map(entry)
        .collect(),
    )
}

/// The listing's hostile names, as each mode must name them.
fn listing_refusals(two_way: bool) -> Vec<(&'static str, &'static str)> {
    let mut out = vec![
        ("../escape.txt", "parent-dir"),
        ("/abs.txt", "absolute-path"),
        ("a//b", "bad-name"),
    ];
    if two_way {
        out.extend([
            (".git/hooks/post-commit", "protected"),
            (".git/config", "protected"),
            (".env", "protected"),
            ("sub/.hg/hgrc", "protected"),
        ]);
    }
    out
}

async fn sync_every_mode(ssh: bool) {
    let env = common::start().await;
    let guest = Guest::create(&env).await;
    let via = if ssh { "ssh" } else { "files API" };
    for mode in ["once", "one-way", "mirror", "two-way"] {
        let host = Host::new();
        let (archive, _, _) = every_case(&host.outside);
        guest.serve_archive(&archive).await;
        guest.serve_manifest(&hostile_listing()).await;
        let remote = format!("/root/sync-{mode}");
        guest.sh(&format!("mkdir -p {remote}")).await;
        let what = format!("cos sync --mode {mode} over the {via}");
        guarded(async {
            let before = host.guarded();
            let project_before = tree(&host.project);
            let local = host.project.to_str().unwrap();
            let mut args = vec![
                "sync",
                guest.sandbox.id(),
                "--local",
                local,
                "--remote",
                &remote,
                "--mode",
                mode,
            ];
            if ssh {
                args.push("--ssh");
            }
            let v = ok(host.cos(&env, &args));
            let report = &v["report"];
            let changes = changed(&project_before, &tree(&host.project));
            if mode == "once" {
                assert_eq!(changes, Vec::<PathBuf>::new(), "{what}: {v}");
                assert_eq!(report["refused"], json!([]), "{what}");
            } else if mode != "two-way" {
                assert_eq!(changes, Vec::<PathBuf>::new(), "{what}: {v}");
                assert_eq!(
                    sorted(refusals(&report["refused"])),
                    expected(&listing_refusals(false)),
                    "{what}"
                );
            } else {
                let named: BTreeSet<(String, String)> =
                    refusals(&report["refused"]).into_iter().collect();
                for want in expected(&listing_refusals(true)) {
                    assert!(
                        named.contains(&want),
                        "{what}: {want:?} not named in {named:?}"
                    );
                }
                // the archive held far more than the plan asked for: none of it was placed
                let (_, every, arrive) = every_case(&host.outside);
                for (name, _) in every {
                    assert!(
                        named
                            .iter()
                            .any(|(p, _)| p == &name.escape_debug().to_string()),
                        "{what}: {name} not named"
                    );
                }
                for name in arrive
                    .iter()
                    .filter(|a| !["wanted.txt", "new\nline.txt"].contains(a))
                {
                    let shown = name.escape_debug().to_string();
                    assert!(
                        named
                            .iter()
                            .any(|(p, r)| p.trim_end_matches('/') == shown && r == "not-requested"),
                        "{what}: {name}"
                    );
                }
                let pulled: Vec<&str> = report["pulled"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p.as_str().unwrap())
                    .collect();
                assert_eq!(pulled, ["new\nline.txt", "wanted.txt"], "{what}");
                assert_eq!(
                    changes,
                    [rel("new\nline.txt"), rel("wanted.txt")],
                    "{what}: only the plan's paths changed"
                );
                assert_eq!(
                    std::fs::read_to_string(host.project.join("wanted.txt")).unwrap(),
                    "from the guest\n"
                );
                let asked = guest
                    .sh(&format!("tr '\\0' '|' < {}/requested.list", guest.dir))
                    .await;
                assert_eq!(
                    asked, "new\nline.txt|wanted.txt|",
                    "{what}: the archive asked for"
                );
                // the text output names them too
                let out = std::process::Command::new(env!("CARGO_BIN_EXE_cos"))
                    .args([
                        "--endpoint",
                        &env.base_url(),
                        "--api-key",
                        &env.mock.api_key(),
                        "-o",
                        "text",
                    ])
                    .args(&args)
                    .env("HOME", &host.home)
                    .env_remove("XDG_STATE_HOME")
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success()
                        && text
                            .contains("refused .git/hooks/post-commit: version-control metadata"),
                    "{what}: {text}"
                );
            }
            if mode != "once" {
                assert!(
                    guest.calls("python").await >= 1,
                    "{what}: the hostile helper answered"
                );
            }
            assert_eq!(
                std::fs::read_to_string(host.project.join(".env")).unwrap(),
                "API_TOKEN=local\n"
            );
            host.assert_guarded(&before, &what);
        })
        .await;
    }
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cos_sync_in_every_mode_over_the_files_api() {
    sync_every_mode(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cos_sync_in_every_mode_over_ssh() {
    sync_every_mode(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_thousand_entries_and_names_with_newlines() {
    let env = common::start().await;
    let guest = Guest::create(&env).await;
    let host = Host::new();
    // made in the guest (the real Python behind the fake one): 100,000 entries, 20 hostile
    let script = format!(
        r#"import tarfile
t = tarfile.open("{}/archive.tar", "w", format=tarfile.GNU_FORMAT)
for i in range(100000):
    if i % 10000 == 5000: name = "../escape-%d" % i
    elif i % 10000 == 6000: name = ".git/hooks/h%d" % i
    elif i % 10000 == 7000: name = "nl/new\nline-%d" % i
    else: name = "many/d%03d/f%06d" % (i // 1000, i)
    info = tarfile.TarInfo(name)
    info.mtime = 1700000000
    t.addfile(info)
t.close()
"#,
        guest.dir
    );
    guest.put("make.py", script.as_bytes(), false).await;
    guest
        .sh(&format!(
            "python3 {}/make.py && mkdir -p /root/app",
            guest.dir
        ))
        .await;
    guarded(async {
        let before = host.guarded();
        let dest = host.project.join("bulk");
        let v = ok(host.cos(
            &env,
            &[
                "pull",
                guest.sandbox.id(),
                "/root/app",
                dest.to_str().unwrap(),
            ],
        ));
        assert_eq!(v["files"], 99_980, "{}", v["refused"]);
        let named = refusals(&v["refused"]);
        assert_eq!(named.len(), 20);
        assert_eq!(
            named
                .iter()
                .filter(|(p, r)| p.starts_with("../escape-") && r == "parent-dir")
                .count(),
            10
        );
        assert_eq!(
            named
                .iter()
                .filter(|(p, r)| p.starts_with(".git/hooks/h") && r == "protected")
                .count(),
            10
        );
        let got = tree(&dest);
        assert_eq!(
            got.values()
                .filter(|n| matches!(n, hostile_support::Node::File { .. }))
                .count(),
            99_980
        );
        assert!(got.contains_key(&rel("nl/new\nline-7000")));
        assert!(!host.tmp.path().join("escape-5000").exists());
        host.assert_guarded(&before, "100,000 entries");
    })
    .await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn offload_artifacts_from_a_hostile_guest() {
    use createos_sandbox::jobs::{self, JobOptions, OffloadRequest};
    use tokio_util::sync::CancellationToken;
    let env = common::start().await;
    let host = Host::new();
    let outside = host.outside.to_str().unwrap().to_string();
    // the guest's own files are the attack here: the real tar packs exactly what is there
    let command = format!(
        "set -e; mkdir -p dist/.git/hooks dist/sub; echo hook > dist/.git/hooks/post-commit; echo ok > dist/ok.txt; \
         ln dist/ok.txt dist/hard.txt; ln -s ok.txt dist/good-link; ln -s {outside} dist/sec; ln -s ../../.. dist/up; \
         echo s > dist/suid; chmod 4755 dist/suid; mkfifo dist/fifo; echo e > dist/.env; echo k > dist/sub/id_rsa; \
         ln -s .git/hooks/post-commit dist/to-hook; echo fine > dist/sub/fine.txt"
    );
    guarded(async {
        let before = host.guarded();
        let project_before = tree(&host.project);
        let request = OffloadRequest::new(&host.project, command).out("dist");
        let options = JobOptions {
            shape: "s-1vcpu-1gb".into(),
            ..JobOptions::default()
        };
        let result = jobs::offload(
            &env.client,
            request,
            &options,
            &CancellationToken::new(),
            None,
        )
        .await
        .expect("offload");
        assert_eq!(result.code, Some(0), "{}", result.stderr);
        let artifact = result.artifact.expect("the artifact came back");
        let named: BTreeSet<(String, String)> = artifact
            .refused
            .iter()
            .map(|r| {
                (
                    r.path.trim_start_matches("./").to_string(),
                    r.reason.code().to_string(),
                )
            })
            .collect();
        for want in [
            (".git/hooks/post-commit", "protected"),
            ("sec", "symlink-leaves"),
            ("up", "symlink-leaves"),
            ("suid", "set-id-bits"),
            ("fifo", "special-file"),
            (".env", "protected"),
            ("sub/id_rsa", "protected"),
            ("to-hook", "symlink-to-protected"),
        ] {
            assert!(
                named.contains(&(want.0.to_string(), want.1.to_string())),
                "{want:?} not named in {named:?}"
            );
        }
        let changes: BTreeSet<PathBuf> = changed(&project_before, &tree(&host.project))
            .into_iter()
            .collect();
        let want: BTreeSet<PathBuf> = [
            "dist",
            "dist/ok.txt",
            "dist/hard.txt",
            "dist/good-link",
            "dist/sub",
            "dist/sub/fine.txt",
        ]
        .into_iter()
        .map(rel)
        .collect();
        assert_eq!(
            changes, want,
            "only the benign part of the artifact arrived"
        );
        host.assert_guarded(&before, "offload artifact");

        // a protected artifact path is refused before any sandbox exists
        env.reset_stats().await;
        for out in [".git/config", ".git/hooks", ".env", "sub/.ssh"] {
            let request = OffloadRequest::new(&host.project, "true").out(out);
            let err = jobs::offload(
                &env.client,
                request,
                &options,
                &CancellationToken::new(),
                None,
            )
            .await
            .expect_err(out);
            assert!(
                err.to_string().contains("never") || err.to_string().contains("credentials"),
                "{out}: {err}"
            );
        }
        assert_eq!(
            env.requests("createSandbox").await,
            0,
            "nothing was created"
        );
        host.assert_guarded(&before, "refused artifact paths");
    })
    .await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sandbox_pull_through_cos_mcp() {
    let env = common::start().await;
    let guest = Guest::create(&env).await;
    let host = Host::new();
    let (archive, _, arrive) = every_case(&host.outside);
    guest.serve_archive(&archive).await;
    guest
        .sh("mkdir -p /root/app && echo real > /root/app/x.txt")
        .await;
    let state = host.tmp.path().join("mcp-state");
    std::fs::create_dir_all(&state).unwrap();
    let mut mcp = mcp_client::Mcp::start_in(&env, &state, &host.project, "{}", &[]).await;
    let id = guest.sandbox.id().to_string();
    guarded(async {
        let before = host.guarded();
        let project_before = tree(&host.project);
        let got = mcp
            .call(
                "sandbox_pull",
                json!({"sandbox_id": id, "remote_path": "/root/app", "local_path": "pulled"}),
            )
            .await;
        assert_ne!(got["isError"], true, "{got}");
        let changes: BTreeSet<PathBuf> = changed(&project_before, &tree(&host.project))
            .into_iter()
            .collect();
        assert_eq!(
            changes,
            arrived(&arrive, "pulled"),
            "sandbox_pull placed only the benign entries"
        );
        host.assert_guarded(&before, "sandbox_pull of a directory");

        let project_before = tree(&host.project);
        for (remote, local) in [
            ("/root/app/x.txt", ".git/config"),
            ("/root/app/x.txt", ".git/hooks/pre-commit"),
            ("/root/app/x.txt", ".env"),
            ("/root/app", ".git/hooks"),
            ("/root/app", ".git"),
        ] {
            let result = mcp
                .call(
                    "sandbox_pull",
                    json!({"sandbox_id": id, "remote_path": remote, "local_path": local}),
                )
                .await;
            assert_eq!(result["isError"], true, "{local}: {result}");
        }
        assert_eq!(
            changed(&project_before, &tree(&host.project)),
            Vec::<PathBuf>::new()
        );
        host.assert_guarded(&before, "sandbox_pull onto protected paths");
    })
    .await;
    mcp.stop().await;
    env.shutdown().await;
}

/// A patch from the hostile `git` of the guest, as `git diff --binary` writes one.
fn patch_adding(files: &[(&str, &str, &str)]) -> String {
    let mut patch = String::new();
    for (name, mode, content) in files {
        let lines: Vec<&str> = content.lines().collect();
        patch.push_str(&format!("diff --git a/{name} b/{name}\nnew file mode {mode}\nindex 0000000..1111111\n--- /dev/null\n+++ b/{name}\n"));
        patch.push_str(&format!("@@ -0,0 +1,{} @@\n", lines.len()));
        for line in &lines {
            patch.push_str(&format!("+{line}\n"));
        }
        if *mode == "120000" {
            patch.push_str("\\ No newline at end of file\n");
        }
    }
    patch
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn herdr_apply_refuses_a_hostile_patch() {
    use cos::herdr::apply::{apply, Applied};
    let env = common::start().await;
    let guest = Guest::create(&env).await;
    guest.sh("mkdir -p /workspace").await;
    let host = Host::new();
    guarded(async {
        let before = host.guarded();
        let project_before = tree(&host.project);
        let outside = format!("{}", host.outside.join("secret.txt").display());
        let hostile = [
            patch_adding(&[("docs/fine.txt", "100644", "fine\n"), (".git/hooks/post-commit", "100755", "#!/bin/sh\ntouch /tmp/pwned\n")]),
            patch_adding(&[(".git/config", "100644", "[core]\n\tfsmonitor = touch /tmp/pwned\n")]),
            patch_adding(&[(".env", "100644", "API_TOKEN=guest\n")]),
            patch_adding(&[("vendor/.hg/hgrc", "100644", "[hooks]\n")]),
            patch_adding(&[("leak", "120000", &outside)]),
            patch_adding(&[("up", "120000", "../outside/secret.txt")]),
            patch_adding(&[("to-git", "120000", ".git/config")]),
            // the header says one file, the names another: Git and this client must agree
            "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/.git/config\n@@ -1 +1 @@\n-hello\n+[core]\n".to_string(),
            "diff --git a/src/main.rs b/.git/main.rs\nsimilarity index 100%\nrename from src/main.rs\nrename to .git/main.rs\n".to_string(),
        ];
        for patch in &hostile {
            guest.serve_patch(patch.as_bytes()).await;
            let err = apply(&guest.sandbox, "/workspace", &host.project).await.expect_err(patch);
            let text = err.to_string();
            assert!(text.contains("not changed") || text.contains("refus"), "{patch}\n→ {text}");
            assert_eq!(changed(&project_before, &tree(&host.project)), Vec::<PathBuf>::new(), "{patch}\n→ {text}");
            host.assert_guarded(&before, "herdr apply");
        }
        // the first one names what it refused
        guest.serve_patch(hostile[0].as_bytes()).await;
        let text = apply(&guest.sandbox, "/workspace", &host.project).await.unwrap_err().to_string();
        assert!(text.contains(".git/hooks/post-commit") && text.contains("version-control metadata"), "{text}");
        assert!(!host.project.join("docs").exists(), "nothing of a refused patch is applied");
        assert!(!guest.sh(&format!("cat {}/git.calls", guest.dir)).await.contains("update-ref"), "the baseline did not move");

        // a benign patch still applies
        let benign = format!(
            "{}diff --git a/README.md b/README.md\nindex 1111111..2222222 100644\n--- a/README.md\n+++ b/README.md\n@@ -1 +1,2 @@\n hello\n+from the sandbox\n",
            patch_adding(&[("docs/new.txt", "100644", "new\n"), ("docs/link", "120000", "../README.md")])
        );
        guest.serve_patch(benign.as_bytes()).await;
        let applied = apply(&guest.sandbox, "/workspace", &host.project).await.expect("a benign patch applies");
        assert!(matches!(applied, Applied::Applied { .. }), "{applied:?}");
        assert_eq!(std::fs::read_to_string(host.project.join("README.md")).unwrap(), "hello\nfrom the sandbox\n");
        assert_eq!(std::fs::read_link(host.project.join("docs/link")).unwrap(), Path::new("../README.md"));
        host.assert_guarded(&before, "a benign herdr apply");
        assert!(!std::fs::read_to_string(host.project.join("docs/new.txt")).unwrap().contains(SECRET));
    })
    .await;
    env.shutdown().await;
}
