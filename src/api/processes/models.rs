//! Wire models of the managed-process routes (E21–E30) and the request builder.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::api::command;
use crate::api::open_enum;
use crate::error::{Error, Result};
use crate::validate;

open_enum! {
    /// Pipes or pseudo-terminal.
    #[derive(Default)]
    ProcessKind {
        /// stdin/stdout/stderr pipes.
        #[default]
        Process = "process",
        /// A pseudo-terminal (output stream `pty`).
        Pty = "pty",
    }
}

open_enum! {
    /// Lifecycle of a managed process.
    #[derive(Default)]
    ProcessState {
        /// Being launched.
        Starting = "starting",
        /// The leader or some of its tree is alive.
        #[default]
        Running = "running",
        /// A stop is in progress (SIGTERM sent, SIGKILL may follow).
        Terminating = "terminating",
        /// Done; see `exit_code` / `signal`.
        Exited = "exited",
        /// Could not be started.
        Failed = "failed",
    }
}

impl ProcessState {
    /// `exited` or `failed`.
    pub fn is_finished(&self) -> bool {
        matches!(self, ProcessState::Exited | ProcessState::Failed)
    }
}

pub use crate::stream::process_output::OutputWindow;

/// The job in the foreground of a PTY.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Foreground {
    /// Its pid (may be omitted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i64>,
    /// Its command.
    #[serde(default)]
    pub cmd: String,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

/// A managed process as the server describes it (create, list, get, stop, wait).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessDetails {
    /// Server id.
    pub process_id: String,
    /// Pipes or PTY.
    #[serde(default)]
    pub kind: ProcessKind,
    /// Executable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmd: Option<String>,
    /// Arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Starting directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Guest pid of the leader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i64>,
    /// Lifecycle state.
    #[serde(default)]
    pub state: ProcessState,
    /// The main command has exited.
    #[serde(default)]
    pub leader_exited: bool,
    /// Every process it started has exited too.
    #[serde(default)]
    pub tree_exited: bool,
    /// Foreground job of a PTY.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreground: Option<Foreground>,
    /// RFC 3339 start time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// RFC 3339 end time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Exit code of the leader; `None` while running and when killed by a signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Name of the signal that ended the leader (e.g. `SIGKILL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Retained output window.
    #[serde(default)]
    pub output: OutputWindow,
}

impl ProcessDetails {
    /// Running and neither the leader nor the tree has exited (what `attach` may pick).
    pub fn is_attachable(&self) -> bool {
        self.state == ProcessState::Running && !self.leader_exited && !self.tree_exited
    }
}

/// `{"processes": [...]}` of E22.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ProcessList {
    #[serde(default)]
    pub processes: Vec<ProcessDetails>,
}

/// `{"input_seq": n}` of E26.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct InputAck {
    #[serde(default)]
    pub input_seq: i64,
}

/// What [`super::Process::write_input`] delivered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InputWritten {
    /// `input_seq` of the last chunk (`None` when nothing was sent).
    pub input_seq: Option<i64>,
    /// Bytes delivered.
    pub bytes: u64,
    /// Requests sent.
    pub chunks: usize,
}

/// Terminal size of a PTY process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PtySize {
    /// Rows (1–65535).
    pub rows: u16,
    /// Columns (1–65535).
    pub cols: u16,
}

impl PtySize {
    pub(crate) fn validate(&self, field: &str) -> Result<()> {
        if self.rows == 0 || self.cols == 0 {
            return Err(Error::invalid(
                field,
                format!(
                    "{}x{} is not a terminal size (rows and cols ≥ 1)",
                    self.rows, self.cols
                ),
            ));
        }
        Ok(())
    }
}

/// What to start (E21). Build with [`ProcessSpec::new`] (pipes) or [`ProcessSpec::pty_shell`]
/// (the image's login shell on a PTY), then chain options.
///
/// ```
/// use createos_sandbox::api::processes::ProcessSpec;
/// let spec = ProcessSpec::new("python3")
///     .args(["-m", "http.server", "8080"])
///     .cwd("/workspace")
///     .env("PYTHONUNBUFFERED", "1");
/// assert!(spec.validate().is_ok());
/// ```
#[derive(Clone, Default, PartialEq, Serialize)]
pub struct ProcessSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    cmd: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    args: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cwd: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    env: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pty: Option<PtySize>,
}

