//! Host ↔ guest path mapping for routed file tools (plugins.md §2.4): relative paths resolve
//! under the guest working directory, absolute paths inside the host project map onto it,
//! other absolute paths are guest paths already. `..` may not climb out of the project (or
//! above `/`). Patch file headers are rewritten with the same rules.

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// How paths given to a [`super::Guest`] become guest paths.
///
/// ```
/// use createos_sandbox::guest::PathMap;
/// let map = PathMap::new("/root/workspace")?.with_host_root("/home/me/app");
/// assert_eq!(map.to_guest("src/main.rs")?, "/root/workspace/src/main.rs");
/// assert_eq!(map.to_guest("/home/me/app/README.md")?, "/root/workspace/README.md");
/// assert_eq!(map.to_guest("/etc/hosts")?, "/etc/hosts");
/// assert!(map.to_guest("../secrets").is_err());
/// # Ok::<(), createos_sandbox::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathMap {
    /// The local project directory whose absolute paths map onto `guest_root` (none: every
    /// absolute path is a guest path).
    pub host_root: Option<PathBuf>,
    /// The guest working directory: absolute, normalized.
    pub guest_root: String,
}

impl PathMap {
    /// Relative paths resolve under `guest_root` (absolute; `.`/`..` are resolved).
    pub fn new(guest_root: &str) -> Result<Self> {
        if !guest_root.starts_with('/') {
            return Err(Error::invalid(
                "guest root",
                format!("{guest_root:?} must be an absolute path"),
            ));
        }
        let root = normalize_absolute("guest root", guest_root)?;
        Ok(PathMap {
            host_root: None,
            guest_root: root,
        })
    }

    /// Map absolute paths inside `host_root` (the local project) onto the guest root. The path
    /// is compared component by component as given (it is not resolved on disk); `.`
    /// components are ignored.
    pub fn with_host_root(mut self, host_root: impl Into<PathBuf>) -> Self {
        let root: PathBuf = host_root.into();
        let clean: PathBuf = root
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect();
        self.host_root = Some(clean);
        self
    }

    /// The guest path for `path` (see the type docs). Fails for an empty path, a NUL byte, a
    /// relative or project path whose `..` leaves the root, or an absolute path climbing
    /// above `/`.
    pub fn to_guest(&self, path: &str) -> Result<String> {
        if path.is_empty() {
            return Err(Error::invalid("path", "must not be empty"));
        }
        if path.contains('\0') {
            return Err(Error::invalid("path", "contains a NUL byte"));
        }
        if let Some(rest) = self.inside_host_root(path) {
            return join_confined(&self.guest_root, &rest, path);
        }
        if path.starts_with('/') {
            return normalize_absolute("path", path);
        }
        join_confined(&self.guest_root, path, path)
    }

    /// The guest path for an optional path (`None` stays `None`: "the working directory").
    pub fn to_guest_opt(&self, path: Option<&str>) -> Result<Option<String>> {
        path.map(|p| self.to_guest(p)).transpose()
    }

    /// Rewrite the file headers of a `*** Begin Patch` text (`*** Add File:`, `*** Update
    /// File:`, `*** Delete File:`, `*** Move to:`) with [`Self::to_guest`]; every other line,
    /// and every line ending, is kept as it is.
    pub fn rewrite_patch(&self, patch: &str) -> Result<String> {
        const HEADERS: [&str; 4] = [
            "*** Add File: ",
            "*** Update File: ",
            "*** Delete File: ",
            "*** Move to: ",
        ];
        let mut out = String::with_capacity(patch.len() + 64);
        for piece in patch.split_inclusive('\n') {
            let (body, ending) = split_ending(piece);
            match HEADERS.iter().find(|h| body.starts_with(*h)) {
                Some(header) => {
                    let raw = body[header.len()..].trim();
                    if raw.is_empty() {
                        // Left for the helper to refuse with its line number.
                        out.push_str(piece);
                        continue;
                    }
                    out.push_str(header);
                    out.push_str(&self.to_guest(raw)?);
                    out.push_str(ending);
                }
                None => out.push_str(piece),
            }
        }
        Ok(out)
    }

    /// The part of `path` below the host root, as a `/`-joined relative path, when `path` is
    /// the host root or inside it.
    fn inside_host_root(&self, path: &str) -> Option<String> {
        let root = self.host_root.as_ref()?;
        let candidate = Path::new(path);
        if !candidate.is_absolute() || !root.is_absolute() {
            return None;
        }
        let mut parts = candidate
            .components()
            .filter(|c| !matches!(c, Component::CurDir));
        for want in root.components() {
            if parts.next() != Some(want) {
                return None;
            }
        }
        let rest: Vec<String> = parts
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        Some(rest.join("/"))
    }
}

