//! [`Client`] and its builder.

use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;
use url::Url;

use crate::auth::{Credentials, Resolver};
use crate::config::{self, Region, RetryPolicy, Timeouts};
use crate::error::{Error, Result};
use crate::transport::Transport;

/// Idle pooled connections are dropped after this long (see `default_http`).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(15);

/// A handle on one control plane with one credential.
///
/// Cheap to clone (an `Arc` inside), `Send + Sync`; clones share the connection pool and the
/// credential (so an OAuth refresh happens once for all of them).
///
/// ```no_run
/// # async fn demo() -> createos_sandbox::Result<()> {
/// let client = createos_sandbox::Client::builder()
///     .api_key("skp_example")
///     .region(createos_sandbox::Region::Eu)
///     .build()?;
/// println!("{}", client.whoami().await?.user_id);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    pub(crate) transport: Arc<Transport>,
}

impl Client {
    /// Configure a client.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// A client configured like the `createos` CLI: base URL from `CREATEOS_SANDBOX_BASE_URL` /
    /// `CREATEOS_SANDBOX_URL` (else production), credentials by the CLI's precedence
    /// (`CREATEOS_API_KEY` …, then `~/.createos/.oauth`, then `~/.createos/.token`).
    pub fn from_env() -> Result<Self> {
        ClientBuilder::default().build()
    }

    /// The base URL requests go to.
    pub fn base_url(&self) -> &Url {
        &self.transport.base
    }

    /// The HTTP client requests go through, with its TLS roots (extra CAs included): for a
    /// request outside the typed API, such as an emulator's own `/_mock` routes.
    pub fn http_client(&self) -> &reqwest::Client {
        &self.transport.http
    }

    /// The credential in use, if any.
    pub fn credentials(&self) -> Option<&Credentials> {
        self.transport.credentials.as_ref()
    }

    /// Default lifecycle wait budget.
    pub(crate) fn wait_timeout(&self) -> Duration {
        self.transport.timeouts.wait
    }
}

/// Reads one environment variable (the process environment unless replaced for tests).
type EnvReader = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

enum CredentialChoice {
    Resolve,
    Given(Credentials),
    Anonymous,
}

/// Options of a [`Client`]. Unset options come from the environment, then the defaults.
pub struct ClientBuilder {
    base_url: Option<String>,
    region: Option<Region>,
    credentials: CredentialChoice,
    resolver: Option<Resolver>,
    retry: RetryPolicy,
    timeouts: Timeouts,
    user_agent: Option<String>,
    http: Option<reqwest::Client>,
    ca_files: Vec<std::path::PathBuf>,
    env: EnvReader,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            base_url: None,
            region: None,
            credentials: CredentialChoice::Resolve,
            resolver: None,
            retry: RetryPolicy::default(),
            timeouts: Timeouts::default(),
            user_agent: None,
            http: None,
            ca_files: Vec::new(),
            env: Arc::new(|name| std::env::var(name).ok()),
        }
    }
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("base_url", &self.base_url)
            .field("region", &self.region)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// Talk to this control plane (overrides region and environment).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// Talk to a regional control plane.
    pub fn region(mut self, region: Region) -> Self {
        self.region = Some(region);
        self
    }

    /// Use this API key (`X-Api-Key`); stored logins are not read.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.credentials = CredentialChoice::Given(Credentials::api_key(key));
        self
    }

    /// Use these credentials.
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = CredentialChoice::Given(credentials);
        self
    }

    /// Resolve credentials with this resolver (e.g. another home directory) instead of the default.
    pub fn resolver(mut self, resolver: Resolver) -> Self {
        self.resolver = Some(resolver);
        self.credentials = CredentialChoice::Resolve;
        self
    }

    /// Build without credentials: only the unauthenticated routes (health, shapes, rootfs) work.
    pub fn anonymous(mut self) -> Self {
        self.credentials = CredentialChoice::Anonymous;
        self
    }

    /// Retry policy for failed requests.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Per-attempt request timeout (`None`: no limit).
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeouts.request = timeout;
        self
    }

    /// TCP/TLS connect timeout.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts.connect = timeout;
        self
    }

    /// Default budget of `wait_until_*`.
    pub fn wait_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts.wait = timeout;
        self
    }

    /// Replace the `User-Agent`.
    pub fn user_agent(mut self, ua: impl Into<String>) -> Self {
        self.user_agent = Some(ua.into());
        self
    }

    /// Use your own `reqwest::Client`. Its redirect policy then applies: keep it at
    /// `Policy::none()` (or same-origin) so credentials never follow a redirect elsewhere.
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// Also trust the CA certificates (PEM) in this file, beyond the webpki roots (a corporate
    /// TLS proxy, or `createos-mock --tls`). `CREATEOS_CA_FILE` and `SSL_CERT_FILE` add
    /// theirs too. REST calls and upgrades (shell, tunnel) trust the same roots.
    pub fn ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.ca_files.push(path.into());
        self
    }

    /// Read environment variables through this function instead of the process environment.
    pub fn env(mut self, env: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        self.env = Arc::new(env);
        self
    }

    /// Build the client. Fails when the base URL is invalid or, unless [`Self::anonymous`], when no
    /// credential can be found (with a message telling to run `createos login`).
    pub fn build(self) -> Result<Client> {
        let raw_base = match (&self.base_url, self.region) {
            (Some(url), _) => url.clone(),
            (None, Some(region)) => region.base_url().to_string(),
            (None, None) => config::base_url_from_env(&*self.env)
                .map(|(v, _)| v)
                .unwrap_or_else(|| config::DEFAULT_BASE_URL.to_string()),
        };
        let base = config::parse_base_url(&raw_base)?;
        let credentials = match self.credentials {
            CredentialChoice::Given(c) => Some(c),
            CredentialChoice::Anonymous => None,
            CredentialChoice::Resolve => {
                let env = self.env.clone();
                let resolver = self
                    .resolver
                    .unwrap_or_else(|| Resolver::new().env(move |n| env(n)));
                Some(resolver.resolve()?)
            }
        };
        let (rest_tls, upgrade_tls) = crate::transport::tls::configs(
            &crate::transport::tls::ca_files(&self.ca_files, &*self.env),
        )?;
        let http = match self.http {
            Some(http) => http,
            None => default_http(&base, &self.timeouts, rest_tls)?,
        };
        let ua = self.user_agent.unwrap_or_else(default_user_agent);
        let user_agent = HeaderValue::from_str(&ua)
            .map_err(|_| Error::invalid("user_agent", "must be visible ASCII"))?;
        Ok(Client {
            transport: Arc::new(Transport {
                http,
                base,
                credentials,
                retry: self.retry,
                timeouts: self.timeouts,
                user_agent,
                upgrade_tls,
            }),
        })
    }
}

fn default_user_agent() -> String {
    format!(
        "createos-sandbox-rs/{} ({})",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS
    )
}

/// reqwest with rustls, and redirects followed only within the base URL's origin.
fn default_http(
    base: &Url,
    timeouts: &Timeouts,
    tls: rustls::ClientConfig,
) -> Result<reqwest::Client> {
    let origin = base.origin();
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= 5 || attempt.url().origin() != origin {
            attempt.stop()
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .redirect(policy)
        .connect_timeout(timeouts.connect)
        // Servers and load balancers close idle keep-alive connections (hyper's default: 30 s
        // without a request). A pooled connection reused just as the server closes it fails a
        // POST that must not be retried, so drop idle connections well before that.
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .tcp_nodelay(true)
        .build()
        .map_err(|e| Error::Connection {
            endpoint: "client setup".into(),
            source: Box::new(e),
        })
}
