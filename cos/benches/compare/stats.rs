//! Pure arithmetic of the comparison benchmark: medians, percentiles, throughput, ratios and
//! goal verdicts. No I/O and no clock, so `tests/bench_smoke.rs` checks it directly.

use std::time::Duration;

/// Bytes in one MiB (throughput is reported in MiB/s).
pub const MIB: f64 = 1024.0 * 1024.0;

/// The median of `values` (mean of the two middle values for an even count); `None` when empty
/// or when a value is NaN.
pub fn median(values: &[f64]) -> Option<f64> {
    let sorted = sorted(values)?;
    let n = sorted.len();
    Some(if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    })
}

/// The `p`-th percentile (0 < p ≤ 100) by the nearest-rank method: the smallest sample such
/// that at least `p`% of the samples are ≤ it. With fewer than 100 samples p99 is the maximum.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if !(p > 0.0 && p <= 100.0) {
        return None;
    }
    let sorted = sorted(values)?;
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

fn sorted(values: &[f64]) -> Option<Vec<f64>> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(sorted)
}

/// `ours / theirs`, when both are finite and `theirs` is positive.
pub fn ratio(ours: f64, theirs: f64) -> Option<f64> {
    (ours.is_finite() && theirs.is_finite() && theirs > 0.0).then(|| ours / theirs)
}

/// MiB per second for `bytes` moved in `elapsed`; `None` for a zero duration.
pub fn mib_per_s(bytes: u64, elapsed: Duration) -> Option<f64> {
    let secs = elapsed.as_secs_f64();
    (secs > 0.0).then(|| bytes as f64 / MIB / secs)
}

/// Durations as milliseconds (the unit every latency is summarised in).
pub fn millis(samples: &[Duration]) -> Vec<f64> {
    samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect()
}

/// What one side of a comparison measured.
#[derive(Clone, Debug, PartialEq)]
pub enum Measure {
    /// Time per operation, in milliseconds (lower is better).
    Latency {
        median_ms: f64,
        p99_ms: f64,
        samples: usize,
    },
    /// Bytes per second, in MiB/s (higher is better); `worst` is the slowest sample.
    Throughput {
        median_mib_s: f64,
        worst_mib_s: f64,
        samples: usize,
    },
    /// Resident memory, in MiB (lower is better); `peak` is the largest sample.
    Memory {
        median_mib: f64,
        peak_mib: f64,
        samples: usize,
    },
}

impl Measure {
    /// Summarise latency samples.
    pub fn latency(samples: &[Duration]) -> Option<Measure> {
        let ms = millis(samples);
        Some(Measure::Latency {
            median_ms: median(&ms)?,
            p99_ms: percentile(&ms, 99.0)?,
            samples: ms.len(),
        })
    }

    /// Summarise throughput samples of `(bytes, elapsed)`.
    pub fn throughput(samples: &[(u64, Duration)]) -> Option<Measure> {
        let rates: Vec<f64> = samples
            .iter()
            .map(|(b, d)| mib_per_s(*b, *d))
            .collect::<Option<_>>()?;
        let worst = rates.iter().copied().fold(f64::INFINITY, f64::min);
        Some(Measure::Throughput {
            median_mib_s: median(&rates)?,
            worst_mib_s: worst,
            samples: rates.len(),
        })
    }

    /// Summarise resident-set samples given in bytes.
    pub fn memory(samples_bytes: &[u64]) -> Option<Measure> {
        let mib: Vec<f64> = samples_bytes.iter().map(|b| *b as f64 / MIB).collect();
        let peak = sorted(&mib)?.last().copied()?;
        Some(Measure::Memory {
            median_mib: median(&mib)?,
            peak_mib: peak,
            samples: mib.len(),
        })
    }

    /// The median expressed as a cost (higher is worse), so ratios read the same way for every
    /// kind of row: milliseconds per operation, seconds per MiB, or MiB resident.
    pub fn median_cost(&self) -> f64 {
        match *self {
            Measure::Latency { median_ms, .. } => median_ms,
            Measure::Throughput { median_mib_s, .. } => 1.0 / median_mib_s,
            Measure::Memory { median_mib, .. } => median_mib,
        }
    }

    /// Number of samples summarised.
    pub fn samples(&self) -> usize {
        match *self {
            Measure::Latency { samples, .. }
            | Measure::Throughput { samples, .. }
            | Measure::Memory { samples, .. } => samples,
        }
    }
}

/// The target a comparison is held to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Goal {
    /// Only reported.
    None,
    /// Ours may cost at most this many times the baseline (median).
    AtMost(f64),
    /// Ours must cost less than the baseline (median).
    Faster,
    /// Ours' median must stay below this absolute amount, in its own unit (MiB for memory,
    /// ms for latency), whatever the baseline does.
    Below(f64),
}

impl Goal {
    /// How the goal reads in the table.
    pub fn describe(&self) -> String {
        match *self {
            Goal::None => "report".to_string(),
            Goal::AtMost(factor) => format!("≤ {factor}×"),
            Goal::Faster => "< 1× (faster)".to_string(),
            Goal::Below(limit) => format!("< {limit} (absolute)"),
        }
    }
}

/// The outcome of a goal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Miss,
    /// No goal for this row.
    Info,
}

impl Verdict {
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Miss => "MISS",
            Verdict::Info => "—",
        }
    }
}

/// Judge a cost ratio (ours / baseline) against `goal`. A ratio that could not be computed
/// misses any real goal. [`Goal::Below`] is about ours alone: see [`verdict_of`].
pub fn verdict(goal: Goal, ratio: Option<f64>) -> Verdict {
    match (goal, ratio) {
        (Goal::None, _) => Verdict::Info,
        (Goal::Below(_), _) => Verdict::Miss,
        (_, None) => Verdict::Miss,
        (Goal::AtMost(factor), Some(r)) => {
            if r <= factor {
                Verdict::Pass
            } else {
                Verdict::Miss
            }
        }
        (Goal::Faster, Some(r)) => {
            if r < 1.0 {
                Verdict::Pass
            } else {
                Verdict::Miss
            }
        }
    }
}

/// Judge a comparison: ratio goals by `ratio`, [`Goal::Below`] by ours' own median cost.
pub fn verdict_of(goal: Goal, ratio: Option<f64>, ours_median: f64) -> Verdict {
    match goal {
        Goal::Below(limit) if ours_median.is_finite() && ours_median < limit => Verdict::Pass,
        Goal::Below(_) => Verdict::Miss,
        _ => verdict(goal, ratio),
    }
}

/// One side of a comparison: who, and what they measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Side {
    pub label: String,
    pub measure: Measure,
}

/// One line of the result table: our side against a baseline, measured alternately in the
/// same run.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// What is measured (e.g. "exec `true` round trip").
    pub what: String,
    pub ours: Side,
    pub baseline: Side,
    pub goal: Goal,
}

impl Comparison {
    /// Median cost of ours divided by the baseline's: < 1 means ours is faster.
    pub fn ratio(&self) -> Option<f64> {
        ratio(
            self.ours.measure.median_cost(),
            self.baseline.measure.median_cost(),
        )
    }

    pub fn verdict(&self) -> Verdict {
        verdict_of(self.goal, self.ratio(), self.ours.measure.median_cost())
    }
}
