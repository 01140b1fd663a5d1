//! `cos setup opencode [--doctor] [--mode local|remote] [--global]`: add the CreateOS plugin to
//! OpenCode's configuration, or (`--doctor`) report what is missing. Local only: it reads and
//! writes files and runs `opencode --version`, and never needs a credential.
//!
//! Where OpenCode reads its configuration (checked in its source, `packages/opencode/src/config`):
//! the global files `opencode.json` / `opencode.jsonc` in `$XDG_CONFIG_HOME/opencode` (else
//! `~/.config/opencode`), then every `opencode.jsonc` / `opencode.json` found from the working
//! directory up to the Git work tree's root, the nearest winning. The plugin list is `plugin`
//! (OpenCode 1.x: specs or `[spec, options]`); OpenCode 2 names it `plugins`.

mod edit;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::Args;
use serde_json::json;

use createos_sandbox::auth::Resolver;

use super::Out;
use edit::{Mode, Wanted};

/// The plugin's npm package.
pub const PACKAGE: &str = "@createos/opencode";
/// The oldest OpenCode the plugin supports (`engines.opencode` of its package.json).
const MIN_OPENCODE: (u64, u64, u64) = (1, 18, 0);
/// Config file names, the one OpenCode prefers for a new file last.
const NAMES: [&str; 2] = ["opencode.jsonc", "opencode.json"];
/// How long `opencode --version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Debug, Args)]
pub struct SetupOpencodeArgs {
    /// Report what is missing (sign-in, OpenCode version, plugin entry) and change nothing.
    #[arg(long)]
    pub doctor: bool,
    /// Plugin mode: local (sandbox_* tools beside OpenCode's own) or remote (OpenCode's bash,
    /// read, edit… run in the session's sandbox). Default: keep an existing entry's, else local.
    #[arg(long, value_parser = ["local", "remote"])]
    pub mode: Option<String>,
    /// Edit the user's global configuration (~/.config/opencode) instead of the project's.
    #[arg(long)]
    pub global: bool,
    /// Edit this configuration file.
    #[arg(long, value_name = "FILE", conflicts_with = "global")]
    pub config: Option<PathBuf>,
    /// What a new entry names: the npm package, a pinned version (`@createos/opencode@0.1.0`) or a path.
    #[arg(long, value_name = "SPEC", default_value = PACKAGE)]
    pub package: String,
    /// The project (default: the current directory).
    #[arg(short = 'C', long, value_name = "DIR")]
    pub project: Option<PathBuf>,
}

/// One line of `--doctor`.
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
}

