//! Typed options and results of the guest operations (the helper's protocol version 1; see
//! guest/README.md). Results tolerate missing fields; paths that are not valid UTF-8 come with
//! a `*_b64` copy of their raw bytes.

use serde::{Deserialize, Serialize};

use crate::api::open_enum;

open_enum! {
    /// Kind of a file system entry.
    #[derive(Default)]
    FileType {
        /// A regular file.
        #[default]
        File = "file",
        /// A directory.
        Directory = "directory",
        /// A symbolic link (never followed).
        Symlink = "symlink",
        /// A named pipe.
        Fifo = "fifo",
        /// A Unix socket.
        Socket = "socket",
        /// A character device.
        CharDevice = "char_device",
        /// A block device.
        BlockDevice = "block_device",
        /// Could not be determined.
        Unknown = "unknown",
    }
}

open_enum! {
    /// What a patch did to one file.
    #[derive(Default)]
    PatchAction {
        /// Created.
        #[default]
        Add = "add",
        /// Changed in place.
        Update = "update",
        /// Deleted.
        Delete = "delete",
        /// Changed and renamed (`from` is the old path).
        Move = "move",
    }
}

/// Options of [`super::Guest::read`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// First line to show, 1-based (default 1).
    pub offset: Option<u64>,
    /// Lines to show, 1–2000 (default 2000).
    pub limit: Option<u64>,
}

impl ReadOptions {
    /// Start at line `offset` (1-based).
    pub fn offset(mut self, offset: u64) -> Self {
        self.offset = Some(offset);
        self
    }

    /// Show at most `limit` lines.
    pub fn limit(mut self, limit: u64) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// Result of [`super::Guest::read`]: a window of a text file, or a directory's names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ReadResult {
    /// A text file.
    File(FileText),
    /// A directory.
    Directory(DirectoryNames),
}

impl ReadResult {
    /// The rendered text (`N: line` rows for a file, one name per row for a directory).
    pub fn content(&self) -> &str {
        match self {
            ReadResult::File(f) => &f.content,
            ReadResult::Directory(d) => &d.content,
        }
    }

    /// The absolute guest path read.
    pub fn path(&self) -> &str {
        match self {
            ReadResult::File(f) => &f.path,
            ReadResult::Directory(d) => &d.path,
        }
    }
}

/// Lines of a text file, rendered `N: text` (CR of CRLF lines dropped).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileText {
    /// Absolute guest path.
    #[serde(default)]
    pub path: String,
    /// The rendered lines, joined with `\n`.
    #[serde(default)]
    pub content: String,
    /// First line shown (1-based).
    #[serde(default)]
    pub offset: u64,
    /// Lines shown.
    #[serde(default)]
    pub lines: u64,
    /// Lines in the file.
    #[serde(default)]
    pub total_lines: u64,
    /// More lines follow the window.
    #[serde(default)]
    pub truncated: bool,
    /// Offset of the next window, when truncated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
}

/// Names in a directory (sorted, directories with a trailing `/`), at most 2000.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectoryNames {
    /// Absolute guest path.
    #[serde(default)]
    pub path: String,
    /// The names shown.
    #[serde(default)]
    pub entries: Vec<String>,
    /// Entries in the directory.
    #[serde(default)]
    pub total_entries: u64,
    /// Not every entry is shown.
    #[serde(default)]
    pub truncated: bool,
    /// The names joined with `\n`.
    #[serde(default)]
    pub content: String,
}

/// Result of [`super::Guest::write`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteResult {
    /// Absolute guest path.
    #[serde(default)]
    pub path: String,
    /// Bytes written (UTF-8).
    #[serde(default)]
    pub bytes: u64,
    /// The file did not exist before.
    #[serde(default)]
    pub created: bool,
}

/// Result of [`super::Guest::edit`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditResult {
    /// Absolute guest path.
    #[serde(default)]
    pub path: String,
    /// Occurrences replaced.
    #[serde(default)]
    pub replacements: u64,
}

