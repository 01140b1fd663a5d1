//! Health, identity and catalogs (E1–E6): liveness, readiness, `whoami`, shapes, base images and
//! worker hosts.

use futures::StreamExt;
use http::{header, HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::endpoints as ep;
use crate::api::open_enum;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::pagination::Paginated;
use crate::transport::{connection_error, jsend, Call};

/// Most of a `/readyz` answer that is read: verdicts are tiny, anything longer is not one.
const MAX_READYZ_BODY: usize = 64 * 1024;

/// Answer of `GET /healthz` (E1).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// True when the control plane process is alive.
    #[serde(default)]
    pub up: bool,
}

/// Verdict of `GET /readyz` (E2). Both 200 (ready) and 503 (not ready) are verdicts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Readiness {
    /// Whether the control plane accepts work.
    pub ready: bool,
    /// Why it is not ready, when the server says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Time since the scheduler last reported healthy, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_last_ok_ms_ago: Option<f64>,
}

/// Sandboxes of the caller by state (not counting destroyed ones).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxCounts {
    /// Running.
    #[serde(default)]
    pub running: u64,
    /// Paused.
    #[serde(default)]
    pub paused: u64,
    /// Every other non-destroyed state (creating, pausing, error, …).
    #[serde(default)]
    pub other: u64,
    /// All of them.
    #[serde(default)]
    pub total: u64,
}

/// Answer of `GET /v1/whoami` (E3).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhoAmI {
    /// The account's user id.
    pub user_id: String,
    /// Sandbox counts.
    #[serde(default)]
    pub stats: SandboxCounts,
}

/// A VM size of the catalog (E4).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    /// Shape id, e.g. `s-1vcpu-1gb`.
    pub id: String,
    /// vCPUs.
    #[serde(default)]
    pub vcpu: u32,
    /// Memory, MiB.
    #[serde(default)]
    pub mem_mib: u64,
    /// Root disk a sandbox of this shape starts with, MiB.
    #[serde(default)]
    pub default_disk_mib: u64,
    /// cgroup CPU cap in percent; absent when uncapped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_quota_pct: Option<u32>,
}

/// One base image of the catalog, with its description.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootfsEntry {
    /// Catalog name, e.g. `devbox:1`.
    pub name: String,
    /// What the image holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Still usable but scheduled for removal.
    #[serde(default)]
    pub deprecated: bool,
    /// Replacement of a deprecated image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successor: Option<String>,
}

/// Answer of `GET /v1/rootfs` (E5). Disabled images are not listed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootfsCatalog {
    /// Names accepted as `rootfs` at create (templates are accepted too).
    #[serde(default)]
    pub rootfs: Vec<String>,
    /// What create uses when `rootfs` is omitted.
    #[serde(default)]
    pub default: String,
    /// Details per image (older servers omit them).
    #[serde(default)]
    pub entries: Vec<RootfsEntry>,
}

impl RootfsCatalog {
    /// The entry describing `name`, if the server sent one.
    pub fn entry(&self, name: &str) -> Option<&RootfsEntry> {
        self.entries.iter().find(|e| e.name == name)
    }
}

open_enum! {
    /// State of a worker host.
    #[derive(Default)]
    HostStatus {
        /// Accepting sandboxes.
        #[default]
        Active = "active",
        /// Finishing its sandboxes, accepting none.
        Draining = "draining",
        /// Unreachable.
        Dead = "dead",
    }
}

/// A worker host (E6, operator surface).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    /// Host id.
    pub id: String,
    /// State.
    #[serde(default)]
    pub status: HostStatus,
    /// Memory left for sandboxes, MiB.
    #[serde(default)]
    pub free_mib: u64,
    /// Sandboxes it runs.
    #[serde(default)]
    pub vm_count: u64,
    /// Base images it holds.
    #[serde(default)]
    pub rootfses: Vec<String>,
}

