//! Credentials: tenants (one per API key), OAuth access/refresh tokens and delegated
//! sandbox tokens (`skp_sb_…`); the `Caller` every authenticated route gets (its
//! extractor, over the shared state, is in `extract`).

use std::collections::HashMap;
use std::fmt;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use axum::http::request::Parts;

use crate::envelope::ApiError;
use crate::ids;

/// A tenant (account); its id is the `user_id` from whoami.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(pub String);

impl fmt::Debug for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TenantId({})", self.0)
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Clone)]
struct Tenant {
    id: TenantId,
    api_key: String,
    credit: bool,
}

/// One `createos login` session: a short-lived access token and a rotating refresh token.
struct OAuthSession {
    tenant: TenantId,
    access_token: String,
    access_expires: Instant,
    refresh_token: String,
    /// Refresh tokens already rotated away; presenting one again revokes the session.
    spent_refresh_tokens: Vec<String>,
    lifetime: Duration,
    revoked: bool,
}

/// A delegated token of one sandbox.
#[derive(Clone)]
pub struct DelegatedToken {
    pub token: String,
    pub sandbox_id: String,
    pub tenant: TenantId,
    pub enabled: bool,
    pub created_at: String,
    pub rotated_at: Option<String>,
}

/// Every credential the mock knows.
#[derive(Default)]
pub struct Tenants {
    tenants: RwLock<Vec<Tenant>>,
    oauth: RwLock<Vec<OAuthSession>>,
    /// Keyed by sandbox id (one token per sandbox).
    delegated: RwLock<HashMap<String, DelegatedToken>>,
}

impl fmt::Debug for Tenants {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print keys or tokens.
        f.debug_struct("Tenants").finish_non_exhaustive()
    }
}

/// A credential issued by `/_mock/oauth/sessions` or a refresh.
pub struct IssuedTokens {
    pub access_token: String,
    pub refresh_token: String,
    pub expires_in: u64,
}

/// Why a refresh was refused (`invalid_grant` on the wire).
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error("unknown refresh token")]
    Unknown,
    #[error("refresh token reused; session revoked")]
    Reused,
}

impl Tenants {
    /// Adds a tenant; returns its user id.
    pub fn add(&self, api_key: String, credit: bool) -> TenantId {
        let id = TenantId(format!("user_{}", ids::ulid().to_ascii_lowercase()));
        self.tenants
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(Tenant {
                id: id.clone(),
                api_key,
                credit,
            });
        id
    }

    /// The first tenant's key (the one printed at startup).
    pub fn first_key(&self) -> Option<String> {
        self.tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .first()
            .map(|t| t.api_key.clone())
    }

    fn by_key(&self, key: &str) -> Option<Tenant> {
        self.tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|t| t.api_key == key)
            .cloned()
    }

    pub fn tenant_for_key(&self, key: &str) -> Option<TenantId> {
        self.by_key(key).map(|t| t.id)
    }

    pub fn has_credit(&self, tenant: &TenantId) -> bool {
        self.tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|t| &t.id == tenant)
            .map(|t| t.credit)
            .unwrap_or(false)
    }

    /// Starts an OAuth session for `tenant`.
    pub fn open_oauth_session(&self, tenant: TenantId, lifetime: Duration) -> IssuedTokens {
        let session = OAuthSession {
            tenant,
            access_token: fake_jwt(),
            access_expires: Instant::now() + lifetime,
            refresh_token: format!("rt_{}", ids::random_token(40)),
            spent_refresh_tokens: Vec::new(),
            lifetime,
            revoked: false,
        };
        let issued = IssuedTokens {
            access_token: session.access_token.clone(),
            refresh_token: session.refresh_token.clone(),
            expires_in: lifetime.as_secs(),
        };
        self.oauth
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(session);
        issued
    }

    /// Rotates a refresh token. A reused (already rotated) token revokes the session.
    pub fn refresh(&self, refresh_token: &str) -> Result<IssuedTokens, RefreshError> {
        let mut sessions = self.oauth.write().unwrap_or_else(|e| e.into_inner());
        for s in sessions.iter_mut() {
            if s.revoked {
                continue;
            }
            if s.refresh_token == refresh_token {
                s.spent_refresh_tokens.push(std::mem::replace(
                    &mut s.refresh_token,
                    format!("rt_{}", ids::random_token(40)),
                ));
                s.access_token = fake_jwt();
                s.access_expires = Instant::now() + s.lifetime;
                return Ok(IssuedTokens {
                    access_token: s.access_token.clone(),
                    refresh_token: s.refresh_token.clone(),
                    expires_in: s.lifetime.as_secs(),
                });
            }
            if s.spent_refresh_tokens.iter().any(|t| t == refresh_token) {
                s.revoked = true;
                return Err(RefreshError::Reused);
            }
        }
        Err(RefreshError::Unknown)
    }

    fn tenant_for_access_token(&self, token: &str) -> Option<TenantId> {
        let sessions = self.oauth.read().unwrap_or_else(|e| e.into_inner());
        sessions
            .iter()
            .find(|s| !s.revoked && s.access_token == token && s.access_expires > Instant::now())
            .map(|s| s.tenant.clone())
    }

    /// The delegated token of `sandbox_id`, if any (enabled or not).
    pub fn delegated_of(&self, sandbox_id: &str) -> Option<DelegatedToken> {
        self.delegated
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(sandbox_id)
            .cloned()
    }

    /// Stores (creates or replaces) the delegated token of a sandbox.
    pub fn put_delegated(&self, token: DelegatedToken) {
        self.delegated
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.sandbox_id.clone(), token);
    }

    /// Disables the token of `sandbox_id`; returns it.
    pub fn disable_delegated(&self, sandbox_id: &str) -> Option<DelegatedToken> {
        let mut map = self.delegated.write().unwrap_or_else(|e| e.into_inner());
        let t = map.get_mut(sandbox_id)?;
        t.enabled = false;
        Some(t.clone())
    }

    fn by_delegated_token(&self, token: &str) -> Option<DelegatedToken> {
        self.delegated
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .find(|t| t.enabled && t.token == token)
            .cloned()
    }
}

