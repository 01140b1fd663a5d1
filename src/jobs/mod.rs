//! One-shot jobs: each runs in a sandbox of its own that is destroyed afterwards unless a
//! retention rule applies (plugins.md §2.7, §11.4).
//!
//! - [`offload`]: the project directory (through the [`snapshot`](crate::snapshot) rules) is
//!   uploaded to `/work`, a shell command runs there, and an optional artifact comes back.
//! - [`fanout`]: 1–25 commands, each an independent offload with its own sandbox and project
//!   copy, at most `jobs` (1–10, default 2) at a time; results come back in input order.
//! - [`run_code`]: a snippet in one of the [`Language`]s, written to `/work/main.<ext>` and run.
//!
//! Everything is checked before the first sandbox is created. Retention: a sandbox is kept
//! when the command's fate is uncertain (an error after it may have started that is not a
//! cancellation), when it failed and `keep_on_fail` is set, or when the artifact could not be
//! retrieved; the result or error names it and says why. On every other path — success,
//! failure, timeout, cancellation through the token, and a dropped future — it is destroyed,
//! and a failed destroy is reported with the id.
//!
//! ```no_run
//! # async fn demo(client: createos_sandbox::Client) -> Result<(), createos_sandbox::jobs::JobError> {
//! use createos_sandbox::jobs::{self, JobOptions, OffloadRequest};
//! use tokio_util::sync::CancellationToken;
//! let request = OffloadRequest::new("./my-app", "make test && make dist").out("dist");
//! let result = jobs::offload(&client, request, &JobOptions::default(), &CancellationToken::new(), None).await?;
//! println!("exit {:?} in {} (kept: {})", result.code, result.sandbox_id, result.kept);
//! # Ok(()) }
//! ```

mod artifact;
mod create;
mod error;
mod fanout;
mod offload;
mod options;
mod run;
mod run_code;
mod sandbox;

pub use artifact::{Artifact, ArtifactKind, ArtifactPath};
pub use create::{create_reclaimable, CreateFailed, Reclaim};
pub use error::{CommandStart, Created, Fate, JobError, KeepReason};
pub use fanout::{
    fanout, FanoutEntry, FanoutRequest, FanoutResult, DEFAULT_FANOUT_JOBS, MAX_FANOUT_COMMANDS,
    MAX_FANOUT_JOBS,
};
pub use offload::{offload, OffloadRequest};
pub use options::{JobEvent, JobOptions, JobProgress, JobStage, MAX_JOB_TIMEOUT, WORK_DIR};
pub use run::JobResult;
pub use run_code::{run_code, Language, RunCodeRequest, MAX_CODE_BYTES};
