//! Writing the tar archive from exactly the scanned list.
//!
//! Every entry gets an explicit GNU header (a `tar::Header`) laid out here, with no recursion
//! into directories, so no unlisted file can slip in: directories implied by the files come first with their own
//! modes, then the files and symlinks. Names or link targets longer than the 100-byte header
//! fields get a GNU long-name (`L`) / long-link (`K`) entry before them, which GNU tar and
//! bsdtar both read. Owners are uid/gid 0 with empty user and group names; modes and mtimes
//! are the scanned ones, so writing the same snapshot twice gives the same bytes.
//!
//! File contents are read now, ahead of the writer on reader threads (`prefetch`), which also
//! lay out the entries' bytes. Each file is opened once (`O_NOFOLLOW | O_NONBLOCK`) and judged
//! through that handle: one whose size differs from the scan, which grows or shrinks while it
//! is read, or which is no longer the scanned file (another inode, a symlink, a fifo) aborts
//! the archive with an error. After such an error nothing more is written (not even the
//! end-of-archive blocks or the gzip trailer), so a partial output can never pass for a
//! complete archive.

use std::cell::Cell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use tar::{EntryType, Header};

use super::gzip::{self, ParallelGzip};
use super::inspect::FileId;
use super::prefetch::{self, Part, Prefetched};
use super::relpath::{ancestors, display, path_bytes};
use super::types::{Compression, Entry, EntryKind};
use crate::error::Error;

const BLOCK: u64 = 512;
/// Size of the name and linkname fields of a tar header.
const NAME_FIELD: usize = 100;

/// What the archive holds, in the order it is written.
#[derive(Debug)]
pub(crate) struct Plan {
    pub root: PathBuf,
    pub files: Vec<Entry>,
    pub dirs: Vec<Entry>,
    /// The identity each of `files` had at the scan (same index).
    ids: Vec<FileId>,
    order: Vec<Item>,
}

#[derive(Debug, Clone, Copy)]
enum Item {
    Dir(usize),
    File(usize),
}

impl Plan {
    /// `files` sorted by name, with the identity each had at the scan (`ids`, same order);
    /// `dirs` must hold every ancestor of every file.
    pub(crate) fn new(root: PathBuf, files: Vec<(Entry, FileId)>, dirs: Vec<Entry>) -> Self {
        let (files, ids): (Vec<Entry>, Vec<FileId>) = files.into_iter().unzip();
        let dir_index: HashMap<&[u8], usize> = dirs
            .iter()
            .enumerate()
            .map(|(i, d)| (raw_name(&d.path), i))
            .collect();
        let mut emitted = vec![false; dirs.len()];
        let mut order = Vec::with_capacity(files.len() + dirs.len());
        // sorted files mostly share their directory with the one before: nothing new to emit
        let mut last_dir: &[u8] = b"";
        for (i, file) in files.iter().enumerate() {
            let name = raw_name(&file.path);
            let dir = name
                .iter()
                .rposition(|b| *b == b'/')
                .map_or(&name[..0], |end| &name[..end]);
            if i == 0 || dir != last_dir {
                for parent in ancestors(name) {
                    if let Some(&d) = dir_index.get(parent) {
                        if !emitted[d] {
                            emitted[d] = true;
                            order.push(Item::Dir(d));
                        }
                    }
                }
                last_dir = dir;
            }
            order.push(Item::File(i));
        }
        drop(dir_index);
        Plan {
            root,
            files,
            dirs,
            ids,
            order,
        }
    }

    /// The item at `index` of the archive order (panics when out of range: callers take
    /// indexes from [`items_with_ids`](Self::items_with_ids)).
    pub(crate) fn item(&self, index: usize) -> (&Entry, Option<FileId>) {
        match self.order[index] {
            Item::Dir(i) => (&self.dirs[i], None),
            Item::File(i) => (&self.files[i], self.ids.get(i).copied()),
        }
    }

    fn items(&self) -> impl Iterator<Item = &Entry> {
        self.items_with_ids().map(|(entry, _)| entry)
    }

    /// The entries in archive order; files come with their identity at the scan.
    pub(crate) fn items_with_ids(&self) -> impl Iterator<Item = (&Entry, Option<FileId>)> {
        (0..self.order.len()).map(|i| self.item(i))
    }

    /// The exact length of the uncompressed archive [`write`] produces.
    pub(crate) fn tar_size(&self) -> u64 {
        let entries: u64 = self
            .items()
            .map(|e| entry_len(tar_name_len(e), link_target(e).map(<[u8]>::len), e.size))
            .sum();
        entries + 2 * BLOCK
    }
}

