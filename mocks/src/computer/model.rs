//! One X screen (display `:n`) of a desktop: its pointer, buttons, keyboard, clipboard
//! and managed windows, with window management (focus, stacking, move/resize/maximize/
//! minimize/restore/close). Pointer and keyboard effects are in `input.rs`; the desktop
//! holding up to eight screens is in `desktop.rs`.

use std::collections::{BTreeMap, BTreeSet};

use time::OffsetDateTime;

use super::apps::{AppKind, AppSpec};
use super::keys::Key;
use super::layout::{self, Rect};

pub const MAX_SCREENS: u8 = 8;
pub const DEFAULT_SCREEN_SIZE: (u32, u32) = (1280, 800);
pub const MIN_SCREEN_DIM: u32 = 200;
pub const MAX_SCREEN_DIM: u32 = 4096;
/// Window managers keep frames big enough for the title-bar buttons.
pub const MIN_WINDOW_W: u32 = 100;
pub const MIN_WINDOW_H: u32 = 48;
/// X11 coordinates are 16-bit.
pub const MAX_COORD: i64 = 32767;
pub const MAX_WINDOWS_PER_SCREEN: usize = 256;
/// Text a single window holds (document, terminal scrollback, page text).
pub const MAX_WINDOW_TEXT: usize = 4 << 20;
/// The first VNC / noVNC ports; screen n uses base + n.
pub const VNC_PORT_BASE: u16 = 5900;
pub const NOVNC_PORT_BASE: u16 = 6080;

/// Failures of desktop operations, mapped to HTTP by `access.rs`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DesktopError {
    /// 400 with `{field: message}`.
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    #[error("screen not found")]
    ScreenNotFound,
    #[error("window not found")]
    WindowNotFound,
    #[error("no active window")]
    NoActiveWindow,
    /// 409 `desktop_unavailable`: the action failed on the live desktop.
    #[error("{0}")]
    ActionFailed(String),
    /// 409: all eight screens exist.
    #[error("screen limit reached (max {MAX_SCREENS})")]
    ScreenLimit,
}

impl DesktopError {
    pub fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        DesktopError::Invalid {
            field,
            message: message.into(),
        }
    }
}

/// A mouse button.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Button {
    Left,
    Middle,
    Right,
}

impl Button {
    /// `None`/empty means left.
    pub fn parse(raw: Option<&str>) -> Result<Button, DesktopError> {
        match raw.map(str::trim).unwrap_or("") {
            "" | "left" => Ok(Button::Left),
            "middle" => Ok(Button::Middle),
            "right" => Ok(Button::Right),
            other => Err(DesktopError::invalid(
                "button",
                format!("unknown button {other:?} (left|middle|right)"),
            )),
        }
    }
}

/// The text a browser's address bar holds while it has keyboard focus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressEdit {
    pub text: String,
    pub selected: bool,
}

/// One managed top-level window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub id: String,
    pub app: &'static AppSpec,
    pub title: String,
    pub screen: u8,
    /// Outer frame (title bar included) in screen pixels.
    pub frame: Rect,
    /// Frame to go back to when un-maximizing.
    pub normal_frame: Rect,
    pub maximized: bool,
    pub minimized: bool,
    /// Stacking position (higher is above).
    pub z: u64,
    /// Document / terminal / page text.
    pub text: String,
    /// Whether the whole text is selected (ctrl+a).
    pub text_selected: bool,
    /// First visible text line.
    pub scroll: u32,
    /// A browser's current URL.
    pub location: Option<String>,
    /// A browser's address bar while it is being edited.
    pub address_edit: Option<AddressEdit>,
    /// A terminal's working directory (its title and prompt).
    pub cwd: Option<String>,
}

impl Window {
    pub fn is_browser(&self) -> bool {
        self.app.kind == AppKind::Browser
    }

    pub fn line_count(&self) -> usize {
        self.text.split('\n').count()
    }
}

/// A minted noVNC link for a screen; only the newest one is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    pub token: String,
    pub expires_at: OffsetDateTime,
}

/// An in-progress title-bar drag (window follows the pointer while left is held).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grab {
    pub window: String,
    pub dx: i32,
    pub dy: i32,
}

/// Everything a pointer press landed on, compared again on release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hit {
    Background,
    Panel,
    TaskButton(String),
    Window(String, Part),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Close,
    Maximize,
    Minimize,
    TitleBar,
    AddressBar,
    Content,
}

