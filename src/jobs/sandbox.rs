//! The life of a job sandbox: creation that never loses an id, preparation, and the final
//! destroy-or-keep decision, with a destroy on drop as the last resort.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::create::{create_reclaimable, destroy_logged};
use super::error::{CommandStart, Fate, JobError, KeepReason};
use super::options::{report, JobOptions, JobProgress, JobStage, WORK_DIR};
use crate::api::exec::ExecRequest;
use crate::{Client, Sandbox};

/// Limit on one small preparation command.
const PREP_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// A sandbox created for one job. Destroyed by [`JobSandbox::finish`]; if the owning future is
/// dropped first, `Drop` spawns the destroy.
pub(crate) struct JobSandbox {
    sandbox: Sandbox,
    armed: bool,
    job: usize,
    progress: Option<JobProgress>,
}

impl JobSandbox {
    /// Create the sandbox through [`create_reclaimable`]: whatever happens to this future
    /// (cancellation, drop), an id the server hands back is destroyed rather than lost, and a
    /// lost answer is looked up by the request's name.
    pub(crate) async fn create(
        client: &Client,
        options: &JobOptions,
        cancel: &CancellationToken,
        job: usize,
        progress: Option<JobProgress>,
    ) -> Result<JobSandbox, JobError> {
        if cancel.is_cancelled() {
            return Err(JobError::Cancelled {
                fate: None,
                command: CommandStart::NotStarted,
            });
        }
        let request = options.create_request().map_err(JobError::Invalid)?;
        report(&progress, job, JobStage::Creating);
        let sandbox = match create_reclaimable(client, request, "cos-job").await {
            Ok(sandbox) => sandbox,
            // Cancelled meanwhile, and nothing is left: the create's failure is moot.
            Err(failed) if cancel.is_cancelled() && failed.left_nothing() => {
                return Err(JobError::Cancelled {
                    fate: None,
                    command: CommandStart::NotStarted,
                })
            }
            Err(failed) => return Err(JobError::Create(failed)),
        };
        tracing::info!(sandbox = %sandbox.id(), job, "created a job sandbox");
        report(&progress, job, JobStage::Created(sandbox.id().to_string()));
        let this = JobSandbox {
            sandbox,
            armed: true,
            job,
            progress,
        };
        if cancel.is_cancelled() {
            return Err(this.cancelled(CommandStart::NotStarted).await);
        }
        Ok(this)
    }

    pub(crate) fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    pub(crate) fn id(&self) -> &str {
        self.sandbox.id()
    }

    /// Wait until it runs and create the work directory.
    pub(crate) async fn prepare(&self, limit: Duration) -> crate::Result<()> {
        self.sandbox.wait_until_running(Some(limit)).await?;
        let request = ExecRequest::new("mkdir")
            .args(["-p", "--", WORK_DIR])
            .timeout(PREP_COMMAND_TIMEOUT);
        let out = self.sandbox.exec_with(request).await?;
        if !out.success() {
            return Err(crate::Error::io(
                format!("creating {WORK_DIR}"),
                std::io::Error::other(format!("exit {}: {}", out.exit_code, out.stderr.trim())),
            ));
        }
        Ok(())
    }

    /// Whether `program` is on the PATH of a login shell in the guest.
    pub(crate) async fn has_program(&self, program: &str) -> crate::Result<bool> {
        let request = ExecRequest::new("bash")
            .args(["-lc", "command -v -- \"$0\" >/dev/null 2>&1", program])
            .timeout(PREP_COMMAND_TIMEOUT);
        Ok(self.sandbox.exec_with(request).await?.success())
    }

    /// Keep it (`Some(reason)`) or destroy it. Never fails: a failed destroy is the
    /// [`Fate::StillAllocated`] answer.
    pub(crate) async fn finish(mut self, keep: Option<KeepReason>) -> Fate {
        let id = self.id().to_string();
        let fate = match keep {
            Some(reason) => {
                tracing::info!(sandbox = %id, reason = reason.describe(), "keeping the job sandbox");
                Fate::Kept(id.clone(), reason)
            }
            None => match self.sandbox.destroy().await {
                Ok(_) => Fate::Destroyed(id.clone()),
                Err(err) => {
                    tracing::error!(sandbox = %id, error = %err, "destroying the job sandbox failed; it is still allocated");
                    Fate::StillAllocated(id.clone(), err.to_string())
                }
            },
        };
        self.armed = false;
        let stage = match &fate {
            Fate::Destroyed(_) => JobStage::Destroyed(id),
            Fate::Kept(_, why) => JobStage::Kept(id, why.describe().to_string()),
            Fate::StillAllocated(_, err) => JobStage::Kept(id, format!("destroy failed: {err}")),
        };
        report(&self.progress, self.job, stage);
        fate
    }

    /// Destroy and answer the cancellation error (`command`: how far the command had got).
    pub(crate) async fn cancelled(self, command: CommandStart) -> JobError {
        JobError::Cancelled {
            fate: Some(self.finish(None).await),
            command,
        }
    }

    /// Destroy (or keep) and answer `step` failed with `source`.
    pub(crate) async fn failed(
        self,
        step: &str,
        source: crate::Error,
        keep: Option<KeepReason>,
        command: CommandStart,
    ) -> JobError {
        let fate = self.finish(keep).await;
        JobError::Failed {
            step: step.to_string(),
            source,
            fate,
            command,
        }
    }
}

impl Drop for JobSandbox {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let sandbox = self.sandbox.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move { destroy_logged(&sandbox, "its job was dropped").await });
            }
            Err(_) => {
                tracing::error!(sandbox = %self.sandbox.id(), "a job sandbox was dropped outside a runtime; it is still allocated")
            }
        }
    }
}
