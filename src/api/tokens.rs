//! Sandbox-scoped delegated access tokens (E60–E63).
//!
//! The owner mints one token per sandbox (`skp_sb_…`); sent as an API key, it authorizes runtime
//! operations (exec, files, processes, …) on that sandbox only. The plaintext is returned once, by
//! create and rotate, and is held in a [`Secret`] so it never shows in `Debug` output or logs.

use serde::{Deserialize, Deserializer, Serialize};

use crate::api::endpoints as ep;
use crate::api::sandboxes::Sandbox;
use crate::auth::Secret;
use crate::error::Result;
use crate::transport::Call;

/// A freshly minted token (E60, E62). Store it now: the server never shows it again.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct AccessTokenCreated {
    /// The plaintext token; read it with [`Secret::expose`].
    #[serde(deserialize_with = "secret_from_string")]
    pub token: Secret,
    /// Whether the token is usable.
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// RFC 3339 creation time.
    #[serde(default)]
    pub created_at: Option<String>,
    /// RFC 3339 time of the last rotation.
    #[serde(default)]
    pub rotated_at: Option<String>,
}

impl AccessTokenCreated {
    /// The plaintext token, for the one place that needs it (a credential header or file).
    pub fn expose(&self) -> &str {
        self.token.expose()
    }
}

/// What the server tells about a sandbox's token without revealing it (E61, E63).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessTokenMetadata {
    /// Whether a token is enabled.
    #[serde(default)]
    pub enabled: bool,
    /// A redacted hint such as `skp_sb_…a1b2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_hint: Option<String>,
    /// RFC 3339 creation time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// RFC 3339 time of the last rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotated_at: Option<String>,
}

fn enabled_by_default() -> bool {
    true
}

fn secret_from_string<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Secret, D::Error> {
    String::deserialize(d).map(Secret::from)
}

impl Sandbox {
    /// Mint the delegated token of this sandbox (E60). Refused (409) when one is already enabled:
    /// use [`Self::rotate_access_token`] to replace it.
    ///
    /// ```no_run
    /// # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
    /// let created = sandbox.create_access_token().await?;
    /// let delegated = createos_sandbox::Client::builder().api_key(created.expose()).build()?;
    /// # let _ = delegated;
    /// println!("{:?}", created); // token prints as <redacted>
    /// # Ok(()) }
    /// ```
    pub async fn create_access_token(&self) -> Result<AccessTokenCreated> {
        self.client
            .transport
            .json(Call::new(&ep::CREATE_ACCESS_TOKEN).param(self.id()))
            .await
    }

    /// Whether the sandbox has a token, with a redacted hint (E61).
    pub async fn access_token(&self) -> Result<AccessTokenMetadata> {
        self.client
            .transport
            .json(Call::new(&ep::GET_ACCESS_TOKEN).param(self.id()))
            .await
    }

    /// Replace the token with a new one (E62); the old one stops working. 404 when there is none.
    pub async fn rotate_access_token(&self) -> Result<AccessTokenCreated> {
        self.client
            .transport
            .json(Call::new(&ep::ROTATE_ACCESS_TOKEN).param(self.id()))
            .await
    }

    /// Disable the token (E63). Succeeds when there is none.
    pub async fn revoke_access_token(&self) -> Result<AccessTokenMetadata> {
        self.client
            .transport
            .json(Call::new(&ep::REVOKE_ACCESS_TOKEN).param(self.id()))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plaintext_is_redacted_in_debug() {
        let created: AccessTokenCreated = serde_json::from_str(
            r#"{"token":"skp_sb_supersecret","created_at":"2026-01-01T00:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(created.expose(), "skp_sb_supersecret");
        assert!(created.enabled);
        let debug = format!("{created:?}");
        assert!(!debug.contains("supersecret"), "{debug}");
        assert!(debug.contains("<redacted>"));
    }
}
