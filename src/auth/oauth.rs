//! OAuth sessions saved by `createos login`: expiry, single-flight refresh, and the refresh call.
//!
//! Refresh discipline, in order: one task per process refreshes (a tokio mutex); one process per
//! home refreshes (the file lock in [`super::lock`]); and the holder re-reads `.oauth` first, so a
//! session another process (or the CLI) already renewed is adopted instead of refreshed again.

use std::sync::RwLock;
use std::time::Duration;

use http::HeaderValue;
use serde_json::Value;
use url::{Host, Url};

use super::files::{self, unix_now, OAuthSession, StorePaths};
use super::lock;
use super::secret::Secret;
use crate::error::Error;

/// Issuer of the CreateOS OAuth sessions (a constant in the CLI).
pub(crate) const DEFAULT_ISSUER: &str = "https://id.nodeops.network";
/// The CLI's default OAuth client id; `CREATEOS_OAUTH_CLIENT_ID` overrides it.
pub(crate) const DEFAULT_CLIENT_ID: &str = "fbcaaa58-1e30-43fe-8fba-34382ba4fe7f";
/// Whole refresh exchange, connect to last body byte (the CLI's limit).
const REFRESH_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest token-endpoint answer read (the CLI's limit).
const MAX_ANSWER_BYTES: usize = 1 << 20;
/// How long to wait for another process's refresh: its HTTP timeout plus slack for the file work.
const LOCK_WAIT: Duration = Duration::from_secs(60);
/// Lifetime assumed when the endpoint does not say (the CLI's default).
const DEFAULT_LIFETIME_SECS: i64 = 3600;

/// Where and as whom to refresh.
#[derive(Clone, Debug)]
pub(crate) struct OAuthClient {
    pub client_id: String,
    pub issuer: String,
}

/// The access token in use by this process.
struct Current {
    token: Secret,
    expires_at: i64,
}

impl Current {
    fn is_expired(&self, now: i64) -> bool {
        self.token.is_empty() || now >= self.expires_at.saturating_sub(files::EXPIRY_SKEW_SECS)
    }
}

/// State behind a [`super::Credentials`] that came from `.oauth`.
pub(crate) struct OAuthState {
    paths: StorePaths,
    client: OAuthClient,
    current: RwLock<Current>,
    /// Single-flight gate; holds the last token value a 401 made us renew, so one rejected value
    /// causes at most one renewal.
    gate: tokio::sync::Mutex<Option<HeaderValue>>,
}

impl OAuthState {
    pub fn new(paths: StorePaths, client: OAuthClient, session: &OAuthSession) -> Self {
        let current = Current {
            token: session.access_token.clone(),
            expires_at: session.expires_at,
        };
        OAuthState {
            paths,
            client,
            current: RwLock::new(current),
            gate: tokio::sync::Mutex::new(None),
        }
    }

    fn read_current<T>(&self, f: impl FnOnce(&Current) -> T) -> T {
        let guard = self
            .current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&guard)
    }

    fn adopt(&self, session: &OAuthSession) {
        let mut guard = self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *guard = Current {
            token: session.access_token.clone(),
            expires_at: session.expires_at,
        };
    }

    /// The current token as a header value, when it is not about to expire.
    fn fresh_value(&self) -> Result<Option<HeaderValue>, Error> {
        let now = unix_now();
        self.read_current(|c| {
            if c.is_expired(now) {
                Ok(None)
            } else {
                token_value(&c.token).map(Some)
            }
        })
    }

    /// Header value for the next request, refreshing first when the token expires within 60 s.
    pub async fn header_value(&self, http: &reqwest::Client) -> Result<HeaderValue, Error> {
        if let Some(value) = self.fresh_value()? {
            return Ok(value);
        }
        let _gate = self.gate.lock().await;
        // Another task may have renewed while we waited for the gate.
        if let Some(value) = self.fresh_value()? {
            return Ok(value);
        }
        self.renew(http, None).await?;
        self.read_current(|c| token_value(&c.token))
    }

    /// After a 401 carrying `rejected`: true when a different token is now in use.
    pub async fn renew_after_unauthorized(
        &self,
        http: &reqwest::Client,
        rejected: &HeaderValue,
    ) -> Result<bool, Error> {
        let mut last_renewed_for = self.gate.lock().await;
        let now = unix_now();
        let moved_on = self.read_current(|c| {
            !c.is_expired(now) && c.token.expose().as_bytes() != rejected.as_bytes()
        });
        if moved_on {
            return Ok(true);
        }
        if last_renewed_for
            .as_ref()
            .is_some_and(|v| v.as_bytes() == rejected.as_bytes())
        {
            // We already renewed because of this value and were handed it again.
            return Ok(false);
        }
        let outcome = self.renew(http, Some(rejected)).await;
        // Remember the value unless the failure was transient (network, timeout, a busy lock), so
        // a later 401 on it can try again.
        if matches!(outcome, Ok(()) | Err(Error::Credentials { .. })) {
            let mut remembered = rejected.clone();
            remembered.set_sensitive(true);
            *last_renewed_for = Some(remembered);
        }
        outcome?;
        Ok(self.read_current(|c| c.token.expose().as_bytes() != rejected.as_bytes()))
    }

    /// Under the cross-process lock: adopt what `.oauth` holds if it is usable, else refresh.
    /// `rejected` is a token the server refused, which is never usable even if not yet expired.
    async fn renew(
        &self,
        http: &reqwest::Client,
        rejected: Option<&HeaderValue>,
    ) -> Result<(), Error> {
        let _lock = lock::acquire(&self.paths.lock, LOCK_WAIT).await?;
        let mut session = self.reread().await?;
        // Second pass only when the endpoint refused a refresh token that someone (the CLI takes
        // no lock) replaced in the file while we were asking.
        for attempt in 0..2 {
            let usable = !session.is_expired(unix_now())
                && rejected
                    .is_none_or(|r| session.access_token.expose().as_bytes() != r.as_bytes());
            if usable {
                let path = self.paths.oauth.display();
                tracing::debug!(path = %path, "using the session another process renewed");
                self.adopt(&session);
                return Ok(());
            }
            match refresh(http, &self.client, &session).await {
                Ok(renewed) => {
                    self.save(&renewed).await;
                    self.adopt(&renewed);
                    return Ok(());
                }
                Err(Refusal::Refused(reason)) if attempt == 0 => {
                    let latest = self.reread().await?;
                    if latest.refresh_token == session.refresh_token {
                        return Err(expired(&reason));
                    }
                    session = latest;
                }
                Err(Refusal::Refused(reason)) => return Err(expired(&reason)),
                Err(Refusal::Failed(error)) => return Err(error),
            }
        }
        Err(expired(
            "the token endpoint refused every saved refresh token",
        ))
    }

    async fn reread(&self) -> Result<OAuthSession, Error> {
        let path = self.paths.oauth.clone();
        let read = tokio::task::spawn_blocking(move || files::read_oauth(&path))
            .await
            .map_err(|e| {
                Error::io(
                    "reading the saved session",
                    std::io::Error::other(e.to_string()),
                )
            })??;
        read.ok_or_else(|| {
            Error::NotSignedIn(format!(
                "the saved session {} was removed (signed out?); \
                 run `createos login` or set CREATEOS_API_KEY",
                self.paths.oauth.display()
            ))
        })
    }

    /// Write the renewed session back. A failure is logged, not returned: the new access token
    /// works for this process either way, and failing the caller's request would not bring the
    /// file back.
    async fn save(&self, session: &OAuthSession) {
        let path = self.paths.oauth.clone();
        let owned = session.clone();
        let result = tokio::task::spawn_blocking(move || files::write_oauth(&path, &owned)).await;
        match result {
            Ok(Ok(())) => {
                tracing::info!(path = %self.paths.oauth.display(), "refreshed the OAuth session")
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "refreshed the OAuth session but could not save it")
            }
            Err(e) => {
                tracing::warn!(error = %e, "refreshed the OAuth session but the save task failed")
            }
        }
    }
}

