//! One sync: scan both sides, compare, move what changed, delete what the mode says, record
//! the state.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::guest_side;
use super::plan::{hash_candidates, plan, Plan};
use super::push;
use super::state::{self, Meta, SyncState, Synced};
use super::{safety, Conflict, SyncMode, SyncOptions, SyncReport};
use crate::error::{Error, Result};
use crate::snapshot::{EntryKind, Snapshot, SnapshotOptions};
use crate::transfer::{self, protect, RefuseReason, Refused, Remote, Request};

/// Delete the NUL-separated names on stdin under `$1`, then the now-empty directories `$2…`.
const DELETE_REMOTE: &str = r#"cd -- "$1" || exit 1
shift
xargs -0 rm -f -- || exit 1
for d in "$@"; do rmdir -- "$d" 2>/dev/null; done
exit 0"#;

/// A local directory kept in step with a guest directory (see the module docs).
pub struct Syncer {
    remote: Arc<dyn Remote>,
    local: PathBuf,
    remote_dir: String,
    options: SyncOptions,
    state_path: Option<PathBuf>,
}

impl std::fmt::Debug for Syncer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Syncer")
            .field("sandbox", &self.remote.sandbox().id())
            .field("local", &self.local)
            .field("remote", &self.remote_dir)
            .field("options", &self.options)
            .finish()
    }
}

/// One side's files.
struct Side {
    files: BTreeMap<String, Meta>,
    /// Local only: what the scan left out (a guest path at or below one is out of scope).
    dropped: BTreeSet<String>,
}

impl Syncer {
    /// Check both directories (nothing is sent for a refused one) and prepare a sync.
    pub fn new(
        remote: Arc<dyn Remote>,
        local: &Path,
        remote_dir: &str,
        options: SyncOptions,
    ) -> Result<Syncer> {
        let local = safety::check_local(local, options.home_dir.as_deref(), options.force)?;
        let remote_dir = safety::check_remote(remote_dir)?;
        let state_path = match options.mode {
            SyncMode::TwoWay => {
                safety::check_writable(&local, options.home_dir.as_deref())?;
                let dir = options
                    .state_dir
                    .clone()
                    .or_else(state::default_state_dir)
                    .ok_or_else(|| {
                        Error::invalid(
                            "state directory",
                            "no state directory is known for this user; pass one",
                        )
                    })?;
                Some(state::state_file(
                    &dir,
                    remote.sandbox().id(),
                    &local,
                    &remote_dir,
                ))
            }
            _ => None,
        };
        Ok(Syncer {
            remote,
            local,
            remote_dir,
            options,
            state_path,
        })
    }

    /// The local directory (canonical).
    pub fn local(&self) -> &Path {
        &self.local
    }

    /// The guest directory (normalized).
    pub fn remote_dir(&self) -> &str {
        &self.remote_dir
    }

    /// The options.
    pub fn options(&self) -> &SyncOptions {
        &self.options
    }

    /// Where the two-way state is kept.
    pub fn state_path(&self) -> Option<&Path> {
        self.state_path.as_deref()
    }

    fn snapshot_options(&self) -> SnapshotOptions {
        SnapshotOptions {
            excludes: self.options.excludes.clone(),
            git: self.options.git,
            home_dir: self.options.home_dir.clone(),
            allow_sensitive_root: self.options.force,
        }
    }

