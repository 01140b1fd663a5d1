//! Metrics (E57–E59): a sandbox's CPU and memory, the account's usage, and usage over time.
//!
//! Upstream does not publish these schemas; the shapes here are this project's definition
//! (`api-spec/openapi.yaml`, marked `x-project-definition`). Every field is optional on the wire.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::api::catalog::SandboxCounts;
use crate::api::endpoints as ep;
use crate::api::open_enum;
use crate::api::sandboxes::Sandbox;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::Call;

/// Smallest bucket of a timeseries, seconds.
pub const MIN_STEP_SECONDS: u32 = 10;
/// Most buckets one timeseries request may span.
pub const MAX_POINTS: u64 = 1000;
/// Window the server uses when `from` is not given: the hour before `to`.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(3600);

/// A snapshot of one sandbox's resource use (E57).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SandboxMetricsView {
    /// Sandbox id.
    #[serde(default)]
    pub sandbox_id: String,
    /// CPU use since the previous sample (or the start); 100 = one vCPU busy.
    #[serde(default)]
    pub cpu_percent: f64,
    /// CPU time consumed since the sandbox started, seconds.
    #[serde(default)]
    pub cpu_seconds: f64,
    /// Memory in use, bytes.
    #[serde(default)]
    pub mem_used_bytes: i64,
    /// Memory limit, bytes.
    #[serde(default)]
    pub mem_limit_bytes: i64,
    /// Live processes.
    #[serde(default)]
    pub processes: u64,
    /// RFC 3339 sample time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_at: Option<String>,
}

/// The account's usage since `period_start` (E58).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageMetrics {
    /// User id.
    #[serde(default)]
    pub user_id: String,
    /// Sandboxes by state now.
    #[serde(default)]
    pub sandboxes: SandboxCounts,
    /// Sandboxes created in the period.
    #[serde(default)]
    pub created_total: u64,
    /// Exec calls in the period.
    #[serde(default)]
    pub exec_total: u64,
    /// CPU seconds used by all sandboxes in the period.
    #[serde(default)]
    pub cpu_seconds_total: f64,
    /// RFC 3339 start of the period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_start: Option<String>,
    /// RFC 3339 sample time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_at: Option<String>,
}

open_enum! {
    /// Which usage series to read.
    #[derive(Default)]
    UsageMetric {
        /// CPU seconds used per bucket.
        #[default]
        CpuSeconds = "cpu_seconds",
        /// Running sandboxes in each bucket.
        SandboxesRunning = "sandboxes_running",
        /// Exec calls per bucket.
        ExecTotal = "exec_total",
    }
}

/// One bucket of a series.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeseriesPoint {
    /// RFC 3339 start of the bucket.
    #[serde(default)]
    pub ts: String,
    /// Value in the bucket.
    #[serde(default)]
    pub value: f64,
}

/// A usage series (E59).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageTimeseries {
    /// The series.
    #[serde(default)]
    pub metric: UsageMetric,
    /// Bucket width, seconds.
    #[serde(default)]
    pub step_seconds: u32,
    /// Buckets, oldest first.
    #[serde(default)]
    pub points: Vec<TimeseriesPoint>,
}

/// The window and resolution of [`Client::usage_timeseries`]. Unset fields take the server
/// defaults: `cpu_seconds`, the last hour, 60 s buckets.
///
/// ```
/// use std::time::Duration;
/// use createos_sandbox::api::metrics::{TimeseriesQuery, UsageMetric};
/// let q = TimeseriesQuery::new().metric(UsageMetric::ExecTotal).last(Duration::from_secs(6 * 3600)).step_seconds(300);
/// assert!(q.validate().is_ok());
/// assert!(TimeseriesQuery::new().step_seconds(5).validate().is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimeseriesQuery {
    /// Series.
    pub metric: Option<UsageMetric>,
    /// RFC 3339 start.
    pub from: Option<String>,
    /// RFC 3339 end (exclusive).
    pub to: Option<String>,
    /// Bucket width, seconds (≥ 10).
    pub step_seconds: Option<u32>,
}

