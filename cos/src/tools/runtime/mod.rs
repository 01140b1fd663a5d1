//! The session runtime: each session's sandbox, allocated lazily and single-flight, persisted
//! bindings with reattach, recovery when the bound sandbox is gone, release/forget, in-flight
//! accounting, and shutdown cleanup (plugins.md §2.5).
//!
//! A warm call reuses the session's binding without asking the control plane about it: the
//! sandbox is revalidated only when a call fails in a way that says it may be gone or stopped
//! ([`Runtime::with_session`], in `session.rs`).

mod session;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::background::BackgroundTasks;
use super::config::ToolsConfig;
use super::isolation::HostGuard;
use super::store::{BindingRecord, BindingStore};
use super::ToolError;
use createos_sandbox::guest::Resident;
use createos_sandbox::{Client, Sandbox, SandboxStatus};

pub use session::ready;

/// Builds a signed-in client once credentials exist (a later `createos login`).
pub type SignIn = Box<dyn Fn() -> createos_sandbox::Result<Client> + Send + Sync>;

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
    /// Said once, in the result of the next call: the bound sandbox was replaced.
    notice: Mutex<Option<Notice>>,
}

/// A replaced binding, told to the agent in the next result.
#[derive(Clone, Debug)]
struct Notice {
    previous: String,
    current: String,
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
    /// The client given at start (anonymous when started signed out).
    client: Client,
    /// A client built after a later sign-in.
    signed: OnceLock<Client>,
    sign_in: Option<SignIn>,
    config: ToolsConfig,
    /// Bindings of this endpoint, account and project (the account needs a `whoami`, asked
    /// once).
    store: tokio::sync::OnceCell<BindingStore>,
    project_dir: PathBuf,
    state_dir: PathBuf,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    lifetime: CancellationToken,
    /// Sync watchers and tunnels: stopped at shutdown.
    background: BackgroundTasks,
    /// Whether commands may run on a local emulator that cannot isolate them.
    host: HostGuard,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("config", &self.config)
            .field("project_dir", &self.project_dir)
            .finish()
    }
}

impl Runtime {
    /// A runtime for `project_dir`, keeping bindings under `state_dir`.
    pub fn new(
        client: Client,
        config: ToolsConfig,
        state_dir: PathBuf,
        project_dir: PathBuf,
    ) -> Arc<Self> {
        Self::with_sign_in(client, None, config, state_dir, project_dir)
    }

    /// Like [`Runtime::new`]; while `client` has no credential, `sign_in` is tried before each
    /// use, so a sign-in made after the start is picked up without a restart.
    pub fn with_sign_in(
        client: Client,
        sign_in: Option<SignIn>,
        config: ToolsConfig,
        state_dir: PathBuf,
        project_dir: PathBuf,
    ) -> Arc<Self> {
        let lifetime = CancellationToken::new();
        Arc::new(Runtime {
            client,
            signed: OnceLock::new(),
            sign_in,
            config,
            store: tokio::sync::OnceCell::new(),
            project_dir,
            state_dir,
            sessions: Mutex::new(HashMap::new()),
            background: BackgroundTasks::new(lifetime.clone()),
            lifetime,
            host: HostGuard::new(false),
        })
    }

    /// Run commands even on a local emulator that cannot isolate its sandboxes
    /// (`cos mcp --unsafe-host`).
    pub fn allow_unsafe_host(&self) {
        self.host.allow_unsafe_host();
    }

    /// Refuse `tool`, which runs commands in a sandbox, when the control plane is a local
    /// emulator that cannot isolate them (asked once per runtime).
    pub async fn require_isolation(&self, tool: &str) -> Result<(), ToolError> {
        self.host.check(self.client(), tool).await
    }

    /// The control-plane client. Signed out, its requests fail with
    /// [`createos_sandbox::Error::NotSignedIn`] (which says how to sign in) until credentials appear.
    pub fn client(&self) -> &Client {
        if let Some(client) = self.signed.get() {
            return client;
        }
        if self.client.credentials().is_some() {
            return &self.client;
        }
        if let Some(sign_in) = &self.sign_in {
            match sign_in() {
                Ok(client) if client.credentials().is_some() => {
                    tracing::info!("signed in; using the new credential");
                    return self.signed.get_or_init(|| client);
                }
                Ok(_) => {}
                Err(err) => tracing::debug!(error = %err, "still signed out"),
            }
        }
        &self.client
    }

