//! Settings shared by every job and the progress events a job reports.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::CreateSandbox;

/// Where a job's files live in the guest.
pub const WORK_DIR: &str = "/work";

/// Longest command deadline a job accepts (1 h).
pub const MAX_JOB_TIMEOUT: Duration = Duration::from_secs(3600);

/// Bytes kept of stdout and, separately, of stderr by default (1 MiB each).
const DEFAULT_OUTPUT_BYTES: usize = 1 << 20;

/// How long a new sandbox may take to become ready and prepared.
const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(180);

/// The sandbox a job creates and the limits it runs under.
#[derive(Clone, Debug)]
pub struct JobOptions {
    /// Shape of the job sandbox.
    pub shape: String,
    /// Base image; `None` = the server default.
    pub rootfs: Option<String>,
    /// Private network the sandbox joins.
    pub network: Option<String>,
    /// Idle auto-pause (a backstop should a kept sandbox be forgotten).
    pub auto_pause_secs: Option<u32>,
    /// Deadline of the command; `None` = none (cancellation still stops it).
    pub timeout: Option<Duration>,
    /// Bytes kept of stdout and of stderr each; the rest is dropped and `truncated` set.
    pub max_output_bytes: usize,
    /// Keep the sandbox when the command fails (nonzero exit, signal or timeout).
    pub keep_on_fail: bool,
    /// Limit on creating and preparing the sandbox (readiness, `/work`, upload).
    pub setup_timeout: Duration,
}

impl Default for JobOptions {
    fn default() -> Self {
        JobOptions {
            shape: "s-2vcpu-2gb".into(),
            rootfs: None,
            network: None,
            auto_pause_secs: Some(30 * 60),
            timeout: Some(Duration::from_secs(120)),
            max_output_bytes: DEFAULT_OUTPUT_BYTES,
            keep_on_fail: false,
            setup_timeout: DEFAULT_SETUP_TIMEOUT,
        }
    }
}

impl JobOptions {
    /// Check the options and build the create request (nothing is sent).
    pub(crate) fn create_request(&self) -> Result<CreateSandbox> {
        if let Some(limit) = self.timeout {
            if limit > MAX_JOB_TIMEOUT {
                return Err(Error::invalid(
                    "timeout",
                    format!("{limit:?} exceeds the maximum of 1 h"),
                ));
            }
        }
        if self.max_output_bytes == 0 {
            return Err(Error::invalid(
                "max_output_bytes",
                "must be greater than zero",
            ));
        }
        if self.shape.trim().is_empty() {
            return Err(Error::invalid("shape", "must not be empty"));
        }
        let name = format!("cos-job-{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
        let mut request = CreateSandbox::new(&self.shape).name(name);
        if let Some(rootfs) = &self.rootfs {
            request = request.rootfs(rootfs);
        }
        if let Some(network) = &self.network {
            request = request.network(network);
        }
        if let Some(secs) = self.auto_pause_secs {
            request = request.auto_pause_after(secs);
        }
        request.validate()?;
        Ok(request)
    }

    /// The command deadline with zero meaning none.
    pub(crate) fn deadline(&self) -> Option<Duration> {
        self.timeout.filter(|d| !d.is_zero())
    }
}

/// What a job is doing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobStage {
    /// Creating its sandbox.
    Creating,
    /// The sandbox exists (id) and is being prepared.
    Created(String),
    /// The project was uploaded: files and archive bytes.
    Uploaded {
        /// Files and symlinks archived.
        files: u64,
        /// Archive bytes sent.
        bytes: u64,
    },
    /// The command is running.
    Running,
    /// The command ended with this exit code (`None`: a signal).
    Exited(Option<i32>),
    /// The artifact is being retrieved.
    Fetching,
    /// The sandbox was destroyed.
    Destroyed(String),
    /// The sandbox was kept (id, why).
    Kept(String, String),
}

impl std::fmt::Display for JobStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobStage::Creating => write!(f, "creating a sandbox…"),
            JobStage::Created(id) => write!(f, "created sandbox {id}"),
            JobStage::Uploaded { files, bytes } => {
                write!(f, "uploaded {files} files ({bytes} bytes) to {WORK_DIR}")
            }
            JobStage::Running => write!(f, "running…"),
            JobStage::Exited(Some(code)) => write!(f, "exited {code}"),
            JobStage::Exited(None) => write!(f, "ended by a signal"),
            JobStage::Fetching => write!(f, "retrieving the artifact…"),
            JobStage::Destroyed(id) => write!(f, "destroyed sandbox {id}"),
            JobStage::Kept(id, why) => write!(
                f,
                "kept sandbox {id}: {why} (remove it with `cos rm --yes {id}`)"
            ),
        }
    }
}

/// One progress report: which job (its index in a fanout, 0 otherwise) and what it does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobEvent {
    /// Index of the job (input order of a fanout; 0 for a single job).
    pub job: usize,
    /// What happened.
    pub stage: JobStage,
}

/// Receives progress events; called from the job's task, so keep it quick.
pub type JobProgress = Arc<dyn Fn(&JobEvent) + Send + Sync>;

pub(crate) fn report(progress: &Option<JobProgress>, job: usize, stage: JobStage) {
    if let Some(report) = progress {
        report(&JobEvent { job, stage });
    }
}
