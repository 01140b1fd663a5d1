//! Private networks (E38–E43): sandboxes on the same network reach each other by name; networks
//! are isolated from one another.

use serde::{Deserialize, Serialize};

use crate::api::endpoints as ep;
use crate::api::sandboxes::{Sandbox, SandboxStatus};
use crate::api::OkResponse;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::pagination::Paginated;
use crate::transport::Call;
use crate::validate;

/// Longest network name this client sends.
pub const MAX_NETWORK_NAME: usize = 63;

/// A private network.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    /// `net-…` id.
    pub id: String,
    /// Name, unique per account; usable in place of the id.
    #[serde(default)]
    pub name: String,
    /// RFC 3339 creation time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// Members (in lists and the create answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_count: Option<u64>,
    /// Members (only in [`Client::get_network`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<NetworkMember>>,
}

/// A sandbox on a network.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkMember {
    /// Sandbox id.
    pub sandbox_id: String,
    /// The sandbox's status.
    #[serde(default)]
    pub status: SandboxStatus,
    /// Its address on the network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// Its name (the hostname other members use).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A network name: 1–63 of letters, digits, `-`, `_`, `.`, starting with a letter or digit (names
/// stand in for ids in paths, so they must be usable as one).
pub fn validate_network_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NETWORK_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "name",
            format!("{name:?} must be 1-{MAX_NETWORK_NAME} letters, digits, '-', '_' or '.', starting with a letter or digit"),
        ))
    }
}

impl Client {
    /// Every network of the account (E38), with member counts.
    ///
    /// ```no_run
    /// # async fn demo(client: createos_sandbox::Client) -> createos_sandbox::Result<()> {
    /// for net in client.list_networks().collect_all().await? {
    ///     println!("{} {} ({} members)", net.id, net.name, net.member_count.unwrap_or(0));
    /// }
    /// # Ok(()) }
    /// ```
    pub fn list_networks(&self) -> Paginated<Network> {
        Paginated::new(self.transport.clone(), || Call::new(&ep::LIST_NETWORKS))
    }

    /// Create a network (E39). Names are unique per account; costs credit (402 without).
    ///
    /// ```no_run
    /// # async fn demo(client: createos_sandbox::Client) -> createos_sandbox::Result<()> {
    /// let net = client.create_network("backend").await?;
    /// let sandbox = client.get_sandbox("sb-01J…").await?;
    /// sandbox.attach_network(&net.id).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_network(&self, name: &str) -> Result<Network> {
        validate_network_name(name)?;
        let call = Call::new(&ep::CREATE_NETWORK).json(&serde_json::json!({ "name": name }))?;
        self.transport.json(call).await
    }

    /// A network by id or name, with its members (E40).
    pub async fn get_network(&self, id_or_name: &str) -> Result<Network> {
        validate::id("network", id_or_name)?;
        self.transport
            .json(Call::new(&ep::GET_NETWORK).param(id_or_name))
            .await
    }

    /// Delete a network by id or name (E41). Refused while sandboxes are members (right after
    /// the last detach the server may still report it in use for a moment).
    pub async fn delete_network(&self, id_or_name: &str) -> Result<OkResponse> {
        validate::id("network", id_or_name)?;
        self.transport
            .json(Call::new(&ep::DELETE_NETWORK).param(id_or_name))
            .await
    }
}

impl Sandbox {
    /// Join a network by id or name (E42).
    pub async fn attach_network(&self, network: &str) -> Result<OkResponse> {
        validate::id("network", network)?;
        let call = Call::new(&ep::ATTACH_NETWORK)
            .param(self.id())
            .json(&serde_json::json!({ "id": network }))?;
        self.client.transport.json(call).await
    }

    /// Leave a network given by id or name (E43).
    pub async fn detach_network(&self, network: &str) -> Result<OkResponse> {
        validate::id("network", network)?;
        let call = Call::new(&ep::DETACH_NETWORK)
            .param(self.id())
            .param(network);
        self.client.transport.json(call).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["backend", "net-1", "a", "Team_A.dev"] {
            assert!(validate_network_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-x", ".x", "a b", "a/b", &"n".repeat(64)] {
            assert!(validate_network_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn network_detail_decodes() {
        let n: Network = serde_json::from_str(
            r#"{"id":"net-1","name":"a","members":[{"sandbox_id":"sb-1","status":"paused","ip":"10.0.0.2"}]}"#,
        )
        .unwrap();
        let m = &n.members.unwrap()[0];
        assert_eq!(m.status, SandboxStatus::Paused);
        assert_eq!(m.ip.as_deref(), Some("10.0.0.2"));
    }
}
