//! The applications installed on the `desktop:1` image (an XFCE session) and how a
//! launched or opened window gets its title and initial content.

/// What kind of window an application draws (decides colours, content and key handling).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppKind {
    Browser,
    Terminal,
    Editor,
    FileManager,
    ImageViewer,
    Utility,
}

/// One installed application.
#[derive(Debug, PartialEq, Eq)]
pub struct AppSpec {
    /// The executable / desktop-file id.
    pub id: &'static str,
    /// Other names it can be launched by (lowercase).
    pub aliases: &'static [&'static str],
    /// WM_CLASS class, also matched by the windows `application` filter.
    pub class: &'static str,
    /// Human-readable name used in titles.
    pub display: &'static str,
    pub kind: AppKind,
    /// Initial frame size (clipped to the work area).
    pub size: (u32, u32),
}

pub const APPS: &[AppSpec] = &[
    AppSpec {
        id: "firefox",
        aliases: &[
            "firefox-esr",
            "mozilla-firefox",
            "browser",
            "web-browser",
            "x-www-browser",
        ],
        class: "firefox",
        display: "Mozilla Firefox",
        kind: AppKind::Browser,
        size: (1024, 720),
    },
    AppSpec {
        id: "chromium",
        aliases: &["chromium-browser", "chrome", "google-chrome"],
        class: "Chromium",
        display: "Chromium",
        kind: AppKind::Browser,
        size: (1024, 720),
    },
    AppSpec {
        id: "xfce4-terminal",
        aliases: &["terminal", "x-terminal-emulator", "terminal-emulator"],
        class: "Xfce4-terminal",
        display: "Terminal",
        kind: AppKind::Terminal,
        size: (720, 440),
    },
    AppSpec {
        id: "xterm",
        aliases: &["uxterm"],
        class: "XTerm",
        display: "xterm",
        kind: AppKind::Terminal,
        size: (644, 388),
    },
    AppSpec {
        id: "mousepad",
        aliases: &["editor", "text-editor"],
        class: "Mousepad",
        display: "Mousepad",
        kind: AppKind::Editor,
        size: (800, 560),
    },
    AppSpec {
        id: "thunar",
        aliases: &["file-manager", "files", "filemanager"],
        class: "Thunar",
        display: "File Manager",
        kind: AppKind::FileManager,
        size: (820, 560),
    },
    AppSpec {
        id: "ristretto",
        aliases: &["image-viewer"],
        class: "Ristretto",
        display: "Image Viewer",
        kind: AppKind::ImageViewer,
        size: (720, 520),
    },
    AppSpec {
        id: "xfce4-settings-manager",
        aliases: &["settings", "settings-manager"],
        class: "Xfce4-settings-manager",
        display: "Settings",
        kind: AppKind::Utility,
        size: (760, 520),
    },
    AppSpec {
        id: "xfce4-taskmanager",
        aliases: &["task-manager", "taskmanager"],
        class: "Xfce4-taskmanager",
        display: "Task Manager",
        kind: AppKind::Utility,
        size: (640, 480),
    },
];

/// The browser `open` hands URLs to (the session's default).
pub fn default_browser() -> &'static AppSpec {
    &APPS[0]
}

pub fn by_id(id: &str) -> Option<&'static AppSpec> {
    APPS.iter().find(|a| a.id == id)
}

/// Finds an application by executable name, alias, `.desktop` id or absolute path.
pub fn find_app(raw: &str) -> Option<&'static AppSpec> {
    let mut name = raw.trim();
    if let Some(base) = name.rsplit('/').next() {
        name = base;
    }
    let name = name
        .strip_suffix(".desktop")
        .unwrap_or(name)
        .to_ascii_lowercase();
    if name.is_empty() {
        return None;
    }
    APPS.iter()
        .find(|a| a.id == name || a.aliases.contains(&name.as_str()))
}

/// Whether a window of `app` matches the windows list `application` filter: the
/// executable id, an alias, the WM class or the display name, case-insensitively,
/// as a substring (like `xdotool search --class`).
pub fn matches_filter(app: &AppSpec, filter: &str) -> bool {
    let needle = filter.trim().to_ascii_lowercase();
    if needle.is_empty() {
        return true;
    }
    let hay = [app.id, app.class, app.display];
    hay.iter().any(|h| h.to_ascii_lowercase().contains(&needle))
        || app.aliases.iter().any(|a| a.contains(&needle))
}

/// Last path component (`/` for the root).
pub fn basename(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/";
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed)
}

/// `/root/x` → `~/x` as shells and terminals show it.
pub fn tilde(path: &str) -> String {
    if path == "/root" {
        "~".to_string()
    } else if let Some(rest) = path.strip_prefix("/root/") {
        format!("~/{rest}")
    } else {
        path.to_string()
    }
}

/// The title a fresh window of `app` carries. `uri` is the launch argument (URL, file,
/// directory or working directory), `hostname` the sandbox's hostname.
pub fn initial_title(app: &AppSpec, uri: Option<&str>, hostname: &str) -> String {
    let uri = uri.map(str::trim).filter(|u| !u.is_empty());
    match app.kind {
        AppKind::Browser => match uri {
            Some(u) => browser_title(app, u),
            None => app.display.to_string(),
        },
        AppKind::Terminal if app.id == "xterm" => "xterm".to_string(),
        AppKind::Terminal => {
            let cwd = uri.filter(|u| u.starts_with('/')).unwrap_or("/root");
            format!("{} - root@{hostname}: {}", app.display, tilde(cwd))
        }
        AppKind::Editor => match uri {
            Some(u) => format!("{} - {}", basename(u), app.display),
            None => format!("Untitled 1 - {}", app.display),
        },
        AppKind::FileManager => {
            let dir = uri.unwrap_or("/root");
            format!("{} - {}", basename(dir), app.display)
        }
        AppKind::ImageViewer => match uri {
            Some(u) => format!("{} - {}", basename(u), app.display),
            None => app.display.to_string(),
        },
        AppKind::Utility => app.display.to_string(),
    }
}

