//! `unpack`: the confined unpacker ([`crate::transfer::extract`]) on archives a hostile guest
//! could send, into a scratch directory that also holds a host file outside the destination.
//!
//! Input: `[flags][entry…]`. `flags` bit 0: the rest is a raw tar stream (mutations then hit
//! the tar reader); bit 1: the destination exists already, holding `.git/config`, `keep.txt`,
//! `sub/a.txt` and a symlink `out` to the outside directory; bit 2: the request names only the
//! entries whose kind byte has bit 7 set; bit 3: the first of those is asked for under the
//! name `<name>.copy`. An entry is `[kind][len][name][len][link target][mode: u16][len][data]`
//! (lengths one byte, names at most 100 bytes: written raw into the header, so they may hold
//! `..`, a leading `/`, NUL, newlines); kind (low 3 bits) 0 file, 1 directory, 2 symlink,
//! 3 hard link, 4 FIFO, 5 character device, 6 block device, 7 an unknown type.
//!
//! Properties, whatever the archive:
//! - nothing outside the destination changed: the outside directory holds its one file,
//!   unchanged, and no staging directory is left next to the destination;
//! - `.git/config` is unchanged, and no other path inside the destination is protected
//!   (VCS metadata, deny-list);
//! - every new symlink, resolved on the real file system (through other links), stays inside
//!   the destination; no new file has set-id bits, no special file exists; no file holds the
//!   outside file's content;
//! - with a request, every new file or symlink is one that was asked for;
//! - every refused entry is counted (`skipped == refused.len()`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::ops::Not;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use super::{show, Input};
use crate::transfer::{self, protect, Request};

const SECRET: &[u8] = b"host secret 8c1f";
const MAX_ENTRIES: usize = 64;

/// Check the `unpack` properties on one input (panics on a violation).
pub fn unpack(data: &[u8]) {
    let mut input = Input::new(data);
    let flags = input.byte();
    let mut requested: Vec<PathBuf> = Vec::new();
    let archive = if flags & 1 == 1 {
        input.rest().to_vec()
    } else {
        structured(&mut input, &mut requested)
    };

    let scratch = tempfile::Builder::new()
        .prefix("cos-fuzz-unpack-")
        .tempdir_in(scratch_base())
        .expect("scratch directory");
    let outside = scratch.path().join("outside");
    fs::create_dir(&outside).expect("outside");
    fs::write(outside.join("secret.txt"), SECRET).expect("secret");
    let dest = scratch.path().join("dest");
    if flags & 2 == 2 {
        fs::create_dir_all(dest.join(".git")).expect(".git");
        fs::create_dir_all(dest.join("sub")).expect("sub");
        fs::write(dest.join(".git/config"), "[core]\n").expect("config");
        fs::write(dest.join("keep.txt"), "keep").expect("keep");
        fs::write(dest.join("sub/a.txt"), "a").expect("a");
        std::os::unix::fs::symlink("../outside", dest.join("out")).expect("link");
    }
    let before = listing(&dest);
    let mut request = if flags & 4 == 4 {
        Request::only(&requested)
    } else {
        Request::all()
    };
    let mut asked: BTreeSet<PathBuf> = requested.iter().cloned().collect();
    if flags & 8 == 8 && flags & 4 == 4 {
        if let Some(first) = requested.first() {
            let copy = PathBuf::from(format!("{}.copy", first.display()));
            request = request.rename(first, &copy);
            asked.insert(copy);
        }
    }
    let context = || format!("input b\"{}\"", show(data));
    let result = transfer::extract(&archive[..], &dest, &request);

    let mut left: Vec<String> = fs::read_dir(scratch.path())
        .expect("scratch")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    left.retain(|n| n != "dest");
    assert_eq!(
        left,
        ["outside"],
        "something was left next to the destination ({})",
        context()
    );
    let outside_now = listing(&outside);
    assert_eq!(
        outside_now.len(),
        1,
        "the outside directory changed: {outside_now:?} ({})",
        context()
    );
    assert_eq!(
        fs::read(outside.join("secret.txt")).expect("secret"),
        SECRET,
        "the outside file changed ({})",
        context()
    );
    if flags & 2 == 2 {
        assert_eq!(
            fs::read(dest.join(".git/config")).expect(".git/config"),
            b"[core]\n",
            ".git/config changed ({})",
            context()
        );
    }
    if let Ok(done) = &result {
        assert_eq!(
            done.skipped,
            done.refused.len() as u64,
            "refusals are counted ({})",
            context()
        );
    }
    let real_dest = fs::canonicalize(&dest).ok();
    for (rel, meta) in listing(&dest) {
        if before.contains_key(&rel) {
            continue;
        }
        let what = || format!("{} ({})", rel.display(), context());
        let kind = meta.file_type();
        let name = rel.as_os_str().as_encoded_bytes();
        if kind.is_dir() {
            assert!(
                protect::protected_dir(name).is_none(),
                "a protected directory was created: {}",
                what()
            );
            continue;
        }
        assert!(
            protect::protected(name).is_none(),
            "a protected path was written: {}",
            what()
        );
        assert!(
            kind.is_file() || kind.is_symlink(),
            "a special file was created: {}",
            what()
        );
        if flags & 4 == 4 {
            assert!(
                asked.contains(&rel),
                "an entry nobody asked for was placed: {}",
                what()
            );
        }
        if kind.is_symlink() {
            let resolved = resolve(&dest.join(&rel));
            let inside = real_dest.as_ref().is_some_and(|d| resolved.starts_with(d));
            assert!(
                inside,
                "the symlink resolves to {} outside the destination: {}",
                resolved.display(),
                what()
            );
        } else {
            assert_eq!(
                meta.mode() & 0o7000,
                0,
                "set-id bits were written: {}",
                what()
            );
            let content = fs::read(dest.join(&rel)).expect("read");
            assert!(
                content.windows(SECRET.len()).all(|w| w != SECRET),
                "a host file was copied in: {}",
                what()
            );
        }
    }
}

