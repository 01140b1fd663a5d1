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

/// Declare a string enum that keeps values this client does not know yet.
macro_rules! open_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $wire:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
            /// A value this client does not know.
            Other(String),
        }

        impl $name {
            /// The wire string.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $wire,)+
                    $name::Other(s) => s,
                }
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $($wire => $name::$variant,)+
                    other => $name::Other(other.to_string()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                Ok($name::from(s.as_ref()))
            }
        }
    };
}
pub(crate) use open_enum;