    /// Whether a credential is available now.
    pub fn signed_in(&self) -> bool {
        self.client().credentials().is_some()
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

    /// The background tasks (sync watchers, tunnels) this runtime owns.
    pub fn background(&self) -> &BackgroundTasks {
        &self.background
    }

    /// Cancelled when the runtime shuts down; every call's token is a child of it.
    pub fn lifetime(&self) -> &CancellationToken {
        &self.lifetime
    }

    fn session(&self, name: &str) -> Arc<Session> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.entry(name.to_string()).or_default().clone()
    }

    /// The binding store of this endpoint, account and project (asks `whoami` once).
    async fn store(&self) -> Result<&BindingStore, ToolError> {
        self.store
            .get_or_try_init(|| async {
                let client = self.client();
                let who = client.whoami().await?;
                Ok::<_, ToolError>(BindingStore::new(
                    &self.state_dir,
                    client.base_url().as_str(),
                    &who.user_id,
                    &self.project_dir,
                ))
            })
            .await
    }

    /// Register a call of `session` as in flight; refused while shutting down or releasing.
    pub fn begin(&self, session: &str) -> Result<CallGuard, ToolError> {
        if self.lifetime.is_cancelled() {
            return Err(ToolError::Refused(
                "the tool server is shutting down".into(),
            ));
        }
        let s = self.session(session);
        s.in_flight.fetch_add(1, Ordering::SeqCst);
        let guard = CallGuard { session: s };
        if guard.session.releasing.load(Ordering::SeqCst) {
            return Err(ToolError::Refused(format!(
                "session {session:?} is being released; retry afterwards"
            )));
        }
        Ok(guard)
    }

    fn source(&self) -> String {
        format!("{}|{}", self.config.shape, self.config.rootfs)
    }

    /// The status of `session`: its binding in memory, else the stored one.
    pub async fn status(&self, session: &str) -> Value {
        let s = self.session(session);
        let bound = s.binding.try_lock().ok().and_then(|b| b.clone());
        // After a restart the binding is on disk until the first call reattaches it.
        let stored = if bound.is_none() && self.config.persist && self.signed_in() {
            match self.store().await {
                Ok(store) => store.load(session).ok().flatten().map(|r| r.id),
                Err(_) => None,
            }
        } else {
            None
        };
        json!({
            "session": session,
            "project": self.project_dir.to_string_lossy(),
            "endpoint": self.client().base_url().as_str(),
            "signedIn": self.signed_in(),
            "sandbox": bound.as_ref().map(|b| b.record.id.clone()),
            "stored": stored,
            "owned": bound.as_ref().map(|b| b.record.owned),
            "initializing": s.opening.load(Ordering::SeqCst),
            "cwd": self.config.cwd,
            "shape": self.config.shape,
            "rootfs": self.config.rootfs,
            "persist": self.config.persist,
            "in_flight": s.in_flight.load(Ordering::SeqCst),
            // wire name from plugins.md: the list of background tasks
            "transports": self.background.list(),
        })
    }

