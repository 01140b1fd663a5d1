//! The rows of the comparison. A row is one module with a `row()` returning a [`Row`]: it sets
//! up its contenders, samples them alternately (`interleave::alternate`) and returns its
//! comparisons. Adding a row = adding a module and one line to [`all`].

mod attach;
mod exec;
mod snapshot;
mod stream;

use futures::future::BoxFuture;

use crate::env::{Bench, Sizes};
use crate::report::Pending;
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

/// Every row, in table order.
pub fn all() -> Vec<Row> {
    vec![exec::row(), stream::row(), attach::row(), snapshot::row()]
}

/// Rows of the plan that need parts of the project not built yet.
pub const PENDING: &[Pending] = &[
    Pending {
        title: "upload / download over SFTP vs `scp`",
        why: "not measured yet: the row comes with the SSH/SFTP transfer path, which is still being built",
    },
    Pending {
        title: "sync vs `rsync`",
        why: "not measured yet: the row comes with the sync engine, which is still being built",
    },
    Pending {
        title: "`cos mcp` resident memory and tool-call latency",
        why: "not measured yet: the row comes with the MCP server (`cos mcp`), which is still being built",
    },
];
