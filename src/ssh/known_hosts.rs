//! Host keys pinned on first use, per sandbox id (the tunnel makes every guest look like
//! `127.0.0.1`, so the address cannot be the key). A changed key is refused.
//!
//! File format, one pin per line: `<sandbox-id> <key-type> <base64>`; `#` comments and lines
//! we do not understand are kept as they are. The file is rewritten atomically (0600), so a
//! reader always sees a whole file; every read-modify-write holds the cross-process lock on
//! `<file>.lock` ([`crate::auth::lock::FileLock`]), so two processes (or threads) pinning at
//! once never lose a pin.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use russh::keys::{HashAlg, PublicKey};

use super::error::SshError;
use super::files;
use crate::auth::lock::FileLock;

/// Outcome of checking an offered host key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostKeyStatus {
    /// The key matches the pin.
    Matched,
    /// No pin existed; the key was pinned now.
    PinnedNow,
}

/// Our known-hosts file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownHosts {
    path: PathBuf,
}

impl KnownHosts {
    /// The file at `path` (created on the first pin).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        KnownHosts { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The key pinned for `host`, if any.
    pub fn lookup(&self, host: &str) -> Result<Option<PublicKey>, SshError> {
        let text = self.read()?;
        for line in text.lines() {
            if let Some((name, key)) = parse_line(line) {
                if name == host {
                    return Ok(Some(key));
                }
            }
        }
        Ok(None)
    }

    /// Accept `offered` for `host` if it matches the pin, pin it if there is none, refuse it
    /// with [`SshError::HostKeyChanged`] otherwise. Only a new pin takes the lock.
    pub fn verify_or_pin(
        &self,
        host: &str,
        offered: &PublicKey,
    ) -> Result<HostKeyStatus, SshError> {
        if let Some(known) = self.check(&self.read()?, host, offered)? {
            return Ok(known);
        }
        let _lock = self.lock()?;
        // Read again under the lock: another process may have pinned it (or anything) since.
        let text = self.read()?;
        if let Some(known) = self.check(&text, host, offered)? {
            return Ok(known);
        }
        let entry = format!("{host} {}", type_and_base64(offered, &self.path)?);
        let mut updated = text;
        if !updated.is_empty() && !updated.ends_with('\n') {
            updated.push('\n');
        }
        updated.push_str(&entry);
        updated.push('\n');
        self.write(&updated)?;
        Ok(HostKeyStatus::PinnedNow)
    }

    /// `Some(Matched)` when `text` pins `offered` for `host`, the change error when it pins
    /// another key, `None` when it pins nothing for `host`.
    fn check(
        &self,
        text: &str,
        host: &str,
        offered: &PublicKey,
    ) -> Result<Option<HostKeyStatus>, SshError> {
        for line in text.lines() {
            if let Some((name, pinned)) = parse_line(line) {
                if name != host {
                    continue;
                }
                if pinned.key_data() == offered.key_data() {
                    return Ok(Some(HostKeyStatus::Matched));
                }
                return Err(SshError::HostKeyChanged {
                    host: host.to_string(),
                    pinned: fingerprint(&pinned),
                    offered: fingerprint(offered),
                    known_hosts: self.path.clone(),
                });
            }
        }
        Ok(None)
    }

    /// Drop the pin of `host` (after an expected host-key change). `Ok(false)` when there
    /// was none.
    pub fn forget(&self, host: &str) -> Result<bool, SshError> {
        let _lock = self.lock()?;
        let text = self.read()?;
        let mut kept = String::with_capacity(text.len());
        let mut removed = false;
        for line in text.lines() {
            if matches!(parse_line(line), Some((name, _)) if name == host) {
                removed = true;
                continue;
            }
            kept.push_str(line);
            kept.push('\n');
        }
        if removed {
            self.write(&kept)?;
        }
        Ok(removed)
    }

