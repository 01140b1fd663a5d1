//! Local paths of `sandbox_push`/`sandbox_pull`: the agent rule of [`crate::tools::confine`]
//! (inside the project once symlinks are resolved; never VCS metadata, a deny-listed path, the
//! home directory or a credential folder), so an agent can neither send files from elsewhere
//! on this machine (keys, the CreateOS credentials) nor overwrite them (`~/.bashrc`, `.git/`).

use std::path::{Path, PathBuf};

use crate::tools::confine::{self, Expect};
use crate::tools::ToolError;

/// `given` (argument `field`) resolved and confined to `project`; it may not exist yet (a pull
/// destination), push checks that it does.
pub(in crate::tools::calls) fn resolve(
    project: &Path,
    field: &str,
    given: &Path,
) -> Result<PathBuf, ToolError> {
    confine::agent_path(project, field, given, Expect::Destination)
}

/// Refuse sending `path` (resolved, inside `project`): the same rule once its kind is known (a
/// directory is judged as a directory, so `.ssh/` is refused as a whole).
pub(in crate::tools::calls) fn check_sendable(
    project: &Path,
    field: &str,
    path: &Path,
    is_dir: bool,
) -> Result<(), ToolError> {
    let expect = if is_dir {
        Expect::Dir
    } else {
        Expect::Existing
    };
    confine::agent_path(project, field, path, expect).map(drop)
}
