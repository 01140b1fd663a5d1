//! `sandbox_exec`: one shell command to completion. [`run_shell`] is also the routed
//! `native_bash` (`routed.rs`).
//!
//! Commands go through the sandbox's resident helper ([`Resident`]): on a warm sandbox that is
//! one control-plane request (the helper's input; the answer comes back on its open output
//! stream). A sandbox where the helper cannot run (no Python ≥ 3.9) gets a managed process
//! per command instead (start + output stream, two requests).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{run_error, ToolOutput};
use crate::tools::args::Args;
use crate::tools::config::normalize_abs;
use crate::tools::runtime::Runtime;
use crate::tools::{progress, CallCtx, ToolError};
use createos_sandbox::api::processes::{ProcessSpec, RunOptions};
use createos_sandbox::guest::{
    CommandSpec, GuestErrorCode, OutputNote, OutputWatcher, Resident, RunControl,
};
use createos_sandbox::{Error, Sandbox};

/// Bytes kept of stdout and of stderr (2 MiB together, like the CLI runner's bound).
pub const MAX_STREAM_BYTES: usize = 1 << 20;

/// Default working directory of an explicitly named sandbox.
const EXPLICIT_CWD: &str = "/root";

/// The deadline of a call: `timeout` ms (0 = none), else the configured one.
pub(super) fn deadline(rt: &Runtime, args: &Args) -> Option<Duration> {
    match args.opt_u64("timeout") {
        Some(0) => None,
        Some(ms) => Some(Duration::from_millis(ms)),
        None => rt.config().timeout,
    }
}

/// `bash -lc` with stdin at EOF, so a command that reads input cannot hang the call.
fn script(command: &str) -> String {
    format!("exec </dev/null\n{command}")
}

/// What a finished command gave, whichever way it ran.
struct Finished {
    stdout: String,
    stderr: String,
    code: Option<i32>,
    signal: Option<String>,
    truncated: bool,
}

/// Run `command` in `cwd` of `sandbox` to completion (stopped by the call's cancellation and
/// by `limit`), as the JSON `{stdout, stderr, code, signal, truncated}` with metadata
/// `{sandboxId, exitCode, truncated}`. With a progress sink, reports the output so far (size
/// and last line) at least every [`progress::EVERY`].
pub(super) async fn run_shell(
    sandbox: &Sandbox,
    command: &str,
    cwd: &str,
    limit: Option<Duration>,
    ctx: &CallCtx,
) -> Result<ToolOutput, ToolError> {
    let reporter = progress::announce(ctx, format!("running `{}`", progress::short(command)));
    let watch = reporter.as_ref().map(|r| {
        let r = r.clone();
        Arc::new(move |note: &OutputNote| r.output(note)) as OutputWatcher
    });
    let spec = CommandSpec::shell(&script(command), cwd).max_bytes(MAX_STREAM_BYTES);
    let control = RunControl {
        timeout: limit,
        cancel: Some(ctx.cancel.clone()),
        grace: None,
        watch,
    };
    let done = match Resident::of(sandbox).run(spec, control).await {
        Ok(out) => Finished {
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            code: out.exit_code,
            signal: out.signal,
            truncated: out.truncated,
        },
        Err(err) if helper_unavailable(&err) => {
            tracing::debug!(sandbox = %sandbox.id(), error = %err, "no resident helper here; running the command as a managed process");
            managed(sandbox, command, cwd, limit, ctx).await?
        }
        Err(err) => return Err(run_error(err)),
    };
    drop(reporter);
    let body = json!({
        "stdout": done.stdout,
        "stderr": done.stderr,
        "code": done.code,
        "signal": done.signal,
        "truncated": done.truncated,
    });
    Ok(ToolOutput::json(body)
        .with("sandboxId", sandbox.id())
        .with("exitCode", done.code)
        .with("truncated", done.truncated))
}

/// The resident helper cannot run in this sandbox at all (as opposed to a failed command).
fn helper_unavailable(err: &Error) -> bool {
    matches!(
        err.guest_code(),
        Some(
            GuestErrorCode::PythonMissing
                | GuestErrorCode::PythonTooOld
                | GuestErrorCode::InstallFailed
        )
    )
}

/// The command as a managed process of its own.
async fn managed(
    sandbox: &Sandbox,
    command: &str,
    cwd: &str,
    limit: Option<Duration>,
    ctx: &CallCtx,
) -> Result<Finished, ToolError> {
    let mut options = RunOptions::default()
        .max_output_bytes(MAX_STREAM_BYTES)
        .cancel(ctx.cancel.clone());
    if let Some(limit) = limit {
        options = options.timeout(limit);
    }
    let spec = ProcessSpec::shell(script(command)).cwd(cwd);
    let out = sandbox
        .processes()
        .run(spec, options)
        .await
        .map_err(run_error)?;
    Ok(Finished {
        stdout: out.stdout_lossy(),
        stderr: out.stderr_lossy(),
        code: out.exit_code,
        signal: out.signal,
        truncated: out.truncated,
    })
}

pub(super) async fn exec(
    rt: &Arc<Runtime>,
    args: &Args,
    ctx: &CallCtx,
) -> Result<ToolOutput, ToolError> {
    let command = args.str("command")?;
    let limit = deadline(rt, args);
    let cwd = args
        .opt_str("cwd")
        .map(normalize_abs)
        .transpose()
        .map_err(ToolError::InvalidArgs)?;
    rt.require_isolation("sandbox_exec").await?;
    if let Some(id) = args.opt_str("sandbox_id") {
        let sandbox = rt.client().sandbox(id)?;
        return run_shell(
            &sandbox,
            command,
            cwd.as_deref().unwrap_or(EXPLICIT_CWD),
            limit,
            ctx,
        )
        .await;
    }
    let cwd = cwd.as_deref().unwrap_or(&rt.config().cwd);
    rt.with_session(ctx, |sandbox| async move {
        run_shell(&sandbox, command, cwd, limit, ctx).await
    })
    .await
}