/// One X screen (display `:n`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screen {
    pub number: u8,
    pub width: u32,
    pub height: u32,
    pub cursor: (i32, i32),
    pub buttons: BTreeSet<Button>,
    /// Keys held down (canonical name → key).
    pub keys_down: BTreeMap<String, Key>,
    pub clipboard: String,
    /// Managed windows in creation order.
    pub windows: Vec<Window>,
    pub focused: Option<String>,
    pub grab: Option<Grab>,
    /// What the left button went down on (a click completes when it is released there).
    pub pressed: Option<Hit>,
    pub connection: Option<Connection>,
    next_z: u64,
    placed: u32,
}

impl Screen {
    pub fn new(number: u8, width: u32, height: u32) -> Screen {
        Screen {
            number,
            width,
            height,
            cursor: ((width / 2) as i32, (height / 2) as i32),
            buttons: BTreeSet::new(),
            keys_down: BTreeMap::new(),
            clipboard: String::new(),
            windows: Vec::new(),
            focused: None,
            grab: None,
            pressed: None,
            connection: None,
            next_z: 1,
            placed: 0,
        }
    }

    pub fn id(&self) -> String {
        format!("screen-{}", self.number)
    }

    pub fn display(&self) -> String {
        format!(":{}", self.number)
    }

    pub fn vnc_port(&self) -> u16 {
        VNC_PORT_BASE + self.number as u16
    }

    pub fn novnc_port(&self) -> u16 {
        NOVNC_PORT_BASE + self.number as u16
    }

    pub fn bounds(&self) -> Rect {
        Rect::new(0, 0, self.width, self.height)
    }

    pub fn work_area(&self) -> Rect {
        layout::work_area(self.width, self.height)
    }

    /// Clamps a point into the screen.
    pub fn clamp_point(&self, x: i64, y: i64) -> (i32, i32) {
        (
            x.clamp(0, self.width as i64 - 1) as i32,
            y.clamp(0, self.height as i64 - 1) as i32,
        )
    }

    pub fn window(&self, id: &str) -> Result<&Window, DesktopError> {
        self.windows
            .iter()
            .find(|w| w.id == id)
            .ok_or(DesktopError::WindowNotFound)
    }

    pub fn window_mut(&mut self, id: &str) -> Result<&mut Window, DesktopError> {
        self.windows
            .iter_mut()
            .find(|w| w.id == id)
            .ok_or(DesktopError::WindowNotFound)
    }

    pub fn focused_window(&self) -> Option<&Window> {
        self.focused.as_deref().and_then(|id| self.window(id).ok())
    }

    pub fn focused_window_mut(&mut self) -> Option<&mut Window> {
        let id = self.focused.clone()?;
        self.window_mut(&id).ok()
    }

    /// The active window (E82).
    pub fn current(&self) -> Result<&Window, DesktopError> {
        self.focused_window().ok_or(DesktopError::NoActiveWindow)
    }

    /// Visible windows, bottom to top.
    pub fn stacking(&self) -> Vec<&Window> {
        let mut visible: Vec<&Window> = self.windows.iter().filter(|w| !w.minimized).collect();
        visible.sort_by_key(|w| w.z);
        visible
    }

    /// Adds a window of `app` (placed by cascading, clipped to the work area), focused and on top.
    pub fn add_window(
        &mut self,
        id: String,
        app: &'static AppSpec,
        title: String,
    ) -> Result<&mut Window, DesktopError> {
        if self.windows.len() >= MAX_WINDOWS_PER_SCREEN {
            return Err(DesktopError::ActionFailed(format!(
                "cannot map another window: {MAX_WINDOWS_PER_SCREEN} windows are open on {}",
                self.display()
            )));
        }
        let work = self.work_area();
        let (x, y) = layout::cascade_origin(&work, self.placed);
        self.placed += 1;
        let width = app
            .size
            .0
            .min(work.width.saturating_sub(80))
            .max(MIN_WINDOW_W);
        let height = app
            .size
            .1
            .min(work.height.saturating_sub(40))
            .max(MIN_WINDOW_H);
        let frame = Rect::new(x, y, width, height);
        let z = self.bump_z();
        self.windows.push(Window {
            id: id.clone(),
            app,
            title,
            screen: self.number,
            frame,
            normal_frame: frame,
            maximized: false,
            minimized: false,
            z,
            text: String::new(),
            text_selected: false,
            scroll: 0,
            location: None,
            address_edit: None,
            cwd: None,
        });
        self.focused = Some(id);
        let last = self.windows.len() - 1;
        Ok(&mut self.windows[last])
    }

