//! Why a job failed and what became of its sandbox.

use std::fmt;
use std::time::Duration;

use super::create::{CreateFailed, Reclaim};
use super::run::JobResult;

/// Why a job's sandbox was kept instead of destroyed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeepReason {
    /// The command failed and `keep_on_fail` was set.
    KeepOnFail,
    /// An error after the command may have started: its effects are unknown.
    UncertainExecution,
    /// The command succeeded but its artifact could not be retrieved.
    ArtifactFailed,
}

impl KeepReason {
    /// Short human text.
    pub fn describe(self) -> &'static str {
        match self {
            KeepReason::KeepOnFail => "the command failed and keep_on_fail is set",
            KeepReason::UncertainExecution => "the command may have run: its outcome is unknown",
            KeepReason::ArtifactFailed => "the artifact could not be retrieved",
        }
    }
}

/// What became of a job's sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Destroyed.
    Destroyed(String),
    /// Kept on purpose (id, why).
    Kept(String, KeepReason),
    /// Meant to be destroyed, but the destroy failed (id, the error).
    StillAllocated(String, String),
}

impl Fate {
    /// The sandbox id.
    pub fn sandbox(&self) -> &str {
        match self {
            Fate::Destroyed(id) | Fate::Kept(id, _) | Fate::StillAllocated(id, _) => id,
        }
    }

    /// Whether the sandbox still exists.
    pub fn is_allocated(&self) -> bool {
        !matches!(self, Fate::Destroyed(_))
    }
}

impl fmt::Display for Fate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fate::Destroyed(id) => write!(f, "sandbox {id} was destroyed"),
            Fate::Kept(id, why) => write!(
                f,
                "sandbox {id} is retained for recovery ({}); inspect it with `cos exec {id} -- …` and remove it with `cos rm --yes {id}`",
                why.describe()
            ),
            Fate::StillAllocated(id, err) => {
                write!(f, "cleanup failed; sandbox {id} is still allocated ({err}); remove it with `cos rm --yes {id}`")
            }
        }
    }
}

/// Whether a job's command was started as a managed process when the job failed.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "process_id")]
pub enum CommandStart {
    /// Not started: the job failed or was stopped before its command.
    NotStarted,
    /// The start may have reached the sandbox: the start and the following of its output are
    /// one call, and it failed or was stopped. Its process tree, if any, was asked to stop;
    /// the sandbox's fate says whether anything of it can remain.
    Uncertain,
    /// The process (id) ran to its end before the job failed.
    Finished(String),
}

/// What a failed job had created on the control plane; from [`JobError::created`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Created {
    /// Nothing: the job was refused before any create request, the create was refused, or
    /// the job was cancelled before a sandbox came of its create.
    Nothing,
    /// The create's answer was lost, so the server may have made a sandbox: the name was
    /// looked up and what was found destroyed, or named as possibly left.
    LostCreate(Reclaim),
    /// The job sandbox existed.
    Sandbox {
        /// What became of it.
        fate: Fate,
        /// Whether its command had been started.
        command: CommandStart,
    },
    /// Sandboxes of a cancelled fanout.
    Sandboxes {
        /// Created and destroyed.
        destroyed: Vec<String>,
        /// Still allocated (kept for a retention reason, or whose destroy failed).
        allocated: Vec<Fate>,
    },
}

impl Created {
    /// Whether nothing was created.
    pub fn is_nothing(&self) -> bool {
        matches!(self, Created::Nothing)
    }
}

