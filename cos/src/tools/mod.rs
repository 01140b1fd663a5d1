//! The agent tools: the catalog of `sandbox_*` tools with their JSON Schemas ([`catalog`]),
//! the session runtime ([`runtime`]: bindings, single-flight allocation, persistence,
//! release), and the calls themselves ([`calls`]). Faces such as `cos mcp` only translate
//! their protocol to [`call`].

pub mod args;
pub mod background;
pub mod calls;
pub mod catalog;
pub mod config;
pub mod confine;
pub mod isolation;
pub mod progress;
pub mod runtime;
pub mod staging;
pub mod store;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

pub use calls::call;
pub use config::{ConfigError, ToolsConfig};
pub use runtime::Runtime;

/// Why a tool call failed. The message is what the agent sees.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not fit the tool's schema or rules.
    #[error("invalid arguments: {0}")]
    InvalidArgs(String),
    /// No tool of that name.
    #[error("unknown tool {0:?}")]
    UnknownTool(String),
    /// The runtime refused (release while busy, changed configuration, …).
    #[error("{0}")]
    Refused(String),
    /// The caller cancelled; remote work was stopped.
    #[error("cancelled")]
    Cancelled,
    /// The deadline passed; remote work was stopped.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The control plane or the transport failed.
    #[error(transparent)]
    Api(#[from] createos_sandbox::Error),
    /// A job failed after its checks; the text names its sandbox and what became of it, and
    /// the library error stays its source.
    #[error(transparent)]
    Job(Box<createos_sandbox::jobs::JobError>),
    /// Reading or writing the binding store failed.
    #[error("session binding store: {0}")]
    Store(#[from] std::io::Error),
    /// A bug or a crashed task.
    #[error("internal error: {0}")]
    Internal(String),
}

/// One piece of a tool result.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    /// Plain text.
    Text(String),
    /// A JSON value (rendered pretty-printed).
    Json(Value),
    /// A PNG image.
    Png(Vec<u8>),
}

/// The result of a successful call: content plus metadata (sandbox id, exit code, truncated).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolOutput {
    /// Content parts.
    pub content: Vec<Part>,
    /// Metadata for the client.
    pub meta: Map<String, Value>,
}

impl ToolOutput {
    /// A JSON result.
    pub fn json(value: Value) -> Self {
        ToolOutput {
            content: vec![Part::Json(value)],
            meta: Map::new(),
        }
    }

    /// Add a metadata entry.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.meta.insert(key.to_string(), value.into());
        self
    }
}

/// Receives human-readable progress messages of a running call (MCP: `notifications/progress`).
/// Called from the call's task, so it must not block.
pub type ProgressSink = Arc<dyn Fn(String) + Send + Sync>;

/// Who is calling and how to stop it.
#[derive(Clone)]
pub struct CallCtx {
    /// Session id: each session gets its own sandbox.
    pub session: String,
    /// Cancelled when the caller gives up or the runtime shuts down.
    pub cancel: CancellationToken,
    /// Where progress goes, when the caller asked for it.
    pub progress: Option<ProgressSink>,
}

impl CallCtx {
    /// A caller in `session`, stopped by `cancel`, without progress reports.
    pub fn new(session: impl Into<String>, cancel: CancellationToken) -> Self {
        CallCtx {
            session: session.into(),
            cancel,
            progress: None,
        }
    }

    /// Report progress to the caller, if it listens.
    pub fn report(&self, message: impl Into<String>) {
        if let Some(sink) = &self.progress {
            sink(message.into());
        }
    }
}

impl std::fmt::Debug for CallCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallCtx")
            .field("session", &self.session)
            .field("cancelled", &self.cancel.is_cancelled())
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// Shared handle used by the faces.
pub type SharedRuntime = Arc<Runtime>;
