//! `cos mcp`: the agent tools over the Model Context Protocol on stdio (official `rmcp` SDK).
//!
//! Nothing but protocol goes to stdout; logs go to stderr. `tools/list` is the catalog,
//! `tools/call` runs a tool through the session runtime, and `notifications/cancelled`
//! cancels that call's token, which stops any remote process it started.
//!
//! With a `progressToken`, a call sends `notifications/progress` at least every few seconds
//! until it ends; without one, nothing. Signed out, the server still starts and lists its
//! tools; calls that need the control plane fail with how to sign in until a credential
//! appears (`cos mcp --unsafe-host` and the isolation check: `tools::isolation`).
//!
//! Sessions: a call's session id is `_meta["createos/session"]` of the `tools/call` request
//! (what the OpenCode plugin passes), else `_meta["sessionId"]` (a fallback for other clients
//! that name their session that way), else the server's default session. Each session gets its own sandbox.
//!
//! Remote mode (`mode: "remote"`): `tools/list` also lists the routed native tools
//! `native_bash`, `native_read`, `native_write`, `native_edit`, `native_apply_patch`,
//! `native_glob` and `native_grep` (OpenCode's argument shapes; `native_shell` and
//! `native_patch` are accepted aliases), which run OpenCode's shell and file tools in the
//! session sandbox. See `tools::calls::native_tools` for their arguments and results.

use std::sync::Arc;

use base64::Engine;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, MetaObject, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

use crate::signals::StopSignals;
use crate::tools::config::Mode;
use crate::tools::{self, catalog, CallCtx, Part, ProgressSink, Runtime, ToolError, ToolOutput};

/// `_meta` key naming the session of a `tools/call`.
pub const SESSION_META_KEY: &str = "createos/session";

/// Fallback `_meta` key for the session id, read when [`SESSION_META_KEY`] is absent: some
/// MCP clients name their session `sessionId`. (The OpenCode plugin sends
/// [`SESSION_META_KEY`].)
pub const FALLBACK_SESSION_META_KEY: &str = "sessionId";

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum McpServeError {
    /// The client never completed the handshake (or stdin closed first).
    #[error("MCP initialization failed: {0}")]
    Initialize(String),
    /// The service task crashed.
    #[error("MCP service stopped abnormally: {0}")]
    Service(String),
}

/// The MCP face of the tool runtime.
pub struct McpServer {
    runtime: Arc<Runtime>,
    default_session: String,
    tools: Vec<Tool>,
}

impl McpServer {
    /// A server over `runtime`; calls without a session id use `default_session`.
    pub fn new(runtime: Arc<Runtime>, default_session: impl Into<String>) -> Self {
        let mut defs = catalog::catalog();
        // Routed native tools exist only where the plugin routes them: remote mode.
        if runtime.config().mode == Mode::Remote {
            defs.extend(tools::calls::native_tools());
        }
        let tools = defs
            .into_iter()
            .map(|def| {
                let schema = match def.input_schema {
                    Value::Object(map) => map,
                    _ => Default::default(),
                };
                Tool::new(def.name, def.description, Arc::new(schema))
            })
            .collect();
        McpServer {
            runtime,
            default_session: default_session.into(),
            tools,
        }
    }
}

const INSTRUCTIONS: &str = "CreateOS sandboxes: remote Linux machines. Each MCP session gets its own sandbox, created on the first call that needs it (sandbox_exec without sandbox_id) and kept across restarts; sandbox_release destroys it. Use sandbox_exec for a command that finishes, sandbox_process_start for servers and background work. Egress is unrestricted by default; sandbox_firewall takes IP/CIDR rules only. Preview URLs are unverified until you check them. File tools (sandbox_read, sandbox_write, sandbox_edit, sandbox_patch, sandbox_glob, sandbox_grep) work on the session sandbox's working directory; sandbox_push and sandbox_pull move files and directories between this machine and a sandbox.";

/// Added to the instructions in remote mode.
const REMOTE_INSTRUCTIONS: &str = " Remote mode: the native_* tools run the shell and file tools in this session's sandbox, never on this machine.";