/// `\n` / `\r\n` ending of one line of a patch, split off.
fn split_ending(piece: &str) -> (&str, &str) {
    if let Some(body) = piece.strip_suffix("\r\n") {
        (body, "\r\n")
    } else if let Some(body) = piece.strip_suffix('\n') {
        (body, "\n")
    } else {
        (piece, "")
    }
}

/// `root` + `rel` with `.`/`..` resolved; `..` may not leave `root`.
fn join_confined(root: &str, rel: &str, shown: &str) -> Result<String> {
    let mut parts: Vec<&str> = Vec::new();
    for comp in rel.split('/') {
        match comp {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(Error::invalid(
                        "path",
                        format!("{shown:?} escapes the working directory {root} with '..'"),
                    ));
                }
            }
            other => parts.push(other),
        }
    }
    if parts.is_empty() {
        return Ok(root.to_string());
    }
    let base = root.trim_end_matches('/');
    Ok(format!("{base}/{}", parts.join("/")))
}

/// An absolute path with `.`/`..` resolved; `..` may not climb above `/`.
fn normalize_absolute(field: &str, path: &str) -> Result<String> {
    let mut parts: Vec<&str> = Vec::new();
    for comp in path.split('/') {
        match comp {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(Error::invalid(
                        field,
                        format!("{path:?} climbs above / with '..'"),
                    ));
                }
            }
            other => parts.push(other),
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> PathMap {
        PathMap::new("/root/workspace")
            .unwrap()
            .with_host_root("/home/me/proj")
    }

    #[test]
    fn relative_paths_land_under_the_guest_root() {
        let m = map();
        assert_eq!(m.to_guest("a/b.txt").unwrap(), "/root/workspace/a/b.txt");
        assert_eq!(m.to_guest("./a//b/../c").unwrap(), "/root/workspace/a/c");
        assert_eq!(m.to_guest(".").unwrap(), "/root/workspace");
        assert!(m.to_guest("..").is_err());
        assert!(m.to_guest("a/../../x").is_err());
    }

    #[test]
    fn guest_root_of_slash() {
        let m = PathMap::new("/").unwrap();
        assert_eq!(m.to_guest("etc/hosts").unwrap(), "/etc/hosts");
        assert!(m.to_guest("../etc").is_err());
        assert!(PathMap::new("relative").is_err());
        assert_eq!(PathMap::new("/a/./b/").unwrap().guest_root, "/a/b");
    }

    #[test]
    fn project_paths_map_and_others_stay() {
        let m = map();
        assert_eq!(m.to_guest("/home/me/proj").unwrap(), "/root/workspace");
        assert_eq!(
            m.to_guest("/home/me/proj/src/lib.rs").unwrap(),
            "/root/workspace/src/lib.rs"
        );
        assert_eq!(m.to_guest("/home/me/projX/a").unwrap(), "/home/me/projX/a");
        assert_eq!(m.to_guest("/etc/../tmp/x").unwrap(), "/tmp/x");
        assert!(m.to_guest("/home/me/proj/../other").is_err());
        assert!(m.to_guest("/..").is_err());
        assert!(m.to_guest("").is_err());
        assert!(m.to_guest("a\0b").is_err());
    }

    #[test]
    fn patch_headers_are_rewritten() {
        let m = map();
        let patch = "*** Begin Patch\r\n*** Add File: new.txt\r\n+hi\r\n*** Update File: /home/me/proj/src/a.rs\n\
                     *** Move to: src/b.rs\n@@\n-x\n+y\n*** Delete File: /tmp/old\n*** End Patch";
        let out = m.rewrite_patch(patch).unwrap();
        assert_eq!(
            out,
            "*** Begin Patch\r\n*** Add File: /root/workspace/new.txt\r\n+hi\r\n\
             *** Update File: /root/workspace/src/a.rs\n*** Move to: /root/workspace/src/b.rs\n@@\n-x\n+y\n\
             *** Delete File: /tmp/old\n*** End Patch"
        );
        assert!(m
            .rewrite_patch("*** Begin Patch\n*** Delete File: ../up\n*** End Patch\n")
            .is_err());
        // A hunk line can never look like a header: it starts with ' ', '-' or '+'.
        let kept = "*** Begin Patch\n*** Update File: a\n@@\n-*** Add File: x\n+y\n*** End Patch\n";
        assert!(m
            .rewrite_patch(kept)
            .unwrap()
            .contains("\n-*** Add File: x\n"));
    }
}