/// A sensitive header value holding `token`.
pub(crate) fn token_value(token: &Secret) -> Result<HeaderValue, Error> {
    let mut value = HeaderValue::from_str(token.expose()).map_err(|_| {
        Error::credentials(
            "the saved access token contains characters that cannot be sent in an HTTP header; \
             run `createos login`",
        )
    })?;
    value.set_sensitive(true);
    Ok(value)
}

fn expired(reason: &str) -> Error {
    Error::credentials(format!(
        "your session has expired and could not be refreshed: {reason}; run `createos login`"
    ))
}

/// Why a refresh did not produce a session.
enum Refusal {
    /// The endpoint answered but gave no usable token (or there was nothing to send).
    Refused(String),
    /// Network trouble or a timeout: logging in again would not help.
    Failed(Error),
}

/// One refresh-token grant against the session's token endpoint (or the issuer's default).
async fn refresh(
    http: &reqwest::Client,
    client: &OAuthClient,
    session: &OAuthSession,
) -> Result<OAuthSession, Refusal> {
    if session.refresh_token.is_empty() {
        return Err(Refusal::Refused("no refresh token is saved".into()));
    }
    let endpoint = match session.token_endpoint.trim() {
        "" => format!("{}/oauth2/token", client.issuer.trim_end_matches('/')),
        saved => saved.to_owned(),
    };
    let url = checked_endpoint(&endpoint).map_err(Refusal::Refused)?;
    let label = format!("POST {}", display_url(&url));
    let body = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "refresh_token")
        .append_pair("refresh_token", session.refresh_token.expose())
        .append_pair("client_id", &client.client_id)
        .finish();
    tracing::debug!(endpoint = %label, "refreshing the OAuth session");
    let sent = http
        .post(url)
        .timeout(REFRESH_TIMEOUT)
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .header(http::header::ACCEPT, "application/json")
        .body(body)
        .send()
        .await;
    let response = sent.map_err(|e| Refusal::Failed(transport_error(&label, e)))?;
    let status = response.status();
    let bytes = read_capped(response, &label).await?;
    let answer: Option<Value> = serde_json::from_slice(&bytes).ok();
    let secrets = [
        session.refresh_token.expose(),
        session.access_token.expose(),
    ];
    if !status.is_success() {
        return Err(Refusal::Refused(describe_refusal(
            status,
            answer.as_ref(),
            &secrets,
        )));
    }
    let Some(Value::Object(answer)) = answer else {
        return Err(Refusal::Refused(format!(
            "the token endpoint's answer (HTTP {status}) is not a JSON object"
        )));
    };
    let text = |key: &str| {
        answer
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_owned()
    };
    let access_token = text("access_token");
    if access_token.is_empty() {
        return Err(Refusal::Refused(
            "the token endpoint's answer has no access_token".into(),
        ));
    }
    let token_type = text("token_type");
    if !token_type.is_empty() && !token_type.eq_ignore_ascii_case("bearer") {
        let shown: String = token_type.chars().take(32).collect();
        return Err(Refusal::Refused(format!(
            "the token endpoint issued a `{shown}` token instead of a bearer token"
        )));
    }
    let now = unix_now();
    let lifetime = answer
        .get("expires_in")
        .and_then(seconds)
        .filter(|s| *s > 0)
        .unwrap_or(DEFAULT_LIFETIME_SECS);
    let mut renewed = session.clone();
    renewed.access_token = Secret::new(access_token);
    let rotated = text("refresh_token");
    if !rotated.is_empty() {
        renewed.refresh_token = Secret::new(rotated);
    }
    renewed.expires_at = now.saturating_add(lifetime);
    Ok(renewed)
}

