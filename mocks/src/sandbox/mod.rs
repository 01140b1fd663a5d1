//! Sandboxes: the row model, the store, create, lifecycle transitions and the
//! sandbox-level routes E7–E17 plus egress/bandwidth E34–E37 (table and router in
//! [`routes`]; `model`, `store` and `validate` import no route module).

mod create;
pub mod handlers;
pub mod lifecycle;
pub mod model;
pub mod routes;
mod store;
pub mod validate;

pub use create::{new_entry, DEFAULT_BANDWIDTH_QUOTA};
pub use model::{
    apply_status, ingress_template, DiskMount, SandboxEntry, SandboxRecord, SandboxRef, Status,
};
pub use store::Sandboxes;
