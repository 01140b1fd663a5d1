//! File operations inside a sandbox through the guest helper (`guest/cos_guest.py`): read,
//! write, edit, patch, glob, grep, stat, list, mkdir, remove, move and manifest, with the
//! plugins' semantics (plugins.md §2.8): 1 MiB UTF-8 text limit, atomic writes, unique-match
//! edits, validate-everything-first patches.
//!
//! A [`Guest`] runs each operation as one `python3` process in the sandbox: over an exec
//! channel of the sandbox's SSH connection when that connection is up, else as a managed
//! process (see [`GuestChannel`]; other channels plug in through [`HelperRunner`]). The JSON
//! request goes to its stdin, exactly one JSON answer comes back on stdout. The helper is uploaded once per sandbox under
//! a content-hashed path and re-uploaded only when it is missing or a different version is
//! wanted. Operations on one sandbox are serialized across every `Guest` of this process, so an
//! edit's read-modify-write never interleaves with another file operation (shell commands run
//! elsewhere can still change the same files).
//!
//! ```no_run
//! # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
//! use createos_sandbox::guest::{PathMap, ReadOptions};
//! let guest = sandbox.guest(PathMap::new("/root/workspace")?);
//! guest.write("notes.txt", "hello\nworld\n").await?;
//! guest.edit("notes.txt", "world", "there", false).await?;
//! let text = guest.read("notes.txt", ReadOptions::default()).await?;
//! assert_eq!(text.content(), "1: hello\n2: there");
//! # Ok(()) }
//! ```

mod error;
mod helper;
mod models;
mod ops;
mod paths;
mod resident;
mod runner;
mod ssh_runner;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

pub use error::{GuestError, GuestErrorCode};
pub use helper::{HelperLocation, EMBEDDED_SOURCE, INSTALL_ROOT};
pub use models::*;
pub use paths::PathMap;
pub use resident::{CommandOutput, CommandSpec, OutputNote, OutputWatcher, Resident, RunControl};
pub use runner::{HelperOutput, HelperRunner, ProcessRunner, DEFAULT_MAX_OUTPUT};
pub use ssh_runner::SshRunner;

use crate::api::sandboxes::Sandbox;
use crate::error::{Error, Result};
use crate::ssh::{SshPool, SshSession};
use error::WireError;
use helper::Helper;

/// The helper's protocol version.
pub const PROTOCOL_VERSION: i64 = 1;

/// Largest request (JSON bytes) passed in argv rather than on stdin; well below Linux's
/// 128 KiB limit of one argument once base64-encoded.
const MAX_ARGV_REQUEST: usize = 64 << 10;

/// Default time limit of one operation: 120 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Which channel runs the helper.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GuestChannel {
    /// An exec channel of the sandbox's SSH session when that session is connected at the
    /// time of the call, else a managed process. No SSH connection is opened for this.
    #[default]
    Auto,
    /// Always a managed process.
    Process,
    /// Always SSH, connecting (and preparing the guest's sshd) when needed.
    Ssh,
    /// The sandbox's [`Resident`] helper: one long-lived helper process per sandbox, so a warm
    /// operation costs one control-plane request and no interpreter start.
    Resident,
}

/// Settings of a [`Guest`].
#[derive(Clone)]
pub struct GuestOptions {
    timeout: Option<Duration>,
    max_output: usize,
    python: String,
    helper_source: Option<Arc<str>>,
    channel: GuestChannel,
    ssh: Option<SshSession>,
}

impl Default for GuestOptions {
    fn default() -> Self {
        GuestOptions {
            timeout: Some(DEFAULT_TIMEOUT),
            max_output: DEFAULT_MAX_OUTPUT,
            python: "python3".into(),
            helper_source: None,
            channel: GuestChannel::Auto,
            ssh: None,
        }
    }
}

impl fmt::Debug for GuestOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuestOptions")
            .field("timeout", &self.timeout)
            .field("max_output", &self.max_output)
            .field("python", &self.python)
            .field("custom_helper", &self.helper_source.is_some())
            .field("channel", &self.channel)
            .field(
                "ssh",
                &self.ssh.as_ref().map(|s| s.sandbox().id().to_string()),
            )
            .finish()
    }
}

impl GuestOptions {
    /// Defaults: 120 s per operation, 8 MiB of answer, `python3`, the embedded helper.
    pub fn new() -> Self {
        Self::default()
    }

