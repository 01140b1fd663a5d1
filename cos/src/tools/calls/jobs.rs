//! Calls of the jobs tools (`sandbox_offload`, `sandbox_fanout`, `sandbox_run_code`): each job
//! gets a throwaway sandbox of its own (see [`createos_sandbox::jobs`]); the session sandbox is untouched.
//! The call's token is the job's cancellation: cancelling stops the remote command and
//! destroys the job sandboxes before the call answers.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::exec::{deadline, MAX_STREAM_BYTES};
use super::to_json;
use crate::tools::args::Args;
use crate::tools::confine::{self, Expect};
use crate::tools::runtime::Runtime;
use crate::tools::{CallCtx, ToolError, ToolOutput};
use createos_sandbox::jobs::{
    self, ArtifactPath, FanoutRequest, Fate, JobError, JobEvent, JobOptions, JobProgress,
    JobResult, Language, OffloadRequest, RunCodeRequest,
};

/// Smallest per-stream output bound of one fanout command.
const MIN_FANOUT_STREAM_BYTES: usize = 16 << 10;

/// Whether `short` (a tool name without the prefix) is one of these tools.
pub(super) fn handles(short: &str) -> bool {
    matches!(short, "offload" | "fanout" | "run_code")
}

/// Run one of these tools. Handles its own deadline (the `timeout` of the command) and
/// cancellation (the call's token).
pub(super) async fn call(
    rt: &Arc<Runtime>,
    short: &str,
    args: &Args,
    ctx: &CallCtx,
) -> Result<ToolOutput, ToolError> {
    match short {
        "offload" => offload(rt, args, ctx).await,
        "fanout" => fanout(rt, args, ctx).await,
        "run_code" => run_code(rt, args, ctx).await,
        other => Err(ToolError::UnknownTool(other.to_string())),
    }
}

/// Sandbox settings of a job: per-call shape/rootfs over the configured ones.
fn job_options(rt: &Runtime, args: &Args) -> JobOptions {
    let config = rt.config();
    JobOptions {
        shape: args.opt_str("shape").unwrap_or(&config.shape).to_string(),
        rootfs: Some(args.opt_str("rootfs").unwrap_or(&config.rootfs).to_string()),
        network: config.network.clone(),
        auto_pause_secs: config.auto_pause_secs(),
        timeout: deadline(rt, args),
        max_output_bytes: MAX_STREAM_BYTES,
        keep_on_fail: args.opt_bool("keep_on_fail").unwrap_or(false),
        ..JobOptions::default()
    }
}

/// `dir`, resolved against the project directory and confined to it (default: the project
/// directory itself).
fn project_dir(rt: &Runtime, args: &Args) -> Result<PathBuf, ToolError> {
    confine::agent_arg(
        rt.project_dir(),
        "dir",
        args.opt_str("dir").unwrap_or("."),
        Expect::Dir,
    )
}

/// `out`: its local destination (the same relative path under `dir`) is confined too, so an
/// artifact can never be aimed at `.git/`, `.env` or out of the project.
fn artifact_out(
    rt: &Runtime,
    dir: &std::path::Path,
    args: &Args,
) -> Result<Option<String>, ToolError> {
    let Some(out) = args.opt_str("out") else {
        return Ok(None);
    };
    let path = ArtifactPath::parse(out).map_err(|e| ToolError::InvalidArgs(e.to_string()))?;
    confine::agent_path(
        rt.project_dir(),
        "out",
        &dir.join(path.relative()),
        Expect::Destination,
    )?;
    Ok(Some(out.to_string()))
}

/// Progress goes to the caller when it asked for it (MCP `progressToken`), and to the log.
fn progress(tool: &'static str, ctx: &CallCtx, fanout: bool) -> JobProgress {
    let ctx = ctx.clone();
    Arc::new(move |event: &JobEvent| {
        tracing::info!(tool, session = %ctx.session, job = event.job, stage = ?event.stage, "job progress");
        let prefix = if fanout {
            format!("[{}] ", event.job)
        } else {
            String::new()
        };
        ctx.report(format!("{prefix}{}", event.stage));
    })
}

