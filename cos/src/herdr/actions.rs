//! The actions Herdr invokes (`start`, `attach`, `sync`, `apply`, `pause`, `resume`, `info`,
//! `delete`) and the bookkeeping of the in-pane steps (`provision`, `connect`).
//!
//! Actions run in the background (Herdr records their output in its plugin log); anything
//! interactive is typed into a pane with `herdr pane run` as a quoted `cos herdr …` line.

use std::path::PathBuf;
use std::time::Duration;

use createos_sandbox::{Client, SandboxStatus};

use super::agents::Agent;
use super::apply::{self, Applied};
use super::command::{sh_line, ProvisionSpec};
use super::config::{config_path, PluginConfig, Settings};
use super::context::{box_name, PluginContext};
use super::error::{HerdrError, HerdrResult};
use super::host::{Direction, HerdrHost, Split};
use super::result::ActionResult;
use super::state::{now_ms, PaneEntry, PendingStart, StateStore};
use super::PLUGIN_ID;

/// How long the first `delete` stays armed.
pub const DELETE_CONFIRM_WINDOW: Duration = Duration::from_secs(60);

/// Everything an action works with.
#[derive(Clone, Debug)]
pub struct ActionEnv {
    /// The control-plane client.
    pub client: Client,
    /// Herdr's CLI.
    pub host: HerdrHost,
    /// `HERDR_PLUGIN_STATE_DIR`.
    pub store: StateStore,
    /// Where it was invoked.
    pub context: PluginContext,
    /// `HERDR_PLUGIN_CONFIG_DIR` (else asked from Herdr when a setting is needed).
    pub config_dir: Option<PathBuf>,
    /// The words that start `cos` in a pane: the absolute binary plus non-secret global options
    /// (e.g. `--endpoint URL`). API keys are never typed into a pane.
    pub cos: Vec<String>,
    /// Variables passed to the panes `start` opens (non-secret only).
    pub pane_env: Vec<(String, String)>,
}

impl ActionEnv {
    /// The checked plugin settings.
    pub async fn settings(&self) -> HerdrResult<Settings> {
        let dir = match &self.config_dir {
            Some(d) => d.clone(),
            None => self.host.config_dir(PLUGIN_ID).await?,
        };
        PluginConfig::load(&dir)?.settings(&config_path(&dir))
    }

    pub(crate) async fn entry(&self, pane: &str) -> HerdrResult<PaneEntry> {
        self.store
            .read()
            .await?
            .panes
            .get(pane)
            .cloned()
            .ok_or_else(|| HerdrError::NoMapping(pane.to_string()))
    }

    /// A `cos …` line for a pane's shell, carrying through `env` what the in-pane step needs
    /// (`vars`): a pane Herdr restores after a cold restart has none of the environment it was
    /// opened with.
    pub fn typed_with(&self, vars: &[(String, String)], tail: &[&str]) -> HerdrResult<String> {
        let assignments: Vec<String> = vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let words: Vec<&str> = (if assignments.is_empty() {
            None
        } else {
            Some("env")
        })
        .into_iter()
        .chain(assignments.iter().map(String::as_str))
        .chain(self.cos.iter().map(String::as_str))
        .chain(tail.iter().copied())
        .collect();
        sh_line(&words)
    }

    /// What an in-pane step needs from the environment, for [`ActionEnv::typed_with`]:
    /// Herdr's agent label (Herdr reads it from the foreground process), the plugin's state
    /// and config directories, the `herdr` binary, the non-secret endpoint variables.
    pub fn pane_vars(&self, agent: &str) -> Vec<(String, String)> {
        let mut vars = Vec::new();
        if let Some(label) = Agent::from_key(agent).and_then(|a| a.herdr_label) {
            vars.push(("HERDR_AGENT".to_string(), label.to_string()));
        }
        vars.push((
            "HERDR_PLUGIN_STATE_DIR".into(),
            self.store.dir().to_string_lossy().into_owned(),
        ));
        if let Some(dir) = &self.config_dir {
            vars.push((
                "HERDR_PLUGIN_CONFIG_DIR".into(),
                dir.to_string_lossy().into_owned(),
            ));
        }
        if let Some(bin) = self.host.bin_path() {
            vars.push(("HERDR_BIN_PATH".into(), bin));
        }
        vars.extend(self.pane_env.iter().cloned());
        vars
    }
}

