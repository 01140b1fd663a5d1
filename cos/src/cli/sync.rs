//! `cos sync`: keep a local directory and a sandbox directory in step (once, one-way, mirror,
//! two-way), optionally watching for changes.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use serde_json::json;

use crate::tools::confine::{self, Expect};
use createos_sandbox::sync::{SyncMode, SyncOptions, SyncReport, Syncer};

use super::via::ViaArgs;
use super::{progress, resolve, Ctx, Out};

#[derive(Debug, Args)]
pub struct SyncArgs {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// Local directory (default: the current directory).
    #[arg(long, default_value = ".")]
    pub local: PathBuf,
    /// Absolute directory in the sandbox (not under /etc, /usr, /proc, …).
    #[arg(long, default_value = "/root/sync")]
    pub remote: String,
    /// once | one-way (sandbox extras kept) | mirror (extras deleted) | two-way (conflicts kept side by side).
    #[arg(long, default_value = "one-way")]
    pub mode: String,
    /// Leave out paths matching GLOB (both sides); repeatable.
    #[arg(long = "exclude", value_name = "GLOB")]
    pub excludes: Vec<String>,
    /// Keep running: sync again whenever local files change (Ctrl-C stops).
    #[arg(long)]
    pub watch: bool,
    /// In watch mode, also look for sandbox-side changes this often (two-way), e.g. `5s`.
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub poll_secs: u64,
    /// Allow a local directory inside ~/.ssh, ~/.aws, ~/.config, ….
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub via: ViaArgs,
}

pub async fn sync(ctx: &Ctx, args: SyncArgs) -> Result<()> {
    let mode: SyncMode = args.mode.parse()?;
    if args.watch && mode == SyncMode::Once {
        bail!("--watch needs a continuous mode (one-way, mirror or two-way), not `once`");
    }
    let mut options = SyncOptions::new(mode).force(args.force);
    options.excludes = args.excludes.clone();
    let bar = progress::bytes_bar("sync");
    if let Some((_, report)) = &bar {
        options.progress = Some(report.clone());
    }
    // the paths are checked before the sandbox is even looked up
    confine::user_path("--local", &args.local, Expect::Dir, Some(args.force))?;
    createos_sandbox::sync::safety::check_local(&args.local, None, args.force)?;
    createos_sandbox::sync::safety::check_remote(&args.remote)?;
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let syncer = Syncer::new(
        args.via.remote(&sb).await?,
        &args.local,
        &args.remote,
        options,
    )?;
    if !args.watch {
        let report = syncer.run().await;
        if let Some((bar, _)) = &bar {
            bar.finish_and_clear();
        }
        show(ctx.out, sb.id(), mode, args.via, &report?);
        return Ok(());
    }
    let cancel = crate::signals::StopSignals::install_or_ctrl_c(false).cancel_token(|| {});
    let poll = (mode == SyncMode::TwoWay && args.poll_secs > 0)
        .then(|| Duration::from_secs(args.poll_secs));
    let out = ctx.out;
    let via = args.via;
    let id = sb.id().to_string();
    ctx.out.note(format!(
        "watching {} ⇄ {}:{} ({mode}); Ctrl-C stops",
        syncer.local().display(),
        id,
        syncer.remote_dir()
    ));
    syncer
        .watch(cancel, poll, move |outcome| match outcome {
            Ok(report) if report.is_noop() => {}
            Ok(report) => show(out, &id, mode, via, &report),
            Err(err) => out.note(format!(
                "sync failed (will retry on the next change): {err}"
            )),
        })
        .await?;
    if let Some((bar, _)) = &bar {
        bar.finish_and_clear();
    }
    Ok(())
}

fn show(out: Out, sandbox: &str, mode: SyncMode, via: ViaArgs, report: &SyncReport) {
    let value = json!({ "sandbox": sandbox, "mode": mode, "via": via.name(), "report": report });
    out.show(&value, || {
        let mut text = format!(
            "{mode}: {} sent, {} fetched, {} deleted in the sandbox, {} deleted locally ({} bytes up, {} down)",
            report.pushed.len(),
            report.pulled.len(),
            report.deleted_remote.len(),
            report.deleted_local.len(),
            report.bytes_sent,
            report.bytes_received
        );
        for c in &report.conflicts {
            text.push_str(&format!("\nconflict: {} changed on both sides; the sandbox version is kept as {}", c.path, c.remote_copy));
        }
        for s in &report.skipped {
            text.push_str(&format!("\nskipped (name is not UTF-8): {s}"));
        }
        for line in createos_sandbox::transfer::refused_summary(&report.refused, 20) {
            text.push_str(&format!("\n{line}"));
        }
        text
    });
}