/// Where scratch directories go: a memory file system when the system has one (`/dev/shm`),
/// since the property is about names and links, not disks (on a busy disk each unlink can cost
/// a millisecond); the temporary directory otherwise.
fn scratch_base() -> PathBuf {
    let shm = Path::new("/dev/shm");
    let writable = fs::metadata(shm).is_ok_and(|m| m.is_dir() && m.permissions().readonly().not());
    if writable {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// The archive the structured entries describe (names written raw into the headers).
fn structured(input: &mut Input<'_>, requested: &mut Vec<PathBuf>) -> Vec<u8> {
    let mut out = tar::Builder::new(Vec::new());
    for _ in 0..MAX_ENTRIES {
        if input.is_empty() {
            break;
        }
        let kind = input.byte();
        let len = usize::from(input.byte()).min(100);
        let name = input.bytes(len).to_vec();
        let len = usize::from(input.byte()).min(100);
        let target = input.bytes(len).to_vec();
        let mode = u32::from(input.u16());
        let len = usize::from(input.byte());
        let data = input.bytes(len).to_vec();
        if kind & 0x80 != 0 {
            if let Ok(Some(rel)) = transfer::safe_name(&name) {
                requested.push(rel);
            }
        }
        let entry_type = match kind & 7 {
            0 => tar::EntryType::Regular,
            1 => tar::EntryType::Directory,
            2 => tar::EntryType::Symlink,
            3 => tar::EntryType::Link,
            4 => tar::EntryType::Fifo,
            5 => tar::EntryType::Char,
            6 => tar::EntryType::Block,
            _ => tar::EntryType::new(b'Z'),
        };
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(entry_type);
        header.set_mode(mode);
        header.set_mtime(1_700_000_000);
        let size = if matches!(kind & 7, 0 | 7) {
            data.len()
        } else {
            0
        };
        header.set_size(size as u64);
        {
            let raw = header.as_old_mut();
            raw.name = [0; 100];
            raw.name[..name.len()].copy_from_slice(&name);
            raw.linkname = [0; 100];
            raw.linkname[..target.len()].copy_from_slice(&target);
        }
        header.set_cksum();
        out.append(&header, &data[..size])
            .expect("in-memory archive");
    }
    out.into_inner().expect("in-memory archive")
}

/// Everything below `root` (not following symlinks), relative path → metadata.
fn listing(root: &Path) -> BTreeMap<PathBuf, fs::Metadata> {
    let mut out = BTreeMap::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let Ok(entries) = fs::read_dir(root.join(&rel)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = rel.join(entry.file_name());
            let Ok(meta) = fs::symlink_metadata(root.join(&path)) else {
                continue;
            };
            if meta.is_dir() {
                todo.push(path.clone());
            }
            out.insert(path, meta);
        }
    }
    out
}

/// Where `path` leads on the real file system: every symlink on the way followed (at most 40),
/// missing components taken as they are.
fn resolve(path: &Path) -> PathBuf {
    let mut at = PathBuf::from("/");
    let mut todo: Vec<std::ffi::OsString> = path
        .components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    let mut hops = 0;
    while let Some(part) = todo.pop() {
        if part == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&part);
        match fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() && hops < 40 => {
                hops += 1;
                let target = fs::read_link(&next).unwrap_or_default();
                if target.is_absolute() {
                    at = PathBuf::from("/");
                }
                for c in target.components().rev() {
                    match c {
                        Component::Normal(p) => todo.push(p.to_os_string()),
                        Component::ParentDir => todo.push("..".into()),
                        _ => {}
                    }
                }
            }
            Ok(meta) if meta.file_type().is_symlink() => return PathBuf::from("/too-many-links"),
            _ => at = next,
        }
    }
    at
}
