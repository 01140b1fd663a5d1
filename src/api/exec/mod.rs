//! One-shot commands (E18): buffered [`Sandbox::exec`] / [`Sandbox::exec_with`] and streamed
//! [`Sandbox::exec_stream`].
//!
//! Commands are not run through a shell (see [`ExecRequest::shell`]). Exec is not idempotent:
//! a buffered call is retried only when the server answered 429/503 (it did not run the
//! command) or the connection could not be opened; a stream is never retried once started.

mod request;
mod stream;

use std::time::Instant;

use futures::StreamExt;
use serde::{Deserialize, Serialize};

pub use request::ExecRequest;
pub use stream::{ExecEvent, ExecStream, EXIT_UNKNOWN};

use crate::api::endpoints as ep;
use crate::api::sandboxes::Sandbox;
use crate::error::{Error, Result};
use crate::transport::jsend;
use crate::transport::Call;

/// The collected result of a command.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecOutput {
    /// Everything the command wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
    /// Exit code; non-zero is still a successful call. [`EXIT_UNKNOWN`] (-1) when the command
    /// could not be started or the stream ended without one.
    pub exit_code: i32,
    /// Agent-level failure (e.g. the executable was not found), as opposed to a failing command.
    pub error: Option<String>,
    /// Wall time of the command in milliseconds (fractional).
    pub exec_ms: f64,
}

impl ExecOutput {
    /// Exit code 0 and no agent-level error.
    pub fn success(&self) -> bool {
        self.exit_code == 0 && self.error.is_none()
    }
}

/// Wire form of the buffered answer: `{"result": {...}, "exec_ms": n}`.
#[derive(Debug, Deserialize)]
struct ExecResponse {
    #[serde(default)]
    result: ExecResult,
    #[serde(default)]
    exec_ms: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
struct ExecResult {
    #[serde(default)]
    stdout: Option<String>,
    #[serde(default)]
    stderr: Option<String>,
    #[serde(default)]
    exit_code: Option<i64>,
    #[serde(default)]
    error: Option<String>,
}

impl From<ExecResponse> for ExecOutput {
    fn from(r: ExecResponse) -> Self {
        let error = r.result.error.filter(|e| !e.is_empty());
        // Go's omitempty drops a zero exit code; a missing code with an error means "never ran".
        let exit_code = match (r.result.exit_code, &error) {
            (Some(code), _) => stream::exit_code(code),
            (None, Some(_)) => EXIT_UNKNOWN,
            (None, None) => 0,
        };
        ExecOutput {
            stdout: r.result.stdout.unwrap_or_default(),
            stderr: r.result.stderr.unwrap_or_default(),
            exit_code,
            error,
            exec_ms: r.exec_ms.unwrap_or_default(),
        }
    }
}

impl Sandbox {
    /// Run `cmd` with `args` and wait for it to end (E18, buffered). No shell is involved: use
    /// [`ExecRequest::shell`] with [`Sandbox::exec_with`] for pipes, globs or redirection.
    ///
    /// ```no_run
    /// # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
    /// let out = sandbox.exec("ls", ["-la", "/root"]).await?;
    /// if !out.success() {
    ///     eprintln!("ls failed ({}): {}", out.exit_code, out.stderr);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn exec<I, S>(&self, cmd: &str, args: I) -> Result<ExecOutput>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.exec_with(ExecRequest::new(cmd).args(args)).await
    }

    /// Run a command built with [`ExecRequest`] (stdin, env overrides, timeout) and wait for it.
    ///
    /// ```no_run
    /// # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
    /// use createos_sandbox::api::exec::ExecRequest;
    /// let out = sandbox.exec_with(ExecRequest::shell("cat > /tmp/in && wc -c < /tmp/in").stdin("hello")).await?;
    /// println!("{}", out.stdout.trim());
    /// # Ok(()) }
    /// ```
    pub async fn exec_with(&self, mut request: ExecRequest) -> Result<ExecOutput> {
        request.validate()?;
        request.stream = false;
        let timeout = request.timeout_setting();
        let mut call = Call::new(&ep::EXEC).param(self.id()).json(&request)?;
        if let Some(limit) = timeout {
            call = call.timeout(limit);
        }
        let answer: ExecResponse = self.client.transport.json(call).await?;
        Ok(answer.into())
    }

    /// Run a command and receive its output as it is produced (E18 with `?stream=true` and
    /// `"stream": true`).
    ///
    /// The returned [`ExecStream`] yields [`ExecEvent`]s and ends after [`ExecEvent::Exit`].
    /// Errors before the stream starts (validation, 404, 409 not running, …) are returned here.
    /// When the server answers 404 to the streaming form (some control-plane versions do) the
    /// command is run buffered instead and its output replayed as events
    /// ([`ExecStream::fell_back`]). The stream is never retried once started.
    pub async fn exec_stream(&self, mut request: ExecRequest) -> Result<ExecStream> {
        request.validate()?;
        let started = Instant::now();
        let timeout = request.timeout_setting();
        request.stream = true;
        let mut call = Call::new(&ep::EXEC)
            .param(self.id())
            .query("stream", "true")
            .json(&request)?
            .accept("application/x-ndjson");
        if let Some(limit) = timeout {
            call = call.timeout(limit);
        }
        let response = match self.client.transport.response(call).await {
            Ok(response) => response,
            Err(Error::NotFound(api)) if !api.fields.contains_key("sandbox") => {
                // The route exists only in buffered form on this server (a missing sandbox
                // names the `sandbox` field and is not worth a second request).
                tracing::debug!(sandbox = %self.id(), "streaming exec answered 404; falling back to buffered");
                request.stream = false;
                let output = self.exec_with(request).await?;
                return Ok(ExecStream::replay(output, started));
            }
            Err(err) => return Err(err),
        };
        let label = ep::EXEC.label();
        if is_json(&response) {
            // A server that ignores the flag answers with the buffered JSend document.
            let status = response.status().as_u16();
            let body = response
                .bytes()
                .await
                .map_err(|e| crate::transport::connection_error(&label, e))?;
            let answer: ExecResponse = jsend::decode_success(&label, status, &body)?;
            return Ok(ExecStream::replay(answer.into(), started));
        }
        let frames =
            crate::stream::ndjson::decode_response::<stream::ExecFrame>(label.clone(), response)
                .boxed();
        let deadline = timeout.flatten().map(|limit| started + limit);
        Ok(ExecStream::live(label, frames, started, deadline))
    }
}

fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|ct| {
            ct.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffered_answer_decoding() {
        let r: ExecResponse = serde_json::from_str(
            r#"{"result":{"stdout":"a","stderr":"b","exit_code":2},"exec_ms":124.7}"#,
        )
        .unwrap();
        let out = ExecOutput::from(r);
        assert_eq!(
            (out.stdout.as_str(), out.stderr.as_str(), out.exit_code),
            ("a", "b", 2)
        );
        assert_eq!(out.exec_ms, 124.7);
        assert!(!out.success());

        let r: ExecResponse = serde_json::from_str(r#"{"result":{"stdout":"ok"}}"#).unwrap();
        assert!(ExecOutput::from(r).success());

        let r: ExecResponse =
            serde_json::from_str(r#"{"result":{"error":"exec: \"nope\": not found"},"exec_ms":1}"#)
                .unwrap();
        let out = ExecOutput::from(r);
        assert_eq!(out.exit_code, EXIT_UNKNOWN);
        assert!(out.error.unwrap().contains("not found"));
    }
}
