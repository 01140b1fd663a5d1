//! Calls of the file tools: `sandbox_read`/`write`/`edit`/`patch`/`glob`/`grep` on the session
//! sandbox through the guest helper, and `sandbox_push`/`sandbox_pull` through the files API
//! and [`createos_sandbox::transfer`]. The routed native tools (`routed.rs`) share [`FileOp`].
//!
//! Every argument, path mapping included, is checked before the session sandbox is allocated,
//! so bad input never creates anything. Local paths of push/pull stay inside the project
//! directory, and a push never sends what the snapshot credential deny-list leaves out. Each call owns its deadline and cancellation: dropping
//! a guest operation stops its helper process, and a dropped transfer removes its temporary
//! files on both sides.

mod local;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{named, run_error};
use crate::tools::args::Args;
use crate::tools::runtime::Runtime;
use crate::tools::{progress, CallCtx, Part, ToolError, ToolOutput};
use createos_sandbox::api::files::{ProgressFn, UploadBody, UploadOptions};
use createos_sandbox::guest::{
    GlobOptions, GrepOptions, Guest, GuestChannel, GuestOptions, PatchAction, PathMap, ReadOptions,
    ReadResult,
};
use createos_sandbox::snapshot::{Snapshot, SnapshotOptions};
use createos_sandbox::transfer::{self, ApiRemote};
use createos_sandbox::wait::sleep_or_forever;
use createos_sandbox::{validate, Error};

/// How much longer than the guest's own deadline a file call may take before it is abandoned.
const BACKSTOP: Duration = Duration::from_secs(10);

/// Deadline of a push or pull (the plugin's transfer budget).
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(600);

/// Whether `short` (a tool name without the prefix) is one of these tools.
pub(super) fn handles(short: &str) -> bool {
    matches!(
        short,
        "read" | "write" | "edit" | "patch" | "glob" | "grep" | "push" | "pull"
    )
}

/// Run one of these tools. Handles its own deadline and cancellation.
pub(super) async fn call(
    rt: &Arc<Runtime>,
    short: &str,
    args: &Args,
    ctx: &CallCtx,
) -> Result<ToolOutput, ToolError> {
    let op = match short {
        "read" => FileOp::Read {
            path: args.str("path")?.to_string(),
            options: ReadOptions {
                offset: args.opt_u64("offset"),
                limit: args.opt_u64("limit"),
            },
        },
        "write" => FileOp::Write {
            path: args.str("path")?.to_string(),
            content: args.str("content")?.to_string(),
        },
        "edit" => FileOp::Edit {
            path: args.str("path")?.to_string(),
            old: args.str("oldString")?.to_string(),
            new: args.str("newString")?.to_string(),
            all: args.opt_bool("replaceAll").unwrap_or(false),
        },
        "patch" => FileOp::Patch {
            text: args.str("patchText")?.to_string(),
        },
        "glob" => FileOp::Glob {
            pattern: args.str("pattern")?.to_string(),
            options: GlobOptions {
                path: args.opt_str("path").map(str::to_string),
                limit: args.opt_u64("limit"),
                hidden: args.opt_bool("hidden").unwrap_or(false),
            },
        },
        "grep" => FileOp::Grep {
            pattern: args.str("pattern")?.to_string(),
            options: GrepOptions {
                path: args.opt_str("path").map(str::to_string),
                include: args.opt_str("include").map(str::to_string),
                literal: args.opt_bool("literal").unwrap_or(false),
                case_sensitive: args.opt_bool("caseSensitive").unwrap_or(false),
                limit: args.opt_u64("limit"),
            },
        },
        "push" => return transfer_call(ctx, push(rt, args, ctx)).await,
        "pull" => return transfer_call(ctx, pull(rt, args, ctx)).await,
        other => {
            return Err(ToolError::UnknownTool(format!(
                "{}{other}",
                crate::tools::catalog::PREFIX
            )))
        }
    };
    run(rt, op, ctx).await
}

/// One guest file operation, with the arguments as the caller gave them (paths unmapped).
#[derive(Debug)]
pub(super) enum FileOp {
    Read {
        path: String,
        options: ReadOptions,
    },
    Write {
        path: String,
        content: String,
    },
    Edit {
        path: String,
        old: String,
        new: String,
        all: bool,
    },
    Patch {
        text: String,
    },
    Glob {
        pattern: String,
        options: GlobOptions,
    },
    Grep {
        pattern: String,
        options: GrepOptions,
    },
}

