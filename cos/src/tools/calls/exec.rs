//! `sandbox_exec`: one shell command as a managed process, to completion. [`run_shell`] is
//! also the routed `native_bash` (`routed.rs`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{run_error, target, ToolOutput};
use createos_sandbox::api::processes::{ProcessSpec, RunOptions};
use crate::tools::args::Args;
use crate::tools::config::normalize_abs;
use crate::tools::runtime::Runtime;
use crate::tools::{CallCtx, ToolError};
use createos_sandbox::Sandbox;

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
fn shell(command: &str) -> ProcessSpec {
    ProcessSpec::new("bash").args(["-lc".to_string(), format!("exec </dev/null\n{command}")])
}

/// Run `command` in `cwd` of `sandbox` to completion (stopped by the call's cancellation and
/// by `limit`), as the JSON `{stdout, stderr, code, signal, truncated, processId}` with
/// metadata `{sandboxId, exitCode, truncated}`.
pub(super) async fn run_shell(sandbox: &Sandbox, command: &str, cwd: &str, limit: Option<Duration>, ctx: &CallCtx) -> Result<ToolOutput, ToolError> {
    let mut options = RunOptions::default().max_output_bytes(MAX_STREAM_BYTES).cancel(ctx.cancel.clone());
    if let Some(limit) = limit {
        options = options.timeout(limit);
    }
    let out = sandbox.processes().run(shell(command).cwd(cwd), options).await.map_err(run_error)?;
    let body = json!({
        "stdout": out.stdout_lossy(),
        "stderr": out.stderr_lossy(),
        "code": out.exit_code,
        "signal": out.signal,
        "truncated": out.truncated,
        "processId": out.process_id,
    });
    Ok(ToolOutput::json(body)
        .with("sandboxId", sandbox.id())
        .with("exitCode", out.exit_code)
        .with("truncated", out.truncated))
}

pub(super) async fn exec(rt: &Arc<Runtime>, args: &Args, ctx: &CallCtx) -> Result<ToolOutput, ToolError> {
    let command = args.str("command")?;
    let limit = deadline(rt, args);
    let cwd = args.opt_str("cwd").map(normalize_abs).transpose().map_err(ToolError::InvalidArgs)?;
    let (sandbox, is_session) = target(rt, args, ctx).await?;
    let cwd = cwd.unwrap_or_else(|| if is_session { rt.config().cwd.clone() } else { EXPLICIT_CWD.to_string() });
    run_shell(&sandbox, command, &cwd, limit, ctx).await
}
