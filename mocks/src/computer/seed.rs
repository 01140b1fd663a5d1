//! What a newly launched or opened window starts with: its application, title, text
//! (a document's contents, a directory listing, a terminal prompt) and a browser's
//! location. Local paths are looked up in the sandbox's own files, so opening a file the
//! sandbox wrote shows its real contents and opening a missing one fails like xdg-open.

use std::path::PathBuf;

use super::access::desktop_unavailable;
use super::apps::{self, AppKind, AppSpec, OpenTarget, TargetError};
use super::model::{Window, MAX_WINDOW_TEXT};
use crate::envelope::ApiError;
use crate::sandbox::SandboxRef;

/// Directory entries a file manager window lists at most.
const MAX_LISTING: usize = 10_000;

/// The initial state of a window about to be mapped.
#[derive(Debug, Clone)]
pub struct WindowSeed {
    pub app: &'static AppSpec,
    pub title: String,
    pub text: String,
    pub location: Option<String>,
    pub cwd: Option<String>,
}

impl WindowSeed {
    /// Copies the seed into a freshly added window.
    pub fn apply(self, w: &mut Window) {
        w.title = self.title;
        w.text = self.text;
        w.location = self.location;
        w.cwd = self.cwd;
    }
}

/// A guest path as found in the sandbox.
enum Entry {
    Missing,
    Dir(Vec<String>),
    File { head: Vec<u8>, size: u64 },
}

async fn inspect(sandbox: &SandboxRef, guest: &str) -> Result<Entry, ApiError> {
    if sandbox.runtime().isolated() {
        let (sandbox, guest) = (
            sandbox.clone(),
            crate::isolation::normalize_guest_path(guest)?,
        );
        return tokio::task::spawn_blocking(move || inspect_guest(&sandbox, &guest))
            .await
            .map_err(|_| ApiError::internal("file inspection task failed"))?;
    }
    let host: PathBuf = sandbox.runtime().host_path(guest)?;
    tokio::task::spawn_blocking(move || inspect_host(&host))
        .await
        .map_err(|_| ApiError::internal("file inspection task failed"))?
}

/// [`inspect_host`] through an isolated sandbox's own view, as its root.
fn inspect_guest(sandbox: &SandboxRef, guest: &str) -> Result<Entry, ApiError> {
    let fs = crate::guest_fs::GuestFs::new(sandbox.runtime());
    let resolved = match fs
        .resolve(guest, true)
        .and_then(|r| fs.lstat(&r).map(|m| (r, m)))
    {
        Ok(found) => found,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Entry::Missing),
        Err(e) => return Err(desktop_unavailable(format!("cannot open: {}", e.kind()))),
    };
    if resolved.1.is_dir() {
        let entries = fs
            .list_dir(&resolved.0)
            .map_err(|e| desktop_unavailable(format!("cannot list folder: {}", e.kind())))?;
        let mut names: Vec<String> = entries
            .into_iter()
            .filter_map(|(name, meta)| {
                let name = name.to_string_lossy().into_owned();
                (!name.starts_with('.')).then(|| {
                    if meta.is_dir() {
                        format!("{name}/")
                    } else {
                        name
                    }
                })
            })
            .take(MAX_LISTING)
            .collect();
        names.sort();
        return Ok(Entry::Dir(names));
    }
    match fs.read_head(&resolved.0, MAX_WINDOW_TEXT as u64) {
        Ok(Some((head, size))) => Ok(Entry::File { head, size }),
        Ok(None) => Ok(Entry::Missing),
        Err(e) => Err(desktop_unavailable(format!(
            "cannot read file: {}",
            e.kind()
        ))),
    }
}

