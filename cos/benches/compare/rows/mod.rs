//! The rows of the comparison. A row is one module with a `row()` returning a [`Row`]: it sets
//! up its contenders, samples them alternately (`interleave::alternate`) and returns its
//! comparisons. Adding a row = adding a module and one line to [`all`]. A row that cannot take
//! one of its measurements in this run (a tool the server does not serve yet, say) records it
//! with `Bench::note_pending` instead of failing.

mod attach;
mod exec;
mod mcp;
mod mcp_client;
mod shellout;
mod snapshot;
mod ssh_setup;
mod stream;
mod sync;
mod transfer;
mod wan;

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

/// Every row, in table order (latency rows first, bulk transfers last). Every row shares one
/// bench sandbox and one emulator. (Exec latency used to grow once the stream row had left
/// hundreds of MiB of journaled output in the emulator: each fork copied its page tables. The
/// journal now lives in memory left out of forked children; see `mocks/src/process/arena.rs`.)
pub fn all() -> Vec<Row> {
    vec![
        exec::row(),
        stream::row(),
        attach::row(),
        mcp::row(),
        wan::row(),
        snapshot::row(),
        transfer::row(),
        sync::row(),
    ]
}
