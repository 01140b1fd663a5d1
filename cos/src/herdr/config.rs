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
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(PluginConfig::default())
            }
            Err(e) => return Err(HerdrError::io(format!("reading {}", path.display()), e)),
        };
        serde_json::from_str(&text).map_err(|e| HerdrError::Config {
            path,
            message: e.to_string(),
        })
    }

    /// Check every value and fill in the defaults.
    pub fn settings(&self, path: &Path) -> HerdrResult<Settings> {
        let bad = |message: String| HerdrError::Config {
            path: path.to_path_buf(),
            message,
        };
        let agent = match &self.agent {
            Some(key) => Agent::from_key(key)
                .ok_or_else(|| bad(format!("agent: {}", Agent::unknown_message(key))))?,
            None => Agent::from_key("claude-code").expect("claude-code is in the table"),
        };
        let remote_root = self
            .remote_root
            .clone()
            .unwrap_or_else(|| DEFAULT_REMOTE_ROOT.to_string());
        validate_remote_root(&remote_root).map_err(|e| bad(e.to_string()))?;
        let auto_pause_secs = createos_sandbox::validate::auto_pause_text(
            "autoPause",
            self.auto_pause.as_deref().unwrap_or(DEFAULT_AUTO_PAUSE),
        )
        .map_err(|e| bad(e.to_string()))?;
        let shape = self
            .shape
            .clone()
            .unwrap_or_else(|| DEFAULT_SHAPE.to_string());
        createos_sandbox::validate::shape("shape", &shape).map_err(|e| bad(e.to_string()))?;
        let rootfs = self.rootfs.clone().filter(|r| !r.trim().is_empty());
        let egress = self.egress.clone().unwrap_or_default();
        for rule in &egress {
            createos_sandbox::api::security::validate_egress_rule(rule)
                .map_err(|e| bad(e.to_string()))?;
        }
        Ok(Settings {
            agent,
            shape,
            rootfs,
            auto_pause_secs,
            remote_root,
            egress,
            excludes: self.excludes.clone().unwrap_or_default(),
            sync_excludes: self
                .sync_excludes
                .clone()
                .unwrap_or_else(|| vec![".git".into(), "node_modules".into()]),
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
    createos_sandbox::validate::guest_path("remoteRoot", path)?;
    let refuse = |why: &str| HerdrError::invalid("remoteRoot", format!("{path:?} {why}"));
    if let Some(c) = path
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-')))
    {
        return Err(refuse(&format!(
            "contains {c:?}; only letters, digits, '.', '_', '-' and '/' are allowed"
        )));
    }
    if path.trim_end_matches('/').is_empty() {
        return Err(refuse("is the root directory"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_root_rules() {
        assert!(validate_remote_root("/workspace").is_ok());
        assert!(validate_remote_root("/home/dev/my-app_1.2").is_ok());
        for bad in [
            "workspace",
            "/a/../b",
            "/",
            "'; touch /tmp/PWNED; #",
            "/w'; touch /tmp/PWNED; #",
            "/a b",
            "/a$b",
        ] {
            assert!(validate_remote_root(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn settings_refuse_what_creation_would_refuse() {
        let path = Path::new("config.json");
        let with = |json: &str| {
            serde_json::from_str::<PluginConfig>(json)
                .unwrap()
                .settings(path)
        };
        assert_eq!(
            with(r#"{"autoPause": "2h"}"#).unwrap().auto_pause_secs,
            7200
        );
        assert_eq!(
            with(r#"{"autoPause": "1d"}"#).unwrap().auto_pause_secs,
            86_400
        );
        for bad in [
            r#"{"autoPause": "2d"}"#,
            r#"{"autoPause": "10s"}"#,
            r#"{"autoPause": "5x"}"#,
            r#"{"shape": "large"}"#,
            r#"{"shape": " "}"#,
            r#"{"egress": ["a b"]}"#,
            r#"{"remoteRoot": "/a\u0000b"}"#,
        ] {
            let err = with(bad).unwrap_err().to_string();
            assert!(err.starts_with("config config.json:"), "{bad}: {err}");
        }
        assert_eq!(
            with(r#"{"shape": "s-1vcpu-1gb"}"#).unwrap().shape,
            "s-1vcpu-1gb"
        );
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = serde_json::from_str::<PluginConfig>(r#"{"remoteRot": "/x"}"#).unwrap_err();
        assert!(err.to_string().contains("remoteRot"));
        let ok: PluginConfig =
            serde_json::from_str(r#"{"autoPause": "45m", "syncExcludes": []}"#).unwrap();
        let s = ok.settings(Path::new("config.json")).unwrap();
        assert_eq!(s.auto_pause_secs, 2700);
        assert!(s.sync_excludes.is_empty());
        assert_eq!(s.agent.key, "claude-code");
    }
}
