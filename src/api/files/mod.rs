//! Whole-file transfers (E19 upload, E20 download). There is no list/stat/delete endpoint: use
//! [`Sandbox::exec`] (`ls`, `stat`, `rm`, `mkdir -p`) for those.
//!
//! Guest paths must be absolute with no `..` segment; they are checked before anything is sent.
//! Upstream warning: moving data through the files API on a path inside an S3 disk mount breaks
//! the mount — copy with exec there.

mod body;
mod download;
mod progress;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use tokio::io::AsyncReadExt;
use tokio_util::io::ReaderStream;

pub use body::UploadBody;
pub(crate) use download::save_reader_to;
pub use download::{Download, DownloadStream};
pub use progress::ProgressReader;

use crate::api::endpoints as ep;
use crate::api::sandboxes::Sandbox;
use crate::error::{Error, Result};
use crate::transport::retry::{self, Verdict};
use crate::transport::{Call, CallBody};
use crate::validate;
use body::{BodyKind, CountingBody, LocalFailure, CHUNK};

/// Largest upload accepted without [`UploadOptions::allow_large`]: 500 MiB, the `createos`
/// CLI's per-file cap.
pub const MAX_UPLOAD_BYTES: u64 = 500 * 1024 * 1024;

/// Default size limit of [`Sandbox::read_to_string`]: 64 MiB.
pub const READ_TO_STRING_LIMIT: u64 = 64 * 1024 * 1024;

/// Progress callback: `(bytes transferred so far, total when known)`. Called from the task
/// driving the transfer, so keep it quick (update a progress bar, store a number).
pub type ProgressFn = Arc<dyn Fn(u64, Option<u64>) + Send + Sync>;

const OCTET_STREAM: &str = "application/octet-stream";

/// Options of [`Sandbox::upload_with`].
#[derive(Clone, Default)]
pub struct UploadOptions {
    allow_large: bool,
    progress: Option<ProgressFn>,
    timeout: Option<Duration>,
}

impl fmt::Debug for UploadOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UploadOptions")
            .field("allow_large", &self.allow_large)
            .field("progress", &self.progress.is_some())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl UploadOptions {
    /// Defaults: at most [`MAX_UPLOAD_BYTES`], no progress reports, no time limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lift the [`MAX_UPLOAD_BYTES`] cap.
    pub fn allow_large(mut self, allow: bool) -> Self {
        self.allow_large = allow;
        self
    }

    /// Report progress as the body is handed to the connection. After a retried attempt the
    /// count starts again from 0.
    pub fn progress(mut self, report: impl Fn(u64, Option<u64>) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(report));
        self
    }

    /// Bound each attempt (sending the body and getting the answer). Transfers are not bounded
    /// by the client's request timeout, which is sized for API calls.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    fn cap(&self) -> Option<u64> {
        (!self.allow_large).then_some(MAX_UPLOAD_BYTES)
    }
}

/// What an upload wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uploaded {
    /// The guest path.
    pub path: String,
    /// Bytes sent.
    pub bytes: u64,
}

