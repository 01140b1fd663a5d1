//! Looking at each surviving name on disk: its kind, size, mode and mtime, the directories it
//! implies, and the names that cannot be archived (missing, special files, or reached through
//! a symlinked directory — following one could read outside the project).

use std::collections::{BTreeMap, HashMap};
use std::fs::Metadata;
use std::path::{Path, PathBuf};

use super::relpath::{ancestors, join, push_name, to_path};
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
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        }
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

/// Below this many names one thread looks at them all (starting threads would cost more).
const PARALLEL_MIN: usize = 512;

/// What one name turned out to be.
enum Found {
    /// A regular file or a symlink (the target read), and which file it is.
    Entry(Entry, FileId),
    /// Left out: missing, a special file, or behind a parent that keeps it out.
    Dropped(DropReason),
}

pub(crate) fn inspect(root: &Path, names: Vec<Vec<u8>>) -> Result<Inspected, Error> {
    // Parent directories first, one thread: a few hundred at most, each looked at once. A
    // failure there ends the scan at that name, as the sequential order would.
    let mut ancestors_seen: HashMap<Vec<u8>, Ancestor> = HashMap::new();
    let mut blocked: Vec<Option<DropReason>> = Vec::with_capacity(names.len());
    let mut ancestor_error = None;
    // names come sorted, so neighbours mostly share their directory: its verdict is reused
    let mut last: Option<(&[u8], Option<DropReason>)> = None;
    for name in &names {
        let dir = parent(name);
        if let Some((last_dir, reason)) = &last {
            if *last_dir == dir {
                blocked.push(reason.clone());
                continue;
            }
        }
        match blocked_by_ancestor(root, name, &mut ancestors_seen) {
            Ok(reason) => {
                last = Some((dir, reason.clone()));
                blocked.push(reason);
            }
            Err(e) => {
                ancestor_error = Some(e);
                break;
            }
        }
    }

    // Then the names themselves, spread over a few threads (nearly all of it is `lstat`).
    let found = look_all(root, &names[..blocked.len()], blocked);

    let mut out = Inspected {
        entries: Vec::with_capacity(found.len()),
        dirs: BTreeMap::new(),
        dropped: Vec::new(),
    };
    let mut last_dir: Option<Vec<u8>> = None;
    for (name, found) in names.into_iter().zip(found) {
        let (entry, id) = match found? {
            Found::Entry(entry, id) => (entry, id),
            Found::Dropped(reason) => {
                out.dropped.push((name, reason));
                continue;
            }
        };
        // the directories of the previous entry's directory are in already
        if last_dir.as_deref() != Some(parent(&name)) {
            for ancestor in ancestors(&name) {
                if let Some(Ancestor::Dir(dir)) = ancestors_seen.get(ancestor) {
                    if !out.dirs.contains_key(ancestor) {
                        out.dirs.insert(ancestor.to_vec(), dir.clone());
                    }
                }
            }
            last_dir = Some(parent(&name).to_vec());
        }
        out.entries.push((name, entry, id));
    }
    match ancestor_error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Look at every name (`lstat`, and `readlink` for links) that no parent keeps out, on up to
/// one thread per core; the results in the order of `names`.
fn look_all(
    root: &Path,
    names: &[Vec<u8>],
    blocked: Vec<Option<DropReason>>,
) -> Vec<Result<Found, Error>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    if threads == 1 || names.len() < PARALLEL_MIN {
        return look_some(root, names, blocked);
    }
    let per_thread = names.len().div_ceil(threads);
    let mut blocked = blocked.into_iter();
    std::thread::scope(|scope| {
        let handles: Vec<_> = names
            .chunks(per_thread)
            .map(|names| {
                let blocked: Vec<Option<DropReason>> = blocked.by_ref().take(names.len()).collect();
                scope.spawn(move || look_some(root, names, blocked))
            })
            .collect();
        let mut all = Vec::with_capacity(names.len());
        for handle in handles {
            match handle.join() {
                Ok(part) => all.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        all
    })
}

fn look_some(
    root: &Path,
    names: &[Vec<u8>],
    blocked: Vec<Option<DropReason>>,
) -> Vec<Result<Found, Error>> {
    let mut path = PathBuf::new();
    names
        .iter()
        .zip(blocked)
        .map(|(name, blocked)| match blocked {
            Some(reason) => Ok(Found::Dropped(reason)),
            None => {
                path.clear();
                path.push(root);
                push_name(&mut path, name);
                look(&path, name)
            }
        })
        .collect()
}

/// What `path` (the file of `name`) is, without following a final symlink.
fn look(path: &Path, name: &[u8]) -> Result<Found, Error> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Found::Dropped(DropReason::Missing))
        }
        Err(e) => return Err(Error::io(format!("cannot read {}", path.display()), e)),
    };
    let file_type = meta.file_type();
    let kind = if file_type.is_file() {
        EntryKind::File
    } else if file_type.is_symlink() {
        let target = std::fs::read_link(path)
            .map_err(|e| Error::io(format!("cannot read the link {}", path.display()), e))?;
        EntryKind::Symlink { target }
    } else {
        return Ok(Found::Dropped(DropReason::Unsupported(special_kind(&meta))));
    };
    Ok(Found::Entry(
        entry_from(name, kind, &meta),
        FileId::of(&meta),
    ))
}

/// The directory part of `name` (empty at the top level).
fn parent(name: &[u8]) -> &[u8] {
    match name.iter().rposition(|b| *b == b'/') {
        Some(i) => &name[..i],
        None => &name[..0],
    }
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
            None => seen
                .entry(parent.to_vec())
                .or_insert(look_at_ancestor(root, parent)?),
        };
        match state {
            Ancestor::Dir(_) => {}
            Ancestor::Symlink => {
                return Ok(Some(DropReason::Escapes("a parent directory is a symlink")))
            }
            Ancestor::Missing | Ancestor::NotDir => return Ok(Some(DropReason::Missing)),
        }
    }
    Ok(None)
}

fn look_at_ancestor(root: &Path, name: &[u8]) -> Result<Ancestor, Error> {
    let path = join(root, name);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_symlink() => Ok(Ancestor::Symlink),
        Ok(meta) if meta.is_dir() => {
            Ok(Ancestor::Dir(entry_from(name, EntryKind::Directory, &meta)))
        }
        Ok(_) => Ok(Ancestor::NotDir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Ancestor::Missing),
        Err(e) => Err(Error::io(format!("cannot read {}", path.display()), e)),
    }
}

fn entry_from(name: &[u8], kind: EntryKind, meta: &Metadata) -> Entry {
    let size = if matches!(kind, EntryKind::File) {
        meta.len()
    } else {
        0
    };
    Entry {
        path: to_path(name),
        kind,
        size,
        mode: mode_of(meta),
        mtime: mtime_of(meta),
    }
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
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs())
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
