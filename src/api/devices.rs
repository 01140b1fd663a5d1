//! Devices and VPN sessions (E98–E107): a user's machine joins sandbox networks over WireGuard.
//!
//! The machine generates its Curve25519 key pair locally and registers only the public key; the
//! server's session config leaves the `PrivateKey` out and [`DeviceSession::config_with_private_key`]
//! puts it back on the machine.

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::endpoints as ep;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::pagination::{extract_page, Paginated};
use crate::transport::Call;
use crate::validate;

/// Longest device name, hostname or OS string this client sends.
pub const MAX_DEVICE_FIELD: usize = 128;

/// A registered device.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// Device id.
    pub id: String,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Its VPN address (in 100.64.0.0/10).
    #[serde(default)]
    pub client_ip: String,
    /// WireGuard public key (base64).
    #[serde(default)]
    pub pubkey: String,
    /// Hostname of the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// Operating system of the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// RFC 3339 registration time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// RFC 3339 time of the last session activity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<String>,
}

/// A network a device may reach (E103).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceNetwork {
    /// Network id.
    pub network_id: String,
    /// Network name.
    #[serde(default)]
    pub network_name: String,
    /// RFC 3339 attach time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached_at: Option<String>,
}

/// An open VPN session (E105).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSession {
    /// Session id.
    pub session_id: String,
    /// Device id.
    #[serde(default)]
    pub device_id: String,
    /// Relay host the tunnel goes through.
    #[serde(default)]
    pub relay_host_id: String,
    /// wg-quick configuration without the `PrivateKey` line.
    #[serde(default)]
    pub client_config: String,
    /// RFC 3339 expiry; renew before it (about every half of the lifetime).
    #[serde(default)]
    pub expires_at: String,
}

/// Answer of a session renewal (E106).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRenewal {
    /// The new expiry, when the server says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

impl DeviceSession {
    /// The wg-quick configuration with `PrivateKey = <key>` as the first line of `[Interface]`
    /// (replacing any `PrivateKey` already there; adding the section when the config has none).
    /// The result holds a secret: write it to a file only the user can read.
    pub fn config_with_private_key(&self, key: &str) -> String {
        let key_line = format!("PrivateKey = {}", key.trim());
        let mut out: Vec<String> = Vec::new();
        let mut in_interface = false;
        let mut inserted = false;
        for line in self.client_config.lines() {
            let trimmed = line.trim();
            if trimmed.starts_with('[') {
                in_interface = trimmed.eq_ignore_ascii_case("[interface]");
                out.push(line.to_string());
                if in_interface && !inserted {
                    out.push(key_line.clone());
                    inserted = true;
                }
                continue;
            }
            let is_private_key = trimmed
                .split_once('=')
                .is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case("privatekey"));
            if in_interface && is_private_key {
                continue;
            }
            out.push(line.to_string());
        }
        if !inserted {
            out.insert(0, key_line);
            out.insert(0, "[Interface]".to_string());
        }
        let mut text = out.join("\n");
        text.push('\n');
        text
    }
}

/// A WireGuard public key: standard base64 of exactly 32 bytes.
pub fn validate_pubkey(pubkey: &str) -> Result<()> {
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(pubkey.trim())
        .map_err(|_| Error::invalid("pubkey", "is not standard base64 (a WireGuard public key looks like `xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=`)"))?;
    if decoded.len() != 32 {
        return Err(Error::invalid(
            "pubkey",
            format!("decodes to {} bytes; a Curve25519 key is 32", decoded.len()),
        ));
    }
    Ok(())
}