    /// Run one sync.
    pub async fn run(&self) -> Result<SyncReport> {
        if self.options.mode == SyncMode::Once {
            let snapshot =
                Snapshot::scan_async(self.local.clone(), self.snapshot_options()).await?;
            let sent = transfer::upload_snapshot(
                &*self.remote,
                &snapshot,
                &self.remote_dir,
                self.options.progress.clone(),
            )
            .await?;
            let pushed = snapshot
                .files()
                .iter()
                .map(|e| e.path.to_string_lossy().into_owned())
                .collect();
            return Ok(SyncReport {
                pushed,
                bytes_sent: sent.bytes,
                ..SyncReport::default()
            });
        }
        let mut report = SyncReport::default();
        // both sides are scanned at once: the local walk is CPU work, the guest's a round trip
        let (local, guest) = tokio::try_join!(
            self.scan_local(&mut report),
            guest_side::list(&*self.remote, &self.remote_dir)
        )?;
        report.skipped.extend(guest.skipped);
        let remote = self.scope_remote(guest.files, &local.dropped, &mut report)?;
        let previous = match &self.state_path {
            Some(path) => state::load(path)?.filter(|s| {
                s.sandbox == self.remote.sandbox().id()
                    && s.local == self.local
                    && s.remote == self.remote_dir
            }),
            None => None,
        };
        let base = previous.as_ref().map(|s| &s.entries);
        let equal_hash = self.equal_hashes(&local.files, &remote.files, base).await?;
        let plan = plan(
            self.options.mode,
            &local.files,
            &remote.files,
            base,
            &equal_hash,
        );
        let (pushed, unsettled) = self.execute(&plan, &mut report).await?;

        if let Some(path) = &self.state_path {
            // the local side as scanned (a file edited during the sync then shows as changed
            // next time), minus what was deleted, plus what arrived from the guest
            let mut after = local.files;
            for gone in &plan.delete_local {
                after.remove(gone);
            }
            let arrived: Vec<String> = report
                .pulled
                .iter()
                .cloned()
                .chain(report.conflicts.iter().map(|c| c.remote_copy.clone()))
                .collect();
            let root = self.local.clone();
            let fresh = tokio::task::spawn_blocking(move || {
                arrived
                    .into_iter()
                    .map(|p| (local_meta(&root, &p), p))
                    .collect::<Vec<_>>()
            })
            .await
            .map_err(|e| {
                Error::io(
                    "the scanning thread failed",
                    std::io::Error::other(e.to_string()),
                )
            })?;
            for (meta, p) in fresh {
                match meta {
                    Some(meta) => after.insert(p, meta),
                    None => after.remove(&p),
                };
            }
            // what did not arrive (refused, or gone from the guest) is judged afresh next time
            for p in &unsettled {
                after.remove(p);
            }
            let entries = after
                .into_iter()
                .filter_map(|(p, l)| {
                    let r = if pushed.contains(&p) {
                        Some(l.clone())
                    } else {
                        remote.files.get(&p).cloned()
                    }?;
                    Some((
                        p,
                        Synced {
                            local: l,
                            remote: r,
                        },
                    ))
                })
                .collect();
            let state = SyncState {
                version: state::STATE_VERSION,
                sandbox: self.remote.sandbox().id().to_string(),
                local: self.local.clone(),
                remote: self.remote_dir.clone(),
                entries,
            };
            let path = path.clone();
            tokio::task::spawn_blocking(move || state::save(&path, &state))
                .await
                .map_err(|e| {
                    Error::io(
                        "the state thread failed",
                        std::io::Error::other(e.to_string()),
                    )
                })??;
        }
        Ok(report)
    }

    async fn scan_local(&self, report: &mut SyncReport) -> Result<Side> {
        let snapshot = match Snapshot::scan_async(self.local.clone(), self.snapshot_options()).await
        {
            Ok(s) => s,
            // an empty project is a valid side of a sync
            Err(Error::InvalidInput { message, .. })
                if message.starts_with("nothing to upload") =>
            {
                return Ok(Side {
                    files: BTreeMap::new(),
                    dropped: BTreeSet::new(),
                })
            }
            Err(e) => return Err(e),
        };
        let mut listed = Vec::new();
        for entry in snapshot.files() {
            let Some(path) = entry.path.to_str() else {
                report
                    .skipped
                    .push(entry.path.to_string_lossy().into_owned());
                continue;
            };
            let link = match &entry.kind {
                EntryKind::Symlink { target } => Some(target.to_string_lossy().into_owned()),
                _ => None,
            };
            listed.push((path.to_string(), link));
        }
        // the snapshot keeps whole seconds; the comparison wants the file system's precision
        let root = self.local.clone();
        let files = tokio::task::spawn_blocking(move || {
            listed
                .into_iter()
                .filter_map(|(path, link)| {
                    // gone since the scan: absent
                    let meta = std::fs::symlink_metadata(root.join(&path)).ok()?;
                    let size = if link.is_some() { 0 } else { meta.len() };
                    Some((
                        path,
                        Meta {
                            size,
                            mtime_ns: mtime_ns(&meta),
                            link,
                        },
                    ))
                })
                .collect::<BTreeMap<_, _>>()
        })
        .await
        .map_err(|e| {
            Error::io(
                "the scanning thread failed",
                std::io::Error::other(e.to_string()),
            )
        })?;
        let dropped = snapshot
            .dropped()
            .iter()
            .map(|(p, _)| p.to_string_lossy().into_owned())
            .collect();
        Ok(Side { files, dropped })
    }

