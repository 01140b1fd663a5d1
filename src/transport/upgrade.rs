//! Hand-made HTTP/1.1 Upgrade (E31 `/shell`, E33 `/tunnel/{port}`) and the TCP/TLS dialer the
//! WebSocket route shares.
//!
//! reqwest cannot hand over the raw connection of a `POST` that answers `101`, so the request
//! is written by hand on a fresh TCP connection (or TLS with ALPN forced to `http/1.1`, since
//! Upgrade does not exist in HTTP/2):
//!
//! ```text
//! POST /v1/sandboxes/{id}/shell HTTP/1.1
//! Host: <api host>
//! X-Api-Key: <key>              (or X-Access-Token)
//! Connection: Upgrade
//! Upgrade: tcp-tunnel
//! Content-Length: 0
//! ```
//!
//! The answer's head is read up to 16 KiB. `101` turns the connection into an [`Upgraded`]
//! byte pipe; bytes that arrived after the head already belong to it and are read first. Any
//! other status becomes the typed error of the crate (body read capped at 4 KiB). A refusal
//! with 429/503, or a connection that could not be opened, is retried per the client's retry
//! policy; a 401 on an OAuth session refreshes the token once.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use url::{Host, Url};

use super::{jsend, Call, Transport};
use crate::error::{Error, Result};

/// The `Upgrade` token of the shell and tunnel routes.
pub const TCP_TUNNEL: &str = "tcp-tunnel";
/// Largest accepted answer head.
pub const MAX_RESPONSE_HEAD: usize = 16 * 1024;
/// Largest part of a refusal's body that is read for the error.
pub const MAX_REFUSAL_BODY: usize = 4 * 1024;
/// How long a refusal's body may take to arrive when its length is not declared.
const REFUSAL_BODY_WAIT: Duration = Duration::from_secs(2);

/// A plain or TLS connection to the control plane.
pub(crate) enum Conn {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Plain(s) => s.is_write_vectored(),
            Conn::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    /// Half-close: TLS sends `close_notify`, then the TCP write side is shut down.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

fn io_failure(label: &str, err: io::Error) -> Error {
    Error::Connection {
        endpoint: label.to_string(),
        source: super::tls::explain(Box::new(err)),
    }
}

/// Open a TCP (http) or TLS (https) connection to the host of `url`.
pub(crate) async fn dial(
    url: &Url,
    tls: &Arc<rustls::ClientConfig>,
    connect_timeout: Duration,
    label: &str,
) -> Result<Conn> {
    let port = url
        .port_or_known_default()
        .ok_or_else(|| Error::invalid("base_url", format!("{} has no port", url.scheme())))?;
    let host = url
        .host()
        .ok_or_else(|| Error::invalid("base_url", "has no host"))?;
    let connect = async {
        match &host {
            Host::Domain(d) => TcpStream::connect((*d, port)).await,
            Host::Ipv4(ip) => TcpStream::connect((*ip, port)).await,
            Host::Ipv6(ip) => TcpStream::connect((*ip, port)).await,
        }
    };
    let tcp = tokio::time::timeout(connect_timeout, connect)
        .await
        .map_err(|_| Error::Timeout {
            endpoint: label.to_string(),
            after: connect_timeout,
        })?
        .map_err(|e| io_failure(label, e))?;
    // Interactive traffic: keystrokes must not wait for Nagle.
    let _ = tcp.set_nodelay(true);
    match url.scheme() {
        "http" | "ws" => Ok(Conn::Plain(tcp)),
        "https" | "wss" => {
            let name = match host {
                Host::Domain(d) => {
                    rustls::pki_types::ServerName::try_from(d.to_string()).map_err(|e| {
                        Error::invalid("base_url", format!("{d:?} is not a TLS server name: {e}"))
                    })?
                }
                Host::Ipv4(ip) => {
                    rustls::pki_types::ServerName::IpAddress(std::net::IpAddr::V4(ip).into())
                }
                Host::Ipv6(ip) => {
                    rustls::pki_types::ServerName::IpAddress(std::net::IpAddr::V6(ip).into())
                }
            };
            let connector = tokio_rustls::TlsConnector::from(Arc::clone(tls));
            let tls = tokio::time::timeout(connect_timeout, connector.connect(name, tcp))
                .await
                .map_err(|_| Error::Timeout {
                    endpoint: label.to_string(),
                    after: connect_timeout,
                })?
                .map_err(|e| io_failure(label, e))?;
            Ok(Conn::Tls(Box::new(tls)))
        }
        other => Err(Error::invalid(
            "base_url",
            format!("scheme {other:?} cannot carry an upgrade (http or https)"),
        )),
    }
}

/// A failed upgrade attempt and whether anything reached the server.
pub(crate) struct Failure {
    pub(crate) error: Error,
    /// The connection could not be opened: nothing was sent, so trying again is always safe.
    pub(crate) before_send: bool,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure {
            error,
            before_send: false,
        }
    }
}