/// `expires_in` as a number or a numeric string.
fn seconds(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Token endpoints receive a refresh token: https only, plain http only on the loopback.
fn checked_endpoint(endpoint: &str) -> Result<Url, String> {
    let url = Url::parse(endpoint)
        .map_err(|_| "the saved token endpoint is not a valid URL".to_owned())?;
    let loopback = match url.host() {
        Some(Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip == std::net::Ipv4Addr::LOCALHOST,
        Some(Host::Ipv6(ip)) => ip == std::net::Ipv6Addr::LOCALHOST,
        None => false,
    };
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback => Ok(url),
        _ => Err(format!(
            "the token endpoint {} is not https (plain http is allowed only for localhost)",
            display_url(&url)
        )),
    }
}

/// A URL for messages: no credentials, no query.
fn display_url(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

fn transport_error(label: &str, error: reqwest::Error) -> Error {
    if error.is_timeout() {
        Error::Timeout {
            endpoint: label.to_owned(),
            after: REFRESH_TIMEOUT,
        }
    } else {
        Error::Connection {
            endpoint: label.to_owned(),
            source: Box::new(error.without_url()),
        }
    }
}

/// The whole answer, refusing more than [`MAX_ANSWER_BYTES`].
async fn read_capped(mut response: reqwest::Response, label: &str) -> Result<Vec<u8>, Refusal> {
    let too_big = || Refusal::Refused("the token endpoint's answer is larger than 1 MiB".into());
    if response
        .content_length()
        .is_some_and(|n| n > MAX_ANSWER_BYTES as u64)
    {
        return Err(too_big());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| Refusal::Failed(transport_error(label, e)))?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(too_big());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// "HTTP 400: invalid_grant (description)", leaving out anything that repeats a secret we sent.
fn describe_refusal(
    status: reqwest::StatusCode,
    answer: Option<&Value>,
    secrets: &[&str],
) -> String {
    let mut reason = format!("the token endpoint answered HTTP {}", status.as_u16());
    let field = |key: &str| {
        answer
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
            .map(|s| s.chars().take(200).collect::<String>())
            .filter(|s| {
                !s.is_empty()
                    && !secrets
                        .iter()
                        .any(|secret| !secret.is_empty() && s.contains(secret))
            })
    };
    if let Some(code) = field("error") {
        reason.push_str(": ");
        reason.push_str(&code);
    }
    if let Some(description) = field("error_description") {
        reason.push_str(&format!(" ({description})"));
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_must_be_https_or_loopback() {
        assert!(checked_endpoint("https://id.example.com/oauth2/token").is_ok());
        assert!(checked_endpoint("http://127.0.0.1:9/t").is_ok());
        assert!(checked_endpoint("http://localhost/t").is_ok());
        assert!(checked_endpoint("http://[::1]:8080/t").is_ok());
        assert!(checked_endpoint("http://example.com/t").is_err());
        assert!(checked_endpoint("http://127.0.0.2/t").is_err());
        assert!(checked_endpoint("ftp://localhost/t").is_err());
        assert!(checked_endpoint("not a url").is_err());
    }

    #[test]
    fn refusal_never_repeats_a_sent_secret() {
        let answer = serde_json::json!({"error": "invalid_grant", "error_description": "token rt-123 reused"});
        let reason = describe_refusal(reqwest::StatusCode::BAD_REQUEST, Some(&answer), &["rt-123"]);
        assert_eq!(
            reason,
            "the token endpoint answered HTTP 400: invalid_grant"
        );
    }

    #[test]
    fn display_url_drops_userinfo_and_query() {
        let url = Url::parse("https://u:p@id.example.com/token?x=1#f").unwrap();
        assert_eq!(display_url(&url), "https://id.example.com/token");
    }
}
