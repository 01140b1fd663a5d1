//! One request to send: the endpoint, its path parameters, query, body and per-call options.

use std::time::Duration;

use bytes::Bytes;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::Serialize;

use super::endpoints::Endpoint;
use crate::error::{Error, Result};

/// Characters left as they are in a path segment (RFC 3986 unreserved); everything else,
/// `/` included, is percent-encoded so a parameter can never add a path segment.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The body of a request.
pub enum CallBody {
    /// No body. POSTs still send `Content-Length: 0` (the server requires it).
    Empty,
    /// A JSON document (replayable).
    Json(Bytes),
    /// Raw bytes with a content type (replayable).
    Bytes {
        /// The payload.
        bytes: Bytes,
        /// Its media type.
        content_type: &'static str,
    },
    /// A stream, sent once: a request with it is never retried.
    Stream {
        /// The payload.
        body: reqwest::Body,
        /// `Content-Length`, when known.
        length: Option<u64>,
        /// Its media type.
        content_type: &'static str,
    },
}

impl CallBody {
    /// Whether the body can be sent a second time.
    pub fn replayable(&self) -> bool {
        !matches!(self, CallBody::Stream { .. })
    }
}

/// A request under construction. Built by the API modules, sent by the transport.
pub struct Call {
    pub(crate) endpoint: &'static Endpoint,
    pub(crate) params: Vec<String>,
    pub(crate) query: Vec<(&'static str, String)>,
    pub(crate) body: CallBody,
    pub(crate) timeout: Option<Option<Duration>>,
    pub(crate) accept: Option<&'static str>,
    pub(crate) streaming: bool,
}

impl Call {
    /// Start a call to `endpoint`.
    pub fn new(endpoint: &'static Endpoint) -> Self {
        Call {
            endpoint,
            params: Vec::new(),
            query: Vec::new(),
            body: CallBody::Empty,
            timeout: None,
            accept: None,
            streaming: false,
        }
    }

    /// Fill the next `{param}` of the path template.
    pub fn param(mut self, value: impl Into<String>) -> Self {
        self.params.push(value.into());
        self
    }

    /// Add a query parameter.
    pub fn query(mut self, key: &'static str, value: impl ToString) -> Self {
        self.query.push((key, value.to_string()));
        self
    }

    /// Add a query parameter when present.
    pub fn query_opt<V: ToString>(self, key: &'static str, value: Option<V>) -> Self {
        match value {
            Some(v) => self.query(key, v),
            None => self,
        }
    }

    /// Send `value` as JSON.
    pub fn json<T: Serialize + ?Sized>(mut self, value: &T) -> Result<Self> {
        let bytes = serde_json::to_vec(value)
            .map_err(|e| Error::invalid("body", format!("cannot encode request: {e}")))?;
        self.body = CallBody::Json(bytes.into());
        Ok(self)
    }

    /// Send a body.
    pub fn body(mut self, body: CallBody) -> Self {
        self.body = body;
        self
    }

    /// Override the per-attempt timeout (`None` disables it).
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Ask for a media type.
    pub fn accept(mut self, media: &'static str) -> Self {
        self.accept = Some(media);
        self
    }

    /// Mark the answer as a stream: the timeout bounds the wait for the headers only, and the call is
    /// not retried once the stream has started.
    pub fn streaming(mut self) -> Self {
        self.streaming = true;
        self
    }

    /// The path with parameters substituted and percent-encoded.
    pub(crate) fn path(&self) -> Result<String> {
        let template = self.endpoint.path;
        let mut out = String::with_capacity(template.len() + 32);
        let mut params = self.params.iter();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let close = rest[open..]
                .find('}')
                .map(|c| open + c)
                .expect("path templates are well formed");
            let name = &rest[open + 1..close];
            let value = params.next().ok_or_else(|| {
                Error::invalid(
                    name,
                    format!("missing path parameter for {}", self.endpoint.label()),
                )
            })?;
            if value.is_empty() {
                return Err(Error::invalid(name, "must not be empty"));
            }
            out.extend(utf8_percent_encode(value, SEGMENT));
            rest = &rest[close + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::endpoints;

    #[test]
    fn path_parameters_are_encoded_as_one_segment() {
        let call = Call::new(&endpoints::GET_SANDBOX).param("sb-1/../x y");
        assert_eq!(call.path().unwrap(), "/v1/sandboxes/sb-1%2F..%2Fx%20y");
        let call = Call::new(&endpoints::DETACH_DISK)
            .param("sb-1")
            .param("disk_01");
        assert_eq!(call.path().unwrap(), "/v1/sandboxes/sb-1/disks/disk_01");
    }

    #[test]
    fn missing_or_empty_parameter_is_refused() {
        assert!(Call::new(&endpoints::GET_SANDBOX).path().is_err());
        assert!(Call::new(&endpoints::GET_SANDBOX).param("").path().is_err());
    }
}
