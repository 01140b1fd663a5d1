//! Fault soak: 10,000 mixed operations from 16 concurrent tasks while the emulator answers
//! 503s, 429s with `Retry-After`, drops connections and cuts output streams.
//!
//! Passing means: every operation that should succeed does; no non-idempotent request was
//! applied twice (the emulator's handler counts equal the client's successes); process
//! output arrives with no byte lost or repeated; no sandbox or process is left behind; and
//! memory stays flat (no growth proportional to the number of operations).

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use createos_sandbox::api::processes::{ProcessSpec, WaitScope};
use createos_sandbox::snapshot::GitMode;
use createos_sandbox::stream::process_output::{OutputEvent, StreamKind};
use createos_sandbox::sync::{SyncMode, SyncOptions, Syncer};
use createos_sandbox::transfer::ApiRemote;
use createos_sandbox::{CreateSandbox, Sandbox};
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const TASKS: usize = 16;
const TOTAL_OPS: usize = 10_000;
const _: () = assert!(TOTAL_OPS.is_multiple_of(TASKS));
/// A task recycles its sandbox after this many operations, so create and destroy are part of
/// the mix (and a leak of per-sandbox state would show in memory).
const OPS_PER_SANDBOX: usize = 60;
/// Bound on the whole soak, so a hang fails instead of blocking CI.
const GUARD: Duration = Duration::from_secs(900);

/// Faults active for the whole run. 503 and 429 answer before the handler runs, so every
/// method may retry them; resets are injected where a retry is safe (idempotent methods) or
/// where the stream resumes (process output).
const FAULTS: &[&str] = &[
    "* status=503 rate=0.04",
    "* status=429 retry_after=1 rate=0.002",
    "GET /v1/sandboxes/* reset rate=0.02",
    "DELETE /v1/sandboxes/* reset rate=0.05",
    "GET /v1/sandboxes/*/processes/*/wait reset when=after rate=0.05",
    // A cut before the first whole event makes no progress; the stream gives up after 8 such
    // attempts in a row, so cuts are frequent but not near-certain.
    "GET /v1/sandboxes/*/processes/*/connect cut=700 rate=0.2",
];

/// Client-side successes of operations whose requests are not idempotent.
#[derive(Default)]
struct Applied {
    create_sandbox: AtomicU64,
    upload: AtomicU64,
    destroy: AtomicU64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    Create,
    Exec,
    Upload,
    Download,
    Process,
    Sync,
    Destroy,
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

fn seq_output(n: u32) -> Vec<u8> {
    (1..=n)
        .map(|i| format!("{i}\n"))
        .collect::<String>()
        .into_bytes()
}

struct Task {
    id: usize,
    ops: usize,
    client: createos_sandbox::Client,
    applied: Arc<Applied>,
    done: Arc<AtomicU64>,
    rss: Arc<Mutex<Vec<(u64, u64)>>>,
    counts: BTreeMap<Op, u64>,
    /// Words of the execs and process starts that succeeded in the current sandbox.
    ledger: Vec<String>,
    rng: StdRng,
    project: tempfile::TempDir,
}

impl Task {
    fn count(&mut self, op: Op) {
        *self.counts.entry(op).or_default() += 1;
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        if done.is_multiple_of(1000) {
            self.rss.lock().unwrap().push((done, rss_kib()));
        }
    }

    async fn create(&mut self) -> Sandbox {
        let sb = self
            .client
            .create_sandbox(CreateSandbox::new("s-1vcpu-256mb"))
            .await
            .unwrap_or_else(|e| {
                panic!("task {}: create failed: {e}", self.id);
            });
        self.applied.create_sandbox.fetch_add(1, Ordering::SeqCst);
        self.count(Op::Create);
        sb
    }

    /// Every exec and process start that succeeded appended its word to the guest's ledger:
    /// each must be there exactly once (a replayed request would append it twice).
    async fn check_ledger(&mut self, sb: &Sandbox) {
        let mut want = std::mem::take(&mut self.ledger);
        let text = if want.is_empty() {
            String::new()
        } else {
            sb.read_to_string("/root/applied.log")
                .await
                .expect("read ledger")
        };
        let mut got: Vec<String> = text.lines().map(str::to_string).collect();
        want.sort();
        got.sort();
        assert_eq!(
            got, want,
            "task {}: the guest ledger differs from the client's successes",
            self.id
        );
    }

    async fn destroy(&mut self, sb: &Sandbox) {
        self.check_ledger(sb).await;
        sb.destroy()
            .await
            .unwrap_or_else(|e| panic!("task {}: destroy {} failed: {e}", self.id, sb.id()));
        self.applied.destroy.fetch_add(1, Ordering::SeqCst);
        self.count(Op::Destroy);
    }

