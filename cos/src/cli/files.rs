//! `cos push` and `cos pull`: one file through the files API, streamed from and to disk, or a
//! whole directory as one tar stream (push: through the snapshot filters); with `--ssh` over
//! the sandbox's SSH connection instead (SFTP, or tar through an exec channel).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use clap::Args;
use serde_json::json;

use crate::tools::confine::{self, Expect};
use createos_sandbox::api::files::{ProgressFn, ProgressReader, UploadBody, UploadOptions};
use createos_sandbox::snapshot::{GitMode, Snapshot, SnapshotOptions};
use createos_sandbox::ssh::WriteOptions;
use createos_sandbox::transfer;
use createos_sandbox::{Error, Sandbox};

use super::via::ViaArgs;
use super::{progress, resolve, Ctx};

#[derive(Debug, Args)]
pub struct PushArgs {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// Local file or directory (a directory goes through the snapshot filters: Git listing,
    /// credential deny-list, `--exclude`).
    #[arg(value_name = "LOCAL")]
    pub local_path: PathBuf,
    /// Absolute path in the sandbox (a trailing `/` keeps the local file name; for a directory,
    /// the directory its contents go into).
    pub remote: String,
    /// Directories: leave out paths matching GLOB; repeatable.
    #[arg(long = "exclude", value_name = "GLOB")]
    pub excludes: Vec<String>,
    /// Directories: walk instead of using Git's file list.
    #[arg(long)]
    pub no_git: bool,
    /// Allow a path inside ~/.ssh, ~/.aws, ~/.config, … (never ~/.createos).
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub via: ViaArgs,
}

pub async fn push(ctx: &Ctx, args: PushArgs) -> Result<()> {
    confine::user_path(
        "LOCAL",
        &args.local_path,
        Expect::Existing,
        Some(args.force),
    )?;
    let meta = std::fs::metadata(&args.local_path)
        .with_context(|| format!("reading {}", args.local_path.display()))?;
    if meta.is_dir() {
        return push_dir(ctx, args).await;
    }
    let remote = if args.remote.ends_with('/') {
        let name = args
            .local_path
            .file_name()
            .context("the local path has no file name")?;
        format!("{}{}", args.remote, name.to_string_lossy())
    } else {
        args.remote.clone()
    };
    createos_sandbox::validate::guest_path("remote path", &remote)?;
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let bar = progress::bytes_bar("push");
    let sent = if args.via.ssh {
        push_file_ssh(
            &sb,
            &args.local_path,
            &remote,
            meta.len(),
            bar.as_ref().map(|(_, r)| r.clone()),
        )
        .await
    } else {
        let mut options = UploadOptions::new();
        if let Some((_, report)) = &bar {
            let report = report.clone();
            options = options.progress(move |done, total| report(done, total));
        }
        sb.upload_with(&remote, UploadBody::file(&args.local_path), options)
            .await
            .map(|_| ())
            .map_err(Into::into)
    };
    if let Some((bar, _)) = &bar {
        bar.finish_and_clear();
    }
    sent?;
    let report =
        json!({ "sandbox": sb.id(), "path": remote, "bytes": meta.len(), "via": args.via.name() });
    ctx.out.show(&report, || {
        format!(
            "{} → {}:{} ({} bytes)",
            args.local_path.display(),
            sb.id(),
            remote,
            meta.len()
        )
    });
    Ok(())
}

/// One file over SFTP: streamed into a temporary file next to `remote`, renamed over it when
/// complete.
async fn push_file_ssh(
    sb: &Sandbox,
    local: &Path,
    remote: &str,
    size: u64,
    progress: Option<ProgressFn>,
) -> Result<()> {
    let ssh = sb.ssh().await?;
    let file = tokio::fs::File::open(local)
        .await
        .with_context(|| format!("opening {}", local.display()))?;
    ssh.write_file(
        remote,
        ProgressReader::new(file, Some(size), progress),
        WriteOptions::new(),
    )
    .await?;
    Ok(())
}

async fn push_dir(ctx: &Ctx, args: PushArgs) -> Result<()> {
    let remote = createos_sandbox::sync::safety::check_remote(&args.remote)?;
    let options = SnapshotOptions {
        excludes: args.excludes.clone(),
        git: if args.no_git {
            GitMode::Off
        } else {
            GitMode::Auto
        },
        home_dir: None,
        allow_sensitive_root: args.force,
    };
    let snapshot = Snapshot::scan_async(args.local_path.clone(), options).await?;
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let bar = progress::bytes_bar("push");
    let channel = args.via.remote(&sb).await?;
    let sent = transfer::upload_snapshot(
        channel.as_ref(),
        &snapshot,
        &remote,
        bar.as_ref().map(|(_, r)| r.clone()),
    )
    .await;
    if let Some((bar, _)) = &bar {
        bar.finish_and_clear();
    }
    let sent = sent?;
    let report = json!({ "sandbox": sb.id(), "path": remote, "files": sent.files, "bytes": sent.bytes,
        "left_out": snapshot.dropped().len(), "via": args.via.name() });
    ctx.out.show(&report, || {
        format!(
            "{} → {}:{} ({} files, {} bytes; {} paths left out, see `cos snapshot --list --explain`)",
            snapshot.root().display(),
            sb.id(),
            remote,
            sent.files,
            sent.bytes,
            snapshot.dropped().len()
        )
    });
    Ok(())
}

