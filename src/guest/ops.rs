//! The typed operations of [`Guest`]. Paths go through the guest's [`super::PathMap`] and
//! arguments are checked before anything is sent; the helper checks them again.

use serde_json::{json, Map, Value};

use super::models::*;
use super::Guest;
use crate::error::{Error, Result};

/// Line window of `read`, search limits, list limits (guest/README.md).
const MAX_READ_LIMIT: u64 = 2000;
const MAX_SEARCH_LIMIT: u64 = 2000;
const MAX_LIST_LIMIT: u64 = 10_000;

impl Guest {
    /// Read a UTF-8 text file (at most 1 MiB) as `N: line` rows, or list a directory's names.
    /// `offset` is 1-based; at most 2000 lines per call ([`FileText::next_offset`] continues).
    pub async fn read(&self, path: &str, options: ReadOptions) -> Result<ReadResult> {
        if options.offset == Some(0) {
            return Err(Error::invalid("offset", "lines are numbered from 1"));
        }
        check_limit("limit", options.limit, MAX_READ_LIMIT)?;
        let args = json!({ "path": self.paths.to_guest(path)?, "offset": options.offset, "limit": options.limit });
        self.call("read", args).await
    }

    /// Replace (or create) a text file atomically: a sibling temporary file renamed over it.
    /// An existing file keeps its mode; parent directories are created.
    ///
    /// ```no_run
    /// # async fn demo(guest: createos_sandbox::guest::Guest) -> createos_sandbox::Result<()> {
    /// let written = guest.write("src/config.toml", "port = 8080\n").await?;
    /// println!("{} bytes to {} (new: {})", written.bytes, written.path, written.created);
    /// # Ok(()) }
    /// ```
    pub async fn write(&self, path: &str, content: &str) -> Result<WriteResult> {
        let args = json!({ "path": self.paths.to_guest(path)?, "content": content });
        self.call("write", args).await
    }

