//! Project snapshots: which files of a project directory to upload, and the tar archive of
//! exactly those files.
//!
//! [`Snapshot::scan`] builds the file list, then [`Snapshot::tar_stream`] (streamed, for an
//! upload) or [`Snapshot::write_tar`] (into any `Write`) produces the archive. The filters run
//! in this order; every path left out is kept in [`Snapshot::dropped`] with its
//! [`DropReason`], for `--explain`:
//!
//! 1. The directory is resolved (`realpath`); `/`, the home directory (or anything containing
//!    it), folders such as `~/.ssh` or `~/.aws`, and non-directories are refused.
//! 2. Candidates. Inside a Git work tree: `git ls-files --cached --others --exclude-standard`
//!    (tracked plus untracked-unignored), relative to the project directory, which may be a
//!    subdirectory of the work tree. Elsewhere (or with [`GitMode::Off`]): a walk that never
//!    follows symlinks, includes hidden files and honours the `.gitignore`/`.ignore` files
//!    inside the project. Empty directories are not archived in either case.
//! 3. Unsafe names (absolute, `..`, NUL) are rejected; every gitlink (submodule, mode 160000)
//!    is dropped with everything under it, as is an untracked nested repository.
//! 4. User excludes (see below) — first, so no later rule can bring a path back.
//! 5. The credential deny-list: `.env`, `.env.*` (but `.env.example`, `.env.sample` and
//!    `.env.template` stay), `.ssh/`, `.aws/`, `.gnupg/`, `.kube/`, `.config/gcloud/`,
//!    `.terraform/`, `.docker/config.json`, `.netrc`, `.npmrc`, `.pypirc`, `.envrc`,
//!    `.git-credentials`, `id_rsa`, `id_dsa`, `id_ecdsa`, `id_ed25519`, `credentials`,
//!    `credentials.json`, `*.pem`, `*.key`, `*.p12`, `*.pfx`, `*.keystore`, `*.jks`,
//!    `*.tfstate`, `*.tfstate.backup`, `.createos/` (ASCII case-insensitive); and VCS metadata
//!    (`.git`, `.hg`, `.svn`, `.jj`). This stops credential *shapes*, it is not secret detection.
//!    The same rules keep a sandbox from writing such paths here ([`crate::transfer::protect`]).
//! 6. On disk: names reached through a symlinked directory, missing files and special files
//!    (fifos, sockets, devices) are dropped.
//! 7. In Git: tracked files that the ignore rules match now are dropped (a credential committed
//!    once and ignored later stays home). `git ls-files --cached --ignored --exclude-standard`
//!    names them — the same matching as `git check-ignore --no-index` on each tracked name —
//!    in the run that also lists the untracked ignored names, started with the candidates'
//!    run and collected only after the files were looked at.
//! 8. Nothing left is an error.
//!
//! Symlinks are archived as links: only the target text travels, the link is never followed,
//! and a link pointing outside the project is kept as such a link (extraction recreates the
//! link; it does not copy what it points to). No archived path lies below an archived
//! symlink, so extracting cannot write through one.
//!
//! User exclude forms: `path` (that path, or everything under it if it is a directory),
//! `dir/` (everything under `dir`), `*.ext` or another glob without `/` (any name on the path,
//! at any depth), and globs with a `/` (`docs/**/*.png`, anchored at the project root). A
//! leading `/` anchors, a trailing `/` means directories only, `!negation` is refused.

mod archive;
mod excludes;
mod filters;
mod git;
mod gzip;
mod inspect;
mod prefetch;
mod relpath;
mod root;
pub(crate) mod rules;
pub(crate) mod stream;
mod types;
mod walk;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use stream::TarStream;
pub use types::{
    Compression, DropReason, Entry, EntryKind, GitMode, ListingSource, SnapshotOptions,
};

use archive::Plan;
use excludes::Excludes;
use filters::Filters;
use relpath::{to_path, unsafe_name};

use crate::error::{Error, Result};

/// The file list of a project directory, ready to be archived.
#[derive(Debug, Clone)]
pub struct Snapshot {
    plan: Arc<Plan>,
    dropped: Vec<(PathBuf, DropReason)>,
    source: ListingSource,
}

