//! Request-level middlewares: request ids, stats + fault injection + the body-less POST
//! rule (`traffic`), and the response-body wrappers faults use.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::Frame;
use serde_json::json;

use crate::envelope::ApiError;
use crate::server::ConnectionKill;
use crate::state::AppState;

/// Adds `X-Request-Id` to every response.
pub async fn request_id(req: Request, next: Next) -> Response {
    let id = format!("req_{}", crate::ids::ulid().to_ascii_lowercase());
    let mut resp = next.run(req).await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().entry("x-request-id").or_insert(v);
    }
    resp
}

/// Stats, faults and the Content-Length rule, in that order, then the handler.
pub async fn traffic(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let method = req.method().as_str().to_string();
    let template = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_else(|| req.uri().path().to_string());
    let operation = crate::routes::operation_id(&method, &template);
    state.stats.request(&operation);

    let plan = state.faults.plan(&method, req.uri().path());
    for _ in 0..plan.fired {
        state.stats.fault_injected();
    }
    if !plan.delay.is_zero() {
        tokio::time::sleep(plan.delay).await;
    }
    if let Some((code, retry_after)) = plan.status {
        return fault_status(code, retry_after);
    }
    if plan.reset_before {
        if let Some(kill) = req.extensions().get::<ConnectionKill>() {
            kill.fire();
            // The connection task drops this future as soon as it sees the kill.
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        return aborting_response(Vec::new(), 1);
    }
    if req.method() == Method::POST
        && !req.headers().contains_key(header::CONTENT_LENGTH)
        && !req.headers().contains_key(header::TRANSFER_ENCODING)
    {
        return ApiError::fail(
            StatusCode::LENGTH_REQUIRED,
            json!({"body": "Content-Length is required"}),
        )
        .into_response();
    }

    state.stats.handled(&operation);
    let resp = next.run(req).await;
    if !plan.delay_after.is_zero() {
        tokio::time::sleep(plan.delay_after).await;
    }

    if plan.reset_after {
        let (parts, body) = resp.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .unwrap_or_default();
        let declared = bytes.len().max(1);
        let half = bytes[..bytes.len() / 2].to_vec();
        let mut cut = aborting_response(half, declared);
        *cut.status_mut() = parts.status;
        for (name, value) in parts.headers.iter() {
            if name != header::CONTENT_LENGTH && name != header::TRANSFER_ENCODING {
                cut.headers_mut().insert(name.clone(), value.clone());
            }
        }
        return cut;
    }
    if let Some(limit) = plan.cut {
        let (parts, body) = resp.into_parts();
        return Response::from_parts(parts, Body::new(CutBody::new(body, limit)));
    }
    resp
}

fn fault_status(code: u16, retry_after: Option<u64>) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let mut err = match code {
        503 => ApiError::unavailable(),
        429 => ApiError::fail(status, json!({"rate": "rate limited"})),
        c if c >= 500 => ApiError::error(
            status,
            status
                .canonical_reason()
                .unwrap_or("server error")
                .to_ascii_lowercase(),
        ),
        _ => ApiError::fail(
            status,
            json!({"fault": status.canonical_reason().unwrap_or("injected fault").to_ascii_lowercase()}),
        ),
    };
    let retry = retry_after.or(if code == 429 { Some(1) } else { None });
    if let Some(secs) = retry {
        err = err.with_header(header::RETRY_AFTER, &secs.to_string());
    }
    err.into_response()
}

/// A 200 whose body declares `declared` bytes, sends `sent`, then fails (hyper aborts
/// the connection, so the client sees a truncated body).
fn aborting_response(sent: Vec<u8>, declared: usize) -> Response {
    let limit = sent.len() as u64;
    let body = CutBody {
        inner: Body::from(sent),
        remaining: limit,
        grace: None,
        even_at_end: true,
    };
    let mut resp = Response::new(Body::new(body));
    if let Ok(v) = HeaderValue::from_str(&declared.to_string()) {
        resp.headers_mut().insert(header::CONTENT_LENGTH, v);
    }
    resp
}

/// How long a cut body waits, after its last piece, before failing. The failure makes
/// hyper drop the connection at once, discarding whatever it has not written yet; a body
/// that is Pending first lets hyper flush the truncated piece to the socket.
const CUT_FLUSH_GRACE: Duration = Duration::from_millis(20);

/// Passes `remaining` body bytes through, then fails the body (connection cut) once the
/// bytes already handed to hyper had time to reach the client.
struct CutBody {
    inner: Body,
    remaining: u64,
    /// Started when the limit is reached; the body fails when it fires.
    grace: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Fail even when the inner body ended exactly at the limit.
    even_at_end: bool,
}

impl CutBody {
    fn new(inner: Body, limit: u64) -> CutBody {
        CutBody {
            inner,
            remaining: limit,
            grace: None,
            even_at_end: false,
        }
    }
}

impl http_body::Body for CutBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if self.remaining == 0 {
            if !self.even_at_end && self.inner.is_end_stream() {
                return Poll::Ready(None);
            }
            let grace = self
                .grace
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(CUT_FLUSH_GRACE)));
            if grace.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            return Poll::Ready(Some(Err(axum::Error::new(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "fault: stream cut",
            )))));
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(mut data) => {
                    let take = (data.len() as u64).min(self.remaining);
                    self.remaining -= take;
                    if (take as usize) < data.len() {
                        data.truncate(take as usize);
                    }
                    Poll::Ready(Some(Ok(Frame::data(data))))
                }
                Err(frame) => Poll::Ready(Some(Ok(frame))),
            },
            other => other,
        }
    }
}
