//! Snapshot build of a generated Git project: `Snapshot::scan` + `write_tar` against
//! `git ls-files -z | tar --null -T - -cf -`, and the gzipped archive against `… -czf -`; every
//! archive drained from a pipe.

use std::io::{BufWriter, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Context as _};
use futures::future::BoxFuture;

use createos_sandbox::snapshot::{Compression, Snapshot, SnapshotOptions};

use super::Row;
use crate::env::{Bench, Sizes};
use crate::interleave::{alternate, durations, Contender, Sample};
use crate::stats::{Comparison, Goal, Measure, Side};

/// Files per generated directory.
const FILES_PER_DIR: usize = 100;
/// Buffer between the archive writer and the pipe: the chunk size the crate's own upload
/// stream (`Snapshot::tar_stream`) hands out.
const WRITE_BUFFER: usize = 64 * 1024;
/// Gzip level of the compressed pair: GNU tar's `-z` runs `gzip` at its default, 6.
const GZIP_LEVEL: u32 = 6;

pub fn row() -> Row {
    Row {
        id: "snapshot",
        title: "snapshot build",
        method,
        run: |bench| Box::pin(run(bench)),
    }
}

fn method(sizes: &Sizes) -> String {
    format!(
        "A temporary Git repository with {files} committed text files ({per} per directory, 256 B–4 KiB \
         each, about {mib} MiB in all) plus a `.gitignore` and a few ignored build files; the page cache \
         is warm after the first round. {warm} warm-up round(s), then {n} rounds, alternating.\n\n\
         - **`Snapshot::scan` + `write_tar`**: the whole pipeline `cos` uses before an upload — two \
         `git ls-files` runs at once (tracked files with their modes plus untracked-unignored ones; and \
         what the ignore rules match, untracked and tracked-but-ignored-now), name checks, excludes and \
         credential deny-list, one `lstat` per file (spread over the cores), then the tar written \
         through a {buf} KiB buffer (the chunk size of the crate's upload stream) into a pipe that a \
         thread drains. Reader threads (one per core but one when a sample of the files is in the page \
         cache, as here after the first round; more when reads would wait for the disk) open each file once (`O_NOFOLLOW`), check it through its handle \
         against the scan (same inode, same size), and lay out whole batches of entries (headers, \
         contents, padding) that the writer copies out in order.\n\
         - **`git ls-files -z | tar --null -T - -cf -`** via `sh -c` in the repository, its stdout drained \
         from a pipe the same way.\n\
         - **`Snapshot::scan` + `write_archive(gzip {level})`** against **`git ls-files -z | tar --null -T - \
         -czf -`** (GNU tar pipes through `gzip -{level}`): the same pair with compression. Ours deflates \
         128 KiB blocks on one worker thread per core (each block primed with the 32 KiB before it, \
         one ordinary gzip member, byte-for-byte reproducible) while the tar thread reads files; \
         deflate is zlib-rs.\n\n\
         Every archive goes into a pipe rather than straight to `/dev/null`: GNU tar notices when its \
         archive *is* `/dev/null` and then skips reading the files, which would time a different job. \
         Every round checks the snapshot's file count and that its plain archive has exactly the size \
         computed from the headers, that the gzip outputs are not empty (tests/snapshot.rs checks that \
         they decompress to the same tar), and that tar succeeded.",
        files = sizes.snapshot_files,
        per = FILES_PER_DIR,
        mib = (sizes.snapshot_files as u64 * 2200) / (1024 * 1024),
        warm = sizes.snapshot_warmup,
        n = sizes.snapshot_rounds,
        buf = WRITE_BUFFER / 1024,
        level = GZIP_LEVEL,
    )
}

