//! The plugin's `config.json` (in `herdr plugin config-dir createos.sandbox`): every key
//! optional, unknown keys refused so a typo cannot silently disable a safety setting.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::agents::Agent;
use super::error::{HerdrError, HerdrResult};

/// Default sandbox shape.
pub const DEFAULT_SHAPE: &str = "s-2vcpu-4gb";
/// Default idle time before the sandbox pauses itself.
pub const DEFAULT_AUTO_PAUSE: &str = "30m";
/// Default directory of the worktree in the sandbox.
pub const DEFAULT_REMOTE_ROOT: &str = "/workspace";
/// Name of the file in the plugin config directory.
pub const CONFIG_FILE: &str = "config.json";

/// The settings as written in `config.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginConfig {
    /// Agent key (`claude-code`, `codex`, `opencode`, `pi`, `cursor`, `shell`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Sandbox shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    /// Base image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<String>,
    /// Idle time before auto-pause: `90s`, `30m`, `2h` or plain seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_pause: Option<String>,
    /// Worktree directory in the sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_root: Option<String>,
    /// Hosts the sandbox may reach (empty: unrestricted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<String>>,
    /// Paths left out of the upload (exact path, `dir/`, `*.ext`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excludes: Option<Vec<String>>,
    /// Paths left out of `sync` (default `.git`, `node_modules`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_excludes: Option<Vec<String>>,
}

/// The checked settings an action works with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The agent.
    pub agent: Agent,
    /// Sandbox shape.
    pub shape: String,
    /// Base image, if set.
    pub rootfs: Option<String>,
    /// Auto-pause after this many seconds of inactivity.
    pub auto_pause_secs: u32,
    /// Worktree directory in the sandbox (validated).
    pub remote_root: String,
    /// Egress allow-list.
    pub egress: Vec<String>,
    /// Upload excludes.
    pub excludes: Vec<String>,
    /// Sync excludes.
    pub sync_excludes: Vec<String>,
}

impl PluginConfig {
    /// Read `<dir>/config.json`; a missing file is the empty configuration, anything
    /// unreadable or malformed is an error.
    pub fn load(dir: &Path) -> HerdrResult<PluginConfig> {
        let path = dir.join(CONFIG_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(PluginConfig::default()),
            Err(e) => return Err(HerdrError::io(format!("reading {}", path.display()), e)),
        };
        serde_json::from_str(&text).map_err(|e| HerdrError::Config { path, message: e.to_string() })
    }

    /// Check every value and fill in the defaults.
    pub fn settings(&self, path: &Path) -> HerdrResult<Settings> {
        let bad = |message: String| HerdrError::Config { path: path.to_path_buf(), message };
        let agent = match &self.agent {
            Some(key) => Agent::from_key(key).ok_or_else(|| bad(format!("agent: {}", Agent::unknown_message(key))))?,
            None => Agent::from_key("claude-code").expect("claude-code is in the table"),
        };
        let remote_root = self.remote_root.clone().unwrap_or_else(|| DEFAULT_REMOTE_ROOT.to_string());
        validate_remote_root(&remote_root).map_err(|e| bad(e.to_string()))?;
        let auto_pause_secs = parse_duration_secs(self.auto_pause.as_deref().unwrap_or(DEFAULT_AUTO_PAUSE))
            .map_err(|m| bad(format!("autoPause: {m}")))?;
        let shape = self.shape.clone().unwrap_or_else(|| DEFAULT_SHAPE.to_string());
        if shape.trim().is_empty() {
            return Err(bad("shape: must not be empty".into()));
        }
        let egress = self.egress.clone().unwrap_or_default();
        if let Some(rule) = egress.iter().find(|r| r.trim().is_empty() || r.chars().any(char::is_whitespace)) {
            return Err(bad(format!("egress: {rule:?} is not a host name or address")));
        }
        Ok(Settings {
            agent,
            shape,
            rootfs: self.rootfs.clone().filter(|r| !r.trim().is_empty()),
            auto_pause_secs,
            remote_root,
            egress,
            excludes: self.excludes.clone().unwrap_or_default(),
            sync_excludes: self.sync_excludes.clone().unwrap_or_else(|| vec![".git".into(), "node_modules".into()]),
        })
    }
}

/// The config file path in `dir`.
pub fn config_path(dir: &Path) -> PathBuf {
    dir.join(CONFIG_FILE)
}

/// `remoteRoot` must be absolute, made of `[A-Za-z0-9._/-]` only (nothing a shell would
/// interpret), and free of `..` segments.
pub fn validate_remote_root(path: &str) -> HerdrResult<()> {
    let refuse = |why: &str| HerdrError::invalid("remoteRoot", format!("{path:?} {why}"));
    if !path.starts_with('/') {
        return Err(refuse("must be an absolute path"));
    }
    if let Some(c) = path.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))) {
        return Err(refuse(&format!("contains {c:?}; only letters, digits, '.', '_', '-' and '/' are allowed")));
    }
    if path.split('/').any(|seg| seg == "..") {
        return Err(refuse("contains a '..' segment"));
    }
    if path.trim_end_matches('/').is_empty() {
        return Err(refuse("is the root directory"));
    }
    Ok(())
}

/// `90s`, `30m`, `2h`, `1d` or plain seconds → seconds (at least 60, fits u32).
pub fn parse_duration_secs(raw: &str) -> Result<u32, String> {
    let raw = raw.trim();
    let (digits, unit) = match raw.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => raw.split_at(i),
        None => (raw, "s"),
    };
    let n: u64 = digits.parse().map_err(|_| format!("{raw:?} is not a duration like 30m"))?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{raw:?} has an unknown unit (use s, m, h or d)")),
    };
    let secs =
        n.checked_mul(scale).filter(|s| *s <= u64::from(u32::MAX)).ok_or_else(|| format!("{raw:?} is too long"))?;
    if secs < 60 {
        return Err(format!("{raw:?} is shorter than a minute"));
    }
    Ok(secs as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_root_rules() {
        assert!(validate_remote_root("/workspace").is_ok());
        assert!(validate_remote_root("/home/dev/my-app_1.2").is_ok());
        for bad in ["workspace", "/a/../b", "/", "'; touch /tmp/PWNED; #", "/w'; touch /tmp/PWNED; #", "/a b", "/a$b"] {
            assert!(validate_remote_root(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_secs("30m"), Ok(1800));
        assert_eq!(parse_duration_secs("2h"), Ok(7200));
        assert_eq!(parse_duration_secs("600"), Ok(600));
        assert!(parse_duration_secs("10s").is_err());
        assert!(parse_duration_secs("5x").is_err());
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = serde_json::from_str::<PluginConfig>(r#"{"remoteRot": "/x"}"#).unwrap_err();
        assert!(err.to_string().contains("remoteRot"));
        let ok: PluginConfig = serde_json::from_str(r#"{"autoPause": "45m", "syncExcludes": []}"#).unwrap();
        let s = ok.settings(Path::new("config.json")).unwrap();
        assert_eq!(s.auto_pause_secs, 2700);
        assert!(s.sync_excludes.is_empty());
        assert_eq!(s.agent.key, "claude-code");
    }
}