#[derive(Debug, Args)]
pub struct PullArgs {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// Absolute path in the sandbox (a file or a directory).
    pub remote: String,
    /// Local destination (an existing directory keeps the remote name).
    #[arg(value_name = "LOCAL")]
    pub local_path: PathBuf,
    #[command(flatten)]
    pub via: ViaArgs,
}

pub async fn pull(ctx: &Ctx, args: PullArgs) -> Result<()> {
    createos_sandbox::validate::guest_path("remote path", &args.remote)?;
    let target = if args.local_path.is_dir() {
        let name = args
            .remote
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .filter(|n| !n.is_empty())
            .context("the remote path has no file name")?;
        args.local_path.join(name)
    } else {
        args.local_path.clone()
    };
    confine::user_path("LOCAL", &args.local_path, Expect::Destination, None)?;
    confine::user_path("LOCAL", &target, Expect::Destination, None)?;
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let bar = progress::bytes_bar("pull");
    let report_to = bar.as_ref().map(|(_, r)| r.clone());
    let saved = if args.via.ssh {
        pull_file_ssh(&sb, &args.remote, &target, report_to).await
    } else {
        pull_file_api(&sb, &args.remote, &target, report_to).await
    };
    if let Some((bar, _)) = &bar {
        bar.finish_and_clear();
    }
    let Some(bytes) = saved? else {
        // a directory: fetched as one archive
        return pull_dir(ctx, &sb, &args.remote, target, args.via).await;
    };
    let report = json!({ "sandbox": sb.id(), "path": args.remote, "local": target, "bytes": bytes, "via": args.via.name() });
    ctx.out.show(&report, || {
        format!(
            "{}:{} → {} ({bytes} bytes)",
            sb.id(),
            args.remote,
            target.display()
        )
    });
    Ok(())
}

/// One file through the files API; `None` when `remote` is a directory (the API refuses those).
async fn pull_file_api(
    sb: &Sandbox,
    remote: &str,
    target: &Path,
    progress: Option<ProgressFn>,
) -> Result<Option<u64>> {
    let download = match sb.download(remote).await {
        Ok(download) => download,
        Err(Error::Validation(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let download = match progress {
        Some(report) => download.progress(move |done, total| report(done, total)),
        None => download,
    };
    Ok(Some(download.save_to(target).await?))
}

/// One file over SFTP; `None` when `remote` is a directory.
async fn pull_file_ssh(
    sb: &Sandbox,
    remote: &str,
    target: &Path,
    progress: Option<ProgressFn>,
) -> Result<Option<u64>> {
    let ssh = sb.ssh().await?;
    if ssh.stat(remote).await?.is_dir() {
        return Ok(None);
    }
    Ok(Some(ssh.save_file_to(remote, target, progress).await?))
}

async fn pull_dir(
    ctx: &Ctx,
    sb: &Sandbox,
    remote: &str,
    target: PathBuf,
    via: ViaArgs,
) -> Result<()> {
    let channel = via.remote(sb).await?;
    let bar = progress::bytes_bar("pull");
    let got = transfer::download_dir(
        channel.as_ref(),
        remote,
        &target,
        bar.as_ref().map(|(_, r)| r.clone()),
    )
    .await;
    if let Some((bar, _)) = &bar {
        bar.finish_and_clear();
    }
    let got = got?;
    let report = json!({ "sandbox": sb.id(), "path": remote, "local": target, "files": got.unpacked.files,
        "symlinks": got.unpacked.symlinks, "skipped": got.unpacked.skipped, "refused": got.unpacked.refused,
        "bytes": got.bytes, "via": via.name() });
    ctx.out.show(&report, || {
        let mut text = format!(
            "{}:{} → {} ({} files, {} bytes)",
            sb.id(),
            remote,
            target.display(),
            got.unpacked.files + got.unpacked.symlinks,
            got.bytes
        );
        for line in transfer::refused_summary(&got.unpacked.refused, 20) {
            text.push_str(&format!("\n{line}"));
        }
        text
    });
    Ok(())
}
