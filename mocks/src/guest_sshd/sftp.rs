//! `subsystem sftp` of the embedded guest sshd (russh-sftp's server side), operating on the
//! sandbox's filesystem as its processes see it (`guest_fs`). File I/O runs on the
//! blocking pool; open files use positioned reads and writes.

use std::collections::HashMap;
use std::fs::{File as FsFile, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use russh_sftp::protocol::{
    Attrs, Data, File, FileAttributes, Handle, Name, OpenFlags, Status, StatusCode, Version,
};
use russh_sftp::server::StatusReply;

use super::guest_fs::{normalize, GuestFs};
use crate::sandbox::SandboxRef;

/// Largest read answered at once (OpenSSH's sftp-server uses the same bound).
const MAX_READ: u32 = 256 * 1024;
/// Directory entries per READDIR answer.
const READDIR_BATCH: usize = 128;

enum Open {
    File(Arc<FsFile>),
    /// Entries not yet sent (`None` once the listing was read).
    Dir(Option<Vec<File>>),
}

/// One SFTP session.
pub struct SftpHandler {
    sandbox: SandboxRef,
    home: String,
    handles: HashMap<String, Open>,
    next_handle: u64,
}

impl SftpHandler {
    pub fn new(sandbox: SandboxRef, home: String) -> Self {
        SftpHandler { sandbox, home, handles: HashMap::new(), next_handle: 1 }
    }

    fn path(&self, raw: &str) -> Result<String, StatusReply> {
        normalize(raw, &self.home).map_err(reply)
    }

    fn add(&mut self, open: Open) -> String {
        let handle = self.next_handle.to_string();
        self.next_handle += 1;
        self.handles.insert(handle.clone(), open);
        handle
    }

    /// Runs `op` on the blocking pool with the sandbox's filesystem view.
    async fn fs<T, F>(&self, op: F) -> Result<T, StatusReply>
    where
        T: Send + 'static,
        F: FnOnce(&GuestFs<'_>) -> io::Result<T> + Send + 'static,
    {
        let sandbox = self.sandbox.clone();
        tokio::task::spawn_blocking(move || op(&GuestFs::new(sandbox.runtime())))
            .await
            .map_err(|e| StatusCode::Failure.with_message(format!("file operation aborted: {e}")))?
            .map_err(reply)
    }

    fn file(&self, handle: &str) -> Result<Arc<FsFile>, StatusReply> {
        match self.handles.get(handle) {
            Some(Open::File(file)) => Ok(file.clone()),
            _ => Err(StatusCode::Failure.with_message("invalid handle")),
        }
    }
}

fn reply(err: io::Error) -> StatusReply {
    let code = match err.kind() {
        io::ErrorKind::NotFound => StatusCode::NoSuchFile,
        io::ErrorKind::PermissionDenied => StatusCode::PermissionDenied,
        _ => StatusCode::Failure,
    };
    code.with_message(err.to_string())
}

fn ok(id: u32) -> Status {
    Status { id, status_code: StatusCode::Ok, error_message: "Ok".into(), language_tag: "en-US".into() }
}

fn unix_secs(t: io::Result<std::time::SystemTime>) -> Option<u32> {
    t.ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map(|d| d.as_secs().min(u32::MAX as u64) as u32)
}

/// Attributes of `meta`: size, owner, the full `st_mode` (type bits included) and times.
pub fn attrs_of(meta: &Metadata) -> FileAttributes {
    FileAttributes {
        size: Some(meta.len()),
        uid: Some(meta.uid()),
        gid: Some(meta.gid()),
        permissions: Some(meta.mode()),
        atime: unix_secs(meta.accessed()),
        mtime: unix_secs(meta.modified()),
        ..Default::default()
    }
}

/// Applies size, owner, mode and times of `attrs` to the host file `path` (symlinks
/// already resolved by the caller).
fn apply_attrs(path: &std::path::Path, attrs: &FileAttributes) -> io::Result<()> {
    if let Some(size) = attrs.size {
        OpenOptions::new().write(true).open(path)?.set_len(size)?;
    }
    if attrs.uid.is_some() || attrs.gid.is_some() {
        std::os::unix::fs::chown(path, attrs.uid, attrs.gid)?;
    }
    if let Some(mode) = attrs.permissions {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o7777))?;
    }
    if attrs.atime.is_some() || attrs.mtime.is_some() {
        let meta = std::fs::metadata(path)?;
        let at = |secs: Option<u32>, current: io::Result<std::time::SystemTime>| {
            secs.map(|s| UNIX_EPOCH + Duration::from_secs(s as u64)).or_else(|| current.ok())
        };
        let mut times = std::fs::FileTimes::new();
        if let Some(a) = at(attrs.atime, meta.accessed()) {
            times = times.set_accessed(a);
        }
        if let Some(m) = at(attrs.mtime, meta.modified()) {
            times = times.set_modified(m);
        }
        FsFile::open(path)?.set_times(times)?;
    }
    Ok(())
}

