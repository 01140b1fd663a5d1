//! The devices store (E98–E107): registered WireGuard peers, their network attachments
//! and VPN sessions, plus the relay's identity.

use std::sync::RwLock;
use std::time::Instant;

use base64::Engine;
use time::OffsetDateTime;

use crate::auth::TenantId;
use crate::envelope::ApiError;

#[derive(Debug, Clone)]
pub(crate) struct Attachment {
    pub(crate) network_id: String,
    pub(crate) attached_at: OffsetDateTime,
}

#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) expires: Instant,
    pub(crate) expires_at: OffsetDateTime,
}

#[derive(Debug, Clone)]
pub(crate) struct DeviceRecord {
    pub(crate) id: String,
    pub(crate) tenant: TenantId,
    pub(crate) name: String,
    pub(crate) client_ip: String,
    pub(crate) pubkey: String,
    pub(crate) hostname: Option<String>,
    pub(crate) os: Option<String>,
    pub(crate) created_at: OffsetDateTime,
    pub(crate) last_seen_at: Option<OffsetDateTime>,
    pub(crate) networks: Vec<Attachment>,
    pub(crate) sessions: Vec<Session>,
}

/// Every registered device plus the relay's identity.
#[derive(Debug)]
pub struct Devices {
    pub(crate) rows: RwLock<Vec<DeviceRecord>>,
    pub(crate) next_ip: RwLock<u32>,
    /// The relay's WireGuard public key (random per emulator).
    pub(crate) relay_pubkey: String,
}

impl Default for Devices {
    fn default() -> Self {
        let mut key = [0u8; 32];
        rand::Rng::fill(&mut rand::thread_rng(), &mut key);
        Devices {
            rows: RwLock::default(),
            next_ip: RwLock::new(2),
            relay_pubkey: base64::engine::general_purpose::STANDARD.encode(key),
        }
    }
}

impl Devices {
    /// Drops every attachment to a deleted network.
    pub fn forget_network(&self, network_id: &str) {
        for d in self
            .rows
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
        {
            d.networks.retain(|a| a.network_id != network_id);
        }
    }

    /// Next address of 100.64.0.0/10 (100.64.0.1 is the relay).
    pub(crate) fn allocate_ip(&self) -> String {
        let mut next = self.next_ip.write().unwrap_or_else(|e| e.into_inner());
        let n = *next;
        *next += 1;
        let host = n % (1 << 22);
        format!(
            "100.{}.{}.{}",
            64 + (host >> 16),
            (host >> 8) & 0xff,
            host & 0xff
        )
    }

    pub(crate) fn with_device<R>(
        &self,
        tenant: &TenantId,
        id: &str,
        f: impl FnOnce(&mut DeviceRecord) -> Result<R, ApiError>,
    ) -> Result<R, ApiError> {
        let mut rows = self.rows.write().unwrap_or_else(|e| e.into_inner());
        let d = rows
            .iter_mut()
            .find(|d| &d.tenant == tenant && d.id == id)
            .ok_or_else(|| ApiError::not_found("device", "device not found"))?;
        f(d)
    }
}
