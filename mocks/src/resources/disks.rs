//! (filled in step 2)
use axum::Router;
use crate::app::AppState;
use crate::auth::TenantId;
use crate::envelope::ApiError;
use crate::routes::Operation;
use crate::sandbox::{DiskMount, SandboxRef};
pub const OPERATIONS: &[Operation] = &[];
pub fn routes() -> Router<AppState> { Router::new() }
#[derive(Debug, Default)]
pub struct Disks;
impl Disks { pub fn resolve(&self, _t: &TenantId, _r: &str) -> Option<String> { None } }
pub fn mount_into(_s: &AppState, _e: &SandboxRef, _m: DiskMount) -> Result<(), ApiError> { Ok(()) }
