//! Whether a local emulator can isolate its sandboxes (issue 13.4). Against an emulator that
//! cannot (not Linux, no namespaces, unprivileged without user namespaces), a "sandbox"
//! command runs on this machine as the user; `cos mcp` then refuses `sandbox_exec` and the
//! routed native tools unless it was started with `--unsafe-host`.
//!
//! Contract with the emulator: `GET /_mock/isolation` (with the API key) answers
//! `{"isolated": bool, "mechanism": "...", "missing": [...]}`. Only a loopback endpoint is
//! asked (the real service is never on loopback), once per server; a 404 means "not an
//! emulator" (or one from before the route existed) and counts as isolated.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Deserialize;
use url::{Host, Url};

use super::ToolError;
use createos_sandbox::Client;

/// Budget of the one question.
const ASK_TIMEOUT: Duration = Duration::from_secs(10);

/// What the emulator says about its sandboxes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct IsolationReport {
    /// Sandboxes are a real boundary on this machine.
    pub isolated: bool,
    /// How they are kept apart (e.g. `namespaces`, `none`).
    #[serde(default)]
    pub mechanism: String,
    /// What is missing for isolation (e.g. `user namespaces`).
    #[serde(default)]
    pub missing: Vec<String>,
}

/// Decides, once, whether host-executing tools may run.
#[derive(Debug)]
pub struct HostGuard {
    unsafe_host: AtomicBool,
    answer: tokio::sync::OnceCell<Option<IsolationReport>>,
}

/// Whether `url` points at this machine.
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(name)) => {
            name.eq_ignore_ascii_case("localhost")
                || name.to_ascii_lowercase().ends_with(".localhost")
        }
        Some(Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(Host::Ipv6(ip)) => {
            IpAddr::V6(ip).is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        None => false,
    }
}

impl HostGuard {
    /// A guard; `unsafe_host` lets everything through without asking.
    pub fn new(unsafe_host: bool) -> Self {
        HostGuard {
            unsafe_host: AtomicBool::new(unsafe_host),
            answer: tokio::sync::OnceCell::new(),
        }
    }

    /// Let everything through from now on (`--unsafe-host`).
    pub fn allow_unsafe_host(&self) {
        self.unsafe_host.store(true, Ordering::SeqCst);
    }

    /// Refuse `tool` when the control plane is a local emulator that cannot isolate.
    pub async fn check(&self, client: &Client, tool: &str) -> Result<(), ToolError> {
        if self.unsafe_host.load(Ordering::SeqCst) || !is_loopback(client.base_url()) {
            return Ok(());
        }
        // Signed out, nothing can run anyway; the call itself says how to sign in.
        if client.credentials().is_none() {
            return Ok(());
        }
        let answer = self.answer.get_or_try_init(|| ask(client)).await?;
        match answer {
            Some(report) if !report.isolated => {
                Err(ToolError::Refused(refusal(client.base_url(), tool, report)))
            }
            _ => Ok(()),
        }
    }
}

fn refusal(base: &Url, tool: &str, report: &IsolationReport) -> String {
    let mechanism = if report.mechanism.is_empty() {
        "no isolation".to_string()
    } else {
        report.mechanism.clone()
    };
    let missing = if report.missing.is_empty() {
        String::new()
    } else {
        format!("; missing: {}", report.missing.join(", "))
    };
    format!(
        "{tool} refused: the local emulator at {base} cannot isolate its sandboxes ({mechanism}{missing}), so the command would \
         run on this machine with your user's rights. Start `cos mcp` with --unsafe-host to allow it anyway."
    )
}

/// One `GET /_mock/isolation`: `Some(report)`, or `None` when the endpoint is not an
/// emulator (404).
async fn ask(client: &Client) -> Result<Option<IsolationReport>, ToolError> {
    let base = client.base_url();
    let url = base
        .join("/_mock/isolation")
        .map_err(|e| ToolError::Internal(format!("isolation URL: {e}")))?;
    let failed = |why: String| {
        ToolError::Refused(format!(
            "could not ask the local emulator at {base} whether it isolates its sandboxes ({why}); \
             start `cos mcp` with --unsafe-host to skip the check"
        ))
    };
    let credentials = client
        .credentials()
        .ok_or_else(|| failed("not signed in".into()))?;
    // The client's own HTTP stack, so the CAs it trusts (`--ca-file`, `CREATEOS_CA_FILE`) apply.
    let http = client.http_client();
    let (name, value) = credentials.header(http).await?;
    let response = http
        .get(url)
        .header(name, value)
        .timeout(ASK_TIMEOUT)
        .send()
        .await
        .map_err(|e| failed(e.without_url().to_string()))?;
    match response.status().as_u16() {
        404 => Ok(None),
        200 => {
            let report: IsolationReport = response
                .json()
                .await
                .map_err(|e| failed(format!("unreadable answer: {}", e.without_url())))?;
            tracing::debug!(?report, "the local emulator's isolation");
            Ok(Some(report))
        }
        status => Err(failed(format!("HTTP {status}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_machine_is_loopback() {
        for yes in [
            "http://127.0.0.1:8080",
            "http://127.9.9.9/",
            "http://[::1]:1/",
            "http://localhost:3000",
            "http://api.localhost",
            "http://[::ffff:127.0.0.1]/",
        ] {
            assert!(is_loopback(&Url::parse(yes).unwrap()), "{yes}");
        }
        for no in [
            "https://api.createos.example",
            "http://10.0.0.1",
            "http://[2001:db8::1]/",
            "http://localhost.example.com",
            "http://0.0.0.0:1",
        ] {
            assert!(!is_loopback(&Url::parse(no).unwrap()), "{no}");
        }
    }

    #[test]
    fn the_refusal_says_why_and_how_to_override() {
        let report = IsolationReport {
            isolated: false,
            mechanism: "fallback".into(),
            missing: vec!["user namespaces".into(), "root".into()],
        };
        let text = refusal(
            &Url::parse("http://127.0.0.1:9/").unwrap(),
            "sandbox_exec",
            &report,
        );
        assert!(
            text.contains("sandbox_exec refused")
                && text.contains("fallback; missing: user namespaces, root")
                && text.contains("--unsafe-host"),
            "{text}"
        );
        let parsed: IsolationReport = serde_json::from_str(
            r#"{"isolated": true, "mechanism": "bubblewrap", "missing": [], "extra": 1}"#,
        )
        .unwrap();
        assert!(parsed.isolated);
    }
}
