//! The pure helpers of `benches/compare.rs` (statistics, verdicts, table rendering, machine
//! parsing, round order) and the WAN rows' delay link (bytes intact both ways, ends of stream
//! passed on, connections counted). No timing is asserted anywhere: benchmarks are not timed
//! tests.

#[path = "../benches/compare/interleave.rs"]
#[allow(dead_code)]
mod interleave;
#[path = "../benches/compare/link.rs"]
#[allow(dead_code)]
mod link;
#[path = "../benches/compare/machine.rs"]
#[allow(dead_code)]
mod machine;
#[path = "../benches/compare/report.rs"]
#[allow(dead_code)]
mod report;
#[path = "../benches/compare/stats.rs"]
#[allow(dead_code)]
mod stats;

use std::time::Duration;

use futures::future::BoxFuture;
use interleave::{alternate, round_orders, Contender, Sample, ORDER_SEED};
use stats::{
    median, mib_per_s, percentile, ratio, verdict, verdict_of, Comparison, Goal, Measure, Side,
    Verdict,
};

#[test]
fn median_of_odd_and_even_counts() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    assert_eq!(median(&[7.5]), Some(7.5));
    assert_eq!(median(&[]), None);
    assert_eq!(median(&[1.0, f64::NAN]), None);
}

#[test]
fn p99_is_nearest_rank() {
    let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
    assert_eq!(percentile(&hundred, 99.0), Some(99.0));
    assert_eq!(percentile(&hundred, 50.0), Some(50.0));
    assert_eq!(percentile(&hundred, 100.0), Some(100.0));
    let thousand: Vec<f64> = (1..=1000).rev().map(f64::from).collect();
    assert_eq!(percentile(&thousand, 99.0), Some(990.0));
    // fewer than 100 samples: p99 is the slowest
    assert_eq!(percentile(&[5.0, 1.0, 9.0], 99.0), Some(9.0));
    assert_eq!(percentile(&[1.0], 1.0), Some(1.0));
    assert_eq!(percentile(&[1.0], 0.0), None);
    assert_eq!(percentile(&[1.0], 101.0), None);
    assert_eq!(percentile(&[], 99.0), None);
}

#[test]
fn ratios_and_throughput() {
    assert_eq!(ratio(3.0, 2.0), Some(1.5));
    assert_eq!(ratio(1.0, 0.0), None);
    assert_eq!(ratio(f64::INFINITY, 1.0), None);
    assert_eq!(
        mib_per_s(200 * 1024 * 1024, Duration::from_secs(2)),
        Some(100.0)
    );
    assert_eq!(mib_per_s(1, Duration::ZERO), None);
}

#[test]
fn verdicts_follow_the_goal() {
    assert_eq!(verdict(Goal::AtMost(1.2), Some(1.2)), Verdict::Pass);
    assert_eq!(verdict(Goal::AtMost(1.2), Some(1.21)), Verdict::Miss);
    assert_eq!(verdict(Goal::Faster, Some(0.99)), Verdict::Pass);
    assert_eq!(verdict(Goal::Faster, Some(1.0)), Verdict::Miss);
    assert_eq!(verdict(Goal::Faster, None), Verdict::Miss);
    assert_eq!(verdict(Goal::None, Some(50.0)), Verdict::Info);
}

#[test]
fn absolute_goals_judge_ours_alone() {
    assert_eq!(
        verdict_of(Goal::Below(15.0), Some(9.0), 14.9),
        Verdict::Pass
    );
    assert_eq!(
        verdict_of(Goal::Below(15.0), Some(0.1), 15.0),
        Verdict::Miss
    );
    assert_eq!(verdict_of(Goal::Below(15.0), None, f64::NAN), Verdict::Miss);
    // ratio goals are untouched by ours' own value
    assert_eq!(
        verdict_of(Goal::AtMost(0.1), Some(0.09), 1e9),
        Verdict::Pass
    );
    assert_eq!(
        verdict_of(Goal::AtMost(0.1), Some(0.11), 0.0),
        Verdict::Miss
    );
}

