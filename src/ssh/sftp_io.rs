//! Streaming SFTP transfers with several requests in flight (one request per round trip
//! would make a 20 MB file take minutes over a long tunnel).
//!
//! - [`SshSession::read_file`] returns an `AsyncRead`; a background task keeps up to
//!   [`READS_IN_FLIGHT`] reads outstanding and hands chunks over in order (`sftp_read.rs`
//!   says how it plans them).
//! - [`SshSession::write_file`] streams any `AsyncRead` into a temporary file next to the
//!   target (up to [`WRITES_IN_FLIGHT`] writes outstanding), fsyncs it when the server can,
//!   and renames it over the target, so readers see the old or the new file, never a part.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use russh_sftp::client::error::Error as SftpClientError;
use russh_sftp::protocol::{FileAttributes, OpenFlags};
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::sync::mpsc;

use crate::error::{Error, Result};

use super::error::{sftp_error, SshError};
use super::session::SshSession;
use super::sftp::{check_path, rename_replacing, split_parent, RemoteMetadata, SftpChannel, FSYNC};

#[path = "sftp_read.rs"]
mod read;

use read::{pump_reads, Chunk};
pub use read::{READS_IN_FLIGHT, READ_CHUNK};

/// Chunks the read task may get ahead of the reader.
const CHUNKS_BUFFERED: usize = 16;
/// Bytes per write request.
pub const WRITE_CHUNK: usize = 64 * 1024;
/// Write requests kept outstanding.
pub const WRITES_IN_FLIGHT: usize = 16;

/// A remote file being read: an `AsyncRead` of its bytes. Errors carry an
/// [`SshError`] (`io::Error::get_ref` → downcast).
pub struct RemoteReader {
    rx: mpsc::Receiver<Chunk>,
    current: Bytes,
    done: bool,
    /// An error that arrived after bytes were already handed out in the same read.
    error: Option<io::Error>,
    size: Option<u64>,
}

impl std::fmt::Debug for RemoteReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteReader")
            .field("size", &self.size)
            .field("done", &self.done)
            .finish()
    }
}

impl RemoteReader {
    /// Size of the file when it was opened.
    pub fn size(&self) -> Option<u64> {
        self.size
    }
}

impl AsyncRead for RemoteReader {
    /// Fills as much of `buf` as the chunks already received allow (several per call), waiting
    /// only when none is there.
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.remaining();
        loop {
            if !this.current.is_empty() {
                let n = this.current.len().min(buf.remaining());
                buf.put_slice(&this.current.split_to(n));
                if buf.remaining() == 0 {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            let filled = buf.remaining() < before;
            if let Some(err) = this.error.take() {
                if filled {
                    this.error = Some(err);
                    return Poll::Ready(Ok(()));
                }
                return Poll::Ready(Err(err));
            }
            if this.done {
                return Poll::Ready(Ok(()));
            }
            match this.rx.poll_recv(cx) {
                Poll::Pending if filled => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(Some(chunk)))) => this.current = chunk,
                Poll::Ready(Some(Ok(None))) => this.done = true,
                Poll::Ready(Some(Err(e))) => {
                    this.done = true;
                    this.error = Some(e);
                }
                Poll::Ready(None) => {
                    this.done = true;
                    this.error = Some(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the SFTP read task ended before the end of the file",
                    ));
                }
            }
        }
    }
}

/// Options of [`SshSession::write_file`].
#[derive(Clone, Debug)]
pub struct WriteOptions {
    mode: Option<u32>,
    create_parents: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            mode: None,
            create_parents: true,
        }
    }
}

impl WriteOptions {
    /// Parents created, mode kept from the file being replaced (or the guest's default).
    pub fn new() -> Self {
        Self::default()
    }

    /// Permission bits of the new file (exactly, whatever the guest's umask).
    pub fn mode(mut self, mode: u32) -> Self {
        self.mode = Some(mode & 0o7777);
        self
    }

    /// Create missing parent directories (default true).
    pub fn create_parents(mut self, on: bool) -> Self {
        self.create_parents = on;
        self
    }
}

impl SshSession {
    /// Open `path` for streaming reads.
    ///
    /// ```no_run
    /// # async fn demo(ssh: createos_sandbox::ssh::SshSession) -> createos_sandbox::Result<()> {
    /// let mut remote = ssh.read_file("/var/log/app.log").await?;
    /// let mut local = tokio::fs::File::create("app.log").await?;
    /// tokio::io::copy(&mut remote, &mut local).await?;
    /// # Ok(()) }
    /// ```
    pub async fn read_file(&self, path: &str) -> Result<RemoteReader> {
        check_path("path", path)?;
        let (sftp, handle, size) = self
            .with_sftp(true, |sftp| async move {
                let handle = sftp
                    .raw
                    .open(path, OpenFlags::READ, FileAttributes::empty())
                    .await
                    .map_err(|e| sftp_error("open", path, e))?
                    .handle;
                let size = match sftp.raw.fstat(handle.as_str()).await {
                    Ok(attrs) => {
                        let meta = RemoteMetadata::from_attrs(&attrs.attrs);
                        if meta.is_dir() {
                            let _ = sftp.raw.close(handle).await;
                            return Err(SshError::Sftp {
                                op: "read",
                                path: path.to_string(),
                                kind: super::error::SftpErrorKind::Failure,
                                message: "is a directory".to_string(),
                            });
                        }
                        attrs.attrs.size
                    }
                    Err(_) => None,
                };
                Ok((sftp, handle, size))
            })
            .await?;
        let (tx, rx) = mpsc::channel(CHUNKS_BUFFERED);
        tokio::spawn(pump_reads(sftp, handle, path.to_string(), size, tx));
        Ok(RemoteReader {
            rx,
            current: Bytes::new(),
            done: false,
            error: None,
            size,
        })
    }

