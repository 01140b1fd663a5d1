//! The stores of every resource kind the shared state holds. They import no route module:
//! the handlers (`resources::networks`, `disks`, …) read and change them.

pub mod devices;
pub mod disks;
pub mod metrics;
pub mod networks;
pub mod templates;

/// Stores of every resource kind.
#[derive(Debug, Default)]
pub struct Resources {
    pub networks: networks::Networks,
    pub disks: disks::Disks,
    pub templates: templates::Templates,
    pub metrics: metrics::Metrics,
    pub devices: devices::Devices,
}
