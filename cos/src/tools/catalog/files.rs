//! Catalog entries of the file tools: text file operations on the session sandbox through
//! the guest helper, and push/pull of files and directories between this machine and any
//! sandbox.

use serde_json::json;

use super::{boolean, int, s, tool, ToolDef, SID};

const READ: &str = "Read a UTF-8 text file of the session sandbox as numbered `N: text` lines (at most 2000 per call, files up to 1 MiB), or list a directory's names. Relative paths resolve under the session working directory; absolute paths inside the local project map onto it. Binary files are refused: move them with sandbox_pull.";
const WRITE: &str = "Create or replace a text file in the session sandbox with `content` (atomic: written beside it, then renamed). Parent directories are created and an existing file keeps its mode. For binary or large files use sandbox_push.";
const EDIT: &str = "Replace `oldString` with `newString` in a text file of the session sandbox. `oldString` must occur exactly once (add surrounding lines to make it unique) unless `replaceAll` is true; otherwise nothing changes. CRLF files are matched line-ending aware.";
const PATCH: &str = "Apply a multi-file patch in the session sandbox. Grammar:\n\
*** Begin Patch\n\
*** Add File: <path>        then every line of the new file prefixed with `+`; the file must not exist\n\
*** Delete File: <path>     a regular file\n\
*** Update File: <path>     optionally followed by `*** Move to: <new path>` (must not exist), then hunks:\n\
@@ [a line of context to locate the hunk]\n\
 <context line>  (leading space)\n\
-<removed line>\n\
+<added line>\n\
*** End of File             (optional: the hunk ends at the end of the file)\n\
*** End Patch\n\
Each hunk's context and removed lines must match exactly once. Paths are mapped like sandbox_read's; each file may appear once. Every hunk is checked before the first write, so a patch that does not apply changes nothing; each file is written atomically, but the patch as a whole is not a transaction.";
const GLOB: &str = "List files of the session sandbox matching a glob (ripgrep's selection: .gitignore/.ignore respected, hidden files only with `hidden`), sorted by path, one per line; `No matches found` when none.";
const GREP: &str = "Search file contents in the session sandbox for a regex (or a plain string with `literal`), case-insensitive unless `caseSensitive`. Prints `path:line:text` rows (ripgrep's file selection), or `No matches found`.";
const PUSH: &str = "Copy a local file or directory into a sandbox. `local_path` is resolved against the local project directory and must stay inside it (symlinks resolved); files the credential deny-list covers (.env, keys, .ssh/, …) are refused. A directory is sent as one archive through the project snapshot filters (Git's file list, .git/node_modules/.env/keys left out) and merged into `remote_path`. A `remote_path` ending in `/` keeps the local file name. Use it for binary files and whole trees; the text tools are for editing.";
const PULL: &str = "Copy a file or directory from a sandbox to this machine. `local_path` is resolved against the local project directory and must stay inside it (symlinks resolved); an existing local directory receives the remote name inside it. Files replace files; a directory is merged into the destination.";

const PATH: &str = "File path: relative to the session working directory, absolute in the sandbox, or absolute inside the local project (mapped onto the working directory).";

/// The file tools.
pub(super) fn tools() -> Vec<ToolDef> {
    vec![
        tool("read", READ, &[
            ("path", s(PATH)),
            ("offset", int("First line to show, 1-based (default 1).", 1, u32::MAX as u64)),
            ("limit", int("Lines to show (default and maximum 2000).", 1, 2000)),
        ], &["path"]),
        tool("write", WRITE, &[
            ("path", s(PATH)),
            ("content", json!({"type": "string", "description": "The whole new file content (UTF-8 text)."})),
        ], &["path", "content"]),
        tool("edit", EDIT, &[
            ("path", s(PATH)),
            ("oldString", s("Exact text to replace (must not be empty).")),
            ("newString", json!({"type": "string", "description": "Replacement text (may be empty to delete)."})),
            ("replaceAll", boolean("Replace every occurrence instead of requiring exactly one.")),
        ], &["path", "oldString", "newString"]),
        tool("patch", PATCH, &[("patchText", s("The whole patch, from `*** Begin Patch` to `*** End Patch`."))], &["patchText"]),
        tool("glob", GLOB, &[
            ("pattern", s("Glob, e.g. `**/*.rs` or `src/*.ts`.")),
            ("path", s("Directory to search (default: the working directory).")),
            ("hidden", boolean("Include hidden files and directories.")),
            ("limit", int("Most files listed (default 100).", 1, 2000)),
        ], &["pattern"]),
        tool("grep", GREP, &[
            ("pattern", s("Regular expression (ripgrep syntax), or plain text with `literal`; one line.")),
            ("path", s("Directory or file to search (default: the working directory).")),
            ("include", s("Only files matching this glob, e.g. `*.py`.")),
            ("literal", boolean("Treat the pattern as plain text.")),
            ("caseSensitive", boolean("Match case exactly (default: ignore case).")),
            ("limit", int("Most matching lines shown (default 100).", 1, 2000)),
        ], &["pattern"]),
        tool("push", PUSH, &[
            ("sandbox_id", s(SID)),
            ("local_path", s("Local file or directory inside the project: relative to the project directory, or absolute within it.")),
            ("remote_path", s("Absolute destination path in the sandbox.")),
        ], &["sandbox_id", "local_path", "remote_path"]),
        tool("pull", PULL, &[
            ("sandbox_id", s(SID)),
            ("local_path", s("Local destination inside the project: relative to the project directory, or absolute within it.")),
            ("remote_path", s("Absolute path of the file or directory in the sandbox.")),
        ], &["sandbox_id", "local_path", "remote_path"]),
    ]
}
