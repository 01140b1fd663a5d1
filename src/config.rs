//! Where the control plane is and how the client talks to it: base URLs (production, regions,
//! override), timeouts, the retry policy, and the environment variables that set them.

use std::time::Duration;

use url::Url;

use crate::error::{Error, Result};

/// Production control plane.
pub const DEFAULT_BASE_URL: &str = "https://api.sb.createos.sh";

/// Environment variables naming the base URL, in precedence order: the SDKs' name, then the CLI's.
pub const BASE_URL_ENV_VARS: &[&str] = &["CREATEOS_SANDBOX_BASE_URL", "CREATEOS_SANDBOX_URL"];

/// Environment variables naming extra CA certificate files (PEM) to trust beyond the
/// webpki roots, all of them read (after `ClientBuilder::ca_file`).
pub const CA_FILE_ENV_VARS: &[&str] = &["CREATEOS_CA_FILE", "SSL_CERT_FILE"];

/// A regional control plane. Each region is a separate control plane: an id from one is unknown
/// (404) in the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Region {
    /// `https://api-us.sb.createos.sh`
    Us,
    /// `https://api-eu.sb.createos.sh`
    Eu,
}

impl Region {
    /// Base URL of this region's control plane.
    pub fn base_url(self) -> &'static str {
        match self {
            Region::Us => "https://api-us.sb.createos.sh",
            Region::Eu => "https://api-eu.sb.createos.sh",
        }
    }
}

impl std::str::FromStr for Region {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "us" => Ok(Region::Us),
            "eu" => Ok(Region::Eu),
            other => Err(Error::invalid(
                "region",
                format!("unknown region {other:?} (expected `us` or `eu`)"),
            )),
        }
    }
}

/// Parse and normalise a base URL: http(s) only, no query or fragment, no credentials, trailing
/// slashes removed.
pub fn parse_base_url(raw: &str) -> Result<Url> {
    let trimmed = raw.trim().trim_end_matches('/');
    let url = Url::parse(trimmed)
        .map_err(|e| Error::invalid("base_url", format!("{raw:?} is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Error::invalid(
            "base_url",
            format!("{raw:?}: scheme must be http or https"),
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(Error::invalid(
            "base_url",
            format!("{raw:?} must not carry a query or fragment"),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Error::invalid("base_url", "must not embed credentials"));
    }
    if url.host_str().is_none() {
        return Err(Error::invalid("base_url", format!("{raw:?} has no host")));
    }
    Ok(url)
}

/// The base URL chosen by the environment, if any variable is set.
pub fn base_url_from_env(env: &dyn Fn(&str) -> Option<String>) -> Option<(String, &'static str)> {
    BASE_URL_ENV_VARS.iter().find_map(|name| {
        env(name)
            .filter(|v| !v.trim().is_empty())
            .map(|v| (v, *name))
    })
}

/// When and how often a failed request is sent again.
///
/// Only what is safe is retried: connection failures that happened before the request was sent
/// (any method), other connection failures for idempotent methods, 429 and 503 for any method with
/// a replayable body, and 408/500/502/504 for idempotent methods. A `Retry-After` header overrides
/// the computed delay.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables retrying).
    pub max_retries: u32,
    /// First backoff step; each retry doubles it, plus up to one step of jitter.
    pub base_delay: Duration,
    /// Upper bound of a computed delay.
    pub max_delay: Duration,
    /// Upper bound of a server-requested `Retry-After` wait; longer requests fail instead.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..Default::default()
        }
    }

    /// Delay before retry number `attempt` (0 = the first retry), without `Retry-After`.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let base = self.base_delay.as_secs_f64();
        let exp = base * 2f64.powi(attempt.min(30) as i32);
        let jitter = rand::random::<f64>() * base;
        Duration::from_secs_f64((exp + jitter).min(self.max_delay.as_secs_f64()))
    }
}

/// Defaults for per-request behaviour.
#[derive(Clone, Debug)]
pub struct Timeouts {
    /// Per attempt, until the answer is fully read (for streams: until the headers arrive).
    pub request: Option<Duration>,
    /// Establishing a TCP/TLS connection.
    pub connect: Duration,
    /// How long lifecycle waits (`wait_until_*`) poll before giving up.
    pub wait: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            request: Some(Duration::from_secs(60)),
            connect: Duration::from_secs(10),
            wait: Duration::from_secs(120),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_rules() {
        assert_eq!(
            parse_base_url("https://x.example/").unwrap().as_str(),
            "https://x.example/"
        );
        assert_eq!(
            parse_base_url("http://127.0.0.1:9/api//").unwrap().path(),
            "/api"
        );
        assert!(parse_base_url("ftp://x").is_err());
        assert!(parse_base_url("https://x/?a=1").is_err());
        assert!(parse_base_url("https://u:p@x").is_err());
        assert!(parse_base_url("not a url").is_err());
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy {
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(450),
            ..Default::default()
        };
        let d0 = p.backoff(0);
        assert!(d0 >= Duration::from_millis(100) && d0 <= Duration::from_millis(200));
        let d1 = p.backoff(1);
        assert!(d1 >= Duration::from_millis(200) && d1 <= Duration::from_millis(300));
        assert_eq!(p.backoff(10), Duration::from_millis(450));
    }

    #[test]
    fn env_precedence_for_base_url() {
        let env = |n: &str| match n {
            "CREATEOS_SANDBOX_URL" => Some("http://cli".to_string()),
            "CREATEOS_SANDBOX_BASE_URL" => Some("http://sdk".to_string()),
            _ => None,
        };
        assert_eq!(base_url_from_env(&env).unwrap().0, "http://sdk");
        let env2 = |n: &str| (n == "CREATEOS_SANDBOX_URL").then(|| "http://cli".to_string());
        assert_eq!(
            base_url_from_env(&env2).unwrap(),
            ("http://cli".to_string(), "CREATEOS_SANDBOX_URL")
        );
    }
}