/// Run `attempt` (given the credential header) with the client's retry policy for upgrades:
/// retried when nothing was sent or the server refused with 429/503 (it did not act); a 401
/// on a refreshable session is retried once with the new token.
pub(crate) async fn with_retries<T, F, Fut>(
    transport: &Transport,
    needs_auth: bool,
    mut attempt: F,
) -> Result<T>
where
    F: FnMut(Option<(HeaderName, HeaderValue)>) -> Fut,
    Fut: Future<Output = std::result::Result<T, Failure>>,
{
    let mut retries = 0u32;
    let mut refreshed = false;
    loop {
        let auth = transport.auth_header(needs_auth).await?;
        let sent_credential = auth.as_ref().map(|(_, v)| v.clone());
        let failure = match attempt(auth).await {
            Ok(value) => return Ok(value),
            Err(failure) => failure,
        };
        if let (Error::Auth(_), false) = (&failure.error, refreshed) {
            let renewed = match (&transport.credentials, &sent_credential) {
                (Some(c), Some(sent)) => {
                    c.refresh_after_unauthorized(&transport.http, sent).await?
                }
                _ => false,
            };
            if !renewed {
                return Err(failure.error);
            }
            refreshed = true;
            continue;
        }
        let retryable =
            failure.before_send || matches!(failure.error.status(), Some(429) | Some(503));
        if !retryable || retries >= transport.retry.max_retries {
            return Err(failure.error);
        }
        let delay = match failure.error.api().and_then(|a| a.retry_after) {
            Some(wait) if wait > transport.retry.max_retry_after => return Err(failure.error),
            Some(wait) => wait,
            None => transport.retry.backoff(retries),
        };
        tracing::debug!(error = %failure.error, ?delay, "retrying an upgrade");
        tokio::time::sleep(delay).await;
        retries += 1;
    }
}

/// Send `call` as an HTTP/1.1 Upgrade to `protocol` and return the switched connection.
pub(crate) async fn upgrade(
    transport: &Transport,
    call: Call,
    protocol: &'static str,
) -> Result<Upgraded> {
    let label = call.endpoint.label();
    let path = call.path()?;
    let url = transport.url(&path, &call.query)?;
    let head_timeout = call.timeout.unwrap_or(transport.timeouts.request);
    let method = call.endpoint.method.as_str();
    let user_agent = transport.user_agent.clone();
    with_retries(transport, call.endpoint.auth, |auth| {
        let (url, label, user_agent) = (&url, &label, &user_agent);
        async move {
            let mut conn = dial(
                url,
                &transport.upgrade_tls,
                transport.timeouts.connect,
                label,
            )
            .await
            .map_err(|error| Failure {
                error,
                before_send: true,
            })?;
            let head = request_head(method, url, auth.as_ref(), user_agent, protocol);
            let exchange = async {
                conn.write_all(&head)
                    .await
                    .map_err(|e| io_failure(label, e))?;
                conn.flush().await.map_err(|e| io_failure(label, e))?;
                read_answer(conn, label).await
            };
            let answer = match head_timeout {
                Some(limit) => {
                    tokio::time::timeout(limit, exchange)
                        .await
                        .map_err(|_| Error::Timeout {
                            endpoint: label.clone(),
                            after: limit,
                        })?
                }
                None => exchange.await,
            };
            answer.map_err(Failure::from)
        }
    })
    .await
    .map_err(|e| e.at_path(&path))
}