impl FileOp {
    /// Refuse what the guest would refuse, before anything is allocated: paths that do not
    /// map (`..` escapes, NUL bytes), empty strings, an empty edit.
    fn check(&self, map: &PathMap) -> Result<(), ToolError> {
        let mapped = |path: &str| map.to_guest(path).map(drop).map_err(invalid);
        match self {
            FileOp::Read { path, options } => {
                if options.offset == Some(0) {
                    return Err(ToolError::InvalidArgs(
                        "\"offset\" counts lines from 1".into(),
                    ));
                }
                mapped(path)
            }
            FileOp::Write { path, .. } => mapped(path),
            FileOp::Edit { path, old, new, .. } => {
                if old.is_empty() {
                    return Err(ToolError::InvalidArgs(
                        "\"oldString\" must not be empty (use write to create a file)".into(),
                    ));
                }
                if old == new {
                    return Err(ToolError::InvalidArgs(
                        "\"newString\" is identical to \"oldString\": nothing to change".into(),
                    ));
                }
                mapped(path)
            }
            FileOp::Patch { text } => {
                if !text.trim_start().starts_with("*** Begin Patch") {
                    return Err(ToolError::InvalidArgs(
                        "the patch must start with `*** Begin Patch` (see the tool description)"
                            .into(),
                    ));
                }
                map.rewrite_patch(text).map(drop).map_err(invalid)
            }
            FileOp::Glob { options, .. } => map
                .to_guest_opt(options.path.as_deref())
                .map(drop)
                .map_err(invalid),
            FileOp::Grep { pattern, options } => {
                if pattern.contains(['\n', '\r']) {
                    return Err(ToolError::InvalidArgs(
                        "\"pattern\" must be a single line (searches are line by line)".into(),
                    ));
                }
                map.to_guest_opt(options.path.as_deref())
                    .map(drop)
                    .map_err(invalid)
            }
        }
    }

    /// Run it and render the result as text plus metadata.
    async fn run(&self, guest: &Guest) -> Result<ToolOutput, Error> {
        Ok(match self {
            FileOp::Read { path, options } => match guest.read(path, options.clone()).await? {
                ReadResult::File(file) => {
                    let mut text = file.content.clone();
                    if let Some(next) = file.next_offset {
                        text.push_str(&format!(
                            "\n\n(Showing lines {}-{} of {}. Continue with offset {next}.)",
                            file.offset,
                            file.offset + file.lines.saturating_sub(1),
                            file.total_lines
                        ));
                    } else if file.total_lines == 0 {
                        text = "(empty file)".into();
                    }
                    text_output(text)
                        .with("path", file.path)
                        .with("totalLines", file.total_lines)
                        .with("truncated", file.truncated)
                        .with("nextOffset", file.next_offset)
                }
                ReadResult::Directory(dir) => {
                    let mut text = if dir.entries.is_empty() {
                        "(empty directory)".to_string()
                    } else {
                        dir.content.clone()
                    };
                    if dir.truncated {
                        text.push_str(&format!(
                            "\n\n(Showing {} of {} entries.)",
                            dir.entries.len(),
                            dir.total_entries
                        ));
                    }
                    text_output(text)
                        .with("path", dir.path)
                        .with("directory", true)
                        .with("truncated", dir.truncated)
                }
            },
            FileOp::Write { path, content } => {
                let done = guest.write(path, content).await?;
                let verb = if done.created { "Created" } else { "Wrote" };
                text_output(format!("{verb} {} ({} bytes)", done.path, done.bytes))
                    .with("path", done.path)
                    .with("bytes", done.bytes)
                    .with("created", done.created)
            }
            FileOp::Edit {
                path,
                old,
                new,
                all,
            } => {
                let done = guest.edit(path, old, new, *all).await?;
                let times = if done.replacements == 1 {
                    "1 occurrence".to_string()
                } else {
                    format!("{} occurrences", done.replacements)
                };
                text_output(format!("Edited {}: replaced {times}", done.path))
                    .with("path", done.path)
                    .with("replacements", done.replacements)
            }
            FileOp::Patch { text } => {
                let changes = guest.patch(text).await?;
                let mut lines = vec![format!("Patch applied to {} file(s):", changes.len())];
                for change in &changes {
                    lines.push(match (&change.action, &change.from) {
                        (PatchAction::Add, _) => format!("A {}", change.path),
                        (PatchAction::Delete, _) => format!("D {}", change.path),
                        (PatchAction::Move, Some(from)) => format!("R {from} -> {}", change.path),
                        _ => format!("M {}", change.path),
                    });
                }
                let files: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
                text_output(lines.join("\n")).with("files", json!(files))
            }
            FileOp::Glob { pattern, options } => {
                let found = guest.glob(pattern, options.clone()).await?;
                text_output(found.text)
                    .with("count", found.files.len())
                    .with("truncated", found.truncated)
            }
            FileOp::Grep { pattern, options } => {
                let found = guest.grep(pattern, options.clone()).await?;
                text_output(found.text)
                    .with("count", found.matches.len())
                    .with("truncated", found.truncated)
            }
        })
    }
}

