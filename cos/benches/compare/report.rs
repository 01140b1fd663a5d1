//! Rendering the results: an aligned text table for the terminal, the same table in Markdown,
//! the PASS/MISS lines, and the whole BENCHMARKS.md document. Pure string building.

use std::fmt::Write as _;

use crate::stats::{Comparison, Goal, Measure, Verdict};

/// Column headers, shared by both renderings.
const HEADERS: [&str; 10] = [
    "benchmark",
    "ours",
    "baseline",
    "n",
    "ours median",
    "ours tail",
    "baseline median",
    "baseline tail",
    "ratio",
    "goal",
];

/// A number with three significant digits (more integer digits are kept as they are).
pub fn sig3(value: f64) -> String {
    if !value.is_finite() {
        return "n/a".to_string();
    }
    let magnitude = value.abs();
    let decimals = if magnitude >= 100.0 || magnitude == 0.0 {
        0
    } else if magnitude >= 10.0 {
        1
    } else if magnitude >= 1.0 {
        2
    } else {
        // 0.0123 -> 4 decimals: keep three significant digits below 1
        (2 - magnitude.log10().floor() as i32).clamp(3, 9) as usize
    };
    format!("{value:.decimals$}")
}

/// The median of a side, with its unit.
pub fn median_cell(measure: &Measure) -> String {
    match *measure {
        Measure::Latency { median_ms, .. } => format!("{} ms", sig3(median_ms)),
        Measure::Throughput { median_mib_s, .. } => format!("{} MiB/s", sig3(median_mib_s)),
        Measure::Memory { median_mib, .. } => format!("{} MiB", sig3(median_mib)),
    }
}

/// The tail of a side: p99 for latencies, the slowest sample for throughput, the peak for memory.
pub fn tail_cell(measure: &Measure) -> String {
    match *measure {
        Measure::Latency { p99_ms, .. } => format!("p99 {} ms", sig3(p99_ms)),
        Measure::Throughput { worst_mib_s, .. } => format!("min {} MiB/s", sig3(worst_mib_s)),
        Measure::Memory { peak_mib, .. } => format!("peak {} MiB", sig3(peak_mib)),
    }
}

pub fn ratio_cell(ratio: Option<f64>) -> String {
    ratio.map_or_else(|| "n/a".to_string(), |r| format!("{}×", sig3(r)))
}

fn samples_cell(c: &Comparison) -> String {
    let (a, b) = (c.ours.measure.samples(), c.baseline.measure.samples());
    if a == b {
        a.to_string()
    } else {
        format!("{a}/{b}")
    }
}

/// The cells of one comparison, in [`HEADERS`] order.
pub fn cells(c: &Comparison) -> [String; 10] {
    let verdict = c.verdict();
    let goal = match verdict {
        Verdict::Info => c.goal.describe(),
        v => format!("{} {}", c.goal.describe(), v.label()),
    };
    [
        c.what.clone(),
        c.ours.label.clone(),
        c.baseline.label.clone(),
        samples_cell(c),
        median_cell(&c.ours.measure),
        tail_cell(&c.ours.measure),
        median_cell(&c.baseline.measure),
        tail_cell(&c.baseline.measure),
        ratio_cell(c.ratio()),
        goal,
    ]
}

fn width(s: &str) -> usize {
    s.chars().count()
}

/// The table aligned for a terminal (numbers right-aligned).
pub fn text_table(rows: &[Comparison]) -> String {
    let body: Vec<[String; 10]> = rows.iter().map(cells).collect();
    let mut widths = HEADERS.map(width);
    for row in &body {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(width(cell));
        }
    }
    let numeric = |col: usize| (3..=8).contains(&col);
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (col, cell) in cells.iter().enumerate() {
            let pad = " ".repeat(widths[col] - width(cell));
            if col > 0 {
                out.push_str("  ");
            }
            if numeric(col) {
                out.push_str(&pad);
                out.push_str(cell);
            } else {
                out.push_str(cell);
                out.push_str(&pad);
            }
        }
        out.trim_end().to_string()
    };
    let mut out = line(&HEADERS.map(String::from));
    out.push('\n');
    out.push_str(&line(&widths.map(|w| "-".repeat(w))));
    out.push('\n');
    for row in &body {
        out.push_str(&line(row));
        out.push('\n');
    }
    out
}