impl TimeseriesQuery {
    /// The server defaults.
    pub fn new() -> Self {
        Self::default()
    }
    /// Which series.
    pub fn metric(mut self, metric: UsageMetric) -> Self {
        self.metric = Some(metric);
        self
    }
    /// Start of the window, RFC 3339 (e.g. `2026-11-30T05:00:00Z`).
    pub fn from(mut self, from: impl Into<String>) -> Self {
        self.from = Some(from.into());
        self
    }
    /// End of the window, RFC 3339.
    pub fn to(mut self, to: impl Into<String>) -> Self {
        self.to = Some(to.into());
        self
    }
    /// Start of the window.
    pub fn from_time(self, from: SystemTime) -> Self {
        self.from(format_rfc3339(from))
    }
    /// End of the window.
    pub fn to_time(self, to: SystemTime) -> Self {
        self.to(format_rfc3339(to))
    }
    /// The window ending now and lasting `span`.
    pub fn last(self, span: Duration) -> Self {
        let now = SystemTime::now();
        self.from_time(now.checked_sub(span).unwrap_or(UNIX_EPOCH))
            .to_time(now)
    }
    /// Bucket width in seconds.
    pub fn step_seconds(mut self, step: u32) -> Self {
        self.step_seconds = Some(step);
        self
    }

    /// Check the values the way the server will: RFC 3339 times, `from` before `to`, a step of at
    /// least 10 s and at most 1000 buckets.
    pub fn validate(&self) -> Result<()> {
        let step = self.step_seconds.unwrap_or(60);
        if step < MIN_STEP_SECONDS {
            return Err(Error::invalid(
                "step_seconds",
                format!("{step} s; at least {MIN_STEP_SECONDS} s"),
            ));
        }
        let from = self
            .from
            .as_deref()
            .map(|v| parse_rfc3339("from", v))
            .transpose()?;
        let to = self
            .to
            .as_deref()
            .map(|v| parse_rfc3339("to", v))
            .transpose()?;
        let to = to.unwrap_or_else(|| unix_seconds(SystemTime::now()));
        let from = from.unwrap_or(to - DEFAULT_WINDOW.as_secs_f64());
        if from >= to {
            return Err(Error::invalid("from", "must be before `to`"));
        }
        let points = ((to - from) / f64::from(step)).ceil() as u64;
        if points > MAX_POINTS {
            return Err(Error::invalid(
                "step_seconds",
                format!("{points} buckets of {step} s; at most {MAX_POINTS}: widen the step or shorten the window"),
            ));
        }
        Ok(())
    }
}

impl Sandbox {
    /// CPU and memory of this sandbox now (E57).
    ///
    /// ```no_run
    /// # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
    /// let m = sandbox.metrics().await?;
    /// println!("{:.1}% CPU, {} of {} bytes", m.cpu_percent, m.mem_used_bytes, m.mem_limit_bytes);
    /// # Ok(()) }
    /// ```
    pub async fn metrics(&self) -> Result<SandboxMetricsView> {
        self.client
            .transport
            .json(Call::new(&ep::GET_SANDBOX_METRICS).param(self.id()))
            .await
    }
}

impl Client {
    /// The account's usage (E58).
    pub async fn usage_metrics(&self) -> Result<UsageMetrics> {
        self.transport.json(Call::new(&ep::GET_USAGE_METRICS)).await
    }

    /// The account's usage over a window (E59).
    ///
    /// ```no_run
    /// # async fn demo(client: createos_sandbox::Client) -> createos_sandbox::Result<()> {
    /// use createos_sandbox::api::metrics::{TimeseriesQuery, UsageMetric};
    /// let series = client
    ///     .usage_timeseries(TimeseriesQuery::new().metric(UsageMetric::SandboxesRunning).step_seconds(60))
    ///     .await?;
    /// for p in series.points {
    ///     println!("{} {}", p.ts, p.value);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn usage_timeseries(&self, query: TimeseriesQuery) -> Result<UsageTimeseries> {
        query.validate()?;
        let call = Call::new(&ep::GET_USAGE_TIMESERIES)
            .query_opt("metric", query.metric.as_ref().map(UsageMetric::as_str))
            .query_opt("from", query.from.as_deref())
            .query_opt("to", query.to.as_deref())
            .query_opt("step_seconds", query.step_seconds);
        self.transport.json(call).await
    }
}

fn unix_seconds(t: SystemTime) -> f64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let m = i64::from(month);
    let day_of_year = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `t` as RFC 3339 UTC with milliseconds, e.g. `2026-11-30T05:00:00.123Z`.
