//! The rig of the WAN rows: a second emulator, run as its own `createos-mock` process, behind a
//! [`DelayLink`] of 50 ms RTT on loopback. Every contender reaches it through the link; the
//! bench's own set-up, clean-up and request counting go to it directly.
//!
//! TLS: the emulator is asked for HTTPS (`--tls`) whenever its binary offers that flag, and then
//! names the CA file of its generated certificate in its ready line (`ca_file`); `cos` trusts
//! that CA through `CREATEOS_CA_FILE`. Whether the rows ran over TLS is exactly whether the ready
//! line named a CA file ([`WanRig::tls`]); a binary without `--tls` (before that flag existed)
//! gives plain HTTP, and the run then lists the WAN rows' TLS as pending.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, ensure, Context as _};
use createos_sandbox::Client;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::env::{Bench, Endpoint};
use crate::link::DelayLink;
use crate::report::RequestCount;

/// Half the modelled round trip.
pub const ONE_WAY: Duration = Duration::from_millis(25);
/// How long the emulator may take to print its ready line.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long requests a call left in flight get to reach the emulator before they are counted
/// (a request sent as the call answers is still on the link for [`ONE_WAY`]).
pub const COUNT_SETTLE: Duration = Duration::from_millis(300);

/// The ready line of `createos-mock`.
#[derive(Deserialize)]
struct Ready {
    base_url: String,
    api_key: String,
    /// The CA of its certificate, when it serves HTTPS.
    #[serde(default)]
    ca_file: Option<PathBuf>,
    /// What it isolates (absent from emulators older than the isolation boundary).
    #[serde(default)]
    isolation: Option<createos_mock::IsolationReport>,
}

pub struct WanRig {
    mock: Child,
    link: DelayLink,
    /// The emulator through the link: what every contender talks to.
    pub endpoint: Endpoint,
    /// Whether the emulator serves HTTPS (its ready line named a CA file).
    pub tls: bool,
    /// The emulator directly (for set-up and counting; never timed).
    direct_url: String,
    http: reqwest::Client,
    /// A client of the emulator directly, trusting its CA.
    pub client: Client,
}

impl WanRig {
    pub async fn start(bench: &Bench) -> anyhow::Result<WanRig> {
        let tools = bench.tools.clone();
        let binary = tokio::task::spawn_blocking(move || tools.mock_binary()).await??;
        let offers_tls = offers_tls(&binary).await?;
        let mut command = Command::new(&binary);
        command.args(["--listen", "127.0.0.1:0"]);
        if offers_tls {
            command.arg("--tls");
        }
        let mut mock = command
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stdout = mock.stdout.take().context("createos-mock stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(READY_TIMEOUT, lines.next_line())
            .await
            .context("createos-mock printed no ready line in time")??
            .context("createos-mock exited before its ready line")?;
        let ready: Ready = serde_json::from_str(&line)
            .with_context(|| format!("createos-mock's ready line {line:?}"))?;
        // TLS is what the emulator says it serves; until createos-mock has `--tls`, plain HTTP.
        let tls = ready.ca_file.is_some();
        if offers_tls && !tls {
            bail!("createos-mock --tls printed no ca_file in its ready line: {line}");
        }
        if tls != ready.base_url.starts_with("https://") {
            bail!("createos-mock's ready line names a CA file but no https URL, or the reverse: {line}");
        }
        let isolation = match &ready.isolation {
            Some(report) => crate::machine::isolation_summary(report),
            None => "not reported by this createos-mock".to_string(),
        };
        bench.note_setting("Sandbox isolation (WAN emulator)", isolation);
        // keep stdout drained (nothing more is expected on it)
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

        let direct = url::Url::parse(&ready.base_url).context("the emulator's base_url")?;
        let upstream = upstream_addr(&direct).await?;
        let link = DelayLink::start(SocketAddr::new(upstream.ip(), 0), upstream, ONE_WAY)
            .await
            .context("starting the delay link")?;
        let mut through = direct.clone();
        through
            .set_port(Some(link.addr().port()))
            .map_err(|()| anyhow::anyhow!("{direct} takes no port"))?;
        let endpoint = Endpoint {
            base_url: through.as_str().trim_end_matches('/').to_string(),
            api_key: ready.api_key.clone(),
            ca_file: ready.ca_file.clone(),
        };

        let mut http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
        if let Some(ca) = &ready.ca_file {
            let pem = std::fs::read(ca)
                .with_context(|| format!("reading the emulator's CA {}", ca.display()))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem).context("the emulator's CA")? {
                http = http.add_root_certificate(cert);
            }
        }
        let http = http
            .build()
            .context("building the HTTP client of the WAN rig")?;
        let direct_url = ready.base_url.trim_end_matches('/').to_string();
        let client = Client::builder()
            .base_url(&direct_url)
            .api_key(&ready.api_key)
            .http_client(http.clone())
            .env(|_| None)
            .build()
            .context("building the client of the WAN rig")?;
        Ok(WanRig {
            mock,
            link,
            endpoint,
            tls,
            direct_url,
            http,
            client,
        })
    }