/// `start`: reserve the source pane, open the agent's pane to the right (with `HERDR_AGENT`
/// so Herdr recognises the agent), and type `cos herdr provision <spec>` into it.
pub async fn start(env: &ActionEnv) -> HerdrResult<ActionResult> {
    let source = env.context.require_pane()?.to_string();
    let settings = env.settings().await?;
    let root = env.context.git_root()?;
    let name = box_name(&root);
    createos_sandbox::validate::sandbox_name("sandbox name", &name)?;
    let local = root.to_str().ok_or_else(|| {
        HerdrError::invalid("worktree", format!("{} is not UTF-8", root.display()))
    })?;
    // The typed line must be buildable before anything is reserved or opened.
    env.typed_with(
        &env.pane_vars(settings.agent.key),
        &["herdr", "provision", "x"],
    )?;

    let now = now_ms();
    env.store.update(|state| {
        state.expire_pending(now);
        if let Some((src, p)) = state.pending_for(&source, now) {
            return Err(HerdrError::Busy(format!(
                "a start from pane {src} is already in progress (sandbox {}, {}s ago); wait for it to finish",
                p.box_name,
                now.saturating_sub(p.created_at) / 1000
            )));
        }
        state.pending.insert(
            source.clone(),
            PendingStart { created_at: now, refreshed_at: None, pane: None, box_name: name.clone() },
        );
        Ok(())
    })
    .await?;

    let opened = open_agent_pane(env, &source, &settings, &name, local).await;
    match opened {
        Ok(pane) => Ok(ActionResult::ok("start")
            .with("box", name)
            .with("pane", pane)
            .with("agent", settings.agent.key)
            .with("provisioning", true)),
        Err(e) => {
            let _ = release_pending(&env.store, &source).await;
            Err(e)
        }
    }
}

async fn open_agent_pane(
    env: &ActionEnv,
    source: &str,
    settings: &Settings,
    name: &str,
    local: &str,
) -> HerdrResult<String> {
    let vars = env.pane_vars(settings.agent.key);
    // HERDR_AGENT goes on the typed line only: Herdr reads it from the foreground process, and
    // on the pane's shell it would label the idle shell as the agent once the agent is gone.
    let shell_env = vars
        .iter()
        .filter(|(k, _)| k != "HERDR_AGENT")
        .cloned()
        .collect();
    let split = Split {
        ratio: None,
        focus: true,
        cwd: Some(PathBuf::from(local)),
        env: shell_env,
    };
    let pane = env.host.split(source, Direction::Right, &split).await?;
    let spec = ProvisionSpec {
        source_pane: source.to_string(),
        pane: pane.clone(),
        box_name: name.to_string(),
        local: local.to_string(),
        agent: settings.agent.key.to_string(),
        shape: settings.shape.clone(),
        rootfs: settings.rootfs.clone(),
        auto_pause_secs: settings.auto_pause_secs,
        remote_root: settings.remote_root.clone(),
        egress: settings.egress.clone(),
        excludes: settings.excludes.clone(),
    };
    let typed = async {
        env.store
            .update(|state| {
                if let Some(p) = state.pending.get_mut(source) {
                    p.pane = Some(pane.clone());
                }
                Ok(())
            })
            .await?;
        let _ = env
            .host
            .rename(
                &pane,
                &format!("{} starting in {name}", settings.agent.title),
            )
            .await;
        env.host
            .run_in_pane(
                &pane,
                &env.typed_with(&vars, &["herdr", "provision", &spec.encode()])?,
            )
            .await
    };
    match typed.await {
        Ok(()) => Ok(pane),
        Err(e) => {
            // Nothing runs in the new pane: do not leave it behind.
            let _ = env.host.close(&pane).await;
            Err(e)
        }
    }
}

