//! The artifact of an offload: one file or directory under `/work` copied back to the same
//! relative path under the job's host directory.
//!
//! Checked before anything is created: the path is relative to `/work` (or absolute under it),
//! has no `.`/`..`/empty components, and its host destination stays inside the project
//! directory with no symlink on the way and is not a protected path (VCS metadata, the
//! credential deny-list, `~/.createos`: [`crate::transfer::protect`]). In the guest, no
//! component may be a symlink and the target must be a regular file or a directory (the guest
//! answers are not trusted for what is written: that is the unpacker's business). A file is
//! downloaded into a temporary sibling and renamed into place through a directory handle; a
//! directory comes as one archive that the confined unpacker ([`crate::transfer::extract`])
//! stages next to the destination and places, naming every entry it refused.

use std::path::{Component, Path, PathBuf};

use super::options::WORK_DIR;
use crate::error::{Error, Result};
use crate::transfer::{self, protect, Refused, Remote};

/// A checked artifact path: components relative to `/work`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArtifactPath {
    parts: Vec<String>,
}

/// What an artifact turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactKind {
    /// A regular file.
    File,
    /// A directory (everything under it).
    Directory,
}

/// A retrieved artifact.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// The guest path.
    pub remote: String,
    /// Where it was written on this machine.
    pub local: PathBuf,
    /// File or directory.
    pub kind: ArtifactKind,
    /// Files written.
    pub files: u64,
    /// Archive bytes received.
    pub bytes: u64,
    /// Entries of a directory artifact that were not written, with why.
    pub refused: Vec<Refused>,
}

impl ArtifactPath {
    /// Parse `out`: `dist/app.tar`, `./report.xml` or `/work/dist`.
    pub fn parse(out: &str) -> Result<ArtifactPath> {
        let bad = |msg: String| Error::invalid("out", msg);
        if out.contains('\0') {
            return Err(bad("contains a NUL byte".into()));
        }
        let rel = if let Some(rest) = out.strip_prefix(WORK_DIR) {
            match rest.strip_prefix('/') {
                Some(rest) => rest,
                None if rest.is_empty() => "",
                None => return Err(bad(format!("{out:?} is outside {WORK_DIR}"))),
            }
        } else if out.starts_with('/') {
            return Err(bad(format!("{out:?} is outside {WORK_DIR}: give a path relative to {WORK_DIR} or absolute under it")));
        } else {
            out
        };
        let mut parts = Vec::new();
        for part in rel.split('/') {
            match part {
                "" | "." => continue,
                ".." => return Err(bad(format!("{out:?} contains a '..' component"))),
                p => parts.push(p.to_string()),
            }
        }
        if parts.is_empty() {
            return Err(bad(format!(
                "{out:?} names {WORK_DIR} itself: name a file or directory inside it"
            )));
        }
        if rel.len() > 4096 {
            return Err(bad("is longer than 4096 bytes".into()));
        }
        Ok(ArtifactPath { parts })
    }

    /// The path relative to `/work`.
    pub fn relative(&self) -> String {
        self.parts.join("/")
    }

    /// The absolute guest path.
    pub fn remote(&self) -> String {
        format!("{WORK_DIR}/{}", self.relative())
    }

    /// The host destination under `root` (the job's resolved directory), checked: it stays
    /// inside `root`, and no existing component below `root` is a symlink; intermediate
    /// components that exist must be directories.
    pub fn local(&self, root: &Path) -> Result<PathBuf> {
        let bad = |msg: String| Error::invalid("out", msg);
        let mut path = root.to_path_buf();
        for (i, part) in self.parts.iter().enumerate() {
            let mut comps = Path::new(part).components();
            if !matches!(
                (comps.next(), comps.next()),
                (Some(Component::Normal(_)), None)
            ) {
                return Err(bad(format!("{part:?} is not a plain file name")));
            }
            path.push(part);
            match std::fs::symlink_metadata(&path) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(bad(format!(
                        "{} is a symlink on this machine; refusing to write through it",
                        path.display()
                    )))
                }
                Ok(meta) if i + 1 < self.parts.len() && !meta.is_dir() => {
                    return Err(bad(format!(
                        "{} exists and is not a directory",
                        path.display()
                    )))
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(format!("checking {}", path.display()), e)),
            }
        }
        // a file is judged as a file; a directory artifact as a directory when it lands
        if let Some(why) =
            protect::dir_protection_of(&path, None).or_else(|| protect::protection_of(&path, None))
        {
            return Err(bad(format!("{}: {why}", path.display())));
        }
        Ok(path)
    }
}