/// A random `header.payload.signature` string shaped like a JWT.
fn fake_jwt() -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header = b64.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = b64.encode(format!(
        r#"{{"jti":"{}","iss":"createos-mock"}}"#,
        ids::random_token(16)
    ));
    format!("{header}.{payload}.{}", ids::random_token(43))
}

/// A value that looks like a JWT (three dot-separated base64url segments, `eyJ…`).
pub fn looks_like_jwt(value: &str) -> bool {
    let parts: Vec<&str> = value.split('.').collect();
    parts.len() == 3
        && value.starts_with("eyJ")
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'=')
        })
}

/// The authenticated caller of a route.
#[derive(Clone)]
pub struct Caller {
    pub tenant: TenantId,
    pub user_id: String,
    /// `Some(sandbox id)` when authenticated by a delegated `skp_sb_…` token.
    pub delegated_for: Option<String>,
}

impl fmt::Debug for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Caller")
            .field("tenant", &self.tenant)
            .field("delegated_for", &self.delegated_for)
            .finish()
    }
}

impl Caller {
    /// 403 for delegated callers (management routes).
    pub fn require_owner(&self) -> Result<(), ApiError> {
        if self.delegated_for.is_some() {
            return Err(ApiError::forbidden_delegated());
        }
        Ok(())
    }
}

fn header<'a>(parts: &'a Parts, name: &str) -> Option<&'a str> {
    parts
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// Resolves the credential headers. Session tokens (`X-Auth-Token`, `X-Access-Token`)
/// are looked at before `X-Api-Key`, as the server does. `Authorization` is ignored.
pub fn authenticate(tenants: &Tenants, parts: &Parts) -> Result<Caller, ApiError> {
    for name in ["x-auth-token", "x-access-token"] {
        if let Some(token) = header(parts, name) {
            return match tenants.tenant_for_access_token(token) {
                Some(tenant) => Ok(Caller {
                    user_id: tenant.0.clone(),
                    tenant,
                    delegated_for: None,
                }),
                None => Err(ApiError::unauthorized("invalid api key")),
            };
        }
    }
    let Some(key) = header(parts, "x-api-key") else {
        return Err(ApiError::unauthorized("missing credentials"));
    };
    if looks_like_jwt(key) {
        return Err(ApiError::unauthorized("invalid api key"));
    }
    if key.starts_with("skp_sb_") {
        if let Some(t) = tenants.by_delegated_token(key) {
            return Ok(Caller {
                user_id: t.tenant.0.clone(),
                tenant: t.tenant,
                delegated_for: Some(t.sandbox_id),
            });
        }
    }
    match tenants.tenant_for_key(key) {
        Some(tenant) => Ok(Caller {
            user_id: tenant.0.clone(),
            tenant,
            delegated_for: None,
        }),
        None => Err(ApiError::unauthorized("invalid api key")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jwt_detection() {
        assert!(looks_like_jwt(&fake_jwt()));
        assert!(!looks_like_jwt("skp_abc"));
        assert!(!looks_like_jwt("a.b.c"));
    }

    #[test]
    fn refresh_rotation_and_reuse() {
        let t = Tenants::default();
        let tenant = t.add("k".into(), true);
        let first = t.open_oauth_session(tenant, Duration::from_secs(60));
        let second = t.refresh(&first.refresh_token).unwrap();
        assert_ne!(second.refresh_token, first.refresh_token);
        assert!(t.tenant_for_access_token(&second.access_token).is_some());
        assert!(t.tenant_for_access_token(&first.access_token).is_none());
        assert!(matches!(
            t.refresh(&first.refresh_token),
            Err(RefreshError::Reused)
        ));
        // The whole session is revoked after reuse.
        assert!(t.refresh(&second.refresh_token).is_err());
        assert!(t.tenant_for_access_token(&second.access_token).is_none());
    }
}
