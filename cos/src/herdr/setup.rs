//! `cos setup herdr`: check the prerequisites, put the plugin in place (manifest + launcher
//! with cos's absolute path) and link it unless Herdr already has it, write the plugin's
//! `config.json` (0600) unless one exists, and add the missing key bindings to Herdr's
//! `config.toml` transactionally, after a backup ([`super::keys`]).

use std::path::{Path, PathBuf};

use super::config::{PluginConfig, CONFIG_FILE};
use super::error::{HerdrError, HerdrResult};
use super::host::HerdrHost;
use super::state::write_bytes_atomic;
use super::{MANIFEST, MIN_HERDR_VERSION, PLUGIN_ID};

/// The build script shipped next to the manifest.
pub const BUILD_SCRIPT: &str = include_str!("../../../integrations/herdr/build.sh");
pub use super::keys::{install_key_bindings, BoundKey, KeysOutcome, KEYS_BACKUP, KEY_BINDINGS};

/// The launcher every manifest entry runs: `exec <cos> herdr "$@"`.
pub fn launcher_script(cos: &Path) -> HerdrResult<String> {
    let text = cos
        .to_str()
        .ok_or_else(|| HerdrError::invalid("cos path", "is not UTF-8"))?;
    if !cos.is_absolute() || text.chars().any(char::is_control) {
        return Err(HerdrError::invalid(
            "cos path",
            format!("{text:?} must be absolute and free of control characters"),
        ));
    }
    let quoted = createos_sandbox::shell::quote(text);
    Ok(format!(
        "#!/bin/sh\n# Written by cos setup herdr: the CreateOS Herdr actions, run by cos.\nCOS_BIN={quoted}\nexport COS_BIN\nexec \"$COS_BIN\" herdr \"$@\"\n"
    ))
}

/// Write the plugin directory: manifest, build script, launcher.
pub fn write_plugin_dir(dir: &Path, cos: &Path) -> HerdrResult<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| HerdrError::io(format!("creating {}", dir.display()), e))?;
    write_bytes_atomic(&dir.join("herdr-plugin.toml"), MANIFEST.as_bytes(), 0o644)?;
    write_bytes_atomic(&dir.join("build.sh"), BUILD_SCRIPT.as_bytes(), 0o755)?;
    write_bytes_atomic(&dir.join("run.sh"), launcher_script(cos)?.as_bytes(), 0o755)
}

/// Herdr's config root: `$XDG_CONFIG_HOME/herdr`, else `~/.config/herdr`.
pub fn herdr_config_root() -> Option<PathBuf> {
    match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(x) => Some(PathBuf::from(x).join("herdr")),
        None => dirs::home_dir().map(|h| h.join(".config").join("herdr")),
    }
}

/// The `config.toml` Herdr loads: `HERDR_CONFIG_PATH` when set (Herdr honours it), else
/// `config.toml` in [`herdr_config_root`].
pub fn herdr_config_path() -> Option<PathBuf> {
    match std::env::var_os("HERDR_CONFIG_PATH").filter(|v| !v.is_empty()) {
        Some(path) => Some(PathBuf::from(path)),
        None => herdr_config_root().map(|root| root.join("config.toml")),
    }
}

/// Where `setup` keeps the plugin: `<data dir>/createos-sandbox/herdr-plugin`.
pub fn default_plugin_dir() -> Option<PathBuf> {
    dirs::data_dir().map(|d| d.join("createos-sandbox").join("herdr-plugin"))
}

/// Flags of `cos setup herdr`.
#[derive(Clone, Debug, Default)]
pub struct SetupOptions {
    /// Only check.
    pub doctor: bool,
    /// Agent key.
    pub agent: Option<String>,
    /// Shape.
    pub shape: Option<String>,
    /// Base image.
    pub rootfs: Option<String>,
    /// Auto-pause.
    pub auto_pause: Option<String>,
    /// Worktree directory in the sandbox.
    pub remote_root: Option<String>,
    /// Leave `config.toml` alone.
    pub no_keys: bool,
    /// Replace an existing `config.json`.
    pub force: bool,
}

