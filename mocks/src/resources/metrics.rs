//! Metrics (E57–E59). Upstream schemas are undocumented; this project's definition:
//! `SandboxMetricsView`, `UsageMetrics` and a usage timeseries (see decisions.md).
//! Numbers are real: CPU time and resident memory of the sandbox's processes.

use std::time::Instant;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use serde_json::json;
use time::OffsetDateTime;

use super::store::metrics::Sample;
use crate::auth::Caller;
use crate::clock::{now, parse_rfc3339, rfc3339};
use crate::envelope::{ok, ApiError};
use crate::operation::{op, Operation};
use crate::state::AppState;

pub const OPERATIONS: &[Operation] = &[
    op(
        "getSandboxMetrics",
        "GET",
        "/v1/sandboxes/{id}/metrics",
        "resources::metrics::get_sandbox_metrics",
    ),
    op(
        "getUsageMetrics",
        "GET",
        "/v1/metrics",
        "resources::metrics::get_usage_metrics",
    ),
    op(
        "getUsageTimeseries",
        "GET",
        "/v1/metrics/timeseries",
        "resources::metrics::get_usage_timeseries",
    ),
];

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/sandboxes/{id}/metrics", get(get_sandbox_metrics))
        .route("/v1/metrics", get(get_usage_metrics))
        .route("/v1/metrics/timeseries", get(get_usage_timeseries))
}

pub async fn get_sandbox_metrics(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let sandbox = state.sandbox_for(&caller, &id)?;
    let (mem_limit, created) = {
        let r = sandbox.record();
        (r.mem_mib as i64 * 1024 * 1024, r.created_at)
    };
    let usage = if sandbox.status().is_terminal() {
        crate::isolation::ResourceUsage::default()
    } else {
        sandbox.runtime().resource_usage()
    };
    let now_instant = Instant::now();
    let cpu_percent = {
        let mut last = state
            .resources
            .metrics
            .last_cpu
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let (since, prev_cpu) = last.get(&sandbox.id).copied().unwrap_or_else(|| {
            let age = (now() - created).unsigned_abs();
            (now_instant.checked_sub(age).unwrap_or(now_instant), 0.0)
        });
        last.insert(sandbox.id.clone(), (now_instant, usage.cpu_seconds));
        let wall = now_instant.duration_since(since).as_secs_f64();
        if wall > 0.0 {
            ((usage.cpu_seconds - prev_cpu).max(0.0) / wall * 100.0 * 100.0).round() / 100.0
        } else {
            0.0
        }
    };
    Ok(ok(json!({
        "sandbox_id": sandbox.id,
        "cpu_percent": cpu_percent,
        "cpu_seconds": usage.cpu_seconds,
        "mem_used_bytes": usage.mem_bytes as i64,
        "mem_limit_bytes": mem_limit,
        "processes": usage.processes,
        "sampled_at": rfc3339(now()),
    })))
}

pub async fn get_usage_metrics(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let metrics = &state.resources.metrics;
    let sample = metrics.live_sample(&state.sandboxes, &caller.tenant);
    let usage = metrics.with_usage(&caller.tenant, |u| u.clone());
    let (running, paused, other, total) = state.sandboxes.stats_of(&caller.tenant);
    Ok(ok(json!({
        "user_id": caller.user_id,
        "sandboxes": {"running": running, "paused": paused, "other": other, "total": total},
        "created_total": usage.created_total,
        "exec_total": usage.exec_total,
        "cpu_seconds_total": sample.cpu_seconds_total,
        "period_start": rfc3339(metrics.period_start),
        "sampled_at": rfc3339(sample.at),
    })))
}

#[derive(Debug, Default, Deserialize)]
pub struct TimeseriesQuery {
    pub metric: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub step_seconds: Option<String>,
}

/// Longest series a request may ask for.
pub const MAX_POINTS: i64 = 1000;

pub async fn get_usage_timeseries(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<TimeseriesQuery>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let metric = q
        .metric
        .as_deref()
        .filter(|m| !m.is_empty())
        .unwrap_or("cpu_seconds");
    if !matches!(metric, "cpu_seconds" | "sandboxes_running" | "exec_total") {
        return Err(ApiError::validation(
            "metric",
            "metric must be cpu_seconds, sandboxes_running or exec_total",
        ));
    }
    let step: i64 = match q.step_seconds.as_deref().filter(|s| !s.is_empty()) {
        None => 60,
        Some(raw) => raw
            .parse()
            .map_err(|_| ApiError::validation("step_seconds", "step_seconds must be an integer"))?,
    };
    if step < 10 {
        return Err(ApiError::validation(
            "step_seconds",
            "step_seconds must be at least 10",
        ));
    }
    let parse = |field: &str, raw: &Option<String>| -> Result<Option<OffsetDateTime>, ApiError> {
        match raw.as_deref().filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(s) => parse_rfc3339(s).map(Some).ok_or_else(|| {
                ApiError::validation(field, format!("{field} must be an RFC 3339 timestamp"))
            }),
        }
    };
    let to = parse("to", &q.to)?.unwrap_or_else(now);
    let from = parse("from", &q.from)?.unwrap_or(to - time::Duration::hours(1));
    if from >= to {
        return Err(ApiError::validation("from", "from must be before to"));
    }
    let span = (to - from).whole_seconds();
    let points_n = (span + step - 1) / step;
    if points_n > MAX_POINTS {
        return Err(ApiError::validation(
            "step_seconds",
            format!("too many points ({points_n} > {MAX_POINTS})"),
        ));
    }
    let metrics = &state.resources.metrics;
    let live = metrics.live_sample(&state.sandboxes, &caller.tenant);
    let series: Vec<Sample> = metrics
        .samples
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&caller.tenant)
        .map(|s| s.iter().cloned().collect())
        .unwrap_or_default();
    let value_of = |s: &Sample| -> serde_json::Value {
        match metric {
            "sandboxes_running" => json!(s.sandboxes_running),
            "exec_total" => json!(s.exec_total),
            _ => json!(s.cpu_seconds_total),
        }
    };
    let mut points = Vec::with_capacity(points_n as usize);
    for i in 0..points_n {
        let ts = from + time::Duration::seconds(i * step);
        let bucket_end = ts + time::Duration::seconds(step);
        // The latest sample inside or before the bucket; the live value for the bucket holding "now".
        let last_bucket = i == points_n - 1;
        let value = if live.at >= ts
            && (live.at < bucket_end || (last_bucket && live.at <= to + time::Duration::seconds(1)))
        {
            value_of(&live)
        } else {
            series
                .iter()
                .rev()
                .find(|s| s.at < bucket_end)
                .map(value_of)
                .unwrap_or_else(|| {
                    if metric == "cpu_seconds" {
                        json!(0.0)
                    } else {
                        json!(0)
                    }
                })
        };
        points.push(json!({"ts": rfc3339(ts), "value": value}));
    }
    Ok(ok(
        json!({"metric": metric, "step_seconds": step, "points": points}),
    ))
}
