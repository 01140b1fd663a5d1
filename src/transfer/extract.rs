//! Unpacking an archive from a sandbox on this machine: staged into a fresh directory next to
//! the destination ([`super::unpack`] judges and writes every entry), then placed. Both steps
//! go through directory handles (see [`super::dirfd`]); no name from the archive is ever
//! resolved by the kernel from a path string.
//!
//! Placing: a missing destination is the staged tree renamed into place (all or nothing). An
//! existing one is merged into, after every entry has been checked against it first: files
//! and symlinks replace files and symlinks, a new directory is moved in whole, a directory
//! never replaces a file nor the reverse, and nothing is written below a symlink or a file
//! standing where a directory belongs (those entries are refused and named). So the
//! destination is left as it was (on an error while staging) or complete, minus what was
//! refused.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::dirfd::{Dir, Kind};
use super::protect;
use super::refused::{RefuseReason, Refused};
use super::unpack::{Request, Stager, Unpacked};
use crate::error::{Error, Result};

/// A directory next to the destination (same file system, so placing is a rename), removed
/// with everything in it when dropped.
#[derive(Debug)]
struct Staging {
    parent: Dir,
    name: OsString,
    dir: Dir,
}

impl Staging {
    fn next_to(parent: &Dir, dest_name: &OsStr) -> Result<Staging> {
        let mut tries = 0;
        loop {
            let name = OsString::from(format!(
                ".{}.cos-incoming-{:016x}",
                dest_name.to_string_lossy(),
                rand::random::<u64>()
            ));
            let made = parent
                .stat(&name)
                .map_err(|e| Error::io("creating a staging directory", e))?;
            if made.is_none() {
                let parent = parent
                    .try_clone()
                    .map_err(|e| Error::io("creating a staging directory", e))?;
                match parent.ensure_dir(&name, 0o700) {
                    Ok(dir) => return Ok(Staging { parent, name, dir }),
                    Err(e) if tries >= 8 => {
                        return Err(Error::io("creating a staging directory", e))
                    }
                    Err(_) => {}
                }
            }
            tries += 1;
        }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        self.dir.clear();
        let _ = self.parent.remove_dir(&self.name);
    }
}

/// What [`Extraction::finish`] did.
#[derive(Debug, Default)]
pub(crate) struct Extracted {
    pub unpacked: Unpacked,
    /// Every file and symlink now in the destination from this archive (staged names).
    pub placed: Vec<PathBuf>,
}

/// A destination made ready to receive an archive: its parent open, the destination itself
/// open when it exists, and a staging directory next to it.
#[derive(Debug)]
pub(crate) struct Extraction {
    parent: Dir,
    leaf: OsString,
    existing: Option<Dir>,
    staging: Staging,
    content: Dir,
}

impl Extraction {
    /// Check `dest` (a protected path is refused before anything is fetched) and prepare it.
    /// Its parent directory must exist.
    pub(crate) fn prepare(dest: &Path) -> Result<Extraction> {
        protect::check_dir_target(dest)?;
        let dest = if dest.file_name().is_none() {
            std::fs::canonicalize(dest)
                .map_err(|e| Error::io(format!("resolving {}", dest.display()), e))?
        } else {
            dest.to_path_buf()
        };
        let leaf = dest
            .file_name()
            .map(OsStr::to_os_string)
            .ok_or_else(|| Error::invalid("destination", "names no directory"))?;
        let parent_path = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let parent = Dir::open(parent_path)
            .map_err(|e| Error::io(format!("opening {}", parent_path.display()), e))?;
        let not_dir = || {
            Error::invalid(
                "destination",
                format!("{} exists and is not a directory", dest.display()),
            )
        };
        let existing = match parent
            .stat(&leaf)
            .map_err(|e| Error::io(format!("reading {}", dest.display()), e))?
        {
            None => None,
            Some(st) if st.kind == Kind::Dir => Some(
                parent
                    .sub(&leaf)
                    .map_err(|e| Error::io(format!("opening {}", dest.display()), e))?,
            ),
            // the destination itself may be a link the user chose; below it nothing is followed
            Some(st) if st.kind == Kind::Symlink => match Dir::open(&dest) {
                Ok(dir) => Some(dir),
                Err(_) => return Err(not_dir()),
            },
            Some(_) => return Err(not_dir()),
        };
        let staging = Staging::next_to(&parent, &leaf)?;
        let content = staging
            .dir
            .ensure_dir(OsStr::new("content"), 0o777)
            .map_err(|e| Error::io("creating a staging directory", e))?;
        Ok(Extraction {
            parent,
            leaf,
            existing,
            staging,
            content,
        })
    }

