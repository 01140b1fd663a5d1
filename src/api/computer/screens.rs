//! Virtual screens of the desktop and their noVNC links (E92–E97). These routes name the screen
//! in the path and never carry the handle's `screen_id` query.

use super::models::{
    validate_screen_id, ComputerScreen, ComputerScreenConnection, ScreenSize, DEFAULT_SCREEN,
};
use super::Computer;
use crate::api::endpoints::{self as ep, Endpoint};
use crate::error::{Error, Result};
use crate::transport::Call;

impl Computer {
    fn screen_call(&self, endpoint: &'static Endpoint, screen_id: &str) -> Result<Call> {
        validate_screen_id("screen_id", screen_id)?;
        Ok(Call::new(endpoint)
            .param(self.sandbox.id())
            .param(screen_id))
    }

    /// Every screen of the desktop (E92).
    pub async fn screens(&self) -> Result<Vec<ComputerScreen>> {
        self.get(Call::new(&ep::LIST_COMPUTER_SCREENS).param(self.sandbox.id()))
            .await
    }

    /// Add a screen (E93), of `size` or the server's default size; at most 8 per desktop.
    /// Drive it with [`Computer::on_screen`].
    ///
    /// ```no_run
    /// # async fn demo(c: createos_sandbox::api::computer::Computer) -> createos_sandbox::Result<()> {
    /// use createos_sandbox::api::computer::ScreenSize;
    /// let screen = c.create_screen(Some(ScreenSize::new(1280, 800))).await?;
    /// let second = c.on_screen(&screen.screen_id)?;
    /// second.launch("xfce4-terminal", None).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_screen(&self, size: Option<ScreenSize>) -> Result<ComputerScreen> {
        let mut call = Call::new(&ep::CREATE_COMPUTER_SCREEN).param(self.sandbox.id());
        call = match size {
            Some(size) => {
                size.validate()?;
                call.json(&size)?
            }
            None => call.json(&serde_json::json!({}))?,
        };
        self.get(call).await
    }

    /// One screen (E94).
    pub async fn screen(&self, screen_id: &str) -> Result<ComputerScreen> {
        self.get(self.screen_call(&ep::GET_COMPUTER_SCREEN, screen_id)?)
            .await
    }

    /// Remove an additional screen and everything on it (E95). The primary `screen-0` cannot be
    /// removed.
    pub async fn delete_screen(&self, screen_id: &str) -> Result<()> {
        if screen_id == DEFAULT_SCREEN {
            return Err(Error::invalid(
                "screen_id",
                "the primary screen-0 cannot be removed",
            ));
        }
        self.act(self.screen_call(&ep::DELETE_COMPUTER_SCREEN, screen_id)?)
            .await
    }

    /// Change a screen's size (E96); answers the screen as it now is.
    pub async fn resize_screen(&self, screen_id: &str, size: ScreenSize) -> Result<ComputerScreen> {
        size.validate()?;
        self.get(
            self.screen_call(&ep::RESIZE_COMPUTER_SCREEN, screen_id)?
                .json(&size)?,
        )
        .await
    }

    /// Mint a noVNC link to a screen (E97). Needs ingress enabled on the sandbox (409
    /// [`crate::Error::Conflict`] otherwise). Each call invalidates the previous link for new
    /// connections. The link is a credential: see [`ComputerScreenConnection`].
    pub async fn connect_screen(&self, screen_id: &str) -> Result<ComputerScreenConnection> {
        self.get(self.screen_call(&ep::CONNECT_COMPUTER_SCREEN, screen_id)?)
            .await
    }
}