/// Bytes of one entry: its header, any long-name/long-link entries, and the padded data.
/// (Lengths of the name as archived and of the link target.)
fn entry_len(name_len: usize, target_len: Option<usize>, size: u64) -> u64 {
    let long = |len: usize| {
        if len > NAME_FIELD {
            BLOCK + padded(len as u64 + 1)
        } else {
            0
        }
    };
    BLOCK + padded(size) + long(name_len) + target_len.map_or(0, long)
}

pub(crate) fn padded(len: u64) -> u64 {
    len.div_ceil(BLOCK) * BLOCK
}

/// The raw bytes of an entry path (built from bytes on Unix, so always representable).
pub(crate) fn raw_name(path: &Path) -> &[u8] {
    path_bytes(path).unwrap_or_default()
}

/// The length of the name as stored in the archive: directories end with `/`.
fn tar_name_len(entry: &Entry) -> usize {
    raw_name(&entry.path).len() + usize::from(entry.kind == EntryKind::Directory)
}

fn link_target(entry: &Entry) -> Option<&[u8]> {
    match &entry.kind {
        EntryKind::Symlink { target } => Some(raw_name(target)),
        _ => None,
    }
}

/// Failure flags shared by the writer chain.
#[derive(Default)]
struct Flags {
    /// Set on the first error: every later write is refused.
    aborted: Cell<bool>,
    /// The destination itself failed (as opposed to reading a project file).
    sink_failed: Cell<bool>,
}

/// The bottom of the writer chain: stops all output once the archive is aborted, so the tar
/// builder's and the gzip encoder's closing writes (run on drop) cannot complete a broken
/// archive.
struct Guarded<'a, W> {
    inner: W,
    flags: &'a Flags,
}

impl<W: Write> Write for Guarded<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.flags.aborted.get() {
            return Err(io::Error::other("the archive was aborted"));
        }
        self.inner
            .write(buf)
            .inspect_err(|_| self.flags.sink_failed.set(true))
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.flags.aborted.get() {
            return Err(io::Error::other("the archive was aborted"));
        }
        self.inner
            .flush()
            .inspect_err(|_| self.flags.sink_failed.set(true))
    }
}

/// Write the archive of `plan` into `out`; returns `out` once the archive is complete. Files
/// are read, and their entries laid out, ahead on reader threads (see
/// [`prefetch`](super::prefetch)); with gzip, deflate runs on worker threads too, and this
/// thread only moves finished bytes along.
pub(crate) fn write<W: Write>(plan: &Plan, out: W, compression: Compression) -> Result<W, Error> {
    let flags = Flags::default();
    let sink = Guarded {
        inner: out,
        flags: &flags,
    };
    let sink_error = |e: io::Error| Error::io("writing the archive", e);
    std::thread::scope(|scope| {
        let prefetched = prefetch::spawn(scope, plan, prefetch::readers_for(plan));
        match compression {
            Compression::None => Ok(write_entries(plan, prefetched, sink, &flags)?.inner),
            Compression::Gzip { level } => {
                let workers = gzip::default_workers();
                let jobs = gzip::spawn_workers(scope, workers, level);
                let gz = ParallelGzip::new(sink, jobs, workers, level);
                let gz = write_entries(plan, prefetched, gz, &flags)?;
                let sink = gz.finish().map_err(|e| {
                    flags.aborted.set(true);
                    sink_error(e)
                })?;
                Ok(sink.inner)
            }
        }
    })
}

/// Write every batch of `prefetched` in order, then the end-of-archive blocks. `prefetched`
/// is dropped on return, which stops the readers.
fn write_entries<W: Write>(
    plan: &Plan,
    mut prefetched: Prefetched,
    mut out: W,
    flags: &Flags,
) -> Result<W, Error> {
    let fail = |item: usize, e: io::Error| {
        // before `out` drops (a gzip encoder would try to finish its stream)
        flags.aborted.set(true);
        let context = if flags.sink_failed.get() {
            "writing the archive".to_string()
        } else {
            format!("archiving {}", display(raw_name(&plan.item(item).0.path)))
        };
        Error::io(context, e)
    };
    while let Some(batch) = prefetched.next() {
        for part in batch.parts {
            match part {
                Part::Bytes(bytes) => out.write_all(&bytes).map_err(|e| {
                    flags.aborted.set(true);
                    Error::io("writing the archive", e)
                })?,
                Part::Stream {
                    item,
                    mut reader,
                    size,
                } => {
                    io::copy(&mut reader, &mut out)
                        .and_then(|_| out.write_all(&ZEROS[..(padded(size) - size) as usize]))
                        .map_err(|e| fail(item, e))?;
                }
            }
        }
        if let Some((item, e)) = batch.failure {
            return Err(fail(item, e));
        }
    }
    drop(prefetched);
    out.write_all(&ZEROS[..2 * BLOCK as usize]).map_err(|e| {
        flags.aborted.set(true);
        Error::io("writing the archive", e)
    })?;
    Ok(out)
}

