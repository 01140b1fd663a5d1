//! Templates (E52–E56): custom base images built from a Dockerfile, usable as `rootfs` once ready.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures::stream::{self, Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;

use crate::api::endpoints as ep;
use crate::api::open_enum;
use crate::api::OkResponse;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::stream::ndjson;
use crate::transport::pagination::Paginated;
use crate::transport::Call;
use crate::validate;

/// Largest Dockerfile the server accepts, bytes.
pub const MAX_DOCKERFILE: usize = 64 * 1024;

/// Default budget of [`Client::wait_for_template`]: builds take minutes, not seconds.
pub const DEFAULT_TEMPLATE_WAIT: Duration = Duration::from_secs(15 * 60);

open_enum! {
    /// Build state of a template.
    #[derive(Default)]
    TemplateStatus {
        /// Queued.
        #[default]
        Pending = "pending",
        /// Building.
        Building = "building",
        /// Usable as `rootfs`.
        Ready = "ready",
        /// The build failed; see the logs.
        Failed = "failed",
        /// The build was cancelled.
        Cancelled = "cancelled",
    }
}

impl TemplateStatus {
    /// `ready`, `failed` or `cancelled`: the build is over.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            TemplateStatus::Ready | TemplateStatus::Failed | TemplateStatus::Cancelled
        )
    }
}

/// A template (one build of a name).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateView {
    /// `tpl_…` id.
    pub id: String,
    /// Name; re-submitting a name makes a new version.
    #[serde(default)]
    pub name: String,
    /// Base image the build used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// Build state.
    #[serde(default)]
    pub status: TemplateStatus,
    /// Size of the built image (0 until ready).
    #[serde(default)]
    pub ext4_size_bytes: u64,
    /// RFC 3339 submission time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// RFC 3339 time the build finished (absent until ready).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub built_at: Option<String>,
    /// The Dockerfile (only when asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dockerfile: Option<String>,
}

/// One line of a followed build log (E56 with `follow=true`). Keys this client does not know are
/// kept in [`Self::extra`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TemplateLogEvent {
    /// RFC 3339 time of the line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<String>,
    /// Log level (`info`, `error`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// The text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
    /// Build attempt the line belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The terminal frame: the build is over and the stream ends.
    #[serde(default, rename = "final")]
    pub is_final: bool,
    /// Outcome, on the terminal frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TemplateStatus>,
    /// Every other key of the line.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

type LogEvents = Pin<Box<dyn Stream<Item = Result<TemplateLogEvent>> + Send>>;

/// Where a followed log is: connecting, streaming, or finished (terminal frame or error yielded).
enum FollowState {
    Connecting(Pin<Box<dyn Future<Output = Result<LogEvents>> + Send>>),
    Open(LogEvents),
    Done,
}

/// Check a template submission without sending it.
pub fn validate_template(name: &str, dockerfile: &str, base: Option<&str>) -> Result<()> {
    validate::resource_name("name", name)?;
    if dockerfile.trim().is_empty() {
        return Err(Error::invalid("dockerfile", "must not be empty"));
    }
    if dockerfile.len() > MAX_DOCKERFILE {
        return Err(Error::invalid(
            "dockerfile",
            format!(
                "{} bytes; at most {MAX_DOCKERFILE} (64 KiB)",
                dockerfile.len()
            ),
        ));
    }
    if let Some(base) = base {
        if base.trim().is_empty() || base.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Error::invalid(
                "base",
                format!("{base:?} is not a catalog image name"),
            ));
        }
    }
    Ok(())
}

impl Client {
    /// Every template of the account, all versions (E52).
    pub fn list_templates(&self) -> Paginated<TemplateView> {
        Paginated::new(self.transport.clone(), || Call::new(&ep::LIST_TEMPLATES))
    }

    /// Submit a build (E53). The answer is `pending`; follow it with [`Self::follow_template_logs`]
    /// or [`Self::wait_for_template`]. `base` is a catalog image to build on (`None`: the default).
    /// The server also enforces one allow-listed `FROM` and no `COPY`/`ADD`.
    ///
    /// ```no_run
    /// # async fn demo(client: createos_sandbox::Client) -> createos_sandbox::Result<()> {
    /// let tpl = client
    ///     .create_template("py-tools", "FROM nodeops/sandbox:debian\nRUN apt-get install -y python3\n", None)
    ///     .await?;
    /// let done = client.wait_for_template(&tpl.id, None).await?;
    /// assert_eq!(done.status, createos_sandbox::api::templates::TemplateStatus::Ready);
    /// # Ok(()) }
    /// ```
    pub async fn create_template(
        &self,
        name: &str,
        dockerfile: &str,
        base: Option<&str>,
    ) -> Result<TemplateView> {
        validate_template(name, dockerfile, base)?;
        let mut body = serde_json::json!({ "name": name, "dockerfile": dockerfile });
        if let Some(base) = base {
            body["base"] = base.into();
        }
        let call = Call::new(&ep::CREATE_TEMPLATE).json(&body)?;
        self.transport.json(call).await
    }

    /// A template by id or name (E54), with its Dockerfile when `include_dockerfile`.
    pub async fn get_template(
        &self,
        id_or_name: &str,
        include_dockerfile: bool,
    ) -> Result<TemplateView> {
        validate::id("template", id_or_name)?;
        let call = Call::new(&ep::GET_TEMPLATE)
            .param(id_or_name)
            .query_opt("include", include_dockerfile.then_some("dockerfile"));
        self.transport.json(call).await
    }

