//! The session runtime: each session's sandbox, allocated lazily and single-flight, persisted
//! bindings with reattach, release/forget, in-flight accounting, and shutdown cleanup
//! (plugins.md §2.5).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::config::ToolsConfig;
use super::staging;
use super::store::{BindingRecord, BindingStore};
use super::transports::Transports;
use super::ToolError;
use createos_sandbox::api::processes::{ProcessSpec, RunOptions};
use createos_sandbox::{Client, CreateSandbox, Sandbox, SandboxStatus};

/// How long preparing a new sandbox (readiness, working directory) may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(180);

/// A session's live binding.
#[derive(Clone, Debug)]
struct Bound {
    sandbox: Sandbox,
    record: BindingRecord,
}

/// Per-session state. The async mutex around the binding is the single-flight gate: the first
/// caller allocates while holding it, the others wait and then reuse the result.
#[derive(Default)]
struct Session {
    binding: tokio::sync::Mutex<Option<Bound>>,
    in_flight: AtomicUsize,
    releasing: AtomicBool,
    /// An allocation is running (for `status`).
    opening: AtomicBool,
}

/// Counts one call of a session as in flight until dropped.
pub struct CallGuard {
    session: Arc<Session>,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.session.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The session runtime shared by every tool call of one server.
pub struct Runtime {
    client: Client,
    config: ToolsConfig,
    store: BindingStore,
    project_dir: PathBuf,
    state_dir: PathBuf,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    lifetime: CancellationToken,
    /// Sync watchers and tunnels: stopped at shutdown.
    transports: Transports,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("config", &self.config).field("project_dir", &self.project_dir).finish()
    }
}

impl Runtime {
    /// A runtime for `project_dir`, keeping bindings under `state_dir`.
    pub fn new(client: Client, config: ToolsConfig, state_dir: PathBuf, project_dir: PathBuf) -> Arc<Self> {
        let store = BindingStore::new(&state_dir, &project_dir);
        let lifetime = CancellationToken::new();
        Arc::new(Runtime {
            client,
            config,
            store,
            project_dir,
            state_dir,
            sessions: Mutex::new(HashMap::new()),
            transports: Transports::new(lifetime.clone()),
            lifetime,
        })
    }

    /// The control-plane client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The effective configuration.
    pub fn config(&self) -> &ToolsConfig {
        &self.config
    }

    /// The host project directory (relative local paths of the tools resolve against it).
    pub fn project_dir(&self) -> &Path {
        &self.project_dir
    }

    /// Where this runtime keeps its state (bindings, device keys).
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The background transports (sync watchers, tunnels) this runtime owns.
    pub fn transports(&self) -> &Transports {
        &self.transports
    }

    /// Cancelled when the runtime shuts down; every call's token is a child of it.
    pub fn lifetime(&self) -> &CancellationToken {
        &self.lifetime
    }

