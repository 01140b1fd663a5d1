//! `cos mcp`: serve the agent tools over MCP on stdio.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Args;
use serde_json::{Map, Value};

use crate::tools::runtime::SignIn;
use crate::tools::store::BindingStore;
use crate::tools::{Runtime, ToolsConfig};
use createos_sandbox::Client;

use super::Ctx;

/// Options of `cos mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// Session used by calls whose `_meta` names none (`createos/session`).
    #[arg(long, default_value = "default", env = "CREATEOS_MCP_SESSION")]
    session: String,
    /// Host project directory the session bindings are keyed by (default: the current directory).
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
    /// Where bindings are kept (default: the user's state directory, else data directory).
    #[arg(long, value_name = "DIR", env = "CREATEOS_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// Tool options as a JSON object: shape, rootfs, cwd, network, autoPause, persist, timeout.
    /// Environment variables (CREATEOS_SHAPE, …) override them; unknown keys are refused.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    options: String,
    /// Allow sandbox_exec and the routed native tools against a local emulator that cannot
    /// isolate its sandboxes (their commands then run on this machine as you).
    #[arg(long)]
    unsafe_host: bool,
}

/// Whether building the client failed only because no credential exists yet.
pub fn signed_out(err: &anyhow::Error) -> bool {
    matches!(
        err.downcast_ref(),
        Some(createos_sandbox::Error::NotSignedIn(_))
    )
}

/// Run the server. Errors go to stderr, never stdout, which belongs to the protocol (even with
/// `-o json`).
pub async fn mcp(ctx: &Ctx, args: McpArgs) -> ExitCode {
    match serve(ctx, args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

async fn serve(ctx: &Ctx, args: McpArgs) -> Result<()> {
    let options: Map<String, Value> =
        match serde_json::from_str(&args.options).context("--options is not JSON")? {
            Value::Object(map) => map,
            _ => anyhow::bail!("--options must be a JSON object"),
        };
    let config = ToolsConfig::resolve(&options, |k| std::env::var(k).ok())?;
    let project = match args.project {
        Some(p) => p,
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let project = std::fs::canonicalize(&project)
        .with_context(|| format!("project directory {}", project.display()))?;
    crate::tools::staging::check_skill_dirs(&config, &project)?;
    let state_dir = match args.state_dir {
        Some(dir) => dir,
        None => BindingStore::default_state_dir()
            .context("no state or data directory for this user; pass --state-dir")?,
    };
    // Signed out is a state, not a failure: the tools are listed, and each call that needs
    // the control plane says how to sign in until a credential appears (read again before
    // each use, so `createos login` in another terminal is picked up without a restart).
    let sign_in: Option<SignIn> = ctx.client.credentials().is_none().then(|| {
        let base = ctx.client.base_url().to_string();
        Box::new(move || Client::builder().base_url(&base).build()) as SignIn
    });
    if sign_in.is_some() {
        tracing::warn!("not signed in: tools that need the control plane fail until you run `createos login` or set CREATEOS_API_KEY");
    }
    let runtime = Runtime::with_sign_in(ctx.client.clone(), sign_in, config, state_dir, project);
    if args.unsafe_host {
        runtime.allow_unsafe_host();
    }
    crate::mcp::serve_stdio(runtime, args.session).await?;
    Ok(())
}