    /// Time limit of one operation; zero means none. When it passes the helper process is
    /// stopped and the call fails with [`Error::Timeout`].
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = (!limit.is_zero()).then_some(limit);
        self
    }

    /// Largest answer accepted (the default runner's stdout bound).
    pub fn max_output(mut self, bytes: usize) -> Self {
        self.max_output = bytes;
        self
    }

    /// The interpreter to run (a name looked up in the sandbox's `PATH`, or a path).
    pub fn python(mut self, program: impl Into<String>) -> Self {
        self.python = program.into();
        self
    }

    /// Run this helper source instead of the embedded one (it must speak protocol version 1).
    /// It is stored under its own hash, so the embedded copy is untouched.
    pub fn helper_source(mut self, source: impl Into<String>) -> Self {
        self.helper_source = Some(Arc::from(source.into()));
        self
    }

    /// Which channel runs the helper (default [`GuestChannel::Auto`]).
    pub fn channel(mut self, channel: GuestChannel) -> Self {
        self.channel = channel;
        self
    }

    /// The SSH session of the sandbox to use (default: the sandbox's session in
    /// [`SshPool::global`], if there is one).
    pub fn ssh_session(mut self, session: SshSession) -> Self {
        self.ssh = Some(session);
        self
    }
}

/// File operations in one sandbox. Cheap to clone; clones (and every other `Guest` of the same
/// sandbox in this process) take turns.
#[derive(Clone)]
pub struct Guest {
    sandbox: Sandbox,
    paths: PathMap,
    process: Arc<ProcessRunner>,
    /// Set by [`Guest::with_runner`]: used for every call.
    custom: Option<Arc<dyn HelperRunner>>,
    channel: GuestChannel,
    ssh: Option<SshSession>,
    max_output: usize,
    helper: Arc<Helper>,
    helper_source: Option<Arc<str>>,
    timeout: Option<Duration>,
    python: String,
    slot: Arc<SandboxSlot>,
}

impl fmt::Debug for Guest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guest")
            .field("sandbox", &self.sandbox.id())
            .field("paths", &self.paths)
            .field("channel", &self.channel)
            .field("custom_runner", &self.custom.is_some())
            .field("helper", &self.helper.location.file)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Sandbox {
    /// File operations in this sandbox with default [`GuestOptions`], resolving paths with
    /// `paths`.
    pub fn guest(&self, paths: PathMap) -> Guest {
        Guest::new(self.clone(), paths, GuestOptions::default())
    }
}

impl Guest {
    /// File operations in `sandbox`, over the channel `options` choose.
    pub fn new(sandbox: Sandbox, paths: PathMap, options: GuestOptions) -> Self {
        let helper = match options.helper_source.clone() {
            Some(source) => Helper::new(source),
            None => Helper::embedded(),
        };
        let process = Arc::new(ProcessRunner::new(sandbox.clone()).max_output(options.max_output));
        let slot = slot_for(&sandbox);
        Guest {
            sandbox,
            paths,
            process,
            custom: None,
            channel: options.channel,
            ssh: options.ssh,
            max_output: options.max_output,
            helper: Arc::new(helper),
            helper_source: options.helper_source,
            timeout: options.timeout,
            python: options.python,
            slot,
        }
    }

    /// Run the helper over `runner` for every call, whatever the channel setting.
    /// Operations stay serialized with every other `Guest` of the sandbox.
    pub fn with_runner(mut self, runner: Arc<dyn HelperRunner>) -> Self {
        self.custom = Some(runner);
        self
    }

    /// The channel setting.
    pub fn channel(&self) -> GuestChannel {
        self.channel
    }

    /// Whether the next operation would run over SSH (for [`GuestChannel::Auto`]: whether the
    /// sandbox's SSH session is connected right now).
    pub async fn uses_ssh(&self) -> bool {
        self.custom.is_none() && self.ssh_now().await.is_some()
    }

    /// The SSH session to run over now, if any (see [`GuestChannel`]).
    async fn ssh_now(&self) -> Option<SshSession> {
        let pooled = || SshPool::global().existing(self.sandbox.id());
        match self.channel {
            GuestChannel::Process | GuestChannel::Resident => None,
            GuestChannel::Ssh => self.ssh.clone().or_else(pooled),
            GuestChannel::Auto => {
                let session = self.ssh.clone().or_else(pooled)?;
                session.is_connected().await.then_some(session)
            }
        }
    }

    /// The runner of one call (its run and, if needed, the install use the same one).
    async fn runner(&self) -> Result<Arc<dyn HelperRunner>> {
        if let Some(custom) = &self.custom {
            return Ok(custom.clone());
        }
        let session = match self.ssh_now().await {
            Some(session) => Some(session),
            // asked for SSH and no session known yet: the pool's (connects on first use)
            None if self.channel == GuestChannel::Ssh => {
                Some(SshPool::global().entry(&self.sandbox)?)
            }
            None => None,
        };
        Ok(match session {
            Some(session) => Arc::new(SshRunner::new(session).max_output(self.max_output)),
            None => self.process.clone(),
        })
    }