fn validate_text(field: &str, value: &str, required: bool) -> Result<()> {
    if required && value.trim().is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if value.len() > MAX_DEVICE_FIELD {
        return Err(Error::invalid(
            field,
            format!("is longer than {MAX_DEVICE_FIELD} bytes"),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(Error::invalid(field, "contains control characters"));
    }
    Ok(())
}

impl Client {
    /// Register this machine's WireGuard public key (E98). The private key stays local.
    ///
    /// ```no_run
    /// # async fn demo(client: createos_sandbox::Client) -> createos_sandbox::Result<()> {
    /// let device = client
    ///     .register_device("laptop", "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=", Some("my-laptop"), Some("linux"))
    ///     .await?;
    /// client.attach_device_network(&device.id, "backend").await?;
    /// let session = client.open_device_session(&device.id).await?;
    /// let conf = session.config_with_private_key("<local private key>");
    /// # let _ = conf;
    /// # Ok(()) }
    /// ```
    pub async fn register_device(
        &self,
        name: &str,
        pubkey: &str,
        hostname: Option<&str>,
        os: Option<&str>,
    ) -> Result<Device> {
        validate_text("name", name, true)?;
        validate_pubkey(pubkey)?;
        if let Some(h) = hostname {
            validate_text("hostname", h, false)?;
        }
        if let Some(o) = os {
            validate_text("os", o, false)?;
        }
        let mut body = serde_json::json!({ "name": name, "pubkey": pubkey.trim() });
        if let Some(h) = hostname {
            body["hostname"] = h.into();
        }
        if let Some(o) = os {
            body["os"] = o.into();
        }
        self.transport
            .json(Call::new(&ep::REGISTER_DEVICE).json(&body)?)
            .await
    }

    /// Every registered device (E99).
    pub fn list_devices(&self) -> Paginated<Device> {
        Paginated::new(self.transport.clone(), || Call::new(&ep::LIST_DEVICES))
    }

    /// A device by id (E100).
    pub async fn get_device(&self, device_id: &str) -> Result<Device> {
        validate::id("device_id", device_id)?;
        self.transport
            .json(Call::new(&ep::GET_DEVICE).param(device_id))
            .await
    }

    /// Revoke a device (E101): its sessions and network links go with it.
    pub async fn revoke_device(&self, device_id: &str) -> Result<()> {
        validate::id("device_id", device_id)?;
        self.transport
            .json::<Value>(Call::new(&ep::REVOKE_DEVICE).param(device_id))
            .await
            .map(drop)
    }

    /// Let a device reach a network given by id or name (E102).
    pub async fn attach_device_network(&self, device_id: &str, network: &str) -> Result<()> {
        validate::id("device_id", device_id)?;
        validate::id("network", network)?;
        let call = Call::new(&ep::ATTACH_DEVICE_NETWORK)
            .param(device_id)
            .json(&serde_json::json!({ "network_id": network }))?;
        self.transport.json::<Value>(call).await.map(drop)
    }

    /// Networks a device may reach (E103).
    pub async fn list_device_networks(&self, device_id: &str) -> Result<Vec<DeviceNetwork>> {
        validate::id("device_id", device_id)?;
        let call = Call::new(&ep::LIST_DEVICE_NETWORKS).param(device_id);
        let label = call.endpoint.label();
        let data: Value = self.transport.json(call).await?;
        // A bare array today; the list shapes of the other routes are accepted too.
        Ok(extract_page::<DeviceNetwork>(&label, data)?.items)
    }

    /// Stop a device reaching a network given by id or name (E104).
    pub async fn detach_device_network(&self, device_id: &str, network: &str) -> Result<()> {
        validate::id("device_id", device_id)?;
        validate::id("network", network)?;
        let call = Call::new(&ep::DETACH_DEVICE_NETWORK)
            .param(device_id)
            .param(network);
        self.transport.json::<Value>(call).await.map(drop)
    }

    /// Open a VPN session (E105). Renew it with [`Self::renew_device_session`] before
    /// `expires_at`.
    pub async fn open_device_session(&self, device_id: &str) -> Result<DeviceSession> {
        validate::id("device_id", device_id)?;
        self.transport
            .json(Call::new(&ep::OPEN_DEVICE_SESSION).param(device_id))
            .await
    }

    /// Push a session's expiry forward by one server lifetime (E106). A 404 means the session is
    /// gone: tear the local tunnel down.
    pub async fn renew_device_session(
        &self,
        device_id: &str,
        session_id: &str,
    ) -> Result<SessionRenewal> {
        validate::id("device_id", device_id)?;
        validate::id("session_id", session_id)?;
        let call = Call::new(&ep::RENEW_DEVICE_SESSION)
            .param(device_id)
            .param(session_id);
        let data: Value = self.transport.json(call).await?;
        Ok(SessionRenewal {
            expires_at: data
                .get("expires_at")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }

    /// Close a session (E107).
    pub async fn close_device_session(&self, device_id: &str, session_id: &str) -> Result<()> {
        validate::id("device_id", device_id)?;
        validate::id("session_id", session_id)?;
        let call = Call::new(&ep::CLOSE_DEVICE_SESSION)
            .param(device_id)
            .param(session_id);
        self.transport.json::<Value>(call).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";

    #[test]
    fn pubkeys() {
        assert!(validate_pubkey(KEY).is_ok());
        assert!(validate_pubkey("not base64!").is_err());
        assert!(validate_pubkey("AAAA").is_err(), "3 bytes");
        assert!(
            validate_pubkey(&KEY.replace('=', "")).is_err(),
            "padding is part of standard base64"
        );
    }

    #[test]
    fn private_key_goes_into_interface() {
        let session = DeviceSession {
            client_config: "[Interface]\nAddress = 100.64.0.2/32\n\n[Peer]\nPublicKey = abc=\nEndpoint = relay:51820\n".into(),
            ..Default::default()
        };
        let conf = session.config_with_private_key("PRIV=");
        assert_eq!(
            conf,
            "[Interface]\nPrivateKey = PRIV=\nAddress = 100.64.0.2/32\n\n[Peer]\nPublicKey = abc=\nEndpoint = relay:51820\n"
        );
        // An existing PrivateKey in [Interface] is replaced; the peer's keys are untouched.
        let session = DeviceSession {
            client_config: "[interface]\nPrivateKey=old\n[Peer]\nPublicKey = p\n".into(),
            ..Default::default()
        };
        let conf = session.config_with_private_key("new");
        assert_eq!(
            conf,
            "[interface]\nPrivateKey = new\n[Peer]\nPublicKey = p\n"
        );
        // No [Interface] at all: one is added.
        let session = DeviceSession {
            client_config: "[Peer]\nPublicKey = p".into(),
            ..Default::default()
        };
        assert!(session
            .config_with_private_key("k")
            .starts_with("[Interface]\nPrivateKey = k\n[Peer]"));
    }
}
