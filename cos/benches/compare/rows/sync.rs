//! Syncing a 20,000-file tree into the sandbox, first in full and then after 10 files changed:
//! our sync engine (`Syncer`, one-way) over SSH and over the files API, against `rsync -a` over
//! `ssh` to the same sshd.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Context as _};
use futures::future::BoxFuture;

use createos_sandbox::sync::{SyncMode, SyncOptions, Syncer};
use createos_sandbox::transfer::{ApiRemote, Remote, SshRemote};

use super::ssh_setup::SshRig;
use super::Row;
use crate::env::{Bench, Sizes};
use crate::interleave::{alternate, durations, Contender, Sample};
use crate::stats::{Comparison, Goal, Measure, Side};

/// Files per generated directory.
const FILES_PER_DIR: usize = 100;
/// Guest directory under which every contender syncs.
const REMOTE_BASE: &str = "/root/bench-sync";

pub fn row() -> Row {
    Row {
        id: "sync",
        title: "sync of a many-file tree",
        method,
        run: |bench| Box::pin(run(bench)),
    }
}

fn method(sizes: &Sizes) -> String {
    format!(
        "A plain directory (no Git) of {files} text files ({per} per directory, 256 B–4 KiB each), one \
         identical copy per contender, synced one way into the sandbox whose port 22 is the host's real \
         OpenSSH `sshd`.\n\n\
         - **initial**: every sample syncs the whole tree into a fresh, empty guest directory (removed \
         afterwards, untimed, after checking that the guest holds every file with its size). {iw} \
         warm-up round(s), then {ir} rounds, alternating.\n\
         - **incremental**: the guest directory already matches; before each sample (untimed) {changed} \
         files of that contender's copy are rewritten with one more line, then the sync is timed. {cw} \
         warm-up round(s), then {cr} rounds, alternating. Our engine's report must list exactly those \
         {changed} files as pushed.\n\n\
         Contenders:\n\
         - **`Syncer` over SSH**: `Syncer::new(SshRemote, …, SyncOptions::new(SyncMode::OneWay))` — scan \
         (walk + filters), the guest manifest from the guest helper, the changed files in one tar stream \
         through an SSH exec channel (thousands of files: up to 4 concurrent streams, each unpacked by its \
         own `tar`).\n\
         - **`Syncer` over the files API**: the same engine with `ApiRemote` (what `cos sync` uses): the \
         tar goes up through the files API and is unpacked with exec.\n\
         - **`rsync -a` over ssh**: `rsync -a --mkpath -e 'ssh -p <port> -i <key> …' <copy>/ \
         root@127.0.0.1:<dir>/`, \
         to the same sshd through a local port forwarded over `/tunnel/22`, spawned per sample.",
        files = sizes.sync_files,
        per = FILES_PER_DIR,
        iw = sizes.sync_warmup,
        ir = sizes.sync_initial_rounds,
        cw = sizes.sync_warmup,
        cr = sizes.sync_incremental_rounds,
        changed = sizes.sync_changed,
    )
}

