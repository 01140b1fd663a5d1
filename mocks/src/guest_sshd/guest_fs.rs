//! The sandbox's filesystem as its processes see it, for the embedded SFTP server: guest
//! paths map to host paths exactly as the files API maps them
//! (`SandboxRuntime::host_path`), and symlinks are followed in *guest* space (an absolute
//! link target names a guest path, as it does for a process in the sandbox's mount
//! namespace), never in host space.

use std::io;
use std::path::PathBuf;

use crate::isolation::SandboxRuntime;

/// Symlinks followed while resolving one path before giving up (Linux's ELOOP limit).
const MAX_LINK_HOPS: usize = 40;

/// Makes `raw` absolute (relative to `home`) and collapses `.`, `..` and `//` lexically.
/// `..` at the root stays at the root, as in the kernel.
pub fn normalize(raw: &str, home: &str) -> io::Result<String> {
    if raw.contains('\0') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"));
    }
    let joined = if raw.starts_with('/') {
        raw.to_string()
    } else if raw.is_empty() || raw == "." {
        home.to_string()
    } else {
        format!("{home}/{raw}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for seg in joined.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

/// Guest path of `name` inside directory `dir` (both normalised).
fn child(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

fn to_io(err: crate::envelope::ApiError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, err.to_string())
}

/// One sandbox's filesystem view.
pub struct GuestFs<'a> {
    runtime: &'a SandboxRuntime,
}

impl<'a> GuestFs<'a> {
    pub fn new(runtime: &'a SandboxRuntime) -> Self {
        GuestFs { runtime }
    }

    /// Host path holding the normalised guest path `guest` (no symlink resolution).
    pub fn host(&self, guest: &str) -> io::Result<PathBuf> {
        self.runtime.host_path(guest).map_err(to_io)
    }

    /// Host path for a change at `guest`: only the sandbox's own directories and attached
    /// disks are writable, as through the files API (the host's files are never changed).
    pub fn writable_host(&self, guest: &str) -> io::Result<PathBuf> {
        self.runtime
            .writable_host_path(guest)
            .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e.to_string()))
    }

    /// Resolves every symlink of the normalised guest path `guest` (the last component
    /// only when `follow_last`), in guest space. Components that do not exist end the
    /// resolution: the rest is appended as is (so a path about to be created resolves).
    pub fn resolve(&self, guest: &str, follow_last: bool) -> io::Result<String> {
        let mut pending: Vec<String> = guest.split('/').filter(|s| !s.is_empty()).map(str::to_string).collect();
        pending.reverse();
        let mut done = String::from("/");
        let mut hops = 0;
        while let Some(name) = pending.pop() {
            let candidate = child(&done, &name);
            let is_last = pending.is_empty();
            if is_last && !follow_last {
                return Ok(candidate);
            }
            let meta = match std::fs::symlink_metadata(self.host(&candidate)?) {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let mut rest = candidate;
                    while let Some(name) = pending.pop() {
                        rest = child(&rest, &name);
                    }
                    return Ok(rest);
                }
                Err(e) => return Err(e),
            };
            if !meta.file_type().is_symlink() {
                done = candidate;
                continue;
            }
            hops += 1;
            if hops > MAX_LINK_HOPS {
                return Err(io::Error::other(format!("too many levels of symbolic links at {candidate}")));
            }
            let target = std::fs::read_link(self.host(&candidate)?)?;
            let target = target.to_string_lossy();
            let base = if target.starts_with('/') { String::new() } else { done.clone() };
            let expanded = normalize(&format!("{base}/{target}"), "/")?;
            for seg in expanded.split('/').filter(|s| !s.is_empty()).rev() {
                pending.push(seg.to_string());
            }
            done = String::from("/");
        }
        Ok(done)
    }

    /// Host path of `guest` with every symlink resolved in guest space.
    pub fn host_followed(&self, guest: &str) -> io::Result<PathBuf> {
        self.host(&self.resolve(guest, true)?)
    }

    /// Host path of `guest` itself (its parents resolved, the last component not).
    pub fn host_of_entry(&self, guest: &str) -> io::Result<PathBuf> {
        self.host(&self.resolve(guest, false)?)
    }

    /// Writable host path of `guest` with every symlink resolved.
    pub fn writable_followed(&self, guest: &str) -> io::Result<PathBuf> {
        self.writable_host(&self.resolve(guest, true)?)
    }

    /// Writable host path of the entry `guest` itself (last component not followed).
    pub fn writable_entry(&self, guest: &str) -> io::Result<PathBuf> {
        self.writable_host(&self.resolve(guest, false)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_normalise_against_home() {
        assert_eq!(normalize("a/b", "/root").unwrap(), "/root/a/b");
        assert_eq!(normalize(".", "/root").unwrap(), "/root");
        assert_eq!(normalize("", "/root").unwrap(), "/root");
        assert_eq!(normalize("/x/../../y//z/.", "/root").unwrap(), "/y/z");
        assert_eq!(normalize("/..", "/root").unwrap(), "/");
        assert!(normalize("/a\0b", "/root").is_err());
        assert_eq!(child("/", "etc"), "/etc");
        assert_eq!(child("/root", "x"), "/root/x");
    }
}
