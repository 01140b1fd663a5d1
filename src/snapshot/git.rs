//! Asking Git for the file list (`git` runs as a subprocess; every output is `-z` so names are
//! never quoted, and every exit code is checked so an incomplete listing is an error).

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::Error;

/// Variables that would point Git at another repository than the one the project is in.
const REPO_OVERRIDES: [&str; 6] =
    ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE"];

/// Git inside one project directory.
pub(crate) struct Git<'a> {
    root: &'a Path,
}

/// What the ls-files calls reported.
pub(crate) struct Listing {
    /// Tracked plus untracked-unignored names, sorted and de-duplicated.
    pub candidates: Vec<Vec<u8>>,
    /// Gitlinks (submodules), relative to the project directory.
    pub gitlinks: BTreeSet<Vec<u8>>,
    /// Untracked ignored names (whole ignored directories once, without the trailing `/`).
    pub ignored: Vec<Vec<u8>>,
    /// Tracked names that the ignore rules match now (they stay home), still being listed.
    pub ignored_tracked: Running,
}

/// A `git` command whose output a thread of its own is reading.
pub(crate) struct Running {
    what: String,
    root: PathBuf,
    output: std::thread::JoinHandle<io::Result<std::process::Output>>,
}

impl Running {
    fn start(git: &Git<'_>, args: &[&str]) -> Result<Running, Error> {
        let what = args.join(" ");
        let child = git.command().args(args).spawn().map_err(|e| Error::io(format!("cannot run git {what}"), e))?;
        let output = std::thread::Builder::new()
            .name("snapshot-git".into())
            .spawn(move || child.wait_with_output())
            .map_err(|e| Error::io("cannot start a thread to read git", e))?;
        Ok(Running { what, root: git.root.to_path_buf(), output })
    }

    /// Wait for the command; its NUL-separated records, or why the listing cannot be trusted.
    pub(crate) fn records(self) -> Result<Vec<Vec<u8>>, Error> {
        let out = self
            .output
            .join()
            .map_err(|_| failure(&self.root, &self.what, b"the reader thread panicked"))?
            .map_err(|e| Error::io(format!("waiting for git {}", self.what), e))?;
        if !out.status.success() {
            return Err(failure(&self.root, &self.what, &out.stderr));
        }
        split_z(&out.stdout).map_err(|m| failure(&self.root, &self.what, m.as_bytes()))
    }
}

