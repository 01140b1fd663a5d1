//! [`Download`]: a file being read from a sandbox, consumed as a stream, into memory, or into a
//! local file that appears only when complete.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use tokio::io::AsyncWriteExt;

use super::ProgressFn;
use crate::error::{Error, Result};
use crate::transfer::dirfd::Dir;

/// A file whose answer headers have arrived; read its body with [`Download::into_stream`],
/// [`Download::bytes`] or [`Download::save_to`]. Dropping it closes the connection.
///
/// A connection broken mid-body is an [`Error::Connection`] (the transfer is not resumed; call
/// [`crate::Sandbox::download`] again).
pub struct Download {
    label: String,
    path: String,
    response: reqwest::Response,
    length: Option<u64>,
    progress: Option<ProgressFn>,
}

impl fmt::Debug for Download {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Download")
            .field("path", &self.path)
            .field("length", &self.length)
            .finish_non_exhaustive()
    }
}

impl Download {
    pub(super) fn new(label: String, path: String, response: reqwest::Response) -> Self {
        let length = response
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        Download {
            label,
            path,
            response,
            length,
            progress: None,
        }
    }

    /// The guest path being read.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Size announced by the server (`Content-Length`), when it sent one.
    pub fn content_length(&self) -> Option<u64> {
        self.length
    }

    /// Report `(bytes received so far, total when known)` as the body arrives.
    pub fn progress(mut self, report: impl Fn(u64, Option<u64>) + Send + Sync + 'static) -> Self {
        self.progress = Some(std::sync::Arc::new(report));
        self
    }

    /// The body as a stream of chunks. A body shorter than its `Content-Length` ends with an
    /// error rather than silently.
    pub fn into_stream(self) -> DownloadStream {
        let label = self.label.clone();
        let chunks = self
            .response
            .bytes_stream()
            .map(move |r| r.map_err(|e| crate::transport::connection_error(&label, e)))
            .boxed();
        if let Some(report) = &self.progress {
            report(0, self.length);
        }
        DownloadStream {
            label: self.label,
            chunks,
            received: 0,
            length: self.length,
            progress: self.progress,
            done: false,
        }
    }

    /// The whole body in memory, refused (before reading when the size is announced) if it is
    /// larger than `max_bytes`.
    pub async fn bytes(self, max_bytes: u64) -> Result<Bytes> {
        let path = self.path.clone();
        if let Some(len) = self.length {
            if len > max_bytes {
                return Err(too_big(&path, Some(len), max_bytes));
            }
        }
        let mut buf = BytesMut::with_capacity(self.length.unwrap_or(0).min(max_bytes) as usize);
        let mut stream = self.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            if buf.len() as u64 + chunk.len() as u64 > max_bytes {
                return Err(too_big(&path, None, max_bytes));
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(buf.freeze())
    }

    /// Write the body to `local_path` and return the number of bytes written.
    ///
    /// The data goes to a temporary file in the same directory, which is renamed over the target
    /// only once complete and flushed to disk; on any failure — or if this future is dropped —
    /// the temporary file is removed and an existing target is left untouched. Both go through
    /// a handle to that directory (a symlink at the target is replaced, never followed).
    ///
    /// The content is the sandbox's: a protected `local_path` (VCS metadata such as
    /// `.git/config`, a deny-listed name such as `.env`, anything in `~/.createos`; see
    /// [`crate::transfer::protect`]) is refused with [`Error::Refused`] before anything is read.
    pub async fn save_to(self, local_path: impl AsRef<Path>) -> Result<u64> {
        let target = local_path.as_ref();
        let (temp, mut file) = TempFile::next_to(target).await?;
        let mut written = 0u64;
        let mut stream = self.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            file.write_all(&chunk)
                .await
                .map_err(|e| Error::io(format!("writing {}", temp.shown()), e))?;
            written += chunk.len() as u64;
        }
        temp.commit(file).await?;
        Ok(written)
    }
}

/// Copy everything `reader` yields into `target` the way [`Download::save_to`] does (a
/// temporary file renamed over the target once complete); `read_error` turns a failed read
/// into the caller's error. Returns the bytes written.
pub(crate) async fn save_reader_to<R>(
    mut reader: R,
    target: &Path,
    read_error: impl Fn(std::io::Error) -> Error,
) -> Result<u64>
where
    R: tokio::io::AsyncRead + Unpin,
{
    use tokio::io::AsyncReadExt;
    let (temp, mut file) = TempFile::next_to(target).await?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut written = 0u64;
    loop {
        let n = reader.read(&mut buf).await.map_err(&read_error)?;
        if n == 0 {
            break;
        }
        file.write_all(&buf[..n])
            .await
            .map_err(|e| Error::io(format!("writing {}", temp.shown()), e))?;
        written += n as u64;
    }
    temp.commit(file).await?;
    Ok(written)
}

impl TempFile {
    /// A temporary file in `target`'s directory, and a handle to write it. A protected target
    /// is refused.
    async fn next_to(target: &Path) -> Result<(TempFile, tokio::fs::File)> {
        let target = target.to_path_buf();
        let temp = tokio::task::spawn_blocking(move || -> Result<TempFile> {
            crate::transfer::protect::check_target(&target)?;
            let name = target.file_name().ok_or_else(|| {
                Error::invalid(
                    "local_path",
                    format!("{} does not name a file", target.display()),
                )
            })?;
            let dir = match target.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            TempFile::create(&dir, name)
        })
        .await
        .map_err(|e| {
            Error::io(
                "the file thread failed",
                std::io::Error::other(e.to_string()),
            )
        })??;
        let file = tokio::fs::File::from_std(temp.reopen()?);
        Ok((temp, file))
    }

