//! Wire models and input checks of the computer-use routes (E64–E97).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::auth::Secret;
use crate::error::{Error, Result};

/// Number of screens a sandbox can have: `screen-0` … `screen-7`.
pub const MAX_SCREENS: u8 = 8;
/// The screen every desktop sandbox starts with.
pub const DEFAULT_SCREEN: &str = "screen-0";
/// Largest X11 coordinate or dimension (the protocol stores them in 16 bits).
pub const MAX_X11_COORD: i64 = 32_767;
/// Click counts the client accepts in one request.
pub const CLICK_COUNT_RANGE: std::ops::RangeInclusive<u32> = 1..=10;

/// Check a screen id: `screen-0` … `screen-7`, nothing else.
pub fn validate_screen_id(field: &str, screen_id: &str) -> Result<()> {
    let ok = screen_id
        .strip_prefix("screen-")
        .filter(|n| n.len() == 1)
        .and_then(|n| n.parse::<u8>().ok())
        .is_some_and(|n| n < MAX_SCREENS);
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            format!(
                "{screen_id:?} is not a screen id (screen-0 … screen-{})",
                MAX_SCREENS - 1
            ),
        ))
    }
}

/// A coordinate on the screen: 0 ≤ v ≤ 32767.
pub(crate) fn coordinate(field: &str, value: i32) -> Result<()> {
    if value < 0 {
        return Err(Error::invalid(
            field,
            format!("{value} is negative; coordinates start at 0 (top-left)"),
        ));
    }
    if i64::from(value) > MAX_X11_COORD {
        return Err(Error::invalid(
            field,
            format!("{value} is beyond the X11 limit {MAX_X11_COORD}"),
        ));
    }
    Ok(())
}

/// A width or height: 1 ≤ v ≤ 32767.
pub(crate) fn dimension(field: &str, value: u32) -> Result<()> {
    if value == 0 {
        return Err(Error::invalid(field, "must be greater than zero"));
    }
    if i64::from(value) > MAX_X11_COORD {
        return Err(Error::invalid(
            field,
            format!("{value} is beyond the X11 limit {MAX_X11_COORD}"),
        ));
    }
    Ok(())
}

/// A non-empty text argument.
pub(crate) fn non_empty(field: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if value.contains('\0') {
        return Err(Error::invalid(field, "contains a NUL byte"));
    }
    Ok(())
}

/// A key chord: at least one key, each a non-blank name without control characters.
pub(crate) fn key_names(field: &str, keys: &[String]) -> Result<()> {
    if keys.is_empty() {
        return Err(Error::invalid(field, "no key given"));
    }
    for key in keys {
        if key.trim().is_empty() {
            return Err(Error::invalid(field, "key names must not be empty"));
        }
        if key.chars().any(char::is_control) {
            return Err(Error::invalid(
                field,
                format!("{key:?} contains a control character"),
            ));
        }
    }
    Ok(())
}

/// A point on the screen, in raw X11 pixels of that screen (no DPI scaling).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Point {
    /// Pixels from the left edge.
    #[serde(default)]
    pub x: i32,
    /// Pixels from the top edge.
    #[serde(default)]
    pub y: i32,
}

impl Point {
    /// A point at `(x, y)`.
    pub fn new(x: i32, y: i32) -> Self {
        Point { x, y }
    }

    pub(crate) fn validate(&self, field: &str) -> Result<()> {
        coordinate(&format!("{field}.x"), self.x)?;
        coordinate(&format!("{field}.y"), self.y)
    }
}

impl From<(i32, i32)> for Point {
    fn from((x, y): (i32, i32)) -> Self {
        Point { x, y }
    }
}

/// Size of a screen in pixels (E64; also the size asked for when creating or resizing a screen).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ScreenSize {
    /// Width, pixels.
    #[serde(default)]
    pub width: u32,
    /// Height, pixels.
    #[serde(default)]
    pub height: u32,
}

impl ScreenSize {
    /// A `width` × `height` size.
    pub fn new(width: u32, height: u32) -> Self {
        ScreenSize { width, height }
    }

    /// Whether `point` lies on a screen of this size.
    pub fn contains(&self, point: Point) -> bool {
        point.x >= 0
            && point.y >= 0
            && (point.x as u32) < self.width
            && (point.y as u32) < self.height
    }

