//! The plugin's state in `HERDR_PLUGIN_STATE_DIR`: `panes.json` (pane → sandbox mapping) and
//! `pending.json` (starts in progress). Every read-modify-write holds an exclusive lock on
//! `state.lock`; files are replaced atomically (write a temporary file, fsync, rename); a file
//! that does not parse is moved aside and the action fails — it is never treated as empty,
//! which would orphan every sandbox it mapped.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::error::{HerdrError, HerdrResult};

/// Mapping file name.
pub const PANES_FILE: &str = "panes.json";
/// Pending-start file name.
pub const PENDING_FILE: &str = "pending.json";
/// Lock file name.
pub const LOCK_FILE: &str = "state.lock";
/// How long a start reservation blocks a second start after it was made or last refreshed.
/// Provisioning refreshes it while it runs ([`PENDING_HEARTBEAT`]), so a start that takes
/// longer (installs wait up to 600 s, uploads are unbounded) keeps its reservation.
pub const PENDING_TTL: Duration = Duration::from_secs(300);
/// How often a running provisioning refreshes its reservation.
pub const PENDING_HEARTBEAT: Duration = Duration::from_secs(30);
/// How long to wait for another action holding the lock.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);
/// Pause between two attempts at the lock.
const LOCK_RETRY: Duration = Duration::from_millis(20);

/// What a pane is attached to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PaneEntry {
    /// Sandbox name.
    #[serde(rename = "box")]
    pub box_name: String,
    /// Sandbox id.
    pub box_id: String,
    /// Agent key.
    pub agent: String,
    /// The agent's binary in the sandbox.
    pub bin: String,
    /// The agent's PTY process.
    pub process_id: String,
    /// Local Git root that was uploaded.
    pub local: String,
    /// Worktree directory in the sandbox.
    pub remote: String,
    /// When `delete` was first invoked (ms since the epoch); a second invocation within 60 s deletes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_armed_at: Option<u64>,
}

/// A start in progress, keyed by the pane it was started from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingStart {
    /// When it was reserved (ms since the epoch).
    pub created_at: u64,
    /// When the provisioning last said it is still running (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refreshed_at: Option<u64>,
    /// The pane opened for the agent, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pane: Option<String>,
    /// The sandbox name chosen.
    #[serde(rename = "box")]
    pub box_name: String,
}

impl PendingStart {
    /// Whether the reservation still holds at `now_ms`.
    pub fn is_live(&self, now_ms: u64) -> bool {
        let last = self.refreshed_at.unwrap_or(0).max(self.created_at);
        now_ms.saturating_sub(last) < PENDING_TTL.as_millis() as u64
    }
}

/// Both files, as read under the lock.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    /// Pane id → mapping.
    pub panes: BTreeMap<String, PaneEntry>,
    /// Source pane id → reservation.
    pub pending: BTreeMap<String, PendingStart>,
}

impl State {
    /// The live reservation that involves `pane` (as source or as the opened pane), if any.
    pub fn pending_for(&self, pane: &str, now_ms: u64) -> Option<(&String, &PendingStart)> {
        self.pending
            .iter()
            .filter(|(_, p)| p.is_live(now_ms))
            .find(|(src, p)| src.as_str() == pane || p.pane.as_deref() == Some(pane))
    }

    /// Drop expired reservations.
    pub fn expire_pending(&mut self, now_ms: u64) {
        self.pending.retain(|_, p| p.is_live(now_ms));
    }
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The state directory.
#[derive(Clone, Debug)]
pub struct StateStore {
    dir: PathBuf,
}

/// Held lock on the state directory; released on drop (or when the process dies).
#[derive(Debug)]
struct StateLock {
    file: File,
}

impl Drop for StateLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

impl StateStore {
    /// The store in `dir` (created with mode 0700 when missing).
    pub fn open(dir: impl Into<PathBuf>) -> HerdrResult<StateStore> {
        let dir = dir.into();
        if dir.as_os_str().is_empty() {
            return Err(HerdrError::NotInHerdr("HERDR_PLUGIN_STATE_DIR"));
        }
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir).map_err(|e| {
            HerdrError::io(format!("creating the state directory {}", dir.display()), e)
        })?;
        Ok(StateStore { dir })
    }