    /// The whole content of `path`, refusing files larger than `max_bytes`.
    pub async fn read_to_vec(&self, path: &str, max_bytes: u64) -> Result<Vec<u8>> {
        let reader = self.read_file(path).await?;
        if let Some(size) = reader.size() {
            if size > max_bytes {
                return Err(Error::invalid(
                    "path",
                    format!("{path} holds {size} bytes, more than the {max_bytes} allowed"),
                ));
            }
        }
        let mut out = Vec::new();
        let read = reader
            .take(max_bytes.saturating_add(1))
            .read_to_end(&mut out)
            .await;
        read.map_err(|e| io_to_error(&format!("reading {path}"), e))?;
        if out.len() as u64 > max_bytes {
            return Err(Error::invalid(
                "path",
                format!("{path} grew past the {max_bytes} bytes allowed"),
            ));
        }
        Ok(out)
    }

    /// Write everything `source` yields to `path`, atomically (temporary file + rename).
    /// Returns the bytes written. Not retried: the source cannot be rewound.
    ///
    /// ```no_run
    /// # async fn demo(ssh: createos_sandbox::ssh::SshSession) -> createos_sandbox::Result<()> {
    /// use createos_sandbox::ssh::WriteOptions;
    /// let local = tokio::fs::File::open("build/app").await?;
    /// let n = ssh.write_file("/usr/local/bin/app", local, WriteOptions::new().mode(0o755)).await?;
    /// println!("{n} bytes");
    /// # Ok(()) }
    /// ```
    pub async fn write_file<R>(&self, path: &str, source: R, options: WriteOptions) -> Result<u64>
    where
        R: AsyncRead + Unpin + Send,
    {
        check_path("path", path)?;
        let (parent, name) =
            split_parent(path).ok_or_else(|| Error::invalid("path", "must name a file, not /"))?;
        // Opening is retried once on a fresh connection; the transfer itself is not.
        let mut attempt = 0;
        let (sftp, conn, open) = loop {
            let (sftp, conn) = self.sftp_channel().await?;
            match open_temp(&sftp, path, &parent, &name, &options).await {
                Ok(open) => break (sftp, conn, open),
                Err(err) if err.is_connection_lost() && attempt == 0 => {
                    self.sftp_failed(&sftp, &conn).await;
                    attempt += 1;
                }
                Err(err) => return Err(err.into()),
            }
        };
        let result = finish_write(&sftp, path, open, source).await;
        if let Some(e) = result.as_ref().err().and_then(Error::ssh) {
            if e.is_connection_lost() {
                self.sftp_failed(&sftp, &conn).await;
            }
        }
        result
    }

    /// Download `path` into the local file `local_path`: written to a temporary file next to
    /// it and renamed over it only when complete, so a failed transfer leaves an existing file
    /// untouched. `progress` hears `(bytes so far, size)`. Returns the bytes written.
    pub async fn save_file_to(
        &self,
        path: &str,
        local_path: &std::path::Path,
        progress: Option<crate::api::files::ProgressFn>,
    ) -> Result<u64> {
        let reader = self.read_file(path).await?;
        let total = reader.size();
        let reader = crate::api::files::ProgressReader::new(reader, total, progress);
        crate::api::files::save_reader_to(reader, local_path, |e| {
            io_to_error(&format!("reading {path}"), e)
        })
        .await
    }

    /// [`SshSession::write_file`] from bytes in memory.
    pub async fn write_bytes(
        &self,
        path: &str,
        data: impl Into<Bytes>,
        options: WriteOptions,
    ) -> Result<u64> {
        self.write_file(path, io::Cursor::new(data.into()), options)
            .await
    }
}

fn io_to_error(context: &str, err: io::Error) -> Error {
    // Errors from the read task carry the typed SFTP error.
    if err.get_ref().is_some_and(|inner| inner.is::<SshError>()) {
        if let Some(inner) = err.into_inner() {
            if let Ok(ssh) = inner.downcast::<SshError>() {
                return Error::from(*ssh);
            }
        }
        return Error::io(context, io::Error::other("SFTP read failed"));
    }
    Error::io(context, err)
}