#[test]
fn memory_rows_report_median_and_peak_in_mib() {
    let mib = 1024 * 1024;
    let measure = Measure::memory(&[10 * mib, 12 * mib, 11 * mib]).unwrap();
    assert_eq!(
        measure,
        Measure::Memory {
            median_mib: 11.0,
            peak_mib: 12.0,
            samples: 3
        }
    );
    assert_eq!(Measure::memory(&[]), None);
    let row = Comparison {
        what: "`cos mcp` idle RSS".to_string(),
        ours: Side {
            label: "cos mcp".to_string(),
            measure,
        },
        baseline: Side {
            label: "node".to_string(),
            measure: Measure::memory(&[44 * mib]).unwrap(),
        },
        goal: Goal::Below(15.0),
    };
    assert_eq!(row.verdict(), Verdict::Pass);
    let cells = report::cells(&row);
    assert_eq!(cells[4], "11.0 MiB");
    assert_eq!(cells[5], "peak 12.0 MiB");
    assert_eq!(cells[9], "< 15 (absolute) PASS");
    let lines = report::goal_lines(&[row]);
    assert_eq!(
        lines,
        vec![
            "PASS  `cos mcp` idle RSS: cos mcp — median 11.0 MiB (goal < 15 (absolute))"
                .to_string()
        ]
    );
}

fn ms(values: &[u64]) -> Vec<Duration> {
    values.iter().map(|v| Duration::from_millis(*v)).collect()
}

fn latency_row(ours: &[u64], theirs: &[u64], goal: Goal) -> Comparison {
    Comparison {
        what: "exec `true` round trip".to_string(),
        ours: Side {
            label: "createos_sandbox".to_string(),
            measure: Measure::latency(&ms(ours)).unwrap(),
        },
        baseline: Side {
            label: "raw | reqwest".to_string(),
            measure: Measure::latency(&ms(theirs)).unwrap(),
        },
        goal,
    }
}

#[test]
fn comparison_ratio_uses_cost_for_both_kinds() {
    let c = latency_row(&[2, 2, 3], &[1, 1, 9], Goal::AtMost(1.2));
    assert_eq!(c.ratio(), Some(2.0));
    assert_eq!(c.verdict(), Verdict::Miss);

    // throughput: 100 MiB/s (ours) vs 400 MiB/s (baseline) costs 4× the time per MiB
    let mib = 1024 * 1024;
    let t = Comparison {
        what: "process output".to_string(),
        ours: Side {
            label: "ours".into(),
            measure: Measure::throughput(&[(100 * mib, Duration::from_secs(1))]).unwrap(),
        },
        baseline: Side {
            label: "pipe".into(),
            measure: Measure::throughput(&[
                (400 * mib, Duration::from_secs(1)),
                (200 * mib, Duration::from_secs(1)),
            ])
            .unwrap(),
        },
        goal: Goal::None,
    };
    assert!((t.ratio().unwrap() - 3.0).abs() < 1e-9, "{:?}", t.ratio());
    match t.baseline.measure {
        Measure::Throughput {
            median_mib_s,
            worst_mib_s,
            samples,
        } => {
            assert_eq!((median_mib_s, worst_mib_s, samples), (300.0, 200.0, 2));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(t.verdict(), Verdict::Info);
}

#[test]
fn numbers_keep_three_significant_digits() {
    assert_eq!(report::sig3(1234.4), "1234");
    assert_eq!(report::sig3(12.345), "12.3");
    assert_eq!(report::sig3(1.2345), "1.23");
    assert_eq!(report::sig3(0.12345), "0.123");
    assert_eq!(report::sig3(0.0012345), "0.00123");
    assert_eq!(report::sig3(0.0), "0");
    assert_eq!(report::sig3(f64::NAN), "n/a");
    assert_eq!(report::ratio_cell(Some(0.5)), "0.500×");
    assert_eq!(report::ratio_cell(None), "n/a");
}

#[test]
fn text_table_is_aligned_and_complete() {
    let rows = vec![
        latency_row(&[2, 2, 3], &[1, 1, 9], Goal::AtMost(1.2)),
        latency_row(&[1], &[4], Goal::Faster),
    ];
    let table = report::text_table(&rows);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    assert!(lines[0].starts_with("benchmark"));
    assert!(lines[1].chars().all(|c| c == '-' || c == ' '));
    assert!(
        lines[2].contains("2.00 ms")
            && lines[2].contains("p99 3.00 ms")
            && lines[2].contains("2.00×")
    );
    assert!(lines[2].ends_with("≤ 1.2× MISS"), "{}", lines[2]);
    assert!(lines[3].ends_with("< 1× (faster) PASS"), "{}", lines[3]);
    // right-aligned numeric columns end at the same character position
    let end_of = |line: &str, needle: &str| {
        line.find(needle)
            .map(|i| line[..i + needle.len()].chars().count())
    };
    assert_eq!(end_of(lines[2], "2.00×"), end_of(lines[3], "0.250×"));
}

#[test]
fn markdown_table_escapes_pipes_and_marks_numeric_columns() {
    let rows = vec![latency_row(&[2], &[1], Goal::None)];
    let md = report::markdown_table(&rows);
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0].matches(" | ").count(), 9);
    assert!(lines[1].contains("---:"));
    assert!(lines[2].contains("raw \\| reqwest"), "{}", lines[2]);
    assert!(lines[2].contains("| report |"), "{}", lines[2]);
}

