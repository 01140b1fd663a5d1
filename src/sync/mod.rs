//! Keeping a local directory and a guest directory in step.
//!
//! Modes ([`SyncMode`]):
//! - `once`: the whole project (its [`Snapshot`](crate::snapshot::Snapshot)) is uploaded as one archive; nothing is
//!   compared or deleted.
//! - `one-way`: local → guest; only files whose size or mtime differ (and whose SHA-256
//!   differs, when only the mtime does) travel; guest-only files are kept. Mtimes are
//!   compared to the nanosecond (pushed archives carry them exactly), so an edit that keeps
//!   the size within the same second is still seen.
//! - `mirror`: `one-way`, and guest-only files are deleted (the guest is made identical).
//! - `two-way`: changes travel both ways, deletions too, judged against the state of the last
//!   sync (a state file under the user's state directory, see [`state::default_state_dir`]).
//!   A **conflict** — both sides changed the same path since the last sync (or, on a first
//!   sync, both hold different content) — never clobbers anything: the local version stays
//!   at the path and is sent to the guest, the guest's version is saved next to it as
//!   `<name>.remote-conflict-<unix seconds>` (locally and, in the same sync, in the guest),
//!   and the conflict is listed in [`SyncReport::conflicts`]. A modification beats a deletion.
//!
//! Scope: the local side is the project's [`Snapshot`](crate::snapshot::Snapshot) (Git listing or walk, your excludes,
//! the credential deny-list, VCS metadata). Guest paths are judged by the same name filters,
//! and a guest path is out of scope when the local scan left that path (or a directory above
//! it) out — so a locally ignored `target/` in the guest is never deleted nor pulled.
//! Changed files travel in one tar stream per direction (a large set going up as a few
//! concurrent streams, each unpacked by its own `tar`, see `push`); the guest manifest comes from the
//! guest helper's `manifest` operation. Paths that are not valid UTF-8 are skipped and listed.
//!
//! Safety (checked before anything is sent, see [`safety`]): the local directory may not be
//! `/`, the home directory, a protected path (inside `.git`, …), inside `~/.createos`, or
//! inside `~/.ssh`, `~/.aws`, … unless `force`; the guest directory must be absolute, without
//! `..`, and not under `/etc`, `/usr`, `/proc`, ….
//!
//! What comes back from the guest is hostile: it is unpacked by [`crate::transfer::extract`]
//! (through directory handles; only the paths of the plan are placed), protected paths are
//! never written, and everything refused is named in [`SyncReport::refused`].
//!
//! ```no_run
//! # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
//! use std::sync::Arc;
//! use createos_sandbox::sync::{SyncMode, SyncOptions, Syncer};
//! use createos_sandbox::transfer::ApiRemote;
//! let syncer = Syncer::new(Arc::new(ApiRemote::new(sandbox)), "./app".as_ref(), "/root/app",
//!     SyncOptions::new(SyncMode::TwoWay).exclude("node_modules"))?;
//! let report = syncer.run().await?;
//! for c in &report.conflicts {
//!     eprintln!("conflict: {} (guest version kept as {})", c.path, c.remote_copy);
//! }
//! # Ok(()) }
//! ```

mod engine;
mod guest_side;
mod plan;
mod push;
pub mod safety;
pub mod state;
mod watch;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use serde::Serialize;

pub use engine::Syncer;

use crate::api::files::ProgressFn;
use crate::error::Error;
use crate::snapshot::GitMode;

/// How a sync moves changes (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SyncMode {
    /// Upload everything once.
    Once,
    /// Local → guest, guest extras kept.
    OneWay,
    /// Local → guest, guest extras deleted.
    Mirror,
    /// Both ways, conflicts kept side by side.
    TwoWay,
}

impl fmt::Display for SyncMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SyncMode::Once => "once",
            SyncMode::OneWay => "one-way",
            SyncMode::Mirror => "mirror",
            SyncMode::TwoWay => "two-way",
        })
    }
}

