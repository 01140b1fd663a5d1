//! The name-based filters shared by the Git listing and the walk, in their fixed order: user
//! excludes first (nothing later can bring a path back), then the credential deny-list, then
//! VCS metadata.

use super::excludes::Excludes;
use super::rules;
use super::types::DropReason;

/// User excludes plus the built-in rules.
#[derive(Debug, Clone)]
pub(crate) struct Filters {
    excludes: Excludes,
}

impl Filters {
    pub(crate) fn new(excludes: Excludes) -> Self {
        Filters { excludes }
    }

    /// Why the file or symlink `name` is left out, if it is.
    pub(crate) fn file_reason(&self, name: &[u8]) -> Option<DropReason> {
        if let Some(pattern) = self.excludes.matching(name) {
            return Some(DropReason::UserExclude(pattern.to_string()));
        }
        if let Some(rule) = rules::denied_by(name) {
            return Some(DropReason::DenyList(rule));
        }
        rules::is_vcs(name).then_some(DropReason::Vcs)
    }

    /// Why everything below the directory `dir` is left out, if it is (lets a walk prune it).
    pub(crate) fn dir_reason(&self, dir: &[u8]) -> Option<DropReason> {
        if let Some(pattern) = self.excludes.covering_dir(dir) {
            return Some(DropReason::UserExclude(pattern.to_string()));
        }
        if let Some(rule) = rules::denied_dir(dir) {
            return Some(DropReason::DenyList(rule));
        }
        rules::is_vcs(dir).then_some(DropReason::Vcs)
    }
}