/// `<location> — <browser>`.
pub fn browser_title(app: &AppSpec, location: &str) -> String {
    format!("{location} \u{2014} {}", app.display)
}

/// The shell prompt a terminal shows.
pub fn prompt(hostname: &str, cwd: &str) -> String {
    format!("root@{hostname}:{}# ", tilde(cwd))
}

/// What the desktop's opener (`xdg-open`) does with a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenTarget {
    /// A web URL for the default browser.
    Url(String),
    /// An absolute guest path (from a bare path or a `file://` URL).
    Path(String),
}

/// Problems with an `open` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
    /// Not a URL nor an absolute path (400).
    Invalid(String),
    /// A URL scheme no installed application handles (409 on a live desktop).
    NoHandler(String),
}

pub fn classify_target(raw: &str) -> Result<OpenTarget, TargetError> {
    let target = raw.trim();
    if target.is_empty() {
        return Err(TargetError::Invalid("target is required".into()));
    }
    if target.contains('\0') {
        return Err(TargetError::Invalid("target must not contain NUL".into()));
    }
    if target.starts_with('/') {
        return Ok(OpenTarget::Path(target.to_string()));
    }
    let lower = target.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("file://") {
        let path = &target[target.len() - rest.len()..];
        let path = percent_encoding::percent_decode_str(path)
            .decode_utf8_lossy()
            .into_owned();
        return if path.starts_with('/') {
            Ok(OpenTarget::Path(path))
        } else {
            Err(TargetError::Invalid(
                "file URL must carry an absolute path".into(),
            ))
        };
    }
    if lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("about:")
    {
        return Ok(OpenTarget::Url(target.to_string()));
    }
    match scheme_of(target) {
        Some(scheme) => Err(TargetError::NoHandler(format!(
            "no application is registered for {scheme}: links"
        ))),
        None => Err(TargetError::Invalid(
            "target must be a URL or an absolute path".into(),
        )),
    }
}

/// `mailto` of `mailto:x@y` (RFC 3986 scheme syntax).
fn scheme_of(target: &str) -> Option<&str> {
    let (scheme, _) = target.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic() && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)))
        .then_some(scheme)
}

/// Which application opens a local file, by extension (the image's MIME defaults).
pub fn handler_for_file(path: &str) -> &'static AppSpec {
    let ext = basename(path)
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    let id = match ext.as_str() {
        "html" | "htm" | "xhtml" | "pdf" | "svg" => "firefox",
        "png" | "jpg" | "jpeg" | "gif" | "bmp" | "webp" | "ico" | "tif" | "tiff" => "ristretto",
        _ => "mousepad",
    };
    by_id(id).unwrap_or(&APPS[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apps_are_found_by_any_name() {
        assert_eq!(find_app("firefox").unwrap().id, "firefox");
        assert_eq!(find_app("/usr/bin/Firefox").unwrap().id, "firefox");
        assert_eq!(find_app("thunar.desktop").unwrap().id, "thunar");
        assert_eq!(find_app("terminal").unwrap().id, "xfce4-terminal");
        assert!(find_app("notepad.exe").is_none());
        assert!(find_app("  ").is_none());
    }

    #[test]
    fn titles_follow_the_application() {
        let ff = find_app("firefox").unwrap();
        assert_eq!(
            initial_title(ff, Some("https://a.b/"), "h"),
            "https://a.b/ \u{2014} Mozilla Firefox"
        );
        let term = find_app("xfce4-terminal").unwrap();
        assert_eq!(
            initial_title(term, None, "calm-otter"),
            "Terminal - root@calm-otter: ~"
        );
        let ed = find_app("mousepad").unwrap();
        assert_eq!(
            initial_title(ed, Some("/work/notes.txt"), "h"),
            "notes.txt - Mousepad"
        );
    }

    #[test]
    fn targets_are_classified() {
        assert_eq!(
            classify_target("https://x.y").unwrap(),
            OpenTarget::Url("https://x.y".into())
        );
        assert_eq!(
            classify_target("file:///tmp/a%20b").unwrap(),
            OpenTarget::Path("/tmp/a b".into())
        );
        assert_eq!(
            classify_target("/etc").unwrap(),
            OpenTarget::Path("/etc".into())
        );
        assert!(matches!(
            classify_target("mailto:a@b"),
            Err(TargetError::NoHandler(_))
        ));
        assert!(matches!(
            classify_target("notes.txt"),
            Err(TargetError::Invalid(_))
        ));
        assert_eq!(handler_for_file("/a/b.PNG").id, "ristretto");
        assert_eq!(handler_for_file("/a/b").id, "mousepad");
    }

    #[test]
    fn filter_matches_class_and_name() {
        let ff = find_app("firefox").unwrap();
        assert!(matches_filter(ff, "Firefox"));
        assert!(matches_filter(ff, "mozilla"));
        assert!(!matches_filter(ff, "terminal"));
    }
}
