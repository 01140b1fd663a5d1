//! Local paths named from outside this process, checked before anything is sent or created.
//!
//! One module, three rules:
//!
//! - [`agent_path`]: a local path in the arguments of a `cos mcp` tool (`dir` of
//!   `sandbox_offload` and `sandbox_fanout`, their `out`, `local_dir` of `sandbox_sync`,
//!   `local_path` of `sandbox_push` and `sandbox_pull`). The agent is hostile when injected, so
//!   the path must lie inside the project directory once symlinks are resolved, and may name
//!   neither version-control metadata (`.git`, …), nor a path of the snapshot credential
//!   deny-list (`.env`, keys, `.ssh/`, …), nor the home directory or one of its credential
//!   folders (`~/.createos`, `~/.ssh`, `~/.config`, …): not even when the project directory is
//!   the home directory.
//! - [`user_path`]: a path a person typed (`cos offload -C`, `cos fanout -C`, `cos sync
//!   --local`, `cos push`, `cos pull`). Any place may be named except `/` and the home
//!   directory (or a directory holding it) as a directory, and the credential folders of the
//!   home directory; `--force` lifts the last rule, except for `~/.createos`.
//! - [`skill_dir`]: a skill directory of the configuration (`skillDirs`). Inside the project
//!   the agent rule applies; elsewhere it must be a skill bundle (it holds a `SKILL.md`) that
//!   is neither the home directory nor inside a credential folder.
//!
//! Resolution: a relative path joins its base directory (the project for an agent, the
//! current directory for a person); the longest existing prefix is resolved with `realpath`
//! (symlinks included) and the rest is appended as written. A `..` in the part that does not
//! exist yet and a dangling symlink are refused: neither can be checked.
//!
//! These checks run on the argument, once, before any request. What a sandbox sends back is
//! confined again where it is written (the unpacker, [`createos_sandbox::transfer`]).

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::tools::ToolError;
use createos_sandbox::error::Error;
use createos_sandbox::snapshot::{classify_names, DropReason};
use createos_sandbox::sync::safety::SENSITIVE_HOME_DIRS;

/// Home folders that hold CreateOS's own credentials (`.oauth`, `.token`): never named, by
/// anyone, at any depth below the home directory's first level or inside a project.
const CREATEOS_DIR: &str = ".createos";

/// Home folders refused by name prefix as well (plugins.md §2.13: `~/.config*`, `~/.ssh*`).
const PREFIX_MATCHED: [&str; 3] = [".config", ".ssh", CREATEOS_DIR];

/// Folders of `~/.config` that hold credentials (gcloud's keys, the GitHub CLI's token): refused
/// for skill directories, which may otherwise live under `~/.config`.
const CONFIG_CREDENTIALS: [&str; 2] = [".config/gcloud", ".config/gh"];

/// What the named path must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// An existing directory (a project to upload, a directory to sync).
    Dir,
    /// An existing file or directory (something to send).
    Existing,
    /// A destination that may not exist yet (something to receive).
    Destination,
}

/// A refused path: the message names the argument (`field`) and what it was given.
fn refused(field: &str, given: &Path, why: impl std::fmt::Display) -> String {
    format!("{field} \"{}\": {why}", given.display())
}

/// `given` (argument `field` of a tool) resolved and confined to `project`.
pub fn agent_path(
    project: &Path,
    field: &str,
    given: &Path,
    expect: Expect,
) -> Result<PathBuf, ToolError> {
    let home = home_dir();
    check_agent(project, home.as_deref(), field, given, expect).map_err(ToolError::InvalidArgs)
}

/// [`agent_path`] for a string argument.
pub fn agent_arg(
    project: &Path,
    field: &str,
    given: &str,
    expect: Expect,
) -> Result<PathBuf, ToolError> {
    agent_path(project, field, Path::new(given), expect)
}

fn check_agent(
    project: &Path,
    home: Option<&Path>,
    field: &str,
    given: &Path,
    expect: Expect,
) -> Result<PathBuf, String> {
    check_text(field, given)?;
    let project = project.canonicalize().map_err(|e| {
        refused(
            field,
            given,
            format!(
                "cannot resolve the project directory {}: {e}",
                project.display()
            ),
        )
    })?;
    let joined = if given.is_absolute() {
        given.to_path_buf()
    } else {
        project.join(given)
    };
    let resolved = resolve_existing_prefix(&joined).map_err(|why| refused(field, given, why))?;
    let Ok(relative) = resolved.strip_prefix(&project) else {
        return Err(refused(
            field,
            given,
            format!(
                "resolves to {}, outside the project directory {}: tools only use files of the project",
                resolved.display(),
                project.display()
            ),
        ));
    };
    let is_dir = check_expected(field, given, &resolved, expect)?;
    if let Some(why) = protected(relative, is_dir) {
        return Err(refused(
            field,
            given,
            format!(
                "{} is {why}: tools never read or write it",
                relative.display()
            ),
        ));
    }
    if let Some(why) = home.and_then(|home| home_rule(&resolved, home)) {
        return Err(refused(field, given, why));
    }
    Ok(resolved)
}

