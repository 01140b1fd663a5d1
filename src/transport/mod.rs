//! Sending requests: credentials, JSend decoding, typed errors, retries with backoff and
//! `Retry-After`, per-attempt timeouts, and pagination.
//!
//! Cancellation is by dropping the future: nothing here spawns work that outlives it.

pub mod call;
pub mod endpoints;
pub mod jsend;
pub mod pagination;
pub(crate) mod retry;
pub mod tls;
pub mod upgrade;

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use serde::de::DeserializeOwned;
use url::Url;

use crate::auth::Credentials;
use crate::config::{RetryPolicy, Timeouts};
use crate::error::{Error, Result};

pub use call::{Call, CallBody};
use retry::Verdict;

/// Cap on how much of an error answer is read.
const MAX_ERROR_BODY: usize = 4 << 20;

/// A decoded success answer with its status and headers.
#[derive(Debug)]
pub struct Answer<T> {
    /// HTTP status (e.g. 202 for an accepted pause).
    pub status: StatusCode,
    /// Response headers (e.g. `X-Poll-After`).
    pub headers: HeaderMap,
    /// The `data` of the envelope.
    pub data: T,
}

/// The shared sending machinery behind a [`crate::Client`].
pub struct Transport {
    pub(crate) http: reqwest::Client,
    pub(crate) base: Url,
    pub(crate) credentials: Option<Credentials>,
    pub(crate) retry: RetryPolicy,
    pub(crate) timeouts: Timeouts,
    pub(crate) user_agent: HeaderValue,
    /// TLS of the HTTP/1.1 upgrades (shell, tunnel): the same roots as `http`.
    pub(crate) upgrade_tls: std::sync::Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("base", &self.base.as_str())
            .field("credentials", &self.credentials)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// The full URL of a path (the base may carry a path prefix).
    pub(crate) fn url(&self, path: &str, query: &[(&'static str, String)]) -> Result<Url> {
        let mut url = self.base.clone();
        let prefix = url.path().trim_end_matches('/').to_string();
        url.set_path(&format!("{prefix}{path}"));
        if !query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        Ok(url)
    }

    /// Header carrying the credential for `call`, if the route needs one.
    pub(crate) async fn auth_header(
        &self,
        auth: bool,
    ) -> Result<Option<(http::HeaderName, HeaderValue)>> {
        if !auth {
            return Ok(None);
        }
        match &self.credentials {
            Some(c) => Ok(Some(c.header(&self.http).await?)),
            None => Err(Error::NotSignedIn(
                "no credentials: run `createos login` or set CREATEOS_API_KEY".to_string(),
            )),
        }
    }

    /// Send `call` and decode the JSend `data`.
    pub async fn json<T: DeserializeOwned>(&self, call: Call) -> Result<T> {
        Ok(self.json_answer(call).await?.data)
    }

    /// Send `call` and decode the JSend `data`, keeping status and headers.
    pub async fn json_answer<T: DeserializeOwned>(&self, call: Call) -> Result<Answer<T>> {
        let label = call.endpoint.label();
        self.execute(call, |resp| {
            let label = label.clone();
            async move {
                let status = resp.status();
                let headers = resp.headers().clone();
                let body = resp
                    .bytes()
                    .await
                    .map_err(|e| connection_error(&label, e))?;
                let data = jsend::decode_success(&label, status.as_u16(), &body)?;
                Ok(Answer {
                    status,
                    headers,
                    data,
                })
            }
        })
        .await
    }

    /// Send `call` and read the whole raw body (non-JSend success answers: text logs, PNG).
    pub async fn bytes(&self, call: Call) -> Result<(HeaderMap, Bytes)> {
        let label = call.endpoint.label();
        self.execute(call, |resp| {
            let label = label.clone();
            async move {
                let headers = resp.headers().clone();
                let body = resp
                    .bytes()
                    .await
                    .map_err(|e| connection_error(&label, e))?;
                Ok((headers, body))
            }
        })
        .await
    }

    /// Send `call` and hand back the success response unread (downloads, NDJSON streams).
    /// The timeout covers the wait for the headers.
    pub async fn response(&self, call: Call) -> Result<reqwest::Response> {
        self.execute(call.streaming(), |resp| async move { Ok(resp) })
            .await
    }

    /// The retry loop. `read` turns a success response into the result; a connection failure while
    /// reading counts as a failed attempt like any other.
    async fn execute<T, F, Fut>(&self, call: Call, read: F) -> Result<T>
    where
        F: Fn(reqwest::Response) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let label = call.endpoint.label();
        let path = call.path()?;
        let url = self.url(&path, &call.query)?;
        let timeout = call.timeout.unwrap_or(self.timeouts.request);
        let mut attempt: u32 = 0;
        let mut refreshed = false;
        loop {
            let replayable = call.body.replayable();
            let auth = self.auth_header(call.endpoint.auth).await?;
            let sent_credential = auth.as_ref().map(|(_, v)| v.clone());
            let request = self.build(&call, url.clone(), auth)?;
            let outcome = self
                .attempt(&label, request, timeout, &read, call.streaming)
                .await;
            let verdict = retry::judge(&outcome, call.endpoint, replayable, attempt, &self.retry);
            match (outcome, verdict) {
                (Ok(value), _) => return Ok(value),
                (Err(Error::Auth(api)), _) if !refreshed && replayable => {
                    // One transparent refresh for OAuth sessions, as the CLI does.
                    let retry_with_new = match (&self.credentials, &sent_credential) {
                        (Some(c), Some(sent)) => {
                            c.refresh_after_unauthorized(&self.http, sent).await?
                        }
                        _ => false,
                    };
                    if !retry_with_new {
                        return Err(Error::Auth(api).at_path(&path));
                    }
                    refreshed = true;
                }
                (Err(err), Verdict::Retry(delay)) => {
                    tracing::debug!(endpoint = %label, attempt, ?delay, error = %err, "retrying");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                (Err(err), Verdict::GiveUp) => return Err(err.at_path(&path)),
            }
        }
    }

    async fn attempt<T, F, Fut>(
        &self,
        label: &str,
        request: reqwest::Request,
        timeout: Option<Duration>,
        read: &F,
        streaming: bool,
    ) -> Result<T>
    where
        F: Fn(reqwest::Response) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let work = async {
            let resp = self
                .http
                .execute(request)
                .await
                .map_err(|e| connection_error(label, e))?;
            let status = resp.status();
            if status.is_redirection() {
                return Err(Error::decode(
                    label,
                    format!("HTTP {status}: redirects to another origin are not followed (credentials stay with the base URL)"),
                ));
            }
            if !status.is_success() {
                let headers = resp.headers().clone();
                let body = read_capped(resp, MAX_ERROR_BODY).await;
                return Err(jsend::error_from_answer(
                    label,
                    status.as_u16(),
                    &headers,
                    &body,
                ));
            }
            Ok(resp)
        };
        match timeout {
            Some(limit) => {
                let resp =
                    tokio::time::timeout(limit, work)
                        .await
                        .map_err(|_| Error::Timeout {
                            endpoint: label.to_string(),
                            after: limit,
                        })??;
                if streaming {
                    return read(resp).await;
                }
                // The budget covers reading the body too, but restarts nothing: one deadline.
                tokio::time::timeout(limit, read(resp))
                    .await
                    .map_err(|_| Error::Timeout {
                        endpoint: label.to_string(),
                        after: limit,
                    })?
            }
            None => read(work.await?).await,
        }
    }

    fn build(
        &self,
        call: &Call,
        url: Url,
        auth: Option<(http::HeaderName, HeaderValue)>,
    ) -> Result<reqwest::Request> {
        let method: Method = call.endpoint.method.clone();
        let mut req = reqwest::Request::new(method.clone(), url);
        let headers = req.headers_mut();
        headers.insert(header::USER_AGENT, self.user_agent.clone());
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static(call.accept.unwrap_or("application/json")),
        );
        if let Some((name, value)) = auth {
            headers.insert(name, value);
        }
        match &call.body {
            CallBody::Empty => {
                if method == Method::POST || method == Method::PUT || method == Method::PATCH {
                    headers.insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    );
                    headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
                    *req.body_mut() = Some(reqwest::Body::from(Bytes::new()));
                }
            }
            CallBody::Json(bytes) => {
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                *req.body_mut() = Some(reqwest::Body::from(bytes.clone()));
            }
            CallBody::Bytes {
                bytes,
                content_type,
            } => {
                headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
                *req.body_mut() = Some(reqwest::Body::from(bytes.clone()));
            }
            CallBody::Stream { .. } => {
                // Streams are moved out by `take_stream` just before sending.
            }
        }
        Ok(req)
    }

    /// Send a call whose body is a one-shot stream. Never retried (the body cannot be replayed),
    /// but an OAuth session is refreshed up front so a stale token cannot waste the stream.
    pub async fn send_stream(&self, mut call: Call) -> Result<reqwest::Response> {
        let label = call.endpoint.label();
        let path = call.path()?;
        let url = self.url(&path, &call.query)?;
        let timeout = call.timeout.unwrap_or(self.timeouts.request);
        let auth = self.auth_header(call.endpoint.auth).await?;
        let mut request = self.build(&call, url, auth)?;
        if let CallBody::Stream {
            body,
            length,
            content_type,
        } = std::mem::replace(&mut call.body, CallBody::Empty)
        {
            let headers = request.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            if let Some(len) = length {
                headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            }
            *request.body_mut() = Some(body);
        }
        // An upload may legitimately take longer than the per-request budget; the caller bounds it.
        let _ = timeout;
        self.attempt(&label, request, None, &|resp| async move { Ok(resp) }, true)
            .await
            .map_err(|e| e.at_path(&path))
    }
}

/// Map a reqwest failure to a typed error (never exposing the URL's query or headers).
pub(crate) fn connection_error(label: &str, err: reqwest::Error) -> Error {
    if err.is_timeout() {
        return Error::Timeout {
            endpoint: label.to_string(),
            after: Duration::ZERO,
        };
    }
    Error::Connection {
        endpoint: label.to_string(),
        source: tls::explain(Box::new(err.without_url())),
    }
}

/// Read at most `cap` bytes of a body; errors yield what was read so far.
async fn read_capped(resp: reqwest::Response, cap: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        let room = cap.saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() >= cap {
            break;
        }
    }
    out
}
