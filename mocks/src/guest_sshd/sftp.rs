//! `subsystem sftp` of the embedded guest sshd (russh-sftp's server side), operating on the
//! sandbox's filesystem as its processes see it (`crate::guest_fs`: guest-space symlinks,
//! race-free opens below the sandbox's directories). File I/O runs on the blocking pool;
//! open files use positioned reads and writes.

use std::collections::HashMap;
use std::fs::{File as FsFile, Metadata};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use russh_sftp::protocol::{
    Attrs, Data, File, FileAttributes, Handle, Name, OpenFlags, Status, StatusCode, Version,
};
use russh_sftp::server::StatusReply;

use crate::guest_fs::{normalize, GuestFs};
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
        SftpHandler {
            sandbox,
            home,
            handles: HashMap::new(),
            next_handle: 1,
        }
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
        tokio::task::spawn_blocking(move || {
            let runtime = sandbox.runtime();
            crate::isolation::as_sandbox_root(runtime, || op(&GuestFs::new(runtime)))
        })
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
    Status {
        id,
        status_code: StatusCode::Ok,
        error_message: "Ok".into(),
        language_tag: "en-US".into(),
    }
}

fn unix_secs(t: io::Result<std::time::SystemTime>) -> Option<u32> {
    t.ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs().min(u32::MAX as u64) as u32)
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

/// Applies size, owner, mode and times of `attrs` to the opened `file` (by descriptor,
/// so nothing is looked up by path again).
fn apply_attrs(file: &FsFile, attrs: &FileAttributes) -> io::Result<()> {
    if let Some(size) = attrs.size {
        file.set_len(size)?;
    }
    if attrs.uid.is_some() || attrs.gid.is_some() {
        std::os::unix::fs::fchown(file, attrs.uid, attrs.gid)?;
    }
    if let Some(mode) = attrs.permissions {
        file.set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))?;
    }
    if attrs.atime.is_some() || attrs.mtime.is_some() {
        let meta = file.metadata()?;
        let at = |secs: Option<u32>, current: io::Result<std::time::SystemTime>| {
            secs.map(|s| UNIX_EPOCH + Duration::from_secs(s as u64))
                .or_else(|| current.ok())
        };
        let mut times = std::fs::FileTimes::new();
        if let Some(a) = at(attrs.atime, meta.accessed()) {
            times = times.set_accessed(a);
        }
        if let Some(m) = at(attrs.mtime, meta.modified()) {
            times = times.set_modified(m);
        }
        file.set_times(times)?;
    }
    Ok(())
}

/// openat2 flags for an SFTP open.
fn open_flags(pflags: OpenFlags, writing: bool) -> OFlag {
    let read = pflags.contains(OpenFlags::READ) || !writing;
    let write = pflags.contains(OpenFlags::WRITE) || pflags.contains(OpenFlags::APPEND);
    let mut flags = match (read, write) {
        (true, true) => OFlag::O_RDWR,
        (false, true) => OFlag::O_WRONLY,
        _ => OFlag::O_RDONLY,
    };
    if pflags.contains(OpenFlags::APPEND) {
        flags |= OFlag::O_APPEND;
    }
    if pflags.contains(OpenFlags::TRUNCATE) {
        flags |= OFlag::O_TRUNC;
    }
    if pflags.contains(OpenFlags::CREATE) {
        flags |= OFlag::O_CREAT;
        if pflags.contains(OpenFlags::EXCLUDE) {
            flags |= OFlag::O_EXCL;
        }
    }
    flags
}

/// The parent directory and name of the entry `path` itself (its parents resolved in
/// guest space, the last component not followed), refused outside writable places.
fn writable_entry(fs: &GuestFs<'_>, path: &str) -> io::Result<crate::guest_fs::Entry> {
    let resolved = fs.resolve(path, false)?;
    fs.check_writable(&resolved)?;
    fs.entry(&resolved)
}