fn inspect_host(host: &std::path::Path) -> Result<Entry, ApiError> {
    use std::io::Read;
    let meta = match std::fs::metadata(host) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Entry::Missing),
        Err(e) => return Err(desktop_unavailable(format!("cannot open: {}", e.kind()))),
    };
    if meta.is_dir() {
        let mut names: Vec<String> = std::fs::read_dir(host)
            .map_err(|e| desktop_unavailable(format!("cannot list folder: {}", e.kind())))?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                // File managers hide dot files by default.
                if name.starts_with('.') {
                    return None;
                }
                let dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
                Some(if dir { format!("{name}/") } else { name })
            })
            .take(MAX_LISTING)
            .collect();
        names.sort();
        return Ok(Entry::Dir(names));
    }
    let mut head = Vec::new();
    std::fs::File::open(host)
        .and_then(|f| f.take(MAX_WINDOW_TEXT as u64).read_to_end(&mut head))
        .map_err(|e| desktop_unavailable(format!("cannot read file: {}", e.kind())))?;
    Ok(Entry::File {
        head,
        size: meta.len(),
    })
}

fn missing(path: &str) -> ApiError {
    desktop_unavailable(format!("cannot open {path}: no such file or directory"))
}

/// `xdg-open <target>` (E69).
pub async fn for_open(sandbox: &SandboxRef, target: &str) -> Result<WindowSeed, ApiError> {
    let hostname = sandbox.runtime().hostname().to_string();
    match apps::classify_target(target).map_err(|e| target_error("target", e))? {
        OpenTarget::Url(url) => Ok(browser(apps::default_browser(), Some(url))),
        OpenTarget::Path(path) => match inspect(sandbox, &path).await? {
            Entry::Missing => Err(missing(&path)),
            entry => {
                let app = match entry {
                    Entry::Dir(_) => apps::by_id("thunar").unwrap_or(apps::default_browser()),
                    _ => apps::handler_for_file(&path),
                };
                Ok(with_entry(app, &path, entry, &hostname))
            }
        },
    }
}

/// `launch {application, uri?}` (E70) for a known application.
pub async fn for_launch(
    sandbox: &SandboxRef,
    app: &'static AppSpec,
    uri: Option<&str>,
) -> Result<WindowSeed, ApiError> {
    let hostname = sandbox.runtime().hostname().to_string();
    let uri = uri.map(str::trim).filter(|u| !u.is_empty());
    match app.kind {
        AppKind::Browser => Ok(match uri {
            None => browser(app, None),
            Some(u) => match apps::classify_target(u).map_err(|e| target_error("uri", e))? {
                OpenTarget::Url(url) => browser(app, Some(url)),
                OpenTarget::Path(p) => browser(app, Some(format!("file://{p}"))),
            },
        }),
        AppKind::Terminal => {
            // Like `--working-directory`: a missing directory falls back to the home.
            let cwd = match uri.and_then(|u| local_path(u).ok()) {
                Some(p) if matches!(inspect(sandbox, &p).await, Ok(Entry::Dir(_))) => p,
                _ => "/root".to_string(),
            };
            Ok(with_entry(app, &cwd, Entry::Dir(Vec::new()), &hostname))
        }
        AppKind::Utility => Ok(plain(app, &hostname)),
        AppKind::Editor | AppKind::FileManager | AppKind::ImageViewer => {
            let default_dir = (app.kind == AppKind::FileManager).then(|| "/root".to_string());
            let Some(path) = uri.map(local_path).transpose()?.or(default_dir) else {
                return Ok(plain(app, &hostname));
            };
            match (app.kind, inspect(sandbox, &path).await?) {
                // A new, empty document under that name.
                (AppKind::Editor, Entry::Missing) => Ok(WindowSeed {
                    app,
                    title: apps::initial_title(app, Some(&path), &hostname),
                    text: String::new(),
                    location: None,
                    cwd: None,
                }),
                (_, Entry::Missing) => Err(missing(&path)),
                (AppKind::Editor | AppKind::ImageViewer, Entry::Dir(_)) => Err(
                    desktop_unavailable(format!("cannot open {path}: is a directory")),
                ),
                (_, entry) => Ok(with_entry(app, &path, entry, &hostname)),
            }
        }
    }
}