/// One file changed by [`super::Guest::patch`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchChange {
    /// Absolute guest path (the new path of a move).
    #[serde(default)]
    pub path: String,
    /// What was done.
    #[serde(default)]
    pub action: PatchAction,
    /// The old path of a move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// Options of [`super::Guest::glob`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GlobOptions {
    /// Directory to search (default: the working directory).
    pub path: Option<String>,
    /// Most files returned, 1–2000 (default 100).
    pub limit: Option<u64>,
    /// Include hidden files.
    pub hidden: bool,
}

impl GlobOptions {
    /// Search under `path`.
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// Return at most `limit` files.
    pub fn limit(mut self, limit: u64) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Include hidden files.
    pub fn hidden(mut self, hidden: bool) -> Self {
        self.hidden = hidden;
        self
    }
}

/// Result of [`super::Guest::glob`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlobResult {
    /// Matching files, sorted; relative to the working directory when inside it.
    #[serde(default)]
    pub files: Vec<String>,
    /// More files matched than the limit.
    #[serde(default)]
    pub truncated: bool,
    /// The list as text (`No matches found` when empty).
    #[serde(default)]
    pub text: String,
}

/// Options of [`super::Guest::grep`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GrepOptions {
    /// Directory or file to search (default: the working directory).
    pub path: Option<String>,
    /// Only files matching this glob.
    pub include: Option<String>,
    /// The pattern is a plain string, not a regex.
    pub literal: bool,
    /// Match case exactly (default: ignore case).
    pub case_sensitive: bool,
    /// Most matches returned, 1–2000 (default 100).
    pub limit: Option<u64>,
}

impl GrepOptions {
    /// Search `path` (a directory or one file).
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// Only files matching `glob`.
    pub fn include(mut self, glob: impl Into<String>) -> Self {
        self.include = Some(glob.into());
        self
    }

    /// Treat the pattern as a plain string.
    pub fn literal(mut self, literal: bool) -> Self {
        self.literal = literal;
        self
    }

    /// Match case exactly.
    pub fn case_sensitive(mut self, exact: bool) -> Self {
        self.case_sensitive = exact;
        self
    }

    /// Return at most `limit` matches.
    pub fn limit(mut self, limit: u64) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// One matching line.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrepMatch {
    /// File, relative to the working directory when inside it.
    #[serde(default)]
    pub path: String,
    /// Line number (1-based).
    #[serde(default)]
    pub line: u64,
    /// The line (or `[Omitted long matching line]` over 2000 bytes).
    #[serde(default)]
    pub text: String,
}

/// Result of [`super::Guest::grep`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrepResult {
    /// Matches in file order.
    #[serde(default)]
    pub matches: Vec<GrepMatch>,
    /// More lines matched than the limit.
    #[serde(default)]
    pub truncated: bool,
    /// `path:line:text` rows (`No matches found` when empty).
    #[serde(default)]
    pub text: String,
}

/// Result of [`super::Guest::stat`] (symlinks are not followed).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FileStat {
    /// Absolute guest path.
    #[serde(default)]
    pub path: String,
    /// Kind of entry.
    #[serde(rename = "type", default)]
    pub kind: FileType,
    /// Size in bytes.
    #[serde(default)]
    pub size: u64,
    /// Permission bits in octal, e.g. `0644`.
    #[serde(default)]
    pub mode: String,
    /// Modification time, seconds since the epoch.
    #[serde(default)]
    pub mtime: f64,
    /// Owner.
    #[serde(default)]
    pub uid: u64,
    /// Group.
    #[serde(default)]
    pub gid: u64,
    /// Symlink target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Raw target bytes (base64) when not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_b64: Option<String>,
}

/// Options of [`super::Guest::list`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// Directory to list (default: the working directory).
    pub path: Option<String>,
    /// Descend into subdirectories.
    pub recursive: bool,
    /// Most entries, 1–10000 (default 1000).
    pub limit: Option<u64>,
}

impl ListOptions {
    /// List `path`.
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// Descend into subdirectories.
    pub fn recursive(mut self, recursive: bool) -> Self {
        self.recursive = recursive;
        self
    }

    /// Return at most `limit` entries.
    pub fn limit(mut self, limit: u64) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// One entry of a listing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListEntry {
    /// Path relative to the listed directory.
    #[serde(default)]
    pub name: String,
    /// Raw name bytes (base64) when not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_b64: Option<String>,
    /// Kind of entry.
    #[serde(rename = "type", default)]
    pub kind: FileType,
    /// Size in bytes.
    #[serde(default)]
    pub size: u64,
    /// Symlink target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Raw target bytes (base64) when not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_b64: Option<String>,
}

