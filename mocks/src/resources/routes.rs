//! The routes and the operation table of every resource kind.

use axum::Router;

use super::{devices, disks, metrics, networks, templates, tokens};
use crate::operation::Operation;
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(networks::routes())
        .merge(disks::routes())
        .merge(templates::routes())
        .merge(tokens::routes())
        .merge(metrics::routes())
        .merge(devices::routes())
}

/// Operations of every resource module, concatenated at compile time.
pub const OPERATIONS: &[Operation] = &concat_ops();

const fn concat_ops() -> [Operation; OPS_LEN] {
    let tables: [&[Operation]; 6] = [
        networks::OPERATIONS,
        disks::OPERATIONS,
        templates::OPERATIONS,
        tokens::OPERATIONS,
        metrics::OPERATIONS,
        devices::OPERATIONS,
    ];
    let mut out = [crate::operation::op("", "", "", ""); OPS_LEN];
    let mut n = 0;
    let mut t = 0;
    while t < tables.len() {
        let mut i = 0;
        while i < tables[t].len() {
            out[n] = tables[t][i];
            n += 1;
            i += 1;
        }
        t += 1;
    }
    out
}

const OPS_LEN: usize = networks::OPERATIONS.len()
    + disks::OPERATIONS.len()
    + templates::OPERATIONS.len()
    + tokens::OPERATIONS.len()
    + metrics::OPERATIONS.len()
    + devices::OPERATIONS.len();
