//! Moving one big file each way: the files API (`Sandbox::upload` / `download`), SFTP over our
//! SSH layer, and OpenSSH's `scp` to the same sshd in the sandbox.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Context as _};
use futures::future::BoxFuture;

use createos_sandbox::api::files::UploadBody;
use createos_sandbox::ssh::WriteOptions;
use createos_sandbox::Sandbox;

use super::ssh_setup::SshRig;
use super::Row;
use crate::env::{Bench, Sizes};
use crate::interleave::{alternate, transfers, Contender, Sample};
use crate::stats::{Comparison, Goal, Measure, Side};

/// The guest file every download reads.
const REMOTE_SOURCE: &str = "/root/bench-transfer-source.bin";
/// Our SFTP download may cost at most this many times scp's time per MiB.
const SFTP_DOWNLOAD_GOAL: f64 = 1.2;

pub fn row() -> Row {
    Row {
        id: "transfer",
        title: "file upload and download",
        method,
        run: |bench| Box::pin(run(bench)),
    }
}

fn method(sizes: &Sizes) -> String {
    format!(
        "One file of {mb} MB ({bytes} bytes of pseudo-random data, so no layer can compress it) each way \
         between this machine and the sandbox, {warm} warm-up round(s) then {n} rounds per direction, the \
         three contenders alternating. The sandbox's port 22 is the host's real OpenSSH `sshd`, started \
         inside the sandbox; our SSH client reaches it through `/tunnel/22`, and `scp` reaches the same \
         sshd through a local port forwarded over `/tunnel/22` by `createos_sandbox::tunnel`, with the key \
         our client registered. Timed from the start of the transfer to the file being complete on the \
         other side (the local file closed, or the upload acknowledged); every sample then checks the size \
         that arrived.\n\n\
         - **files API**: `Sandbox::upload(path, UploadBody::file(..))` (one streamed `PUT`) and \
         `Sandbox::download(path)` + `Download::save_to`.\n\
         - **SFTP (ours)**: `SshSession::write_file` (pipelined writes into a temporary name, renamed into \
         place) and `SshSession::save_file_to`, what `cos pull` over SSH runs: `read_file`'s pipelined \
         reads (64 outstanding, as OpenSSH's `sftp`) written to a temporary file beside the target, synced \
         and renamed over it, like the files API download's `save_to`.\n\
         - **`scp`**: `scp -P <port> -i <key> …` up and down, spawned per sample (OpenSSH's scp speaks \
         SFTP to the server by default).\n\n\
         Throughput is the file size over the sample's time; the ratios compare ours against `scp`. Goal: \
         the SFTP download costs at most {goal}× scp's time per MiB.",
        mb = sizes.transfer_bytes / 1_000_000,
        bytes = sizes.transfer_bytes,
        warm = sizes.transfer_warmup,
        n = sizes.transfer_rounds,
        goal = SFTP_DOWNLOAD_GOAL,
    )
}

async fn run(bench: &Bench) -> anyhow::Result<Vec<Comparison>> {
    let rig = Arc::new(SshRig::open(bench, &["scp", "ssh"]).await?);
    let scratch = tempfile::Builder::new()
        .prefix("cos-bench-transfer-")
        .tempdir()?;
    let size = bench.sizes.transfer_bytes;
    let source = scratch.path().join("source.bin");
    let generated = source.clone();
    tokio::task::spawn_blocking(move || write_pattern(&generated, size)).await??;
    // the file every download reads, put there once
    let file = tokio::fs::File::open(&source).await?;
    rig.ssh
        .write_file(REMOTE_SOURCE, file, WriteOptions::new())
        .await
        .context("staging the download source")?;

    let sandbox = bench.sandbox.clone();
    let up_labels = ["files API upload", "SFTP upload (ours)", "scp upload"];
    let mut uploads: Vec<Box<dyn Contender>> = vec![
        Box::new(Transfer::new(
            up_labels[0],
            Way::ApiUp,
            &sandbox,
            &rig,
            &source,
            scratch.path(),
            size,
        )),
        Box::new(Transfer::new(
            up_labels[1],
            Way::SftpUp,
            &sandbox,
            &rig,
            &source,
            scratch.path(),
            size,
        )),
        Box::new(Transfer::new(
            up_labels[2],
            Way::ScpUp,
            &sandbox,
            &rig,
            &source,
            scratch.path(),
            size,
        )),
    ];
    let up = alternate(
        &mut uploads,
        bench.sizes.transfer_warmup,
        bench.sizes.transfer_rounds,
    )
    .await?;
    drop(uploads);

    let down_labels = ["files API download", "SFTP download (ours)", "scp download"];
    let mut downloads: Vec<Box<dyn Contender>> = vec![
        Box::new(Transfer::new(
            down_labels[0],
            Way::ApiDown,
            &sandbox,
            &rig,
            &source,
            scratch.path(),
            size,
        )),
        Box::new(Transfer::new(
            down_labels[1],
            Way::SftpDown,
            &sandbox,
            &rig,
            &source,
            scratch.path(),
            size,
        )),
        Box::new(Transfer::new(
            down_labels[2],
            Way::ScpDown,
            &sandbox,
            &rig,
            &source,
            scratch.path(),
            size,
        )),
    ];
    let down = alternate(
        &mut downloads,
        bench.sizes.transfer_warmup,
        bench.sizes.transfer_rounds,
    )
    .await?;
    drop(downloads);

    // leave the guest as it was
    let cleanup = format!("rm -f {REMOTE_SOURCE} /root/bench-upload-*.bin");
    let _ = rig.ssh.exec(&cleanup).await;
    if let Ok(rig) = Arc::try_unwrap(rig) {
        rig.close().await?;
    }

    let mb = size / 1_000_000;
    let measure = |samples: &[Sample]| {
        Measure::throughput(&transfers(samples)).context("no transfer samples")
    };
    let pair = |what: &str,
                labels: &[&str; 3],
                samples: &[Vec<Sample>],
                ours: usize,
                goal: Goal|
     -> anyhow::Result<Comparison> {
        Ok(Comparison {
            what: format!("{what} of a {mb} MB file"),
            ours: Side {
                label: labels[ours].to_string(),
                measure: measure(&samples[ours])?,
            },
            baseline: Side {
                label: labels[2].to_string(),
                measure: measure(&samples[2])?,
            },
            goal,
        })
    };
    Ok(vec![
        pair("upload", &up_labels, &up, 0, Goal::None)?,
        pair("upload", &up_labels, &up, 1, Goal::None)?,
        pair("download", &down_labels, &down, 0, Goal::None)?,
        // issue 14: our SFTP download within 1.2× of scp's time per MiB
        pair(
            "download",
            &down_labels,
            &down,
            1,
            Goal::AtMost(SFTP_DOWNLOAD_GOAL),
        )?,
    ])
}

