//! The resident helper: one long-lived `cos_guest.py serve` per sandbox, speaking JSON lines
//! over one managed process, so a warm file operation or command costs one control-plane
//! request (its input) and no interpreter start.
//!
//! Requests go in as process input (E26); answers come back on the process's output stream
//! (E25), which [`link`] keeps open while anything waits. A command ([`Resident::run`]) runs
//! in its own session in the guest and streams its output back as it comes; cancelling it,
//! its deadline or dropping the call stops its whole process tree (the helper signals the
//! session, the process group, every descendant and every process carrying the run's tag; if
//! the helper does not confirm within the grace period, the helper's managed process is
//! stopped, which takes everything it started with it).
//!
//! When the helper is gone (it exited, the sandbox was paused, the process record expired) the
//! next request starts a new one; input the server refused is sent again once, since it never
//! reached the helper. A sandbox that is itself gone or not running surfaces as the control
//! plane's error, for the caller to revalidate.
//!
//! ```no_run
//! # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
//! use createos_sandbox::guest::{CommandSpec, Resident, RunControl};
//! let resident = Resident::of(&sandbox);
//! let out = resident.run(CommandSpec::shell("make test", "/root/workspace"), RunControl::default()).await?;
//! println!("exit {:?}: {}", out.exit_code, String::from_utf8_lossy(&out.stdout));
//! # Ok(()) }
//! ```

mod link;
mod run;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Map, Value};

pub use run::{CommandOutput, CommandSpec, OutputNote, OutputWatcher, RunControl};

use super::error::{GuestError, GuestErrorCode};
use super::helper::{Helper, EXIT_MISSING, EXIT_NOT_FOUND, EXIT_TOO_OLD, INSTALL_ROOT};
use super::runner::{HelperRunner, ProcessRunner};
use super::PROTOCOL_VERSION;
use crate::api::processes::ProcessSpec;
use crate::api::sandboxes::Sandbox;
use crate::error::{Error, Result};
use link::{Link, Reply, READY_ID};

/// How often a retired helper is checked for commands still running.
const RETIRE_POLL: Duration = Duration::from_secs(1);

/// Longest wait for a new helper to say it is ready.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// One resident helper per sandbox of this process; from [`Resident::of`].
pub struct Resident {
    sandbox: Sandbox,
    helper: Helper,
    python: String,
    /// The running helper; the async lock makes starting it single-flight.
    live: tokio::sync::Mutex<Option<Arc<Link>>>,
    /// Retired helpers still finishing their commands: [`shutdown`](Self::shutdown) ends them too.
    retiring: Arc<Mutex<Vec<Arc<Link>>>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for Resident {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resident")
            .field("sandbox", &self.sandbox.id())
            .field("helper", &self.helper.location.file)
            .finish()
    }
}

type Pool = Mutex<HashMap<String, Arc<Resident>>>;

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(Pool::default)
}

fn key(sandbox: &Sandbox) -> String {
    format!("{} {}", sandbox.client().base_url(), sandbox.id())
}

/// Whether a control-plane error says the helper's process (not the sandbox) is gone: the
/// server refused the input, so it never reached the helper and may be sent again.
fn process_refused(err: &Error) -> bool {
    match err {
        Error::NotFound(api) | Error::Conflict(api) => ["process", "stdin", "input"]
            .iter()
            .any(|f| api.fields.contains_key(*f)),
        _ => false,
    }
}

impl Resident {
    /// The resident helper of `sandbox` (the embedded helper, run with `python3`), shared by
    /// every caller in this process.
    pub fn of(sandbox: &Sandbox) -> Arc<Resident> {
        Self::with_helper(sandbox, None, "python3")
    }

    pub(crate) fn with_helper(
        sandbox: &Sandbox,
        source: Option<Arc<str>>,
        python: &str,
    ) -> Arc<Resident> {
        let mut pool = pool().lock().unwrap_or_else(|e| e.into_inner());
        pool.entry(key(sandbox))
            .or_insert_with(|| {
                let helper = match source {
                    Some(source) => Helper::new(source),
                    None => Helper::embedded(),
                };
                Arc::new(Resident {
                    sandbox: sandbox.clone(),
                    helper,
                    python: python.to_string(),
                    live: tokio::sync::Mutex::new(None),
                    retiring: Arc::default(),
                    next_id: AtomicU64::new(READY_ID + 1),
                })
            })
            .clone()
    }