/// `given` (a person's `field`, e.g. `--dir`), resolved against the current directory and
/// checked: see the [module docs](self). `force`: `None` when the command has no `--force`,
/// else whether it was given.
pub fn user_path(
    field: &str,
    given: &Path,
    expect: Expect,
    force: Option<bool>,
) -> Result<PathBuf, Error> {
    let home = home_dir();
    check_user(home.as_deref(), field, given, expect, force)
        .map_err(|message| Error::invalid(field, message))
}

fn check_user(
    home: Option<&Path>,
    field: &str,
    given: &Path,
    expect: Expect,
    force: Option<bool>,
) -> Result<PathBuf, String> {
    check_text(field, given)?;
    let joined = if given.is_absolute() {
        given.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| {
                refused(
                    field,
                    given,
                    format!("cannot read the current directory: {e}"),
                )
            })?
            .join(given)
    };
    let resolved = resolve_existing_prefix(&joined).map_err(|why| refused(field, given, why))?;
    let is_dir = check_expected(field, given, &resolved, expect)?;
    if is_dir && resolved.parent().is_none() {
        return Err(refused(field, given, "refusing the file-system root `/`"));
    }
    let Some(home) = home else {
        return Ok(resolved);
    };
    if is_dir || expect == Expect::Dir {
        if let Some(why) = home_itself(&resolved, home) {
            return Err(refused(field, given, why));
        }
    }
    match credential_folder(&resolved, home) {
        Some(first) if force != Some(true) || is_createos(&first) => {
            let hint = match force {
                Some(false) if !is_createos(&first) => "; pass --force to use it anyway",
                _ => "",
            };
            Err(refused(
                field,
                given,
                format!(
                    "{} is inside ~/{first}, which holds credentials{hint}",
                    resolved.display()
                ),
            ))
        }
        _ => Ok(resolved),
    }
}

/// A skill directory of the configuration (`field` names it, e.g. `skillDirs[0]`), resolved:
/// `Ok(None)` when it does not exist or is no directory (a virtual or built-in skill, skipped).
pub fn skill_dir(project: &Path, field: &str, dir: &Path) -> Result<Option<PathBuf>, ToolError> {
    let home = home_dir();
    check_skill(project, home.as_deref(), field, dir).map_err(ToolError::InvalidArgs)
}

fn check_skill(
    project: &Path,
    home: Option<&Path>,
    field: &str,
    dir: &Path,
) -> Result<Option<PathBuf>, String> {
    check_text(field, dir)?;
    let Ok(real) = std::fs::canonicalize(dir) else {
        return Ok(None);
    };
    if !real.is_dir() {
        return Ok(None);
    }
    let project = std::fs::canonicalize(project).unwrap_or_else(|_| project.to_path_buf());
    if real.starts_with(&project) {
        return check_agent(&project, home, field, &real, Expect::Dir).map(Some);
    }
    if !real.join("SKILL.md").is_file() {
        return Err(refused(
            field,
            dir,
            format!("{} lies outside the project directory and holds no SKILL.md: only skill bundles are copied", real.display()),
        ));
    }
    if let Some(home) = home {
        if let Some(why) = home_itself(&real, home) {
            return Err(refused(field, dir, why));
        }
        if let Ok(rest) = real.strip_prefix(home) {
            // Skills live under ~/.config (opencode, …), so that folder is allowed here; the
            // credential folders and the deny-list's directories (.config/gcloud/, …) are not.
            let first = first_component(rest).unwrap_or_default();
            let strict = SENSITIVE_HOME_DIRS
                .iter()
                .any(|d| *d != ".config" && first == *d)
                || is_createos(&first)
                || CONFIG_CREDENTIALS.iter().any(|d| rest.starts_with(d));
            let denied = protected(rest, true);
            if strict || denied.is_some() {
                let why =
                    denied.unwrap_or_else(|| format!("inside ~/{first}, which holds credentials"));
                return Err(refused(field, dir, format!("{} is {why}", real.display())));
            }
        }
    }
    Ok(Some(real))
}

fn check_text(field: &str, given: &Path) -> Result<(), String> {
    if given.as_os_str().is_empty() {
        return Err(format!("{field} must not be empty"));
    }
    if given.as_os_str().as_bytes().contains(&0) {
        return Err(format!("{field} contains a NUL byte"));
    }
    Ok(())
}

