//! The faces of createos-sandbox: the `cos` command line ([`cli`]), the MCP sidecar `cos mcp`
//! ([`mcp`] over the agent tool catalog and session runtime in [`tools`]) and the Herdr actions
//! ([`herdr`]). Everything they do goes through the core library, `createos_sandbox`, which
//! knows none of them.

pub mod cli;
pub mod herdr;
pub mod mcp;
pub mod signals;
pub mod tools;