/// Zero bytes for padding and the end-of-archive blocks.
static ZEROS: [u8; 2 * BLOCK as usize] = [0; 2 * BLOCK as usize];

/// Bytes [`write_header`] appends for `entry`: its header and any long-name/long-link entries.
pub(crate) fn header_len(entry: &Entry) -> u64 {
    entry_len(tar_name_len(entry), link_target(entry).map(<[u8]>::len), 0)
}

/// Append the header of `entry` to `out`, after a GNU long-name (`L`) / long-link (`K`) entry
/// for a name or link target too long for its field. The content and its padding follow.
pub(crate) fn write_header(entry: &Entry, out: &mut Vec<u8>) {
    let raw = raw_name(&entry.path);
    let is_dir = entry.kind == EntryKind::Directory;
    let name_len = tar_name_len(entry);
    let target = link_target(entry);
    if name_len > NAME_FIELD {
        let mut name = Vec::with_capacity(name_len);
        name.extend_from_slice(raw);
        if is_dir {
            name.push(b'/');
        }
        write_long(out, EntryType::GNULongName, &name);
    }
    if let Some(target) = target.filter(|t| t.len() > NAME_FIELD) {
        write_long(out, EntryType::GNULongLink, target);
    }

    let mut header = blank_header();
    let fields = header.as_old_mut();
    copy_truncated(&mut fields.name, raw);
    if is_dir && raw.len() < NAME_FIELD {
        fields.name[raw.len()] = b'/';
    }
    if let Some(target) = target {
        copy_truncated(&mut fields.linkname, target);
    }
    header.set_entry_type(match entry.kind {
        EntryKind::File => EntryType::Regular,
        EntryKind::Symlink { .. } => EntryType::Symlink,
        EntryKind::Directory => EntryType::Directory,
    });
    finish_header(&mut header, entry.mode, entry.mtime, entry.size);
    out.extend_from_slice(header.as_bytes());
}

/// A GNU header with what every entry shares — owner and group 0, empty owner names — and
/// nothing else. Built once; each header starts as a copy.
fn blank_header() -> Header {
    static BLANK: std::sync::LazyLock<Header> = std::sync::LazyLock::new(|| {
        let mut header = Header::new_gnu();
        header.set_uid(0);
        header.set_gid(0);
        header
    });
    BLANK.clone()
}

/// Fill in mode, mtime and size, then the checksum: the bytes `tar::Header`'s setters write
/// (checked by a test), without the string formatting they do for every field, which showed
/// in profiles of large snapshots.
fn finish_header(header: &mut Header, mode: u32, mtime: u64, size: u64) {
    // past this the setters switch to GNU's binary number form: leave those rare values to them
    const OCTAL_LIMIT: u64 = 1 << 33;
    let fields = header.as_old_mut();
    octal_into(&mut fields.mode, u64::from(mode));
    if mtime < OCTAL_LIMIT {
        octal_into(&mut fields.mtime, mtime);
    } else {
        header.set_mtime(mtime);
    }
    if size < OCTAL_LIMIT {
        octal_into(&mut header.as_old_mut().size, size);
    } else {
        header.set_size(size);
    }
    // the checksum counts its own field as spaces
    let bytes = header.as_mut_bytes();
    bytes[CKSUM].fill(b' ');
    let sum: u64 = bytes.iter().map(|b| u64::from(*b)).sum();
    octal_into(&mut bytes[CKSUM], sum);
}

/// Where the checksum field lies in a header.
const CKSUM: std::ops::Range<usize> = 148..156;

/// `value` in octal, right-aligned and zero-padded, then a NUL, as tar's octal fields are
/// (digits that do not fit are dropped from the left, as the `tar` crate does).
fn octal_into(field: &mut [u8], mut value: u64) {
    if let Some((last, digits)) = field.split_last_mut() {
        *last = 0;
        for slot in digits.iter_mut().rev() {
            *slot = b'0' + (value & 7) as u8;
            value >>= 3;
        }
    }
}

/// Append zeros after `len` bytes of content, up to a whole block.
fn pad(out: &mut Vec<u8>, len: u64) {
    out.extend_from_slice(&ZEROS[..(padded(len) - len) as usize]);
}

/// A GNU `././@LongLink` entry holding a long name or link target (NUL-terminated).
fn write_long(out: &mut Vec<u8>, kind: EntryType, value: &[u8]) {
    let mut header = blank_header();
    copy_truncated(&mut header.as_old_mut().name, b"././@LongLink");
    header.set_entry_type(kind);
    finish_header(&mut header, 0o644, 0, value.len() as u64 + 1);
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(value);
    out.push(0);
    pad(out, value.len() as u64 + 1);
}

