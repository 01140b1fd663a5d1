//! What Herdr tells an action about where it was invoked: `HERDR_PLUGIN_CONTEXT_JSON`,
//! `HERDR_PANE_ID`, and the Git worktree behind the focused pane.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error::{HerdrError, HerdrResult};

/// The invocation context (the fields the actions use).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PluginContext {
    /// The focused pane (`focused_pane_id`, else `HERDR_PANE_ID`).
    pub pane: Option<String>,
    /// Candidate directories for the worktree, most specific first: the worktree's checkout
    /// path (`worktree.checkout_path`), its repository (`worktree.repo_root`), the focused
    /// pane's cwd, the workspace cwd.
    pub dirs: Vec<PathBuf>,
}

impl PluginContext {
    /// Parse `context_json` (may be empty) with `pane_env` (`HERDR_PANE_ID`) as a fallback.
    pub fn parse(context_json: Option<&str>, pane_env: Option<&str>) -> HerdrResult<PluginContext> {
        let doc: Value = match context_json.map(str::trim).filter(|s| !s.is_empty()) {
            Some(text) => serde_json::from_str(text).map_err(|e| {
                HerdrError::invalid("HERDR_PLUGIN_CONTEXT_JSON", format!("is not JSON: {e}"))
            })?,
            None => Value::Null,
        };
        let text = |v: &Value| {
            v.as_str()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let pane = text(&doc["focused_pane_id"]).or_else(|| {
            pane_env
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        });
        let mut dirs = Vec::new();
        let worktree = &doc["worktree"];
        for candidate in [
            &worktree["checkout_path"],
            &worktree["repo_root"],
            &doc["focused_pane_cwd"],
            &doc["workspace_cwd"],
        ] {
            if let Some(dir) = text(candidate) {
                dirs.push(PathBuf::from(dir));
            }
        }
        Ok(PluginContext { pane, dirs })
    }

    /// From the process environment.
    pub fn from_env() -> HerdrResult<PluginContext> {
        let json = std::env::var("HERDR_PLUGIN_CONTEXT_JSON").ok();
        let pane = std::env::var("HERDR_PANE_ID").ok();
        PluginContext::parse(json.as_deref(), pane.as_deref())
    }

    /// The focused pane, or an error naming what is missing.
    pub fn require_pane(&self) -> HerdrResult<&str> {
        self.pane.as_deref().ok_or(HerdrError::NotInHerdr(
            "HERDR_PANE_ID (or focused_pane_id in HERDR_PLUGIN_CONTEXT_JSON)",
        ))
    }

    /// The Git root of the first candidate directory inside a Git worktree.
    pub fn git_root(&self) -> HerdrResult<PathBuf> {
        if self.dirs.is_empty() {
            return Err(HerdrError::invalid(
                "worktree",
                "Herdr gave no worktree, pane or workspace directory; focus a pane inside a Git worktree",
            ));
        }
        let mut tried = Vec::new();
        for dir in &self.dirs {
            match git_toplevel(dir) {
                Ok(root) => return Ok(root),
                Err(why) => tried.push(format!("{} ({why})", dir.display())),
            }
        }
        Err(HerdrError::invalid(
            "worktree",
            format!("no Git worktree found at {}", tried.join(", ")),
        ))
    }
}

/// `git rev-parse --show-toplevel` in `dir`.
pub fn git_toplevel(dir: &Path) -> Result<PathBuf, String> {
    if !dir.is_dir() {
        return Err("not a directory".into());
    }
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--show-toplevel"])
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err("not inside a Git worktree".into());
    }
    let root = String::from_utf8_lossy(&out.stdout)
        .trim_end_matches(['\n', '\r'])
        .to_string();
    if root.is_empty() {
        return Err("git printed no worktree root".into());
    }
    Ok(PathBuf::from(root))
}

/// A sandbox name for `root`: `hd-<repo name, ≤12 of [a-z0-9-]>-<6 random base36>`, within the
/// 22-character limit.
pub fn box_name(root: &Path) -> String {
    let base = root
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let mut slug: String = base
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    slug = slug
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    slug.truncate(12);
    let slug = slug.trim_end_matches('-');
    let slug = if slug.is_empty() { "repo" } else { slug };
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let suffix: String = (0..6)
        .map(|_| DIGITS[rand::random::<usize>() % DIGITS.len()] as char)
        .collect();
    format!("hd-{slug}-{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_prefers_focused_pane_and_worktree_path() {
        let json = r#"{"focused_pane_id":"w1:p3","worktree":{"checkout_path":"/a"},"focused_pane_cwd":"/b","workspace_cwd":"/c"}"#;
        let c = PluginContext::parse(Some(json), Some("w1:p9")).unwrap();
        assert_eq!(c.pane.as_deref(), Some("w1:p3"));
        assert_eq!(
            c.dirs,
            [
                PathBuf::from("/a"),
                PathBuf::from("/b"),
                PathBuf::from("/c")
            ]
        );
        // Herdr's WorkspaceWorktreeInfo has `repo_root`, never `root`.
        let json = r#"{"focused_pane_id":"w1:p3","worktree":{"repo_key":"k","repo_name":"r","repo_root":"/repo","checkout_path":"","is_linked_worktree":false},"workspace_cwd":"/c"}"#;
        let c = PluginContext::parse(Some(json), None).unwrap();
        assert_eq!(c.dirs, [PathBuf::from("/repo"), PathBuf::from("/c")]);
        let c = PluginContext::parse(Some(r#"{"worktree":{"root":"/nope"}}"#), None).unwrap();
        assert!(c.dirs.is_empty(), "{:?}", c.dirs);
        let c = PluginContext::parse(None, Some("w1:p9")).unwrap();
        assert_eq!(c.require_pane().unwrap(), "w1:p9");
        assert!(PluginContext::parse(Some("{"), None).is_err());
        assert!(PluginContext::parse(None, None)
            .unwrap()
            .require_pane()
            .is_err());
    }

    #[test]
    fn box_names_fit_the_limit() {
        for root in ["/x/My Very_Long Repository.Name", "/x/---", "/x/a"] {
            let n = box_name(Path::new(root));
            assert!(n.len() <= 22, "{n}");
            assert!(n.starts_with("hd-"));
            assert!(
                n.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{n}"
            );
        }
        assert!(
            box_name(Path::new("/x/My Very_Long Repository.Name")).starts_with("hd-my-very-long-")
        );
    }
}
