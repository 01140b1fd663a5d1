//! E64–E80: screen size, cursor, screenshot, clipboard, open/launch, mouse and keyboard.

use std::time::{Duration, Instant};

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::access::{self, query, required, screen_number, ScreenQuery};
use super::input::ScrollDirection;
use super::keys::{parse_key, Key};
use super::layout::Rect;
use super::model::{Button, DesktopError, Screen};
use super::{apps, screenshot, seed};
use crate::auth::Caller;
use crate::envelope::{ok, ApiError, JsonBody};
use crate::state::AppState;

/// Longest text accepted by one `type` call, and the clipboard.
pub const MAX_TYPE_CHARS: usize = 65_536;
pub const MAX_CLIPBOARD_BYTES: usize = 1 << 20;
/// Per-character typing delay bounds and the longest a single `type` may take.
pub const MAX_TYPE_DELAY_MS: i64 = 1_000;
pub const MAX_TYPE_DURATION: Duration = Duration::from_secs(120);
pub const MAX_CLICK_COUNT: i64 = 10;
pub const MAX_SCROLL_AMOUNT: i64 = 1_000;
pub const MAX_CHORD_KEYS: usize = 16;

type Q<T> = Result<Query<T>, QueryRejection>;

/// Reads the selected screen.
fn read<T>(
    state: &AppState,
    caller: &Caller,
    id: &str,
    q: Q<ScreenQuery>,
    f: impl FnOnce(&Screen) -> Result<T, DesktopError>,
) -> Result<T, ApiError> {
    let q = query(q)?;
    let access = access::open(state, caller, id)?;
    let n = screen_number(q.screen_id.as_deref())?;
    let desktop = access.lock();
    Ok(f(desktop.screen(n)?)?)
}

/// Applies an action to the selected screen and answers `{"ok": true}`.
fn act(
    state: &AppState,
    caller: &Caller,
    id: &str,
    q: Q<ScreenQuery>,
    f: impl FnOnce(&mut Screen) -> Result<(), DesktopError>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let access = access::open(state, caller, id)?;
    let n = screen_number(q.screen_id.as_deref())?;
    let mut desktop = access.lock();
    f(desktop.screen_mut(n)?)?;
    Ok(ok(json!({"ok": true})))
}

pub async fn screen_size(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
) -> Result<Response, ApiError> {
    let (w, h) = read(&s, &c, &id, q, |screen| Ok((screen.width, screen.height)))?;
    Ok(ok(json!({"width": w, "height": h})))
}

pub async fn cursor(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
) -> Result<Response, ApiError> {
    let (x, y) = read(&s, &c, &id, q, |screen| Ok(screen.cursor))?;
    Ok(ok(json!({"x": x, "y": y})))
}

#[derive(Debug, Default, Deserialize)]
pub struct ScreenshotQuery {
    pub screen_id: Option<String>,
    pub window_id: Option<String>,
    pub x: Option<String>,
    pub y: Option<String>,
    pub width: Option<String>,
    pub height: Option<String>,
}

fn int_param(field: &'static str, raw: &Option<String>) -> Result<Option<i64>, DesktopError> {
    match raw.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(v) => v
            .parse::<i64>()
            .map(Some)
            .map_err(|_| DesktopError::invalid(field, format!("{field} must be an integer"))),
    }
}

/// The part of the screen a screenshot covers: a window's visible frame (or a region
/// of it, relative to the window), an explicit region of the screen (which must lie
/// inside it), or everything.
fn capture_region(screen: &Screen, q: &ScreenshotQuery) -> Result<Rect, DesktopError> {
    let x = int_param("x", &q.x)?;
    let y = int_param("y", &q.y)?;
    // A zero size means "not given" (SDKs send their zero defaults); x/y of 0 are real.
    let width = int_param("width", &q.width)?.filter(|v| *v != 0);
    let height = int_param("height", &q.height)?.filter(|v| *v != 0);
    let has_region = x.is_some() || y.is_some() || width.is_some() || height.is_some();
    if let Some(window_id) = q
        .window_id
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let w = screen.window(window_id)?;
        if w.minimized {
            return Err(DesktopError::ActionFailed(format!(
                "window {window_id} is not viewable (minimized)"
            )));
        }
        let area = if has_region {
            let within = region_within(
                w.frame.width as i64,
                w.frame.height as i64,
                (x, y, width, height),
                "window",
            )?;
            Rect::new(
                w.frame.x + within.x,
                w.frame.y + within.y,
                within.width,
                within.height,
            )
        } else {
            w.frame
        };
        return area.intersect(&screen.bounds()).ok_or_else(|| {
            DesktopError::ActionFailed(format!("window {window_id} is entirely off screen"))
        });
    }
    if !has_region {
        return Ok(screen.bounds());
    }
    region_within(
        screen.width as i64,
        screen.height as i64,
        (x, y, width, height),
        "screen",
    )
}

