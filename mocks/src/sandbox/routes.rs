//! The sandbox-level routes (E7–E17, E34–E37): operation table and router.

use axum::routing::{get, post};
use axum::Router;

use super::{handlers, lifecycle};
use crate::operation::{op, Operation};
use crate::state::AppState;

pub const OPERATIONS: &[Operation] = &[
    op(
        "createSandbox",
        "POST",
        "/v1/sandboxes",
        "sandbox::create::create_sandbox",
    ),
    op(
        "listSandboxes",
        "GET",
        "/v1/sandboxes",
        "sandbox::handlers::list_sandboxes",
    ),
    op(
        "getSandbox",
        "GET",
        "/v1/sandboxes/{id}",
        "sandbox::handlers::get_sandbox",
    ),
    op(
        "getSandboxByIp",
        "GET",
        "/v1/sandboxes/by-ip/{ip}",
        "sandbox::handlers::get_sandbox_by_ip",
    ),
    op(
        "updateSandbox",
        "PATCH",
        "/v1/sandboxes/{id}",
        "sandbox::handlers::update_sandbox",
    ),
    op(
        "destroySandbox",
        "DELETE",
        "/v1/sandboxes/{id}",
        "sandbox::lifecycle::destroy_sandbox",
    ),
    op(
        "pauseSandbox",
        "POST",
        "/v1/sandboxes/{id}/pause",
        "sandbox::lifecycle::pause_sandbox",
    ),
    op(
        "resumeSandbox",
        "POST",
        "/v1/sandboxes/{id}/resume",
        "sandbox::lifecycle::resume_sandbox",
    ),
    op(
        "forkSandbox",
        "POST",
        "/v1/sandboxes/{id}/fork",
        "sandbox::lifecycle::fork_sandbox",
    ),
    op(
        "resizeSandbox",
        "POST",
        "/v1/sandboxes/{id}/resize",
        "sandbox::handlers::resize_sandbox",
    ),
    op(
        "addSshPubkeys",
        "POST",
        "/v1/sandboxes/{id}/ssh-pubkeys",
        "sandbox::handlers::add_ssh_pubkeys",
    ),
    op(
        "getEgress",
        "GET",
        "/v1/sandboxes/{id}/egress",
        "sandbox::handlers::get_egress",
    ),
    op(
        "setEgress",
        "PUT",
        "/v1/sandboxes/{id}/egress",
        "sandbox::handlers::set_egress",
    ),
    op(
        "getBandwidth",
        "GET",
        "/v1/sandboxes/{id}/bandwidth",
        "sandbox::handlers::get_bandwidth",
    ),
    op(
        "rechargeBandwidth",
        "POST",
        "/v1/sandboxes/{id}/bandwidth/recharge",
        "sandbox::handlers::recharge_bandwidth",
    ),
];

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/sandboxes",
            post(super::create::create_sandbox).get(handlers::list_sandboxes),
        )
        .route(
            "/v1/sandboxes/{id}",
            get(handlers::get_sandbox)
                .patch(handlers::update_sandbox)
                .delete(lifecycle::destroy_sandbox),
        )
        .route("/v1/sandboxes/by-ip/{ip}", get(handlers::get_sandbox_by_ip))
        .route("/v1/sandboxes/{id}/pause", post(lifecycle::pause_sandbox))
        .route("/v1/sandboxes/{id}/resume", post(lifecycle::resume_sandbox))
        .route("/v1/sandboxes/{id}/fork", post(lifecycle::fork_sandbox))
        .route("/v1/sandboxes/{id}/resize", post(handlers::resize_sandbox))
        .route(
            "/v1/sandboxes/{id}/ssh-pubkeys",
            post(handlers::add_ssh_pubkeys),
        )
        .route(
            "/v1/sandboxes/{id}/egress",
            get(handlers::get_egress).put(handlers::set_egress),
        )
        .route("/v1/sandboxes/{id}/bandwidth", get(handlers::get_bandwidth))
        .route(
            "/v1/sandboxes/{id}/bandwidth/recharge",
            post(handlers::recharge_bandwidth),
        )
}