fn text_output(text: String) -> ToolOutput {
    ToolOutput {
        content: vec![Part::Text(text)],
        meta: Default::default(),
    }
}

fn invalid(err: Error) -> ToolError {
    match err {
        Error::InvalidInput { field, message } => {
            ToolError::InvalidArgs(format!("{field}: {message}"))
        }
        other => ToolError::InvalidArgs(other.to_string()),
    }
}

/// How tool paths map into the session sandbox: relative under the configured working
/// directory, the local project onto it.
pub(super) fn path_map(rt: &Runtime) -> Result<PathMap, ToolError> {
    Ok(PathMap::new(&rt.config().cwd)
        .map_err(invalid)?
        .with_host_root(project_dir(rt)))
}

/// The host project directory the runtime serves (canonical, absolute).
fn project_dir(rt: &Runtime) -> PathBuf {
    rt.project_dir().to_path_buf()
}

/// Check `op`, get the session sandbox, run `op` there under the configured deadline.
pub(super) async fn run(
    rt: &Arc<Runtime>,
    op: FileOp,
    ctx: &CallCtx,
) -> Result<ToolOutput, ToolError> {
    let map = path_map(rt)?;
    op.check(&map)?;
    let limit = rt.config().timeout;
    let (op, map) = (&op, &map);
    rt.with_session(ctx, |sandbox| async move {
        let options = GuestOptions::new().channel(GuestChannel::Resident).timeout(limit.unwrap_or(Duration::ZERO));
        let guest = Guest::new(sandbox.clone(), map.clone(), options);
        // The guest enforces the deadline (stopping a helper whose operation overran); this
        // is only the backstop.
        let output = tokio::select! {
            result = op.run(&guest) => result.map_err(file_error)?,
            _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
            _ = sleep_or_forever(limit.map(|l| l + BACKSTOP)) => return Err(ToolError::Timeout(limit.unwrap_or_default())),
        };
        Ok(output.with("sandboxId", sandbox.id()))
    })
    .await
}

/// Guest refusals of the arguments stay argument errors; the rest keep the library's error.
fn file_error(err: Error) -> ToolError {
    match err {
        Error::InvalidInput { .. } => invalid(err),
        other => run_error(other),
    }
}

/// A transfer under its own deadline and the call's cancellation.
async fn transfer_call(
    ctx: &CallCtx,
    work: impl std::future::Future<Output = Result<ToolOutput, ToolError>>,
) -> Result<ToolOutput, ToolError> {
    tokio::select! {
        result = work => result,
        _ = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
        _ = tokio::time::sleep(TRANSFER_TIMEOUT) => Err(ToolError::Timeout(TRANSFER_TIMEOUT)),
    }
}

/// A transfer's byte counts as progress of `reporter`'s call.
fn bytes_progress(reporter: &Option<progress::Reporter>) -> Option<ProgressFn> {
    let reporter = reporter.clone()?;
    Some(Arc::new(move |done, total| reporter.bytes(done, total)))
}

/// `local_path`, resolved and confined to the project directory (see [`local`]).
fn local_path(rt: &Runtime, raw: &str) -> Result<PathBuf, ToolError> {
    local::resolve(rt.project_dir(), "local_path", std::path::Path::new(raw))
}

fn remote_path(raw: &str) -> Result<&str, ToolError> {
    validate::guest_path("remote_path", raw).map_err(invalid)?;
    Ok(raw)
}

