//! The checks every computer route makes before touching a desktop (sandbox visible to
//! the caller → image has a desktop → sandbox running → desktop booted), the mapping of
//! desktop errors to HTTP, and query-string helpers.

use axum::extract::rejection::QueryRejection;
use axum::extract::Query;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::json;

use super::model::{parse_screen_id, DesktopError};
use super::{lock_desktop, DesktopCell};
use crate::auth::Caller;
use crate::envelope::ApiError;
use crate::sandbox::{SandboxRef, Status};
use crate::state::AppState;

/// The only image that ships the desktop stack.
pub const DESKTOP_ROOTFS: &str = "desktop:1";
/// The string code of every 409 coming from the desktop itself.
pub const DESKTOP_UNAVAILABLE: &str = "desktop_unavailable";

/// A sandbox whose desktop is up, and that desktop.
pub struct DesktopAccess {
    pub sandbox: SandboxRef,
    pub desktop: DesktopCell,
}

impl DesktopAccess {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, super::desktop::Desktop> {
        lock_desktop(&self.desktop)
    }
}

/// 409 `{"desktop": msg, "code": "desktop_unavailable"}`.
pub fn desktop_unavailable(msg: impl Into<String>) -> ApiError {
    ApiError::fail(
        StatusCode::CONFLICT,
        json!({"desktop": msg.into(), "code": DESKTOP_UNAVAILABLE}),
    )
}

impl From<DesktopError> for ApiError {
    fn from(err: DesktopError) -> Self {
        match err {
            DesktopError::Invalid { field, message } => ApiError::validation(field, message),
            DesktopError::ScreenNotFound => ApiError::not_found("screen", "screen not found"),
            DesktopError::WindowNotFound => ApiError::not_found("window", "window not found"),
            DesktopError::NoActiveWindow => ApiError::not_found("window", "no active window"),
            DesktopError::ActionFailed(msg) => desktop_unavailable(msg),
            DesktopError::ScreenLimit => ApiError::conflict_on("screen", err.to_string()),
        }
    }
}

/// Resolves the sandbox and its desktop: 404 unknown/foreign sandbox, 501 image without
/// desktop tools, 409 `desktop_unavailable` while the sandbox is not running or its
/// desktop is still starting.
pub fn open(state: &AppState, caller: &Caller, id: &str) -> Result<DesktopAccess, ApiError> {
    let sandbox = state.sandbox_for(caller, id)?;
    let (rootfs, status, running_at) = {
        let r = sandbox.record();
        (r.rootfs.clone(), r.status, r.running_at)
    };
    if rootfs != DESKTOP_ROOTFS {
        return Err(ApiError::error(
            StatusCode::NOT_IMPLEMENTED,
            format!("computer use requires the {DESKTOP_ROOTFS} image"),
        ));
    }
    if status != Status::Running {
        return Err(ApiError::fail(
            StatusCode::CONFLICT,
            json!({"sandbox": "sandbox is not running", "code": DESKTOP_UNAVAILABLE}),
        ));
    }
    let delay = state.computer.startup_delay();
    if !delay.is_zero() {
        let started = running_at.unwrap_or_else(crate::clock::now);
        let up_at = time::Duration::try_from(delay)
            .ok()
            .and_then(|d| started.checked_add(d));
        if up_at.is_none_or(|t| crate::clock::now() < t) {
            return Err(desktop_unavailable("desktop is starting"));
        }
    }
    sandbox.touch();
    let desktop = state.computer.desktop(&sandbox.id);
    Ok(DesktopAccess { sandbox, desktop })
}

/// A query string, with JSend 400 instead of axum's plain-text rejection.
pub fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(v)| v)
        .map_err(|e| ApiError::validation("query", e.body_text()))
}

/// `?screen_id=` of every route outside the screens sub-resource.
#[derive(Debug, Default, Deserialize)]
pub struct ScreenQuery {
    pub screen_id: Option<String>,
}

/// The selected screen number (`screen-0` when absent or empty).
pub fn screen_number(raw: Option<&str>) -> Result<u8, ApiError> {
    match raw.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(0),
        Some(s) => Ok(parse_screen_id(s)?),
    }
}

/// 400 `{field: "<field> is required"}` for a missing body field.
pub fn required<T>(field: &'static str, v: Option<T>) -> Result<T, ApiError> {
    v.ok_or_else(|| ApiError::validation(field, format!("{field} is required")))
}
