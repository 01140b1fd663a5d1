//! Tool-runtime configuration: environment variable > option > default (plugins.md §2.3).
//! Unknown option keys and invalid values are refused, so a typo never silently falls back.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

/// Left out of the `sync: "once"` project copy at any depth, on top of the snapshot rules (the
/// OpenCode V2 plugin's always-on excludes: dependencies, virtualenvs and tool state).
pub const SYNC_ONCE_EXCLUDES: [&str; 4] = [
    "**/node_modules",
    "**/.venv",
    "**/.opencode",
    "**/.createos",
];

/// Longest deadline a call may ask for (1 h).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid tool configuration: {0}")]
pub struct ConfigError(pub String);

/// Where OpenCode's native shell and file tools run (plugins.md §2.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Native tools keep their local executors; only the `sandbox_*` tools reach sandboxes.
    #[default]
    Local,
    /// Native tools are routed to the session sandbox (served as `native_*` tools).
    Remote,
}

impl Mode {
    /// `local` or `remote`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Local => "local",
            Mode::Remote => "remote",
        }
    }
}

/// Whether the project is copied into a new session sandbox.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProjectSync {
    /// The working directory starts empty.
    #[default]
    None,
    /// The project is copied once, before the first operation of a new sandbox (never again
    /// on reattachment).
    Once,
}

impl ProjectSync {
    /// `none` or `once`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProjectSync::None => "none",
            ProjectSync::Once => "once",
        }
    }
}

/// The effective configuration of the tool runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolsConfig {
    /// Local or remote execution of the native tools.
    pub mode: Mode,
    /// Shape of session sandboxes.
    pub shape: String,
    /// Base image of session sandboxes.
    pub rootfs: String,
    /// Working directory in the guest (absolute, normalized).
    pub cwd: String,
    /// Network the session sandboxes join.
    pub network: Option<String>,
    /// Idle auto-pause delay; `None` = off.
    pub auto_pause: Option<Duration>,
    /// Keep session bindings across restarts (false: destroy owned sandboxes at shutdown).
    pub persist: bool,
    /// Default deadline of a call; `None` = none.
    pub timeout: Option<Duration>,
    /// Project staging of new session sandboxes.
    pub sync: ProjectSync,
    /// Mirror local skill bundles into the sandbox when it is attached (option only).
    pub sync_skills: bool,
    /// The skill directories to mirror (option `skillDirs`, absolute host paths; the plugin
    /// passes what its host lists). Each is staged at the same absolute path in the guest.
    pub skill_dirs: Vec<PathBuf>,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            mode: Mode::Local,
            shape: "s-2vcpu-2gb".into(),
            rootfs: "devbox:1".into(),
            cwd: "/root/workspace".into(),
            network: None,
            auto_pause: Some(Duration::from_secs(30 * 60)),
            persist: true,
            timeout: Some(Duration::from_millis(120_000)),
            sync: ProjectSync::None,
            sync_skills: true,
            skill_dirs: Vec::new(),
        }
    }
}

/// Option key, its environment variable (`syncSkills` is an option only).
const KEYS: &[(&str, Option<&str>)] = &[
    ("mode", Some("CREATEOS_MODE")),
    ("shape", Some("CREATEOS_SHAPE")),
    ("rootfs", Some("CREATEOS_ROOTFS")),
    ("cwd", Some("CREATEOS_CWD")),
    ("network", Some("CREATEOS_NETWORK")),
    ("autoPause", Some("CREATEOS_AUTO_PAUSE")),
    ("sync", Some("CREATEOS_SYNC")),
    ("persist", Some("CREATEOS_PERSIST")),
    ("timeout", Some("CREATEOS_TIMEOUT")),
    ("syncSkills", None),
    ("skillDirs", None),
];

/// The environment variables the configuration reads (for callers that scrub them).
pub fn env_vars() -> impl Iterator<Item = &'static str> {
    KEYS.iter().filter_map(|(_, var)| *var)
}

