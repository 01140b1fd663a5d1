//! Managed processes (E21–E30): start, list, inspect, feed input, resize, signal, wait, stop,
//! and follow their output ([`Process::connect`]); plus the entry points of the interactive
//! byte streams (E31–E33, [`Sandbox::shell`], [`Sandbox::shell_ws`], [`Sandbox::tunnel`]).
//!
//! A managed process outlives the request that started it and keeps a bounded, sequenced
//! journal of its output, so a dropped connection loses nothing that is still retained.

mod interactive;
mod models;
mod run;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use base64::Engine;
use serde_json::json;

pub use models::*;
pub use run::{RunOptions, RunOutput};

use crate::api::endpoints as ep;
use crate::api::sandboxes::Sandbox;
use crate::api::OkResponse;
use crate::error::{Error, Result};
use crate::stream::process_output::{ByteStream, OutputOptions, OutputSource, OutputStream};
use crate::transport::retry::{self, Verdict};
use crate::transport::{jsend, Call, CallBody};
use crate::validate;

/// Largest piece of input sent in one request (raw bytes, before base64).
pub const INPUT_CHUNK: usize = 256 * 1024;

/// Longest server-side long-poll of one `wait` request (the CLI's slice).
pub const WAIT_SLICE: Duration = Duration::from_secs(30);

/// Extra time given to one wait request beyond its long-poll budget.
const WAIT_SLACK: Duration = Duration::from_secs(15);

impl Sandbox {
    /// The managed processes of this sandbox.
    pub fn processes(&self) -> Processes {
        Processes {
            sandbox: self.clone(),
        }
    }
}

/// Managed processes of one sandbox; from [`Sandbox::processes`].
#[derive(Clone, Debug)]
pub struct Processes {
    sandbox: Sandbox,
}

impl Processes {
    /// Start a process (E21). Not retried on a broken connection (it may have started);
    /// 429/503 are retried since the server did not act on them.
    ///
    /// Cancel-safe: the request runs in a task of its own, so a caller that gives up while it
    /// is in flight (a deadline, a cancelled tool call, a dropped future) leaves nothing
    /// running. If the process started anyway, the task stops it as soon as the answer names it.
    ///
    /// ```no_run
    /// # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
    /// use createos_sandbox::api::processes::{ProcessSpec, WaitScope};
    /// let proc = sandbox.processes().start(ProcessSpec::new("make").arg("test").cwd("/workspace")).await?;
    /// println!("started {} (pid {:?})", proc.id(), proc.details().pid);
    /// let done = proc.wait(WaitScope::Leader, None).await?;
    /// println!("exit code {:?}", done.exit_code);
    /// # Ok(()) }
    /// ```
    pub async fn start(&self, spec: ProcessSpec) -> Result<Process> {
        spec.validate()?;
        let call = Call::new(&ep::CREATE_PROCESS)
            .param(self.sandbox.id())
            .json(&spec)?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sandbox = self.sandbox.clone();
        tokio::spawn(async move {
            let started = create(&sandbox, call).await;
            if let Err(Ok(orphan)) = tx.send(started) {
                tracing::debug!(sandbox = %sandbox.id(), process = %orphan.id(), "the caller gave up during the start; stopping the process");
                let _ = orphan.stop(Some(Duration::ZERO)).await;
            }
        });
        rx.await.map_err(|_| {
            Error::io(
                "starting a process",
                std::io::Error::other("the task sending the start ended without an answer"),
            )
        })?
    }

    /// Every process the sandbox retains, live or exited, in start order (E22).
    pub async fn list(&self) -> Result<Vec<ProcessDetails>> {
        let call = Call::new(&ep::LIST_PROCESSES).param(self.sandbox.id());
        let list: ProcessList = self.sandbox.client.transport.json(call).await?;
        Ok(list.processes)
    }

    /// Fetch one process (E23) and return a handle on it.
    pub async fn get(&self, process_id: &str) -> Result<Process> {
        let process = self.handle(process_id)?;
        process.info().await?;
        Ok(process)
    }

