//! The shell-out model the warm clients replace: a `cos` process spawned per operation. Two
//! forms: one `cos exec` per command, and the four-process sequence the OpenCode plugin ran
//! for every `sandbox_exec` before the sidecar (start, close stdin, wait for the tree, read the
//! output — reference `plugins.md` §2.6, "Managed execution").

use std::process::{Output, Stdio};
use std::time::Instant;

use anyhow::{bail, Context as _};
use futures::future::BoxFuture;
use serde_json::Value;

use crate::env::{Bench, Endpoint};
use crate::interleave::{Contender, Sample};

/// How to spawn `cos` against an emulator with its key (nothing inherited that could redirect
/// it).
#[derive(Clone)]
pub(super) struct CosCli {
    path: std::path::PathBuf,
    endpoint: Endpoint,
}

impl CosCli {
    pub(super) fn of(bench: &Bench) -> CosCli {
        CosCli::new(&bench.tools.cos, bench.endpoint())
    }

    pub(super) fn new(cos: &std::path::Path, endpoint: Endpoint) -> CosCli {
        CosCli {
            path: cos.to_path_buf(),
            endpoint,
        }
    }

    /// `cos --endpoint <emulator> <args…>`, stdout and stderr captured.
    pub(super) fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.path);
        self.endpoint.apply(&mut command);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }
}

/// Runs one `cos` process to the end; a failure names the step and carries its stderr.
pub(super) async fn run(
    command: &mut tokio::process::Command,
    step: &str,
) -> anyhow::Result<Output> {
    let out = command
        .output()
        .await
        .with_context(|| format!("spawning cos ({step})"))?;
    if !out.status.success() {
        bail!(
            "`cos {step}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out)
}

/// One `cos <args…>` process per sample, timed from spawn to exit: `cos exec <sandbox> --
/// <remote…>` (the exec row's and the `cos mcp` rows' baseline), `cos fs <sandbox> read …`.
pub(super) struct CosExec {
    command: tokio::process::Command,
    step: &'static str,
    label: String,
}

impl CosExec {
    pub(super) fn new(bench: &Bench, label: String, remote: &[&str]) -> CosExec {
        CosExec::at(&CosCli::of(bench), bench.sandbox.id(), label, remote)
    }

    /// `cos exec <sandbox> -- <remote…>` through `cli`.
    pub(super) fn at(cli: &CosCli, sandbox: &str, label: String, remote: &[&str]) -> CosExec {
        let mut args = vec!["exec", sandbox, "--"];
        args.extend_from_slice(remote);
        CosExec::process(cli, "exec", &args, label)
    }

    /// Any `cos <args…>` (its output is discarded).
    pub(super) fn process(
        cli: &CosCli,
        step: &'static str,
        args: &[&str],
        label: String,
    ) -> CosExec {
        let mut command = cli.command(args);
        command.stdout(Stdio::null());
        CosExec {
            command,
            step,
            label,
        }
    }
}

impl Contender for CosExec {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move {
            let started = Instant::now();
            run(&mut self.command, self.step).await?;
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
        PluginSequence::at(CosCli::of(bench), bench.sandbox.id(), label, cwd, script)
    }

    /// The sequence through `cli`, in `sandbox`.
    pub(super) fn at(
        cli: CosCli,
        sandbox: &str,
        label: String,
        cwd: &str,
        script: &str,
    ) -> PluginSequence {
        PluginSequence {
            cli,
            sandbox: sandbox.to_string(),
            cwd: cwd.to_string(),
            script: script.to_string(),
            label,
        }
    }

    async fn once(&self) -> anyhow::Result<()> {
        plugin_exec(&self.cli, &self.sandbox, &self.cwd, &self.script).await
    }
}

/// The plugin's four processes for one managed execution of `script` in `sandbox`.
pub(super) async fn plugin_exec(
    cli: &CosCli,
    sb: &str,
    cwd: &str,
    script: &str,
) -> anyhow::Result<()> {
    let start = [
        "-o", "json", "process", "start", "--cwd", cwd, sb, "--", "bash", "-lc", script,
    ];
    let started = run(&mut cli.command(&start), "process start").await?;
    let details: Value =
        serde_json::from_slice(&started.stdout).context("process start printed no JSON")?;
    let pid = details["process_id"]
        .as_str()
        .context("process start printed no process_id")?;
    run(
        &mut cli.command(&["process", "input", sb, pid, "--close", "--text", ""]),
        "process input --close",
    )
    .await?;
    run(
        &mut cli.command(&["process", "wait", "--tree", sb, pid]),
        "process wait",
    )
    .await?;
    run(
        &mut cli.command(&["process", "logs", sb, pid]),
        "process logs",
    )
    .await?;
    Ok(())
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