impl russh_sftp::server::Handler for SftpHandler {
    type Error = StatusReply;

    fn unimplemented(&self) -> Self::Error {
        StatusCode::OpUnsupported.into()
    }

    async fn init(
        &mut self,
        _version: u32,
        _extensions: HashMap<String, String>,
    ) -> Result<Version, Self::Error> {
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
        let writing = pflags.intersects(
            OpenFlags::WRITE | OpenFlags::APPEND | OpenFlags::CREATE | OpenFlags::TRUNCATE,
        );
        let file = self
            .fs(move |fs| {
                let resolved = fs.resolve(&path, true)?;
                if writing {
                    fs.check_writable(&resolved)?;
                }
                let mode = attrs.permissions.map_or(0o644, |m| m & 0o7777);
                let file = FsFile::from(fs.open(&resolved, open_flags(pflags, writing), mode)?);
                if file.metadata()?.is_dir() {
                    return Err(io::Error::other(format!("{path} is a directory")));
                }
                Ok(file)
            })
            .await?;
        Ok(Handle {
            id,
            handle: self.add(Open::File(Arc::new(file))),
        })
    }

    async fn close(&mut self, id: u32, handle: String) -> Result<Status, Self::Error> {
        match self.handles.remove(&handle) {
            Some(_) => Ok(ok(id)),
            None => Err(StatusCode::Failure.with_message("invalid handle")),
        }
    }

