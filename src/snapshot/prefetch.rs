//! Reading the archive's files ahead of the tar writer, on a few threads.
//!
//! Opening, checking and reading thousands of small files is nearly all system calls, and
//! one thread doing them back to back leaves the other cores idle. Item `i` of the archive
//! order goes to reader `i % readers`; each reader works through its items in order and hands
//! them over through its own bounded channel, so the writer, taking one item from each reader
//! in turn, gets them back in archive order. A failure travels as that item's result: the
//! writer stops exactly where the sequential writer would, and everything after it is never
//! written. Small files are read whole; a large one is only opened and checked, and the writer
//! streams it, so memory stays bounded by `readers × DEPTH × SMALL_FILE`.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::mpsc::{self, Receiver};
use std::thread::Scope;

use super::archive::{open_checked, ExactReader, Plan};
use super::inspect::FileId;
use super::relpath::join;
use super::types::{Entry, EntryKind};

/// Files up to this size are read into memory by the readers.
const SMALL_FILE: u64 = 256 * 1024;
/// Items each reader may have ready before it waits for the writer.
const DEPTH: usize = 32;

/// An item of the archive, ready to be written.
pub(crate) enum Content {
    /// A directory, or a symlink whose target was checked: only a header.
    Header,
    /// A small file's bytes (exactly its scanned size).
    Bytes(Vec<u8>),
    /// A large file, opened and checked, to be streamed.
    Open(ExactReader<File>),
}

/// The reader threads' output, in archive order.
pub(crate) struct Prefetched {
    channels: Vec<Receiver<io::Result<Content>>>,
    next: usize,
}

impl Prefetched {
    /// The next item's content; `None` only if a reader ended early (it never does while the
    /// writer still wants items, unless it panicked).
    pub(crate) fn next(&mut self) -> io::Result<Content> {
        let channel = &self.channels[self.next % self.channels.len()];
        self.next += 1;
        channel.recv().unwrap_or_else(|_| Err(io::Error::other("a file reader thread stopped")))
    }
}

/// How many reader threads to use: one per core, at least two (so I/O waits overlap), at most
/// four.
pub(crate) fn default_readers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 4)
}

/// Start `readers` threads in `scope` that load the items of `plan`. They stop at their first
/// failure, or as soon as the writer drops the returned [`Prefetched`].
pub(crate) fn spawn<'scope, 'env>(scope: &'scope Scope<'scope, 'env>, plan: &'env Plan, readers: usize) -> Prefetched {
    let readers = readers.max(1);
    let mut channels = Vec::with_capacity(readers);
    for reader in 0..readers {
        let (tx, rx) = mpsc::sync_channel(DEPTH);
        channels.push(rx);
        scope.spawn(move || {
            for (_, (entry, id)) in plan.items_with_ids().enumerate().filter(|(i, _)| i % readers == reader) {
                let loaded = load(&plan.root, entry, id);
                let failed = loaded.is_err();
                if tx.send(loaded).is_err() || failed {
                    return;
                }
            }
        });
    }
    Prefetched { channels, next: 0 }
}

/// Open, check and (when small) read one item.
fn load(root: &Path, entry: &Entry, id: Option<FileId>) -> io::Result<Content> {
    let path = || join(root, super::archive::raw_name(&entry.path));
    match &entry.kind {
        EntryKind::Directory => Ok(Content::Header),
        EntryKind::Symlink { target } => {
            let now = std::fs::read_link(path())?;
            if &now != target {
                return Err(io::Error::other(format!(
                    "the symlink changed since the scan (now -> {}); scan again",
                    now.display()
                )));
            }
            Ok(Content::Header)
        }
        EntryKind::File => {
            let file = open_checked(&path(), entry.size, id)?;
            if entry.size > SMALL_FILE {
                return Ok(Content::Open(ExactReader::new(file, entry.size)));
            }
            // one byte more than expected tells growth from the exact size in the same reads
            let mut bytes = Vec::with_capacity(entry.size as usize + 1);
            file.take(entry.size + 1).read_to_end(&mut bytes)?;
            let got = bytes.len() as u64;
            if got > entry.size {
                return Err(io::Error::other(format!(
                    "it grew while being archived (more than the {} bytes scanned)",
                    entry.size
                )));
            }
            if got < entry.size {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("it shrank while being archived ({got} of {} bytes read)", entry.size),
                ));
            }
            Ok(Content::Bytes(bytes))
        }
    }
}
