//! Pausing a sandbox freezes its sshd: a paused sandbox's embedded server reads and
//! writes nothing (connections hang, as with a frozen VM) until it is resumed. Stopping
//! the server (destroy, restart) breaks the connection at once, frozen or not.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

type Waiter = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A stream that stalls in both directions while `frozen` holds `true`, and fails in both
/// once `stop` is cancelled.
pub struct Gated<S> {
    inner: S,
    frozen: watch::Receiver<bool>,
    read_wait: Option<Waiter>,
    write_wait: Option<Waiter>,
    read_stop: Pin<Box<WaitForCancellationFutureOwned>>,
    write_stop: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<S> Gated<S> {
    pub fn new(inner: S, frozen: watch::Receiver<bool>, stop: CancellationToken) -> Self {
        Gated {
            inner,
            frozen,
            read_wait: None,
            write_wait: None,
            read_stop: Box::pin(stop.clone().cancelled_owned()),
            write_stop: Box::pin(stop.cancelled_owned()),
        }
    }
}

/// Fails once the server stopped (and registers the waker for that).
fn poll_stopped(
    stop: &mut Pin<Box<WaitForCancellationFutureOwned>>,
    cx: &mut Context<'_>,
) -> io::Result<()> {
    match stop.as_mut().poll(cx) {
        Poll::Ready(()) => Err(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "the guest sshd stopped",
        )),
        Poll::Pending => Ok(()),
    }
}

/// Ready once the gate is open; registers the task's waker otherwise.
fn poll_open(
    frozen: &watch::Receiver<bool>,
    slot: &mut Option<Waiter>,
    cx: &mut Context<'_>,
) -> Poll<()> {
    if !*frozen.borrow() {
        *slot = None;
        return Poll::Ready(());
    }
    let waiter = slot.get_or_insert_with(|| {
        let mut rx = frozen.clone();
        // A closed sender (server gone) opens the gate; the stream then fails on its own.
        Box::pin(async move {
            let _ = rx.wait_for(|frozen| !*frozen).await;
        })
    });
    match waiter.as_mut().poll(cx) {
        Poll::Ready(()) => {
            *slot = None;
            Poll::Ready(())
        }
        Poll::Pending => Poll::Pending,
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Gated<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        poll_stopped(&mut this.read_stop, cx)?;
        if poll_open(&this.frozen, &mut this.read_wait, cx).is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Gated<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        poll_stopped(&mut this.write_stop, cx)?;
        if poll_open(&this.frozen, &mut this.write_wait, cx).is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        poll_stopped(&mut this.write_stop, cx)?;
        if poll_open(&this.frozen, &mut this.write_wait, cx).is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_frozen_gate_holds_data_until_thawed() {
        let (a, mut b) = tokio::io::duplex(64);
        let (tx, rx) = watch::channel(true);
        let stop = CancellationToken::new();
        let mut gated = Gated::new(a, rx, stop.clone());
        b.write_all(b"hi").await.unwrap();
        let mut buf = [0u8; 2];
        let stalled =
            tokio::time::timeout(Duration::from_millis(50), gated.read_exact(&mut buf)).await;
        assert!(stalled.is_err(), "a frozen gate must not deliver data");
        tx.send(false).unwrap();
        tokio::time::timeout(Duration::from_secs(5), gated.read_exact(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&buf, b"hi");
        // Stopping breaks a pending read, even while frozen.
        tx.send(true).unwrap();
        let pending = tokio::spawn(async move { gated.read_exact(&mut buf).await });
        stop.cancel();
        let ended = tokio::time::timeout(Duration::from_secs(5), pending)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ended.unwrap_err().kind(), io::ErrorKind::ConnectionAborted);
    }
}