    /// The guest's files limited to the sync's scope: the excludes, and nothing at or below a
    /// path the local scan left out. Names that cannot be written here (absolute, `..`, …)
    /// are refused and named; so, in two-way sync (where they would be pulled), are protected
    /// paths ([`protect`]: VCS metadata, the deny-list).
    fn scope_remote(
        &self,
        listed: Vec<(String, Meta)>,
        local_dropped: &BTreeSet<String>,
        report: &mut SyncReport,
    ) -> Result<Side> {
        let names: Vec<&[u8]> = listed.iter().map(|(p, _)| p.as_bytes()).collect();
        let verdicts = crate::snapshot::classify_names(&self.options.excludes, &[], &names)?;
        let mut files = BTreeMap::new();
        for ((path, meta), verdict) in listed.into_iter().zip(verdicts) {
            let reason = verdict.as_file;
            if let Some(why) = unsafe_listed_name(&path) {
                report.refused.push(Refused::new(path.as_bytes(), why));
                continue;
            }
            if matches!(reason, Some(crate::snapshot::DropReason::UserExclude(_))) {
                continue;
            }
            if let Some(why) = protect::protected(path.as_bytes())
                .filter(|_| self.options.mode == SyncMode::TwoWay)
            {
                report
                    .refused
                    .push(Refused::new(path.as_bytes(), RefuseReason::Protected(why)));
                continue;
            }
            if reason.is_some() || out_of_scope(&path, local_dropped) {
                continue;
            }
            files.insert(path, meta);
        }
        Ok(Side {
            files,
            dropped: BTreeSet::new(),
        })
    }

    /// Paths whose content is the same on both sides although their mtimes differ.
    async fn equal_hashes(
        &self,
        local: &BTreeMap<String, Meta>,
        remote: &BTreeMap<String, Meta>,
        base: Option<&BTreeMap<String, Synced>>,
    ) -> Result<BTreeSet<String>> {
        let candidates = hash_candidates(local, remote, base);
        if candidates.is_empty() {
            return Ok(BTreeSet::new());
        }
        let root = self.local.clone();
        let wanted = candidates.clone();
        let local_hashes = tokio::task::spawn_blocking(move || {
            wanted
                .into_iter()
                .filter_map(|p| sha256_file(&root.join(&p)).map(|h| (p, h)))
                .collect::<BTreeMap<_, _>>()
        })
        .await
        .map_err(|e| {
            Error::io(
                "the hashing thread failed",
                std::io::Error::other(e.to_string()),
            )
        })?;
        let remote_hashes =
            guest_side::hashes(&*self.remote, &self.remote_dir, &candidates).await?;
        Ok(candidates
            .into_iter()
            .filter(|p| matches!((local_hashes.get(p), remote_hashes.get(p)), (Some(a), Some(b)) if a.eq_ignore_ascii_case(b)))
            .collect())
    }

