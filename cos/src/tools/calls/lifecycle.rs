//! status/release/create/info/list/pause/resume/fork/destroy.

use std::sync::Arc;

use serde_json::json;

use super::{target, to_json, ToolOutput};
use crate::tools::args::Args;
use crate::tools::runtime::{ready, Runtime};
use crate::tools::{CallCtx, ToolError};
use createos_sandbox::api::sandboxes::{ForkOptions, ListSandboxes};
use createos_sandbox::{CreateSandbox, SandboxStatus};

pub(super) async fn release(
    rt: &Arc<Runtime>,
    args: &Args,
    ctx: &CallCtx,
) -> Result<ToolOutput, ToolError> {
    let destroy = !args.opt_bool("forget").unwrap_or(false);
    Ok(ToolOutput::json(
        rt.release(&ctx.session, destroy, 0).await?,
    ))
}

pub(super) async fn create(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    let config = rt.config();
    let mut request = CreateSandbox::new(args.opt_str("shape").unwrap_or(&config.shape))
        .rootfs(args.opt_str("rootfs").unwrap_or(&config.rootfs));
    if let Some(name) = args.opt_str("name") {
        request = request.name(name);
    }
    if let Some(net) = args.opt_str("network").or(config.network.as_deref()) {
        request = request.network(net);
    }
    if let Some(secs) = config.auto_pause_secs() {
        request = request.auto_pause_after(secs);
    }
    let sandbox = rt.client().create_sandbox(request).await?;
    if let Err(err) = ready(&sandbox).await {
        return Err(match sandbox.destroy().await {
            Ok(_) => err,
            Err(e) => ToolError::Refused(format!(
                "{err}; destroying {} also failed ({e}): it is still allocated, remove it with `cos rm {}`",
                sandbox.id(),
                sandbox.id()
            )),
        });
    }
    Ok(ToolOutput::json(json!({"sandbox_id": sandbox.id()})).with("sandboxId", sandbox.id()))
}

pub(super) async fn info(
    rt: &Arc<Runtime>,
    args: &Args,
    ctx: &CallCtx,
) -> Result<ToolOutput, ToolError> {
    let (sandbox, _) = target(rt, args, ctx).await?;
    let view = sandbox.refresh().await?;
    Ok(ToolOutput::json(to_json(&view)?).with("sandboxId", sandbox.id()))
}

pub(super) async fn list(rt: &Arc<Runtime>) -> Result<ToolOutput, ToolError> {
    let all = rt
        .client()
        .list_sandboxes(ListSandboxes::default())
        .collect_all()
        .await?;
    Ok(ToolOutput::json(to_json(&all)?))
}

pub(super) async fn pause(
    rt: &Arc<Runtime>,
    args: &Args,
    ctx: &CallCtx,
) -> Result<ToolOutput, ToolError> {
    let (sandbox, _) = target(rt, args, ctx).await?;
    let view = sandbox.pause_and_wait().await?;
    Ok(ToolOutput::json(to_json(&view)?).with("sandboxId", sandbox.id()))
}

pub(super) async fn resume(
    rt: &Arc<Runtime>,
    args: &Args,
    ctx: &CallCtx,
) -> Result<ToolOutput, ToolError> {
    let (sandbox, _) = target(rt, args, ctx).await?;
    ready(&sandbox).await?;
    let view = sandbox.refresh().await?;
    Ok(ToolOutput::json(to_json(&view)?).with("sandboxId", sandbox.id()))
}

/// A fork needs a paused source: pause a running one, fork, and resume it again so the
/// source is left as it was found.
pub(super) async fn fork(
    rt: &Arc<Runtime>,
    args: &Args,
    ctx: &CallCtx,
) -> Result<ToolOutput, ToolError> {
    let (sandbox, _) = target(rt, args, ctx).await?;
    let was = sandbox.refresh().await?.status;
    if matches!(was, SandboxStatus::Running) {
        sandbox.pause_and_wait().await?;
    }
    let forked = sandbox.fork(ForkOptions::default()).await;
    if matches!(was, SandboxStatus::Running) {
        if let Err(e) = sandbox.resume_and_wait().await {
            tracing::warn!(sandbox = %sandbox.id(), error = %e, "resuming the fork source failed");
        }
    }
    let child = forked?;
    Ok(
        ToolOutput::json(json!({"sandbox_id": child.id(), "forked_from": sandbox.id()}))
            .with("sandboxId", child.id()),
    )
}

pub(super) async fn destroy(
    rt: &Arc<Runtime>,
    args: &Args,
    ctx: &CallCtx,
) -> Result<ToolOutput, ToolError> {
    let id = args.str("sandbox_id")?;
    Ok(ToolOutput::json(rt.destroy_explicit(id, &ctx.session).await?).with("sandboxId", id))
}
