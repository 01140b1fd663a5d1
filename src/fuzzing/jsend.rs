//! `jsend`: decoding success envelopes and turning error answers into typed errors.
//!
//! Input: `[status: u16][n][n header bytes][body…]`. The header bytes are split on `\n` into the
//! values of `Retry-After`, `X-Request-Id` and `X-Fc-Request-Id` (a value that is not a valid
//! header value is left out).

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::{show, Input, ENDPOINT};
use crate::error::Error;
use crate::transport::jsend::{decode_success, error_from_answer, request_id, retry_after};

const HEADERS: [&str; 3] = ["retry-after", "x-request-id", "x-fc-request-id"];

/// Check the `jsend` properties on one input (panics on a violation).
pub fn jsend(data: &[u8]) {
    let mut input = Input::new(data);
    let status = input.u16();
    let header_len = usize::from(input.byte());
    let header_bytes = input.bytes(header_len);
    let body = input.rest();
    let mut headers = HeaderMap::new();
    for (name, value) in HEADERS.iter().zip(header_bytes.split(|b| *b == b'\n')) {
        if let Ok(value) = HeaderValue::from_bytes(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    let context = || format!("HTTP {status}, headers {headers:?}, body {}", show(body));
    check_success(status, body, &context);
    check_error(status, &headers, body, &context);
}

/// `decode_success` accepts exactly a `success` envelope (its `data`, `null` when missing), or
/// a blank body on 204/205; everything else is an [`Error::Decode`] naming the endpoint.
fn check_success(status: u16, body: &[u8], context: &dyn Fn() -> String) {
    let blank = body.iter().all(u8::is_ascii_whitespace);
    let envelope: Option<Value> = if blank {
        None
    } else {
        serde_json::from_slice(body).ok()
    };
    let data = envelope
        .as_ref()
        .filter(|e| e.get("status").and_then(Value::as_str) == Some("success"))
        .map(|e| e.get("data").cloned().unwrap_or(Value::Null));
    let empty_ok = blank && (status == 204 || status == 205);

    let expected = if empty_ok {
        Some(Value::Null)
    } else {
        data.clone()
    };
    match decode_success::<Value>(ENDPOINT, status, body) {
        Ok(value) => assert_eq!(
            Some(value),
            expected,
            "decode_success accepted a non-success answer ({})",
            context()
        ),
        Err(e) => {
            assert_eq!(
                expected,
                None,
                "decode_success refused a success envelope: {e} ({})",
                context()
            );
            assert_decode_error(&e, context);
        }
    }

    // A typed target: `()` takes only `null`.
    let unit_ok = empty_ok || data == Some(Value::Null);
    match decode_success::<()>(ENDPOINT, status, body) {
        Ok(()) => assert!(
            unit_ok,
            "decode_success::<()> accepted non-null data ({})",
            context()
        ),
        Err(e) => {
            assert!(
                !unit_ok,
                "decode_success::<()> refused null data: {e} ({})",
                context()
            );
            assert_decode_error(&e, context);
        }
    }
}

fn assert_decode_error(error: &Error, context: &dyn Fn() -> String) {
    match error {
        Error::Decode { endpoint, .. } => assert_eq!(endpoint, ENDPOINT, "({})", context()),
        other => panic!("expected a decode error, got {other:?} ({})", context()),
    }
}

/// The error variant for a status, as `Error` documents it.
fn class_of(status: u16) -> &'static str {
    match status {
        401 => "Auth",
        402 => "PaymentRequired",
        403 => "Permission",
        404 => "NotFound",
        409 => "Conflict",
        400 | 422 => "Validation",
        429 => "RateLimited",
        500..=599 => "Server",
        _ => "Api",
    }
}

fn class_name(error: &Error) -> &'static str {
    match error {
        Error::Auth(_) => "Auth",
        Error::PaymentRequired(_) => "PaymentRequired",
        Error::Permission(_) => "Permission",
        Error::NotFound(_) => "NotFound",
        Error::Conflict(_) => "Conflict",
        Error::Validation(_) => "Validation",
        Error::RateLimited { .. } => "RateLimited",
        Error::Server(_) => "Server",
        Error::Api(_) => "Api",
        _ => "not an HTTP error",
    }
}

/// `error_from_answer` always yields the variant of the status class, carrying the status,
/// endpoint, request id and `Retry-After` of the answer and a non-empty message; a JSend
/// envelope's message, code and fields come through.
fn check_error(status: u16, headers: &HeaderMap, body: &[u8], context: &dyn Fn() -> String) {
    let error = error_from_answer(ENDPOINT, status, headers, body);
    assert_eq!(
        class_name(&error),
        class_of(status),
        "wrong error variant {error:?} ({})",
        context()
    );
    assert_eq!(error.status(), Some(status), "({})", context());
    let api = error
        .api()
        .expect("an HTTP error variant carries its answer");
    assert_eq!(api.endpoint, ENDPOINT, "({})", context());
    assert!(
        !api.message.is_empty(),
        "empty error message ({})",
        context()
    );
    assert_eq!(api.request_id, request_id(headers), "({})", context());
    // An HTTP date is turned into a delay from "now", which moves between the two readings.
    let again = retry_after(headers);
    let close = match (api.retry_after, again) {
        (Some(a), Some(b)) => a.abs_diff(b) <= std::time::Duration::from_secs(5),
        (a, b) => a == b,
    };
    assert!(
        close,
        "Retry-After read as {:?}, expected {again:?} ({})",
        api.retry_after,
        context()
    );
    if let Error::RateLimited { retry_after, api } = &error {
        assert_eq!(*retry_after, api.retry_after, "({})", context());
    }
    let shown = error.to_string();
    assert!(
        shown.contains(ENDPOINT),
        "the message {shown:?} does not name the endpoint ({})",
        context()
    );
    let _ = format!("{error:?}");

    let Ok(Value::Object(envelope)) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    let Some(kind) = envelope.get("status") else {
        return;
    };
    if kind.as_str() == Some("error") {
        if let Some(message) = envelope
            .get("message")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
        {
            assert_eq!(
                api.message,
                message,
                "the envelope's message was lost ({})",
                context()
            );
        }
        let code = envelope.get("code").and_then(Value::as_str);
        assert_eq!(
            api.code.as_deref(),
            code,
            "the envelope's code was lost ({})",
            context()
        );
        return;
    }
    match envelope.get("data") {
        Some(Value::String(message)) if !message.is_empty() => {
            assert_eq!(
                &api.message,
                message,
                "the fail message was lost ({})",
                context()
            );
        }
        Some(Value::Object(fields)) => {
            let code = fields.get("code").and_then(Value::as_str);
            assert_eq!(
                api.code.as_deref(),
                code,
                "the fail code was lost ({})",
                context()
            );
            let expected = fields.keys().filter(|k| *k != "code").count();
            assert_eq!(
                api.fields.len(),
                expected,
                "fail fields were lost ({})",
                context()
            );
            for (key, value) in fields.iter().filter(|(k, _)| *k != "code") {
                let text = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                assert_eq!(
                    api.fields.get(key),
                    Some(&text),
                    "fail field {key:?} ({})",
                    context()
                );
            }
        }
        _ => {}
    }
}
