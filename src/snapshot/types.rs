//! The public value types of a snapshot: entries, drop reasons, options.

use std::fmt;
use std::path::PathBuf;

/// One path of the snapshot, relative to the project directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative path (`/`-separated on Unix; may hold non-UTF-8 bytes).
    pub path: PathBuf,
    /// What the path is.
    pub kind: EntryKind,
    /// Content length in bytes for files; 0 otherwise.
    pub size: u64,
    /// Permission bits (`mode & 0o7777`), as archived.
    pub mode: u32,
    /// Modification time, seconds since the Unix epoch, as archived (clamped at 0).
    pub mtime: u64,
}

/// The kind of an [`Entry`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file; its content is read when the archive is written.
    File,
    /// A symbolic link; only its target text is archived, it is never followed.
    Symlink {
        /// The link's target, exactly as stored in the link.
        target: PathBuf,
    },
    /// A directory implied by the files below it (only in [`Snapshot::directories`]).
    ///
    /// [`Snapshot::directories`]: super::Snapshot::directories
    Directory,
}

/// Why a candidate path was left out of the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropReason {
    /// A submodule (gitlink, mode 160000) or a path inside one.
    Gitlink {
        /// The submodule's path, relative to the project directory.
        submodule: PathBuf,
    },
    /// An untracked nested Git repository (Git lists it as one `dir/` entry).
    NestedRepository,
    /// Matched one of the user's excludes (the pattern as given).
    UserExclude(String),
    /// Matched the credential deny-list (the rule, e.g. `.env.*`, `.ssh/`, `*.pem`).
    DenyList(&'static str),
    /// Version-control metadata (`.git`, `.hg`, `.svn`, `.jj`).
    Vcs,
    /// Ignored by `.gitignore`/`.ignore` rules (or Git's own exclude files); includes tracked
    /// files that the rules ignore now. A whole ignored directory is reported once.
    Ignored,
    /// The name cannot be archived safely (absolute, `..`, NUL, or reached through a
    /// symlinked directory); the text says which.
    Escapes(&'static str),
    /// Listed by Git but no longer present in the work tree.
    Missing,
    /// Neither a regular file nor a symlink (the text names the kind: fifo, socket, …).
    Unsupported(&'static str),
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DropReason::Gitlink { submodule } => {
                write!(f, "inside Git submodule {}", submodule.display())
            }
            DropReason::NestedRepository => f.write_str("untracked nested Git repository"),
            DropReason::UserExclude(glob) => write!(f, "excluded by your pattern {glob:?}"),
            DropReason::DenyList(rule) => write!(f, "credential deny-list ({rule})"),
            DropReason::Vcs => f.write_str("version-control metadata"),
            DropReason::Ignored => f.write_str("ignored by .gitignore/.ignore rules"),
            DropReason::Escapes(why) => write!(f, "unsafe name: {why}"),
            DropReason::Missing => f.write_str("listed by Git but missing from the work tree"),
            DropReason::Unsupported(kind) => write!(f, "not a regular file or symlink ({kind})"),
        }
    }
}

/// Whether to use Git to list the files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GitMode {
    /// Use Git when the directory is inside a work tree (and `git` is installed); walk otherwise.
    #[default]
    Auto,
    /// Always walk the directory, even inside a Git work tree.
    Off,
}

/// How the candidate list was produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListingSource {
    /// `git ls-files` of the work tree whose top level is given.
    Git {
        /// The work tree's top-level directory (canonical).
        work_tree: PathBuf,
    },
    /// A directory walk honouring `.gitignore`/`.ignore` files found inside the project.
    Walk,
}

/// Options of [`Snapshot::scan`](super::Snapshot::scan).
#[derive(Debug, Clone, Default)]
pub struct SnapshotOptions {
    /// User excludes (see the module docs for the forms); applied before every other filter.
    pub excludes: Vec<String>,
    /// Git listing or plain walk.
    pub git: GitMode,
    /// The home directory to refuse (and whose credential folders are refused as roots);
    /// `None` uses the current user's home.
    pub home_dir: Option<PathBuf>,
    /// Allow a project directory inside `~/.ssh`, `~/.aws`, `~/.config`, … (like `--force`).
    pub allow_sensitive_root: bool,
}

impl SnapshotOptions {
    /// Default options: Git when available, no excludes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add one user exclude.
    pub fn exclude(mut self, pattern: impl Into<String>) -> Self {
        self.excludes.push(pattern.into());
        self
    }

    /// Choose Git listing or walking.
    pub fn git(mut self, mode: GitMode) -> Self {
        self.git = mode;
        self
    }
}

/// Compression of the archive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Compression {
    /// A plain tar.
    #[default]
    None,
    /// Gzip (`.tar.gz`), level 0–9.
    Gzip {
        /// 0 (store) to 9 (best).
        level: u32,
    },
}

impl Compression {
    /// Gzip at the default level (6).
    pub const fn gzip() -> Self {
        Compression::Gzip { level: 6 }
    }
}
