//! The machine and tool versions a run was taken on (for BENCHMARKS.md). Parsing is pure;
//! [`describe`] reads /proc and asks the tools for their versions.

use std::path::Path;
use std::process::Command;

/// CPU model and logical CPU count from the text of `/proc/cpuinfo`.
pub fn cpu_summary(cpuinfo: &str) -> Option<(String, usize)> {
    let field = |line: &str, name: &str| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == name).then(|| value.trim().to_string())
    };
    let count = cpuinfo
        .lines()
        .filter(|l| field(l, "processor").is_some())
        .count();
    let model = cpuinfo.lines().find_map(|l| field(l, "model name"))?;
    Some((model, count.max(1)))
}

/// `MemTotal` of `/proc/meminfo`, in KiB.
pub fn mem_total_kib(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let rest = line.strip_prefix("MemTotal:")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The 1, 5 and 15 minute load averages from the text of `/proc/loadavg`.
pub fn load_average(loadavg: &str) -> Option<String> {
    let fields: Vec<&str> = loadavg.split_whitespace().take(3).collect();
    (fields.len() == 3 && fields.iter().all(|f| f.parse::<f64>().is_ok()))
        .then(|| fields.join(" / "))
}

/// One line for what an emulator isolates (its `IsolationReport`): the mechanism, and what is
/// missing when sandboxes are not a boundary.
pub fn isolation_summary(report: &createos_mock::IsolationReport) -> String {
    if report.isolated {
        format!("isolated: {}", report.mechanism)
    } else {
        format!(
            "NOT isolated: {} (missing: {})",
            report.mechanism,
            report.missing.join("; ")
        )
    }
}

/// The current load averages, or `unknown`.
pub fn current_load() -> String {
    load_average(&std::fs::read_to_string("/proc/loadavg").unwrap_or_default())
        .unwrap_or_else(|| "unknown".into())
}

/// A calendar date `YYYY-MM-DD HH:MM UTC` from seconds since the Unix epoch (days → civil
/// date after Howard Hinnant's algorithm).
pub fn utc_timestamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let (hh, mm) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {hh:02}:{mm:02} UTC")
}

fn first_line_of(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    String::from_utf8_lossy(&text)
        .lines()
        .next()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
}

/// `(name, value)` pairs describing the machine and the tools used, in display order.
pub fn describe(python: &Path) -> Vec<(String, String)> {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let mut out = Vec::new();
    let cpu = cpu_summary(&read("/proc/cpuinfo"))
        .map(|(model, n)| format!("{model} — {n} logical CPU(s)"))
        .unwrap_or_else(|| "unknown (no /proc/cpuinfo)".to_string());
    out.push(("CPU".to_string(), cpu));
    let memory = mem_total_kib(&read("/proc/meminfo"))
        .map(|kib| format!("{:.1} GiB", kib as f64 / (1024.0 * 1024.0)))
        .unwrap_or_else(|| "unknown".to_string());
    out.push(("Memory".to_string(), memory));
    let kernel = format!(
        "{} {} ({})",
        read("/proc/sys/kernel/ostype").trim(),
        read("/proc/sys/kernel/osrelease").trim(),
        std::env::consts::ARCH
    );
    out.push(("Kernel".to_string(), kernel));
    let tools: [(&str, Option<String>); 8] = [
        ("Rust", first_line_of("rustc", &["--version"])),
        ("Node.js", first_line_of("node", &["--version"])),
        (
            "Python",
            first_line_of(&python.to_string_lossy(), &["--version"]),
        ),
        ("Git", first_line_of("git", &["--version"])),
        ("tar", first_line_of("tar", &["--version"])),
        ("gzip", first_line_of("gzip", &["--version"])),
        ("OpenSSH", first_line_of("ssh", &["-V"])),
        ("rsync", first_line_of("rsync", &["--version"])),
    ];
    for (name, version) in tools {
        out.push((
            name.to_string(),
            version.unwrap_or_else(|| "not found".to_string()),
        ));
    }
    out
}
