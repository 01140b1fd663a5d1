//! `cos herdr <action>` (the Herdr plugin's actions) and `cos setup herdr`.
//!
//! Actions end with one `CREATEOS_HERDR_RESULT: {json}` line on stdout on every path — also
//! when no client can be built — so they run before the generic client setup of `cos`
//! ([`main`]). The in-pane steps (`provision`, `connect`) attach the pane to the agent's PTY
//! with `cos attach`'s bridge ([`super::interactive::attach`]).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use futures::TryStreamExt;
use tokio_util::sync::CancellationToken;

use createos_sandbox::herdr::actions::{self, ActionEnv};
use createos_sandbox::herdr::agents::Agent;
use createos_sandbox::herdr::command::ProvisionSpec;
use createos_sandbox::herdr::context::PluginContext;
use createos_sandbox::herdr::host::HerdrHost;
use createos_sandbox::herdr::provision::{self, agent_process, stderr_progress};
use createos_sandbox::herdr::state::{PaneEntry, StateStore, PENDING_HEARTBEAT};
use createos_sandbox::herdr::{ActionResult, HerdrError, HerdrResult};
use createos_sandbox::pty::tty;
use createos_sandbox::{Client, ListSandboxes, SandboxStatus};

use super::interactive::{self, AttachArgs};

mod setup;

use super::{Cli, Command, Ctx, Out};
use setup::setup_with;
pub use setup::SetupHerdrArgs;

/// Size used when the pane's terminal size cannot be read.
const FALLBACK_SIZE: (u16, u16) = (24, 80);
/// Refresh period of the `boxes` pane.
const BOXES_EVERY: Duration = Duration::from_secs(5);
/// The actions Herdr can invoke.
const ACTIONS: &[&str] = &["start", "attach", "sync", "apply", "pause", "resume", "info", "delete", "boxes"];

#[derive(Debug, Args)]
pub struct HerdrArgs {
    /// start | attach | sync | apply | pause | resume | info | delete | boxes (default: HERDR_PLUGIN_ACTION_ID).
    /// `provision <spec>` and `connect <pane>` are typed into panes by `start` and `attach`.
    pub action: Option<String>,
    /// Arguments of the in-pane steps.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum SetupCmd {
    /// Install the CreateOS plugin into Herdr: checks, plugin link, config.json, key bindings.
    Herdr(SetupHerdrArgs),
    /// Add the CreateOS plugin to OpenCode's opencode.json(c), keeping comments; --doctor checks.
    Opencode(super::setup_opencode::SetupOpencodeArgs),
}

/// How this `cos` was pointed at a control plane, for the client and for panes.
struct Launch {
    client: Result<Client, String>,
    /// `cos` plus its non-secret global options, as typed into panes.
    cos: Vec<String>,
    out: Out,
}

/// Run `cos herdr …` / `cos setup …` from the parsed command line (before any client is built,
/// so a missing credential still ends with a result line).
pub fn main(cli: Cli) -> ExitCode {
    let out = Out::new(cli.output);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let launch = launch(&cli, out);
    let code = runtime.block_on(async move {
        match cli.command {
            Command::Herdr(args) => herdr_with(launch, args).await,
            Command::Setup(SetupCmd::Herdr(args)) => setup_with(launch, args).await,
            _ => ExitCode::from(2),
        }
    });
    runtime.shutdown_background();
    code
}

fn launch(cli: &Cli, out: Out) -> Launch {
    let mut cos =
        vec![std::env::current_exe().map(|p| p.to_string_lossy().into_owned()).unwrap_or_else(|_| "cos".into())];
    // Panes run `cos` again: they get the same non-secret endpoint options (never the key).
    if let Some(url) = &cli.endpoint {
        cos.extend(["--endpoint".to_string(), url.clone()]);
    } else if let Some(region) = &cli.region {
        cos.extend(["--region".to_string(), region.clone()]);
    }
    let client = if cli.local {
        Err("--local is not available here: its emulator stops when this command ends, taking the sandbox with it. \
             Run `createos-mock` and pass --endpoint instead"
            .to_string())
    } else {
        super::remote_client(cli).map_err(|e| format!("{e:#}"))
    };
    Launch { client, cos, out }
}

