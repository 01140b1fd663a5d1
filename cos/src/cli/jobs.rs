//! `cos offload`, `cos fanout`, `cos run-code`: one-shot jobs in throwaway sandboxes (the same
//! jobs as the agent tools). Ctrl-C or SIGTERM cancels: the remote command is stopped and the
//! sandboxes are destroyed before `cos` exits with 130.

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::Args;
use tokio_util::sync::CancellationToken;

use createos_sandbox::jobs::{
    self, CreateFailed, FanoutRequest, FanoutResult, JobError, JobEvent, JobOptions, JobProgress,
    JobResult, JobStage, Language, OffloadRequest, RunCodeRequest,
};

use crate::signals::StopSignals;
use crate::tools::confine::{self, Expect};

use super::sandbox::DEFAULT_SHAPE;
use super::Ctx;

/// The throwaway sandbox and the limits of a job.
#[derive(Debug, Args, Clone)]
pub struct JobArgs {
    /// Shape of the job sandbox (`cos shapes`).
    #[arg(long, env = "CREATEOS_SHAPE", default_value = DEFAULT_SHAPE)]
    shape: String,
    /// Base image of the job sandbox (`cos images`; default: the server's).
    #[arg(long, alias = "image", env = "CREATEOS_ROOTFS")]
    rootfs: Option<String>,
    /// Network the job sandbox joins.
    #[arg(long)]
    network: Option<String>,
    /// Stop the command after this many seconds (default: no limit; Ctrl-C always works).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    timeout: Option<u64>,
    /// Keep the sandbox when the command fails, to inspect it (its id is printed).
    #[arg(long)]
    keep_on_fail: bool,
}

impl JobArgs {
    fn options(&self) -> JobOptions {
        JobOptions {
            shape: self.shape.clone(),
            rootfs: self.rootfs.clone(),
            network: self.network.clone(),
            timeout: self.timeout.map(Duration::from_secs),
            keep_on_fail: self.keep_on_fail,
            max_output_bytes: 16 << 20,
            ..JobOptions::default()
        }
    }
}

/// `cos offload`.
#[derive(Debug, Args)]
pub struct OffloadArgs {
    /// Project directory uploaded to /work (through the snapshot filters).
    #[arg(long, short = 'C', default_value = ".")]
    dir: PathBuf,
    /// Bring this file or directory (relative to /work) back into the same place under --dir
    /// when the command succeeds.
    #[arg(long, value_name = "PATH")]
    out: Option<String>,
    /// Leave out paths matching this pattern (repeatable; see `cos snapshot --explain`).
    #[arg(long = "exclude", value_name = "PATTERN")]
    excludes: Vec<String>,
    #[command(flatten)]
    job: JobArgs,
    /// The command, run by `bash -lc` in /work (words are joined with spaces).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<String>,
}

/// `cos fanout`.
#[derive(Debug, Args)]
pub struct FanoutArgs {
    /// Project directory each sandbox gets a copy of in /work.
    #[arg(long, short = 'C', default_value = ".")]
    dir: PathBuf,
    /// Sandboxes at once (1-10).
    #[arg(long, short = 'j', default_value_t = jobs::DEFAULT_FANOUT_JOBS)]
    jobs: usize,
    /// Leave out paths matching this pattern (repeatable).
    #[arg(long = "exclude", value_name = "PATTERN")]
    excludes: Vec<String>,
    #[command(flatten)]
    job: JobArgs,
    /// 1-25 commands, one shell command line each (quote them).
    #[arg(required = true, value_name = "COMMAND")]
    commands: Vec<String>,
}

