//! The control plane's resources, one module each: wire models and the methods that call them.
//!
//! Conventions every module follows:
//! - models tolerate missing fields (`Option` or `#[serde(default)]`) except identifiers, keep
//!   unknown enum values (status-style enums such as [`crate::SandboxStatus`] carry an
//!   `Other(String)` arm), and use 64-bit
//!   integers for byte counters and sequence numbers;
//! - inputs are validated with [`crate::validate`] before a request is built;
//! - every request goes through a constant of [`endpoints`].

pub mod catalog;
mod command;
pub mod computer;
pub mod devices;
pub mod disks;
pub use crate::transport::endpoints;
pub mod exec;
pub mod files;
pub mod metrics;
pub mod networks;
pub mod processes;
pub mod sandboxes;
pub mod security;
pub mod templates;
pub mod tokens;

use serde::{Deserialize, Serialize};

/// `{"ok": true}` acknowledgement of action routes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OkResponse {
    /// Always true on success.
    #[serde(default)]
    pub ok: bool,
}

/// `open_enum!` (declared in `crate::macros`, below every layer), where the resource modules
/// find it.
pub(crate) use crate::macros::open_enum;