/// A subdirectory that could not be read during a recursive listing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListError {
    /// Path relative to the listed directory.
    #[serde(default)]
    pub path: String,
    /// Why.
    #[serde(default)]
    pub message: Option<String>,
}

/// Result of [`super::Guest::list`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    /// Absolute guest path of the listed directory.
    #[serde(default)]
    pub path: String,
    /// Entries sorted by name (depth first when recursive).
    #[serde(default)]
    pub entries: Vec<ListEntry>,
    /// More entries exist than the limit.
    #[serde(default)]
    pub truncated: bool,
    /// Unreadable subdirectories (at most 100).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ListError>,
}

/// Result of [`super::Guest::mkdir`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MkdirResult {
    /// Absolute guest path.
    #[serde(default)]
    pub path: String,
    /// False when the directory already existed.
    #[serde(default)]
    pub created: bool,
}

/// Result of [`super::Guest::remove`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveResult {
    /// Absolute guest path.
    #[serde(default)]
    pub path: String,
    /// What it was.
    #[serde(rename = "type", default)]
    pub kind: FileType,
}

/// Result of [`super::Guest::move_path`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveResult {
    /// Old absolute guest path.
    #[serde(default)]
    pub from: String,
    /// New absolute guest path.
    #[serde(default)]
    pub to: String,
}

/// Options of [`super::Guest::manifest`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManifestOptions {
    /// Directory to describe (default: the working directory).
    pub path: Option<String>,
    /// Hash every regular file.
    pub sha256: bool,
    /// gitignore-style patterns of paths to leave out.
    pub excludes: Vec<String>,
}

impl ManifestOptions {
    /// Describe `path`.
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// Hash every regular file.
    pub fn sha256(mut self, hash: bool) -> Self {
        self.sha256 = hash;
        self
    }

    /// Leave out paths matching `pattern` (gitignore syntax).
    pub fn exclude(mut self, pattern: impl Into<String>) -> Self {
        self.excludes.push(pattern.into());
        self
    }
}

/// One file or symlink of a manifest.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// Path relative to the root.
    #[serde(default)]
    pub path: String,
    /// Raw path bytes (base64) when not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_b64: Option<String>,
    /// `file` or `symlink`.
    #[serde(rename = "type", default)]
    pub kind: FileType,
    /// Size in bytes.
    #[serde(default)]
    pub size: u64,
    /// Modification time, seconds since the epoch.
    #[serde(default)]
    pub mtime: f64,
    /// Modification time, nanoseconds since the epoch.
    #[serde(default)]
    pub mtime_ns: i64,
    /// Permission bits in octal.
    #[serde(default)]
    pub mode: String,
    /// Content hash (with [`ManifestOptions::sha256`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Symlink target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Raw target bytes (base64) when not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_b64: Option<String>,
}

/// Result of [`super::Guest::manifest`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Absolute guest path of the root.
    #[serde(default)]
    pub root: String,
    /// Entries.
    #[serde(default)]
    pub count: u64,
    /// Files and symlinks sorted by their raw path bytes.
    #[serde(default)]
    pub entries: Vec<ManifestEntry>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_result_is_tagged_by_type() {
        let f: ReadResult = serde_json::from_str(
            r#"{"type":"file","path":"/a","content":"1: x","offset":1,"lines":1,"total_lines":1,"truncated":false}"#,
        )
        .unwrap();
        assert_eq!(f.content(), "1: x");
        let d: ReadResult =
            serde_json::from_str(r#"{"type":"directory","path":"/d","entries":["a/"],"total_entries":1,"truncated":false,"content":"a/"}"#)
                .unwrap();
        assert!(matches!(d, ReadResult::Directory(ref n) if n.entries == ["a/"]));
    }

    #[test]
    fn unknown_kinds_are_kept() {
        let s: FileStat = serde_json::from_str(r#"{"path":"/x","type":"door","size":1}"#).unwrap();
        assert_eq!(s.kind, FileType::Other("door".into()));
    }
}
