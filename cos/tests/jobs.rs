//! One-shot jobs (offload, fanout, run_code) against the emulator: artifacts, retention,
//! cleanup on failure, cancellation and drop, the concurrency bound, languages, refusals before
//! anything is created, and the `cos offload` / `cos fanout` / `cos run-code` commands.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use createos_sandbox::jobs::{
    self, FanoutRequest, Fate, JobError, JobOptions, KeepReason, Language, OffloadRequest,
    RunCodeRequest,
};
use createos_sandbox::jobs::{CommandStart, Created};
use createos_sandbox::{ListSandboxes, Sandbox, SandboxStatus};
use futures::TryStreamExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

/// Upper bound on any one job in these tests (a loaded 2-core machine).
const LIMIT: Duration = Duration::from_secs(180);

/// A command that marks itself started, then waits for the test to create `/work/go`.
const GATED: &str =
    "touch /work/started; while [ ! -e /work/go ]; do sleep 0.05; done; echo released";

async fn bounded<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish in time"))
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("input.txt"), "from the host\n").unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.txt"), "library\n").unwrap();
    dir
}

fn options() -> JobOptions {
    JobOptions {
        timeout: Some(Duration::from_secs(120)),
        ..JobOptions::default()
    }
}

async fn creates(env: &common::Env) -> u64 {
    env.requests("createSandbox").await
}

