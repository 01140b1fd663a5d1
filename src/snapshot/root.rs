//! Choosing the project directory: resolve it and refuse places that must never be uploaded.

use std::path::{Path, PathBuf};

use crate::error::Error;

const FIELD: &str = "project directory";

// Folders directly under the home directory that hold credentials or account configuration:
// a project inside them is refused unless the caller insists (the CLI's `--force` rule), and
// inside `~/.createos` always.
use crate::transfer::protect::{ALWAYS_REFUSED_HOME_DIRS, SENSITIVE_HOME_DIRS};

/// Canonicalise `dir` and check that it is a directory that may be snapshotted.
pub(crate) fn resolve(
    dir: &Path,
    home: Option<&Path>,
    allow_sensitive: bool,
) -> Result<PathBuf, Error> {
    let root = std::fs::canonicalize(dir).map_err(|e| {
        Error::io(
            format!("cannot resolve the project directory {}", dir.display()),
            e,
        )
    })?;
    let meta = std::fs::metadata(&root).map_err(|e| {
        Error::io(
            format!("cannot read the project directory {}", root.display()),
            e,
        )
    })?;
    if !meta.is_dir() {
        return Err(Error::invalid(
            FIELD,
            format!("{} is not a directory", root.display()),
        ));
    }
    if root.parent().is_none() {
        return Err(Error::invalid(
            FIELD,
            format!(
                "refusing to snapshot the file-system root {}; pass a project directory",
                root.display()
            ),
        ));
    }

    let home = match home {
        Some(h) => Some(h.to_path_buf()),
        None => dirs::home_dir(),
    };
    // an unresolvable home (deleted, or a stale $HOME) cannot be inside anything we resolve
    if let Some(home) = home.and_then(|h| std::fs::canonicalize(h).ok()) {
        if home.starts_with(&root) {
            let what = if home == root {
                "your home directory"
            } else {
                "a directory that contains your home directory"
            };
            return Err(Error::invalid(
                FIELD,
                format!(
                    "refusing to snapshot {what} ({}); pass a project directory",
                    root.display()
                ),
            ));
        }
        if let Ok(rel) = root.strip_prefix(&home) {
            let first = rel
                .components()
                .next()
                .map(|c| c.as_os_str().to_string_lossy().into_owned());
            if let Some(first) = first
                .as_deref()
                .filter(|f| ALWAYS_REFUSED_HOME_DIRS.contains(f))
            {
                return Err(Error::invalid(
                    FIELD,
                    format!(
                        "{} is inside ~/{first}, which holds your CreateOS credentials",
                        root.display()
                    ),
                ));
            }
        }
        if !allow_sensitive {
            if let Ok(rel) = root.strip_prefix(&home) {
                let first = rel
                    .components()
                    .next()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned());
                if let Some(first) = first.filter(|f| SENSITIVE_HOME_DIRS.contains(&f.as_str())) {
                    return Err(Error::invalid(
                        FIELD,
                        format!(
                            "{} is inside ~/{first}, which holds credentials; move the project or allow it explicitly",
                            root.display()
                        ),
                    ));
                }
            }
        }
    }
    Ok(root)
}
