//! Staging host files into a session sandbox as it is prepared (plugins.md §2.2, §2.5): the
//! project once (`sync: "once"`), and the skill directories (`syncSkills`, `skillDirs`) at
//! every attach so edited skills reach the guest.

use std::path::{Path, PathBuf};

use super::config::{ProjectSync, ToolsConfig};
use super::confine;
use super::ToolError;
use createos_sandbox::snapshot::{Snapshot, SnapshotOptions};
use createos_sandbox::transfer::{self, ApiRemote};
use createos_sandbox::{Error, Sandbox};

/// What staging copied, for the log and the status.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Staged {
    /// Project files copied into the working directory (`None`: not staged).
    pub project_files: Option<u64>,
    /// Guest directories that received a skill directory.
    pub skill_dirs: Vec<String>,
}

/// Copy the project into `config.cwd` when `sync` is `once`. Called only for a sandbox that
/// was never initialized, so the copy happens once per sandbox.
pub async fn stage_project(
    sandbox: &Sandbox,
    config: &ToolsConfig,
    project: &Path,
) -> Result<Option<u64>, ToolError> {
    if config.sync != ProjectSync::Once {
        return Ok(None);
    }
    let options = super::config::SYNC_ONCE_EXCLUDES
        .iter()
        .fold(SnapshotOptions::new(), |o, p| o.exclude(*p));
    let snapshot = match Snapshot::scan_async(project.to_path_buf(), options).await {
        Ok(snapshot) => snapshot,
        // An empty project (or one whose every file is filtered out) has nothing to copy;
        // refusals such as the home directory still fail below.
        Err(Error::InvalidInput { message, .. }) if message.starts_with("nothing to upload") => {
            tracing::info!(project = %project.display(), "sync once: the project has nothing to upload");
            return Ok(Some(0));
        }
        Err(err) => return Err(staging_error("the project", project, err)),
    };
    let remote = ApiRemote::new(sandbox.clone());
    let uploaded = transfer::upload_snapshot(&remote, &snapshot, &config.cwd, None)
        .await
        .map_err(|err| staging_error("the project", project, err))?;
    Ok(Some(uploaded.files))
}

/// Check every configured skill directory (see [`confine::skill_dir`]) before anything is
/// created: a refusal names it (`skillDirs[i]`). Missing ones are fine (skipped at staging).
pub fn check_skill_dirs(config: &ToolsConfig, project: &Path) -> Result<(), ToolError> {
    if !config.sync_skills {
        return Ok(());
    }
    for (i, dir) in config.skill_dirs.iter().enumerate() {
        confine::skill_dir(project, &format!("skillDirs[{i}]"), dir)?;
    }
    Ok(())
}

/// Copy every existing skill directory to the same absolute path in the guest and, when it
/// lies inside the project, also to the mapped path under the working directory. Missing
/// directories (virtual or built-in skills) are skipped; each is checked again as it is
/// copied (see [`confine::skill_dir`]), so a directory swapped for a link since the start is
/// refused.
pub async fn stage_skills(
    sandbox: &Sandbox,
    config: &ToolsConfig,
    project: &Path,
) -> Result<Vec<String>, ToolError> {
    if !config.sync_skills {
        return Ok(Vec::new());
    }
    let mut staged = Vec::new();
    for (i, dir) in config.skill_dirs.iter().enumerate() {
        let Some(real) = confine::skill_dir(project, &format!("skillDirs[{i}]"), dir)? else {
            tracing::debug!(dir = %dir.display(), "skill directory missing; skipped");
            continue;
        };
        // Skill folders often live under ~/.config; the credential deny-list still applies.
        let mut options = SnapshotOptions::new();
        options.allow_sensitive_root = true;
        let snapshot = Snapshot::scan_async(real.clone(), options)
            .await
            .map_err(|err| staging_error("the skill directory", dir, err))?;
        let remote = ApiRemote::new(sandbox.clone());
        for dest in guest_targets(dir, &real, project, &config.cwd) {
            transfer::upload_snapshot(&remote, &snapshot, &dest, None)
                .await
                .map_err(|err| staging_error("the skill directory", dir, err))?;
            staged.push(dest);
        }
    }
    Ok(staged)
}

/// Guest destinations of a skill directory: its own absolute path, plus the mapped path when
/// it lies inside the project.
fn guest_targets(given: &Path, real: &Path, project: &Path, cwd: &str) -> Vec<String> {
    let mut targets = vec![given.to_string_lossy().into_owned()];
    let project = std::fs::canonicalize(project).unwrap_or_else(|_| project.to_path_buf());
    if let Ok(rel) = real.strip_prefix(&project) {
        let mapped: PathBuf = Path::new(cwd).join(rel);
        let mapped = mapped.to_string_lossy().into_owned();
        if !targets.contains(&mapped) {
            targets.push(mapped);
        }
    }
    targets
}

fn staging_error(what: &str, path: &Path, err: Error) -> ToolError {
    ToolError::Refused(format!(
        "staging {what} {} into the session sandbox failed: {err}",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skills_inside_the_project_go_to_both_places() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("proj");
        let skill = project.join(".opencode/skills/lint");
        std::fs::create_dir_all(&skill).unwrap();
        let real = std::fs::canonicalize(&skill).unwrap();
        let targets = guest_targets(&skill, &real, &project, "/root/workspace");
        assert_eq!(
            targets,
            [
                skill.to_string_lossy().into_owned(),
                "/root/workspace/.opencode/skills/lint".to_string()
            ]
        );

        let outside = tmp.path().join("global/skills/x");
        std::fs::create_dir_all(&outside).unwrap();
        let real = std::fs::canonicalize(&outside).unwrap();
        assert_eq!(
            guest_targets(&outside, &real, &project, "/root/workspace"),
            [outside.to_string_lossy().into_owned()]
        );
    }
}