/// Env values may be secrets: only the names are shown.
impl fmt::Debug for ProcessSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessSpec")
            .field("cmd", &self.cmd)
            .field("args", &self.args)
            .field("cwd", &self.cwd)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("pty", &self.pty)
            .finish()
    }
}

impl ProcessSpec {
    /// Run `cmd` (an executable; arguments go in [`Self::args`], no shell expansion).
    pub fn new(cmd: impl Into<String>) -> Self {
        ProcessSpec {
            cmd: Some(cmd.into()),
            ..Default::default()
        }
    }

    /// Run `script` with `bash -lc <script>`: a login shell, so the image's profile (PATH
    /// additions, language toolchains) applies and shell syntax works. The same command line
    /// as [`crate::api::exec::ExecRequest::shell`].
    pub fn shell(script: impl Into<String>) -> Self {
        ProcessSpec::new(command::SHELL).args(command::shell_args(script.into()))
    }

    /// The image's default login shell on a `rows`×`cols` PTY.
    pub fn pty_shell(rows: u16, cols: u16) -> Self {
        ProcessSpec {
            pty: Some(PtySize { rows, cols }),
            ..Default::default()
        }
    }

    /// Starting directory (absolute guest path; default: the default user's home).
    pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    command::argv_env_setters! {
        /// Set one environment variable on top of the sandbox's `envs`.
    }

    /// Run on a `rows`×`cols` pseudo-terminal instead of pipes.
    pub fn pty(mut self, rows: u16, cols: u16) -> Self {
        self.pty = Some(PtySize { rows, cols });
        self
    }

    /// The executable, if set.
    pub fn command(&self) -> Option<&str> {
        self.cmd.as_deref()
    }

    /// The arguments.
    pub fn arguments(&self) -> &[String] {
        &self.args
    }

    /// The PTY size, when this is a PTY process.
    pub fn pty_size(&self) -> Option<PtySize> {
        self.pty
    }

    /// Check everything the server would refuse: a pipe process needs `cmd`; no NUL bytes;
    /// `cwd` absolute; env names `^[A-Za-z_][A-Za-z0-9_]*$` within the server's limits; a
    /// PTY size of at least 1×1.
    pub fn validate(&self) -> Result<()> {
        match &self.cmd {
            Some(cmd) if cmd.trim().is_empty() => {
                return Err(Error::invalid("cmd", "must not be empty"))
            }
            Some(cmd) if cmd.contains('\0') => {
                return Err(Error::invalid("cmd", "contains a NUL byte"))
            }
            None if self.pty.is_none() => {
                return Err(Error::invalid(
                    "cmd",
                    "a process without a pty needs a command",
                ));
            }
            _ => {}
        }
        if self.args.iter().any(|a| a.contains('\0')) {
            return Err(Error::invalid("args", "an argument contains a NUL byte"));
        }
        if let Some(cwd) = &self.cwd {
            validate::guest_path("cwd", cwd)?;
        }
        validate::envs("env", &self.env)?;
        if let Some((name, _)) = self.env.iter().find(|(_, v)| v.contains('\0')) {
            return Err(Error::invalid(
                "env",
                format!("value of {name} contains a NUL byte"),
            ));
        }
        if let Some(pty) = &self.pty {
            pty.validate("pty")?;
        }
        Ok(())
    }
}

/// The signals E29 accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Signal {
    /// Hang up.
    #[serde(rename = "SIGHUP")]
    Hup,
    /// Interrupt (Ctrl-C).
    #[serde(rename = "SIGINT")]
    Int,
    /// Quit (Ctrl-\).
    #[serde(rename = "SIGQUIT")]
    Quit,
    /// Kill (cannot be caught).
    #[serde(rename = "SIGKILL")]
    Kill,
    /// Terminate.
    #[serde(rename = "SIGTERM")]
    Term,
    /// User signal 1.
    #[serde(rename = "SIGUSR1")]
    Usr1,
    /// User signal 2.
    #[serde(rename = "SIGUSR2")]
    Usr2,
    /// Window size changed.
    #[serde(rename = "SIGWINCH")]
    Winch,
}

