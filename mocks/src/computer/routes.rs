//! The computer-use operation table and router.

use axum::routing::{get, post};
use axum::Router;

use super::{input_routes as input, screen_routes as screens, window_routes as windows};
use crate::operation::{op, Operation};
use crate::state::AppState;

const C: &str = "/v1/sandboxes/{id}/computer";

macro_rules! computer_path {
    ($suffix:literal) => {
        concat!("/v1/sandboxes/{id}/computer", $suffix)
    };
}

pub const OPERATIONS: &[Operation] = &[
    op(
        "getComputerScreenSize",
        "GET",
        computer_path!("/screen"),
        "computer::input_routes::screen_size",
    ),
    op(
        "getComputerCursor",
        "GET",
        computer_path!("/cursor"),
        "computer::input_routes::cursor",
    ),
    op(
        "getComputerScreenshot",
        "GET",
        computer_path!("/screenshot"),
        "computer::input_routes::screenshot",
    ),
    op(
        "getComputerClipboard",
        "GET",
        computer_path!("/clipboard"),
        "computer::input_routes::get_clipboard",
    ),
    op(
        "setComputerClipboard",
        "PUT",
        computer_path!("/clipboard"),
        "computer::input_routes::set_clipboard",
    ),
    op(
        "computerOpen",
        "POST",
        computer_path!("/open"),
        "computer::input_routes::open",
    ),
    op(
        "computerLaunch",
        "POST",
        computer_path!("/launch"),
        "computer::input_routes::launch",
    ),
    op(
        "computerMouseMove",
        "POST",
        computer_path!("/mouse/move"),
        "computer::input_routes::mouse_move",
    ),
    op(
        "computerMouseClick",
        "POST",
        computer_path!("/mouse/click"),
        "computer::input_routes::mouse_click",
    ),
    op(
        "computerMouseScroll",
        "POST",
        computer_path!("/mouse/scroll"),
        "computer::input_routes::mouse_scroll",
    ),
    op(
        "computerMouseDrag",
        "POST",
        computer_path!("/mouse/drag"),
        "computer::input_routes::mouse_drag",
    ),
    op(
        "computerMouseDown",
        "POST",
        computer_path!("/mouse/down"),
        "computer::input_routes::mouse_down",
    ),
    op(
        "computerMouseUp",
        "POST",
        computer_path!("/mouse/up"),
        "computer::input_routes::mouse_up",
    ),
    op(
        "computerKeyboardType",
        "POST",
        computer_path!("/keyboard/type"),
        "computer::input_routes::keyboard_type",
    ),
    op(
        "computerKeyboardPress",
        "POST",
        computer_path!("/keyboard/press"),
        "computer::input_routes::keyboard_press",
    ),
    op(
        "computerKeyboardDown",
        "POST",
        computer_path!("/keyboard/down"),
        "computer::input_routes::keyboard_down",
    ),
    op(
        "computerKeyboardUp",
        "POST",
        computer_path!("/keyboard/up"),
        "computer::input_routes::keyboard_up",
    ),
    op(
        "listComputerWindows",
        "GET",
        computer_path!("/windows"),
        "computer::window_routes::list_windows",
    ),
    op(
        "getComputerCurrentWindow",
        "GET",
        computer_path!("/windows/current"),
        "computer::window_routes::current_window",
    ),
    op(
        "getComputerWindow",
        "GET",
        computer_path!("/windows/{window_id}"),
        "computer::window_routes::get_window",
    ),
    op(
        "getComputerWindowGeometry",
        "GET",
        computer_path!("/windows/{window_id}/geometry"),
        "computer::window_routes::window_geometry",
    ),
    op(
        "focusComputerWindow",
        "POST",
        computer_path!("/windows/{window_id}/focus"),
        "computer::window_routes::focus_window",
    ),
    op(
        "moveComputerWindow",
        "POST",
        computer_path!("/windows/{window_id}/move"),
        "computer::window_routes::move_window",
    ),
    op(
        "resizeComputerWindow",
        "POST",
        computer_path!("/windows/{window_id}/resize"),
        "computer::window_routes::resize_window",
    ),
    op(
        "maximizeComputerWindow",
        "POST",
        computer_path!("/windows/{window_id}/maximize"),
        "computer::window_routes::maximize_window",
    ),
    op(
        "minimizeComputerWindow",
        "POST",
        computer_path!("/windows/{window_id}/minimize"),
        "computer::window_routes::minimize_window",
    ),
    op(
        "restoreComputerWindow",
        "POST",
        computer_path!("/windows/{window_id}/restore"),
        "computer::window_routes::restore_window",
    ),
    op(
        "closeComputerWindow",
        "DELETE",
        computer_path!("/windows/{window_id}"),
        "computer::window_routes::close_window",
    ),
    op(
        "listComputerScreens",
        "GET",
        computer_path!("/screens"),
        "computer::screen_routes::list_screens",
    ),
    op(
        "createComputerScreen",
        "POST",
        computer_path!("/screens"),
        "computer::screen_routes::create_screen",
    ),
    op(
        "getComputerScreen",
        "GET",
        computer_path!("/screens/{screen_id}"),
        "computer::screen_routes::get_screen",
    ),
    op(
        "deleteComputerScreen",
        "DELETE",
        computer_path!("/screens/{screen_id}"),
        "computer::screen_routes::delete_screen",
    ),
    op(
        "resizeComputerScreen",
        "POST",
        computer_path!("/screens/{screen_id}/resize"),
        "computer::screen_routes::resize_screen",
    ),
    op(
        "connectComputerScreen",
        "GET",
        computer_path!("/screens/{screen_id}/connect"),
        "computer::screen_routes::connect_screen",
    ),
];

