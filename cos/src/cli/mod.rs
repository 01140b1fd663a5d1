//! The `cos` command line: global options, the command tree, and dispatch. Each command group
//! lives in its own module and only calls the library.

mod catalog;
mod computer;
mod exec;
mod files;
mod fs;
mod herdr;
mod interactive;
mod jobs;
mod mcp;
mod output;
mod process;
mod progress;
mod resolve;
mod resources;
mod sandbox;
mod setup_opencode;
mod snapshot;
mod sync;
mod via;

use std::process::ExitCode;

#[cfg(feature = "local")]
use anyhow::Context as _;
use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use createos_sandbox::{Client, Region};
pub use output::{Format, Out};

/// The one line `cos --help` opens with.
const ABOUT: &str = "cos: CreateOS cloud sandboxes from the shell, coding agents (MCP) and Herdr";

/// Closes `cos --help`: where credentials come from, and the way to try it without an account.
const AFTER_HELP: &str =
    "Credentials come from --api-key, CREATEOS_API_KEY, or what `createos login` stored in \
~/.createos. `cos --local <command>` runs against an in-process emulator: no account needed. \
Output is text; `-o json` (or CREATEOS_OUTPUT=json) prints JSON for scripts.";

#[derive(Debug, Parser)]
#[command(name = "cos", version, about = ABOUT, long_about = None, after_help = AFTER_HELP, propagate_version = true)]
pub struct Cli {
    /// Run against an in-process emulator of the control plane (real local processes).
    /// Give it before the command: `cos --local run -- uname -a`.
    #[arg(long, conflicts_with_all = ["endpoint", "region"])]
    local: bool,
    /// Control-plane base URL (default: CREATEOS_SANDBOX_BASE_URL, else production).
    #[arg(long, global = true, value_name = "URL")]
    endpoint: Option<String>,
    /// Regional control plane.
    #[arg(long, global = true, value_parser = ["us", "eu"])]
    region: Option<String>,
    /// API key (default: CREATEOS_API_KEY, then ~/.createos/.oauth, then ~/.createos/.token).
    #[arg(long, global = true, value_name = "KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Also trust the CA certificates (PEM) in FILE (CREATEOS_CA_FILE and SSL_CERT_FILE add theirs).
    #[arg(long, global = true, value_name = "FILE")]
    ca_file: Option<std::path::PathBuf>,
    /// Output format: text, or json for scripts (errors then also go to stdout as JSON).
    #[arg(
        short = 'o',
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "CREATEOS_OUTPUT"
    )]
    output: Format,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Who the credential belongs to, and sandbox counts.
    Whoami,
    /// Sandbox sizes.
    Shapes,
    /// Base images (rootfs) and templates usable at create.
    Images,
    /// Create a sandbox.
    Create(sandbox::CreateArgs),
    /// List sandboxes (every page).
    #[command(alias = "list")]
    Ls(sandbox::LsArgs),
    /// Show one sandbox.
    Get(sandbox::Target),
    /// Destroy sandboxes.
    #[command(alias = "delete")]
    Rm(sandbox::RmArgs),
    /// Pause a running sandbox (snapshot memory and disk).
    Pause(sandbox::WaitTarget),
    /// Resume a paused sandbox.
    Resume(sandbox::WaitTarget),
    /// Clone a paused sandbox.
    Fork(sandbox::ForkArgs),
    /// Change ingress, auto-pause or egress.
    Edit(sandbox::EditArgs),
    /// Grow the root disk.
    Resize(sandbox::ResizeArgs),
    /// Authorize SSH public keys.
    SshKey(sandbox::SshKeyArgs),
    /// Egress quota and recharge.
    Bandwidth(sandbox::BandwidthArgs),
    /// CPU and memory of a sandbox.
    Metrics(sandbox::Target),
    /// Run a command in a sandbox; output streams, the exit code passes through.
    Exec(exec::ExecArgs),
    /// Create a sandbox, run one command, destroy it (also on failure and Ctrl-C).
    Run(exec::RunArgs),
    /// Attach this terminal to a process's PTY (default: a new login shell). Ctrl-] detaches.
    Attach(interactive::AttachArgs),
    /// A shell over the control plane's keyless PTY route.
    Shell(interactive::ShellArgs),
    /// Forward a local port to a port in the sandbox.
    Tunnel(interactive::TunnelArgs),
    /// Managed processes: start, ls, get, logs, input, signal, resize, wait, stop.
    #[command(subcommand)]
    Process(process::ProcessCmd),
    /// Upload a file, or a directory as one archive (through the snapshot filters).
    Push(files::PushArgs),
    /// Download a file, or a directory as one archive.
    Pull(files::PullArgs),
    /// Show which files an upload of a directory would send (`--list`) and what is left out and why (`--explain`).
    Snapshot(snapshot::SnapshotArgs),
    /// Keep a local directory and a sandbox directory in step: once, one-way, mirror or two-way, optionally watching.
    Sync(sync::SyncArgs),
    /// Text file operations in a sandbox: read, write, edit, patch, glob, grep, ls, stat, mkdir, rm, mv.
    Fs(fs::FsArgs),
    /// Private networks.
    #[command(subcommand)]
    Network(resources::NetworkCmd),
    /// S3-backed disks.
    #[command(subcommand)]
    Disk(resources::DiskCmd),
    /// Custom images built from a Dockerfile.
    #[command(subcommand)]
    Template(resources::TemplateCmd),
    /// Sandbox-scoped access tokens.
    #[command(subcommand)]
    Token(resources::TokenCmd),
    /// WireGuard devices and VPN sessions.
    #[command(subcommand)]
    Device(resources::DeviceCmd),
    /// Account usage.
    Usage(resources::UsageArgs),
    /// Desktop control of a `desktop:1` sandbox.
    Computer(computer::ComputerArgs),
    /// Serve the `sandbox_*` agent tools over MCP on stdio (one sandbox per session).
    Mcp(mcp::McpArgs),
    /// Run a command on a copy of a project directory in a throwaway sandbox; optionally bring an artifact back.
    Offload(jobs::OffloadArgs),
    /// Run several commands in parallel, each in its own throwaway sandbox with its own project copy.
    Fanout(jobs::FanoutArgs),
    /// Run a code snippet (py, js, ts, sh, go, rb, c, cpp, rs, …) in a throwaway sandbox.
    RunCode(jobs::RunCodeArgs),
    /// Actions of the CreateOS Herdr plugin (each ends with a CREATEOS_HERDR_RESULT line).
    Herdr(herdr::HerdrArgs),
    /// Install an integration: `cos setup opencode`, `cos setup herdr`.
    #[command(subcommand)]
    Setup(herdr::SetupCmd),
    /// Print a shell completion script: bash, zsh, fish, powershell or elvish.
    Completions(CompletionsArgs),
}

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// How `cos --help` groups the commands (in this order). Every visible command is in exactly
/// one group (tests/cli_conventions.rs checks that `--help` has no "Other:" section).
const GROUPS: &[(&str, &[&str])] = &[
    (
        "Sandboxes",
        &[
            "create",
            "ls",
            "get",
            "rm",
            "pause",
            "resume",
            "fork",
            "edit",
            "resize",
            "ssh-key",
            "bandwidth",
            "metrics",
            "shapes",
            "images",
            "network",
            "disk",
            "template",
            "computer",
        ],
    ),
    ("Run", &["exec", "run", "offload", "fanout", "run-code"]),
    ("Files", &["push", "pull", "snapshot", "sync", "fs"]),
    ("Processes", &["process", "attach", "shell", "tunnel"]),
    (
        "Agents and integrations",
        &["mcp", "herdr", "setup", "completions"],
    ),
    ("Account", &["whoami", "usage", "token", "device"]),
];