/// `cos run-code`.
#[derive(Debug, Args)]
pub struct RunCodeArgs {
    /// Language: py, js, mjs, cjs, ts, sh, go, rb, c, cpp, rs (default: from the file's extension).
    #[arg(long, short = 'l')]
    lang: Option<String>,
    /// The code inline instead of a file.
    #[arg(long, short = 'e', conflicts_with = "file")]
    code: Option<String>,
    /// Feed this file to the program's stdin (`-` for ours).
    #[arg(long, value_name = "FILE")]
    stdin: Option<PathBuf>,
    #[command(flatten)]
    job: JobArgs,
    /// Source file (`-` reads the code from our stdin).
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

/// Cancelled on Ctrl-C or SIGTERM. The handlers are installed before this returns, so a
/// signal arriving later never kills the process before cleanup.
pub(super) fn cancel_on_signal() -> Result<CancellationToken> {
    let signals =
        StopSignals::install(false).context("installing the Ctrl-C and SIGTERM handlers")?;
    Ok(signals.cancel_token(|| eprintln!("interrupted: stopping and destroying the sandbox…")))
}

/// Progress lines on stderr (`[i]` prefixes for a fanout).
fn notes(ctx: &Ctx, fanout: bool) -> Option<JobProgress> {
    if ctx.out.explicit_json {
        return None;
    }
    Some(Arc::new(move |event: &JobEvent| {
        let prefix = if fanout {
            format!("[{}] ", event.job)
        } else {
            String::new()
        };
        if event.stage == JobStage::Creating {
            return;
        }
        let line = &event.stage;
        eprintln!("{prefix}{line}");
    }))
}

/// The exit status for a job error: 130 after a cancellation, 1 otherwise.
fn failure(err: JobError) -> Result<ExitCode> {
    if err.is_cancelled() {
        eprintln!("{err}");
        return Ok(ExitCode::from(130));
    }
    match err {
        // plain library errors keep their JSON error codes (bad_request, not_found, …)
        JobError::Invalid(e) => Err(e.into()),
        JobError::Create(failed) => Err(create_error(failed, "creating the job sandbox")),
        other => Err(anyhow::Error::new(other)),
    }
}

/// A failed create as an error that keeps the library error's JSON code, with what became of
/// a lost answer in its context.
pub(super) fn create_error(failed: CreateFailed, what: &str) -> anyhow::Error {
    let context = match &failed.reclaim {
        Some(reclaim) => format!("{what} (its answer was lost; {reclaim})"),
        None => what.to_string(),
    };
    anyhow::Error::new(failed.error).context(context)
}

fn exit_status(code: Option<i32>) -> ExitCode {
    match code {
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(if c < 0 { 128 } else { 255 })),
        None => ExitCode::from(128),
    }
}

/// Print one job's result: JSON, or its output passed through with the artifact noted.
fn show_result(ctx: &Ctx, result: &JobResult) -> Result<()> {
    if ctx.out.explicit_json {
        ctx.out.value(result);
        return Ok(());
    }
    std::io::stdout().write_all(result.stdout.as_bytes())?;
    std::io::stdout().flush()?;
    std::io::stderr().write_all(result.stderr.as_bytes())?;
    if result.truncated {
        eprintln!("(output truncated)");
    }
    if let Some(artifact) = &result.artifact {
        eprintln!(
            "retrieved {} → {} ({} file(s))",
            artifact.remote,
            artifact.local.display(),
            artifact.files
        );
    }
    Ok(())
}

pub async fn offload(ctx: &Ctx, args: OffloadArgs) -> Result<ExitCode> {
    let cancel = cancel_on_signal()?;
    let dir = confine::user_path("--dir", &args.dir, Expect::Dir, None)?;
    let mut request = OffloadRequest::new(dir, args.command.join(" "));
    request.out = args.out;
    request.excludes = args.excludes;
    match jobs::offload(
        &ctx.client,
        request,
        &args.job.options(),
        &cancel,
        notes(ctx, false),
    )
    .await
    {
        Ok(result) => {
            show_result(ctx, &result)?;
            Ok(exit_status(result.code))
        }
        Err(err) => failure(err),
    }
}

