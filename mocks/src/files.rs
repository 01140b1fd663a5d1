//! E19/E20 files: real files in the sandbox's filesystem view, streamed both ways.

use std::path::{Path as FsPath, PathBuf};

use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderValue};
use axum::response::Response;
use axum::routing::put;
use axum::Router;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::app::AppState;
use crate::auth::Caller;
use crate::envelope::{ok, ApiError};
use crate::routes::{op, Operation};
use crate::sandbox::SandboxRef;

pub const OPERATIONS: &[Operation] = &[
    op("uploadFile", "PUT", "/v1/sandboxes/{id}/files", "files::upload_file"),
    op("downloadFile", "GET", "/v1/sandboxes/{id}/files", "files::download_file"),
];

pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/sandboxes/{id}/files", put(upload_file).get(download_file))
}

#[derive(Debug, Default, Deserialize)]
pub struct PathQuery {
    pub path: Option<String>,
}

fn guest_path(q: &PathQuery) -> Result<&str, ApiError> {
    q.path.as_deref().filter(|p| !p.is_empty()).ok_or_else(|| ApiError::validation("path", "path is required"))
}

/// Roots a write may land in: the sandbox directory and its attached disks.
fn allowed_roots(sandbox: &SandboxRef) -> Vec<PathBuf> {
    let mut roots = vec![sandbox.runtime().dir().to_path_buf()];
    let disk_roots: Vec<String> = sandbox.record().disks.iter().map(|d| d.mount_path.clone()).collect();
    for guest in disk_roots {
        if let Ok(host) = sandbox.runtime().host_path(&guest) {
            roots.push(host);
        }
    }
    roots.into_iter().filter_map(|r| r.canonicalize().ok()).collect()
}

/// Refuses writes whose real location (after symlinks) leaves the sandbox's directories.
fn confine(target: &FsPath, roots: &[PathBuf]) -> Result<(), ApiError> {
    let parent = target.parent().ok_or_else(|| ApiError::validation("path", "invalid path"))?;
    let real_parent = parent.canonicalize().map_err(|_| ApiError::validation("path", "parent is not a directory"))?;
    let mut real = real_parent.join(target.file_name().unwrap_or_default());
    if let Ok(meta) = std::fs::symlink_metadata(&real) {
        if meta.file_type().is_symlink() {
            real = real
                .canonicalize()
                .map_err(|_| ApiError::validation("path", "path is a dangling symlink"))?;
        }
    }
    if roots.iter().any(|root| real.starts_with(root)) {
        Ok(())
    } else {
        Err(ApiError::validation("path", "path resolves outside the sandbox"))
    }
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
    let target = sandbox.runtime().writable_host_path(&guest)?;
    if target.is_dir() {
        return Err(ApiError::validation("path", "is a directory"));
    }
    let roots = allowed_roots(&sandbox);
    // Check the deepest existing ancestor first so no directory is created through a
    // symlink that points out of the sandbox.
    let mut existing = target.parent().map(FsPath::to_path_buf);
    while let Some(dir) = existing.clone() {
        if dir.exists() {
            let real = dir.canonicalize()?;
            if !roots.iter().any(|r| real.starts_with(r)) {
                return Err(ApiError::validation("path", "path resolves outside the sandbox"));
            }
            break;
        }
        existing = dir.parent().map(FsPath::to_path_buf);
    }
    if let Some(parent) = target.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| ApiError::validation("path", format!("cannot create parent directories: {e}")))?;
    }
    confine(&target, &roots)?;

    // Stream into a temporary sibling, then rename over the target (never buffered whole).
    let tmp = target.with_file_name(format!(
        ".{}.upload-{}",
        target.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        crate::ids::random_token(8)
    ));
    let mut file = tokio::fs::File::create(&tmp).await?;
    let mut body = req.into_body().into_data_stream();
    let mut written: u64 = 0;
    sandbox.begin_busy();
    let copied: Result<(), ApiError> = async {
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| ApiError::validation("body", format!("upload interrupted: {e}")))?;
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
    if let Err(err) = copied {
        let _ = tokio::fs::remove_file(&tmp).await;
        return Err(err);
    }
    if let Err(err) = tokio::fs::rename(&tmp, &target).await {
        let _ = tokio::fs::remove_file(&tmp).await;
        return Err(err.into());
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
    let host = sandbox.runtime().host_path(guest_path(&q)?)?;
    let meta = match tokio::fs::metadata(&host).await {
        Ok(m) => m,
        Err(_) => return Err(ApiError::not_found("path", "file not found")),
    };
    if meta.is_dir() {
        return Err(ApiError::validation("path", "is a directory"));
    }
    let file = tokio::fs::File::open(&host)
        .await
        .map_err(|e| ApiError::not_found("path", format!("cannot open file: {e}")))?;
    let stream = tokio_util::io::ReaderStream::with_capacity(file, 64 * 1024);
    let mut resp = Response::new(Body::from_stream(stream));
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    if meta.is_file() {
        if let Ok(v) = HeaderValue::from_str(&meta.len().to_string()) {
            headers.insert(header::CONTENT_LENGTH, v);
        }
    }
    Ok(resp)
}