/// The clap command of `cos`, with the grouped command list in its help.
pub fn command() -> clap::Command {
    let cmd = Cli::command();
    let template = format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{}Options:\n{{options}}{{after-help}}",
        grouped_commands(&cmd)
    );
    cmd.help_template(template)
}

/// The "Sandboxes: …", "Run: …" sections of `cos --help`.
fn grouped_commands(cmd: &clap::Command) -> String {
    let visible: Vec<&clap::Command> = cmd.get_subcommands().filter(|c| !c.is_hide_set()).collect();
    let width = visible
        .iter()
        .map(|c| c.get_name().len())
        .max()
        .unwrap_or(0);
    let line = |c: &clap::Command| {
        let about = c.get_about().map(|a| a.to_string()).unwrap_or_default();
        format!("  {:<width$}  {about}\n", c.get_name())
    };
    let mut text = String::new();
    for (title, names) in GROUPS {
        text.push_str(&format!("{title}:\n"));
        for name in *names {
            if let Some(c) = visible.iter().find(|c| c.get_name() == *name) {
                text.push_str(&line(c));
            }
        }
        text.push('\n');
    }
    let others: Vec<_> = visible
        .iter()
        .filter(|c| {
            c.get_name() != "help"
                && !GROUPS
                    .iter()
                    .any(|(_, names)| names.contains(&c.get_name()))
        })
        .collect();
    if !others.is_empty() {
        text.push_str("Other:\n");
        for c in others {
            text.push_str(&line(c));
        }
        text.push('\n');
    }
    text
}

