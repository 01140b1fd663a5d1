//! Guest-path validation and guest → host mapping.

use std::path::{Path, PathBuf};

use crate::envelope::ApiError;

/// The PATH every sandbox command gets.
pub const SANDBOX_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// An extra bind mount of an attached disk: host directory shown at a guest path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraMount {
    pub host: PathBuf,
    pub guest: String,
}

/// Guest directories every sandbox owns privately (bind-mounted over the host's).
pub const PRIVATE_DIRS: &[&str] = &["/root", "/work", "/workspace", "/tmp", "/home", "/var/tmp"];

/// Validates a guest path (absolute, no NUL, no `..` segment) and normalises it
/// (collapses `//` and `/./`, strips a trailing `/`).
pub fn normalize_guest_path(raw: &str) -> Result<String, ApiError> {
    if raw.is_empty() {
        return Err(ApiError::validation("path", "path is required"));
    }
    if raw.contains('\0') {
        return Err(ApiError::validation("path", "path must not contain NUL"));
    }
    if !raw.starts_with('/') {
        return Err(ApiError::validation("path", "path must be absolute"));
    }
    let mut parts = Vec::new();
    for seg in raw.split('/') {
        match seg {
            "" | "." => {}
            ".." => return Err(ApiError::validation("path", "path must not contain '..'")),
            s => parts.push(s),
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

/// True when `path` equals `prefix` or lies below it (both normalised).
pub fn is_under(path: &str, prefix: &str) -> bool {
    path == prefix
        || (path.starts_with(prefix) && path.as_bytes().get(prefix.len()) == Some(&b'/'))
        || prefix == "/"
}

/// True for paths inside one of the private dirs.
pub fn is_private(guest: &str) -> bool {
    PRIVATE_DIRS.iter().any(|d| is_under(guest, d))
}

/// Host path for a normalised guest path: the deepest attached disk first, then the
/// private dirs (inside `dir`), else the same path on the host.
pub fn map_guest(dir: &Path, mounts: &[ExtraMount], guest: &str) -> PathBuf {
    if let Some(m) = mounts
        .iter()
        .filter(|m| is_under(guest, &m.guest))
        .max_by_key(|m| m.guest.len())
    {
        let rest = guest[m.guest.len()..].trim_start_matches('/');
        return if rest.is_empty() {
            m.host.clone()
        } else {
            m.host.join(rest)
        };
    }
    for private in PRIVATE_DIRS {
        if is_under(guest, private) {
            let rest = guest.trim_start_matches('/');
            return dir.join(rest);
        }
    }
    PathBuf::from(guest)
}

/// Creates `dir/{root,work,workspace,tmp,home,var/tmp}` (`tmp` and `var/tmp` sticky and
/// world-writable).
pub fn create_private_dirs(dir: &Path) -> std::io::Result<()> {
    for private in PRIVATE_DIRS {
        let path = dir.join(private.trim_start_matches('/'));
        std::fs::create_dir_all(&path)?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("tmp"), std::fs::Permissions::from_mode(0o1777))?;
        std::fs::set_permissions(dir.join("var/tmp"), std::fs::Permissions::from_mode(0o1777))?;
        std::fs::set_permissions(dir.join("root"), std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Makes the private dirs (and `var/`) owned by the sandbox's root.
#[cfg(target_os = "linux")]
pub fn own_private_dirs(dir: &Path) -> std::io::Result<()> {
    super::layers::own(&dir.join("var"))?;
    for private in PRIVATE_DIRS {
        super::layers::own(&dir.join(private.trim_start_matches('/')))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_rules() {
        assert_eq!(normalize_guest_path("/root//a/./b/").unwrap(), "/root/a/b");
        assert_eq!(normalize_guest_path("/").unwrap(), "/");
        assert!(normalize_guest_path("root/a").is_err());
        assert!(normalize_guest_path("/root/../etc").is_err());
        assert!(normalize_guest_path("/a\0b").is_err());
    }

    #[test]
    fn mapping_prefers_disks_then_private_dirs() {
        let dir = Path::new("/state/sb-1");
        let mounts = vec![ExtraMount {
            host: "/disks/d1".into(),
            guest: "/root/data".into(),
        }];
        assert_eq!(
            map_guest(dir, &mounts, "/root/data/x"),
            PathBuf::from("/disks/d1/x")
        );
        assert_eq!(
            map_guest(dir, &mounts, "/root/datax"),
            PathBuf::from("/state/sb-1/root/datax")
        );
        assert_eq!(
            map_guest(dir, &mounts, "/tmp"),
            PathBuf::from("/state/sb-1/tmp")
        );
        assert_eq!(
            map_guest(dir, &mounts, "/etc/hosts"),
            PathBuf::from("/etc/hosts")
        );
        assert!(!is_private("/rooted"));
        assert!(is_private("/home/u"));
    }
}