/// Escape what would break a Markdown table cell.
fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The table in GitHub Markdown.
pub fn markdown_table(rows: &[Comparison]) -> String {
    let mut out = format!("| {} |\n", HEADERS.join(" | "));
    let align: Vec<&str> = (0..HEADERS.len())
        .map(|col| {
            if (3..=8).contains(&col) {
                "---:"
            } else {
                "---"
            }
        })
        .collect();
    out.push_str(&format!("| {} |\n", align.join(" | ")));
    for row in rows.iter().map(cells) {
        let row: Vec<String> = row.iter().map(|c| md_cell(c)).collect();
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

/// One line per comparison that has a goal: `PASS …` or `MISS …`.
pub fn goal_lines(rows: &[Comparison]) -> Vec<String> {
    rows.iter()
        .filter(|c| c.verdict() != Verdict::Info)
        .map(|c| match c.goal {
            Goal::Below(_) => format!(
                "{}  {}: {} — median {} (goal {})",
                c.verdict().label(),
                c.what,
                c.ours.label,
                median_cell(&c.ours.measure),
                c.goal.describe()
            ),
            _ => format!(
                "{}  {}: {} vs {} — ratio {} (goal {})",
                c.verdict().label(),
                c.what,
                c.ours.label,
                c.baseline.label,
                ratio_cell(c.ratio()),
                c.goal.describe()
            ),
        })
        .collect()
}

/// A row of the harness that produced comparisons, with how it measures.
pub struct MethodNote {
    pub title: String,
    pub method: String,
}

/// A row that is not measured yet, and why.
pub struct Pending {
    pub title: String,
    pub why: String,
}

/// The control-plane requests one call made, counted at the emulator (`/_mock/stats`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestCount {
    /// The call, e.g. "`sandbox_exec true` (warm `cos mcp`)".
    pub call: String,
    /// Requests per operation id of the emulator, in its order.
    pub by_operation: Vec<(String, u64)>,
}

impl RequestCount {
    pub fn total(&self) -> u64 {
        self.by_operation.iter().map(|(_, n)| n).sum()
    }

    /// `3× getSandbox, 1× execCommand`.
    pub fn breakdown(&self) -> String {
        if self.by_operation.is_empty() {
            return "none".to_string();
        }
        self.by_operation
            .iter()
            .map(|(op, n)| format!("{n}× {op}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The request counts as a Markdown table.
pub fn requests_table(counts: &[RequestCount]) -> String {
    let mut out = "| call | requests | by operation |\n| --- | ---: | --- |\n".to_string();
    for c in counts {
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            md_cell(&c.call),
            c.total(),
            md_cell(&c.breakdown())
        );
    }
    out
}

/// The request counts for the terminal, one line each.
pub fn request_lines(counts: &[RequestCount]) -> Vec<String> {
    counts
        .iter()
        .map(|c| format!("{:>3}  {} — {}", c.total(), c.call, c.breakdown()))
        .collect()
}

/// Everything BENCHMARKS.md holds.
pub struct Document<'a> {
    pub machine: &'a [(String, String)],
    pub command: &'a str,
    pub date: &'a str,
    pub comparisons: &'a [Comparison],
    pub methods: &'a [MethodNote],
    pub failures: &'a [(String, String)],
    pub pending: &'a [Pending],
    pub requests: &'a [RequestCount],
}

pub fn markdown_document(doc: &Document<'_>) -> String {
    let mut out = String::new();
    out.push_str("# Benchmarks\n\n");
    out.push_str(
        "Side-by-side measurements of this project against the tools it replaces, taken in one run \
         against the local emulator (`createos-mock`) on loopback and, for the WAN rows, against a second \
         emulator behind a modelled 50 ms RTT link that the benchmark starts itself. Within a row the contenders are \
         sampled alternately — every round takes one sample of each, in an order shuffled per round \
         (fixed seed) — so machine noise and the after-effects of one contender hit every side alike. Generated by the benchmark itself; do not edit by hand.\n\n",
    );
    let _ = writeln!(out, "- **Command:** `{}`", doc.command);
    let _ = writeln!(out, "- **Date:** {}", doc.date);
    for (key, value) in doc.machine {
        let _ = writeln!(out, "- **{key}:** {value}");
    }
    out.push_str("\n## Results\n\n");
    out.push_str(
        "*ratio* is ours ÷ baseline of the median **cost** (time per operation, time per MiB for \
         throughput rows, MiB resident for memory rows): below 1× ours is cheaper. *tail* is the p99 \
         for latencies (nearest rank; with fewer than 100 samples that is the slowest one), the \
         slowest sample for throughput and the largest sample for memory. A goal marked *absolute* \
         holds ours' median to a fixed limit, whatever the baseline does.\n\n",
    );
    out.push_str(&markdown_table(doc.comparisons));
    out.push_str("\n### Goals\n\n");
    let goals = goal_lines(doc.comparisons);
    if goals.is_empty() {
        out.push_str("No row with a goal was measured.\n");
    }
    for line in goals {
        let _ = writeln!(out, "- {}", md_cell(&line));
    }
    if !doc.requests.is_empty() {
        out.push_str("\n### Requests per call\n\n");
        out.push_str(
            "Control-plane requests that reached the emulator during one call, counted with \
             `/_mock/stats` (reset before the call, read after it); each is one network round trip \
             when they run one after another. Every call is made once untimed before it is counted, so \
             the counts are those of a warm session unless the call says otherwise.\n\n",
        );
        out.push_str(&requests_table(doc.requests));
    }
    if !doc.failures.is_empty() {
        out.push_str("\n### Rows that failed in this run\n\n");
        for (row, error) in doc.failures {
            let _ = writeln!(out, "- **{}**: {}", row, md_cell(error));
        }
    }
    out.push_str("\n## How each row is measured\n\n");
    for note in doc.methods {
        let _ = writeln!(out, "### {}\n\n{}\n", note.title, note.method.trim());
    }
    if !doc.pending.is_empty() {
        out.push_str("## Pending rows\n\n");
        for p in doc.pending {
            let _ = writeln!(out, "- **{}** — {}", p.title, p.why);
        }
    }
    out
}