impl SetupOptions {
    /// The `config.json` these flags describe, checked by the same rules as an action's
    /// settings ([`PluginConfig::settings`]), so setup never writes what `start` would refuse.
    pub fn plugin_config(&self) -> HerdrResult<PluginConfig> {
        let config = PluginConfig {
            agent: Some(self.agent.clone().unwrap_or_else(|| "claude-code".into())),
            shape: Some(
                self.shape
                    .clone()
                    .unwrap_or_else(|| super::config::DEFAULT_SHAPE.into()),
            ),
            rootfs: self.rootfs.clone().filter(|r| !r.trim().is_empty()),
            auto_pause: Some(
                self.auto_pause
                    .clone()
                    .unwrap_or_else(|| super::config::DEFAULT_AUTO_PAUSE.into()),
            ),
            remote_root: Some(
                self.remote_root
                    .clone()
                    .unwrap_or_else(|| super::config::DEFAULT_REMOTE_ROOT.into()),
            ),
            ..Default::default()
        };
        config.settings(Path::new("(cos setup herdr flags)"))?;
        Ok(config)
    }
}

/// One prerequisite.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// Whether it passed.
    pub ok: bool,
    /// What was found.
    pub detail: String,
}

/// Check `herdr` (present, new enough) and `git`.
pub async fn check_tools(host: &HerdrHost) -> Vec<Check> {
    let mut checks = Vec::new();
    checks.push(match host.version().await {
        Ok(v) if v >= MIN_HERDR_VERSION => Check {
            name: "herdr".into(),
            ok: true,
            detail: format!("{}.{}.{}", v.0, v.1, v.2),
        },
        Ok(v) => Check {
            name: "herdr".into(),
            ok: false,
            detail: format!(
                "{}.{}.{} is older than the required {}.{}.{}",
                v.0, v.1, v.2, MIN_HERDR_VERSION.0, MIN_HERDR_VERSION.1, MIN_HERDR_VERSION.2
            ),
        },
        Err(e) => Check {
            name: "herdr".into(),
            ok: false,
            detail: e.to_string(),
        },
    });
    let git = tokio::process::Command::new("git")
        .arg("--version")
        .output()
        .await;
    checks.push(match git {
        Ok(o) if o.status.success() => Check {
            name: "git".into(),
            ok: true,
            detail: String::from_utf8_lossy(&o.stdout).trim().to_string(),
        },
        Ok(o) => Check {
            name: "git".into(),
            ok: false,
            detail: o.status.to_string(),
        },
        Err(e) => Check {
            name: "git".into(),
            ok: false,
            detail: format!("not found: {e}"),
        },
    });
    checks
}

/// How Herdr has the plugin, from `plugin list --json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstalledPlugin {
    /// Whether it is enabled (a disabled plugin stays disabled: setup never re-enables it).
    pub enabled: bool,
    /// `local` (linked) or `github` (installed with `herdr plugin install`).
    pub source: String,
    /// Its directory.
    pub root: String,
}

/// The plugin's entry in a `plugin list --json` answer
/// (`{"id":…,"result":{"type":"plugin_list","plugins":[{"plugin_id":…}]}}`); an answer of
/// any other shape is an error, never "not installed" (that would relink over it).
pub fn find_plugin(answer: &str) -> HerdrResult<Option<InstalledPlugin>> {
    let unexpected = |why: &str| HerdrError::Herdr {
        command: "plugin list".into(),
        message: format!("{why} in its answer {:?}", answer.trim()),
    };
    let v: serde_json::Value =
        serde_json::from_str(answer.trim()).map_err(|_| unexpected("no JSON"))?;
    let plugins = v["result"]["plugins"]
        .as_array()
        .ok_or_else(|| unexpected("no result.plugins"))?;
    Ok(plugins
        .iter()
        .find(|p| p["plugin_id"].as_str() == Some(PLUGIN_ID))
        .map(|p| InstalledPlugin {
            enabled: p["enabled"].as_bool().unwrap_or(true),
            source: p["source"]["kind"].as_str().unwrap_or("local").to_string(),
            root: p["plugin_root"].as_str().unwrap_or_default().to_string(),
        }))
}

