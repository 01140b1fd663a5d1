//! Which local and guest directories a sync may touch (the `createos` CLI's rules,
//! process-pty-ssh.md §5.4): checked before anything is sent.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::validate;

pub use crate::transfer::protect::{ALWAYS_REFUSED_HOME_DIRS, SENSITIVE_HOME_DIRS};

/// First components a guest sync directory may not have.
pub const SYSTEM_DIRS: [&str; 11] = [
    "etc", "usr", "bin", "sbin", "lib", "lib64", "boot", "proc", "sys", "dev", "run",
];

/// Resolve the local directory and refuse `/`, the home directory, `~/.createos`, and (unless
/// `force`) any place inside `~/.ssh`, `~/.gnupg`, `~/.aws`, `~/.config`, `~/.docker`,
/// `~/.kube`, `~/.gcloud` or `~/.azure`. `home` `None` uses the current user's. (A two-way
/// sync, which writes here, also refuses a protected directory: see [`check_writable`].)
pub fn check_local(path: &Path, home: Option<&Path>, force: bool) -> Result<PathBuf> {
    let field = "local directory";
    let resolved = std::fs::canonicalize(path).map_err(|e| {
        Error::io(
            format!("cannot resolve the local directory {}", path.display()),
            e,
        )
    })?;
    if !resolved.is_dir() {
        return Err(Error::invalid(
            field,
            format!("{} is not a directory", resolved.display()),
        ));
    }
    if resolved.parent().is_none() {
        return Err(Error::invalid(
            field,
            "refusing to sync the file-system root `/`",
        ));
    }
    let home = home.map(Path::to_path_buf).or_else(dirs::home_dir);
    if let Some(home) = home.and_then(|h| std::fs::canonicalize(h).ok()) {
        if resolved == home {
            return Err(Error::invalid(
                field,
                format!("refusing to sync your home directory {}", home.display()),
            ));
        }
        let first = resolved
            .strip_prefix(&home)
            .ok()
            .and_then(|rel| rel.components().next())
            .map(|c| c.as_os_str().to_string_lossy().into_owned());
        if let Some(first) = first.filter(|f| ALWAYS_REFUSED_HOME_DIRS.contains(&f.as_str())) {
            return Err(Error::invalid(
                field,
                format!(
                    "{} is inside ~/{first}, which holds your CreateOS credentials",
                    resolved.display()
                ),
            ));
        }
        if !force {
            if let Ok(rel) = resolved.strip_prefix(&home) {
                let first = rel
                    .components()
                    .next()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned());
                if let Some(first) = first.filter(|f| SENSITIVE_HOME_DIRS.contains(&f.as_str())) {
                    return Err(Error::invalid(
                        field,
                        format!("{} is inside ~/{first}, which holds credentials; pass --force to sync it anyway", resolved.display()),
                    ));
                }
            }
        }
    }
    Ok(resolved)
}

/// Refuse a local directory that content from the guest may not be written into: inside VCS
/// metadata (`.git`, …), a deny-listed directory (`.ssh/`, …) or `~/.createos` (see
/// [`crate::transfer::protect`]), whatever `force` says.
pub fn check_writable(resolved: &Path, home: Option<&Path>) -> Result<()> {
    match crate::transfer::protect::dir_protection_of(resolved, home) {
        Some(why) => Err(Error::invalid(
            "local directory",
            format!("refusing to sync {} both ways: {why}", resolved.display()),
        )),
        None => Ok(()),
    }
}

/// Check the guest directory: absolute, no `..`, not `/`, first component not a system
/// directory (`etc`, `usr`, `bin`, `sbin`, `lib`, `lib64`, `boot`, `proc`, `sys`, `dev`, `run`).
/// Returns it without trailing or doubled slashes.
pub fn check_remote(path: &str) -> Result<String> {
    let field = "remote directory";
    validate::guest_path(field, path)?;
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let Some(first) = parts.first() else {
        return Err(Error::invalid(field, "refusing to sync into `/`"));
    };
    if SYSTEM_DIRS.contains(first) {
        return Err(Error::invalid(
            field,
            format!("refusing to sync into the system directory /{first}"),
        ));
    }
    Ok(format!("/{}", parts.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_rules() {
        assert_eq!(check_remote("/root/app/").unwrap(), "/root/app");
        assert_eq!(check_remote("/root//./app").unwrap(), "/root/app");
        for bad in [
            "/",
            "relative",
            "/etc/x",
            "/usr",
            "/root/../etc",
            "/proc/1",
            "//",
        ] {
            assert!(check_remote(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn local_rules() {
        let tmp = tempfile::TempDir::new().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(home.join(".ssh/proj")).unwrap();
        std::fs::create_dir_all(home.join("code")).unwrap();
        assert!(check_local(Path::new("/"), Some(&home), true).is_err());
        assert!(check_local(&home, Some(&home), true).is_err());
        assert!(check_local(&home.join(".ssh/proj"), Some(&home), false).is_err());
        assert!(check_local(&home.join(".ssh/proj"), Some(&home), true).is_ok());
        assert!(check_local(&home.join("code"), Some(&home), false).is_ok());
        std::fs::create_dir_all(home.join(".createos")).unwrap();
        std::fs::create_dir_all(home.join("code/.git/hooks")).unwrap();
        assert!(
            check_local(&home.join(".createos"), Some(&home), true).is_err(),
            "refused even with force"
        );
        assert!(check_writable(&home.join("code/.git/hooks"), Some(&home)).is_err());
        assert!(check_writable(&home.join(".ssh/proj"), Some(&home)).is_err());
        assert!(check_writable(&home.join("code"), Some(&home)).is_ok());
    }
}