    /// Carry out `plan`; returns every path sent to the guest, and the paths whose state must
    /// not be recorded (a pull or conflict copy that did not arrive).
    async fn execute(
        &self,
        plan: &Plan,
        report: &mut SyncReport,
    ) -> Result<(BTreeSet<String>, Vec<String>)> {
        let progress = self.options.progress.clone();
        let mut unsettled = Vec::new();
        // 1. guest → local: pulls, and the guest side of each conflict under its copy name;
        // exactly these names are placed (anything else in the archive is refused)
        let mut copies = conflict_copies(&self.local, &plan.conflicts);
        let fetch: Vec<String> = plan.pull.iter().chain(&plan.conflicts).cloned().collect();
        if !fetch.is_empty() {
            let mut request = Request::only(&fetch);
            for (path, copy) in &copies {
                request = request.rename(path, copy);
            }
            let (done, bytes) = transfer::fetch_into(
                &*self.remote,
                &self.remote_dir,
                Some(fetch),
                &self.local,
                progress.clone(),
                request,
            )
            .await?;
            report.bytes_received += bytes;
            let placed: BTreeSet<&str> = done.placed.iter().filter_map(|p| p.to_str()).collect();
            let (pulled, missing): (Vec<String>, Vec<String>) = plan
                .pull
                .iter()
                .cloned()
                .partition(|p| placed.contains(p.as_str()));
            report.pulled = pulled;
            unsettled.extend(missing);
            // a conflict whose guest version did not arrive is left alone on both sides
            let (arrived, lost): (Vec<_>, Vec<_>) = copies
                .into_iter()
                .partition(|(_, copy)| placed.contains(copy.as_str()));
            unsettled.extend(lost.into_iter().map(|(path, _)| path));
            copies = arrived;
            report.conflicts = copies
                .iter()
                .map(|(path, copy)| Conflict {
                    path: path.clone(),
                    remote_copy: copy.clone(),
                })
                .collect();
            report.refused.extend(done.unpacked.refused);
        }
        // 2. local → guest: pushes, conflicting local versions, and the conflict copies
        let mut send: BTreeSet<String> = plan.push.iter().cloned().collect();
        send.extend(
            copies
                .iter()
                .flat_map(|(path, copy)| [path.clone(), copy.clone()]),
        );
        if !send.is_empty() {
            let names: Vec<String> = send.iter().cloned().collect();
            report.bytes_sent += push::push_files(
                &*self.remote,
                &self.local,
                &self.remote_dir,
                names,
                progress,
            )
            .await?;
            report.pushed = plan.push.clone();
        }
        // 3. deletions
        if !plan.delete_remote.is_empty() {
            let mut list = Vec::new();
            for path in &plan.delete_remote {
                list.extend_from_slice(path.as_bytes());
                list.push(0);
            }
            let mut args = vec![self.remote_dir.clone()];
            args.extend(parents_deepest_first(&plan.delete_remote));
            let out = self.remote.run_sh(DELETE_REMOTE, args, list).await?;
            if !out.success() {
                return Err(out.failure("deleting files"));
            }
            report.deleted_remote = plan.delete_remote.clone();
        }
        if !plan.delete_local.is_empty() {
            let root = self.local.clone();
            let doomed = plan.delete_local.clone();
            tokio::task::spawn_blocking(move || delete_local(&root, &doomed))
                .await
                .map_err(|e| {
                    Error::io(
                        "the deleting thread failed",
                        std::io::Error::other(e.to_string()),
                    )
                })??;
            report.deleted_local = plan.delete_local.clone();
        }
        Ok((send, unsettled))
    }
}

/// Whether `path` is, or lies below, one of the locally dropped paths.
fn out_of_scope(path: &str, dropped: &BTreeSet<String>) -> bool {
    if dropped.contains(path) {
        return true;
    }
    path.match_indices('/')
        .any(|(i, _)| dropped.contains(&path[..i]))
}

/// `(path, copy name)` for each conflict: `<path>.remote-conflict-<unix seconds>`, made unique
/// against what exists locally.
fn conflict_copies(root: &Path, conflicts: &[String]) -> Vec<(String, String)> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    conflicts
        .iter()
        .map(|path| {
            let mut copy = format!("{path}.remote-conflict-{stamp}");
            let mut n = 1;
            while std::fs::symlink_metadata(root.join(&copy)).is_ok() {
                copy = format!("{path}.remote-conflict-{stamp}-{n}");
                n += 1;
            }
            (path.clone(), copy)
        })
        .collect()
}

/// Every parent directory of `paths`, deepest first.
fn parents_deepest_first(paths: &[String]) -> Vec<String> {
    let mut dirs: BTreeSet<String> = BTreeSet::new();
    for path in paths {
        dirs.extend(path.match_indices('/').map(|(i, _)| path[..i].to_string()));
    }
    let mut dirs: Vec<String> = dirs.into_iter().collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
    dirs
}