    fn bump_z(&mut self) -> u64 {
        let z = self.next_z;
        self.next_z += 1;
        z
    }

    /// Focuses and raises a window, un-minimizing it (like `wmctrl -a`).
    pub fn activate(&mut self, id: &str) -> Result<(), DesktopError> {
        let z = self.bump_z();
        let w = self.window_mut(id)?;
        w.minimized = false;
        w.z = z;
        self.focused = Some(id.to_string());
        Ok(())
    }

    /// Focus goes to the topmost visible window (after a close or minimize).
    fn refocus(&mut self) {
        self.focused = self.stacking().last().map(|w| w.id.clone());
    }

    pub fn close(&mut self, id: &str) -> Result<(), DesktopError> {
        let index = self
            .windows
            .iter()
            .position(|w| w.id == id)
            .ok_or(DesktopError::WindowNotFound)?;
        self.windows.remove(index);
        if self.grab.as_ref().is_some_and(|g| g.window == id) {
            self.grab = None;
        }
        if self.focused.as_deref() == Some(id) {
            self.refocus();
        }
        Ok(())
    }

    pub fn minimize(&mut self, id: &str) -> Result<(), DesktopError> {
        self.window_mut(id)?.minimized = true;
        if self.focused.as_deref() == Some(id) {
            self.refocus();
        }
        Ok(())
    }

    pub fn maximize(&mut self, id: &str) -> Result<(), DesktopError> {
        let work = self.work_area();
        let w = self.window_mut(id)?;
        if !w.maximized {
            w.normal_frame = w.frame;
            w.maximized = true;
        }
        w.frame = work;
        self.activate(id)
    }

    /// Un-minimizes a minimized window; otherwise un-maximizes a maximized one.
    pub fn restore(&mut self, id: &str) -> Result<(), DesktopError> {
        let w = self.window_mut(id)?;
        if w.minimized {
            w.minimized = false;
        } else if w.maximized {
            w.maximized = false;
            w.frame = w.normal_frame;
        }
        self.activate(id)
    }

    pub fn toggle_maximize(&mut self, id: &str) -> Result<(), DesktopError> {
        if self.window(id)?.maximized {
            self.restore(id)
        } else {
            self.maximize(id)
        }
    }

    /// Moves a window's frame to (x, y); a maximized window becomes normal at that place.
    pub fn move_window(&mut self, id: &str, x: i64, y: i64) -> Result<(), DesktopError> {
        check_coord("x", x)?;
        check_coord("y", y)?;
        let w = self.window_mut(id)?;
        if w.maximized {
            w.maximized = false;
            w.frame = w.normal_frame;
        }
        w.frame.x = x as i32;
        w.frame.y = y as i32;
        w.normal_frame = w.frame;
        Ok(())
    }

    /// Resizes a window's frame; the window manager enforces its minimum size.
    pub fn resize_window(&mut self, id: &str, width: i64, height: i64) -> Result<(), DesktopError> {
        check_size("width", width)?;
        check_size("height", height)?;
        let w = self.window_mut(id)?;
        w.maximized = false;
        w.frame.width = (width as u32).max(MIN_WINDOW_W);
        w.frame.height = (height as u32).max(MIN_WINDOW_H);
        w.normal_frame = w.frame;
        Ok(())
    }

    /// Changes the screen size (RandR): the pointer is clamped, maximized windows refit.
    pub fn set_size(&mut self, width: u32, height: u32) {
        self.width = width;
        self.height = height;
        self.cursor = self.clamp_point(self.cursor.0 as i64, self.cursor.1 as i64);
        let work = self.work_area();
        for w in self.windows.iter_mut().filter(|w| w.maximized) {
            w.frame = work;
        }
    }

    /// What is under a point, topmost first.
    pub fn hit(&self, x: i32, y: i32) -> Hit {
        for w in self.stacking().into_iter().rev() {
            if !w.frame.contains(x, y) {
                continue;
            }
            let part = if layout::close_button(&w.frame).contains(x, y) {
                Part::Close
            } else if layout::maximize_button(&w.frame).contains(x, y) {
                Part::Maximize
            } else if layout::minimize_button(&w.frame).contains(x, y) {
                Part::Minimize
            } else if layout::title_bar(&w.frame).contains(x, y) {
                Part::TitleBar
            } else if w.is_browser() && layout::address_bar(&w.frame).contains(x, y) {
                Part::AddressBar
            } else {
                Part::Content
            };
            return Hit::Window(w.id.clone(), part);
        }
        if y < layout::PANEL_HEIGHT {
            let buttons = layout::task_buttons(self.width, self.windows.len());
            return match buttons.iter().position(|b| b.contains(x, y)) {
                Some(i) => Hit::TaskButton(self.windows[i].id.clone()),
                None => Hit::Panel,
            };
        }
        Hit::Background
    }