    /// A new file in the staging directory to download the archive into.
    pub(crate) fn archive_file(&self) -> Result<File> {
        self.staging
            .dir
            .create_new(OsStr::new("archive.tar"), 0o600)
            .map_err(|e| Error::io("creating the archive file", e))
    }

    /// Stage the tar read from `archive` as `request` allows, then place it. Blocking.
    pub(crate) fn finish(self, archive: impl Read, request: &Request) -> Result<Extracted> {
        let mut stager = Stager::new(&self.content, self.existing.as_ref(), request);
        stager.stage(archive)?;
        let staged = std::mem::take(&mut stager.staged);
        let mut unpacked = std::mem::take(&mut stager.done);
        drop(stager);
        let placed = match &self.existing {
            None => {
                self.staging
                    .dir
                    .rename(OsStr::new("content"), &self.parent, &self.leaf)
                    .map_err(|e| {
                        Error::io(format!("moving into {}", self.leaf.to_string_lossy()), e)
                    })?;
                staged
                    .into_iter()
                    .filter(|(_, k)| *k != Kind::Dir)
                    .map(|(p, _)| p)
                    .collect()
            }
            Some(dest) => merge(&self.content, dest, &staged, &mut unpacked)?,
        };
        Ok(Extracted { unpacked, placed })
    }
}

/// Unpack the tar read from `archive` into the local directory `dest` (created when missing,
/// merged into when it exists), writing only what `request` asks for; see the module docs.
/// Blocking.
pub fn extract(archive: impl Read, dest: &Path, request: &Request) -> Result<Unpacked> {
    Ok(Extraction::prepare(dest)?
        .finish(archive, request)?
        .unpacked)
}

/// What placing does with one staged path.
enum Step {
    /// A directory that exists in the destination: its entries are placed one by one.
    Enter,
    /// A new directory (or a file or symlink): renamed into place, with all below it.
    Move,
    /// Inside something moved: nothing to do.
    Carried,
    /// Not placed.
    Refuse(String),
}