impl russh_sftp::server::Handler for SftpHandler {
    type Error = StatusReply;

    fn unimplemented(&self) -> Self::Error {
        StatusCode::OpUnsupported.into()
    }

    async fn init(&mut self, _version: u32, _extensions: HashMap<String, String>) -> Result<Version, Self::Error> {
        Ok(Version::new())
    }

    async fn open(
        &mut self,
        id: u32,
        filename: String,
        pflags: OpenFlags,
        attrs: FileAttributes,
    ) -> Result<Handle, Self::Error> {
        let path = self.path(&filename)?;
        let writing = pflags.intersects(OpenFlags::WRITE | OpenFlags::APPEND | OpenFlags::CREATE | OpenFlags::TRUNCATE);
        let file = self
            .fs(move |fs| {
                let host = if writing { fs.writable_followed(&path)? } else { fs.host_followed(&path)? };
                let mut options = OpenOptions::new();
                options
                    .read(pflags.contains(OpenFlags::READ) || !writing)
                    .write(pflags.contains(OpenFlags::WRITE))
                    .append(pflags.contains(OpenFlags::APPEND))
                    .truncate(pflags.contains(OpenFlags::TRUNCATE))
                    .mode(attrs.permissions.map_or(0o644, |m| m & 0o7777));
                if pflags.contains(OpenFlags::CREATE) {
                    if pflags.contains(OpenFlags::EXCLUDE) {
                        options.create_new(true);
                    } else {
                        options.create(true);
                    }
                }
                let file = options.open(&host)?;
                if file.metadata()?.is_dir() {
                    return Err(io::Error::other(format!("{path} is a directory")));
                }
                Ok(file)
            })
            .await?;
        Ok(Handle { id, handle: self.add(Open::File(Arc::new(file))) })
    }

    async fn close(&mut self, id: u32, handle: String) -> Result<Status, Self::Error> {
        match self.handles.remove(&handle) {
            Some(_) => Ok(ok(id)),
            None => Err(StatusCode::Failure.with_message("invalid handle")),
        }
    }

    async fn read(&mut self, id: u32, handle: String, offset: u64, len: u32) -> Result<Data, Self::Error> {
        let file = self.file(&handle)?;
        let len = len.min(MAX_READ) as usize;
        let data = self
            .fs(move |_| {
                let mut buf = vec![0u8; len];
                let mut filled = 0;
                while filled < len {
                    match file.read_at(&mut buf[filled..], offset + filled as u64) {
                        Ok(0) => break,
                        Ok(n) => filled += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                buf.truncate(filled);
                Ok(buf)
            })
            .await?;
        if data.is_empty() && len > 0 {
            return Err(StatusCode::Eof.into());
        }
        Ok(Data { id, data })
    }

    async fn write(&mut self, id: u32, handle: String, offset: u64, data: Vec<u8>) -> Result<Status, Self::Error> {
        let file = self.file(&handle)?;
        self.fs(move |_| file.write_all_at(&data, offset)).await?;
        Ok(ok(id))
    }

    async fn lstat(&mut self, id: u32, path: String) -> Result<Attrs, Self::Error> {
        let path = self.path(&path)?;
        let attrs = self.fs(move |fs| Ok(attrs_of(&std::fs::symlink_metadata(fs.host_of_entry(&path)?)?))).await?;
        Ok(Attrs { id, attrs })
    }

    async fn stat(&mut self, id: u32, path: String) -> Result<Attrs, Self::Error> {
        let path = self.path(&path)?;
        let attrs = self.fs(move |fs| Ok(attrs_of(&std::fs::metadata(fs.host_followed(&path)?)?))).await?;
        Ok(Attrs { id, attrs })
    }

    async fn fstat(&mut self, id: u32, handle: String) -> Result<Attrs, Self::Error> {
        let file = self.file(&handle)?;
        let attrs = self.fs(move |_| Ok(attrs_of(&file.metadata()?))).await?;
        Ok(Attrs { id, attrs })
    }

    async fn setstat(&mut self, id: u32, path: String, attrs: FileAttributes) -> Result<Status, Self::Error> {
        let path = self.path(&path)?;
        self.fs(move |fs| apply_attrs(&fs.writable_followed(&path)?, &attrs)).await?;
        Ok(ok(id))
    }

    async fn fsetstat(&mut self, id: u32, handle: String, attrs: FileAttributes) -> Result<Status, Self::Error> {
        let file = self.file(&handle)?;
        self.fs(move |_| {
            if let Some(size) = attrs.size {
                file.set_len(size)?;
            }
            if let Some(mode) = attrs.permissions {
                file.set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))?;
            }
            if attrs.uid.is_some() || attrs.gid.is_some() {
                std::os::unix::fs::fchown(file.as_ref(), attrs.uid, attrs.gid)?;
            }
            if let Some(mtime) = attrs.mtime {
                let mut times = std::fs::FileTimes::new().set_modified(UNIX_EPOCH + Duration::from_secs(mtime as u64));
                if let Some(atime) = attrs.atime {
                    times = times.set_accessed(UNIX_EPOCH + Duration::from_secs(atime as u64));
                }
                file.set_times(times)?;
            }
            Ok(())
        })
        .await?;
        Ok(ok(id))
    }