    /// The sandbox.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// How paths are resolved.
    pub fn paths(&self) -> &PathMap {
        &self.paths
    }

    /// Where the helper lives in the sandbox.
    pub fn helper_location(&self) -> &HelperLocation {
        &self.helper.location
    }

    /// Run `op` with `args` as given (no path mapping) and return the helper's `result`.
    async fn call<T: DeserializeOwned>(&self, op: &str, args: Value) -> Result<T> {
        let value = self.call_value(op, args).await?;
        serde_json::from_value(value)
            .map_err(|e| Error::decode(format!("guest {op}"), e.to_string()))
    }

    async fn call_value(&self, op: &str, args: Value) -> Result<Value> {
        if self.channel == GuestChannel::Resident && self.custom.is_none() {
            let resident =
                Resident::with_helper(&self.sandbox, self.helper_source.clone(), &self.python);
            let _turn = self.slot.turn.lock().await;
            return resident
                .call(op, &self.paths.guest_root, args, self.timeout)
                .await;
        }
        let request =
            json!({ "v": PROTOCOL_VERSION, "op": op, "cwd": self.paths.guest_root, "args": args });
        let encoded =
            serde_json::to_vec(&request).map_err(|e| Error::invalid("arguments", e.to_string()))?;
        let _turn = self.slot.turn.lock().await;
        let runner = self.runner().await?;
        // A small request travels in argv (the embedded helper's `once` mode): a managed
        // process then costs its start and its output stream, with no input or stdin-close
        // requests. A custom helper gets it on stdin, as protocol version 1 has it.
        let mut argv = self.helper.argv(&self.python);
        let stdin = if encoded.len() <= MAX_ARGV_REQUEST && self.helper_source.is_none() {
            argv.push("once".into());
            argv.push(base64::engine::general_purpose::STANDARD.encode(&encoded));
            Vec::new()
        } else {
            encoded
        };
        let mut uploaded = false;
        loop {
            let out = runner
                .run(argv.clone(), stdin.clone(), self.timeout)
                .await?;
            match interpret(op, &out) {
                Outcome::Answer(answer) => return answer,
                Outcome::Missing if !uploaded => {
                    tracing::debug!(sandbox = %self.sandbox.id(), file = %self.helper.location.file, "uploading the file helper");
                    let content = Bytes::copy_from_slice(self.helper.source.as_bytes());
                    runner.install(&self.helper.location, content).await?;
                    uploaded = true;
                }
                Outcome::Missing => {
                    return Err(GuestError::new(
                        op,
                        GuestErrorCode::InstallFailed,
                        format!(
                            "the helper at {} is still missing or stale right after uploading it; is {} writable?",
                            self.helper.location.file, INSTALL_ROOT
                        ),
                    )
                    .into())
                }
            }
        }
    }
}

/// What one run of the helper amounted to.
enum Outcome {
    Answer(Result<Value>),
    Missing,
}

/// `{"v", "result"}` or `{"v", "error"}`.
#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    v: Option<i64>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<WireError>,
}

fn interpret(op: &str, out: &HelperOutput) -> Outcome {
    let fail =
        |code, message: String| Outcome::Answer(Err(GuestError::new(op, code, message).into()));
    let stderr = tail(&out.stderr);
    if out.truncated {
        return fail(
            GuestErrorCode::AnswerTooLarge,
            format!(
                "the answer was larger than {} bytes (or partly lost); narrow the request",
                out.stdout.len()
            ),
        );
    }
    match out.exit_code {
        Some(helper::EXIT_MISSING) => return Outcome::Missing,
        Some(helper::EXIT_TOO_OLD) => return fail(GuestErrorCode::PythonTooOld, stderr),
        _ => {}
    }
    if let Ok(answer) = serde_json::from_slice::<Answer>(&out.stdout) {
        if answer.v != Some(PROTOCOL_VERSION) {
            return fail(
                GuestErrorCode::HelperFailed,
                format!(
                    "the helper answered with protocol version {:?}, expected {PROTOCOL_VERSION}",
                    answer.v
                ),
            );
        }
        return Outcome::Answer(match (answer.error, answer.result) {
            (Some(error), _) => Err(error.into_error(op)),
            (None, Some(result)) => Ok(result),
            (None, None) => Err(GuestError::new(
                op,
                GuestErrorCode::HelperFailed,
                "the answer has neither result nor error",
            )
            .into()),
        });
    }
    if out.exit_code == Some(helper::EXIT_NOT_FOUND) && out.stdout.is_empty() {
        return fail(
            GuestErrorCode::PythonMissing,
            format!("python3 (3.9 or newer) is needed in the sandbox for file operations and was not found: {stderr}"),
        );
    }
    let status = match (&out.exit_code, &out.signal) {
        (_, Some(signal)) => format!("was killed by {signal}"),
        (Some(code), None) => format!("exited with status {code}"),
        (None, None) => "ended without an exit status".to_string(),
    };
    let shown = if stderr.is_empty() {
        tail(&out.stdout)
    } else {
        stderr
    };
    fail(
        GuestErrorCode::HelperFailed,
        format!("the helper {status} without a valid answer: {shown}"),
    )
}

