//! One served operation (operationId, method, path, handler), the row type of the
//! operation tables each route module declares. A leaf: it imports nothing of the crate.

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
    Operation {
        operation_id,
        method,
        path,
        handler,
    }
}
