//! (filled in step 2)
use axum::Router;
use crate::app::AppState;
use crate::routes::Operation;
pub const OPERATIONS: &[Operation] = &[];
pub fn routes() -> Router<AppState> { Router::new() }