pub async fn setup(out: Out, api_key: Option<String>, args: SetupOpencodeArgs) -> Result<ExitCode> {
    if args.package.trim().is_empty() || args.package.contains('\0') {
        anyhow::bail!("--package must name a package or a path");
    }
    let project = match &args.project {
        Some(p) => p.clone(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let project = std::fs::canonicalize(&project)
        .with_context(|| format!("project directory {}", project.display()))?;
    if args.doctor {
        return doctor(out, api_key, &args, &project).await;
    }
    let (path, exists) = match &args.config {
        Some(p) => (p.clone(), p.exists()),
        None if args.global => config_in(&global_dir()?),
        None => project_config(&project),
    };
    let mode = args.mode.as_deref().map(|m| {
        if m == "remote" {
            Mode::Remote
        } else {
            Mode::Local
        }
    });
    let wanted = Wanted {
        spec: args.package.clone(),
        mode,
    };
    let outcome = apply(&path, exists, &wanted)?;
    let report = json!({
        "config": outcome.path,
        "created": outcome.created,
        "changed": outcome.changed,
        "backup": outcome.backup,
        "key": outcome.entry.key,
        "entry": outcome.entry.spec,
        "mode": outcome.entry.mode,
    });
    out.show(&report, || {
        let what = format!("{} ({} mode)", outcome.entry.spec, outcome.entry.mode);
        match (&outcome.backup, outcome.created, outcome.changed) {
            (_, true, _) => format!("created {} with the plugin {what}", outcome.path.display()),
            (Some(b), _, true) => {
                format!(
                    "added the plugin {what} to {}; the previous file is in {}",
                    outcome.path.display(),
                    b.display()
                )
            }
            _ => format!(
                "{} already loads the plugin {what}: nothing changed",
                outcome.path.display()
            ),
        }
    });
    if signed_in(api_key).is_err() {
        out.note("note: not signed in yet: run `createos login` or set CREATEOS_API_KEY (the plugin starts either way)");
    }
    Ok(ExitCode::SUCCESS)
}

/// What [`apply`] did.
struct Applied {
    path: PathBuf,
    created: bool,
    changed: bool,
    backup: Option<PathBuf>,
    entry: edit::Found,
}

/// Edit (or create) the file at `path`: parse and change it in memory first, then back the old
/// file up, then replace it in one rename.
fn apply(path: &Path, exists: bool, wanted: &Wanted) -> Result<Applied> {
    // A symlinked config (a dotfiles checkout) is edited where it lives; the link stays.
    let target = if exists {
        std::fs::canonicalize(path).with_context(|| format!("{}", path.display()))?
    } else {
        path.to_path_buf()
    };
    let text = if exists {
        std::fs::read_to_string(&target).with_context(|| format!("reading {}", target.display()))?
    } else {
        "{\n  \"$schema\": \"https://opencode.ai/config.json\"\n}\n".to_string()
    };
    let edited = edit::ensure_entry(&text, wanted)
        .with_context(|| format!("{} was left as it is", path.display()))?;
    let Some(new_text) = edited.text else {
        return Ok(Applied {
            path: path.to_path_buf(),
            created: false,
            changed: false,
            backup: None,
            entry: edited.entry,
        });
    };
    let backup = if exists { Some(backup(&target)?) } else { None };
    write_replacing(&target, &new_text)?;
    Ok(Applied {
        path: path.to_path_buf(),
        created: !exists,
        changed: true,
        backup,
        entry: edited.entry,
    })
}

/// Copy `file` to `<file>.before-createos` (or `.before-createos.N` when that is taken: the
/// first backup is never overwritten).
fn backup(file: &Path) -> Result<PathBuf> {
    let base = format!("{}.before-createos", file.display());
    let mut candidate = PathBuf::from(&base);
    let mut n = 1;
    while candidate.symlink_metadata().is_ok() {
        candidate = PathBuf::from(format!("{base}.{n}"));
        n += 1;
    }
    std::fs::copy(file, &candidate)
        .with_context(|| format!("backing {} up to {}", file.display(), candidate.display()))?;
    Ok(candidate)
}

/// Write `text` to a temporary file beside `file` and rename it over `file`, keeping the old
/// file's permissions.
fn write_replacing(file: &Path, text: &str) -> Result<()> {
    use std::io::Write as _;
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".opencode-config.")
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    tmp.write_all(text.as_bytes())
        .context("writing the new configuration")?;
    if let Ok(meta) = std::fs::metadata(file) {
        tmp.as_file()
            .set_permissions(meta.permissions())
            .context("copying the file's permissions")?;
    }
    tmp.as_file()
        .sync_all()
        .context("writing the new configuration")?;
    tmp.persist(file)
        .with_context(|| format!("replacing {}", file.display()))?;
    Ok(())
}

/// The user's OpenCode config directory (`$XDG_CONFIG_HOME/opencode`, else `~/.config/opencode`).
fn global_dir() -> Result<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        return Ok(x.join("opencode"));
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(dirs::home_dir);
    Ok(home
        .context("no home directory (set HOME)")?
        .join(".config")
        .join("opencode"))
}

/// The existing config file of `dir` (`opencode.jsonc` first), else where a new one goes.
fn config_in(dir: &Path) -> (PathBuf, bool) {
    NAMES
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
        .map(|p| (p, true))
        .unwrap_or_else(|| (dir.join("opencode.json"), false))
}