/// The request head, credential included (never logged).
fn request_head(
    method: &str,
    url: &Url,
    auth: Option<&(HeaderName, HeaderValue)>,
    user_agent: &HeaderValue,
    protocol: &str,
) -> Vec<u8> {
    let mut target = url.path().to_string();
    if let Some(q) = url.query() {
        target.push('?');
        target.push_str(q);
    }
    let host = match url.port() {
        Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_string(),
    };
    let mut head = Vec::with_capacity(256);
    head.extend_from_slice(format!("{method} {target} HTTP/1.1\r\nHost: {host}\r\n").as_bytes());
    head.extend_from_slice(b"User-Agent: ");
    head.extend_from_slice(user_agent.as_bytes());
    head.extend_from_slice(b"\r\n");
    if let Some((name, value)) = auth {
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(
        format!("Connection: Upgrade\r\nUpgrade: {protocol}\r\nContent-Length: 0\r\n\r\n")
            .as_bytes(),
    );
    head
}

/// Offset just past the blank line ending a head (`\r\n\r\n`, or a bare `\n\n`).
fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|p| p + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Status and headers of an answer head.
fn parse_head(head: &[u8]) -> std::result::Result<(u16, HeaderMap), String> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split('\n').map(|l| l.trim_end_matches('\r'));
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(format!(
            "not an HTTP/1.x answer: {:?}",
            status_line.chars().take(64).collect::<String>()
        ));
    }
    let status = parts
        .next()
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|s| (100..1000).contains(s))
        .ok_or_else(|| {
            format!(
                "bad status line {:?}",
                status_line.chars().take(64).collect::<String>()
            )
        })?;
    let mut headers = HeaderMap::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.trim().as_bytes()),
            HeaderValue::from_str(value.trim()),
        ) {
            headers.append(n, v);
        }
    }
    Ok((status, headers))
}

/// Read the answer: `101` → the upgraded connection; anything else → the typed error.
async fn read_answer(mut conn: Conn, label: &str) -> Result<Upgraded> {
    let mut buf = BytesMut::with_capacity(4096);
    loop {
        let end = loop {
            if let Some(end) = head_end(&buf[..buf.len().min(MAX_RESPONSE_HEAD)]) {
                break end;
            }
            if buf.len() >= MAX_RESPONSE_HEAD {
                return Err(Error::decode(
                    label,
                    format!("the upgrade answer's head is larger than {MAX_RESPONSE_HEAD} bytes"),
                ));
            }
            if conn
                .read_buf(&mut buf)
                .await
                .map_err(|e| io_failure(label, e))?
                == 0
            {
                return Err(io_failure(
                    label,
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed before the upgrade was answered",
                    ),
                ));
            }
        };
        let head = buf.split_to(end);
        let (status, headers) = parse_head(&head).map_err(|m| Error::decode(label, m))?;
        match status {
            101 => {
                return Ok(Upgraded {
                    conn,
                    prefix: buf.freeze(),
                })
            }
            // Interim answers (100 Continue, 103 Early Hints) precede the real one.
            100..=199 => continue,
            _ => {
                let body = refusal_body(&mut conn, buf, &headers).await;
                return Err(jsend::error_from_answer(label, status, &headers, &body));
            }
        }
    }
}

/// Up to [`MAX_REFUSAL_BODY`] bytes of a refusal's body (`Content-Length`, chunked, or until
/// EOF), never waiting long: the error matters more than its text.
async fn refusal_body(conn: &mut Conn, mut buf: BytesMut, headers: &HeaderMap) -> Vec<u8> {
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    let chunked = headers
        .get(http::header::TRANSFER_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let want = declared
        .unwrap_or(usize::MAX)
        .min(MAX_REFUSAL_BODY + if chunked { 64 } else { 0 });
    let read_more = async {
        while buf.len() < want {
            if chunked && buf.windows(5).any(|w| w == b"0\r\n\r\n") {
                break;
            }
            match conn.read_buf(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    };
    let _ = tokio::time::timeout(REFUSAL_BODY_WAIT, read_more).await;
    let raw = &buf[..buf.len().min(want)];
    let mut body = if chunked { dechunk(raw) } else { raw.to_vec() };
    body.truncate(MAX_REFUSAL_BODY);
    body
}

/// Decode as much of a chunked body as is present.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line_end) = raw.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&raw[..line_end]);
        let Ok(size) = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
        else {
            break;
        };
        if size == 0 {
            break;
        }
        let start = line_end + 2;
        let end = (start + size).min(raw.len());
        out.extend_from_slice(&raw[start..end]);
        if end < start + size || end + 2 > raw.len() {
            break;
        }
        raw = &raw[end + 2..];
    }
    out
}

/// An upgraded connection: a raw byte pipe to the shell or the tunnelled port.
///
/// Reads return first any bytes that arrived together with the `101` head. Shutting down the
/// write side half-closes the connection (the other direction keeps flowing).
pub struct Upgraded {
    conn: Conn,
    prefix: Bytes,
}

impl std::fmt::Debug for Upgraded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upgraded")
            .field("tls", &self.is_tls())
            .field("buffered", &self.prefix.len())
            .finish()
    }
}

/// The read half of an [`Upgraded`] connection as a stream of byte chunks.
pub type UpgradedOutput = tokio_util::io::ReaderStream<ReadHalf<Upgraded>>;

