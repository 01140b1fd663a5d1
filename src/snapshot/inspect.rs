//! Looking at each surviving name on disk: its kind, size, mode and mtime, the directories it
//! implies, and the names that cannot be archived (missing, special files, or reached through
//! a symlinked directory — following one could read outside the project).

use std::collections::{BTreeMap, HashMap};
use std::fs::Metadata;
use std::path::Path;

use super::relpath::{ancestors, join, to_path};
use super::types::{DropReason, Entry, EntryKind};
use crate::error::Error;

/// Entries found on disk.
pub(crate) struct Inspected {
    /// Files and symlinks, in input order, each with its raw name and its identity on disk.
    pub entries: Vec<(Vec<u8>, Entry, FileId)>,
    /// Directories implied by the entries, keyed by raw name (sorted).
    pub dirs: BTreeMap<Vec<u8>, Entry>,
    pub dropped: Vec<(Vec<u8>, DropReason)>,
}

/// Which file a name pointed to at the scan (device and inode), so writing the archive can
/// tell a file replaced since then (say, by an editor's save-by-rename) from the scanned one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    #[cfg(unix)]
    pub(crate) fn of(meta: &Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId { dev: meta.dev(), ino: meta.ino() }
    }

    /// Without inode numbers every file looks the same: only kind and size are checked.
    #[cfg(not(unix))]
    pub(crate) fn of(_: &Metadata) -> FileId {
        FileId { dev: 0, ino: 0 }
    }
}

/// What an ancestor directory turned out to be.
enum Ancestor {
    Dir(Entry),
    Symlink,
    Missing,
    NotDir,
}

pub(crate) fn inspect(root: &Path, names: Vec<Vec<u8>>) -> Result<Inspected, Error> {
    let mut ancestors_seen: HashMap<Vec<u8>, Ancestor> = HashMap::new();
    let mut out = Inspected { entries: Vec::new(), dirs: BTreeMap::new(), dropped: Vec::new() };

    for name in names {
        if let Some(reason) = blocked_by_ancestor(root, &name, &mut ancestors_seen)? {
            out.dropped.push((name, reason));
            continue;
        }

        let path = join(root, &name);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                out.dropped.push((name, DropReason::Missing));
                continue;
            }
            Err(e) => return Err(Error::io(format!("cannot read {}", path.display()), e)),
        };
        let file_type = meta.file_type();
        let kind = if file_type.is_file() {
            EntryKind::File
        } else if file_type.is_symlink() {
            let target = std::fs::read_link(&path)
                .map_err(|e| Error::io(format!("cannot read the link {}", path.display()), e))?;
            EntryKind::Symlink { target }
        } else {
            out.dropped.push((name, DropReason::Unsupported(special_kind(&meta))));
            continue;
        };
        for parent in ancestors(&name) {
            if let Some(Ancestor::Dir(dir)) = ancestors_seen.get(parent) {
                out.dirs.entry(parent.to_vec()).or_insert_with(|| dir.clone());
            }
        }
        let entry = entry_from(&name, kind, &meta);
        out.entries.push((name, entry, FileId::of(&meta)));
    }
    Ok(out)
}

/// Why a parent directory of `name` keeps it out, if one does (results cached per directory).
fn blocked_by_ancestor(
    root: &Path,
    name: &[u8],
    seen: &mut HashMap<Vec<u8>, Ancestor>,
) -> Result<Option<DropReason>, Error> {
    for parent in ancestors(name) {
        let state = match seen.get(parent) {
            Some(state) => state,
            None => seen.entry(parent.to_vec()).or_insert(look_at_ancestor(root, parent)?),
        };
        match state {
            Ancestor::Dir(_) => {}
            Ancestor::Symlink => return Ok(Some(DropReason::Escapes("a parent directory is a symlink"))),
            Ancestor::Missing | Ancestor::NotDir => return Ok(Some(DropReason::Missing)),
        }
    }
    Ok(None)
}

fn look_at_ancestor(root: &Path, name: &[u8]) -> Result<Ancestor, Error> {
    let path = join(root, name);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_symlink() => Ok(Ancestor::Symlink),
        Ok(meta) if meta.is_dir() => Ok(Ancestor::Dir(entry_from(name, EntryKind::Directory, &meta))),
        Ok(_) => Ok(Ancestor::NotDir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Ancestor::Missing),
        Err(e) => Err(Error::io(format!("cannot read {}", path.display()), e)),
    }
}

fn entry_from(name: &[u8], kind: EntryKind, meta: &Metadata) -> Entry {
    let size = if matches!(kind, EntryKind::File) { meta.len() } else { 0 };
    Entry { path: to_path(name), kind, size, mode: mode_of(meta), mtime: mtime_of(meta) }
}

#[cfg(unix)]
fn mode_of(meta: &Metadata) -> u32 {
    use std::os::unix::fs::MetadataExt;
    meta.mode() & 0o7777
}

#[cfg(not(unix))]
fn mode_of(meta: &Metadata) -> u32 {
    if meta.is_dir() {
        0o755
    } else if meta.permissions().readonly() {
        0o444
    } else {
        0o644
    }
}

/// Whole seconds since the epoch; times before 1970 (or unreadable) become 0.
fn mtime_of(meta: &Metadata) -> u64 {
    meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_secs())
}

#[cfg(unix)]
fn special_kind(meta: &Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "fifo"
    } else if t.is_socket() {
        "socket"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_char_device() {
        "character device"
    } else {
        "unknown file type"
    }
}

#[cfg(not(unix))]
fn special_kind(meta: &Metadata) -> &'static str {
    if meta.is_dir() {
        "directory"
    } else {
        "unknown file type"
    }
}
