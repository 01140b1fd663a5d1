//! Protected local paths: the one decision of what a sandbox may never write on this machine.
//!
//! Nothing that comes from a sandbox (an unpacked archive, a downloaded file, a patch) is
//! written into
//! - version-control metadata: `.git`, `.hg`, `.svn`, `.jj`, at any depth (a hook or a
//!   `core.fsmonitor` there runs on the host at the next `git status`);
//! - a path the snapshot deny-list names: `.env`, `.env.*`, `.ssh/`, `.aws/`, keys,
//!   `credentials*`, … (the list in [`crate::snapshot`]'s module docs), which includes
//!   `.createos/`, where this client keeps `.token` and `.oauth`;
//! - `~/.createos`, however it is reached (the home directory's copy is resolved through
//!   symlinks).
//!
//! [`protected`] judges a file or symlink relative to a destination, [`protected_dir`] a
//! directory, [`protected_path`] any path by its components, and [`check_target`] /
//! [`check_dir_target`] a local file / destination directory about to be written. The unpacker
//! (`transfer::unpack`), the single-file saves ([`crate::api::files::Download::save_to`],
//! [`crate::ssh::SshSession::save_file_to`]), sync and `herdr apply` all ask here.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};
use crate::snapshot::rules;

/// Folders directly under the home directory that hold credentials or account configuration:
/// a sync or snapshot root inside one is refused unless the caller insists.
pub const SENSITIVE_HOME_DIRS: [&str; 9] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".config",
    ".docker",
    ".kube",
    ".gcloud",
    ".azure",
    ".createos",
];

/// Of [`SENSITIVE_HOME_DIRS`], those refused even when the caller insists: this client's own
/// credentials.
pub const ALWAYS_REFUSED_HOME_DIRS: [&str; 1] = [".createos"];

/// Why a path is protected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Protection {
    /// Version-control metadata (the directory name, e.g. `.git`).
    Vcs(&'static str),
    /// Matched the credential deny-list (the rule, e.g. `.env.*`, `.ssh/`).
    DenyList(&'static str),
    /// Inside `~/.createos` (this client's credentials).
    CosHome,
}

impl fmt::Display for Protection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Protection::Vcs(dir) => write!(
                f,
                "version-control metadata ({dir}) is never written from a sandbox"
            ),
            Protection::DenyList(rule) => {
                write!(f, "it matches the credential deny-list ({rule}); such paths are never written from a sandbox")
            }
            Protection::CosHome => f.write_str(
                "~/.createos holds your CreateOS credentials; nothing from a sandbox goes there",
            ),
        }
    }
}

/// Why a file or symlink at the `/`-separated relative path `rel` (bytes, as an archive names
/// it) may not be written from a sandbox, if it may not. Judged on every component, ASCII
/// case-insensitively: VCS metadata, then the deny-list (names, suffixes, directories).
pub fn protected(rel: &[u8]) -> Option<Protection> {
    let rel = rel.strip_suffix(b"/").unwrap_or(rel);
    if rel.is_empty() {
        return None;
    }
    vcs(rel).or_else(|| {
        rules::denied_by(rel)
            .or_else(|| rules::denied_dir(rel))
            .map(Protection::DenyList)
    })
}

/// Why nothing may be written from a sandbox below the directory `rel` (or create it), if
/// so: VCS metadata, or a deny-listed directory (`.ssh/`, `.createos/`, …). File-name rules
/// (`credentials`, `*.key`) do not make a directory protected.
pub fn protected_dir(rel: &[u8]) -> Option<Protection> {
    let rel = rel.strip_suffix(b"/").unwrap_or(rel);
    if rel.is_empty() {
        return None;
    }
    vcs(rel).or_else(|| rules::denied_dir(rel).map(Protection::DenyList))
}

fn vcs(rel: &[u8]) -> Option<Protection> {
    rel.split(|b| *b == b'/')
        .find_map(|c| {
            rules::VCS_DIRS
                .iter()
                .find(|v| c.eq_ignore_ascii_case(v.as_bytes()))
        })
        .map(|dir| Protection::Vcs(dir))
}

/// The normal components of `path`, `/`-separated.
fn joined(path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let mut rel = Vec::new();
    for part in path.components() {
        if let Component::Normal(name) = part {
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(name.as_bytes());
        }
    }
    rel
}

/// [`protected`] for any path (absolute or relative), judged on its normal components.
pub fn protected_path(path: &Path) -> Option<Protection> {
    protected(&joined(path))
}

/// `~/.createos`, resolved through symlinks when it exists (`home` `None`: the current user's).
fn cos_home(home: Option<&Path>) -> Vec<PathBuf> {
    let Some(home) = home.map(Path::to_path_buf).or_else(dirs::home_dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for home in [home.clone(), std::fs::canonicalize(&home).unwrap_or(home)] {
        let dir = home.join(".createos");
        found.push(std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone()));
        found.push(dir);
    }
    found
}

