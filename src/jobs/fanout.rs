//! `fanout`: several commands, each an independent offload (own sandbox, own project copy),
//! a bounded number at a time, results in input order.

use std::path::PathBuf;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::error::{Fate, JobError, KeepReason};
use super::offload::{check_command, scan, script};
use super::options::{JobOptions, JobProgress};
use super::run::{run_job, JobPlan, JobResult};
use crate::error::Error;
use crate::Client;

/// Most commands one fanout takes.
pub const MAX_FANOUT_COMMANDS: usize = 25;
/// Most sandboxes a fanout runs at once.
pub const MAX_FANOUT_JOBS: usize = 10;
/// Sandboxes at once when not said.
pub const DEFAULT_FANOUT_JOBS: usize = 2;

/// What to fan out.
#[derive(Clone, Debug)]
pub struct FanoutRequest {
    /// The host project directory each sandbox gets a copy of in `/work`.
    pub dir: PathBuf,
    /// 1–25 shell command lines.
    pub commands: Vec<String>,
    /// How many run at once (1–10).
    pub jobs: usize,
    /// Extra snapshot excludes.
    pub excludes: Vec<String>,
}

impl FanoutRequest {
    /// Run each of `commands` on its own copy of `dir`, [`DEFAULT_FANOUT_JOBS`] at a time.
    pub fn new(
        dir: impl Into<PathBuf>,
        commands: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        FanoutRequest {
            dir: dir.into(),
            commands: commands.into_iter().map(Into::into).collect(),
            jobs: DEFAULT_FANOUT_JOBS,
            excludes: Vec::new(),
        }
    }

    /// Run `jobs` at once.
    pub fn jobs(mut self, jobs: usize) -> Self {
        self.jobs = jobs;
        self
    }

    /// Check the counts and every command (nothing is created).
    pub fn validate(&self) -> Result<(), Error> {
        if self.commands.is_empty() || self.commands.len() > MAX_FANOUT_COMMANDS {
            return Err(Error::invalid(
                "commands",
                format!(
                    "takes 1 to {MAX_FANOUT_COMMANDS} commands, got {}",
                    self.commands.len()
                ),
            ));
        }
        if self.jobs == 0 || self.jobs > MAX_FANOUT_JOBS {
            return Err(Error::invalid(
                "jobs",
                format!("must be 1 to {MAX_FANOUT_JOBS}, got {}", self.jobs),
            ));
        }
        for (i, command) in self.commands.iter().enumerate() {
            check_command(&format!("commands[{i}]"), command)?;
        }
        Ok(())
    }
}

/// One command's outcome.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FanoutEntry {
    /// Position in the request.
    pub index: usize,
    /// The command.
    pub command: String,
    /// Its sandbox, when one was created.
    pub sandbox_id: Option<String>,
    /// Exit code (`None`: no exit code — an error, or a signal).
    pub code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<String>,
    /// Standard output, bounded.
    pub stdout: String,
    /// Standard error, bounded.
    pub stderr: String,
    /// Output was cut off.
    pub truncated: bool,
    /// Its sandbox still exists.
    pub kept: bool,
    /// Why it was kept.
    pub kept_reason: Option<KeepReason>,
    /// The job failed before or around its command (the command's own nonzero exit is not an
    /// error: see `code`).
    pub error: Option<String>,
}

impl FanoutEntry {
    fn from_result(index: usize, r: JobResult) -> Self {
        FanoutEntry {
            index,
            command: r.command,
            sandbox_id: Some(r.sandbox_id),
            code: r.code,
            signal: r.signal,
            stdout: r.stdout,
            stderr: r.stderr,
            truncated: r.truncated,
            kept: r.kept,
            kept_reason: r.kept_reason,
            error: None,
        }
    }

