//! Warm worker processes running the official SDKs (benches/sdk/exec_worker.{mjs,py}): started
//! once, then asked for one timed operation at a time over a line protocol on stdin/stdout, so
//! interpreter start-up and module loading never enter a sample.

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::env::Bench;

/// Longest wait for one answer (a hung worker fails the row instead of the whole run hanging).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Worker {
    name: String,
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Worker {
    /// Start `program args…` with the emulator's address and key in its environment
    /// (`COS_BENCH_BASE_URL`, `COS_BENCH_API_KEY`); it is killed when the worker is dropped.
    pub async fn spawn(
        name: &str,
        program: &Path,
        args: &[OsString],
        bench: &Bench,
    ) -> anyhow::Result<Worker> {
        let mut child = Command::new(program)
            .args(args)
            .env("COS_BENCH_BASE_URL", bench.base_url())
            .env("COS_BENCH_API_KEY", bench.api_key())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting the {name} worker ({})", program.display()))?;
        let stdin = child.stdin.take().context("worker stdin")?;
        let stdout = child.stdout.take().context("worker stdout")?;
        Ok(Worker {
            name: name.to_string(),
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
        })
    }

    /// The worker's process id (while it runs).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Send one request line and return the answer's payload after `expect` (e.g. `ok`).
    pub async fn ask(&mut self, request: &str, expect: &str) -> anyhow::Result<String> {
        self.stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .with_context(|| format!("writing to the {} worker", self.name))?;
        self.stdin.flush().await?;
        let line = tokio::time::timeout(ANSWER_TIMEOUT, self.lines.next_line())
            .await
            .map_err(|_| {
                anyhow!(
                    "the {} worker did not answer {request:?} within {ANSWER_TIMEOUT:?}",
                    self.name
                )
            })??;
        let Some(line) = line else {
            let status = self.child.try_wait().ok().flatten();
            bail!(
                "the {} worker exited ({status:?}) before answering {request:?}",
                self.name
            );
        };
        let (verb, payload) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        match verb {
            v if v == expect => Ok(payload.to_string()),
            "err" => bail!("the {} worker failed {request:?}: {payload}", self.name),
            _ => bail!(
                "the {} worker answered {request:?} with an unexpected line {line:?}",
                self.name
            ),
        }
    }

    /// Bind the worker to `sandbox_id`; returns the SDK version it reports.
    pub async fn init(&mut self, sandbox_id: &str) -> anyhow::Result<String> {
        self.ask(&format!("init {sandbox_id}"), "ready").await
    }

    /// One `exec true`, as timed inside the worker.
    pub async fn exec(&mut self) -> anyhow::Result<Duration> {
        let nanos = self.ask("exec", "ok").await?;
        let nanos: u64 = nanos
            .trim()
            .parse()
            .with_context(|| format!("the {} worker's timing {nanos:?}", self.name))?;
        Ok(Duration::from_nanos(nanos))
    }

    /// Close its stdin and wait for it to end.
    pub async fn close(mut self) -> anyhow::Result<()> {
        drop(self.stdin);
        match tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await {
            Ok(status) => {
                status?;
            }
            Err(_) => self.child.kill().await?,
        }
        Ok(())
    }
}