fn render(output: ToolOutput) -> CallToolResult {
    let content = output
        .content
        .into_iter()
        .map(|part| match part {
            Part::Text(text) => ContentBlock::text(text),
            Part::Json(value) => ContentBlock::text(
                serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string()),
            ),
            Part::Png(bytes) => ContentBlock::image(
                base64::engine::general_purpose::STANDARD.encode(bytes),
                "image/png",
            ),
        })
        .collect();
    let meta = (!output.meta.is_empty()).then_some(MetaObject(output.meta));
    CallToolResult::success(content).with_meta(meta)
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cos", env!("CARGO_PKG_VERSION")))
            .with_instructions(match self.runtime.config().mode {
                Mode::Remote => format!("{INSTRUCTIONS}{REMOTE_INSTRUCTIONS}"),
                Mode::Local => INSTRUCTIONS.to_string(),
            })
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let named = |key: &str| {
            context
                .meta
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        let session = named(SESSION_META_KEY)
            .or_else(|| named(FALLBACK_SESSION_META_KEY))
            .unwrap_or(&self.default_session)
            .to_string();
        // The call's token: cancelled by notifications/cancelled or by shutdown.
        let cancel = self.runtime.lifetime().child_token();
        let link = {
            let (peer, mine) = (context.ct.clone(), cancel.clone());
            tokio::spawn(async move {
                tokio::select! {
                    _ = peer.cancelled() => mine.cancel(),
                    _ = mine.cancelled() => {}
                }
            })
        };
        let name = request.name.to_string();
        tracing::debug!(tool = %name, %session, "tools/call");
        let (progress, forwarder) = progress_forwarder(&context);
        let ctx = CallCtx {
            session,
            cancel: cancel.clone(),
            progress,
        };
        let result = tools::call(&self.runtime, &name, request.arguments, ctx).await;
        link.abort();
        if let Some(forwarder) = forwarder {
            // Progress reports go out before the result. The sink is dropped with the call, so
            // the forwarder ends; a sink kept alive by a stray task must not hold the answer up.
            let abort = forwarder.abort_handle();
            if tokio::time::timeout(PROGRESS_FLUSH, forwarder)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        match result {
            Ok(output) => Ok(render(output).into()),
            Err(ToolError::UnknownTool(name)) => Err(ErrorData::invalid_params(
                format!("unknown tool {name:?}"),
                None,
            )),
            Err(err) => {
                tracing::info!(tool = %name, error = %err, "tool call failed");
                Ok(CallToolResult::error(vec![ContentBlock::text(err.to_string())]).into())
            }
        }
    }
}

/// Longest wait for queued progress notifications once a call has finished.
const PROGRESS_FLUSH: std::time::Duration = std::time::Duration::from_millis(500);

/// When the request carries a `progressToken`: a sink that queues messages, and the task that
/// sends them in order as `notifications/progress` (progress counts the messages).
fn progress_forwarder(
    context: &RequestContext<RoleServer>,
) -> (Option<ProgressSink>, Option<tokio::task::JoinHandle<()>>) {
    let Some(token) = context.meta.get_progress_token() else {
        return (None, None);
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let peer = context.peer.clone();
    let forwarder = tokio::spawn(async move {
        let mut sent = 0u32;
        while let Some(message) = rx.recv().await {
            sent += 1;
            let mut note = ProgressNotificationParam::new(token.clone(), f64::from(sent));
            note.message = Some(message);
            if peer.notify_progress(note).await.is_err() {
                break;
            }
        }
    });
    let sink: ProgressSink = Arc::new(move |message: String| {
        let _ = tx.send(message);
    });
    (Some(sink), Some(forwarder))
}

/// Serve `runtime` on stdin/stdout until the client disconnects or SIGINT/SIGTERM, then shut
/// the runtime down (cancelling in-flight calls; destroying owned sandboxes without `persist`).
pub async fn serve_stdio(
    runtime: Arc<Runtime>,
    default_session: String,
) -> Result<(), McpServeError> {
    let server = McpServer::new(runtime.clone(), default_session);
    let result = async {
        let running = server.serve(rmcp::transport::stdio()).await.map_err(|e| McpServeError::Initialize(e.to_string()))?;
        let token = running.cancellation_token();
        let mut signals = StopSignals::install_or_ctrl_c(false);
        let stop = async {
            signals.recv().await;
            tracing::info!("signal received; stopping the MCP server");
            token.cancel();
        };
        tokio::select! {
            quit = running.waiting() => { quit.map_err(|e| McpServeError::Service(e.to_string()))?; }
            _ = stop => {}
        }
        Ok(())
    }
    .await;
    runtime.shutdown().await;
    result
}
