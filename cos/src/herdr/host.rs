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
        let bin = std::env::var_os("HERDR_BIN_PATH")
            .filter(|b| !b.is_empty())
            .unwrap_or_else(|| "herdr".into());
        HerdrHost { bin }
    }

    /// A specific binary.
    pub fn new(bin: impl Into<OsString>) -> HerdrHost {
        HerdrHost { bin: bin.into() }
    }

    /// The binary's absolute path, when it is one (what a pane needs as `HERDR_BIN_PATH`).
    pub fn bin_path(&self) -> Option<String> {
        let text = self.bin.to_str()?;
        text.starts_with('/').then(|| text.to_string())
    }

    /// Run `herdr args…`; stdout on success, an error with its stderr otherwise.
    pub async fn call(&self, args: &[String]) -> HerdrResult<String> {
        let what = args.iter().take(2).cloned().collect::<Vec<_>>().join(" ");
        let out = self.output(args).await?;
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
            return Err(HerdrError::Herdr {
                command: what,
                message: why,
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Run `herdr args…` and return what it did, whatever its exit status.
    pub async fn output(&self, args: &[String]) -> HerdrResult<std::process::Output> {
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
                command: what,
                message: format!("cannot run {:?}: {e}", self.bin),
            })?;
        Ok(out)
    }

    /// `config check`: the diagnostics Herdr reports for the config it loads. Herdr exits 1
    /// on any diagnostic (warnings included) and prints them on stdout after
    /// `config: issues found`; `config: ok` means none.
    pub async fn config_check(&self) -> HerdrResult<Vec<String>> {
        let out = self.output(&["config".into(), "check".into()]).await?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        parse_config_check(&stdout).ok_or_else(|| HerdrError::Herdr {
            command: "config check".into(),
            message: format!(
                "unexpected answer ({}): {}{}",
                out.status,
                stdout.trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        })
    }

    /// `pane process-info --pane <pane>`: the pane's shell and its foreground process group.
    pub async fn process_info(&self, pane: &str) -> HerdrResult<ProcessInfo> {
        let out = self
            .call(&[
                "pane".into(),
                "process-info".into(),
                "--pane".into(),
                pane.into(),
            ])
            .await?;
        let v: Value = serde_json::from_str(out.trim()).map_err(|_| HerdrError::Herdr {
            command: "pane process-info".into(),
            message: format!("no JSON in its answer {:?}", out.trim()),
        })?;
        let info = &v["result"]["process_info"];
        let foreground = info["foreground_processes"]
            .as_array()
            .map(|all| {
                all.iter()
                    .map(|p| ForegroundProcess {
                        pid: p["pid"].as_u64().unwrap_or(0) as u32,
                        name: p["name"].as_str().unwrap_or_default().to_string(),
                        argv: p["argv"]
                            .as_array()
                            .map(|a| {
                                a.iter()
                                    .filter_map(|w| w.as_str().map(str::to_string))
                                    .collect()
                            })
                            .unwrap_or_default(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(ProcessInfo {
            shell_pid: info["shell_pid"].as_u64().map(|p| p as u32),
            foreground_pgid: info["foreground_process_group_id"]
                .as_u64()
                .map(|p| p as u32),
            foreground,
        })
    }

    /// `pane split <pane> --direction … [--ratio] [--cwd] [--env K=V]… --focus|--no-focus`;
    /// returns the new pane's id.
    pub async fn split(
        &self,
        pane: &str,
        direction: Direction,
        options: &Split,
    ) -> HerdrResult<String> {
        let mut args: Vec<String> = vec![
            "pane".into(),
            "split".into(),
            pane.into(),
            "--direction".into(),
        ];
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
        args.push(
            if options.focus {
                "--focus"
            } else {
                "--no-focus"
            }
            .into(),
        );
        let out = self.call(&args).await?;
        new_pane_id(&out).ok_or_else(|| HerdrError::Herdr {
            command: "pane split".into(),
            message: format!("no pane id in its answer ({})", out.trim()),
        })
    }

    /// `pane rename <pane> <title>`.
    pub async fn rename(&self, pane: &str, title: &str) -> HerdrResult<()> {
        self.call(&["pane".into(), "rename".into(), pane.into(), title.into()])
            .await
            .map(drop)
    }

    /// `pane run <pane> <command>`: types `command` and Enter into the pane's shell.
    pub async fn run_in_pane(&self, pane: &str, command: &str) -> HerdrResult<()> {
        self.call(&["pane".into(), "run".into(), pane.into(), command.into()])
            .await
            .map(drop)
    }

    /// `pane close <pane>`.
    pub async fn close(&self, pane: &str) -> HerdrResult<()> {
        self.call(&["pane".into(), "close".into(), pane.into()])
            .await
            .map(drop)
    }

    /// `notification show <title> --body <body>`, best effort: a failed notification never
    /// fails the action (the result line is the record).
    pub async fn notify(&self, title: &str, body: &str) {
        let args = [
            "notification".into(),
            "show".into(),
            title.into(),
            "--body".into(),
            body.into(),
        ];
        if let Err(e) = self.call(&args).await {
            tracing::debug!(error = %e, "herdr notification failed");
        }
    }

    /// `plugin config-dir <id>`.
    pub async fn config_dir(&self, plugin_id: &str) -> HerdrResult<PathBuf> {
        let out = self
            .call(&["plugin".into(), "config-dir".into(), plugin_id.into()])
            .await?;
        let dir = out
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or_default();
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

/// What a pane runs (`pane process-info`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessInfo {
    /// The pane's shell (its child process), if alive.
    pub shell_pid: Option<u32>,
    /// The terminal's foreground process group, if known.
    pub foreground_pgid: Option<u32>,
    /// The processes of that group.
    pub foreground: Vec<ForegroundProcess>,
}

/// One process of the foreground group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForegroundProcess {
    /// Its pid.
    pub pid: u32,
    /// Its name.
    pub name: String,
    /// Its argv, when readable.
    pub argv: Vec<String>,
}

impl ProcessInfo {
    /// Whether the pane's shell is in the foreground (a typed line reaches the shell).
    pub fn shell_in_foreground(&self) -> bool {
        match (self.shell_pid, self.foreground_pgid) {
            (Some(shell), Some(group)) => {
                group == shell || self.foreground.iter().any(|p| p.pid == shell)
            }
            _ => false,
        }
    }

    /// The foreground command, for messages (`claude --resume`, `cos herdr connect w1:p2`).
    pub fn foreground_command(&self) -> String {
        let leader = self
            .foreground
            .iter()
            .find(|p| Some(p.pid) == self.foreground_pgid)
            .or(self.foreground.first());
        match leader {
            Some(p) if !p.argv.is_empty() => {
                let mut words: Vec<&str> = p.argv.iter().map(String::as_str).take(4).collect();
                if let Some(first) = words.first_mut() {
                    *first = first.rsplit('/').next().unwrap_or(first);
                }
                words.join(" ")
            }
            Some(p) => p.name.clone(),
            None => "an unknown program".into(),
        }
    }

    /// Whether the foreground is this plugin's own attach (`cos herdr connect|provision`).
    pub fn runs_our_attach(&self) -> bool {
        self.foreground.iter().any(|p| {
            p.argv
                .windows(2)
                .any(|w| w[0] == "herdr" && matches!(w[1].as_str(), "connect" | "provision"))
        })
    }
}

/// The diagnostics in `herdr config check`'s stdout; `None` when it is not such an answer.
pub fn parse_config_check(stdout: &str) -> Option<Vec<String>> {
    let mut lines = stdout
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty());
    match lines.next()? {
        "config: ok" => Some(Vec::new()),
        "config: issues found" => Some(lines.map(str::to_string).collect()),
        _ => None,
    }
}

/// `.result.pane.pane_id` (or `.pane.pane_id`, `.pane_id`) of a `pane split` answer.
pub fn new_pane_id(answer: &str) -> Option<String> {
    let v: Value = serde_json::from_str(answer.trim()).ok()?;
    let found = [
        &v["result"]["pane"]["pane_id"],
        &v["pane"]["pane_id"],
        &v["pane_id"],
    ]
    .into_iter()
    .find_map(|p| p.as_str().filter(|s| !s.is_empty()).map(str::to_string));
    found
}

/// The first `X.Y.Z` in `text`.
pub fn parse_version(text: &str) -> Option<(u64, u64, u64)> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find_map(|word| {
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
        assert_eq!(
            new_pane_id(r#"{"result":{"pane":{"pane_id":"w1:p2"}}}"#).as_deref(),
            Some("w1:p2")
        );
        assert_eq!(new_pane_id("nope"), None);
        assert_eq!(parse_version("herdr 0.8.2\n"), Some((0, 8, 2)));
        assert_eq!(parse_version("herdr v1.10"), Some((1, 10, 0)));
        assert_eq!(parse_version("herdr"), None);
        assert_eq!(parse_config_check("config: ok\n"), Some(vec![]));
        assert_eq!(
            parse_config_check(
                "config: issues found\nunknown config key ui.x\nprefix+s: kept a, disabled b\n"
            ),
            Some(vec![
                "unknown config key ui.x".to_string(),
                "prefix+s: kept a, disabled b".to_string()
            ])
        );
        assert_eq!(parse_config_check("error: no such command"), None);
    }

    #[test]
    fn the_shell_is_in_the_foreground_only_when_herdr_says_so() {
        let p = |pid, name: &str, argv: &[&str]| ForegroundProcess {
            pid,
            name: name.into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
        };
        let idle = ProcessInfo {
            shell_pid: Some(10),
            foreground_pgid: Some(10),
            foreground: vec![p(10, "bash", &["-bash"])],
        };
        assert!(idle.shell_in_foreground());
        let busy = ProcessInfo {
            shell_pid: Some(10),
            foreground_pgid: Some(20),
            foreground: vec![p(20, "claude", &["/home/u/.local/bin/claude", "--resume"])],
        };
        assert!(!busy.shell_in_foreground());
        assert_eq!(busy.foreground_command(), "claude --resume");
        assert!(!busy.runs_our_attach());
        let ours = ProcessInfo {
            shell_pid: Some(10),
            foreground_pgid: Some(30),
            foreground: vec![p(
                30,
                "cos",
                &[
                    "/opt/cos",
                    "--endpoint",
                    "http://x",
                    "herdr",
                    "connect",
                    "w1:p2",
                ],
            )],
        };
        assert!(ours.runs_our_attach());
        assert!(
            !ProcessInfo::default().shell_in_foreground(),
            "unknown is not idle"
        );
    }
}
