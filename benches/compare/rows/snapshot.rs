//! Snapshot build of a generated Git project: `Snapshot::scan` + `write_tar` against
//! `git ls-files -z | tar --null -T - -cf -`, both archives drained from a pipe.

use std::io::{BufWriter, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Context as _};
use futures::future::BoxFuture;

use createos_sandbox::snapshot::{Snapshot, SnapshotOptions};

use super::Row;
use crate::env::{Bench, Sizes};
use crate::interleave::{alternate, durations, Contender, Sample};
use crate::stats::{Comparison, Goal, Measure, Side};

/// Files per generated directory.
const FILES_PER_DIR: usize = 100;
/// Buffer between the archive writer and the pipe: the chunk size the crate's own upload
/// stream (`Snapshot::tar_stream`) hands out.
const WRITE_BUFFER: usize = 64 * 1024;

pub fn row() -> Row {
    Row { id: "snapshot", title: "snapshot build", method, run: |bench| Box::pin(run(bench)) }
}

fn method(sizes: &Sizes) -> String {
    format!(
        "A temporary Git repository with {files} committed text files ({per} per directory, 256 B–4 KiB \
         each, about {mib} MiB in all) plus a `.gitignore` and a few ignored build files; the page cache \
         is warm after the first round. {warm} warm-up round(s), then {n} rounds, alternating.\n\n\
         - **`Snapshot::scan` + `write_tar`**: the whole pipeline `cos` uses before an upload — `git \
         ls-files` (tracked + untracked-unignored), name checks, excludes and credential deny-list, an \
         `lstat` per file, `git check-ignore`, then the tar written through a {buf} KiB buffer (the chunk \
         size of the crate's upload stream) into a pipe that a thread drains.\n\
         - **`git ls-files -z | tar --null -T - -cf -`** via `sh -c` in the repository, its stdout drained \
         from a pipe the same way.\n\n\
         Both archives go into a pipe rather than straight to `/dev/null`: GNU tar notices when its \
         archive *is* `/dev/null` and then skips reading the files, which would time a different job. \
         Every round checks the snapshot's file count and that its archive has exactly the size \
         computed from the headers, and that tar succeeded with a non-empty archive.",
        files = sizes.snapshot_files,
        per = FILES_PER_DIR,
        mib = (sizes.snapshot_files as u64 * 2200) / (1024 * 1024),
        warm = sizes.snapshot_warmup,
        n = sizes.snapshot_rounds,
        buf = WRITE_BUFFER / 1024,
    )
}

async fn run(bench: &Bench) -> anyhow::Result<Vec<Comparison>> {
    let files = bench.sizes.snapshot_files;
    let repo = tokio::task::spawn_blocking(move || generate(files)).await??;
    let dir: Arc<Path> = Arc::from(repo.path());
    let labels = ["Snapshot::scan + write_tar", "git ls-files | tar"];
    // the repository holds the generated files plus its .gitignore
    let expected = files + 1;
    let mut contenders: Vec<Box<dyn Contender>> = vec![
        Box::new(Ours { dir: Arc::clone(&dir), expected, label: labels[0] }),
        Box::new(GitTar { dir: Arc::clone(&dir), label: labels[1] }),
    ];
    let samples = alternate(&mut contenders, bench.sizes.snapshot_warmup, bench.sizes.snapshot_rounds).await?;
    drop(repo);
    let measure = |i: usize| Measure::latency(&durations(&samples[i])).context("no snapshot samples");
    Ok(vec![Comparison {
        what: format!("snapshot of {files} files → tar"),
        ours: Side { label: labels[0].to_string(), measure: measure(0)? },
        baseline: Side { label: labels[1].to_string(), measure: measure(1)? },
        goal: Goal::Faster,
    }])
}

