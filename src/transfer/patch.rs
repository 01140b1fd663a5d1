//! Vetting a Git patch that a sandbox produced (`cos herdr apply`) before `git apply` runs it
//! on a local worktree: the same rules as the unpacker, for the paths a patch touches.
//!
//! The patch is read here ([`parse`]) and by Git (`git apply --numstat -z`, read with
//! [`numstat_paths`]); [`vet`] refuses the whole patch unless both readings name the same
//! paths, and names every path that may not be written: absolute or `..` names, protected
//! paths ([`super::protect`]: `.git/…`, `.env`, …), paths below a symlink of the worktree,
//! symlinks leading out of the worktree or onto a protected path (resolved through the
//! worktree's links and the patch's own), submodules (gitlinks), and modes other than
//! `100644`, `100755` and `120000`.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::dirfd::Dir;
use super::protect;
use super::refused::{shown, RefuseReason, Refused};
use super::unpack::{existing_link, judge_link, safe_name, split};

/// One file of a patch, as read from its headers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PatchFile {
    /// The name before (`None` for a new file).
    pub old: Option<Vec<u8>>,
    /// The name after (`None` for a deletion).
    pub new: Option<Vec<u8>>,
    /// The mode after, when the patch states one.
    pub mode: Option<u32>,
    /// A binary patch (its content cannot be read here).
    pub binary: bool,
    /// The added lines of its hunks (a symlink's new target is the one added line).
    added: Vec<Vec<u8>>,
}

/// The files of a Git patch (`diff --git` sections). `None` when a section cannot be read.
pub fn parse(patch: &[u8]) -> Option<Vec<PatchFile>> {
    let mut files = Vec::new();
    let mut current: Option<(PatchFile, bool)> = None;
    for line in patch.split(|b| *b == b'\n') {
        if let Some(rest) = line.strip_prefix(b"diff --git ") {
            if let Some((file, _)) = current.take() {
                files.push(file);
            }
            let (old, new) = header_names(rest).unwrap_or((None, None));
            current = Some((
                PatchFile {
                    old,
                    new,
                    ..PatchFile::default()
                },
                true,
            ));
            continue;
        }
        let Some((file, in_header)) = current.as_mut() else {
            continue;
        };
        if *in_header {
            if line.starts_with(b"@@ ") {
                *in_header = false;
            } else if line.starts_with(b"GIT binary patch") || line.starts_with(b"Binary files ") {
                file.binary = true;
                *in_header = false;
            } else {
                header_line(file, line)?;
            }
        } else if let Some(added) = line.strip_prefix(b"+") {
            file.added.push(added.to_vec());
        }
    }
    if let Some((file, _)) = current {
        files.push(file);
    }
    Some(files)
}

fn header_line(file: &mut PatchFile, line: &[u8]) -> Option<()> {
    let text = |prefix: &[u8]| line.strip_prefix(prefix);
    if let Some(mode) = text(b"new file mode ") {
        file.mode = Some(octal(mode)?);
        file.old = None;
    } else if let Some(mode) = text(b"new mode ") {
        file.mode = Some(octal(mode)?);
    } else if text(b"deleted file mode ").is_some() {
        file.new = None;
    } else if let Some(name) = text(b"rename from ").or_else(|| text(b"copy from ")) {
        file.old = Some(unquote(name)?);
    } else if let Some(name) = text(b"rename to ").or_else(|| text(b"copy to ")) {
        file.new = Some(unquote(name)?);
    } else if let Some(index) = text(b"index ") {
        if let Some(mode) = index.split(|b| *b == b' ').nth(1) {
            file.mode = file.mode.or(Some(octal(mode)?));
        }
    } else if let Some(name) = text(b"--- ") {
        file.old = stripped(name)?;
    } else if let Some(name) = text(b"+++ ") {
        file.new = stripped(name)?;
    }
    Some(())
}