    /// Delete a template by id (that version) or name (every version) (E55).
    pub async fn delete_template(&self, id_or_name: &str) -> Result<OkResponse> {
        validate::id("template", id_or_name)?;
        self.transport
            .json(Call::new(&ep::DELETE_TEMPLATE).param(id_or_name))
            .await
    }

    /// The build log so far as plain text (E56), of one attempt or all of them.
    pub async fn template_logs(&self, id: &str, attempt: Option<u32>) -> Result<String> {
        validate::id("template", id)?;
        let call = Call::new(&ep::GET_TEMPLATE_LOGS)
            .param(id)
            .query_opt("attempt", attempt)
            .accept("text/plain");
        let (_, body) = self.transport.bytes(call).await?;
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// Follow the build log live (E56 with `follow=true`). The stream connects when first polled,
    /// yields every line, and ends after the terminal frame (`is_final`, with the build's
    /// `status`). A connection that breaks before that ends the stream with an error; the request
    /// timeout bounds only the wait for the stream to start.
    ///
    /// ```no_run
    /// # async fn demo(client: createos_sandbox::Client) -> createos_sandbox::Result<()> {
    /// use futures::StreamExt;
    /// let mut logs = std::pin::pin!(client.follow_template_logs("tpl_01J…", None));
    /// while let Some(event) = logs.next().await {
    ///     let event = event?;
    ///     if let Some(line) = &event.line {
    ///         println!("{line}");
    ///     }
    ///     if event.is_final {
    ///         println!("build {}", event.status.map(|s| s.to_string()).unwrap_or_default());
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn follow_template_logs(
        &self,
        id: &str,
        attempt: Option<u32>,
    ) -> impl Stream<Item = Result<TemplateLogEvent>> + Send + 'static {
        let transport = self.transport.clone();
        let id = id.to_string();
        let open = async move {
            validate::id("template", &id)?;
            let call = Call::new(&ep::GET_TEMPLATE_LOGS)
                .param(id)
                .query_opt("attempt", attempt)
                .query("follow", "true")
                .accept("application/x-ndjson");
            let label = call.endpoint.label();
            let response = transport.response(call).await?;
            let events: LogEvents =
                Box::pin(ndjson::decode_response::<TemplateLogEvent>(label, response));
            Ok::<_, Error>(events)
        };
        stream::unfold(
            FollowState::Connecting(Box::pin(open)),
            |state| async move {
                let mut events = match state {
                    FollowState::Done => return None,
                    FollowState::Open(events) => events,
                    FollowState::Connecting(open) => match open.await {
                        Ok(events) => events,
                        Err(e) => return Some((Err(e), FollowState::Done)),
                    },
                };
                match events.next().await {
                    Some(Ok(event)) if event.is_final => Some((Ok(event), FollowState::Done)),
                    Some(Ok(event)) => Some((Ok(event), FollowState::Open(events))),
                    Some(Err(e)) => Some((Err(e), FollowState::Done)),
                    None => None,
                }
            },
        )
    }

    /// Poll a template until its build is over (`ready`, `failed` or `cancelled`) and return that
    /// view; check [`TemplateView::status`]. Gives up with [`Error::Timeout`] after `timeout`
    /// (default [`DEFAULT_TEMPLATE_WAIT`]).
    pub async fn wait_for_template(
        &self,
        id_or_name: &str,
        timeout: Option<Duration>,
    ) -> Result<TemplateView> {
        validate::id("template", id_or_name)?;
        let budget = timeout.unwrap_or(DEFAULT_TEMPLATE_WAIT);
        let started = Instant::now();
        let deadline = started + budget;
        let mut interval = Duration::from_millis(250);
        loop {
            let view = self.get_template(id_or_name, false).await?;
            if view.status.is_terminal() {
                return Ok(view);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Timeout {
                    endpoint: format!(
                        "waiting for template {} to finish building (last status {})",
                        view.id, view.status
                    ),
                    after: budget,
                });
            }
            tokio::time::sleep(interval.min(deadline - now)).await;
            // Builds are slow: back off to one poll every 2 s after the first few seconds.
            if started.elapsed() > Duration::from_secs(5) {
                interval = interval.mul_f64(1.25).min(Duration::from_secs(2));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submission_checks() {
        assert!(validate_template("py-tools", "FROM nodeops/sandbox:debian\n", None).is_ok());
        assert!(validate_template("Py", "FROM x\n", None).is_err());
        assert!(validate_template("ok", "  \n", None).is_err());
        assert!(validate_template("ok", &"#".repeat(MAX_DOCKERFILE + 1), None).is_err());
        assert!(validate_template("ok", &"#".repeat(MAX_DOCKERFILE), None).is_ok());
        assert!(validate_template("ok", "FROM x", Some("")).is_err());
    }

    #[test]
    fn log_event_keeps_unknown_keys() {
        let e: TemplateLogEvent = serde_json::from_str(
            r#"{"ts":"2026-01-01T00:00:00Z","line":"step 1","attempt":2,"step":3,"phase":"run"}"#,
        )
        .unwrap();
        assert_eq!(e.attempt, Some(2));
        assert!(!e.is_final);
        assert_eq!(e.extra["step"], 3);
        assert_eq!(e.extra["phase"], "run");
        let e: TemplateLogEvent =
            serde_json::from_str(r#"{"final":true,"status":"cancelled"}"#).unwrap();
        assert!(e.is_final);
        assert_eq!(e.status, Some(TemplateStatus::Cancelled));
        assert!(e.extra.is_empty());
    }
}