/// The plugin as Herdr has it (`plugin list --json --plugin createos.sandbox`).
pub async fn installed_plugin(host: &HerdrHost) -> HerdrResult<Option<InstalledPlugin>> {
    let args = ["plugin", "list", "--json", "--plugin", PLUGIN_ID].map(String::from);
    find_plugin(&host.call(&args).await?)
}

/// Write `config.json` into `dir` (0600) unless it exists and `force` is off. Returns whether
/// it was written.
pub fn write_plugin_config(dir: &Path, config: &PluginConfig, force: bool) -> HerdrResult<bool> {
    let path = dir.join(CONFIG_FILE);
    if path.exists() && !force {
        return Ok(false);
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|e| HerdrError::io(format!("creating {}", dir.display()), e))?;
    let mut text = serde_json::to_vec_pretty(config)
        .map_err(|e| HerdrError::io("encoding config.json", std::io::Error::other(e)))?;
    text.push(b'\n');
    write_bytes_atomic(&path, &text, 0o600)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launcher_quotes_the_path() {
        let s = launcher_script(Path::new("/opt/it's/cos")).unwrap();
        assert!(s.contains(r#"COS_BIN='/opt/it'\''s/cos'"#));
        assert!(launcher_script(Path::new("cos")).is_err());
    }

    #[test]
    fn plugin_list_answers_are_read_by_plugin_id() {
        let answer = r#"{"id":"cli:plugin","result":{"type":"plugin_list","plugins":[
            {"plugin_id":"other.x","name":"X","version":"1","manifest_path":"/x/herdr-plugin.toml","plugin_root":"/x","enabled":true},
            {"plugin_id":"createos.sandbox","name":"CreateOS","version":"0.2.0","manifest_path":"/p/herdr-plugin.toml",
             "plugin_root":"/p","enabled":false,"source":{"kind":"github","owner":"o","repo":"r"}}]}}"#;
        let found = find_plugin(answer).unwrap().unwrap();
        assert_eq!(
            found,
            InstalledPlugin {
                enabled: false,
                source: "github".into(),
                root: "/p".into()
            }
        );
        let none = r#"{"id":"cli:plugin","result":{"type":"plugin_list","plugins":[]}}"#;
        assert_eq!(find_plugin(none).unwrap(), None);
        // The shape the old code looked for is not Herdr's: refused, never read as "not linked".
        assert!(find_plugin(r#"[{"id":"createos.sandbox"}]"#).is_err());
        assert!(find_plugin("not json").is_err());
    }

    #[test]
    fn options_are_checked() {
        assert!(SetupOptions {
            agent: Some("nope".into()),
            ..Default::default()
        }
        .plugin_config()
        .is_err());
        assert!(SetupOptions {
            remote_root: Some("/w;x".into()),
            ..Default::default()
        }
        .plugin_config()
        .is_err());
        assert!(SetupOptions {
            auto_pause: Some("2d".into()),
            ..Default::default()
        }
        .plugin_config()
        .is_err());
        assert!(SetupOptions {
            shape: Some("big".into()),
            ..Default::default()
        }
        .plugin_config()
        .is_err());
        let c = SetupOptions {
            agent: Some("codex".into()),
            ..Default::default()
        }
        .plugin_config()
        .unwrap();
        assert_eq!(c.agent.as_deref(), Some("codex"));
        assert_eq!(c.remote_root.as_deref(), Some("/workspace"));
    }
}
