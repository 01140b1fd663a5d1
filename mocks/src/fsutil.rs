//! Filesystem helpers: recursive copy (fork) that keeps symlinks and permissions.

use std::fs;
use std::io;
use std::path::Path;

/// Copies the tree `from` into `to` (created if missing). Symlinks are recreated, not
/// followed; sockets, FIFOs, devices and the paths in `skip` are left out.
pub fn copy_tree(from: &Path, to: &Path, skip: &[std::path::PathBuf]) -> io::Result<()> {
    fs::create_dir_all(to)?;
    if let Ok(meta) = fs::metadata(from) {
        let _ = fs::set_permissions(to, meta.permissions());
    }
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let src = entry.path();
        if skip.iter().any(|s| s == &src) {
            continue;
        }
        let dst = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            let target = fs::read_link(&src)?;
            let _ = fs::remove_file(&dst);
            std::os::unix::fs::symlink(target, &dst)?;
        } else if kind.is_dir() {
            copy_tree(&src, &dst, skip)?;
        } else if kind.is_file() {
            fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_files_dirs_and_symlinks() {
        let base = std::env::temp_dir().join(format!("cos-mock-fsutil-{}", crate::ids::random_token(8)));
        let src = base.join("src");
        fs::create_dir_all(src.join("a/b")).unwrap();
        fs::write(src.join("a/b/f.txt"), b"hello").unwrap();
        std::os::unix::fs::symlink("a/b/f.txt", src.join("link")).unwrap();
        fs::create_dir_all(src.join("skipme")).unwrap();
        copy_tree(&src, &base.join("dst"), &[src.join("skipme")]).unwrap();
        assert!(!base.join("dst/skipme").exists());
        assert_eq!(fs::read(base.join("dst/a/b/f.txt")).unwrap(), b"hello");
        assert_eq!(fs::read_link(base.join("dst/link")).unwrap(), Path::new("a/b/f.txt"));
        fs::remove_dir_all(&base).unwrap();
    }
}
