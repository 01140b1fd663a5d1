//! The S3-backed disks store (E44–E51): configs and write-only credentials per tenant.

use std::sync::RwLock;

use serde::Deserialize;
use time::OffsetDateTime;

use crate::auth::TenantId;

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
pub struct DiskConfig {
    #[serde(default)]
    pub bucket: String,
    #[serde(default)]
    pub endpoint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_path_style: Option<bool>,
}

#[derive(Clone, Default, Deserialize)]
pub struct DiskCredentials {
    pub access_key: Option<String>,
    pub secret_key: Option<String>,
}

impl std::fmt::Debug for DiskCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DiskCredentials(<redacted>)")
    }
}

#[derive(Debug, Clone)]
pub struct DiskRecord {
    pub id: String,
    pub tenant: TenantId,
    pub name: String,
    pub config: DiskConfig,
    /// Stored like the real service does (write-only); the emulator never contacts a
    /// bucket, so nothing reads them back.
    #[allow(dead_code)]
    pub(crate) credentials: DiskCredentials,
    pub created_at: OffsetDateTime,
}

#[derive(Debug, Default)]
pub struct Disks {
    pub(crate) rows: RwLock<Vec<DiskRecord>>,
}

impl Disks {
    pub(crate) fn find(&self, tenant: &TenantId, id_or_name: &str) -> Option<DiskRecord> {
        let rows = self.rows.read().unwrap_or_else(|e| e.into_inner());
        rows.iter()
            .find(|d| &d.tenant == tenant && d.id == id_or_name)
            .or_else(|| {
                rows.iter()
                    .find(|d| &d.tenant == tenant && d.name == id_or_name)
            })
            .cloned()
    }

    /// The id of the caller's disk `id_or_name`.
    pub fn resolve(&self, tenant: &TenantId, id_or_name: &str) -> Option<String> {
        self.find(tenant, id_or_name).map(|d| d.id)
    }

    pub(crate) fn by_id(&self, id: &str) -> Option<DiskRecord> {
        self.rows
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|d| d.id == id)
            .cloned()
    }
}
