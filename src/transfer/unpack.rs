//! Staging an archive from a sandbox: every entry is judged, then written (or not) through
//! directory handles into a fresh staging directory (see [`super::extract`] for the placing).
//!
//! Refused, with nothing written for that entry (each is named in [`Unpacked::refused`]):
//! absolute names, `..`, NUL; protected paths ([`super::protect`]); entries the [`Request`]
//! did not ask for; anything below a name the archive made a symlink; symlinks whose target
//! leaves the destination (resolved through the archive's own links and the destination's)
//! or points at a protected path; hard links except to a regular file unpacked earlier from
//! the same archive (copied, never linked to anything outside); devices, FIFOs, sockets and
//! unknown types; setuid, setgid and sticky bits.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use tar::EntryType;

use super::dirfd::{identity, Dir, Kind};
use super::protect;
use super::refused::{shown, RefuseReason, Refused};
use crate::error::{Error, Result};

/// Longest chain of symlinks followed while judging where a new symlink points.
const MAX_HOPS: usize = 40;

/// What an unpacking produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unpacked {
    /// Regular files written (including copied hard links).
    pub files: u64,
    /// Symlinks written.
    pub symlinks: u64,
    /// Entries left out: the number of [`Unpacked::refused`].
    pub skipped: u64,
    /// Every entry that was not written, with why.
    pub refused: Vec<Refused>,
}

/// What the caller asked for: everything, or exactly some files and symlinks (their parent
/// directories come with them); optionally some of them written under another name.
#[derive(Clone, Debug, Default)]
pub struct Request {
    wanted: Option<BTreeSet<PathBuf>>,
    dirs: BTreeSet<PathBuf>,
    renames: BTreeMap<PathBuf, PathBuf>,
}

impl Request {
    /// Everything in the archive (a directory pull).
    pub fn all() -> Self {
        Request::default()
    }

    /// Exactly the relative paths `names` (files or symlinks); anything else is refused as
    /// not requested.
    pub fn only<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<Path>,
    {
        let wanted: BTreeSet<PathBuf> = names
            .into_iter()
            .map(|n| n.as_ref().to_path_buf())
            .collect();
        let dirs = wanted
            .iter()
            .flat_map(|w| w.ancestors().skip(1))
            .filter(|a| !a.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .collect();
        Request {
            wanted: Some(wanted),
            dirs,
            renames: BTreeMap::new(),
        }
    }

    /// Write the entry `from` as `to` (a sibling name, e.g. a conflict copy).
    pub fn rename(mut self, from: impl Into<PathBuf>, to: impl Into<PathBuf>) -> Self {
        self.renames.insert(from.into(), to.into());
        self
    }

    fn allows(&self, rel: &Path, dir: bool) -> bool {
        match &self.wanted {
            None => true,
            Some(_) if dir => self.dirs.contains(rel),
            Some(wanted) => wanted.contains(rel),
        }
    }
}

/// The checked relative path of an archive name; `None` for the archive root (`.`).
pub fn safe_name(raw: &[u8]) -> std::result::Result<Option<PathBuf>, RefuseReason> {
    if raw.contains(&0) {
        return Err(RefuseReason::BadName);
    }
    if raw.starts_with(b"/") {
        return Err(RefuseReason::Absolute);
    }
    let mut clean = PathBuf::new();
    for part in Path::new(OsStr::from_bytes(raw)).components() {
        match part {
            Component::Normal(p) => clean.push(p),
            Component::CurDir => {}
            Component::ParentDir => return Err(RefuseReason::ParentDir),
            Component::RootDir | Component::Prefix(_) => return Err(RefuseReason::Absolute),
        }
    }
    Ok((!clean.as_os_str().is_empty()).then_some(clean))
}

pub(crate) fn bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_bytes()
}

/// Splits `rel` into its parent and its last name.
pub(crate) fn split(rel: &Path) -> (&Path, &OsStr) {
    (
        rel.parent().unwrap_or(Path::new("")),
        rel.file_name().unwrap_or_default(),
    )
}

/// The staged tree: what was written where, for the placing and for judging later entries.
pub(crate) struct Stager<'a> {
    root: &'a Dir,
    /// The existing destination, to resolve symlinks already there.
    dest: Option<&'a Dir>,
    request: &'a Request,
    /// Archive name → (staged name, device, inode) of each regular file written.
    files: HashMap<PathBuf, (PathBuf, u64, u64)>,
    /// Every name the archive made a symlink (written or refused).
    link_names: HashSet<PathBuf>,
    /// Staged name → target of each symlink written.
    links: HashMap<PathBuf, OsString>,
    /// Staged name → what it is, parents before children.
    pub(crate) staged: BTreeMap<PathBuf, Kind>,
    pub(crate) done: Unpacked,
    /// The last parent directory opened.
    cache: Option<(PathBuf, Dir)>,
}

