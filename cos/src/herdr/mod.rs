//! Herdr integration: the actions of the `createos.sandbox` Herdr plugin, implemented natively
//! (`cos herdr <action>`), and `cos setup herdr`.
//!
//! One pane maps to one sandbox. `start` opens a pane in which `provision` creates the
//! sandbox, uploads the Git worktree through the [`createos_sandbox::snapshot`] filters, commits a
//! baseline, installs the agent and starts its PTY at the pane's size, then attaches to it
//! natively ([`createos_sandbox::pty::attach`]). `apply` brings the sandbox's work back as a Git patch;
//! `delete` needs a second invocation within 60 s. Every action ends with one
//! [`result::RESULT_PREFIX`] line, on failure too.
//!
//! State lives in `HERDR_PLUGIN_STATE_DIR` ([`state`]), settings in the plugin's
//! `config.json` ([`config`]).

pub mod actions;
pub mod agents;
pub mod apply;
pub mod command;
pub mod config;
pub mod context;
pub mod error;
pub mod events;
pub mod host;
pub mod keymap;
pub mod keys;
pub mod provision;
pub mod reattach;
pub mod result;
pub mod setup;
pub mod state;

pub use error::{HerdrError, HerdrResult};
pub use result::{ActionResult, RESULT_PREFIX};

/// The plugin's id in Herdr.
pub const PLUGIN_ID: &str = "createos.sandbox";
/// Oldest Herdr the plugin works with.
pub const MIN_HERDR_VERSION: (u64, u64, u64) = (0, 7, 5);
/// The manifest, as shipped in `integrations/herdr/`.
pub const MANIFEST: &str = include_str!("../../../integrations/herdr/herdr-plugin.toml");