    /// The cross-process lock of this file (`<file>.lock` beside it, never deleted).
    fn lock(&self) -> Result<FileLock, SshError> {
        if let Some(dir) = self.path.parent() {
            files::private_dir(dir)?;
        }
        let mut name = OsString::from(self.path.as_os_str());
        name.push(".lock");
        let path = PathBuf::from(name);
        FileLock::exclusive(&path)
            .map_err(|e| SshError::local_file(&path, format!("cannot lock: {e}")))
    }

    fn read(&self) -> Result<String, SshError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => Ok(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(SshError::local_file(
                &self.path,
                format!("cannot read: {e}"),
            )),
        }
    }

    fn write(&self, text: &str) -> Result<(), SshError> {
        if let Some(dir) = self.path.parent() {
            files::private_dir(dir)?;
        }
        files::replace_file(&self.path, text.as_bytes())
    }
}

/// `SHA256:…` of a key.
pub(crate) fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// `<type> <base64>` of a key, without its comment.
fn type_and_base64(key: &PublicKey, path: &Path) -> Result<String, SshError> {
    let mut bare = key.clone();
    bare.set_comment("");
    let line = bare
        .to_openssh()
        .map_err(|e| SshError::local_file(path, format!("cannot encode a host key: {e}")))?;
    Ok(line.trim().to_string())
}

/// `(host, key)` of a pin line; `None` for comments, blank or foreign lines.
fn parse_line(line: &str) -> Option<(&str, PublicKey)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let mut fields = line.split_whitespace();
    let host = fields.next()?;
    let kind = fields.next()?;
    let blob = fields.next()?;
    let key = PublicKey::from_openssh(&format!("{kind} {blob}")).ok()?;
    Some((host, key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use russh::keys::ssh_key::private::Ed25519Keypair;
    use russh::keys::PrivateKey;

    fn key(seed: u8) -> PublicKey {
        PrivateKey::from(Ed25519Keypair::from_seed(&[seed; 32]))
            .public_key()
            .clone()
    }

    #[test]
    fn pin_match_change_forget() {
        let dir = std::env::temp_dir().join(format!("cos-ssh-kh-{}", rand::random::<u64>()));
        let known = KnownHosts::new(dir.join("known_hosts"));
        assert_eq!(known.lookup("sb-1").unwrap(), None);
        assert_eq!(
            known.verify_or_pin("sb-1", &key(1)).unwrap(),
            HostKeyStatus::PinnedNow
        );
        assert_eq!(
            known.verify_or_pin("sb-2", &key(2)).unwrap(),
            HostKeyStatus::PinnedNow
        );
        assert_eq!(
            known.verify_or_pin("sb-1", &key(1)).unwrap(),
            HostKeyStatus::Matched
        );
        let err = known.verify_or_pin("sb-1", &key(3)).unwrap_err();
        let SshError::HostKeyChanged {
            host,
            pinned,
            offered,
            ..
        } = &err
        else {
            panic!("{err:?}")
        };
        assert_eq!(host, "sb-1");
        assert_ne!(pinned, offered);
        assert!(err
            .to_string()
            .contains("delete the line starting with `sb-1 `"));
        let text = std::fs::read_to_string(known.path()).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(text
            .lines()
            .next()
            .unwrap()
            .starts_with("sb-1 ssh-ed25519 AAAA"));
        assert_eq!(text.lines().next().unwrap().split_whitespace().count(), 3);
        assert!(known.forget("sb-1").unwrap());
        assert!(!known.forget("sb-1").unwrap());
        assert_eq!(
            known.verify_or_pin("sb-1", &key(3)).unwrap(),
            HostKeyStatus::PinnedNow
        );
        assert_eq!(
            known.lookup("sb-2").unwrap().unwrap().key_data(),
            key(2).key_data()
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(known.path())
                    .unwrap()
                    .permissions()
                    .mode()
                    & 0o777,
                0o600
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn foreign_lines_survive_rewrites() {
        let dir = std::env::temp_dir().join(format!("cos-ssh-kh-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("known_hosts");
        std::fs::write(&path, "# mine\ngarbage line\n").unwrap();
        let known = KnownHosts::new(&path);
        known.verify_or_pin("sb-9", &key(9)).unwrap();
        known.forget("sb-9").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# mine\ngarbage line\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