impl Client {
    /// Liveness probe (E1); needs no credential.
    ///
    /// ```no_run
    /// # async fn demo(client: createos_sandbox::Client) -> createos_sandbox::Result<()> {
    /// assert!(client.healthz().await?.up);
    /// # Ok(()) }
    /// ```
    pub async fn healthz(&self) -> Result<Health> {
        self.transport.json(Call::new(&ep::HEALTHZ)).await
    }

    /// Readiness probe (E2). A 503 is a verdict (`ready: false`), not an error, and a non-JSON
    /// body is tolerated (the status decides). Other statuses are errors. Sent once: a probe that
    /// retried 503s would hide the answer it exists to give.
    ///
    /// ```no_run
    /// # async fn demo(client: createos_sandbox::Client) -> createos_sandbox::Result<()> {
    /// let r = client.readyz().await?;
    /// if !r.ready {
    ///     eprintln!("not ready: {}", r.reason.unwrap_or_default());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn readyz(&self) -> Result<Readiness> {
        let t = &self.transport;
        let label = ep::READYZ.label();
        let call = Call::new(&ep::READYZ);
        let url = t.url(&call.path()?, &[])?;
        let mut request = reqwest::Request::new(ep::READYZ.method.clone(), url);
        request
            .headers_mut()
            .insert(header::USER_AGENT, t.user_agent.clone());
        request
            .headers_mut()
            .insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        let exchange = async {
            let resp = t
                .http
                .execute(request)
                .await
                .map_err(|e| connection_error(&label, e))?;
            let status = resp.status();
            let headers = resp.headers().clone();
            let mut body = Vec::new();
            let mut chunks = resp.bytes_stream();
            while let Some(chunk) = chunks.next().await {
                let chunk = chunk.map_err(|e| connection_error(&label, e))?;
                body.extend_from_slice(&chunk[..chunk.len().min(MAX_READYZ_BODY - body.len())]);
                if body.len() >= MAX_READYZ_BODY {
                    break;
                }
            }
            Ok::<_, Error>((status, headers, body))
        };
        let (status, headers, body) = match t.timeouts.request {
            Some(limit) => {
                tokio::time::timeout(limit, exchange)
                    .await
                    .map_err(|_| Error::Timeout {
                        endpoint: label.clone(),
                        after: limit,
                    })??
            }
            None => exchange.await?,
        };
        match status {
            StatusCode::OK | StatusCode::SERVICE_UNAVAILABLE => Ok(readiness_from(status, &body)),
            other => Err(jsend::error_from_answer(
                &label,
                other.as_u16(),
                &headers,
                &body,
            )),
        }
    }

    /// Who the credential belongs to, with sandbox counts (E3).
    ///
    /// ```no_run
    /// # async fn demo(client: createos_sandbox::Client) -> createos_sandbox::Result<()> {
    /// let me = client.whoami().await?;
    /// println!("{}: {} running of {}", me.user_id, me.stats.running, me.stats.total);
    /// # Ok(()) }
    /// ```
    pub async fn whoami(&self) -> Result<WhoAmI> {
        self.transport.json(Call::new(&ep::WHOAMI)).await
    }

    /// The VM sizes on offer (E4); needs no credential.
    ///
    /// ```no_run
    /// # async fn demo(client: createos_sandbox::Client) -> createos_sandbox::Result<()> {
    /// for shape in client.list_shapes().collect_all().await? {
    ///     println!("{} {} vCPU {} MiB", shape.id, shape.vcpu, shape.mem_mib);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn list_shapes(&self) -> Paginated<Shape> {
        Paginated::new(self.transport.clone(), || Call::new(&ep::LIST_SHAPES))
    }

    /// The base images on offer and the default one (E5); needs no credential.
    pub async fn rootfs(&self) -> Result<RootfsCatalog> {
        self.transport.json(Call::new(&ep::LIST_ROOTFS)).await
    }

    /// Worker hosts (E6). Real control planes may reserve this to operators (403).
    pub fn list_hosts(&self) -> Paginated<Host> {
        Paginated::new(self.transport.clone(), || Call::new(&ep::LIST_HOSTS))
    }
}

