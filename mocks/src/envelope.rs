//! JSend envelopes, the error type every handler returns, pagination, and a JSON
//! body extractor that applies the server's Content-Type and malformed-JSON rules.

use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// 200 `{"status":"success","data":…}`.
pub fn ok<T: Serialize>(data: T) -> Response {
    ok_with(StatusCode::OK, data)
}

/// `{"status":"success","data":…}` with another success status.
pub fn ok_with<T: Serialize>(status: StatusCode, data: T) -> Response {
    (status, Json(json!({"status": "success", "data": data}))).into_response()
}

/// Every handler error: a status, a JSend body and optional extra headers.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{status}: {body}")]
pub struct ApiError {
    pub status: StatusCode,
    pub body: Value,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl ApiError {
    /// `{"status":"fail","data":data}` (4xx).
    pub fn fail(status: StatusCode, data: Value) -> Self {
        ApiError {
            status,
            body: json!({"status": "fail", "data": data}),
            headers: Vec::new(),
        }
    }

    /// `{"status":"error","message":msg,"code":<status>}` (5xx).
    pub fn error(status: StatusCode, msg: impl Into<String>) -> Self {
        ApiError {
            status,
            body: json!({"status": "error", "message": msg.into(), "code": status.as_u16()}),
            headers: Vec::new(),
        }
    }

    /// 400 with a one-field map.
    pub fn validation(field: &str, msg: impl Into<String>) -> Self {
        Self::fail(StatusCode::BAD_REQUEST, field_map(field, msg))
    }

    /// 409 `{"sandbox": msg}`.
    pub fn conflict(msg: impl Into<String>) -> Self {
        Self::fail(StatusCode::CONFLICT, field_map("sandbox", msg))
    }

    /// 409 with an explicit field.
    pub fn conflict_on(field: &str, msg: impl Into<String>) -> Self {
        Self::fail(StatusCode::CONFLICT, field_map(field, msg))
    }

    /// 404 with `{field: msg}`.
    pub fn not_found(field: &str, msg: impl Into<String>) -> Self {
        Self::fail(StatusCode::NOT_FOUND, field_map(field, msg))
    }

    /// 404 `{"sandbox":"sandbox not found"}`.
    pub fn not_found_sandbox() -> Self {
        Self::not_found("sandbox", "sandbox not found")
    }

    /// 409 `{"sandbox":"sandbox is not running"}`.
    pub fn not_running() -> Self {
        Self::conflict("sandbox is not running")
    }

    /// 401 `{"auth": msg}`.
    pub fn unauthorized(msg: &str) -> Self {
        Self::fail(StatusCode::UNAUTHORIZED, field_map("auth", msg))
    }

    /// 403 for a delegated token on a management route.
    pub fn forbidden_delegated() -> Self {
        Self::fail(
            StatusCode::FORBIDDEN,
            json!({"auth": "access token not permitted on this route", "code": "FORBIDDEN"}),
        )
    }

    /// 402 no credit.
    pub fn payment_required() -> Self {
        Self::fail(
            StatusCode::PAYMENT_REQUIRED,
            json!({"credit": "insufficient credit", "code": "PAYMENT_REQUIRED"}),
        )
    }

    /// 500 with a message that never contains secrets.
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::error(StatusCode::INTERNAL_SERVER_ERROR, msg)
    }

    /// 503 "service unavailable".
    pub fn unavailable() -> Self {
        Self::error(StatusCode::SERVICE_UNAVAILABLE, "service unavailable")
    }

    /// Adds a response header.
    pub fn with_header(mut self, name: HeaderName, value: &str) -> Self {
        if let Ok(v) = HeaderValue::from_str(value) {
            self.headers.push((name, v));
        }
        self
    }
}

fn field_map(field: &str, msg: impl Into<String>) -> Value {
    let mut map = serde_json::Map::new();
    map.insert(field.to_string(), Value::String(msg.into()));
    Value::Object(map)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, Json(self.body)).into_response();
        for (name, value) in self.headers {
            resp.headers_mut().insert(name, value);
        }
        resp
    }
}

impl From<std::io::Error> for ApiError {
    fn from(err: std::io::Error) -> Self {
        ApiError::internal(format!("io error: {err}"))
    }
}

