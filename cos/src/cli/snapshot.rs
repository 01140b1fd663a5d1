//! `cos snapshot [DIR]`: which files an upload of DIR would send, and (with `--explain`) which
//! were left out and why. Purely local: it needs no credential.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use createos_sandbox::snapshot::{EntryKind, GitMode, ListingSource, Snapshot, SnapshotOptions};

use super::Out;

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// Project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Print every file that would be uploaded.
    #[arg(long)]
    pub list: bool,
    /// Also print every path left out, with the reason.
    #[arg(long)]
    pub explain: bool,
    /// Leave out paths matching GLOB (`path`, `dir/`, `*.log`, `docs/**/*.png`); repeatable.
    #[arg(long = "exclude", value_name = "GLOB")]
    pub excludes: Vec<String>,
    /// Walk the directory even inside a Git work tree.
    #[arg(long)]
    pub no_git: bool,
    /// Allow a directory inside ~/.ssh, ~/.aws, ~/.config, ….
    #[arg(long)]
    pub force: bool,
}

pub async fn snapshot(out: Out, args: SnapshotArgs) -> Result<()> {
    let options = SnapshotOptions {
        excludes: args.excludes.clone(),
        git: if args.no_git {
            GitMode::Off
        } else {
            GitMode::Auto
        },
        home_dir: None,
        allow_sensitive_root: args.force,
    };
    let snap = Snapshot::scan_async(args.dir.clone(), options).await?;
    let source = match snap.source() {
        ListingSource::Git { work_tree } => format!("git ({})", work_tree.display()),
        ListingSource::Walk => "walk".to_string(),
    };
    let files: Vec<_> = snap
        .files()
        .iter()
        .map(|e| {
            let kind = if matches!(e.kind, EntryKind::Symlink { .. }) {
                "symlink"
            } else {
                "file"
            };
            json!({ "path": e.path.to_string_lossy(), "kind": kind, "size": e.size })
        })
        .collect();
    let dropped: Vec<_> = snap
        .dropped()
        .iter()
        .map(|(p, why)| json!({ "path": p.to_string_lossy(), "reason": why.to_string() }))
        .collect();
    let mut report = json!({
        "root": snap.root(),
        "source": source,
        "count": snap.files().len(),
        "bytes": snap.content_bytes(),
        "archive_bytes": snap.exact_size(),
        "dropped_count": snap.dropped().len(),
    });
    if args.list {
        report["files"] = json!(files);
    }
    if args.explain {
        report["dropped"] = json!(dropped);
    }
    out.show(&report, || {
        let mut text = String::new();
        if args.list {
            for e in snap.files() {
                text.push_str(&format!("{}\n", e.path.display()));
            }
        }
        if args.explain {
            for (path, why) in snap.dropped() {
                text.push_str(&format!("dropped {}: {why}\n", path.display()));
            }
        }
        text.push_str(&format!(
            "{} files, {} bytes from {} ({source}); {} paths left out",
            snap.files().len(),
            snap.content_bytes(),
            snap.root().display(),
            snap.dropped().len()
        ));
        text
    });
    Ok(())
}
