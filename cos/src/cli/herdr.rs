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

use crate::herdr::actions::{self, ActionEnv};
use crate::herdr::agents::Agent;
use crate::herdr::command::ProvisionSpec;
use crate::herdr::context::PluginContext;
use crate::herdr::events::{self, PaneEvent};
use crate::herdr::host::HerdrHost;
use crate::herdr::provision::{self, agent_process, stderr_progress};
use crate::herdr::reattach;
use crate::herdr::state::{PaneEntry, StateStore, PENDING_HEARTBEAT};
use crate::herdr::{ActionResult, HerdrError, HerdrResult};
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
const ACTIONS: &[&str] = &[
    "start", "attach", "sync", "apply", "pause", "resume", "info", "delete", "boxes", "event",
];

#[derive(Debug, Args)]
pub struct HerdrArgs {
    /// start | attach | sync | apply | pause | resume | info | delete | boxes (default: HERDR_PLUGIN_ACTION_ID),
    /// event (Herdr's `pane.moved` / `pane.closed`, from HERDR_PLUGIN_EVENT_JSON).
    /// `provision <spec>` and `connect <pane> <token>` are typed into panes by `start` and `attach`.
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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
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
    let mut cos = vec![std::env::current_exe()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "cos".into())];
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
        "event" => pane_event(&host).await,
        "provision" => return provision_in_pane(&launch, &args.rest).await,
        "connect" => return connect_in_pane(&launch, &args.rest).await,
        a if ACTIONS.contains(&a) => match action_env(&launch, host.clone()) {
            Ok(env) => run_action(&env, a).await,
            Err(e) => Err(e),
        },
        other => {
            let message = if other.is_empty() {
                format!(
                    "no action given (argument or HERDR_PLUGIN_ACTION_ID); one of {}",
                    ACTIONS.join(", ")
                )
            } else {
                format!("unknown action {other:?}; one of {}", ACTIONS.join(", "))
            };
            eprintln!("error: {message}");
            println!(
                "{}",
                ActionResult::failed(if other.is_empty() { "unknown" } else { other }, &message)
                    .line()
            );
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
            host.notify(&format!("CreateOS {action} failed"), &message)
                .await;
            println!("{}", ActionResult::failed(action, &message).line());
            ExitCode::from(1)
        }
    }
}

