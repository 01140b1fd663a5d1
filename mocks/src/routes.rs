//! The table of every operation the emulator serves, gathered from the route modules'
//! tables, and the operationId lookup the traffic middleware counts requests by.

use std::collections::HashMap;
use std::sync::OnceLock;

pub use crate::operation::{op, Operation};

/// Every operation of every module.
pub fn all_operations() -> Vec<&'static Operation> {
    let tables: &[&'static [Operation]] = &[
        crate::catalog::OPERATIONS,
        crate::sandbox::routes::OPERATIONS,
        crate::exec::OPERATIONS,
        crate::files::OPERATIONS,
        crate::resources::routes::OPERATIONS,
        crate::computer::routes::OPERATIONS,
        crate::process::routes::OPERATIONS,
    ];
    tables.iter().flat_map(|t| t.iter()).collect()
}

/// operationId of a routed request (`"<METHOD> <path>"` for routes not in the table).
pub fn operation_id(method: &str, template: &str) -> String {
    static IDS: OnceLock<HashMap<(String, String), &'static str>> = OnceLock::new();
    IDS.get_or_init(|| {
        all_operations()
            .into_iter()
            .map(|op| {
                (
                    (op.method.to_string(), op.path.to_string()),
                    op.operation_id,
                )
            })
            .collect()
    })
    .get(&(method.to_string(), template.to_string()))
    .map(|s| s.to_string())
    .unwrap_or_else(|| format!("{method} {template}"))
}