/// Merge the staged tree `content` into the existing directory `dest`: every step is decided
/// first, then carried out. Returns the files and symlinks placed.
fn merge(
    content: &Dir,
    dest: &Dir,
    staged: &BTreeMap<PathBuf, Kind>,
    done: &mut Unpacked,
) -> Result<Vec<PathBuf>> {
    // how each staged directory stands in the destination
    let mut dirs: HashMap<&Path, Step> = HashMap::new();
    dirs.insert(Path::new(""), Step::Enter);
    let mut steps: Vec<(&Path, Kind, Step)> = Vec::with_capacity(staged.len());
    let mut lookup = Handles::default();
    for (path, kind) in staged {
        let (parent, leaf) = (
            path.parent().unwrap_or(Path::new("")),
            path.file_name().unwrap_or_default(),
        );
        let shown = path.display();
        let step = match dirs.get(parent) {
            Some(Step::Refuse(why)) => Step::Refuse(why.clone()),
            Some(Step::Move) | Some(Step::Carried) => Step::Carried,
            Some(Step::Enter) => {
                let found = lookup
                    .dest(dest, parent)
                    .and_then(|d| d.stat(leaf))
                    .map_err(|e| Error::io(format!("reading {shown}"), e))?;
                match (kind, found.map(|s| s.kind)) {
                    (_, None) => Step::Move,
                    (Kind::Dir, Some(Kind::Dir)) => Step::Enter,
                    (Kind::Dir, Some(Kind::Symlink)) => Step::Refuse(format!(
                        "{shown} is a symlink here, not a directory; links are never followed"
                    )),
                    (Kind::Dir, Some(_)) => Step::Refuse(format!(
                        "{shown} is a file here, not a directory; not replacing it"
                    )),
                    (_, Some(Kind::Dir)) => Step::Refuse(format!(
                        "{shown} is a directory here; not replacing it with a file"
                    )),
                    (_, Some(_)) => Step::Move,
                }
            }
            None => Step::Refuse(format!("{shown}: its directory was not staged")),
        };
        if *kind == Kind::Dir {
            let state = match &step {
                Step::Enter => Step::Enter,
                Step::Move | Step::Carried => Step::Carried,
                Step::Refuse(why) => Step::Refuse(why.clone()),
            };
            dirs.insert(path, state);
        }
        steps.push((path, *kind, step));
    }
    let mut placed = Vec::new();
    let mut lookup = Handles::default();
    for (path, kind, step) in steps {
        match step {
            Step::Enter => {}
            Step::Carried => {
                if kind != Kind::Dir {
                    placed.push(path.to_path_buf());
                }
            }
            Step::Refuse(found) => {
                if kind != Kind::Dir {
                    done.skipped += 1;
                    done.refused.push(Refused::new(
                        path.as_os_str().as_encoded_bytes(),
                        RefuseReason::Conflict { found },
                    ));
                    match kind {
                        Kind::Symlink => done.symlinks -= 1,
                        _ => done.files -= 1,
                    }
                }
            }
            Step::Move => {
                let (parent, leaf) = (
                    path.parent().unwrap_or(Path::new("")),
                    path.file_name().unwrap_or_default(),
                );
                let moved = (|| {
                    let from = lookup.content(content, parent)?;
                    let to = lookup.dest(dest, parent)?;
                    from.rename(leaf, &to, leaf)
                })();
                moved.map_err(|e| Error::io(format!("placing {}", path.display()), e))?;
                if kind != Kind::Dir {
                    placed.push(path.to_path_buf());
                }
            }
        }
    }
    Ok(placed)
}

/// The last directory opened on each side while placing.
#[derive(Default)]
struct Handles {
    content: Option<(PathBuf, Dir)>,
    dest: Option<(PathBuf, Dir)>,
}

impl Handles {
    fn content(&mut self, root: &Dir, rel: &Path) -> std::io::Result<Dir> {
        open_cached(&mut self.content, root, rel)
    }

    fn dest(&mut self, root: &Dir, rel: &Path) -> std::io::Result<Dir> {
        open_cached(&mut self.dest, root, rel)
    }
}

