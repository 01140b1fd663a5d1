//! Watch mode: sync, then sync again whenever the local directory changes (events debounced)
//! and, for two-way, every `poll` interval to pick up guest-side changes.

use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{SyncReport, Syncer};
use crate::error::{Error, Result};

/// Quiet time after the last file-system event before a sync starts.
pub const DEBOUNCE: Duration = Duration::from_millis(300);

impl Syncer {
    /// Sync now, then after every burst of local changes (debounced by `DEBOUNCE`, 300 ms) and every
    /// `poll` (guest changes; `None`: only local events), until `cancel` fires. Each outcome
    /// goes to `on_report`; a failed sync does not end the watch (the next change retries).
    /// Fails only when the directory cannot be watched.
    pub async fn watch(
        &self,
        cancel: CancellationToken,
        poll: Option<Duration>,
        mut on_report: impl FnMut(Result<SyncReport>) + Send,
    ) -> Result<()> {
        let (tx, mut events) = mpsc::unbounded_channel::<()>();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if event.is_ok() {
                    let _ = tx.send(());
                }
            })
            .map_err(|e| {
                Error::io(
                    "starting the file watcher",
                    std::io::Error::other(e.to_string()),
                )
            })?;
        watcher
            .watch(self.local(), RecursiveMode::Recursive)
            .map_err(|e| {
                Error::io(
                    format!("watching {}", self.local().display()),
                    std::io::Error::other(e.to_string()),
                )
            })?;

        on_report(self.run().await);
        let mut ticker = poll.map(|every| {
            let mut t = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        });
        loop {
            let tick = async {
                match ticker.as_mut() {
                    Some(t) => {
                        t.tick().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                _ = tick => {}
                event = events.recv() => {
                    if event.is_none() {
                        return Ok(());
                    }
                    // wait for the burst to end
                    loop {
                        tokio::select! {
                            _ = cancel.cancelled() => return Ok(()),
                            more = events.recv() => if more.is_none() { return Ok(()) },
                            _ = tokio::time::sleep(DEBOUNCE) => break,
                        }
                    }
                }
            }
            let outcome = tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                outcome = self.run() => outcome,
            };
            on_report(outcome);
            // Events that arrived during the sync stay queued: they may be edits made while it
            // ran. Those caused by our own pulls cost one more sync that finds nothing to do
            // (and pulls nothing, so it settles).
        }
    }
}