/// Default and maximum page sizes of every paginated list.
pub const DEFAULT_PAGE_LIMIT: usize = 50;
pub const MAX_PAGE_LIMIT: usize = 500;

/// `?limit=&offset=` kept as raw strings so garbage can be answered with a JSend 400.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct PageQuery {
    pub limit: Option<String>,
    pub offset: Option<String>,
}

impl PageQuery {
    /// The effective (limit, offset): default 50, clamped to 500; negative or non-numeric → 400.
    pub fn resolve(&self) -> Result<(usize, usize), ApiError> {
        let limit = match self.limit.as_deref().map(str::trim) {
            None | Some("") => DEFAULT_PAGE_LIMIT,
            Some(raw) => match raw.parse::<i64>() {
                Ok(n) if n < 0 => {
                    return Err(ApiError::validation("limit", "limit must not be negative"))
                }
                Ok(0) => DEFAULT_PAGE_LIMIT,
                Ok(n) => (n as u64).min(MAX_PAGE_LIMIT as u64) as usize,
                Err(_) => return Err(ApiError::validation("limit", "limit must be an integer")),
            },
        };
        let offset = match self.offset.as_deref().map(str::trim) {
            None | Some("") => 0,
            Some(raw) => match raw.parse::<i64>() {
                Ok(n) if n < 0 => {
                    return Err(ApiError::validation(
                        "offset",
                        "offset must not be negative",
                    ))
                }
                Ok(n) => n as usize,
                Err(_) => return Err(ApiError::validation("offset", "offset must be an integer")),
            },
        };
        Ok((limit, offset))
    }
}

/// The doubly nested paginated envelope:
/// `{"status":"success","data":{"data":[…],"pagination":{total,limit,offset,count}}}`.
pub fn paginate<T: Serialize>(items: Vec<T>, q: &PageQuery) -> Result<Response, ApiError> {
    let (limit, offset) = q.resolve()?;
    let total = items.len();
    let page: Vec<T> = items.into_iter().skip(offset).take(limit).collect();
    let count = page.len();
    Ok(ok(json!({
        "data": page,
        "pagination": {"total": total, "limit": limit, "offset": offset, "count": count},
    })))
}

/// JSON request body: 415 for a non-JSON Content-Type when a body is present, 400
/// `{"body":"invalid JSON: …"}` for malformed JSON; an empty body decodes as `{}` so
/// routes whose fields are all optional accept body-less calls.
pub struct JsonBody<T>(pub T);

fn is_json_content_type(value: &str) -> bool {
    let mime = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|e| {
                ApiError::validation("body", format!("could not read body: {}", e.body_text()))
            })?;
        let is_blank = bytes.iter().all(|b| b.is_ascii_whitespace());
        if !is_blank {
            if let Some(ct) = content_type.as_deref() {
                if !is_json_content_type(ct) {
                    return Err(ApiError::fail(
                        StatusCode::UNSUPPORTED_MEDIA_TYPE,
                        json!({"content_type": "expected application/json"}),
                    ));
                }
            }
        }
        let source: &[u8] = if is_blank { b"{}" } else { &bytes };
        serde_json::from_slice(source)
            .map(JsonBody)
            .map_err(|e| ApiError::validation("body", format!("invalid JSON: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_query_defaults_and_clamps() {
        let q = PageQuery::default();
        assert_eq!(q.resolve().unwrap(), (50, 0));
        let q = PageQuery {
            limit: Some("9000".into()),
            offset: Some("3".into()),
        };
        assert_eq!(q.resolve().unwrap(), (500, 3));
        let q = PageQuery {
            limit: Some("-1".into()),
            offset: None,
        };
        assert_eq!(q.resolve().unwrap_err().status, StatusCode::BAD_REQUEST);
        let q = PageQuery {
            limit: Some("abc".into()),
            offset: None,
        };
        assert!(q.resolve().is_err());
    }

    #[test]
    fn json_content_types() {
        assert!(is_json_content_type("application/json; charset=utf-8"));
        assert!(is_json_content_type("application/merge-patch+json"));
        assert!(!is_json_content_type("text/plain"));
    }
}