#[test]
fn goal_lines_name_every_goal_and_skip_plain_reports() {
    let rows = vec![
        latency_row(&[2], &[1], Goal::AtMost(1.2)),
        latency_row(&[1], &[4], Goal::Faster),
        latency_row(&[1], &[4], Goal::None),
    ];
    let lines = report::goal_lines(&rows);
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("MISS") && lines[0].contains("2.00×"));
    assert!(lines[1].starts_with("PASS") && lines[1].contains("0.250×"));
}

#[test]
fn document_lists_everything() {
    let rows = vec![latency_row(&[2], &[1], Goal::AtMost(1.2))];
    let machine = vec![("CPU".to_string(), "Test CPU — 2 logical CPU(s)".to_string())];
    let methods = vec![report::MethodNote {
        title: "exec round trip".into(),
        method: "How.".into(),
    }];
    let failures = vec![("attach".to_string(), "no echo".to_string())];
    let pending = [report::Pending {
        title: "sync vs rsync".into(),
        why: "not built yet".into(),
    }];
    let doc = report::markdown_document(&report::Document {
        machine: &machine,
        command: "cargo bench --bench compare",
        date: "2025-01-02 03:04 UTC",
        comparisons: &rows,
        methods: &methods,
        failures: &failures,
        pending: &pending,
        requests: &[report::RequestCount {
            call: "`sandbox_exec true`".into(),
            by_operation: vec![("startProcess".into(), 1), ("connectProcess".into(), 1)],
        }],
    });
    for needle in [
        "`cargo bench --bench compare`",
        "2025-01-02 03:04 UTC",
        "**CPU:** Test CPU",
        "| exec `true` round trip |",
        "- MISS",
        "### exec round trip",
        "**attach**: no echo",
        "**sync vs rsync** — not built yet",
        "### Requests per call",
        "| `sandbox_exec true` | 2 | 1× startProcess, 1× connectProcess |",
    ] {
        assert!(doc.contains(needle), "missing {needle:?} in\n{doc}");
    }
}

#[test]
fn machine_parsing() {
    let cpuinfo =
        "processor\t: 0\nmodel name\t: Example CPU @ 3.00GHz\n\nprocessor\t: 1\nmodel name\t: Example CPU @ 3.00GHz\n";
    assert_eq!(
        machine::cpu_summary(cpuinfo),
        Some(("Example CPU @ 3.00GHz".to_string(), 2))
    );
    assert_eq!(machine::cpu_summary("nothing here"), None);
    assert_eq!(
        machine::mem_total_kib("MemFree: 1 kB\nMemTotal:       24731520 kB\n"),
        Some(24_731_520)
    );
    assert_eq!(machine::mem_total_kib(""), None);
    assert_eq!(
        machine::load_average("0.52 1.10 2.00 3/400 12345\n"),
        Some("0.52 / 1.10 / 2.00".to_string())
    );
    assert_eq!(machine::load_average("garbage"), None);
    assert_eq!(machine::utc_timestamp(0), "1970-01-01 00:00 UTC");
    assert_eq!(machine::utc_timestamp(951_782_400), "2000-02-29 00:00 UTC");
    assert_eq!(
        machine::utc_timestamp(1_764_483_300),
        "2025-11-30 06:15 UTC"
    );
}

