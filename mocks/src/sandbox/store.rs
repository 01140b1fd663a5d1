//! The table of every sandbox (all tenants), in creation order.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::RwLock;

use super::model::{SandboxRef, Status};
use crate::auth::TenantId;

#[derive(Debug)]
pub struct Sandboxes {
    /// Keyed by id; ids are monotonic ULIDs so iteration order = creation order.
    by_id: RwLock<BTreeMap<String, SandboxRef>>,
    next_ip: AtomicU32,
    created_total: AtomicU32,
}

impl Default for Sandboxes {
    fn default() -> Self {
        Sandboxes {
            by_id: RwLock::new(BTreeMap::new()),
            next_ip: AtomicU32::new(2),
            created_total: AtomicU32::new(0),
        }
    }
}

impl Sandboxes {
    pub fn insert(&self, entry: SandboxRef) {
        self.created_total.fetch_add(1, Ordering::Relaxed);
        self.by_id
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(entry.id.clone(), entry);
    }

    pub fn get(&self, id: &str) -> Option<SandboxRef> {
        self.by_id
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    /// Every sandbox (all tenants), creation order.
    pub fn all(&self) -> Vec<SandboxRef> {
        self.by_id
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// One tenant's sandboxes, creation order.
    pub fn of_tenant(&self, tenant: &TenantId) -> Vec<SandboxRef> {
        self.all()
            .into_iter()
            .filter(|s| &s.tenant == tenant)
            .collect()
    }

    /// True when a live sandbox of `tenant` (other than `except`) holds `name`.
    pub fn name_in_use(&self, tenant: &TenantId, name: &str, except: Option<&str>) -> bool {
        self.of_tenant(tenant).iter().any(|s| {
            Some(s.id.as_str()) != except && {
                let r = s.record();
                r.status.holds_name() && r.name == name
            }
        })
    }

    /// A fresh private IP `10.a.b.c` (never reused).
    pub fn allocate_ip(&self) -> String {
        let n = self.next_ip.fetch_add(1, Ordering::Relaxed);
        // Skip .0 and .255 host octets.
        let host = n % 254 + 1;
        let net = n / 254;
        format!("10.{}.{}.{}", (net >> 8) & 0xff, net & 0xff, host)
    }

    /// Sandboxes ever created (including forks).
    pub fn created_total(&self) -> u32 {
        self.created_total.load(Ordering::Relaxed)
    }

    /// Sandboxes not destroyed/failed.
    pub fn live_count(&self) -> usize {
        self.all()
            .iter()
            .filter(|s| !s.status().is_terminal())
            .count()
    }

    /// `{running, paused, other, total}` counts of one tenant (whoami, metrics);
    /// `total` counts every row that is not terminal.
    pub fn stats_of(&self, tenant: &TenantId) -> (usize, usize, usize, usize) {
        let (mut running, mut paused, mut other) = (0, 0, 0);
        for s in self.of_tenant(tenant) {
            match s.status() {
                Status::Running => running += 1,
                Status::Paused => paused += 1,
                st if st.is_terminal() => {}
                _ => other += 1,
            }
        }
        (running, paused, other, running + paused + other)
    }
}