    /// Flush and sync `file` (this temporary file's handle), then move it over the target.
    async fn commit(self, mut file: tokio::fs::File) -> Result<()> {
        file.flush()
            .await
            .map_err(|e| Error::io(format!("writing {}", self.shown()), e))?;
        file.sync_all()
            .await
            .map_err(|e| Error::io(format!("syncing {}", self.shown()), e))?;
        drop(file);
        self.persist()
    }
}

fn too_big(path: &str, announced: Option<u64>, max: u64) -> Error {
    let size = announced
        .map(|n| format!("{n} bytes"))
        .unwrap_or_else(|| "larger".to_string());
    Error::invalid(
        "max_bytes",
        format!("{path} is {size}, over the limit of {max} bytes"),
    )
}

/// Chunks of a [`Download`]'s body (`Stream<Item = Result<Bytes>>`).
pub struct DownloadStream {
    label: String,
    chunks: BoxStream<'static, Result<Bytes>>,
    received: u64,
    length: Option<u64>,
    progress: Option<ProgressFn>,
    done: bool,
}

impl fmt::Debug for DownloadStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DownloadStream")
            .field("received", &self.received)
            .field("length", &self.length)
            .finish_non_exhaustive()
    }
}

impl DownloadStream {
    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }
}

impl Stream for DownloadStream {
    type Item = Result<Bytes>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        match this.chunks.poll_next_unpin(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(chunk))) => {
                this.received += chunk.len() as u64;
                if let Some(report) = &this.progress {
                    report(this.received, this.length);
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.done = true;
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                this.done = true;
                match this.length {
                    Some(len) if this.received != len => {
                        Poll::Ready(Some(Err(Error::Connection {
                            endpoint: this.label.clone(),
                            source: format!("body ended after {} of {len} bytes", this.received)
                                .into(),
                        })))
                    }
                    _ => Poll::Ready(None),
                }
            }
        }
    }
}

/// A temporary file next to a download target, removed on drop unless persisted; created,
/// renamed and removed through a handle to their directory.
struct TempFile {
    dir: Dir,
    /// The directory as named, for messages.
    dir_path: PathBuf,
    name: OsString,
    target: OsString,
    file: Option<std::fs::File>,
    keep: bool,
}

impl TempFile {
    fn create(dir_path: &Path, target: &OsStr) -> Result<TempFile> {
        let dir = Dir::open(dir_path)
            .map_err(|e| Error::io(format!("opening the directory {}", dir_path.display()), e))?;
        let mut tries = 0;
        loop {
            let name = OsString::from(format!(
                ".{}.cos-part-{:016x}",
                target.to_string_lossy(),
                rand::random::<u64>()
            ));
            match dir.create_new(&name, 0o666) {
                Ok(file) => {
                    let (dir_path, target) = (dir_path.to_path_buf(), target.to_os_string());
                    return Ok(TempFile {
                        dir,
                        dir_path,
                        name,
                        target,
                        file: Some(file),
                        keep: false,
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 8 => tries += 1,
                Err(e) => {
                    return Err(Error::io(
                        format!("creating a temporary file in {}", dir_path.display()),
                        e,
                    ))
                }
            }
        }
    }

    fn shown(&self) -> String {
        self.dir_path.join(&self.name).display().to_string()
    }

    /// The open handle (taken once).
    fn reopen(&self) -> Result<std::fs::File> {
        match &self.file {
            Some(f) => f
                .try_clone()
                .map_err(|e| Error::io(format!("opening {}", self.shown()), e)),
            None => Err(Error::io(
                "temporary file",
                std::io::Error::other("already closed"),
            )),
        }
    }

    fn persist(mut self) -> Result<()> {
        self.file = None;
        self.dir
            .rename(&self.name, &self.dir, &self.target)
            .map_err(|e| {
                Error::io(
                    format!(
                        "moving the download into {}",
                        self.dir_path.join(&self.target).display()
                    ),
                    e,
                )
            })?;
        self.keep = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        self.file = None;
        if !self.keep {
            let _ = self.dir.remove_file(&self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_file_is_removed_unless_persisted() {
        let dir = tempfile::tempdir().unwrap();
        let temp = TempFile::create(dir.path(), OsStr::new("out.bin")).unwrap();
        let path = dir.path().join(&temp.name);
        assert!(path.exists());
        assert!(path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(".out.bin.cos-part-"));
        drop(temp);
        assert!(!path.exists());

        let temp = TempFile::create(dir.path(), OsStr::new("out.bin")).unwrap();
        std::io::Write::write_all(&mut temp.reopen().unwrap(), b"data").unwrap();
        temp.persist().unwrap();
        assert_eq!(std::fs::read(dir.path().join("out.bin")).unwrap(), b"data");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[tokio::test]
    async fn a_link_at_the_target_is_replaced_and_protected_targets_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, "keep").unwrap();
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let (temp, mut file) = TempFile::next_to(&link).await.unwrap();
        file.write_all(b"new").await.unwrap();
        temp.commit(file).await.unwrap();
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "new");
        assert!(!std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        for bad in [".git/config", ".env", "id_rsa"] {
            let Err(err) = TempFile::next_to(&dir.path().join(bad)).await else {
                panic!("{bad} was accepted")
            };
            assert!(matches!(err, Error::Refused { .. }), "{bad}: {err}");
        }
        assert_eq!(
            std::fs::read_dir(dir.path().join(".git")).unwrap().count(),
            0
        );
    }
}