impl Signal {
    /// Every accepted signal.
    pub const ALL: [Signal; 8] = [
        Signal::Hup,
        Signal::Int,
        Signal::Quit,
        Signal::Kill,
        Signal::Term,
        Signal::Usr1,
        Signal::Usr2,
        Signal::Winch,
    ];

    /// The wire name, e.g. `SIGINT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::Hup => "SIGHUP",
            Signal::Int => "SIGINT",
            Signal::Quit => "SIGQUIT",
            Signal::Kill => "SIGKILL",
            Signal::Term => "SIGTERM",
            Signal::Usr1 => "SIGUSR1",
            Signal::Usr2 => "SIGUSR2",
            Signal::Winch => "SIGWINCH",
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Accepts `SIGINT`, `sigint`, `INT` or `int`.
impl FromStr for Signal {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let upper = s.trim().to_ascii_uppercase();
        let name = if upper.starts_with("SIG") {
            upper
        } else {
            format!("SIG{upper}")
        };
        Signal::ALL
            .into_iter()
            .find(|sig| sig.as_str() == name)
            .ok_or_else(|| {
                let names: Vec<_> = Signal::ALL.iter().map(|s| s.as_str()).collect();
                Error::invalid(
                    "signal",
                    format!("{s:?} is not one of {}", names.join(", ")),
                )
            })
    }
}

/// What [`super::Process::wait`] waits for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WaitScope {
    /// The main command.
    #[default]
    Leader,
    /// The main command and every process it started.
    Tree,
}

impl WaitScope {
    /// The wire value of `scope`.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitScope::Leader => "leader",
            WaitScope::Tree => "tree",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_wire_form_and_validation() {
        let spec = ProcessSpec::new("ls")
            .arg("-la")
            .cwd("/root")
            .env("A_1", "x");
        let v = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"cmd": "ls", "args": ["-la"], "cwd": "/root", "env": {"A_1": "x"}})
        );
        let v = serde_json::to_value(ProcessSpec::pty_shell(24, 80)).unwrap();
        assert_eq!(v, serde_json::json!({"pty": {"rows": 24, "cols": 80}}));
        assert!(ProcessSpec::default().validate().is_err());
        assert!(ProcessSpec::new("ls").cwd("tmp").validate().is_err());
        assert!(ProcessSpec::new("ls").env("1X", "v").validate().is_err());
        assert!(ProcessSpec::new("").validate().is_err());
        assert!(ProcessSpec::pty_shell(0, 80).validate().is_err());
        assert!(ProcessSpec::pty_shell(24, 80).validate().is_ok());
    }

    #[test]
    fn shell_is_a_login_bash_like_exec_shell() {
        let script = "cd /app && echo \"$HOME\" | wc -c";
        let spec = ProcessSpec::shell(script).cwd("/root");
        assert_eq!(spec.command(), Some("bash"));
        assert_eq!(spec.arguments(), ["-lc", script]);
        let exec = crate::api::exec::ExecRequest::shell(script);
        assert_eq!(
            (exec.command(), exec.arguments()),
            (spec.command().unwrap(), spec.arguments())
        );
    }

    #[test]
    fn env_values_stay_out_of_debug() {
        let spec = ProcessSpec::new("x").env("TOKEN", "s3cret-value");
        let shown = format!("{spec:?}");
        assert!(shown.contains("TOKEN") && !shown.contains("s3cret"));
    }

    #[test]
    fn details_tolerate_missing_and_unknown() {
        let d: ProcessDetails = serde_json::from_str(
            r#"{"process_id":"proc_1","state":"zombie","kind":"pty","exit_code":null}"#,
        )
        .unwrap();
        assert_eq!(d.state, ProcessState::Other("zombie".into()));
        assert_eq!(d.kind, ProcessKind::Pty);
        assert_eq!(d.exit_code, None);
        assert_eq!(d.output, OutputWindow::default());
    }

    #[test]
    fn signal_names() {
        assert_eq!("int".parse::<Signal>().unwrap(), Signal::Int);
        assert_eq!("SIGUSR1".parse::<Signal>().unwrap(), Signal::Usr1);
        assert!("SIGSTOP".parse::<Signal>().is_err());
        assert_eq!(serde_json::to_value(Signal::Winch).unwrap(), "SIGWINCH");
    }
}