impl FromStr for SyncMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "once" => Ok(SyncMode::Once),
            "one-way" => Ok(SyncMode::OneWay),
            "mirror" => Ok(SyncMode::Mirror),
            "two-way" => Ok(SyncMode::TwoWay),
            other => Err(Error::invalid(
                "mode",
                format!("{other:?} is not one of once, one-way, mirror, two-way"),
            )),
        }
    }
}

/// Options of a [`Syncer`].
#[derive(Clone)]
pub struct SyncOptions {
    /// The mode.
    pub mode: SyncMode,
    /// Excludes, in the snapshot's forms (see [`crate::snapshot`]); applied to both sides.
    pub excludes: Vec<String>,
    /// Allow a local directory inside `~/.ssh`, `~/.aws`, `~/.config`, ….
    pub force: bool,
    /// The home directory for the safety rules (`None`: the current user's).
    pub home_dir: Option<PathBuf>,
    /// Where state files live (`None`: [`state::default_state_dir`]).
    pub state_dir: Option<PathBuf>,
    /// Git listing or a plain walk for the local side.
    pub git: GitMode,
    /// Transfer progress `(bytes, total)`, per archive.
    pub progress: Option<ProgressFn>,
}

impl fmt::Debug for SyncOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncOptions")
            .field("mode", &self.mode)
            .field("excludes", &self.excludes)
            .field("force", &self.force)
            .field("home_dir", &self.home_dir)
            .field("state_dir", &self.state_dir)
            .field("git", &self.git)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

impl SyncOptions {
    /// Defaults for `mode`: no excludes, no force, Git listing when available.
    pub fn new(mode: SyncMode) -> Self {
        SyncOptions {
            mode,
            excludes: Vec::new(),
            force: false,
            home_dir: None,
            state_dir: None,
            git: GitMode::Auto,
            progress: None,
        }
    }

    /// Add an exclude.
    pub fn exclude(mut self, pattern: impl Into<String>) -> Self {
        self.excludes.push(pattern.into());
        self
    }

    /// Allow sensitive local directories.
    pub fn force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }

    /// Keep state files in `dir`.
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_dir = Some(dir.into());
        self
    }

    /// Use `dir` as the home directory for the safety rules.
    pub fn home_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.home_dir = Some(dir.into());
        self
    }

    /// Report transfer progress.
    pub fn progress(mut self, report: impl Fn(u64, Option<u64>) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(report));
        self
    }
}

/// A path both sides changed (two-way).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Conflict {
    /// The path (relative); it holds the local version on both sides now.
    pub path: String,
    /// Where the guest's version was saved (relative), on both sides.
    pub remote_copy: String,
}

/// What one sync did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SyncReport {
    /// Sent to the guest (relative paths).
    pub pushed: Vec<String>,
    /// Fetched from the guest.
    pub pulled: Vec<String>,
    /// Deleted in the guest.
    pub deleted_remote: Vec<String>,
    /// Deleted locally.
    pub deleted_local: Vec<String>,
    /// Conflicts (two-way).
    pub conflicts: Vec<Conflict>,
    /// Paths left alone because their names are not UTF-8.
    pub skipped: Vec<String>,
    /// What the guest sent or listed that was not written here, with why: names leaving the
    /// directory, protected paths (VCS metadata, the deny-list; see
    /// [`crate::transfer::protect`]), entries nobody asked for, links leaving the directory, ….
    pub refused: Vec<crate::transfer::Refused>,
    /// Archive bytes sent.
    pub bytes_sent: u64,
    /// Archive bytes received.
    pub bytes_received: u64,
}

impl SyncReport {
    /// Nothing travelled and nothing was deleted.
    pub fn is_noop(&self) -> bool {
        self.pushed.is_empty()
            && self.pulled.is_empty()
            && self.deleted_remote.is_empty()
            && self.deleted_local.is_empty()
            && self.conflicts.is_empty()
    }
}
