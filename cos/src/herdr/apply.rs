//! `apply`: the sandbox's work since the last apply becomes a Git patch that is checked and
//! applied to the local worktree; then the guest's baseline ref moves to exactly the tree that
//! was applied, so the next apply carries only newer work.
//!
//! The guest side uses a temporary index, so the agent's own index, branch and commits are
//! left alone; the baseline is `refs/herdr/base`, not `HEAD`, so commits the agent makes are
//! still part of the next patch.
//!
//! The patch is the guest's work and is not trusted: before `git apply` runs, it is read both
//! here and by Git (`git apply --numstat -z`) and vetted ([`createos_sandbox::transfer::patch::vet`]).
//! A patch that touches a protected path (`.git/…`, `.hg/…`, `.env`, keys, …; see
//! [`createos_sandbox::transfer::protect`]), names a path outside the worktree or below one of its
//! symlinks, adds a symlink leading out of the worktree, a submodule or an unusual mode, or
//! reads differently to Git than here, is refused as a whole: every such path is named, the
//! worktree is not changed and the baseline does not move (the same work is offered again).

use std::path::Path;

use createos_sandbox::transfer::{patch, protect, ApiRemote, Remote, TempCleanup};
use createos_sandbox::Sandbox;

use super::error::{HerdrError, HerdrResult};

/// Largest patch accepted.
pub const MAX_PATCH_BYTES: u64 = 256 << 20;

/// Guest: `$1` worktree, `$2` patch file. Prints `<tree> <bytes>`.
const EXPORT: &str = r#"set -e
cd -- "$1"
idx=$(mktemp /tmp/.herdr-index.XXXXXX)
trap 'rm -f "$idx"' EXIT
export GIT_INDEX_FILE="$idx"
git read-tree refs/herdr/base
git add -A
tree=$(git write-tree)
git diff --cached --binary --no-color --no-ext-diff refs/herdr/base > "$2"
printf '%s %s\n' "$tree" "$(wc -c < "$2" | tr -d ' ')"
"#;

/// Guest: `$1` worktree, `$2` tree that was applied. Moves the baseline onto it.
const ADVANCE: &str = r#"set -e
cd -- "$1"
c=$(git -c user.name=herdr -c user.email=herdr@createos.local commit-tree "$2" -p refs/herdr/base -m herdr-apply)
git update-ref refs/herdr/base "$c"
"#;

/// Outcome of [`apply`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// Nothing new since the last apply.
    NoChanges,
    /// A patch of `bytes` bytes was applied locally.
    Applied {
        /// Patch size.
        bytes: u64,
    },
}

/// Export the patch from `remote_root` in `sandbox`, apply it to `local`, move the baseline.
pub async fn apply(sandbox: &Sandbox, remote_root: &str, local: &Path) -> HerdrResult<Applied> {
    let remote = ApiRemote::new(sandbox.clone());
    let patch_path = format!("/tmp/.herdr-createos-{:016x}.patch", rand::random::<u64>());
    // Removes the guest's patch file on every path: explicitly below, or from a spawned task
    // when this future is dropped (the action cancelled) part-way.
    let mut cleanup = TempCleanup::new(sandbox.clone(), patch_path.clone());
    let result = export_and_apply(&remote, sandbox, remote_root, local, &patch_path).await;
    cleanup.now().await;
    result
}

