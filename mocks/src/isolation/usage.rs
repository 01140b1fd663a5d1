//! Resource usage of a set of processes, read from /proc (Linux).

/// CPU seconds, resident memory and process count of a sandbox.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ResourceUsage {
    pub cpu_seconds: f64,
    pub mem_bytes: u64,
    pub processes: usize,
}

/// Sums CPU time (user + system) and VmRSS of `pids`.
pub fn from_pids(pids: &[u32]) -> ResourceUsage {
    let mut usage = ResourceUsage {
        processes: pids.len(),
        ..Default::default()
    };
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysconf has no preconditions.
        let ticks = unsafe { nix::libc::sysconf(nix::libc::_SC_CLK_TCK) };
        let ticks = if ticks > 0 { ticks as f64 } else { 100.0 };
        for &pid in pids {
            if let Some(fields) = stat_fields(pid) {
                let utime: f64 = fields.get(11).and_then(|s| s.parse().ok()).unwrap_or(0.0);
                let stime: f64 = fields.get(12).and_then(|s| s.parse().ok()).unwrap_or(0.0);
                usage.cpu_seconds += (utime + stime) / ticks;
            }
            if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
                if let Some(kb) = status
                    .lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
                {
                    usage.mem_bytes += kb * 1024;
                }
            }
        }
    }
    usage
}

/// Fields of /proc/<pid>/stat after the `(comm)` field: index 0 = state, 2 = pgrp,
/// 11 = utime, 12 = stime.
#[cfg(target_os = "linux")]
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    Some(after.split_whitespace().map(str::to_string).collect())
}

/// Process-group id of `pid`.
#[cfg(target_os = "linux")]
pub fn proc_pgid(pid: u32) -> Option<i32> {
    stat_fields(pid)?.get(2)?.parse().ok()
}