fn action_env(launch: &Launch, host: HerdrHost) -> HerdrResult<ActionEnv> {
    let client = launch
        .client
        .clone()
        .map_err(|m| HerdrError::invalid("credentials", m))?;
    let store = StateStore::from_env()?;
    let context = PluginContext::from_env()?;
    let config_dir = std::env::var_os("HERDR_PLUGIN_CONFIG_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from);
    // The endpoint is not a secret; the API key is never passed on (panes resolve their own).
    let pane_env = ["CREATEOS_SANDBOX_BASE_URL", "CREATEOS_SANDBOX_URL"]
        .iter()
        .filter_map(|k| {
            std::env::var(k)
                .ok()
                .filter(|v| !v.is_empty())
                .map(|v| (k.to_string(), v))
        })
        .collect();
    Ok(ActionEnv {
        client,
        host,
        store,
        context,
        config_dir,
        cos: launch.cos.clone(),
        pane_env,
    })
}

async fn run_action(env: &ActionEnv, action: &str) -> HerdrResult<ActionResult> {
    match action {
        "start" => actions::start(env).await,
        "attach" => reattach::attach(env, reattach::CONNECT_REPORT_WAIT).await,
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
        other => Err(HerdrError::invalid(
            "action",
            format!("{other:?} is not an action"),
        )),
    }
}

/// Cancelled on Ctrl-C, SIGTERM or SIGHUP (the pane closing). The handlers are installed
/// before this returns, so from then on none of these signals can kill the process between two
/// steps (a create in flight, a cleanup): each one cancels the token instead.
fn cancel_on_signals() -> CancellationToken {
    crate::signals::StopSignals::install_or_ctrl_c(true).cancel_token(|| {})
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
        released = Some((store.clone(), spec.box_name.clone()));
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
        let pane = match actions::record_pane(&store, &spec, entry.clone()).await {
            Ok(pane) => pane,
            Err(e) => {
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
        };
        let title = Agent::from_key(&spec.agent).map(|a| a.title).unwrap_or("Agent");
        let _ = host.rename(&pane, &format!("{title} @ {}", spec.box_name)).await;
        Ok::<_, HerdrError>((pane, entry, client, store))
    }
    .await;
    match outcome {
        Ok((pane, entry, client, store)) => {
            let result = ActionResult::ok("provision")
                .with("box", entry.box_name.clone())
                .with("boxId", entry.box_id.clone())
                .with("pane", pane.clone());
            println!("{}", result.line());
            attach_in_pane(&client, &store, &entry, 0, &cancel).await
        }
        Err(e) => {
            if let Some((store, box_name)) = released {
                let _ = actions::release_pending_box(&store, &box_name).await;
            }
            finish(&host, "provision", Err(e)).await
        }
    }
}

/// In a mapped pane (typed by the `attach` action): restart the agent at the pane's size if it
/// exited, tell the `attach` that typed this (its report token) how that went, then attach.
async fn connect_in_pane(launch: &Launch, rest: &[String]) -> ExitCode {
    let host = HerdrHost::from_env();
    let cancel = cancel_on_signals();
    let token = rest.get(1).cloned();
    let report = |result: &ActionResult| {
        if let Some(token) = &token {
            let written = StateStore::from_env()
                .and_then(|store| reattach::write_report(&store, token, result));
            if let Err(e) = written {
                eprintln!("error: cannot report to the attach action: {e}");
            }
        }
    };
    let prepared = async {
        let pane = rest
            .first()
            .cloned()
            .ok_or_else(|| HerdrError::invalid("connect", "needs the pane id"))?;
        let env = action_env(launch, host.clone())?;
        let mut entry = env
            .store
            .read()
            .await?
            .panes
            .get(&pane)
            .cloned()
            .ok_or_else(|| HerdrError::NoMapping(pane.clone()))?;
        let sandbox = actions::live_sandbox(&env, &entry).await?;
        let (rows, cols) = tty::size_or(FALLBACK_SIZE);
        let current = sandbox
            .processes()
            .get(&entry.process_id)
            .await
            .ok()
            .filter(|p| p.details().is_attachable());
        let current_missing = current.is_none();
        let after = match current {
            Some(process) => {
                // Attach at the newest output; a resize pulse makes the agent redraw its screen.
                let _ = process.resize(rows.saturating_sub(1).max(1), cols).await;
                process.details().output.newest_seq
            }
            None => {
                let agent = Agent::from_key(&entry.agent).ok_or_else(|| {
                    HerdrError::invalid("agent", Agent::unknown_message(&entry.agent))
                })?;
                let process = sandbox
                    .processes()
                    .start(agent_process(agent, &entry.bin, &entry.remote, rows, cols))
                    .await?;
                eprintln!(
                    "restarted {} in {} ({})",
                    agent.title,
                    entry.box_name,
                    process.id()
                );
                entry.process_id = process.id().to_string();
                let updated = entry.clone();
                env.store
                    .update(|state| {
                        for e in state
                            .panes
                            .values_mut()
                            .filter(|e| e.box_id == updated.box_id)
                        {
                            e.process_id = updated.process_id.clone();
                        }
                        Ok(())
                    })
                    .await?;
                0
            }
        };
        Ok::<_, HerdrError>((env, entry, after, current_missing))
    }
    .await;
    match prepared {
        Ok((env, entry, after, restarted)) => {
            let result = ActionResult::ok("connect")
                .with("box", entry.box_name.clone())
                .with("processId", entry.process_id.clone())
                .with("restarted", restarted);
            report(&result);
            println!("{}", result.line());
            attach_in_pane(&env.client, &env.store, &entry, after, &cancel).await
        }
        Err(e) => {
            report(&ActionResult::failed("connect", &e.to_string()));
            finish(&host, "connect", Err(e)).await
        }
    }
}

/// Herdr's `pane.moved` / `pane.closed` (the manifest's `[[events]]`): re-key or drop the
/// pane's mapping. A closed pane's sandbox keeps running (it pauses itself when idle): the
/// result line and a notification name it.
async fn pane_event(host: &HerdrHost) -> HerdrResult<ActionResult> {
    let json = std::env::var("HERDR_PLUGIN_EVENT_JSON")
        .map_err(|_| HerdrError::NotInHerdr("HERDR_PLUGIN_EVENT_JSON"))?;
    let store = StateStore::from_env()?;
    let Some(event) = PaneEvent::parse(&json)? else {
        return Ok(ActionResult::ok("event").with("result", "ignored"));
    };
    let outcome = events::apply(&store, &event).await?;
    let kept: Vec<serde_json::Value> = outcome
        .dropped
        .iter()
        .map(|e| serde_json::json!({ "box": e.box_name, "boxId": e.box_id }))
        .collect();
    for e in &outcome.dropped {
        host.notify(
            "CreateOS sandbox",
            &format!(
                "{} ({}) is no longer mapped to a pane and keeps running until it pauses itself; delete it with `cos rm --yes {}`",
                e.box_name, e.box_id, e.box_id
            ),
        )
        .await;
    }
    Ok(match event {
        PaneEvent::Moved { from, to } => ActionResult::ok("event")
            .with(
                "result",
                if outcome.moved.is_some() || outcome.pending_moved {
                    "moved"
                } else {
                    "unmapped"
                },
            )
            .with("from", from)
            .with("pane", to)
            .with("kept", kept),
        PaneEvent::Closed { pane } => ActionResult::ok("event")
            .with(
                "result",
                if kept.is_empty() {
                    "unmapped"
                } else {
                    "closed"
                },
            )
            .with("pane", pane)
            .with("kept", kept),
    })
}

/// Bridge the pane to the agent's PTY with `cos attach`; when the sandbox goes away (deleted
/// from another pane or by `delete`), say so and give the pane back instead of hanging.
async fn attach_in_pane(
    client: &Client,
    store: &StateStore,
    entry: &PaneEntry,
    after: u64,
    cancel: &CancellationToken,
) -> ExitCode {
    let ctx = Ctx {
        client: client.clone(),
        out: Out {
            json: false,
            explicit_json: false,
        },
    };
    let args = AttachArgs {
        sandbox: entry.box_id.clone(),
        process: Some(entry.process_id.clone()),
        after,
    };
    // The pane closing (SIGHUP) or a SIGTERM detaches; the agent keeps running remotely.
    let attached = tokio::select! {
        r = interactive::attach(&ctx, args) => r,
        _ = cancel.cancelled() => {
            eprintln!(
                "\r\ndetached from {} ({}): the sandbox and its agent keep running; the attach action reconnects.",
                entry.box_name, entry.box_id
            );
            return ExitCode::from(129);
        }
    };
    let gone = match client.get_sandbox(&entry.box_id).await {
        Ok(sb) => {
            matches!(
                sb.status(),
                SandboxStatus::Destroyed | SandboxStatus::Destroying
            ) || sb.status().is_terminal()
        }
        Err(e) => e.is_not_found(),
    };
    if gone {
        let _ = actions::forget(store, &entry.box_id).await;
        eprintln!(
            "\r\nsandbox {} ({}) was deleted; this pane is a local shell again.",
            entry.box_name, entry.box_id
        );
        return ExitCode::SUCCESS;
    }
    match attached {
        Ok(code) => {
            if code != ExitCode::SUCCESS {
                eprintln!(
                    "\r\nthe agent in {} exited; the attach action restarts it.",
                    entry.box_name
                );
            }
            code
        }
        Err(e) => {
            eprintln!(
                "\r\nerror: {e:#}\r\nthe attach action reconnects this pane to {}.",
                entry.box_name
            );
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
            Ok(client) => match client
                .list_sandboxes(ListSandboxes::default())
                .try_collect::<Vec<_>>()
                .await
            {
                Ok(all) => {
                    screen.push_str(&format!(
                        "CreateOS sandboxes ({}), every {}s\n\n",
                        all.len(),
                        BOXES_EVERY.as_secs()
                    ));
                    screen.push_str(&format!(
                        "{:<24} {:<24} {:<12} {}\n",
                        "ID", "NAME", "STATUS", "SHAPE"
                    ));
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
