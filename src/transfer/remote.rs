//! The guest side of a transfer: where a tar archive is unpacked and where one is made.
//! [`Remote`] is the seam; [`ApiRemote`] goes through the files API plus exec (a temporary
//! archive file in the guest, removed on every path), [`SshRemote`] pipes the archive through
//! an SSH exec channel (no temporary file).

use std::io;
use std::pin::Pin;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::api::exec::ExecRequest;
use crate::api::files::{ProgressFn, ProgressReader, UploadBody, UploadOptions};
use crate::api::sandboxes::Sandbox;
use crate::error::{Error, Result};
use crate::guest::{Guest, GuestChannel, GuestOptions, PathMap};
use crate::ssh::{command_line, SshSession};

/// An archive being sent: any async reader of tar bytes.
pub type TarReader = Pin<Box<dyn AsyncRead + Send>>;
/// Where a downloaded archive is written.
pub type TarWriter<'a> = &'a mut (dyn AsyncWrite + Unpin + Send);

/// Time limit of one guest-side tar command.
const TAR_TIMEOUT: Duration = Duration::from_secs(1800);
/// Time limit of the small helper scripts (mkdir, rm, test).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(300);

/// What a shell script printed and how it ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScriptOutput {
    /// Standard output (lossy UTF-8).
    pub stdout: String,
    /// Standard error (lossy UTF-8).
    pub stderr: String,
    /// Exit code (-1 when unknown or ended by a signal).
    pub exit_code: i32,
}

impl ScriptOutput {
    /// Exit code 0.
    pub fn success(&self) -> bool {
        self.exit_code == 0
    }

    /// An error saying `what` failed, with the script's stderr.
    pub fn failure(&self, what: &str) -> Error {
        let why = if self.stderr.trim().is_empty() {
            self.stdout.trim()
        } else {
            self.stderr.trim()
        };
        Error::io(
            format!("{what} in the sandbox failed (exit {})", self.exit_code),
            io::Error::other(why.to_string()),
        )
    }
}

/// A channel to one sandbox able to unpack and produce tar archives and run `sh` scripts.
pub trait Remote: Send + Sync {
    /// The sandbox.
    fn sandbox(&self) -> &Sandbox;

    /// Create the guest directory `dest` (with parents) and unpack the tar read from `archive`
    /// into it. `length` is the archive's exact size when known. Returns the bytes sent.
    fn put_tar<'a>(
        &'a self,
        dest: &'a str,
        archive: TarReader,
        length: Option<u64>,
        progress: Option<ProgressFn>,
    ) -> BoxFuture<'a, Result<u64>>;

    /// Write into `out` a tar of the guest directory `dir`: of everything in it, or of exactly
    /// `names` (relative paths, not recursed). Returns the bytes received.
    fn get_tar<'a>(
        &'a self,
        dir: &'a str,
        names: Option<Vec<String>>,
        out: TarWriter<'a>,
        progress: Option<ProgressFn>,
    ) -> BoxFuture<'a, Result<u64>>;

    /// Run `sh -c script sh args…` with `stdin`.
    fn run_sh<'a>(
        &'a self,
        script: &'a str,
        args: Vec<String>,
        stdin: Vec<u8>,
    ) -> BoxFuture<'a, Result<ScriptOutput>>;

    /// File operations in the sandbox over this remote's channel (the sync engine reads the
    /// guest manifest through it). The default is [`Sandbox::guest`] ([`GuestChannel::Auto`]).
    fn guest(&self, paths: PathMap) -> Guest {
        self.sandbox().guest(paths)
    }
}

/// Unpack `$2` (an archive file) into `$1`, then always remove `$2`.
const EXTRACT_FILE: &str =
    r#"mkdir -p -- "$1" && tar -x -f "$2" -C "$1"; s=$?; rm -f -- "$2"; exit $s"#;
