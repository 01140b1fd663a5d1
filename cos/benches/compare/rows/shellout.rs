//! The shell-out model the warm clients replace: a `cos` process spawned per operation. Two
//! forms: one `cos exec` per command, and the four-process sequence the OpenCode plugin ran
//! for every `sandbox_exec` before the sidecar (start, close stdin, wait for the tree, read the
//! output — reference `plugins.md` §2.6, "Managed execution").

use std::process::{Output, Stdio};
use std::time::Instant;

use anyhow::{bail, Context as _};
use futures::future::BoxFuture;
use serde_json::Value;

use crate::env::Bench;
use crate::interleave::{Contender, Sample};

/// How to spawn `cos` against the bench's emulator with the bench's key (nothing inherited that
/// could redirect it).
struct CosCli {
    path: std::path::PathBuf,
    base_url: String,
    api_key: String,
}

impl CosCli {
    fn of(bench: &Bench) -> CosCli {
        CosCli {
            path: bench.tools.cos.clone(),
            base_url: bench.base_url().to_string(),
            api_key: bench.api_key().to_string(),
        }
    }

    /// `cos --endpoint <emulator> <args…>`, stdout and stderr captured.
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.path);
        command
            .args(["--endpoint", &self.base_url])
            .args(args)
            .env("CREATEOS_API_KEY", &self.api_key)
            .env_remove("CREATEOS_SANDBOX_BASE_URL")
            .env_remove("CREATEOS_SANDBOX_URL")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }
}

/// Runs one `cos` process to the end; a failure names the step and carries its stderr.
async fn run(command: &mut tokio::process::Command, step: &str) -> anyhow::Result<Output> {
    let out = command.output().await.with_context(|| format!("spawning cos ({step})"))?;
    if !out.status.success() {
        bail!("`cos {step}` failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(out)
}

/// A `cos exec <sandbox> -- <remote…>` process per sample (the exec row's and the `cos mcp`
/// row's baseline).
pub(super) struct CosExec {
    command: tokio::process::Command,
    label: String,
}

impl CosExec {
    pub(super) fn new(bench: &Bench, label: String, remote: &[&str]) -> CosExec {
        let mut args = vec!["exec", bench.sandbox.id(), "--"];
        args.extend_from_slice(remote);
        let mut command = CosCli::of(bench).command(&args);
        command.stdout(Stdio::null());
        CosExec { command, label }
    }
}

impl Contender for CosExec {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move {
            let started = Instant::now();
            run(&mut self.command, "exec").await?;
            Ok(Sample::time(started.elapsed()))
        })
    }
}

/// The plugin's former managed execution of one shell command, with `cos` standing in for the
/// `createos` CLI: `process start --cwd C <sb> -- bash -lc <cmd>` (JSON, for the process id),
/// `process input --close` (stdin at EOF), `process wait --tree`, `process logs` (the output
/// the server holds). Four processes, one after another, as the plugin ran them.
pub(super) struct PluginSequence {
    cli: CosCli,
    sandbox: String,
    cwd: String,
    script: String,
    label: String,
}

impl PluginSequence {
    pub(super) fn new(bench: &Bench, label: String, cwd: &str, script: &str) -> PluginSequence {
        PluginSequence {
            cli: CosCli::of(bench),
            sandbox: bench.sandbox.id().to_string(),
            cwd: cwd.to_string(),
            script: script.to_string(),
            label,
        }
    }

    async fn once(&self) -> anyhow::Result<()> {
        let sb = self.sandbox.as_str();
        let start = ["-o", "json", "process", "start", "--cwd", &self.cwd, sb, "--", "bash", "-lc", &self.script];
        let started = run(&mut self.cli.command(&start), "process start").await?;
        let details: Value = serde_json::from_slice(&started.stdout).context("process start printed no JSON")?;
        let pid = details["process_id"].as_str().context("process start printed no process_id")?;
        run(&mut self.cli.command(&["process", "input", sb, pid, "--close", "--text", ""]), "process input --close").await?;
        run(&mut self.cli.command(&["process", "wait", "--tree", sb, pid]), "process wait").await?;
        run(&mut self.cli.command(&["process", "logs", sb, pid]), "process logs").await?;
        Ok(())
    }
}

impl Contender for PluginSequence {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move {
            let started = Instant::now();
            self.once().await?;
            Ok(Sample::time(started.elapsed()))
        })
    }
}
