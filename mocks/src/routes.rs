//! The table of every operation the emulator serves (operationId, method, path, handler).

/// One served operation. `path` is the axum path template (`/v1/sandboxes/{id}`),
/// `handler` names the function serving it (`module::function`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operation {
    pub operation_id: &'static str,
    pub method: &'static str,
    pub path: &'static str,
    pub handler: &'static str,
}

/// Shorthand for building operation tables.
pub const fn op(
    operation_id: &'static str,
    method: &'static str,
    path: &'static str,
    handler: &'static str,
) -> Operation {
    Operation { operation_id, method, path, handler }
}

/// Every operation of every module.
pub fn all_operations() -> Vec<&'static Operation> {
    let tables: &[&'static [Operation]] = &[
        crate::catalog::OPERATIONS,
        crate::sandbox::OPERATIONS,
        crate::exec::OPERATIONS,
        crate::files::OPERATIONS,
        crate::resources::OPERATIONS,
        crate::computer::OPERATIONS,
        crate::process::OPERATIONS,
    ];
    tables.iter().flat_map(|t| t.iter()).collect()
}
