//! HTTP/1.1 accept loop. Each connection gets a [`ConnectionKill`] in its requests'
//! extensions so a `reset` fault can drop the TCP connection without answering.

use std::convert::Infallible;

use axum::body::Body;
use axum::Router;
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

/// Serves `router` on `listener` until `shutdown` is cancelled.
pub async fn serve(listener: TcpListener, router: Router, shutdown: CancellationToken) {
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
        tokio::spawn(async move {
            let kill = CancellationToken::new();
            let kill_for_requests = kill.clone();
            let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
                req.extensions_mut().insert(ConnectionKill(kill_for_requests.clone()));
                let router = router.clone();
                async move { Ok::<_, Infallible>(router.oneshot(req.map(Body::new)).await.unwrap_or_else(|e| match e {})) }
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
        });
    }
}
