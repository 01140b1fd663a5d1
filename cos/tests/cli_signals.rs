//! Ctrl-C at any instant leaves no sandbox, or names the one it keeps: SIGINT sent to `cos run`
//! at seeded random instants from its start through the create and the command, and once each
//! to `cos offload`, `cos fanout` and `cos run-code` while their creates are in flight. The
//! emulator runs apart from `cos` (in this test process, on a real socket), so a signal to
//! `cos` cannot take the emulator down with it; its create takes 400 ms, so a signal lands
//! inside the create request as often as outside it.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use createos_sandbox::{ListSandboxes, SandboxStatus};
use futures::TryStreamExt;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// `cos run` runs interrupted at random instants.
const RUNS: usize = 20;
/// The seed of those instants (the same spread on every run of the test).
const SEED: u64 = 0x00c0_5516_1a75;
/// The windows the instants are drawn from, in turn (ms after the spawn): the start (arguments,
/// the shape check), the create (400 ms in the emulator), the command.
const WINDOWS_MS: [(u64, u64); 3] = [(0, 150), (150, 700), (700, 1500)];
/// Upper bound on anything waited for (a loaded 2-core machine), never a timing assertion.
const LIMIT: Duration = Duration::from_secs(180);

async fn bounded<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish in time"))
}

/// The emulator, its create slowed to 400 ms.
async fn emulator() -> common::Env {
    let mut config = createos_mock::MockConfig::default();
    config.latencies.create = Duration::from_millis(400);
    common::start_with(config).await
}

/// `/_mock/stats`, sent with the emulator's key (its own routes require it).
async fn stats(env: &common::Env) -> Value {
    let key = env.mock.api_key();
    let url = format!("{}/_mock/stats", env.base_url());
    let reply = reqwest::Client::new()
        .get(url)
        .header("X-Api-Key", &key)
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    reply.json().await.unwrap()
}

async fn creates(env: &common::Env) -> u64 {
    stats(env).await["requests"]["createSandbox"]
        .as_u64()
        .unwrap_or(0)
}