async fn herdr_with(launch: Launch, args: HerdrArgs) -> ExitCode {
    let action = args
        .action
        .clone()
        .or_else(|| std::env::var("HERDR_PLUGIN_ACTION_ID").ok())
        .map(|a| a.rsplit('.').next().unwrap_or(&a).trim().to_string())
        .unwrap_or_default();
    let host = HerdrHost::from_env();
    let outcome: HerdrResult<ActionResult> = match action.as_str() {
        "boxes" => return boxes(&launch).await,
        "provision" => return provision_in_pane(&launch, &args.rest).await,
        "connect" => return connect_in_pane(&launch, &args.rest).await,
        a if ACTIONS.contains(&a) => match action_env(&launch, host.clone()) {
            Ok(env) => run_action(&env, a).await,
            Err(e) => Err(e),
        },
        other => {
            let message = if other.is_empty() {
                format!("no action given (argument or HERDR_PLUGIN_ACTION_ID); one of {}", ACTIONS.join(", "))
            } else {
                format!("unknown action {other:?}; one of {}", ACTIONS.join(", "))
            };
            eprintln!("error: {message}");
            println!("{}", ActionResult::failed(if other.is_empty() { "unknown" } else { other }, &message).line());
            return ExitCode::from(2);
        }
    };
    finish(&host, &action, outcome).await
}

async fn finish(host: &HerdrHost, action: &str, outcome: HerdrResult<ActionResult>) -> ExitCode {
    match outcome {
        Ok(result) => {
            println!("{}", result.line());
            ExitCode::SUCCESS
        }
        Err(err) => {
            let message = err.to_string();
            eprintln!("error: {message}");
            // Herdr shows nothing for a failed action; a notification makes it visible.
            host.notify(&format!("CreateOS {action} failed"), &message).await;
            println!("{}", ActionResult::failed(action, &message).line());
            ExitCode::from(1)
        }
    }
}

fn action_env(launch: &Launch, host: HerdrHost) -> HerdrResult<ActionEnv> {
    let client = launch.client.clone().map_err(|m| HerdrError::invalid("credentials", m))?;
    let store = StateStore::from_env()?;
    let context = PluginContext::from_env()?;
    let config_dir = std::env::var_os("HERDR_PLUGIN_CONFIG_DIR").filter(|d| !d.is_empty()).map(PathBuf::from);
    // The endpoint is not a secret; the API key is never passed on (panes resolve their own).
    let pane_env = ["CREATEOS_SANDBOX_BASE_URL", "CREATEOS_SANDBOX_URL"]
        .iter()
        .filter_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()).map(|v| (k.to_string(), v)))
        .collect();
    Ok(ActionEnv { client, host, store, context, config_dir, cos: launch.cos.clone(), pane_env })
}

async fn run_action(env: &ActionEnv, action: &str) -> HerdrResult<ActionResult> {
    match action {
        "start" => actions::start(env).await,
        "attach" => actions::attach(env).await,
        "sync" => actions::sync(env).await,
        "apply" => actions::apply(env).await,
        "pause" => actions::pause_or_resume(env, true).await,
        "resume" => actions::pause_or_resume(env, false).await,
        "info" => {
            let (result, text) = actions::info(env).await?;
            print!("{text}");
            Ok(result)
        }
        "delete" => {
            let result = actions::delete(env).await?;
            if result.field("result").and_then(|v| v.as_str()) == Some("confirmation-required") {
                println!("Run delete again within 60 seconds to delete the sandbox permanently.");
            }
            Ok(result)
        }
        other => Err(HerdrError::invalid("action", format!("{other:?} is not an action"))),
    }
}

/// Cancelled on Ctrl-C, SIGTERM or SIGHUP (the pane closing).
fn cancel_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut term), Ok(mut hup)) = (signal(SignalKind::terminate()), signal(SignalKind::hangup())) else {
                let _ = tokio::signal::ctrl_c().await;
                t.cancel();
                return;
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
                _ = hup.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        t.cancel();
    });
    token
}

