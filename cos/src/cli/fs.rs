//! `cos fs <sandbox> …`: text file operations inside a sandbox through the guest helper
//! (read, write, edit, patch, glob, grep, ls, stat, mkdir, rm, mv, manifest).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use clap::{Args, Subcommand};

use createos_sandbox::guest::{
    FileType, GlobOptions, GrepOptions, Guest, GuestOptions, ListOptions, ManifestOptions,
    PatchAction, PathMap, ReadOptions, ReadResult,
};

use super::output::table;
use super::Ctx;

#[derive(Debug, Args)]
pub struct FsArgs {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// Guest directory that relative paths resolve against.
    #[arg(long, global = true, default_value = "/root", value_name = "DIR")]
    pub cwd: String,
    /// Seconds one operation may take (0: no limit).
    #[arg(long, global = true, default_value_t = 120, value_name = "SECS")]
    pub timeout: u64,
    #[command(subcommand)]
    pub cmd: FsCmd,
}

#[derive(Clone, Debug, Subcommand)]
pub enum FsCmd {
    /// Print a UTF-8 text file (≤ 1 MiB) with line numbers, or a directory's names.
    Read {
        path: String,
        /// First line (1-based).
        #[arg(long)]
        offset: Option<u64>,
        /// Lines to show (at most 2000).
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Replace or create a text file atomically (content from --content, --file or stdin).
    Write {
        path: String,
        /// The new content.
        #[arg(long, conflicts_with = "file", allow_hyphen_values = true)]
        content: Option<String>,
        /// Read the content from this local file.
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Replace a string that occurs exactly once (or every occurrence with --all).
    Edit {
        path: String,
        /// Text to find.
        #[arg(long, allow_hyphen_values = true)]
        old: String,
        /// Replacement.
        #[arg(long, allow_hyphen_values = true)]
        new: String,
        /// Replace every occurrence.
        #[arg(long)]
        all: bool,
    },
    /// Apply a `*** Begin Patch` text (from --file or stdin); nothing changes if a hunk fails.
    Patch {
        /// Read the patch from this local file.
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Files matching a glob. Exits 1 when nothing matched.
    Glob {
        pattern: String,
        /// Directory to search (default: --cwd).
        #[arg(long)]
        path: Option<String>,
        /// Most files (1–2000, default 100).
        #[arg(long)]
        limit: Option<u64>,
        /// Include hidden files.
        #[arg(long)]
        hidden: bool,
    },
    /// Lines matching a regex (case-insensitive unless -s). Exits 1 when nothing matched.
    Grep {
        pattern: String,
        /// Directory or file to search (default: --cwd).
        path: Option<String>,
        /// Only files matching this glob.
        #[arg(long)]
        include: Option<String>,
        /// The pattern is a plain string.
        #[arg(long, short = 'F')]
        fixed_strings: bool,
        /// Match case exactly.
        #[arg(long, short = 's')]
        case_sensitive: bool,
        /// Most matches (1–2000, default 100).
        #[arg(long)]
        limit: Option<u64>,
    },
    /// List a directory.
    Ls {
        /// Directory (default: --cwd).
        path: Option<String>,
        /// Descend into subdirectories.
        #[arg(long, short = 'r')]
        recursive: bool,
        /// Most entries (1–10000, default 1000).
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Type, size, mode, owner and mtime of a path.
    Stat { path: String },
    /// Create a directory (and its parents unless --no-parents).
    Mkdir {
        path: String,
        #[arg(long)]
        no_parents: bool,
    },
    /// Remove a file or empty directory (any directory with -r).
    Rm {
        path: String,
        #[arg(long, short = 'r')]
        recursive: bool,
    },
    /// Move or rename; an existing target is refused unless --overwrite.
    Mv {
        from: String,
        to: String,
        #[arg(long, short = 'f')]
        overwrite: bool,
    },
    /// Every file and symlink under a directory (size, mtime, mode, optional SHA-256).
    Manifest {
        /// Directory (default: --cwd).
        path: Option<String>,
        /// Hash every file.
        #[arg(long)]
        sha256: bool,
        /// gitignore-style pattern to leave out (repeatable).
        #[arg(long = "exclude", value_name = "PATTERN")]
        excludes: Vec<String>,
    },
}

pub async fn fs(ctx: &Ctx, args: FsArgs) -> Result<ExitCode> {
    let paths = PathMap::new(&args.cwd)?;
    // Local inputs first: a bad --file fails before the sandbox is looked up.
    let input = match &args.cmd {
        FsCmd::Write {
            content: Some(text),
            ..
        } => Some(text.clone()),
        FsCmd::Write { file, .. } | FsCmd::Patch { file } => {
            Some(read_text(file.as_deref()).await?)
        }
        _ => None,
    };
    let input = input.unwrap_or_default();
    let (cmd, input, paths) = (&args.cmd, &input, &paths);
    let options = GuestOptions::new().timeout(Duration::from_secs(args.timeout));
    super::exec::on_sandbox(ctx, &args.sandbox, |sandbox| {
        let guest = Guest::new(sandbox, paths.clone(), options.clone());
        async move { run(ctx, &guest, cmd, input).await }
    })
    .await
}

/// One operation (its result printed); the exit status says whether a search matched.
async fn run(ctx: &Ctx, guest: &Guest, cmd: &FsCmd, input: &str) -> Result<ExitCode> {
    let input = input.to_string();
    let out = &ctx.out;
    match cmd.clone() {
        FsCmd::Read {
            path,
            offset,
            limit,
        } => {
            let result = guest.read(&path, ReadOptions { offset, limit }).await?;
            out.show(&result, || result.content().to_string());
            if !out.json {
                note_window(out, &result);
            }
        }
        FsCmd::Write { path, .. } => {
            let r = guest.write(&path, &input).await?;
            out.show(&r, || {
                format!(
                    "{} {} ({} bytes)",
                    if r.created { "created" } else { "wrote" },
                    r.path,
                    r.bytes
                )
            });
        }
        FsCmd::Edit {
            path,
            old,
            new,
            all,
        } => {
            let r = guest.edit(&path, &old, &new, all).await?;
            out.show(&r, || {
                format!(
                    "{}: {} replacement{}",
                    r.path,
                    r.replacements,
                    plural(r.replacements)
                )
            });
        }
        FsCmd::Patch { .. } => {
            let changes = guest.patch(&input).await?;
            out.show(&changes, || {
                let rows = changes.iter().map(|c| match (&c.action, &c.from) {
                    (PatchAction::Move, Some(from)) => format!("R {from} -> {}", c.path),
                    (PatchAction::Add, _) => format!("A {}", c.path),
                    (PatchAction::Delete, _) => format!("D {}", c.path),
                    _ => format!("M {}", c.path),
                });
                rows.collect::<Vec<_>>().join("\n")
            });
        }
        FsCmd::Glob {
            pattern,
            path,
            limit,
            hidden,
        } => {
            let r = guest
                .glob(
                    &pattern,
                    GlobOptions {
                        path,
                        limit,
                        hidden,
                    },
                )
                .await?;
            out.show(&r, || r.text.clone());
            return Ok(found(!r.files.is_empty()));
        }
        FsCmd::Grep {
            pattern,
            path,
            include,
            fixed_strings,
            case_sensitive,
            limit,
        } => {
            let options = GrepOptions {
                path,
                include,
                literal: fixed_strings,
                case_sensitive,
                limit,
            };
            let r = guest.grep(&pattern, options).await?;
            out.show(&r, || r.text.clone());
            return Ok(found(!r.matches.is_empty()));
        }
        FsCmd::Ls {
            path,
            recursive,
            limit,
        } => {
            let r = guest
                .list(ListOptions {
                    path,
                    recursive,
                    limit,
                })
                .await?;
            out.show(&r, || {
                let rows = r
                    .entries
                    .iter()
                    .map(|e| {
                        let name = match &e.target {
                            Some(target) => format!("{} -> {target}", e.name),
                            None if e.kind == FileType::Directory => format!("{}/", e.name),
                            None => e.name.clone(),
                        };
                        vec![e.kind.to_string(), e.size.to_string(), name]
                    })
                    .collect();
                let mut text = table(&["TYPE", "SIZE", "NAME"], rows);
                if r.truncated {
                    text.push_str(&format!(
                        "(truncated at {} entries; raise --limit)\n",
                        r.entries.len()
                    ));
                }
                text
            });
        }
        FsCmd::Stat { path } => {
            let r = guest.stat(&path).await?;
            out.show(&r, || {
                let mut text = format!(
                    "path:  {}\ntype:  {}\nsize:  {}\nmode:  {}\nowner: {}:{}\nmtime: {}",
                    r.path, r.kind, r.size, r.mode, r.uid, r.gid, r.mtime
                );
                if let Some(target) = &r.target {
                    text.push_str(&format!("\ntarget: {target}"));
                }
                text
            });
        }
        FsCmd::Mkdir { path, no_parents } => {
            let r = guest.mkdir(&path, !no_parents).await?;
            out.show(&r, || {
                format!(
                    "{} {}",
                    if r.created { "created" } else { "exists:" },
                    r.path
                )
            });
        }
        FsCmd::Rm { path, recursive } => {
            let r = guest.remove(&path, recursive).await?;
            out.show(&r, || format!("removed {} {}", r.kind, r.path));
        }
        FsCmd::Mv {
            from,
            to,
            overwrite,
        } => {
            let r = guest.move_path(&from, &to, overwrite).await?;
            out.show(&r, || format!("{} -> {}", r.from, r.to));
        }
        FsCmd::Manifest {
            path,
            sha256,
            excludes,
        } => {
            let r = guest
                .manifest(ManifestOptions {
                    path,
                    sha256,
                    excludes,
                })
                .await?;
            out.show(&r, || {
                let rows = r
                    .entries
                    .iter()
                    .map(|e| {
                        let hash = e
                            .sha256
                            .clone()
                            .or_else(|| e.target.as_ref().map(|t| format!("-> {t}")));
                        vec![
                            e.mode.clone(),
                            e.size.to_string(),
                            e.path.clone(),
                            hash.unwrap_or_default(),
                        ]
                    })
                    .collect();
                format!(
                    "{}{} entries under {}",
                    table(&["MODE", "SIZE", "PATH", "SHA256"], rows),
                    r.count,
                    r.root
                )
            });
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Exit status of a search: 1 when nothing matched, like grep.
fn found(any: bool) -> ExitCode {
    if any {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Tell people how to see the rest of a long file.
fn note_window(out: &super::Out, result: &ReadResult) {
    match result {
        ReadResult::File(f) => {
            if let Some(next) = f.next_offset {
                let last = f.offset + f.lines.saturating_sub(1);
                out.note(format!(
                    "(lines {}-{last} of {}; continue with --offset {next})",
                    f.offset, f.total_lines
                ));
            }
        }
        ReadResult::Directory(d) if d.truncated => {
            out.note(format!(
                "(showing {} of {} entries)",
                d.entries.len(),
                d.total_entries
            ));
        }
        ReadResult::Directory(_) => {}
    }
}

/// UTF-8 text from a local file, or from stdin when `file` is `None` (or `-`).
async fn read_text(file: Option<&Path>) -> Result<String> {
    let bytes = match file {
        Some(path) if path != Path::new("-") => tokio::fs::read(path)
            .await
            .with_context(|| format!("reading {}", path.display()))?,
        _ => {
            use tokio::io::AsyncReadExt;
            let mut buf = Vec::new();
            tokio::io::stdin()
                .read_to_end(&mut buf)
                .await
                .context("reading stdin")?;
            buf
        }
    };
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(_) => bail!("the content is not UTF-8 text; use `cos push` for binary files"),
    }
}