/// Archive `$1` as a whole into `$2`.
const CREATE_ALL_FILE: &str = r#"tar -c -f "$2" -C "$1" ."#;
/// Archive the NUL-separated names read from stdin, relative to `$1`, into `$2`.
const CREATE_LISTED_FILE: &str = r#"cd -- "$1" && tar -c -f "$2" --no-recursion --null -T -"#;
/// Same two without the file: the archive goes to stdout (SSH).
const EXTRACT_STDIN: &str = r#"mkdir -p -- "$1" && tar -x -f - -C "$1""#;
const CREATE_ALL_STDOUT: &str = r#"tar -c -f - -C "$1" ."#;
const CREATE_LISTED_STDOUT: &str = r#"cd -- "$1" && tar -c -f - --no-recursion --null -T "$2""#;

/// Run the script `$1` with the remaining arguments, its stdin decoded from base64.
const DECODE_STDIN: &str = r#"s=$1; shift; base64 -d | sh -c "$s" sh "$@""#;

/// Names as tar's `--null -T` list.
fn nul_list(names: &[String]) -> Vec<u8> {
    let mut list = Vec::new();
    for name in names {
        list.extend_from_slice(name.as_bytes());
        list.push(0);
    }
    list
}

/// Transfers through the control plane: files API (upload/download of one temporary archive
/// under `/tmp`) plus exec to unpack, pack and clean up.
#[derive(Clone, Debug)]
pub struct ApiRemote {
    sandbox: Sandbox,
}

impl ApiRemote {
    /// Transfers for `sandbox`.
    pub fn new(sandbox: Sandbox) -> Self {
        ApiRemote { sandbox }
    }

    fn temp_archive() -> String {
        format!("/tmp/.cos-transfer-{:016x}.tar", rand::random::<u64>())
    }

    async fn exec_sh(
        &self,
        script: &str,
        args: &[&str],
        stdin: Vec<u8>,
        limit: Duration,
    ) -> Result<ScriptOutput> {
        let text = (!stdin.contains(&0))
            .then(|| String::from_utf8(stdin.clone()).ok())
            .flatten();
        let request = match text {
            Some(text) => {
                let request = ExecRequest::new("sh")
                    .arg("-c")
                    .arg(script)
                    .arg("sh")
                    .args(args.iter().copied());
                if text.is_empty() {
                    request
                } else {
                    request.stdin(text)
                }
            }
            // exec's stdin is text without NUL: send binary input (NUL-separated name lists)
            // as base64 and decode it in front of the script
            None => {
                use base64::Engine as _;
                let encoded = base64::engine::general_purpose::STANDARD.encode(&stdin);
                ExecRequest::new("sh")
                    .args(["-c", DECODE_STDIN, "sh", script])
                    .args(args.iter().copied())
                    .stdin(encoded)
            }
        };
        let request = request.timeout(limit);
        let out = self.sandbox.exec_with(request).await?;
        Ok(ScriptOutput {
            stdout: out.stdout,
            stderr: out.stderr,
            exit_code: out.exit_code,
        })
    }

    async fn put(
        &self,
        dest: &str,
        archive: TarReader,
        length: Option<u64>,
        progress: Option<ProgressFn>,
    ) -> Result<u64> {
        let temp = Self::temp_archive();
        let mut cleanup = TempCleanup::new(self.sandbox.clone(), temp.clone());
        let mut options = UploadOptions::new().allow_large(true);
        if let Some(report) = progress {
            options = options.progress(move |done, total| report(done, total));
        }
        let uploaded = self
            .sandbox
            .upload_with(&temp, UploadBody::reader(archive, length), options)
            .await;
        let sent = match uploaded {
            Ok(up) => up.bytes,
            Err(err) => {
                cleanup.now().await;
                return Err(err);
            }
        };
        // the script removes the archive whatever tar did
        match self
            .exec_sh(EXTRACT_FILE, &[dest, &temp], Vec::new(), TAR_TIMEOUT)
            .await
        {
            Ok(out) if out.success() => {
                cleanup.disarm();
                Ok(sent)
            }
            Ok(out) => {
                cleanup.disarm();
                Err(out.failure("unpacking the archive"))
            }
            Err(err) => {
                cleanup.now().await;
                Err(err)
            }
        }
    }