impl Snapshot {
    /// Build the file list of `dir` (blocking: it runs `git` and reads the file system; see
    /// [`Snapshot::scan_async`] from async code).
    pub fn scan(dir: impl AsRef<Path>, options: &SnapshotOptions) -> Result<Snapshot> {
        let filters = Filters::new(Excludes::parse(&options.excludes)?);
        let root = root::resolve(
            dir.as_ref(),
            options.home_dir.as_deref(),
            options.allow_sensitive_root,
        )?;

        let work_tree = match options.git {
            GitMode::Auto => git::Git::new(&root).work_tree()?,
            GitMode::Off => None,
        };
        let mut dropped: Vec<(Vec<u8>, DropReason)> = Vec::new();
        let (candidates, gitlinks, ignored) = match &work_tree {
            Some(_) => {
                let listing = git::Git::new(&root).list()?;
                (listing.candidates, listing.gitlinks, Some(listing.ignored))
            }
            None => {
                let walked = walk::walk(&root, &filters)?;
                dropped.extend(walked.dropped);
                (walked.candidates, BTreeSet::new(), None)
            }
        };
        let survivors = filter_names(candidates, &gitlinks, &filters, &mut dropped);
        let inspected = inspect::inspect(&root, survivors)?;
        dropped.extend(inspected.dropped);
        let mut entries = inspected.entries;

        // collected only now: Git lists them while the files were being looked at
        let mut pruned = false;
        if let Some(running) = ignored {
            let ignored = running.ignored()?;
            // untracked ignored names head the list, as they were the first known
            dropped.splice(
                0..0,
                ignored
                    .untracked
                    .into_iter()
                    .map(|n| (n, DropReason::Ignored)),
            );
            // tracked files the ignore rules match now stay home (after the other filters, so
            // a denied or missing file keeps that more telling reason)
            if !ignored.tracked.is_empty() {
                let before = entries.len();
                entries.retain(|(name, _, _)| {
                    let ignored = ignored.tracked.contains(name);
                    if ignored {
                        dropped.push((name.clone(), DropReason::Ignored));
                    }
                    !ignored
                });
                pruned = entries.len() < before;
            }
        }

        if entries.is_empty() {
            let why = if dropped.is_empty() {
                "it holds no files".to_string()
            } else {
                format!(
                    "all {} paths found were left out (ignored, excluded or denied)",
                    dropped.len()
                )
            };
            return Err(Error::invalid(
                "project directory",
                format!("nothing to upload from {}: {why}", root.display()),
            ));
        }

        // keep only the directories the surviving entries still need (all of them, unless
        // entries were taken out after the directories were collected)
        let dirs: Vec<Entry> = if pruned {
            let mut needed: BTreeSet<&[u8]> = BTreeSet::new();
            for (name, _, _) in &entries {
                needed.extend(relpath::ancestors(name));
            }
            inspected
                .dirs
                .iter()
                .filter(|(n, _)| needed.contains(n.as_slice()))
                .map(|(_, d)| d.clone())
                .collect()
        } else {
            inspected.dirs.into_values().collect()
        };

        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let files = entries
            .into_iter()
            .map(|(_, entry, id)| (entry, id))
            .collect();
        dropped.sort_by(|a, b| a.0.cmp(&b.0));
        let dropped = dropped.into_iter().map(|(n, r)| (to_path(&n), r)).collect();
        let source = match work_tree {
            Some(work_tree) => ListingSource::Git { work_tree },
            None => ListingSource::Walk,
        };
        Ok(Snapshot {
            plan: Arc::new(Plan::new(root, files, dirs)),
            dropped,
            source,
        })
    }

    /// [`Snapshot::scan`] on a blocking thread, for async callers.
    pub async fn scan_async(dir: impl Into<PathBuf>, options: SnapshotOptions) -> Result<Snapshot> {
        let dir = dir.into();
        tokio::task::spawn_blocking(move || Snapshot::scan(dir, &options))
            .await
            .map_err(|e| {
                Error::io(
                    "the snapshot scan thread failed",
                    std::io::Error::other(e.to_string()),
                )
            })?
    }

    /// The resolved (canonical) project directory.
    pub fn root(&self) -> &Path {
        &self.plan.root
    }

    /// The files and symlinks to archive, sorted by path.
    pub fn files(&self) -> &[Entry] {
        &self.plan.files
    }

    /// The directories implied by [`files`](Self::files) (archived with their own modes).
    pub fn directories(&self) -> &[Entry] {
        &self.plan.dirs
    }

    /// Every path left out, with why, sorted by path.
    pub fn dropped(&self) -> &[(PathBuf, DropReason)] {
        &self.dropped
    }

    /// Whether Git or a directory walk produced the candidates.
    pub fn source(&self) -> &ListingSource {
        &self.source
    }

    /// Sum of the file sizes (the payload, without tar overhead).
    pub fn content_bytes(&self) -> u64 {
        self.plan.files.iter().map(|f| f.size).sum()
    }

