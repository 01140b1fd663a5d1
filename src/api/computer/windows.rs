//! Windows of the desktop (E81–E91).

use serde::Serialize;

use super::models::{self, Point, Window, WindowGeometry};
use super::Computer;
use crate::api::endpoints::{self as ep, Endpoint};
use crate::error::Result;
use crate::transport::Call;
use crate::validate;

impl Computer {
    /// A per-window call; the window id is checked first.
    fn window_call(&self, endpoint: &'static Endpoint, window_id: &str) -> Result<Call> {
        validate::id("window id", window_id)?;
        Ok(Call::new(endpoint)
            .param(self.sandbox.id())
            .param(window_id)
            .query("screen_id", &*self.screen_id))
    }

    /// Top-level windows of the screen, optionally only those of `application` (E81).
    ///
    /// ```no_run
    /// # async fn demo(c: createos_sandbox::api::computer::Computer) -> createos_sandbox::Result<()> {
    /// c.launch("xfce4-terminal", None).await?;
    /// for w in c.windows(Some("xfce4-terminal")).await? {
    ///     println!("{} {}", w.id, w.title.unwrap_or_default());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn windows(&self, application: Option<&str>) -> Result<Vec<Window>> {
        if let Some(app) = application {
            models::non_empty("application", app)?;
        }
        let call = self
            .call(&ep::LIST_COMPUTER_WINDOWS)
            .query_opt("application", application);
        self.get(call).await
    }

    /// The active (focused) window (E82).
    pub async fn current_window(&self) -> Result<Window> {
        self.get(self.call(&ep::GET_COMPUTER_CURRENT_WINDOW)).await
    }

    /// One window (E83).
    pub async fn window(&self, window_id: &str) -> Result<Window> {
        self.get(self.window_call(&ep::GET_COMPUTER_WINDOW, window_id)?)
            .await
    }

    /// Position and size of a window (E84).
    pub async fn window_geometry(&self, window_id: &str) -> Result<WindowGeometry> {
        self.get(self.window_call(&ep::GET_COMPUTER_WINDOW_GEOMETRY, window_id)?)
            .await
    }

    /// Raise and focus a window (E85).
    pub async fn focus_window(&self, window_id: &str) -> Result<()> {
        self.act(self.window_call(&ep::FOCUS_COMPUTER_WINDOW, window_id)?)
            .await
    }

    /// Move a window's top-left corner to `to` (E86).
    pub async fn move_window(&self, window_id: &str, to: impl Into<Point>) -> Result<()> {
        let to = to.into();
        to.validate("to")?;
        self.act(
            self.window_call(&ep::MOVE_COMPUTER_WINDOW, window_id)?
                .json(&to)?,
        )
        .await
    }

    /// Resize a window to `width` × `height` pixels (E87).
    pub async fn resize_window(&self, window_id: &str, width: u32, height: u32) -> Result<()> {
        #[derive(Serialize)]
        struct Size {
            width: u32,
            height: u32,
        }
        models::dimension("width", width)?;
        models::dimension("height", height)?;
        let call = self
            .window_call(&ep::RESIZE_COMPUTER_WINDOW, window_id)?
            .json(&Size { width, height })?;
        self.act(call).await
    }

    /// Maximize a window (E88).
    pub async fn maximize_window(&self, window_id: &str) -> Result<()> {
        self.act(self.window_call(&ep::MAXIMIZE_COMPUTER_WINDOW, window_id)?)
            .await
    }

    /// Minimize (iconify) a window (E89).
    pub async fn minimize_window(&self, window_id: &str) -> Result<()> {
        self.act(self.window_call(&ep::MINIMIZE_COMPUTER_WINDOW, window_id)?)
            .await
    }

    /// Restore a maximized or minimized window (E90).
    pub async fn restore_window(&self, window_id: &str) -> Result<()> {
        self.act(self.window_call(&ep::RESTORE_COMPUTER_WINDOW, window_id)?)
            .await
    }

    /// Close a window (E91), as its close button would.
    pub async fn close_window(&self, window_id: &str) -> Result<()> {
        self.act(self.window_call(&ep::CLOSE_COMPUTER_WINDOW, window_id)?)
            .await
    }
}
