//! Alternating sampling: every contender of a row takes one sample per round, so drift in
//! machine load, CPU frequency or cache state lands on all of them alike. The order within a
//! round is shuffled (seeded, so a run is repeatable): a fixed or merely rotated order would
//! always sample the same contender right after the same neighbour — right after a heavy one
//! such as a process spawn, say — and that neighbour's after-effects would bias it.

use std::time::Duration;

use futures::future::BoxFuture;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

/// Seed of the round orders.
pub const ORDER_SEED: u64 = 0x5eed_c0de;

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

/// The order of each of `rounds` rounds among `count` contenders: a fresh random permutation
/// per round, the same for the same `seed`.
pub fn round_orders(count: usize, rounds: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..rounds)
        .map(|_| {
            let mut order: Vec<usize> = (0..count).collect();
            order.shuffle(&mut rng);
            order
        })
        .collect()
}

/// Run `warmup` unrecorded rounds, then `rounds` recorded ones; returns the samples of each
/// contender, in contender order. The first error ends the run.
pub async fn alternate(
    contenders: &mut [Box<dyn Contender>],
    warmup: usize,
    rounds: usize,
) -> anyhow::Result<Vec<Vec<Sample>>> {
    let mut samples: Vec<Vec<Sample>> = contenders
        .iter()
        .map(|_| Vec::with_capacity(rounds))
        .collect();
    for (round, order) in round_orders(contenders.len(), warmup + rounds, ORDER_SEED)
        .into_iter()
        .enumerate()
    {
        for index in order {
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