    async fn read(
        &mut self,
        id: u32,
        handle: String,
        offset: u64,
        len: u32,
    ) -> Result<Data, Self::Error> {
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

    async fn write(
        &mut self,
        id: u32,
        handle: String,
        offset: u64,
        data: Vec<u8>,
    ) -> Result<Status, Self::Error> {
        let file = self.file(&handle)?;
        self.fs(move |_| file.write_all_at(&data, offset)).await?;
        Ok(ok(id))
    }

    async fn lstat(&mut self, id: u32, path: String) -> Result<Attrs, Self::Error> {
        let path = self.path(&path)?;
        let attrs = self
            .fs(move |fs| Ok(attrs_of(&fs.lstat(&fs.resolve(&path, false)?)?)))
            .await?;
        Ok(Attrs { id, attrs })
    }

    async fn stat(&mut self, id: u32, path: String) -> Result<Attrs, Self::Error> {
        let path = self.path(&path)?;
        let attrs = self
            .fs(move |fs| Ok(attrs_of(&fs.lstat(&fs.resolve(&path, true)?)?)))
            .await?;
        Ok(Attrs { id, attrs })
    }

    async fn fstat(&mut self, id: u32, handle: String) -> Result<Attrs, Self::Error> {
        let file = self.file(&handle)?;
        let attrs = self.fs(move |_| Ok(attrs_of(&file.metadata()?))).await?;
        Ok(Attrs { id, attrs })
    }

    async fn setstat(
        &mut self,
        id: u32,
        path: String,
        attrs: FileAttributes,
    ) -> Result<Status, Self::Error> {
        let path = self.path(&path)?;
        self.fs(move |fs| {
            let resolved = fs.resolve(&path, true)?;
            fs.check_writable(&resolved)?;
            // Truncating needs a writable descriptor; the rest works on a read-only one.
            let access = if attrs.size.is_some() {
                OFlag::O_WRONLY
            } else {
                OFlag::O_RDONLY
            };
            let file = FsFile::from(fs.open(&resolved, access | OFlag::O_NONBLOCK, 0)?);
            apply_attrs(&file, &attrs)
        })
        .await?;
        Ok(ok(id))
    }

    async fn fsetstat(
        &mut self,
        id: u32,
        handle: String,
        attrs: FileAttributes,
    ) -> Result<Status, Self::Error> {
        let file = self.file(&handle)?;
        self.fs(move |_| apply_attrs(&file, &attrs)).await?;
        Ok(ok(id))
    }

    async fn opendir(&mut self, id: u32, path: String) -> Result<Handle, Self::Error> {
        let path = self.path(&path)?;
        let entries = self
            .fs(move |fs| {
                let entries = fs.list_dir(&fs.resolve(&path, true)?)?;
                Ok(entries
                    .into_iter()
                    .map(|(name, meta)| File::new(name.to_string_lossy(), attrs_of(&meta)))
                    .collect())
            })
            .await?;
        Ok(Handle {
            id,
            handle: self.add(Open::Dir(Some(entries))),
        })
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
            let entry = writable_entry(fs, &path)?;
            Ok(nix::unistd::unlinkat(
                Some(entry.dir.as_raw_fd()),
                entry.name.as_os_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            )?)
        })
        .await?;
        Ok(ok(id))
    }

    async fn mkdir(
        &mut self,
        id: u32,
        path: String,
        attrs: FileAttributes,
    ) -> Result<Status, Self::Error> {
        let path = self.path(&path)?;
        self.fs(move |fs| {
            let entry = writable_entry(fs, &path)?;
            let mode = Mode::from_bits_truncate(attrs.permissions.map_or(0o755, |m| m & 0o7777));
            Ok(nix::sys::stat::mkdirat(
                Some(entry.dir.as_raw_fd()),
                entry.name.as_os_str(),
                mode,
            )?)
        })
        .await?;
        Ok(ok(id))
    }

    async fn rmdir(&mut self, id: u32, path: String) -> Result<Status, Self::Error> {
        let path = self.path(&path)?;
        self.fs(move |fs| {
            let entry = writable_entry(fs, &path)?;
            Ok(nix::unistd::unlinkat(
                Some(entry.dir.as_raw_fd()),
                entry.name.as_os_str(),
                nix::unistd::UnlinkatFlags::RemoveDir,
            )?)
        })
        .await?;
        Ok(ok(id))
    }

    async fn realpath(&mut self, id: u32, path: String) -> Result<Name, Self::Error> {
        let path = self.path(&path)?;
        let real = self.fs(move |fs| fs.resolve(&path, true)).await?;
        Ok(Name {
            id,
            files: vec![File::dummy(real)],
        })
    }

    async fn rename(
        &mut self,
        id: u32,
        oldpath: String,
        newpath: String,
    ) -> Result<Status, Self::Error> {
        let from = self.path(&oldpath)?;
        let to = self.path(&newpath)?;
        self.fs(move |fs| {
            let (from, to) = (writable_entry(fs, &from)?, writable_entry(fs, &to)?);
            let (from_dir, to_dir) = (Some(from.dir.as_raw_fd()), Some(to.dir.as_raw_fd()));
            Ok(nix::fcntl::renameat(
                from_dir,
                from.name.as_os_str(),
                to_dir,
                to.name.as_os_str(),
            )?)
        })
        .await?;
        Ok(ok(id))
    }

    async fn readlink(&mut self, id: u32, path: String) -> Result<Name, Self::Error> {
        let path = self.path(&path)?;
        let target = self
            .fs(move |fs| fs.read_link(&fs.resolve(&path, false)?))
            .await?;
        Ok(Name {
            id,
            files: vec![File::dummy(target.to_string_lossy())],
        })
    }

    /// OpenSSH's sftp-server reads the first field as the link's target and the second as
    /// the link to create (the reverse of the draft's names); clients are written against
    /// OpenSSH, so this does the same.
    async fn symlink(
        &mut self,
        id: u32,
        linkpath: String,
        targetpath: String,
    ) -> Result<Status, Self::Error> {
        let target = linkpath;
        let link = self.path(&targetpath)?;
        self.fs(move |fs| {
            let entry = writable_entry(fs, &link)?;
            Ok(nix::unistd::symlinkat(
                target.as_str(),
                Some(entry.dir.as_raw_fd()),
                entry.name.as_os_str(),
            )?)
        })
        .await?;
        Ok(ok(id))
    }
}