/// In the agent's pane: create and prepare the sandbox at the pane's size, record the mapping,
/// then become the agent (native attach).
async fn provision_in_pane(launch: &Launch, rest: &[String]) -> ExitCode {
    let host = HerdrHost::from_env();
    let cancel = cancel_on_signals();
    let mut released: Option<(StateStore, String)> = None;
    let outcome = async {
        let spec = ProvisionSpec::decode(rest.first().map(String::as_str).unwrap_or_default())?;
        let store = StateStore::from_env()?;
        released = Some((store.clone(), spec.source_pane.clone()));
        let client = launch.client.clone().map_err(|m| HerdrError::invalid("credentials", m))?;
        let size = tty::size_or(FALLBACK_SIZE);
        // The reservation stays alive exactly as long as this provisioning runs.
        let heartbeat = actions::hold_reservation(&store, &spec, PENDING_HEARTBEAT);
        let done = tokio::select! {
            done = provision::provision(&client, &spec, size, &stderr_progress, &cancel) => done?,
            never = heartbeat => match never {},
        };
        let entry = PaneEntry {
            box_name: spec.box_name.clone(),
            box_id: done.sandbox.id().to_string(),
            agent: spec.agent.clone(),
            bin: done.bin.clone(),
            process_id: done.process_id.clone(),
            local: spec.local.clone(),
            remote: spec.remote_root.clone(),
            delete_armed_at: None,
        };
        if let Err(e) = actions::record_pane(&store, &spec, entry.clone()).await {
            // Unmapped, nobody could find it again from Herdr: do not leave it running.
            let cleanup = done.sandbox.destroy().await;
            return Err(match cleanup {
                Ok(_) => e,
                Err(d) => HerdrError::invalid(
                    "state",
                    format!(
                        "{e}; deleting the sandbox also failed ({d}): delete it with `cos rm --yes {}`",
                        done.sandbox.id()
                    ),
                ),
            });
        }
        let title = Agent::from_key(&spec.agent).map(|a| a.title).unwrap_or("Agent");
        let _ = host.rename(&spec.pane, &format!("{title} @ {}", spec.box_name)).await;
        Ok::<_, HerdrError>((spec, entry, client, store))
    }
    .await;
    match outcome {
        Ok((spec, entry, client, store)) => {
            let result = ActionResult::ok("provision")
                .with("box", entry.box_name.clone())
                .with("boxId", entry.box_id.clone())
                .with("pane", spec.pane.clone());
            println!("{}", result.line());
            attach_in_pane(&client, &store, &spec.pane, &entry, 0, &cancel).await
        }
        Err(e) => {
            if let Some((store, source)) = released {
                let _ = actions::release_pending(&store, &source).await;
            }
            finish(&host, "provision", Err(e)).await
        }
    }
}

/// In a mapped pane (typed by the `attach` action): restart the agent at the pane's size if it
/// exited, then attach.
async fn connect_in_pane(launch: &Launch, rest: &[String]) -> ExitCode {
    let host = HerdrHost::from_env();
    let cancel = cancel_on_signals();
    let prepared = async {
        let pane = rest.first().cloned().ok_or_else(|| HerdrError::invalid("connect", "needs the pane id"))?;
        let env = action_env(launch, host.clone())?;
        let mut entry =
            env.store.read().await?.panes.get(&pane).cloned().ok_or_else(|| HerdrError::NoMapping(pane.clone()))?;
        let sandbox = actions::live_sandbox(&env, &pane, &entry).await?;
        let (rows, cols) = tty::size_or(FALLBACK_SIZE);
        let current = sandbox.processes().get(&entry.process_id).await.ok().filter(|p| p.details().is_attachable());
        let current_missing = current.is_none();
        let after = match current {
            Some(process) => {
                // Attach at the newest output; a resize pulse makes the agent redraw its screen.
                let _ = process.resize(rows.saturating_sub(1).max(1), cols).await;
                process.details().output.newest_seq
            }
            None => {
                let agent = Agent::from_key(&entry.agent)
                    .ok_or_else(|| HerdrError::invalid("agent", Agent::unknown_message(&entry.agent)))?;
                let process =
                    sandbox.processes().start(agent_process(agent, &entry.bin, &entry.remote, rows, cols)).await?;
                eprintln!("restarted {} in {} ({})", agent.title, entry.box_name, process.id());
                entry.process_id = process.id().to_string();
                let updated = entry.clone();
                env.store
                    .update(|state| {
                        if let Some(e) = state.panes.get_mut(&pane) {
                            e.process_id = updated.process_id.clone();
                        }
                        Ok(())
                    })
                    .await?;
                0
            }
        };
        Ok::<_, HerdrError>((env, pane, entry, after, current_missing))
    }
    .await;
    match prepared {
        Ok((env, pane, entry, after, restarted)) => {
            let result = ActionResult::ok("connect")
                .with("box", entry.box_name.clone())
                .with("processId", entry.process_id.clone())
                .with("restarted", restarted);
            println!("{}", result.line());
            attach_in_pane(&env.client, &env.store, &pane, &entry, after, &cancel).await
        }
        Err(e) => finish(&host, "connect", Err(e)).await,
    }
}

