//! The one job runner behind offload, fanout and run_code: create → prepare → upload → run →
//! artifact → destroy or keep, with cancellation and the retention rules at every step.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::artifact::{self, Artifact, ArtifactPath};
use super::error::{CommandStart, Fate, JobError, KeepReason};
use super::options::{report, JobOptions, JobProgress, JobStage, WORK_DIR};
use super::sandbox::JobSandbox;
use crate::api::processes::{ProcessSpec, RunOptions};
use crate::snapshot::Snapshot;
use crate::transfer::{self, ApiRemote};
use crate::Client;

/// The outcome of a job whose command ran to its end.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobResult {
    /// The job sandbox (destroyed unless `kept`).
    pub sandbox_id: String,
    /// The command as given.
    pub command: String,
    /// The managed process that ran it.
    pub process_id: String,
    /// Exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<String>,
    /// Standard output (lossy UTF-8), bounded.
    pub stdout: String,
    /// Standard error (lossy UTF-8), bounded.
    pub stderr: String,
    /// Some output was cut off (the bound, or the server's journal evicted it).
    pub truncated: bool,
    /// The sandbox still exists.
    pub kept: bool,
    /// Why it was kept.
    pub kept_reason: Option<KeepReason>,
    /// What became of the sandbox, in words.
    pub sandbox: String,
    /// The retrieved artifact.
    pub artifact: Option<Artifact>,
}

impl JobResult {
    /// Exit code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// Everything one job does, checked by its caller.
pub(crate) struct JobPlan {
    /// Index for progress events and fanout results.
    pub job: usize,
    /// The command as the user gave it (reported back).
    pub command: String,
    /// The script `bash -lc` runs in `/work`.
    pub script: String,
    /// The project to upload into `/work`.
    pub upload: Option<Snapshot>,
    /// Files to write (guest path, content).
    pub files: Vec<(String, Vec<u8>)>,
    /// A program the image must have (language, program).
    pub needs: Option<(&'static str, &'static str)>,
    /// The artifact and its host destination.
    pub artifact: Option<(ArtifactPath, PathBuf)>,
}

enum SetupError {
    Step(&'static str, crate::Error),
    Missing(&'static str, &'static str),
}

/// Run `plan` in a sandbox of its own.
pub(crate) async fn run_job(
    client: &Client,
    plan: JobPlan,
    options: &JobOptions,
    cancel: &CancellationToken,
    progress: Option<JobProgress>,
) -> Result<JobResult, JobError> {
    let job = plan.job;
    let js = JobSandbox::create(client, options, cancel, job, progress.clone()).await?;

    // Setup: nothing has run yet, so every failure destroys.
    let setup = async {
        js.prepare(options.setup_timeout)
            .await
            .map_err(|e| SetupError::Step("preparing the sandbox", e))?;
        if let Some(snapshot) = &plan.upload {
            let remote = ApiRemote::new(js.sandbox().clone());
            let up = transfer::upload_snapshot(&remote, snapshot, WORK_DIR, None)
                .await
                .map_err(|e| SetupError::Step("uploading the project", e))?;
            report(
                &progress,
                job,
                JobStage::Uploaded {
                    files: up.files,
                    bytes: up.bytes,
                },
            );
        }
        for (path, content) in &plan.files {
            js.sandbox()
                .write(path, content.clone())
                .await
                .map_err(|e| SetupError::Step("writing the job files", e))?;
        }
        if let Some((language, program)) = plan.needs {
            let found = js
                .has_program(program)
                .await
                .map_err(|e| SetupError::Step("checking the language runtime", e))?;
            if !found {
                return Err(SetupError::Missing(language, program));
            }
        }
        Ok(())
    };
    let prepared = tokio::select! {
        r = setup => Some(r),
        _ = cancel.cancelled() => None,
    };
    match prepared {
        None => return Err(js.cancelled(CommandStart::NotStarted).await),
        Some(Ok(())) => {}
        Some(Err(SetupError::Step(step, err))) => {
            return Err(js.failed(step, err, None, CommandStart::NotStarted).await)
        }
        Some(Err(SetupError::Missing(language, program))) => {
            let fate = js.finish(None).await;
            return Err(JobError::MissingRuntime {
                language,
                program,
                fate,
            });
        }
    }

    // Run: the deadline cancels a child token, so a timeout and a cancellation are told apart
    // without guessing from the error.
    let deadline = options.deadline();
    let run_token = cancel.child_token();
    let timer = deadline.map(|limit| {
        let token = run_token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            token.cancel();
        })
    });
    let spec = ProcessSpec::shell(plan.script.clone()).cwd(WORK_DIR);
    let run_options = RunOptions::default()
        .max_output_bytes(options.max_output_bytes)
        .cancel(run_token.clone());
    report(&progress, job, JobStage::Running);
    let ran = js.sandbox().processes().run(spec, run_options).await;
    if let Some(timer) = timer {
        timer.abort();
    }
    let out = match ran {
        Ok(out) => out,
        Err(crate::Error::Cancelled) if cancel.is_cancelled() => {
            return Err(js.cancelled(CommandStart::Uncertain).await)
        }
        Err(crate::Error::Cancelled) => {
            let keep = options.keep_on_fail.then_some(KeepReason::KeepOnFail);
            let fate = js.finish(keep).await;
            return Err(JobError::TimedOut {
                after: deadline.unwrap_or(Duration::ZERO),
                fate,
            });
        }
        Err(err) if refused_before_start(&err) => {
            return Err(js
                .failed("starting the command", err, None, CommandStart::NotStarted)
                .await)
        }
        Err(err) => {
            let keep = Some(KeepReason::UncertainExecution);
            return Err(js
                .failed("running the command", err, keep, CommandStart::Uncertain)
                .await);
        }
    };
    report(&progress, job, JobStage::Exited(out.exit_code));