/// A region given by optional x/y/width/height inside a `w`x`h` area (origin 0,0):
/// missing x/y are 0, a missing size extends to the far edge; 400 when it sticks out.
fn region_within(
    w: i64,
    h: i64,
    (x, y, width, height): (Option<i64>, Option<i64>, Option<i64>, Option<i64>),
    what: &str,
) -> Result<Rect, DesktopError> {
    let x = x.unwrap_or(0);
    let y = y.unwrap_or(0);
    let width = width.unwrap_or(w - x);
    let height = height.unwrap_or(h - y);
    if x < 0 || y < 0 || width < 1 || height < 1 || x + width > w || y + height > h {
        return Err(DesktopError::invalid(
            "region",
            format!("region {x},{y} {width}x{height} is outside the {w}x{h} {what}"),
        ));
    }
    Ok(Rect::new(x as i32, y as i32, width as u32, height as u32))
}

pub async fn screenshot(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    q: Q<ScreenshotQuery>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let access = access::open(&state, &caller, &id)?;
    let n = screen_number(q.screen_id.as_deref())?;
    let limit = state.computer.screenshots_per_second();
    let (snapshot, region) = {
        let mut desktop = access.lock();
        let screen = desktop.screen(n)?;
        let region = capture_region(screen, &q)?;
        let snapshot = screen.clone();
        if let Err(wait) = desktop.admit_screenshot(limit, Instant::now()) {
            let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
            return Err(ApiError::fail(
                StatusCode::TOO_MANY_REQUESTS,
                json!({"rate": "rate limited"}),
            )
            .with_header(header::RETRY_AFTER, &secs.to_string()));
        }
        (snapshot, region)
    };
    let png = tokio::task::spawn_blocking(move || {
        screenshot::render(&snapshot).crop(region).encode_png()
    })
    .await
    .map_err(|_| ApiError::internal("screenshot task failed"))?
    .map_err(|e| ApiError::internal(format!("png encoding failed: {e}")))?;
    let mut resp = (StatusCode::OK, png).into_response();
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("image/png"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(resp)
}

pub async fn get_clipboard(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
) -> Result<Response, ApiError> {
    let text = read(&s, &c, &id, q, |screen| Ok(screen.clipboard.clone()))?;
    Ok(ok(json!({"text": text})))
}

#[derive(Debug, Default, Deserialize)]
pub struct TextBody {
    pub text: Option<String>,
}

pub async fn set_clipboard(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
    JsonBody(body): JsonBody<TextBody>,
) -> Result<Response, ApiError> {
    let text = required("text", body.text)?;
    if text.len() > MAX_CLIPBOARD_BYTES {
        return Err(ApiError::validation(
            "text",
            format!("text must be at most {MAX_CLIPBOARD_BYTES} bytes"),
        ));
    }
    act(&s, &c, &id, q, |screen| {
        screen.clipboard = text;
        Ok(())
    })
}

/// Checks the sandbox, its desktop and the selected screen before a window is seeded.
fn prepare(
    state: &AppState,
    caller: &Caller,
    id: &str,
    q: Q<ScreenQuery>,
) -> Result<(access::DesktopAccess, u8), ApiError> {
    let q = query(q)?;
    let access = access::open(state, caller, id)?;
    let n = screen_number(q.screen_id.as_deref())?;
    access.lock().screen(n)?;
    Ok((access, n))
}

/// Maps a new window from a seed on screen `n` (focused, on top).
fn place(
    access: &access::DesktopAccess,
    n: u8,
    seed: seed::WindowSeed,
) -> Result<Response, ApiError> {
    let mut desktop = access.lock();
    let window_id = desktop.new_window_id();
    let screen = desktop.screen_mut(n)?;
    let title = seed.title.clone();
    let window = screen.add_window(window_id, seed.app, title)?;
    seed.apply(window);
    Ok(ok(json!({"ok": true})))
}

#[derive(Debug, Default, Deserialize)]
pub struct OpenBody {
    pub target: Option<String>,
}

pub async fn open(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
    JsonBody(body): JsonBody<OpenBody>,
) -> Result<Response, ApiError> {
    let target = required("target", body.target)?;
    let (access, n) = prepare(&s, &c, &id, q)?;
    let seed = seed::for_open(&access.sandbox, &target).await?;
    place(&access, n, seed)
}

#[derive(Debug, Default, Deserialize)]
pub struct LaunchBody {
    pub application: Option<String>,
    pub uri: Option<String>,
}

pub async fn launch(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
    JsonBody(body): JsonBody<LaunchBody>,
) -> Result<Response, ApiError> {
    let application = required(
        "application",
        body.application.filter(|a| !a.trim().is_empty()),
    )?;
    let (access, n) = prepare(&s, &c, &id, q)?;
    let app = apps::find_app(&application).ok_or_else(|| {
        ApiError::validation(
            "application",
            format!("unknown application {:?}", application.trim()),
        )
    })?;
    let seed = seed::for_launch(&access.sandbox, app, body.uri.as_deref()).await?;
    place(&access, n, seed)
}

#[derive(Debug, Default, Deserialize)]
pub struct PointBody {
    pub x: Option<i64>,
    pub y: Option<i64>,
}

impl PointBody {
    fn required(self, name: &'static str) -> Result<(i64, i64), ApiError> {
        match (self.x, self.y) {
            (Some(x), Some(y)) => Ok((x, y)),
            _ => Err(ApiError::validation(
                name,
                format!("{name} needs both x and y"),
            )),
        }
    }
}

pub async fn mouse_move(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
    JsonBody(body): JsonBody<PointBody>,
) -> Result<Response, ApiError> {
    let x = required("x", body.x)?;
    let y = required("y", body.y)?;
    act(&s, &c, &id, q, |screen| {
        screen.pointer_move(x, y);
        Ok(())
    })
}

#[derive(Debug, Default, Deserialize)]
pub struct ClickBody {
    pub button: Option<String>,
    pub x: Option<i64>,
    pub y: Option<i64>,
    pub count: Option<i64>,
}

pub async fn mouse_click(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
    JsonBody(body): JsonBody<ClickBody>,
) -> Result<Response, ApiError> {
    let button = Button::parse(body.button.as_deref())?;
    // Like the Go server, 0 (the SDKs' omitted default) means the default of one click.
    let count = body.count.filter(|c| *c != 0).unwrap_or(1);
    if !(1..=MAX_CLICK_COUNT).contains(&count) {
        return Err(ApiError::validation(
            "count",
            format!("count must be between 1 and {MAX_CLICK_COUNT}"),
        ));
    }
    let at = match (body.x, body.y) {
        (Some(x), Some(y)) => Some((x, y)),
        (None, None) => None,
        _ => return Err(ApiError::validation("x", "x and y must be given together")),
    };
    act(&s, &c, &id, q, |screen| {
        if let Some((x, y)) = at {
            screen.pointer_move(x, y);
        }
        screen.click(button, count as u32);
        Ok(())
    })
}

#[derive(Debug, Default, Deserialize)]
pub struct ScrollBody {
    pub direction: Option<String>,
    pub amount: Option<i64>,
}

pub async fn mouse_scroll(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
    JsonBody(body): JsonBody<ScrollBody>,
) -> Result<Response, ApiError> {
    let direction = ScrollDirection::parse(body.direction.as_deref())?;
    let amount = body.amount.filter(|a| *a != 0).unwrap_or(1);
    if !(1..=MAX_SCROLL_AMOUNT).contains(&amount) {
        return Err(ApiError::validation(
            "amount",
            format!("amount must be between 1 and {MAX_SCROLL_AMOUNT}"),
        ));
    }
    act(&s, &c, &id, q, |screen| {
        screen.scroll(direction, amount as u32);
        Ok(())
    })
}

#[derive(Debug, Default, Deserialize)]
pub struct DragBody {
    pub from: Option<PointBody>,
    pub to: Option<PointBody>,
    pub button: Option<String>,
}

pub async fn mouse_drag(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
    JsonBody(body): JsonBody<DragBody>,
) -> Result<Response, ApiError> {
    let from = required("from", body.from)?.required("from")?;
    let to = required("to", body.to)?.required("to")?;
    let button = Button::parse(body.button.as_deref())?;
    act(&s, &c, &id, q, |screen| {
        screen.drag(button, from, to);
        Ok(())
    })
}

#[derive(Debug, Default, Deserialize)]
pub struct ButtonBody {
    pub button: Option<String>,
}

pub async fn mouse_down(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
    JsonBody(body): JsonBody<ButtonBody>,
) -> Result<Response, ApiError> {
    let button = Button::parse(body.button.as_deref())?;
    act(&s, &c, &id, q, |screen| {
        screen.button_down(button, 1);
        Ok(())
    })
}

pub async fn mouse_up(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
    JsonBody(body): JsonBody<ButtonBody>,
) -> Result<Response, ApiError> {
    let button = Button::parse(body.button.as_deref())?;
    act(&s, &c, &id, q, |screen| {
        screen.button_up(button, 1);
        Ok(())
    })
}

#[derive(Debug, Default, Deserialize)]
pub struct TypeBody {
    pub text: Option<String>,
    pub delay_in_ms: Option<i64>,
}

pub async fn keyboard_type(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
    JsonBody(body): JsonBody<TypeBody>,
) -> Result<Response, ApiError> {
    let text = required("text", body.text)?;
    let chars = text.chars().count();
    if chars > MAX_TYPE_CHARS {
        return Err(ApiError::validation(
            "text",
            format!("text must be at most {MAX_TYPE_CHARS} characters"),
        ));
    }
    let delay = body.delay_in_ms.unwrap_or(0);
    if !(0..=MAX_TYPE_DELAY_MS).contains(&delay) {
        return Err(ApiError::validation(
            "delay_in_ms",
            format!("delay_in_ms must be between 0 and {MAX_TYPE_DELAY_MS}"),
        ));
    }
    // xdotool waits `delay` between keystrokes; the call returns when typing is done.
    let typing = Duration::from_millis(delay as u64) * chars.saturating_sub(1) as u32;
    if typing > MAX_TYPE_DURATION {
        return Err(ApiError::validation(
            "delay_in_ms",
            format!(
                "typing would take longer than {} s",
                MAX_TYPE_DURATION.as_secs()
            ),
        ));
    }
    if !typing.is_zero() {
        let access = access::open(&s, &c, &id)?;
        let _busy = Busy::start(&access.sandbox);
        tokio::time::sleep(typing).await;
    }
    act(&s, &c, &id, q, |screen| screen.type_text(&text))
}

#[derive(Debug, Default, Deserialize)]
pub struct KeysBody {
    pub keys: Option<Vec<String>>,
}

fn parse_keys(body: KeysBody) -> Result<Vec<Key>, ApiError> {
    let names = required("keys", body.keys)?;
    if names.is_empty() {
        return Err(ApiError::validation(
            "keys",
            "keys must name at least one key",
        ));
    }
    if names.len() > MAX_CHORD_KEYS {
        return Err(ApiError::validation(
            "keys",
            format!("at most {MAX_CHORD_KEYS} keys at once"),
        ));
    }
    names
        .iter()
        .map(|n| {
            parse_key(n).ok_or_else(|| ApiError::validation("keys", format!("unknown key {n:?}")))
        })
        .collect()
}

pub async fn keyboard_press(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
    JsonBody(body): JsonBody<KeysBody>,
) -> Result<Response, ApiError> {
    let keys = parse_keys(body)?;
    act(&s, &c, &id, q, |screen| screen.press_chord(&keys))
}

pub async fn keyboard_down(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
    JsonBody(body): JsonBody<KeysBody>,
) -> Result<Response, ApiError> {
    let keys = parse_keys(body)?;
    act(&s, &c, &id, q, |screen| screen.keys_down_add(&keys))
}

pub async fn keyboard_up(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
    JsonBody(body): JsonBody<KeysBody>,
) -> Result<Response, ApiError> {
    let keys = parse_keys(body)?;
    act(&s, &c, &id, q, |screen| {
        screen.keys_up(&keys);
        Ok(())
    })
}

/// Marks a sandbox busy (never idle-paused) for as long as it lives.
struct Busy<'a>(&'a crate::sandbox::SandboxRef);

impl<'a> Busy<'a> {
    fn start(sandbox: &'a crate::sandbox::SandboxRef) -> Self {
        sandbox.begin_busy();
        Busy(sandbox)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.end_busy();
    }
}
