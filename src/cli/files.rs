//! `cos push` and `cos pull`: one file through the files API, streamed from and to disk.

use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use clap::Args;
use serde_json::json;

use createos_sandbox::api::files::UploadBody;

use super::{resolve, Ctx};

#[derive(Debug, Args)]
pub struct PushArgs {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// Local file.
    #[arg(value_name = "LOCAL")]
    pub local_path: PathBuf,
    /// Absolute path in the sandbox (a trailing `/` keeps the local file name).
    pub remote: String,
}

pub async fn push(ctx: &Ctx, args: PushArgs) -> Result<()> {
    let meta = std::fs::metadata(&args.local_path).with_context(|| format!("reading {}", args.local_path.display()))?;
    if meta.is_dir() {
        bail!("{} is a directory; push takes one file", args.local_path.display());
    }
    let remote = if args.remote.ends_with('/') {
        let name = args.local_path.file_name().context("the local path has no file name")?;
        format!("{}{}", args.remote, name.to_string_lossy())
    } else {
        args.remote.clone()
    };
    createos_sandbox::validate::guest_path("remote path", &remote)?;
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    sb.upload(&remote, UploadBody::file(&args.local_path)).await?;
    let report = json!({ "sandbox": sb.id(), "path": remote, "bytes": meta.len() });
    ctx.out.show(&report, || format!("{} → {}:{} ({} bytes)", args.local_path.display(), sb.id(), remote, meta.len()));
    Ok(())
}

#[derive(Debug, Args)]
pub struct PullArgs {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// Absolute path in the sandbox.
    pub remote: String,
    /// Local destination (a directory keeps the remote file name).
    #[arg(value_name = "LOCAL")]
    pub local_path: PathBuf,
}

pub async fn pull(ctx: &Ctx, args: PullArgs) -> Result<()> {
    createos_sandbox::validate::guest_path("remote path", &args.remote)?;
    let target = if args.local_path.is_dir() {
        let name = args.remote.rsplit('/').next().filter(|n| !n.is_empty()).context("the remote path has no file name")?;
        args.local_path.join(name)
    } else {
        args.local_path.clone()
    };
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let bytes = sb.download(&args.remote).await?.save_to(&target).await?;
    let report = json!({ "sandbox": sb.id(), "path": args.remote, "local": target, "bytes": bytes });
    ctx.out.show(&report, || format!("{}:{} → {} ({bytes} bytes)", sb.id(), args.remote, target.display()));
    Ok(())
}