    /// Release `session`: destroy its owned sandbox (`destroy`) or only forget the binding.
    /// Refused while that session has calls in flight (other than `own_calls` of the caller),
    /// an allocation pending, or another release running.
    pub async fn release(
        &self,
        session: &str,
        destroy: bool,
        own_calls: usize,
    ) -> Result<Value, ToolError> {
        let s = self.session(session);
        if s.releasing
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return Err(ToolError::Refused(format!(
                "session {session:?} is already being released"
            )));
        }
        let result = self.release_locked(&s, session, destroy, own_calls).await;
        s.releasing.store(false, Ordering::SeqCst);
        result
    }

    async fn release_locked(
        &self,
        s: &Session,
        session: &str,
        destroy: bool,
        own_calls: usize,
    ) -> Result<Value, ToolError> {
        let busy = s.in_flight.load(Ordering::SeqCst).saturating_sub(own_calls);
        if busy > 0 {
            return Err(ToolError::Refused(format!(
                "session {session:?} has {busy} call(s) in flight; release it when they finish"
            )));
        }
        let Ok(mut binding) = s.binding.try_lock() else {
            return Err(ToolError::Refused(format!(
                "session {session:?} is allocating its sandbox; release it afterwards"
            )));
        };
        let record = match binding.as_ref() {
            Some(b) => Some(b.record.clone()),
            None if self.config.persist => self.store().await?.load(session)?,
            None => None,
        };
        let Some(record) = record else {
            return Ok(
                json!({"released": false, "sandbox": null, "reason": "no sandbox is bound to this session"}),
            );
        };
        let sandbox = self.client().sandbox(&record.id)?;
        if destroy {
            if !record.owned {
                return Err(ToolError::Refused(format!(
                    "cannot automatically destroy the externally owned sandbox {}; forget the binding instead",
                    record.id
                )));
            }
            // A failed destroy keeps the binding, so nothing is lost track of.
            sandbox.destroy().await?;
            Resident::forget(&sandbox);
            self.background.stop_for_sandbox(&record.id).await;
        } else {
            // The sandbox stays; its helper does not.
            Resident::of(&sandbox).shutdown().await;
            Resident::forget(&sandbox);
        }
        *binding = None;
        if self.config.persist {
            self.store().await?.remove(session)?;
        }
        Ok(json!({"released": true, "sandbox": record.id, "destroyed": destroy}))
    }

    /// Destroy sandbox `id` on request (`sandbox_destroy`), dropping every binding to it.
    /// Refused while a session bound to it has other calls in flight.
    pub async fn destroy_explicit(&self, id: &str, caller: &str) -> Result<Value, ToolError> {
        let sessions: Vec<(String, Arc<Session>)> = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut bound_to = Vec::new();
        for (name, s) in &sessions {
            let Ok(binding) = s.binding.try_lock() else {
                return Err(ToolError::Refused(format!(
                    "session {name:?} is allocating a sandbox; retry shortly"
                )));
            };
            if binding.as_ref().is_some_and(|b| b.record.id == id) {
                let own = usize::from(name == caller);
                if s.in_flight.load(Ordering::SeqCst) > own {
                    return Err(ToolError::Refused(format!(
                        "sandbox {id} is in use by session {name:?}; retry when its calls finish"
                    )));
                }
                bound_to.push(s.clone());
            }
        }
        let sandbox = self.client().sandbox(id)?;
        let destroyed = sandbox.destroy().await?;
        Resident::forget(&sandbox);
        // Its watchers and tunnels could only fail from now on.
        let stopped = self.background.stop_for_sandbox(id).await;
        for s in bound_to {
            if let Ok(mut b) = s.binding.try_lock() {
                *b = None;
            }
        }
        if self.config.persist {
            let store = self.store().await?;
            for (name, record) in store.all()? {
                if record.id == id {
                    store.remove(&name)?;
                }
            }
        }
        Ok(
            json!({"destroyed": destroyed.id, "status": destroyed.status, "stopped_transports": stopped}),
        )
    }

    /// Stop: cancel in-flight calls, stop every background task (sync watchers, tunnels)
    /// and the resident helpers; without `persist`, destroy the session sandboxes this runtime
    /// owns (explicitly created sandboxes and forks are never touched).
    pub async fn shutdown(&self) {
        self.lifetime.cancel();
        let stopped = self.background.stop_all().await;
        if stopped > 0 {
            tracing::info!(stopped, "stopped the background tasks");
        }
        if !self.config.persist {
            let sessions: Vec<(String, Arc<Session>)> = self
                .sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for (name, s) in sessions {
                let bound = s.binding.lock().await.take();
                if let Some(b) = bound.filter(|b| b.record.owned) {
                    Resident::forget(&b.sandbox);
                    match b.sandbox.destroy().await {
                        Ok(_) => {
                            tracing::info!(session = %name, sandbox = %b.record.id, "destroyed the session sandbox")
                        }
                        Err(e) => {
                            tracing::error!(session = %name, sandbox = %b.record.id, error = %e,
                            "destroying the session sandbox failed; it is still allocated")
                        }
                    }
                }
            }
        }
        Resident::shutdown_all(self.client().base_url()).await;
    }
}

/// A status that means the sandbox can never run again.
fn is_gone(status: &SandboxStatus) -> bool {
    matches!(
        status,
        SandboxStatus::Destroyed | SandboxStatus::Destroying | SandboxStatus::Failed
    )
}
