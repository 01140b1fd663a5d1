//! JSend envelopes: `{"status":"success","data":…}`, `{"status":"fail","data":…}` and
//! `{"status":"error","message":…,"code":…}`, and how an error answer becomes an [`ApiError`].

use std::collections::BTreeMap;
use std::time::Duration;

use http::HeaderMap;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{ApiError, Error, Result};

/// Decode the `data` of a success envelope.
pub fn decode_success<T: DeserializeOwned>(endpoint: &str, status: u16, body: &[u8]) -> Result<T> {
    if body.iter().all(u8::is_ascii_whitespace) {
        // Only 204/205 may be empty; anything else is a broken contract, not "no data".
        if status == 204 || status == 205 {
            return serde_json::from_value(Value::Null)
                .map_err(|e| Error::decode(endpoint, format!("empty {status} answer: {e}")));
        }
        return Err(Error::decode(
            endpoint,
            format!("empty body with HTTP {status}"),
        ));
    }
    let envelope: Value = serde_json::from_slice(body)
        .map_err(|e| Error::decode(endpoint, format!("answer is not JSON: {e}")))?;
    match envelope.get("status").and_then(Value::as_str) {
        Some("success") => {
            let data = envelope.get("data").cloned().unwrap_or(Value::Null);
            serde_json::from_value(data)
                .map_err(|e| Error::decode(endpoint, format!("unexpected data shape: {e}")))
        }
        Some(other) => Err(Error::decode(
            endpoint,
            format!("HTTP {status} carried a {other:?} envelope instead of success"),
        )),
        None => Err(Error::decode(endpoint, "answer is not a JSend envelope")),
    }
}

/// Build the typed error for a non-success answer. The body may be JSend, plain text or empty.
pub fn error_from_answer(endpoint: &str, status: u16, headers: &HeaderMap, body: &[u8]) -> Error {
    let mut api = ApiError {
        status,
        code: None,
        message: String::new(),
        fields: BTreeMap::new(),
        request_id: request_id(headers),
        endpoint: endpoint.to_string(),
        path: None,
        retry_after: retry_after(headers),
    };
    match serde_json::from_slice::<Value>(body) {
        Ok(envelope) if envelope.get("status").is_some() => fill_from_envelope(&mut api, &envelope),
        _ => {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            if !text.is_empty() && text.len() <= 512 && !text.starts_with('<') {
                api.message = text.to_string();
            }
        }
    }
    if api.message.is_empty() {
        api.message = default_message(status).to_string();
    }
    Error::from_api(api)
}

fn fill_from_envelope(api: &mut ApiError, envelope: &Value) {
    match envelope.get("status").and_then(Value::as_str) {
        Some("error") => {
            api.message = envelope
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if let Some(code) = envelope.get("code") {
                api.code = match code {
                    Value::String(s) => Some(s.clone()),
                    _ => None,
                };
            }
        }
        _ => match envelope.get("data") {
            Some(Value::String(s)) => api.message = s.clone(),
            Some(Value::Object(map)) => {
                for (key, value) in map {
                    if key == "code" {
                        if let Some(code) = value.as_str() {
                            api.code = Some(code.to_string());
                        }
                        continue;
                    }
                    let text = match value {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    api.fields.insert(key.clone(), text);
                }
                api.message = api
                    .fields
                    .iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join("; ");
            }
            _ => {}
        },
    }
}

fn default_message(status: u16) -> &'static str {
    match status {
        400 => "bad request",
        401 => "invalid or missing credentials",
        402 => "insufficient credit",
        403 => "forbidden",
        404 => "not found",
        408 => "request timed out",
        409 => "conflict with the resource's current state",
        411 => "Content-Length is required",
        415 => "unsupported content type",
        422 => "unprocessable request",
        429 => "rate limited",
        500..=599 => "server error",
        _ => "request failed",
    }
}

/// `X-Request-Id`, else `X-Fc-Request-Id`.
pub fn request_id(headers: &HeaderMap) -> Option<String> {
    ["x-request-id", "x-fc-request-id"].iter().find_map(|h| {
        headers
            .get(*h)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    })
}

/// `Retry-After` as delta-seconds or an HTTP date.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let raw = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = raw.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if let Ok(secs) = raw.parse::<f64>() {
        if secs.is_finite() && secs >= 0.0 {
            // try_: a huge value (e.g. `1e300`) must not panic the client.
            return Duration::try_from_secs_f64(secs).ok();
        }
    }
    let when = httpdate::parse_http_date(raw).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_data() {
        let v: serde_json::Value =
            decode_success("GET /x", 200, br#"{"status":"success","data":{"a":1}}"#).unwrap();
        assert_eq!(v["a"], 1);
    }

    #[test]
    fn empty_body_rules() {
        assert!(decode_success::<serde_json::Value>("GET /x", 200, b"").is_err());
        assert!(decode_success::<()>("GET /x", 204, b"").is_ok());
    }

    #[test]
    fn non_success_envelope_on_2xx_is_an_error() {
        let e = decode_success::<Value>("GET /x", 200, br#"{"status":"fail","data":null}"#)
            .unwrap_err();
        assert!(matches!(e, Error::Decode { .. }));
    }

    #[test]
    fn fail_field_map() {
        let mut h = HeaderMap::new();
        h.insert("x-request-id", "req-1".parse().unwrap());
        let e = error_from_answer(
            "POST /v1/sandboxes",
            400,
            &h,
            br#"{"status":"fail","data":{"shape":"unknown shape: s-bad","code":"BAD_SHAPE"}}"#,
        );
        let Error::Validation(api) = &e else {
            panic!("{e:?}")
        };
        assert_eq!(api.fields["shape"], "unknown shape: s-bad");
        assert_eq!(api.code.as_deref(), Some("BAD_SHAPE"));
        assert_eq!(api.request_id.as_deref(), Some("req-1"));
        assert_eq!(api.message, "shape: unknown shape: s-bad");
    }

    #[test]
    fn error_envelope_and_plain_text() {
        let h = HeaderMap::new();
        let e = error_from_answer(
            "GET /x",
            500,
            &h,
            br#"{"status":"error","message":"internal error","code":500}"#,
        );
        assert!(matches!(&e, Error::Server(a) if a.message == "internal error"));
        let e = error_from_answer("GET /x", 502, &h, b"bad gateway from proxy");
        assert!(matches!(&e, Error::Server(a) if a.message == "bad gateway from proxy"));
        let e = error_from_answer("GET /x", 402, &h, b"");
        assert!(matches!(&e, Error::PaymentRequired(a) if a.message == "insufficient credit"));
    }

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "3".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        let later = std::time::SystemTime::now() + Duration::from_secs(30);
        h.insert(
            "retry-after",
            httpdate::fmt_http_date(later).parse().unwrap(),
        );
        let d = retry_after(&h).unwrap();
        assert!(d <= Duration::from_secs(30) && d >= Duration::from_secs(28));
        let e = error_from_answer(
            "GET /x",
            429,
            &h,
            br#"{"status":"fail","data":{"rate":"rate limited"}}"#,
        );
        assert!(matches!(
            e,
            Error::RateLimited {
                retry_after: Some(_),
                ..
            }
        ));
    }
}
