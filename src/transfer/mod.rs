//! Moving whole directories between this machine and a sandbox as one tar stream.
//!
//! - [`upload_snapshot`]: a [`Snapshot`]'s archive goes up in one streamed request and is
//!   unpacked in the guest (`tar -x -C <dest>`).
//! - [`download_dir`]: the guest packs a directory, the archive streams back, is unpacked into
//!   a fresh directory next to the destination and then placed: [`extract`], the one confined
//!   unpacker for everything a sandbox sends back (pull, sync, artifacts). Every entry is
//!   judged (absolute names, `..`, links leaving the destination, writes through links, hard
//!   links to anything but a file of the same archive, devices, set-id bits, entries nobody
//!   asked for, and [`protect`]ed paths are refused and named in [`Unpacked::refused`]) and
//!   written through directory handles only.
//!
//! The guest side is a [`Remote`]: [`ApiRemote`] (files API + exec; the temporary archive in
//! the guest's `/tmp` is removed on success, failure and cancellation) or [`SshRemote`] (an
//! SSH exec channel's stdin/stdout; nothing staged).
//!
//! ```no_run
//! # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
//! use createos_sandbox::snapshot::{Snapshot, SnapshotOptions};
//! use createos_sandbox::transfer::{self, ApiRemote};
//! let remote = ApiRemote::new(sandbox);
//! let snapshot = Snapshot::scan_async("./my-app", SnapshotOptions::new()).await?;
//! transfer::upload_snapshot(&remote, &snapshot, "/root/app", None).await?;
//! transfer::download_dir(&remote, "/root/app/out", "./out".as_ref(), None).await?;
//! # Ok(()) }
//! ```

mod archive;
pub(crate) mod dirfd;
mod extract;
pub mod patch;
pub mod protect;
mod refused;
mod remote;
mod unpack;

use std::path::Path;

pub use archive::tar_of;
pub use extract::extract;
pub(crate) use extract::{Extracted, Extraction};
pub use refused::{summary as refused_summary, RefuseReason, Refused};
pub use remote::TempCleanup;
pub use remote::{ApiRemote, Remote, ScriptOutput, SshRemote, TarReader, TarWriter};
pub use unpack::{safe_name, Request, Unpacked};

use crate::api::endpoints;
use crate::api::files::ProgressFn;
use crate::error::{Error, Result};
use crate::snapshot::{Compression, Snapshot};
use crate::transport::retry::{self, Verdict};
use crate::validate;

/// What [`upload_snapshot`] sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadedDir {
    /// The guest directory.
    pub dest: String,
    /// Files and symlinks archived.
    pub files: u64,
    /// Archive bytes sent.
    pub bytes: u64,
}

/// What [`download_dir`] received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DownloadedDir {
    /// The local directory written.
    pub dest: std::path::PathBuf,
    /// What was unpacked.
    pub unpacked: Unpacked,
    /// Archive bytes received.
    pub bytes: u64,
}

/// Upload `snapshot` into the guest directory `dest` (absolute; created with its parents) as
/// one uncompressed tar stream with a known length. Existing guest files not in the snapshot
/// are kept.
pub async fn upload_snapshot(
    remote: &dyn Remote,
    snapshot: &Snapshot,
    dest: &str,
    progress: Option<ProgressFn>,
) -> Result<UploadedDir> {
    validate::guest_path("destination", dest)?;
    let length = snapshot.exact_size();
    let archive =
        || -> TarReader { Box::pin(snapshot.tar_stream(Compression::None).into_async_read()) };
    let bytes = put_tar_rebuilt(remote, dest, archive, Some(length), progress).await?;
    Ok(UploadedDir {
        dest: dest.to_string(),
        files: snapshot.files().len() as u64,
        bytes,
    })
}

/// Send the archive `archive` builds into the guest directory `dest`, building and sending it
/// again after a failure that is safe to repeat (a 429/503 refusal, a connection that never
/// opened, …, judged as for an idempotent PUT). One streamed body cannot be replayed, but the
/// transfer as a whole can: unpacking the same archive twice leaves the same tree.
pub(crate) async fn put_tar_rebuilt(
    remote: &dyn Remote,
    dest: &str,
    archive: impl Fn() -> TarReader,
    length: Option<u64>,
    progress: Option<ProgressFn>,
) -> Result<u64> {
    let policy = remote.sandbox().client.transport.retry.clone();
    let mut attempt = 0;
    loop {
        let outcome = remote
            .put_tar(dest, archive(), length, progress.clone())
            .await;
        match retry::judge(&outcome, &endpoints::UPLOAD_FILE, true, attempt, &policy) {
            Verdict::GiveUp => return outcome,
            Verdict::Retry(delay) => {
                tracing::debug!(
                    attempt,
                    ?delay,
                    dest,
                    "archive transfer refused; building and sending it again"
                );
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
        }
    }
}

/// Download the guest directory `dir` (all of it) into the local directory `dest`: created when
/// missing, merged into when it exists (files replace files; see [`extract`]). A protected
/// `dest` ([`protect::check_target`]) is refused before anything is fetched; refused entries
/// are named in [`DownloadedDir::unpacked`].
pub async fn download_dir(
    remote: &dyn Remote,
    dir: &str,
    dest: &Path,
    progress: Option<ProgressFn>,
) -> Result<DownloadedDir> {
    validate::guest_path("remote directory", dir)?;
    let (done, bytes) = fetch_into(remote, dir, None, dest, progress, Request::all()).await?;
    Ok(DownloadedDir {
        dest: dest.to_path_buf(),
        unpacked: done.unpacked,
        bytes,
    })
}

/// Fetch a tar of `names` (or all) of guest `dir` into a staging directory next to `dest`,
/// then unpack and place what `request` allows (see [`extract`]).
pub(crate) async fn fetch_into(
    remote: &dyn Remote,
    dir: &str,
    names: Option<Vec<String>>,
    dest: &Path,
    progress: Option<ProgressFn>,
    request: Request,
) -> Result<(Extracted, u64)> {
    let prepared = {
        let dest = dest.to_path_buf();
        tokio::task::spawn_blocking(move || Extraction::prepare(&dest))
            .await
            .map_err(|e| {
                Error::io(
                    "the unpacking thread failed",
                    std::io::Error::other(e.to_string()),
                )
            })??
    };
    let mut file = tokio::fs::File::from_std(prepared.archive_file()?);
    let bytes = remote.get_tar(dir, names, &mut file, progress).await?;
    let mut file = file.into_std().await;
    let done = tokio::task::spawn_blocking(move || -> Result<Extracted> {
        use std::io::Seek;
        file.seek(std::io::SeekFrom::Start(0))
            .map_err(|e| Error::io("reading the downloaded archive", e))?;
        prepared.finish(std::io::BufReader::new(file), &request)
    })
    .await
    .map_err(|e| {
        Error::io(
            "the unpacking thread failed",
            std::io::Error::other(e.to_string()),
        )
    })??;
    Ok((done, bytes))
}
