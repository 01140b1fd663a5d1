//! E19/E20 files: real files in the sandbox's filesystem view, streamed both ways.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderValue};
use axum::response::Response;
use axum::routing::put;
use axum::Router;
use futures::StreamExt;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use serde::Deserialize;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::auth::Caller;
use crate::envelope::{ok, ApiError};
use crate::guest_fs::{normalize, Entry, GuestFs};
use crate::isolation::as_sandbox_root;
use crate::operation::{op, Operation};
use crate::sandbox::SandboxRef;
use crate::state::AppState;

pub const OPERATIONS: &[Operation] = &[
    op(
        "uploadFile",
        "PUT",
        "/v1/sandboxes/{id}/files",
        "files::upload_file",
    ),
    op(
        "downloadFile",
        "GET",
        "/v1/sandboxes/{id}/files",
        "files::download_file",
    ),
];

pub fn routes() -> Router<AppState> {
    Router::new().route(
        "/v1/sandboxes/{id}/files",
        put(upload_file).get(download_file),
    )
}

#[derive(Debug, Default, Deserialize)]
pub struct PathQuery {
    pub path: Option<String>,
}

fn guest_path(q: &PathQuery) -> Result<&str, ApiError> {
    q.path
        .as_deref()
        .filter(|p| !p.is_empty())
        .ok_or_else(|| ApiError::validation("path", "path is required"))
}

fn path_error(err: std::io::Error) -> ApiError {
    match err.kind() {
        std::io::ErrorKind::NotFound => ApiError::not_found("path", "file not found"),
        _ => ApiError::validation("path", err.to_string()),
    }
}

/// Where an upload lands: its directory (created as needed) and the name inside it. Symlinks
/// resolve in guest space and the directory is opened below the sandbox's own directories
/// without following any host symlink (`guest_fs`), so a path cannot lead out of the sandbox.
fn upload_target(sandbox: &SandboxRef, guest: &str) -> Result<Entry, ApiError> {
    let fs = GuestFs::new(sandbox.runtime());
    let resolved = fs.resolve(guest, true).map_err(path_error)?;
    sandbox.runtime().writable_host_path(&resolved)?;
    match fs.lstat(&resolved) {
        Ok(meta) if meta.is_dir() => return Err(ApiError::validation("path", "is a directory")),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(path_error(e)),
    }
    let parent = normalize(&format!("{resolved}/.."), "/").map_err(path_error)?;
    fs.create_dir_all(&parent).map_err(|e| {
        ApiError::validation("path", format!("cannot create parent directories: {e}"))
    })?;
    fs.entry(&resolved).map_err(path_error)
}

pub async fn upload_file(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<PathQuery>,
    req: Request,
) -> Result<Response, ApiError> {
    let sandbox = state.running_sandbox(&caller, &id)?;
    let guest = crate::isolation::normalize_guest_path(guest_path(&q)?)?;
    if guest == "/" {
        return Err(ApiError::validation("path", "is a directory"));
    }
    let target = upload_target(&sandbox, &guest)?;

    // Stream into a temporary sibling, then rename over the target (never buffered whole).
    let tmp = format!(
        ".{}.upload-{}",
        target.name.to_string_lossy(),
        crate::ids::random_token(8)
    );
    let dir = target.dir.as_raw_fd();
    let runtime = sandbox.runtime();
    // Entry changes act as the sandbox's root (isolated sandboxes): its own files, its ids.
    let created = as_sandbox_root(runtime, || {
        Ok(nix::fcntl::openat(
            Some(dir),
            tmp.as_str(),
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_WRONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
            Mode::from_bits_truncate(0o644),
        )?)
    })
    .map_err(|e| ApiError::validation("path", format!("cannot create file: {e}")))?;
    // SAFETY: openat returned a fresh descriptor that nothing else owns.
    let mut file = tokio::fs::File::from_std(std::fs::File::from(unsafe {
        OwnedFd::from_raw_fd(created)
    }));
    let mut body = req.into_body().into_data_stream();
    let mut written: u64 = 0;
    sandbox.begin_busy();
    let copied: Result<(), ApiError> = async {
        while let Some(chunk) = body.next().await {
            let chunk = chunk
                .map_err(|e| ApiError::validation("body", format!("upload interrupted: {e}")))?;
            file.write_all(&chunk).await?;
            written += chunk.len() as u64;
        }
        file.flush().await?;
        file.sync_all().await?;
        Ok(())
    }
    .await;
    sandbox.end_busy();
    drop(file);
    let discard = || {
        as_sandbox_root(runtime, || {
            Ok(nix::unistd::unlinkat(
                Some(dir),
                tmp.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            )?)
        })
    };
    if let Err(err) = copied {
        let _ = discard();
        return Err(err);
    }
    let renamed = as_sandbox_root(runtime, || {
        Ok(nix::fcntl::renameat(
            Some(dir),
            tmp.as_str(),
            Some(dir),
            target.name.as_os_str(),
        )?)
    });
    if let Err(err) = renamed {
        let _ = discard();
        return Err(ApiError::validation(
            "path",
            format!("cannot store file: {err}"),
        ));
    }
    Ok(ok(json!({"path": guest, "bytes": written})))
}

pub async fn download_file(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<PathQuery>,
) -> Result<Response, ApiError> {
    let sandbox = state.running_sandbox(&caller, &id)?;
    let guest = crate::isolation::normalize_guest_path(guest_path(&q)?)?;
    let file = {
        let fs = GuestFs::new(sandbox.runtime());
        let resolved = fs.resolve(&guest, true).map_err(path_error)?;
        let fd = fs
            .open(&resolved, OFlag::O_RDONLY | OFlag::O_NONBLOCK, 0)
            .map_err(path_error)?;
        std::fs::File::from(fd)
    };
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(ApiError::validation("path", "is a directory"));
    }
    let file = tokio::fs::File::from_std(file);
    let stream = tokio_util::io::ReaderStream::with_capacity(file, 64 * 1024);
    let mut resp = Response::new(Body::from_stream(stream));
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if meta.is_file() {
        if let Ok(v) = HeaderValue::from_str(&meta.len().to_string()) {
            headers.insert(header::CONTENT_LENGTH, v);
        }
    }
    Ok(resp)
}