async fn push(rt: &Arc<Runtime>, args: &Args, ctx: &CallCtx) -> Result<ToolOutput, ToolError> {
    let remote = remote_path(args.str("remote_path")?)?;
    let given = args.str("local_path")?;
    let local = local_path(rt, given)?;
    let meta = tokio::fs::metadata(&local)
        .await
        .map_err(|e| ToolError::InvalidArgs(format!("local_path {}: {e}", local.display())))?;
    local::check_sendable(rt.project_dir(), "local_path", &local, meta.is_dir())?;
    let sandbox = named(rt, args)?;
    if meta.is_dir() {
        let dest = createos_sandbox::sync::safety::check_remote(remote).map_err(invalid)?;
        let snapshot = Snapshot::scan_async(local.clone(), SnapshotOptions::new())
            .await
            .map_err(file_error)?;
        let reporter = progress::announce(
            ctx,
            format!("pushing {} to {}:{dest}", local.display(), sandbox.id()),
        );
        let sent = transfer::upload_snapshot(
            &ApiRemote::new(sandbox.clone()),
            &snapshot,
            &dest,
            bytes_progress(&reporter),
        )
        .await
        .map_err(run_error)?;
        let left_out = snapshot.dropped().len();
        let text = format!(
            "Pushed {} to {}:{} ({} files, {} bytes; {left_out} paths left out by the snapshot filters)",
            snapshot.root().display(),
            sandbox.id(),
            dest,
            sent.files,
            sent.bytes
        );
        return Ok(text_output(text)
            .with("sandboxId", sandbox.id())
            .with("path", dest)
            .with("files", sent.files)
            .with("bytes", sent.bytes)
            .with("leftOut", left_out));
    }
    if !meta.is_file() {
        return Err(ToolError::InvalidArgs(format!(
            "local_path {} is neither a regular file nor a directory",
            local.display()
        )));
    }
    let dest = if remote.ends_with('/') {
        // The name as given (a symlink keeps its own name), else the resolved one.
        let name = std::path::Path::new(given)
            .file_name()
            .or(local.file_name())
            .ok_or_else(|| {
                ToolError::InvalidArgs(format!("local_path {} has no file name", local.display()))
            })?;
        format!("{remote}{}", name.to_string_lossy())
    } else {
        remote.to_string()
    };
    let reporter = progress::announce(
        ctx,
        format!("pushing {} to {}:{dest}", local.display(), sandbox.id()),
    );
    let mut options = UploadOptions::new().allow_large(true);
    if let Some(report) = bytes_progress(&reporter) {
        options = options.progress(move |done, total| report(done, total));
    }
    sandbox
        .upload_with(&dest, UploadBody::file(&local), options)
        .await
        .map_err(run_error)?;
    let text = format!(
        "Pushed {} to {}:{dest} ({} bytes)",
        local.display(),
        sandbox.id(),
        meta.len()
    );
    Ok(text_output(text)
        .with("sandboxId", sandbox.id())
        .with("path", dest)
        .with("bytes", meta.len()))
}

async fn pull(rt: &Arc<Runtime>, args: &Args, ctx: &CallCtx) -> Result<ToolOutput, ToolError> {
    let remote = remote_path(args.str("remote_path")?)?;
    let local = local_path(rt, args.str("local_path")?)?;
    let target = if local.is_dir() {
        let name = remote
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .filter(|n| !n.is_empty() && *n != ".");
        let name = name.ok_or_else(|| {
            ToolError::InvalidArgs(format!(
                "remote_path {remote:?} has no name to create inside {}",
                local.display()
            ))
        })?;
        // The name inside may itself be a symlink leading out: check the final target too.
        local::resolve(rt.project_dir(), "local_path", &local.join(name))?
    } else {
        local
    };
    match target.parent() {
        Some(parent) if parent.as_os_str().is_empty() || parent.is_dir() => {}
        _ => {
            return Err(ToolError::InvalidArgs(format!(
                "local_path: the directory that would hold {} does not exist; create it first",
                target.display()
            )))
        }
    }
    let sandbox = named(rt, args)?;
    let download = match sandbox.download(remote).await {
        Ok(download) => download,
        // The files API refuses directories: those come back as one archive.
        Err(Error::Validation(_)) => {
            let reporter = progress::announce(ctx, format!("pulling {}:{remote}", sandbox.id()));
            let got = transfer::download_dir(
                &ApiRemote::new(sandbox.clone()),
                remote,
                &target,
                bytes_progress(&reporter),
            )
            .await
            .map_err(run_error)?;
            let files = got.unpacked.files + got.unpacked.symlinks;
            let text = format!(
                "Pulled {}:{remote} to {} ({files} files, {} bytes)",
                sandbox.id(),
                target.display(),
                got.bytes
            );
            return Ok(text_output(text)
                .with("sandboxId", sandbox.id())
                .with("local", target.to_string_lossy().into_owned())
                .with("files", files)
                .with("skipped", got.unpacked.skipped)
                .with("bytes", got.bytes));
        }
        Err(e) => return Err(run_error(e)),
    };
    let reporter = progress::announce(ctx, format!("pulling {}:{remote}", sandbox.id()));
    let download = match bytes_progress(&reporter) {
        Some(report) => download.progress(move |done, total| report(done, total)),
        None => download,
    };
    let bytes = download.save_to(&target).await.map_err(run_error)?;
    let text = format!(
        "Pulled {}:{remote} to {} ({bytes} bytes)",
        sandbox.id(),
        target.display()
    );
    Ok(text_output(text)
        .with("sandboxId", sandbox.id())
        .with("local", target.to_string_lossy().into_owned())
        .with("bytes", bytes))
}
