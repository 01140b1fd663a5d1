//! SFTP over the session: metadata, listings, directories, renames and removals. Streaming
//! reads and atomic writes are in [`super::sftp_io`].
//!
//! One SFTP channel per connection serves every caller (requests carry ids, so they
//! interleave). Every path must be absolute without `..` segments. Operations that change
//! nothing on the guest (stat, list, open for reading) are retried once after a reconnect
//! when the connection dropped under them.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use russh::ChannelMsg;
use russh_sftp::client::RawSftpSession;
use russh_sftp::protocol::{FileAttributes, StatusCode};

use crate::error::{Error, Result};

use super::error::{sftp_error, SftpErrorKind, SshError};
use super::session::{open_session_channel, Connection, SshSession};

/// Seconds an SFTP request may go unanswered.
const SFTP_REQUEST_TIMEOUT_SECS: u64 = 60;
/// The OpenSSH extension for rename-with-replace.
pub(crate) const POSIX_RENAME: &str = "posix-rename@openssh.com";
/// The OpenSSH extension for fsync of an open handle.
pub(crate) const FSYNC: &str = "fsync@openssh.com";

/// An SFTP channel and what its server supports.
pub(crate) struct SftpChannel {
    pub(crate) raw: Arc<RawSftpSession>,
    extensions: HashMap<String, String>,
}

impl SftpChannel {
    pub(crate) fn supports(&self, extension: &str) -> bool {
        self.extensions.contains_key(extension)
    }

    /// A channel over an already initialised session, with no extensions (scripted servers).
    #[cfg(test)]
    pub(crate) fn for_tests(raw: RawSftpSession) -> SftpChannel {
        SftpChannel {
            raw: Arc::new(raw),
            extensions: HashMap::new(),
        }
    }
}

/// Kind of a remote file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteFileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (only from [`SshSession::lstat`] and listings).
    Symlink,
    /// Anything else (device, socket, FIFO).
    Other,
}

/// Metadata of a remote file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteMetadata {
    /// Kind.
    pub kind: RemoteFileKind,
    /// Size in bytes.
    pub size: u64,
    /// Permission bits (`0o7777` part of the mode).
    pub mode: u32,
    /// Owner uid.
    pub uid: Option<u32>,
    /// Owner gid.
    pub gid: Option<u32>,
    /// Last modification.
    pub modified: Option<SystemTime>,
}

impl RemoteMetadata {
    /// A directory.
    pub fn is_dir(&self) -> bool {
        self.kind == RemoteFileKind::Dir
    }

    /// A regular file.
    pub fn is_file(&self) -> bool {
        self.kind == RemoteFileKind::File
    }

    pub(crate) fn from_attrs(attrs: &FileAttributes) -> Self {
        let kind = match attrs.permissions.map(|mode| mode & 0o170000) {
            Some(0o040000) => RemoteFileKind::Dir,
            Some(0o100000) => RemoteFileKind::File,
            Some(0o120000) => RemoteFileKind::Symlink,
            _ => RemoteFileKind::Other,
        };
        RemoteMetadata {
            kind,
            size: attrs.size.unwrap_or(0),
            mode: attrs.permissions.unwrap_or(0) & 0o7777,
            uid: attrs.uid,
            gid: attrs.gid,
            modified: attrs
                .mtime
                .map(|s| UNIX_EPOCH + Duration::from_secs(u64::from(s))),
        }
    }
}

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteEntry {
    /// File name (no directory part).
    pub name: String,
    /// Its metadata (symlinks are not followed).
    pub metadata: RemoteMetadata,
}

/// An absolute guest path without `..` (and not the empty string).
pub(crate) fn check_path(field: &str, path: &str) -> Result<()> {
    crate::validate::guest_path(field, path)
}

/// `(parent, name)` of a normalised absolute path; `None` for `/`.
pub(crate) fn split_parent(path: &str) -> Option<(String, String)> {
    let trimmed = path.trim_end_matches('/');
    let (parent, name) = trimmed.rsplit_once('/')?;
    if name.is_empty() {
        return None;
    }
    let parent = if parent.is_empty() {
        "/".to_string()
    } else {
        parent.to_string()
    };
    Some((parent, name.to_string()))
}

