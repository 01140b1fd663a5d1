//! Calls of the jobs tools.

use std::sync::Arc;

use super::super::args::Args;
use super::super::runtime::Runtime;
use super::super::{CallCtx, ToolError, ToolOutput};

/// Whether `short` (a tool name without the prefix) is one of these tools.
pub(super) fn handles(_short: &str) -> bool {
    false
}

/// Run one of these tools. Handles its own deadline and cancellation.
pub(super) async fn call(_rt: &Arc<Runtime>, short: &str, _args: &Args, _ctx: &CallCtx) -> Result<ToolOutput, ToolError> {
    Err(ToolError::UnknownTool(short.to_string()))
}
