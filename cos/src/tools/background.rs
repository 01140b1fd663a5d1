//! Background tasks owned by the tool runtime (plugins.md §2.10 calls them "local background
//! transports"): sync watchers and port tunnels, each under a `tr-…` id. They run as tasks of
//! this process (no detached children), so [`BackgroundTasks::stop_all`] at shutdown really
//! ends every one of them.
//!
//! The wire names stay those of plugins.md, which the OpenCode plugin and agents already use:
//! the tool `sandbox_transport_stop`, the id field `transport_id`, the `transports` list in
//! `sandbox_status` and `stopped_transports` in a destroy result.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::ToolError;
use createos_sandbox::sync::{SyncMode, SyncReport, Syncer};
use createos_sandbox::tunnel::RunningTunnel;

/// How often a two-way watcher looks for changes made inside the sandbox.
pub const TWO_WAY_POLL: Duration = Duration::from_secs(5);

/// How often a one-way or mirror watcher syncs without a file event: a backstop, because the
/// watch drops events that arrive while a sync runs (an edit made then would wait for the
/// next one).
pub const BACKSTOP_POLL: Duration = Duration::from_secs(10);

/// How long stopping one background task may take before its task is abandoned (aborted).
const STOP_GRACE: Duration = Duration::from_secs(10);

/// What a sync watcher has done so far (shared with its task).
#[derive(Debug, Default)]
struct WatchProgress {
    syncs: u64,
    failures: u64,
    files_pushed: u64,
    files_pulled: u64,
    files_deleted: u64,
    conflicts: u64,
    last_error: Option<String>,
    /// Set when the watch itself ended (it could not watch the directory).
    ended: Option<String>,
}

enum Kind {
    Sync {
        sandbox: String,
        local: String,
        remote: String,
        mode: SyncMode,
        progress: Arc<Mutex<WatchProgress>>,
        task: JoinHandle<()>,
    },
    Tunnel {
        sandbox: String,
        remote_port: u16,
        local: SocketAddr,
        running: RunningTunnel,
    },
}

struct Task {
    session: String,
    cancel: CancellationToken,
    kind: Kind,
}

impl Task {
    fn sandbox(&self) -> &str {
        match &self.kind {
            Kind::Sync { sandbox, .. } | Kind::Tunnel { sandbox, .. } => sandbox,
        }
    }

    fn view(&self, id: &str) -> Value {
        match &self.kind {
            Kind::Sync {
                sandbox,
                local,
                remote,
                mode,
                progress,
                task,
            } => {
                let p = progress.lock().unwrap_or_else(|e| e.into_inner());
                json!({
                    "transport_id": id,
                    "kind": "sync",
                    "session": self.session,
                    "sandbox_id": sandbox,
                    "local_dir": local,
                    "remote_dir": remote,
                    "mode": mode,
                    "running": !task.is_finished() && !self.cancel.is_cancelled(),
                    "syncs": p.syncs,
                    "failures": p.failures,
                    "files_pushed": p.files_pushed,
                    "files_pulled": p.files_pulled,
                    "files_deleted": p.files_deleted,
                    "conflicts": p.conflicts,
                    "last_error": p.ended.clone().or_else(|| p.last_error.clone()),
                })
            }
            Kind::Tunnel {
                sandbox,
                remote_port,
                local,
                running,
            } => json!({
                "transport_id": id,
                "kind": "tunnel",
                "session": self.session,
                "sandbox_id": sandbox,
                "remote_port": remote_port,
                "local_port": local.port(),
                "url": format!("http://{local}"),
                "running": !self.cancel.is_cancelled(),
                "connections": running.accepted(),
                "failed_connections": running.failed(),
            }),
        }
    }

    /// Cancel and wait (bounded) for the task to end.
    async fn stop(self) {
        self.cancel.cancel();
        match self.kind {
            Kind::Sync { mut task, .. } => {
                if tokio::time::timeout(STOP_GRACE, &mut task).await.is_err() {
                    task.abort();
                }
            }
            Kind::Tunnel { mut running, .. } => {
                if let Ok(Err(err)) = tokio::time::timeout(STOP_GRACE, running.stop()).await {
                    tracing::warn!(error = %err, "a tunnel ended with an error");
                }
            }
        }
    }
}

/// The registry of running background tasks.
pub struct BackgroundTasks {
    /// Parent of every task's token: cancelled at runtime shutdown.
    lifetime: CancellationToken,
    running: Mutex<BTreeMap<String, Task>>,
}

impl std::fmt::Debug for BackgroundTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundTasks")
            .field("ids", &self.ids())
            .finish()
    }
}

fn new_id() -> String {
    format!("tr-{:016x}", rand::random::<u64>())
}

fn count_report(p: &mut WatchProgress, report: &SyncReport) {
    p.syncs += 1;
    p.files_pushed += report.pushed.len() as u64;
    p.files_pulled += report.pulled.len() as u64;
    p.files_deleted += (report.deleted_remote.len() + report.deleted_local.len()) as u64;
    p.conflicts += report.conflicts.len() as u64;
    p.last_error = None;
}