fn copy_truncated(field: &mut [u8], value: &[u8]) {
    let n = value.len().min(field.len());
    field[..n].copy_from_slice(&value[..n]);
}

/// Reads a file that must hold exactly `size` bytes, failing instead of producing a short or
/// long entry when it changes underneath.
pub(crate) struct ExactReader<R> {
    inner: R,
    expected: u64,
    remaining: u64,
}

/// Open `path` once and check, through the handle, that it is still the regular file of the
/// scan (`id`: not replaced, not swapped for a symlink) and still `size` bytes long.
pub(crate) fn open_checked(path: &Path, size: u64, id: Option<FileId>) -> io::Result<File> {
    let file = open_no_follow(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(io::Error::other(
            "it is no longer a regular file; scan again",
        ));
    }
    if id.is_some_and(|id| id != FileId::of(&meta)) {
        return Err(io::Error::other(
            "it was replaced since the scan; scan again",
        ));
    }
    if meta.len() != size {
        return Err(io::Error::other(format!(
            "its size changed since the scan ({size} -> {} bytes); scan again",
            meta.len()
        )));
    }
    Ok(file)
}

/// Open without following a final symlink, and without blocking should the name now be a
/// fifo (the non-blocking flag changes nothing for regular files).
#[cfg(unix)]
fn open_no_follow(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                io::Error::other("it is a symlink now; scan again")
            } else {
                e
            }
        })
}

#[cfg(not(unix))]
fn open_no_follow(path: &Path) -> io::Result<File> {
    if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(io::Error::other("it is a symlink now; scan again"));
    }
    File::open(path)
}

impl<R: Read> ExactReader<R> {
    pub(crate) fn new(inner: R, size: u64) -> Self {
        ExactReader {
            inner,
            expected: size,
            remaining: size,
        }
    }
}

impl<R: Read> Read for ExactReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.remaining == 0 {
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(io::Error::other(format!(
                    "it grew while being archived (more than the {} bytes scanned)",
                    self.expected
                ))),
            };
        }
        let want = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "it shrank while being archived ({} of {} bytes read)",
                    self.expected - self.remaining,
                    self.expected
                ),
            ));
        }
        self.remaining -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_reader_passes_the_right_length() {
        let mut out = Vec::new();
        ExactReader::new(&b"hello"[..], 5)
            .read_to_end(&mut out)
            .expect("exact length");
        assert_eq!(out, b"hello");
    }

    #[test]
    fn exact_reader_refuses_growth_and_shrinking() {
        let mut out = Vec::new();
        let grew = ExactReader::new(&b"hello!"[..], 5)
            .read_to_end(&mut out)
            .expect_err("grew");
        assert!(grew.to_string().contains("grew"), "{grew}");
        let shrank = ExactReader::new(&b"hell"[..], 5)
            .read_to_end(&mut Vec::new())
            .expect_err("shrank");
        assert!(shrank.to_string().contains("shrank"), "{shrank}");
    }

    #[test]
    fn headers_match_what_the_tar_crate_writes() {
        for (kind, mode, mtime, size) in [
            (EntryType::Regular, 0o644, 0, 0),
            (EntryType::Regular, 0o7777, 1_764_000_000, 4095),
            (EntryType::Directory, 0o755, 1, 0),
            (EntryType::Symlink, 0o777, (1 << 33) - 1, (1 << 33) - 1),
            (EntryType::Regular, 0o600, 1 << 33, 1 << 33),
            (EntryType::Regular, 0o640, u64::MAX, u64::MAX / 3),
        ] {
            let mut expected = Header::new_gnu();
            copy_truncated(&mut expected.as_old_mut().name, b"dir/file name");
            expected.set_entry_type(kind);
            expected.set_mode(mode);
            expected.set_uid(0);
            expected.set_gid(0);
            expected.set_mtime(mtime);
            expected.set_size(size);
            expected.set_cksum();

            let mut ours = blank_header();
            copy_truncated(&mut ours.as_old_mut().name, b"dir/file name");
            ours.set_entry_type(kind);
            finish_header(&mut ours, mode, mtime, size);
            assert_eq!(
                ours.as_bytes(),
                expected.as_bytes(),
                "mode {mode:o} mtime {mtime} size {size}"
            );
        }
    }

    #[test]
    fn entry_lengths_account_for_long_names() {
        assert_eq!(entry_len(1, None, 0), 512);
        assert_eq!(entry_len(1, None, 1), 1024);
        assert_eq!(entry_len(1, None, 512), 1024);
        assert_eq!(
            entry_len(100, None, 0),
            512,
            "100 bytes still fit the field"
        );
        assert_eq!(entry_len(101, None, 0), 512 + 512 + 512);
        assert_eq!(
            entry_len(600, Some(101), 0),
            512 + (512 + 1024) + (512 + 512)
        );
    }
}
