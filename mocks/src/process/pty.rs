//! Pseudo-terminals: opening a master/slave pair with a window size, resizing it, and
//! finding the foreground job (process group) a PTY currently serves.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};

use nix::pty::Winsize;

/// Default PTY size when the client gave none.
pub const DEFAULT_ROWS: u16 = 24;
pub const DEFAULT_COLS: u16 = 80;
/// Largest accepted rows/cols value.
pub const MAX_DIMENSION: u16 = 1000;

/// Both ends of a fresh PTY; both descriptors are close-on-exec.
pub struct PtyPair {
    pub master: OwnedFd,
    pub slave: OwnedFd,
}

fn winsize(rows: u16, cols: u16) -> Winsize {
    Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// Opens a PTY pair sized `rows`×`cols`.
#[cfg(target_os = "linux")]
pub fn open_pty(rows: u16, cols: u16) -> io::Result<PtyPair> {
    use nix::fcntl::OFlag;
    use nix::sys::stat::Mode;
    // Opening with O_CLOEXEC from the start keeps concurrently spawned children from
    // inheriting these descriptors (an inherited slave would hide the session's EOF).
    let master = nix::pty::posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC)?;
    nix::pty::grantpt(&master)?;
    nix::pty::unlockpt(&master)?;
    let slave_path = nix::pty::ptsname_r(&master)?;
    let slave = nix::fcntl::open(
        slave_path.as_str(),
        OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    // SAFETY: both descriptors were just opened and are owned by nobody else.
    let master = unsafe { OwnedFd::from_raw_fd(master.into_raw_fd()) };
    let slave = unsafe { OwnedFd::from_raw_fd(slave) };
    set_window_size(&master, rows, cols)?;
    Ok(PtyPair { master, slave })
}

/// Opens a PTY pair sized `rows`×`cols`.
#[cfg(not(target_os = "linux"))]
pub fn open_pty(rows: u16, cols: u16) -> io::Result<PtyPair> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    let ws = winsize(rows, cols);
    let pair = nix::pty::openpty(Some(&ws), None)?;
    for fd in [&pair.master, &pair.slave] {
        fcntl(fd.as_raw_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    }
    Ok(PtyPair {
        master: pair.master,
        slave: pair.slave,
    })
}

nix::ioctl_write_ptr_bad!(ioctl_set_winsize, nix::libc::TIOCSWINSZ, Winsize);
nix::ioctl_read_bad!(ioctl_get_winsize, nix::libc::TIOCGWINSZ, Winsize);

/// Sets the window size (TIOCSWINSZ). The kernel then sends SIGWINCH to the terminal's
/// foreground process group when the size actually changed.
pub fn set_window_size<F: AsRawFd>(fd: &F, rows: u16, cols: u16) -> io::Result<()> {
    let ws = winsize(rows, cols);
    // SAFETY: `ws` is a valid winsize for the duration of the call.
    unsafe { ioctl_set_winsize(fd.as_raw_fd(), &ws) }?;
    Ok(())
}

/// Current window size (rows, cols).
#[cfg(test)]
pub fn window_size<F: AsRawFd>(fd: &F) -> io::Result<(u16, u16)> {
    let mut ws = winsize(0, 0);
    // SAFETY: `ws` is a valid, writable winsize.
    unsafe { ioctl_get_winsize(fd.as_raw_fd(), &mut ws) }?;
    Ok((ws.ws_row, ws.ws_col))
}

/// Process group currently in the foreground of the terminal behind `master`.
pub fn foreground_group(master: BorrowedFd<'_>) -> Option<i32> {
    match nix::unistd::tcgetpgrp(master) {
        Ok(pgid) if pgid.as_raw() > 0 => Some(pgid.as_raw()),
        _ => None,
    }
}

/// Validates a client-supplied dimension: absent or 0 → the default, otherwise 1..=1000.
pub fn dimension(value: Option<i64>, default: u16, field: &str) -> Result<u16, String> {
    match value {
        None | Some(0) => Ok(default),
        Some(v) if (1..=MAX_DIMENSION as i64).contains(&v) => Ok(v as u16),
        Some(_) => Err(format!("{field} must be between 1 and {MAX_DIMENSION}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pty_size_round_trips() {
        let pair = open_pty(33, 101).expect("openpty");
        assert_eq!(window_size(&pair.master).unwrap(), (33, 101));
        set_window_size(&pair.master, 50, 200).unwrap();
        assert_eq!(window_size(&pair.slave).unwrap(), (50, 200));
    }

    #[test]
    fn dimensions_validate() {
        assert_eq!(dimension(None, 24, "rows"), Ok(24));
        assert_eq!(dimension(Some(0), 80, "cols"), Ok(80));
        assert_eq!(dimension(Some(1000), 80, "cols"), Ok(1000));
        assert!(dimension(Some(1001), 80, "cols").is_err());
        assert!(dimension(Some(-3), 80, "cols").is_err());
    }
}
