//! The one error type of the crate.
//!
//! Every failure a caller may want to react to is its own variant: the HTTP-mapped ones carry an
//! [`ApiError`] with the status, the API's error code, the request id and the endpoint, so a log
//! line or a bug report has everything needed to find the request on the server.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Details of an error answer from the control plane.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status code.
    pub status: u16,
    /// String code from the fail data (e.g. `QUOTA_EXCEEDED`), when the server sent one.
    pub code: Option<String>,
    /// Human-readable message, built from the envelope (or the status when the body had none).
    pub message: String,
    /// Field → message map of a `fail` envelope (validation errors).
    pub fields: BTreeMap<String, String>,
    /// `X-Request-Id` (or `X-Fc-Request-Id`) of the answer.
    pub request_id: Option<String>,
    /// Method and path template, e.g. `GET /v1/sandboxes/{id}` (no ids, no query): stable, for
    /// matching and grouping.
    pub endpoint: String,
    /// The path the request was sent to, with its ids (no query), e.g. `/v1/sandboxes/sb-…`;
    /// shown in messages so they name the resource. `None` when the error was not built from a
    /// sent request.
    pub path: Option<String>,
    /// `Retry-After` of the answer, when present.
    pub retry_after: Option<Duration>,
}

impl fmt::Debug for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiError")
            .field("status", &self.status)
            .field("code", &self.code)
            .field("message", &self.message)
            .field("fields", &self.fields)
            .field("request_id", &self.request_id)
            .field("endpoint", &self.endpoint)
            .field("path", &self.path)
            .field("retry_after", &self.retry_after)
            .finish()
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.path, self.endpoint.split_once(' ')) {
            (Some(path), Some((method, _))) => write!(f, "{method} {path}")?,
            _ => f.write_str(&self.endpoint)?,
        }
        write!(f, " failed with HTTP {}: {}", self.status, self.message)?;
        if let Some(code) = &self.code {
            write!(f, " [{code}]")?;
        }
        if let Some(id) = &self.request_id {
            write!(f, " (request id {id})")?;
        }
        Ok(())
    }
}

/// Everything that can go wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// 401: the credential is missing, invalid, revoked or expired.
    #[error("not authorized: {0}. Run `createos login` or set CREATEOS_API_KEY")]
    Auth(Box<ApiError>),
    /// 403: authenticated but not allowed (e.g. a sandbox-scoped token on a management route).
    #[error("permission denied: {0}")]
    Permission(Box<ApiError>),
    /// 404: unknown id — also the answer for resources owned by another account.
    #[error("not found: {0}")]
    NotFound(Box<ApiError>),
    /// 409: the resource is in a state that does not allow the operation.
    #[error("conflict: {0}")]
    Conflict(Box<ApiError>),
    /// 400/422: the server rejected a field; see [`ApiError::fields`].
    #[error("invalid request: {0}")]
    Validation(Box<ApiError>),
    /// 429 after the retry budget was spent.
    #[error("rate limited: {api}")]
    RateLimited {
        /// The answer.
        api: Box<ApiError>,
        /// How long the server asked to wait.
        retry_after: Option<Duration>,
    },
    /// 402: the account has no credit for a cost-incurring operation.
    #[error("payment required: {0}")]
    PaymentRequired(Box<ApiError>),
    /// 5xx after the retry budget was spent.
    #[error("server error: {0}")]
    Server(Box<ApiError>),
    /// Any other non-success status (e.g. 408 from a process wait, 411, 415).
    #[error("request failed: {0}")]
    Api(Box<ApiError>),
    /// The request could not be sent or the connection broke.
    #[error("connection to {endpoint} failed: {source}")]
    Connection {
        /// Method and path template.
        endpoint: String,
        /// Underlying transport error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// No answer within the configured timeout.
    #[error("{endpoint} timed out after {after:?}")]
    Timeout {
        /// Method and path template.
        endpoint: String,
        /// The timeout that elapsed.
        after: Duration,
    },
    /// The answer did not have the documented shape.
    #[error("could not decode the answer of {endpoint}: {message}")]
    Decode {
        /// Method and path template.
        endpoint: String,
        /// What was wrong.
        message: String,
    },
    /// The operation was cancelled by the caller.
    #[error("cancelled")]
    Cancelled,
    /// Bad input caught before anything was sent.
    #[error("invalid {field}: {message}")]
    InvalidInput {
        /// The argument or field at fault.
        field: String,
        /// Why it was refused.
        message: String,
    },
    /// No credential could be found.
    #[error("not signed in: {0}")]
    NotSignedIn(String),
    /// A stored credential could not be read, parsed, refreshed or written back.
    #[error("credentials: {message}")]
    Credentials {
        /// What failed and what to do.
        message: String,
        /// Underlying error, if any.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A file operation inside the sandbox failed (see `guest`): [`Error::guest`] gives the
    /// `GuestError` (match on its `code`, or use [`Error::guest_code`]).
    #[error("{0}")]
    Guest(Detail),
    /// SSH to a sandbox failed: connecting, the guest sshd, host-key verification, a command
    /// channel or SFTP. [`Error::ssh`] gives the `SshError` with the details.
    #[error(transparent)]
    Ssh(Detail),
    /// Something a sandbox sent was not written here: a protected local path (VCS metadata,
    /// the credential deny-list, `~/.createos`; see [`crate::transfer::protect`]) or an
    /// entry that would leave its destination.
    #[error("refusing to write {path} from the sandbox: {reason}")]
    Refused {
        /// The local path or entry name.
        path: String,
        /// Why.
        reason: String,
    },
    /// Local I/O failed (files being uploaded or downloaded, terminals, sockets).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The payload of an [`Error`] variant whose type lives in a module above this one (the guest
/// helper's `GuestError`, SSH's `SshError`): this module names no such type, and the typed
/// accessors ([`Error::guest`], [`Error::ssh`]) give it back. Display, `Debug` and
/// `source()` are the payload's own.
pub struct Detail(Box<dyn std::error::Error + Send + Sync>);

impl Detail {
    /// Wrap `error`; only the module that owns the type builds one (through its `From`).
    pub(crate) fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Detail(Box::new(error))
    }

    /// The payload as `T`, when it is one.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.0.downcast_ref::<T>()
    }
}

