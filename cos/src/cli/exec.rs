//! `cos exec` and `cos run`: output streams as it comes, the remote exit code becomes ours.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Args;
use futures::StreamExt;
use serde_json::json;

use createos_sandbox::api::exec::{ExecEvent, ExecRequest};
use createos_sandbox::{jobs, Sandbox};

use super::sandbox::{label, SandboxOptions};
use super::{parse_kv, resolve, Ctx};

#[derive(Debug, Args)]
pub struct CommandArgs {
    /// Feed this file to the command's stdin (`-` for our stdin).
    #[arg(long, value_name = "FILE")]
    pub stdin: Option<PathBuf>,
    /// Run the words as one script through `bash -lc` (pipes, globs, redirections).
    #[arg(long)]
    pub shell: bool,
    /// The command and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
}

impl CommandArgs {
    fn request(&self, env: &[(String, String)]) -> Result<ExecRequest> {
        let mut req = if self.shell {
            ExecRequest::shell(self.command.join(" "))
        } else {
            ExecRequest::new(&self.command[0]).args(self.command[1..].iter().cloned())
        };
        for (k, v) in env {
            req = req.env(k, v);
        }
        if let Some(path) = &self.stdin {
            let data = if path.as_os_str() == "-" {
                let mut buf = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut buf)
                    .context("reading stdin")?;
                buf
            } else {
                std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?
            };
            req = req.stdin(data);
        }
        Ok(req)
    }
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// Per-command environment override (repeatable; the key must be declared at create).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE", value_parser = parse_kv)]
    pub env: Vec<(String, String)>,
    #[command(flatten)]
    pub cmd: CommandArgs,
}

pub async fn exec(ctx: &Ctx, args: ExecArgs) -> Result<ExitCode> {
    let req = args.cmd.request(&args.env)?;
    on_sandbox(ctx, &args.sandbox, |sb| {
        let req = req.clone();
        async move { stream_command(ctx, &sb, req).await }
    })
    .await
}

/// Run `work` on the sandbox `reference` names. An id is used as it is, with no lookup
/// request; only when the control plane answers 404 (the id may be another sandbox's name, or
/// wrong) is it resolved like a name and `work` run once more — a 404 means nothing ran.
pub(super) async fn on_sandbox<T, F, Fut>(ctx: &Ctx, reference: &str, work: F) -> Result<T>
where
    F: Fn(Sandbox) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let reference = reference.trim();
    // `sb-…` ids, as `resolve` tells them apart from names.
    if !(reference.starts_with("sb-") || reference.starts_with("sb_")) {
        return work(resolve::sandbox(&ctx.client, reference).await?).await;
    }
    match work(ctx.client.sandbox(reference)?).await {
        Err(err) if matches!(err.downcast_ref::<createos_sandbox::Error>(), Some(e) if e.is_not_found()) => {
            work(resolve::sandbox(&ctx.client, reference).await?).await
        }
        other => other,
    }
}

/// Run `req` in `sb`: stream stdout/stderr through, or with an explicit `-o json` collect them into
/// one JSON document (output stays raw when stdout is merely a pipe, so `cos exec … > file`
/// works), and return the remote exit code.
async fn stream_command(ctx: &Ctx, sb: &Sandbox, req: ExecRequest) -> Result<ExitCode> {
    if ctx.out.explicit_json {
        let out = sb.exec_with(req).await?;
        ctx.out.value(&json!({
            "sandbox": sb.id(),
            "exit_code": out.exit_code,
            "stdout": out.stdout,
            "stderr": out.stderr,
            "error": out.error,
            "exec_ms": out.exec_ms,
        }));
        return Ok(exit_code(out.exit_code));
    }
    let mut events = sb.exec_stream(req).await?;
    let mut code = None;
    while let Some(event) = events.next().await {
        match event? {
            ExecEvent::Stdout(text) => {
                let mut o = std::io::stdout().lock();
                o.write_all(text.as_bytes())?;
                o.flush()?;
            }
            ExecEvent::Stderr(text) => {
                let mut e = std::io::stderr().lock();
                e.write_all(text.as_bytes())?;
                e.flush()?;
            }
            ExecEvent::Error(message) => anyhow::bail!("the command could not run: {message}"),
            ExecEvent::Exit(c) => code = Some(c),
        }
    }
    let code = code.context("the output stream ended without an exit code")?;
    Ok(exit_code(code))
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(if code < 0 { 128 } else { 255 }))
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub options: SandboxOptions,
    /// Keep the sandbox afterwards (its id is printed).
    #[arg(long)]
    pub keep: bool,
    #[command(flatten)]
    pub cmd: CommandArgs,
}

/// Create → exec → destroy. The sandbox is destroyed on success, on failure and on Ctrl-C/SIGTERM,
/// unless `--keep`; what is kept is named on stderr. The signals are handled before the create
/// is sent: a Ctrl-C during the create waits for its answer and destroys what it brings (a lost
/// answer is looked up by the sandbox's name; see [`jobs::create_reclaimable`]).
pub async fn run(ctx: &Ctx, args: RunArgs) -> Result<ExitCode> {
    let cancel = super::jobs::cancel_on_signal()?;
    let req = args.cmd.request(&[])?;
    let create = args.options.request(ctx, None).await?;
    if cancel.is_cancelled() {
        return Ok(ExitCode::from(130));
    }
    let sb = match jobs::create_reclaimable(&ctx.client, create, "cos-run").await {
        Ok(sb) => sb,
        Err(failed) if cancel.is_cancelled() && failed.left_nothing() => {
            return Ok(ExitCode::from(130))
        }
        Err(failed) => return Err(super::jobs::create_error(failed, "creating the sandbox")),
    };
    if !ctx.out.json {
        ctx.out.note(format!("created {}", label(&sb)));
    }
    let outcome = tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(anyhow::anyhow!(createos_sandbox::Error::Cancelled)),
        r = stream_command(ctx, &sb, req) => r,
    };
    if args.keep {
        ctx.out.note(format!(
            "kept {} (destroy it with `cos rm --yes {}`)",
            label(&sb),
            sb.id()
        ));
    } else {
        let cleanup = sb.destroy().await;
        match (&outcome, cleanup) {
            (_, Ok(_)) => {
                if !ctx.out.json {
                    ctx.out.note(format!("destroyed {}", sb.id()));
                }
            }
            (Ok(_), Err(e)) => {
                return Err(anyhow::Error::from(e).context(format!("destroying {}", sb.id())))
            }
            (Err(_), Err(e)) => ctx
                .out
                .note(format!("warning: could not destroy {}: {e}", sb.id())),
        }
    }
    match outcome {
        Err(e) if matches!(e.downcast_ref(), Some(createos_sandbox::Error::Cancelled)) => {
            Ok(ExitCode::from(130))
        }
        other => other,
    }
}
