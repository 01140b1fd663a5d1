//! The templates store (E52–E56): template rows, their build status and build log.

use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use serde_json::{json, Value};
use time::OffsetDateTime;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::auth::TenantId;
use crate::clock::{now, rfc3339};

/// Builds one tenant may run at once.
pub const MAX_CONCURRENT_BUILDS: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildStatus {
    Pending,
    Building,
    Ready,
    Failed,
    Cancelled,
}

impl BuildStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            BuildStatus::Pending => "pending",
            BuildStatus::Building => "building",
            BuildStatus::Ready => "ready",
            BuildStatus::Failed => "failed",
            BuildStatus::Cancelled => "cancelled",
        }
    }

    pub(crate) fn finished(self) -> bool {
        matches!(
            self,
            BuildStatus::Ready | BuildStatus::Failed | BuildStatus::Cancelled
        )
    }
}

#[derive(Debug, Clone)]
pub(crate) struct LogLine {
    pub(crate) ts: OffsetDateTime,
    pub(crate) level: &'static str,
    pub(crate) line: String,
    pub(crate) attempt: u32,
}

#[derive(Debug)]
pub(crate) struct TemplateState {
    pub(crate) status: BuildStatus,
    pub(crate) ext4_size_bytes: i64,
    pub(crate) built_at: Option<OffsetDateTime>,
    pub(crate) log: Vec<LogLine>,
}

#[derive(Debug)]
pub struct TemplateEntry {
    pub id: String,
    pub tenant: TenantId,
    pub name: String,
    pub base: String,
    pub dockerfile: String,
    pub created_at: OffsetDateTime,
    pub(crate) state: Mutex<TemplateState>,
    /// Wakes log followers on every new line and at the end.
    pub(crate) changed: Notify,
    pub(crate) cancel: CancellationToken,
}

impl TemplateEntry {
    pub(crate) fn lock(&self) -> MutexGuard<'_, TemplateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn status(&self) -> BuildStatus {
        self.lock().status
    }

    pub(crate) fn log(&self, level: &'static str, line: impl Into<String>) {
        self.lock().log.push(LogLine {
            ts: now(),
            level,
            line: line.into(),
            attempt: 1,
        });
        self.changed.notify_waiters();
    }

    pub(crate) fn set_status(&self, status: BuildStatus) {
        {
            let mut s = self.lock();
            if s.status.finished() {
                return;
            }
            s.status = status;
            if status == BuildStatus::Ready {
                s.built_at = Some(now());
            }
        }
        self.changed.notify_waiters();
    }

    pub(crate) fn view(&self, with_dockerfile: bool) -> Value {
        let s = self.lock();
        let status = if s.status == BuildStatus::Cancelled {
            BuildStatus::Failed
        } else {
            s.status
        };
        let mut v = json!({
            "id": self.id,
            "name": self.name,
            "base": self.base,
            "status": status.as_str(),
            "ext4_size_bytes": s.ext4_size_bytes,
            "created_at": rfc3339(self.created_at),
        });
        if let Some(t) = s.built_at {
            v["built_at"] = json!(rfc3339(t));
        }
        if with_dockerfile {
            v["dockerfile"] = json!(self.dockerfile);
        }
        v
    }
}

#[derive(Debug, Default)]
pub struct Templates {
    pub(crate) rows: RwLock<Vec<Arc<TemplateEntry>>>,
}

impl Templates {
    pub(crate) fn of_tenant(&self, tenant: &TenantId) -> Vec<Arc<TemplateEntry>> {
        self.rows
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|t| &t.tenant == tenant)
            .cloned()
            .collect()
    }

    /// By id, or the newest version of a name.
    pub(crate) fn find(&self, tenant: &TenantId, id_or_name: &str) -> Option<Arc<TemplateEntry>> {
        let mine = self.of_tenant(tenant);
        mine.iter()
            .find(|t| t.id == id_or_name)
            .cloned()
            .or_else(|| mine.iter().rev().find(|t| t.name == id_or_name).cloned())
    }

    /// For `rootfs` at create: `Some(Ok(template id))` when usable, `Some(Err(status))`
    /// when it exists but is not ready, `None` when unknown. A name selects its newest
    /// ready version.
    pub fn ready_rootfs(
        &self,
        tenant: &TenantId,
        id_or_name: &str,
    ) -> Option<Result<String, String>> {
        let mine = self.of_tenant(tenant);
        if let Some(t) = mine.iter().find(|t| t.id == id_or_name) {
            return Some(match t.status() {
                BuildStatus::Ready => Ok(t.id.clone()),
                other => Err(other.as_str().to_string()),
            });
        }
        let versions: Vec<&Arc<TemplateEntry>> =
            mine.iter().filter(|t| t.name == id_or_name).collect();
        if let Some(ready) = versions
            .iter()
            .rev()
            .find(|t| t.status() == BuildStatus::Ready)
        {
            return Some(Ok(ready.id.clone()));
        }
        versions
            .last()
            .map(|t| Err(t.status().as_str().to_string()))
    }

    pub(crate) fn remove(&self, ids: &[String]) {
        self.rows
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|t| !ids.contains(&t.id));
    }
}
