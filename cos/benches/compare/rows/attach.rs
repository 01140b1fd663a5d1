//! Keystroke echo latency: one byte typed into a remote PTY running `cat` until it comes back,
//! through `pty::attach` (what `cos attach` runs) and through bare `write_input` + `connect`,
//! against the same program on a local PTY.

use std::fs::File;
use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use futures::future::BoxFuture;
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::task::JoinHandle;

use createos_sandbox::api::processes::{Process, ProcessSpec};
use createos_sandbox::pty::attach::{attach, AttachOptions, AttachOutcome, DETACH_KEY};
use createos_sandbox::stream::process_output::{OutputEvent, OutputStream};
use createos_sandbox::Sandbox;

use super::Row;
use crate::env::{Bench, Sizes};
use crate::interleave::{alternate, durations, Contender, Sample};
use crate::stats::{Comparison, Goal, Measure, Side};

/// Raw mode without echo, a ready mark, then `cat`: every byte typed comes straight back from
/// the program (not from the line discipline), as with an interactive program in raw mode.
const ECHO_SCRIPT: &str = "stty raw -echo; printf R; exec cat";
const READY: u8 = b'R';
/// Longest wait for one echo before the row fails.
const ECHO_TIMEOUT: Duration = Duration::from_secs(10);

pub fn row() -> Row {
    Row {
        id: "attach",
        title: "attach keystroke echo latency",
        method,
        run: |bench| Box::pin(run(bench)),
    }
}

fn method(sizes: &Sizes) -> String {
    format!(
        "Each contender runs `sh -c '{ECHO_SCRIPT}'` on its own PTY (24×80); a sample writes one byte \
         (cycling a–z) and stops the clock when that byte comes back. {warm} warm-up rounds, then {n} \
         rounds, alternating.\n\n\
         - **`pty::attach`**: the library function behind `cos attach`, with its default options, fed \
         through in-memory pipes standing in for the terminal; the sample runs from writing the byte \
         into its input to reading the echo from its output. The default options gather a burst of \
         keystrokes for up to {batch:?} before sending them, and that window is part of what a user \
         feels, so it is part of the figure.\n\
         - **`write_input` + `connect`**: the same two calls without `attach`'s batching: \
         `Process::write_input` of the byte, concurrently with reading the already-open `connect` stream \
         until the echo arrives.\n\
         - **local PTY**: `openpty(3)` (via `nix`), the same script spawned on the slave side, the byte \
         written to the master and read back from it with blocking calls — the kernel-only floor, no \
         terminal emulator or relay process in between.",
        warm = sizes.attach_warmup,
        n = sizes.attach_rounds,
        batch = AttachOptions::default().input_batch,
    )
}

async fn run(bench: &Bench) -> anyhow::Result<Vec<Comparison>> {
    let labels = [
        "pty::attach (cos attach)",
        "write_input + connect",
        "local PTY (openpty + cat)",
    ];
    let mut contenders: Vec<Box<dyn Contender>> = vec![
        Box::new(Attached::start(&bench.sandbox, labels[0]).await?),
        Box::new(Direct::start(&bench.sandbox, labels[1]).await?),
        Box::new(LocalPty::start(labels[2])?),
    ];
    let result = alternate(
        &mut contenders,
        bench.sizes.attach_warmup,
        bench.sizes.attach_rounds,
    )
    .await;
    for contender in contenders {
        contender.close().await?;
    }
    let samples = result?;
    let measure = |i: usize| Measure::latency(&durations(&samples[i])).context("no echo samples");
    let baseline = Side {
        label: labels[2].to_string(),
        measure: measure(2)?,
    };
    (0..2)
        .map(|i| {
            Ok(Comparison {
                what: "keystroke echo".to_string(),
                ours: Side {
                    label: labels[i].to_string(),
                    measure: measure(i)?,
                },
                baseline: baseline.clone(),
                goal: Goal::None,
            })
        })
        .collect()
}

async fn start_echo(sandbox: &Sandbox) -> anyhow::Result<Process> {
    let spec = ProcessSpec::new("sh").args(["-c", ECHO_SCRIPT]).pty(24, 80);
    Ok(sandbox.processes().start(spec).await?)
}

/// Byte typed in sample `n`.
fn key(n: usize) -> u8 {
    b'a' + (n % 26) as u8
}

/// `pty::attach` on a remote `cat`, driven through in-memory pipes.
struct Attached {
    label: &'static str,
    process: Process,
    keyboard: DuplexStream,
    screen: DuplexStream,
    task: JoinHandle<createos_sandbox::Result<AttachOutcome>>,
    typed: usize,
}

impl Attached {
    async fn start(sandbox: &Sandbox, label: &'static str) -> anyhow::Result<Attached> {
        let process = start_echo(sandbox).await?;
        let (keyboard, keys_in) = tokio::io::duplex(4096);
        let (screen_out, mut screen) = tokio::io::duplex(64 * 1024);
        let attached = process.clone();
        let task = tokio::spawn(async move {
            attach(
                &attached,
                keys_in,
                screen_out,
                futures::stream::pending(),
                AttachOptions::default(),
            )
            .await
        });
        read_until(&mut screen, READY)
            .await
            .context("waiting for the remote PTY to be ready")?;
        Ok(Attached {
            label,
            process,
            keyboard,
            screen,
            task,
            typed: 0,
        })
    }
}