async fn run(bench: &Bench) -> anyhow::Result<Vec<Comparison>> {
    let rig = Arc::new(SshRig::open(bench, &["rsync", "ssh"]).await?);
    let probe = rig.ssh.exec("command -v rsync").await?;
    ensure!(
        probe.success(),
        "rsync is not visible inside the sandbox (install it on the host: cos/benches/setup.sh)"
    );
    let scratch = tempfile::Builder::new()
        .prefix("cos-bench-sync-")
        .tempdir()?;
    let sizes = &bench.sizes;
    let labels = [
        "Syncer over SSH",
        "Syncer over files API",
        "rsync -a over ssh",
    ];
    let mut plans = Vec::new();
    for i in 0..labels.len() {
        let local = scratch.path().join(format!("copy{i}"));
        let files = sizes.sync_files;
        let generated = local.clone();
        tokio::task::spawn_blocking(move || generate(&generated, files)).await??;
        plans.push(local);
    }
    let make = |i: usize, phase: Phase| SyncContender {
        label: labels[i],
        side: match i {
            0 => Way::Ours(Arc::new(SshRemote::new(rig.ssh.clone()))),
            1 => Way::Ours(Arc::new(ApiRemote::new(bench.sandbox.clone()))),
            _ => Way::Rsync(Arc::clone(&rig)),
        },
        local: plans[i].clone(),
        state: scratch.path().join(format!("state{i}")),
        home: scratch.path().join("home"),
        remote: format!("{REMOTE_BASE}/c{i}"),
        phase,
        round: 0,
        changed: sizes.sync_changed,
        files: sizes.sync_files,
    };

    let mut contenders: Vec<Box<dyn Contender>> = (0..labels.len())
        .map(|i| Box::new(make(i, Phase::Initial)) as Box<dyn Contender>)
        .collect();
    let initial = alternate(
        &mut contenders,
        sizes.sync_warmup,
        sizes.sync_initial_rounds,
    )
    .await?;
    drop(contenders);
    let mut contenders: Vec<Box<dyn Contender>> = Vec::new();
    for (i, label) in labels.iter().enumerate() {
        let contender = make(i, Phase::Incremental);
        // bring the guest directory in line once (untimed), so samples only move changes
        contender
            .sync(&contender.target())
            .await
            .with_context(|| format!("{label}: first full sync"))?;
        contenders.push(Box::new(contender));
    }
    let incremental = alternate(
        &mut contenders,
        sizes.sync_warmup,
        sizes.sync_incremental_rounds,
    )
    .await?;
    drop(contenders);
    let _ = rig.ssh.exec(&format!("rm -rf {REMOTE_BASE}")).await;
    if let Ok(rig) = Arc::try_unwrap(rig) {
        rig.close().await?;
    }

    let files = sizes.sync_files;
    let measure = |s: &[Sample]| Measure::latency(&durations(s)).context("no sync samples");
    let mut out = Vec::new();
    for (what, samples) in [
        (format!("initial sync of {files} files"), &initial),
        (
            format!("sync after {} changed files", sizes.sync_changed),
            &incremental,
        ),
    ] {
        for ours in [0, 1] {
            out.push(Comparison {
                what: what.clone(),
                ours: Side {
                    label: labels[ours].to_string(),
                    measure: measure(&samples[ours])?,
                },
                baseline: Side {
                    label: labels[2].to_string(),
                    measure: measure(&samples[2])?,
                },
                goal: Goal::Faster,
            });
        }
    }
    Ok(out)
}

/// Deterministic text of `len` bytes.
fn body(index: usize, len: usize) -> Vec<u8> {
    let line = format!("file {index:06}: the quick brown fox jumps over the lazy dog\n");
    line.as_bytes().iter().copied().cycle().take(len).collect()
}

/// Size of generated file `i` (256 B–4 KiB).
fn file_len(i: usize) -> usize {
    256 + (i * 7919) % 3841
}

fn generate(root: &Path, files: usize) -> anyhow::Result<()> {
    for i in 0..files {
        let dir = root.join(format!("src/d{:03}", i / FILES_PER_DIR));
        if i % FILES_PER_DIR == 0 {
            std::fs::create_dir_all(&dir)?;
        }
        std::fs::write(
            dir.join(format!("f{:03}.txt", i % FILES_PER_DIR)),
            body(i, file_len(i)),
        )?;
    }
    Ok(())
}

fn file_path(root: &Path, i: usize) -> PathBuf {
    root.join(format!(
        "src/d{:03}/f{:03}.txt",
        i / FILES_PER_DIR,
        i % FILES_PER_DIR
    ))
}

enum Way {
    Ours(Arc<dyn Remote>),
    Rsync(Arc<SshRig>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Initial,
    Incremental,
}

struct SyncContender {
    label: &'static str,
    side: Way,
    local: PathBuf,
    state: PathBuf,
    home: PathBuf,
    /// Guest directory of this contender.
    remote: String,
    phase: Phase,
    round: usize,
    changed: usize,
    files: usize,
}

impl SyncContender {
    /// The guest directory of the current sample.
    fn target(&self) -> String {
        match self.phase {
            Phase::Initial => format!("{}/initial-{}", self.remote, self.round),
            Phase::Incremental => format!("{}/incremental", self.remote),
        }
    }

