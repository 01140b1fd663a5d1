//! Non-blocking I/O on raw pipe ends and PTY masters through tokio's `AsyncFd`, so one
//! reader loop serves pipes and PTYs alike and can drain "whatever is there right now".

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use tokio::io::unix::AsyncFd;

/// An owned descriptor in non-blocking mode registered with the tokio reactor.
pub struct FdIo {
    inner: AsyncFd<OwnedFd>,
}

/// One non-blocking read attempt.
pub enum ReadOutcome {
    Data(usize),
    /// The writer side is gone (EOF, or EIO on a PTY master whose slave was closed).
    Eof,
    WouldBlock,
}

/// Puts `fd` in non-blocking mode (the flag lives on the open file description).
pub fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    let flags = fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL).map_err(io::Error::from)?;
    let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
    fcntl(fd.as_raw_fd(), FcntlArg::F_SETFL(flags)).map_err(io::Error::from)?;
    Ok(())
}

impl FdIo {
    /// Registers `fd` (switched to non-blocking) with the reactor. Must run inside tokio.
    pub fn new(fd: OwnedFd) -> io::Result<Self> {
        set_nonblocking(&fd)?;
        // SAFETY: an OwnedFd is open and keeps referring to the same description until
        // the AsyncFd (its owner) is dropped.
        let inner = unsafe { AsyncFd::register(fd) }?;
        Ok(FdIo { inner })
    }

    pub fn raw(&self) -> std::os::fd::BorrowedFd<'_> {
        self.inner.get_ref().as_fd()
    }

    /// Reads once without waiting.
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<ReadOutcome> {
        loop {
            return match nix::unistd::read(self.inner.get_ref().as_raw_fd(), buf) {
                Ok(0) => Ok(ReadOutcome::Eof),
                Ok(n) => Ok(ReadOutcome::Data(n)),
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => Ok(ReadOutcome::WouldBlock),
                Err(Errno::EIO) => Ok(ReadOutcome::Eof),
                Err(e) => Err(io::Error::from(e)),
            };
        }
    }

    /// Waits until data (or EOF) is available and reads it; never returns `WouldBlock`.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<ReadOutcome> {
        loop {
            let mut guard = self.inner.readable().await?;
            match self.try_read(buf)? {
                ReadOutcome::WouldBlock => guard.clear_ready(),
                other => return Ok(other),
            }
        }
    }

    /// Writes all of `data`, waiting for room as needed.
    pub async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let mut guard = self.inner.writable().await?;
            match nix::unistd::write(self.inner.get_ref(), data) {
                Ok(n) => data = &data[n..],
                Err(Errno::EAGAIN) | Err(Errno::EINTR) => guard.clear_ready(),
                Err(e) => return Err(io::Error::from(e)),
            }
        }
        Ok(())
    }
}
