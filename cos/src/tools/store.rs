//! Persisted session bindings: which sandbox a (control plane, account, project directory,
//! session id) tuple uses.
//!
//! One small JSON file per binding under `<state dir>/bindings/<sha256(endpoint, account,
//! project)>/<hex(session)>.json`, written atomically (temp file + rename) so a crash never
//! leaves half a record. Keying by endpoint and account means a binding made against one
//! control plane (or one account) is never reused against another.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The stored binding of one session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindingRecord {
    /// Sandbox id.
    pub id: String,
    /// Guest working directory the sandbox was prepared for.
    pub cwd: String,
    /// What it was created from (`shape|rootfs`); a change refuses reattachment.
    pub source: String,
    /// Created by this runtime, so `release` may destroy it.
    pub owned: bool,
    /// Setup (working directory) finished.
    pub initialized: bool,
}

/// Where bindings live.
#[derive(Clone, Debug)]
pub struct BindingStore {
    dir: PathBuf,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl BindingStore {
    /// Bindings of `project` made by `account` against the control plane at `endpoint`,
    /// under `state_dir`.
    pub fn new(state_dir: &Path, endpoint: &str, account: &str, project: &Path) -> Self {
        let mut digest = Sha256::new();
        // Length-prefixed parts: no two tuples give the same input.
        for part in [
            endpoint.as_bytes(),
            account.as_bytes(),
            project.to_string_lossy().as_bytes(),
        ] {
            digest.update((part.len() as u64).to_be_bytes());
            digest.update(part);
        }
        BindingStore {
            dir: state_dir.join("bindings").join(hex(&digest.finalize())),
        }
    }

    /// The default state directory: `dirs::state_dir()` (else the data dir) + `createos-sandbox`.
    pub fn default_state_dir() -> Option<PathBuf> {
        dirs::state_dir()
            .or_else(dirs::data_dir)
            .map(|d| d.join("createos-sandbox"))
    }

    /// The directory holding this project's bindings.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, session: &str) -> PathBuf {
        // Hex keeps any session id a safe, unique file name.
        self.dir.join(format!("{}.json", hex(session.as_bytes())))
    }

    /// The record of `session`, if any. A corrupt file is an error, not a silent new sandbox.
    pub fn load(&self, session: &str) -> io::Result<Option<BindingRecord>> {
        match std::fs::read(self.path(session)) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("binding record of session {session:?}: {e}"),
                )
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Write the record of `session` atomically.
    pub fn save(&self, session: &str, record: &BindingRecord) -> io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path(session);
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(record).map_err(io::Error::other)?,
        )?;
        std::fs::rename(&tmp, &path)
    }

    /// Drop the record of `session` (absent is fine).
    pub fn remove(&self, session: &str) -> io::Result<()> {
        match std::fs::remove_file(self.path(session)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Every stored session id with its record.
    pub fn all(&self) -> io::Result<Vec<(String, BindingRecord)>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for entry in entries {
            let name = entry?.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".json") else {
                continue;
            };
            let Some(session) = unhex(stem) else { continue };
            if let Some(record) = self.load(&session)? {
                out.push((session, record));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

fn unhex(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_isolation() {
        let dir = tempfile::tempdir().unwrap();
        let a = BindingStore::new(dir.path(), "https://a.example/", "u1", Path::new("/proj/a"));
        let b = BindingStore::new(dir.path(), "https://a.example/", "u1", Path::new("/proj/b"));
        let other_endpoint = BindingStore::new(
            dir.path(),
            "http://127.0.0.1:9/",
            "u1",
            Path::new("/proj/a"),
        );
        let other_account =
            BindingStore::new(dir.path(), "https://a.example/", "u2", Path::new("/proj/a"));
        assert_ne!(a.dir(), other_endpoint.dir());
        assert_ne!(a.dir(), other_account.dir());
        let rec = BindingRecord {
            id: "sb-1".into(),
            cwd: "/w".into(),
            source: "s|r".into(),
            owned: true,
            initialized: false,
        };
        a.save("../evil/session", &rec).unwrap();
        assert_eq!(a.load("../evil/session").unwrap(), Some(rec.clone()));
        assert_eq!(b.load("../evil/session").unwrap(), None);
        assert_eq!(other_endpoint.load("../evil/session").unwrap(), None);
        assert_eq!(other_account.load("../evil/session").unwrap(), None);
        assert_eq!(a.all().unwrap(), vec![("../evil/session".to_string(), rec)]);
        a.remove("../evil/session").unwrap();
        a.remove("../evil/session").unwrap();
        assert!(a.all().unwrap().is_empty());
    }
}