impl Upgraded {
    /// Whether the connection is TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self.conn, Conn::Tls(_))
    }

    /// Separate read and write halves (usable from different tasks).
    pub fn split(self) -> (ReadHalf<Upgraded>, WriteHalf<Upgraded>) {
        tokio::io::split(self)
    }

    /// The read half as a `Stream` of byte chunks and the write half as an `AsyncWrite`, the
    /// way bollard hands out attached containers (`output`, `input`).
    pub fn into_output_and_input(self) -> (UpgradedOutput, WriteHalf<Upgraded>) {
        let (read, write) = self.split();
        (
            tokio_util::io::ReaderStream::with_capacity(read, 32 * 1024),
            write,
        )
    }
}

impl AsyncRead for Upgraded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix[..n]);
            this.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.conn).poll_read(cx, buf)
    }
}

impl AsyncWrite for Upgraded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().conn).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().conn).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.conn.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_terminators() {
        assert_eq!(head_end(b"HTTP/1.1 101 OK\r\nA: b\r\n\r\nrest"), Some(25));
        assert_eq!(head_end(b"HTTP/1.1 101 OK\n\nrest"), Some(17));
        assert_eq!(head_end(b"HTTP/1.1 101 OK\r\nA: b\r\n"), None);
    }

    #[test]
    fn heads_parse() {
        let (status, headers) =
            parse_head(b"HTTP/1.1 404 Not Found\r\nX-Request-Id: r1\r\nContent-Length: 10\r\n\r\n")
                .unwrap();
        assert_eq!(status, 404);
        assert_eq!(headers["x-request-id"], "r1");
        assert!(parse_head(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 abc\r\n\r\n").is_err());
    }

    #[test]
    fn chunked_bodies() {
        assert_eq!(
            dechunk(b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            b"hello world"
        );
        assert_eq!(dechunk(b"5\r\nhel"), b"hel");
    }

    #[test]
    fn request_head_shape() {
        let url = Url::parse("http://127.0.0.1:8080/v1/sandboxes/sb-1/tunnel/22").unwrap();
        let auth = (
            HeaderName::from_static("x-api-key"),
            HeaderValue::from_static("k"),
        );
        let head = request_head(
            "POST",
            &url,
            Some(&auth),
            &HeaderValue::from_static("ua"),
            TCP_TUNNEL,
        );
        let text = String::from_utf8(head).unwrap();
        assert!(text
            .starts_with("POST /v1/sandboxes/sb-1/tunnel/22 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"));
        assert!(text.contains("x-api-key: k\r\n"));
        assert!(text
            .ends_with("Connection: Upgrade\r\nUpgrade: tcp-tunnel\r\nContent-Length: 0\r\n\r\n"));
    }

    #[tokio::test]
    async fn upgrade_keeps_early_bytes_and_maps_refusals() {
        use tokio::net::TcpListener;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            // First connection: 101 with stream bytes in the same packet as the head.
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 1024];
            let n = s.read(&mut buf).await.unwrap();
            assert!(String::from_utf8_lossy(&buf[..n]).contains("Upgrade: tcp-tunnel"));
            s.write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: tcp-tunnel\r\n\r\nearly")
                .await
                .unwrap();
            let n = s.read(&mut buf).await.unwrap();
            s.write_all(&buf[..n]).await.unwrap();
            // Second connection: a JSend refusal.
            let (mut s, _) = listener.accept().await.unwrap();
            let _ = s.read(&mut buf).await.unwrap();
            let body = br#"{"status":"fail","data":{"sandbox":"sandbox is not running"}}"#;
            let head = format!(
                "HTTP/1.1 409 Conflict\r\nContent-Length: {}\r\nX-Request-Id: q1\r\n\r\n",
                body.len()
            );
            s.write_all(head.as_bytes()).await.unwrap();
            s.write_all(body).await.unwrap();
        });
        let client = crate::Client::builder()
            .base_url(format!("http://{addr}"))
            .api_key("k")
            .env(|_| None)
            .build()
            .unwrap();
        let call = || Call::new(&crate::api::endpoints::OPEN_SHELL).param("sb-1");
        let mut up = upgrade(&client.transport, call(), TCP_TUNNEL)
            .await
            .unwrap();
        let mut early = [0u8; 5];
        up.read_exact(&mut early).await.unwrap();
        assert_eq!(&early, b"early");
        up.write_all(b"echo").await.unwrap();
        let mut echoed = [0u8; 4];
        up.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"echo");
        let err = upgrade(&client.transport, call(), TCP_TUNNEL)
            .await
            .unwrap_err();
        let Error::Conflict(api) = &err else {
            panic!("{err:?}")
        };
        assert_eq!(api.fields["sandbox"], "sandbox is not running");
        assert_eq!(api.request_id.as_deref(), Some("q1"));
        server.await.unwrap();
    }
}
