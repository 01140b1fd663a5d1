//! `cargo bench --bench compare`: this project side by side with what it replaces, in one run
//! against the local emulator on loopback, and (the WAN rows) against a second emulator behind a
//! modelled 50 ms RTT link with TLS. Prints a table of ratios with PASS/MISS per goal and
//! writes BENCHMARKS.md at the workspace root.
//!
//! Environment:
//! - `COS_BENCH_QUICK=1`: tiny sizes and few samples, to check the harness end to end (the
//!   report is printed, BENCHMARKS.md is left alone unless `COS_BENCH_OUT` is set);
//! - `COS_BENCH_ONLY=exec,attach`: run only these rows (ids in `rows/mod.rs`; no BENCHMARKS.md
//!   unless `COS_BENCH_OUT` is set);
//! - `COS_BENCH_OUT=path`: where to write the report instead of BENCHMARKS.md.
//!
//! The official SDKs come from `interop/` (install them with `bash cos/benches/setup.sh`).

#[path = "compare/env.rs"]
mod env;
#[path = "compare/interleave.rs"]
mod interleave;
#[path = "compare/link.rs"]
mod link;
#[path = "compare/machine.rs"]
mod machine;
#[path = "compare/report.rs"]
mod report;
#[path = "compare/rows/mod.rs"]
mod rows;
#[path = "compare/sdk.rs"]
mod sdk;
#[path = "compare/stats.rs"]
mod stats;
#[path = "compare/wan.rs"]
mod wan;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;

use env::{Bench, Sizes, Tools};
use report::{Document, MethodNote};
use stats::Comparison;

/// The command documented in BENCHMARKS.md and the README.
const COMMAND: &str = "cargo bench --bench compare";

/// Output journal of the emulator: room for the whole throughput stream, so nothing is evicted.
fn journal_bytes(sizes: &Sizes) -> usize {
    let wanted = usize::try_from(sizes.stream_bytes)
        .unwrap_or(usize::MAX)
        .saturating_add(16 << 20);
    wanted.max(createos_mock::config::DEFAULT_JOURNAL_BYTES)
}

struct Settings {
    quick: bool,
    only: Option<Vec<String>>,
    out: Option<PathBuf>,
}

impl Settings {
    fn from_env(root: &std::path::Path) -> Settings {
        let quick = std::env::var("COS_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let only = std::env::var("COS_BENCH_ONLY")
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            });
        let out = match std::env::var_os("COS_BENCH_OUT") {
            Some(path) => Some(PathBuf::from(path)),
            None if !quick && only.is_none() => Some(root.join("BENCHMARKS.md")),
            None => None,
        };
        Settings { quick, only, out }
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("benchmark failed: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> anyhow::Result<ExitCode> {
    let tools = Tools::locate()?;
    let settings = Settings::from_env(&tools.root);
    let sizes = if settings.quick {
        Sizes::quick()
    } else {
        Sizes::full()
    };
    let mut rows = rows::all();
    if let Some(only) = &settings.only {
        for id in only {
            anyhow::ensure!(
                rows.iter().any(|r| r.id == id),
                "COS_BENCH_ONLY names an unknown row {id:?}"
            );
        }
        rows.retain(|r| only.iter().any(|id| id == r.id));
    }

    // The emulator gets a runtime (and threads) of its own, as it would as a separate server.
    let emulator_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("emulator")
        .enable_all()
        .build()?;
    // the SSH rows compare against OpenSSH's clients, so the guests run the host's real sshd
    let config = createos_mock::MockConfig::default()
        .journal_bytes(journal_bytes(&sizes))
        .guest_sshd(createos_mock::config::GuestSshd::OpenSsh);
    let mock = emulator_rt
        .block_on(createos_mock::start(config))
        .context("starting the emulator")?;
    let (base_url, api_key) = (mock.base_url(), mock.api_key());
    let isolation = machine::isolation_summary(&mock.isolation());
    eprintln!("[bench] loopback emulator: {isolation}");

    let load_before = machine::current_load();
    let bench_rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = bench_rt.block_on(async {
        let bench = Bench::connect(sizes.clone(), tools.clone(), base_url, api_key).await?;
        let mut comparisons: Vec<Comparison> = Vec::new();
        let mut methods = Vec::new();
        let mut failures = Vec::new();
        for row in &rows {
            eprintln!("[bench] {} …", row.title);
            let started = Instant::now();
            match (row.run)(&bench).await {
                Ok(found) => {
                    eprintln!(
                        "[bench] {} done in {:.1} s",
                        row.title,
                        started.elapsed().as_secs_f64()
                    );
                    comparisons.extend(found);
                    methods.push(MethodNote {
                        title: row.title.to_string(),
                        method: (row.method)(&sizes),
                    });
                }
                Err(err) => {
                    eprintln!("[bench] {} FAILED: {err:#}", row.title);
                    failures.push((row.title.to_string(), format!("{err:#}")));
                }
            }
        }
        let noted = bench.take_settings();
        let pending = bench.take_pending();
        let requests = bench.take_requests();
        bench.close().await?;
        anyhow::Ok((comparisons, methods, failures, pending, requests, noted))
    });
    drop(bench_rt);
    emulator_rt.block_on(mock.shutdown());
    let (comparisons, methods, failures, pending, requests, noted) = outcome?;
    let load_after = machine::current_load();

    println!();
    print!("{}", report::text_table(&comparisons));
    println!();
    for line in report::goal_lines(&comparisons) {
        println!("{line}");
    }
    for (row, err) in &failures {
        println!("FAILED  {row}: {err}");
    }
    if !requests.is_empty() {
        println!("\nrequests per call (counted at the emulator):");
        for line in report::request_lines(&requests) {
            println!("  {line}");
        }
    }
    if !pending.is_empty() {
        println!("\npending rows:");
        for p in &pending {
            println!("  pending: {} — {}", p.title, p.why);
        }
    }

    if let Some(out) = &settings.out {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        let date = machine::utc_timestamp(secs);
        let mut command = COMMAND.to_string();
        if settings.quick {
            command = format!("COS_BENCH_QUICK=1 {command}");
        }
        if let Some(only) = &settings.only {
            command = format!("COS_BENCH_ONLY={} {command}", only.join(","));
        }
        let mut machine = machine::describe(&tools.python);
        machine.push((
            "Sandbox isolation (loopback emulator)".to_string(),
            isolation.clone(),
        ));
        machine.extend(noted.iter().cloned());
        machine.push((
            "Load average (1/5/15 min)".to_string(),
            format!("{load_before} before the run, {load_after} after (other work on the machine adds noise)"),
        ));
        let doc = report::markdown_document(&Document {
            machine: &machine,
            command: &command,
            date: &date,
            comparisons: &comparisons,
            methods: &methods,
            failures: &failures,
            pending: &pending,
            requests: &requests,
        });
        std::fs::write(out, doc).with_context(|| format!("writing {}", out.display()))?;
        eprintln!("[bench] wrote {}", out.display());
    }
    Ok(if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