#[test]
fn rounds_are_seeded_permutations_with_balanced_neighbours() {
    let orders = round_orders(3, 600, ORDER_SEED);
    assert_eq!(orders.len(), 600);
    for order in &orders {
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 1, 2]);
    }
    assert_eq!(
        orders,
        round_orders(3, 600, ORDER_SEED),
        "the same seed gives the same schedule"
    );
    assert_ne!(orders, round_orders(3, 600, ORDER_SEED + 1));
    // Over the whole run every contender is sampled right after every other one, and none
    // is stuck behind the same neighbour (a rotated order would always put 0 after 2).
    let sequence: Vec<usize> = orders.concat();
    let mut follows = [[0usize; 3]; 3];
    for pair in sequence.windows(2) {
        follows[pair[0]][pair[1]] += 1;
    }
    for (before, row) in follows.iter().enumerate() {
        for (after, &count) in row.iter().enumerate() {
            if before != after {
                assert!(
                    count > 150,
                    "{after} followed {before} only {count} times: {follows:?}"
                );
            }
        }
    }
    assert!(round_orders(0, 2, ORDER_SEED).iter().all(Vec::is_empty));
}

/// Records the global order of calls; its "duration" is its call count, so the test can check
/// which samples were kept without any clock.
struct Recorder {
    id: usize,
    calls: u64,
    log: std::sync::Arc<std::sync::Mutex<Vec<usize>>>,
}

impl Contender for Recorder {
    fn label(&self) -> String {
        format!("recorder {}", self.id)
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move {
            self.calls += 1;
            self.log.lock().unwrap().push(self.id);
            anyhow::ensure!(self.id != 9, "contender 9 always fails");
            Ok(Sample {
                elapsed: Duration::from_nanos(self.calls),
                bytes: self.calls,
            })
        })
    }
}

#[tokio::test]
async fn alternate_interleaves_and_drops_warmup() {
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut contenders: Vec<Box<dyn Contender>> = (0..2)
        .map(|id| {
            Box::new(Recorder {
                id,
                calls: 0,
                log: log.clone(),
            }) as Box<dyn Contender>
        })
        .collect();
    let samples = alternate(&mut contenders, 1, 3).await.unwrap();
    let expected: Vec<usize> = round_orders(2, 4, ORDER_SEED).concat();
    assert_eq!(
        *log.lock().unwrap(),
        expected,
        "one sample of each per round, in the schedule's order"
    );
    // the warm-up (call 1) is not kept
    let kept: Vec<u64> = samples[0].iter().map(|s| s.bytes).collect();
    assert_eq!(kept, vec![2, 3, 4]);
    assert_eq!(samples[1].len(), 3);

    let mut failing: Vec<Box<dyn Contender>> = vec![Box::new(Recorder {
        id: 9,
        calls: 0,
        log,
    })];
    let err = alternate(&mut failing, 0, 2).await.unwrap_err();
    assert!(format!("{err:#}").contains("recorder 9"), "{err:#}");
}

/// A deterministic byte pattern, different per `seed`.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[i % 4] ^ seed)
        .collect()
}

/// An echo server: every connection gets back what it sent, then the end of the stream.
async fn echo_server() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut rd, mut wr) = stream.into_split();
                tokio::io::copy(&mut rd, &mut wr).await.unwrap();
                tokio::io::AsyncWriteExt::shutdown(&mut wr).await.unwrap();
            });
        }
    });
    addr
}

/// Send `data` through `addr` and read the echo to its end, both at once.
async fn round_trip(addr: std::net::SocketAddr, data: Vec<u8>) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut rd, mut wr) = stream.into_split();
    let writer = tokio::spawn(async move {
        // odd-sized writes, so chunk boundaries never line up with the relay's reads
        for piece in data.chunks(7_919) {
            wr.write_all(piece).await.unwrap();
        }
        wr.shutdown().await.unwrap();
    });
    let mut echoed = Vec::new();
    rd.read_to_end(&mut echoed).await.unwrap();
    writer.await.unwrap();
    echoed
}

