//! NDJSON streaming responses and incremental UTF-8 decoding of process output.

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_stream_shim::ReceiverStream;

/// A 200 `application/x-ndjson` response whose lines are the values sent on the
/// returned channel; the response ends when every sender is dropped. Senders notice a
/// client that went away through `Sender::closed()` / failed sends.
pub fn channel_response(buffer: usize) -> (mpsc::Sender<Value>, Response) {
    let (tx, rx) = mpsc::channel::<Value>(buffer);
    let stream = ReceiverStream::new(rx).map(|value| {
        let mut line = serde_json::to_vec(&value).unwrap_or_else(|_| b"{}".to_vec());
        line.push(b'\n');
        Ok::<Bytes, std::io::Error>(Bytes::from(line))
    });
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    (tx, resp)
}

/// Minimal `Stream` over an mpsc receiver (avoids a dependency on tokio-stream).
mod tokio_stream_shim {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::sync::mpsc;

    pub struct ReceiverStream<T> {
        rx: mpsc::Receiver<T>,
    }

    impl<T> ReceiverStream<T> {
        pub fn new(rx: mpsc::Receiver<T>) -> Self {
            ReceiverStream { rx }
        }
    }

    impl<T> futures::Stream for ReceiverStream<T> {
        type Item = T;
        fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
            self.rx.poll_recv(cx)
        }
    }
}

/// Decodes a byte stream into UTF-8 text chunk by chunk: a multi-byte character split
/// across reads is kept until complete; invalid bytes become U+FFFD.
#[derive(Debug, Default)]
pub struct Utf8Carry {
    carry: Vec<u8>,
}

impl Utf8Carry {
    pub fn push(&mut self, bytes: &[u8]) -> String {
        let mut buf = std::mem::take(&mut self.carry);
        buf.extend_from_slice(bytes);
        let mut out = String::with_capacity(buf.len());
        let mut rest: &[u8] = &buf;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // SAFETY-free: the prefix was just validated.
                    out.push_str(std::str::from_utf8(&rest[..valid]).unwrap_or_default());
                    match e.error_len() {
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            rest = &rest[valid + bad..];
                        }
                        None => {
                            self.carry = rest[valid..].to_vec();
                            break;
                        }
                    }
                }
            }
        }
        out
    }

    /// Whatever is left (an incomplete sequence) as replacement characters.
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.carry);
        String::from_utf8_lossy(&rest).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_multibyte_characters_are_joined() {
        let text = "héllo €";
        let bytes = text.as_bytes();
        let mut d = Utf8Carry::default();
        let mut out = String::new();
        for b in bytes {
            out.push_str(&d.push(std::slice::from_ref(b)));
        }
        out.push_str(&d.finish());
        assert_eq!(out, text);
    }

    #[test]
    fn invalid_bytes_become_replacement() {
        let mut d = Utf8Carry::default();
        assert_eq!(d.push(b"a\xffb"), "a\u{FFFD}b");
        assert_eq!(d.push(b"\xe2\x82"), "");
        assert_eq!(d.finish(), "\u{FFFD}");
    }
}
