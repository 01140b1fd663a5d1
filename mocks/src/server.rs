//! HTTP/1.1 accept loop. Each connection gets a [`ConnectionKill`] in its requests'
//! extensions so a `reset` fault can drop the TCP connection without answering.
//!
//! An answer given before the request body was read (a fault, an auth failure, a 404) ends the
//! connection with `Connection: close`, as Go's net/http does for large unread bodies: the
//! connection cannot carry another request, and a client must not pool it and send its next
//! request into a socket the server is about to close.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::header::{HeaderValue, CONNECTION};
use axum::http::StatusCode;
use axum::Router;
use bytes::Bytes;
use http_body::Frame;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// Drops the connection a request arrived on.
#[derive(Clone, Debug)]
pub struct ConnectionKill(CancellationToken);

impl ConnectionKill {
    pub fn fire(&self) {
        self.0.cancel();
    }
}

/// Serves `router` on `listener` until `shutdown` is cancelled (over TLS with `tls`).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    loop {
        let (stream, _peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(err) => {
                    tracing::warn!("accept failed: {err}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let shutdown = shutdown.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => serve_connection(stream, router, shutdown).await,
                Some(acceptor) => {
                    let handshake = tokio::time::timeout(
                        std::time::Duration::from_secs(10),
                        acceptor.accept(stream),
                    );
                    match handshake.await {
                        Ok(Ok(stream)) => serve_connection(stream, router, shutdown).await,
                        Ok(Err(err)) => tracing::debug!("TLS handshake failed: {err}"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                }
            }
        });
    }
}

/// Serves HTTP/1.1 (with upgrades) on one connection.
async fn serve_connection<S>(stream: S, router: Router, shutdown: CancellationToken)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let kill = CancellationToken::new();
    let kill_for_requests = kill.clone();
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut()
            .insert(ConnectionKill(kill_for_requests.clone()));
        let router = router.clone();
        async move {
            let read = Arc::new(AtomicBool::new(false));
            let req = req.map(|body| Body::new(TrackedBody::new(body, read.clone())));
            let mut resp = router.oneshot(req).await.unwrap_or_else(|e| match e {});
            if !read.load(Ordering::Acquire) && resp.status() != StatusCode::SWITCHING_PROTOCOLS {
                resp.headers_mut()
                    .insert(CONNECTION, HeaderValue::from_static("close"));
            }
            Ok::<_, Infallible>(resp)
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    tokio::select! {
        _ = conn => {}
        _ = kill.cancelled() => {}
        _ = shutdown.cancelled() => {}
    }
}

/// A request body that records when it has been read to the end.
struct TrackedBody {
    inner: Incoming,
    read: Arc<AtomicBool>,
}

impl TrackedBody {
    fn new(inner: Incoming, read: Arc<AtomicBool>) -> Self {
        if http_body::Body::is_end_stream(&inner) {
            read.store(true, Ordering::Release);
        }
        TrackedBody { inner, read }
    }
}

impl http_body::Body for TrackedBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.read.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
