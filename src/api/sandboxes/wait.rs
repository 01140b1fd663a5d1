//! Lifecycle waits: poll the sandbox until it reaches a status, with the reference's schedule
//! (250 ms, growing ×1.25 after 5 s, capped at 2 s) and the server's `X-Poll-After` hint.

use std::time::Duration;

use tokio::time::Instant;

use super::{Sandbox, SandboxStatus, SandboxView};
use crate::error::{Error, Result};

/// The polling schedule of `wait_until_*`.
#[derive(Clone, Debug, PartialEq)]
pub struct WaitSchedule {
    /// First interval.
    pub initial: Duration,
    /// Time after which the interval starts growing.
    pub grow_after: Duration,
    /// Growth factor per poll once growing.
    pub factor: f64,
    /// Largest interval.
    pub max: Duration,
}

impl Default for WaitSchedule {
    fn default() -> Self {
        WaitSchedule {
            initial: Duration::from_millis(250),
            grow_after: Duration::from_secs(5),
            factor: 1.25,
            max: Duration::from_secs(2),
        }
    }
}

impl WaitSchedule {
    /// Interval after `current` when `elapsed` has passed since the wait began.
    pub fn next(&self, current: Duration, elapsed: Duration) -> Duration {
        if elapsed < self.grow_after {
            return current;
        }
        current.mul_f64(self.factor).min(self.max)
    }
}

/// Statuses from which `target` can no longer be reached.
fn aborts(target: &SandboxStatus, status: &SandboxStatus) -> bool {
    use SandboxStatus::*;
    match target {
        Destroyed => matches!(status, Error | Failed),
        _ => matches!(status, Error | Failed | Destroying | Destroyed),
    }
}

pub(super) async fn poll_until(
    sandbox: &Sandbox,
    target: SandboxStatus,
    budget: Duration,
    first_delay: Option<Duration>,
) -> Result<SandboxView> {
    let schedule = WaitSchedule::default();
    let started = Instant::now();
    let deadline = started + budget;
    let mut interval = schedule.initial;
    if let Some(delay) = first_delay {
        tokio::time::sleep_until((started + delay).min(deadline)).await;
    }
    loop {
        let view = match sandbox.refresh().await {
            Ok(v) => v,
            Err(e) if e.is_not_found() && target == SandboxStatus::Destroyed => {
                let mut view = sandbox.view();
                view.status = SandboxStatus::Destroyed;
                sandbox.store(view.clone());
                return Ok(view);
            }
            Err(e) => return Err(e),
        };
        if view.status == target {
            return Ok(view);
        }
        if aborts(&target, &view.status) {
            return Err(Error::invalid(
                "sandbox status",
                format!(
                    "{} is {} and will not become {target}",
                    view.id, view.status
                ),
            ));
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::Timeout {
                endpoint: format!(
                    "waiting for {} to become {target} (last status {})",
                    view.id, view.status
                ),
                after: budget,
            });
        }
        tokio::time::sleep(interval.min(deadline - now)).await;
        interval = schedule.next(interval, started.elapsed());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_grows_after_five_seconds_and_caps() {
        let s = WaitSchedule::default();
        let d = s.next(Duration::from_millis(250), Duration::from_secs(1));
        assert_eq!(d, Duration::from_millis(250));
        let d = s.next(Duration::from_millis(250), Duration::from_secs(6));
        assert_eq!(d, Duration::from_micros(312_500));
        assert_eq!(
            s.next(Duration::from_secs(2), Duration::from_secs(60)),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn abort_states() {
        assert!(aborts(&SandboxStatus::Running, &SandboxStatus::Failed));
        assert!(aborts(&SandboxStatus::Paused, &SandboxStatus::Destroyed));
        assert!(!aborts(
            &SandboxStatus::Destroyed,
            &SandboxStatus::Destroying
        ));
        assert!(!aborts(&SandboxStatus::Running, &SandboxStatus::Resuming));
    }
}