async fn export_and_apply(
    remote: &ApiRemote,
    sandbox: &Sandbox,
    remote_root: &str,
    local: &Path,
    patch_path: &str,
) -> HerdrResult<Applied> {
    let out = remote
        .run_sh(
            EXPORT,
            vec![remote_root.to_string(), patch_path.to_string()],
            Vec::new(),
        )
        .await?;
    if !out.success() {
        return Err(HerdrError::Remote {
            step: "patch export".into(),
            sandbox: sandbox.id().into(),
            message: out.stderr.trim().to_string(),
        });
    }
    let line = out
        .stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    let (tree, bytes) = line
        .split_once(' ')
        .and_then(|(t, b)| Some((t.to_string(), b.trim().parse::<u64>().ok()?)))
        .ok_or_else(|| HerdrError::Remote {
            step: "patch export".into(),
            sandbox: sandbox.id().into(),
            message: format!("unexpected output {:?}", out.stdout.trim()),
        })?;
    if !tree.chars().all(|c| c.is_ascii_hexdigit()) || tree.is_empty() {
        return Err(HerdrError::Remote {
            step: "patch export".into(),
            sandbox: sandbox.id().into(),
            message: format!("bad tree id {tree:?}"),
        });
    }
    if bytes == 0 {
        return Ok(Applied::NoChanges);
    }
    if bytes > MAX_PATCH_BYTES {
        return Err(HerdrError::invalid(
            "patch",
            format!("is {bytes} bytes, over the {MAX_PATCH_BYTES}-byte limit; use sync instead"),
        ));
    }
    let patch = sandbox
        .download(patch_path)
        .await?
        .bytes(MAX_PATCH_BYTES)
        .await?;

    apply_locally(local, &patch).await?;

    let out = remote
        .run_sh(
            ADVANCE,
            vec![remote_root.to_string(), tree.clone()],
            Vec::new(),
        )
        .await;
    match out {
        Ok(o) if o.success() => Ok(Applied::Applied {
            bytes: patch.len() as u64,
        }),
        other => {
            let why = match other {
                Ok(o) => o.stderr.trim().to_string(),
                Err(e) => e.to_string(),
            };
            Err(HerdrError::Remote {
                step: "moving the baseline".into(),
                sandbox: sandbox.id().into(),
                message: format!(
                    "the patch WAS applied locally, but the sandbox baseline did not move ({why}); before the next apply run: \
                     cos exec {} -- sh -c 'cd {remote_root} && git update-ref refs/herdr/base $(git commit-tree {tree} -p refs/herdr/base -m herdr-apply)'",
                    sandbox.id()
                ),
            })
        }
    }
}

/// Check and apply `patch` to the worktree at `local`. The patch is staged in a temporary
/// directory that is removed on every path (it is a guard, dropped on errors too).
async fn apply_locally(local: &Path, patch: &[u8]) -> HerdrResult<()> {
    let dir = tempfile::Builder::new()
        .prefix("cos-herdr-apply-")
        .tempdir()
        .map_err(|e| HerdrError::io("creating a temporary directory for the patch", e))?;
    let local_patch = dir.path().join("herdr-createos.patch");
    std::fs::write(&local_patch, patch)
        .map_err(|e| HerdrError::io(format!("writing {}", local_patch.display()), e))?;
    vet(local, patch, &local_patch).await?;
    git(
        local,
        &["apply", "--check", "--whitespace=nowarn"],
        &local_patch,
    )
    .await?;
    git(local, &["apply", "--whitespace=nowarn"], &local_patch)
        .await
        .map(drop)
}

/// Refuse the whole patch when any path it touches may not be written here (see the module
/// docs), naming each.
async fn vet(local: &Path, patch: &[u8], file: &Path) -> HerdrResult<()> {
    protect::check_dir_target(local)?;
    let numstat = git(local, &["apply", "--numstat", "-z"], file).await?;
    let refused = match patch::parse(patch) {
        Some(files) => patch::vet(local, &files, &patch::numstat_paths(&numstat)),
        None => {
            return Err(HerdrError::invalid(
                "patch",
                "the sandbox's patch has headers this client cannot read; nothing was applied (the local worktree was not changed)",
            ))
        }
    };
    if refused.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = createos_sandbox::transfer::refused_summary(&refused, 50);
    Err(HerdrError::invalid(
        "patch",
        format!(
            "the sandbox's patch touches paths that are never written from a sandbox, so nothing was applied (the local \
             worktree was not changed); undo those changes in the sandbox and apply again:\n{}",
            lines.join("\n")
        ),
    ))
}

/// Run `git -C dir <args> <patch>`; its stdout.
async fn git(dir: &Path, args: &[&str], patch: &Path) -> HerdrResult<Vec<u8>> {
    let out = tokio::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .arg(patch)
        .output()
        .await
        .map_err(|e| HerdrError::Git {
            command: args.join(" "),
            message: format!("cannot run git: {e}"),
        })?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(HerdrError::Git {
            command: args.join(" "),
            message: format!(
                "{} (the local worktree was not changed by this apply)",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        })
    }
}
