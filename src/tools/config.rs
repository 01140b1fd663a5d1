//! Tool-runtime configuration: environment variable > option > default (plugins.md §2.3).
//! Unknown option keys and invalid values are refused, so a typo never silently falls back.

use std::time::Duration;

use serde_json::{Map, Value};

/// Longest deadline a call may ask for (1 h).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid tool configuration: {0}")]
pub struct ConfigError(pub String);

/// The effective configuration of the tool runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolsConfig {
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
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            shape: "s-2vcpu-2gb".into(),
            rootfs: "devbox:1".into(),
            cwd: "/root/workspace".into(),
            network: None,
            auto_pause: Some(Duration::from_secs(30 * 60)),
            persist: true,
            timeout: Some(Duration::from_millis(120_000)),
        }
    }
}

/// Option key, its environment variable.
const KEYS: &[(&str, &str)] = &[
    ("shape", "CREATEOS_SHAPE"),
    ("rootfs", "CREATEOS_ROOTFS"),
    ("cwd", "CREATEOS_CWD"),
    ("network", "CREATEOS_NETWORK"),
    ("autoPause", "CREATEOS_AUTO_PAUSE"),
    ("persist", "CREATEOS_PERSIST"),
    ("timeout", "CREATEOS_TIMEOUT"),
];

/// Where a value came from: env values are always strings, options keep their JSON type.
enum Raw<'a> {
    Env(String),
    Opt(&'a Value),
}

impl ToolsConfig {
    /// Resolve from `options` (a JSON object) and `env` (a variable lookup).
    pub fn resolve(options: &Map<String, Value>, env: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        if let Some(unknown) = options.keys().find(|k| !KEYS.iter().any(|(key, _)| key == k)) {
            let known: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
            return Err(ConfigError(format!("unknown option {unknown:?} (known: {})", known.join(", "))));
        }
        let mut config = ToolsConfig::default();
        for (key, var) in KEYS {
            let raw = match env(var).filter(|v| !v.is_empty()) {
                Some(v) => Raw::Env(v),
                None => match options.get(*key) {
                    Some(v) => Raw::Opt(v),
                    None => continue,
                },
            };
            let origin = match &raw {
                Raw::Env(_) => var.to_string(),
                Raw::Opt(_) => format!("option {key:?}"),
            };
            config.apply(key, raw).map_err(|msg| ConfigError(format!("{origin}: {msg}")))?;
        }
        Ok(config)
    }

    fn apply(&mut self, key: &str, raw: Raw<'_>) -> Result<(), String> {
        match key {
            "persist" => {
                self.persist = match raw {
                    Raw::Env(v) if v == "true" => true,
                    Raw::Env(v) if v == "false" => false,
                    Raw::Env(_) => return Err("must be exactly `true` or `false`".into()),
                    Raw::Opt(Value::Bool(b)) => *b,
                    Raw::Opt(_) => return Err("must be a boolean".into()),
                }
            }
            "timeout" => {
                let ms = match raw {
                    Raw::Env(v) => v.trim().parse::<u64>().map_err(|_| format!("{v:?} is not an integer"))?,
                    Raw::Opt(v) => v.as_u64().ok_or("must be an integer number of milliseconds")?,
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
                        crate::validate::shape("shape", &text).map_err(|e| e.to_string())?;
                        self.shape = text;
                    }
                    "rootfs" => self.rootfs = non_empty(text)?,
                    "cwd" => self.cwd = normalize_abs(&text)?,
                    "network" => {
                        crate::validate::id("network", &text).map_err(|e| e.to_string())?;
                        self.network = Some(text);
                    }
                    "autoPause" => self.auto_pause = parse_auto_pause(&text)?,
                    _ => return Err(format!("unknown key {key}")),
                }
            }
        }
        Ok(())
    }

    /// Auto-pause in seconds for the control plane, when set.
    pub fn auto_pause_secs(&self) -> Option<u32> {
        self.auto_pause.map(|d| d.as_secs().min(u32::MAX as u64) as u32)
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
    let (digits, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let n: u64 = digits.parse().map_err(|_| format!("{text:?} is not a duration like 30m, 1h or off"))?;
    let secs = match unit {
        "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3600),
        _ => return Err(format!("{text:?}: unit must be s, m or h")),
    };
    let secs32 = u32::try_from(secs).map_err(|_| format!("{text:?} is too long"))?;
    crate::validate::auto_pause("autoPause", secs32).map_err(|e| e.to_string())?;
    Ok(Some(Duration::from_secs(secs)))
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
        let c = ToolsConfig::resolve(&o, |k| (k == "CREATEOS_SHAPE").then(|| "s-4vcpu-8gb".to_string())).unwrap();
        assert_eq!(c.shape, "s-4vcpu-8gb");
        assert_eq!(c.cwd, "/srv/app");
        assert!(!c.persist);
        assert_eq!(c.rootfs, "devbox:1");
        assert_eq!(c.timeout, Some(Duration::from_secs(120)));
    }

    #[test]
    fn refuses_unknown_keys_and_bad_values() {
        assert!(ToolsConfig::resolve(&opts(json!({"shap": "x"})), |_| None).unwrap_err().0.contains("unknown option"));
        assert!(ToolsConfig::resolve(&opts(json!({"persist": "yes"})), |_| None).is_err());
        assert!(ToolsConfig::resolve(&Map::new(), |k| (k == "CREATEOS_PERSIST").then(|| "1".into())).is_err());
        assert!(ToolsConfig::resolve(&opts(json!({"timeout": 0})), |_| None).is_err());
        assert!(ToolsConfig::resolve(&opts(json!({"timeout": 3_600_001})), |_| None).is_err());
        assert!(ToolsConfig::resolve(&opts(json!({"cwd": "rel/path"})), |_| None).is_err());
        assert!(ToolsConfig::resolve(&opts(json!({"autoPause": "5x"})), |_| None).is_err());
    }

    #[test]
    fn auto_pause_forms() {
        assert_eq!(parse_auto_pause("30m").unwrap(), Some(Duration::from_secs(1800)));
        assert_eq!(parse_auto_pause("off").unwrap(), None);
        assert_eq!(parse_auto_pause("120").unwrap(), Some(Duration::from_secs(120)));
        assert!(parse_auto_pause("1s").is_err());
    }
}
