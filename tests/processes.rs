//! Managed processes (E21–E30) against the emulator: real processes, real bytes, injected
//! connection cuts and a journal smaller than the output.

mod common;

use std::time::Duration;

use createos_sandbox::api::processes::{
    Process, ProcessKind, ProcessSpec, ProcessState, RunOptions, Signal, WaitScope, INPUT_CHUNK,
};
use createos_sandbox::stream::process_output::{OutputEvent, OutputStream, StreamKind};
use createos_sandbox::{CreateSandbox, Error, Sandbox};
use futures::StreamExt;
use rand::RngCore;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

/// Upper bound for anything that waits on a remote process, so a broken stream fails the test
/// instead of hanging it.
const GUARD: Duration = Duration::from_secs(120);

async fn sandbox(env: &common::Env) -> Sandbox {
    env.client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb"))
        .await
        .expect("create")
}

fn sh(script: &str) -> ProcessSpec {
    ProcessSpec::new("sh").args(["-c", script])
}

#[derive(Debug, Default)]
struct Collected {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    pty: Vec<u8>,
    seqs: Vec<u64>,
    gaps: Vec<(u64, u64, Option<u64>)>,
    exit: Option<(Option<i32>, Option<String>)>,
    errors: Vec<String>,
}

async fn collect(mut stream: OutputStream) -> Collected {
    let mut c = Collected::default();
    tokio::time::timeout(GUARD, async {
        while let Some(event) = stream.next().await {
            match event.expect("output event") {
                OutputEvent::Data { seq, stream, bytes } => {
                    assert!(
                        c.seqs.last().is_none_or(|last| seq > *last),
                        "seq {seq} after {:?}",
                        c.seqs.last()
                    );
                    c.seqs.push(seq);
                    match stream {
                        StreamKind::Stdout => c.stdout.extend_from_slice(&bytes),
                        StreamKind::Stderr => c.stderr.extend_from_slice(&bytes),
                        StreamKind::Pty => c.pty.extend_from_slice(&bytes),
                        StreamKind::Other(other) => panic!("unknown stream {other}"),
                    }
                }
                OutputEvent::Gap {
                    from_seq,
                    to_seq,
                    lost_bytes,
                } => c.gaps.push((from_seq, to_seq, lost_bytes)),
                OutputEvent::Exit { code, signal } => c.exit = Some((code, signal)),
                OutputEvent::Error(message) => c.errors.push(message),
            }
        }
    })
    .await
    .expect("output stream finished in time");
    c
}

/// Read PTY output until `needle` shows up; returns everything read.
async fn read_until(stream: &mut OutputStream, needle: &str) -> String {
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = stream.next().await {
            if let OutputEvent::Data { bytes, .. } = event.expect("event") {
                seen.extend_from_slice(&bytes);
                if String::from_utf8_lossy(&seen).contains(needle) {
                    return;
                }
            }
        }
        panic!(
            "stream ended before {needle:?}: {:?}",
            String::from_utf8_lossy(&seen)
        );
    })
    .await
    .unwrap_or_else(|_| panic!("no {needle:?} in {:?}", String::from_utf8_lossy(&seen)));
    String::from_utf8_lossy(&seen).into_owned()
}

/// Command lines of every process visible in the sandbox (via exec, no process of ours).
async fn guest_cmdlines(sb: &Sandbox) -> String {
    let script = r#"for p in /proc/[0-9]*; do tr '\0' ' ' < "$p/cmdline" 2>/dev/null; echo; done"#;
    let out = sb.exec("sh", ["-c", script]).await.expect("exec ps");
    assert_eq!(
        out.exit_code, 0,
        "ps-style listing failed: {:?} {}",
        out.error, out.stderr
    );
    out.stdout
}

async fn live_processes(env: &common::Env) -> u64 {
    env.stats().await["live_processes"]
        .as_u64()
        .expect("live_processes in stats")
}

