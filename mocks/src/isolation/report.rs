//! What the emulator isolates, as it reports it: in the ready line (`"isolation"`), at
//! `GET /_mock/isolation`, and through `MockHandle::isolation` for an in-process emulator.

use serde::{Deserialize, Serialize};

/// The isolation actually in effect after startup probing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationKind {
    Namespaces,
    Fallback,
}

/// The isolation in effect. `isolated` is true only when sandboxes are a boundary: their
/// own user, PID, mount and network namespaces, the host's root read-only, seccomp.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsolationReport {
    pub isolated: bool,
    /// How sandboxes are kept apart, in a few words.
    pub mechanism: String,
    /// What is not isolated (empty when `isolated`).
    pub missing: Vec<String>,
}

impl IsolationReport {
    /// Everything a plain host process shares with the host.
    pub fn none(mechanism: &str) -> IsolationReport {
        IsolationReport {
            isolated: false,
            mechanism: mechanism.to_string(),
            missing: [
                "user namespace: commands run as the emulator's own user",
                "pid namespace: host processes are visible",
                "mount namespace: host files outside the sandbox directory are readable and writable",
                "network namespace: sandboxes share the host network",
                "seccomp filter",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
        }
    }
}
