//! Disk attach and detach inside a running isolated sandbox.
//!
//! On the real service a sandbox is a VM: an attached disk is mounted for every process
//! and a detached one unmounted for every process, running ones included. The emulator
//! does the same in the mount namespace its holder keeps (`holder.rs`), as the host's
//! root, from a short-lived thread of its own:
//!
//! * attach: a detached clone of the disk's host directory is taken first, in the
//!   emulator's own mount namespace (`open_tree(OPEN_TREE_CLONE)`); the thread then joins
//!   the sandbox's mount namespace (`unshare(CLONE_FS)` + `setns`, which also makes the
//!   sandbox's root its root), creates the mount point as the sandbox's root would, and
//!   moves the clone onto it (`move_mount`);
//! * detach: the thread joins the namespace and unmounts the guest path
//!   (`umount2(MNT_DETACH)`: processes with files open on the disk keep them, as on a VM
//!   after a lazy unmount).
//!
//! The thread ends right after, so no emulator thread stays in a sandbox's namespace.
//! The final component of the guest path is never followed as a symlink, and every path
//! is resolved below the sandbox's own root. Sandbox processes themselves never mount
//! (their seccomp filter refuses it).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::libc;

use super::layers::SANDBOX_ID_BASE;

/// `open_tree(2)`: clone the mount tree instead of opening it.
const OPEN_TREE_CLONE: libc::c_uint = 1;
/// `move_mount(2)`: the source is the descriptor itself.
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Runs `f` on a fresh thread that has joined the mount namespace `mnt` (its root and
/// working directory are the namespace's root). The thread ends with `f`.
fn in_namespace<T: Send>(mnt: &OwnedFd, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    let raw = mnt.as_raw_fd();
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            // SAFETY: this thread's own filesystem context and mount namespace change; the
            // descriptor stays open (borrowed from `mnt`) until the scope ends.
            unsafe {
                if libc::unshare(libc::CLONE_FS) != 0 || libc::setns(raw, libc::CLONE_NEWNS) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            f()
        });
        worker
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the mount thread panicked")))
    })
}

/// Creates the missing directories of `guest` (a normalised absolute path) as the sandbox's
/// root: file-system ids `SANDBOX_ID_BASE`, no supplementary group, so the kernel checks it
/// as it checks the sandbox's own root. Symlinks are not followed. Runs in the namespace.
fn make_mount_point(guest: &str) -> io::Result<()> {
    // SAFETY: raw per-thread credential syscalls on the mount thread (it ends right after).
    unsafe {
        if libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()) != 0 {
            return Err(io::Error::last_os_error());
        }
        libc::setfsgid(SANDBOX_ID_BASE);
        libc::setfsuid(SANDBOX_ID_BASE);
    }
    let mut outcome = Ok(());
    let mut path = String::new();
    for segment in guest.split('/').filter(|s| !s.is_empty()) {
        path.push('/');
        path.push_str(segment);
        let c = match cstring(path.as_bytes()) {
            Ok(c) => c,
            Err(e) => {
                outcome = Err(e);
                break;
            }
        };
        // SAFETY: mkdir/lstat on a NUL-terminated path.
        let made = unsafe { libc::mkdir(c.as_ptr(), 0o755) };
        if made == 0 {
            continue;
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EEXIST) {
            outcome = Err(err);
            break;
        }
        // SAFETY: as above; `st` is written by the kernel.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::lstat(c.as_ptr(), &mut st) } != 0 {
            outcome = Err(io::Error::last_os_error());
            break;
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            outcome = Err(io::Error::from_raw_os_error(libc::ENOTDIR));
            break;
        }
    }
    // SAFETY: back to the host root's file-system ids for the mount itself.
    unsafe {
        libc::setfsuid(0);
        libc::setfsgid(0);
    }
    outcome
}

/// Mounts the host directory `host` at `guest` in the mount namespace `mnt`, for every
/// process of the namespace (running ones included).
pub fn attach(mnt: &OwnedFd, host: &Path, guest: &str) -> io::Result<()> {
    let host = cstring(host.as_os_str().as_bytes())?;
    let target = cstring(guest.as_bytes())?;
    let flags =
        OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_RECURSIVE as libc::c_uint;
    // SAFETY: open_tree on a NUL-terminated path; the descriptor is owned by the result.
    let tree = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, host.as_ptr(), flags) };
    if tree < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `tree` was just returned by the kernel and is owned by nobody else.
    let tree = unsafe { OwnedFd::from_raw_fd(tree as libc::c_int) };
    in_namespace(mnt, move || {
        make_mount_point(guest)?;
        // SAFETY: move_mount of our detached tree onto a NUL-terminated path; without
        // MOVE_MOUNT_T_SYMLINKS a symlink as the last component is not followed.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_move_mount,
                tree.as_raw_fd(),
                c"".as_ptr(),
                libc::AT_FDCWD,
                target.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    })
}

/// Unmounts `guest` (and what is mounted below it) in the mount namespace `mnt`, for every
/// process of the namespace.
pub fn detach(mnt: &OwnedFd, guest: &str) -> io::Result<()> {
    let target = cstring(guest.as_bytes())?;
    in_namespace(mnt, move || {
        // SAFETY: umount2 on a NUL-terminated path.
        if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW) } != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    })
}
