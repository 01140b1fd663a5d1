//! The one wait for a stop signal (Ctrl-C, SIGTERM and, for a Herdr pane, SIGHUP) that every
//! face uses: `cos mcp` shuts its runtime down on it, the CLI's jobs, sync watches and tunnels
//! and the Herdr pane actions stop and clean up. A leaf module: it imports nothing of the faces.

use std::io;

use tokio_util::sync::CancellationToken;

/// The stop signals, with their handlers installed: from [`StopSignals::install`] on, these
/// signals no longer kill the process; each one ends [`StopSignals::recv`] instead.
#[derive(Debug)]
pub struct StopSignals {
    #[cfg(unix)]
    streams: Vec<tokio::signal::unix::Signal>,
    /// Fallback: tokio's Ctrl-C handler only.
    ctrl_c_only: bool,
}

impl StopSignals {
    /// Install handlers for Ctrl-C (SIGINT) and SIGTERM, and SIGHUP (the terminal or pane
    /// closing) when `hangup`.
    pub fn install(hangup: bool) -> io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let mut kinds = vec![SignalKind::interrupt(), SignalKind::terminate()];
            if hangup {
                kinds.push(SignalKind::hangup());
            }
            let streams = kinds
                .into_iter()
                .map(signal)
                .collect::<io::Result<Vec<_>>>()?;
            Ok(StopSignals {
                streams,
                ctrl_c_only: false,
            })
        }
        #[cfg(not(unix))]
        {
            let _ = hangup;
            Ok(StopSignals { ctrl_c_only: true })
        }
    }

    /// [`StopSignals::install`], or when a handler cannot be installed, tokio's Ctrl-C handler
    /// alone (with a warning).
    pub fn install_or_ctrl_c(hangup: bool) -> Self {
        Self::install(hangup).unwrap_or_else(|err| {
            tracing::warn!(error = %err, "cannot install the signal handlers; only Ctrl-C stops");
            StopSignals {
                #[cfg(unix)]
                streams: Vec::new(),
                ctrl_c_only: true,
            }
        })
    }

    /// Wait for the first stop signal.
    pub async fn recv(&mut self) {
        if self.ctrl_c_only {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
            return;
        }
        #[cfg(unix)]
        {
            let waits = self.streams.iter_mut().map(|s| Box::pin(s.recv()));
            futures::future::select_all(waits).await;
        }
    }

    /// A token cancelled by the first stop signal, after `on_stop` ran (a note to the user,
    /// say). The handlers are already installed, so a signal arriving later never kills the
    /// process between two steps of a cleanup.
    pub fn cancel_token(mut self, on_stop: impl FnOnce() + Send + 'static) -> CancellationToken {
        let token = CancellationToken::new();
        let cancel = token.clone();
        tokio::spawn(async move {
            self.recv().await;
            on_stop();
            cancel.cancel();
        });
        token
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    // One test sends the signals, so no other test of this binary sees a SIGTERM/SIGHUP
    // without a handler.
    #[tokio::test]
    async fn each_stop_signal_ends_the_wait_and_cancels_the_token() {
        let pid = std::process::id() as libc::pid_t;
        for (hangup, sig) in [
            (false, libc::SIGTERM),
            (false, libc::SIGINT),
            (true, libc::SIGHUP),
        ] {
            let signals = StopSignals::install(hangup).expect("handlers");
            let token = signals.cancel_token(|| {});
            assert!(!token.is_cancelled());
            // SAFETY: kill(2) on our own pid with a signal whose handler is installed above.
            assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
            tokio::time::timeout(std::time::Duration::from_secs(30), token.cancelled())
                .await
                .expect("cancelled");
        }
    }
}