/// `skillDirs`: a JSON array of absolute host directories.
fn skill_dirs(raw: Raw<'_>) -> Result<Vec<PathBuf>, String> {
    let Raw::Opt(Value::Array(items)) = raw else {
        return Err("must be an array of absolute directory paths".into());
    };
    items
        .iter()
        .map(|item| {
            let text = item.as_str().ok_or("must be an array of strings")?;
            let path = Path::new(text);
            if !path.is_absolute()
                || text.contains('\0')
                || path
                    .components()
                    .any(|c| c == std::path::Component::ParentDir)
            {
                return Err(format!("{text:?} is not an absolute path without `..`"));
            }
            Ok(path.to_path_buf())
        })
        .collect()
}

/// Where a value came from: env values are always strings, options keep their JSON type.
enum Raw<'a> {
    Env(String),
    Opt(&'a Value),
}

impl ToolsConfig {
    /// Resolve from `options` (a JSON object) and `env` (a variable lookup).
    pub fn resolve(
        options: &Map<String, Value>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        if let Some(unknown) = options
            .keys()
            .find(|k| !KEYS.iter().any(|(key, _)| key == k))
        {
            let known: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
            return Err(ConfigError(format!(
                "unknown option {unknown:?} (known: {})",
                known.join(", ")
            )));
        }
        let mut config = ToolsConfig::default();
        for (key, var) in KEYS {
            let raw = match var.and_then(&env).filter(|v| !v.is_empty()) {
                Some(v) => Raw::Env(v),
                None => match options.get(*key) {
                    Some(v) => Raw::Opt(v),
                    None => continue,
                },
            };
            let origin = match (&raw, var) {
                (Raw::Env(_), Some(var)) => var.to_string(),
                _ => format!("option {key:?}"),
            };
            config
                .apply(key, raw)
                .map_err(|msg| ConfigError(format!("{origin}: {msg}")))?;
        }
        Ok(config)
    }

    fn apply(&mut self, key: &str, raw: Raw<'_>) -> Result<(), String> {
        match key {
            "persist" => self.persist = boolean(raw)?,
            "syncSkills" => self.sync_skills = boolean(raw)?,
            "skillDirs" => self.skill_dirs = skill_dirs(raw)?,
            "timeout" => {
                let ms = match raw {
                    Raw::Env(v) => v
                        .trim()
                        .parse::<u64>()
                        .map_err(|_| format!("{v:?} is not an integer"))?,
                    Raw::Opt(v) => v
                        .as_u64()
                        .ok_or("must be an integer number of milliseconds")?,
                };
                if ms == 0 || ms > MAX_TIMEOUT.as_millis() as u64 {
                    return Err(format!("{ms} ms is outside 1..{}", MAX_TIMEOUT.as_millis()));
                }
                self.timeout = Some(Duration::from_millis(ms));
            }
            _ => {
                let text = match raw {
                    Raw::Env(v) => v,
                    Raw::Opt(Value::String(s)) => s.clone(),
                    Raw::Opt(_) => return Err("must be a string".into()),
                };
                if text.contains('\0') {
                    return Err("contains a NUL byte".into());
                }
                match key {
                    "shape" => {
                        createos_sandbox::validate::shape("shape", &text)
                            .map_err(|e| e.to_string())?;
                        self.shape = text;
                    }
                    "rootfs" => self.rootfs = non_empty(text)?,
                    "cwd" => self.cwd = normalize_abs(&text)?,
                    "network" => {
                        createos_sandbox::validate::id("network", &text)
                            .map_err(|e| e.to_string())?;
                        self.network = Some(text);
                    }
                    "autoPause" => self.auto_pause = parse_auto_pause(&text)?,
                    "mode" => {
                        self.mode = match text.as_str() {
                            "local" => Mode::Local,
                            "remote" => Mode::Remote,
                            _ => return Err(format!("{text:?} is not `local` or `remote`")),
                        }
                    }
                    "sync" => {
                        self.sync = match text.as_str() {
                            "none" => ProjectSync::None,
                            "once" => ProjectSync::Once,
                            _ => return Err(format!("{text:?} is not `none` or `once`")),
                        }
                    }
                    _ => return Err(format!("unknown key {key}")),
                }
            }
        }
        Ok(())
    }

    /// Auto-pause in seconds for the control plane, when set.
    pub fn auto_pause_secs(&self) -> Option<u32> {
        self.auto_pause
            .map(|d| d.as_secs().min(u32::MAX as u64) as u32)
    }
}

