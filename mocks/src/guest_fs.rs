//! The sandbox's filesystem as its processes see it, shared by the files API and the
//! embedded guest sshd's SFTP server.
//!
//! Guest paths map to host paths as `SandboxRuntime::host_path` maps them, and symlinks are
//! followed in *guest* space (an absolute link target names a guest path, as it does for a
//! process in the sandbox's mount namespace), never in host space.
//!
//! The emulator runs as root while the guest can change its own directories at any moment,
//! so a resolved path is never handed to a plain `open(2)`: every access opens the mount
//! root holding the path (a private dir, an attached disk, or `/`) and walks below it with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`. The guest-space
//! resolution already removed every symlink, so one met in host space means the tree
//! changed meanwhile: the access fails (ELOOP) instead of following it out of the sandbox.
//! Entry changes (create, remove, rename, link) act on an opened parent directory with the
//! `*at` calls and a single name; attribute changes act on an opened file descriptor.
//!
//! An isolated sandbox (`SandboxRuntime::view_root`) is walked from the root of its own
//! mount namespace (the host's root read-only, its private dirs and layers), never from a
//! host path, and every access runs as the sandbox's root (`as_sandbox_root`): host files
//! the sandbox cannot read are refused here too, and what is created is the sandbox's.

use std::ffi::OsString;
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;

use crate::isolation::SandboxRuntime;

/// Symlinks followed while resolving one path before giving up (Linux's ELOOP limit).
const MAX_LINK_HOPS: usize = 40;
/// openat2 answers EAGAIN when a concurrent rename raced its walk; it is retried this often.
const RACE_RETRIES: usize = 8;

/// Makes `raw` absolute (relative to `home`) and collapses `.`, `..` and `//` lexically.
/// `..` at the root stays at the root, as in the kernel.
pub fn normalize(raw: &str, home: &str) -> io::Result<String> {
    if raw.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "path contains NUL",
        ));
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

fn segments(guest: &str) -> Vec<&str> {
    guest.split('/').filter(|s| !s.is_empty()).collect()
}

fn invalid(err: crate::envelope::ApiError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, err.to_string())
}

/// `openat2` below `dir`, never leaving it and never following a symlink.
fn open_beneath(dir: &OwnedFd, rel: &Path, flags: OFlag, mode: u32) -> io::Result<OwnedFd> {
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    // openat2 refuses (EINVAL) what open(2) ignores: a mode without O_CREAT, and any flag
    // but O_DIRECTORY/O_NOFOLLOW/O_CLOEXEC next to O_PATH.
    let flags = if flags.contains(OFlag::O_PATH) {
        flags
    } else {
        flags | OFlag::O_NOCTTY
    };
    let mode = if flags.contains(OFlag::O_CREAT) {
        mode
    } else {
        0
    };
    let how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC)
        .mode(Mode::from_bits_truncate(mode))
        .resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
    for _ in 0..RACE_RETRIES {
        match openat2(dir.as_raw_fd(), rel, how) {
            // SAFETY: openat2 returned a fresh descriptor that nothing else owns.
            Ok(fd) => return Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
            Err(Errno::EAGAIN) | Err(Errno::EINTR) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(io::Error::other("path kept changing while it was opened"))
}

/// An opened directory and one name inside it: the target of an entry change.
pub struct Entry {
    /// The directory holding the entry (`O_PATH`, usable as a `*at` dirfd).
    pub dir: OwnedFd,
    /// The entry's name (one component, never `.` or `..`).
    pub name: OsString,
}

/// One sandbox's filesystem view.
pub struct GuestFs<'a> {
    runtime: &'a SandboxRuntime,
}

impl<'a> GuestFs<'a> {
    /// The filesystem of `runtime`'s sandbox.
    pub fn new(runtime: &'a SandboxRuntime) -> Self {
        GuestFs { runtime }
    }

    /// Runs `f` as the sandbox's root (isolated sandboxes).
    fn as_root<T>(&self, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        crate::isolation::as_sandbox_root(self.runtime, f)
    }

    /// Host path holding the normalised guest path `guest` (no symlink resolution).
    fn host(&self, guest: &str) -> io::Result<PathBuf> {
        self.runtime.host_path(guest).map_err(invalid)
    }