fn open_cached(slot: &mut Option<(PathBuf, Dir)>, root: &Dir, rel: &Path) -> std::io::Result<Dir> {
    if let Some((at, dir)) = slot {
        if at == rel {
            return dir.try_clone();
        }
    }
    let dir = root.beneath(rel)?;
    *slot = Some((rel.to_path_buf(), dir.try_clone()?));
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use tar::EntryType;

    fn tar_with(entries: &[(&str, EntryType, &str)]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, kind, data) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(*kind);
            header.set_mode(0o644);
            if matches!(kind, EntryType::Symlink | EntryType::Link) {
                header.set_size(0);
                builder.append_link(&mut header, name, data).unwrap();
            } else {
                header.set_size(data.len() as u64);
                builder
                    .append_data(&mut header, name, data.as_bytes())
                    .unwrap();
            }
        }
        builder.into_inner().unwrap()
    }

    fn codes(done: &Unpacked) -> Vec<(String, &'static str)> {
        done.refused
            .iter()
            .map(|r| (r.path.clone(), r.reason.code()))
            .collect()
    }

    #[test]
    fn nothing_is_written_through_a_link() {
        let tmp = tempfile::TempDir::new().unwrap();
        let outside = tmp.path().join("outside");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("secret.txt"), "host secret").unwrap();
        let into = tmp.path().join("in");
        let archive = tar_with(&[
            ("link", EntryType::Symlink, outside.to_str().unwrap()),
            ("link/evil", EntryType::Regular, "x"),
            ("copied.txt", EntryType::Link, "link/secret.txt"),
            ("ok", EntryType::Regular, "fine"),
        ]);
        let done = extract(&archive[..], &into, &Request::all()).unwrap();
        assert_eq!(
            codes(&done),
            [
                ("link".into(), "symlink-leaves"),
                ("link/evil".into(), "through-symlink"),
                ("copied.txt".into(), "hard-link")
            ]
        );
        assert!(!outside.join("evil").exists());
        assert!(!into.join("copied.txt").exists());
        assert_eq!(fs::read_to_string(into.join("ok")).unwrap(), "fine");
        // a later file replaces a link of the same archive instead of writing through it
        let into2 = tmp.path().join("in2");
        let archive = tar_with(&[
            ("f", EntryType::Symlink, "g"),
            ("f", EntryType::Regular, "new"),
        ]);
        extract(&archive[..], &into2, &Request::all()).unwrap();
        assert_eq!(fs::read_to_string(into2.join("f")).unwrap(), "new");
        assert!(!into2.join("g").exists());
    }

    #[test]
    fn merge_replaces_files_and_keeps_others() {
        let tmp = tempfile::TempDir::new().unwrap();
        let dest = tmp.path().join("dest");
        fs::create_dir_all(dest.join("sub")).unwrap();
        fs::create_dir_all(dest.join("keepdir")).unwrap();
        fs::write(dest.join("sub/old"), "old").unwrap();
        fs::write(dest.join("top"), "old").unwrap();
        fs::write(dest.join("plain"), "a file").unwrap();
        let archive = tar_with(&[
            ("sub/new", EntryType::Regular, "n"),
            ("top", EntryType::Regular, "t"),
            ("fresh/deep/x", EntryType::Regular, "x"),
            ("keepdir", EntryType::Regular, "not a dir"),
            ("plain/under", EntryType::Regular, "u"),
        ]);
        let done = extract(&archive[..], &dest, &Request::all()).unwrap();
        assert_eq!(fs::read_to_string(dest.join("sub/old")).unwrap(), "old");
        assert_eq!(fs::read_to_string(dest.join("sub/new")).unwrap(), "n");
        assert_eq!(fs::read_to_string(dest.join("top")).unwrap(), "t");
        assert_eq!(fs::read_to_string(dest.join("fresh/deep/x")).unwrap(), "x");
        assert!(dest.join("keepdir").is_dir());
        assert_eq!(fs::read_to_string(dest.join("plain")).unwrap(), "a file");
        assert_eq!(
            codes(&done),
            [
                ("keepdir".into(), "conflict"),
                ("plain/under".into(), "conflict")
            ]
        );
        assert_eq!(done.files, 3);
        let left: Vec<_> = fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["dest"], "the staging directory is gone");
    }

    #[test]
    fn a_symlink_in_the_destination_is_never_entered() {
        let tmp = tempfile::TempDir::new().unwrap();
        let outside = tmp.path().join("outside");
        fs::create_dir(&outside).unwrap();
        let dest = tmp.path().join("dest");
        fs::create_dir(&dest).unwrap();
        std::os::unix::fs::symlink(&outside, dest.join("out")).unwrap();
        let archive = tar_with(&[
            ("out/x", EntryType::Regular, "x"),
            ("via", EntryType::Symlink, "out/../../etc"),
        ]);
        let done = extract(&archive[..], &dest, &Request::all()).unwrap();
        assert_eq!(
            codes(&done),
            [
                ("via".into(), "symlink-leaves"),
                ("out/x".into(), "conflict")
            ]
        );
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    }

    #[test]
    fn a_later_link_cannot_make_an_earlier_one_escape() {
        let tmp = tempfile::TempDir::new().unwrap();
        let dest = tmp.path().join("dest");
        let archive = tar_with(&[
            ("a", EntryType::Symlink, "b/c/../.."),
            ("d/", EntryType::Directory, ""),
            ("b", EntryType::Symlink, "d/.."),
            ("loop1", EntryType::Symlink, "loop2"),
            ("loop2", EntryType::Symlink, "loop1"),
            ("fine", EntryType::Symlink, "d/../b"),
        ]);
        let done = extract(&archive[..], &dest, &Request::all()).unwrap();
        let loops = [
            ("a".into(), "symlink-leaves"),
            ("loop1".into(), "symlink-leaves"),
            ("loop2".into(), "symlink-leaves"),
        ];
        assert_eq!(codes(&done), loops);
        assert_eq!(fs::read_link(dest.join("b")).unwrap(), Path::new("d/.."));
        assert!(
            fs::symlink_metadata(dest.join("a")).is_err()
                && fs::symlink_metadata(dest.join("loop1")).is_err()
        );
        assert_eq!(done.symlinks, 2);
    }

    #[test]
    fn only_what_was_asked_for_is_placed() {
        let tmp = tempfile::TempDir::new().unwrap();
        let dest = tmp.path().join("dest");
        let archive = tar_with(&[
            ("a/wanted.txt", EntryType::Regular, "w"),
            ("a/extra.txt", EntryType::Regular, "e"),
            ("b/", EntryType::Directory, ""),
            ("c.txt", EntryType::Regular, "guest side"),
            (
                ".git/config",
                EntryType::Regular,
                "[core]\nfsmonitor = evil\n",
            ),
        ]);
        let request =
            Request::only(["a/wanted.txt", "c.txt"]).rename("c.txt", "c.txt.remote-conflict-1");
        let done = extract(&archive[..], &dest, &request).unwrap();
        assert_eq!(
            codes(&done),
            [
                ("a/extra.txt".into(), "not-requested"),
                ("b/".into(), "not-requested"),
                (".git/config".into(), "protected")
            ]
        );
        assert_eq!(fs::read_to_string(dest.join("a/wanted.txt")).unwrap(), "w");
        assert_eq!(
            fs::read_to_string(dest.join("c.txt.remote-conflict-1")).unwrap(),
            "guest side"
        );
        assert!(
            !dest.join("c.txt").exists() && !dest.join(".git").exists() && !dest.join("b").exists()
        );
    }

    #[test]
    fn a_name_the_file_system_cannot_hold_is_refused_alone() {
        let tmp = tempfile::TempDir::new().unwrap();
        let dest = tmp.path().join("dest");
        let long = format!("{}/x", "n".repeat(300));
        let mut builder = tar::Builder::new(Vec::new());
        for (name, data) in [(long.as_str(), "x"), ("ok", "fine")] {
            let mut header = tar::Header::new_gnu();
            header.set_mode(0o644);
            header.set_size(data.len() as u64);
            builder
                .append_data(&mut header, name, data.as_bytes())
                .unwrap();
        }
        let done = extract(&builder.into_inner().unwrap()[..], &dest, &Request::all()).unwrap();
        assert_eq!(done.refused.len(), 1);
        assert_eq!(done.refused[0].reason.code(), "conflict");
        assert_eq!(fs::read_to_string(dest.join("ok")).unwrap(), "fine");
    }

    #[test]
    fn a_protected_destination_is_refused_before_anything() {
        let tmp = tempfile::TempDir::new().unwrap();
        let git = tmp.path().join("repo/.git/hooks");
        let err = extract(
            &tar_with(&[("x", EntryType::Regular, "x")])[..],
            &git,
            &Request::all(),
        )
        .unwrap_err();
        assert!(matches!(err, Error::Refused { .. }), "{err}");
        assert!(!tmp.path().join("repo").exists());
    }
}
