//! `cos process …`: managed processes that outlive the connection that started them.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use clap::{Args, Subcommand};
use futures::StreamExt;
use serde_json::json;

use createos_sandbox::api::processes::{ProcessDetails, ProcessSpec, Signal, WaitScope};
use createos_sandbox::stream::process_output::OutputEvent;

use super::output::table;
use super::{parse_kv, resolve, Ctx};

#[derive(Debug, Subcommand)]
pub enum ProcessCmd {
    /// Start a process (pipes, or a PTY with --pty).
    Start(StartArgs),
    /// List the sandbox's processes.
    #[command(alias = "list")]
    Ls { sandbox: String },
    /// Show one process.
    Get { sandbox: String, process: String },
    /// Print a process's output (what the server still holds), following it with --follow.
    Logs {
        sandbox: String,
        process: String,
        /// Only output after this sequence.
        #[arg(long, default_value_t = 0)]
        after: u64,
        /// Keep following until the process exits.
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// Send input (from --text, --file, or our stdin).
    Input {
        sandbox: String,
        process: String,
        #[arg(long, conflicts_with = "file")]
        text: Option<String>,
        #[arg(long)]
        file: Option<PathBuf>,
        /// Close the process's stdin afterwards.
        #[arg(long)]
        close: bool,
    },
    /// Send a signal (SIGINT, SIGTERM, SIGKILL, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH).
    Signal {
        sandbox: String,
        process: String,
        signal: String,
    },
    /// Resize a PTY process.
    Resize {
        sandbox: String,
        process: String,
        #[arg(long)]
        rows: u16,
        #[arg(long)]
        cols: u16,
    },
    /// Wait for the process (or its whole tree) to exit; exits with its code.
    Wait {
        sandbox: String,
        process: String,
        /// Wait for every descendant too.
        #[arg(long)]
        tree: bool,
        /// Give up after this many seconds.
        #[arg(long)]
        timeout: Option<u64>,
    },
    /// Stop the process tree (SIGTERM, then SIGKILL after the grace period).
    #[command(alias = "kill")]
    Stop {
        sandbox: String,
        process: String,
        /// Grace period in milliseconds.
        #[arg(long, default_value_t = 1000)]
        grace_ms: u64,
    },
}

#[derive(Debug, Args)]
pub struct StartArgs {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// Run on a pseudo-terminal.
    #[arg(long, short = 't', alias = "tty")]
    pub pty: bool,
    /// PTY rows (default: this terminal's, else 24).
    #[arg(long)]
    pub rows: Option<u16>,
    /// PTY columns (default: this terminal's, else 80).
    #[arg(long)]
    pub cols: Option<u16>,
    /// Absolute working directory.
    #[arg(long)]
    pub cwd: Option<String>,
    /// Environment variable (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE", value_parser = parse_kv)]
    pub env: Vec<(String, String)>,
    /// Command and arguments (default with --pty: a login shell).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
}

fn describe(p: &ProcessDetails) -> String {
    let mut lines = vec![
        format!("process   {}", p.process_id),
        format!("kind      {}", p.kind),
        format!("state     {}", p.state),
        format!(
            "command   {} {}",
            p.cmd.clone().unwrap_or_default(),
            p.args.join(" ")
        ),
    ];
    if let Some(pid) = p.pid {
        lines.push(format!("pid       {pid}"));
    }
    if let Some(code) = p.exit_code {
        lines.push(format!("exit      {code}"));
    }
    if let Some(sig) = &p.signal {
        lines.push(format!("signal    {sig}"));
    }
    lines.push(format!(
        "output    seq {}..{} ({} bytes kept)",
        p.output.oldest_seq, p.output.newest_seq, p.output.bytes
    ));
    lines.join("\n")
}

pub async fn process(ctx: &Ctx, cmd: ProcessCmd) -> Result<ExitCode> {
    match cmd {
        ProcessCmd::Start(a) => {
            let sb = resolve::sandbox(&ctx.client, &a.sandbox).await?;
            let mut spec = match a.command.split_first() {
                Some((cmd, args)) => ProcessSpec::new(cmd).args(args.iter().cloned()),
                None if a.pty => {
                    let (r, c) = createos_sandbox::pty::tty::size_or((24, 80));
                    ProcessSpec::pty_shell(a.rows.unwrap_or(r), a.cols.unwrap_or(c))
                }
                None => bail!("give a command (or --pty for a login shell)"),
            };
            if a.pty {
                let (r, c) = createos_sandbox::pty::tty::size_or((24, 80));
                spec = spec.pty(a.rows.unwrap_or(r), a.cols.unwrap_or(c));
            }
            if let Some(cwd) = &a.cwd {
                spec = spec.cwd(cwd);
            }
            for (k, v) in &a.env {
                spec = spec.env(k, v);
            }
            let p = sb.processes().start(spec).await?;
            let d = p.details();
            ctx.out.show(&d, || describe(&d));
        }
        ProcessCmd::Ls { sandbox } => {
            let sb = resolve::sandbox(&ctx.client, &sandbox).await?;
            let list = sb.processes().list().await?;
            ctx.out.show(&list, || {
                table(
                    &["PROCESS", "KIND", "STATE", "PID", "COMMAND"],
                    list.iter()
                        .map(|p| {
                            vec![
                                p.process_id.clone(),
                                p.kind.to_string(),
                                p.state.to_string(),
                                p.pid.map(|x| x.to_string()).unwrap_or_default(),
                                format!(
                                    "{} {}",
                                    p.cmd.clone().unwrap_or_default(),
                                    p.args.join(" ")
                                ),
                            ]
                        })
                        .collect(),
                )
            });
        }
        ProcessCmd::Get { sandbox, process } => {
            let sb = resolve::sandbox(&ctx.client, &sandbox).await?;
            let d = sb.processes().get(&process).await?.details();
            ctx.out.show(&d, || describe(&d));
        }
        ProcessCmd::Logs {
            sandbox,
            process,
            after,
            follow,
        } => {
            let sb = resolve::sandbox(&ctx.client, &sandbox).await?;
            let p = sb.processes().get(&process).await?;
            // Without --follow, stop at what exists now.
            let until = if follow {
                None
            } else {
                Some(p.info().await?.output.newest_seq)
            };
            if until.is_some_and(|u| u <= after) {
                return Ok(ExitCode::SUCCESS);
            }
            let mut events = p.connect(after).await?;
            while let Some(event) = events.next().await {
                match event? {
                    OutputEvent::Data { seq, stream, bytes } => {
                        if ctx.out.explicit_json {
                            println!(
                                "{}",
                                json!({ "seq": seq, "stream": stream.to_string(), "text": String::from_utf8_lossy(&bytes) })
                            );
                        } else if stream.as_str() == "stderr" {
                            std::io::stderr().write_all(&bytes)?;
                        } else {
                            let mut out = std::io::stdout().lock();
                            out.write_all(&bytes)?;
                            out.flush()?;
                        }
                        if until.is_some_and(|u| seq >= u) {
                            break;
                        }
                    }
                    OutputEvent::Exit { code, signal } => {
                        if ctx.out.explicit_json {
                            println!("{}", json!({ "exit_code": code, "signal": signal }));
                        }
                        break;
                    }
                    OutputEvent::Gap {
                        from_seq,
                        to_seq,
                        lost_bytes,
                    } => {
                        eprintln!("[output seq {from_seq}-{to_seq} was evicted before it could be read; {} bytes lost]", lost_bytes.map(|n| n.to_string()).unwrap_or_else(|| "unknown".into()));
                    }
                    OutputEvent::Error(message) => bail!("output stream error: {message}"),
                }
            }
        }
        ProcessCmd::Input {
            sandbox,
            process,
            text,
            file,
            close,
        } => {
            let data = match (text, file) {
                (Some(t), _) => t.into_bytes(),
                (None, Some(f)) => {
                    std::fs::read(&f).with_context(|| format!("reading {}", f.display()))?
                }
                (None, None) => {
                    let mut buf = Vec::new();
                    std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)?;
                    buf
                }
            };
            let sb = resolve::sandbox(&ctx.client, &sandbox).await?;
            let p = sb.processes().handle(&process)?;
            let written = p.write_input(&data).await?;
            if close {
                p.close_stdin().await?;
            }
            let doc = json!({ "process": process, "bytes": written.bytes, "input_seq": written.input_seq, "stdin_closed": close });
            ctx.out
                .show(&doc, || format!("sent {} bytes", written.bytes));
        }
        ProcessCmd::Signal {
            sandbox,
            process,
            signal,
        } => {
            let sig: Signal = signal.parse()?;
            let sb = resolve::sandbox(&ctx.client, &sandbox).await?;
            sb.processes().handle(&process)?.signal(sig).await?;
            ctx.out.show(
                &json!({ "process": process, "signal": sig.as_str() }),
                || format!("sent {}", sig.as_str()),
            );
        }
        ProcessCmd::Resize {
            sandbox,
            process,
            rows,
            cols,
        } => {
            let sb = resolve::sandbox(&ctx.client, &sandbox).await?;
            sb.processes().handle(&process)?.resize(rows, cols).await?;
            ctx.out.show(
                &json!({ "process": process, "rows": rows, "cols": cols }),
                || format!("resized to {rows}x{cols}"),
            );
        }
        ProcessCmd::Wait {
            sandbox,
            process,
            tree,
            timeout,
        } => {
            let sb = resolve::sandbox(&ctx.client, &sandbox).await?;
            let scope = if tree {
                WaitScope::Tree
            } else {
                WaitScope::Leader
            };
            let d = sb
                .processes()
                .handle(&process)?
                .wait(scope, timeout.map(Duration::from_secs))
                .await?;
            ctx.out.show(&d, || describe(&d));
            let code = d
                .exit_code
                .unwrap_or(if d.signal.is_some() { 128 } else { 0 });
            return Ok(ExitCode::from(u8::try_from(code).unwrap_or(255)));
        }
        ProcessCmd::Stop {
            sandbox,
            process,
            grace_ms,
        } => {
            let sb = resolve::sandbox(&ctx.client, &sandbox).await?;
            let d = sb
                .processes()
                .handle(&process)?
                .stop(Some(Duration::from_millis(grace_ms)))
                .await?;
            ctx.out.show(&d, || describe(&d));
        }
    }
    Ok(ExitCode::SUCCESS)
}