fn loopback_any() -> std::net::SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

#[tokio::test]
async fn delay_link_relays_bytes_intact_both_ways() {
    let upstream = echo_server().await;
    let link = link::DelayLink::start(loopback_any(), upstream, Duration::from_millis(1))
        .await
        .unwrap();
    assert_eq!(link.rtt(), Duration::from_millis(2));
    let sizes = [3 * 1024 * 1024 + 7, 1, 65_537];
    let sent: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, n)| pattern(*n, i as u8))
        .collect();
    let echoes =
        futures::future::join_all(sent.iter().map(|d| round_trip(link.addr(), d.clone()))).await;
    for (sent, echoed) in sent.iter().zip(&echoes) {
        assert_eq!(echoed.len(), sent.len());
        assert!(
            echoed == sent,
            "the echo of {} bytes differs from what was sent",
            sent.len()
        );
    }
    let total: u64 = sizes.iter().map(|n| *n as u64).sum();
    assert_eq!(link.connections(), 3);
    assert_eq!(link.upstream_failures(), 0);
    assert_eq!(link.bytes_up(), total);
    assert_eq!(link.bytes_down(), total);
    // an empty stream: the end is passed on both ways
    assert!(round_trip(link.addr(), Vec::new()).await.is_empty());
    assert_eq!(link.connections(), 4);
    link.stop();
}

#[tokio::test]
async fn delay_link_carries_a_server_that_speaks_first() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        stream.write_all(b"SSH-2.0-greeting\r\n").await.unwrap();
        let mut reply = [0u8; 3];
        stream.read_exact(&mut reply).await.unwrap();
        stream.write_all(&reply).await.unwrap();
    });
    let link = link::DelayLink::start(loopback_any(), upstream, Duration::from_millis(1))
        .await
        .unwrap();
    let mut client = tokio::net::TcpStream::connect(link.addr()).await.unwrap();
    let mut greeting = [0u8; 18];
    client.read_exact(&mut greeting).await.unwrap();
    assert_eq!(&greeting, b"SSH-2.0-greeting\r\n");
    client.write_all(b"abc").await.unwrap();
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).await.unwrap();
    assert_eq!(rest, b"abc", "the reply, then the server's close");
    assert_eq!(link.connections(), 1);
}

#[tokio::test]
async fn delay_link_closes_a_connection_whose_upstream_is_down() {
    use tokio::io::AsyncReadExt;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = closed.local_addr().unwrap();
    drop(closed);
    let link = link::DelayLink::start(loopback_any(), upstream, Duration::from_millis(1))
        .await
        .unwrap();
    let mut client = tokio::net::TcpStream::connect(link.addr()).await.unwrap();
    let mut buf = Vec::new();
    // the relay drops the client once its upstream connect fails: end of stream or a reset
    let _ = client.read_to_end(&mut buf).await;
    assert!(buf.is_empty());
    assert_eq!(link.connections(), 1);
    assert_eq!(link.upstream_failures(), 1);
}

#[test]
fn request_counts_add_up_and_render() {
    let count = report::RequestCount {
        call: "`sandbox_read` | warm".into(),
        by_operation: vec![("createProcess".into(), 1), ("getSandbox".into(), 2)],
    };
    assert_eq!(count.total(), 3);
    assert_eq!(count.breakdown(), "1× createProcess, 2× getSandbox");
    let none = report::RequestCount {
        call: "nothing".into(),
        by_operation: vec![],
    };
    assert_eq!((none.total(), none.breakdown().as_str()), (0, "none"));
    assert_eq!(
        report::request_lines(&[count.clone(), none]),
        vec![
            "  3  `sandbox_read` | warm — 1× createProcess, 2× getSandbox".to_string(),
            "  0  nothing — none".to_string()
        ]
    );
    let table = report::requests_table(&[count]);
    assert!(
        table.contains("| `sandbox_read` \\| warm | 3 | 1× createProcess, 2× getSandbox |"),
        "{table}"
    );
}
