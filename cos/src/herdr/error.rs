//! Errors of the Herdr actions.

use std::path::PathBuf;

/// What can go wrong in a Herdr action. Messages say what failed and what to do next.
#[derive(Debug, thiserror::Error)]
pub enum HerdrError {
    /// A control-plane or transfer call failed.
    #[error(transparent)]
    Api(#[from] createos_sandbox::Error),
    /// A variable Herdr injects is missing: the action was not launched by Herdr.
    #[error("{0} is not set: run this action through Herdr (herdr plugin action invoke …)")]
    NotInHerdr(&'static str),
    /// The plugin's `config.json` (or a setting in it) is wrong.
    #[error("config {path}: {message}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A value given to an action is wrong (checked before anything is created).
    #[error("invalid {field}: {message}")]
    Invalid {
        /// What was given.
        field: String,
        /// Why it is refused.
        message: String,
    },
    /// The state file cannot be used as it is.
    #[error("state {path}: {message}")]
    State {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Another action holds the state lock, or a start for this pane is in progress.
    #[error("{0}")]
    Busy(String),
    /// The pane has no sandbox mapped to it.
    #[error("pane {0} has no CreateOS sandbox (run the start action first)")]
    NoMapping(String),
    /// A `herdr` command failed.
    #[error("herdr {command}: {message}")]
    Herdr {
        /// The subcommand, e.g. `pane split`.
        command: String,
        /// Its error output or exit status.
        message: String,
    },
    /// A local `git` command failed.
    #[error("git {command}: {message}")]
    Git {
        /// The subcommand.
        command: String,
        /// Its error output or exit status.
        message: String,
    },
    /// A step inside the sandbox failed.
    #[error("{step} failed in sandbox {sandbox}: {message}")]
    Remote {
        /// The step, e.g. `agent install`.
        step: String,
        /// The sandbox id.
        sandbox: String,
        /// What it printed or how it ended.
        message: String,
    },
    /// Local I/O failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl HerdrError {
    /// An [`HerdrError::Io`].
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        HerdrError::Io {
            what: what.into(),
            source,
        }
    }

    /// An [`HerdrError::Invalid`].
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        HerdrError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Result of the Herdr actions.
pub type HerdrResult<T> = std::result::Result<T, HerdrError>;
