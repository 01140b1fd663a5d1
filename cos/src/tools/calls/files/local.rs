//! Local paths of `sandbox_push`/`sandbox_pull`: resolved against the project directory and
//! confined to it, so an agent can neither send files from elsewhere on this machine (keys,
//! the CreateOS credentials) nor overwrite them (`~/.bashrc`).
//!
//! Resolution: relative paths join the project directory; the longest existing prefix is
//! resolved with `realpath` (symlinks included), the rest is appended as written. The result
//! must lie in the (resolved) project directory. A `..` in the part that does not exist yet
//! and a dangling symlink are refused, since neither can be checked. What a push would send
//! also passes the snapshot credential deny-list and VCS rule, as each file of a directory
//! push does.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use createos_sandbox::snapshot::{fuzz_name_filter, DropReason};
use crate::tools::ToolError;

/// `given` (argument `field`) resolved and confined to `project`.
pub(in crate::tools::calls) fn resolve(project: &Path, field: &str, given: &Path) -> Result<PathBuf, ToolError> {
    let raw = given.display();
    if given.as_os_str().is_empty() {
        return Err(ToolError::InvalidArgs(format!("{field} must not be empty")));
    }
    if given.as_os_str().as_bytes().contains(&0) {
        return Err(ToolError::InvalidArgs(format!("{field} contains a NUL byte")));
    }
    let project = project
        .canonicalize()
        .map_err(|e| ToolError::InvalidArgs(format!("{field}: cannot resolve the project directory {}: {e}", project.display())))?;
    let joined = if given.is_absolute() { given.to_path_buf() } else { project.join(given) };
    let resolved = resolve_existing_prefix(&joined).map_err(|why| ToolError::InvalidArgs(format!("{field} \"{raw}\": {why}")))?;
    if !resolved.starts_with(&project) {
        return Err(ToolError::InvalidArgs(format!(
            "{field} \"{raw}\" resolves to {}, outside the project directory {}: push and pull only use files of the project",
            resolved.display(),
            project.display()
        )));
    }
    Ok(resolved)
}

/// Refuse sending `path` (resolved, inside `project`) when the snapshot credential deny-list
/// or its VCS rule covers it: as a file (`.env`, `id_ed25519`, `*.pem`, anything under
/// `.ssh/` or `.git/`, …) or, for a directory, everything below it (`.ssh/`, `.aws/`, …).
pub(in crate::tools::calls) fn check_sendable(project: &Path, field: &str, path: &Path, is_dir: bool) -> Result<(), ToolError> {
    let project = project.canonicalize().unwrap_or_else(|_| project.to_path_buf());
    let Ok(relative) = path.strip_prefix(&project) else { return Ok(()) };
    let name = relative.as_os_str().as_bytes();
    if name.is_empty() {
        return Ok(());
    }
    let verdicts = fuzz_name_filter(&[], &[], &[name]).map_err(|e| ToolError::Internal(format!("checking {field}: {e}")))?;
    let Some((as_file, as_dir)) = verdicts.into_iter().next() else { return Ok(()) };
    let reason = if is_dir { as_dir } else { as_file };
    match reason {
        Some(why @ (DropReason::DenyList(_) | DropReason::Vcs)) => Err(ToolError::InvalidArgs(format!(
            "{field} {} is left out by the snapshot rules ({why}): it is never sent to a sandbox",
            relative.display()
        ))),
        _ => Ok(()),
    }
}

/// `path` with its longest existing prefix resolved by `realpath` and the rest appended.
fn resolve_existing_prefix(path: &Path) -> Result<PathBuf, String> {
    let parts: Vec<Component> = path.components().collect();
    for keep in (1..=parts.len()).rev() {
        let prefix: PathBuf = parts[..keep].iter().collect();
        match prefix.canonicalize() {
            Ok(mut resolved) => {
                let rest = &parts[keep..];
                if let Some(first) = rest.first() {
                    // It did not resolve: a dangling symlink would be written through.
                    if std::fs::symlink_metadata(resolved.join(first)).is_ok() {
                        return Err(format!("{} is a symlink that does not resolve", prefix.join(first).display()));
                    }
                }
                for part in rest {
                    match part {
                        Component::Normal(name) => resolved.push(name),
                        Component::CurDir => {}
                        _ => return Err("`..` below a path that does not exist cannot be checked; name the destination directly".into()),
                    }
                }
                return Ok(resolved);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot resolve {}: {e}", prefix.display())),
        }
    }
    Err("cannot resolve any part of it".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_project() {
        let outer = tempfile::tempdir().unwrap();
        let project = outer.path().join("proj");
        std::fs::create_dir_all(project.join("sub")).unwrap();
        std::fs::write(outer.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outer.path().join("secret"), project.join("link")).unwrap();
        std::os::unix::fs::symlink(outer.path(), project.join("up")).unwrap();
        std::os::unix::fs::symlink(outer.path().join("nowhere"), project.join("dangling")).unwrap();
        let real = project.canonicalize().unwrap();

        assert_eq!(resolve(&project, "local_path", Path::new("sub/new.txt")).unwrap(), real.join("sub/new.txt"));
        assert_eq!(resolve(&project, "local_path", Path::new("./sub/../a/b")).unwrap(), real.join("a/b"));
        assert_eq!(resolve(&project, "local_path", Path::new(".")).unwrap(), real);
        let inside = project.join("sub/x");
        assert_eq!(resolve(&project, "local_path", &inside).unwrap(), real.join("sub/x"));
        for bad in ["../secret", "link", "up/secret", "up/new", "sub/../../secret", "/etc/passwd", "dangling", "missing/../../x", ""] {
            let err = resolve(&project, "local_path", Path::new(bad));
            assert!(err.is_err(), "{bad:?} resolved to {err:?}");
        }
        let absolute = outer.path().join("secret");
        assert!(resolve(&project, "local_path", &absolute).unwrap_err().to_string().contains("outside the project"));
    }

    #[test]
    fn credentials_are_not_sendable() {
        let project = tempfile::tempdir().unwrap();
        let root = project.path().canonicalize().unwrap();
        for (name, is_dir) in [("~/.ssh/id_ed25519", false), ("keys/id_rsa", false), (".env", false), ("tls/server.pem", false), (".aws", true), ("a/.ssh", true)] {
            let err = check_sendable(&root, "local_path", &root.join(name), is_dir).unwrap_err();
            assert!(err.to_string().contains("deny-list"), "{name}: {err}");
        }
        for (name, is_dir) in [("src/main.rs", false), (".env.example", false), ("src", true), ("", true)] {
            check_sendable(&root, "local_path", &root.join(name), is_dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