/// The project's config file: the nearest one from `project` up to its Git work tree's root;
/// else a new `opencode.json` at that root (or in `project` outside Git).
fn project_config(project: &Path) -> (PathBuf, bool) {
    let root = project.ancestors().find(|d| d.join(".git").exists());
    for dir in project.ancestors() {
        if let Some(found) = NAMES.iter().map(|n| dir.join(n)).find(|p| p.is_file()) {
            return (found, true);
        }
        if Some(dir) == root || root.is_none() {
            break;
        }
    }
    (root.unwrap_or(project).join("opencode.json"), false)
}

/// Where a credential would come from, without sending anything.
fn signed_in(api_key: Option<String>) -> Result<String, String> {
    Resolver::new()
        .explicit_key(api_key)
        .resolve()
        .map(|c| c.source().to_string())
        .map_err(|e| e.to_string())
}

async fn doctor(
    out: Out,
    api_key: Option<String>,
    args: &SetupOpencodeArgs,
    project: &Path,
) -> Result<ExitCode> {
    let mut checks = Vec::new();
    checks.push(match signed_in(api_key) {
        Ok(source) => Check {
            name: "sign-in",
            ok: true,
            detail: format!("credential from {source}"),
        },
        Err(e) => Check {
            name: "sign-in",
            ok: false,
            detail: e,
        },
    });
    checks.push(opencode_check().await);
    checks.push(entry_check(args, project));
    let ok = checks.iter().all(|c| c.ok);
    let doc = json!({
        "ok": ok,
        "checks": checks.iter().map(|c| json!({ "name": c.name, "ok": c.ok, "detail": c.detail })).collect::<Vec<_>>(),
    });
    out.show(&doc, || {
        checks
            .iter()
            .map(|c| {
                format!(
                    "{} {:<13} {}\n",
                    if c.ok { "ok  " } else { "MISS" },
                    c.name,
                    c.detail
                )
            })
            .collect()
    });
    if ok {
        return Ok(ExitCode::SUCCESS);
    }
    let missing: Vec<&str> = checks.iter().filter(|c| !c.ok).map(|c| c.name).collect();
    eprintln!("error: missing: {} (see above)", missing.join(", "));
    Ok(ExitCode::from(1))
}

/// The first `opencode` (or `opencode2`) on PATH and its version.
async fn opencode_check() -> Check {
    let name = "opencode";
    let Some(bin) = ["opencode", "opencode2"].iter().find_map(|n| on_path(n)) else {
        return Check {
            name,
            ok: false,
            detail: "not found on PATH: install it (`npm install -g opencode-ai`)".into(),
        };
    };
    let run = tokio::process::Command::new(&bin)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(VERSION_TIMEOUT, run).await {
        Ok(Ok(o)) if o.status.success() => o,
        Ok(Ok(o)) => {
            return Check {
                name,
                ok: false,
                detail: format!("`{} --version` failed ({})", bin.display(), o.status),
            }
        }
        Ok(Err(e)) => {
            return Check {
                name,
                ok: false,
                detail: format!("cannot run {}: {e}", bin.display()),
            }
        }
        Err(_) => {
            return Check {
                name,
                ok: false,
                detail: format!("`{} --version` did not answer", bin.display()),
            }
        }
    };
    let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let min = format!("{}.{}.{}", MIN_OPENCODE.0, MIN_OPENCODE.1, MIN_OPENCODE.2);
    match parse_version(&text) {
        Some(v) if v >= MIN_OPENCODE => Check {
            name,
            ok: true,
            detail: format!("{text} ({})", bin.display()),
        },
        Some(_) => Check {
            name,
            ok: false,
            detail: format!("{text} is older than {min}, the oldest the plugin supports"),
        },
        None => Check {
            name,
            ok: false,
            detail: format!("unreadable version {text:?} from {}", bin.display()),
        },
    }
}

/// `1.18.33` (also `v1.18.33`, `opencode 1.18.33-beta.1`) → (1, 18, 33).
fn parse_version(text: &str) -> Option<(u64, u64, u64)> {
    let word = text.split_whitespace().last()?.trim_start_matches('v');
    let core = word.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    Some((
        parts.next()??,
        parts.next()??,
        parts.next().unwrap_or(Some(0))?,
    ))
}

fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| {
            p.metadata()
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// Is the plugin in the configuration OpenCode will read (the chosen file, or project + global)?
fn entry_check(args: &SetupOpencodeArgs, project: &Path) -> Check {
    let name = "plugin entry";
    let mut files = Vec::new();
    match (&args.config, args.global) {
        (Some(p), _) => files.push((p.clone(), p.is_file())),
        (None, true) => files.extend(global_dir().map(|d| config_in(&d))),
        (None, false) => {
            files.push(project_config(project));
            files.extend(global_dir().map(|d| config_in(&d)));
        }
    }
    let mut problems = Vec::new();
    for (path, _) in files.iter().filter(|(_, exists)| *exists) {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                problems.push(format!("cannot read {}: {e}", path.display()));
                continue;
            }
        };
        match edit::find_entry(&text, &args.package) {
            Ok(Some(found)) => {
                return Check {
                    name,
                    ok: true,
                    detail: format!("{} in {} ({} mode)", found.spec, path.display(), found.mode),
                }
            }
            Ok(None) => {}
            Err(e) => problems.push(format!("{}: {e:#}", path.display())),
        }
    }
    let looked: Vec<String> = files.iter().map(|(p, _)| p.display().to_string()).collect();
    let mut detail = format!(
        "no {} entry in {}; run `cos setup opencode`",
        edit::package_name(&args.package),
        looked.join(" or ")
    );
    if !problems.is_empty() {
        detail.push_str(&format!(" ({})", problems.join("; ")));
    }
    Check {
        name,
        ok: false,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_version("1.18.33"), Some((1, 18, 33)));
        assert_eq!(parse_version("opencode v2.0.1-beta.3\n"), Some((2, 0, 1)));
        assert_eq!(parse_version("1.18"), Some((1, 18, 0)));
        assert_eq!(parse_version("dev"), None);
    }

    #[test]
    fn project_config_is_the_nearest_up_to_the_work_tree_root() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        assert_eq!(
            project_config(&root.join("a/b")),
            (root.join("opencode.json"), false)
        );
        std::fs::write(root.join("opencode.jsonc"), "{}").unwrap();
        assert_eq!(
            project_config(&root.join("a/b")),
            (root.join("opencode.jsonc"), true)
        );
        std::fs::write(root.join("a/opencode.json"), "{}").unwrap();
        assert_eq!(
            project_config(&root.join("a/b")),
            (root.join("a/opencode.json"), true)
        );
    }

    #[test]
    fn apply_backs_up_once_and_keeps_the_first_backup() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("opencode.jsonc");
        std::fs::write(&file, "// mine\n{ \"plugin\": [] }\n").unwrap();
        let remote = Wanted {
            spec: PACKAGE.into(),
            mode: Some(Mode::Remote),
        };
        let first = apply(&file, true, &remote).unwrap();
        assert!(first.changed);
        let b1 = first.backup.unwrap();
        assert_eq!(
            std::fs::read_to_string(&b1).unwrap(),
            "// mine\n{ \"plugin\": [] }\n"
        );
        assert!(std::fs::read_to_string(&file)
            .unwrap()
            .starts_with("// mine\n"));
        // Same again: nothing written, no new backup.
        let again = apply(&file, true, &remote).unwrap();
        assert!(!again.changed && again.backup.is_none());
        let local = Wanted {
            spec: PACKAGE.into(),
            mode: Some(Mode::Local),
        };
        let third = apply(&file, true, &local).unwrap();
        assert_ne!(third.backup.as_ref().unwrap(), &b1);
        assert_eq!(
            std::fs::read_to_string(&b1).unwrap(),
            "// mine\n{ \"plugin\": [] }\n"
        );
        // A broken file is refused before any backup.
        std::fs::write(&file, "{ \"plugin\": [ }").unwrap();
        let before: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert!(apply(&file, true, &remote).is_err());
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), before.len());
    }
}