/// One entry's verdict: refused (why), or an I/O failure that ends the unpacking.
enum Fail {
    Refuse(RefuseReason),
    Io(Error),
}

impl From<RefuseReason> for Fail {
    fn from(r: RefuseReason) -> Self {
        Fail::Refuse(r)
    }
}

fn conflict(found: String) -> Fail {
    Fail::Refuse(RefuseReason::Conflict { found })
}

impl<'a> Stager<'a> {
    pub(crate) fn new(root: &'a Dir, dest: Option<&'a Dir>, request: &'a Request) -> Self {
        Stager {
            root,
            dest,
            request,
            files: HashMap::new(),
            link_names: HashSet::new(),
            links: HashMap::new(),
            staged: BTreeMap::new(),
            done: Unpacked::default(),
            cache: None,
        }
    }

    /// Stage every entry of the tar read from `archive`. Blocking.
    pub(crate) fn stage(&mut self, archive: impl Read) -> Result<()> {
        let mut tar = tar::Archive::new(archive);
        let entries = tar
            .entries()
            .map_err(|e| Error::io("reading the archive", e))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| Error::io("reading the archive", e))?;
            let raw = entry.path_bytes().into_owned();
            match self.entry(&raw, &mut entry) {
                Ok(()) => {}
                Err(Fail::Refuse(reason)) => self.refuse(&raw, reason),
                Err(Fail::Io(e)) => return Err(e),
            }
        }
        self.recheck_links()
    }

    /// Judge every staged symlink again against the final staged tree: a later link can change
    /// where an earlier one leads (`a -> b/c/../..` is inside until `b -> d/..` arrives).
    /// Removing a refused link can change others again, so this runs until nothing changes.
    fn recheck_links(&mut self) -> Result<()> {
        loop {
            let mut names: Vec<PathBuf> = self.links.keys().cloned().collect();
            names.sort();
            let bad: Vec<(PathBuf, RefuseReason)> = names
                .into_iter()
                .filter_map(
                    |name| match self.check_link(&name, self.links[&name].as_bytes()) {
                        Err(Fail::Refuse(reason)) => Some((name, reason)),
                        _ => None,
                    },
                )
                .collect();
            if bad.is_empty() {
                return Ok(());
            }
            for (name, reason) in bad {
                let (parent, leaf) = split(&name);
                let dir = self
                    .root
                    .beneath(parent)
                    .map_err(|e| Error::io(format!("unpacking {}", shown(bytes(&name))), e))?;
                dir.remove_file(leaf)
                    .map_err(|e| Error::io(format!("unpacking {}", shown(bytes(&name))), e))?;
                self.links.remove(&name);
                self.staged.remove(&name);
                self.done.symlinks -= 1;
                self.refuse(bytes(&name), reason);
            }
        }
    }

    fn refuse(&mut self, raw: &[u8], reason: RefuseReason) {
        tracing::warn!(entry = %shown(raw), %reason, "refused an entry from the sandbox");
        self.done.skipped += 1;
        self.done.refused.push(Refused::new(raw, reason));
    }

    fn entry<R: Read>(
        &mut self,
        raw: &[u8],
        entry: &mut tar::Entry<'_, R>,
    ) -> std::result::Result<(), Fail> {
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            EntryType::XGlobalHeader
                | EntryType::XHeader
                | EntryType::GNULongName
                | EntryType::GNULongLink
        ) {
            return Ok(());
        }
        let Some(rel) = safe_name(raw)? else {
            return Ok(());
        };
        if kind == EntryType::Symlink {
            // whatever becomes of it, nothing may be written below it
            self.link_names.insert(rel.clone());
        }
        let name = self
            .request
            .renames
            .get(&rel)
            .cloned()
            .unwrap_or_else(|| rel.clone());
        let protection = if kind == EntryType::Directory {
            protect::protected_dir(bytes(&name))
        } else {
            protect::protected(bytes(&name))
        };
        if let Some(why) = protection {
            return Err(RefuseReason::Protected(why).into());
        }
        if !self.request.allows(&rel, kind == EntryType::Directory) {
            return Err(RefuseReason::NotRequested.into());
        }
        if let Some(link) = rel
            .ancestors()
            .skip(1)
            .find(|a| self.link_names.contains(*a))
        {
            return Err(RefuseReason::ThroughLink {
                link: shown(bytes(link)),
            }
            .into());
        }
        if kind != EntryType::Symlink {
            let mode = entry
                .header()
                .mode()
                .map_err(|_| conflict("the entry's mode cannot be read".into()))?;
            if mode & 0o7000 != 0 {
                return Err(RefuseReason::SetId { mode }.into());
            }
        }
        match kind {
            EntryType::Directory => self.dir(&name),
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
                let mtime = mtime_of(entry);
                let (parent, leaf) = self.spot(&name)?;
                let mut file = parent
                    .create_new(leaf, 0o600)
                    .map_err(|e| io_fail(&name, e))?;
                io::copy(entry, &mut file).map_err(|e| io_fail(&name, e))?;
                self.finish_file(&rel, &name, &file, mode, mtime)
            }
            EntryType::Link => self.hard_link(&rel, &name, entry),
            EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .map(|t| t.into_owned())
                    .unwrap_or_default();
                self.check_link(&name, &target)?;
                let mtime = mtime_of(entry);
                let (parent, leaf) = self.spot(&name)?;
                parent
                    .symlink(OsStr::from_bytes(&target), leaf)
                    .map_err(|e| io_fail(&name, e))?;
                if let Some((secs, nanos)) = mtime {
                    let _ = parent.set_link_mtime(leaf, secs, nanos);
                }
                self.links
                    .insert(name.clone(), OsStr::from_bytes(&target).to_os_string());
                self.staged.insert(name, Kind::Symlink);
                self.done.symlinks += 1;
                Ok(())
            }
            EntryType::Char => Err(RefuseReason::Special {
                kind: "a character device",
            }
            .into()),
            EntryType::Block => Err(RefuseReason::Special {
                kind: "a block device",
            }
            .into()),
            EntryType::Fifo => Err(RefuseReason::Special { kind: "a FIFO" }.into()),
            _ => Err(RefuseReason::Special {
                kind: "an entry of an unknown type",
            }
            .into()),
        }
    }

    fn finish_file(
        &mut self,
        rel: &Path,
        name: &Path,
        file: &std::fs::File,
        mode: u32,
        mtime: Option<(i64, u32)>,
    ) -> std::result::Result<(), Fail> {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(|e| io_fail(name, e))?;
        if let Some((secs, nanos)) = mtime {
            if secs >= 0 {
                let when = UNIX_EPOCH + Duration::new(secs as u64, nanos);
                let _ = file.set_times(
                    std::fs::FileTimes::new()
                        .set_accessed(when)
                        .set_modified(when),
                );
            }
        }
        let (dev, ino) = identity(file).map_err(|e| io_fail(name, e))?;
        self.files
            .insert(rel.to_path_buf(), (name.to_path_buf(), dev, ino));
        self.staged.insert(name.to_path_buf(), Kind::File);
        self.done.files += 1;
        Ok(())
    }

    fn hard_link<R: Read>(
        &mut self,
        rel: &Path,
        name: &Path,
        entry: &tar::Entry<'_, R>,
    ) -> std::result::Result<(), Fail> {
        let raw = entry
            .link_name_bytes()
            .map(|t| t.into_owned())
            .unwrap_or_default();
        let refuse = || {
            Fail::Refuse(RefuseReason::HardLink {
                target: shown(&raw),
            })
        };
        let source = safe_name(&raw).ok().flatten().ok_or_else(refuse)?;
        let (staged, dev, ino) = self.files.get(&source).cloned().ok_or_else(refuse)?;
        let (from_dir, from_leaf) = split(&staged);
        let from_dir = self.root.beneath(from_dir).map_err(|_| refuse())?;
        let mut from = from_dir.open_file(from_leaf).map_err(|_| refuse())?;
        if identity(&from).ok() != Some((dev, ino)) {
            return Err(refuse());
        }
        let meta = from.metadata().map_err(|e| io_fail(&staged, e))?;
        let (parent, leaf) = self.spot(name)?;
        let mut file = parent
            .create_new(leaf, 0o600)
            .map_err(|e| io_fail(name, e))?;
        io::copy(&mut from, &mut file).map_err(|e| io_fail(name, e))?;
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let mtime = Some((meta.mtime(), meta.mtime_nsec() as u32));
        self.finish_file(rel, name, &file, meta.permissions().mode() & 0o777, mtime)
    }

    /// A directory entry: the directory and its parents exist in the staging afterwards.
    fn dir(&mut self, name: &Path) -> std::result::Result<(), Fail> {
        let (parent, leaf) = split(name);
        let parent = self.parent_dir(parent)?;
        parent
            .ensure_dir(leaf, 0o777)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ENOTDIR) | Some(libc::ELOOP) => conflict(format!(
                    "{} is already a file or symlink in this archive",
                    shown(bytes(name))
                )),
                _ => io_fail(name, e),
            })?;
        self.staged.insert(name.to_path_buf(), Kind::Dir);
        Ok(())
    }

    /// The directory that will hold `name` (created as needed) and `name`'s leaf, with
    /// whatever file or symlink an earlier entry put there removed (a later entry replaces an
    /// earlier one, never writes through it).
    fn spot<'n>(&mut self, name: &'n Path) -> std::result::Result<(Dir, &'n OsStr), Fail> {
        let (parent, leaf) = split(name);
        let dir = self.parent_dir(parent)?;
        match dir.stat(leaf).map_err(|e| io_fail(name, e))? {
            None => {}
            Some(st) if st.kind == Kind::Dir => {
                return Err(conflict(format!(
                    "{} is already a directory in this archive",
                    shown(bytes(name))
                )))
            }
            Some(_) => {
                dir.remove_file(leaf).map_err(|e| io_fail(name, e))?;
                self.links.remove(name);
                self.files.retain(|_, (staged, _, _)| staged != name);
                self.staged.remove(name);
            }
        }
        Ok((dir, leaf))
    }

    /// The staged directory `rel` (created with its parents, each recorded).
    fn parent_dir(&mut self, rel: &Path) -> std::result::Result<Dir, Fail> {
        if let Some((at, dir)) = &self.cache {
            if at == rel {
                return dir.try_clone().map_err(|e| io_fail(rel, e));
            }
        }
        let dir = match self.root.beneath(rel) {
            Ok(dir) => dir,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let mut at = self.root.try_clone().map_err(|e| io_fail(rel, e))?;
                let mut path = PathBuf::new();
                for part in rel.components() {
                    path.push(part);
                    at = at.ensure_dir(part.as_os_str(), 0o777).map_err(|e| {
                        match e.raw_os_error() {
                            Some(libc::ENOTDIR) | Some(libc::ELOOP) | Some(libc::EEXIST) => {
                                conflict(format!(
                                    "{} is a file or symlink in this archive, not a directory",
                                    shown(bytes(&path))
                                ))
                            }
                            _ => io_fail(&path, e),
                        }
                    })?;
                    self.staged.entry(path.clone()).or_insert(Kind::Dir);
                }
                at
            }
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOTDIR) | Some(libc::ELOOP) | Some(libc::EXDEV)
                ) =>
            {
                return Err(conflict(format!(
                    "{} is a file or symlink in this archive, not a directory",
                    shown(bytes(rel))
                )))
            }
            Err(e) => return Err(io_fail(rel, e)),
        };
        self.cache = Some((
            rel.to_path_buf(),
            dir.try_clone().map_err(|e| io_fail(rel, e))?,
        ));
        Ok(dir)
    }

    /// Refuse a symlink at `name` whose target, resolved through the archive's symlinks and
    /// the destination's, leaves the destination or lands on a protected path.
    fn check_link(&self, name: &Path, target: &[u8]) -> std::result::Result<(), Fail> {
        judge_link(name, target, |at| self.link_at(at)).map_err(Fail::Refuse)
    }

    /// The target of a symlink at `rel`: staged from this archive, else already in the
    /// destination, unless a staged file will replace it (a staged directory never replaces a
    /// link there: placing refuses it).
    fn link_at(&self, rel: &Path) -> Option<OsString> {
        if let Some(target) = self.links.get(rel) {
            return Some(target.clone());
        }
        if self.staged.get(rel) == Some(&Kind::File) {
            return None;
        }
        existing_link(self.dest?, rel)
    }
}

