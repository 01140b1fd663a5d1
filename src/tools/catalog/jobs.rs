//! Catalog entries of the jobs tools.

use super::ToolDef;

/// The jobs tools.
pub(super) fn tools() -> Vec<ToolDef> {
    Vec::new()
}
