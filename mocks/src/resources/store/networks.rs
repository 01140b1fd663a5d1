//! The private networks store (E38–E43): tenant-scoped rows addressed by id or name.

use std::sync::RwLock;

use time::OffsetDateTime;

use crate::auth::TenantId;

#[derive(Debug, Clone)]
pub struct NetworkRecord {
    pub id: String,
    pub tenant: TenantId,
    pub name: String,
    pub created_at: OffsetDateTime,
}

#[derive(Debug, Default)]
pub struct Networks {
    pub(crate) rows: RwLock<Vec<NetworkRecord>>,
}

impl Networks {
    pub(crate) fn find(&self, tenant: &TenantId, id_or_name: &str) -> Option<NetworkRecord> {
        let rows = self.rows.read().unwrap_or_else(|e| e.into_inner());
        rows.iter()
            .find(|n| &n.tenant == tenant && n.id == id_or_name)
            .or_else(|| {
                rows.iter()
                    .find(|n| &n.tenant == tenant && n.name == id_or_name)
            })
            .cloned()
    }

    /// The id of the caller's network `id_or_name`.
    pub fn resolve(&self, tenant: &TenantId, id_or_name: &str) -> Option<String> {
        self.find(tenant, id_or_name).map(|n| n.id)
    }

    /// `(id, name)` of a network by id or name.
    pub fn lookup(&self, tenant: &TenantId, id_or_name: &str) -> Option<(String, String)> {
        self.find(tenant, id_or_name).map(|n| (n.id, n.name))
    }

    pub(crate) fn of_tenant(&self, tenant: &TenantId) -> Vec<NetworkRecord> {
        let rows = self.rows.read().unwrap_or_else(|e| e.into_inner());
        rows.iter()
            .filter(|n| &n.tenant == tenant)
            .cloned()
            .collect()
    }
}