fn octal(text: &[u8]) -> Option<u32> {
    u32::from_str_radix(std::str::from_utf8(text).ok()?.trim(), 8).ok()
}

/// A `---`/`+++` name: `/dev/null` is none; otherwise its first component is dropped (as
/// `git apply -p1` does, whatever the prefix).
fn stripped(name: &[u8]) -> Option<Option<Vec<u8>>> {
    let name = name.strip_suffix(b"\t").unwrap_or(name);
    if name == b"/dev/null" {
        return Some(None);
    }
    let name = unquote(name)?;
    let at = name.iter().position(|b| *b == b'/')?;
    Some(Some(name[at + 1..].to_vec()))
}

/// A file's name before and after.
type Names = (Option<Vec<u8>>, Option<Vec<u8>>);

/// The two names of `a/X b/Y` (quoted or not; unquoted ones only when both are the same).
fn header_names(rest: &[u8]) -> Option<Names> {
    let drop_first = |name: Vec<u8>| -> Option<Vec<u8>> {
        let at = name.iter().position(|b| *b == b'/')?;
        Some(name[at + 1..].to_vec())
    };
    if rest.starts_with(b"\"") {
        let (first, after) = quoted_prefix(rest)?;
        let second = after.strip_prefix(b" ")?;
        let second = if second.starts_with(b"\"") {
            quoted_prefix(second)?.0
        } else {
            second.to_vec()
        };
        return Some((drop_first(first), drop_first(second)));
    }
    let n = rest.len().checked_sub(1)? / 2;
    let (a, b) = (&rest[..n], &rest[n + 1..]);
    if rest.get(n) != Some(&b' ') {
        return None;
    }
    let (a, b) = (drop_first(a.to_vec())?, drop_first(b.to_vec())?);
    (a == b).then(|| (Some(a.clone()), Some(b)))
}

/// A C-quoted name (`"a\tb"`, octal escapes) or a plain one.
fn unquote(name: &[u8]) -> Option<Vec<u8>> {
    if name.starts_with(b"\"") {
        let (text, rest) = quoted_prefix(name)?;
        return rest.is_empty().then_some(text);
    }
    Some(name.to_vec())
}

