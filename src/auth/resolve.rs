//! Which credential to use, in the newest CLI's order (cli-credentials.md §1.6):
//! explicit key → API-key environment variables → `~/.createos/.oauth` → `~/.createos/.token`.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use super::files::{self, StorePaths};
use super::oauth::{OAuthClient, OAuthState, DEFAULT_CLIENT_ID, DEFAULT_ISSUER};
use super::secret::Secret;
use super::{CredentialSource, Credentials};
use crate::error::Error;

/// API-key variables in precedence order: the CLI's three, then the TS SDK's name.
pub const API_KEY_ENV_VARS: [&str; 4] = [
    "CREATEOS_API_KEY",
    "CREATEOS_PLAN_API_KEY",
    "CREATEOS_PROJECT_API_KEY",
    "CREATEOS_SANDBOX_API_KEY",
];

/// Overrides the OAuth client id used for refreshes (release builds of the CLI may use another).
pub const OAUTH_CLIENT_ID_ENV_VAR: &str = "CREATEOS_OAUTH_CLIENT_ID";

type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Finds the credential to use. Every input can be replaced, so a test (or an embedding
/// program) can resolve against its own home directory and environment without touching the
/// process's.
///
/// ```no_run
/// # fn demo() -> createos_sandbox::Result<()> {
/// use createos_sandbox::auth::Resolver;
/// let credentials = Resolver::new().explicit_key(std::env::args().nth(1)).resolve()?;
/// println!("using {:?}", credentials);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Resolver {
    explicit_key: Option<Secret>,
    home: Option<PathBuf>,
    env: EnvLookup,
    client_id: Option<String>,
    issuer: Option<String>,
}

impl Default for Resolver {
    fn default() -> Self {
        Resolver::new()
    }
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver")
            .field(
                "explicit_key",
                &self.explicit_key.as_ref().map(|_| "<redacted>"),
            )
            .field("home", &self.home)
            .field("client_id", &self.client_id)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl Resolver {
    /// Real process environment, `$HOME` (else the platform's home directory), the CLI's OAuth
    /// client and issuer.
    pub fn new() -> Self {
        Resolver {
            explicit_key: None,
            home: None,
            env: Arc::new(|name| std::env::var(name).ok()),
            client_id: None,
            issuer: None,
        }
    }

    /// A key given on the command line or in code; beats everything else when non-empty.
    pub fn explicit_key(mut self, key: Option<String>) -> Self {
        self.explicit_key = key.map(Secret::new);
        self
    }

    /// The home directory holding `.createos/`.
    pub fn home(mut self, home: impl Into<PathBuf>) -> Self {
        self.home = Some(home.into());
        self
    }

    /// Where environment variables are read from (including `HOME` and
    /// `CREATEOS_OAUTH_CLIENT_ID`).
    pub fn env<F>(mut self, lookup: F) -> Self
    where
        F: Fn(&str) -> Option<String> + Send + Sync + 'static,
    {
        self.env = Arc::new(lookup);
        self
    }

    /// OAuth client id for refreshes; beats `CREATEOS_OAUTH_CLIENT_ID`.
    pub fn oauth_client_id(mut self, client_id: impl Into<String>) -> Self {
        self.client_id = Some(client_id.into());
        self
    }

    /// OAuth issuer whose `/oauth2/token` is used when `.oauth` names no token endpoint.
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    fn env_value(&self, name: &str) -> Option<String> {
        (self.env)(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    fn home_dir(&self) -> Option<PathBuf> {
        self.home
            .clone()
            .or_else(|| self.env_value("HOME").map(PathBuf::from))
            .or_else(dirs::home_dir)
    }

    /// Pick the credential. Reads files but sends nothing: an expired OAuth session is
    /// refreshed by the first [`Credentials::header`] call.
    pub fn resolve(&self) -> Result<Credentials, Error> {
        if let Some(key) = self
            .explicit_key
            .as_ref()
            .map(|k| k.expose().trim())
            .filter(|k| !k.is_empty())
        {
            return Ok(Credentials::from_api_key(
                Secret::new(key),
                CredentialSource::Explicit,
            ));
        }
        for name in API_KEY_ENV_VARS {
            if let Some(key) = self.env_value(name) {
                return Ok(Credentials::from_api_key(
                    Secret::new(key),
                    CredentialSource::Env(name.to_owned()),
                ));
            }
        }
        let Some(home) = self.home_dir() else {
            return Err(not_signed_in());
        };
        let paths = StorePaths::under_home(&home);

        // A `.oauth` that exists but cannot be parsed is an error, not a reason to try `.token`:
        // the CLI would use the session, so silently switching to an older API key could act on
        // a different account, and the user would never learn that their login is broken.
        if let Some(session) = files::read_oauth(&paths.oauth)? {
            let client = OAuthClient {
                client_id: self
                    .client_id
                    .clone()
                    .or_else(|| self.env_value(OAUTH_CLIENT_ID_ENV_VAR))
                    .unwrap_or_else(|| DEFAULT_CLIENT_ID.to_owned()),
                issuer: self
                    .issuer
                    .clone()
                    .unwrap_or_else(|| DEFAULT_ISSUER.to_owned()),
            };
            let source = CredentialSource::OAuthFile(paths.oauth.clone());
            return Ok(Credentials::from_oauth(
                OAuthState::new(paths, client, &session),
                source,
            ));
        }
        if let Some(key) = files::read_token(&paths.token)? {
            return Ok(Credentials::from_api_key(
                key,
                CredentialSource::TokenFile(paths.token),
            ));
        }
        Err(not_signed_in())
    }
}

fn not_signed_in() -> Error {
    Error::NotSignedIn("run `createos login` or set CREATEOS_API_KEY".into())
}
