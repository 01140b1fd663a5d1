//! Helpers shared by the transfer tests (tests/transfer.rs over the files API,
//! tests/transfer_ssh.rs over SSH).

use std::collections::BTreeMap;
use std::path::Path;

use sha2::{Digest, Sha256};

/// SHA-256 as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Write `files` under `dir`, plus a credential file (`.env`, which a snapshot must leave
/// out) and a symlink `link-to-main` → `src/main.rs` (which it must keep as a link).
pub fn write_project(dir: &Path, files: &BTreeMap<String, Vec<u8>>) {
    for (path, content) in files {
        let full = dir.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
    }
    std::fs::write(dir.join(".env"), "SECRET=1\n").unwrap();
    std::os::unix::fs::symlink("src/main.rs", dir.join("link-to-main")).unwrap();
}
