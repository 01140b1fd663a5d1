//! Process output throughput: the bytes of `head -c N /dev/zero` run as a managed process and
//! read through `Process::connect`, against the same command spawned locally and read from
//! its stdout pipe.

use std::io::Read;
use std::process::Stdio;
use std::time::Instant;

use anyhow::{bail, ensure, Context as _};
use futures::future::BoxFuture;
use futures::StreamExt;

use createos_sandbox::api::processes::ProcessSpec;
use createos_sandbox::stream::process_output::OutputEvent;
use createos_sandbox::Sandbox;

use super::Row;
use crate::env::{Bench, Sizes};
use crate::interleave::{alternate, transfers, Contender, Sample};
use crate::stats::{Comparison, Goal, Measure, Side};

pub fn row() -> Row {
    Row {
        id: "stream",
        title: "process output throughput",
        method,
        run: |bench| Box::pin(run(bench)),
    }
}

fn method(sizes: &Sizes) -> String {
    format!(
        "`head -c {bytes} /dev/zero` ({mib} MiB), {warm} warm-up round(s) then {n} rounds, alternating.\n\n\
         - **managed process + `Process::connect`**: `processes().start(head …)` then `connect(0)`, counting \
         the payload of every `Data` event until the `Exit` event (exit code 0 and exactly {bytes} bytes \
         checked; a `Gap` fails the row). Timed from the start request to the exit event, so process \
         start-up, base64-in-NDJSON framing on the wire and decoding are all included. The emulator is \
         started with an output journal larger than the stream, so a consumer slower than `head` is \
         measured as slow instead of losing bytes to eviction.\n\
         - **local pipe**: the same command spawned locally (`std::process`), its stdout read to the end \
         in 64 KiB reads; timed from spawn to exit.\n\n\
         /dev/zero rather than /dev/urandom so that generating the bytes costs nothing on either side.",
        bytes = sizes.stream_bytes,
        mib = sizes.stream_bytes / (1024 * 1024),
        warm = sizes.stream_warmup,
        n = sizes.stream_rounds,
    )
}

async fn run(bench: &Bench) -> anyhow::Result<Vec<Comparison>> {
    let bytes = bench.sizes.stream_bytes;
    let mut contenders: Vec<Box<dyn Contender>> = vec![
        Box::new(Remote {
            sandbox: bench.sandbox.clone(),
            bytes,
        }),
        Box::new(LocalPipe { bytes }),
    ];
    let samples = alternate(
        &mut contenders,
        bench.sizes.stream_warmup,
        bench.sizes.stream_rounds,
    )
    .await?;
    let measure =
        |i: usize| Measure::throughput(&transfers(&samples[i])).context("no throughput samples");
    Ok(vec![Comparison {
        what: format!("process output, {} MiB", bytes / (1024 * 1024)),
        ours: Side {
            label: contenders_label(0),
            measure: measure(0)?,
        },
        baseline: Side {
            label: contenders_label(1),
            measure: measure(1)?,
        },
        goal: Goal::None,
    }])
}

fn contenders_label(index: usize) -> String {
    [
        "managed process + Process::connect",
        "local pipe (spawn, read all)",
    ][index]
        .to_string()
}

fn head_args(bytes: u64) -> [String; 3] {
    ["-c".to_string(), bytes.to_string(), "/dev/zero".to_string()]
}

struct Remote {
    sandbox: Sandbox,
    bytes: u64,
}

impl Contender for Remote {
    fn label(&self) -> String {
        contenders_label(0)
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move {
            let started = Instant::now();
            let process = self
                .sandbox
                .processes()
                .start(ProcessSpec::new("head").args(head_args(self.bytes)))
                .await?;
            let mut output = process.connect(0).await?;
            let mut received = 0u64;
            loop {
                match output
                    .next()
                    .await
                    .context("the output stream ended without an exit event")??
                {
                    OutputEvent::Data { bytes, .. } => received += bytes.len() as u64,
                    OutputEvent::Exit { code, signal } => {
                        ensure!(code == Some(0), "head ended with {code:?} {signal:?}");
                        break;
                    }
                    OutputEvent::Gap {
                        from_seq, to_seq, ..
                    } => {
                        bail!(
                            "output chunks {from_seq}-{to_seq} were evicted before they were read"
                        )
                    }
                    OutputEvent::Error(message) => bail!("the output stream failed: {message}"),
                }
            }
            let elapsed = started.elapsed();
            ensure!(
                received == self.bytes,
                "received {received} bytes, expected {}",
                self.bytes
            );
            Ok(Sample {
                elapsed,
                bytes: received,
            })
        })
    }
}

struct LocalPipe {
    bytes: u64,
}

impl Contender for LocalPipe {
    fn label(&self) -> String {
        contenders_label(1)
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        let bytes = self.bytes;
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let started = Instant::now();
                let mut child = std::process::Command::new("head")
                    .args(head_args(bytes))
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .spawn()
                    .context("spawning head")?;
                let mut stdout = child.stdout.take().context("head's stdout")?;
                let mut buf = vec![0u8; 64 * 1024];
                let mut received = 0u64;
                loop {
                    match stdout.read(&mut buf)? {
                        0 => break,
                        n => received += n as u64,
                    }
                }
                let status = child.wait()?;
                let elapsed = started.elapsed();
                ensure!(status.success(), "head failed: {status}");
                ensure!(received == bytes, "read {received} bytes, expected {bytes}");
                Ok(Sample {
                    elapsed,
                    bytes: received,
                })
            })
            .await?
        })
    }
}
