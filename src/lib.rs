//! # createos-sandbox
//!
//! A typed async client for the CreateOS sandbox control plane. It reuses the credentials that
//! `createos login` stores (or `CREATEOS_API_KEY`), so the CLI is only needed to sign in.
//!
//! ```no_run
//! # async fn demo() -> createos_sandbox::Result<()> {
//! use createos_sandbox::{Client, CreateSandbox};
//!
//! let client = Client::from_env()?;
//! let sandbox = client.create_sandbox(CreateSandbox::new("s-1vcpu-1gb")).await?;
//! let out = sandbox.exec("uname", ["-a"]).await?;
//! println!("{}", out.stdout);
//! sandbox.destroy().await?;
//! # Ok(()) }
//! ```
//!
//! Layout: [`auth`] resolves credentials, [`transport`] sends requests (JSend, retries, pagination),
//! [`api`] holds one module per resource with its wire models and methods, [`stream`] decodes
//! NDJSON streams. The faces (the `cos` CLI, `cos mcp`, the Herdr actions) are the separate `cos`
//! package: nothing here depends on them.

#![warn(missing_docs)]

pub mod api;
pub mod auth;
pub mod client;
pub mod config;
pub mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod guest;
pub mod jobs;
mod macros;
pub mod pty;
pub mod shell;
pub mod snapshot;
pub mod ssh;
pub mod stream;
pub mod sync;
pub mod transfer;
pub mod transport;
pub mod tunnel;
pub mod validate;
pub mod wait;

pub use api::sandboxes::{
    CreateSandbox, Destroyed, DiskMountRequest, ForkOptions, ListSandboxes, NetworkRef, Resized,
    Sandbox, SandboxStatus, SandboxView, SshKeyCount, UpdateSandbox, WaitSchedule,
};
pub use auth::{CredentialKind, CredentialSource, Credentials};
pub use client::{Client, ClientBuilder};
pub use config::{Region, RetryPolicy};
pub use error::{ApiError, Error, Result};
pub use transport::pagination::Paginated;