/// The quoted string at the start of `text` (which starts with `"`), and what follows it.
fn quoted_prefix(text: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut out = Vec::new();
    let mut i = 1;
    while i < text.len() {
        match text[i] {
            b'"' => return Some((out, &text[i + 1..])),
            b'\\' => {
                let c = *text.get(i + 1)?;
                i += 2;
                match c {
                    b'a' => out.push(7),
                    b'b' => out.push(8),
                    b't' => out.push(b'\t'),
                    b'n' => out.push(b'\n'),
                    b'v' => out.push(11),
                    b'f' => out.push(12),
                    b'r' => out.push(b'\r'),
                    b'0'..=b'7' => {
                        let digits = text.get(i - 1..i + 2)?;
                        out.push(u8::from_str_radix(std::str::from_utf8(digits).ok()?, 8).ok()?);
                        i += 2;
                    }
                    other => out.push(other),
                }
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    None
}

/// The paths of `git apply --numstat -z` output (both names of a rename or copy).
pub fn numstat_paths(out: &[u8]) -> BTreeSet<Vec<u8>> {
    let mut paths = BTreeSet::new();
    let mut fields = out.split(|b| *b == 0).peekable();
    while let Some(record) = fields.next() {
        if record.is_empty() {
            continue;
        }
        // `added \t deleted \t path`, or `added \t deleted \t` then old and new
        let mut parts = record.splitn(3, |b| *b == b'\t');
        let (_, _, path) = (parts.next(), parts.next(), parts.next().unwrap_or_default());
        if path.is_empty() {
            for _ in 0..2 {
                if let Some(name) = fields.next() {
                    paths.insert(name.to_vec());
                }
            }
        } else {
            paths.insert(path.to_vec());
        }
    }
    paths
}

/// Every path `files` name (both names of a rename or copy).
pub fn paths(files: &[PatchFile]) -> BTreeSet<Vec<u8>> {
    files
        .iter()
        .flat_map(|f| f.old.iter().chain(f.new.iter()).cloned())
        .collect()
}

/// The name Git reports for each file (`--numstat`: the new name, or the old one of a
/// deletion).
pub fn primary_paths(files: &[PatchFile]) -> BTreeSet<Vec<u8>> {
    files
        .iter()
        .filter_map(|f| f.new.clone().or_else(|| f.old.clone()))
        .collect()
}

/// What may not be applied to the worktree at `root` (see the module docs). `git_paths`
/// is Git's own reading ([`numstat_paths`]): when Git names a path this reading does not
/// know, or misses one it names, every path is refused, since the patch cannot be vetted.
pub fn vet(root: &Path, files: &[PatchFile], git_paths: &BTreeSet<Vec<u8>>) -> Vec<Refused> {
    let ours = paths(files);
    if !git_paths.is_subset(&ours) || !primary_paths(files).is_subset(git_paths) {
        let all: BTreeSet<&Vec<u8>> = ours.iter().chain(git_paths).collect();
        let found = "the patch reads differently here and to Git; it cannot be checked".to_string();
        return all
            .into_iter()
            .map(|p| {
                Refused::new(
                    p,
                    RefuseReason::Conflict {
                        found: found.clone(),
                    },
                )
            })
            .collect();
    }
    let worktree = Dir::open(root).ok();
    // the symlinks the patch itself leaves, and the files it turns into non-links
    let mut links: BTreeMap<PathBuf, OsString> = BTreeMap::new();
    let mut plain: BTreeSet<PathBuf> = BTreeSet::new();
    for file in files {
        let Some(new) = &file.new else { continue };
        let path = PathBuf::from(OsStr::from_bytes(new));
        match (file.mode, file.added.first()) {
            (Some(0o120000), Some(target)) => {
                links.insert(path, OsStr::from_bytes(target).to_os_string());
            }
            _ => {
                plain.insert(path);
            }
        }
    }
    for file in files {
        if let Some(old) = &file.old {
            if file.new.as_ref().is_none_or(|n| n != old) {
                plain.insert(PathBuf::from(OsStr::from_bytes(old)));
            }
        }
    }
    let link_at = |at: &Path| -> Option<OsString> {
        if let Some(target) = links.get(at) {
            return Some(target.clone());
        }
        if plain.contains(at) {
            return None;
        }
        existing_link(worktree.as_ref()?, at)
    };
    let mut refused = Vec::new();
    for file in files {
        for name in file.old.iter().chain(file.new.iter()) {
            if let Some(reason) = judge_name(worktree.as_ref(), name) {
                refused.push(Refused::new(name, reason));
            }
        }
        let Some(new) = &file.new else { continue };
        let reason = match file.mode {
            None | Some(0o100644) | Some(0o100755) => None,
            Some(0o160000) => Some(RefuseReason::Special {
                kind: "a submodule (gitlink)",
            }),
            Some(0o120000) if file.binary || file.added.len() != 1 => {
                Some(RefuseReason::LinkLeaves {
                    target: "(a target this client cannot read from the patch)".into(),
                })
            }
            Some(0o120000) => {
                judge_link(Path::new(OsStr::from_bytes(new)), &file.added[0], link_at).err()
            }
            Some(mode) => Some(RefuseReason::SetId { mode }),
        };
        if let Some(reason) = reason {
            refused.push(Refused::new(new, reason));
        }
    }
    refused.dedup();
    refused
}

/// Why the name `raw` may not be touched in the worktree: unsafe, protected, or below a
/// symlink there.
fn judge_name(worktree: Option<&Dir>, raw: &[u8]) -> Option<RefuseReason> {
    let rel = match safe_name(raw) {
        Ok(Some(rel)) => rel,
        Ok(None) => return Some(RefuseReason::BadName),
        Err(reason) => return Some(reason),
    };
    if let Some(why) = protect::protected(raw) {
        return Some(RefuseReason::Protected(why));
    }
    let worktree = worktree?;
    let mut at = PathBuf::new();
    for part in split(&rel).0.components() {
        at.push(part);
        if existing_link(worktree, &at).is_some() {
            return Some(RefuseReason::ThroughLink {
                link: shown(at.as_os_str().as_bytes()),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATCH: &[u8] = b"diff --git a/README.md b/README.md
index 1111111..2222222 100644
--- a/README.md
+++ b/README.md
@@ -1 +1,2 @@
 hello
+more
diff --git a/empty b/empty
new file mode 100644
index 0000000..e69de29
diff --git \"a/tab\\there\" \"b/tab\\there\"
new file mode 100644
--- /dev/null
+++ \"b/tab\\there\"
@@ -0,0 +1 @@
+x
diff --git a/old.txt b/new.txt
similarity index 100%
rename from old.txt
rename to new.txt
diff --git a/link b/link
new file mode 120000
--- /dev/null
+++ b/link
@@ -0,0 +1 @@
+../../etc/passwd
\\ No newline at end of file
diff --git a/.git/hooks/post-commit b/.git/hooks/post-commit
new file mode 100755
--- /dev/null
+++ b/.git/hooks/post-commit
@@ -0,0 +1 @@
+#!/bin/sh
";

    #[test]
    fn a_patch_is_read_as_git_reads_it() {
        let files = parse(PATCH).unwrap();
        type Pair<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);
        let names: Vec<Pair<'_>> = files
            .iter()
            .map(|f| (f.old.as_deref(), f.new.as_deref()))
            .collect();
        assert_eq!(
            names,
            [
                (Some(&b"README.md"[..]), Some(&b"README.md"[..])),
                (None, Some(&b"empty"[..])),
                (None, Some(&b"tab\there"[..])),
                (Some(&b"old.txt"[..]), Some(&b"new.txt"[..])),
                (None, Some(&b"link"[..])),
                (None, Some(&b".git/hooks/post-commit"[..])),
            ]
        );
        assert_eq!(files[4].mode, Some(0o120000));
        assert_eq!(files[4].added, [b"../../etc/passwd".to_vec()]);
        let tmp = tempfile::tempdir().unwrap();
        let git: BTreeSet<Vec<u8>> = primary_paths(&files);
        let refused: Vec<(String, &str)> = vet(tmp.path(), &files, &git)
            .iter()
            .map(|r| (r.path.clone(), r.reason.code()))
            .collect();
        assert_eq!(
            refused,
            [
                ("link".into(), "symlink-leaves"),
                (".git/hooks/post-commit".into(), "protected")
            ]
        );
        // Git reading other paths than this parser: nothing can be vouched for
        let mut other = git.clone();
        other.insert(b"elsewhere".to_vec());
        assert_eq!(
            vet(tmp.path(), &files, &other).len(),
            paths(&files).len() + 1
        );
    }

    #[test]
    fn numstat_output_is_read() {
        let out = b"1\t0\tREADME.md\x000\t0\t\x00old.txt\x00new.txt\x00-\t-\tbin\nary\x00";
        let got: Vec<Vec<u8>> = numstat_paths(out).into_iter().collect();
        assert_eq!(
            got,
            [
                b"README.md".to_vec(),
                b"bin\nary".to_vec(),
                b"new.txt".to_vec(),
                b"old.txt".to_vec()
            ]
        );
    }

    #[test]
    fn quoting() {
        assert_eq!(
            unquote(b"\"a\\\\b\\\"c\\303\\251\"").unwrap(),
            "a\\b\"c\u{e9}".as_bytes()
        );
        assert_eq!(unquote(b"plain name").unwrap(), b"plain name");
        assert!(unquote(b"\"unterminated").is_none());
    }
}