    let mut result = JobResult {
        sandbox_id: js.id().to_string(),
        command: plan.command,
        process_id: out.process_id.clone(),
        code: out.exit_code,
        signal: out.signal.clone(),
        stdout: out.stdout_lossy(),
        stderr: out.stderr_lossy(),
        truncated: out.truncated,
        kept: false,
        kept_reason: None,
        sandbox: String::new(),
        artifact: None,
    };

    if let (Some((path, local)), true) = (&plan.artifact, out.success()) {
        report(&progress, job, JobStage::Fetching);
        let remote = ApiRemote::new(js.sandbox().clone());
        let fetched = tokio::select! {
            r = artifact::fetch(&remote, path, local) => Some(r),
            _ = cancel.cancelled() => None,
        };
        match fetched {
            None => {
                return Err(js
                    .cancelled(CommandStart::Finished(out.process_id.clone()))
                    .await)
            }
            Some(Ok(artifact)) => result.artifact = Some(artifact),
            Some(Err(err)) => {
                let ran = CommandStart::Finished(out.process_id.clone());
                let keep = Some(KeepReason::ArtifactFailed);
                return Err(js.failed("retrieving the artifact", err, keep, ran).await);
            }
        }
    }

    let keep = (!out.success() && options.keep_on_fail).then_some(KeepReason::KeepOnFail);
    let fate = js.finish(keep).await;
    result.sandbox = fate.to_string();
    match fate {
        Fate::StillAllocated(..) => Err(JobError::Cleanup {
            result: Box::new(result),
            fate,
        }),
        Fate::Kept(_, reason) => {
            result.kept = true;
            result.kept_reason = Some(reason);
            Ok(result)
        }
        Fate::Destroyed(_) => Ok(result),
    }
}

/// The run was refused on our side before any request: nothing started, nothing is uncertain.
/// Any other error may have come after the process started (the start and the following of
/// its output are one call), so it counts as uncertain.
fn refused_before_start(err: &crate::Error) -> bool {
    matches!(err, crate::Error::InvalidInput { .. })
}
