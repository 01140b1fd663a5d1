//! The state file of a two-way sync: what both sides looked like after the last sync, so a
//! change can be told from the other side's change (and a conflict from both).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// What is compared of one file or symlink.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// Size in bytes (0 for symlinks).
    pub size: u64,
    /// Modification time in nanoseconds since the epoch, as precise as the file system keeps
    /// it (pushed archives carry it exactly, see [`crate::transfer::tar_of`]).
    pub mtime_ns: i64,
    /// Symlink target; `None` for a regular file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
}

/// Both sides of one path as last synced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Synced {
    /// The local file then.
    pub local: Meta,
    /// The guest file then.
    pub remote: Meta,
}

/// The state format written by this version ([`SyncState::version`]).
pub const STATE_VERSION: u32 = 2;

/// The state file's content.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncState {
    /// Format version ([`STATE_VERSION`]).
    pub version: u32,
    /// Sandbox id.
    pub sandbox: String,
    /// Local directory (canonical).
    pub local: PathBuf,
    /// Guest directory.
    pub remote: String,
    /// Relative path → both sides.
    pub entries: BTreeMap<String, Synced>,
}

/// The default directory of state files: `<state dir>/createos-sandbox/sync` (the XDG state
/// directory on Linux, the local data directory elsewhere).
pub fn default_state_dir() -> Option<PathBuf> {
    dirs::state_dir()
        .or_else(dirs::data_local_dir)
        .map(|d| d.join("createos-sandbox").join("sync"))
}

/// The state file of one (sandbox, local, remote) triple inside `dir`.
pub fn state_file(dir: &Path, sandbox: &str, local: &Path, remote: &str) -> PathBuf {
    let mut hash = Sha256::new();
    hash.update(sandbox.as_bytes());
    hash.update([0]);
    hash.update(local.as_os_str().as_encoded_bytes());
    hash.update([0]);
    hash.update(remote.as_bytes());
    let digest = hash.finalize();
    let name: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    dir.join(format!("{name}.json"))
}

/// Read a state file; a missing one, or one of another format version, is `None` (a first
/// sync: only paths whose content differs are conflicts), a damaged one an error.
pub fn load(path: &Path) -> Result<Option<SyncState>> {
    let damaged = |e: serde_json::Error| {
        Error::invalid(
            "sync state",
            format!(
                "{} is damaged ({e}); delete it to start over",
                path.display()
            ),
        )
    };
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(damaged)?;
    let version = value.get("version").and_then(serde_json::Value::as_u64);
    if version != Some(u64::from(STATE_VERSION)) {
        tracing::info!(path = %path.display(), ?version, "sync state of another format version; starting over");
        return Ok(None);
    }
    serde_json::from_value(value).map(Some).map_err(damaged)
}

/// Write a state file atomically (temp file + rename), creating its directory (0700).
pub fn save(path: &Path, state: &SyncState) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
    let bytes = serde_json::to_vec_pretty(state)
        .map_err(|e| Error::invalid("sync state", e.to_string()))?;
    let temp = dir.join(format!(".{:016x}.tmp", rand::random::<u64>()));
    std::fs::write(&temp, bytes)
        .map_err(|e| Error::io(format!("writing {}", temp.display()), e))?;
    std::fs::rename(&temp, path).map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        Error::io(format!("writing {}", path.display()), e)
    })
}