/// The target of a symlink standing at `rel` below `root`, if one does (no link on the way is
/// followed).
pub(crate) fn existing_link(root: &Dir, rel: &Path) -> Option<OsString> {
    let (parent, leaf) = split(rel);
    let dir = root.beneath(parent).ok()?;
    match dir.stat(leaf).ok()?? {
        st if st.kind == Kind::Symlink => dir.read_link(leaf).ok(),
        _ => None,
    }
}

/// Judge a symlink at `name` (relative to a destination root) pointing at `target`: resolved
/// component by component, through every link `link_at` knows of (at most [`MAX_HOPS`]), it
/// must stay below the root and not land on a protected path.
pub(crate) fn judge_link(
    name: &Path,
    target: &[u8],
    link_at: impl Fn(&Path) -> Option<OsString>,
) -> std::result::Result<(), RefuseReason> {
    let leaves = || RefuseReason::LinkLeaves {
        target: shown(target),
    };
    if target.is_empty() || target.contains(&0) || target.starts_with(b"/") {
        return Err(leaves());
    }
    let parts = |t: &[u8]| -> Vec<OsString> {
        t.split(|b| *b == b'/')
            .rev()
            .map(|c| OsStr::from_bytes(c).to_os_string())
            .collect()
    };
    let mut stack: Vec<OsString> = split(name).0.iter().map(OsStr::to_os_string).collect();
    let mut pending = parts(target);
    let mut hops = 0;
    while let Some(part) = pending.pop() {
        match part.as_bytes() {
            b"" | b"." => continue,
            b".." => {
                stack.pop().ok_or_else(leaves)?;
            }
            _ => {
                stack.push(part);
                let at: PathBuf = stack.iter().collect();
                if let Some(next) = link_at(&at) {
                    hops += 1;
                    if hops > MAX_HOPS || next.as_bytes().starts_with(b"/") || next.is_empty() {
                        return Err(leaves());
                    }
                    stack.pop();
                    pending.extend(parts(next.as_bytes()));
                }
            }
        }
    }
    let at: PathBuf = stack.iter().collect();
    match protect::protected(bytes(&at)) {
        Some(protection) => Err(RefuseReason::LinkToProtected {
            target: shown(target),
            protection,
        }),
        None => Ok(()),
    }
}