impl<'a> Git<'a> {
    pub(crate) fn new(root: &'a Path) -> Self {
        Git { root }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("git");
        cmd.arg("-C").arg(self.root);
        // a repository's own config must not run programs while we only read names
        cmd.args(["-c", "core.fsmonitor=false"]);
        cmd.env("LC_ALL", "C").env("GIT_OPTIONAL_LOCKS", "0");
        for var in REPO_OVERRIDES {
            cmd.env_remove(var);
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd
    }

    /// The work tree's top level when the project is inside one; `None` when it is not (or Git
    /// is not installed). One `git rev-parse` answers both questions.
    pub(crate) fn work_tree(&self) -> Result<Option<PathBuf>, Error> {
        let out = match self.command().args(["rev-parse", "--is-inside-work-tree", "--show-toplevel"]).output() {
            Ok(out) => out,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                tracing::debug!("git is not installed; walking the project directory");
                return Ok(None);
            }
            Err(e) => return Err(Error::io("cannot run git", e)),
        };
        let mut lines = out.stdout.split(|b| *b == b'\n');
        // inside `.git` Git says "false" and then fails --show-toplevel: not a work tree either
        if lines.next().map(<[u8]>::trim_ascii) == Some(b"false") {
            return Ok(None);
        }
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            if stderr.contains("not a git repository") {
                return Ok(None);
            }
            return Err(self.failure("rev-parse --is-inside-work-tree --show-toplevel", &out.stderr));
        }
        let top = lines.next().map(<[u8]>::trim_ascii_end).filter(|t| !t.is_empty()).ok_or_else(|| {
            self.failure("rev-parse --show-toplevel", b"printed no top-level directory")
        })?;
        let top = String::from_utf8(top.to_vec())
            .map(PathBuf::from)
            .unwrap_or_else(|e| super::relpath::to_path(e.as_bytes()));
        Ok(Some(top))
    }

    /// The listings a snapshot needs. The four `ls-files` runs are independent, so they run at
    /// the same time, each read by its own thread (so no full pipe stalls another). The
    /// slowest one, tracked-but-ignored, is only needed at the end of the scan: it comes back
    /// still running, for the caller to collect after looking at the files on disk.
    pub(crate) fn list(&self) -> Result<Listing, Error> {
        const STAGED: &[&str] = &["ls-files", "-z", "--stage"];
        const UNTRACKED: &[&str] = &["ls-files", "-z", "--others", "--exclude-standard"];
        const IGNORED_UNTRACKED: &[&str] =
            &["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory", "--no-empty-directory"];
        // tracked files that the ignore rules match now (a file committed once and ignored later)
        const IGNORED_TRACKED: &[&str] = &["ls-files", "-z", "--cached", "--ignored", "--exclude-standard"];

        let ignored_tracked = Running::start(self, IGNORED_TRACKED)?;
        let staged = Running::start(self, STAGED)?;
        let untracked = Running::start(self, UNTRACKED)?;
        let ignored_untracked = Running::start(self, IGNORED_UNTRACKED)?;
        let (staged, untracked, ignored_untracked) =
            (staged.records()?, untracked.records()?, ignored_untracked.records()?);

        let mut candidates = untracked;
        let mut gitlinks = BTreeSet::new();
        for record in staged {
            // "<mode> <object> <stage>\t<path>"
            let tab = record.iter().position(|b| *b == b'\t').ok_or_else(|| {
                self.failure("ls-files --stage", b"a record without a tab: the listing is not what Git prints")
            })?;
            let name = record[tab + 1..].to_vec();
            if record.starts_with(b"160000 ") {
                gitlinks.insert(name.clone());
            }
            candidates.push(name);
        }
        // unmerged paths appear once per stage
        candidates.sort_unstable();
        candidates.dedup();

        let ignored = ignored_untracked
            .into_iter()
            .map(|mut name| {
                while name.last() == Some(&b'/') {
                    name.pop();
                }
                name
            })
            .filter(|name| !name.is_empty())
            .collect();
        Ok(Listing { candidates, gitlinks, ignored, ignored_tracked })
    }

    fn failure(&self, what: &str, stderr: &[u8]) -> Error {
        failure(self.root, what, stderr)
    }
}

fn failure(root: &Path, what: &str, stderr: &[u8]) -> Error {
    let message = String::from_utf8_lossy(stderr).trim().to_string();
    let message = if message.is_empty() { "exited with an error".to_string() } else { message };
    Error::io(
        format!("git {what} in {} failed; the file list would be incomplete", root.display()),
        io::Error::other(message),
    )
}

/// Split NUL-terminated records; output that does not end in a NUL was cut short.
fn split_z(out: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
    if out.is_empty() {
        return Ok(Vec::new());
    }
    let Some(body) = out.strip_suffix(&[0]) else {
        return Err("the -z output does not end with a NUL: the listing is truncated");
    };
    Ok(body.split(|b| *b == 0).map(<[u8]>::to_vec).collect())
}

#[cfg(test)]
mod tests {
    use super::split_z;

    #[test]
    fn z_output_must_be_terminated() {
        assert_eq!(split_z(b"").unwrap(), Vec::<Vec<u8>>::new());
        assert_eq!(split_z(b"a\0b c\0").unwrap(), vec![b"a".to_vec(), b"b c".to_vec()]);
        assert!(split_z(b"a\0trunc").is_err());
    }
}
