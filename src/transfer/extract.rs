//! Unpacking a downloaded archive on this machine, safely: into a fresh temporary directory
//! next to the destination, then moved into place.
//!
//! Every name is checked (no absolute path, no `..`, no NUL); nothing is written through a
//! symlink (a path whose parent is a link from the archive is refused); hard links are copied
//! from a file already unpacked; devices, fifos and other special entries are skipped and
//! counted. Placing merges into an existing directory: files and links replace files and
//! links, a directory never replaces a file (or the reverse), and the walk of the destination
//! never follows a symlink out of it.

use std::fs;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use tar::EntryType;

use crate::error::{Error, Result};

/// What an unpacking produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unpacked {
    /// Regular files (including copied hard links).
    pub files: u64,
    /// Symlinks.
    pub symlinks: u64,
    /// Special entries left out (devices, fifos, …).
    pub skipped: u64,
}

/// A directory removed (recursively) when dropped unless kept.
#[derive(Debug)]
pub struct Staging {
    path: Option<PathBuf>,
}

impl Staging {
    /// A new, empty directory next to `dest` (same file system, so placing is a rename).
    pub fn next_to(dest: &Path) -> Result<Staging> {
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let path = parent.join(format!(".{name}.cos-incoming-{:016x}", rand::random::<u64>()));
        fs::create_dir(&path).map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        Ok(Staging { path: Some(path) })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        self.path.as_deref().unwrap_or(Path::new(""))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            let _ = fs::remove_dir_all(&path);
        }
    }
}

/// The checked relative path of an archive name; `None` for the archive root (`.`).
pub fn safe_name(raw: &[u8]) -> Result<Option<PathBuf>> {
    let bad = |why: &str| Error::invalid("archive", format!("refusing entry {:?}: {why}", String::from_utf8_lossy(raw)));
    if raw.contains(&0) {
        return Err(bad("NUL byte in the name"));
    }
    if raw.starts_with(b"/") {
        return Err(bad("absolute path"));
    }
    let text = std::str::from_utf8(raw).map(str::to_owned);
    let path = match text {
        Ok(t) => PathBuf::from(t),
        Err(_) => {
            use std::os::unix::ffi::OsStrExt;
            PathBuf::from(std::ffi::OsStr::from_bytes(raw))
        }
    };
    let mut clean = PathBuf::new();
    for part in path.components() {
        match part {
            Component::Normal(p) => clean.push(p),
            Component::CurDir => {}
            Component::ParentDir => return Err(bad("`..` component")),
            Component::RootDir | Component::Prefix(_) => return Err(bad("absolute path")),
        }
    }
    Ok((!clean.as_os_str().is_empty()).then_some(clean))
}

/// Create the parents of `rel` inside `root`, refusing any that is a symlink or not a directory.
fn prepare_parents(root: &Path, rel: &Path) -> Result<()> {
    let mut at = root.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(part);
        match fs::symlink_metadata(&at) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(Error::invalid(
                    "archive",
                    format!("refusing {}: {} is not a directory (links are never followed)", rel.display(), at.display()),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir(&at).map_err(|e| Error::io(format!("creating {}", at.display()), e))?;
            }
            Err(e) => return Err(Error::io(format!("reading {}", at.display()), e)),
        }
    }
    Ok(())
}

/// Remove whatever non-directory stands at `path` (so a new entry replaces it, never writes
/// through it); a directory there is an error.
fn clear_spot(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            Err(Error::invalid("archive", format!("{} is a directory; it would be replaced by a file", path.display())))
        }
        Ok(_) => fs::remove_file(path).map_err(|e| Error::io(format!("replacing {}", path.display()), e)),
        Err(_) => Ok(()),
    }
}

/// Unpack the tar read from `archive` into the (empty) directory `into`. Blocking.
pub fn unpack(archive: impl Read, into: &Path) -> Result<Unpacked> {
    let mut tar = tar::Archive::new(archive);
    tar.set_preserve_mtime(true);
    tar.set_preserve_permissions(false);
    tar.set_unpack_xattrs(false);
    tar.set_overwrite(true);
    let mut done = Unpacked::default();
    let entries = tar.entries().map_err(|e| Error::io("reading the archive", e))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| Error::io("reading the archive", e))?;
        let raw = entry.path_bytes().into_owned();
        let Some(rel) = safe_name(&raw)? else { continue };
        let full = into.join(&rel);
        let kind = entry.header().entry_type();
        match kind {
            EntryType::Directory => {
                prepare_parents(into, &rel)?;
                match fs::symlink_metadata(&full) {
                    Ok(meta) if meta.is_dir() => {}
                    Ok(_) => return Err(Error::invalid("archive", format!("{} is both a file and a directory", rel.display()))),
                    Err(_) => fs::create_dir(&full).map_err(|e| Error::io(format!("creating {}", full.display()), e))?,
                }
            }
            EntryType::Regular | EntryType::Continuous | EntryType::Symlink => {
                prepare_parents(into, &rel)?;
                clear_spot(&full)?;
                entry.unpack(&full).map_err(|e| Error::io(format!("unpacking {}", rel.display()), e))?;
                if kind == EntryType::Symlink {
                    done.symlinks += 1;
                } else {
                    done.files += 1;
                }
            }
            EntryType::Link => {
                let source = entry
                    .link_name_bytes()
                    .map(|b| b.into_owned())
                    .ok_or_else(|| Error::invalid("archive", format!("hard link {} has no target", rel.display())))?;
                let source = safe_name(&source)?
                    .ok_or_else(|| Error::invalid("archive", format!("hard link {} points at the root", rel.display())))?;
                let from = into.join(&source);
                let meta = fs::symlink_metadata(&from)
                    .map_err(|e| Error::io(format!("hard link {} to {}", rel.display(), source.display()), e))?;
                if !meta.is_file() {
                    return Err(Error::invalid("archive", format!("hard link {} is not to a regular file", rel.display())));
                }
                prepare_parents(into, &rel)?;
                clear_spot(&full)?;
                fs::copy(&from, &full).map_err(|e| Error::io(format!("copying {}", source.display()), e))?;
                done.files += 1;
            }
            _ => done.skipped += 1,
        }
    }
    Ok(done)
}

