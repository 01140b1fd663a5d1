//! Asking Git for the file list (`git` runs as a subprocess; every output is `-z` so names are
//! never quoted, and every exit code is checked so an incomplete listing is an error).

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::Error;

/// Variables that would point Git at another repository than the one the project is in.
const REPO_OVERRIDES: [&str; 6] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_NAMESPACE",
];

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
    /// The ignored names, still being listed (see [`Ignored`]).
    pub ignored: Running,
}

/// The names the ignore rules match.
pub(crate) struct Ignored {
    /// Untracked ignored names (whole ignored directories once, without the trailing `/`).
    pub untracked: Vec<Vec<u8>>,
    /// Tracked names that the ignore rules match now (they stay home).
    pub tracked: BTreeSet<Vec<u8>>,
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
        let child = git
            .command()
            .args(args)
            .spawn()
            .map_err(|e| Error::io(format!("cannot run git {what}"), e))?;
        let output = std::thread::Builder::new()
            .name("snapshot-git".into())
            .spawn(move || child.wait_with_output())
            .map_err(|e| Error::io("cannot start a thread to read git", e))?;
        Ok(Running {
            what,
            root: git.root.to_path_buf(),
            output,
        })
    }

    /// Wait for the ignored listing of [`Git::list`] and sort its names.
    pub(crate) fn ignored(self) -> Result<Ignored, Error> {
        let (root, what) = (self.root.clone(), self.what.clone());
        let out = self.output()?;
        let mut ignored = Ignored {
            untracked: Vec::new(),
            tracked: BTreeSet::new(),
        };
        for record in split_z(&out).map_err(|m| failure(&root, &what, m.as_bytes()))? {
            let (tracked, start) = tag(record).map_err(|m| failure(&root, &what, m))?;
            let mut name = &record[start..];
            if tracked {
                ignored.tracked.insert(name.to_vec());
                continue;
            }
            while let Some(dir) = name.strip_suffix(b"/") {
                name = dir;
            }
            if !name.is_empty() {
                ignored.untracked.push(name.to_vec());
            }
        }
        Ok(ignored)
    }

    /// Wait for the command; its output (NUL-separated records: read them with `split_z`),
    /// or why the listing cannot be trusted.
    pub(crate) fn output(self) -> Result<Vec<u8>, Error> {
        let out = self
            .output
            .join()
            .map_err(|_| failure(&self.root, &self.what, b"the reader thread panicked"))?
            .map_err(|e| Error::io(format!("waiting for git {}", self.what), e))?;
        if !out.status.success() {
            return Err(failure(&self.root, &self.what, &out.stderr));
        }
        Ok(out.stdout)
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
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// The work tree's top level when the project is inside one; `None` when it is not (or Git
    /// is not installed). One `git rev-parse` answers both questions.
    pub(crate) fn work_tree(&self) -> Result<Option<PathBuf>, Error> {
        let out = match self
            .command()
            .args(["rev-parse", "--is-inside-work-tree", "--show-toplevel"])
            .output()
        {
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
            return Err(self.failure(
                "rev-parse --is-inside-work-tree --show-toplevel",
                &out.stderr,
            ));
        }
        let top = lines
            .next()
            .map(<[u8]>::trim_ascii_end)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                self.failure(
                    "rev-parse --show-toplevel",
                    b"printed no top-level directory",
                )
            })?;
        let top = String::from_utf8(top.to_vec())
            .map(PathBuf::from)
            .unwrap_or_else(|e| super::relpath::to_path(e.as_bytes()));
        Ok(Some(top))
    }

    /// The listings a snapshot needs, from two `ls-files` runs at the same time, each read by
    /// its own thread (so no full pipe stalls the other). `-t` tags every record, so one run
    /// can hold two kinds of names without any guessing: `? name` for an untracked one, and
    /// for a tracked one `H name` (or another letter: `S` skip-worktree, `M` unmerged).
    ///
    /// 1. `--stage --others --exclude-standard`: tracked files with their modes (gitlinks are
    ///    mode 160000) plus untracked-unignored ones: the candidates.
    /// 2. `--cached --others --ignored --exclude-standard --directory`: what the ignore rules
    ///    match, tracked (the same matching as `git check-ignore --no-index` on each tracked
    ///    name) and untracked. Only needed at the end of the scan, so it comes back still
    ///    running, for the caller to collect after looking at the files on disk.
    pub(crate) fn list(&self) -> Result<Listing, Error> {
        const CANDIDATES: &[&str] = &[
            "ls-files",
            "-z",
            "-t",
            "--stage",
            "--others",
            "--exclude-standard",
        ];
        const IGNORED: &[&str] = &[
            "ls-files",
            "-z",
            "-t",
            "--cached",
            "--others",
            "--ignored",
            "--exclude-standard",
            "--directory",
            "--no-empty-directory",
        ];

        let ignored = Running::start(self, IGNORED)?;
        let out = Running::start(self, CANDIDATES)?.output()?;
        let records =
            split_z(&out).map_err(|m| self.failure("ls-files --stage --others", m.as_bytes()))?;

        let mut candidates = Vec::with_capacity(records.len());
        let mut gitlinks = BTreeSet::new();
        for record in records {
            let (tracked, start) =
                tag(record).map_err(|m| self.failure("ls-files --stage --others", m))?;
            let rest = &record[start..];
            if !tracked {
                candidates.push(rest.to_vec());
                continue;
            }
            // "<mode> <object> <stage>\t<path>"
            let tab = rest.iter().position(|b| *b == b'\t').ok_or_else(|| {
                self.failure(
                    "ls-files --stage",
                    b"a record without a tab: the listing is not what Git prints",
                )
            })?;
            let name = rest[tab + 1..].to_vec();
            if rest.starts_with(b"160000 ") {
                gitlinks.insert(name.clone());
            }
            candidates.push(name);
        }
        // unmerged paths appear once per stage
        candidates.sort_unstable();
        candidates.dedup();
        Ok(Listing {
            candidates,
            gitlinks,
            ignored,
        })
    }

    fn failure(&self, what: &str, stderr: &[u8]) -> Error {
        failure(self.root, what, stderr)
    }
}

