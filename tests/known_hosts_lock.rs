//! Pinning SSH host keys from many processes (and threads) at once loses no pin: every
//! read-modify-write of the pin file holds the cross-process lock on `<file>.lock`.
//!
//! The writers are child processes: this test binary run again with `--exact pinning_child`
//! and the pin file named in `COS_TEST_KNOWN_HOSTS_CHILD`. They start together (each waits for a
//! start file), so their rewrites overlap; without the lock, one rewrite drops another's pin.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use createos_sandbox::ssh::{HostKeyStatus, KnownHosts};
use russh::keys::ssh_key::private::Ed25519Keypair;
use russh::keys::{PrivateKey, PublicKey};

/// `<pin file>|<writer index>|<start file>` for a child.
const CHILD_ENV: &str = "COS_TEST_KNOWN_HOSTS_CHILD";
const PROCESSES: usize = 8;
const THREADS: usize = 2;
const PINS_PER_THREAD: usize = 20;

fn key(writer: usize, thread: usize, pin: usize) -> PublicKey {
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&(writer as u64).to_le_bytes());
    seed[8..16].copy_from_slice(&(thread as u64).to_le_bytes());
    seed[16..24].copy_from_slice(&(pin as u64).to_le_bytes());
    seed[31] = 1;
    PrivateKey::from(Ed25519Keypair::from_seed(&seed))
        .public_key()
        .clone()
}

fn host(writer: usize, thread: usize, pin: usize) -> String {
    format!("sb-w{writer}-t{thread}-p{pin}")
}

/// One writer: `THREADS` threads, each with a handle of its own, pin their hosts.
fn pin_all(file: &Path, writer: usize) {
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            scope.spawn(move || {
                let known = KnownHosts::new(file);
                for pin in 0..PINS_PER_THREAD {
                    let status = known
                        .verify_or_pin(&host(writer, thread, pin), &key(writer, thread, pin))
                        .unwrap();
                    assert_eq!(status, HostKeyStatus::PinnedNow);
                }
            });
        }
    });
}

/// Every pin of `writers` is in `file`, with its own key, once.
fn assert_all_pinned(file: &Path, writers: usize) {
    let known = KnownHosts::new(file);
    let mut missing = Vec::new();
    for writer in 0..writers {
        for thread in 0..THREADS {
            for pin in 0..PINS_PER_THREAD {
                match known.lookup(&host(writer, thread, pin)).unwrap() {
                    Some(found) => {
                        assert_eq!(found.key_data(), key(writer, thread, pin).key_data())
                    }
                    None => missing.push(host(writer, thread, pin)),
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} pin(s) lost, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    let lines = std::fs::read_to_string(file).unwrap().lines().count();
    assert_eq!(
        lines,
        writers * THREADS * PINS_PER_THREAD,
        "a pin was written twice"
    );
}

/// A writer. Spawned by [`concurrent_processes_lose_no_pin`] it pins into the shared file once
/// the start file appears; run on its own it pins into a file of its own and checks it.
#[test]
fn pinning_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("known_hosts");
        pin_all(&file, 0);
        assert_all_pinned(&file, 1);
        return;
    };
    let mut parts = spec.split('|');
    let (file, writer, start) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let writer: usize = writer.parse().unwrap();
    while !Path::new(start).exists() {
        std::thread::sleep(Duration::from_millis(1));
    }
    pin_all(Path::new(file), writer);
}

#[test]
fn concurrent_processes_lose_no_pin() {
    let dir = tempfile::tempdir().unwrap();
    let file: PathBuf = dir.path().join("cfg/known_hosts");
    let start = dir.path().join("start");
    let me = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..PROCESSES)
        .map(|writer| {
            Command::new(&me)
                .args(["--exact", "pinning_child", "--test-threads", "1", "--quiet"])
                .env(
                    CHILD_ENV,
                    format!("{}|{writer}|{}", file.display(), start.display()),
                )
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    std::fs::write(&start, "go").unwrap();
    for mut child in children {
        assert!(child.wait().unwrap().success(), "a writer failed");
    }
    assert_all_pinned(&file, PROCESSES);
}