/// What every command gets: the client and the printer.
pub struct Ctx {
    pub client: Client,
    pub out: Out,
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = match command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    init_logging();
    // Local-only commands: no client, so no credential is needed.
    match &cli.command {
        Command::Completions(args) => {
            use std::io::Write as _;
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut command(), "cos", &mut script);
            // A closed pipe (`cos completions bash | head`) is not an error worth a word.
            return match std::io::stdout().write_all(&script) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    eprintln!("error: writing the completion script: {e}");
                    ExitCode::from(1)
                }
                _ => ExitCode::SUCCESS,
            };
        }
        Command::Snapshot(_) | Command::Setup(herdr::SetupCmd::Opencode(_)) => {
            return local_only(cli)
        }
        _ => {}
    }
    // Herdr actions print their result line even when no client can be built.
    if matches!(cli.command, Command::Herdr(_) | Command::Setup(_)) {
        return herdr::main(cli);
    }
    // `cos mcp` owns stdout for the protocol: its errors go to stderr whatever the format.
    let out = match cli.command {
        Command::Mcp(_) => Out {
            json: false,
            explicit_json: false,
        },
        _ => Out::new(cli.output),
    };
    let runtime = match async_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let result = runtime.block_on(run(cli, out));
    // A read of the terminal may still be blocked in a runtime thread (tokio's stdin reads on a
    // blocking thread); do not wait for a keystroke that may never come.
    runtime.shutdown_background();
    match result {
        Ok(code) => code,
        Err(err) => {
            output::report_error(out, &err);
            ExitCode::from(1)
        }
    }
}

/// Run a command that works on local files only (`snapshot`, `setup opencode`): it never builds
/// a client, so it works signed out.
fn local_only(cli: Cli) -> ExitCode {
    let out = Out::new(cli.output);
    let runtime = match async_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Snapshot(a) => snapshot::snapshot(out, a).await.map(|()| ExitCode::SUCCESS),
            Command::Setup(herdr::SetupCmd::Opencode(a)) => {
                setup_opencode::setup(out, cli.api_key.clone(), a).await
            }
            _ => anyhow::bail!("not a local-only command"),
        }
    });
    runtime.shutdown_background();
    result.unwrap_or_else(|err| {
        output::report_error(out, &err);
        ExitCode::from(1)
    })
}

/// The multi-threaded tokio runtime every command runs on (a failure to start it is reported).
fn async_runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitCode::from(1)
        })
}

fn init_logging() {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    // Colour codes only for a person at a terminal (and never with NO_COLOR).
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .try_init();
}

async fn run(cli: Cli, out: Out) -> Result<ExitCode> {
    #[cfg(feature = "local")]
    let mut local = None;
    let client = if cli.local {
        #[cfg(feature = "local")]
        {
            let mock = createos_mock::start(createos_mock::MockConfig::default())
                .await
                .context("starting the local emulator")?;
            let client = Client::builder()
                .base_url(mock.base_url())
                .api_key(mock.api_key())
                .build()?;
            local = Some(mock);
            client
        }
        #[cfg(not(feature = "local"))]
        anyhow::bail!("this build of cos has no embedded emulator (feature `local`)");
    } else {
        match remote_client(&cli) {
            // `cos mcp` starts signed out and picks up a later sign-in (see cli/mcp.rs).
            Err(e) if matches!(cli.command, Command::Mcp(_)) && mcp::signed_out(&e) => {
                remote_client_with(&cli, true)?
            }
            other => other?,
        }
    };
    let ctx = Ctx { client, out };
    let result = dispatch(&ctx, cli.command).await;
    #[cfg(feature = "local")]
    if let Some(mock) = local {
        mock.shutdown().await;
    }
    result
}