impl fmt::Debug for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Detail {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// The `ApiError` of an HTTP-mapped variant, by shared or mutable reference (one list of the
/// variants for [`Error::api`] and `Error::api_mut`).
macro_rules! api_of {
    ($error:expr) => {
        match $error {
            Error::Auth(a)
            | Error::Permission(a)
            | Error::NotFound(a)
            | Error::Conflict(a)
            | Error::Validation(a)
            | Error::PaymentRequired(a)
            | Error::Server(a)
            | Error::Api(a) => Some(a),
            Error::RateLimited { api, .. } => Some(api),
            _ => None,
        }
    };
}

impl Error {
    /// The same error with the request's concrete path recorded in its [`ApiError`].
    pub(crate) fn at_path(mut self, path: &str) -> Self {
        if let Some(api) = self.api_mut() {
            let bare = path.split_once('?').map_or(path, |(p, _)| p);
            api.path = Some(bare.to_string());
        }
        self
    }

    fn api_mut(&mut self) -> Option<&mut ApiError> {
        api_of!(self)
    }

    /// The control plane's answer, for HTTP-mapped variants.
    pub fn api(&self) -> Option<&ApiError> {
        api_of!(self)
    }

    /// HTTP status, for HTTP-mapped variants.
    pub fn status(&self) -> Option<u16> {
        self.api().map(|a| a.status)
    }

    /// True for a 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound(_))
    }

    /// Build the variant matching an error answer's status.
    pub fn from_api(api: ApiError) -> Self {
        let api = Box::new(api);
        match api.status {
            401 => Error::Auth(api),
            402 => Error::PaymentRequired(api),
            403 => Error::Permission(api),
            404 => Error::NotFound(api),
            409 => Error::Conflict(api),
            400 | 422 => Error::Validation(api),
            429 => {
                let retry_after = api.retry_after;
                Error::RateLimited { api, retry_after }
            }
            500..=599 => Error::Server(api),
            _ => Error::Api(api),
        }
    }

    /// An [`Error::InvalidInput`] for `field`.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidInput {
            field: field.into(),
            message: message.into(),
        }
    }

    /// An [`Error::Refused`] for `path`.
    pub fn refused(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Refused {
            path: path.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn decode(endpoint: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Decode {
            endpoint: endpoint.into(),
            message: message.into(),
        }
    }

    pub(crate) fn credentials(message: impl Into<String>) -> Self {
        Error::Credentials {
            message: message.into(),
            source: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for an error type of a module above this one, with a cause of its own.
    #[derive(Debug, thiserror::Error)]
    #[error("upper failed")]
    struct Upper(#[source] std::io::Error);

    #[test]
    fn a_detail_is_its_payload_in_display_debug_source_and_type() {
        let err = Error::Ssh(Detail::new(Upper(std::io::Error::other("cause"))));
        assert_eq!(err.to_string(), "upper failed");
        assert_eq!(
            format!("{err:?}"),
            r#"Ssh(Upper(Custom { kind: Other, error: "cause" }))"#
        );
        let source = std::error::Error::source(&err).expect("the payload's cause");
        assert_eq!(source.to_string(), "cause");
        let Error::Ssh(detail) = &err else {
            unreachable!()
        };
        assert!(detail.downcast_ref::<Upper>().is_some());
        assert!(detail.downcast_ref::<std::io::Error>().is_none());
        // `Guest` shows its payload but names no source, as before.
        let err = Error::Guest(Detail::new(Upper(std::io::Error::other("cause"))));
        assert_eq!(err.to_string(), "upper failed");
        assert!(std::error::Error::source(&err).is_none());
    }
}