    /// Drop the pooled helper of `sandbox` without a request (the sandbox is gone).
    pub fn forget(sandbox: &Sandbox) {
        pool()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key(sandbox));
    }

    /// End the helpers of every sandbox of the control plane at `base_url` (their stdin is
    /// closed: running commands are stopped, then the helper exits). One request each, sent
    /// together; failures are logged.
    pub async fn shutdown_all(base_url: &url::Url) {
        let prefix = format!("{base_url} ");
        let residents: Vec<Arc<Resident>> = {
            let mut pool = pool().lock().unwrap_or_else(|e| e.into_inner());
            let keys: Vec<String> = pool
                .keys()
                .filter(|k| k.starts_with(&prefix))
                .cloned()
                .collect();
            keys.iter().filter_map(|k| pool.remove(k)).collect()
        };
        let closing = residents.iter().map(|r| r.shutdown());
        futures::future::join_all(closing).await;
    }

    /// Close this helper's stdin (it stops its commands and exits), and that of every retired
    /// helper still finishing commands.
    pub async fn shutdown(&self) {
        let mut links: Vec<Arc<Link>> =
            std::mem::take(&mut *self.retiring.lock().unwrap_or_else(|e| e.into_inner()));
        links.extend(self.live.lock().await.take());
        let closing = links.into_iter().filter(|l| !l.dead.is_cancelled()).map(|link| async move {
            if let Err(err) = link.process.close_stdin().await {
                tracing::debug!(sandbox = %self.sandbox.id(), error = %err, "closing the resident helper failed; stopping it");
                let _ = link.process.stop(Some(Duration::ZERO)).await;
            }
            link.mark_dead(link::Exit { stderr: "shut down".into(), ..Default::default() });
        });
        futures::future::join_all(closing).await;
    }

    /// The sandbox.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// The managed process id of the running helper, if one runs.
    pub async fn process_id(&self) -> Option<String> {
        self.live
            .lock()
            .await
            .as_ref()
            .filter(|l| !l.dead.is_cancelled())
            .map(|l| l.process.id().to_string())
    }

    /// Run file operation `op` (the helper's vocabulary, see guest/README.md) with `cwd` and
    /// `args` and return its `result`. When `timeout` passes the call fails with
    /// [`Error::Timeout`] and the helper is retired (a file operation cannot be interrupted,
    /// and would hold up the ones after it): later requests go to a new helper, and the old one
    /// is ended once the commands it still runs have finished.
    pub async fn call(
        &self,
        op: &str,
        cwd: &str,
        args: Value,
        timeout: Option<Duration>,
    ) -> Result<Value> {
        let body = json!({"op": op, "cwd": cwd, "args": args});
        let exchange = async {
            let (link, id, mut replies) = self.send(body).await?;
            let answer = loop {
                match replies.recv().await {
                    Some(Reply::Chunk { .. }) => continue,
                    Some(Reply::Result(value)) => break Ok(value),
                    Some(Reply::Refused(wire)) => break Err(wire.into_error(op)),
                    Some(Reply::Gone(err)) => break Err(err),
                    None => break Err(link::gone(&link.exit().unwrap_or_default())),
                }
            };
            link.unregister(id);
            answer.map(|v| (v, link))
        };
        let outcome = match timeout.filter(|t| !t.is_zero()) {
            Some(limit) => match tokio::time::timeout(limit, exchange).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    self.retire().await;
                    return Err(Error::Timeout {
                        endpoint: format!("guest {op}"),
                        after: limit,
                    });
                }
            },
            None => exchange.await,
        };
        outcome.map(|(value, _)| value)
    }

    /// Send one request (an object without `v` and `id`): returns the link it went to, its id
    /// and the channel its replies arrive on. Input the server refused because the helper's
    /// process is gone is sent once more to a new helper.
    async fn send(
        &self,
        body: Value,
    ) -> Result<(Arc<Link>, u64, tokio::sync::mpsc::UnboundedReceiver<Reply>)> {
        let Value::Object(fields) = body else {
            return Err(Error::invalid("request", "must be an object"));
        };
        let mut retried = false;
        loop {
            let link = self.link().await?;
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let mut line = Map::new();
            line.insert("v".into(), json!(PROTOCOL_VERSION));
            line.insert("id".into(), json!(id));
            line.extend(fields.clone());
            let mut bytes = serde_json::to_vec(&Value::Object(line))
                .map_err(|e| Error::invalid("request", e.to_string()))?;
            bytes.push(b'\n');
            let replies = link.register(id);
            match link.process.write_input(&bytes).await {
                Ok(_) => return Ok((link, id, replies)),
                Err(err) => {
                    link.unregister(id);
                    if matches!(err.status(), Some(404) | Some(409)) {
                        link.mark_dead(link::Exit {
                            stderr: err.to_string(),
                            ..Default::default()
                        });
                    }
                    if process_refused(&err) && !retried {
                        retried = true;
                        tracing::debug!(sandbox = %self.sandbox.id(), error = %err, "the resident helper is gone; starting a new one");
                        continue;
                    }
                    return Err(err);
                }
            }
        }
    }

    /// The running helper, started (and installed) when there is none.
    async fn link(&self) -> Result<Arc<Link>> {
        let mut live = self.live.lock().await;
        if let Some(link) = live.as_ref().filter(|l| !l.dead.is_cancelled()) {
            return Ok(link.clone());
        }
        *live = None;
        let link = self.start().await?;
        *live = Some(link.clone());
        Ok(link)
    }

    async fn start(&self) -> Result<Arc<Link>> {
        let mut installed = false;
        loop {
            let mut argv = self.helper.argv(&self.python);
            argv.push("serve".into());
            let (cmd, args) = argv
                .split_first()
                .ok_or_else(|| Error::invalid("argv", "empty"))?;
            // cancel-safe: a caller gone during the start leaves no helper behind
            let process = self
                .sandbox
                .processes()
                .start(ProcessSpec::new(cmd.clone()).args(args.iter().cloned()))
                .await?;
            let link = Link::new(process);
            // A caller that gives up before the helper is ready must not leave it running.
            let mut unready = StopUnready(Some(link.clone()));
            let mut ready = link.register(READY_ID);
            let first = tokio::time::timeout(START_TIMEOUT, ready.recv()).await;
            link.unregister(READY_ID);
            unready.0 = None;
            match first {
                Ok(Some(Reply::Result(info))) => {
                    tracing::debug!(sandbox = %self.sandbox.id(), process = %link.process.id(), %info, "resident file helper ready");
                    return Ok(link);
                }
                Ok(Some(Reply::Gone(err))) => {
                    let exit = link.exit().unwrap_or_default();
                    match exit.code {
                        Some(EXIT_MISSING) if !installed => {
                            tracing::debug!(sandbox = %self.sandbox.id(), file = %self.helper.location.file, "uploading the file helper");
                            let content = Bytes::copy_from_slice(self.helper.source.as_bytes());
                            ProcessRunner::new(self.sandbox.clone()).install(&self.helper.location, content).await?;
                            installed = true;
                            continue;
                        }
                        Some(EXIT_MISSING) => {
                            return Err(guest_error(
                                GuestErrorCode::InstallFailed,
                                format!(
                                    "the helper at {} is still missing or stale right after uploading it; is {INSTALL_ROOT} writable?",
                                    self.helper.location.file
                                ),
                            ))
                        }
                        Some(EXIT_TOO_OLD) => return Err(guest_error(GuestErrorCode::PythonTooOld, exit.stderr)),
                        Some(EXIT_NOT_FOUND) => {
                            return Err(guest_error(
                                GuestErrorCode::PythonMissing,
                                format!("python3 (3.9 or newer) is needed in the sandbox for file operations and was not found: {}", exit.stderr),
                            ))
                        }
                        _ => return Err(err),
                    }
                }
                Ok(_) => {
                    return Err(guest_error(
                        GuestErrorCode::HelperFailed,
                        "the helper's first line was not `ready`".into(),
                    ))
                }
                Err(_) => {
                    let _ = link.process.stop(Some(Duration::ZERO)).await;
                    return Err(Error::Timeout {
                        endpoint: "starting the resident file helper".into(),
                        after: START_TIMEOUT,
                    });
                }
            }
        }
    }

    /// Forget the running helper without a request (it refused input, or its sandbox was
    /// replaced): the next request starts a new one.
    pub async fn reset(&self) {
        if let Some(link) = self.live.lock().await.take() {
            link.mark_dead(link::Exit {
                stderr: "replaced by a new helper".into(),
                ..Default::default()
            });
        }
    }

    /// Send later requests to a new helper; end this one (close its stdin) once nothing waits
    /// for it any more.
    async fn retire(&self) {
        let Some(link) = self.live.lock().await.take() else {
            return;
        };
        self.retiring
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(link.clone());
        let retiring = self.retiring.clone();
        tokio::spawn(async move {
            while link.pending() > 0 && !link.dead.is_cancelled() {
                tokio::time::sleep(RETIRE_POLL).await;
            }
            if !link.dead.is_cancelled() {
                if let Err(err) = link.process.close_stdin().await {
                    tracing::debug!(process = %link.process.id(), error = %err, "ending a retired helper failed; stopping it");
                    let _ = link.process.stop(Some(Duration::ZERO)).await;
                }
            }
            link.mark_dead(link::Exit {
                stderr: "retired".into(),
                ..Default::default()
            });
            retiring
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|l| !Arc::ptr_eq(l, &link));
        });
    }

    /// Stop the helper's process tree now and forget it (the next request starts a new one).
    pub(crate) async fn kill(&self) {
        let link = self.live.lock().await.take();
        if let Some(link) = link {
            if let Err(err) = link.process.stop(Some(Duration::ZERO)).await {
                tracing::warn!(sandbox = %self.sandbox.id(), error = %err, "stopping the resident helper failed");
            }
            link.mark_dead(link::Exit {
                stderr: "stopped by the client".into(),
                ..Default::default()
            });
        }
    }
}

/// Stops a helper that was started but never became ready, when dropped armed.
struct StopUnready(Option<Arc<Link>>);

impl Drop for StopUnready {
    fn drop(&mut self) {
        let Some(link) = self.0.take() else { return };
        link.mark_dead(link::Exit {
            stderr: "abandoned before it was ready".into(),
            ..Default::default()
        });
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = link.process.stop(Some(Duration::ZERO)).await;
            });
        }
    }
}

fn guest_error(code: GuestErrorCode, message: String) -> Error {
    GuestError::new("resident", code, message).into()
}
