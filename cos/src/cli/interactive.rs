//! `cos attach`, `cos shell`, `cos tunnel`: a local terminal or port bridged to a sandbox.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Args;
use futures::StreamExt;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use createos_sandbox::api::processes::ProcessSpec;
use createos_sandbox::pty::attach::{attach as bridge, AttachOptions, AttachOutcome};
use createos_sandbox::pty::tty::{self, RawMode};
use createos_sandbox::tunnel::TunnelListener;

use super::{resolve, Ctx};

/// Terminal size used when stdin is not a terminal.
const FALLBACK_SIZE: (u16, u16) = (24, 80);

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// Managed process to attach to (default: a new login shell).
    pub process: Option<String>,
    /// Show output after this sequence only (the detach message prints the value to reuse).
    #[arg(long, default_value_t = 0)]
    pub after: u64,
}

/// Attach the terminal to a PTY process. Ctrl-] detaches and prints how to come back; the exit
/// code is the remote process's.
pub async fn attach(ctx: &Ctx, args: AttachArgs) -> Result<ExitCode> {
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let size = tty::size_or(FALLBACK_SIZE);
    let process = match &args.process {
        Some(id) => sb.processes().get(id).await?,
        None => {
            let p = sb
                .processes()
                .start(ProcessSpec::pty_shell(size.0, size.1))
                .await?;
            eprintln!("started {} in {}", p.id(), sb.id());
            p
        }
    };
    let interactive = std::io::stdin().is_terminal();
    let raw = if interactive {
        Some(RawMode::enable()?)
    } else {
        None
    };
    let outcome = bridge(
        &process,
        tokio::io::stdin(),
        tokio::io::stdout(),
        tty::sizes(FALLBACK_SIZE),
        AttachOptions {
            after: args.after,
            ..Default::default()
        },
    )
    .await;
    drop(raw);
    let outcome = outcome?;
    match &outcome {
        AttachOutcome::Detached { last_seq } => {
            eprintln!(
                "\r\ndetached from {} (still running). Reattach: cos attach {} {} --after {last_seq}",
                process.id(),
                sb.id(),
                process.id()
            );
        }
        AttachOutcome::Exited { code, signal } => {
            if ctx.out.explicit_json {
                ctx.out.value(
                    &json!({ "process": process.id(), "exit_code": code, "signal": signal }),
                );
            }
        }
    }
    Ok(ExitCode::from(
        u8::try_from(outcome.exit_status()).unwrap_or(1),
    ))
}

#[derive(Debug, Args)]
pub struct ShellArgs {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// Use the WebSocket route (`/shell-ws`) instead of the raw upgrade.
    #[arg(long)]
    pub ws: bool,
}

/// A keyless shell over `/shell`: ends when either side closes.
pub async fn shell(ctx: &Ctx, args: ShellArgs) -> Result<ExitCode> {
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let (rows, cols) = tty::size_or(FALLBACK_SIZE);
    let session = if args.ws {
        sb.shell_ws(rows, cols).await?
    } else {
        sb.shell(rows, cols).await?
    };
    let (mut output, mut input, control) = session.into_parts();
    let raw = if std::io::stdin().is_terminal() {
        Some(RawMode::enable()?)
    } else {
        None
    };
    let mut sizes = tty::sizes(FALLBACK_SIZE);
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let to_remote = async {
        tokio::io::copy(&mut stdin, &mut input).await?;
        // Our input ended (a pipe ran dry): type an end-of-file (Ctrl-D) for the remote
        // terminal, as closing a terminal's input would, and keep the connection open until
        // the shell closes it.
        input.write_all(&[0x04]).await?;
        input.flush().await
    };
    let from_remote = async {
        while let Some(chunk) = output.next().await {
            stdout.write_all(&chunk?).await?;
            stdout.flush().await?;
        }
        Ok::<_, std::io::Error>(())
    };
    let follow_size = async {
        while let Some((r, c)) = sizes.next().await {
            if control.resize(r, c).await.is_err() {
                break;
            }
        }
        std::future::pending::<()>().await
    };
    tokio::pin!(to_remote, from_remote, follow_size);
    let result = tokio::select! {
        r = &mut from_remote => r,
        r = &mut to_remote => match r {
            // Our input ended: keep printing until the shell closes the session.
            Ok(()) => from_remote.await,
            Err(e) => Err(e),
        },
        _ = &mut follow_size => Ok(()),
    };
    drop(raw);
    result.context("shell session")?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Args)]
pub struct TunnelArgs {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// Port in the sandbox.
    #[arg(long)]
    pub remote: u16,
    /// Local address or port to listen on (default 127.0.0.1:0, an ephemeral port).
    #[arg(long, value_parser = parse_local)]
    pub local: Option<SocketAddr>,
}

fn parse_local(s: &str) -> std::result::Result<SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse()
        .map_err(|_| format!("{s:?} is neither a port nor host:port"))
}

/// Forward a local port to a sandbox port until Ctrl-C.
pub async fn tunnel(ctx: &Ctx, args: TunnelArgs) -> Result<ExitCode> {
    createos_sandbox::validate::port("remote", u32::from(args.remote))?;
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let listener = TunnelListener::bind(&sb, args.remote, args.local).await?;
    let local = listener.local_addr();
    let doc = json!({ "sandbox": sb.id(), "local": local.to_string(), "remote": args.remote });
    ctx.out.show(&doc, || {
        format!(
            "forwarding {local} → {}:{} (Ctrl-C to stop)",
            sb.id(),
            args.remote
        )
    });
    let mut signals =
        crate::signals::StopSignals::install(false).context("installing the Ctrl-C handler")?;
    let mut running = listener.spawn();
    signals.recv().await;
    running.stop().await?;
    Ok(ExitCode::SUCCESS)
}