    /// One sync of the local copy into `target`; returns the files our engine pushed (None
    /// for rsync).
    async fn sync(&self, target: &str) -> anyhow::Result<Option<usize>> {
        match &self.side {
            Way::Ours(remote) => {
                let options = SyncOptions::new(SyncMode::OneWay)
                    .state_dir(&self.state)
                    .home_dir(&self.home);
                let syncer = Syncer::new(Arc::clone(remote), &self.local, target, options)?;
                let report = syncer.run().await?;
                Ok(Some(report.pushed.len()))
            }
            Way::Rsync(rig) => {
                let out = tokio::process::Command::new("rsync")
                    .arg("-a")
                    // the guest directory's parents may not exist yet (our engine creates them too)
                    .arg("--mkpath")
                    .arg("-e")
                    .arg(rig.rsh())
                    .arg(format!("{}/", self.local.display()))
                    .arg(rig.remote(&format!("{target}/")))
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .kill_on_drop(true)
                    .output()
                    .await
                    .context("spawning rsync")?;
                ensure!(
                    out.status.success(),
                    "rsync failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                Ok(None)
            }
        }
    }

    /// Rewrite `changed` files (a different set each round).
    fn touch_files(&self) -> anyhow::Result<()> {
        let stride = (self.files / self.changed.max(1)).max(1);
        for k in 0..self.changed {
            let i = (k * stride + self.round) % self.files;
            let path = file_path(&self.local, i);
            let mut content = std::fs::read(&path)?;
            content
                .extend_from_slice(format!("round {} changed this file\n", self.round).as_bytes());
            std::fs::write(&path, content)?;
        }
        Ok(())
    }

    /// Untimed check that the guest tree holds every file with its size: the file count and
    /// the byte total must equal the local copy's.
    async fn verify_remote(&self, target: &str) -> anyhow::Result<()> {
        let script = format!(
            "find {} -type f -printf '%s\\n' | awk '{{n++; s+=$1}} END {{print n+0, s+0}}'",
            createos_sandbox::ssh::shell_quote(target)
        );
        let out = match &self.side {
            Way::Ours(remote) => remote.run_sh(&script, Vec::new(), Vec::new()).await?.stdout,
            Way::Rsync(rig) => rig.ssh.exec(&script).await?.stdout_text().into_owned(),
        };
        let bytes: u64 = (0..self.files).map(|i| file_len(i) as u64).sum();
        let expected = format!("{} {bytes}", self.files);
        ensure!(
            out.trim() == expected,
            "{}: the guest holds {:?} (files bytes), expected {expected}",
            self.label,
            out.trim()
        );
        Ok(())
    }

    async fn remove_remote(&self, target: &str) -> anyhow::Result<()> {
        let script = format!("rm -rf {}", createos_sandbox::ssh::shell_quote(target));
        let done = match &self.side {
            Way::Ours(remote) => remote
                .run_sh(&script, Vec::new(), Vec::new())
                .await?
                .success(),
            Way::Rsync(rig) => rig.ssh.exec(&script).await?.success(),
        };
        ensure!(done, "removing {target} failed");
        Ok(())
    }
}

impl Contender for SyncContender {
    fn label(&self) -> String {
        self.label.to_string()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move {
            self.round += 1;
            if self.phase == Phase::Incremental {
                self.touch_files()?;
            }
            let target = self.target();
            let started = Instant::now();
            let pushed = self.sync(&target).await?;
            let elapsed = started.elapsed();
            match (self.phase, pushed) {
                (Phase::Initial, Some(n)) => ensure!(
                    n == self.files,
                    "{}: pushed {n} of {} files",
                    self.label,
                    self.files
                ),
                (Phase::Incremental, Some(n)) => {
                    ensure!(
                        n == self.changed,
                        "{}: pushed {n} files, {} changed",
                        self.label,
                        self.changed
                    )
                }
                (_, None) => {}
            }
            if self.phase == Phase::Initial {
                self.verify_remote(&target).await?;
                self.remove_remote(&target).await?;
            }
            Ok(Sample::time(elapsed))
        })
    }
}
