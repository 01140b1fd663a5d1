//! Listing a directory that is not in a Git work tree.
//!
//! The walk never follows symlinks and includes hidden files. It honours the `.gitignore` and
//! `.ignore` files it finds *inside* the project (a `.ignore` line wins over a `.gitignore`
//! line of the same directory, deeper files win over shallower ones, as in Git and ripgrep):
//! a project copied out of a repository, or exported without its `.git`, keeps meaning what
//! its ignore files say. Files above the project directory and Git's global excludes are not
//! read, because without a repository there is no place where they would apply. Directories
//! that are ignored, excluded, denied or VCS metadata are pruned, each reported once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::{Match, WalkBuilder};

use super::filters::Filters;
use super::relpath::relative_bytes;
use super::types::DropReason;
use crate::error::Error;

/// Ignore files read in every directory, lowest precedence first.
const IGNORE_FILES: [&str; 2] = [".gitignore", ".ignore"];

/// The result of a walk.
pub(crate) struct Walked {
    /// Every non-directory entry (files, symlinks, special files), sorted.
    pub candidates: Vec<Vec<u8>>,
    /// Pruned directories and ignored files, with why.
    pub dropped: Vec<(Vec<u8>, DropReason)>,
}

/// State shared with the walker's filter callback.
struct Rules {
    root: PathBuf,
    filters: Filters,
    /// Compiled ignore rules per directory (`None`: the directory has no ignore file).
    per_dir: HashMap<PathBuf, Option<Arc<Gitignore>>>,
    dropped: Vec<(Vec<u8>, DropReason)>,
    /// The first failure while reading ignore files; it aborts the snapshot.
    error: Option<Error>,
}

pub(crate) fn walk(root: &Path, filters: &Filters) -> Result<Walked, Error> {
    let rules = Arc::new(Mutex::new(Rules {
        root: root.to_path_buf(),
        filters: filters.clone(),
        per_dir: HashMap::new(),
        dropped: Vec::new(),
        error: None,
    }));
    let filter_rules = Arc::clone(&rules);

    let mut builder = WalkBuilder::new(root);
    builder
        .standard_filters(false) // our own ignore handling, so every drop has a reason
        .hidden(false)
        .follow_links(false)
        .filter_entry(move |entry| {
            let mut rules = filter_rules.lock().unwrap_or_else(PoisonError::into_inner);
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            rules.keep(entry.path(), is_dir)
        });

    let mut candidates = Vec::new();
    for item in builder.build() {
        let entry = item.map_err(|e| {
            let context = format!("walking {}", root.display());
            match e.into_io_error() {
                Some(io) => Error::io(context, io),
                None => Error::io(context, std::io::Error::other("the directory walk failed")),
            }
        })?;
        if entry.depth() == 0 || entry.file_type().is_some_and(|t| t.is_dir()) {
            continue;
        }
        let name = relative_bytes(root, entry.path()).ok_or_else(|| {
            Error::invalid(
                "project directory",
                format!(
                    "{} has a name this platform cannot archive",
                    entry.path().display()
                ),
            )
        })?;
        candidates.push(name);
    }
    candidates.sort();

    let mut rules = rules.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(error) = rules.error.take() {
        return Err(error);
    }
    Ok(Walked {
        candidates,
        dropped: std::mem::take(&mut rules.dropped),
    })
}

impl Rules {
    /// Decide whether the walker enters/yields `path`, recording why when it does not. The
    /// name filters come before the ignore rules, as in a Git listing; a directory whose whole
    /// content is excluded is pruned and reported once.
    fn keep(&mut self, path: &Path, is_dir: bool) -> bool {
        let Some(name) = relative_bytes(&self.root, path) else {
            return true; // reported by the main loop
        };
        let filtered = if is_dir {
            self.filters.dir_reason(&name)
        } else {
            self.filters.file_reason(&name)
        };
        let reason = filtered.or_else(|| self.ignored(path, is_dir).then_some(DropReason::Ignored));
        match reason {
            Some(reason) => {
                self.dropped.push((name, reason));
                false
            }
            None => true,
        }
    }

    /// The deepest ignore file with an opinion decides; parents of ignored paths were pruned.
    fn ignored(&mut self, path: &Path, is_dir: bool) -> bool {
        let mut dir = path.parent();
        while let Some(current) = dir {
            if !current.starts_with(&self.root) {
                break;
            }
            if let Some(rules) = self.rules_for(current) {
                match rules.matched(path, is_dir) {
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                    Match::None => {}
                }
            }
            dir = current.parent();
        }
        false
    }

    fn rules_for(&mut self, dir: &Path) -> Option<Arc<Gitignore>> {
        if let Some(known) = self.per_dir.get(dir) {
            return known.clone();
        }
        let built = match build_rules(dir) {
            Ok(rules) => rules.map(Arc::new),
            Err(e) => {
                self.error.get_or_insert(e);
                None
            }
        };
        self.per_dir.insert(dir.to_path_buf(), built.clone());
        built
    }
}

/// Compile the ignore files of one directory; `None` when it has none.
fn build_rules(dir: &Path) -> Result<Option<Gitignore>, Error> {
    let mut builder = GitignoreBuilder::new(dir);
    let mut any = false;
    for file in IGNORE_FILES {
        let path = dir.join(file);
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            // a directory named `.gitignore`, say: it holds no rules
            Err(_) if path.is_dir() => continue,
            Err(e) => return Err(Error::io(format!("cannot read {}", path.display()), e)),
        };
        any = true;
        for line in String::from_utf8_lossy(&text).lines() {
            // Git skips a pattern it cannot parse; so do we, loudly
            if let Err(e) = builder.add_line(Some(path.clone()), line) {
                tracing::warn!(file = %path.display(), "skipping an invalid ignore pattern: {e}");
            }
        }
    }
    if !any {
        return Ok(None);
    }
    builder
        .build()
        .map(Some)
        .map_err(|e| Error::invalid("ignore rules", format!("{}: {e}", dir.display())))
}
