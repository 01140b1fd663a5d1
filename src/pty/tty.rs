//! The local terminal side of an attachment: raw mode that is always undone, the current size,
//! and a stream of size changes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use futures::Stream;

use crate::error::{Error, Result};

/// Whether some guard currently holds the terminal in raw mode (shared with the panic hook).
static RAW: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

/// Raw mode for as long as the guard lives. The terminal is restored when it drops, on every
/// return path, and also when the program panics (a hook restores it before the panic message
/// is printed, so the message is readable).
#[derive(Debug)]
pub struct RawMode {
    _private: (),
}

impl RawMode {
    /// Put the terminal in raw mode (no echo, no line buffering, no signal keys).
    pub fn enable() -> Result<Self> {
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
            }));
        });
        crossterm::terminal::enable_raw_mode()
            .map_err(|e| Error::io("switching the terminal to raw mode", e))?;
        RAW.store(true, Ordering::SeqCst);
        Ok(RawMode { _private: () })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        restore();
    }
}

fn restore() {
    if RAW.swap(false, Ordering::SeqCst) {
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// The terminal's size as (rows, cols), or `fallback` when there is no terminal.
pub fn size_or(fallback: (u16, u16)) -> (u16, u16) {
    match crossterm::terminal::size() {
        Ok((cols, rows)) if rows > 0 && cols > 0 => (rows, cols),
        _ => fallback,
    }
}

/// The current size, then one item per change (SIGWINCH on Unix). Sizes are (rows, cols).
pub fn sizes(fallback: (u16, u16)) -> impl Stream<Item = (u16, u16)> + Send + Unpin {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let _ = tx.send(size_or(fallback));
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut winch) = signal(SignalKind::window_change()) {
            tokio::spawn(async move {
                let mut last = size_or(fallback);
                while winch.recv().await.is_some() {
                    let now = size_or(fallback);
                    if now != last {
                        last = now;
                        if tx.send(now).is_err() {
                            break;
                        }
                    }
                }
            });
        }
    }
    tokio_stream_from(rx)
}

fn tokio_stream_from<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl Stream<Item = T> + Send + Unpin {
    Box::pin(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)))
}