/// The last ~2000 characters of some output, trimmed, for an error message.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    let skip = text.chars().count().saturating_sub(2000);
    let tail: String = text.chars().skip(skip).collect();
    if skip > 0 {
        format!("…{tail}")
    } else {
        tail
    }
}

/// Shared by every `Guest` of one sandbox in this process: whose turn it is.
#[derive(Default)]
struct SandboxSlot {
    turn: tokio::sync::Mutex<()>,
}

type Slots = Mutex<HashMap<String, Weak<SandboxSlot>>>;

fn slot_for(sandbox: &Sandbox) -> Arc<SandboxSlot> {
    static SLOTS: OnceLock<Slots> = OnceLock::new();
    let key = format!("{} {}", sandbox.client().base_url(), sandbox.id());
    let mut slots = SLOTS
        .get_or_init(Slots::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(slot) = slots.get(&key).and_then(Weak::upgrade) {
        return slot;
    }
    slots.retain(|_, weak| weak.strong_count() > 0);
    let slot = Arc::new(SandboxSlot::default());
    slots.insert(key, Arc::downgrade(&slot));
    slot
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(stdout: &str, code: Option<i32>) -> HelperOutput {
        HelperOutput {
            stdout: stdout.as_bytes().to_vec(),
            exit_code: code,
            ..Default::default()
        }
    }

    fn code_of(outcome: Outcome) -> Option<GuestErrorCode> {
        match outcome {
            Outcome::Answer(Err(e)) => e.guest_code().cloned(),
            _ => None,
        }
    }

    #[test]
    fn answers_are_interpreted() {
        match interpret(
            "stat",
            &output(r#"{"v":1,"result":{"path":"/x"}}"#, Some(0)),
        ) {
            Outcome::Answer(Ok(v)) => assert_eq!(v["path"], "/x"),
            _ => panic!("expected a result"),
        }
        let err = r#"{"v":1,"error":{"code":"ambiguous","message":"twice","details":{"count":2}}}"#;
        match interpret("edit", &output(err, Some(0))) {
            Outcome::Answer(Err(e)) if e.guest().is_some() => {
                let g = e.guest().unwrap().clone();
                assert_eq!(g.code, GuestErrorCode::Ambiguous);
                assert_eq!(g.details.unwrap()["count"], 2);
                assert_eq!(g.op, "edit");
            }
            _ => panic!("expected a guest error"),
        }
        let bad = r#"{"v":1,"error":{"code":"bad_args","message":"edit: nope"}}"#;
        assert!(matches!(
            interpret("edit", &output(bad, Some(0))),
            Outcome::Answer(Err(Error::InvalidInput { .. }))
        ));
        assert!(matches!(
            interpret("read", &output("", Some(97))),
            Outcome::Missing
        ));
        assert_eq!(
            code_of(interpret("read", &output("", Some(98)))),
            Some(GuestErrorCode::PythonTooOld)
        );
        assert_eq!(
            code_of(interpret("read", &output("", Some(127)))),
            Some(GuestErrorCode::PythonMissing)
        );
        assert_eq!(
            code_of(interpret("read", &output("Traceback", Some(1)))),
            Some(GuestErrorCode::HelperFailed)
        );
        assert_eq!(
            code_of(interpret("read", &output(r#"{"v":2,"result":1}"#, Some(0)))),
            Some(GuestErrorCode::HelperFailed)
        );
        let mut big = output("{", Some(0));
        big.truncated = true;
        assert_eq!(
            code_of(interpret("read", &big)),
            Some(GuestErrorCode::AnswerTooLarge)
        );
    }

    #[test]
    fn tail_keeps_the_end() {
        let long = "x".repeat(3000) + "END";
        let t = tail(long.as_bytes());
        assert!(t.starts_with('…') && t.ends_with("END") && t.chars().count() == 2001);
    }
}