    pub(crate) fn validate(&self) -> Result<()> {
        dimension("width", self.width)?;
        dimension("height", self.height)
    }
}

/// Position of the mouse pointer (E65).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cursor {
    /// Pixels from the left edge.
    #[serde(default)]
    pub x: i32,
    /// Pixels from the top edge.
    #[serde(default)]
    pub y: i32,
}

impl From<Cursor> for Point {
    fn from(c: Cursor) -> Self {
        Point { x: c.x, y: c.y }
    }
}

/// Text content of the desktop clipboard (E67).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clipboard {
    /// The clipboard's text (empty when it holds nothing).
    #[serde(default)]
    pub text: String,
}

/// A top-level window of the desktop (E81–E83).
///
/// The server's shape is not stable beyond `id`; anything else it sends is kept in
/// [`Window::extra`] because the shape is not stable.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// Opaque window id (an X11 id such as `0x01a00003`).
    pub id: String,
    /// Window title, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Application (X class) name, when the server knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application: Option<String>,
    /// Fields this client does not model.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// Position and size of a window (E84).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowGeometry {
    /// Window id.
    pub id: String,
    /// Left edge, pixels (may be negative for a window dragged off-screen).
    #[serde(default)]
    pub x: i32,
    /// Top edge, pixels.
    #[serde(default)]
    pub y: i32,
    /// Width, pixels.
    #[serde(default)]
    pub width: u32,
    /// Height, pixels.
    #[serde(default)]
    pub height: u32,
    /// Index of the X screen holding the window.
    #[serde(default)]
    pub screen: i32,
}

/// A virtual screen of the desktop (E92–E96).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputerScreen {
    /// `screen-0` … `screen-7`.
    pub screen_id: String,
    /// The screen's X display name (e.g. `:1`).
    #[serde(default)]
    pub display: String,
    /// Width, pixels.
    #[serde(default)]
    pub width: u32,
    /// Height, pixels.
    #[serde(default)]
    pub height: u32,
    /// VNC port inside the sandbox.
    #[serde(default)]
    pub vnc_port: u16,
    /// noVNC (websockify) port inside the sandbox.
    #[serde(default)]
    pub novnc_port: u16,
}

impl ComputerScreen {
    /// The screen's size.
    pub fn size(&self) -> ScreenSize {
        ScreenSize {
            width: self.width,
            height: self.height,
        }
    }
}

/// A live noVNC link to a screen (E97).
///
/// `token` and `url` are bearer credentials until `expires_at`: `Debug` prints them as
/// `<redacted>`; read them with [`Secret::expose`]. Serializing this struct writes them in clear
/// (it is how a caller asks to output the link).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputerScreenConnection {
    /// Screen the link opens.
    pub screen_id: String,
    /// Ingress port serving noVNC.
    #[serde(default)]
    pub port: u16,
    /// Path of the noVNC page.
    #[serde(default)]
    pub path: String,
    /// Bearer token embedded in the link.
    #[serde(
        default,
        serialize_with = "expose_secret",
        deserialize_with = "read_secret"
    )]
    pub token: Secret,
    /// RFC 3339 expiry of the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// The full URL (the credential itself), when the server built one.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "expose_optional_secret",
        deserialize_with = "read_optional_secret"
    )]
    pub url: Option<Secret>,
}

fn read_secret<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Secret, D::Error> {
    Ok(Option::<String>::deserialize(d)?
        .map(Secret::new)
        .unwrap_or_default())
}

fn read_optional_secret<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Secret>, D::Error> {
    Ok(Option::<String>::deserialize(d)?
        .filter(|s| !s.is_empty())
        .map(Secret::new))
}

fn expose_secret<S: Serializer>(secret: &Secret, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(secret.expose())
}

fn expose_optional_secret<S: Serializer>(
    secret: &Option<Secret>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match secret {
        Some(secret) => s.serialize_str(secret.expose()),
        None => s.serialize_none(),
    }
}

/// A mouse button.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MouseButton {
    /// Primary button.
    #[default]
    Left,
    /// Wheel button.
    Middle,
    /// Secondary button.
    Right,
}

/// Direction of a wheel scroll.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScrollDirection {
    /// Towards the top of the content.
    Up,
    /// Towards the bottom of the content.
    Down,
}