/// Environment values must be literally `true`/`false`; options must be JSON booleans.
fn boolean(raw: Raw<'_>) -> Result<bool, String> {
    match raw {
        Raw::Env(v) if v == "true" => Ok(true),
        Raw::Env(v) if v == "false" => Ok(false),
        Raw::Env(_) => Err("must be exactly `true` or `false`".into()),
        Raw::Opt(Value::Bool(b)) => Ok(*b),
        Raw::Opt(_) => Err("must be a boolean".into()),
    }
}

fn non_empty(s: String) -> Result<String, String> {
    if s.trim().is_empty() {
        Err("must not be empty".into())
    } else {
        Ok(s)
    }
}

/// An absolute POSIX path with `.`/`..`/duplicate slashes resolved.
pub fn normalize_abs(path: &str) -> Result<String, String> {
    if !path.starts_with('/') {
        return Err(format!("{path:?} is not an absolute path"));
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

/// `30m`, `1h`, `90s`, `600` (seconds) or `off`.
pub fn parse_auto_pause(text: &str) -> Result<Option<Duration>, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let secs =
        createos_sandbox::validate::auto_pause_text("autoPause", t).map_err(|e| e.to_string())?;
    Ok(Some(Duration::from_secs(u64::from(secs))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn opts(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn env_beats_option_beats_default() {
        let o = opts(json!({"shape": "s-1vcpu-1gb", "cwd": "/srv//app/./x/..", "persist": false}));
        let c = ToolsConfig::resolve(&o, |k| {
            (k == "CREATEOS_SHAPE").then(|| "s-4vcpu-8gb".to_string())
        })
        .unwrap();
        assert_eq!(c.shape, "s-4vcpu-8gb");
        assert_eq!(c.cwd, "/srv/app");
        assert!(!c.persist);
        assert_eq!(c.rootfs, "devbox:1");
        assert_eq!(c.timeout, Some(Duration::from_secs(120)));
    }

    #[test]
    fn refuses_unknown_keys_and_bad_values() {
        assert!(ToolsConfig::resolve(&opts(json!({"shap": "x"})), |_| None)
            .unwrap_err()
            .0
            .contains("unknown option"));
        assert!(ToolsConfig::resolve(&opts(json!({"persist": "yes"})), |_| None).is_err());
        assert!(
            ToolsConfig::resolve(&Map::new(), |k| (k == "CREATEOS_PERSIST")
                .then(|| "1".into()))
            .is_err()
        );
        assert!(ToolsConfig::resolve(&opts(json!({"timeout": 0})), |_| None).is_err());
        assert!(ToolsConfig::resolve(&opts(json!({"timeout": 3_600_001})), |_| None).is_err());
        assert!(ToolsConfig::resolve(&opts(json!({"cwd": "rel/path"})), |_| None).is_err());
        assert!(ToolsConfig::resolve(&opts(json!({"autoPause": "5x"})), |_| None).is_err());
    }

    #[test]
    fn every_documented_key_has_its_default() {
        let c = ToolsConfig::resolve(&Map::new(), |_| None).unwrap();
        assert_eq!(c, ToolsConfig::default());
        assert_eq!(
            (c.mode, c.sync, c.sync_skills, c.persist),
            (Mode::Local, ProjectSync::None, true, true)
        );
        assert_eq!(
            (c.shape.as_str(), c.rootfs.as_str(), c.cwd.as_str()),
            ("s-2vcpu-2gb", "devbox:1", "/root/workspace")
        );
        assert_eq!(
            (c.network.as_deref(), c.auto_pause),
            (None, Some(Duration::from_secs(1800)))
        );
        let vars: Vec<&str> = env_vars().collect();
        assert_eq!(vars.len(), 9);
        assert!(vars.contains(&"CREATEOS_MODE") && vars.contains(&"CREATEOS_SYNC"));
    }

    #[test]
    fn skill_dirs_are_absolute_paths() {
        let c = ToolsConfig::resolve(
            &opts(json!({"skillDirs": ["/home/u/skills/a", "/opt/s"]})),
            |_| None,
        )
        .unwrap();
        assert_eq!(
            c.skill_dirs,
            [PathBuf::from("/home/u/skills/a"), PathBuf::from("/opt/s")]
        );
        for bad in [
            json!("/a"),
            json!(["rel/dir"]),
            json!(["/a/../b"]),
            json!([1]),
        ] {
            assert!(
                ToolsConfig::resolve(&opts(json!({"skillDirs": bad})), |_| None).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn mode_sync_and_sync_skills() {
        let o = opts(
            json!({"mode": "remote", "sync": "once", "syncSkills": false, "network": "net-1", "autoPause": "off"}),
        );
        let c = ToolsConfig::resolve(&o, |_| None).unwrap();
        assert_eq!(
            (c.mode, c.sync, c.sync_skills),
            (Mode::Remote, ProjectSync::Once, false)
        );
        assert_eq!((c.network.as_deref(), c.auto_pause), (Some("net-1"), None));
        // The environment beats the option, key by key.
        let env = |k: &str| match k {
            "CREATEOS_MODE" => Some("local".to_string()),
            "CREATEOS_SYNC" => Some("none".to_string()),
            _ => None,
        };
        let c = ToolsConfig::resolve(&o, env).unwrap();
        assert_eq!(
            (c.mode, c.sync, c.sync_skills),
            (Mode::Local, ProjectSync::None, false)
        );
        // An empty variable counts as unset.
        let c = ToolsConfig::resolve(&o, |k| (k == "CREATEOS_MODE").then(String::new)).unwrap();
        assert_eq!(c.mode, Mode::Remote);
        assert_eq!(Mode::Remote.as_str(), "remote");
        assert_eq!(ProjectSync::Once.as_str(), "once");
    }

    #[test]
    fn refuses_bad_modes_and_types() {
        let err = |o: Value| ToolsConfig::resolve(&opts(o), |_| None).unwrap_err().0;
        assert!(err(json!({"mode": "Remote"})).contains("option \"mode\""));
        assert!(err(json!({"mode": true})).contains("must be a string"));
        assert!(err(json!({"sync": "always"})).contains("not `none` or `once`"));
        assert!(err(json!({"syncSkills": "true"})).contains("boolean"));
        assert!(err(json!({"timeout": 1.5})).contains("integer"));
        assert!(err(json!({"timeout": "100"})).contains("integer"));
        assert!(err(json!({"shape": "s-2vcpu\u{0}"})).contains("NUL"));
        assert!(err(json!({"rootfs": " "})).contains("empty"));
        let env_err = |var: &'static str, value: &'static str| {
            ToolsConfig::resolve(&Map::new(), |k| (k == var).then(|| value.to_string()))
                .unwrap_err()
                .0
        };
        assert!(env_err("CREATEOS_MODE", "cloud").starts_with("CREATEOS_MODE: \"cloud\" is not"));
        assert!(env_err("CREATEOS_SYNC", "twice").contains("CREATEOS_SYNC"));
        assert!(env_err("CREATEOS_TIMEOUT", "12s").contains("CREATEOS_TIMEOUT"));
        assert!(env_err("CREATEOS_PERSIST", "TRUE").contains("CREATEOS_PERSIST"));
        // syncSkills has no variable: a look-alike is ignored, not read.
        assert!(
            ToolsConfig::resolve(&Map::new(), |k| (k == "CREATEOS_SYNC_SKILLS")
                .then(|| "bogus".into()))
            .unwrap()
            .sync_skills
        );
        // The valid timeout bounds.
        assert_eq!(
            ToolsConfig::resolve(&opts(json!({"timeout": 3_600_000})), |_| None)
                .unwrap()
                .timeout,
            Some(MAX_TIMEOUT)
        );
        assert_eq!(
            ToolsConfig::resolve(&opts(json!({"timeout": 1})), |_| None)
                .unwrap()
                .timeout,
            Some(Duration::from_millis(1))
        );
    }

    #[test]
    fn auto_pause_forms() {
        assert_eq!(
            parse_auto_pause("30m").unwrap(),
            Some(Duration::from_secs(1800))
        );
        assert_eq!(parse_auto_pause("off").unwrap(), None);
        assert_eq!(
            parse_auto_pause("120").unwrap(),
            Some(Duration::from_secs(120))
        );
        assert!(parse_auto_pause("1s").is_err());
    }
}