    /// The store named by `HERDR_PLUGIN_STATE_DIR`.
    pub fn from_env() -> HerdrResult<StateStore> {
        match std::env::var_os("HERDR_PLUGIN_STATE_DIR") {
            Some(dir) if !dir.is_empty() => StateStore::open(PathBuf::from(dir)),
            _ => Err(HerdrError::NotInHerdr("HERDR_PLUGIN_STATE_DIR")),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Read both files under the lock.
    pub async fn read(&self) -> HerdrResult<State> {
        let _lock = self.lock().await?;
        self.load()
    }

    /// Read, let `change` modify, and write back what changed, all under the lock. When
    /// `change` fails nothing is written.
    pub async fn update<T>(
        &self,
        change: impl FnOnce(&mut State) -> HerdrResult<T>,
    ) -> HerdrResult<T> {
        let _lock = self.lock().await?;
        let before = self.load()?;
        let mut state = before.clone();
        let out = change(&mut state)?;
        if state.panes != before.panes {
            write_atomic(&self.dir.join(PANES_FILE), &state.panes)?;
        }
        if state.pending != before.pending {
            write_atomic(&self.dir.join(PENDING_FILE), &state.pending)?;
        }
        Ok(out)
    }

    fn load(&self) -> HerdrResult<State> {
        Ok(State {
            panes: read_map(&self.dir.join(PANES_FILE))?,
            pending: read_map(&self.dir.join(PENDING_FILE))?,
        })
    }

    /// Take the lock, waiting up to [`LOCK_WAIT`] for another action to finish. The wait
    /// yields to the runtime between attempts: actions run on async runtimes, and a blocked
    /// worker thread would stall every other task (signal handling, progress) meanwhile.
    async fn lock(&self) -> HerdrResult<StateLock> {
        let path = self.dir.join(LOCK_FILE);
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options
            .open(&path)
            .map_err(|e| HerdrError::io(format!("opening {}", path.display()), e))?;
        let started = tokio::time::Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(StateLock { file }),
                Err(TryLockError::WouldBlock) if started.elapsed() < LOCK_WAIT => {
                    tokio::time::sleep(LOCK_RETRY).await;
                }
                Err(TryLockError::WouldBlock) => {
                    return Err(HerdrError::Busy(format!(
                    "another CreateOS action has held {} for over {}s; try again when it is done",
                    path.display(),
                    LOCK_WAIT.as_secs()
                )))
                }
                Err(TryLockError::Error(e)) => {
                    return Err(HerdrError::io(format!("locking {}", path.display()), e))
                }
            }
        }
    }
}

/// A JSON object file → map; missing → empty; unreadable → error; corrupt → moved aside + error.
fn read_map<T: DeserializeOwned>(path: &Path) -> HerdrResult<BTreeMap<String, T>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(HerdrError::io(format!("reading {}", path.display()), e)),
    };
    match serde_json::from_slice(&bytes) {
        Ok(map) => Ok(map),
        Err(parse) => {
            let aside = PathBuf::from(format!("{}.corrupt-{}", path.display(), std::process::id()));
            let moved = std::fs::rename(path, &aside);
            let message = match moved {
                Ok(()) => format!(
                    "is not valid ({parse}); it was moved aside to {} and this action stopped. Its sandboxes still exist \
                     (`cos ls`); delete them or repair the file and move it back",
                    aside.display()
                ),
                Err(e) => format!("is not valid ({parse}) and could not be moved aside ({e}); repair or remove it"),
            };
            Err(HerdrError::State {
                path: path.to_path_buf(),
                message,
            })
        }
    }
}

/// Write `value` as JSON to `path` atomically (mode 0600).
pub fn write_atomic<T: Serialize>(path: &Path, value: &T) -> HerdrResult<()> {
    let mut text = serde_json::to_vec_pretty(value)
        .map_err(|e| HerdrError::io("encoding the state", std::io::Error::other(e)))?;
    text.push(b'\n');
    write_bytes_atomic(path, &text, 0o600)
}

