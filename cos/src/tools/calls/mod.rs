//! Tool calls: argument checking, in-flight accounting, deadlines and cancellation around
//! one module per group of tools.

mod background;
mod desktop;
mod devices;
mod disks;
mod exec;
mod files;
mod jobs;
mod lifecycle;
mod process;
mod resources;
mod routed;

pub use routed::{resolve as resolve_native, tools as native_tools, NATIVE_PREFIX};

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::args::Args;
use super::catalog::{self, PREFIX};
use super::runtime::Runtime;
use super::{progress, CallCtx, ToolError, ToolOutput};
use createos_sandbox::wait::sleep_or_forever;
use createos_sandbox::Sandbox;

/// Run tool `name` with `arguments` for the caller described by `ctx`. The first result after
/// the session's sandbox was replaced says so.
pub async fn call(
    rt: &Arc<Runtime>,
    name: &str,
    arguments: Option<Map<String, Value>>,
    ctx: CallCtx,
) -> Result<ToolOutput, ToolError> {
    let session = ctx.session.clone();
    let result = call_inner(rt, name, arguments, ctx).await;
    result.map(|output| rt.with_notice(&session, output))
}

async fn call_inner(
    rt: &Arc<Runtime>,
    name: &str,
    arguments: Option<Map<String, Value>>,
    ctx: CallCtx,
) -> Result<ToolOutput, ToolError> {
    // Routed native tools (remote mode) have their own names and argument shapes.
    if let Some(id) = routed::resolve(name) {
        return routed::call(rt, id, name, arguments, ctx).await;
    }
    let def = catalog::find(name).ok_or_else(|| ToolError::UnknownTool(name.to_string()))?;
    let args = Args::check(&def.input_schema, arguments)?;
    let short = &def.name[PREFIX.len()..];
    if short == "status" {
        return Ok(ToolOutput::json(rt.status(&ctx.session).await));
    }
    if short == "release" {
        // Not counted as in flight: release is refused while *other* calls run.
        return lifecycle::release(rt, &args, &ctx).await;
    }
    let _in_flight = rt.begin(&ctx.session)?;
    // Any call may take long (allocation, transfers, jobs): with a progress token the client
    // hears from it at least every few seconds until it ends.
    let (ctx, _heartbeat) = progress::heartbeat(ctx, &format!("{} is running", def.name));
    // exec and process_start handle cancellation themselves, so the remote process is
    // stopped (awaited) rather than abandoned.
    if short == "exec" {
        return exec::exec(rt, &args, &ctx).await;
    }
    if short == "process_start" {
        return process::start(rt, &args, &ctx).await;
    }
    // Each group below owns its deadline and cancellation (cleanup must run on both).
    if jobs::handles(short) {
        return jobs::call(rt, short, &args, &ctx).await;
    }
    if files::handles(short) {
        return files::call(rt, short, &args, &ctx).await;
    }
    if background::handles(short) {
        return background::call(rt, short, &args, &ctx).await;
    }
    if devices::handles(short) {
        return devices::call(rt, short, &args, &ctx).await;
    }
    bounded(&ctx, rt.config().timeout, dispatch(rt, short, &args, &ctx)).await
}

async fn dispatch(
    rt: &Arc<Runtime>,
    short: &str,
    args: &Args,
    ctx: &CallCtx,
) -> Result<ToolOutput, ToolError> {
    match short {
        "create" => lifecycle::create(rt, args).await,
        "info" => lifecycle::info(rt, args, ctx).await,
        "list" => lifecycle::list(rt).await,
        "pause" => lifecycle::pause(rt, args, ctx).await,
        "resume" => lifecycle::resume(rt, args, ctx).await,
        "fork" => lifecycle::fork(rt, args, ctx).await,
        "destroy" => lifecycle::destroy(rt, args, ctx).await,
        "shapes" => resources::shapes(rt).await,
        "images" => resources::images(rt).await,
        "ingress" => resources::ingress(rt, args).await,
        "preview_url" => resources::preview_url(rt, args).await,
        "firewall" => resources::firewall(rt, args).await,
        "bandwidth" => resources::bandwidth(rt, args).await,
        "network_create" => resources::network_create(rt, args).await,
        "network_list" => resources::network_list(rt).await,
        "network_show" => resources::network_show(rt, args).await,
        "network_delete" => resources::network_delete(rt, args).await,
        "network_attach" => resources::network_attach(rt, args, true).await,
        "network_detach" => resources::network_attach(rt, args, false).await,
        "process_list" => process::list(rt, args).await,
        "process_get" => process::get(rt, args).await,
        "process_output" => process::output(rt, args).await,
        "process_stop" => process::stop(rt, args).await,
        "process_input" => process::input(rt, args).await,
        "process_close_stdin" => process::close_stdin(rt, args).await,
        "disk_create" => disks::create(rt, args).await,
        "disk_list" => disks::list(rt).await,
        "disk_show" => disks::show(rt, args).await,
        "disk_delete" => disks::delete(rt, args).await,
        "disk_attach" => disks::attach(rt, args, true).await,
        "disk_detach" => disks::attach(rt, args, false).await,
        "desktop" => desktop::desktop(rt, args).await,
        "screenshot" => desktop::screenshot(rt, args).await,
        "computer" => desktop::computer(rt, args).await,
        other => Err(ToolError::UnknownTool(format!("{PREFIX}{other}"))),
    }
}

/// The sandbox a call targets: `sandbox_id`, else the session's (allocated on first use).
/// The flag tells whether it is the session sandbox.
async fn target(
    rt: &Arc<Runtime>,
    args: &Args,
    ctx: &CallCtx,
) -> Result<(Sandbox, bool), ToolError> {
    match args.opt_str("sandbox_id") {
        Some(id) => Ok((rt.client().sandbox(id)?, false)),
        None => Ok((rt.session_sandbox(&ctx.session, ctx).await?, true)),
    }
}

/// An explicitly named sandbox.
fn named(rt: &Runtime, args: &Args) -> Result<Sandbox, ToolError> {
    Ok(rt.client().sandbox(args.str("sandbox_id")?)?)
}

fn to_json(value: impl serde::Serialize) -> Result<Value, ToolError> {
    serde_json::to_value(value).map_err(|e| ToolError::Internal(format!("encoding a result: {e}")))
}

/// Run `work` until it ends, the caller cancels, or `limit` passes (dropping it then).
async fn bounded<T>(
    ctx: &CallCtx,
    limit: Option<Duration>,
    work: impl std::future::Future<Output = Result<T, ToolError>>,
) -> Result<T, ToolError> {
    tokio::select! {
        result = work => result,
        _ = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
        _ = sleep_or_forever(limit) => Err(ToolError::Timeout(limit.unwrap_or_default())),
    }
}

/// The library's input errors are the caller's bad arguments.
fn input_error(err: createos_sandbox::Error) -> ToolError {
    match err {
        createos_sandbox::Error::InvalidInput { field, message } => {
            ToolError::InvalidArgs(format!("{field}: {message}"))
        }
        other => run_error(other),
    }
}

/// Map the library's cancellation and timeout to the tool's.
fn run_error(err: createos_sandbox::Error) -> ToolError {
    match err {
        createos_sandbox::Error::Cancelled => ToolError::Cancelled,
        createos_sandbox::Error::Timeout { after, .. } => ToolError::Timeout(after),
        other => ToolError::Api(other),
    }
}