fn at(suffix: &str) -> String {
    format!("{C}{suffix}")
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(&at("/screen"), get(input::screen_size))
        .route(&at("/cursor"), get(input::cursor))
        .route(&at("/screenshot"), get(input::screenshot))
        .route(
            &at("/clipboard"),
            get(input::get_clipboard).put(input::set_clipboard),
        )
        .route(&at("/open"), post(input::open))
        .route(&at("/launch"), post(input::launch))
        .route(&at("/mouse/move"), post(input::mouse_move))
        .route(&at("/mouse/click"), post(input::mouse_click))
        .route(&at("/mouse/scroll"), post(input::mouse_scroll))
        .route(&at("/mouse/drag"), post(input::mouse_drag))
        .route(&at("/mouse/down"), post(input::mouse_down))
        .route(&at("/mouse/up"), post(input::mouse_up))
        .route(&at("/keyboard/type"), post(input::keyboard_type))
        .route(&at("/keyboard/press"), post(input::keyboard_press))
        .route(&at("/keyboard/down"), post(input::keyboard_down))
        .route(&at("/keyboard/up"), post(input::keyboard_up))
        .route(&at("/windows"), get(windows::list_windows))
        .route(&at("/windows/current"), get(windows::current_window))
        .route(
            &at("/windows/{window_id}"),
            get(windows::get_window).delete(windows::close_window),
        )
        .route(
            &at("/windows/{window_id}/geometry"),
            get(windows::window_geometry),
        )
        .route(
            &at("/windows/{window_id}/focus"),
            post(windows::focus_window),
        )
        .route(&at("/windows/{window_id}/move"), post(windows::move_window))
        .route(
            &at("/windows/{window_id}/resize"),
            post(windows::resize_window),
        )
        .route(
            &at("/windows/{window_id}/maximize"),
            post(windows::maximize_window),
        )
        .route(
            &at("/windows/{window_id}/minimize"),
            post(windows::minimize_window),
        )
        .route(
            &at("/windows/{window_id}/restore"),
            post(windows::restore_window),
        )
        .route(
            &at("/screens"),
            get(screens::list_screens).post(screens::create_screen),
        )
        .route(
            &at("/screens/{screen_id}"),
            get(screens::get_screen).delete(screens::delete_screen),
        )
        .route(
            &at("/screens/{screen_id}/resize"),
            post(screens::resize_screen),
        )
        .route(
            &at("/screens/{screen_id}/connect"),
            get(screens::connect_screen),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_covers_the_34_operations_once() {
        assert_eq!(OPERATIONS.len(), 34);
        let mut ids: Vec<_> = OPERATIONS.iter().map(|o| o.operation_id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 34);
        assert!(OPERATIONS.iter().all(|o| o.path.starts_with(C)));
    }
}
