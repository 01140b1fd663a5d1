//! Credentials: explicit and environment API keys, and the files `createos login` stores under
//! `~/.createos/` — `.token` (an API key) and `.oauth` (a session refreshed on demand, under a
//! cross-process file lock, and written back atomically).
//!
//! [`Resolver`] picks the credential; [`Credentials`] hands the transport the header for each
//! request and renews an OAuth session when it expires or the server rejects it.

mod files;
pub(crate) mod lock;
mod oauth;
mod resolve;
mod secret;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use http::{HeaderName, HeaderValue};

use crate::error::Error;
use oauth::OAuthState;

#[cfg(feature = "fuzzing")]
pub(crate) use files::fuzz_parse_oauth;
pub use resolve::{Resolver, API_KEY_ENV_VARS, OAUTH_CLIENT_ID_ENV_VAR};
pub use secret::Secret;

/// Header carrying an API key (account key or sandbox-scoped token).
pub const API_KEY_HEADER: HeaderName = HeaderName::from_static("x-api-key");
/// Header carrying an OAuth access token. A JWT sent as `X-Api-Key` is rejected.
pub const ACCESS_TOKEN_HEADER: HeaderName = HeaderName::from_static("x-access-token");

/// Where a credential came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CredentialSource {
    /// Passed in code or on the command line.
    Explicit,
    /// An environment variable (its name).
    Env(String),
    /// `~/.createos/.oauth`.
    OAuthFile(PathBuf),
    /// `~/.createos/.token`.
    TokenFile(PathBuf),
}

impl fmt::Display for CredentialSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialSource::Explicit => f.write_str("explicit key"),
            CredentialSource::Env(name) => write!(f, "${name}"),
            CredentialSource::OAuthFile(path) | CredentialSource::TokenFile(path) => {
                write!(f, "{}", path.display())
            }
        }
    }
}

/// What kind of credential, i.e. which header it travels in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CredentialKind {
    /// `X-Api-Key`.
    ApiKey,
    /// `X-Access-Token`.
    AccessToken,
}

impl CredentialKind {
    /// The header this kind is sent in.
    pub fn header_name(self) -> HeaderName {
        match self {
            CredentialKind::ApiKey => API_KEY_HEADER,
            CredentialKind::AccessToken => ACCESS_TOKEN_HEADER,
        }
    }
}

/// A credential ready to authenticate requests. Cheap to clone; clones share one OAuth session,
/// so concurrent requests cause at most one refresh.
#[derive(Clone)]
pub struct Credentials {
    inner: Arc<Inner>,
}

struct Inner {
    kind: CredentialKind,
    source: CredentialSource,
    value: Value,
}

enum Value {
    /// A key or token that never changes; `Err` holds why it cannot be sent.
    Static(Result<HeaderValue, &'static str>),
    OAuth(Box<OAuthState>),
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("kind", &self.inner.kind)
            .field("source", &self.inner.source)
            .finish()
    }
}

fn static_value(secret: &str) -> Result<HeaderValue, &'static str> {
    if secret.is_empty() {
        return Err("is empty");
    }
    let mut value = HeaderValue::from_str(secret)
        .map_err(|_| "contains characters that cannot be sent in an HTTP header")?;
    value.set_sensitive(true);
    Ok(value)
}

impl Credentials {
    fn new(kind: CredentialKind, source: CredentialSource, value: Value) -> Self {
        Credentials {
            inner: Arc::new(Inner {
                kind,
                source,
                value,
            }),
        }
    }

    pub(crate) fn from_api_key(key: Secret, source: CredentialSource) -> Self {
        Credentials::new(
            CredentialKind::ApiKey,
            source,
            Value::Static(static_value(key.expose())),
        )
    }

    fn from_oauth(state: OAuthState, source: CredentialSource) -> Self {
        Credentials::new(
            CredentialKind::AccessToken,
            source,
            Value::OAuth(Box::new(state)),
        )
    }

    /// An API key, sent as `X-Api-Key`.
    pub fn api_key(key: impl Into<String>) -> Self {
        Credentials::from_api_key(Secret::new(key), CredentialSource::Explicit)
    }

    /// A fixed OAuth access token, sent as `X-Access-Token`; never refreshed.
    pub fn access_token(token: impl Into<String>) -> Self {
        let token: String = token.into();
        Credentials::new(
            CredentialKind::AccessToken,
            CredentialSource::Explicit,
            Value::Static(static_value(&token)),
        )
    }

    /// Resolve from the process environment and the CLI's files (see [`Resolver`]).
    pub fn from_env() -> Result<Self, Error> {
        Resolver::new().resolve()
    }

    /// Which header the credential travels in.
    pub fn kind(&self) -> CredentialKind {
        self.inner.kind
    }

    /// Where the credential came from.
    pub fn source(&self) -> &CredentialSource {
        &self.inner.source
    }

    /// Header for the next request; refreshes an OAuth session first when it expires within 60 s.
    /// The value is marked sensitive.
    pub async fn header(&self, http: &reqwest::Client) -> Result<(HeaderName, HeaderValue), Error> {
        let value = match &self.inner.value {
            Value::Static(Ok(value)) => value.clone(),
            Value::Static(Err(why)) => {
                return Err(Error::credentials(format!(
                    "the credential from {} {why}",
                    self.inner.source
                )))
            }
            Value::OAuth(state) => state.header_value(http).await?,
        };
        Ok((self.inner.kind.header_name(), value))
    }

    /// After a 401: returns Ok(true) when a different (refreshed or re-read) credential is now
    /// available and the request should be retried once; Ok(false) when nothing can be done
    /// (API keys, static tokens, or a session already renewed for this rejected value).
    pub async fn refresh_after_unauthorized(
        &self,
        http: &reqwest::Client,
        rejected: &HeaderValue,
    ) -> Result<bool, Error> {
        match &self.inner.value {
            Value::Static(_) => Ok(false),
            Value::OAuth(state) => state.renew_after_unauthorized(http, rejected).await,
        }
    }
}