    async fn get(
        &self,
        dir: &str,
        names: Option<Vec<String>>,
        out: TarWriter<'_>,
        progress: Option<ProgressFn>,
    ) -> Result<u64> {
        let temp = Self::temp_archive();
        let mut cleanup = TempCleanup::new(self.sandbox.clone(), temp.clone());
        let result = async {
            let packed = match &names {
                None => {
                    self.exec_sh(CREATE_ALL_FILE, &[dir, &temp], Vec::new(), TAR_TIMEOUT)
                        .await?
                }
                Some(names) => {
                    self.exec_sh(
                        CREATE_LISTED_FILE,
                        &[dir, &temp],
                        nul_list(names),
                        TAR_TIMEOUT,
                    )
                    .await?
                }
            };
            if !packed.success() {
                return Err(packed.failure("packing the archive"));
            }
            let mut download = self.sandbox.download(&temp).await?;
            if let Some(report) = progress {
                download = download.progress(move |done, total| report(done, total));
            }
            let mut chunks = download.into_stream();
            let mut received = 0u64;
            while let Some(chunk) = chunks.next().await {
                let chunk = chunk?;
                received += chunk.len() as u64;
                out.write_all(&chunk)
                    .await
                    .map_err(|e| Error::io("writing the downloaded archive", e))?;
            }
            out.flush()
                .await
                .map_err(|e| Error::io("writing the downloaded archive", e))?;
            Ok(received)
        }
        .await;
        cleanup.now().await;
        result
    }
}

impl Remote for ApiRemote {
    fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    fn put_tar<'a>(
        &'a self,
        dest: &'a str,
        archive: TarReader,
        length: Option<u64>,
        progress: Option<ProgressFn>,
    ) -> BoxFuture<'a, Result<u64>> {
        Box::pin(self.put(dest, archive, length, progress))
    }

    fn get_tar<'a>(
        &'a self,
        dir: &'a str,
        names: Option<Vec<String>>,
        out: TarWriter<'a>,
        progress: Option<ProgressFn>,
    ) -> BoxFuture<'a, Result<u64>> {
        Box::pin(self.get(dir, names, out, progress))
    }

    fn run_sh<'a>(
        &'a self,
        script: &'a str,
        args: Vec<String>,
        stdin: Vec<u8>,
    ) -> BoxFuture<'a, Result<ScriptOutput>> {
        Box::pin(async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            self.exec_sh(script, &args, stdin, SCRIPT_TIMEOUT).await
        })
    }
}

/// Removes a temporary guest file: explicitly with [`TempCleanup::now`], or — when the
/// transfer future is dropped (cancelled) — from a spawned task.
pub struct TempCleanup {
    sandbox: Sandbox,
    path: Option<String>,
}

impl TempCleanup {
    /// Removes `path` (in `sandbox`) when dropped, unless [`TempCleanup::now`] ran first.
    pub fn new(sandbox: Sandbox, path: String) -> Self {
        TempCleanup {
            sandbox,
            path: Some(path),
        }
    }

    /// Removes the file now and waits for it.
    pub async fn now(&mut self) {
        if let Some(path) = self.path.take() {
            remove_temp(&self.sandbox, &path).await;
        }
    }

    fn disarm(&mut self) {
        self.path = None;
    }
}

async fn remove_temp(sandbox: &Sandbox, path: &str) {
    let request = ExecRequest::new("rm")
        .args(["-f", "--", path])
        .timeout(SCRIPT_TIMEOUT);
    match sandbox.exec_with(request).await {
        Ok(out) if out.success() => {}
        Ok(out) => {
            tracing::warn!(%path, stderr = %out.stderr, "could not remove a temporary archive in the sandbox")
        }
        Err(err) => {
            tracing::warn!(%path, error = %err, "could not remove a temporary archive in the sandbox")
        }
    }
}

impl Drop for TempCleanup {
    fn drop(&mut self) {
        let Some(path) = self.path.take() else { return };
        let sandbox = self.sandbox.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move { remove_temp(&sandbox, &path).await });
            }
            Err(_) => {
                tracing::warn!(%path, "temporary archive left in the sandbox (no runtime to remove it)")
            }
        }
    }
}

/// Transfers over an SSH session: the archive streams through an exec channel's stdin (or
/// out of its stdout); nothing is staged in the guest.
#[derive(Clone)]
pub struct SshRemote {
    sandbox: Sandbox,
    ssh: SshSession,
}