    /// The exact length of the uncompressed tar ([`Compression::None`]), computed from the
    /// headers, for a `Content-Length`. Writing fails rather than produce another length.
    pub fn exact_size(&self) -> u64 {
        self.plan.tar_size()
    }

    /// Write the uncompressed tar into `out`.
    pub fn write_tar(&self, out: impl Write) -> Result<()> {
        self.write_archive(out, Compression::None)
    }

    /// Write the archive with `compression` into `out`.
    pub fn write_archive(&self, out: impl Write, compression: Compression) -> Result<()> {
        let mut out = archive::write(&self.plan, out, compression)?;
        out.flush().map_err(|e| Error::io("writing the archive", e))
    }

    /// The archive as a stream of chunks, written by a blocking thread into a bounded channel
    /// (memory stays bounded; the total length is not known up front). Byte for byte the same
    /// as [`write_archive`](Self::write_archive) with the same `compression`.
    pub fn tar_stream(&self, compression: Compression) -> TarStream {
        TarStream::spawn(Arc::clone(&self.plan), compression)
    }
}

/// Steps 3–5: unsafe names, gitlinks and nested repositories, user excludes, deny-list, VCS.
fn filter_names(
    candidates: Vec<Vec<u8>>,
    gitlinks: &BTreeSet<Vec<u8>>,
    filters: &Filters,
    dropped: &mut Vec<(Vec<u8>, DropReason)>,
) -> Vec<Vec<u8>> {
    let mut kept = Vec::with_capacity(candidates.len());
    for name in candidates {
        match drop_reason(&name, gitlinks, filters) {
            Some(reason) => {
                let mut name = name;
                if name.len() > 1 && name.ends_with(b"/") {
                    name.pop();
                }
                dropped.push((name, reason));
            }
            None => kept.push(name),
        }
    }
    kept
}

fn drop_reason(name: &[u8], gitlinks: &BTreeSet<Vec<u8>>, filters: &Filters) -> Option<DropReason> {
    // Git reports an untracked nested repository as a single `dir/`
    if let Some(dir) = name.strip_suffix(b"/") {
        if let Some(why) = unsafe_name(dir) {
            return Some(DropReason::Escapes(why));
        }
        return Some(DropReason::NestedRepository);
    }
    if let Some(why) = unsafe_name(name) {
        return Some(DropReason::Escapes(why));
    }
    if let Some(link) = relpath::ancestors(name)
        .chain([name])
        .find(|p| gitlinks.contains(*p))
    {
        return Some(DropReason::Gitlink {
            submodule: to_path(link),
        });
    }
    filters.file_reason(name)
}

/// How the name filters judge one relative name (see [`classify_names`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameVerdict {
    /// Why the name would be left out as a listed file; `None`: it would be archived.
    pub as_file: Option<DropReason>,
    /// Why a walk would prune the name, and everything below it, as a directory; `None`: the
    /// walk descends into it.
    pub as_dir: Option<DropReason>,
}

/// The name filters of steps 3–5 (unsafe names, gitlinks, user excludes, the credential
/// deny-list and VCS metadata) exactly as [`Snapshot::scan`] applies them, without touching the
/// disk: one [`NameVerdict`] for each of `names` (relative, `/`-separated), in order.
/// `excludes` are parsed as [`SnapshotOptions::excludes`] are (a bad pattern is an
/// [`Error::InvalidInput`] on `excludes`); `gitlinks` are the
/// submodule paths whose whole subtree is left out.
///
/// A sync scopes the guest's listing with it, the agent tools refuse deny-listed paths with it,
/// and the `path_filter` fuzz target checks it.
///
/// ```
/// use createos_sandbox::snapshot::{classify_names, DropReason};
/// let verdicts = classify_names(&["*.log".into()], &[], &[b"src/main.rs", b"a/b.log", b".env"]).unwrap();
/// assert_eq!(verdicts[0].as_file, None);
/// assert!(matches!(verdicts[1].as_file, Some(DropReason::UserExclude(_))));
/// assert!(matches!(verdicts[2].as_file, Some(DropReason::DenyList(_))));
/// ```
pub fn classify_names(
    excludes: &[String],
    gitlinks: &[Vec<u8>],
    names: &[&[u8]],
) -> Result<Vec<NameVerdict>> {
    let filters = Filters::new(Excludes::parse(excludes)?);
    let gitlinks: BTreeSet<Vec<u8>> = gitlinks.iter().cloned().collect();
    let verdict = |name: &&[u8]| NameVerdict {
        as_file: drop_reason(name, &gitlinks, &filters),
        as_dir: filters.dir_reason(name),
    };
    Ok(names.iter().map(verdict).collect())
}