pub fn format_rfc3339(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = since.as_secs() as i64;
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// Seconds since the epoch of an RFC 3339 date-time (`YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`).
fn parse_rfc3339(field: &str, value: &str) -> Result<f64> {
    let bad = || {
        Error::invalid(
            field,
            format!("{value:?} is not an RFC 3339 time such as 2026-11-30T05:00:00Z"),
        )
    };
    let b = value.as_bytes();
    if b.len() < 20 || !b.is_ascii() {
        return Err(bad());
    }
    let num = |range: std::ops::Range<usize>| -> Result<u32> {
        let s = &value[range];
        if s.bytes().all(|c| c.is_ascii_digit()) {
            s.parse().map_err(|_| bad())
        } else {
            Err(bad())
        }
    };
    let seps_ok = b[4] == b'-'
        && b[7] == b'-'
        && matches!(b[10], b'T' | b't')
        && b[13] == b':'
        && b[16] == b':';
    if !seps_ok {
        return Err(bad());
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month)
        || day == 0
        || day > month_days[month as usize - 1]
        || hour > 23
        || minute > 59
        || second > 60
    {
        return Err(bad());
    }
    let mut rest = &value[19..];
    let mut fraction = 0.0;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        fraction = format!("0.{}", &frac[..digits])
            .parse::<f64>()
            .map_err(|_| bad())?;
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let ob = rest.as_bytes();
            if ob.len() != 6 || !matches!(ob[0], b'+' | b'-') || ob[3] != b':' {
                return Err(bad());
            }
            let (h, m) = (
                num(value.len() - 5..value.len() - 3)?,
                num(value.len() - 2..value.len())?,
            );
            if h > 23 || m > 59 {
                return Err(bad());
            }
            let secs = i64::from(h * 3600 + m * 60);
            if ob[0] == b'-' {
                -secs
            } else {
                secs
            }
        }
    };
    let days = days_from_civil(i64::from(year), month, day);
    let secs = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second) - offset;
    Ok(secs as f64 + fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trip() {
        let t = UNIX_EPOCH + Duration::from_millis(1_796_014_800_123);
        let s = format_rfc3339(t);
        assert_eq!(s, "2026-11-30T05:00:00.123Z");
        assert!((parse_rfc3339("t", &s).unwrap() - 1_796_014_800.123).abs() < 1e-6);
        assert_eq!(parse_rfc3339("t", "1970-01-01T00:00:00Z").unwrap(), 0.0);
        assert_eq!(
            parse_rfc3339("t", "2024-02-29T01:00:00+01:00").unwrap(),
            parse_rfc3339("t", "2024-02-29T00:00:00Z").unwrap()
        );
        for bad in [
            "2026-11-30",
            "2026-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2026-11-30T05:00:00",
            "2026-11-30T05:00:00.Z",
            "yesterday",
        ] {
            assert!(parse_rfc3339("t", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn timeseries_query_rules() {
        assert!(TimeseriesQuery::new().validate().is_ok());
        let q = TimeseriesQuery::new()
            .from("2026-01-01T00:00:00Z")
            .to("2026-01-01T01:00:00Z")
            .step_seconds(10);
        assert!(q.validate().is_ok(), "360 buckets");
        let q = TimeseriesQuery::new()
            .from("2026-01-01T00:00:00Z")
            .to("2026-01-02T00:00:00Z")
            .step_seconds(60);
        assert!(q.validate().is_err(), "1440 buckets");
        let q = TimeseriesQuery::new()
            .from("2026-01-01T01:00:00Z")
            .to("2026-01-01T00:00:00Z");
        assert!(q.validate().is_err(), "reversed");
        assert!(TimeseriesQuery::new().from("soon").validate().is_err());
        assert!(TimeseriesQuery::new().step_seconds(9).validate().is_err());
    }

    #[test]
    fn metrics_tolerate_missing_fields() {
        let m: SandboxMetricsView =
            serde_json::from_str(r#"{"sandbox_id":"sb-1","cpu_percent":12}"#).unwrap();
        assert_eq!(m.cpu_percent, 12.0);
        let u: UsageMetrics = serde_json::from_str("{}").unwrap();
        assert_eq!(u.sandboxes.total, 0);
        let s: UsageTimeseries =
            serde_json::from_str(r#"{"metric":"gpu_hours","points":[{"ts":"x","value":1}]}"#)
                .unwrap();
        assert_eq!(s.metric, UsageMetric::Other("gpu_hours".into()));
    }
}