async fn read_until(screen: &mut DuplexStream, byte: u8) -> anyhow::Result<Instant> {
    let mut buf = [0u8; 4096];
    tokio::time::timeout(ECHO_TIMEOUT, async {
        loop {
            let n = screen.read(&mut buf).await?;
            ensure!(n > 0, "the attachment ended");
            if buf[..n].contains(&byte) {
                return Ok(Instant::now());
            }
        }
    })
    .await
    .map_err(|_| anyhow::anyhow!("no echo of {:?} within {ECHO_TIMEOUT:?}", byte as char))?
}

impl Contender for Attached {
    fn label(&self) -> String {
        self.label.to_string()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move {
            let byte = key(self.typed);
            self.typed += 1;
            let started = Instant::now();
            self.keyboard.write_all(&[byte]).await?;
            let echoed = read_until(&mut self.screen, byte).await?;
            Ok(Sample::time(echoed - started))
        })
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, anyhow::Result<()>> {
        let mut this = *self;
        Box::pin(async move {
            this.keyboard.write_all(&[DETACH_KEY]).await?;
            let outcome = tokio::time::timeout(ECHO_TIMEOUT, &mut this.task)
                .await
                .context("attach did not detach")???;
            ensure!(
                matches!(outcome, AttachOutcome::Detached { .. }),
                "attach ended with {outcome:?}"
            );
            this.process.stop(Some(Duration::ZERO)).await?;
            Ok(())
        })
    }
}

/// `write_input` and the `connect` stream, used directly.
struct Direct {
    label: &'static str,
    process: Process,
    output: OutputStream,
    typed: usize,
}

impl Direct {
    async fn start(sandbox: &Sandbox, label: &'static str) -> anyhow::Result<Direct> {
        let process = start_echo(sandbox).await?;
        let mut output = process.connect(0).await?;
        wait_for(&mut output, READY)
            .await
            .context("waiting for the remote PTY to be ready")?;
        Ok(Direct {
            label,
            process,
            output,
            typed: 0,
        })
    }
}

async fn wait_for(output: &mut OutputStream, byte: u8) -> anyhow::Result<Instant> {
    tokio::time::timeout(ECHO_TIMEOUT, async {
        loop {
            match output.next().await.context("the output stream ended")?? {
                OutputEvent::Data { bytes, .. } if bytes.contains(&byte) => {
                    return Ok(Instant::now())
                }
                OutputEvent::Data { .. } => {}
                other => bail!("unexpected output event {other:?}"),
            }
        }
    })
    .await
    .map_err(|_| anyhow::anyhow!("no echo of {:?} within {ECHO_TIMEOUT:?}", byte as char))?
}

impl Contender for Direct {
    fn label(&self) -> String {
        self.label.to_string()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move {
            let byte = key(self.typed);
            self.typed += 1;
            let started = Instant::now();
            let (written, echoed) = tokio::join!(
                self.process.write_input([byte]),
                wait_for(&mut self.output, byte)
            );
            written?;
            Ok(Sample::time(echoed? - started))
        })
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, anyhow::Result<()>> {
        let process = self.process;
        Box::pin(async move {
            process.stop(Some(Duration::ZERO)).await?;
            Ok(())
        })
    }
}

/// The floor: a local PTY pair, the same script on the slave side.
struct LocalPty {
    label: &'static str,
    master: Option<File>,
    child: std::process::Child,
    typed: usize,
}

impl LocalPty {
    fn start(label: &'static str) -> anyhow::Result<LocalPty> {
        let pty = nix::pty::openpty(None, None).context("openpty")?;
        let slave = File::from(pty.slave);
        let child = std::process::Command::new("sh")
            .args(["-c", ECHO_SCRIPT])
            .stdin(Stdio::from(slave.try_clone()?))
            .stdout(Stdio::from(slave.try_clone()?))
            .stderr(Stdio::from(slave))
            .spawn()
            .context("spawning the local PTY program")?;
        let mut master = File::from(pty.master);
        read_master_until(&mut master, READY).context("waiting for the local PTY to be ready")?;
        Ok(LocalPty {
            label,
            master: Some(master),
            child,
            typed: 0,
        })
    }
}

/// Blocking read of the PTY master until `byte` shows up.
fn read_master_until(master: &mut File, byte: u8) -> anyhow::Result<()> {
    let mut buf = [0u8; 4096];
    loop {
        let n = master.read(&mut buf)?;
        ensure!(n > 0, "the local PTY closed");
        if buf[..n].contains(&byte) {
            return Ok(());
        }
    }
}

impl Contender for LocalPty {
    fn label(&self) -> String {
        self.label.to_string()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move {
            let byte = key(self.typed);
            self.typed += 1;
            let mut master = self
                .master
                .take()
                .context("the local PTY was lost by an earlier failure")?;
            // Blocking calls on a blocking thread; the clock runs inside, around write + read only.
            let echo = tokio::task::spawn_blocking(move || {
                let started = Instant::now();
                let result = master
                    .write_all(&[byte])
                    .map_err(anyhow::Error::from)
                    .and_then(|()| read_master_until(&mut master, byte));
                (master, result.map(|()| started.elapsed()))
            });
            match tokio::time::timeout(ECHO_TIMEOUT, echo).await {
                Ok(joined) => {
                    let (master, elapsed) = joined?;
                    self.master = Some(master);
                    Ok(Sample::time(elapsed?))
                }
                Err(_) => {
                    // Killing the program makes the blocked read return.
                    let _ = self.child.kill();
                    bail!(
                        "no local echo of {:?} within {ECHO_TIMEOUT:?}",
                        byte as char
                    )
                }
            }
        })
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, anyhow::Result<()>> {
        let mut this = *self;
        Box::pin(async move {
            let _ = this.child.kill();
            tokio::task::spawn_blocking(move || this.child.wait()).await??;
            Ok(())
        })
    }
}