    /// The task-list button action: raise a hidden/unfocused window, minimize the focused one.
    pub fn toggle_from_task_list(&mut self, id: &str) -> Result<(), DesktopError> {
        let is_focused = self.focused.as_deref() == Some(id);
        let w = self.window(id)?;
        if is_focused && !w.minimized {
            self.minimize(id)
        } else {
            self.activate(id)
        }
    }
}

fn check_coord(field: &'static str, v: i64) -> Result<(), DesktopError> {
    if (-MAX_COORD..=MAX_COORD).contains(&v) {
        Ok(())
    } else {
        Err(DesktopError::invalid(
            field,
            format!("{field} must be between -{MAX_COORD} and {MAX_COORD}"),
        ))
    }
}

fn check_size(field: &'static str, v: i64) -> Result<(), DesktopError> {
    if (1..=MAX_COORD).contains(&v) {
        Ok(())
    } else {
        Err(DesktopError::invalid(
            field,
            format!("{field} must be between 1 and {MAX_COORD}"),
        ))
    }
}
/// Validates a requested screen dimension.
/// `None` or 0 (an SDK's omitted default) keeps `current`.
pub fn check_screen_dim(
    field: &'static str,
    v: Option<i64>,
    current: u32,
) -> Result<u32, DesktopError> {
    match v {
        None | Some(0) => Ok(current),
        Some(v) if (MIN_SCREEN_DIM as i64..=MAX_SCREEN_DIM as i64).contains(&v) => Ok(v as u32),
        Some(_) => Err(DesktopError::invalid(
            field,
            format!("{field} must be between {MIN_SCREEN_DIM} and {MAX_SCREEN_DIM}"),
        )),
    }
}

/// Parses `screen-N` (N in 0..8); 400 for anything else.
pub fn parse_screen_id(raw: &str) -> Result<u8, DesktopError> {
    let bad = || {
        DesktopError::invalid(
            "screen_id",
            format!(
                "invalid screen id {raw:?} (screen-0 … screen-{})",
                MAX_SCREENS - 1
            ),
        )
    };
    let digits = raw.strip_prefix("screen-").ok_or_else(bad)?;
    if digits.len() != 1 {
        return Err(bad());
    }
    match digits.parse::<u8>() {
        Ok(n) if n < MAX_SCREENS => Ok(n),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::computer::apps;
    use crate::computer::desktop::Desktop;

    fn app() -> &'static AppSpec {
        apps::find_app("mousepad").unwrap()
    }

    #[test]
    fn focus_follows_close_and_minimize() {
        let mut d = Desktop::default();
        let a = d.new_window_id();
        let b = d.new_window_id();
        let s = d.screen_mut(0).unwrap();
        s.add_window(a.clone(), app(), "a".into()).unwrap();
        s.add_window(b.clone(), app(), "b".into()).unwrap();
        assert_eq!(s.focused.as_deref(), Some(b.as_str()));
        s.minimize(&b).unwrap();
        assert_eq!(s.focused.as_deref(), Some(a.as_str()));
        s.restore(&b).unwrap();
        assert_eq!(s.focused.as_deref(), Some(b.as_str()));
        s.close(&b).unwrap();
        assert_eq!(s.focused.as_deref(), Some(a.as_str()));
        assert_eq!(s.close(&b), Err(DesktopError::WindowNotFound));
    }

    #[test]
    fn maximize_and_restore_round_trip() {
        let mut d = Desktop::default();
        let id = d.new_window_id();
        let s = d.screen_mut(0).unwrap();
        s.add_window(id.clone(), app(), "t".into()).unwrap();
        let before = s.window(&id).unwrap().frame;
        s.maximize(&id).unwrap();
        assert_eq!(s.window(&id).unwrap().frame, s.work_area());
        s.restore(&id).unwrap();
        assert_eq!(s.window(&id).unwrap().frame, before);
    }
}