    /// A handle on a process id without fetching it (its cached details hold only the id).
    pub fn handle(&self, process_id: &str) -> Result<Process> {
        validate::id("process id", process_id)?;
        Ok(Process::from_details(
            self.sandbox.clone(),
            ProcessDetails {
                process_id: process_id.to_string(),
                ..Default::default()
            },
        ))
    }

    /// The sandbox these processes live in.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }
}

/// The start request itself, and the handle on what it started.
async fn create(sandbox: &Sandbox, call: Call) -> Result<Process> {
    let details: ProcessDetails = sandbox.client.transport.json(call).await?;
    validate::id("process id", &details.process_id).map_err(|_| {
        Error::decode(
            ep::CREATE_PROCESS.label(),
            "the answer carries no usable process_id",
        )
    })?;
    Ok(Process::from_details(sandbox.clone(), details))
}

/// A managed process. Cheap to clone; clones share the cached details, which every call that
/// returns details refreshes.
#[derive(Clone)]
pub struct Process {
    sandbox: Sandbox,
    id: Arc<str>,
    details: Arc<RwLock<ProcessDetails>>,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("sandbox", &self.sandbox.id())
            .field("id", &self.id)
            .finish()
    }
}

impl Process {
    fn from_details(sandbox: Sandbox, details: ProcessDetails) -> Self {
        Process {
            sandbox,
            id: Arc::from(details.process_id.as_str()),
            details: Arc::new(RwLock::new(details)),
        }
    }