    /// The modelled round trip.
    pub fn rtt(&self) -> Duration {
        self.link.rtt()
    }

    /// What the link has carried so far, for the log; fails if it could not reach the emulator.
    pub fn link_summary(&self) -> anyhow::Result<String> {
        let link = &self.link;
        ensure!(
            link.upstream_failures() == 0,
            "the delay link failed to reach the emulator {} time(s)",
            link.upstream_failures()
        );
        Ok(format!(
            "{} connection(s), {} bytes towards the emulator, {} back",
            link.connections(),
            link.bytes_up(),
            link.bytes_down()
        ))
    }

    /// An HTTP client that trusts the emulator's CA (keep-alive connections), for a raw request
    /// baseline through [`WanRig::endpoint`].
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    async fn mock_request(
        &self,
        method: reqwest::Method,
        path: &str,
    ) -> anyhow::Result<reqwest::Response> {
        let response = self
            .http
            .request(method, format!("{}{path}", self.direct_url))
            .header("X-Api-Key", &self.endpoint.api_key)
            .send()
            .await
            .with_context(|| format!("asking the emulator for {path}"))?;
        ensure!(
            response.status().is_success(),
            "{path} answered {}",
            response.status()
        );
        Ok(response)
    }

    /// Requests per operation since the last reset (the counting requests left out).
    async fn requests(&self) -> anyhow::Result<BTreeMap<String, u64>> {
        let stats: Value = self
            .mock_request(reqwest::Method::GET, "/_mock/stats")
            .await?
            .json()
            .await?;
        let requests = stats
            .get("requests")
            .and_then(Value::as_object)
            .context("/_mock/stats has no requests")?;
        Ok(requests
            .iter()
            .filter(|(op, _)| !op.contains("/_mock"))
            .filter_map(|(op, n)| Some((op.clone(), n.as_u64()?)))
            .filter(|(_, n)| *n > 0)
            .collect())
    }

    /// Count the control-plane requests `call` makes: reset, run it, let stragglers land, read.
    pub async fn count<F, T>(
        &self,
        label: impl Into<String>,
        call: F,
    ) -> anyhow::Result<(RequestCount, T)>
    where
        F: std::future::Future<Output = anyhow::Result<T>>,
    {
        self.mock_request(reqwest::Method::DELETE, "/_mock/stats")
            .await?;
        let value = call.await?;
        tokio::time::sleep(COUNT_SETTLE).await;
        let by_operation = self.requests().await?.into_iter().collect();
        Ok((
            RequestCount {
                call: label.into(),
                by_operation,
            },
            value,
        ))
    }

    pub async fn close(mut self) -> anyhow::Result<()> {
        self.link.stop();
        if let Some(pid) = self.mock.id() {
            // SIGTERM: the emulator stops every process it started, then exits
            // SAFETY: kill(2) on the pid of our own child, which has not been reaped yet.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
        }
        match tokio::time::timeout(Duration::from_secs(20), self.mock.wait()).await {
            Ok(status) => {
                status.context("waiting for createos-mock")?;
            }
            Err(_) => self.mock.kill().await.context("killing createos-mock")?,
        }
        Ok(())
    }
}

/// Whether this `createos-mock` has `--tls` (its `--help` lists it).
async fn offers_tls(binary: &std::path::Path) -> anyhow::Result<bool> {
    let help = Command::new(binary)
        .arg("--help")
        .output()
        .await
        .context("createos-mock --help")?;
    ensure!(
        help.status.success(),
        "createos-mock --help failed ({})",
        help.status
    );
    let text = String::from_utf8_lossy(&help.stdout);
    Ok(text
        .split(|c: char| c.is_whitespace() || c == ',')
        .any(|word| word == "--tls"))
}

/// The socket address the emulator listens on.
async fn upstream_addr(url: &url::Url) -> anyhow::Result<SocketAddr> {
    let host = url.host_str().context("the emulator's URL has no host")?;
    let port = url
        .port_or_known_default()
        .context("the emulator's URL has no port")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    tokio::net::lookup_host((host, port))
        .await
        .with_context(|| format!("resolving {host}"))?
        .next()
        .with_context(|| format!("{host} resolves to nothing"))
}