/// Live processes once the emulator has reaped what a destroy killed.
async fn settled_live_processes(env: &common::Env) -> u64 {
    let mut live = u64::MAX;
    for _ in 0..400 {
        live = env.stats().await["live_processes"]
            .as_u64()
            .unwrap_or(u64::MAX);
        if live == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    live
}

async fn status(env: &common::Env, id: &str) -> SandboxStatus {
    env.client.get_sandbox(id).await.unwrap().status()
}

/// Running sandboxes whose gated command has started.
async fn started(env: &common::Env) -> Vec<Sandbox> {
    let views: Vec<_> = env
        .client
        .list_sandboxes(ListSandboxes::default())
        .try_collect()
        .await
        .unwrap();
    let mut out = Vec::new();
    for view in views
        .into_iter()
        .filter(|v| v.status == SandboxStatus::Running)
    {
        let sb = env.client.sandbox(&view.id).unwrap();
        if sb.read_to_string("/work/started").await.is_ok() {
            out.push(sb);
        }
    }
    out
}

async fn wait_started(env: &common::Env, n: usize) -> Vec<Sandbox> {
    bounded("waiting for started commands", async {
        loop {
            let s = started(env).await;
            if s.len() >= n {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn offload_runs_on_the_project_and_retrieves_file_and_directory_artifacts() {
    let env = common::start().await;
    let dir = project();
    let cancel = CancellationToken::new();
    let request = OffloadRequest::new(
        dir.path(),
        "cat input.txt src/lib.txt; mkdir -p out; tr a-z A-Z < input.txt > out/report.txt",
    )
    .out("out/report.txt");
    let result = bounded(
        "offload",
        jobs::offload(&env.client, request, &options(), &cancel, None),
    )
    .await
    .unwrap();
    assert_eq!(result.code, Some(0), "{result:?}");
    assert_eq!(result.stdout, "from the host\nlibrary\n");
    assert!(!result.kept);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out/report.txt")).unwrap(),
        "FROM THE HOST\n"
    );
    let artifact = result.artifact.expect("artifact");
    assert_eq!(artifact.remote, "/work/out/report.txt");
    assert!(matches!(
        status(&env, &result.sandbox_id).await,
        SandboxStatus::Destroying | SandboxStatus::Destroyed
    ));

    // a directory, named absolutely under /work, merged into the host tree
    let request = OffloadRequest::new(
        dir.path(),
        "mkdir -p dist/bin && echo one > dist/a.txt && echo two > dist/bin/b.txt",
    )
    .out("/work/dist");
    let result = bounded(
        "offload",
        jobs::offload(&env.client, request, &options(), &cancel, None),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("dist/a.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("dist/bin/b.txt")).unwrap(),
        "two\n"
    );
    assert_eq!(result.artifact.unwrap().files, 2);
    assert_eq!(env.settled_live_sandboxes().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn offload_failure_destroys_unless_keep_on_fail_which_names_the_sandbox() {
    let env = common::start().await;
    let dir = project();
    let cancel = CancellationToken::new();
    let fail = || OffloadRequest::new(dir.path(), "echo oops >&2; exit 3").out("never.txt");

    let result = bounded(
        "offload",
        jobs::offload(&env.client, fail(), &options(), &cancel, None),
    )
    .await
    .unwrap();
    assert_eq!(result.code, Some(3));
    assert_eq!(result.stderr, "oops\n");
    assert!(!result.kept && result.artifact.is_none());
    assert_eq!(env.settled_live_sandboxes().await, 0);

    let keep = JobOptions {
        keep_on_fail: true,
        ..options()
    };
    let result = bounded(
        "offload",
        jobs::offload(&env.client, fail(), &keep, &cancel, None),
    )
    .await
    .unwrap();
    assert!(result.kept);
    assert_eq!(result.kept_reason, Some(KeepReason::KeepOnFail));
    assert!(
        result.sandbox.contains(&result.sandbox_id),
        "{}",
        result.sandbox
    );
    assert_eq!(
        status(&env, &result.sandbox_id).await,
        SandboxStatus::Running
    );
    // the kept sandbox still holds the project
    let sb = env.client.sandbox(&result.sandbox_id).unwrap();
    assert_eq!(
        sb.read_to_string("/work/input.txt").await.unwrap(),
        "from the host\n"
    );
    sb.destroy().await.unwrap();

    // success with keep_on_fail: destroyed all the same
    let ok = OffloadRequest::new(dir.path(), "true");
    let result = bounded(
        "offload",
        jobs::offload(&env.client, ok, &keep, &cancel, None),
    )
    .await
    .unwrap();
    assert!(!result.kept);
    assert_eq!(env.settled_live_sandboxes().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn artifact_failures_keep_the_sandbox_and_say_why() {
    let env = common::start().await;
    let dir = project();
    let cancel = CancellationToken::new();
    for (command, out) in [
        ("true", "missing.txt"),
        ("ln -s /etc ln && true", "ln/hostname"),
    ] {
        let request = OffloadRequest::new(dir.path(), command).out(out);
        let err = bounded(
            "offload",
            jobs::offload(&env.client, request, &options(), &cancel, None),
        )
        .await
        .unwrap_err();
        let Some(Fate::Kept(id, KeepReason::ArtifactFailed)) = err.fate() else {
            panic!("not kept: {err}")
        };
        let text = err.to_string();
        assert!(
            text.contains(id.as_str()) && text.contains("retained"),
            "{text}"
        );
        assert_eq!(status(&env, id).await, SandboxStatus::Running);
        env.client.sandbox(id).unwrap().destroy().await.unwrap();
    }
    assert!(!dir.path().join("ln").exists());
    assert_eq!(env.settled_live_sandboxes().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn uncertain_execution_keeps_the_sandbox() {
    let env = common::start().await;
    let dir = project();
    // the command starts, but its output can never be followed
    env.add_fault("GET /v1/sandboxes/*/processes/*/connect* status=403")
        .await;
    let request = OffloadRequest::new(dir.path(), "echo started");
    let err = bounded(
        "offload",
        jobs::offload(
            &env.client,
            request,
            &options(),
            &CancellationToken::new(),
            None,
        ),
    )
    .await
    .unwrap_err();
    let Some(Fate::Kept(id, KeepReason::UncertainExecution)) = err.fate() else {
        panic!("not kept: {err}")
    };
    assert!(err.to_string().contains(id.as_str()));
    env.clear_faults().await;
    env.client.sandbox(id).unwrap().destroy().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn timeout_cancellation_and_drop_destroy_the_sandbox() {
    let env = common::start().await;
    let dir = project();
    let short = JobOptions {
        timeout: Some(Duration::from_millis(500)),
        ..options()
    };
    let err = bounded(
        "offload",
        jobs::offload(
            &env.client,
            OffloadRequest::new(dir.path(), "sleep 600"),
            &short,
            &CancellationToken::new(),
            None,
        ),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            JobError::TimedOut {
                fate: Fate::Destroyed(_),
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(env.settled_live_sandboxes().await, 0);

    // cancellation through the token, while the command runs
    let cancel = CancellationToken::new();
    let job = {
        let (client, cancel, dir) = (env.client.clone(), cancel.clone(), dir.path().to_path_buf());
        tokio::spawn(async move {
            jobs::offload(
                &client,
                OffloadRequest::new(dir, GATED),
                &options(),
                &cancel,
                None,
            )
            .await
        })
    };
    wait_started(&env, 1).await;
    cancel.cancel();
    let err = bounded("cancelled offload", job)
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(
            err,
            JobError::Cancelled {
                fate: Some(Fate::Destroyed(_)),
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(env.settled_live_sandboxes().await, 0);

    // the future dropped mid-run (no token): the sandbox goes all the same
    let job = {
        let (client, dir) = (env.client.clone(), dir.path().to_path_buf());
        tokio::spawn(async move {
            jobs::offload(
                &client,
                OffloadRequest::new(dir, GATED),
                &options(),
                &CancellationToken::new(),
                None,
            )
            .await
        })
    };
    wait_started(&env, 1).await;
    job.abort();
    assert!(job.await.unwrap_err().is_cancelled());
    assert_eq!(env.settled_live_sandboxes().await, 0);
    assert_eq!(settled_live_processes(&env).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fanout_keeps_input_order_and_leaves_no_sandbox_unless_keep_on_fail() {
    let env = common::start().await;
    let dir = project();
    let cancel = CancellationToken::new();
    let commands = [
        "cat input.txt",
        "echo bad >&2; exit 4",
        "echo three",
        "kill -9 $$",
    ];
    let request = FanoutRequest::new(dir.path(), commands).jobs(3);
    let result = bounded(
        "fanout",
        jobs::fanout(&env.client, request, &options(), &cancel, None),
    )
    .await
    .unwrap();
    let codes: Vec<Option<i32>> = result.results.iter().map(|e| e.code).collect();
    assert_eq!(codes, vec![Some(0), Some(4), Some(0), None]);
    assert_eq!(result.results[0].stdout, "from the host\n");
    assert_eq!(result.results[1].stderr, "bad\n");
    assert_eq!(result.results[3].signal.as_deref(), Some("SIGKILL"));
    assert!(result
        .results
        .iter()
        .enumerate()
        .all(|(i, e)| e.index == i && e.command == commands[i] && !e.kept));
    assert_eq!((result.succeeded, result.failed), (2, 2));
    let ids: std::collections::HashSet<_> = result
        .results
        .iter()
        .map(|e| e.sandbox_id.clone().unwrap())
        .collect();
    assert_eq!(ids.len(), 4, "each command has a sandbox of its own");
    assert_eq!(env.settled_live_sandboxes().await, 0);

    let keep = JobOptions {
        keep_on_fail: true,
        ..options()
    };
    let request = FanoutRequest::new(dir.path(), ["true", "exit 1"]);
    let result = bounded(
        "fanout",
        jobs::fanout(&env.client, request, &keep, &cancel, None),
    )
    .await
    .unwrap();
    assert!(!result.results[0].kept);
    assert!(result.results[1].kept);
    let kept = result.results[1].sandbox_id.clone().unwrap();
    assert_eq!(status(&env, &kept).await, SandboxStatus::Running);
    env.client.sandbox(&kept).unwrap().destroy().await.unwrap();
    assert_eq!(env.settled_live_sandboxes().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fanout_cancellation_stops_dispatch_and_destroys_everything() {
    let env = common::start().await;
    let dir = project();
    for keep_on_fail in [false, true] {
        let before = creates(&env).await;
        let cancel = CancellationToken::new();
        let opts = JobOptions {
            keep_on_fail,
            ..options()
        };
        let job = {
            let (client, cancel, dir) =
                (env.client.clone(), cancel.clone(), dir.path().to_path_buf());
            tokio::spawn(async move {
                jobs::fanout(
                    &client,
                    FanoutRequest::new(dir, [GATED, GATED, GATED, GATED]).jobs(2),
                    &opts,
                    &cancel,
                    None,
                )
                .await
            })
        };
        wait_started(&env, 2).await;
        cancel.cancel();
        let err = bounded("cancelled fanout", job).await.unwrap().unwrap_err();
        match &err {
            JobError::FanoutCancelled {
                finished: 0,
                total: 4,
                allocated,
                ..
            } if allocated.is_empty() => {}
            other => panic!("unexpected: {other}"),
        }
        assert_eq!(
            creates(&env).await - before,
            2,
            "dispatch stopped at the cancellation"
        );
        assert_eq!(env.settled_live_sandboxes().await, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fanout_runs_at_most_jobs_sandboxes_at_once() {
    let env = common::start().await;
    let dir = project();
    env.reset_stats().await;
    // Sample (creates arrived − destroys handled) from the request log until the fanout ends.
    // The two counters are read in that order, so a sample can only under-count.
    let peak = Arc::new(AtomicI64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done, url) = (
            peak.clone(),
            done.clone(),
            format!("{}/_mock/stats", env.base_url()),
        );
        let http = common::mock_http(&env.mock);
        tokio::spawn(async move {
            while !done.load(Ordering::SeqCst) {
                let stats: Value = http.get(&url).send().await.unwrap().json().await.unwrap();
                let created = stats["requests"]["createSandbox"].as_i64().unwrap_or(0);
                let destroyed = stats["handled"]["destroySandbox"].as_i64().unwrap_or(0);
                peak.fetch_max(created - destroyed, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let job = {
        let (client, dir) = (env.client.clone(), dir.path().to_path_buf());
        tokio::spawn(async move {
            jobs::fanout(
                &client,
                FanoutRequest::new(dir, vec![GATED; 5]).jobs(2),
                &options(),
                &CancellationToken::new(),
                None,
            )
            .await
        })
    };
    // Nothing is released until two commands are blocked: an unbounded fanout would have asked
    // for all five sandboxes by now.
    wait_started(&env, 2).await;
    assert_eq!(creates(&env).await, 2);
    let mut released = std::collections::HashSet::new();
    while !job.is_finished() {
        for sb in started(&env).await {
            if released.insert(sb.id().to_string()) {
                sb.write("/work/go", "").await.unwrap();
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(released.len() <= 5);
    }
    let result = job.await.unwrap().unwrap();
    done.store(true, Ordering::SeqCst);
    sampler.await.unwrap();
    assert!(
        result
            .results
            .iter()
            .all(|e| e.code == Some(0) && e.stdout == "released\n"),
        "{result:?}"
    );
    assert_eq!(creates(&env).await, 5);
    let peak = peak.load(Ordering::SeqCst);
    assert!(peak <= 2, "{peak} sandboxes at once with jobs = 2");
    assert_eq!(peak, 2, "the two slots were used");
    assert_eq!(env.settled_live_sandboxes().await, 0);
}

/// Whether `program` exists in the emulator's sandboxes (they run host binaries).
async fn guest_has(sb: &Sandbox, program: &str) -> bool {
    sb.exec("bash", ["-lc", &format!("command -v {program}")])
        .await
        .unwrap()
        .success()
}

fn snippet(lang: Language) -> &'static str {
    match lang {
        Language::Python => "import sys\nprint('py', sys.stdin.read().strip())",
        Language::JavaScript | Language::Cjs => {
            "let d='';process.stdin.on('data',c=>d+=c).on('end',()=>console.log('js', d.trim()))"
        }
        Language::Mjs => "import fs from 'fs';\nconsole.log('js', fs.readFileSync(0, 'utf8').trim())",
        Language::TypeScript => "const t: string = await Bun.stdin.text();\nconsole.log('ts', t.trim())",
        Language::Shell => "read -r line; echo \"sh $line\"",
        Language::Go => "package main\nimport (\"bufio\";\"fmt\";\"os\")\nfunc main(){s:=bufio.NewScanner(os.Stdin);s.Scan();fmt.Println(\"go\", s.Text())}",
        Language::Ruby => "puts \"rb #{STDIN.read.strip}\"",
        Language::C => "#include <stdio.h>\nint main(void){char b[64]={0};if(!fgets(b,64,stdin))return 1;printf(\"c %s\",b);return 0;}",
        Language::Cpp => "#include <iostream>\n#include <string>\nint main(){std::string s;std::getline(std::cin,s);std::cout<<\"cpp \"<<s<<std::endl;}",
        Language::Rust => "use std::io::Read;\nfn main(){let mut s=String::new();std::io::stdin().read_to_string(&mut s).unwrap();println!(\"rs {}\", s.trim());}",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn run_code_runs_every_available_language_and_names_missing_runtimes() {
    let env = common::start().await;
    let probe = env
        .client
        .create_sandbox(createos_sandbox::CreateSandbox::new("s-1vcpu-1gb"))
        .await
        .unwrap();
    probe.wait_until_running(None).await.unwrap();
    let mut ran = Vec::new();
    let mut missing = Vec::new();
    for lang in Language::ALL {
        let available = guest_has(&probe, lang.program()).await;
        let request = RunCodeRequest::new(lang, snippet(lang)).stdin("input line\n");
        let outcome = bounded(
            "run_code",
            jobs::run_code(
                &env.client,
                request,
                &options(),
                &CancellationToken::new(),
                None,
            ),
        )
        .await;
        if available {
            let result = outcome.unwrap_or_else(|e| panic!("{}: {e}", lang.ext()));
            let tag = match lang {
                Language::JavaScript | Language::Mjs | Language::Cjs => "js",
                other => other.ext(),
            };
            assert_eq!(
                result.stdout,
                format!("{tag} input line\n"),
                "{}: {result:?}",
                lang.ext()
            );
            assert!(!result.kept);
            ran.push(lang.ext());
        } else {
            match outcome {
                Err(JobError::MissingRuntime {
                    program,
                    fate: Fate::Destroyed(_),
                    ..
                }) => assert_eq!(program, lang.program()),
                other => panic!(
                    "{}: expected a missing-runtime error, got {other:?}",
                    lang.ext()
                ),
            }
            missing.push(lang.ext());
        }
    }
    eprintln!("run_code ran {ran:?}; missing runtimes {missing:?}");
    // CI installs python3; bash is everywhere
    for required in ["py", "sh"] {
        assert!(
            ran.contains(&required),
            "{required} must run on this machine"
        );
    }
    // without stdin the program reads EOF instead of hanging
    let request = RunCodeRequest::new(Language::Shell, "cat; echo done");
    let result = bounded(
        "run_code",
        jobs::run_code(
            &env.client,
            request,
            &options(),
            &CancellationToken::new(),
            None,
        ),
    )
    .await
    .unwrap();
    assert_eq!(result.stdout, "done\n");
    // a failing program reports its exit code and stderr
    let request = RunCodeRequest::new(Language::Python, "import sys\nsys.exit('boom')");
    let result = bounded(
        "run_code",
        jobs::run_code(
            &env.client,
            request,
            &options(),
            &CancellationToken::new(),
            None,
        ),
    )
    .await
    .unwrap();
    assert_eq!((result.code, result.stderr.as_str()), (Some(1), "boom\n"));
    probe.destroy().await.unwrap();
    assert_eq!(env.settled_live_sandboxes().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_is_refused_before_anything_is_created() {
    let env = common::start().await;
    let dir = project();
    std::os::unix::fs::symlink("/tmp", dir.path().join("link")).unwrap();
    let cancel = &CancellationToken::new();
    let c = &env.client;
    let offload = |dir: &Path, cmd: &str, out: Option<&str>| {
        let mut r = OffloadRequest::new(dir, cmd);
        r.out = out.map(str::to_string);
        r
    };
    // each job kind with the usual options, the outcome reduced to refused or not
    let run_offload = |request: OffloadRequest, opts: JobOptions| async move {
        jobs::offload(c, request, &opts, cancel, None)
            .await
            .map(|_| ())
    };
    let run_fanout = |request: FanoutRequest| async move {
        jobs::fanout(c, request, &options(), cancel, None)
            .await
            .map(|_| ())
    };
    let run_code = |request: RunCodeRequest| async move {
        jobs::run_code(c, request, &options(), cancel, None)
            .await
            .map(|_| ())
    };
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let long = JobOptions {
        timeout: Some(Duration::from_secs(3601)),
        ..options()
    };
    let cases: Vec<(&str, Result<(), JobError>)> = vec![
        (
            "empty command",
            run_offload(offload(dir.path(), "  ", None), options()).await,
        ),
        (
            "missing dir",
            run_offload(offload(&dir.path().join("nope"), "true", None), options()).await,
        ),
        (
            "root dir",
            run_offload(offload(Path::new("/"), "true", None), options()).await,
        ),
        (
            "home dir",
            run_offload(offload(Path::new(&home), "true", None), options()).await,
        ),
        (
            "out escapes",
            run_offload(offload(dir.path(), "true", Some("../x")), options()).await,
        ),
        (
            "out absolute",
            run_offload(offload(dir.path(), "true", Some("/etc/passwd")), options()).await,
        ),
        (
            "out through a host link",
            run_offload(offload(dir.path(), "true", Some("link/x")), options()).await,
        ),
        (
            "timeout over 1 h",
            run_offload(offload(dir.path(), "true", None), long).await,
        ),
        (
            "no commands",
            run_fanout(FanoutRequest::new(dir.path(), Vec::<String>::new())).await,
        ),
        (
            "26 commands",
            run_fanout(FanoutRequest::new(dir.path(), vec!["true"; 26])).await,
        ),
        (
            "jobs 0",
            run_fanout(FanoutRequest::new(dir.path(), ["true"]).jobs(0)).await,
        ),
        (
            "jobs 11",
            run_fanout(FanoutRequest::new(dir.path(), ["true"]).jobs(11)).await,
        ),
        (
            "empty fanout command",
            run_fanout(FanoutRequest::new(dir.path(), ["true", ""])).await,
        ),
        (
            "empty code",
            run_code(RunCodeRequest::new(Language::Python, "\n")).await,
        ),
        (
            "huge stdin",
            run_code(RunCodeRequest::new(Language::Python, "pass").stdin(vec![
                b'x';
                jobs::MAX_CODE_BYTES
                    + 1
            ]))
            .await,
        ),
    ];
    for (what, outcome) in cases {
        match outcome {
            Err(err @ JobError::Invalid(_)) => {
                assert_eq!(err.created(), Created::Nothing, "{what}");
                eprintln!("{what}: {err}");
            }
            other => panic!("{what}: expected a refusal, got {other:?}"),
        }
    }
    assert!("cobol".parse::<Language>().is_err());
    assert_eq!(
        creates(&env).await,
        0,
        "nothing may be created for bad input"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_create_answer_is_found_by_name_and_destroyed() {
    let env = common::start().await;
    let dir = project();
    let cancel = CancellationToken::new();
    // The create runs to its end, then the connection breaks in the middle of the answer.
    env.add_fault("POST /v1/sandboxes reset when=after count=1")
        .await;
    let err = jobs::offload(
        &env.client,
        OffloadRequest::new(dir.path(), "true"),
        &options(),
        &cancel,
        None,
    )
    .await
    .unwrap_err();
    let JobError::Create(failed) = &err else {
        panic!("{err:?}")
    };
    let reclaim = failed
        .reclaim
        .as_ref()
        .unwrap_or_else(|| panic!("no lookup after a lost answer: {err}"));
    assert_eq!(
        err.created(),
        Created::LostCreate(reclaim.clone()),
        "a lost create made one"
    );
    assert!(reclaim.name.starts_with("cos-job-"), "{reclaim:?}");
    assert_eq!(reclaim.destroyed.len(), 1, "{err}");
    assert!(reclaim.is_clean() && failed.left_nothing());
    assert!(err.to_string().contains(&reclaim.destroyed[0]), "{err}");
    assert_eq!(creates(&env).await, 1);
    assert_eq!(env.settled_live_sandboxes().await, 0);

    // A refusal created nothing: nothing is looked up.
    env.reset_stats().await;
    env.add_fault("POST /v1/sandboxes status=409 count=1").await;
    let err = jobs::offload(
        &env.client,
        OffloadRequest::new(dir.path(), "true"),
        &options(),
        &cancel,
        None,
    )
    .await
    .unwrap_err();
    let JobError::Create(failed) = &err else {
        panic!("{err:?}")
    };
    assert!(failed.reclaim.is_none(), "{err}");
    assert_eq!(env.requests("listSandboxes").await, 0);
    assert_eq!(env.settled_live_sandboxes().await, 0);
}

/// Every error after the create names the sandbox, what became of it and how far the command
/// got: none of them may read "nothing was created" (the old `?` conversion said that of all).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn errors_after_the_create_say_what_was_created() {
    let env = common::start().await;
    let dir = project();
    let cancel = CancellationToken::new();
    let offload = |command: &str| OffloadRequest::new(dir.path(), command);
    let run = |request| async {
        let options = options();
        bounded(
            "offload",
            jobs::offload(&env.client, request, &options, &cancel, None),
        )
        .await
    };

    // Preparing fails: the sandbox existed and was destroyed; the command never started.
    env.add_fault("POST /v1/sandboxes/*/exec status=400 count=1")
        .await;
    let err = run(offload("true")).await.unwrap_err();
    assert!(matches!(err, JobError::Failed { .. }), "{err:?}");
    let created = err.created();
    let Created::Sandbox {
        fate: Fate::Destroyed(id),
        command: CommandStart::NotStarted,
    } = created
    else {
        panic!("{created:?} for {err}")
    };
    assert!(err.to_string().contains(&id), "{err}");
    let source = std::error::Error::source(&err).expect("the library error is the source");
    let library = source.downcast_ref::<createos_sandbox::Error>();
    assert!(
        library.is_some_and(|e| e.status() == Some(400)),
        "{source:?}"
    );
    env.clear_faults().await;

    // The output cannot be followed: kept, and the command may have run.
    env.add_fault("GET /v1/sandboxes/*/processes/*/connect* status=403")
        .await;
    let err = run(offload("echo started")).await.unwrap_err();
    let created = err.created();
    let Created::Sandbox {
        fate: Fate::Kept(id, KeepReason::UncertainExecution),
        command: CommandStart::Uncertain,
    } = created
    else {
        panic!("{created:?} for {err}")
    };
    env.clear_faults().await;
    env.client.sandbox(&id).unwrap().destroy().await.unwrap();

    // The artifact is missing: kept, and the process that ran is named.
    let err = run(offload("true").out("missing.txt")).await.unwrap_err();
    let created = err.created();
    let Created::Sandbox {
        fate: Fate::Kept(id, KeepReason::ArtifactFailed),
        command: CommandStart::Finished(pid),
    } = created
    else {
        panic!("{created:?} for {err}")
    };
    assert!(!pid.is_empty());
    env.client.sandbox(&id).unwrap().destroy().await.unwrap();
    assert_eq!(env.settled_live_sandboxes().await, 0);
}

// ---------------------------------------------------------------------------------------------
// The command line

fn cos(env: &common::Env, dir: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_cos"));
    cmd.current_dir(dir)
        .env("CREATEOS_SANDBOX_BASE_URL", env.base_url())
        .env("CREATEOS_API_KEY", env.mock.api_key())
        .env("HOME", dir)
        .env("RUST_LOG", "warn")
        .env_remove("CREATEOS_SHAPE")
        .env_remove("CREATEOS_ROOTFS")
        .env_remove("CREATEOS_OUTPUT")
        .kill_on_drop(true);
    cmd
}

async fn cos_output(env: &common::Env, dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = bounded("cos", cos(env, dir).args(args).output())
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cli_offload_fanout_and_run_code() {
    let env = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = project();
    let d = dir.path().to_str().unwrap();

    let (code, out, err) = cos_output(
        &env,
        home.path(),
        &[
            "offload",
            "-C",
            d,
            "--out",
            "build/x.txt",
            "--",
            "mkdir -p build; wc -l < input.txt | tee build/x.txt",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "1\n");
    assert!(err.contains("destroyed sandbox"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("build/x.txt")).unwrap(),
        "1\n"
    );

    let (code, out, _) = cos_output(&env, home.path(), &["offload", "-C", d, "--", "exit 7"]).await;
    assert_eq!((code, out.as_str()), (7, ""));

    let (code, out, err) = cos_output(
        &env,
        home.path(),
        &[
            "-o", "json", "fanout", "-C", d, "-j", "2", "echo a", "exit 2", "echo c",
        ],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    let codes: Vec<i64> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_i64().unwrap())
        .collect();
    assert_eq!(codes, vec![0, 2, 0]);
    assert_eq!(doc["results"][2]["stdout"], "c\n");

    let code_file = home.path().join("hello.py");
    std::fs::write(&code_file, "print(input().upper())").unwrap();
    let stdin_file = home.path().join("in.txt");
    std::fs::write(&stdin_file, "quiet\n").unwrap();
    let (code, out, err) = cos_output(
        &env,
        home.path(),
        &[
            "-o",
            "json",
            "run-code",
            "--stdin",
            stdin_file.to_str().unwrap(),
            code_file.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["stdout"], "QUIET\n");
    assert_eq!(doc["kept"], false);

    let before = creates(&env).await;
    let (code, _, err) = cos_output(
        &env,
        home.path(),
        &["-o", "text", "fanout", "-C", d, "-j", "11", "true"],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("jobs"), "{err}");
    let (code, _, err) = cos_output(
        &env,
        home.path(),
        &["-o", "text", "run-code", "-l", "cobol", "-e", "x"],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("unknown language"), "{err}");
    assert_eq!(creates(&env).await, before);
    assert_eq!(env.settled_live_sandboxes().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cli_ctrl_c_stops_the_job_and_leaves_no_sandbox() {
    let env = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = project();
    for args in [
        vec![
            "offload",
            "-C",
            dir.path().to_str().unwrap(),
            "--keep-on-fail",
            "--",
            "sleep 600",
        ],
        vec![
            "fanout",
            "-C",
            dir.path().to_str().unwrap(),
            "sleep 600",
            "sleep 600",
        ],
    ] {
        let mut child = cos(&env, home.path())
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = String::new();
        let mut running = 0;
        let want = if args[0] == "fanout" { 2 } else { 1 };
        bounded("the command to start", async {
            while running < want {
                let line = lines.next_line().await.unwrap().expect("stderr open");
                running += usize::from(line.contains("running…"));
                seen.push_str(&line);
                seen.push('\n');
            }
        })
        .await;
        // the command needs a moment past `running…` to exist remotely; SIGINT it then
        assert!(env.stats().await["live_sandboxes"].as_u64().unwrap() >= want as u64);
        let pid = child.id().unwrap().to_string();
        assert!(std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success());
        let rest = bounded("cos to exit", async {
            let mut rest = String::new();
            while let Ok(Some(line)) = lines.next_line().await {
                rest.push_str(&line);
                rest.push('\n');
            }
            rest
        })
        .await;
        let status = bounded("cos to exit", child.wait()).await.unwrap();
        assert_eq!(status.code(), Some(130), "{seen}{rest}");
        assert!(rest.contains("destroyed sandbox"), "{rest}");
        assert_eq!(env.settled_live_sandboxes().await, 0, "{seen}{rest}");
        assert_eq!(settled_live_processes(&env).await, 0);
    }
}