async fn open_sftp(conn: &Connection) -> std::result::Result<SftpChannel, SshError> {
    let mut channel = open_session_channel(&conn.guest).await?;
    channel
        .request_subsystem(true, "sftp")
        .await
        .map_err(|e| SshError::protocol("starting SFTP", e))?;
    loop {
        match channel.wait().await {
            Some(ChannelMsg::Success) => break,
            Some(ChannelMsg::Failure) => {
                return Err(SshError::RequestRefused {
                    request: "subsystem sftp".into(),
                })
            }
            Some(ChannelMsg::Close) | None => {
                return Err(SshError::protocol(
                    "starting SFTP",
                    "the channel closed before the subsystem started",
                ))
            }
            Some(_) => {}
        }
    }
    let config = russh_sftp::client::Config {
        request_timeout_secs: SFTP_REQUEST_TIMEOUT_SECS,
        ..Default::default()
    };
    let raw = RawSftpSession::new_with_config(channel.into_stream(), config);
    let version = raw.init().await.map_err(|e| sftp_error("init", "", e))?;
    Ok(SftpChannel {
        raw: Arc::new(raw),
        extensions: version.extensions,
    })
}

impl SshSession {
    /// The connection's SFTP channel, opened on first use (reconnecting once if the
    /// connection is dead).
    pub(crate) async fn sftp_channel(&self) -> Result<(Arc<SftpChannel>, Arc<Connection>)> {
        let mut last = None;
        for _ in 0..2 {
            let conn = self.connection().await?;
            let mut slot = conn.sftp.lock().await;
            if let Some(sftp) = slot.as_ref() {
                return Ok((sftp.clone(), conn.clone()));
            }
            match open_sftp(&conn).await {
                Ok(sftp) => {
                    let sftp = Arc::new(sftp);
                    *slot = Some(sftp.clone());
                    return Ok((sftp, conn.clone()));
                }
                Err(err) if err.is_connection_lost() => {
                    drop(slot);
                    self.invalidate(&conn).await;
                    last = Some(err);
                }
                Err(err) => return Err(err.into()),
            }
        }
        Err(last.map(Error::from).unwrap_or(Error::Cancelled))
    }