/// Bridge the pane to the agent's PTY with `cos attach`; when the sandbox goes away (deleted
/// from another pane or by `delete`), say so and give the pane back instead of hanging.
async fn attach_in_pane(
    client: &Client,
    store: &StateStore,
    pane: &str,
    entry: &PaneEntry,
    after: u64,
    cancel: &CancellationToken,
) -> ExitCode {
    let ctx = Ctx { client: client.clone(), out: Out { json: false, explicit_json: false } };
    let args = AttachArgs { sandbox: entry.box_id.clone(), process: Some(entry.process_id.clone()), after };
    // The pane closing (SIGHUP) or a SIGTERM detaches; the agent keeps running remotely.
    let attached = tokio::select! {
        r = interactive::attach(&ctx, args) => r,
        _ = cancel.cancelled() => {
            eprintln!("\r\ndetached from {}: the agent keeps running; the attach action reconnects.", entry.box_name);
            return ExitCode::from(129);
        }
    };
    let gone = match client.get_sandbox(&entry.box_id).await {
        Ok(sb) => {
            matches!(sb.status(), SandboxStatus::Destroyed | SandboxStatus::Destroying) || sb.status().is_terminal()
        }
        Err(e) => e.is_not_found(),
    };
    if gone {
        let _ = actions::forget(store, pane, &entry.box_id).await;
        eprintln!("\r\nsandbox {} ({}) was deleted; this pane is a local shell again.", entry.box_name, entry.box_id);
        return ExitCode::SUCCESS;
    }
    match attached {
        Ok(code) => {
            if code != ExitCode::SUCCESS {
                eprintln!("\r\nthe agent in {} exited; the attach action restarts it.", entry.box_name);
            }
            code
        }
        Err(e) => {
            eprintln!("\r\nerror: {e:#}\r\nthe attach action reconnects this pane to {}.", entry.box_name);
            ExitCode::from(1)
        }
    }
}

/// The `boxes` pane: the sandbox list, refreshed every 5 s until the pane closes.
async fn boxes(launch: &Launch) -> ExitCode {
    let cancel = cancel_on_signals();
    loop {
        let mut screen = String::from("\x1b[H\x1b[2J");
        match &launch.client {
            Ok(client) => match client.list_sandboxes(ListSandboxes::default()).try_collect::<Vec<_>>().await {
                Ok(all) => {
                    screen.push_str(&format!(
                        "CreateOS sandboxes ({}), every {}s\n\n",
                        all.len(),
                        BOXES_EVERY.as_secs()
                    ));
                    screen.push_str(&format!("{:<24} {:<24} {:<12} {}\n", "ID", "NAME", "STATUS", "SHAPE"));
                    for v in all.iter().filter(|v| !v.status.is_terminal()) {
                        screen.push_str(&format!(
                            "{:<24} {:<24} {:<12} {}\n",
                            v.id,
                            v.name.clone().unwrap_or_default(),
                            v.status.to_string(),
                            v.shape.clone().unwrap_or_default()
                        ));
                    }
                }
                Err(e) => screen.push_str(&format!("listing sandboxes failed: {e}\n")),
            },
            Err(m) => screen.push_str(&format!("no CreateOS client: {m}\n")),
        }
        print!("{screen}");
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        tokio::select! {
            _ = tokio::time::sleep(BOXES_EVERY) => {}
            _ = cancel.cancelled() => return ExitCode::SUCCESS,
        }
    }
}