    fn from_error(index: usize, command: String, err: &JobError) -> Self {
        let fate = err.fate();
        let (code, stdout, stderr, truncated) = match err {
            JobError::Cleanup { result, .. } => (
                result.code,
                result.stdout.clone(),
                result.stderr.clone(),
                result.truncated,
            ),
            _ => (None, String::new(), String::new(), false),
        };
        FanoutEntry {
            index,
            command,
            sandbox_id: fate.map(|f| f.sandbox().to_string()),
            code,
            signal: None,
            stdout,
            stderr,
            truncated,
            kept: fate.is_some_and(Fate::is_allocated),
            kept_reason: match fate {
                Some(Fate::Kept(_, why)) => Some(*why),
                _ => None,
            },
            error: Some(err.to_string()),
        }
    }

    /// The command ran and exited 0.
    pub fn success(&self) -> bool {
        self.error.is_none() && self.code == Some(0)
    }
}

/// Every command's outcome, in input order.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FanoutResult {
    /// One entry per command.
    pub results: Vec<FanoutEntry>,
    /// How many exited 0.
    pub succeeded: usize,
    /// How many did not.
    pub failed: usize,
}

/// Run every command of `request` in its own sandbox, at most `request.jobs` at a time.
///
/// A failing command does not stop the others. Cancelling `cancel` stops dispatch, stops the
/// running commands, destroys their sandboxes and answers [`JobError::FanoutCancelled`].
/// `progress` events carry each command's index.
pub async fn fanout(
    client: &Client,
    request: FanoutRequest,
    options: &JobOptions,
    cancel: &CancellationToken,
    progress: Option<JobProgress>,
) -> Result<FanoutResult, JobError> {
    request.validate().map_err(JobError::Invalid)?;
    options.create_request().map_err(JobError::Invalid)?;
    let snapshot = scan(&request.dir, &request.excludes)
        .await
        .map_err(JobError::Invalid)?;
    let total = request.commands.len();
    let runs = futures::stream::iter(request.commands.into_iter().enumerate())
        .map(|(index, command)| {
            let plan = JobPlan {
                job: index,
                script: script(&command),
                command: command.clone(),
                upload: Some(snapshot.clone()),
                files: Vec::new(),
                needs: None,
                artifact: None,
            };
            let progress = progress.clone();
            async move {
                (
                    index,
                    command,
                    run_job(client, plan, options, cancel, progress).await,
                )
            }
        })
        .buffer_unordered(request.jobs);
    let mut done: Vec<(usize, String, Result<JobResult, JobError>)> = runs.collect().await;
    done.sort_by_key(|(index, _, _)| *index);

    if cancel.is_cancelled() {
        let finished = done
            .iter()
            .filter(|(_, _, r)| !matches!(r, Err(e) if e.is_cancelled()))
            .count();
        let allocated = done
            .iter()
            .filter_map(|(_, _, r)| match r {
                Ok(result) if result.kept => {
                    Some(Fate::Kept(result.sandbox_id.clone(), result.kept_reason?))
                }
                Ok(_) => None,
                Err(e) => e.fate().filter(|f| f.is_allocated()).cloned(),
            })
            .collect();
        let destroyed = done
            .iter()
            .filter_map(|(_, _, r)| match r {
                Ok(result) if !result.kept => Some(result.sandbox_id.clone()),
                Ok(_) => None,
                Err(e) => e
                    .fate()
                    .filter(|f| !f.is_allocated())
                    .map(|f| f.sandbox().to_string()),
            })
            .collect();
        return Err(JobError::FanoutCancelled {
            finished,
            total,
            destroyed,
            allocated,
        });
    }
    let results: Vec<FanoutEntry> = done
        .into_iter()
        .map(|(index, command, r)| match r {
            Ok(result) => FanoutEntry::from_result(index, result),
            Err(err) => FanoutEntry::from_error(index, command, &err),
        })
        .collect();
    let succeeded = results.iter().filter(|e| e.success()).count();
    Ok(FanoutResult {
        failed: results.len() - succeeded,
        succeeded,
        results,
    })
}