    /// Refuses changes outside the sandbox's own directories and attached disks, as the
    /// files API does (the host's own files are never changed; in an isolated sandbox the
    /// kernel refuses the read-only host root).
    pub fn check_writable(&self, guest: &str) -> io::Result<()> {
        self.runtime
            .writable_host_path(guest)
            .map(drop)
            .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e.to_string()))
    }

    /// Splits `guest` into the host directory of the mount holding it (the shortest guest
    /// prefix that maps there: a private dir, an attached disk or `/`) and the path below.
    fn anchor(&self, guest: &str) -> io::Result<(PathBuf, PathBuf)> {
        let host = self.host(guest)?;
        let segs = segments(guest);
        for split in 0..=segs.len() {
            let base = self.host(&format!("/{}", segs[..split].join("/")))?;
            let rest: PathBuf = segs[split..].iter().collect();
            if base.join(&rest) == host {
                return Ok((base, rest));
            }
        }
        Ok((host, PathBuf::new()))
    }

    /// Opens the mount root holding `guest` and returns it with the path below it: the
    /// sandbox's own root when it is isolated (attached disks excepted: their host
    /// directories), else the host directory the guest path maps to.
    fn rooted(&self, guest: &str) -> io::Result<(OwnedFd, PathBuf)> {
        if !self.runtime.on_disk(guest) {
            if let Some(view) = self.runtime.view_root() {
                let rest: PathBuf = segments(guest).iter().collect();
                return Ok((view?.try_clone()?, rest));
            }
        }
        let (root, rest) = self.anchor(guest)?;
        // The mount roots are the emulator's own directories (the guest cannot replace them).
        let root = File::options()
            .read(true)
            .custom_flags((OFlag::O_PATH | OFlag::O_DIRECTORY).bits())
            .open(&root)?;
        Ok((root.into(), rest))
    }

    /// Opens the symlink-free guest path `resolved` with `flags` (`mode` for a created file).
    pub fn open(&self, resolved: &str, flags: OFlag, mode: u32) -> io::Result<OwnedFd> {
        self.as_root(|| {
            let (root, rest) = self.rooted(resolved)?;
            open_beneath(&root, &rest, flags, mode)
        })
    }

    /// Metadata of `resolved` itself (a symlink as the last component is not followed).
    pub fn lstat(&self, resolved: &str) -> io::Result<Metadata> {
        self.as_root(|| {
            File::from(self.open(resolved, OFlag::O_PATH | OFlag::O_NOFOLLOW, 0)?).metadata()
        })
    }

    /// Target of the symlink `resolved` (its parents symlink-free).
    pub fn read_link(&self, resolved: &str) -> io::Result<PathBuf> {
        self.as_root(|| {
            let fd = self.open(resolved, OFlag::O_PATH | OFlag::O_NOFOLLOW, 0)?;
            Ok(nix::fcntl::readlinkat(Some(fd.as_raw_fd()), "")?.into())
        })
    }

    /// The parent directory and name of `resolved` for an entry change. The entry must lie
    /// strictly below its mount root (a private dir or disk itself is never replaced).
    pub fn entry(&self, resolved: &str) -> io::Result<Entry> {
        self.as_root(|| {
            let (root, rest) = self.rooted(resolved)?;
            let name = rest
                .file_name()
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!("{resolved} is a mount point"),
                    )
                })?
                .to_os_string();
            let parent = rest.parent().unwrap_or(Path::new(""));
            let dir = open_beneath(&root, parent, OFlag::O_PATH | OFlag::O_DIRECTORY, 0)?;
            Ok(Entry { dir, name })
        })
    }

    /// Creates the missing directories of the symlink-free guest path `resolved` (mode
    /// 0755), each inside its opened parent.
    pub fn create_dir_all(&self, resolved: &str) -> io::Result<()> {
        self.as_root(|| {
            let (root, rest) = self.rooted(resolved)?;
            let mut dir =
                open_beneath(&root, Path::new(""), OFlag::O_PATH | OFlag::O_DIRECTORY, 0)?;
            for name in rest.iter() {
                match nix::sys::stat::mkdirat(
                    Some(dir.as_raw_fd()),
                    name,
                    Mode::from_bits_truncate(0o755),
                ) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(err) => return Err(err.into()),
                }
                dir = open_beneath(&dir, Path::new(name), OFlag::O_PATH | OFlag::O_DIRECTORY, 0)?;
            }
            Ok(())
        })
    }

    /// Entries of the symlink-free guest directory `resolved` with their own metadata
    /// (symlinks not followed), `.` and `..` first. An entry removed meanwhile is skipped,
    /// as readdir(3) would not list it.
    pub fn list_dir(&self, resolved: &str) -> io::Result<Vec<(OsString, Metadata)>> {
        self.as_root(|| {
            let dir = self.open(resolved, OFlag::O_RDONLY | OFlag::O_DIRECTORY, 0)?;
            let parent = normalize(&format!("{resolved}/.."), "/")?;
            let mut entries = vec![
                (
                    OsString::from("."),
                    File::from(dir.try_clone()?).metadata()?,
                ),
                (
                    OsString::from(".."),
                    File::from(self.open(&parent, OFlag::O_PATH, 0)?).metadata()?,
                ),
            ];
            let mut names = Vec::new();
            for entry in nix::dir::Dir::from(dir.try_clone()?)?.iter() {
                let name = entry?.file_name().to_bytes().to_vec();
                if name != b"." && name != b".." {
                    names.push(OsString::from_vec(name));
                }
            }
            for name in names {
                match open_beneath(&dir, Path::new(&name), OFlag::O_PATH | OFlag::O_NOFOLLOW, 0) {
                    Ok(fd) => entries.push((name, File::from(fd).metadata()?)),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(entries)
        })
    }

    /// Replaces (or creates) the file at guest path `guest` with `data` (mode `mode`),
    /// creating missing parent directories: written to a temporary sibling, then renamed.
    pub fn write_file(&self, guest: &str, data: &[u8], mode: u32) -> io::Result<()> {
        self.as_root(|| {
            use std::io::Write;
            let resolved = self.resolve(guest, true)?;
            self.create_dir_all(&normalize(&format!("{resolved}/.."), "/")?)?;
            let entry = self.entry(&resolved)?;
            let tmp = format!(
                ".{}.tmp-{}",
                entry.name.to_string_lossy(),
                crate::ids::random_token(8)
            );
            let flags = OFlag::O_CREAT
                | OFlag::O_EXCL
                | OFlag::O_WRONLY
                | OFlag::O_CLOEXEC
                | OFlag::O_NOFOLLOW;
            let fd = nix::fcntl::openat(
                Some(entry.dir.as_raw_fd()),
                tmp.as_str(),
                flags,
                Mode::from_bits_truncate(mode),
            )?;
            // SAFETY: openat returned a fresh descriptor that nothing else owns.
            let mut file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
            let written = file.write_all(data).and_then(|()| {
                nix::sys::stat::fchmod(file.as_raw_fd(), Mode::from_bits_truncate(mode))?;
                Ok(())
            });
            let placed = written.and_then(|()| {
                Ok(nix::fcntl::renameat(
                    Some(entry.dir.as_raw_fd()),
                    tmp.as_str(),
                    Some(entry.dir.as_raw_fd()),
                    entry.name.as_os_str(),
                )?)
            });
            if placed.is_err() {
                let _ = nix::unistd::unlinkat(
                    Some(entry.dir.as_raw_fd()),
                    tmp.as_str(),
                    nix::unistd::UnlinkatFlags::NoRemoveDir,
                );
            }
            placed
        })
    }

    /// Up to `max` bytes of the file at guest path `guest` (symlinks followed in guest
    /// space) and its size; `None` when it does not exist.
    pub fn read_head(&self, guest: &str, max: u64) -> io::Result<Option<(Vec<u8>, u64)>> {
        self.as_root(|| {
            use std::io::Read;
            let resolved = self.resolve(guest, true)?;
            let fd = match self.open(&resolved, OFlag::O_RDONLY | OFlag::O_NONBLOCK, 0) {
                Ok(fd) => fd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
            let file = File::from(fd);
            let size = file.metadata()?.len();
            let mut head = Vec::new();
            file.take(max).read_to_end(&mut head)?;
            Ok(Some((head, size)))
        })
    }

    /// Resolves every symlink of the normalised guest path `guest` (the last component
    /// only when `follow_last`), in guest space. Components that do not exist end the
    /// resolution: the rest is appended as is (so a path about to be created resolves).
    pub fn resolve(&self, guest: &str, follow_last: bool) -> io::Result<String> {
        self.as_root(|| {
            let mut pending: Vec<String> =
                segments(guest).into_iter().map(str::to_string).collect();
            pending.reverse();
            let mut done = String::from("/");
            let mut hops = 0;
            while let Some(name) = pending.pop() {
                let candidate = child(&done, &name);
                if pending.is_empty() && !follow_last {
                    return Ok(candidate);
                }
                let meta = match self.lstat(&candidate) {
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
                    return Err(io::Error::other(format!(
                        "too many levels of symbolic links at {candidate}"
                    )));
                }
                let target = self.read_link(&candidate)?;
                let target = target.to_string_lossy();
                let base = if target.starts_with('/') {
                    String::new()
                } else {
                    done.clone()
                };
                let expanded = normalize(&format!("{base}/{target}"), "/")?;
                for seg in expanded.split('/').filter(|s| !s.is_empty()).rev() {
                    pending.push(seg.to_string());
                }
                done = String::from("/");
            }
            Ok(done)
        })
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
