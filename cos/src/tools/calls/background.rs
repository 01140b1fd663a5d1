//! Calls of the background-task tools (`sync`, `tunnel`, `transport_stop`: the last keeps its
//! plugins.md name). Each call owns its deadline and cancellation: a background task is
//! registered as the very last step, so a cancelled or timed-out call leaves nothing running.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::{bounded, input_error, named, run_error};
use crate::tools::args::Args;
use crate::tools::confine::{self, Expect};
use crate::tools::runtime::Runtime;
use crate::tools::{CallCtx, ToolError, ToolOutput};
use createos_sandbox::sync::{safety, SyncMode, SyncOptions, SyncReport, Syncer};
use createos_sandbox::transfer::ApiRemote;
use createos_sandbox::tunnel::TunnelListener;
use createos_sandbox::SandboxStatus;

/// Deadline of the sync a `sandbox_sync` call runs (like the plugin's push/pull).
const SYNC_LIMIT: Duration = Duration::from_secs(600);

/// Paths listed per kind in a sync result; the counts are always complete.
const LISTED_PATHS: usize = 200;

/// Whether `short` (a tool name without the prefix) is one of these tools.
pub(super) fn handles(short: &str) -> bool {
    matches!(short, "sync" | "tunnel" | "transport_stop")
}

/// Run one of these tools. Handles its own deadline and cancellation.
pub(super) async fn call(
    rt: &Arc<Runtime>,
    short: &str,
    args: &Args,
    ctx: &CallCtx,
) -> Result<ToolOutput, ToolError> {
    match short {
        "sync" => sync(rt, args, ctx).await,
        "tunnel" => bounded(ctx, rt.config().timeout, tunnel(rt, args, ctx)).await,
        "transport_stop" => {
            let id = args.str("transport_id")?;
            Ok(ToolOutput::json(rt.background().stop(id).await?))
        }
        other => Err(ToolError::UnknownTool(format!(
            "{}{other}",
            crate::tools::catalog::PREFIX
        ))),
    }
}

/// `local_dir`, resolved and confined to the project directory (see [`confine`]); the sync's
/// own rules (not `/`, not the home directory, no credential folder) then apply again.
fn local_dir(rt: &Runtime, raw: &str) -> Result<PathBuf, ToolError> {
    let resolved = confine::agent_arg(rt.project_dir(), "local_dir", raw, Expect::Dir)?;
    safety::check_local(&resolved, None, false).map_err(input_error)
}

fn listed(paths: &[String]) -> Value {
    json!(paths.iter().take(LISTED_PATHS).collect::<Vec<_>>())
}

/// What one sync did, with path lists cut at [`LISTED_PATHS`] (flagged by `truncated`).
fn summary(report: &SyncReport) -> Value {
    let lists = [
        &report.pushed,
        &report.pulled,
        &report.deleted_remote,
        &report.deleted_local,
        &report.skipped,
    ];
    let truncated =
        lists.iter().any(|l| l.len() > LISTED_PATHS) || report.conflicts.len() > LISTED_PATHS;
    json!({
        "pushed": report.pushed.len(),
        "pulled": report.pulled.len(),
        "deleted_remote": report.deleted_remote.len(),
        "deleted_local": report.deleted_local.len(),
        "conflicts": report.conflicts.iter().take(LISTED_PATHS).collect::<Vec<_>>(),
        "bytes_sent": report.bytes_sent,
        "bytes_received": report.bytes_received,
        "paths": {
            "pushed": listed(&report.pushed),
            "pulled": listed(&report.pulled),
            "deleted_remote": listed(&report.deleted_remote),
            "deleted_local": listed(&report.deleted_local),
            "skipped": listed(&report.skipped),
        },
        "truncated": truncated,
    })
}

async fn sync(rt: &Arc<Runtime>, args: &Args, ctx: &CallCtx) -> Result<ToolOutput, ToolError> {
    // Every argument is checked before the sandbox is touched (bad excludes fail the local
    // scan, which comes before anything is sent).
    let mode: SyncMode = args
        .opt_str("mode")
        .unwrap_or("once")
        .parse()
        .map_err(input_error)?;
    let local = local_dir(rt, args.str("local_dir")?)?;
    let remote = safety::check_remote(args.str("remote_dir")?).map_err(input_error)?;
    let excludes = args.strings("exclude");
    let sandbox = named(rt, args)?;
    let mut options = SyncOptions::new(mode).state_dir(rt.state_dir().join("sync"));
    options.excludes = excludes;
    let syncer = Arc::new(
        Syncer::new(
            Arc::new(ApiRemote::new(sandbox.clone())),
            &local,
            &remote,
            options,
        )
        .map_err(input_error)?,
    );

    // The first sync runs now, under the call's deadline and cancellation.
    let report = bounded(ctx, Some(SYNC_LIMIT), async {
        syncer.run().await.map_err(run_error)
    })
    .await?;
    let mut body = json!({
        "sandbox_id": sandbox.id(),
        "local_dir": syncer.local().to_string_lossy(),
        "remote_dir": syncer.remote_dir(),
        "mode": mode,
        "report": summary(&report),
    });
    if mode != SyncMode::Once {
        let id = rt
            .background()
            .start_sync(&ctx.session, sandbox.id(), syncer)?;
        body["transport_id"] = json!(id);
        body["watching"] = json!(true);
    }
    let truncated = body["report"]["truncated"].clone();
    Ok(ToolOutput::json(body)
        .with("sandboxId", sandbox.id())
        .with("truncated", truncated))
}

async fn tunnel(rt: &Arc<Runtime>, args: &Args, ctx: &CallCtx) -> Result<ToolOutput, ToolError> {
    let remote_port = createos_sandbox::validate::port(
        "remote_port",
        args.u64("remote_port")?.min(u64::from(u32::MAX)) as u32,
    )
    .map_err(input_error)?;
    let local_port = u16::try_from(args.opt_u64("local_port").unwrap_or(0))
        .map_err(|_| ToolError::InvalidArgs("local_port must be 0..=65535".into()))?;
    let sandbox = named(rt, args)?;
    let view = sandbox.refresh().await?;
    if view.status != SandboxStatus::Running {
        return Err(ToolError::Refused(format!(
            "sandbox {} is {}; a tunnel needs it running (sandbox_resume)",
            sandbox.id(),
            view.status.as_str()
        )));
    }
    let addr = SocketAddr::from(([127, 0, 0, 1], local_port));
    let listener = TunnelListener::bind(&sandbox, remote_port, Some(addr)).await.map_err(|e| match e {
        createos_sandbox::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::AddrInUse => {
            ToolError::Refused(format!("local port {local_port} is already in use; pick another or pass 0 for a free one"))
        }
        other => input_error(other),
    })?;
    let running = listener.spawn();
    let local = running.local_addr();
    let id = rt
        .background()
        .add_tunnel(&ctx.session, sandbox.id(), remote_port, running)?;
    Ok(ToolOutput::json(json!({
        "transport_id": id,
        "url": format!("http://{local}"),
        "local_port": local.port(),
        "remote_port": remote_port,
        "sandbox_id": sandbox.id(),
        "verified": false,
    }))
    .with("sandboxId", sandbox.id()))
}
