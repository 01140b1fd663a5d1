//! The rows of the comparison. A row is one module with a `row()` returning a [`Row`]: it sets
//! up its contenders, samples them alternately (`interleave::alternate`) and returns its
//! comparisons. Adding a row = adding a module and one line to [`all`]. A row that cannot take
//! one of its measurements in this run (a tool the server does not serve yet, say) records it
//! with `Bench::note_pending` instead of failing.

mod attach;
mod exec;
mod mcp;
mod shellout;
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

/// Every row, in table order (latency rows first, bulk transfers last). Note: every row shares
/// one bench sandbox, and exec latency against the emulator was seen to grow as earlier rows
/// pile up processes in it (the `cos mcp` row measures ~15 ms per call alone, ~140 ms after the
/// exec/stream/attach rows), so a row's absolute figures depend on what ran before it.
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