    /// Replace `old` with `new` in a text file. `old` must occur exactly once unless
    /// `replace_all`; otherwise the file is left unchanged and the error code is `not_found`
    /// or `ambiguous` (with `details.count`). LF/CRLF are matched to the file's style.
    ///
    /// ```no_run
    /// # async fn demo(guest: createos_sandbox::guest::Guest) -> createos_sandbox::Result<()> {
    /// use createos_sandbox::guest::GuestErrorCode;
    /// match guest.edit("main.py", "DEBUG = True", "DEBUG = False", false).await {
    ///     Ok(done) => println!("{} replacement(s)", done.replacements),
    ///     Err(e) if e.guest_code() == Some(&GuestErrorCode::Ambiguous) => eprintln!("add context: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn edit(
        &self,
        path: &str,
        old: &str,
        new: &str,
        replace_all: bool,
    ) -> Result<EditResult> {
        if old.is_empty() {
            return Err(Error::invalid(
                "oldString",
                "must not be empty (use write to create a file)",
            ));
        }
        if old == new {
            return Err(Error::invalid(
                "newString",
                "is identical to oldString: nothing to change",
            ));
        }
        let args = json!({
            "path": self.paths.to_guest(path)?,
            "oldString": old,
            "newString": new,
            "replaceAll": replace_all,
        });
        self.call("edit", args).await
    }

    /// Apply a `*** Begin Patch` … `*** End Patch` text (add, delete, update, move sections).
    /// Its file headers are mapped like any other path. Every hunk is checked before the first
    /// write, so a patch that does not apply changes nothing; each write is atomic, but the
    /// patch as a whole is not a transaction (an I/O error midway lists `details.applied`).
    pub async fn patch(&self, patch: &str) -> Result<Vec<PatchChange>> {
        if patch.trim().is_empty() {
            return Err(Error::invalid("patch", "must not be empty"));
        }
        let args = json!({ "patch": self.paths.rewrite_patch(patch)? });
        self.call("patch", args).await
    }

    /// Files matching a glob (ripgrep's selection: ignore files, hidden files skipped unless
    /// asked), sorted by path.
    pub async fn glob(&self, pattern: &str, options: GlobOptions) -> Result<GlobResult> {
        if pattern.is_empty() {
            return Err(Error::invalid("pattern", "must not be empty"));
        }
        check_limit("limit", options.limit, MAX_SEARCH_LIMIT)?;
        let args = json!({
            "pattern": pattern,
            "path": self.paths.to_guest_opt(options.path.as_deref())?,
            "limit": options.limit,
            "hidden": options.hidden,
        });
        self.call("glob", args).await
    }

    /// Lines matching a regex (or a literal string), case-insensitive unless asked.
    pub async fn grep(&self, pattern: &str, options: GrepOptions) -> Result<GrepResult> {
        if pattern.is_empty() {
            return Err(Error::invalid("pattern", "must not be empty"));
        }
        if pattern.contains(['\n', '\r']) {
            return Err(Error::invalid(
                "pattern",
                "must be a single line (searches are line by line)",
            ));
        }
        if options.include.as_deref() == Some("") {
            return Err(Error::invalid("include", "must not be empty"));
        }
        check_limit("limit", options.limit, MAX_SEARCH_LIMIT)?;
        let args = json!({
            "pattern": pattern,
            "path": self.paths.to_guest_opt(options.path.as_deref())?,
            "include": options.include,
            "literal": options.literal,
            "caseSensitive": options.case_sensitive,
            "limit": options.limit,
        });
        self.call("grep", args).await
    }

    /// Type, size, mode, owner and mtime of a path (symlinks are not followed).
    pub async fn stat(&self, path: &str) -> Result<FileStat> {
        self.call("stat", json!({ "path": self.paths.to_guest(path)? }))
            .await
    }

    /// Entries of a directory (optionally recursive), sorted by name.
    pub async fn list(&self, options: ListOptions) -> Result<Listing> {
        check_limit("limit", options.limit, MAX_LIST_LIMIT)?;
        let args = json!({
            "path": self.paths.to_guest_opt(options.path.as_deref())?,
            "recursive": options.recursive,
            "limit": options.limit,
        });
        self.call("list", args).await
    }

    /// Create a directory (with its parents when `parents`). An existing directory is not an
    /// error ([`MkdirResult::created`] is false).
    pub async fn mkdir(&self, path: &str, parents: bool) -> Result<MkdirResult> {
        self.call(
            "mkdir",
            json!({ "path": self.paths.to_guest(path)?, "parents": parents }),
        )
        .await
    }

    /// Remove a file, symlink or empty directory (any directory with `recursive`). `/`, the
    /// working directory and its parents are refused.
    pub async fn remove(&self, path: &str, recursive: bool) -> Result<RemoveResult> {
        self.call(
            "remove",
            json!({ "path": self.paths.to_guest(path)?, "recursive": recursive }),
        )
        .await
    }

    /// Rename `from` to `to` (across file systems too). An existing target is refused (code
    /// `exists`) unless `overwrite`.
    pub async fn move_path(&self, from: &str, to: &str, overwrite: bool) -> Result<MoveResult> {
        let args = json!({ "from": self.paths.to_guest(from)?, "to": self.paths.to_guest(to)?, "overwrite": overwrite });
        self.call("move", args).await
    }

    /// Every file and symlink under a directory with size, mtime, mode and optionally SHA-256
    /// (for comparing trees).
    pub async fn manifest(&self, options: ManifestOptions) -> Result<Manifest> {
        if options.excludes.iter().any(String::is_empty) {
            return Err(Error::invalid("excludes", "patterns must not be empty"));
        }
        let args = json!({
            "path": self.paths.to_guest_opt(options.path.as_deref())?,
            "sha256": options.sha256,
            "excludes": options.excludes,
        });
        self.call("manifest", args).await
    }

    /// Run operation `op` with JSON `args` in the helper's own vocabulary (see
    /// guest/README.md) and return its `result` as JSON: for callers that pass tool arguments
    /// through. `path`, `from` and `to` strings and the `patch` text are mapped like the typed
    /// methods do.
    pub async fn call_json(&self, op: &str, args: Value) -> Result<Value> {
        let mut args = match args {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            _ => return Err(Error::invalid("arguments", "must be a JSON object")),
        };
        for key in ["path", "from", "to"] {
            if let Some(Value::String(raw)) = args.get(key) {
                let mapped = self.paths.to_guest(raw)?;
                args.insert(key.to_string(), Value::String(mapped));
            }
        }
        if op == "patch" {
            if let Some(Value::String(text)) = args.get("patch") {
                let mapped = self.paths.rewrite_patch(text)?;
                args.insert("patch".to_string(), Value::String(mapped));
            }
        }
        self.call_value(op, Value::Object(args)).await
    }
}

fn check_limit(field: &str, value: Option<u64>, max: u64) -> Result<()> {
    match value {
        Some(v) if v == 0 || v > max => Err(Error::invalid(
            field,
            format!("{v} is not between 1 and {max}"),
        )),
        _ => Ok(()),
    }
}