/// The absolute form of `path` with its existing ancestors resolved through symlinks (the
/// part that does not exist yet is appended as given).
pub(crate) fn resolved(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let mut missing = Vec::new();
    let mut at = absolute.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            let mut out = real;
            for part in missing.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                at = parent;
            }
            _ => return absolute,
        }
    }
}

/// Why the local file `path` may not receive content from a sandbox, if it may not: a
/// protected path ([`protected`], on the path as given and as resolved through symlinks), or
/// a place inside `~/.createos`. `home` `None` means the current user's home directory.
pub fn protection_of(path: &Path, home: Option<&Path>) -> Option<Protection> {
    let real = resolved(path);
    protected_path(path)
        .or_else(|| protected_path(&real))
        .or_else(|| in_cos_home(&real, home))
}

/// [`protection_of`] for a directory that receives entries ([`protected_dir`] rules).
pub fn dir_protection_of(path: &Path, home: Option<&Path>) -> Option<Protection> {
    let real = resolved(path);
    protected_dir(&joined(path))
        .or_else(|| protected_dir(&joined(&real)))
        .or_else(|| in_cos_home(&real, home))
}

fn in_cos_home(real: &Path, home: Option<&Path>) -> Option<Protection> {
    cos_home(home)
        .iter()
        .any(|dir| real.starts_with(dir))
        .then_some(Protection::CosHome)
}

/// Refuse (with [`Error::Refused`]) writing a file from a sandbox to the local `path`; see
/// [`protection_of`].
pub fn check_target(path: &Path) -> Result<()> {
    match protection_of(path, None) {
        Some(why) => Err(Error::refused(path.display().to_string(), why.to_string())),
        None => Ok(()),
    }
}

/// Refuse (with [`Error::Refused`]) unpacking from a sandbox into the local directory `path`;
/// see [`dir_protection_of`].
pub fn check_dir_target(path: &Path) -> Result<()> {
    match dir_protection_of(path, None) {
        Some(why) => Err(Error::refused(path.display().to_string(), why.to_string())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vcs_and_credentials_are_protected_at_any_depth() {
        for (path, want) in [
            (".git/config", Some(Protection::Vcs(".git"))),
            (".git", Some(Protection::Vcs(".git"))),
            ("sub/.GIT/hooks/post-commit", Some(Protection::Vcs(".git"))),
            ("vendor/x/.hg/hgrc", Some(Protection::Vcs(".hg"))),
            (".svn/entries", Some(Protection::Vcs(".svn"))),
            ("a/.jj/repo", Some(Protection::Vcs(".jj"))),
            (".env", Some(Protection::DenyList(".env"))),
            ("app/.env.local", Some(Protection::DenyList(".env.*"))),
            (".ssh", Some(Protection::DenyList(".ssh/"))),
            (".ssh/authorized_keys", Some(Protection::DenyList(".ssh/"))),
            (
                "conf/credentials.json",
                Some(Protection::DenyList("credentials.json")),
            ),
            ("tls/server.key", Some(Protection::DenyList("*.key"))),
            (".createos/.token", Some(Protection::DenyList(".createos/"))),
            (".createos", Some(Protection::DenyList(".createos/"))),
            ("src/main.rs", None),
            (".gitignore", None),
            (".github/workflows/ci.yml", None),
            (".env.example", None),
            ("docs/ssh.md", None),
        ] {
            assert_eq!(protected(path.as_bytes()), want, "{path}");
        }
        assert_eq!(
            protected_path(Path::new("/home/u/proj/.git/hooks")),
            Some(Protection::Vcs(".git"))
        );
        assert_eq!(protected_path(Path::new("/home/u/proj/out")), None);
        // directories: only VCS metadata and deny-listed directories
        assert_eq!(protected_dir(b"src/credentials"), None);
        assert_eq!(protected_dir(b"certs.key"), None);
        assert_eq!(
            protected_dir(b"a/.ssh"),
            Some(Protection::DenyList(".ssh/"))
        );
        assert_eq!(
            protected_dir(b"a/.git/hooks"),
            Some(Protection::Vcs(".git"))
        );
        assert_eq!(
            protected(b"src/credentials"),
            Some(Protection::DenyList("credentials"))
        );
    }

    #[test]
    fn the_cos_home_is_protected_through_links() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let real = tmp.path().join("elsewhere");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&real).unwrap();
        std::os::unix::fs::symlink(&real, home.join(".createos")).unwrap();
        assert_eq!(
            protection_of(&real.join("x"), Some(&home)),
            Some(Protection::CosHome)
        );
        assert_eq!(
            protection_of(&home.join(".createos/.token"), Some(&home)),
            Some(Protection::DenyList(".createos/"))
        );
        assert_eq!(
            protection_of(&home.join("project/out.txt"), Some(&home)),
            None
        );
        assert_eq!(
            dir_protection_of(&real, Some(&home)),
            Some(Protection::CosHome)
        );
        assert_eq!(
            dir_protection_of(&home.join("credentials"), Some(&home)),
            None
        );
    }
}
