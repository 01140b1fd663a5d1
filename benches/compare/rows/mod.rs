//! The rows of the comparison. A row is one module with a `row()` returning a [`Row`]: it sets
//! up its contenders, samples them alternately (`interleave::alternate`) and returns its
//! comparisons. Adding a row = adding a module and one line to [`all`]. A row that cannot take
//! one of its measurements in this run (a tool the server does not serve yet, say) records it
//! with `Bench::note_pending` instead of failing.

mod attach;
mod exec;
mod mcp;
mod snapshot;
mod ssh_setup;
mod stream;
mod sync;
mod transfer;

use futures::future::BoxFuture;

use crate::env::{Bench, Sizes};
use crate::stats::Comparison;

/// Runs a row against the shared bench state.
pub type RunRow = for<'a> fn(&'a Bench) -> BoxFuture<'a, anyhow::Result<Vec<Comparison>>>;

pub struct Row {
    /// Short id, for `COS_BENCH_ONLY=id,id`.
    pub id: &'static str,
    /// Heading in BENCHMARKS.md.
    pub title: &'static str,
    /// How the row measures, for BENCHMARKS.md (Markdown).
    pub method: fn(&Sizes) -> String,
    pub run: RunRow,
}

/// Every row, in table order. The latency rows run before the bulk ones: after the transfer
/// and sync rows have driven thousands of operations through the one bench sandbox, every exec
/// against the emulator was seen to take several times longer, which is not what those rows
/// measure.
pub fn all() -> Vec<Row> {
    vec![
        exec::row(),
        stream::row(),
        attach::row(),
        mcp::row(),
        snapshot::row(),
        transfer::row(),
        sync::row(),
    ]
}