/// A click (E72): which button, where, how many times.
///
/// ```
/// use createos_sandbox::api::computer::{MouseButton, MouseClick, Point};
/// let double_right = MouseClick::new(MouseButton::Right).at(Point::new(10, 20)).count(2);
/// # let _ = double_right;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MouseClick {
    /// Button to click (server default: left).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub button: Option<MouseButton>,
    /// Where to click; `None` clicks at the current pointer position.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub x: Option<i32>,
    /// See `x`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub y: Option<i32>,
    /// Clicks in a row (2 = double click); `None` lets the server pick (one click).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
}

impl MouseClick {
    /// A single click of `button` at the current pointer position.
    pub fn new(button: MouseButton) -> Self {
        MouseClick {
            button: Some(button),
            ..Default::default()
        }
    }

    /// Click at `point` instead of the current pointer position.
    pub fn at(mut self, point: impl Into<Point>) -> Self {
        let p = point.into();
        self.x = Some(p.x);
        self.y = Some(p.y);
        self
    }

    /// Click `count` times in a row (1–10).
    pub fn count(mut self, count: u32) -> Self {
        self.count = Some(count);
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        match (self.x, self.y) {
            (Some(x), Some(y)) => Point { x, y }.validate("click")?,
            (None, None) => {}
            _ => return Err(Error::invalid("click", "x and y must be given together")),
        }
        if let Some(count) = self.count {
            if !CLICK_COUNT_RANGE.contains(&count) {
                return Err(Error::invalid(
                    "count",
                    format!(
                        "{count} is outside {}–{}",
                        CLICK_COUNT_RANGE.start(),
                        CLICK_COUNT_RANGE.end()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// A rectangle in pixels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rect {
    /// Left edge.
    pub x: i32,
    /// Top edge.
    pub y: i32,
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
}

impl Rect {
    /// The rectangle at `(x, y)` of `width` × `height` pixels.
    pub fn new(x: i32, y: i32, width: u32, height: u32) -> Self {
        Rect {
            x,
            y,
            width,
            height,
        }
    }
}

/// What a screenshot (E66) captures: the whole screen (the default), one window, or a
/// rectangle of the screen.
///
/// A window capture can also be cropped ([`ScreenshotRegion::crop`]); the contract makes the
/// rectangle relative to the window then, but servers that do not support the combination
/// answer 400, so prefer one or the other.
///
/// ```
/// use createos_sandbox::api::computer::ScreenshotRegion;
/// let whole = ScreenshotRegion::default();
/// let corner = ScreenshotRegion::rect(0, 0, 200, 100);
/// let one_window = ScreenshotRegion::window("0x01a00003");
/// # let _ = (whole, corner, one_window);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScreenshotRegion {
    /// Capture only this window.
    pub window_id: Option<String>,
    /// Capture only this rectangle.
    pub crop: Option<Rect>,
}

impl ScreenshotRegion {
    /// The whole screen.
    pub fn full_screen() -> Self {
        ScreenshotRegion::default()
    }

    /// Only the window `window_id`.
    pub fn window(window_id: impl Into<String>) -> Self {
        ScreenshotRegion {
            window_id: Some(window_id.into()),
            crop: None,
        }
    }

    /// Only the rectangle at `(x, y)` of `width` × `height` pixels of the screen.
    pub fn rect(x: i32, y: i32, width: u32, height: u32) -> Self {
        ScreenshotRegion {
            window_id: None,
            crop: Some(Rect::new(x, y, width, height)),
        }
    }

    /// Narrow the capture to a rectangle (see the type's note on cropping a window).
    pub fn crop(mut self, x: i32, y: i32, width: u32, height: u32) -> Self {
        self.crop = Some(Rect::new(x, y, width, height));
        self
    }

    /// Check the values and turn them into query parameters.
    pub(crate) fn query(&self) -> Result<Vec<(&'static str, String)>> {
        let mut query = Vec::new();
        if let Some(id) = &self.window_id {
            crate::validate::id("window id", id)?;
            query.push(("window_id", id.clone()));
        }
        if let Some(Rect {
            x,
            y,
            width,
            height,
        }) = self.crop
        {
            coordinate("x", x)?;
            coordinate("y", y)?;
            dimension("width", width)?;
            dimension("height", height)?;
            query.extend([
                ("x", x.to_string()),
                ("y", y.to_string()),
                ("width", width.to_string()),
                ("height", height.to_string()),
            ]);
        }
        Ok(query)
    }
}

/// The 8 bytes every PNG file starts with.
pub const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

/// Whether `bytes` starts with the PNG signature.
pub fn is_png(bytes: &[u8]) -> bool {
    bytes.starts_with(&PNG_SIGNATURE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn screen_ids() {
        for ok in ["screen-0", "screen-3", "screen-7"] {
            assert!(validate_screen_id("screen_id", ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "screen-8",
            "screen-",
            "screen-01",
            "screen--1",
            "Screen-0",
            "screen-0 ",
            "s-0",
            "screen-a",
        ] {
            assert!(validate_screen_id("screen_id", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn click_validation() {
        assert!(MouseClick::default().validate().is_ok());
        assert!(MouseClick::new(MouseButton::Right)
            .at((3, 4))
            .count(10)
            .validate()
            .is_ok());
        assert!(MouseClick::default().count(0).validate().is_err());
        assert!(MouseClick::default().count(11).validate().is_err());
        assert!(MouseClick::default().at((-1, 4)).validate().is_err());
        let half = MouseClick {
            x: Some(1),
            ..Default::default()
        };
        assert!(half.validate().is_err());
    }

    #[test]
    fn click_wire_form_omits_unset_fields() {
        let body = serde_json::to_value(MouseClick::default()).unwrap();
        assert_eq!(body, serde_json::json!({}));
        let body =
            serde_json::to_value(MouseClick::new(MouseButton::Middle).at((5, 6)).count(2)).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"button": "middle", "x": 5, "y": 6, "count": 2})
        );
    }

    #[test]
    fn screenshot_region_query() {
        assert!(ScreenshotRegion::full_screen().query().unwrap().is_empty());
        assert_eq!(
            ScreenshotRegion::window("0x1").query().unwrap(),
            vec![("window_id", "0x1".to_string())]
        );
        let q = ScreenshotRegion::rect(1, 2, 3, 4).query().unwrap();
        assert_eq!(q.len(), 4);
        assert!(ScreenshotRegion::rect(0, 0, 0, 4).query().is_err());
        assert!(ScreenshotRegion::rect(-1, 0, 1, 4).query().is_err());
        assert!(ScreenshotRegion::window("a/b").query().is_err());
        assert_eq!(
            ScreenshotRegion::window("0x1")
                .crop(0, 0, 5, 5)
                .query()
                .unwrap()
                .len(),
            5
        );
    }

    #[test]
    fn connection_debug_never_shows_the_credential() {
        let json = serde_json::json!({
            "screen_id": "screen-0", "port": 6080, "path": "/vnc.html",
            "token": "tok-very-secret", "expires_at": "2026-01-01T00:00:00Z",
            "url": "https://x.example/vnc.html?token=tok-very-secret"
        });
        let conn: ComputerScreenConnection = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(conn.token.expose(), "tok-very-secret");
        assert!(conn
            .url
            .as_ref()
            .unwrap()
            .expose()
            .contains("tok-very-secret"));
        let debug = format!("{conn:?}");
        assert!(!debug.contains("tok-very-secret"), "{debug}");
        assert!(debug.contains("screen-0"));
        assert_eq!(serde_json::to_value(&conn).unwrap(), json);
    }

    #[test]
    fn window_keeps_unknown_fields() {
        let w: Window = serde_json::from_value(serde_json::json!({"id": "0x2", "pid": 7})).unwrap();
        assert_eq!(w.id, "0x2");
        assert_eq!(w.title, None);
        assert_eq!(w.extra["pid"], 7);
    }

    #[test]
    fn key_chords() {
        assert!(key_names("keys", &["ctrl".into(), "l".into()]).is_ok());
        assert!(key_names("keys", &[]).is_err());
        assert!(key_names("keys", &[" ".into()]).is_err());
        assert!(key_names("keys", &["a\n".into()]).is_err());
    }

    #[test]
    fn png_signature() {
        assert!(is_png(&[
            0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n', 0
        ]));
        assert!(!is_png(b"{\"status\":\"success\"}"));
    }
}