impl std::fmt::Debug for SshRemote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshRemote")
            .field("sandbox", &self.sandbox.id())
            .finish_non_exhaustive()
    }
}

impl SshRemote {
    /// Transfers over `ssh` (a session to `ssh.sandbox()`).
    pub fn new(ssh: SshSession) -> Self {
        SshRemote {
            sandbox: ssh.sandbox().clone(),
            ssh,
        }
    }

    fn command(script: &str, args: &[&str]) -> String {
        command_line(
            "sh",
            ["-c", script, "sh"].into_iter().chain(args.iter().copied()),
        )
    }
}

impl Remote for SshRemote {
    fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    fn put_tar<'a>(
        &'a self,
        dest: &'a str,
        archive: TarReader,
        length: Option<u64>,
        progress: Option<ProgressFn>,
    ) -> BoxFuture<'a, Result<u64>> {
        Box::pin(async move {
            let mut counted = ProgressReader::new(archive, length, progress);
            let out = self
                .ssh
                .exec_with_stdin_stream(&Self::command(EXTRACT_STDIN, &[dest]), &mut counted)
                .await?;
            if !out.success() {
                return Err(ScriptOutput {
                    stdout: out.stdout_text().into_owned(),
                    stderr: out.stderr_text().into_owned(),
                    exit_code: out.exit_status.map_or(-1, |c| c as i32),
                }
                .failure("unpacking the archive"));
            }
            Ok(counted.done())
        })
    }

    fn get_tar<'a>(
        &'a self,
        dir: &'a str,
        names: Option<Vec<String>>,
        out: TarWriter<'a>,
        progress: Option<ProgressFn>,
    ) -> BoxFuture<'a, Result<u64>> {
        Box::pin(async move {
            let mut counting = CountingWriter {
                inner: out,
                done: 0,
                progress,
            };
            let exit = match names {
                None => {
                    self.ssh
                        .exec_to_writer(&Self::command(CREATE_ALL_STDOUT, &[dir]), &mut counting)
                        .await?
                }
                Some(names) => {
                    let list = std::io::Cursor::new(nul_list(&names));
                    let command = Self::command(CREATE_LISTED_STDOUT, &[dir, "-"]);
                    self.ssh
                        .exec_streaming(&command, list, &mut counting)
                        .await?
                }
            };
            if !exit.success() {
                return Err(ScriptOutput {
                    stdout: String::new(),
                    stderr: String::from_utf8_lossy(&exit.stderr).into_owned(),
                    exit_code: exit.exit_status.map_or(-1, |c| c as i32),
                }
                .failure("packing the archive"));
            }
            counting
                .flush()
                .await
                .map_err(|e| Error::io("writing the downloaded archive", e))?;
            Ok(counting.done)
        })
    }

    fn guest(&self, paths: PathMap) -> Guest {
        let options = GuestOptions::new()
            .channel(GuestChannel::Ssh)
            .ssh_session(self.ssh.clone());
        Guest::new(self.sandbox.clone(), paths, options)
    }

    fn run_sh<'a>(
        &'a self,
        script: &'a str,
        args: Vec<String>,
        stdin: Vec<u8>,
    ) -> BoxFuture<'a, Result<ScriptOutput>> {
        Box::pin(async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = self
                .ssh
                .exec_with_stdin(&Self::command(script, &args), stdin)
                .await?;
            Ok(ScriptOutput {
                stdout: out.stdout_text().into_owned(),
                stderr: out.stderr_text().into_owned(),
                exit_code: out.exit_status.map_or(-1, |c| c as i32),
            })
        })
    }
}

/// Counts bytes written and reports them.
struct CountingWriter<'a> {
    inner: TarWriter<'a>,
    done: u64,
    progress: Option<ProgressFn>,
}

impl AsyncWrite for CountingWriter<'_> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        let polled = Pin::new(&mut *self.inner).poll_write(cx, buf);
        if let std::task::Poll::Ready(Ok(n)) = &polled {
            self.done += *n as u64;
            let done = self.done;
            if let Some(report) = &self.progress {
                report(done, None);
            }
        }
        polled
    }

    fn poll_flush(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        Pin::new(&mut *self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        Pin::new(&mut *self.inner).poll_shutdown(cx)
    }
}
