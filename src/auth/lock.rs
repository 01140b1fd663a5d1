//! Cross-process exclusive lock on `<home>/.createos/.oauth.lock`.
//!
//! Refresh tokens may rotate: two processes refreshing with the same refresh token can get one
//! of them (or the whole session) revoked. Every refresh in this crate therefore happens under
//! this advisory lock, and the caller re-reads `.oauth` once it holds it. The CLI takes no lock,
//! so the re-read, not the lock, is what protects against it.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::Error;

/// Held lock; released when dropped (closing the descriptor releases it too, even on a crash).
#[derive(Debug)]
pub(crate) struct RefreshLock {
    file: Option<File>,
}

impl Drop for RefreshLock {
    fn drop(&mut self) {
        if let Some(file) = &self.file {
            let _ = file.unlock();
        }
    }
}

/// Take the lock, waiting at most `wait` for another holder.
///
/// A home the user cannot write to (a read-only mount of `.createos/`) cannot hold a lock file;
/// the refresh then proceeds unlocked, as the CLI always does, rather than failing outright.
pub(crate) async fn acquire(path: &Path, wait: Duration) -> Result<RefreshLock, Error> {
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

fn lock_blocking(path: &Path) -> Result<RefreshLock, Error> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let file = match options.open(path) {
        Ok(file) => file,
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
            return Ok(RefreshLock { file: None });
        }
        Err(e) => return Err(Error::io(format!("could not open {}", path.display()), e)),
    };
    file.lock().map_err(|e| Error::io(format!("could not lock {}", path.display()), e))?;
    Ok(RefreshLock { file: Some(file) })
}
