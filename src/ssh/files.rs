//! Where the SSH layer keeps its state: per-sandbox keys and the pinned host keys.
//!
//! ```text
//! <config dir>/createos-sandbox/            0700
//!   keys/<sandbox-id>, keys/<sandbox-id>.pub  0600 (dir 0700)
//!   known_hosts                              0600, lines `<sandbox-id> <key-type> <base64>`
//! ```
//!
//! Files are written to a temporary sibling first and then renamed (or hard-linked when the
//! target must not be replaced), so a reader never sees half a key.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::SshError;

/// Name of our directory under the user's config dir.
pub const APP_DIR: &str = "createos-sandbox";

/// The directory holding keys and pinned host keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SshFiles {
    base: PathBuf,
}

impl SshFiles {
    /// `dirs::config_dir()/createos-sandbox` (`~/.config/createos-sandbox` on Linux,
    /// `~/Library/Application Support/createos-sandbox` on macOS).
    pub fn default_location() -> Result<Self, SshError> {
        let config = dirs::config_dir().ok_or_else(|| {
            SshError::local_file(
                APP_DIR,
                "no per-user config directory (HOME unset?); choose one with SshFiles::at",
            )
        })?;
        Ok(SshFiles {
            base: config.join(APP_DIR),
        })
    }

    /// Use `base` instead (tests, or several isolated identities on one machine).
    pub fn at(base: impl Into<PathBuf>) -> Self {
        SshFiles { base: base.into() }
    }

    /// The base directory.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// Directory of the per-sandbox keys.
    pub fn keys_dir(&self) -> PathBuf {
        self.base.join("keys")
    }

    /// Private key of `sandbox_id` (the public key is the same path plus `.pub`).
    pub fn key_path(&self, sandbox_id: &str) -> PathBuf {
        self.keys_dir().join(sandbox_id)
    }

    /// Our known-hosts file.
    pub fn known_hosts_path(&self) -> PathBuf {
        self.base.join("known_hosts")
    }

    /// Create the base and keys directories (0700), tightening them when they already exist.
    pub(crate) fn ensure_dirs(&self) -> Result<(), SshError> {
        private_dir(&self.base)?;
        private_dir(&self.keys_dir())
    }
}

/// Create `dir` (and parents) and make it 0700.
pub(crate) fn private_dir(dir: &Path) -> Result<(), SshError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| SshError::local_file(dir, format!("cannot create the directory: {e}")))?;
    set_mode(dir, 0o700)
}

/// chmod on Unix; nothing elsewhere.
pub(crate) fn set_mode(path: &Path, mode: u32) -> Result<(), SshError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let current = std::fs::metadata(path)
            .map_err(|e| SshError::local_file(path, format!("cannot read permissions: {e}")))?
            .permissions()
            .mode()
            & 0o7777;
        if current != mode {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|e| {
                SshError::local_file(path, format!("cannot set mode {mode:o}: {e}"))
            })?;
        }
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
}

/// Write `bytes` to a fresh 0600 temporary file next to `target` and return its path.
fn write_temp(target: &Path, bytes: &[u8]) -> Result<PathBuf, SshError> {
    let dir = target.parent().unwrap_or_else(|| Path::new("."));
    let name = target
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("file");
    let suffix: u64 = rand::random();
    let temp = dir.join(format!(".{name}.tmp-{}-{suffix:016x}", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let written = options.open(&temp).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(SshError::local_file(target, format!("cannot write: {e}")));
    }
    Ok(temp)
}

/// Atomically replace `target` with `bytes` (mode 0600).
pub(crate) fn replace_file(target: &Path, bytes: &[u8]) -> Result<(), SshError> {
    let temp = write_temp(target, bytes)?;
    std::fs::rename(&temp, target).map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        SshError::local_file(target, format!("cannot replace: {e}"))
    })
}

/// Create `target` with `bytes` (mode 0600) unless it exists: `Ok(false)` when another
/// writer got there first. The file appears complete or not at all.
pub(crate) fn create_file_once(target: &Path, bytes: &[u8]) -> Result<bool, SshError> {
    let temp = write_temp(target, bytes)?;
    let linked = std::fs::hard_link(&temp, target);
    let _ = std::fs::remove_file(&temp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(SshError::local_file(target, format!("cannot create: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let files = SshFiles::at("/x/createos-sandbox");
        assert_eq!(
            files.key_path("sb-1"),
            Path::new("/x/createos-sandbox/keys/sb-1")
        );
        assert_eq!(
            files.known_hosts_path(),
            Path::new("/x/createos-sandbox/known_hosts")
        );
    }

    #[test]
    fn create_once_and_replace() {
        let dir = std::env::temp_dir().join(format!("cos-ssh-files-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("f");
        assert!(create_file_once(&target, b"one").unwrap());
        assert!(!create_file_once(&target, b"two").unwrap());
        assert_eq!(std::fs::read(&target).unwrap(), b"one");
        replace_file(&target, b"three").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"three");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&target).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
        // No temporary files are left behind.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
