//! Tenant-scoped resources beside sandboxes: networks, disks, templates, delegated
//! access tokens, metrics and devices/VPN. The stores the shared state holds are in
//! [`store`]; the kind modules hold the handlers, and [`routes`] gathers their routes.

pub mod devices;
pub mod disks;
pub mod metrics;
pub mod networks;
pub mod routes;
pub mod store;
pub mod templates;
pub mod tokens;

pub use store::Resources;