/// Whether a `-t` record is about a tracked name, and where the rest of the record starts.
fn tag(record: &[u8]) -> Result<(bool, usize), &'static [u8]> {
    match record {
        [b'?', b' ', ..] => Ok((false, 2)),
        [letter, b' ', ..] if letter.is_ascii_alphabetic() => Ok((true, 2)),
        _ => Err(b"a record without its -t tag: the listing is not what Git prints"),
    }
}

fn failure(root: &Path, what: &str, stderr: &[u8]) -> Error {
    let message = String::from_utf8_lossy(stderr).trim().to_string();
    let message = if message.is_empty() {
        "exited with an error".to_string()
    } else {
        message
    };
    Error::io(
        format!(
            "git {what} in {} failed; the file list would be incomplete",
            root.display()
        ),
        io::Error::other(message),
    )
}

/// Split NUL-terminated records; output that does not end in a NUL was cut short.
fn split_z(out: &[u8]) -> Result<Vec<&[u8]>, &'static str> {
    if out.is_empty() {
        return Ok(Vec::new());
    }
    let Some(body) = out.strip_suffix(&[0]) else {
        return Err("the -z output does not end with a NUL: the listing is truncated");
    };
    Ok(body.split(|b| *b == 0).collect())
}

#[cfg(test)]
mod tests {
    use super::split_z;

    #[test]
    fn z_output_must_be_terminated() {
        assert_eq!(split_z(b"").unwrap(), Vec::<&[u8]>::new());
        assert_eq!(split_z(b"a\0b c\0").unwrap(), vec![&b"a"[..], &b"b c"[..]]);
        assert!(split_z(b"a\0trunc").is_err());
    }
}