/// `size` bytes of xorshift output (incompressible), written in 1 MiB pieces.
fn write_pattern(path: &Path, size: u64) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut block = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        for word in block.chunks_exact_mut(8) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            word.copy_from_slice(&seed.to_le_bytes());
        }
        let n = left.min(block.len() as u64) as usize;
        out.write_all(&block[..n])?;
        left -= n as u64;
    }
    out.flush()?;
    Ok(())
}

#[derive(Clone, Copy)]
enum Way {
    ApiUp,
    SftpUp,
    ScpUp,
    ApiDown,
    SftpDown,
    ScpDown,
}

struct Transfer {
    label: &'static str,
    way: Way,
    sandbox: Sandbox,
    rig: Arc<SshRig>,
    source: PathBuf,
    /// Where a download lands (one file per contender).
    local_target: PathBuf,
    /// Where an upload lands in the guest (one file per contender).
    remote_target: String,
    size: u64,
}

impl Transfer {
    fn new(
        label: &'static str,
        way: Way,
        sandbox: &Sandbox,
        rig: &Arc<SshRig>,
        source: &Path,
        scratch: &Path,
        size: u64,
    ) -> Transfer {
        let tag = label
            .split_whitespace()
            .next()
            .unwrap_or("x")
            .to_ascii_lowercase();
        Transfer {
            label,
            way,
            sandbox: sandbox.clone(),
            rig: Arc::clone(rig),
            source: source.to_path_buf(),
            local_target: scratch.join(format!("download-{tag}.bin")),
            remote_target: format!("/root/bench-upload-{tag}.bin"),
            size,
        }
    }

    async fn scp(&self, from: &str, to: &str) -> anyhow::Result<()> {
        let out = tokio::process::Command::new("scp")
            .arg("-q")
            .arg("-P")
            .arg(self.rig.addr().port().to_string())
            .args(self.rig.client_options())
            .arg(from)
            .arg(to)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output()
            .await
            .context("spawning scp")?;
        ensure!(
            out.status.success(),
            "scp failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(())
    }

    /// One transfer, timed; returns how long it took.
    async fn once(&self) -> anyhow::Result<std::time::Duration> {
        let started = Instant::now();
        match self.way {
            Way::ApiUp => {
                self.sandbox
                    .upload(&self.remote_target, UploadBody::file(&self.source))
                    .await?;
            }
            Way::SftpUp => {
                let file = tokio::fs::File::open(&self.source).await?;
                self.rig
                    .ssh
                    .write_file(&self.remote_target, file, WriteOptions::new())
                    .await?;
            }
            Way::ScpUp => {
                self.scp(
                    &self.source.display().to_string(),
                    &self.rig.remote(&self.remote_target),
                )
                .await?;
            }
            Way::ApiDown => {
                self.sandbox
                    .download(REMOTE_SOURCE)
                    .await?
                    .save_to(&self.local_target)
                    .await?;
            }
            Way::SftpDown => {
                self.rig
                    .ssh
                    .save_file_to(REMOTE_SOURCE, &self.local_target, None)
                    .await?;
            }
            Way::ScpDown => {
                self.scp(
                    &self.rig.remote(REMOTE_SOURCE),
                    &self.local_target.display().to_string(),
                )
                .await?;
            }
        }
        Ok(started.elapsed())
    }

    async fn check(&self) -> anyhow::Result<()> {
        let got = match self.way {
            Way::ApiUp | Way::SftpUp | Way::ScpUp => {
                Some(self.rig.ssh.stat(&self.remote_target).await?.size)
            }
            Way::ApiDown | Way::SftpDown | Way::ScpDown => {
                Some(tokio::fs::metadata(&self.local_target).await?.len())
            }
        };
        ensure!(
            got == Some(self.size),
            "{} moved {got:?} bytes, expected {}",
            self.label,
            self.size
        );
        Ok(())
    }
}

impl Contender for Transfer {
    fn label(&self) -> String {
        self.label.to_string()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move {
            let elapsed = self.once().await?;
            self.check().await?;
            Ok(Sample {
                elapsed,
                bytes: self.size,
            })
        })
    }
}