    async fn exec(&mut self, sb: &Sandbox, n: usize) {
        let word = format!("t{}-{n}", self.id);
        let out = sb
            .exec("sh", ["-c", "printf '%s\\n' \"$1\" >> /root/applied.log; printf '%s' \"$1\"; printf 'e' >&2; exit 7", "sh", &word])
            .await
            .unwrap_or_else(|e| panic!("task {}: exec failed: {e} ({e:?})", self.id));
        self.ledger.push(word.clone());
        assert_eq!(
            (out.stdout.as_str(), out.stderr.as_str(), out.exit_code),
            (word.as_str(), "e", 7)
        );
        self.count(Op::Exec);
    }

    async fn upload(&mut self, sb: &Sandbox, n: usize) -> (String, Vec<u8>) {
        let len = self.rng.gen_range(0..64 * 1024);
        let data: Vec<u8> = (0..len).map(|_| self.rng.gen()).collect();
        let path = format!("/root/soak/{}-{n}.bin", self.id);
        sb.write(&path, data.clone())
            .await
            .unwrap_or_else(|e| panic!("task {}: upload failed: {e}", self.id));
        self.applied.upload.fetch_add(1, Ordering::SeqCst);
        self.count(Op::Upload);
        (path, data)
    }

    async fn download(&mut self, sb: &Sandbox, path: &str, want: &[u8]) {
        let fail = |e: createos_sandbox::Error| -> ! { panic!("download {path} failed: {e}") };
        let got = sb
            .download(path)
            .await
            .unwrap_or_else(|e| fail(e))
            .bytes(1 << 20)
            .await
            .unwrap_or_else(|e| fail(e));
        assert!(
            got == want,
            "task {}: {path} came back different ({} vs {} bytes)",
            self.id,
            got.len(),
            want.len()
        );
        self.count(Op::Download);
    }

    /// A process whose output is read through cut streams: every byte exactly once.
    async fn process(&mut self, sb: &Sandbox) {
        let n = self.rng.gen_range(200..3000);
        let word = format!("p{}-{n}", self.id);
        let script = format!("echo {word} >> /root/applied.log; seq 1 {n}; echo done >&2");
        let spec = ProcessSpec::new("sh").args(["-c", &script]);
        let p = sb
            .processes()
            .start(spec)
            .await
            .unwrap_or_else(|e| panic!("task {}: start failed: {e} ({e:?})", self.id));
        self.ledger.push(word);
        let mut stream = p
            .connect(0)
            .await
            .unwrap_or_else(|e| panic!("task {}: connect failed: {e}", self.id));
        let (mut stdout, mut stderr, mut exit, mut last_seq) = (Vec::new(), Vec::new(), None, 0u64);
        while let Some(event) = stream.next().await {
            match event.unwrap_or_else(|e| panic!("task {}: output stream failed: {e}", self.id)) {
                OutputEvent::Data { seq, stream, bytes } => {
                    assert!(
                        seq > last_seq,
                        "task {}: seq {seq} after {last_seq}: repeated output",
                        self.id
                    );
                    last_seq = seq;
                    match stream {
                        StreamKind::Stdout => stdout.extend_from_slice(&bytes),
                        StreamKind::Stderr => stderr.extend_from_slice(&bytes),
                        other => panic!("unexpected stream {other:?}"),
                    }
                }
                OutputEvent::Gap {
                    from_seq,
                    to_seq,
                    lost_bytes,
                } => {
                    panic!("task {}: output lost between {from_seq} and {to_seq} ({lost_bytes:?} bytes)", self.id)
                }
                OutputEvent::Exit { code, .. } => exit = code,
                OutputEvent::Error(message) => panic!("task {}: stream error {message}", self.id),
            }
        }
        assert!(
            stdout == seq_output(n),
            "task {}: stdout of seq 1 {n} differs ({} bytes)",
            self.id,
            stdout.len()
        );
        assert_eq!(stderr, b"done\n");
        assert_eq!(exit, Some(0));
        let waited = p
            .wait(WaitScope::Tree, Some(Duration::from_secs(60)))
            .await
            .expect("wait");
        assert_eq!(waited.exit_code, Some(0));
        self.count(Op::Process);
    }

    /// One incremental one-way sync of a small project with a random edit.
    async fn sync(&mut self, sb: &Sandbox, n: usize) {
        let root = self.project.path().join("p");
        let file = root.join(format!("f{}.txt", self.rng.gen_range(0..8)));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(&file, format!("edit {n}\n")).unwrap();
        let mut options = SyncOptions::new(SyncMode::OneWay)
            .home_dir(self.project.path().join("home"))
            .state_dir(self.project.path().join("state"));
        options.git = GitMode::Off;
        let remote_dir = format!("/root/sync-{}", self.id);
        let syncer = Syncer::new(
            Arc::new(ApiRemote::new(sb.clone())),
            &root,
            &remote_dir,
            options,
        )
        .expect("syncer");
        syncer
            .run()
            .await
            .unwrap_or_else(|e| panic!("task {}: sync failed: {e:#}", self.id));
        let name = file.file_name().unwrap().to_str().unwrap();
        let remote = sb
            .read_to_string(&format!("{remote_dir}/{name}"))
            .await
            .expect("read synced file");
        assert_eq!(remote, format!("edit {n}\n"));
        self.count(Op::Sync);
    }