/// Move everything staged under `from` into `dest`: a missing `dest` is simply renamed into
/// place; an existing directory is merged into (see the module docs).
pub fn place(from: &Path, dest: &Path) -> Result<()> {
    match fs::symlink_metadata(dest) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return fs::rename(from, dest).map_err(|e| Error::io(format!("moving into {}", dest.display()), e));
        }
        Err(e) => return Err(Error::io(format!("reading {}", dest.display()), e)),
        Ok(_) => {}
    }
    // the destination itself may be a link the user chose; below it nothing is followed
    if !dest.is_dir() {
        return Err(Error::invalid("destination", format!("{} exists and is not a directory", dest.display())));
    }
    merge(from, dest)
}

fn merge(from: &Path, dest: &Path) -> Result<()> {
    let listing = fs::read_dir(from).map_err(|e| Error::io(format!("reading {}", from.display()), e))?;
    for item in listing {
        let item = item.map_err(|e| Error::io(format!("reading {}", from.display()), e))?;
        let source = item.path();
        let target = dest.join(item.file_name());
        let kind = item.file_type().map_err(|e| Error::io(format!("reading {}", source.display()), e))?;
        let existing = fs::symlink_metadata(&target).ok();
        match (kind.is_dir(), existing) {
            (_, None) => fs::rename(&source, &target).map_err(|e| Error::io(format!("moving {}", target.display()), e))?,
            (true, Some(meta)) if meta.is_dir() => merge(&source, &target)?,
            (true, Some(_)) => {
                return Err(Error::invalid(
                    "destination",
                    format!("{} exists and is not a directory; not replacing it", target.display()),
                ))
            }
            (false, Some(meta)) if meta.is_dir() => {
                return Err(Error::invalid(
                    "destination",
                    format!("{} is a directory; not replacing it with a file", target.display()),
                ))
            }
            (false, Some(_)) => {
                fs::rename(&source, &target).map_err(|e| Error::io(format!("replacing {}", target.display()), e))?
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert_eq!(safe_name(b"./a/b").unwrap(), Some(PathBuf::from("a/b")));
        assert_eq!(safe_name(b"./").unwrap(), None);
        assert!(safe_name(b"/etc/passwd").is_err());
        assert!(safe_name(b"a/../../x").is_err());
        assert!(safe_name(b"a\0b").is_err());
    }

    fn tar_with(entries: &[(&str, EntryType, &str)]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, kind, data) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(*kind);
            header.set_mode(0o644);
            if *kind == EntryType::Symlink {
                header.set_size(0);
                builder.append_link(&mut header, name, data).unwrap();
            } else {
                header.set_size(data.len() as u64);
                builder.append_data(&mut header, name, data.as_bytes()).unwrap();
            }
        }
        builder.into_inner().unwrap()
    }

    #[test]
    fn nothing_is_written_through_a_link() {
        let tmp = tempfile::TempDir::new().unwrap();
        let outside = tmp.path().join("outside");
        fs::create_dir(&outside).unwrap();
        let into = tmp.path().join("in");
        fs::create_dir(&into).unwrap();
        let archive = tar_with(&[
            ("link", EntryType::Symlink, outside.to_str().unwrap()),
            ("link/evil", EntryType::Regular, "x"),
        ]);
        assert!(unpack(&archive[..], &into).is_err());
        assert!(!outside.join("evil").exists());
        // a later file replaces a link instead of writing through it
        let into2 = tmp.path().join("in2");
        fs::create_dir(&into2).unwrap();
        let target = outside.join("t");
        fs::write(&target, "keep").unwrap();
        let archive = tar_with(&[("f", EntryType::Symlink, target.to_str().unwrap()), ("f", EntryType::Regular, "new")]);
        unpack(&archive[..], &into2).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep");
        assert_eq!(fs::read_to_string(into2.join("f")).unwrap(), "new");
    }

    #[test]
    fn merge_replaces_files_and_keeps_others() {
        let tmp = tempfile::TempDir::new().unwrap();
        let dest = tmp.path().join("dest");
        fs::create_dir_all(dest.join("sub")).unwrap();
        fs::write(dest.join("sub/old"), "old").unwrap();
        fs::write(dest.join("top"), "old").unwrap();
        let staged = Staging::next_to(&dest).unwrap();
        let archive = tar_with(&[("sub/new", EntryType::Regular, "n"), ("top", EntryType::Regular, "t")]);
        unpack(&archive[..], staged.path()).unwrap();
        place(staged.path(), &dest).unwrap();
        assert_eq!(fs::read_to_string(dest.join("sub/old")).unwrap(), "old");
        assert_eq!(fs::read_to_string(dest.join("sub/new")).unwrap(), "n");
        assert_eq!(fs::read_to_string(dest.join("top")).unwrap(), "t");
    }
}