async fn wait_live_at_least(env: &common::Env, n: u64) {
    tokio::time::timeout(Duration::from_secs(20), async {
        while live_processes(env).await < n {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("process became live");
}

// ------------------------------------------------------------------------------ lifecycle

#[tokio::test]
async fn start_get_list_wait_and_output_fields() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let procs = sb.processes();
    let spec = sh("echo out; echo \"$GREETING\"; echo err >&2; exit 3")
        .cwd("/tmp")
        .env("GREETING", "hi there");
    let p = procs.start(spec).await.unwrap();
    let started = p.details();
    assert!(!started.process_id.is_empty());
    assert_eq!(started.process_id, p.id());
    assert_eq!(started.kind, ProcessKind::Process);
    assert_eq!(started.cmd.as_deref(), Some("sh"));
    assert_eq!(started.args[0], "-c");
    assert_eq!(started.cwd.as_deref(), Some("/tmp"));
    assert!(started.pid.unwrap_or(0) > 0, "pid: {:?}", started.pid);
    assert!(started.created_at.is_some());

    let done = p.wait(WaitScope::Tree, Some(GUARD)).await.unwrap();
    assert_eq!(done.exit_code, Some(3));
    assert_eq!(done.signal, None);
    assert!(done.leader_exited && done.tree_exited);
    assert_eq!(done.state, ProcessState::Exited);
    assert!(done.finished_at.is_some());
    assert_eq!(
        p.details().exit_code,
        Some(3),
        "wait refreshes the cached details"
    );

    let out = collect(p.connect(0).await.unwrap()).await;
    assert_eq!(out.stdout, b"out\nhi there\n");
    assert_eq!(out.stderr, b"err\n");
    assert_eq!(out.exit, Some((Some(3), None)));
    assert!(out.gaps.is_empty() && out.errors.is_empty());
    assert_eq!(out.seqs.first(), Some(&1));

    // Resuming after the first chunk replays only what follows it.
    let rest = collect(p.connect(out.seqs[0]).await.unwrap()).await;
    assert_eq!(rest.seqs, out.seqs[1..].to_vec());

    let info = p.info().await.unwrap();
    assert_eq!(info.output.oldest_seq, 1);
    assert_eq!(info.output.newest_seq, *out.seqs.last().unwrap());
    assert_eq!(info.output.bytes, 17, "out\\n + hi there\\n + err\\n");

    let again = procs.get(p.id()).await.unwrap();
    assert_eq!(again.details().exit_code, Some(3));
    assert_eq!(again.details().cwd.as_deref(), Some("/tmp"));
    let list = procs.list().await.unwrap();
    assert!(list
        .iter()
        .any(|d| d.process_id == p.id() && d.exit_code == Some(3)));

    // Unknown ids and bad input.
    let missing = procs.get("proc_doesnotexist").await.unwrap_err();
    assert!(missing.is_not_found(), "{missing:?}");
    assert!(matches!(
        procs.start(ProcessSpec::new("ls").cwd("relative")).await,
        Err(Error::InvalidInput { .. })
    ));
    assert_eq!(
        env.requests("createProcess").await,
        1,
        "bad input never reaches the server"
    );
    let no_cmd = procs.start(ProcessSpec::default()).await.unwrap_err();
    assert!(matches!(no_cmd, Error::InvalidInput { ref field, .. } if field == "cmd"));
    env.shutdown().await;
}

#[tokio::test]
async fn pty_resize_input_and_foreground() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let p = sb
        .processes()
        .start(ProcessSpec::new("sh").pty(24, 80))
        .await
        .unwrap();
    assert_eq!(p.details().kind, ProcessKind::Pty);
    let mut output = p.connect(0).await.unwrap();

    p.write_input("stty size\n").await.unwrap();
    read_until(&mut output, "24 80").await;
    p.resize(30, 100).await.unwrap();
    p.write_input("stty size\n").await.unwrap();
    read_until(&mut output, "30 100").await;
    assert!(matches!(
        p.resize(0, 10).await,
        Err(Error::InvalidInput { .. })
    ));

    p.write_input("sleep 30\n").await.unwrap();
    let foreground = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let info = p.info().await.unwrap();
            if let Some(fg) = info.foreground.filter(|fg| fg.cmd.contains("sleep")) {
                return fg;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("sleep becomes the foreground job");
    assert_eq!(foreground.args.last().map(String::as_str), Some("30"));
    // Ctrl-C semantics: SIGINT goes to the foreground group (sleep), the shell survives.
    p.signal(Signal::Int).await.unwrap();
    p.write_input("echo alive-$((6*7))\n").await.unwrap();
    read_until(&mut output, "alive-42").await;

    // A PTY has no stdin to close.
    let err = p.close_stdin().await.unwrap_err();
    assert!(matches!(err, Error::Validation(_)), "{err:?}");

    p.write_input("exit 5\n").await.unwrap();
    let rest = collect(output).await;
    assert_eq!(rest.exit, Some((Some(5), None)));
    assert!(
        rest.stdout.is_empty() && rest.stderr.is_empty(),
        "PTY output arrives as `pty`"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn signals_and_stop_take_the_whole_tree() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let procs = sb.processes();

    let p = procs
        .start(sh(
            "trap 'echo got-usr1' USR1; echo ready; while :; do sleep 0.05; done",
        ))
        .await
        .unwrap();
    let mut output = p.connect(0).await.unwrap();
    read_until(&mut output, "ready").await;
    p.signal(Signal::Usr1).await.unwrap();
    read_until(&mut output, "got-usr1").await;
    p.signal(Signal::Term).await.unwrap();
    let done = p.wait(WaitScope::Tree, Some(GUARD)).await.unwrap();
    assert_eq!(done.signal.as_deref(), Some("SIGTERM"));
    assert_eq!(done.exit_code, None);
    let rest = collect(output).await;
    assert_eq!(rest.exit, Some((None, Some("SIGTERM".to_string()))));
    let err = p.signal(Signal::Int).await.unwrap_err();
    assert!(
        matches!(err, Error::Conflict(_)),
        "signalling an exited process: {err:?}"
    );

    // A tree that ignores SIGTERM is killed after the grace period.
    let stubborn = procs
        .start(sh(
            "trap '' TERM; sleep 3011 & sleep 3012 & echo started; wait",
        ))
        .await
        .unwrap();
    let mut out = stubborn.connect(0).await.unwrap();
    read_until(&mut out, "started").await;
    let stopped = stubborn
        .stop(Some(Duration::from_millis(200)))
        .await
        .unwrap();
    assert!(stopped.tree_exited && stopped.leader_exited, "{stopped:?}");
    assert_eq!(stopped.signal.as_deref(), Some("SIGKILL"));
    assert!(stopped.state.is_finished());
    // Idempotent: stopping again returns the same final record.
    let again = stubborn.stop(None).await.unwrap();
    assert_eq!(again.signal, stopped.signal);
    assert_eq!(again.finished_at, stopped.finished_at);
    let cmdlines = guest_cmdlines(&sb).await;
    assert!(
        !cmdlines.contains("sleep 3011") && !cmdlines.contains("sleep 3012"),
        "{cmdlines}"
    );
    env.shutdown().await;
}

// ---------------------------------------------------------------------------------- input

#[tokio::test]
async fn one_mib_of_input_arrives_complete_and_in_order() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let p = sb
        .processes()
        .start(sh("tee /tmp/in.bin | sha256sum; wc -c < /tmp/in.bin"))
        .await
        .unwrap();
    let mut input = vec![0u8; 1 << 20];
    rand::thread_rng().fill_bytes(&mut input);

    let written = p.write_input(&input).await.unwrap();
    assert_eq!(written.bytes, 1 << 20);
    assert_eq!(written.chunks, (1 << 20) / INPUT_CHUNK);
    assert_eq!(
        written.input_seq,
        Some(written.chunks as i64),
        "input_seq counts the writes"
    );
    assert_eq!(
        env.requests("writeProcessInput").await,
        written.chunks as u64
    );
    p.close_stdin().await.unwrap();
    p.close_stdin().await.unwrap(); // idempotent

    let out = collect(p.connect(0).await.unwrap()).await;
    let text = String::from_utf8(out.stdout).unwrap();
    let expected = format!("{:x}  -\n{}\n", Sha256::digest(&input), input.len());
    assert_eq!(text, expected);
    assert_eq!(out.exit, Some((Some(0), None)));
    let err = p.write_input(b"late").await.unwrap_err();
    assert!(
        matches!(err, Error::Conflict(_)),
        "input after close: {err:?}"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn input_is_resent_only_when_the_server_refused_it() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let p = sb.processes().start(sh("cat")).await.unwrap();
    // 503 and 429 mean "not applied": the chunk goes again and arrives once.
    env.add_fault("POST /v1/sandboxes/*/processes/*/input status=503 count=1")
        .await;
    env.add_fault(
        "POST /v1/sandboxes/*/processes/*/input status=429 retry_after=0 count=1 after=1",
    )
    .await;
    p.write_input(b"once\n").await.unwrap();
    assert_eq!(env.requests("writeProcessInput").await, 3);
    assert_eq!(
        env.handled("writeProcessInput").await,
        1,
        "applied exactly once"
    );
    // A connection dropped after the handler ran may have delivered it: never sent again.
    env.add_fault("POST /v1/sandboxes/*/processes/*/input reset when=after count=1")
        .await;
    let err = p.write_input(b"maybe\n").await.unwrap_err();
    assert!(matches!(err, Error::Connection { .. }), "{err:?}");
    assert_eq!(
        env.requests("writeProcessInput").await,
        4,
        "an ambiguous failure is not retried"
    );
    p.close_stdin().await.unwrap();
    p.wait(WaitScope::Tree, Some(GUARD)).await.unwrap();
    let out = collect(p.connect(0).await.unwrap()).await;
    assert_eq!(out.stdout, b"once\nmaybe\n", "each chunk delivered once");
    // Other POSTs keep the transport's 429/503 retries.
    env.add_fault("POST /v1/sandboxes/*/processes/*/resize status=503 count=1")
        .await;
    let err = p.resize(10, 10).await.unwrap_err();
    assert!(
        matches!(err, Error::Validation(_) | Error::Conflict(_)),
        "pipe processes cannot be resized: {err:?}"
    );
    assert_eq!(env.requests("resizeProcess").await, 2);
    env.shutdown().await;
}

// ----------------------------------------------------------------------------------- wait

#[tokio::test]
async fn wait_loops_past_408_and_honours_the_callers_timeout() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let procs = sb.processes();

    // More 408s than the transport's own retry budget (10 in tests): `wait` must re-poll.
    env.add_fault("GET /v1/sandboxes/*/processes/*/wait status=408 count=12")
        .await;
    let p = procs.start(sh("sleep 0.2; exit 4")).await.unwrap();
    let done = p.wait(WaitScope::Leader, Some(GUARD)).await.unwrap();
    assert_eq!(done.exit_code, Some(4));
    assert_eq!(env.requests("waitProcess").await, 13);
    assert_eq!(env.handled("waitProcess").await, 1);

    // The server's real 408 (long-poll budget spent) ends in the caller's timeout.
    let slow = procs.start(sh("sleep 3021")).await.unwrap();
    let err = slow
        .wait(WaitScope::Tree, Some(Duration::from_millis(400)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    slow.stop(Some(Duration::ZERO)).await.unwrap();
    env.shutdown().await;
}

// ------------------------------------------------------------------------------- streaming

#[tokio::test]
async fn fifty_megabytes_arrive_byte_exact_through_cut_connections() {
    // The whole output stays retained: no gap is legitimate.
    let config = createos_mock::MockConfig {
        journal_bytes: 64 << 20,
        ..Default::default()
    };
    let env = common::start_with(config).await;
    let sb = sandbox(&env).await;
    let p = sb
        .processes()
        .start(sh("head -c 52428800 /dev/urandom > /tmp/r.bin && sha256sum < /tmp/r.bin >&2 && cat /tmp/r.bin"))
        .await
        .unwrap();
    env.add_fault("GET /v1/sandboxes/*/processes/*/connect cut=1048576")
        .await;

    let mut stream = p.connect(0).await.unwrap();
    let mut hasher = Sha256::new();
    let (mut stdout_len, mut stderr) = (0usize, Vec::new());
    let mut last_seq = 0;
    let mut exit = None;
    tokio::time::timeout(Duration::from_secs(600), async {
        while let Some(event) = stream.next().await {
            match event.expect("event") {
                OutputEvent::Data { seq, stream, bytes } => {
                    assert_eq!(seq, last_seq + 1, "every chunk once, in order");
                    last_seq = seq;
                    match stream {
                        StreamKind::Stdout => {
                            hasher.update(&bytes);
                            stdout_len += bytes.len();
                        }
                        _ => stderr.extend_from_slice(&bytes),
                    }
                }
                OutputEvent::Exit { code, signal } => exit = Some((code, signal)),
                other => panic!("unexpected {other:?}"),
            }
        }
    })
    .await
    .expect("50 MB in time");
    assert_eq!(
        exit,
        Some((Some(0), None)),
        "stderr: {:?}",
        String::from_utf8_lossy(&stderr)
    );
    assert_eq!(stdout_len, 52_428_800);
    let remote = String::from_utf8(stderr).unwrap();
    assert_eq!(
        remote.split_whitespace().next().unwrap(),
        format!("{:x}", hasher.finalize())
    );
    // ~67 MB of NDJSON cut every MiB: the stream must have reconnected many times.
    assert!(
        stream.connections() >= 40,
        "connections: {}",
        stream.connections()
    );
    assert!(env.requests("connectProcess").await >= 40);
    assert_eq!(stream.last_seq(), last_seq);
    env.shutdown().await;
}

#[tokio::test]
async fn a_journal_smaller_than_the_output_yields_an_exact_gap() {
    let config = createos_mock::MockConfig {
        journal_bytes: 256 * 1024,
        ..Default::default()
    };
    let env = common::start_with(config).await;
    let sb = sandbox(&env).await;
    // Deterministic output, so the test knows every byte the process wrote.
    let p = sb.processes().start(sh("seq 1 300000")).await.unwrap();
    let expected: String = (1..=300_000).map(|n| format!("{n}\n")).collect();
    let done = p.wait(WaitScope::Tree, Some(GUARD)).await.unwrap();
    assert_eq!(done.exit_code, Some(0));
    let window = p.info().await.unwrap().output;
    assert!(
        window.oldest_seq > 1,
        "the journal evicted early output: {window:?}"
    );
    assert!(window.bytes <= 256 * 1024);

    let out = collect(p.connect(0).await.unwrap()).await;
    assert_eq!(out.gaps.len(), 1, "{:?}", out.gaps);
    let (from, to, lost) = out.gaps[0];
    assert_eq!((from, to), (1, window.oldest_seq - 1));
    assert_eq!(
        out.seqs.first(),
        Some(&window.oldest_seq),
        "resumes at the oldest retained chunk"
    );
    assert_eq!(out.seqs.last(), Some(&window.newest_seq));
    // What arrived is exactly the retained tail of the real output …
    assert_eq!(out.stdout.len() as u64, window.bytes);
    assert!(expected.as_bytes().ends_with(&out.stdout));
    // … and the gap says exactly how many bytes were lost (the emulator reports byte offsets).
    let truly_lost = (expected.len() - out.stdout.len()) as u64;
    assert_eq!(window.total_bytes, Some(expected.len() as u64));
    assert_eq!(lost, Some(truly_lost), "the gap's byte count is exact");
    assert_eq!(out.exit, Some((Some(0), None)));

    // A consumer that started later (after = a retained seq) gets no gap at all.
    let tail = collect(p.connect(window.oldest_seq).await.unwrap()).await;
    assert!(tail.gaps.is_empty());
    assert_eq!(tail.seqs.first(), Some(&(window.oldest_seq + 1)));
    env.shutdown().await;
}

// ------------------------------------------------------------------------------------- run

#[tokio::test]
async fn run_collects_output_and_enforces_limits() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let procs = sb.processes();
    env.reset_stats().await;
    let out = procs
        .run(
            sh("printf hello; printf oops >&2; exit 7"),
            RunOptions::default(),
        )
        .await
        .unwrap();
    // Start and follow: the exit event answers, no `wait` round trip.
    assert_eq!(
        (
            env.requests("createProcess").await,
            env.requests("connectProcess").await
        ),
        (1, 1)
    );
    assert_eq!(env.requests("waitProcess").await, 0);
    assert_eq!(out.exit_code, Some(7));
    assert_eq!(out.signal, None);
    assert_eq!(out.stdout, b"hello");
    assert_eq!(out.stderr, b"oops");
    assert!(!out.truncated && !out.success());

    let out = procs
        .run(
            sh("head -c 100000 /dev/zero"),
            RunOptions::default().max_output_bytes(1000),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout.len(), 1000);
    assert!(out.truncated && out.success());

    // Killed by a signal: the exit event carries it.
    let out = procs
        .run(sh("kill -TERM $$"), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (out.exit_code, out.signal.as_deref()),
        (None, Some("SIGTERM"))
    );

    let err = procs
        .run(
            sh("sleep 3031"),
            RunOptions::default()
                .timeout(Duration::from_millis(300))
                .stop_grace(Duration::ZERO),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert_eq!(
        live_processes(&env).await,
        0,
        "the timed-out run was stopped before returning"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn cancelling_a_run_by_token_stops_the_remote_tree() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let token = CancellationToken::new();
    let run = {
        let procs = sb.processes();
        let options = RunOptions::default()
            .cancel(token.clone())
            .stop_grace(Duration::from_millis(200));
        tokio::spawn(async move {
            procs
                .run(sh("sleep 3041 & sleep 3042 & wait"), options)
                .await
        })
    };
    wait_live_at_least(&env, 1).await;
    assert!(
        guest_cmdlines(&sb).await.contains("sleep 3041"),
        "the tree is running"
    );
    token.cancel();
    let result = tokio::time::timeout(GUARD, run)
        .await
        .expect("run returns")
        .expect("task");
    assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
    // The stop was awaited: nothing of the tree is left by now.
    assert_eq!(live_processes(&env).await, 0);
    let cmdlines = guest_cmdlines(&sb).await;
    assert!(
        !cmdlines.contains("sleep 3041") && !cmdlines.contains("sleep 3042"),
        "{cmdlines}"
    );
    let listed = sb.processes().list().await.unwrap();
    assert!(listed.iter().all(|d| d.tree_exited), "{listed:?}");
    env.shutdown().await;
}

#[tokio::test]
async fn dropping_a_run_stops_the_remote_tree() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let run = {
        let procs = sb.processes();
        let options = RunOptions::default().stop_grace(Duration::from_millis(200));
        tokio::spawn(async move {
            procs
                .run(sh("sleep 3051 & sleep 3052 & wait"), options)
                .await
        })
    };
    wait_live_at_least(&env, 1).await;
    run.abort(); // drops the run future
    assert!(run.await.unwrap_err().is_cancelled());
    // The guard spawned the stop on the runtime; it completes shortly after.
    tokio::time::timeout(Duration::from_secs(20), async {
        while live_processes(&env).await > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the dropped run's tree was stopped");
    let cmdlines = guest_cmdlines(&sb).await;
    assert!(
        !cmdlines.contains("sleep 3051") && !cmdlines.contains("sleep 3052"),
        "{cmdlines}"
    );
    assert!(env.requests("stopProcess").await >= 1);
    env.shutdown().await;
}

/// A caller that gives up while the start request is in flight leaves nothing running: the
/// request goes on in the start's own task, which stops the process once the late answer
/// names it.
#[tokio::test]
async fn a_start_abandoned_in_flight_leaves_nothing_running() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    // the process starts at once; its answer comes 600 ms later
    env.add_fault("POST /v1/sandboxes/*/processes delay=600ms when=after count=1")
        .await;
    let started = tokio::time::timeout(
        Duration::from_millis(100),
        sb.processes().start(sh("sleep 3061")),
    )
    .await;
    assert!(started.is_err(), "the start answered inside its deadline");
    let procs = sb.processes();
    let settled = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let list = procs.list().await.expect("list");
            if list.len() == 1 && list[0].state != ProcessState::Running {
                return list;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the abandoned start's process was stopped");
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(live_processes(&env).await, 0);
    assert!(!guest_cmdlines(&sb).await.contains("sleep 3061"));
    assert_eq!(env.requests("stopProcess").await, 1);
    env.shutdown().await;
}

// ------------------------------------------------------------------------------ handles

#[tokio::test]
async fn handles_without_a_fetch_and_closed_sandboxes() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let procs = sb.processes();
    let p: Process = procs.start(sh("echo x")).await.unwrap();
    let handle = procs.handle(p.id()).unwrap();
    assert_eq!(handle.details().exit_code, None, "no request was made");
    assert_eq!(
        handle
            .wait(WaitScope::Leader, Some(GUARD))
            .await
            .unwrap()
            .exit_code,
        Some(0)
    );
    assert!(matches!(
        procs.handle("bad/id"),
        Err(Error::InvalidInput { .. })
    ));
    sb.destroy().await.unwrap();
    let err = procs.start(sh("true")).await.unwrap_err();
    assert!(
        matches!(err, Error::NotFound(_) | Error::Conflict(_)),
        "{err:?}"
    );
    env.shutdown().await;
}