/// Look at the artifact in the guest: refuse symlinks on the way, answer file or directory.
const INSPECT: &str = r#"cd -- "$1" || exit 3
cur=.
rest=$2
while [ -n "$rest" ]; do
  part=${rest%%/*}
  if [ "$part" = "$rest" ]; then rest=; else rest=${rest#*/}; fi
  cur=$cur/$part
  if [ -L "$cur" ]; then echo "symlink:$cur"; exit 0; fi
done
if [ -f "$cur" ]; then echo file; elif [ -d "$cur" ]; then echo dir; elif [ -e "$cur" ]; then echo special; else echo missing; fi"#;

/// Copy `path` from the guest to `local` (from [`ArtifactPath::local`]).
pub(crate) async fn fetch(
    remote: &dyn Remote,
    path: &ArtifactPath,
    local: &Path,
) -> Result<Artifact> {
    let inspected = remote
        .run_sh(
            INSPECT,
            vec![WORK_DIR.to_string(), path.relative()],
            Vec::new(),
        )
        .await?;
    if !inspected.success() {
        return Err(inspected.failure("inspecting the artifact"));
    }
    let answer = inspected.stdout.trim();
    let guest = path.remote();
    let refuse = |msg: String| Error::invalid("out", msg);
    let kind = match answer {
        "file" => ArtifactKind::File,
        "dir" => ArtifactKind::Directory,
        "missing" => return Err(refuse(format!("{guest} does not exist in the sandbox"))),
        "special" => {
            return Err(refuse(format!(
                "{guest} is neither a regular file nor a directory"
            )))
        }
        other => match other.strip_prefix("symlink:") {
            Some(link) => {
                let link = link.trim_start_matches("./");
                return Err(refuse(format!("{WORK_DIR}/{link} is a symlink in the sandbox; artifacts are never followed through links")));
            }
            None => {
                return Err(refuse(format!(
                    "unexpected answer while inspecting {guest}: {other:?}"
                )))
            }
        },
    };
    let parent = local
        .parent()
        .ok_or_else(|| refuse(format!("{} has no parent directory", local.display())))?;
    std::fs::create_dir_all(parent)
        .map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;
    match kind {
        ArtifactKind::File => {
            if local.is_dir() {
                return Err(refuse(format!(
                    "{} is a directory on this machine; not replacing it with a file",
                    local.display()
                )));
            }
            // one file: a plain download into a temporary sibling, renamed into place
            let remote_sandbox = remote.sandbox();
            let bytes = remote_sandbox
                .download(&guest)
                .await?
                .save_to(local)
                .await?;
            Ok(Artifact {
                remote: guest,
                local: local.to_path_buf(),
                kind,
                files: 1,
                bytes,
                refused: Vec::new(),
            })
        }
        ArtifactKind::Directory => {
            let done = transfer::download_dir(remote, &guest, local, None).await?;
            let files = done.unpacked.files;
            Ok(Artifact {
                remote: guest,
                local: local.to_path_buf(),
                kind,
                files,
                bytes: done.bytes,
                refused: done.unpacked.refused,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_checked() {
        assert_eq!(
            ArtifactPath::parse("dist/app").unwrap().remote(),
            "/work/dist/app"
        );
        assert_eq!(
            ArtifactPath::parse("/work/out.txt").unwrap().relative(),
            "out.txt"
        );
        assert_eq!(ArtifactPath::parse("./a//b/").unwrap().relative(), "a/b");
        for bad in [
            "",
            ".",
            "/work",
            "/work/",
            "/etc/passwd",
            "/workshop/x",
            "a/../b",
            "..",
            "a\0b",
        ] {
            assert!(ArtifactPath::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn host_destination_refuses_links() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        std::fs::write(root.join("file"), "x").unwrap();
        assert!(ArtifactPath::parse("link/x").unwrap().local(root).is_err());
        assert!(ArtifactPath::parse("link").unwrap().local(root).is_err());
        assert!(ArtifactPath::parse("file/x").unwrap().local(root).is_err());
        assert_eq!(
            ArtifactPath::parse("real/x").unwrap().local(root).unwrap(),
            root.join("real/x")
        );
        assert_eq!(
            ArtifactPath::parse("new/deep/x")
                .unwrap()
                .local(root)
                .unwrap(),
            root.join("new/deep/x")
        );
        for protected in [
            ".git/hooks/pre-commit",
            ".git",
            "sub/.hg/hgrc",
            ".env",
            "keys/deploy.pem",
            ".ssh",
            ".createos/.token",
        ] {
            assert!(
                ArtifactPath::parse(protected).unwrap().local(root).is_err(),
                "{protected}"
            );
        }
    }
}
