//! Asking Git for the file list (`git` runs as a subprocess; every output is `-z` so names are
//! never quoted, and every exit code is checked so an incomplete listing is an error).

use std::collections::BTreeSet;
use std::io::{self, Write};
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
    /// is not installed).
    pub(crate) fn work_tree(&self) -> Result<Option<PathBuf>, Error> {
        let out = match self.command().args(["rev-parse", "--is-inside-work-tree"]).output() {
            Ok(out) => out,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                tracing::debug!("git is not installed; walking the project directory");
                return Ok(None);
            }
            Err(e) => return Err(Error::io("cannot run git", e)),
        };
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            if stderr.contains("not a git repository") {
                return Ok(None);
            }
            return Err(self.failure("rev-parse --is-inside-work-tree", &out.stderr));
        }
        if out.stdout.trim_ascii() != b"true" {
            return Ok(None);
        }
        let top = self.run("rev-parse --show-toplevel", &["rev-parse", "--show-toplevel"])?;
        let top = String::from_utf8(top.trim_ascii_end().to_vec())
            .map(PathBuf::from)
            .unwrap_or_else(|e| super::relpath::to_path(e.as_bytes()));
        Ok(Some(top))
    }

    /// The three listings a snapshot needs.
    pub(crate) fn list(&self) -> Result<Listing, Error> {
        let listed = self.run_z("ls-files", &["ls-files", "-z", "--cached", "--others", "--exclude-standard"])?;
        let mut candidates: Vec<Vec<u8>> = listed.into_iter().collect();
        candidates.sort();
        candidates.dedup();

        let mut gitlinks = BTreeSet::new();
        for record in self.run_z("ls-files --stage", &["ls-files", "-z", "--stage"])? {
            // "<mode> <object> <stage>\t<path>"
            let tab = record.iter().position(|b| *b == b'\t').ok_or_else(|| {
                self.failure("ls-files --stage", b"a record without a tab: the listing is not what Git prints")
            })?;
            if record.starts_with(b"160000 ") {
                gitlinks.insert(record[tab + 1..].to_vec());
            }
        }

        let ignored = self
            .run_z(
                "ls-files --ignored",
                &[
                    "ls-files",
                    "-z",
                    "--others",
                    "--ignored",
                    "--exclude-standard",
                    "--directory",
                    "--no-empty-directory",
                ],
            )?
            .into_iter()
            .map(|mut name| {
                while name.last() == Some(&b'/') {
                    name.pop();
                }
                name
            })
            .filter(|name| !name.is_empty())
            .collect();
        Ok(Listing { candidates, gitlinks, ignored })
    }

    /// The subset of `names` that the ignore rules match now, whether tracked or not.
    pub(crate) fn check_ignore(&self, names: &[&[u8]]) -> Result<BTreeSet<Vec<u8>>, Error> {
        if names.is_empty() {
            return Ok(BTreeSet::new());
        }
        let mut child = self
            .command()
            .args(["check-ignore", "--no-index", "--stdin", "-z"])
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|e| Error::io("cannot run git check-ignore", e))?;

        let mut stdin = child.stdin.take().ok_or_else(|| self.failure("check-ignore", b"no stdin pipe"))?;
        // check-ignore takes pathspecs and refuses `:(literal)`; a leading `./` keeps a name that
        // starts with `:` from being read as pathspec magic. Git echoes each name as given.
        let input: Vec<u8> = names.iter().flat_map(|n| b"./".iter().chain(n.iter()).copied().chain([0])).collect();
        // feed stdin from another thread: Git answers while it reads, and a full stdout pipe
        // would otherwise block both sides
        let feeder = std::thread::spawn(move || stdin.write_all(&input));
        let out = child.wait_with_output().map_err(|e| Error::io("waiting for git check-ignore", e))?;
        let fed = feeder.join().map_err(|_| self.failure("check-ignore", b"the stdin writer panicked"))?;

        // exit 1 means "nothing is ignored"; anything else but 0 is a failure
        match out.status.code() {
            Some(0) | Some(1) => {}
            _ => return Err(self.failure("check-ignore", &out.stderr)),
        }
        fed.map_err(|e| Error::io("writing the file list to git check-ignore", e))?;
        let echoed = split_z(&out.stdout).map_err(|m| self.failure("check-ignore", m.as_bytes()))?;
        echoed
            .into_iter()
            .map(|name| match name.strip_prefix(b"./") {
                Some(name) => Ok(name.to_vec()),
                None => Err(self.failure("check-ignore", b"answered with a name it was not given")),
            })
            .collect()
    }

    fn run(&self, what: &str, args: &[&str]) -> Result<Vec<u8>, Error> {
        let out = self.command().args(args).output().map_err(|e| Error::io(format!("cannot run git {what}"), e))?;
        if !out.status.success() {
            return Err(self.failure(what, &out.stderr));
        }
        Ok(out.stdout)
    }

    fn run_z(&self, what: &str, args: &[&str]) -> Result<Vec<Vec<u8>>, Error> {
        let out = self.run(what, args)?;
        split_z(&out).map_err(|m| self.failure(what, m.as_bytes()))
    }

    fn failure(&self, what: &str, stderr: &[u8]) -> Error {
        let message = String::from_utf8_lossy(stderr).trim().to_string();
        let message = if message.is_empty() { "exited with an error".to_string() } else { message };
        Error::io(
            format!("git {what} in {} failed; the file list would be incomplete", self.root.display()),
            io::Error::other(message),
        )
    }
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