/// Deterministic file body of `len` bytes (text lines; content only matters for its size).
fn body(index: usize, len: usize) -> Vec<u8> {
    let line = format!("file {index:06}: the quick brown fox jumps over the lazy dog\n");
    line.as_bytes().iter().copied().cycle().take(len).collect()
}

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new("git")
        .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("running git {}", args.join(" ")))?;
    ensure!(status.success(), "git {} failed: {status}", args.join(" "));
    Ok(())
}

/// A committed repository of `files` files under `dNNN/` directories.
fn generate(files: usize) -> anyhow::Result<tempfile::TempDir> {
    let repo = tempfile::Builder::new().prefix("cos-bench-snapshot-").tempdir()?;
    let root = repo.path();
    for i in 0..files {
        let dir = root.join(format!("src/d{:03}", i / FILES_PER_DIR));
        if i % FILES_PER_DIR == 0 {
            std::fs::create_dir_all(&dir)?;
        }
        // 256 B … 4 KiB, spread deterministically
        let len = 256 + (i * 7919) % 3841;
        std::fs::write(dir.join(format!("f{:03}.txt", i % FILES_PER_DIR)), body(i, len))?;
    }
    std::fs::write(root.join(".gitignore"), "/build/\n*.log\n")?;
    std::fs::create_dir_all(root.join("build"))?;
    for i in 0..10 {
        std::fs::write(root.join(format!("build/out{i}.o")), body(i, 4096))?;
        std::fs::write(root.join(format!("run{i}.log")), body(i, 512))?;
    }
    git(root, &["init", "-q"])?;
    git(root, &["add", "-A"])?;
    git(root, &["commit", "-q", "-m", "generated tree"])?;
    Ok(repo)
}

/// Read `reader` to the end on a new thread; the join handle gives the byte count.
fn drain(mut reader: impl Read + Send + 'static) -> std::thread::JoinHandle<std::io::Result<u64>> {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        loop {
            match reader.read(&mut buf)? {
                0 => return Ok(total),
                n => total += n as u64,
            }
        }
    })
}

fn join_drain(handle: std::thread::JoinHandle<std::io::Result<u64>>) -> anyhow::Result<u64> {
    Ok(handle.join().map_err(|_| anyhow::anyhow!("the drain thread panicked"))??)
}

struct Ours {
    dir: Arc<Path>,
    expected: usize,
    label: &'static str,
}

impl Contender for Ours {
    fn label(&self) -> String {
        self.label.to_string()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        let (dir, expected) = (PathBuf::from(&*self.dir), self.expected);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let started = Instant::now();
                let snapshot = Snapshot::scan(&dir, &SnapshotOptions::new())?;
                let (reader, writer) = std::io::pipe()?;
                let drained = drain(reader);
                snapshot.write_tar(BufWriter::with_capacity(WRITE_BUFFER, writer))?;
                let bytes = join_drain(drained)?;
                let elapsed = started.elapsed();
                ensure!(
                    snapshot.files().len() == expected,
                    "snapshot holds {} files, expected {expected}",
                    snapshot.files().len()
                );
                ensure!(bytes == snapshot.exact_size(), "archive of {bytes} bytes, expected {}", snapshot.exact_size());
                Ok(Sample { elapsed, bytes })
            })
            .await?
        })
    }
}

struct GitTar {
    dir: Arc<Path>,
    label: &'static str,
}

impl Contender for GitTar {
    fn label(&self) -> String {
        self.label.to_string()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        let dir = PathBuf::from(&*self.dir);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let started = Instant::now();
                let mut child = Command::new("sh")
                    .args(["-c", "git ls-files -z | tar --null -T - -cf -"])
                    .current_dir(&dir)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .spawn()
                    .context("spawning git | tar")?;
                let drained = drain(child.stdout.take().context("tar's stdout")?);
                let bytes = join_drain(drained)?;
                let status = child.wait()?;
                let elapsed = started.elapsed();
                ensure!(status.success(), "git ls-files | tar failed: {status}");
                ensure!(bytes > 0, "tar wrote nothing");
                Ok(Sample { elapsed, bytes })
            })
            .await?
        })
    }
}
