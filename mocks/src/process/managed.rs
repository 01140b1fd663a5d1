//! One managed process: its record (what `ProcessDetails` shows), its output journal,
//! ordered input, and the lifecycle rules — `running` until the whole tree is gone (with
//! `leader_exited` set as soon as the main command ends), `terminating` during a stop,
//! `exited` at the end, `failed` when the command could not be started.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use nix::sys::signal::Signal;
use serde::Serialize;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::fdio::FdIo;
use super::journal::{Journal, OutputStream, Replay, Window};
use super::pty;
use super::tree::{self, TreeTracker};

/// Pipes or a PTY.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Pipes,
    Pty,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Pipes => "process",
            Kind::Pty => "pty",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    Terminating,
    Exited,
    Failed,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Running => "running",
            Phase::Terminating => "terminating",
            Phase::Exited => "exited",
            Phase::Failed => "failed",
        }
    }
}

/// How the leader ended: an exit code, or the name of the signal that killed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderExit {
    pub code: Option<i32>,
    pub signal: Option<String>,
}

impl LeaderExit {
    pub fn from_status(status: std::io::Result<std::process::ExitStatus>) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match status {
            Ok(st) => match (st.code(), st.signal()) {
                (Some(code), _) => LeaderExit {
                    code: Some(code),
                    signal: None,
                },
                (None, Some(sig)) => LeaderExit {
                    code: None,
                    signal: Some(signal_name(sig)),
                },
                (None, None) => LeaderExit {
                    code: Some(-1),
                    signal: None,
                },
            },
            Err(_) => LeaderExit {
                code: Some(-1),
                signal: None,
            },
        }
    }
}

fn signal_name(raw: i32) -> String {
    Signal::try_from(raw)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("SIG{raw}"))
}

/// Signals a client may send (E29).
pub const ALLOWED_SIGNALS: &[Signal] = &[
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGKILL,
    Signal::SIGTERM,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

/// Input waiting to be written, in arrival order.
pub enum InputOp {
    Data(Bytes),
    Close,
}

/// Most input bytes queued for a process that is not reading them.
pub const MAX_INPUT_BACKLOG: usize = 64 << 20;

/// Why input or a control operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    #[error("process has exited")]
    NotRunning,
    #[error("stdin is closed")]
    StdinClosed,
    #[error("input backlog is full ({MAX_INPUT_BACKLOG} bytes queued)")]
    Backlog,
    #[error("only PTY processes can be resized")]
    NotPty,
    #[error("PTY processes have no separate stdin to close")]
    IsPty,
    #[error("resize failed: {0}")]
    Io(String),
}

/// What the connect stream needs to know after `after`.
pub struct StreamView {
    pub replay: Replay,
    /// Set once the exit event is due: (newest seq at that moment, leader exit).
    pub exit: Option<(u64, LeaderExit)>,
}

/// `ProcessDetails.foreground`.
#[derive(Debug, Clone, Serialize)]
pub struct Foreground {
    pub pid: i32,
    pub cmd: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

/// `ProcessDetails.output`.
#[derive(Debug, Clone, Serialize)]
pub struct OutputWindow {
    pub oldest_seq: u64,
    pub newest_seq: u64,
    pub bytes: u64,
    /// Bytes ever written (this project's extension; see the spec).
    pub total_bytes: u64,
}

/// The wire shape of a process (E21–E24, E30).
#[derive(Debug, Clone, Serialize)]
pub struct ProcessDetails {
    pub process_id: String,
    pub kind: &'static str,
    pub cmd: String,
    pub args: Vec<String>,
    pub cwd: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub foreground: Option<Foreground>,
    pub pid: i32,
    pub state: &'static str,
    pub leader_exited: bool,
    pub tree_exited: bool,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    pub output: OutputWindow,
}

struct ProcState {
    phase: Phase,
    leader: Option<LeaderExit>,
    tree_exited: bool,
    finished_at: Option<String>,
    journal: Journal,
    /// Output readers that have neither hit EOF nor drained after the leader's exit.
    readers_open: usize,
    exit_seq: Option<u64>,
    input: Option<mpsc::UnboundedSender<InputOp>>,
    input_seq: u64,
    stdin_closed: bool,
}

/// What a process was asked to run.
#[derive(Debug, Clone)]
pub struct Launch {
    pub id: String,
    pub kind: Kind,
    pub cmd: String,
    pub args: Vec<String>,
    pub cwd: String,
    pub journal_bytes: usize,
}

/// A managed process and everything the routes need to drive it.
pub struct ManagedProcess {
    pub id: String,
    pub kind: Kind,
    cmd: String,
    args: Vec<String>,
    cwd: String,
    created_at: String,
    pid: i32,
    master: Option<Arc<FdIo>>,
    state: Mutex<ProcState>,
    tracker: Mutex<Option<TreeTracker>>,
    input_backlog: Arc<AtomicUsize>,
    /// Bumped on every observable change (output, exits, state).
    version: watch::Sender<u64>,
    /// Flips to true when the leader has exited (readers then drain and report).
    leader_done: watch::Sender<bool>,
    /// Cancelled when the sandbox goes away: stops the I/O tasks.
    pub(super) cancel: CancellationToken,
}

impl ManagedProcess {
    /// A record for a started child. `readers` is the number of output pumps that will run.
    pub(super) fn new_started(
        launch: Launch,
        pid: i32,
        master: Option<Arc<FdIo>>,
        readers: usize,
        input: mpsc::UnboundedSender<InputOp>,
    ) -> Arc<Self> {
        let start = tree::stat_of(pid).map(|s| s.start).unwrap_or(0);
        let tracker = TreeTracker::new(tree::ProcId { pid, start });
        Self::build(
            launch,
            pid,
            master,
            readers,
            Some(input),
            Phase::Running,
            None,
            Some(tracker),
        )
    }

