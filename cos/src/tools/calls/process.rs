//! `sandbox_process_*`: background managed processes that outlive the call.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;

use super::exec::MAX_STREAM_BYTES;
use super::{named, run_error, to_json, ToolOutput};
use crate::tools::args::Args;
use crate::tools::config::normalize_abs;
use crate::tools::runtime::Runtime;
use crate::tools::{CallCtx, ToolError};
use createos_sandbox::api::processes::Process;
use createos_sandbox::stream::process_output::{OutputEvent, StreamKind};
use createos_sandbox::Error;

/// Grace between SIGTERM and SIGKILL when stopping.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// How long reading the retained output may take.
const OUTPUT_READ_LIMIT: Duration = Duration::from_secs(30);

fn process(rt: &Runtime, args: &Args) -> Result<Process, ToolError> {
    Ok(named(rt, args)?
        .processes()
        .handle(args.str("process_id")?)?)
}

pub(super) async fn start(
    rt: &Arc<Runtime>,
    args: &Args,
    ctx: &CallCtx,
) -> Result<ToolOutput, ToolError> {
    let sandbox = named(rt, args)?;
    let cwd =
        normalize_abs(args.opt_str("cwd").unwrap_or("/root")).map_err(ToolError::InvalidArgs)?;
    // Unlike exec, stdin stays open: sandbox_process_input feeds it.
    let spec = createos_sandbox::api::processes::ProcessSpec::shell(args.str("command")?).cwd(cwd);
    let started = sandbox.processes().start(spec).await.map_err(run_error)?;
    if ctx.cancel.is_cancelled() {
        // The caller gave up while it was starting: do not leave an orphan behind.
        started.stop(Some(STOP_GRACE)).await.map_err(run_error)?;
        return Err(ToolError::Cancelled);
    }
    let details = started.details();
    Ok(ToolOutput::json(
        json!({"process_id": details.process_id, "pid": details.pid, "state": details.state}),
    )
    .with("sandboxId", sandbox.id()))
}

pub(super) async fn list(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    let sandbox = named(rt, args)?;
    Ok(
        ToolOutput::json(to_json(sandbox.processes().list().await?)?)
            .with("sandboxId", sandbox.id()),
    )
}

pub(super) async fn get(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    let p = process(rt, args)?;
    Ok(ToolOutput::json(to_json(p.info().await?)?).with("sandboxId", p.sandbox().id()))
}

pub(super) async fn stop(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    let p = process(rt, args)?;
    Ok(ToolOutput::json(to_json(p.stop(Some(STOP_GRACE)).await?)?)
        .with("sandboxId", p.sandbox().id()))
}

pub(super) async fn input(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    let p = process(rt, args)?;
    let written = p.write_input(args.str("text")?.as_bytes()).await?;
    Ok(ToolOutput::json(json!({"bytes": written.bytes})).with("sandboxId", p.sandbox().id()))
}

pub(super) async fn close_stdin(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    let p = process(rt, args)?;
    p.close_stdin().await?;
    Ok(ToolOutput::json(json!({"closed": true})).with("sandboxId", p.sandbox().id()))
}

/// What the journal holds now: read up to the newest sequence number at the time of asking,
/// never waiting for output that does not exist yet.
pub(super) async fn output(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    let p = process(rt, args)?;
    let details = p.info().await?;
    let newest = details.output.newest_seq;
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let mut truncated = details.output.oldest_seq > 1;
    if newest > 0 {
        let read = async {
            let mut events = p.connect(0).await?;
            while let Some(event) = events.next().await {
                match event? {
                    OutputEvent::Data { seq, stream, bytes } => {
                        let into = if stream == StreamKind::Stderr {
                            &mut stderr
                        } else {
                            &mut stdout
                        };
                        let room = MAX_STREAM_BYTES.saturating_sub(into.len());
                        into.extend_from_slice(&bytes[..bytes.len().min(room)]);
                        truncated |= bytes.len() > room;
                        if seq >= newest {
                            break;
                        }
                    }
                    OutputEvent::Gap { .. } => truncated = true,
                    OutputEvent::Exit { .. } => break,
                    OutputEvent::Error(message) => {
                        tracing::warn!(%message, "process output reported an error")
                    }
                }
            }
            Ok::<(), Error>(())
        };
        tokio::time::timeout(OUTPUT_READ_LIMIT, read)
            .await
            .map_err(|_| ToolError::Timeout(OUTPUT_READ_LIMIT))??;
    }
    let body = json!({
        "stdout": String::from_utf8_lossy(&stdout),
        "stderr": String::from_utf8_lossy(&stderr),
        "state": details.state,
        "exit_code": details.exit_code,
        "truncated": truncated,
    });
    Ok(ToolOutput::json(body)
        .with("sandboxId", p.sandbox().id())
        .with("truncated", truncated))
}