impl Sandbox {
    /// Write `body` to the absolute guest `path` (E19). Parent directories are created and an
    /// existing file is replaced. Bodies over [`MAX_UPLOAD_BYTES`] are refused (see
    /// [`UploadOptions::allow_large`]).
    ///
    /// ```no_run
    /// # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
    /// use createos_sandbox::api::files::UploadBody;
    /// sandbox.upload("/root/app/config.toml", "port = 8080\n".into()).await?;
    /// sandbox.upload("/root/data.bin", UploadBody::file("./data.bin")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn upload(&self, path: &str, body: UploadBody) -> Result<Uploaded> {
        self.upload_with(path, body, UploadOptions::default()).await
    }

    /// [`Sandbox::upload`] with options (size cap, progress, timeout).
    ///
    /// ```no_run
    /// # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
    /// use createos_sandbox::api::files::{UploadBody, UploadOptions};
    /// let options = UploadOptions::new()
    ///     .allow_large(true)
    ///     .progress(|done, total| eprintln!("{done}/{}", total.unwrap_or(0)));
    /// sandbox.upload_with("/root/big.tar", UploadBody::file("big.tar"), options).await?;
    /// # Ok(()) }
    /// ```
    pub async fn upload_with(
        &self,
        path: &str,
        body: UploadBody,
        options: UploadOptions,
    ) -> Result<Uploaded> {
        validate::guest_path("path", path)?;
        let cap = options.cap();
        let bytes = match body.kind {
            BodyKind::Bytes(bytes) => {
                check_cap(bytes.len() as u64, cap)?;
                let len = bytes.len() as u64;
                match options.progress.clone() {
                    None => self.upload_buffer(path, bytes, options.timeout).await?,
                    Some(progress) => {
                        self.upload_buffer_watched(path, bytes, progress, options.timeout)
                            .await?
                    }
                }
                len
            }
            BodyKind::File(local) => {
                let file = tokio::fs::File::open(&local)
                    .await
                    .map_err(|e| Error::io(format!("opening {} for upload", local.display()), e))?;
                let meta = file.metadata().await.map_err(|e| {
                    Error::io(format!("reading the size of {}", local.display()), e)
                })?;
                if !meta.is_file() {
                    return Err(Error::invalid(
                        "body",
                        format!("{} is not a regular file", local.display()),
                    ));
                }
                let len = meta.len();
                check_cap(len, cap)?;
                let chunks = ReaderStream::with_capacity(file.take(len), CHUNK);
                self.upload_stream(path, chunks, Some(len), &options)
                    .await?
            }
            BodyKind::Reader { reader, length } => {
                if let Some(len) = length {
                    check_cap(len, cap)?;
                }
                let chunks = match length {
                    Some(len) => ReaderStream::with_capacity(reader.take(len), CHUNK).boxed(),
                    None => ReaderStream::with_capacity(reader, CHUNK).boxed(),
                };
                self.upload_stream(path, chunks, length, &options).await?
            }
        };
        Ok(Uploaded {
            path: path.to_string(),
            bytes,
        })
    }

    /// Write `contents` to `path` (a replayable in-memory upload).
    pub async fn write(&self, path: &str, contents: impl Into<Bytes>) -> Result<Uploaded> {
        self.upload(path, UploadBody::bytes(contents)).await
    }

    /// Read the file at `path` (E20). The answer's headers have arrived; the body is read by the
    /// returned [`Download`]. A missing file is [`Error::NotFound`], a directory
    /// [`Error::Validation`].
    ///
    /// ```no_run
    /// # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
    /// let written = sandbox.download("/root/report.pdf").await?.save_to("report.pdf").await?;
    /// let small = sandbox.download("/etc/hostname").await?.bytes(4096).await?;
    /// # let _ = (written, small);
    /// # Ok(()) }
    /// ```
    pub async fn download(&self, path: &str) -> Result<Download> {
        validate::guest_path("path", path)?;
        let call = Call::new(&ep::DOWNLOAD_FILE)
            .param(self.id())
            .query("path", path)
            .accept(OCTET_STREAM);
        let response = self.client.transport.response(call).await?;
        Ok(Download::new(
            ep::DOWNLOAD_FILE.label(),
            path.to_string(),
            response,
        ))
    }

    /// Read a UTF-8 text file of at most [`READ_TO_STRING_LIMIT`] bytes.
    pub async fn read_to_string(&self, path: &str) -> Result<String> {
        let bytes = self
            .download(path)
            .await?
            .bytes(READ_TO_STRING_LIMIT)
            .await?;
        String::from_utf8(bytes.to_vec()).map_err(|e| {
            Error::decode(
                ep::DOWNLOAD_FILE.label(),
                format!("{path} is not UTF-8 text: {e}"),
            )
        })
    }

    fn upload_call(&self, path: &str) -> Call {
        Call::new(&ep::UPLOAD_FILE)
            .param(self.id())
            .query("path", path)
    }

    /// A buffer through the transport: retried like any idempotent PUT.
    async fn upload_buffer(
        &self,
        path: &str,
        bytes: Bytes,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let call = self
            .upload_call(path)
            .body(CallBody::Bytes {
                bytes,
                content_type: OCTET_STREAM,
            })
            .timeout(timeout);
        self.client.transport.bytes(call).await?;
        Ok(())
    }

    /// A buffer sent as a chunked stream so its progress can be reported, re-sent from the start
    /// when an attempt fails in a way that is safe to retry for an idempotent PUT.
    async fn upload_buffer_watched(
        &self,
        path: &str,
        bytes: Bytes,
        progress: ProgressFn,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let transport = &self.client.transport;
        let policy = &transport.retry;
        let len = bytes.len() as u64;
        let mut attempt = 0;
        let mut refreshed = false;
        loop {
            let (body, _) = CountingBody::new(
                body::chunks_of(bytes.clone()),
                Some(len),
                None,
                Some(progress.clone()),
            );
            let call = self.upload_call(path).body(CallBody::Stream {
                body: reqwest::Body::wrap_stream(body),
                length: Some(len),
                content_type: OCTET_STREAM,
            });
            let sent_credential = transport.auth_header(true).await?.map(|(_, v)| v);
            let outcome = send_bounded(transport, call, timeout).await;
            let Err(err) = &outcome else { return outcome };
            if let (Error::Auth(_), false, Some(creds), Some(sent)) =
                (err, refreshed, &transport.credentials, &sent_credential)
            {
                if creds
                    .refresh_after_unauthorized(&transport.http, sent)
                    .await?
                {
                    refreshed = true;
                    continue;
                }
            }
            // The body is rebuilt from the buffer for every attempt, so it is replayable.
            let delay = match retry::judge(&outcome, &ep::UPLOAD_FILE, true, attempt, policy) {
                Verdict::Retry(delay) => delay,
                Verdict::GiveUp => return outcome,
            };
            tracing::debug!(attempt, ?delay, error = %err, "retrying upload");
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// A one-shot stream (file or reader): sent once, never retried.
    async fn upload_stream<S>(
        &self,
        path: &str,
        chunks: S,
        length: Option<u64>,
        options: &UploadOptions,
    ) -> Result<u64>
    where
        S: futures::Stream<Item = std::io::Result<Bytes>> + Unpin + Send + 'static,
    {
        let (body, state) =
            CountingBody::new(chunks, length, options.cap(), options.progress.clone());
        let call = self.upload_call(path).body(CallBody::Stream {
            body: reqwest::Body::wrap_stream(body),
            length,
            content_type: OCTET_STREAM,
        });
        let outcome = send_bounded(&self.client.transport, call, options.timeout).await;
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        // A failure of our own making explains a broken request better than the socket does,
        // and must not pass as success if the server answered before noticing.
        if let Some(failure) = state.failure.take() {
            return Err(local_error(failure));
        }
        outcome.map(|()| state.sent)
    }
}

/// Send a streamed call, read (and ignore) the informative answer, within `timeout`.
async fn send_bounded(
    transport: &crate::transport::Transport,
    call: Call,
    timeout: Option<Duration>,
) -> Result<()> {
    let label = call.endpoint.label();
    let work = async {
        let response = transport.send_stream(call).await?;
        // Drain the small answer so the connection can be reused.
        response
            .bytes()
            .await
            .map_err(|e| crate::transport::connection_error(&label, e))?;
        Ok(())
    };
    match timeout {
        Some(limit) => tokio::time::timeout(limit, work)
            .await
            .map_err(|_| Error::Timeout {
                endpoint: label.clone(),
                after: limit,
            })?,
        None => work.await,
    }
}

fn check_cap(len: u64, cap: Option<u64>) -> Result<()> {
    match cap {
        Some(cap) if len > cap => Err(too_large(cap)),
        _ => Ok(()),
    }
}

fn too_large(cap: u64) -> Error {
    Error::invalid(
        "body",
        format!(
            "larger than {} MiB; pass UploadOptions::allow_large(true) to send it anyway",
            cap >> 20
        ),
    )
}

fn local_error(failure: LocalFailure) -> Error {
    match failure {
        LocalFailure::TooLarge { cap } => too_large(cap),
        LocalFailure::Short { sent, expected } => Error::invalid(
            "body",
            format!("the source ended after {sent} bytes but {expected} were declared"),
        ),
        LocalFailure::Read(e) => Error::io("reading the upload body", e),
    }
}
