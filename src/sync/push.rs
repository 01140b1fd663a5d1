//! Sending the changed files to the guest. A large set travels as a few tar streams at once,
//! each unpacked by its own `tar` in the guest: unpacking many small files is bound by the
//! guest kernel's file creation (inode allocation), which one `tar` does on one core. A small
//! set (the usual incremental sync) stays one stream, so it costs no extra round trips.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::api::files::ProgressFn;
use crate::error::Result;
use crate::transfer::{self, Remote};

/// Below this many files one stream is used.
const FILES_PER_STREAM: usize = 4000;
/// At most this many streams at once.
const MAX_STREAMS: usize = 4;

/// Send `names` (relative paths under `local`, sorted) into the guest directory `dest`;
/// returns the archive bytes sent. Progress is the sum over the streams, without a total.
pub(super) async fn push_files(
    remote: &dyn Remote,
    local: &Path,
    dest: &str,
    names: Vec<String>,
    progress: Option<ProgressFn>,
) -> Result<u64> {
    let parts = split(names);
    let done: Arc<Vec<AtomicU64>> = Arc::new(parts.iter().map(|_| AtomicU64::new(0)).collect());
    let single = parts.len() == 1;
    let sends = parts.into_iter().enumerate().map(|(i, part)| {
        let progress = match (&progress, single) {
            (Some(report), true) => Some(Arc::clone(report)),
            (Some(report), false) => Some(summed(Arc::clone(report), Arc::clone(&done), i)),
            (None, _) => None,
        };
        let archive = move || transfer::tar_of(local.to_path_buf(), part.clone());
        async move { transfer::put_tar_rebuilt(remote, dest, archive, None, progress).await }
    });
    // the first failure drops the other streams (each cleans up after itself)
    Ok(futures::future::try_join_all(sends)
        .await?
        .into_iter()
        .sum())
}

/// A progress callback for stream `slot` that reports the bytes of all streams together.
fn summed(report: ProgressFn, done: Arc<Vec<AtomicU64>>, slot: usize) -> ProgressFn {
    Arc::new(move |bytes, _total| {
        done[slot].store(bytes, Ordering::Relaxed);
        report(done.iter().map(|d| d.load(Ordering::Relaxed)).sum(), None)
    })
}

/// `names` in contiguous runs of about equal length (files of one directory stay together,
/// so each stream creates its own directories' files).
fn split(names: Vec<String>) -> Vec<Vec<String>> {
    let streams = (names.len() / FILES_PER_STREAM).clamp(1, MAX_STREAMS);
    if streams == 1 {
        return vec![names];
    }
    let per = names.len().div_ceil(streams);
    let mut parts = Vec::with_capacity(streams);
    let mut names = names.into_iter().peekable();
    while names.peek().is_some() {
        parts.push(names.by_ref().take(per).collect());
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_sets_stay_one_stream_and_large_ones_split_evenly() {
        let names = |n: usize| {
            (0..n)
                .map(|i| format!("d{:03}/f{i:05}", i / 100))
                .collect::<Vec<_>>()
        };
        assert_eq!(split(names(10)).len(), 1);
        assert_eq!(split(Vec::new()).len(), 1);
        let parts = split(names(20_000));
        assert_eq!(parts.len(), 4);
        assert!(parts.iter().all(|p| p.len() == 5_000));
        let joined: Vec<String> = parts.concat();
        assert_eq!(joined, names(20_000));
        let parts = split(names(10_001));
        assert_eq!(parts.len(), 2);
        assert_eq!(parts.iter().map(Vec::len).sum::<usize>(), 10_001);
    }

    #[test]
    fn progress_is_summed_over_streams() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let report: ProgressFn =
            Arc::new(move |bytes, total| sink.lock().unwrap().push((bytes, total)));
        let done = Arc::new(vec![AtomicU64::new(0), AtomicU64::new(0)]);
        let (a, b) = (
            summed(Arc::clone(&report), Arc::clone(&done), 0),
            summed(report, done, 1),
        );
        a(10, Some(100));
        b(5, Some(50));
        a(20, Some(100));
        assert_eq!(*seen.lock().unwrap(), [(10, None), (15, None), (25, None)]);
    }
}