/// Write `bytes` to `path` atomically with `mode` (Unix).
pub fn write_bytes_atomic(path: &Path, bytes: &[u8], mode: u32) -> HerdrResult<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.tmp-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let result = (|| -> std::io::Result<()> {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
        #[cfg(not(unix))]
        let _ = mode;
        let mut file = options.open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        HerdrError::io(format!("writing {}", path.display()), e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str) -> PaneEntry {
        PaneEntry {
            box_name: "hd-x".into(),
            box_id: id.into(),
            agent: "shell".into(),
            bin: "bash".into(),
            process_id: "proc_x".into(),
            local: "/l".into(),
            remote: "/workspace".into(),
            delete_armed_at: None,
        }
    }

    #[tokio::test]
    async fn update_round_trips_and_failure_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).unwrap();
        store
            .update(|s| {
                s.panes.insert("p1".into(), entry("sb-1"));
                Ok(())
            })
            .await
            .unwrap();
        assert_eq!(store.read().await.unwrap().panes["p1"].box_id, "sb-1");
        let err = store
            .update(|s| {
                s.panes.clear();
                Err::<(), _>(HerdrError::Busy("no".into()))
            })
            .await;
        assert!(err.is_err());
        assert_eq!(store.read().await.unwrap().panes.len(), 1);
    }

    /// Waiting for the lock must not block the runtime: on a single-threaded runtime the task
    /// holding the lock has to keep running to release it.
    #[tokio::test(flavor = "current_thread")]
    async fn waiting_for_the_lock_lets_other_tasks_run() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).unwrap();
        let holder = File::create(dir.path().join(LOCK_FILE)).unwrap();
        holder.try_lock().unwrap();
        let waiting = tokio::spawn({
            let store = store.clone();
            async move { store.read().await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        holder.unlock().unwrap();
        let read = tokio::time::timeout(LOCK_WAIT / 2, waiting)
            .await
            .expect("the waiter finished")
            .unwrap();
        assert!(read.is_ok(), "{read:?}");
    }

    #[test]
    fn corrupt_file_is_moved_aside_not_emptied() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).unwrap();
        std::fs::write(dir.path().join(PANES_FILE), b"{\"p1\": {\"box\": ").unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let err = runtime.block_on(store.read()).unwrap_err().to_string();
        assert!(err.contains("moved aside"), "{err}");
        assert!(!dir.path().join(PANES_FILE).exists());
        let aside = dir
            .path()
            .join(format!("{PANES_FILE}.corrupt-{}", std::process::id()));
        assert_eq!(std::fs::read(aside).unwrap(), b"{\"p1\": {\"box\": ");
    }

    #[test]
    fn pending_matches_source_and_opened_pane_until_it_expires() {
        let mut s = State::default();
        s.pending.insert(
            "src".into(),
            PendingStart {
                created_at: 1_000,
                refreshed_at: None,
                pane: Some("new".into()),
                box_name: "b".into(),
            },
        );
        assert!(s.pending_for("src", 2_000).is_some());
        assert!(s.pending_for("new", 2_000).is_some());
        assert!(s.pending_for("other", 2_000).is_none());
        let later = 1_000 + PENDING_TTL.as_millis() as u64;
        assert!(s.pending_for("src", later).is_none());
        s.expire_pending(later);
        assert!(s.pending.is_empty());
    }

    #[test]
    fn a_refreshed_reservation_outlives_the_ttl() {
        let ttl = PENDING_TTL.as_millis() as u64;
        let mut s = State::default();
        let p = PendingStart {
            created_at: 1_000,
            refreshed_at: Some(1_000 + ttl),
            pane: None,
            box_name: "b".into(),
        };
        s.pending.insert("src".into(), p);
        assert!(
            s.pending_for("src", 1_000 + ttl + 10).is_some(),
            "refreshed reservations hold past created_at + TTL"
        );
        s.expire_pending(1_000 + ttl + 10);
        assert_eq!(s.pending.len(), 1);
        assert!(
            s.pending_for("src", 1_000 + 2 * ttl).is_none(),
            "a reservation nobody refreshes still expires"
        );
    }
}
