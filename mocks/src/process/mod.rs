//! Managed processes (E21–E30) and the interactive upgrade routes (E31 shell, E32
//! shell-ws, E33 tunnel). Processes are real: spawned through the sandbox runtime, with
//! pipes or a PTY, an output journal per process, and whole-tree tracking.
//!
//! [`ProcessTable`] holds every sandbox's processes and open interactive sessions; the
//! sandbox engine calls [`ProcessTable::kill_sandbox`] on destroy and
//! [`ProcessTable::kill_all`] on shutdown; `/_mock/stats` reads
//! [`ProcessTable::live_count`].

mod arena;
mod connect;
mod fdio;
mod frames;
mod journal;
mod managed;
pub mod netns;
mod pty;
pub mod routes;
mod shell;
mod spawn;
mod tasks;
mod tree;
mod tunnel;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use managed::{ManagedProcess, ProcessDetails};

/// Exited processes kept per sandbox (oldest dropped first); running ones are never dropped.
pub const MAX_RETAINED_EXITED: usize = 64;

/// How often the tree scanner re-reads `/proc`: quickly while some leader has exited and
/// its tree is draining, slowly while every tracked leader is still running.
const SCAN_DRAINING: Duration = Duration::from_millis(100);
const SCAN_RUNNING: Duration = Duration::from_millis(500);

/// Every sandbox's managed processes and interactive sessions.
#[derive(Default)]
pub struct ProcessTable {
    inner: Arc<TableInner>,
}

impl std::fmt::Debug for ProcessTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessTable")
            .field("live", &self.live_count())
            .finish()
    }
}

#[derive(Default)]
struct TableInner {
    sandboxes: Mutex<HashMap<String, SandboxProcesses>>,
    scanner_running: AtomicBool,
    /// Open `/shell`, `/shell-ws` and `/tunnel` sessions.
    live_sessions: AtomicUsize,
}

#[derive(Default)]
struct SandboxProcesses {
    /// In creation order.
    procs: Vec<Arc<ManagedProcess>>,
    /// Cancelled when the sandbox is destroyed: ends its interactive sessions.
    sessions: CancellationToken,
}

/// Keeps an interactive session counted; its token fires when the sandbox goes away.
pub struct SessionGuard {
    pub cancel: CancellationToken,
    table: Weak<TableInner>,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        if let Some(t) = self.table.upgrade() {
            t.live_sessions.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl ProcessTable {
    fn sandboxes(&self) -> MutexGuard<'_, HashMap<String, SandboxProcesses>> {
        self.inner
            .sandboxes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a new process of `sandbox_id`, dropping the oldest exited ones beyond
    /// [`MAX_RETAINED_EXITED`], and makes sure its tree is being tracked.
    pub fn insert(&self, sandbox_id: &str, proc: Arc<ManagedProcess>) {
        {
            let mut map = self.sandboxes();
            let entry = map.entry(sandbox_id.to_string()).or_default();
            entry.procs.push(proc);
            let exited = entry.procs.iter().filter(|p| p.tree_exited()).count();
            let mut excess = exited.saturating_sub(MAX_RETAINED_EXITED);
            entry.procs.retain(|p| {
                if excess > 0 && p.tree_exited() {
                    excess -= 1;
                    p.kill_now();
                    return false;
                }
                true
            });
        }
        self.ensure_scanner();
    }

    /// One process of a sandbox.
    pub fn get(&self, sandbox_id: &str, process_id: &str) -> Option<Arc<ManagedProcess>> {
        self.sandboxes()
            .get(sandbox_id)?
            .procs
            .iter()
            .find(|p| p.id == process_id)
            .cloned()
    }

    /// Every retained process of a sandbox, oldest first.
    pub fn list(&self, sandbox_id: &str) -> Vec<Arc<ManagedProcess>> {
        self.sandboxes()
            .get(sandbox_id)
            .map(|s| s.procs.clone())
            .unwrap_or_default()
    }

    /// Opens an interactive session of `sandbox_id` (counted in `live_count`).
    pub fn session(&self, sandbox_id: &str) -> SessionGuard {
        let cancel = self
            .sandboxes()
            .entry(sandbox_id.to_string())
            .or_default()
            .sessions
            .child_token();
        self.inner.live_sessions.fetch_add(1, Ordering::SeqCst);
        SessionGuard {
            cancel,
            table: Arc::downgrade(&self.inner),
        }
    }

    /// Kills every process tree and session of a sandbox and forgets its records.
    pub fn kill_sandbox(&self, sandbox_id: &str) {
        let removed = self.sandboxes().remove(sandbox_id);
        if let Some(entry) = removed {
            entry.sessions.cancel();
            for p in entry.procs {
                p.kill_now();
            }
        }
    }

    /// Kills everything (emulator shutdown).
    pub fn kill_all(&self) {
        let ids: Vec<String> = self.sandboxes().keys().cloned().collect();
        for id in ids {
            self.kill_sandbox(&id);
        }
    }

    /// Processes whose tree is still alive plus open interactive sessions.
    pub fn live_count(&self) -> usize {
        let procs = self
            .sandboxes()
            .values()
            .flat_map(|s| s.procs.iter())
            .filter(|p| !p.tree_exited())
            .count();
        procs + self.inner.live_sessions.load(Ordering::SeqCst)
    }

    fn ensure_scanner(&self) {
        if self.inner.scanner_running.swap(true, Ordering::SeqCst) {
            return;
        }
        if tokio::runtime::Handle::try_current().is_err() {
            self.inner.scanner_running.store(false, Ordering::SeqCst);
            return;
        }
        tokio::spawn(scan_trees(Arc::downgrade(&self.inner)));
    }
}

impl TableInner {
    fn tracked(&self) -> Vec<Arc<ManagedProcess>> {
        self.sandboxes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .flat_map(|s| s.procs.iter())
            .filter(|p| !p.tree_exited())
            .cloned()
            .collect()
    }
}

/// Re-reads `/proc` periodically while any tree is alive, so descendants are known before
/// their parents die and `tree_exited` flips once the last one is gone. Exits when idle.
async fn scan_trees(table: Weak<TableInner>) {
    loop {
        let Some(inner) = table.upgrade() else { return };
        let tracked = inner.tracked();
        if tracked.is_empty() {
            inner.scanner_running.store(false, Ordering::SeqCst);
            // A process registered while we were deciding to stop must not go untracked.
            if inner.tracked().is_empty() || inner.scanner_running.swap(true, Ordering::SeqCst) {
                return;
            }
            continue;
        }
        drop(inner);
        let snap = tokio::task::spawn_blocking(tree::snapshot)
            .await
            .ok()
            .flatten();
        for p in &tracked {
            match &snap {
                Some(snap) => p.track(snap),
                None => p.refresh_tree(),
            }
        }
        let draining = tracked.iter().any(|p| p.leader_exited());
        drop(tracked);
        tokio::time::sleep(if draining {
            SCAN_DRAINING
        } else {
            SCAN_RUNNING
        })
        .await;
    }
}