/// Remove the files and links `paths` under `root` (through directory handles, never below a
/// symlink, never a protected path), then the directories they leave empty.
fn delete_local(root: &Path, paths: &[String]) -> Result<()> {
    use std::ffi::OsStr;
    use transfer::dirfd::{Dir, Kind};
    let top = Dir::open(root).map_err(|e| Error::io(format!("opening {}", root.display()), e))?;
    let split = |path: &str| -> (String, String) {
        match path.rsplit_once('/') {
            Some((parent, leaf)) => (parent.to_string(), leaf.to_string()),
            None => (String::new(), path.to_string()),
        }
    };
    for path in paths {
        if protect::protected(path.as_bytes()).is_some() {
            continue;
        }
        let (parent, leaf) = split(path);
        let Ok(dir) = top.beneath(Path::new(&parent)) else {
            continue;
        };
        match dir.stat(OsStr::new(&leaf)) {
            Ok(Some(st)) if st.kind != Kind::Dir => dir
                .remove_file(OsStr::new(&leaf))
                .map_err(|e| Error::io(format!("deleting {}", root.join(path).display()), e))?,
            _ => continue,
        }
    }
    for dir in parents_deepest_first(paths) {
        // only empty ones go; anything else stays
        let (parent, leaf) = split(&dir);
        if let Ok(at) = top.beneath(Path::new(&parent)) {
            let _ = at.remove_dir(OsStr::new(&leaf));
        }
    }
    Ok(())
}

/// Why a name from the guest's listing cannot be a local path below the sync root, if it
/// cannot: absolute, `..`, NUL, `.` or empty components.
fn unsafe_listed_name(path: &str) -> Option<RefuseReason> {
    if let Err(why) = transfer::safe_name(path.as_bytes()) {
        return Some(why);
    }
    (path.is_empty() || path.split('/').any(|c| c.is_empty() || c == "."))
        .then_some(RefuseReason::BadName)
}

/// What is compared of the local file or symlink `rel` (`None`: gone, or another kind).
fn local_meta(root: &Path, rel: &str) -> Option<Meta> {
    let full = root.join(rel);
    let meta = std::fs::symlink_metadata(&full).ok()?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(&full).ok()?;
        return Some(Meta {
            size: 0,
            mtime_ns: mtime_ns(&meta),
            link: Some(target.to_str()?.to_string()),
        });
    }
    meta.is_file().then(|| Meta {
        size: meta.len(),
        mtime_ns: mtime_ns(&meta),
        link: None,
    })
}

/// Modification time in nanoseconds since the epoch.
fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    use std::os::unix::fs::MetadataExt;
    meta.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.mtime_nsec())
}

fn sha256_file(path: &Path) -> Option<String> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
    }
    Some(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_and_parents() {
        let dropped: BTreeSet<String> = ["target".to_string(), "a/.env".to_string()].into();
        assert!(out_of_scope("target/debug/x", &dropped));
        assert!(out_of_scope("a/.env", &dropped));
        assert!(!out_of_scope("targets/x", &dropped));
        assert_eq!(
            parents_deepest_first(&["a/b/c".into(), "a/d".into(), "e".into()]),
            ["a/b", "a"]
        );
    }

    #[test]
    fn listed_names_that_leave_the_root_are_refused() {
        assert_eq!(unsafe_listed_name("a/b"), None);
        assert_eq!(unsafe_listed_name("a\nb"), None);
        assert_eq!(
            unsafe_listed_name("/etc/passwd"),
            Some(RefuseReason::Absolute)
        );
        assert_eq!(
            unsafe_listed_name("a/../../x"),
            Some(RefuseReason::ParentDir)
        );
        assert_eq!(unsafe_listed_name("a//b"), Some(RefuseReason::BadName));
        assert_eq!(unsafe_listed_name("a\0b"), Some(RefuseReason::BadName));
    }

    #[test]
    fn local_deletions_never_follow_links_nor_touch_protected_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("x"), "keep").unwrap();
        std::fs::write(root.join("d/gone"), "").unwrap();
        std::fs::write(root.join(".git/config"), "keep").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        delete_local(
            &root,
            &["d/gone".into(), "link/x".into(), ".git/config".into()],
        )
        .unwrap();
        assert!(!root.join("d").exists(), "the emptied directory went too");
        assert!(outside.join("x").exists());
        assert!(root.join(".git/config").exists());
    }
}