impl BackgroundTasks {
    /// An empty registry whose tasks stop when `lifetime` is cancelled.
    pub fn new(lifetime: CancellationToken) -> Self {
        BackgroundTasks {
            lifetime,
            running: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Task>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn ids(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// Register `task` under a new id; refused (and the task stopped) once the
    /// runtime is shutting down.
    fn insert(&self, task: Task) -> Result<String, ToolError> {
        let mut running = self.lock();
        // Checked under the lock: stop_all drains under it too, so nothing slips in after.
        if self.lifetime.is_cancelled() {
            task.cancel.cancel();
            return Err(ToolError::Refused(
                "the tool server is shutting down".into(),
            ));
        }
        let mut id = new_id();
        while running.contains_key(&id) {
            id = new_id();
        }
        running.insert(id.clone(), task);
        Ok(id)
    }

    /// Start watching with `syncer` (already run once by the caller): it syncs again after
    /// every burst of local changes, and every [`TWO_WAY_POLL`] (two-way) or [`BACKSTOP_POLL`].
    pub fn start_sync(
        &self,
        session: &str,
        sandbox: &str,
        syncer: Arc<Syncer>,
    ) -> Result<String, ToolError> {
        if self.lifetime.is_cancelled() {
            return Err(ToolError::Refused(
                "the tool server is shutting down".into(),
            ));
        }
        let cancel = self.lifetime.child_token();
        let progress = Arc::new(Mutex::new(WatchProgress::default()));
        let mode = syncer.options().mode;
        let poll = if mode == SyncMode::TwoWay {
            TWO_WAY_POLL
        } else {
            BACKSTOP_POLL
        };
        let task = {
            let (syncer, cancel, progress) = (syncer.clone(), cancel.clone(), progress.clone());
            tokio::spawn(async move {
                let remote = syncer.remote_dir().to_string();
                let record = progress.clone();
                let watched = syncer
                    .watch(cancel, Some(poll), move |outcome| {
                        let mut p = record.lock().unwrap_or_else(|e| e.into_inner());
                        match outcome {
                            Ok(report) => count_report(&mut p, &report),
                            Err(err) => {
                                tracing::warn!(%remote, error = %err, "background sync failed; retrying on the next change");
                                p.failures += 1;
                                p.last_error = Some(err.to_string());
                            }
                        }
                    })
                    .await;
                if let Err(err) = watched {
                    progress.lock().unwrap_or_else(|e| e.into_inner()).ended =
                        Some(format!("the watch stopped: {err}"));
                }
            })
        };
        let task = Task {
            session: session.to_string(),
            cancel,
            kind: Kind::Sync {
                sandbox: sandbox.to_string(),
                local: syncer.local().to_string_lossy().into_owned(),
                remote: syncer.remote_dir().to_string(),
                mode,
                progress,
                task,
            },
        };
        self.insert(task)
    }

    /// Register a running tunnel.
    pub fn add_tunnel(
        &self,
        session: &str,
        sandbox: &str,
        remote_port: u16,
        running: RunningTunnel,
    ) -> Result<String, ToolError> {
        let task = Task {
            session: session.to_string(),
            cancel: running.cancel_token(),
            kind: Kind::Tunnel {
                sandbox: sandbox.to_string(),
                remote_port,
                local: running.local_addr(),
                running,
            },
        };
        self.insert(task)
    }

    /// Every background task, in id order.
    pub fn list(&self) -> Vec<Value> {
        self.lock().iter().map(|(id, t)| t.view(id)).collect()
    }

    /// Stop background task `id` and wait until it has ended; its last state is returned.
    pub async fn stop(&self, id: &str) -> Result<Value, ToolError> {
        let task = self.lock().remove(id).ok_or_else(|| {
            ToolError::Refused(format!(
                "unknown background task {id:?}; sandbox_status lists the running ones"
            ))
        })?;
        let mut view = task.view(id);
        task.stop().await;
        view["running"] = Value::Bool(false);
        view["stopped"] = Value::Bool(true);
        Ok(view)
    }

    /// Stop every background task to `sandbox` (it is being destroyed); returns their ids.
    pub async fn stop_for_sandbox(&self, sandbox: &str) -> Vec<String> {
        let mine: Vec<(String, Task)> = {
            let mut running = self.lock();
            let ids: Vec<String> = running
                .iter()
                .filter(|(_, t)| t.sandbox() == sandbox)
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| running.remove(&id).map(|t| (id, t)))
                .collect()
        };
        let ids = mine.iter().map(|(id, _)| id.clone()).collect();
        futures::future::join_all(mine.into_iter().map(|(_, t)| t.stop())).await;
        ids
    }

    /// Stop every background task (runtime shutdown); returns how many were running.
    pub async fn stop_all(&self) -> usize {
        let all: Vec<(String, Task)> = std::mem::take(&mut *self.lock()).into_iter().collect();
        let count = all.len();
        futures::future::join_all(all.into_iter().map(|(id, t)| async move {
            t.stop().await;
            tracing::info!(task = %id, "stopped a background task");
        }))
        .await;
        count
    }
}