async fn run(bench: &Bench) -> anyhow::Result<Vec<Comparison>> {
    let files = bench.sizes.snapshot_files;
    let repo = tokio::task::spawn_blocking(move || generate(files)).await??;
    let dir: Arc<Path> = Arc::from(repo.path());
    let labels = [
        "Snapshot::scan + write_tar",
        "git ls-files | tar -c",
        "Snapshot::scan + write_archive(gzip 6)",
        "git ls-files | tar -cz",
    ];
    // the repository holds the generated files plus its .gitignore
    let expected = files + 1;
    let mut contenders: Vec<Box<dyn Contender>> = vec![
        Box::new(Ours {
            dir: Arc::clone(&dir),
            expected,
            label: labels[0],
            compression: Compression::None,
        }),
        Box::new(GitTar {
            dir: Arc::clone(&dir),
            label: labels[1],
            flags: "-cf",
        }),
        Box::new(Ours {
            dir: Arc::clone(&dir),
            expected,
            label: labels[2],
            compression: Compression::Gzip { level: GZIP_LEVEL },
        }),
        Box::new(GitTar {
            dir: Arc::clone(&dir),
            label: labels[3],
            flags: "-czf",
        }),
    ];
    let samples = alternate(
        &mut contenders,
        bench.sizes.snapshot_warmup,
        bench.sizes.snapshot_rounds,
    )
    .await?;
    drop(repo);
    let measure =
        |i: usize| Measure::latency(&durations(&samples[i])).context("no snapshot samples");
    let pair = |what: String, ours: usize, theirs: usize| -> anyhow::Result<Comparison> {
        Ok(Comparison {
            what,
            ours: Side {
                label: labels[ours].to_string(),
                measure: measure(ours)?,
            },
            baseline: Side {
                label: labels[theirs].to_string(),
                measure: measure(theirs)?,
            },
            goal: Goal::Faster,
        })
    };
    Ok(vec![
        pair(format!("snapshot of {files} files → tar"), 0, 1)?,
        pair(format!("snapshot of {files} files → tar.gz"), 2, 3)?,
    ])
}

/// Deterministic file body of `len` bytes (text lines; content only matters for its size).
fn body(index: usize, len: usize) -> Vec<u8> {
    let line = format!("file {index:06}: the quick brown fox jumps over the lazy dog\n");
    line.as_bytes().iter().copied().cycle().take(len).collect()
}

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@localhost",
            "-c",
            "commit.gpgsign=false",
        ])
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
    let repo = tempfile::Builder::new()
        .prefix("cos-bench-snapshot-")
        .tempdir()?;
    let root = repo.path();
    for i in 0..files {
        let dir = root.join(format!("src/d{:03}", i / FILES_PER_DIR));
        if i % FILES_PER_DIR == 0 {
            std::fs::create_dir_all(&dir)?;
        }
        // 256 B … 4 KiB, spread deterministically
        let len = 256 + (i * 7919) % 3841;
        std::fs::write(
            dir.join(format!("f{:03}.txt", i % FILES_PER_DIR)),
            body(i, len),
        )?;
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
    Ok(handle
        .join()
        .map_err(|_| anyhow::anyhow!("the drain thread panicked"))??)
}

struct Ours {
    dir: Arc<Path>,
    expected: usize,
    label: &'static str,
    compression: Compression,
}

impl Contender for Ours {
    fn label(&self) -> String {
        self.label.to_string()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        let (dir, expected, compression) =
            (PathBuf::from(&*self.dir), self.expected, self.compression);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let started = Instant::now();
                let snapshot = Snapshot::scan(&dir, &SnapshotOptions::new())?;
                let (reader, writer) = std::io::pipe()?;
                let drained = drain(reader);
                snapshot
                    .write_archive(BufWriter::with_capacity(WRITE_BUFFER, writer), compression)?;
                let bytes = join_drain(drained)?;
                let elapsed = started.elapsed();
                ensure!(
                    snapshot.files().len() == expected,
                    "snapshot holds {} files, expected {expected}",
                    snapshot.files().len()
                );
                if compression == Compression::None {
                    ensure!(
                        bytes == snapshot.exact_size(),
                        "archive of {bytes} bytes, expected {}",
                        snapshot.exact_size()
                    );
                } else {
                    ensure!(bytes > 18, "a gzip stream of {bytes} bytes");
                }
                Ok(Sample { elapsed, bytes })
            })
            .await?
        })
    }
}

struct GitTar {
    dir: Arc<Path>,
    label: &'static str,
    /// `-cf` or `-czf`.
    flags: &'static str,
}

impl Contender for GitTar {
    fn label(&self) -> String {
        self.label.to_string()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        let dir = PathBuf::from(&*self.dir);
        let script = format!("git ls-files -z | tar --null -T - {} -", self.flags);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let started = Instant::now();
                let mut child = Command::new("sh")
                    .args(["-c", &script])
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
