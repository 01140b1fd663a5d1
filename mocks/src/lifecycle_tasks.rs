//! Background tasks: idle auto-pause and the metrics sampler. Both stop at shutdown.

use std::time::Duration;

use crate::sandbox::Status;
use crate::state::AppState;

/// How often usage samples are taken for the timeseries.
const SAMPLE_EVERY: Duration = Duration::from_secs(10);

pub fn spawn_background(state: &AppState) {
    let unit = state.config.auto_pause_unit;
    // Check a few times per auto-pause "second", never more often than every 5 ms.
    let tick = (unit / 4).clamp(Duration::from_millis(5), Duration::from_millis(500));
    let s = state.clone();
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(tick);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = s.shutdown.cancelled() => return,
                _ = interval.tick() => auto_pause_idle(&s),
            }
        }
    });
    let s = state.clone();
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(SAMPLE_EVERY);
        loop {
            tokio::select! {
                _ = s.shutdown.cancelled() => return,
                _ = interval.tick() => {
                    let s2 = s.clone();
                    let _ = tokio::task::spawn_blocking(move || s2.resources.metrics.sample_all(&s2.sandboxes)).await;
                }
            }
        }
    });
}

/// Pauses every running sandbox idle for longer than its `auto_pause_after_seconds`.
/// Idle = no control-plane call touched it and no exec/stream is in flight.
fn auto_pause_idle(state: &AppState) {
    let unit = state.config.auto_pause_unit;
    for sandbox in state.sandboxes.all() {
        let due = {
            let r = sandbox.record();
            match (r.status, r.auto_pause_after_seconds) {
                (Status::Running, Some(secs)) if r.busy == 0 => {
                    r.last_activity.elapsed() >= unit * secs
                }
                _ => false,
            }
        };
        if due {
            tracing::info!(sandbox = %sandbox.id, "idle auto-pause");
            crate::sandbox::lifecycle::begin_pause(state, &sandbox);
        }
    }
}
