//! Line-delimited JSON as a `tokio-util` codec.
//!
//! Blank lines, SSE-style `data:` prefixes and `:` comment lines are tolerated (some proxies and
//! the TS SDK's server variants produce them). A line longer than [`MAX_LINE`] is an error rather
//! than unbounded buffering.

use std::marker::PhantomData;

use bytes::BytesMut;
use futures::{Stream, TryStreamExt};
use serde::de::DeserializeOwned;
use tokio_util::codec::{Decoder, FramedRead};
use tokio_util::io::StreamReader;

use crate::error::Error;

/// Longest accepted line (16 MiB, as the Go and Rust SDKs).
pub const MAX_LINE: usize = 16 << 20;

/// Decodes one `T` per non-empty line.
#[derive(Debug)]
pub struct NdjsonDecoder<T> {
    endpoint: String,
    max_line: usize,
    /// Bytes of the current line already scanned for a newline.
    scanned: usize,
    _t: PhantomData<fn() -> T>,
}

impl<T> NdjsonDecoder<T> {
    /// A decoder labelling its errors with `endpoint`.
    pub fn new(endpoint: impl Into<String>) -> Self {
        NdjsonDecoder {
            endpoint: endpoint.into(),
            max_line: MAX_LINE,
            scanned: 0,
            _t: PhantomData,
        }
    }

    /// Change the line limit.
    pub fn with_max_line(mut self, max: usize) -> Self {
        self.max_line = max;
        self
    }
}

impl<T: DeserializeOwned> NdjsonDecoder<T> {
    fn parse_line(&self, line: &[u8]) -> Result<Option<T>, Error> {
        let mut line = line;
        while let [rest @ .., b'\r' | b' ' | b'\t'] = line {
            line = rest;
        }
        while let [b' ' | b'\t', rest @ ..] = line {
            line = rest;
        }
        if line.is_empty() || line[0] == b':' {
            return Ok(None);
        }
        if let Some(rest) = line.strip_prefix(b"data:") {
            line = rest.strip_prefix(b" ").unwrap_or(rest);
            if line.is_empty() {
                return Ok(None);
            }
        }
        serde_json::from_slice(line)
            .map(Some)
            .map_err(|e| Error::decode(&self.endpoint, format!("bad stream line: {e}")))
    }
}

impl<T: DeserializeOwned> Decoder for NdjsonDecoder<T> {
    type Item = T;
    type Error = Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<T>, Error> {
        loop {
            let Some(pos) = src[self.scanned..].iter().position(|b| *b == b'\n') else {
                self.scanned = src.len();
                if src.len() > self.max_line {
                    return Err(Error::decode(
                        &self.endpoint,
                        format!("stream line longer than {} bytes", self.max_line),
                    ));
                }
                return Ok(None);
            };
            let end = self.scanned + pos;
            self.scanned = 0;
            let line = src.split_to(end + 1);
            if let Some(item) = self.parse_line(&line[..end])? {
                return Ok(Some(item));
            }
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<T>, Error> {
        if let Some(item) = self.decode(src)? {
            return Ok(Some(item));
        }
        if src.is_empty() {
            return Ok(None);
        }
        let rest = src.split_to(src.len());
        self.scanned = 0;
        self.parse_line(&rest)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io {
            context: "reading a stream".into(),
            source: e,
        }
    }
}

/// Decode a streaming HTTP answer into items. A broken connection surfaces as
/// [`Error::Connection`] so callers can resume.
pub fn decode_response<T: DeserializeOwned + Send + 'static>(
    endpoint: String,
    response: reqwest::Response,
) -> impl Stream<Item = Result<T, Error>> + Send + 'static {
    decode_bytes(endpoint, body_bytes(response))
}

/// The body of a streaming HTTP answer as bytes; a broken connection is an
/// [`std::io::ErrorKind::ConnectionAborted`] error (the URL left out: it may carry a token).
pub fn body_bytes(
    response: reqwest::Response,
) -> impl Stream<Item = std::io::Result<bytes::Bytes>> + Send + Unpin + 'static {
    response
        .bytes_stream()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::ConnectionAborted, e.without_url()))
}

/// Decode a byte stream of NDJSON into items. A read error surfaces as
/// [`Error::Connection`] so callers can resume.
pub fn decode_bytes<T: DeserializeOwned + Send + 'static>(
    endpoint: String,
    bytes: impl Stream<Item = std::io::Result<bytes::Bytes>> + Send + Unpin + 'static,
) -> impl Stream<Item = Result<T, Error>> + Send + 'static {
    let label = endpoint.clone();
    let reader = StreamReader::new(bytes);
    FramedRead::new(reader, NdjsonDecoder::<T>::new(endpoint)).map_err(move |e| match e {
        Error::Io { source, .. } => Error::Connection {
            endpoint: label.clone(),
            source: Box::new(source),
        },
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn all(input: &[u8]) -> Vec<Value> {
        let mut d = NdjsonDecoder::<Value>::new("t");
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(v) = d.decode(&mut buf).unwrap() {
            out.push(v);
        }
        if let Some(v) = d.decode_eof(&mut buf).unwrap() {
            out.push(v);
        }
        out
    }

    #[test]
    fn lines_blank_sse_and_comments() {
        let v = all(b"{\"a\":1}\n\n: keepalive\ndata: {\"b\":2}\r\n{\"c\":3}");
        assert_eq!(v.len(), 3);
        assert_eq!(v[1]["b"], 2);
        assert_eq!(v[2]["c"], 3);
    }

    #[test]
    fn split_across_reads() {
        let mut d = NdjsonDecoder::<Value>::new("t");
        let mut buf = BytesMut::from(&b"{\"a\":"[..]);
        assert!(d.decode(&mut buf).unwrap().is_none());
        buf.extend_from_slice(b"1}\n");
        assert_eq!(d.decode(&mut buf).unwrap().unwrap()["a"], 1);
    }

    #[test]
    fn long_line_is_an_error() {
        let mut d = NdjsonDecoder::<Value>::new("t").with_max_line(8);
        let mut buf = BytesMut::from(&b"{\"aaaaaaaaaaaa\":1"[..]);
        assert!(d.decode(&mut buf).is_err());
    }

    #[test]
    fn bad_json_is_an_error() {
        let mut d = NdjsonDecoder::<Value>::new("t");
        let mut buf = BytesMut::from(&b"{nope}\n"[..]);
        assert!(d.decode(&mut buf).is_err());
    }
}
