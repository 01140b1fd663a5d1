//! Catalog and identity routes: healthz, readyz, whoami, shapes, rootfs, hosts.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use serde::Serialize;
use serde_json::json;

use crate::auth::Caller;
use crate::envelope::{ok, paginate, ApiError, PageQuery};
use crate::operation::{op, Operation};
use crate::state::AppState;

pub const OPERATIONS: &[Operation] = &[
    op("healthz", "GET", "/healthz", "catalog::healthz"),
    op("readyz", "GET", "/readyz", "catalog::readyz"),
    op("whoami", "GET", "/v1/whoami", "catalog::whoami"),
    op("listShapes", "GET", "/v1/shapes", "catalog::list_shapes"),
    op("listRootfs", "GET", "/v1/rootfs", "catalog::list_rootfs"),
    op("listHosts", "GET", "/v1/hosts", "catalog::list_hosts"),
];

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/v1/whoami", get(whoami))
        .route("/v1/shapes", get(list_shapes))
        .route("/v1/rootfs", get(list_rootfs))
        .route("/v1/hosts", get(list_hosts))
}

/// A VM size.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Shape {
    pub id: &'static str,
    pub vcpu: u32,
    pub mem_mib: u64,
    pub default_disk_mib: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_quota_pct: Option<u32>,
}

/// Root disk size every shape starts with (10 GiB).
pub const DEFAULT_DISK_MIB: u64 = 10240;

pub const SHAPES: &[Shape] = &[
    Shape {
        id: "s-1vcpu-256mb",
        vcpu: 1,
        mem_mib: 256,
        default_disk_mib: DEFAULT_DISK_MIB,
        cpu_quota_pct: Some(50),
    },
    Shape {
        id: "s-1vcpu-1gb",
        vcpu: 1,
        mem_mib: 1024,
        default_disk_mib: DEFAULT_DISK_MIB,
        cpu_quota_pct: None,
    },
    Shape {
        id: "s-2vcpu-2gb",
        vcpu: 2,
        mem_mib: 2048,
        default_disk_mib: DEFAULT_DISK_MIB,
        cpu_quota_pct: None,
    },
    Shape {
        id: "s-2vcpu-4gb",
        vcpu: 2,
        mem_mib: 4096,
        default_disk_mib: DEFAULT_DISK_MIB,
        cpu_quota_pct: None,
    },
    Shape {
        id: "s-4vcpu-4gb",
        vcpu: 4,
        mem_mib: 4096,
        default_disk_mib: DEFAULT_DISK_MIB,
        cpu_quota_pct: None,
    },
    Shape {
        id: "s-4vcpu-8gb",
        vcpu: 4,
        mem_mib: 8192,
        default_disk_mib: DEFAULT_DISK_MIB,
        cpu_quota_pct: None,
    },
];

pub fn shape(id: &str) -> Option<&'static Shape> {
    SHAPES.iter().find(|s| s.id == id)
}

/// A built-in base image.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RootfsEntry {
    pub name: &'static str,
    pub description: &'static str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deprecated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub successor: Option<&'static str>,
}

pub const DEFAULT_ROOTFS: &str = "devbox:1";

pub const ROOTFS: &[RootfsEntry] = &[
    RootfsEntry {
        name: "devbox:1",
        description: "Developer image with common tools and sshd",
        deprecated: false,
        successor: None,
    },
    RootfsEntry {
        name: "ubuntu:26.04",
        description: "Ubuntu 26.04",
        deprecated: false,
        successor: None,
    },
    RootfsEntry {
        name: "debian:13",
        description: "Debian 13",
        deprecated: false,
        successor: None,
    },
    RootfsEntry {
        name: "alpine:3.20",
        description: "Alpine Linux 3.20",
        deprecated: false,
        successor: None,
    },
    RootfsEntry {
        name: "desktop:1",
        description: "XFCE desktop for computer use",
        deprecated: false,
        successor: None,
    },
    RootfsEntry {
        name: "node",
        description: "Node.js image (deprecated)",
        deprecated: true,
        successor: Some("devbox:1"),
    },
];

/// Names that exist but are disabled (filtered from the catalog, rejected at create).
pub const DISABLED_ROOTFS: &[&str] = &["centos:7", "ubuntu:20.04"];

pub fn builtin_rootfs(name: &str) -> Option<&'static RootfsEntry> {
    ROOTFS.iter().find(|r| r.name == name)
}

pub async fn healthz() -> Response {
    ok(json!({"up": true}))
}

pub async fn readyz(State(state): State<AppState>) -> Response {
    if state.shutdown.is_cancelled() {
        return axum::response::IntoResponse::into_response(ApiError::fail(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"ready": false, "reason": "shutting down"}),
        ));
    }
    ok(json!({"ready": true}))
}

pub async fn whoami(State(state): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let (running, paused, other, total) = state.sandboxes.stats_of(&caller.tenant);
    Ok(ok(json!({
        "user_id": caller.user_id,
        "stats": {"running": running, "paused": paused, "other": other, "total": total},
    })))
}

pub async fn list_shapes(Query(q): Query<PageQuery>) -> Result<Response, ApiError> {
    paginate(SHAPES.to_vec(), &q)
}

pub async fn list_rootfs() -> Response {
    ok(json!({
        "rootfs": ROOTFS.iter().map(|r| r.name).collect::<Vec<_>>(),
        "default": DEFAULT_ROOTFS,
        "entries": ROOTFS,
    }))
}

pub async fn list_hosts(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<PageQuery>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let vm_count = state
        .sandboxes
        .all()
        .iter()
        .filter(|s| {
            matches!(
                s.status(),
                crate::sandbox::Status::Running
                    | crate::sandbox::Status::Pausing
                    | crate::sandbox::Status::Resuming
                    | crate::sandbox::Status::Forking
            )
        })
        .count();
    let host = json!({
        "id": "host-local",
        "status": "active",
        "free_mib": free_memory_mib(),
        "vm_count": vm_count,
        "rootfses": ROOTFS.iter().map(|r| r.name).collect::<Vec<_>>(),
    });
    paginate(vec![host], &q)
}

/// Available memory of this machine in MiB.
fn free_memory_mib() -> u64 {
    #[cfg(target_os = "linux")]
    {
        if let Ok(info) = std::fs::read_to_string("/proc/meminfo") {
            if let Some(kb) = info
                .lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
            {
                return kb / 1024;
            }
        }
    }
    // SAFETY: sysconf has no preconditions.
    let (pages, page_size) = unsafe {
        (
            nix::libc::sysconf(nix::libc::_SC_PHYS_PAGES),
            nix::libc::sysconf(nix::libc::_SC_PAGESIZE),
        )
    };
    if pages > 0 && page_size > 0 {
        (pages as u64 * page_size as u64) >> 20
    } else {
        0
    }
}
