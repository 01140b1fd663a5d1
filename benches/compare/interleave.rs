//! Alternating sampling: every contender of a row takes one sample per round, in an order that
//! rotates each round (A,B,C then B,C,A …), so drift in machine load, CPU frequency or cache
//! state lands on all of them alike instead of on whichever ran last.

use std::time::Duration;

use futures::future::BoxFuture;

/// One measured operation: how long it took and how many payload bytes it moved (0 when only
/// the time matters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub elapsed: Duration,
    pub bytes: u64,
}

impl Sample {
    pub fn time(elapsed: Duration) -> Sample {
        Sample { elapsed, bytes: 0 }
    }
}

/// Something that can be measured repeatedly. `sample` performs one operation and reports it;
/// it measures its own time so set-up and checks around the operation stay out of the figure.
pub trait Contender: Send {
    fn label(&self) -> String;
    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>>;

    /// Release what the contender holds (worker processes, remote processes) once sampling is
    /// over.
    fn close(self: Box<Self>) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }
}

/// The contender indices of round `round` among `count` contenders: all of them, starting at
/// `round % count` and wrapping.
pub fn round_order(round: usize, count: usize) -> Vec<usize> {
    (0..count).map(|i| (round + i) % count).collect()
}

/// Run `warmup` unrecorded rounds, then `rounds` recorded ones; returns the samples of each
/// contender, in contender order. The first error ends the run.
pub async fn alternate(
    contenders: &mut [Box<dyn Contender>],
    warmup: usize,
    rounds: usize,
) -> anyhow::Result<Vec<Vec<Sample>>> {
    let mut samples: Vec<Vec<Sample>> = contenders.iter().map(|_| Vec::with_capacity(rounds)).collect();
    for round in 0..warmup + rounds {
        for index in round_order(round, contenders.len()) {
            let contender = &mut contenders[index];
            let sample = contender
                .sample()
                .await
                .map_err(|e| e.context(format!("sampling {}", contender.label())))?;
            if round >= warmup {
                samples[index].push(sample);
            }
        }
    }
    Ok(samples)
}

/// The durations of `samples`.
pub fn durations(samples: &[Sample]) -> Vec<Duration> {
    samples.iter().map(|s| s.elapsed).collect()
}

/// `(bytes, elapsed)` of `samples`, for throughput.
pub fn transfers(samples: &[Sample]) -> Vec<(u64, Duration)> {
    samples.iter().map(|s| (s.bytes, s.elapsed)).collect()
}