    /// The process id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The sandbox it runs in.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// The last details the server gave (no request).
    pub fn details(&self) -> ProcessDetails {
        self.details
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn store(&self, details: &ProcessDetails) {
        if details.process_id == *self.id {
            *self.details.write().unwrap_or_else(|e| e.into_inner()) = details.clone();
        }
    }

    fn call(&self, endpoint: &'static ep::Endpoint) -> Call {
        Call::new(endpoint)
            .param(self.sandbox.id())
            .param(&*self.id)
    }

    /// Current details, including the retained output window (E23).
    pub async fn info(&self) -> Result<ProcessDetails> {
        let details: ProcessDetails = self
            .sandbox
            .client
            .transport
            .json(self.call(&ep::GET_PROCESS))
            .await?;
        self.store(&details);
        Ok(details)
    }

    /// Stop the whole process tree (E24): SIGTERM to every member, SIGKILL to whatever is left
    /// after `grace` (`None`: the server's default, 1 s; zero kills at once). Returns the final
    /// details once the tree is gone. Stopping an exited process just returns its details.
    pub async fn stop(&self, grace: Option<Duration>) -> Result<ProcessDetails> {
        let grace_ms = grace.map(|g| u64::try_from(g.as_millis()).unwrap_or(u64::MAX));
        // The answer comes after the grace period: give the request that much more time.
        let budget = self
            .sandbox
            .client
            .transport
            .timeouts
            .request
            .map(|t| t + grace.unwrap_or(Duration::from_secs(1)));
        let call = self
            .call(&ep::STOP_PROCESS)
            .query_opt("grace_ms", grace_ms)
            .timeout(budget);
        let details: ProcessDetails = self.sandbox.client.transport.json(call).await?;
        self.store(&details);
        Ok(details)
    }

    /// Write bytes to the process's stdin (pipes) or terminal (PTY) (E26).
    ///
    /// Large inputs go out as ordered requests of at most [`INPUT_CHUNK`] bytes, each sent after
    /// the previous one was acknowledged. Input is not idempotent, so a chunk is sent again only
    /// when the server said it did not apply it (429/503, honouring `Retry-After`) or the
    /// connection never opened; a timeout or a dropped answer is returned, never retried, since
    /// the chunk may have arrived. Order holds because the next chunk waits for the previous
    /// acknowledgement. On an error, the chunks before the failing one were delivered (their
    /// count is not part of the error; write smaller pieces if you need to resume exactly).
    pub async fn write_input(&self, data: impl AsRef<[u8]>) -> Result<InputWritten> {
        let data = data.as_ref();
        let mut written = InputWritten::default();
        for chunk in data.chunks(INPUT_CHUNK) {
            let seq = self.send_input_chunk(chunk).await?;
            written.input_seq = Some(seq);
            written.bytes += chunk.len() as u64;
            written.chunks += 1;
        }
        Ok(written)
    }

    async fn send_input_chunk(&self, chunk: &[u8]) -> Result<i64> {
        let transport = &self.sandbox.client.transport;
        let body = serde_json::to_vec(
            &json!({ "data_base64": base64::engine::general_purpose::STANDARD.encode(chunk) }),
        )
        .map_err(|e| Error::invalid("input", format!("cannot encode input: {e}")))?;
        let mut attempt = 0;
        loop {
            let outcome = self.send_input_once(&body).await;
            // POST is not idempotent: the judge allows only what the server did not apply.
            match retry::judge(
                &outcome,
                &ep::WRITE_PROCESS_INPUT,
                true,
                attempt,
                &transport.retry,
            ) {
                Verdict::GiveUp => return outcome,
                Verdict::Retry(delay) => {
                    tracing::debug!(
                        attempt,
                        ?delay,
                        "input chunk refused before it was applied; sending it again"
                    );
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
            }
        }
    }

    /// One attempt, through the transport's one-shot path (`send_stream`) so the retry
    /// decision stays here.
    async fn send_input_once(&self, body: &[u8]) -> Result<i64> {
        let transport = &self.sandbox.client.transport;
        let label = ep::WRITE_PROCESS_INPUT.label();
        let call = self.call(&ep::WRITE_PROCESS_INPUT).body(CallBody::Stream {
            body: reqwest::Body::from(body.to_vec()),
            length: Some(body.len() as u64),
            content_type: "application/json",
        });
        let exchange = async {
            let response = transport.send_stream(call).await?;
            let status = response.status().as_u16();
            let bytes = response
                .bytes()
                .await
                .map_err(|e| crate::transport::connection_error(&label, e))?;
            jsend::decode_success::<InputAck>(&label, status, &bytes)
        };
        let ack = match transport.timeouts.request {
            Some(limit) => {
                tokio::time::timeout(limit, exchange)
                    .await
                    .map_err(|_| Error::Timeout {
                        endpoint: label.clone(),
                        after: limit,
                    })??
            }
            None => exchange.await?,
        };
        Ok(ack.input_seq)
    }

    /// Close stdin of a pipe process so it sees end-of-file (E27). Idempotent. A PTY process
    /// answers 400: send Ctrl-D (`0x04`) as input instead.
    pub async fn close_stdin(&self) -> Result<()> {
        let _: OkResponse = self
            .sandbox
            .client
            .transport
            .json(self.call(&ep::CLOSE_PROCESS_STDIN))
            .await?;
        Ok(())
    }

    /// Set the terminal size of a PTY process (E28); its foreground job gets SIGWINCH.
    pub async fn resize(&self, rows: u16, cols: u16) -> Result<()> {
        let size = PtySize { rows, cols };
        size.validate("size")?;
        let call = self.call(&ep::RESIZE_PROCESS).json(&size)?;
        let _: OkResponse = self.sandbox.client.transport.json(call).await?;
        Ok(())
    }

    /// Deliver a signal to the process group (PTY: the foreground group) (E29).
    pub async fn signal(&self, signal: Signal) -> Result<()> {
        let call = self
            .call(&ep::SIGNAL_PROCESS)
            .json(&json!({ "signal": signal.as_str() }))?;
        let _: OkResponse = self.sandbox.client.transport.json(call).await?;
        Ok(())
    }

    /// Wait until the leader (or the whole tree) has exited and return the final details
    /// (E30). The server long-polls for at most [`WAIT_SLICE`] per request and answers 408
    /// when that runs out; this loops until the process is done or `timeout` (`None` or zero:
    /// no limit) has passed, then fails with [`Error::Timeout`].
    pub async fn wait(
        &self,
        scope: WaitScope,
        timeout: Option<Duration>,
    ) -> Result<ProcessDetails> {
        let label = ep::WAIT_PROCESS.label();
        let deadline = timeout
            .filter(|t| !t.is_zero())
            .map(|t| tokio::time::Instant::now() + t);
        let polls = async {
            loop {
                let slice = match deadline {
                    Some(d) => d
                        .saturating_duration_since(tokio::time::Instant::now())
                        .min(WAIT_SLICE),
                    None => WAIT_SLICE,
                };
                let slice_ms = u64::try_from(slice.as_millis()).unwrap_or(u64::MAX);
                let call = self
                    .call(&ep::WAIT_PROCESS)
                    .query("scope", scope.as_str())
                    .query("timeout_ms", slice_ms)
                    .timeout(Some(slice + WAIT_SLACK));
                match self
                    .sandbox
                    .client
                    .transport
                    .json::<ProcessDetails>(call)
                    .await
                {
                    Ok(details) => {
                        self.store(&details);
                        return Ok(details);
                    }
                    Err(e) if e.status() == Some(408) => {
                        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                            return Err(Error::Timeout {
                                endpoint: label.clone(),
                                after: timeout.unwrap_or_default(),
                            });
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        match deadline {
            // The transport may itself re-send a 408'd GET; the outer deadline keeps the
            // caller's budget no matter how the slices went.
            Some(d) => tokio::time::timeout_at(d + Duration::from_millis(250), polls)
                .await
                .map_err(|_| Error::Timeout {
                    endpoint: label.clone(),
                    after: timeout.unwrap_or_default(),
                })?,
            None => polls.await,
        }
    }

    /// Follow the output (E25): replays every retained chunk with `seq > after` (0: all), then
    /// live output, and ends after the exit event. Dropped connections are resumed from the
    /// last received sequence (see [`OutputStream`]).
    ///
    /// ```no_run
    /// # async fn demo(proc: createos_sandbox::api::processes::Process) -> createos_sandbox::Result<()> {
    /// use futures::StreamExt;
    /// use createos_sandbox::stream::process_output::OutputEvent;
    /// let mut output = proc.connect(0).await?;
    /// while let Some(event) = output.next().await {
    ///     match event? {
    ///         OutputEvent::Data { bytes, .. } => print!("{}", String::from_utf8_lossy(&bytes)),
    ///         OutputEvent::Exit { code, signal } => println!("exited: {code:?} {signal:?}"),
    ///         OutputEvent::Gap { lost_bytes, .. } => eprintln!("[output lost: {lost_bytes:?} bytes]"),
    ///         OutputEvent::Error(message) => eprintln!("server: {message}"),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn connect(&self, after: u64) -> Result<OutputStream> {
        OutputStream::open(OutputOf(self.clone()), after, OutputOptions::default()).await
    }

    /// [`Self::connect`] with explicit reconnect and idle-timeout settings.
    pub async fn connect_with(&self, after: u64, options: OutputOptions) -> Result<OutputStream> {
        OutputStream::open(OutputOf(self.clone()), after, options).await
    }

    /// One `connect` request; the response is the unread NDJSON body.
    async fn open_output(&self, after: u64) -> Result<ByteStream> {
        let call = self
            .call(&ep::CONNECT_PROCESS)
            .query("after", after)
            .accept("application/x-ndjson");
        let response = self.sandbox.client.transport.response(call).await?;
        Ok(Box::pin(crate::stream::ndjson::body_bytes(response)))
    }
}

/// What the resumable output stream of a process reopens: its `connect` (E25), and its
/// details (E23) for the retained window.
struct OutputOf(Process);

impl OutputSource for OutputOf {
    fn endpoint(&self) -> String {
        ep::CONNECT_PROCESS.label()
    }

    fn process_id(&self) -> &str {
        self.0.id()
    }

    fn reopen(&self, after: u64) -> futures::future::BoxFuture<'_, Result<ByteStream>> {
        Box::pin(self.0.open_output(after))
    }

    fn window(&self) -> futures::future::BoxFuture<'_, Result<OutputWindow>> {
        Box::pin(async move { Ok(self.0.info().await?.output) })
    }
}