/// The client `--endpoint` / `--region` / `--api-key` (or their environment) point at.
fn remote_client(cli: &Cli) -> Result<Client> {
    remote_client_with(cli, false)
}

/// [`remote_client`]; `anonymous`: without a credential.
fn remote_client_with(cli: &Cli, anonymous: bool) -> Result<Client> {
    let mut builder = Client::builder();
    if anonymous {
        builder = builder.anonymous();
    }
    if let Some(url) = &cli.endpoint {
        builder = builder.base_url(url);
    } else if let Some(region) = &cli.region {
        builder = builder.region(region.parse::<Region>()?);
    }
    if let Some(key) = cli.api_key.clone() {
        builder = builder.api_key(key);
    }
    if let Some(file) = &cli.ca_file {
        builder = builder.ca_file(file);
    }
    Ok(builder.build()?)
}

async fn dispatch(ctx: &Ctx, command: Command) -> Result<ExitCode> {
    let ok = |r: Result<()>| r.map(|()| ExitCode::SUCCESS);
    match command {
        Command::Whoami => ok(catalog::whoami(ctx).await),
        Command::Shapes => ok(catalog::shapes(ctx).await),
        Command::Images => ok(catalog::images(ctx).await),
        Command::Create(a) => ok(sandbox::create(ctx, a).await),
        Command::Ls(a) => ok(sandbox::ls(ctx, a).await),
        Command::Get(a) => ok(sandbox::get(ctx, a).await),
        Command::Rm(a) => ok(sandbox::rm(ctx, a).await),
        Command::Pause(a) => ok(sandbox::pause(ctx, a).await),
        Command::Resume(a) => ok(sandbox::resume(ctx, a).await),
        Command::Fork(a) => ok(sandbox::fork(ctx, a).await),
        Command::Edit(a) => ok(sandbox::edit(ctx, a).await),
        Command::Resize(a) => ok(sandbox::resize(ctx, a).await),
        Command::SshKey(a) => ok(sandbox::ssh_key(ctx, a).await),
        Command::Bandwidth(a) => ok(sandbox::bandwidth(ctx, a).await),
        Command::Metrics(a) => ok(sandbox::metrics(ctx, a).await),
        Command::Exec(a) => exec::exec(ctx, a).await,
        Command::Run(a) => exec::run(ctx, a).await,
        Command::Attach(a) => interactive::attach(ctx, a).await,
        Command::Shell(a) => interactive::shell(ctx, a).await,
        Command::Tunnel(a) => interactive::tunnel(ctx, a).await,
        Command::Process(c) => process::process(ctx, c).await,
        Command::Push(a) => ok(files::push(ctx, a).await),
        Command::Pull(a) => ok(files::pull(ctx, a).await),
        Command::Sync(a) => ok(sync::sync(ctx, a).await),
        Command::Fs(a) => fs::fs(ctx, a).await,
        Command::Network(c) => ok(resources::network(ctx, c).await),
        Command::Disk(c) => ok(resources::disk(ctx, c).await),
        Command::Template(c) => ok(resources::template(ctx, c).await),
        Command::Token(c) => ok(resources::token(ctx, c).await),
        Command::Device(c) => ok(resources::device(ctx, c).await),
        Command::Usage(a) => ok(resources::usage(ctx, a).await),
        Command::Computer(a) => ok(computer::computer(ctx, a).await),
        Command::Mcp(a) => Ok(mcp::mcp(ctx, a).await),
        Command::Offload(a) => jobs::offload(ctx, a).await,
        Command::Fanout(a) => jobs::fanout(ctx, a).await,
        Command::RunCode(a) => jobs::run_code(ctx, a).await,
        // Dispatched by `main` before any client is built.
        Command::Herdr(_) | Command::Setup(_) | Command::Snapshot(_) | Command::Completions(_) => {
            anyhow::bail!("dispatched before a client is built")
        }
    }
}

/// Parse `KEY=VALUE`.
pub fn parse_kv(s: &str) -> std::result::Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{s:?} is not KEY=VALUE"))
}