    fn session(&self, name: &str) -> Arc<Session> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.entry(name.to_string()).or_default().clone()
    }

    /// Register a call of `session` as in flight; refused while shutting down or releasing.
    pub fn begin(&self, session: &str) -> Result<CallGuard, ToolError> {
        if self.lifetime.is_cancelled() {
            return Err(ToolError::Refused("the tool server is shutting down".into()));
        }
        let s = self.session(session);
        s.in_flight.fetch_add(1, Ordering::SeqCst);
        let guard = CallGuard { session: s };
        if guard.session.releasing.load(Ordering::SeqCst) {
            return Err(ToolError::Refused(format!("session {session:?} is being released; retry afterwards")));
        }
        Ok(guard)
    }

    /// The session's sandbox, allocating or reattaching it on first use. Concurrent first calls
    /// share one allocation. The allocation itself runs under the runtime's lifetime, not the
    /// call's token: a cancelled call stops waiting, but the sandbox is still recorded.
    pub async fn session_sandbox(self: &Arc<Self>, session: &str, cancel: &CancellationToken) -> Result<Sandbox, ToolError> {
        let slot = self.session(session);
        let this = self.clone();
        let name = session.to_string();
        let task = tokio::spawn(async move {
            let mut binding = slot.binding.lock().await;
            if let Some(bound) = binding.as_ref() {
                ready(&bound.sandbox).await?;
                return Ok(bound.sandbox.clone());
            }
            slot.opening.store(true, Ordering::SeqCst);
            let opened = this.open(&name).await;
            slot.opening.store(false, Ordering::SeqCst);
            let bound = opened?;
            let sandbox = bound.sandbox.clone();
            *binding = Some(bound);
            Ok(sandbox)
        });
        tokio::select! {
            joined = task => joined.map_err(|e| ToolError::Internal(format!("session allocation task failed: {e}")))?,
            _ = cancel.cancelled() => Err(ToolError::Cancelled),
        }
    }

    fn source(&self) -> String {
        format!("{}|{}", self.config.shape, self.config.rootfs)
    }

    /// Reattach to the stored binding, or create and prepare a new sandbox.
    async fn open(&self, session: &str) -> Result<Bound, ToolError> {
        if self.lifetime.is_cancelled() {
            return Err(ToolError::Refused("the tool server is shutting down".into()));
        }
        if self.config.persist {
            if let Some(record) = self.store.load(session)? {
                return self.reattach(session, record).await;
            }
        }
        let mut request = CreateSandbox::new(&self.config.shape)
            .rootfs(&self.config.rootfs)
            .name(format!("cos-{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff));
        if let Some(net) = &self.config.network {
            request = request.network(net);
        }
        if let Some(secs) = self.config.auto_pause_secs() {
            request = request.auto_pause_after(secs);
        }
        let sandbox = self.client.create_sandbox(request).await?;
        let mut record = BindingRecord {
            id: sandbox.id().to_string(),
            cwd: self.config.cwd.clone(),
            source: self.source(),
            owned: true,
            initialized: false,
        };
        tracing::info!(session, sandbox = %record.id, "allocated a session sandbox");
        let prepared = async {
            if self.config.persist {
                self.store.save(session, &record)?;
            }
            tokio::time::timeout(SETUP_TIMEOUT, self.prepare(&sandbox))
                .await
                .map_err(|_| ToolError::Timeout(SETUP_TIMEOUT))??;
            record.initialized = true;
            if self.config.persist {
                self.store.save(session, &record)?;
            }
            Ok::<(), ToolError>(())
        }
        .await;
        if let Err(err) = prepared {
            // Never leak what this runtime just created.
            let cleanup = sandbox.destroy().await;
            let _ = self.store.remove(session);
            return Err(match cleanup {
                Ok(_) => err,
                Err(destroy_err) => ToolError::Refused(format!(
                    "{err}; destroying the new sandbox {} also failed ({destroy_err}): it is still allocated, remove it with `cos rm {}`",
                    record.id, record.id
                )),
            });
        }
        Ok(Bound { sandbox, record })
    }

    async fn reattach(&self, session: &str, mut record: BindingRecord) -> Result<Bound, ToolError> {
        if record.source != self.source() || record.cwd != self.config.cwd {
            return Err(ToolError::Refused(format!(
                "stored sandbox configuration changed (bound {} at {}, configured {} at {}); release it (or forget it) before reopening",
                record.source,
                record.cwd,
                self.source(),
                self.config.cwd
            )));
        }
        let sandbox = match self.client.get_sandbox(&record.id).await {
            Ok(s) => s,
            Err(e) if e.is_not_found() => {
                return Err(ToolError::Refused(format!(
                    "the sandbox {} bound to this session no longer exists; forget the binding (sandbox_release with forget: true)",
                    record.id
                )))
            }
            Err(e) => return Err(e.into()),
        };
        ready(&sandbox).await?;
        if !record.initialized {
            self.prepare(&sandbox).await?;
            record.initialized = true;
            self.store.save(session, &record)?;
        } else {
            // Skills may have changed since the last attach; the project copy never repeats.
            self.stage_skills(&sandbox).await?;
        }
        tracing::info!(session, sandbox = %record.id, "reattached the session sandbox");
        Ok(Bound { sandbox, record })
    }

    /// Make a sandbox that was never initialized ready: working directory, the one-time
    /// project copy (`sync: "once"`), then the skills.
    async fn prepare(&self, sandbox: &Sandbox) -> Result<(), ToolError> {
        ready(sandbox).await?;
        let spec = ProcessSpec::new("mkdir").args(["-p", "--", self.config.cwd.as_str()]);
        let out = sandbox.processes().run(spec, RunOptions::default().timeout(Duration::from_secs(60))).await?;
        if !out.success() {
            return Err(ToolError::Refused(format!(
                "creating the working directory {} in {} failed: {}",
                self.config.cwd,
                sandbox.id(),
                out.stderr_lossy().trim()
            )));
        }
        if let Some(files) = staging::stage_project(sandbox, &self.config, &self.project_dir).await? {
            tracing::info!(sandbox = %sandbox.id(), files, "copied the project into the session sandbox");
        }
        self.stage_skills(sandbox).await
    }

    async fn stage_skills(&self, sandbox: &Sandbox) -> Result<(), ToolError> {
        let staged = staging::stage_skills(sandbox, &self.config, &self.project_dir).await?;
        if !staged.is_empty() {
            tracing::info!(sandbox = %sandbox.id(), dirs = ?staged, "copied skill directories into the session sandbox");
        }
        Ok(())
    }

    /// The in-memory status of `session`.
    pub fn status(&self, session: &str) -> Value {
        let s = self.session(session);
        let bound = s.binding.try_lock().ok().and_then(|b| b.clone());
        json!({
            "session": session,
            "project": self.project_dir.to_string_lossy(),
            "sandbox": bound.as_ref().map(|b| b.record.id.clone()),
            // After a restart the binding is on disk until the first call reattaches it.
            "stored": if bound.is_none() && self.config.persist {
                self.store.load(session).ok().flatten().map(|r| r.id)
            } else {
                None
            },
            "owned": bound.as_ref().map(|b| b.record.owned),
            "initializing": s.opening.load(Ordering::SeqCst),
            "cwd": self.config.cwd,
            "shape": self.config.shape,
            "rootfs": self.config.rootfs,
            "persist": self.config.persist,
            "in_flight": s.in_flight.load(Ordering::SeqCst),
            "transports": self.transports.list(),
        })
    }

    /// Release `session`: destroy its owned sandbox (`destroy`) or only forget the binding.
    /// Refused while that session has calls in flight (other than `own_calls` of the caller),
    /// an allocation pending, or another release running.
    pub async fn release(&self, session: &str, destroy: bool, own_calls: usize) -> Result<Value, ToolError> {
        let s = self.session(session);
        if s.releasing.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            return Err(ToolError::Refused(format!("session {session:?} is already being released")));
        }
        let result = self.release_locked(&s, session, destroy, own_calls).await;
        s.releasing.store(false, Ordering::SeqCst);
        result
    }

    async fn release_locked(&self, s: &Session, session: &str, destroy: bool, own_calls: usize) -> Result<Value, ToolError> {
        let busy = s.in_flight.load(Ordering::SeqCst).saturating_sub(own_calls);
        if busy > 0 {
            return Err(ToolError::Refused(format!("session {session:?} has {busy} call(s) in flight; release it when they finish")));
        }
        let Ok(mut binding) = s.binding.try_lock() else {
            return Err(ToolError::Refused(format!("session {session:?} is allocating its sandbox; release it afterwards")));
        };
        let record = match binding.as_ref() {
            Some(b) => Some(b.record.clone()),
            None if self.config.persist => self.store.load(session)?,
            None => None,
        };
        let Some(record) = record else {
            return Ok(json!({"released": false, "sandbox": null, "reason": "no sandbox is bound to this session"}));
        };
        if destroy {
            if !record.owned {
                return Err(ToolError::Refused(format!(
                    "cannot automatically destroy the externally owned sandbox {}; forget the binding instead",
                    record.id
                )));
            }
            // A failed destroy keeps the binding, so nothing is lost track of.
            self.client.sandbox(&record.id)?.destroy().await?;
            self.transports.stop_for_sandbox(&record.id).await;
        }
        *binding = None;
        self.store.remove(session)?;
        Ok(json!({"released": true, "sandbox": record.id, "destroyed": destroy}))
    }

    /// Destroy sandbox `id` on request (`sandbox_destroy`), dropping every binding to it.
    /// Refused while a session bound to it has other calls in flight.
    pub async fn destroy_explicit(&self, id: &str, caller: &str) -> Result<Value, ToolError> {
        let sessions: Vec<(String, Arc<Session>)> =
            self.sessions.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let mut bound_to = Vec::new();
        for (name, s) in &sessions {
            let Ok(binding) = s.binding.try_lock() else {
                return Err(ToolError::Refused(format!("session {name:?} is allocating a sandbox; retry shortly")));
            };
            if binding.as_ref().is_some_and(|b| b.record.id == id) {
                let own = usize::from(name == caller);
                if s.in_flight.load(Ordering::SeqCst) > own {
                    return Err(ToolError::Refused(format!("sandbox {id} is in use by session {name:?}; retry when its calls finish")));
                }
                bound_to.push(s.clone());
            }
        }
        let destroyed = self.client.sandbox(id)?.destroy().await?;
        // Its watchers and tunnels could only fail from now on.
        let stopped = self.transports.stop_for_sandbox(id).await;
        for s in bound_to {
            if let Ok(mut b) = s.binding.try_lock() {
                *b = None;
            }
        }
        for (name, record) in self.store.all()? {
            if record.id == id {
                self.store.remove(&name)?;
            }
        }
        Ok(json!({"destroyed": destroyed.id, "status": destroyed.status, "stopped_transports": stopped}))
    }

    /// Stop: cancel in-flight calls, stop every background transport (sync watchers, tunnels);
    /// without `persist`, destroy the session sandboxes this runtime owns (explicitly created
    /// sandboxes and forks are never touched).
    pub async fn shutdown(&self) {
        self.lifetime.cancel();
        let stopped = self.transports.stop_all().await;
        if stopped > 0 {
            tracing::info!(stopped, "stopped the background transports");
        }
        if self.config.persist {
            return;
        }
        let sessions: Vec<(String, Arc<Session>)> =
            self.sessions.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for (name, s) in sessions {
            let bound = s.binding.lock().await.take();
            if let Some(b) = bound.filter(|b| b.record.owned) {
                match b.sandbox.destroy().await {
                    Ok(_) => tracing::info!(session = %name, sandbox = %b.record.id, "destroyed the session sandbox"),
                    Err(e) => tracing::error!(session = %name, sandbox = %b.record.id, error = %e,
                        "destroying the session sandbox failed; it is still allocated"),
                }
            }
        }
    }
}

/// Bring `sandbox` to `running`: resume it when paused, wait while it moves.
pub async fn ready(sandbox: &Sandbox) -> Result<(), ToolError> {
    let view = sandbox.refresh().await?;
    match view.status {
        SandboxStatus::Running => Ok(()),
        SandboxStatus::Paused | SandboxStatus::Error => {
            sandbox.resume_and_wait().await?;
            Ok(())
        }
        SandboxStatus::Pausing => {
            sandbox.wait_until_paused(None).await?;
            sandbox.resume_and_wait().await?;
            Ok(())
        }
        SandboxStatus::Creating | SandboxStatus::Resuming | SandboxStatus::Forking => {
            sandbox.wait_until_running(None).await?;
            Ok(())
        }
        other => Err(ToolError::Refused(format!(
            "sandbox {} is {}; it cannot be used any more (release or forget its binding)",
            sandbox.id(),
            other.as_str()
        ))),
    }
}