    /// A record for a command that could not be started: `failed`, with the reason as
    /// stderr (or PTY) output and the conventional exit code.
    pub(super) fn new_failed(launch: Launch, reason: &std::io::Error) -> Arc<Self> {
        let code = super::spawn::spawn_failure_code(reason);
        let exit = LeaderExit {
            code: Some(code),
            signal: None,
        };
        let stream = if launch.kind == Kind::Pty {
            OutputStream::Pty
        } else {
            OutputStream::Stderr
        };
        let message = format!("failed to start {:?}: {reason}\n", launch.cmd);
        let proc = Self::build(launch, 0, None, 0, None, Phase::Failed, Some(exit), None);
        {
            let mut st = proc.lock();
            st.journal.push(stream, message.as_bytes());
            st.tree_exited = true;
            st.finished_at = Some(proc.created_at.clone());
            st.exit_seq = Some(st.journal.newest_seq());
        }
        let _ = proc.leader_done.send_replace(true);
        proc
    }

    #[allow(clippy::too_many_arguments)]
    fn build(
        launch: Launch,
        pid: i32,
        master: Option<Arc<FdIo>>,
        readers: usize,
        input: Option<mpsc::UnboundedSender<InputOp>>,
        phase: Phase,
        leader: Option<LeaderExit>,
        tracker: Option<TreeTracker>,
    ) -> Arc<Self> {
        Arc::new(ManagedProcess {
            id: launch.id,
            kind: launch.kind,
            cmd: launch.cmd,
            args: launch.args,
            cwd: launch.cwd,
            created_at: crate::clock::now_rfc3339(),
            pid,
            master,
            state: Mutex::new(ProcState {
                phase,
                leader,
                tree_exited: false,
                finished_at: None,
                journal: Journal::new(launch.journal_bytes),
                readers_open: readers,
                exit_seq: None,
                input,
                input_seq: 0,
                stdin_closed: false,
            }),
            tracker: Mutex::new(tracker),
            input_backlog: Arc::new(AtomicUsize::new(0)),
            version: watch::channel(0).0,
            leader_done: watch::channel(false).0,
            cancel: CancellationToken::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, ProcState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self) {
        self.version.send_modify(|v| *v = v.wrapping_add(1));
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    pub(super) fn input_backlog(&self) -> Arc<AtomicUsize> {
        self.input_backlog.clone()
    }

    /// Receives a new value on every change of this process.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    pub(super) fn leader_done(&self) -> watch::Receiver<bool> {
        self.leader_done.subscribe()
    }

    pub fn leader_exited(&self) -> bool {
        self.lock().leader.is_some()
    }

    pub fn tree_exited(&self) -> bool {
        self.lock().tree_exited
    }

    /// Largest read an output pump should do.
    pub(super) fn max_chunk(&self) -> usize {
        self.lock().journal.max_chunk()
    }

    /// Appends output to the journal.
    pub(super) fn push_output(&self, stream: OutputStream, data: &[u8]) {
        self.lock().journal.push(stream, data);
        self.bump();
    }

    /// An output pump reached EOF, or drained after the leader exited.
    pub(super) fn reader_finished(&self) {
        let mut st = self.lock();
        st.readers_open = st.readers_open.saturating_sub(1);
        Self::maybe_declare_exit(&mut st);
        drop(st);
        self.bump();
    }

    fn maybe_declare_exit(st: &mut ProcState) {
        if st.exit_seq.is_none() && st.leader.is_some() && st.readers_open == 0 {
            st.exit_seq = Some(st.journal.newest_seq());
        }
    }

    /// Records the leader's exit; `tree_empty` says no other member is alive.
    pub(super) fn on_leader_exit(&self, exit: LeaderExit, tree_empty: bool) {
        let mut st = self.lock();
        st.leader = Some(exit);
        if tree_empty {
            Self::finish_tree(&mut st);
        }
        Self::maybe_declare_exit(&mut st);
        drop(st);
        let _ = self.leader_done.send_replace(true);
        self.bump();
    }

    fn finish_tree(st: &mut ProcState) {
        if st.tree_exited {
            return;
        }
        st.tree_exited = true;
        if st.phase != Phase::Failed {
            st.phase = Phase::Exited;
        }
        st.finished_at = Some(crate::clock::now_rfc3339());
    }

    /// Updates tree membership from a snapshot (the table's scanner).
    pub(super) fn track(&self, snap: &tree::Snapshot) {
        let members = match self
            .tracker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            Some(t) => t.members(snap),
            None => return,
        };
        self.settle_tree(members.is_empty());
    }

    /// Re-checks membership without a shared snapshot (no `/proc`).
    pub(super) fn refresh_tree(&self) {
        let empty = self.live_members().is_empty();
        self.settle_tree(empty);
    }

    /// Live members right now (reads `/proc`).
    pub(super) fn live_members(&self) -> Vec<i32> {
        self.tracker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .map(TreeTracker::live_members)
            .unwrap_or_default()
    }

    fn settle_tree(&self, empty: bool) {
        let mut st = self.lock();
        if empty && st.leader.is_some() && !st.tree_exited {
            Self::finish_tree(&mut st);
            drop(st);
            self.bump();
        }
    }

    /// Snapshot of the record in its wire shape.
    pub fn details(&self) -> ProcessDetails {
        let (phase, leader, tree_exited, finished_at, window) = {
            let st = self.lock();
            (
                st.phase,
                st.leader.clone(),
                st.tree_exited,
                st.finished_at.clone(),
                st.journal.window(),
            )
        };
        let foreground = if tree_exited { None } else { self.foreground() };
        let Window {
            oldest_seq,
            newest_seq,
            bytes,
            total_bytes,
        } = window;
        ProcessDetails {
            process_id: self.id.clone(),
            kind: self.kind.as_str(),
            cmd: self.cmd.clone(),
            args: self.args.clone(),
            cwd: self.cwd.clone(),
            foreground,
            pid: self.pid,
            state: phase.as_str(),
            leader_exited: leader.is_some(),
            tree_exited,
            created_at: self.created_at.clone(),
            finished_at,
            exit_code: leader.as_ref().and_then(|l| l.code),
            signal: leader.and_then(|l| l.signal),
            output: OutputWindow {
                oldest_seq,
                newest_seq,
                bytes,
                total_bytes,
            },
        }
    }

    /// The PTY's foreground job.
    fn foreground(&self) -> Option<Foreground> {
        let master = self.master.as_ref()?;
        let pgid = pty::foreground_group(master.raw())?;
        let pid = tree::group_representative(pgid)?;
        let (cmd, args) = tree::command_line(pid)?;
        Some(Foreground { pid, cmd, args })
    }

    /// Output after `after` plus whether the exit event is due.
    pub fn stream_view(&self, after: u64, limit_bytes: usize) -> StreamView {
        let st = self.lock();
        StreamView {
            replay: st.journal.after(after, limit_bytes),
            exit: st.exit_seq.zip(st.leader.clone()),
        }
    }

    /// Queues input (ordered); returns its input sequence number.
    pub fn write_input(&self, data: Bytes) -> Result<u64, ControlError> {
        let mut st = self.lock();
        if st.stdin_closed {
            return Err(ControlError::StdinClosed);
        }
        if st.tree_exited {
            return Err(ControlError::NotRunning);
        }
        let Some(tx) = st.input.clone() else {
            return Err(ControlError::NotRunning);
        };
        let len = data.len();
        if self.input_backlog.load(Ordering::SeqCst) + len > MAX_INPUT_BACKLOG {
            return Err(ControlError::Backlog);
        }
        self.input_backlog.fetch_add(len, Ordering::SeqCst);
        if tx.send(InputOp::Data(data)).is_err() {
            self.input_backlog.fetch_sub(len, Ordering::SeqCst);
            return Err(ControlError::NotRunning);
        }
        st.input_seq += 1;
        Ok(st.input_seq)
    }

    /// Closes stdin of a pipe process once the queued input was written.
    pub fn close_stdin(&self) -> Result<(), ControlError> {
        if self.kind == Kind::Pty {
            return Err(ControlError::IsPty);
        }
        let mut st = self.lock();
        if st.stdin_closed {
            return Ok(());
        }
        st.stdin_closed = true;
        if let Some(tx) = st.input.take() {
            let _ = tx.send(InputOp::Close);
        }
        Ok(())
    }

    /// Sets the PTY window size; the kernel signals SIGWINCH to the foreground group.
    pub fn resize(&self, rows: u16, cols: u16) -> Result<(), ControlError> {
        let master = self.master.as_ref().ok_or(ControlError::NotPty)?;
        if self.tree_exited() {
            return Err(ControlError::NotRunning);
        }
        pty::set_window_size(&master.raw(), rows, cols).map_err(|e| ControlError::Io(e.to_string()))
    }

    /// Delivers `sig` to the process group (PTY: the foreground group); once the leader's
    /// group is gone, to the remaining members of the tree.
    pub fn signal(&self, sig: Signal) -> Result<(), ControlError> {
        if self.tree_exited() {
            return Err(ControlError::NotRunning);
        }
        let target = self
            .master
            .as_ref()
            .and_then(|m| pty::foreground_group(m.raw()))
            .unwrap_or(self.pid);
        if nix::sys::signal::killpg(nix::unistd::Pid::from_raw(target), sig).is_ok() {
            return Ok(());
        }
        let members = self.live_members();
        if members.is_empty() {
            return Err(ControlError::NotRunning);
        }
        tree::signal_tree(0, &members, sig);
        Ok(())
    }

    /// Stops the whole tree: SIGTERM, then SIGKILL after `grace`; returns final details.
    pub async fn stop(self: &Arc<Self>, grace: Duration) -> ProcessDetails {
        if self.pid <= 0 || self.tree_exited() {
            return self.details();
        }
        {
            let mut st = self.lock();
            if st.phase == Phase::Running {
                st.phase = Phase::Terminating;
            }
        }
        self.bump();
        let members = self.live_members();
        tree::signal_tree(self.pid, &members, Signal::SIGTERM);
        if !self.settle_within(grace).await {
            // Re-read membership every round: the tree may still be forking.
            for _ in 0..200 {
                let members = self.live_members();
                tree::signal_tree(self.pid, &members, Signal::SIGKILL);
                if self.settle_within(Duration::from_millis(50)).await {
                    break;
                }
            }
        }
        self.details()
    }

    /// Polls the tree until it is gone or `budget` elapses; true when gone.
    async fn settle_within(self: &Arc<Self>, budget: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + budget;
        let mut changes = self.subscribe();
        loop {
            if self.tree_exited() {
                return true;
            }
            let this = self.clone();
            let empty = tokio::task::spawn_blocking(move || this.live_members().is_empty())
                .await
                .unwrap_or(false);
            self.settle_tree(empty);
            if self.tree_exited() {
                return true;
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return false;
            }
            let step = (deadline - now).min(Duration::from_millis(20));
            let _ = tokio::time::timeout(step, changes.changed()).await;
        }
    }

    /// Kills the whole tree at once and stops the I/O tasks (sandbox destroyed).
    pub fn kill_now(&self) {
        if self.pid > 0 && !self.tree_exited() {
            let members = self.live_members();
            tree::signal_tree(self.pid, &members, Signal::SIGKILL);
        }
        self.cancel.cancel();
    }

    /// Waits for the leader (`tree == false`) or the whole tree; `None` on timeout.
    pub async fn wait(&self, tree: bool, timeout: Duration) -> Option<ProcessDetails> {
        let mut changes = self.subscribe();
        let done = |p: &Self| {
            if tree {
                p.tree_exited()
            } else {
                p.leader_exited()
            }
        };
        let waited = tokio::time::timeout(timeout, async {
            loop {
                if done(self) {
                    return;
                }
                if changes.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        (waited.is_ok() && done(self)).then(|| self.details())
    }
}
