//! The resident helper (`guest::Resident`) against the emulator: one long-lived helper per
//! sandbox serves file operations and commands; cancellation and deadlines stop a command's
//! whole tree; a helper that dies is replaced; a hostile or broken helper fails calls with an
//! error instead of hanging them.

mod common;

use std::time::Duration;

use createos_sandbox::guest::{
    CommandSpec, Guest, GuestChannel, GuestErrorCode, GuestOptions, PathMap, ReadOptions, Resident,
    RunControl,
};
use createos_sandbox::{CreateSandbox, Error, Sandbox};
use tokio_util::sync::CancellationToken;

const ROOT: &str = "/root/work";

async fn sandbox(env: &common::Env) -> Sandbox {
    let sb = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb"))
        .await
        .expect("create");
    sb.exec("mkdir", ["-p", ROOT]).await.expect("mkdir");
    sb
}

fn guest(sb: &Sandbox, options: GuestOptions) -> Guest {
    Guest::new(
        sb.clone(),
        PathMap::new(ROOT).unwrap(),
        options.channel(GuestChannel::Resident),
    )
}

/// Processes of `sb` whose command line holds `marker`, as the sandbox sees them.
async fn running(sb: &Sandbox, marker: &str) -> usize {
    let out = sb.exec("pgrep", ["-f", marker]).await.expect("pgrep");
    out.stdout.lines().filter(|l| !l.trim().is_empty()).count()
}