/// Drop the reservation made by `start` from `source`.
pub async fn release_pending(store: &StateStore, source: &str) -> HerdrResult<()> {
    store
        .update(|state| {
            state.pending.remove(source);
            Ok(())
        })
        .await
}

/// Drop the reservation of the start that named its sandbox `box_name` (wherever its panes
/// have moved since).
pub async fn release_pending_box(store: &StateStore, box_name: &str) -> HerdrResult<()> {
    store
        .update(|state| {
            state.pending.retain(|_, p| p.box_name != box_name);
            Ok(())
        })
        .await
}

/// Mark `spec`'s reservation as still in use (its provisioning is running). A reservation that
/// is gone or now names another sandbox is left alone: it is not ours to revive. It is found
/// by its sandbox name (unique per start): the panes may have moved, and been re-keyed, since.
pub async fn refresh_pending(
    store: &StateStore,
    spec: &ProvisionSpec,
    now: u64,
) -> HerdrResult<()> {
    store
        .update(|state| {
            if let Some(p) = state
                .pending
                .values_mut()
                .find(|p| p.box_name == spec.box_name)
            {
                p.refreshed_at = Some(now);
                p.pane.get_or_insert_with(|| spec.pane.clone());
            }
            Ok(())
        })
        .await
}

/// Keep `spec`'s reservation alive for as long as this future runs: refreshed now and then
/// every `every` (well inside [`super::state::PENDING_TTL`]). Provisioning can take longer than the TTL
/// (agent install, large uploads); a provisioning process that dies stops refreshing, and its
/// reservation then expires on its own. Never returns; drop it when provisioning ends.
pub async fn hold_reservation(
    store: &StateStore,
    spec: &ProvisionSpec,
    every: Duration,
) -> std::convert::Infallible {
    loop {
        if let Err(e) = refresh_pending(store, spec, now_ms()).await {
            // A missed refresh is retried; the TTL leaves room for several.
            tracing::warn!(error = %e, "could not refresh the start reservation");
        }
        tokio::time::sleep(every).await;
    }
}

/// Record a provisioned pane (and release its reservation). The pane is the one the
/// reservation names now: a `pane.moved` during provisioning re-keyed it. Returns the pane.
pub async fn record_pane(
    store: &StateStore,
    spec: &ProvisionSpec,
    entry: PaneEntry,
) -> HerdrResult<String> {
    store
        .update(|state| {
            let reserved = state
                .pending
                .iter()
                .find(|(_, p)| p.box_name == spec.box_name)
                .map(|(k, p)| (k.clone(), p.pane.clone()));
            let pane = match reserved {
                Some((source, pane)) => {
                    state.pending.remove(&source);
                    pane.unwrap_or_else(|| spec.pane.clone())
                }
                None => spec.pane.clone(),
            };
            state.panes.insert(pane.clone(), entry);
            Ok(pane)
        })
        .await
}

/// The mapped sandbox, resumed when paused; a sandbox that no longer exists drops its mapping.
pub async fn live_sandbox(
    env: &ActionEnv,
    entry: &PaneEntry,
) -> HerdrResult<createos_sandbox::Sandbox> {
    let sandbox = match env.client.get_sandbox(&entry.box_id).await {
        Ok(sb) => sb,
        Err(e) if e.is_not_found() => {
            forget(&env.store, &entry.box_id).await?;
            return Err(gone(entry));
        }
        Err(e) => return Err(e.into()),
    };
    match sandbox.status() {
        SandboxStatus::Running => Ok(sandbox),
        SandboxStatus::Paused | SandboxStatus::Pausing => {
            if sandbox.status() == SandboxStatus::Pausing {
                sandbox.wait_until_paused(None).await?;
            }
            sandbox.resume_and_wait().await?;
            Ok(sandbox)
        }
        s if s.is_terminal() => {
            forget(&env.store, &entry.box_id).await?;
            Err(HerdrError::invalid(
                "sandbox",
                format!(
                    "{} ({}) is {s}; the pane's mapping was removed",
                    entry.box_name, entry.box_id
                ),
            ))
        }
        _ => Ok(sandbox.wait_until_running(None).await.map(|_| sandbox)?),
    }
}