    async fn opendir(&mut self, id: u32, path: String) -> Result<Handle, Self::Error> {
        let path = self.path(&path)?;
        let entries = self
            .fs(move |fs| {
                let host = fs.host_followed(&path)?;
                let mut files = Vec::new();
                for name in [".", ".."] {
                    files.push(File::new(name, attrs_of(&std::fs::metadata(host.join(name))?)));
                }
                for entry in std::fs::read_dir(&host)? {
                    let entry = entry?;
                    // An entry removed meanwhile is skipped, as readdir(3) would not list it.
                    let Ok(meta) = std::fs::symlink_metadata(entry.path()) else { continue };
                    files.push(File::new(entry.file_name().to_string_lossy(), attrs_of(&meta)));
                }
                Ok(files)
            })
            .await?;
        Ok(Handle { id, handle: self.add(Open::Dir(Some(entries))) })
    }

    async fn readdir(&mut self, id: u32, handle: String) -> Result<Name, Self::Error> {
        let Some(Open::Dir(pending)) = self.handles.get_mut(&handle) else {
            return Err(StatusCode::Failure.with_message("invalid handle"));
        };
        match pending {
            Some(files) if !files.is_empty() => {
                let take = files.len().min(READDIR_BATCH);
                let batch: Vec<File> = files.drain(..take).collect();
                Ok(Name { id, files: batch })
            }
            _ => {
                *pending = None;
                Err(StatusCode::Eof.into())
            }
        }
    }

    async fn remove(&mut self, id: u32, filename: String) -> Result<Status, Self::Error> {
        let path = self.path(&filename)?;
        self.fs(move |fs| {
            let host = fs.writable_entry(&path)?;
            if std::fs::symlink_metadata(&host)?.is_dir() {
                return Err(io::Error::other(format!("{path} is a directory")));
            }
            std::fs::remove_file(host)
        })
        .await?;
        Ok(ok(id))
    }

    async fn mkdir(&mut self, id: u32, path: String, attrs: FileAttributes) -> Result<Status, Self::Error> {
        let path = self.path(&path)?;
        self.fs(move |fs| {
            let host = fs.writable_entry(&path)?;
            std::fs::DirBuilder::new()
                .mode(attrs.permissions.map_or(0o755, |m| m & 0o7777))
                .create(host)
        })
        .await?;
        Ok(ok(id))
    }

    async fn rmdir(&mut self, id: u32, path: String) -> Result<Status, Self::Error> {
        let path = self.path(&path)?;
        self.fs(move |fs| std::fs::remove_dir(fs.writable_entry(&path)?)).await?;
        Ok(ok(id))
    }

    async fn realpath(&mut self, id: u32, path: String) -> Result<Name, Self::Error> {
        let path = self.path(&path)?;
        let real = self.fs(move |fs| fs.resolve(&path, true)).await?;
        Ok(Name { id, files: vec![File::dummy(real)] })
    }

    async fn rename(&mut self, id: u32, oldpath: String, newpath: String) -> Result<Status, Self::Error> {
        let from = self.path(&oldpath)?;
        let to = self.path(&newpath)?;
        self.fs(move |fs| std::fs::rename(fs.writable_entry(&from)?, fs.writable_entry(&to)?)).await?;
        Ok(ok(id))
    }

    async fn readlink(&mut self, id: u32, path: String) -> Result<Name, Self::Error> {
        let path = self.path(&path)?;
        let target = self.fs(move |fs| std::fs::read_link(fs.host_of_entry(&path)?)).await?;
        Ok(Name { id, files: vec![File::dummy(target.to_string_lossy())] })
    }

    /// OpenSSH's sftp-server reads the first field as the link's target and the second as
    /// the link to create (the reverse of the draft's names); clients are written against
    /// OpenSSH, so this does the same.
    async fn symlink(&mut self, id: u32, linkpath: String, targetpath: String) -> Result<Status, Self::Error> {
        let target = linkpath;
        let link = self.path(&targetpath)?;
        self.fs(move |fs| std::os::unix::fs::symlink(&target, fs.writable_entry(&link)?)).await?;
        Ok(ok(id))
    }
}
