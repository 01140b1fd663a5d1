//! [`ExecRequest`]: what to run, built with setters and checked before anything is sent.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::api::command;
use crate::error::{Error, Result};
use crate::validate;

/// A command to run with [`crate::Sandbox::exec_with`] or [`crate::Sandbox::exec_stream`].
///
/// `cmd` is executed directly with `args` as its argv — it is **not** run through a shell, so
/// pipes, globs, redirections and `$VARS` are passed through literally. Use
/// [`ExecRequest::shell`] to run a script with `bash -lc`.
///
/// ```
/// use std::time::Duration;
/// use createos_sandbox::api::exec::ExecRequest;
///
/// let req = ExecRequest::new("python3")
///     .args(["-c", "import sys; print(sys.stdin.read().upper())"])
///     .stdin("hello")
///     .env("LOG_LEVEL", "debug")
///     .timeout(Duration::from_secs(30));
/// assert!(req.validate().is_ok());
///
/// let script = ExecRequest::shell("ls /etc | wc -l > /tmp/count");
/// assert_eq!(script.command(), "bash");
/// ```
#[derive(Clone, Serialize)]
pub struct ExecRequest {
    cmd: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    args: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stdin: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    env: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) stream: bool,
    #[serde(skip)]
    timeout: Option<Option<Duration>>,
}

// Env values and stdin may hold secrets: Debug shows names and sizes only.
impl fmt::Debug for ExecRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecRequest")
            .field("cmd", &self.cmd)
            .field("args", &self.args)
            .field("stdin_bytes", &self.stdin.as_ref().map(String::len))
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl ExecRequest {
    /// Run `cmd` (an absolute path or a name looked up in the sandbox's `PATH`) with no arguments.
    pub fn new(cmd: impl Into<String>) -> Self {
        ExecRequest {
            cmd: cmd.into(),
            args: Vec::new(),
            stdin: None,
            env: BTreeMap::new(),
            stream: false,
            timeout: None,
        }
    }

    /// Run `script` with `bash -lc <script>`: a login shell, so the image's profile (PATH
    /// additions, language toolchains) applies and shell syntax works.
    pub fn shell(script: impl Into<String>) -> Self {
        ExecRequest::new(command::SHELL).args(command::shell_args(script.into()))
    }

    command::argv_env_setters! {
        /// Override an environment variable for this command. The server accepts only names
        /// declared in the sandbox's create-time `envs` (an undeclared name is a 400
        /// [`Error::Validation`]); some server versions ignore per-exec `env` altogether and
        /// always use the create-time values.
    }

    /// Text fed to the command's stdin, which is then closed.
    ///
    /// Some control-plane versions silently ignore `stdin` (api-reference §10.6); when the input
    /// matters on such a server, upload it with [`crate::Sandbox::write`] and redirect from the
    /// file in a [`ExecRequest::shell`] script.
    pub fn stdin(mut self, input: impl Into<String>) -> Self {
        self.stdin = Some(input.into());
        self
    }

    /// Give up after `limit`: for [`crate::Sandbox::exec_with`] the whole call (retries get a
    /// fresh budget), for [`crate::Sandbox::exec_stream`] the whole stream (it then ends with
    /// [`Error::Timeout`]). Without it the client's request timeout bounds a buffered call and
    /// the wait for a stream's first byte. Giving up closes the connection; whether the remote
    /// command is then killed depends on the server.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(Some(limit));
        self
    }

    /// No time limit at all (long builds; cancel by dropping the future or the stream).
    pub fn no_timeout(mut self) -> Self {
        self.timeout = Some(None);
        self
    }

    /// The executable.
    pub fn command(&self) -> &str {
        &self.cmd
    }

    /// The arguments.
    pub fn arguments(&self) -> &[String] {
        &self.args
    }

    /// The timeout chosen with [`Self::timeout`] / [`Self::no_timeout`] (`None`: client default).
    pub fn timeout_setting(&self) -> Option<Option<Duration>> {
        self.timeout
    }

    /// Check the request as the client does before sending: `cmd` not empty, no NUL byte in any
    /// string, env names of the form `[A-Za-z_][A-Za-z0-9_]*`.
    pub fn validate(&self) -> Result<()> {
        if self.cmd.trim().is_empty() {
            return Err(Error::invalid("cmd", "must not be empty"));
        }
        no_nul("cmd", &self.cmd)?;
        for (i, arg) in self.args.iter().enumerate() {
            no_nul(&format!("args[{i}]"), arg)?;
        }
        if let Some(input) = &self.stdin {
            no_nul("stdin", input)?;
        }
        for (name, value) in &self.env {
            validate::env_name("env", name)?;
            // The value may be a secret: name the variable, never echo the value.
            if value.contains('\0') {
                return Err(Error::invalid(
                    "env",
                    format!("value of {name} contains a NUL byte"),
                ));
            }
        }
        Ok(())
    }
}

fn no_nul(field: &str, value: &str) -> Result<()> {
    if value.contains('\0') {
        return Err(Error::invalid(field, "contains a NUL byte"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_form_omits_empty_fields() {
        let json = serde_json::to_value(ExecRequest::new("ls")).unwrap();
        assert_eq!(json, serde_json::json!({ "cmd": "ls" }));
        let mut req = ExecRequest::new("env")
            .arg("-0")
            .stdin("x")
            .env("A", "1")
            .timeout(Duration::from_secs(1));
        req.stream = true;
        let json = serde_json::to_value(&req).unwrap();
        assert_eq!(
            json,
            serde_json::json!({ "cmd": "env", "args": ["-0"], "stdin": "x", "env": {"A": "1"}, "stream": true })
        );
    }

    #[test]
    fn shell_wraps_in_a_login_bash() {
        let req = ExecRequest::shell("echo $HOME | tr a-z A-Z");
        assert_eq!(req.command(), "bash");
        assert_eq!(req.arguments(), ["-lc", "echo $HOME | tr a-z A-Z"]);
    }

    #[test]
    fn validation() {
        assert!(ExecRequest::new("").validate().is_err());
        assert!(ExecRequest::new("  ").validate().is_err());
        assert!(ExecRequest::new("a\0b").validate().is_err());
        assert!(ExecRequest::new("echo").arg("x\0").validate().is_err());
        assert!(ExecRequest::new("cat").stdin("\0").validate().is_err());
        assert!(ExecRequest::new("env").env("1BAD", "v").validate().is_err());
        assert!(ExecRequest::new("env").env("A-B", "v").validate().is_err());
        let err = ExecRequest::new("env")
            .env("TOKEN", "sec\0ret")
            .validate()
            .unwrap_err();
        assert!(!err.to_string().contains("sec"), "{err}");
        assert!(ExecRequest::new("env").env("_OK1", "v").validate().is_ok());
    }

    #[test]
    fn debug_hides_values() {
        let req = ExecRequest::new("env")
            .env("TOKEN", "s3cr3t-value")
            .stdin("password123");
        let dbg = format!("{req:?}");
        assert!(dbg.contains("TOKEN"));
        assert!(
            !dbg.contains("s3cr3t") && !dbg.contains("password123"),
            "{dbg}"
        );
    }
}