/// Fill `buf` from `source` until full or end of input; returns the bytes read.
async fn fill<R: AsyncRead + Unpin>(source: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match source.read(&mut buf[filled..]).await? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

async fn pump_writes<R>(sftp: &SftpChannel, handle: &str, temp: &str, source: &mut R) -> Result<u64>
where
    R: AsyncRead + Unpin + Send,
{
    let mut inflight: FuturesUnordered<_> = FuturesUnordered::new();
    let mut offset: u64 = 0;
    loop {
        let mut buf = vec![0u8; WRITE_CHUNK];
        let n = fill(source, &mut buf)
            .await
            .map_err(|e| Error::io("reading the data to upload", e))?;
        if n == 0 {
            break;
        }
        buf.truncate(n);
        while inflight.len() >= WRITES_IN_FLIGHT {
            let done: Option<std::result::Result<(), SftpClientError>> = inflight.next().await;
            if let Some(done) = done {
                done.map_err(|e| sftp_error("write", temp, e))?;
            }
        }
        let raw = sftp.raw.clone();
        let handle = handle.to_string();
        let at = offset;
        inflight.push(async move { raw.write(handle, at, buf).await.map(|_| ()) });
        offset += n as u64;
        // Poll once so the request leaves now, while the next chunk is being read.
        while let Some(Some(done)) = inflight.next().now_or_never() {
            done.map_err(|e| sftp_error("write", temp, e))?;
        }
        if n < WRITE_CHUNK {
            break;
        }
    }
    while let Some(done) = inflight.next().await {
        done.map_err(|e| sftp_error("write", temp, e))?;
    }
    Ok(offset)
}

/// A temporary file opened for writing, next to its target.
struct OpenTemp {
    temp: String,
    handle: String,
    mode: Option<u32>,
}

/// Everything before the first byte is sent: parents, the mode to keep, the temporary file.
/// Nothing of the source is consumed yet, so this part may be retried.
async fn open_temp(
    sftp: &SftpChannel,
    path: &str,
    parent: &str,
    name: &str,
    options: &WriteOptions,
) -> std::result::Result<OpenTemp, SshError> {
    if options.create_parents {
        super::sftp::mkdir_all(sftp, parent).await?;
    }
    // Keep the mode of the file being replaced unless told otherwise.
    let mode = match options.mode {
        Some(mode) => Some(mode),
        None => match sftp.raw.stat(path).await {
            Ok(attrs) => {
                let meta = RemoteMetadata::from_attrs(&attrs.attrs);
                if meta.is_dir() {
                    return Err(SshError::Sftp {
                        op: "write",
                        path: path.to_string(),
                        kind: super::error::SftpErrorKind::Failure,
                        message: "is a directory".to_string(),
                    });
                }
                Some(meta.mode)
            }
            Err(e) => {
                let err = sftp_error("stat", path, e);
                if !err.is_not_found() {
                    return Err(err);
                }
                None
            }
        },
    };
    let dir = parent.trim_end_matches('/');
    let temp = format!("{dir}/.{name}.cos-{:016x}.tmp", rand::random::<u64>());
    let attrs = FileAttributes {
        permissions: mode,
        ..FileAttributes::empty()
    };
    let flags = OpenFlags::CREATE | OpenFlags::TRUNCATE | OpenFlags::WRITE | OpenFlags::EXCLUDE;
    let handle = sftp
        .raw
        .open(temp.as_str(), flags, attrs)
        .await
        .map_err(|e| sftp_error("create", &temp, e))?
        .handle;
    Ok(OpenTemp { temp, handle, mode })
}

/// Stream `source` into the open temporary file, then put it in place of `path`.
async fn finish_write<R>(
    sftp: &SftpChannel,
    path: &str,
    open: OpenTemp,
    mut source: R,
) -> Result<u64>
where
    R: AsyncRead + Unpin + Send,
{
    let OpenTemp { temp, handle, mode } = open;
    let written = async {
        let n = pump_writes(sftp, &handle, &temp, &mut source).await?;
        if let Some(mode) = mode {
            // The open attributes went through the guest's umask; set the exact bits.
            let exact = FileAttributes {
                permissions: Some(mode),
                ..FileAttributes::empty()
            };
            sftp.raw
                .fsetstat(handle.as_str(), exact)
                .await
                .map_err(|e| sftp_error("chmod", &temp, e))?;
        }
        if sftp.supports(FSYNC) {
            sftp.raw
                .fsync(handle.as_str())
                .await
                .map_err(|e| sftp_error("fsync", &temp, e))?;
        }
        Ok::<u64, Error>(n)
    }
    .await;
    let closed = sftp
        .raw
        .close(handle)
        .await
        .map_err(|e| Error::from(sftp_error("close", &temp, e)));
    let renamed = match (written, closed) {
        (Ok(n), Ok(_)) => rename_replacing(sftp, &temp, path)
            .await
            .map(|()| n)
            .map_err(Error::from),
        (Err(e), _) | (Ok(_), Err(e)) => Err(e),
    };
    if renamed.is_err() {
        let _ = sftp.raw.remove(temp.as_str()).await;
    }
    renamed
}
