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
         contenders alternating. The sandbox's port 22 is the host's real OpenSSH `sshd`, started \
         inside the sandbox; our SSH client reaches it through `/tunnel/22`, and `scp` reaches the same \
         sshd through a local port forwarded over `/tunnel/22` by `createos_sandbox::tunnel`, with the key \
         our client registered. Timed from the start of the transfer to the file being complete on the \
         other side (the local file durable on disk, or the upload acknowledged); every sample then checks \
         the size that arrived. Before each sample, untimed, the previous download's file is removed and \
         `sync` writes the page cache back, so no sample pays for the one before it.\n\n\
         - **files API**: `Sandbox::upload(path, UploadBody::file(..))` (one streamed `PUT`) and \
         `Sandbox::download(path)` + `Download::save_to`.\n\
         - **SFTP (ours)**: `SshSession::write_file` (pipelined writes into a temporary name, renamed into \
         place) and `SshSession::save_file_to`, what `cos pull` over SSH runs: `read_file`'s pipelined \
         reads (64 outstanding, as OpenSSH's `sftp`) written to a temporary file beside the target, synced \
         and renamed over it, like the files API download's `save_to`.\n\
         - **`scp`**: `scp -P <port> -i <key> …` up and down, spawned per sample (OpenSSH's scp speaks \
         SFTP to the server by default), with OpenSSH's default cipher order (ChaCha20-Poly1305 first). \
         scp never syncs what it writes, so a download sample also `fsync`s scp's file before it ends: \
         the same durable end state the two others reach (they sync before their rename).\n\
         - **`scp -c <ours>`** (downloads only): scp again, with the cipher our client asks for first on \
         this CPU ({cipher}; AES-GCM leads where the CPU has AES and carry-less multiply instructions, \
         see `createos_sandbox::ssh::preferred_ciphers`). The guest's sshd then does the same work for \
         both, so that pair compares the two clients alone.\n\n\
         Throughput is the file size over the sample's time; the ratios compare ours against `scp`. Goal: \
         the SFTP download costs at most {goal}× the time per MiB of `scp` as a user runs it (its \
         defaults); the same-cipher pair is reported.",
        cipher = createos_sandbox::ssh::preferred_ciphers()[0],
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
    // one contender: `label` moving the file `way`
    let transfer = |label: &str, way: Way| {
        Transfer::new(label, way, &sandbox, &rig, &source, scratch.path(), size)
    };
    let up_labels = ["files API upload", "SFTP upload (ours)", "scp upload"];
    let mut uploads: Vec<Box<dyn Contender>> = vec![
        Box::new(transfer(up_labels[0], Way::ApiUp)),
        Box::new(transfer(up_labels[1], Way::SftpUp)),
        Box::new(transfer(up_labels[2], Way::ScpUp)),
    ];
    let up = alternate(
        &mut uploads,
        bench.sizes.transfer_warmup,
        bench.sizes.transfer_rounds,
    )
    .await?;
    drop(uploads);

    // scp again with the cipher our client asks for first on this CPU: the same work on the wire
    // and in the guest's sshd, so this pair compares the two clients alone
    let cipher = createos_sandbox::ssh::preferred_ciphers()[0];
    let scp_ours_label = format!("scp download, {cipher}");
    let down_labels = [
        "files API download",
        "SFTP download (ours)",
        "scp download",
        scp_ours_label.as_str(),
    ];
    let mut downloads: Vec<Box<dyn Contender>> = vec![
        Box::new(transfer(down_labels[0], Way::ApiDown)),
        Box::new(transfer(down_labels[1], Way::SftpDown)),
        Box::new(transfer(down_labels[2], Way::ScpDown)),
        Box::new(transfer(down_labels[3], Way::ScpDown).scp_cipher(cipher)),
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
    // `ours` against `baseline`, both indices into `labels` and `samples`
    let pair = |what: &str,
                labels: &[&str],
                samples: &[Vec<Sample>],
                (ours, baseline): (usize, usize),
                goal: Goal|
     -> anyhow::Result<Comparison> {
        Ok(Comparison {
            what: format!("{what} of a {mb} MB file"),
            ours: Side {
                label: labels[ours].to_string(),
                measure: measure(&samples[ours])?,
            },
            baseline: Side {
                label: labels[baseline].to_string(),
                measure: measure(&samples[baseline])?,
            },
            goal,
        })
    };
    Ok(vec![
        pair("upload", &up_labels, &up, (0, 2), Goal::None)?,
        pair("upload", &up_labels, &up, (1, 2), Goal::None)?,
        pair("download", &down_labels, &down, (0, 2), Goal::None)?,
        // issue 14: our SFTP download within 1.2× of scp's time per MiB, scp as a user runs it
        pair(
            "download",
            &down_labels,
            &down,
            (1, 2),
            Goal::AtMost(SFTP_DOWNLOAD_GOAL),
        )?,
        pair("download", &down_labels, &down, (1, 3), Goal::None)?,
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
    label: String,
    way: Way,
    /// `scp -c` (the scp contenders only; `None` leaves OpenSSH's default order).
    scp_cipher: Option<&'static str>,
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
        label: &str,
        way: Way,
        sandbox: &Sandbox,
        rig: &Arc<SshRig>,
        source: &Path,
        scratch: &Path,
        size: u64,
    ) -> Transfer {
        // one target file per contender, named after its label
        let tag: String = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        Transfer {
            label: label.to_string(),
            way,
            scp_cipher: None,
            sandbox: sandbox.clone(),
            rig: Arc::clone(rig),
            source: source.to_path_buf(),
            local_target: scratch.join(format!("download-{tag}.bin")),
            remote_target: format!("/root/bench-upload-{tag}.bin"),
            size,
        }
    }

    fn scp_cipher(mut self, cipher: &'static str) -> Transfer {
        self.scp_cipher = Some(cipher);
        self
    }

    async fn scp(&self, from: &str, to: &str) -> anyhow::Result<()> {
        let mut scp = tokio::process::Command::new("scp");
        if let Some(cipher) = self.scp_cipher {
            scp.arg("-c").arg(cipher);
        }
        let out = scp
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
        // Untimed: no sample pays for the one before it. The last download's file is removed
        // (freeing 500 MB is not this sample's work) and the page cache is written back, so
        // the dirty pages of the previous contender do not compete with this one's writes.
        if matches!(self.way, Way::ApiDown | Way::SftpDown | Way::ScpDown) {
            match tokio::fs::remove_file(&self.local_target).await {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        let synced = tokio::process::Command::new("sync").status().await?;
        ensure!(synced.success(), "sync failed: {synced}");
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
                // the same end state as the other two: the file is on disk (they sync before
                // their rename; scp never syncs)
                tokio::fs::File::open(&self.local_target)
                    .await?
                    .sync_all()
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
        self.label.clone()
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