fn job_error(err: JobError) -> ToolError {
    match err {
        JobError::Invalid(e) => ToolError::InvalidArgs(e.to_string()),
        JobError::Cancelled {
            fate: None | Some(Fate::Destroyed(_)),
            ..
        } => ToolError::Cancelled,
        JobError::FanoutCancelled { ref allocated, .. } if allocated.is_empty() => {
            ToolError::Cancelled
        }
        // Everything else names the sandbox and what became of it.
        other => ToolError::Job(Box::new(other)),
    }
}

async fn offload(rt: &Arc<Runtime>, args: &Args, ctx: &CallCtx) -> Result<ToolOutput, ToolError> {
    let dir = project_dir(rt, args)?;
    let out = artifact_out(rt, &dir, args)?;
    let mut request = OffloadRequest::new(dir, args.str("command")?);
    request.out = out;
    let options = job_options(rt, args);
    let result = jobs::offload(
        rt.client(),
        request,
        &options,
        &ctx.cancel,
        Some(progress("offload", ctx, false)),
    )
    .await
    .map_err(job_error)?;
    single_output(&result)
}

/// The result of one job (offload, run_code) with its metadata.
fn single_output(result: &JobResult) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::json(to_json(result)?)
        .with("sandboxId", result.sandbox_id.clone())
        .with("exitCode", result.code)
        .with("truncated", result.truncated)
        .with("kept", result.kept))
}

async fn fanout(rt: &Arc<Runtime>, args: &Args, ctx: &CallCtx) -> Result<ToolOutput, ToolError> {
    let commands = args.strings("commands");
    let jobs_at_once = args
        .opt_u64("jobs")
        .map(|j| j as usize)
        .unwrap_or(jobs::DEFAULT_FANOUT_JOBS);
    let request = FanoutRequest::new(project_dir(rt, args)?, commands).jobs(jobs_at_once);
    let mut options = job_options(rt, args);
    // The whole answer stays within the bound of one exec result.
    options.max_output_bytes =
        (MAX_STREAM_BYTES / request.commands.len().max(1)).max(MIN_FANOUT_STREAM_BYTES);
    let result = jobs::fanout(
        rt.client(),
        request,
        &options,
        &ctx.cancel,
        Some(progress("fanout", ctx, true)),
    )
    .await
    .map_err(job_error)?;
    let sandboxes: Vec<Value> = result
        .results
        .iter()
        .map(|e| e.sandbox_id.clone().into())
        .collect();
    let codes: Vec<Value> = result.results.iter().map(|e| e.code.into()).collect();
    let kept: Vec<Value> = result
        .results
        .iter()
        .filter(|e| e.kept)
        .filter_map(|e| e.sandbox_id.clone())
        .map(Value::from)
        .collect();
    let truncated = result.results.iter().any(|e| e.truncated);
    Ok(ToolOutput::json(to_json(&result)?)
        .with("sandboxIds", sandboxes)
        .with("exitCodes", codes)
        .with("truncated", truncated)
        .with("kept", kept))
}

async fn run_code(rt: &Arc<Runtime>, args: &Args, ctx: &CallCtx) -> Result<ToolOutput, ToolError> {
    let language: Language = args
        .str("lang")?
        .parse()
        .map_err(|e: createos_sandbox::Error| ToolError::InvalidArgs(e.to_string()))?;
    let mut request = RunCodeRequest::new(language, args.str("code")?);
    if let Some(input) = args.opt_str("stdin") {
        request = request.stdin(input.as_bytes().to_vec());
    }
    let options = job_options(rt, args);
    let result = jobs::run_code(
        rt.client(),
        request,
        &options,
        &ctx.cancel,
        Some(progress("run_code", ctx, false)),
    )
    .await
    .map_err(job_error)?;
    single_output(&result)
}