pub async fn fanout(ctx: &Ctx, args: FanoutArgs) -> Result<ExitCode> {
    let cancel = cancel_on_signal()?;
    let dir = confine::user_path("--dir", &args.dir, Expect::Dir, None)?;
    let mut request = FanoutRequest::new(dir, args.commands).jobs(args.jobs);
    request.excludes = args.excludes;
    match jobs::fanout(
        &ctx.client,
        request,
        &args.job.options(),
        &cancel,
        notes(ctx, true),
    )
    .await
    {
        Ok(result) => {
            show_fanout(ctx, &result);
            Ok(if result.failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Err(err) => failure(err),
    }
}

fn show_fanout(ctx: &Ctx, result: &FanoutResult) {
    if ctx.out.explicit_json {
        ctx.out.value(result);
        return;
    }
    println!("{}", fanout_text(result));
}

fn fanout_text(result: &FanoutResult) -> String {
    let mut text = String::new();
    for entry in &result.results {
        let status = match (&entry.error, entry.code) {
            (Some(err), _) => format!("error: {err}"),
            (None, Some(code)) => format!("exit {code}"),
            (None, None) => format!(
                "killed by {}",
                entry.signal.as_deref().unwrap_or("a signal")
            ),
        };
        text.push_str(&format!(
            "── [{}] {} — {status}\n",
            entry.index, entry.command
        ));
        for (name, body) in [("stdout", &entry.stdout), ("stderr", &entry.stderr)] {
            if !body.is_empty() {
                text.push_str(&format!("{name}:\n{}", body));
                if !body.ends_with('\n') {
                    text.push('\n');
                }
            }
        }
        if entry.truncated {
            text.push_str("(output truncated)\n");
        }
        if entry.kept {
            if let Some(id) = &entry.sandbox_id {
                text.push_str(&format!(
                    "kept sandbox {id} (remove it with `cos rm --yes {id}`)\n"
                ));
            }
        }
    }
    text.push_str(&format!(
        "{} succeeded, {} failed",
        result.succeeded, result.failed
    ));
    text
}

pub async fn run_code(ctx: &Ctx, args: RunCodeArgs) -> Result<ExitCode> {
    let language: Language = match (&args.lang, &args.file) {
        (Some(lang), _) => lang.parse()?,
        (None, Some(file)) if file.as_os_str() != "-" => {
            let ext = file
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or_default();
            ext.parse().with_context(|| {
                format!(
                    "cannot tell the language of {}: pass --lang",
                    file.display()
                )
            })?
        }
        (None, _) => anyhow::bail!("pass --lang (py, js, mjs, cjs, ts, sh, go, rb, c, cpp, rs)"),
    };
    let code = match (args.code, &args.file) {
        (Some(code), _) => code,
        (None, Some(file)) if file.as_os_str() != "-" => {
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?
        }
        (None, _) => {
            if args.stdin.as_deref().is_some_and(|p| p.as_os_str() == "-") {
                anyhow::bail!("stdin cannot carry both the code and the program's input: pass the code as a file or with -e");
            }
            let mut code = String::new();
            std::io::stdin()
                .read_to_string(&mut code)
                .context("reading the code from stdin")?;
            code
        }
    };
    let mut request = RunCodeRequest::new(language, code);
    if let Some(path) = &args.stdin {
        let input = if path.as_os_str() == "-" {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .context("reading stdin")?;
            buf
        } else {
            std::fs::read(path).with_context(|| format!("reading {}", path.display()))?
        };
        request = request.stdin(input);
    }
    let cancel = cancel_on_signal()?;
    match jobs::run_code(
        &ctx.client,
        request,
        &args.job.options(),
        &cancel,
        notes(ctx, false),
    )
    .await
    {
        Ok(result) => {
            show_result(ctx, &result)?;
            Ok(exit_status(result.code))
        }
        Err(err) => failure(err),
    }
}
