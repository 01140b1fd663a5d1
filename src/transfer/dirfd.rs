//! Directory handles. Everything written on behalf of a sandbox goes through an open directory
//! and names exactly one entry in it, never following a symlink: a path string is never
//! handed to the kernel to resolve again. A path of several components is opened with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` on Linux, and component by component with
//! `O_NOFOLLOW` where that is not available (macOS, older kernels, seccomp filters).

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path};

/// What stands at a name (never following a symlink).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
    Symlink,
    /// A device, FIFO or socket.
    Special,
}

/// `fstatat(…, AT_SYMLINK_NOFOLLOW)` of one name.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stat {
    pub kind: Kind,
}

/// An open directory.
#[derive(Debug)]
pub(crate) struct Dir {
    fd: OwnedFd,
}

/// One component as a C string: not empty, no `/`, no NUL, not `.` or `..`.
fn c_name(name: &OsStr) -> io::Result<CString> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a single file name"),
        ));
    }
    CString::new(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in a file name"))
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a non-negative descriptor just returned by the kernel, owned by nobody else.
    check(fd).map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
}

const DIR_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;

impl Dir {
    /// Open the directory at `path` (chosen by the user: the kernel resolves it, links and
    /// all, this once).
    pub(crate) fn open(path: &Path) -> io::Result<Dir> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in a path"))?;
        // SAFETY: a valid C string; the result is checked.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        Ok(Dir { fd: owned(fd)? })
    }

    /// Another handle to the same directory.
    pub(crate) fn try_clone(&self) -> io::Result<Dir> {
        Ok(Dir {
            fd: self.fd.try_clone()?,
        })
    }

    fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The directory `name` inside this one; a symlink there is an error (`ELOOP`/`ENOTDIR`).
    pub(crate) fn sub(&self, name: &OsStr) -> io::Result<Dir> {
        let c = c_name(name)?;
        // SAFETY: valid descriptor and C string; the result is checked.
        let fd = unsafe { libc::openat(self.raw(), c.as_ptr(), DIR_FLAGS) };
        Ok(Dir { fd: owned(fd)? })
    }

    /// The directory at the relative `path` beneath this one, no component a symlink.
    pub(crate) fn beneath(&self, path: &Path) -> io::Result<Dir> {
        let mut parts = Vec::new();
        for part in path.components() {
            match part {
                Component::Normal(p) => parts.push(p),
                Component::CurDir => {}
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{} leaves the directory", path.display()),
                    ))
                }
            }
        }
        if parts.is_empty() {
            return self.try_clone();
        }
        #[cfg(target_os = "linux")]
        if let Some(found) = self.openat2_beneath(&parts) {
            return found;
        }
        let mut at = self.sub(parts[0])?;
        for part in &parts[1..] {
            at = at.sub(part)?;
        }
        Ok(at)
    }

    /// `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`; `None` when the kernel does not
    /// offer it (the caller walks instead).
    #[cfg(target_os = "linux")]
    fn openat2_beneath(&self, parts: &[&OsStr]) -> Option<io::Result<Dir>> {
        let mut joined = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            if let Err(e) = c_name(part) {
                return Some(Err(e));
            }
            if i > 0 {
                joined.push(b'/');
            }
            joined.extend_from_slice(part.as_bytes());
        }
        let c = CString::new(joined).ok()?;
        // SAFETY: open_how is plain data; zero is the documented default of every field.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = (libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64;
        how.resolve =
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
        // SAFETY: valid descriptor, C string and open_how of the size passed.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                self.raw(),
                c.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd < 0 {
            let err = io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::ENOSYS) | Some(libc::EPERM) | Some(libc::E2BIG) | Some(libc::EINVAL) => {
                    None
                }
                _ => Some(Err(err)),
            };
        }
        Some(owned(fd as libc::c_int).map(|fd| Dir { fd }))
    }

    /// What stands at `name`; `None` when nothing does.
    pub(crate) fn stat(&self, name: &OsStr) -> io::Result<Option<Stat>> {
        let c = c_name(name)?;
        // SAFETY: stat is plain data filled in by the kernel.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor, C string and out pointer.
        let ret =
            unsafe { libc::fstatat(self.raw(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        if ret < 0 {
            let err = io::Error::last_os_error();
            return if err.kind() == io::ErrorKind::NotFound {
                Ok(None)
            } else {
                Err(err)
            };
        }
        Ok(Some(stat_of(&st)))
    }

    /// Create the directory `name` (`mode` before the umask); an existing one is fine, anything
    /// else standing there is an error. Returns a handle to it.
    pub(crate) fn ensure_dir(&self, name: &OsStr, mode: u32) -> io::Result<Dir> {
        let c = c_name(name)?;
        // SAFETY: valid descriptor and C string.
        let made = unsafe { libc::mkdirat(self.raw(), c.as_ptr(), mode as libc::mode_t) };
        if made < 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::AlreadyExists {
                return Err(err);
            }
        }
        self.sub(name)
    }

    /// Create the regular file `name`, open for reading and writing (it must not exist; a
    /// symlink there is not followed).
    pub(crate) fn create_new(&self, name: &OsStr, mode: u32) -> io::Result<File> {
        let c = c_name(name)?;
        let flags =
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: valid descriptor and C string; the result is checked.
        let fd = unsafe { libc::openat(self.raw(), c.as_ptr(), flags, mode as libc::c_uint) };
        Ok(File::from(owned(fd)?))
    }

    /// Open the regular file `name` for reading (a symlink there is an error; a FIFO does not
    /// block the open).
    pub(crate) fn open_file(&self, name: &OsStr) -> io::Result<File> {
        let c = c_name(name)?;
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
        // SAFETY: valid descriptor and C string; the result is checked.
        let fd = unsafe { libc::openat(self.raw(), c.as_ptr(), flags) };
        let file = File::from(owned(fd)?);
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name:?} is not a regular file"),
            ));
        }
        Ok(file)
    }

    /// Create the symlink `name` → `target` (the target text is stored, not resolved).
    pub(crate) fn symlink(&self, target: &OsStr, name: &OsStr) -> io::Result<()> {
        let c = c_name(name)?;
        let t = CString::new(target.as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a link target"))?;
        // SAFETY: valid descriptor and C strings.
        check(unsafe { libc::symlinkat(t.as_ptr(), self.raw(), c.as_ptr()) }).map(drop)
    }

    /// The target text of the symlink `name`.
    pub(crate) fn read_link(&self, name: &OsStr) -> io::Result<OsString> {
        let c = c_name(name)?;
        let mut buf = vec![0u8; 4096];
        loop {
            // SAFETY: valid descriptor, C string and buffer of the length passed.
            let n = unsafe {
                libc::readlinkat(self.raw(), c.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let n = n as usize;
            if n < buf.len() {
                buf.truncate(n);
                return Ok(OsString::from_vec(buf));
            }
            buf.resize(buf.len() * 2, 0);
        }
    }

    /// Remove the file or symlink `name`.
    pub(crate) fn remove_file(&self, name: &OsStr) -> io::Result<()> {
        let c = c_name(name)?;
        // SAFETY: valid descriptor and C string.
        check(unsafe { libc::unlinkat(self.raw(), c.as_ptr(), 0) }).map(drop)
    }

    /// Remove the empty directory `name`.
    pub(crate) fn remove_dir(&self, name: &OsStr) -> io::Result<()> {
        let c = c_name(name)?;
        // SAFETY: valid descriptor and C string.
        check(unsafe { libc::unlinkat(self.raw(), c.as_ptr(), libc::AT_REMOVEDIR) }).map(drop)
    }

    /// Move `name` of this directory to `to_name` in `to` (replacing a file or symlink there;
    /// neither name is followed).
    pub(crate) fn rename(&self, name: &OsStr, to: &Dir, to_name: &OsStr) -> io::Result<()> {
        let (from, dest) = (c_name(name)?, c_name(to_name)?);
        // SAFETY: valid descriptors and C strings.
        check(unsafe { libc::renameat(self.raw(), from.as_ptr(), to.raw(), dest.as_ptr()) })
            .map(drop)
    }

    /// Set the access and modification times of the symlink `name` itself.
    pub(crate) fn set_link_mtime(&self, name: &OsStr, secs: i64, nanos: u32) -> io::Result<()> {
        let c = c_name(name)?;
        let time = libc::timespec {
            tv_sec: secs as libc::time_t,
            tv_nsec: nanos as _,
        };
        let times = [time, time];
        // SAFETY: valid descriptor, C string and two timespecs.
        check(unsafe {
            libc::utimensat(
                self.raw(),
                c.as_ptr(),
                times.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })
        .map(drop)
    }

    /// Remove everything below this directory, never following a symlink (each is removed as
    /// the link it is). Errors are ignored: this cleans up after us.
    pub(crate) fn clear(&self) {
        let Ok(dup) = self.fd.try_clone() else { return };
        // SAFETY: fdopendir takes ownership of the duplicated descriptor; closed by closedir.
        let dirp = unsafe { libc::fdopendir(std::os::fd::IntoRawFd::into_raw_fd(dup)) };
        if dirp.is_null() {
            return;
        }
        let mut names = Vec::new();
        loop {
            // SAFETY: dirp is a valid open directory stream until closedir below.
            let entry = unsafe { libc::readdir(dirp) };
            if entry.is_null() {
                break;
            }
            // SAFETY: d_name is a NUL-terminated name inside the entry readdir returned.
            let name = unsafe { std::ffi::CStr::from_ptr((*entry).d_name.as_ptr()) };
            let bytes = name.to_bytes();
            if bytes != b"." && bytes != b".." {
                names.push(OsString::from_vec(bytes.to_vec()));
            }
        }
        // SAFETY: closes the stream opened above (and the descriptor it owns).
        unsafe { libc::closedir(dirp) };
        for name in names {
            if let Ok(Some(st)) = self.stat(&name) {
                if st.kind == Kind::Dir {
                    if let Ok(sub) = self.sub(&name) {
                        sub.clear();
                    }
                    let _ = self.remove_dir(&name);
                } else {
                    let _ = self.remove_file(&name);
                }
            }
        }
    }
}

fn stat_of(st: &libc::stat) -> Stat {
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => Kind::File,
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFLNK => Kind::Symlink,
        _ => Kind::Special,
    };
    Stat { kind }
}

/// The device and inode of an open file.
pub(crate) fn identity(file: &File) -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata()?;
    Ok((meta.dev(), meta.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let dir = Dir::open(&root).unwrap();
        assert!(dir.beneath(Path::new("a/b")).is_ok());
        assert!(dir.beneath(Path::new("link")).is_err());
        assert!(dir.beneath(Path::new("../root")).is_err());
        assert!(dir.sub(OsStr::new("link")).is_err());
        assert!(dir.ensure_dir(OsStr::new("link"), 0o755).is_err());
        assert!(dir.create_new(OsStr::new("link"), 0o644).is_err());
        assert!(dir.open_file(OsStr::new("link")).is_err());
        assert!(dir.sub(OsStr::new("a/b")).is_err(), "one name at a time");
        assert_eq!(
            dir.stat(OsStr::new("link")).unwrap().unwrap().kind,
            Kind::Symlink
        );
        assert_eq!(
            dir.read_link(OsStr::new("link")).unwrap(),
            outside.as_os_str()
        );
        dir.remove_file(OsStr::new("link")).unwrap();
        assert!(outside.exists(), "removing a link leaves its target");
        std::fs::write(outside.join("keep"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("a/out")).unwrap();
        dir.clear();
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0);
        assert_eq!(
            std::fs::read_to_string(outside.join("keep")).unwrap(),
            "x",
            "clearing never follows a link"
        );
    }
}