    /// Forget a broken SFTP channel (and the connection, if it died).
    pub(crate) async fn sftp_failed(&self, sftp: &Arc<SftpChannel>, conn: &Arc<Connection>) {
        let mut slot = conn.sftp.lock().await;
        if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, sftp)) {
            *slot = None;
        }
        drop(slot);
        self.invalidate(conn).await;
    }

    /// Run an SFTP operation; one retry on a fresh connection when the connection was lost
    /// and `idempotent` says trying again cannot do harm.
    pub(crate) async fn with_sftp<T, F, Fut>(&self, idempotent: bool, op: F) -> Result<T>
    where
        F: Fn(Arc<SftpChannel>) -> Fut,
        Fut: Future<Output = std::result::Result<T, SshError>>,
    {
        let attempts = if idempotent { 2 } else { 1 };
        let mut last = None;
        for _ in 0..attempts {
            let (sftp, conn) = self.sftp_channel().await?;
            match op(sftp.clone()).await {
                Ok(value) => return Ok(value),
                Err(err) if err.is_connection_lost() => {
                    self.sftp_failed(&sftp, &conn).await;
                    last = Some(err);
                }
                Err(err) => return Err(err.into()),
            }
        }
        Err(last.map(Error::from).unwrap_or(Error::Cancelled))
    }

    /// Metadata of `path`, following symlinks.
    pub async fn stat(&self, path: &str) -> Result<RemoteMetadata> {
        check_path("path", path)?;
        self.with_sftp(true, |sftp| async move {
            let attrs = sftp
                .raw
                .stat(path)
                .await
                .map_err(|e| sftp_error("stat", path, e))?;
            Ok(RemoteMetadata::from_attrs(&attrs.attrs))
        })
        .await
    }

    /// Metadata of `path` itself (a symlink is reported as one).
    pub async fn lstat(&self, path: &str) -> Result<RemoteMetadata> {
        check_path("path", path)?;
        self.with_sftp(true, |sftp| async move {
            let attrs = sftp
                .raw
                .lstat(path)
                .await
                .map_err(|e| sftp_error("lstat", path, e))?;
            Ok(RemoteMetadata::from_attrs(&attrs.attrs))
        })
        .await
    }

    /// Whether `path` exists (symlinks followed).
    pub async fn exists(&self, path: &str) -> Result<bool> {
        match self.stat(path).await {
            Ok(_) => Ok(true),
            Err(e) if e.ssh().is_some_and(SshError::is_not_found) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Entries of the directory `path` (without `.` and `..`), sorted by name.
    pub async fn list(&self, path: &str) -> Result<Vec<RemoteEntry>> {
        check_path("path", path)?;
        self.with_sftp(true, |sftp| async move { list_dir(&sftp, path).await })
            .await
    }

    /// Create the directory `path` (its parent must exist).
    pub async fn mkdir(&self, path: &str) -> Result<()> {
        check_path("path", path)?;
        self.with_sftp(false, |sftp| async move {
            sftp.raw
                .mkdir(path, FileAttributes::empty())
                .await
                .map(|_| ())
                .map_err(|e| sftp_error("mkdir", path, e))
        })
        .await
    }

    /// Create `path` and any missing parents; fine when it already is a directory.
    pub async fn mkdir_p(&self, path: &str) -> Result<()> {
        check_path("path", path)?;
        self.with_sftp(true, |sftp| async move { mkdir_all(&sftp, path).await })
            .await
    }

    /// Rename `from` to `to`, replacing `to` when it is a file (POSIX `rename`; the OpenSSH
    /// `posix-rename` extension when the server has it).
    pub async fn rename(&self, from: &str, to: &str) -> Result<()> {
        check_path("from", from)?;
        check_path("to", to)?;
        self.with_sftp(false, |sftp| async move {
            rename_replacing(&sftp, from, to).await
        })
        .await
    }

    /// Remove the file (or symlink) `path`.
    pub async fn remove_file(&self, path: &str) -> Result<()> {
        check_path("path", path)?;
        self.with_sftp(false, |sftp| async move {
            sftp.raw
                .remove(path)
                .await
                .map(|_| ())
                .map_err(|e| sftp_error("remove", path, e))
        })
        .await
    }

    /// Remove the empty directory `path`.
    pub async fn remove_dir(&self, path: &str) -> Result<()> {
        check_path("path", path)?;
        self.with_sftp(false, |sftp| async move {
            sftp.raw
                .rmdir(path)
                .await
                .map(|_| ())
                .map_err(|e| sftp_error("rmdir", path, e))
        })
        .await
    }

    /// Remove `path` and, for a directory, everything below it (symlinks are removed, never
    /// followed). Refuses `/`.
    pub async fn remove_dir_all(&self, path: &str) -> Result<()> {
        check_path("path", path)?;
        if path.trim_end_matches('/').is_empty() {
            return Err(Error::invalid("path", "refusing to remove /"));
        }
        // Not retried: a retry after a partial removal would report the path as missing.
        self.with_sftp(false, |sftp| async move { remove_tree(&sftp, path).await })
            .await
    }
}

async fn list_dir(
    sftp: &SftpChannel,
    path: &str,
) -> std::result::Result<Vec<RemoteEntry>, SshError> {
    let handle = sftp
        .raw
        .opendir(path)
        .await
        .map_err(|e| sftp_error("opendir", path, e))?
        .handle;
    let mut entries = Vec::new();
    let outcome = loop {
        match sftp.raw.readdir(handle.as_str()).await {
            Ok(name) => {
                for file in name.files {
                    if file.filename == "." || file.filename == ".." {
                        continue;
                    }
                    entries.push(RemoteEntry {
                        metadata: RemoteMetadata::from_attrs(&file.attrs),
                        name: file.filename,
                    });
                }
            }
            Err(russh_sftp::client::error::Error::Status(s))
                if s.status_code == StatusCode::Eof =>
            {
                break Ok(())
            }
            Err(e) => break Err(sftp_error("readdir", path, e)),
        }
    };
    let _ = sftp.raw.close(handle).await;
    outcome?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

pub(crate) async fn mkdir_all(sftp: &SftpChannel, path: &str) -> std::result::Result<(), SshError> {
    // Walk down from the root: stat each prefix, create the missing ones.
    let mut prefix = String::new();
    for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        prefix.push('/');
        prefix.push_str(part);
        match sftp.raw.stat(prefix.as_str()).await {
            Ok(attrs) => {
                if !RemoteMetadata::from_attrs(&attrs.attrs).is_dir() {
                    return Err(SshError::Sftp {
                        op: "mkdir",
                        path: prefix,
                        kind: SftpErrorKind::Failure,
                        message: "exists and is not a directory".to_string(),
                    });
                }
            }
            Err(e) => {
                let err = sftp_error("stat", &prefix, e);
                if !err.is_not_found() {
                    return Err(err);
                }
                if let Err(e) = sftp
                    .raw
                    .mkdir(prefix.as_str(), FileAttributes::empty())
                    .await
                {
                    // Someone else may have created it meanwhile.
                    let created = sftp.raw.stat(prefix.as_str()).await;
                    if !created.is_ok_and(|a| RemoteMetadata::from_attrs(&a.attrs).is_dir()) {
                        return Err(sftp_error("mkdir", &prefix, e));
                    }
                }
            }
        }
    }
    Ok(())
}

/// `posix-rename@openssh.com` payload: two SSH strings.
fn rename_payload(from: &str, to: &str) -> Vec<u8> {
    let mut data = Vec::with_capacity(8 + from.len() + to.len());
    for s in [from, to] {
        data.extend_from_slice(&(s.len() as u32).to_be_bytes());
        data.extend_from_slice(s.as_bytes());
    }
    data
}

pub(crate) async fn rename_replacing(
    sftp: &SftpChannel,
    from: &str,
    to: &str,
) -> std::result::Result<(), SshError> {
    use russh_sftp::protocol::Packet;
    if sftp.supports(POSIX_RENAME) {
        let reply = sftp
            .raw
            .extended(POSIX_RENAME, rename_payload(from, to))
            .await
            .map_err(|e| sftp_error("rename", from, e))?;
        return match reply {
            Packet::Status(s) if s.status_code == StatusCode::Ok => Ok(()),
            Packet::Status(s) => Err(sftp_error("rename", from, s.into())),
            _ => Err(sftp_error(
                "rename",
                from,
                russh_sftp::client::error::Error::UnexpectedPacket,
            )),
        };
    }
    // Plain SFTP rename refuses an existing target: remove it first (not atomic).
    match sftp.raw.rename(from, to).await {
        Ok(_) => Ok(()),
        Err(first) => {
            let target = sftp
                .raw
                .lstat(to)
                .await
                .map(|a| RemoteMetadata::from_attrs(&a.attrs));
            match target {
                Ok(meta) if !meta.is_dir() => {
                    sftp.raw
                        .remove(to)
                        .await
                        .map_err(|e| sftp_error("rename", to, e))?;
                    sftp.raw
                        .rename(from, to)
                        .await
                        .map(|_| ())
                        .map_err(|e| sftp_error("rename", from, e))
                }
                _ => Err(sftp_error("rename", from, first)),
            }
        }
    }
}

/// Depth-first removal without following symlinks.
async fn remove_tree(sftp: &SftpChannel, path: &str) -> std::result::Result<(), SshError> {
    let meta = RemoteMetadata::from_attrs(
        &sftp
            .raw
            .lstat(path)
            .await
            .map_err(|e| sftp_error("lstat", path, e))?
            .attrs,
    );
    if !meta.is_dir() {
        return sftp
            .raw
            .remove(path)
            .await
            .map(|_| ())
            .map_err(|e| sftp_error("remove", path, e));
    }
    // An explicit stack instead of recursion (async recursion needs boxing).
    let mut stack = vec![(path.trim_end_matches('/').to_string(), false)];
    while let Some((dir, listed)) = stack.pop() {
        if listed {
            sftp.raw
                .rmdir(dir.as_str())
                .await
                .map_err(|e| sftp_error("rmdir", &dir, e))?;
            continue;
        }
        stack.push((dir.clone(), true));
        for entry in list_dir(sftp, &dir).await? {
            let child = format!("{dir}/{}", entry.name);
            if entry.metadata.is_dir() {
                stack.push((child, false));
            } else {
                sftp.raw
                    .remove(child.as_str())
                    .await
                    .map_err(|e| sftp_error("remove", &child, e))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents() {
        assert_eq!(split_parent("/a/b"), Some(("/a".into(), "b".into())));
        assert_eq!(split_parent("/a"), Some(("/".into(), "a".into())));
        assert_eq!(split_parent("/a/b/"), Some(("/a".into(), "b".into())));
        assert_eq!(split_parent("/"), None);
    }

    #[test]
    fn rename_payload_is_two_strings() {
        assert_eq!(rename_payload("/a", "/bc"), b"\0\0\0\x02/a\0\0\0\x03/bc");
    }

    #[test]
    fn metadata_kinds() {
        let attrs = FileAttributes {
            size: Some(5),
            permissions: Some(0o100644),
            mtime: Some(10),
            ..Default::default()
        };
        let meta = RemoteMetadata::from_attrs(&attrs);
        assert!(meta.is_file());
        assert_eq!(meta.mode, 0o644);
        assert_eq!(meta.size, 5);
        assert_eq!(meta.modified, Some(UNIX_EPOCH + Duration::from_secs(10)));
        let dir = FileAttributes {
            permissions: Some(0o040755),
            ..Default::default()
        };
        assert!(RemoteMetadata::from_attrs(&dir).is_dir());
    }
}