fn target_error(field: &'static str, e: TargetError) -> ApiError {
    match e {
        TargetError::Invalid(msg) => ApiError::validation(field, msg),
        TargetError::NoHandler(msg) => desktop_unavailable(msg),
    }
}

/// An absolute guest path from a path or `file://` URL.
fn local_path(uri: &str) -> Result<String, ApiError> {
    match apps::classify_target(uri).map_err(|e| target_error("uri", e))? {
        OpenTarget::Path(p) => Ok(p),
        OpenTarget::Url(_) => Err(ApiError::validation(
            "uri",
            "this application opens local paths, not URLs",
        )),
    }
}

fn plain(app: &'static AppSpec, hostname: &str) -> WindowSeed {
    WindowSeed {
        app,
        title: apps::initial_title(app, None, hostname),
        text: String::new(),
        location: None,
        cwd: None,
    }
}

fn browser(app: &'static AppSpec, location: Option<String>) -> WindowSeed {
    let title = match &location {
        Some(l) => apps::browser_title(app, l),
        None => app.display.to_string(),
    };
    WindowSeed {
        app,
        title,
        text: String::new(),
        location,
        cwd: None,
    }
}

/// A window of `app` showing `path` (already inspected).
fn with_entry(app: &'static AppSpec, path: &str, entry: Entry, hostname: &str) -> WindowSeed {
    let title = apps::initial_title(app, Some(path), hostname);
    let mut seed = WindowSeed {
        app,
        title,
        text: String::new(),
        location: None,
        cwd: None,
    };
    match (app.kind, entry) {
        (AppKind::Terminal, _) => {
            seed.text = apps::prompt(hostname, path);
            seed.cwd = Some(path.to_string());
        }
        (AppKind::FileManager, Entry::Dir(names)) => seed.text = names.join("\n"),
        (AppKind::Browser, _) => {
            let url = format!("file://{path}");
            seed.title = apps::browser_title(app, &url);
            seed.location = Some(url);
        }
        (AppKind::ImageViewer, Entry::File { head, size }) => {
            seed.text = match png_size(&head) {
                Some((w, h)) => format!("{}\n{w} x {h} pixels, {size} bytes", apps::basename(path)),
                None => format!("{}\n{size} bytes", apps::basename(path)),
            };
        }
        (_, Entry::File { head, .. }) => seed.text = String::from_utf8_lossy(&head).into_owned(),
        _ => {}
    }
    seed
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(head: &[u8]) -> Option<(u32, u32)> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if head.len() < 24 || &head[..8] != SIGNATURE || &head[12..16] != b"IHDR" {
        return None;
    }
    let w = u32::from_be_bytes(head[16..20].try_into().ok()?);
    let h = u32::from_be_bytes(head[20..24].try_into().ok()?);
    Some((w, h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_header_is_read() {
        let mut head = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        head.extend_from_slice(&640u32.to_be_bytes());
        head.extend_from_slice(&480u32.to_be_bytes());
        assert_eq!(png_size(&head), Some((640, 480)));
        assert_eq!(png_size(b"not a png at all, no sir"), None);
    }

    #[test]
    fn directory_listing_hides_dot_files() {
        let dir = std::env::temp_dir().join(format!("cos-seed-{}", crate::ids::random_token(8)));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("b.txt"), "x").unwrap();
        std::fs::write(dir.join(".hidden"), "x").unwrap();
        let Ok(Entry::Dir(names)) = inspect_host(&dir) else {
            panic!("expected a directory")
        };
        assert_eq!(names, vec!["b.txt".to_string(), "sub/".to_string()]);
        let Ok(Entry::File { head, size }) = inspect_host(&dir.join("b.txt")) else {
            panic!("expected a file")
        };
        assert_eq!((head, size), (b"x".to_vec(), 1));
        assert!(matches!(
            inspect_host(&dir.join("nope")),
            Ok(Entry::Missing)
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
