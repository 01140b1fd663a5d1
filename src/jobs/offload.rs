//! `offload`: the project directory goes to `/work` of a fresh sandbox, a command runs there,
//! and an optional artifact comes back.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use super::artifact::ArtifactPath;
use super::error::JobError;
use super::options::{JobOptions, JobProgress};
use super::run::{run_job, JobPlan, JobResult};
use crate::error::Error;
use crate::snapshot::{Snapshot, SnapshotOptions};
use crate::Client;

/// What to offload.
#[derive(Clone, Debug)]
pub struct OffloadRequest {
    /// The host project directory uploaded to `/work`.
    pub dir: PathBuf,
    /// Shell command line run by `bash -lc` in `/work` (stdin at EOF).
    pub command: String,
    /// Artifact to bring back: a path relative to `/work` (or absolute under it), file or
    /// directory, written to the same relative path under `dir`.
    pub out: Option<String>,
    /// Extra snapshot excludes (see [`crate::snapshot`]).
    pub excludes: Vec<String>,
}

impl OffloadRequest {
    /// Run `command` on a copy of `dir`.
    pub fn new(dir: impl Into<PathBuf>, command: impl Into<String>) -> Self {
        OffloadRequest {
            dir: dir.into(),
            command: command.into(),
            out: None,
            excludes: Vec::new(),
        }
    }

    /// Bring `path` back afterwards.
    pub fn out(mut self, path: impl Into<String>) -> Self {
        self.out = Some(path.into());
        self
    }

    /// Leave out paths matching `pattern`.
    pub fn exclude(mut self, pattern: impl Into<String>) -> Self {
        self.excludes.push(pattern.into());
        self
    }
}

/// A shell command line must say something and carry no NUL.
pub(crate) fn check_command(field: &str, command: &str) -> Result<(), Error> {
    if command.trim().is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if command.contains('\0') {
        return Err(Error::invalid(field, "contains a NUL byte"));
    }
    Ok(())
}

/// The script run for a user command: stdin at EOF so a command that reads input cannot hang.
pub(crate) fn script(command: &str) -> String {
    format!("exec </dev/null\n{command}")
}

/// Scan the project (the snapshot refusals apply: `/`, the home directory, non-directories,
/// nothing to upload).
pub(crate) async fn scan(dir: &std::path::Path, excludes: &[String]) -> Result<Snapshot, Error> {
    let mut options = SnapshotOptions::new();
    for pattern in excludes {
        options = options.exclude(pattern.clone());
    }
    Snapshot::scan_async(dir.to_path_buf(), options).await
}

/// Everything checked before the sandbox is created: the project and the artifact's paths.
async fn check(
    request: &OffloadRequest,
    options: &JobOptions,
) -> Result<(Snapshot, Option<(ArtifactPath, PathBuf)>), Error> {
    check_command("command", &request.command)?;
    options.create_request()?;
    let artifact = request
        .out
        .as_deref()
        .map(ArtifactPath::parse)
        .transpose()?;
    let snapshot = scan(&request.dir, &request.excludes).await?;
    let artifact = match artifact {
        Some(path) => {
            let local = path.local(snapshot.root())?;
            Some((path, local))
        }
        None => None,
    };
    Ok((snapshot, artifact))
}

/// Run an offload job. Everything is checked before the sandbox is created; see the
/// [module docs](super) for what happens to the sandbox.
pub async fn offload(
    client: &Client,
    request: OffloadRequest,
    options: &JobOptions,
    cancel: &CancellationToken,
    progress: Option<JobProgress>,
) -> Result<JobResult, JobError> {
    let (snapshot, artifact) = check(&request, options).await.map_err(JobError::Invalid)?;
    let plan = JobPlan {
        job: 0,
        script: script(&request.command),
        command: request.command,
        upload: Some(snapshot),
        files: Vec::new(),
        needs: None,
        artifact,
    };
    run_job(client, plan, options, cancel, progress).await
}
