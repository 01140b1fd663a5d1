//! Filesystem helpers: recursive copy (fork) that keeps symlinks, permissions, owners and
//! overlay metadata.

use std::fs;
use std::io;
use std::path::Path;

/// Copies the tree `from` into `to` (created if missing). Symlinks are recreated, not
/// followed; owners and modes are kept (so a forked sandbox's root owns what the parent's
/// did); overlay whiteouts (character devices 0:0) and opaque-directory marks are kept, so
/// a copied upper layer hides what the original hid. Sockets, FIFOs, other devices and the
/// paths in `skip` are left out.
pub fn copy_tree(from: &Path, to: &Path, skip: &[std::path::PathBuf]) -> io::Result<()> {
    fs::create_dir_all(to)?;
    if let Ok(meta) = fs::symlink_metadata(from) {
        keep_owner(to, &meta);
        let _ = fs::set_permissions(to, meta.permissions());
        copy_opaque_mark(from, to);
    }
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let src = entry.path();
        if skip.iter().any(|s| s == &src) {
            continue;
        }
        let dst = to.join(entry.file_name());
        let meta = fs::symlink_metadata(&src)?;
        let kind = meta.file_type();
        if kind.is_symlink() {
            let target = fs::read_link(&src)?;
            let _ = fs::remove_file(&dst);
            std::os::unix::fs::symlink(target, &dst)?;
            keep_owner(&dst, &meta);
        } else if kind.is_dir() {
            copy_tree(&src, &dst, skip)?;
        } else if kind.is_file() {
            fs::copy(&src, &dst)?;
            keep_owner(&dst, &meta);
            fs::set_permissions(&dst, meta.permissions())?;
        } else if is_whiteout(&meta) {
            let _ = fs::remove_file(&dst);
            make_whiteout(&dst)?;
            keep_owner(&dst, &meta);
        }
    }
    Ok(())
}

/// Gives `dst` the owner of `meta` (only root can, and only root needs to).
fn keep_owner(dst: &Path, meta: &fs::Metadata) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let _ = std::os::unix::fs::lchown(dst, Some(meta.uid()), Some(meta.gid()));
    }
}

#[cfg(target_os = "linux")]
fn is_whiteout(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    meta.file_type().is_char_device() && meta.rdev() == 0
}

#[cfg(not(target_os = "linux"))]
fn is_whiteout(_meta: &fs::Metadata) -> bool {
    false
}

#[cfg(target_os = "linux")]
fn make_whiteout(dst: &Path) -> io::Result<()> {
    use nix::sys::stat::{mknod, Mode, SFlag};
    Ok(mknod(dst, SFlag::S_IFCHR, Mode::empty(), 0)?)
}

#[cfg(not(target_os = "linux"))]
fn make_whiteout(_dst: &Path) -> io::Result<()> {
    Ok(())
}

/// Copies overlayfs' "opaque directory" mark.
#[cfg(target_os = "linux")]
fn copy_opaque_mark(from: &Path, to: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let (Ok(src), Ok(dst)) = (
        std::ffi::CString::new(from.as_os_str().as_bytes()),
        std::ffi::CString::new(to.as_os_str().as_bytes()),
    ) else {
        return;
    };
    let name = c"trusted.overlay.opaque";
    let mut value = [0u8; 8];
    // SAFETY: valid NUL-terminated paths and a buffer of the given size.
    unsafe {
        let len = nix::libc::lgetxattr(
            src.as_ptr(),
            name.as_ptr(),
            value.as_mut_ptr().cast(),
            value.len(),
        );
        if len > 0 {
            nix::libc::lsetxattr(
                dst.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                len as usize,
                0,
            );
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn copy_opaque_mark(_from: &Path, _to: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_files_dirs_and_symlinks() {
        let base =
            std::env::temp_dir().join(format!("cos-mock-fsutil-{}", crate::ids::random_token(8)));
        let src = base.join("src");
        fs::create_dir_all(src.join("a/b")).unwrap();
        fs::write(src.join("a/b/f.txt"), b"hello").unwrap();
        std::os::unix::fs::symlink("a/b/f.txt", src.join("link")).unwrap();
        fs::create_dir_all(src.join("skipme")).unwrap();
        copy_tree(&src, &base.join("dst"), &[src.join("skipme")]).unwrap();
        assert!(!base.join("dst/skipme").exists());
        assert_eq!(fs::read(base.join("dst/a/b/f.txt")).unwrap(), b"hello");
        assert_eq!(
            fs::read_link(base.join("dst/link")).unwrap(),
            Path::new("a/b/f.txt")
        );
        fs::remove_dir_all(&base).unwrap();
    }
}