    async fn run(mut self) -> BTreeMap<Op, u64> {
        let mut n = 0;
        while n < self.ops {
            let sb = self.create().await;
            n += 1;
            let mut uploaded: Vec<(String, Vec<u8>)> = Vec::new();
            // A fresh sandbox means fresh remote sync state.
            let _ = std::fs::remove_dir_all(self.project.path().join("state"));
            let budget = OPS_PER_SANDBOX.min(self.ops - n).saturating_sub(1);
            for _ in 0..budget {
                n += 1;
                match self.rng.gen_range(0..100) {
                    0..=34 => self.exec(&sb, n).await,
                    35..=54 => {
                        let file = self.upload(&sb, n).await;
                        uploaded.push(file);
                    }
                    55..=74 if !uploaded.is_empty() => {
                        let (path, data) =
                            uploaded.swap_remove(self.rng.gen_range(0..uploaded.len()));
                        self.download(&sb, &path, &data).await;
                    }
                    55..=74 => self.exec(&sb, n).await,
                    75..=94 => self.process(&sb).await,
                    _ => self.sync(&sb, n).await,
                }
            }
            if n < self.ops {
                n += 1;
            }
            self.destroy(&sb).await;
        }
        self.counts
    }
}

#[test]
fn no_operation_is_lost_repeated_or_leaked_under_faults() {
    // The soak drives real processes; a multi-threaded runtime like a real caller's.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        tokio::time::timeout(GUARD, soak())
            .await
            .expect("the soak finished in time");
    });
}

async fn soak() {
    let env = common::start().await;
    for rule in FAULTS {
        env.add_fault(rule).await;
    }
    let applied = Arc::new(Applied::default());
    let done = Arc::new(AtomicU64::new(0));
    let rss = Arc::new(Mutex::new(Vec::new()));
    let seed: u64 = std::env::var("SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_50a4);
    eprintln!("soak seed {seed} (SOAK_SEED to replay)");

    let mut handles = Vec::new();
    for id in 0..TASKS {
        // TOTAL_OPS is a multiple of TASKS.
        let ops = TOTAL_OPS / TASKS;
        let task = Task {
            id,
            ops,
            client: env.client.clone(),
            applied: applied.clone(),
            done: done.clone(),
            rss: rss.clone(),
            counts: BTreeMap::new(),
            ledger: Vec::new(),
            rng: StdRng::seed_from_u64(seed ^ (id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            project: tempfile::tempdir().unwrap(),
        };
        handles.push(tokio::spawn(task.run()));
    }
    let mut totals: BTreeMap<Op, u64> = BTreeMap::new();
    for handle in handles {
        for (op, count) in handle.await.expect("a soak task panicked") {
            *totals.entry(op).or_default() += count;
        }
    }
    let stats = env.stats().await;
    env.clear_faults().await;
    eprintln!(
        "soak: {totals:?}; faults injected {}",
        stats["faults_injected"]
    );

    assert_eq!(
        done.load(Ordering::SeqCst),
        TOTAL_OPS as u64,
        "every operation ran"
    );
    assert!(
        stats["faults_injected"].as_u64().unwrap_or(0) > 500,
        "faults were injected: {stats}"
    );
    for op in [
        Op::Create,
        Op::Exec,
        Op::Upload,
        Op::Download,
        Op::Process,
        Op::Sync,
        Op::Destroy,
    ] {
        assert!(
            totals.get(&op).copied().unwrap_or(0) > 0,
            "the mix ran {op:?}"
        );
    }

    // Each success of a non-idempotent request ran its handler exactly once.
    let handled = |op: &str| stats["handled"][op].as_u64().unwrap_or(0);
    assert_eq!(
        handled("createSandbox"),
        applied.create_sandbox.load(Ordering::SeqCst),
        "createSandbox applied once each"
    );
    // exec and createProcess: checked per sandbox against the guest ledger (the sync engine
    // makes exec requests of its own, so a global count would not tell).
    assert_eq!(
        handled("destroySandbox"),
        applied.destroy.load(Ordering::SeqCst),
        "destroySandbox applied once each"
    );

    // Nothing left behind.
    assert_eq!(
        env.settled_live_sandboxes().await,
        0,
        "no sandbox left behind"
    );
    let live_processes = env.stats().await["live_processes"].as_u64();
    assert_eq!(live_processes, Some(0), "no process left behind");

    // Memory flat: what the last 60 % of the run added stays far below what a per-operation
    // leak would add (a few KiB per operation would be tens of MiB here).
    let samples = rss.lock().unwrap().clone();
    eprintln!("rss samples (ops, KiB): {samples:?}");
    let early = samples
        .iter()
        .find(|(ops, _)| *ops >= 4000)
        .map(|s| s.1)
        .expect("sample at 4000 ops");
    let last = samples.last().map(|s| s.1).expect("final sample");
    assert!(
        last <= early + 48 * 1024,
        "RSS grew from {early} KiB to {last} KiB over 6,000 operations"
    );
    env.shutdown().await;
}