/// The error for a mapped sandbox that no longer exists (its mapping already dropped).
fn gone(entry: &PaneEntry) -> HerdrError {
    HerdrError::invalid(
        "sandbox",
        format!(
            "{} ({}) no longer exists; the pane's mapping was removed",
            entry.box_name, entry.box_id
        ),
    )
}

/// Remove the mapping of the sandbox `box_id` (under whatever pane it is now: panes move).
pub async fn forget(store: &StateStore, box_id: &str) -> HerdrResult<()> {
    store
        .update(|state| {
            state.panes.retain(|_, e| e.box_id != box_id);
            Ok(())
        })
        .await
}

/// `sync`: a small pane below runs `cos sync --mode two-way --watch` for the mapped sandbox.
pub async fn sync(env: &ActionEnv) -> HerdrResult<ActionResult> {
    let pane = env.context.require_pane()?.to_string();
    let entry = env.entry(&pane).await?;
    let settings = env.settings().await?;
    let mut tail: Vec<String> = vec![
        "sync".into(),
        entry.box_id.clone(),
        "--local".into(),
        entry.local.clone(),
        "--remote".into(),
        entry.remote.clone(),
        "--mode".into(),
        "two-way".into(),
        "--watch".into(),
    ];
    for exclude in &settings.sync_excludes {
        tail.extend(["--exclude".to_string(), exclude.clone()]);
    }
    let tail: Vec<&str> = tail.iter().map(String::as_str).collect();
    let line = env.typed_with(&env.pane_env, &tail)?;
    let split = Split {
        ratio: Some(0.25),
        focus: false,
        cwd: Some(PathBuf::from(&entry.local)),
        env: env.pane_env.clone(),
    };
    let sync_pane = env.host.split(&pane, Direction::Down, &split).await?;
    let _ = env
        .host
        .rename(&sync_pane, &format!("sync {}", entry.box_name))
        .await;
    if let Err(e) = env.host.run_in_pane(&sync_pane, &line).await {
        let _ = env.host.close(&sync_pane).await;
        return Err(e);
    }
    Ok(ActionResult::ok("sync")
        .with("box", entry.box_name)
        .with("pane", sync_pane))
}

/// `apply`: the sandbox's new work as a patch on the local worktree.
pub async fn apply(env: &ActionEnv) -> HerdrResult<ActionResult> {
    let pane = env.context.require_pane()?.to_string();
    let entry = env.entry(&pane).await?;
    let sandbox = live_sandbox(env, &entry).await?;
    let outcome = apply::apply(&sandbox, &entry.remote, entry.local.as_ref()).await?;
    let result = ActionResult::ok("apply").with("box", entry.box_name.clone());
    Ok(match outcome {
        Applied::NoChanges => {
            env.host
                .notify(
                    "CreateOS apply",
                    &format!("{}: no new changes", entry.box_name),
                )
                .await;
            result.with("result", "no-changes")
        }
        Applied::Applied { bytes } => {
            env.host
                .notify(
                    "CreateOS apply",
                    &format!(
                        "{}: applied {bytes} bytes to {}",
                        entry.box_name, entry.local
                    ),
                )
                .await;
            result.with("result", "applied").with("bytes", bytes)
        }
    })
}

