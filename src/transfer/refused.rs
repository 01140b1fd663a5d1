//! What the unpacker did not write, and why: named in every result that comes back from a
//! sandbox (pull, sync, artifacts).

use std::fmt;

use serde::ser::SerializeStruct;
use serde::Serialize;

use super::protect::Protection;

/// An entry a sandbox sent that was not written here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The entry's name as the sandbox sent it (lossy UTF-8, control characters escaped so
    /// a newline in a name cannot forge a line of output).
    pub path: String,
    /// Why it was refused.
    pub reason: RefuseReason,
}

impl Refused {
    pub(crate) fn new(raw: &[u8], reason: RefuseReason) -> Self {
        Refused {
            path: shown(raw),
            reason,
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

/// `{"path", "reason": <code>, "message"}`.
impl Serialize for Refused {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Refused", 3)?;
        s.serialize_field("path", &self.path)?;
        s.serialize_field("reason", self.reason.code())?;
        s.serialize_field("message", &self.reason.to_string())?;
        s.end()
    }
}

/// Why an entry was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefuseReason {
    /// An absolute name.
    Absolute,
    /// A `..` component.
    ParentDir,
    /// A NUL byte or an empty component where none may be.
    BadName,
    /// A protected local path (VCS metadata, the deny-list, `~/.createos`).
    Protected(Protection),
    /// Not among the paths the request asked for (the sync plan, the named artifact).
    NotRequested,
    /// Below a name the archive made a symlink: it would be written through the link.
    ThroughLink {
        /// The symlink's name.
        link: String,
    },
    /// A symlink whose target leaves the destination (absolute, `..` past its root, or
    /// through other links).
    LinkLeaves {
        /// The target as sent.
        target: String,
    },
    /// A symlink pointing at a protected path inside the destination.
    LinkToProtected {
        /// The target as sent.
        target: String,
        /// What it points at.
        protection: Protection,
    },
    /// A hard link whose target is not a regular file unpacked earlier from the same archive.
    HardLink {
        /// The target as sent.
        target: String,
    },
    /// A device, FIFO, socket or an entry type this client does not know.
    Special {
        /// What it is.
        kind: &'static str,
    },
    /// Setuid, setgid or sticky bits.
    SetId {
        /// The mode as sent.
        mode: u32,
    },
    /// What stands here already (or earlier in the archive) does not fit: a directory where a
    /// file goes, or a file or symlink where a directory goes.
    Conflict {
        /// What was found.
        found: String,
    },
}

impl RefuseReason {
    /// A stable, machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            RefuseReason::Absolute => "absolute-path",
            RefuseReason::ParentDir => "parent-dir",
            RefuseReason::BadName => "bad-name",
            RefuseReason::Protected(_) => "protected",
            RefuseReason::NotRequested => "not-requested",
            RefuseReason::ThroughLink { .. } => "through-symlink",
            RefuseReason::LinkLeaves { .. } => "symlink-leaves",
            RefuseReason::LinkToProtected { .. } => "symlink-to-protected",
            RefuseReason::HardLink { .. } => "hard-link",
            RefuseReason::Special { .. } => "special-file",
            RefuseReason::SetId { .. } => "set-id-bits",
            RefuseReason::Conflict { .. } => "conflict",
        }
    }
}

impl fmt::Display for RefuseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefuseReason::Absolute => f.write_str("absolute path"),
            RefuseReason::ParentDir => f.write_str("`..` component"),
            RefuseReason::BadName => f.write_str("NUL byte in the name"),
            RefuseReason::Protected(why) => write!(f, "{why}"),
            RefuseReason::NotRequested => f.write_str("not among the paths asked for"),
            RefuseReason::ThroughLink { link } => {
                write!(f, "would be written through the symlink {link}")
            }
            RefuseReason::LinkLeaves { target } => {
                write!(f, "symlink to {target}, which leads outside the destination (or round a loop of links)")
            }
            RefuseReason::LinkToProtected { target, protection } => {
                write!(f, "symlink to {target}: {protection}")
            }
            RefuseReason::HardLink { target } => {
                write!(f, "hard link to {target}, which is not a regular file unpacked earlier from this archive")
            }
            RefuseReason::Special { kind } => write!(
                f,
                "{kind}; only files, directories and symlinks are unpacked"
            ),
            RefuseReason::SetId { mode } => {
                write!(f, "mode {mode:o} has setuid, setgid or sticky bits")
            }
            RefuseReason::Conflict { found } => write!(f, "{found}"),
        }
    }
}

/// A name for messages: lossy UTF-8 with control characters escaped.
pub(crate) fn shown(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).escape_debug().to_string()
}

/// Up to `limit` refusals as lines (`refused <path>: <why>`), then how many more there were.
pub fn summary(refused: &[Refused], limit: usize) -> Vec<String> {
    let mut lines: Vec<String> = refused
        .iter()
        .take(limit)
        .map(|r| format!("refused {r}"))
        .collect();
    if refused.len() > limit {
        lines.push(format!(
            "… and {} more refused entries (see -o json)",
            refused.len() - limit
        ));
    }
    lines
}