/// Turn a 200/503 answer into a verdict. JSend (`success` or `fail` with the readiness object, or
/// an `error` envelope with a message) is read when present; otherwise the status decides.
fn readiness_from(status: StatusCode, body: &[u8]) -> Readiness {
    let status_ready = status == StatusCode::OK;
    let mut verdict = Readiness {
        ready: status_ready,
        reason: None,
        scheduler_last_ok_ms_ago: None,
    };
    let envelope = match serde_json::from_slice::<Value>(body) {
        Ok(v) => v,
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            if !status_ready && !text.is_empty() && text.len() <= 512 && !text.starts_with('<') {
                verdict.reason = Some(text.to_string());
            }
            return verdict;
        }
    };
    // `data` of a JSend envelope, or the object itself from a server that does not wrap it.
    let data = match envelope.get("status").and_then(Value::as_str) {
        Some("error") => {
            verdict.reason = envelope
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string);
            return verdict;
        }
        Some(_) => envelope.get("data").cloned().unwrap_or(Value::Null),
        None => envelope,
    };
    match data {
        Value::Object(map) => {
            if status_ready {
                verdict.ready = map.get("ready").and_then(Value::as_bool).unwrap_or(true);
            }
            verdict.reason = map
                .get("reason")
                .and_then(Value::as_str)
                .map(str::to_string);
            verdict.scheduler_last_ok_ms_ago =
                map.get("scheduler_last_ok_ms_ago").and_then(Value::as_f64);
        }
        Value::String(s) if !status_ready => verdict.reason = Some(s),
        _ => {}
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_verdicts() {
        let r = readiness_from(
            StatusCode::OK,
            br#"{"status":"success","data":{"ready":true}}"#,
        );
        assert_eq!(
            r,
            Readiness {
                ready: true,
                reason: None,
                scheduler_last_ok_ms_ago: None
            }
        );
        let r = readiness_from(
            StatusCode::SERVICE_UNAVAILABLE,
            br#"{"status":"fail","data":{"ready":false,"reason":"scheduler stale","scheduler_last_ok_ms_ago":9000}}"#,
        );
        assert!(!r.ready);
        assert_eq!(r.reason.as_deref(), Some("scheduler stale"));
        assert_eq!(r.scheduler_last_ok_ms_ago, Some(9000.0));
        // A 503 that claims readiness is still not ready: the status is the verdict.
        assert!(
            !readiness_from(
                StatusCode::SERVICE_UNAVAILABLE,
                br#"{"status":"fail","data":{"ready":true}}"#
            )
            .ready
        );
    }

    #[test]
    fn readiness_tolerates_non_json() {
        assert!(readiness_from(StatusCode::OK, b"OK").ready);
        let r = readiness_from(StatusCode::SERVICE_UNAVAILABLE, b"draining\n");
        assert!(!r.ready);
        assert_eq!(r.reason.as_deref(), Some("draining"));
        assert!(
            readiness_from(StatusCode::SERVICE_UNAVAILABLE, b"<html>down</html>")
                .reason
                .is_none()
        );
        let r = readiness_from(
            StatusCode::SERVICE_UNAVAILABLE,
            br#"{"status":"error","message":"service unavailable","code":503}"#,
        );
        assert_eq!(r.reason.as_deref(), Some("service unavailable"));
        assert!(readiness_from(StatusCode::OK, b"").ready);
    }

    #[test]
    fn catalog_models_tolerate_missing_fields() {
        let c: RootfsCatalog =
            serde_json::from_str(r#"{"rootfs":["devbox:1"],"default":"devbox:1"}"#).unwrap();
        assert!(c.entries.is_empty());
        let h: Host = serde_json::from_str(r#"{"id":"h1","status":"retired"}"#).unwrap();
        assert_eq!(h.status, HostStatus::Other("retired".into()));
        let s: Shape = serde_json::from_str(r#"{"id":"s-1vcpu-1gb"}"#).unwrap();
        assert_eq!(s.cpu_quota_pct, None);
    }
}