/// `pause` / `resume`.
pub async fn pause_or_resume(env: &ActionEnv, pause: bool) -> HerdrResult<ActionResult> {
    let pane = env.context.require_pane()?.to_string();
    let entry = env.entry(&pane).await?;
    let sandbox = env.client.sandbox(&entry.box_id)?;
    let changed = if pause {
        sandbox.pause_and_wait().await
    } else {
        sandbox.resume_and_wait().await
    };
    let view = match changed {
        Ok(view) => view,
        Err(err) => {
            // A sandbox deleted elsewhere drops the mapping, as every other action does.
            let deleted = match env.client.get_sandbox(&entry.box_id).await {
                Err(e) => e.is_not_found(),
                Ok(sb) => sb.status() == SandboxStatus::Destroying || sb.status().is_terminal(),
            };
            if err.is_not_found() || deleted {
                forget(&env.store, &entry.box_id).await?;
                return Err(gone(&entry));
            }
            return Err(err.into());
        }
    };
    Ok(ActionResult::ok(if pause { "pause" } else { "resume" })
        .with("box", entry.box_name)
        .with("status", view.status.to_string()))
}

/// `info`: the mapping and the sandbox's status (`missing` when the server no longer has it;
/// any other failure to read it — network, credentials — fails the action).
pub async fn info(env: &ActionEnv) -> HerdrResult<(ActionResult, String)> {
    let pane = env.context.require_pane()?.to_string();
    let entry = env.entry(&pane).await?;
    let status = match env.client.get_sandbox(&entry.box_id).await {
        Ok(sb) => sb.status().to_string(),
        Err(e) if e.is_not_found() => "missing".to_string(),
        Err(e) => return Err(e.into()),
    };
    let title = Agent::from_key(&entry.agent)
        .map(|a| a.title)
        .unwrap_or("agent");
    let text = format!(
        "agent    {title} ({})\nsandbox  {} ({}) {status}\nlocal    {}\nremote   {}\nprocess  {}\n",
        entry.bin, entry.box_name, entry.box_id, entry.local, entry.remote, entry.process_id
    );
    env.host
        .notify(
            "CreateOS sandbox",
            &format!("{} {status} — {title}", entry.box_name),
        )
        .await;
    let mut result = ActionResult::ok("info").with("pane", pane);
    if let serde_json::Value::Object(fields) = serde_json::to_value(&entry).unwrap_or_default() {
        for (k, v) in fields {
            result = result.with(&k, v);
        }
    }
    Ok((result.with("status", status), text))
}

/// `delete`: the first invocation arms it, a second one within 60 s deletes the sandbox and
/// the mapping.
pub async fn delete(env: &ActionEnv) -> HerdrResult<ActionResult> {
    let pane = env.context.require_pane()?.to_string();
    let now = now_ms();
    let window = DELETE_CONFIRM_WINDOW.as_millis() as u64;
    let confirmed = env
        .store
        .update(|state| {
            let entry = state
                .panes
                .get_mut(&pane)
                .ok_or_else(|| HerdrError::NoMapping(pane.clone()))?;
            match entry.delete_armed_at {
                Some(at) if now >= at && now - at <= window => Ok(Some(entry.clone())),
                _ => {
                    entry.delete_armed_at = Some(now);
                    Ok(None)
                }
            }
        })
        .await?;
    let Some(entry) = confirmed else {
        let entry = env.entry(&pane).await?;
        env.host
            .notify(
                "CreateOS delete",
                &format!(
                    "Delete {} permanently? Run delete again within 60 s to confirm.",
                    entry.box_name
                ),
            )
            .await;
        return Ok(ActionResult::ok("delete")
            .with("box", entry.box_name)
            .with("result", "confirmation-required")
            .with("expiresInSeconds", DELETE_CONFIRM_WINDOW.as_secs()));
    };
    env.client.sandbox(&entry.box_id)?.destroy().await?;
    forget(&env.store, &entry.box_id).await?;
    env.host
        .notify("CreateOS delete", &format!("{} deleted", entry.box_name))
        .await;
    Ok(ActionResult::ok("delete")
        .with("box", entry.box_name)
        .with("boxId", entry.box_id)
        .with("result", "deleted"))
}