/// An I/O error on one entry: a name this file system cannot hold refuses that entry; anything
/// else (a full disk, …) ends the unpacking.
fn io_fail(name: &Path, e: io::Error) -> Fail {
    match e.raw_os_error() {
        Some(libc::ENAMETOOLONG) | Some(libc::EILSEQ) => {
            conflict(format!("this file system cannot hold the name ({e})"))
        }
        _ => Fail::Io(Error::io(format!("unpacking {}", shown(bytes(name))), e)),
    }
}

/// The entry's mtime: the PAX `mtime` record (to the nanosecond) when there is one, else the
/// header's whole seconds.
fn mtime_of<R: Read>(entry: &mut tar::Entry<'_, R>) -> Option<(i64, u32)> {
    if let Ok(Some(pax)) = entry.pax_extensions() {
        for ext in pax.flatten() {
            if ext.key() == Ok("mtime") {
                if let Some(t) = ext.value().ok().and_then(parse_pax_time) {
                    return Some(t);
                }
            }
        }
    }
    entry
        .header()
        .mtime()
        .ok()
        .and_then(|s| i64::try_from(s).ok())
        .map(|s| (s, 0))
}

/// `"<secs>[.<fraction>]"`.
fn parse_pax_time(text: &str) -> Option<(i64, u32)> {
    let (secs, frac) = text.split_once('.').unwrap_or((text, ""));
    let secs: i64 = secs.parse().ok()?;
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits: String = frac.chars().chain(std::iter::repeat('0')).take(9).collect();
    Some((secs, digits.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert_eq!(safe_name(b"./a/b").unwrap(), Some(PathBuf::from("a/b")));
        assert_eq!(safe_name(b"./").unwrap(), None);
        assert_eq!(safe_name(b"/etc/passwd"), Err(RefuseReason::Absolute));
        assert_eq!(safe_name(b"a/../../x"), Err(RefuseReason::ParentDir));
        assert_eq!(safe_name(b"a\0b"), Err(RefuseReason::BadName));
    }

    #[test]
    fn pax_times() {
        assert_eq!(
            parse_pax_time("1700000000.5"),
            Some((1_700_000_000, 500_000_000))
        );
        assert_eq!(parse_pax_time("12"), Some((12, 0)));
        assert_eq!(parse_pax_time("1.1234567899"), Some((1, 123_456_789)));
        assert_eq!(parse_pax_time("x"), None);
    }

    #[test]
    fn requests_allow_parents_of_what_they_name() {
        let r = Request::only(["a/b/c.txt", "d"]);
        assert!(r.allows(Path::new("a/b/c.txt"), false));
        assert!(r.allows(Path::new("a/b"), true));
        assert!(r.allows(Path::new("a"), true));
        assert!(!r.allows(Path::new("a/b"), false));
        assert!(!r.allows(Path::new("d"), true));
        assert!(!r.allows(Path::new("e"), false));
        assert!(Request::all().allows(Path::new("anything"), false));
    }
}
