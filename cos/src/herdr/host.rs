//! Calls back into Herdr through its CLI (`HERDR_BIN_PATH`, else `herdr` on `PATH`): the plugin
//! API of Herdr v1 is its command line.

use std::ffi::OsString;
use std::path::PathBuf;

use serde_json::Value;

use super::error::{HerdrError, HerdrResult};

/// Longest wait for one `herdr` command.
pub const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Split direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// A pane to the right.
    Right,
    /// A pane below.
    Down,
}

/// Options of [`HerdrHost::split`].
#[derive(Clone, Debug, Default)]
pub struct Split {
    /// Fraction of the space the new pane gets.
    pub ratio: Option<f32>,
    /// Focus the new pane.
    pub focus: bool,
    /// Working directory of its shell.
    pub cwd: Option<PathBuf>,
    /// Environment of its shell (names and values are visible to `ps`: never secrets).
    pub env: Vec<(String, String)>,
}

/// The `herdr` binary.
#[derive(Clone, Debug)]
pub struct HerdrHost {
    bin: OsString,
}

impl HerdrHost {
    /// `HERDR_BIN_PATH`, else `herdr`.
    pub fn from_env() -> HerdrHost {
        let bin = std::env::var_os("HERDR_BIN_PATH").filter(|b| !b.is_empty()).unwrap_or_else(|| "herdr".into());
        HerdrHost { bin }
    }

    /// A specific binary.
    pub fn new(bin: impl Into<OsString>) -> HerdrHost {
        HerdrHost { bin: bin.into() }
    }

    /// Run `herdr args…`; stdout on success, an error with its stderr otherwise.
    pub async fn call(&self, args: &[String]) -> HerdrResult<String> {
        let what = args.iter().take(2).cloned().collect::<Vec<_>>().join(" ");
        let run = tokio::process::Command::new(&self.bin)
            .args(args)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        // A wedged Herdr server must not hang an action forever.
        let out = tokio::time::timeout(CALL_TIMEOUT, run)
            .await
            .map_err(|_| HerdrError::Herdr {
                command: what.clone(),
                message: format!("no answer within {}s", CALL_TIMEOUT.as_secs()),
            })?
            .map_err(|e| HerdrError::Herdr {
                command: what.clone(),
                message: format!("cannot run {:?}: {e}", self.bin),
            })?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
            let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let why = if !stderr.is_empty() {
                stderr
            } else if !stdout.is_empty() {
                stdout
            } else {
                out.status.to_string()
            };
            return Err(HerdrError::Herdr { command: what, message: why });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `pane split <pane> --direction … [--ratio] [--cwd] [--env K=V]… --focus|--no-focus`;
    /// returns the new pane's id.
    pub async fn split(&self, pane: &str, direction: Direction, options: &Split) -> HerdrResult<String> {
        let mut args: Vec<String> = vec!["pane".into(), "split".into(), pane.into(), "--direction".into()];
        args.push(
            match direction {
                Direction::Right => "right",
                Direction::Down => "down",
            }
            .into(),
        );
        if let Some(r) = options.ratio {
            args.extend(["--ratio".into(), format!("{r}")]);
        }
        if let Some(cwd) = &options.cwd {
            args.extend(["--cwd".into(), cwd.to_string_lossy().into_owned()]);
        }
        for (k, v) in &options.env {
            args.extend(["--env".into(), format!("{k}={v}")]);
        }
        args.push(if options.focus { "--focus" } else { "--no-focus" }.into());
        let out = self.call(&args).await?;
        new_pane_id(&out).ok_or_else(|| HerdrError::Herdr {
            command: "pane split".into(),
            message: format!("no pane id in its answer ({})", out.trim()),
        })
    }

    /// `pane rename <pane> <title>`.
    pub async fn rename(&self, pane: &str, title: &str) -> HerdrResult<()> {
        self.call(&["pane".into(), "rename".into(), pane.into(), title.into()]).await.map(drop)
    }

    /// `pane run <pane> <command>`: types `command` and Enter into the pane's shell.
    pub async fn run_in_pane(&self, pane: &str, command: &str) -> HerdrResult<()> {
        self.call(&["pane".into(), "run".into(), pane.into(), command.into()]).await.map(drop)
    }

    /// `pane close <pane>`.
    pub async fn close(&self, pane: &str) -> HerdrResult<()> {
        self.call(&["pane".into(), "close".into(), pane.into()]).await.map(drop)
    }

    /// `notification show <title> --body <body>`, best effort: a failed notification never
    /// fails the action (the result line is the record).
    pub async fn notify(&self, title: &str, body: &str) {
        let args = ["notification".into(), "show".into(), title.into(), "--body".into(), body.into()];
        if let Err(e) = self.call(&args).await {
            tracing::debug!(error = %e, "herdr notification failed");
        }
    }

    /// `plugin config-dir <id>`.
    pub async fn config_dir(&self, plugin_id: &str) -> HerdrResult<PathBuf> {
        let out = self.call(&["plugin".into(), "config-dir".into(), plugin_id.into()]).await?;
        let dir = out.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default();
        // Some versions answer JSON; accept both.
        let dir = match serde_json::from_str::<Value>(dir) {
            Ok(v) => ["path", "config_dir", "dir"]
                .iter()
                .find_map(|k| {
                    v.get(*k)
                        .or_else(|| v.get("result").and_then(|r| r.get(*k)))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .or_else(|| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            Err(_) => dir.to_string(),
        };
        if dir.is_empty() || !dir.starts_with('/') {
            return Err(HerdrError::Herdr {
                command: "plugin config-dir".into(),
                message: format!("unexpected answer {:?}", out.trim()),
            });
        }
        Ok(PathBuf::from(dir))
    }

    /// `herdr --version` as (major, minor, patch).
    pub async fn version(&self) -> HerdrResult<(u64, u64, u64)> {
        let out = self.call(&["--version".into()]).await?;
        parse_version(&out).ok_or_else(|| HerdrError::Herdr {
            command: "--version".into(),
            message: format!("no version in {:?}", out.trim()),
        })
    }
}

/// `.result.pane.pane_id` (or `.pane.pane_id`, `.pane_id`) of a `pane split` answer.
pub fn new_pane_id(answer: &str) -> Option<String> {
    let v: Value = serde_json::from_str(answer.trim()).ok()?;
    let found = [&v["result"]["pane"]["pane_id"], &v["pane"]["pane_id"], &v["pane_id"]]
        .into_iter()
        .find_map(|p| p.as_str().filter(|s| !s.is_empty()).map(str::to_string));
    found
}

/// The first `X.Y.Z` in `text`.
pub fn parse_version(text: &str) -> Option<(u64, u64, u64)> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.')).find_map(|word| {
        let mut parts = word.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        Some((major, minor, patch))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers() {
        assert_eq!(new_pane_id(r#"{"result":{"pane":{"pane_id":"w1:p2"}}}"#).as_deref(), Some("w1:p2"));
        assert_eq!(new_pane_id("nope"), None);
        assert_eq!(parse_version("herdr 0.8.2\n"), Some((0, 8, 2)));
        assert_eq!(parse_version("herdr v1.10"), Some((1, 10, 0)));
        assert_eq!(parse_version("herdr"), None);
    }
}
