//! Cross-process exclusive advisory file locks (`flock`), the one lock kind of this crate.
//!
//! - The OAuth refresh takes `<home>/.createos/.oauth.lock` ([`acquire`]). Refresh tokens may
//!   rotate: two processes refreshing with the same refresh token can get one of them (or the
//!   whole session) revoked. Every refresh in this crate therefore happens under this lock, and
//!   the caller re-reads `.oauth` once it holds it. The CLI takes no lock, so the re-read, not
//!   the lock, is what protects against it.
//! - The SSH host-key pins take `<known_hosts>.lock` ([`FileLock::exclusive`]) around each
//!   read-modify-write of the pin file, so two `cos` processes pinning at once never lose a pin.
//!
//! The lock file is never deleted: deleting it would let two processes each lock a different
//! inode. Each acquisition opens the file anew, so threads of one process exclude each other
//! just as processes do (a `flock` belongs to the open file description).

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::Error;

/// Held lock; released when dropped (closing the descriptor releases it too, even on a crash).
#[derive(Debug)]
pub(crate) struct FileLock {
    file: Option<File>,
}

impl Drop for FileLock {
    fn drop(&mut self) {
        if let Some(file) = &self.file {
            let _ = file.unlock();
        }
    }
}

impl FileLock {
    /// Open (creating it 0600) and lock `path`, blocking until no other holder is left. For
    /// short critical sections; async code that may wait long uses [`acquire`].
    pub(crate) fn exclusive(path: &Path) -> io::Result<FileLock> {
        let file = open(path)?;
        file.lock()?;
        Ok(FileLock { file: Some(file) })
    }
}

fn open(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// Take the refresh lock, waiting at most `wait` for another holder.
///
/// A home the user cannot write to (a read-only mount of `.createos/`) cannot hold a lock file;
/// the refresh then proceeds unlocked, as the CLI always does, rather than failing outright.
pub(crate) async fn acquire(path: &Path, wait: Duration) -> Result<FileLock, Error> {
    let owned: PathBuf = path.to_path_buf();
    let blocking = tokio::task::spawn_blocking(move || lock_blocking(&owned));
    // On timeout the blocking thread keeps waiting; when it gets the lock its result is dropped,
    // which closes the file and releases the lock again.
    match tokio::time::timeout(wait, blocking).await {
        Ok(Ok(result)) => result,
        Ok(Err(join)) => Err(Error::io(
            format!("could not lock {}", path.display()),
            io::Error::other(join.to_string()),
        )),
        // Another process has been refreshing for longer than its own HTTP timeout allows.
        Err(_) => Err(Error::Timeout {
            endpoint: format!("waiting for the session refresh lock {}", path.display()),
            after: wait,
        }),
    }
}

fn lock_blocking(path: &Path) -> Result<FileLock, Error> {
    match FileLock::exclusive(path) {
        Ok(lock) => Ok(lock),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            tracing::warn!(
                path = %path.display(),
                error = %e,
                "cannot create the refresh lock file; refreshing without it"
            );
            Ok(FileLock { file: None })
        }
        Err(e) => Err(Error::io(format!("could not lock {}", path.display()), e)),
    }
}