/// Why a job failed. Every variant after [`JobError::Create`] says what became of the
/// sandbox; [`JobError::created`] tells all of them apart.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// Refused before anything was created (no request that creates was sent). Only the
    /// checks before the create build it: no conversion turns a later error into this one.
    #[error(transparent)]
    Invalid(crate::Error),
    /// The sandbox could not be created: nothing is left allocated unless the answer was lost
    /// and [`CreateFailed::reclaim`] says otherwise (it names the sandbox).
    #[error("creating the job sandbox failed: {0}")]
    Create(CreateFailed),
    /// A step failed after the sandbox existed.
    #[error("{step} failed: {source}; {fate}")]
    Failed {
        /// What was being done.
        step: String,
        /// The error.
        source: crate::Error,
        /// What became of the sandbox.
        fate: Fate,
        /// Whether the command had been started.
        command: CommandStart,
    },
    /// The image lacks the program a language needs.
    #[error("the image of sandbox {} has no `{program}`, which {language} code needs: pick a rootfs that provides it; {fate}", fate.sandbox())]
    MissingRuntime {
        /// The language asked for.
        language: &'static str,
        /// The missing program.
        program: &'static str,
        /// What became of the sandbox.
        fate: Fate,
    },
    /// The command passed its deadline; the remote process tree was stopped (the start itself
    /// may not have been answered yet: [`CommandStart::Uncertain`]).
    #[error("the command timed out after {after:?} and was stopped; {fate}")]
    TimedOut {
        /// The deadline.
        after: Duration,
        /// What became of the sandbox.
        fate: Fate,
    },
    /// Cancelled through the token; the remote work was stopped.
    #[error("cancelled{}", .fate.as_ref().map(|f| format!("; {f}")).unwrap_or_default())]
    Cancelled {
        /// What became of the sandbox, when one had been created.
        fate: Option<Fate>,
        /// Whether the command had been started.
        command: CommandStart,
    },
    /// A fanout was cancelled: dispatch stopped and running commands were stopped.
    #[error("fanout cancelled after {finished} of {total} command(s) finished{}", kept_note(.allocated))]
    FanoutCancelled {
        /// Commands that had finished.
        finished: usize,
        /// Commands in the request.
        total: usize,
        /// Sandboxes that were created and destroyed.
        destroyed: Vec<String>,
        /// Sandboxes still allocated (kept for a retention reason, or whose destroy failed).
        allocated: Vec<Fate>,
    },
    /// The job finished but destroying its sandbox failed.
    #[error("the command finished (exit {}) but {fate}", code_text(result.code))]
    Cleanup {
        /// The finished job.
        result: Box<JobResult>,
        /// [`Fate::StillAllocated`].
        fate: Fate,
    },
}

fn kept_note(allocated: &[Fate]) -> String {
    if allocated.is_empty() {
        "; no sandbox is left".into()
    } else {
        let list: Vec<String> = allocated.iter().map(Fate::to_string).collect();
        format!("; {}", list.join("; "))
    }
}

fn code_text(code: Option<i32>) -> String {
    code.map(|c| c.to_string())
        .unwrap_or_else(|| "by signal".into())
}

impl JobError {
    /// What became of the sandbox, if one was created.
    pub fn fate(&self) -> Option<&Fate> {
        match self {
            JobError::Invalid(_) | JobError::Create(_) | JobError::FanoutCancelled { .. } => None,
            JobError::Failed { fate, .. }
            | JobError::MissingRuntime { fate, .. }
            | JobError::TimedOut { fate, .. }
            | JobError::Cleanup { fate, .. } => Some(fate),
            JobError::Cancelled { fate, .. } => fate.as_ref(),
        }
    }

    /// What the job had created, and what became of it: every error after a create says so.
    pub fn created(&self) -> Created {
        let sandbox = |fate: &Fate, command: CommandStart| Created::Sandbox {
            fate: fate.clone(),
            command,
        };
        match self {
            JobError::Invalid(_) => Created::Nothing,
            JobError::Create(failed) => failed
                .reclaim
                .clone()
                .map_or(Created::Nothing, Created::LostCreate),
            JobError::Failed { fate, command, .. } => sandbox(fate, command.clone()),
            JobError::MissingRuntime { fate, .. } => sandbox(fate, CommandStart::NotStarted),
            JobError::TimedOut { fate, .. } => sandbox(fate, CommandStart::Uncertain),
            JobError::Cancelled { fate: None, .. } => Created::Nothing,
            JobError::Cancelled {
                fate: Some(fate),
                command,
            } => sandbox(fate, command.clone()),
            JobError::FanoutCancelled {
                destroyed,
                allocated,
                ..
            } => {
                if destroyed.is_empty() && allocated.is_empty() {
                    Created::Nothing
                } else {
                    let (destroyed, allocated) = (destroyed.clone(), allocated.clone());
                    Created::Sandboxes {
                        destroyed,
                        allocated,
                    }
                }
            }
            JobError::Cleanup { fate, result } => {
                sandbox(fate, CommandStart::Finished(result.process_id.clone()))
            }
        }
    }

    /// Whether the job was cancelled.
    pub fn is_cancelled(&self) -> bool {
        matches!(
            self,
            JobError::Cancelled { .. } | JobError::FanoutCancelled { .. }
        )
    }
}
