//! Computer-use (desktop) routes — owned by helper M2; placeholder until M2 lands.

use axum::Router;

use crate::app::AppState;
use crate::routes::Operation;

#[derive(Default)]
pub struct Desktops;

impl Desktops {
    pub fn forget(&self, _id: &str) {}
}

pub fn routes() -> Router<AppState> {
    Router::new()
}

pub const OPERATIONS: &[Operation] = &[];
