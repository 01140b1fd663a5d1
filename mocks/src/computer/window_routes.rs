//! E81–E91: listing, inspecting and managing the windows of a screen.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};

use super::access::{self, query, required, screen_number, ScreenQuery};
use super::model::{DesktopError, Screen, Window};
use crate::auth::Caller;
use crate::envelope::{ok, ApiError, JsonBody};
use crate::state::AppState;

type Q<T> = Result<Query<T>, QueryRejection>;

/// `{id, title}` as the windows routes return it.
/// `Window`: `application` is the WM_CLASS class, what the `application` filter matches.
fn window_view(w: &Window) -> Value {
    json!({"id": w.id, "title": w.title, "application": w.app.class})
}

fn with_screen<T>(
    state: &AppState,
    caller: &Caller,
    id: &str,
    screen_id: Option<&str>,
    f: impl FnOnce(&mut Screen) -> Result<T, DesktopError>,
) -> Result<T, ApiError> {
    let access = access::open(state, caller, id)?;
    let n = screen_number(screen_id)?;
    let mut desktop = access.lock();
    Ok(f(desktop.screen_mut(n)?)?)
}

fn window_action(
    state: &AppState,
    caller: &Caller,
    (id, window_id): (String, String),
    q: Q<ScreenQuery>,
    f: impl FnOnce(&mut Screen, &str) -> Result<(), DesktopError>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    with_screen(state, caller, &id, q.screen_id.as_deref(), |screen| {
        f(screen, &window_id)
    })?;
    Ok(ok(json!({"ok": true})))
}

#[derive(Debug, Default, Deserialize)]
pub struct WindowsQuery {
    pub screen_id: Option<String>,
    pub application: Option<String>,
}

pub async fn list_windows(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<WindowsQuery>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let filter = q
        .application
        .as_deref()
        .map(str::trim)
        .filter(|a| !a.is_empty());
    let list = with_screen(&s, &c, &id, q.screen_id.as_deref(), |screen| {
        Ok(screen
            .windows
            .iter()
            .filter(|w| filter.is_none_or(|f| super::apps::matches_filter(w.app, f)))
            .map(window_view)
            .collect::<Vec<_>>())
    })?;
    Ok(ok(list))
}

pub async fn current_window(
    State(s): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    q: Q<ScreenQuery>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let view = with_screen(&s, &c, &id, q.screen_id.as_deref(), |screen| {
        screen.current().map(window_view)
    })?;
    Ok(ok(view))
}

pub async fn get_window(
    State(s): State<AppState>,
    c: Caller,
    Path((id, window_id)): Path<(String, String)>,
    q: Q<ScreenQuery>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let view = with_screen(&s, &c, &id, q.screen_id.as_deref(), |screen| {
        screen.window(&window_id).map(window_view)
    })?;
    Ok(ok(view))
}

pub async fn window_geometry(
    State(s): State<AppState>,
    c: Caller,
    Path((id, window_id)): Path<(String, String)>,
    q: Q<ScreenQuery>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let view = with_screen(&s, &c, &id, q.screen_id.as_deref(), |screen| {
        let w = screen.window(&window_id)?;
        Ok(json!({
            "id": w.id,
            "x": w.frame.x,
            "y": w.frame.y,
            "width": w.frame.width,
            "height": w.frame.height,
            "screen": w.screen,
        }))
    })?;
    Ok(ok(view))
}

pub async fn focus_window(
    State(s): State<AppState>,
    c: Caller,
    Path(p): Path<(String, String)>,
    q: Q<ScreenQuery>,
) -> Result<Response, ApiError> {
    window_action(&s, &c, p, q, |screen, w| screen.activate(w))
}

#[derive(Debug, Default, Deserialize)]
pub struct MoveBody {
    pub x: Option<i64>,
    pub y: Option<i64>,
}

pub async fn move_window(
    State(s): State<AppState>,
    c: Caller,
    Path(p): Path<(String, String)>,
    q: Q<ScreenQuery>,
    JsonBody(body): JsonBody<MoveBody>,
) -> Result<Response, ApiError> {
    let x = required("x", body.x)?;
    let y = required("y", body.y)?;
    window_action(&s, &c, p, q, |screen, w| screen.move_window(w, x, y))
}

#[derive(Debug, Default, Deserialize)]
pub struct ResizeBody {
    pub width: Option<i64>,
    pub height: Option<i64>,
}

pub async fn resize_window(
    State(s): State<AppState>,
    c: Caller,
    Path(p): Path<(String, String)>,
    q: Q<ScreenQuery>,
    JsonBody(body): JsonBody<ResizeBody>,
) -> Result<Response, ApiError> {
    let width = required("width", body.width)?;
    let height = required("height", body.height)?;
    window_action(&s, &c, p, q, |screen, w| {
        screen.resize_window(w, width, height)
    })
}

pub async fn maximize_window(
    State(s): State<AppState>,
    c: Caller,
    Path(p): Path<(String, String)>,
    q: Q<ScreenQuery>,
) -> Result<Response, ApiError> {
    window_action(&s, &c, p, q, |screen, w| screen.maximize(w))
}

pub async fn minimize_window(
    State(s): State<AppState>,
    c: Caller,
    Path(p): Path<(String, String)>,
    q: Q<ScreenQuery>,
) -> Result<Response, ApiError> {
    window_action(&s, &c, p, q, |screen, w| screen.minimize(w))
}

pub async fn restore_window(
    State(s): State<AppState>,
    c: Caller,
    Path(p): Path<(String, String)>,
    q: Q<ScreenQuery>,
) -> Result<Response, ApiError> {
    window_action(&s, &c, p, q, |screen, w| screen.restore(w))
}

pub async fn close_window(
    State(s): State<AppState>,
    c: Caller,
    Path(p): Path<(String, String)>,
    q: Q<ScreenQuery>,
) -> Result<Response, ApiError> {
    window_action(&s, &c, p, q, |screen, w| screen.close(w))
}
