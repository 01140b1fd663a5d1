//! E57–E59: sandbox metrics, account usage and usage over time (this project's definition).

use std::time::{Duration, SystemTime};

use createos_sandbox::api::metrics::{format_rfc3339, TimeseriesQuery, UsageMetric};

use crate::common;

#[tokio::test]
async fn sandbox_metrics_snapshot() {
    let env = common::start().await;
    let sandbox = crate::running_sandbox(&env).await;
    let m = sandbox.metrics().await.unwrap();
    assert_eq!(m.sandbox_id, sandbox.id());
    assert!(m.cpu_percent >= 0.0 && m.cpu_seconds >= 0.0);
    assert_eq!(m.mem_limit_bytes, 1024 * 1024 * 1024, "the shape's memory");
    assert!(m.mem_used_bytes >= 0 && m.mem_used_bytes <= m.mem_limit_bytes);
    assert!(m.sampled_at.as_deref().is_some_and(|t| t.ends_with('Z')));

    let (_, other) = env.new_tenant(true).await;
    let err = other
        .sandbox(sandbox.id())
        .unwrap()
        .metrics()
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    env.shutdown().await;
}

#[tokio::test]
async fn usage_follows_the_account() {
    let env = common::start().await;
    let me = env.client.whoami().await.unwrap();
    let before = env.client.usage_metrics().await.unwrap();
    assert_eq!(before.user_id, me.user_id);
    assert_eq!(before.sandboxes.total, 0);
    let a = crate::running_sandbox(&env).await;
    let _b = crate::running_sandbox(&env).await;
    a.destroy().await.unwrap();
    let after = env.client.usage_metrics().await.unwrap();
    assert_eq!(after.sandboxes.running, 1);
    assert_eq!(after.created_total, before.created_total + 2);
    assert!(after.cpu_seconds_total >= 0.0);
    assert!(after.period_start.is_some() && after.sampled_at.is_some());

    let (_, other) = env.new_tenant(true).await;
    let theirs = other.usage_metrics().await.unwrap();
    assert_ne!(theirs.user_id, me.user_id);
    assert_eq!(theirs.created_total, 0);
    env.shutdown().await;
}

#[tokio::test]
async fn timeseries_windows_and_defaults() {
    let env = common::start().await;
    let _sandbox = crate::running_sandbox(&env).await;

    let default = env
        .client
        .usage_timeseries(TimeseriesQuery::new())
        .await
        .unwrap();
    assert_eq!(default.metric, UsageMetric::CpuSeconds);
    assert_eq!(default.step_seconds, 60);
    assert!(
        (60..=61).contains(&default.points.len()),
        "{} points in the default hour",
        default.points.len()
    );

    // The window reaches a minute past now, so its last bucket holds the live sample.
    let now = SystemTime::now();
    let to = now + Duration::from_secs(60);
    let from = to - Duration::from_secs(600);
    let q = TimeseriesQuery::new()
        .metric(UsageMetric::SandboxesRunning)
        .from_time(from)
        .to_time(to)
        .step_seconds(60);
    let series = env.client.usage_timeseries(q).await.unwrap();
    assert_eq!(series.metric, UsageMetric::SandboxesRunning);
    assert_eq!(series.step_seconds, 60);
    assert!(
        (10..=11).contains(&series.points.len()),
        "{}",
        series.points.len()
    );
    assert!(series
        .points
        .iter()
        .all(|p| p.ts.ends_with('Z') && p.value >= 0.0));
    assert!(
        series.points.windows(2).all(|w| w[0].ts < w[1].ts),
        "oldest first"
    );
    assert_eq!(
        series.points.last().unwrap().value,
        1.0,
        "one sandbox running in the bucket holding now"
    );

    let exec = env
        .client
        .usage_timeseries(
            TimeseriesQuery::new()
                .metric(UsageMetric::ExecTotal)
                .last(Duration::from_secs(3600))
                .step_seconds(600),
        )
        .await
        .unwrap();
    assert_eq!(exec.step_seconds, 600);
    assert!((6..=7).contains(&exec.points.len()));
    env.shutdown().await;
}

#[tokio::test]
async fn bad_windows_are_refused_before_sending() {
    let env = common::start().await;
    let c = &env.client;
    let now = SystemTime::now();
    let bad = [
        TimeseriesQuery::new().step_seconds(5),
        TimeseriesQuery::new().from("yesterday"),
        TimeseriesQuery::new()
            .from_time(now)
            .to_time(now - Duration::from_secs(60)),
        TimeseriesQuery::new()
            .from_time(now - Duration::from_secs(86_400))
            .to_time(now)
            .step_seconds(10),
    ];
    for q in bad {
        let err = c.usage_timeseries(q.clone()).await.unwrap_err();
        assert!(
            matches!(err, createos_sandbox::Error::InvalidInput { .. }),
            "{q:?}: {err:?}"
        );
    }
    assert_eq!(env.requests("getUsageTimeseries").await, 0);
    // The server applies the same rule to what the client cannot see coming (raw request).
    let raw = reqwest::Client::new()
        .get(format!("{}/v1/metrics/timeseries", env.base_url()))
        .query(&[("step_seconds", "1"), ("to", &format_rfc3339(now))])
        .header("X-Api-Key", env.mock.api_key())
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status().as_u16(), 400);
    env.shutdown().await;
}