/// Check `expect` on the resolved path; answers whether it is an existing directory.
fn check_expected(
    field: &str,
    given: &Path,
    resolved: &Path,
    expect: Expect,
) -> Result<bool, String> {
    match std::fs::metadata(resolved) {
        Ok(meta) if expect == Expect::Dir && !meta.is_dir() => Err(refused(
            field,
            given,
            format!("{} is not a directory", resolved.display()),
        )),
        Ok(meta) => Ok(meta.is_dir()),
        Err(e) if e.kind() == io::ErrorKind::NotFound && expect == Expect::Destination => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(refused(
            field,
            given,
            format!("{} does not exist", resolved.display()),
        )),
        Err(e) => Err(refused(
            field,
            given,
            format!("cannot read {}: {e}", resolved.display()),
        )),
    }
}

/// Why `relative` (inside a project) is protected: VCS metadata, a path of the snapshot
/// credential deny-list (as a directory when `is_dir`), or CreateOS's credential folder.
fn protected(relative: &Path, is_dir: bool) -> Option<String> {
    if relative
        .components()
        .any(|c| matches!(c, Component::Normal(n) if is_createos(&n.to_string_lossy())))
    {
        return Some(format!(
            "inside a {CREATEOS_DIR} folder, which holds CreateOS credentials"
        ));
    }
    let name = relative.as_os_str().as_bytes();
    if name.is_empty() {
        return None;
    }
    let verdict = classify_names(&[], &[], &[name]).ok()?.into_iter().next()?;
    match if is_dir {
        verdict.as_dir
    } else {
        verdict.as_file
    } {
        Some(why @ (DropReason::DenyList(_) | DropReason::Vcs)) => {
            Some(format!("left out by the snapshot rules ({why})"))
        }
        _ => None,
    }
}

/// The agent's home rules for `resolved`: not the home directory nor one holding it, not
/// inside a credential folder.
fn home_rule(resolved: &Path, home: &Path) -> Option<String> {
    if let Some(why) = home_itself(resolved, home) {
        return Some(why);
    }
    credential_folder(resolved, home).map(|first| {
        format!(
            "{} is inside ~/{first}, which holds credentials or account configuration",
            resolved.display()
        )
    })
}

fn home_itself(resolved: &Path, home: &Path) -> Option<String> {
    if resolved == home {
        return Some(format!("{} is your home directory", home.display()));
    }
    home.starts_with(resolved).then(|| {
        format!(
            "{} contains your home directory {}",
            resolved.display(),
            home.display()
        )
    })
}

/// The first component below `home` when `resolved` lies in one of its credential folders.
fn credential_folder(resolved: &Path, home: &Path) -> Option<String> {
    let first = first_component(resolved.strip_prefix(home).ok()?)?;
    let listed = SENSITIVE_HOME_DIRS.contains(&first.as_str()) || is_createos(&first);
    let prefixed = PREFIX_MATCHED.iter().any(|p| first.starts_with(p));
    (listed || prefixed).then_some(first)
}

fn first_component(path: &Path) -> Option<String> {
    match path.components().next()? {
        Component::Normal(name) => Some(name.to_string_lossy().into_owned()),
        _ => None,
    }
}

fn is_createos(name: &str) -> bool {
    name.eq_ignore_ascii_case(CREATEOS_DIR)
}

/// The current user's home directory, resolved (`None` when unknown or missing).
fn home_dir() -> Option<PathBuf> {
    dirs::home_dir().and_then(|h| std::fs::canonicalize(h).ok())
}

/// `path` with its longest existing prefix resolved by `realpath` and the rest appended.
fn resolve_existing_prefix(path: &Path) -> Result<PathBuf, String> {
    let parts: Vec<Component> = path.components().collect();
    for keep in (1..=parts.len()).rev() {
        let prefix: PathBuf = parts[..keep].iter().collect();
        match prefix.canonicalize() {
            Ok(mut resolved) => {
                let rest = &parts[keep..];
                if let Some(first) = rest.first() {
                    // It did not resolve: a dangling symlink would be written through.
                    if std::fs::symlink_metadata(resolved.join(first)).is_ok() {
                        return Err(format!(
                            "{} is a symlink that does not resolve",
                            prefix.join(first).display()
                        ));
                    }
                }
                for part in rest {
                    match part {
                        Component::Normal(name) => resolved.push(name),
                        Component::CurDir => {}
                        _ => return Err("`..` below a path that does not exist cannot be checked; name the destination directly".into()),
                    }
                }
                return Ok(resolved);
            }
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    || e.kind() == io::ErrorKind::NotADirectory =>
            {
                continue
            }
            Err(e) => return Err(format!("cannot resolve {}: {e}", prefix.display())),
        }
    }
    Err("cannot resolve any part of it".into())
}

#[cfg(test)]
mod tests;