/// Sandboxes that are not destroyed once the emulator's asynchronous destroys have settled.
async fn live_sandboxes(env: &common::Env) -> Vec<String> {
    for _ in 0..400 {
        if stats(env).await["live_sandboxes"].as_u64() == Some(0) {
            return Vec::new();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let views: Vec<_> = env
        .client
        .list_sandboxes(ListSandboxes::default())
        .try_collect()
        .await
        .unwrap();
    views
        .into_iter()
        .filter(|v| !v.status.is_terminal())
        .map(|v| format!("{} {:?} {}", v.id, v.name, v.status))
        .collect()
}

fn cos(env: &common::Env, home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cos"));
    cmd.current_dir(home)
        .env("CREATEOS_SANDBOX_BASE_URL", env.base_url())
        .env("CREATEOS_API_KEY", env.mock.api_key())
        .env("HOME", home)
        .env("RUST_LOG", "warn")
        .env_remove("CREATEOS_SHAPE")
        .env_remove("CREATEOS_ROOTFS")
        .env_remove("CREATEOS_OUTPUT")
        .args(["-o", "text"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// A running `cos` with its stderr collected as it comes.
struct Running {
    child: Child,
    stderr: Arc<Mutex<String>>,
    reader: tokio::task::JoinHandle<()>,
}

fn spawn(mut cmd: Command) -> Running {
    let mut child = cmd.spawn().expect("cos starts");
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let sink = stderr.clone();
    let reader = tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let mut text = sink.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    });
    Running {
        child,
        stderr,
        reader,
    }
}

impl Running {
    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    fn interrupt(&self) {
        let pid = self.child.id().expect("still running") as libc::pid_t;
        // SAFETY: kill(2) with a child's pid and a signal number has no memory effects.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    }

    /// Wait for the exit and the whole of stderr.
    async fn finish(mut self) -> (ExitStatus, String) {
        let status = bounded("cos to exit", self.child.wait()).await.unwrap();
        bounded("stderr to close", self.reader).await.unwrap();
        let text = self.stderr.lock().unwrap().clone();
        (status, text)
    }
}

/// Poll until `cond` holds on the stats (the signal is sent right after).
async fn until(env: &common::Env, what: &str, cond: impl Fn(&Value) -> bool) {
    bounded(what, async {
        while !cond(&stats(env).await) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

/// After a Ctrl-C: exit 130, or killed by the signal itself when it came before the handler
/// (before anything could be created).
fn interrupted(status: ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.code() == Some(130) || status.signal() == Some(libc::SIGINT)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ctrl_c_at_random_instants_of_cos_run_leaves_no_sandbox() {
    let env = emulator().await;
    let home = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(SEED);
    let mut phases: BTreeMap<&str, usize> = BTreeMap::new();
    for run in 0..RUNS {
        let (from, to) = WINDOWS_MS[run % WINDOWS_MS.len()];
        let delay = Duration::from_millis(rng.gen_range(from..to));
        let creates_before = creates(&env).await;
        let running = spawn({
            let mut cmd = cos(&env, home.path());
            cmd.args(["run", "--shape", "s-1vcpu-256mb", "--", "sleep", "60"]);
            cmd
        });
        tokio::time::sleep(delay).await;
        // Where the signal lands, for the record (the spread is seeded, the machine's pace not).
        let phase = match (
            creates(&env).await > creates_before,
            running.stderr().contains("created "),
        ) {
            (false, _) => "before the create",
            (true, false) => "during the create",
            (true, true) => "during the command",
        };
        *phases.entry(phase).or_default() += 1;
        running.interrupt();
        let (status, stderr) = running.finish().await;
        assert!(
            interrupted(status),
            "run {run} ({phase}, {delay:?}): {status}\n{stderr}"
        );
        let left = live_sandboxes(&env).await;
        assert!(
            left.is_empty(),
            "run {run} ({phase}, {delay:?}) left {left:?}\n{stderr}"
        );
    }
    eprintln!("signals landed: {phases:?}");
    assert_eq!(phases.values().sum::<usize>(), RUNS);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ctrl_c_inside_each_create_request_destroys_what_it_brings() {
    let env = emulator().await;
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("proj");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("input.txt"), "x\n").unwrap();
    std::fs::write(home.path().join("main.py"), "import time\ntime.sleep(60)\n").unwrap();
    let p = project.to_str().unwrap();
    let commands: [(&[&str], u64); 4] = [
        (&["run", "--shape", "s-1vcpu-256mb", "--", "sleep", "60"], 1),
        (
            &[
                "offload",
                "-C",
                p,
                "--shape",
                "s-1vcpu-256mb",
                "--",
                "sleep 60",
            ],
            1,
        ),
        (
            &[
                "fanout",
                "-C",
                p,
                "--shape",
                "s-1vcpu-256mb",
                "-j",
                "2",
                "sleep 60",
                "sleep 60",
            ],
            2,
        ),
        (&["run-code", "--shape", "s-1vcpu-256mb", "main.py"], 1),
    ];
    for (args, in_flight) in commands {
        let before = creates(&env).await;
        let running = spawn({
            let mut cmd = cos(&env, home.path());
            cmd.args(args);
            cmd
        });
        // Every create has reached the emulator, which answers it 400 ms later.
        until(&env, "the creates to be sent", |s| {
            s["requests"]["createSandbox"].as_u64().unwrap_or(0) >= before + in_flight
        })
        .await;
        running.interrupt();
        let (status, stderr) = running.finish().await;
        assert_eq!(status.code(), Some(130), "{args:?}: {status}\n{stderr}");
        let left = live_sandboxes(&env).await;
        assert!(left.is_empty(), "{args:?} left {left:?}\n{stderr}");
        assert_eq!(
            stats(&env).await["sandboxes_created"].as_u64(),
            Some(creates(&env).await),
            "every create was answered"
        );
    }
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kept_sandbox_is_named_and_a_lost_create_answer_is_reclaimed() {
    let env = emulator().await;
    let home = tempfile::tempdir().unwrap();

    // --keep: Ctrl-C during the command keeps the sandbox and names it.
    let running = spawn({
        let mut cmd = cos(&env, home.path());
        cmd.args([
            "run",
            "--keep",
            "--shape",
            "s-1vcpu-256mb",
            "--",
            "sleep",
            "60",
        ]);
        cmd
    });
    bounded("the sandbox to be created", async {
        while !running.stderr().contains("created ") {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    running.interrupt();
    let (status, stderr) = running.finish().await;
    assert_eq!(status.code(), Some(130), "{stderr}");
    let views: Vec<_> = env
        .client
        .list_sandboxes(ListSandboxes::default())
        .try_collect()
        .await
        .unwrap();
    let kept: Vec<_> = views
        .iter()
        .filter(|v| v.status == SandboxStatus::Running)
        .collect();
    assert_eq!(kept.len(), 1, "{views:?}");
    assert!(
        stderr.contains("kept ") && stderr.contains(&kept[0].id),
        "{stderr}"
    );
    env.client
        .sandbox(&kept[0].id)
        .unwrap()
        .destroy()
        .await
        .unwrap();
    assert!(live_sandboxes(&env).await.is_empty());

    // The create runs to its end but its answer is cut off: the sandbox is found by the name
    // `cos run` gave it and destroyed, and the error says so.
    env.add_fault("POST /v1/sandboxes reset when=after count=1")
        .await;
    let running = spawn({
        let mut cmd = cos(&env, home.path());
        cmd.args(["run", "--shape", "s-1vcpu-256mb", "--", "true"]);
        cmd
    });
    let (status, stderr) = running.finish().await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("its answer was lost")
            && stderr.contains("was destroyed")
            && stderr.contains("cos-run-"),
        "{stderr}"
    );
    assert!(live_sandboxes(&env).await.is_empty(), "{stderr}");
    env.shutdown().await;
}