async fn wait_running(sb: &Sandbox, marker: &str, done: impl Fn(usize) -> bool) -> usize {
    let mut n = 0;
    for _ in 0..400 {
        n = running(sb, marker).await;
        if done(n) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_helper_serves_files_and_commands() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let g = guest(&sb, GuestOptions::new());
    g.write("notes.txt", "hello\n").await.unwrap();
    let resident = Resident::of(&sb);
    let helper = resident.process_id().await.expect("a helper runs");
    let out = resident
        .run(
            CommandSpec::shell("cat notes.txt; echo err >&2; pwd; exit 4", ROOT),
            RunControl::default(),
        )
        .await
        .unwrap();
    assert_eq!((out.exit_code, out.signal.as_deref()), (Some(4), None));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("hello\n{ROOT}\n")
    );
    assert_eq!(out.stderr, b"err\n");
    assert_eq!(out.total_bytes, 6 + ROOT.len() as u64 + 1 + 4);
    // Commands and file operations run side by side through the same helper.
    let (slow, read) = tokio::join!(
        resident.run(
            CommandSpec::shell("sleep 0.5; echo late", ROOT),
            RunControl::default()
        ),
        g.read("notes.txt", ReadOptions::default()),
    );
    assert_eq!(slow.unwrap().stdout, b"late\n");
    assert_eq!(read.unwrap().content(), "1: hello");
    assert_eq!(
        resident.process_id().await,
        Some(helper.clone()),
        "still the same helper"
    );
    // Output past the bound is counted, not kept.
    let big = resident
        .run(
            CommandSpec::shell("head -c 300000 /dev/zero", ROOT).max_bytes(1000),
            RunControl::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        (big.stdout.len(), big.truncated, big.total_bytes),
        (1000, true, 300_000)
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancellation_and_deadlines_stop_the_whole_tree() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let resident = Resident::of(&sb);
    let marker = "sleep 303.125";
    let token = CancellationToken::new();
    let control = RunControl {
        cancel: Some(token.clone()),
        grace: Some(Duration::from_millis(200)),
        ..Default::default()
    };
    let script = format!("setsid {marker} & {marker} & {marker}; wait");
    let run = tokio::spawn({
        let resident = resident.clone();
        async move {
            resident
                .run(CommandSpec::shell(&script, ROOT), control)
                .await
        }
    });
    assert!(
        wait_running(&sb, marker, |n| n >= 3).await >= 3,
        "the command never started"
    );
    token.cancel();
    let err = run.await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Cancelled), "{err:?}");
    assert_eq!(
        wait_running(&sb, marker, |n| n == 0).await,
        0,
        "the tree survived the cancellation"
    );

    let marker = "sleep 304.125";
    let control = RunControl {
        timeout: Some(Duration::from_millis(500)),
        ..Default::default()
    };
    let err = resident
        .run(
            CommandSpec::shell(&format!("{marker} & {marker}"), ROOT),
            control,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert_eq!(
        wait_running(&sb, marker, |n| n == 0).await,
        0,
        "the tree survived the deadline"
    );

    // A dropped run is stopped too.
    let marker = "sleep 305.125";
    let dropped = tokio::time::timeout(
        Duration::from_millis(300),
        resident.run(CommandSpec::shell(marker, ROOT), RunControl::default()),
    )
    .await;
    assert!(dropped.is_err());
    assert_eq!(
        wait_running(&sb, marker, |n| n == 0).await,
        0,
        "a dropped run kept running"
    );
    // The helper survived all of it.
    let ok = resident
        .run(CommandSpec::shell("echo fine", ROOT), RunControl::default())
        .await
        .unwrap();
    assert_eq!(ok.stdout, b"fine\n");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_file_call_past_its_deadline_spares_the_commands_still_running() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let resident = Resident::of(&sb);
    resident
        .run(CommandSpec::shell("true", ROOT), RunControl::default())
        .await
        .unwrap();
    let first = resident.process_id().await.expect("a helper runs");
    let running = tokio::spawn({
        let resident = resident.clone();
        async move {
            resident
                .run(
                    CommandSpec::shell("sleep 1; echo survived", ROOT),
                    RunControl::default(),
                )
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let hurried = guest(&sb, GuestOptions::new().timeout(Duration::from_millis(1)));
    // Large enough that sending it alone outlasts the 1 ms deadline, however fast the machine.
    let err = hurried
        .write("late.txt", "x".repeat(256 * 1024).as_str())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert_eq!(running.await.unwrap().unwrap().stdout, b"survived\n");
    // Later calls go to a new helper; the retired one ends once its command is done.
    guest(&sb, GuestOptions::new())
        .write("next.txt", "y")
        .await
        .unwrap();
    assert_ne!(resident.process_id().await, Some(first.clone()));
    let old = sb.processes().handle(&first).unwrap();
    let mut state = String::new();
    for _ in 0..200 {
        state = old.info().await.unwrap().state.as_str().to_string();
        if state == "exited" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(state, "exited", "the retired helper kept running");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_helper_that_died_is_replaced() {
    let env = common::start().await;
    let sb = sandbox(&env).await;
    let resident = Resident::of(&sb);
    resident
        .run(CommandSpec::shell("true", ROOT), RunControl::default())
        .await
        .unwrap();
    let first = resident.process_id().await.expect("a helper runs");
    // Someone else stops it (another client, a restart of the guest's services, …).
    sb.processes()
        .handle(&first)
        .unwrap()
        .stop(Some(Duration::ZERO))
        .await
        .unwrap();
    let again = resident
        .run(CommandSpec::shell("echo back", ROOT), RunControl::default())
        .await
        .unwrap();
    assert_eq!(again.stdout, b"back\n");
    let second = resident.process_id().await.expect("a new helper runs");
    assert_ne!(first, second);
    // Closing it ends it; the next call starts another.
    resident.shutdown().await;
    let g = guest(&sb, GuestOptions::new());
    g.write("x.txt", "x").await.unwrap();
    assert_ne!(resident.process_id().await, Some(second));
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn broken_helpers_fail_calls_instead_of_hanging_them() {
    let env = common::start().await;
    // Each case in a sandbox of its own: the pool keeps one helper per sandbox.
    let silent = sandbox(&env).await;
    let g = guest(&silent, GuestOptions::new().timeout(Duration::from_secs(2)).helper_source(
        "import sys, time\ndef main(argv=None):\n    sys.stdout.write('no ready line\\n'); sys.stdout.flush(); time.sleep(300)\n",
    ));
    let err = g.stat("/").await.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");

    let liar = sandbox(&env).await;
    let g = guest(&liar, GuestOptions::new().timeout(Duration::from_secs(30)).helper_source(concat!(
        "import sys, json\n",
        "def main(argv=None):\n",
        "    print(json.dumps({'v': 1, 'ready': {}}), flush=True)\n",
        "    line = sys.stdin.readline()\n",
        "    print('garbage', flush=True)\n",
        "    print(json.dumps({'v': 1, 'id': 123456, 'result': 'for someone else'}), flush=True)\n",
        "    print(json.dumps({'v': 9, 'id': json.loads(line)['id'], 'result': 'wrong version'}), flush=True)\n",
        "    sys.stderr.write('bailing out'); return 3\n",
    )));
    let err = g.stat("/").await.unwrap_err();
    assert_eq!(
        err.guest_code(),
        Some(&GuestErrorCode::HelperFailed),
        "{err:?}"
    );
    assert!(err.to_string().contains("exited with status 3"), "{err}");

    let no_python = sandbox(&env).await;
    let g = guest(
        &no_python,
        GuestOptions::new().python("python3-not-installed"),
    );
    let err = g.stat("/").await.unwrap_err();
    assert_eq!(
        err.guest_code(),
        Some(&GuestErrorCode::PythonMissing),
        "{err:?}"
    );
    env.shutdown().await;
}
