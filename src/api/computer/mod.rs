//! Computer use (E64–E97): drive the desktop of a `desktop:1` sandbox — screen, pointer,
//! keyboard, clipboard, windows, extra virtual screens and noVNC links.
//!
//! ```no_run
//! # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
//! use std::time::Duration;
//! use createos_sandbox::api::computer::{MouseButton, MouseClick, Point, ScreenshotRegion};
//!
//! let computer = sandbox.computer();
//! let size = computer.wait_until_ready(Duration::from_secs(120)).await?;
//! computer.mouse_click(MouseClick::new(MouseButton::Left).at(Point::new(size.width as i32 / 2, 10))).await?;
//! computer.type_text("hello", None).await?;
//! let png = computer.screenshot(ScreenshotRegion::default()).await?;
//! std::fs::write("shot.png", &png).ok();
//! # Ok(()) }
//! ```
//!
//! Coordinates are raw X11 pixels of the screen (no DPI scaling); read [`Computer::screen_size`]
//! for the bounds. Every route except the `screens` sub-resource carries the handle's
//! `screen_id`.

mod input;
mod models;
mod screens;
mod windows;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::Instant;

pub use models::*;

use crate::api::endpoints::{self as ep, Endpoint};
use crate::api::sandboxes::Sandbox;
use crate::api::OkResponse;
use crate::error::{Error, Result};
use crate::transport::Call;

/// Interval between two readiness probes of [`Computer::wait_until_ready`] (the CLI's).
pub const READY_POLL_INTERVAL: Duration = Duration::from_secs(2);

impl Sandbox {
    /// The desktop's first screen, `screen-0` (the only one most sandboxes have).
    pub fn computer(&self) -> Computer {
        Computer {
            sandbox: self.clone(),
            screen_id: Arc::from(DEFAULT_SCREEN),
        }
    }

    /// The desktop's screen `screen_id` (`screen-0` … `screen-7`); see [`Computer::create_screen`].
    pub fn computer_on(&self, screen_id: &str) -> Result<Computer> {
        validate_screen_id("screen_id", screen_id)?;
        Ok(Computer {
            sandbox: self.clone(),
            screen_id: Arc::from(screen_id),
        })
    }
}

/// One screen of a sandbox's desktop. Cheap to clone.
///
/// Needs a sandbox created from the `desktop:1` rootfs; other images answer 501
/// ([`Error::Server`]). The desktop starts after the sandbox is running: call
/// [`Computer::wait_until_ready`] first.
#[derive(Clone, Debug)]
pub struct Computer {
    sandbox: Sandbox,
    screen_id: Arc<str>,
}

impl Computer {
    /// The sandbox this desktop belongs to.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// The screen this handle drives.
    pub fn screen_id(&self) -> &str {
        &self.screen_id
    }

    /// The same desktop, another screen.
    pub fn on_screen(&self, screen_id: &str) -> Result<Computer> {
        self.sandbox.computer_on(screen_id)
    }

    /// A call to a per-screen route: sandbox id filled, `screen_id` query set.
    fn call(&self, endpoint: &'static Endpoint) -> Call {
        Call::new(endpoint)
            .param(self.sandbox.id())
            .query("screen_id", &*self.screen_id)
    }

    async fn get<T: DeserializeOwned>(&self, call: Call) -> Result<T> {
        self.sandbox.client.transport.json(call).await
    }

    /// Send an action whose answer is `{"ok": true}`.
    async fn act(&self, call: Call) -> Result<()> {
        let _: OkResponse = self.sandbox.client.transport.json(call).await?;
        Ok(())
    }

    async fn act_json<B: Serialize + ?Sized>(
        &self,
        endpoint: &'static Endpoint,
        body: &B,
    ) -> Result<()> {
        self.act(self.call(endpoint).json(body)?).await
    }

    /// Size of the screen in pixels (E64). Also the desktop's readiness probe.
    pub async fn screen_size(&self) -> Result<ScreenSize> {
        self.get(self.call(&ep::GET_COMPUTER_SCREEN_SIZE)).await
    }

    /// Position of the mouse pointer (E65).
    pub async fn cursor(&self) -> Result<Cursor> {
        self.get(self.call(&ep::GET_COMPUTER_CURSOR)).await
    }

    /// Capture the screen, one window or a rectangle as PNG bytes (E66). The server rate-limits
    /// screenshots (429, retried with its `Retry-After`).
    ///
    /// ```no_run
    /// # async fn demo(c: createos_sandbox::api::computer::Computer) -> createos_sandbox::Result<()> {
    /// use createos_sandbox::api::computer::ScreenshotRegion;
    /// let png = c.screenshot(ScreenshotRegion::rect(0, 0, 320, 200)).await?;
    /// assert!(createos_sandbox::api::computer::is_png(&png));
    /// # Ok(()) }
    /// ```
    pub async fn screenshot(&self, region: ScreenshotRegion) -> Result<Bytes> {
        let mut call = self.call(&ep::GET_COMPUTER_SCREENSHOT).accept("image/png");
        for (key, value) in region.query()? {
            call = call.query(key, value);
        }
        let (headers, png) = self.sandbox.client.transport.bytes(call).await?;
        if !is_png(&png) {
            let content_type = headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("no content type");
            return Err(Error::decode(
                ep::GET_COMPUTER_SCREENSHOT.label(),
                format!("answer is not a PNG ({} bytes, {content_type})", png.len()),
            ));
        }
        Ok(png)
    }

    /// Text on the desktop clipboard (E67).
    pub async fn clipboard(&self) -> Result<Clipboard> {
        self.get(self.call(&ep::GET_COMPUTER_CLIPBOARD)).await
    }

    /// Replace the clipboard's text (E68). An empty string clears it.
    pub async fn set_clipboard(&self, text: &str) -> Result<()> {
        if text.contains('\0') {
            return Err(Error::invalid("text", "contains a NUL byte"));
        }
        self.act_json(
            &ep::SET_COMPUTER_CLIPBOARD,
            &serde_json::json!({ "text": text }),
        )
        .await
    }

    /// Open a URL or a local path with the desktop's default handler (E69).
    pub async fn open(&self, target: &str) -> Result<()> {
        models::non_empty("target", target)?;
        self.act_json(&ep::COMPUTER_OPEN, &serde_json::json!({ "target": target }))
            .await
    }

    /// Start `application` (e.g. `firefox`, `xfce4-terminal`), optionally on `uri` (E70).
    pub async fn launch(&self, application: &str, uri: Option<&str>) -> Result<()> {
        models::non_empty("application", application)?;
        if let Some(uri) = uri {
            models::non_empty("uri", uri)?;
        }
        #[derive(Serialize)]
        struct Launch<'a> {
            application: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            uri: Option<&'a str>,
        }
        self.act_json(&ep::COMPUTER_LAUNCH, &Launch { application, uri })
            .await
    }

    /// Wait until the desktop answers, polling [`Self::screen_size`] every 2 s for at most
    /// `timeout`, and return the screen size.
    ///
    /// 404, 409 (`desktop_unavailable`, or a sandbox still resuming) and 429 mean "not yet";
    /// a 404 naming the sandbox itself (`sandbox not found`) and every other error end the wait,
    /// notably 501 ([`Error::Server`]) for an image without desktop tools. Running out of time
    /// gives [`Error::Timeout`] with the last answer seen.
    pub async fn wait_until_ready(&self, timeout: Duration) -> Result<ScreenSize> {
        let deadline = Instant::now() + timeout;
        let mut last = String::from("no answer yet");
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(remaining, self.screen_size()).await {
                Ok(Ok(size)) => return Ok(size),
                Ok(Err(err)) if not_ready_yet(&err) => last = err.to_string(),
                Ok(Err(err)) => return Err(err),
                Err(_) => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Timeout {
                    endpoint: format!(
                        "waiting for the desktop of {} ({}; last answer: {last})",
                        self.sandbox.id(),
                        self.screen_id
                    ),
                    after: timeout,
                });
            }
            tokio::time::sleep(READY_POLL_INTERVAL.min(deadline - now)).await;
        }
    }
}

/// Answers during which a desktop may still come up.
fn not_ready_yet(err: &Error) -> bool {
    match err {
        Error::NotFound(api) => {
            api.fields.get("sandbox").map(String::as_str) != Some("sandbox not found")
        }
        Error::Conflict(_) | Error::RateLimited { .. } => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ApiError;

    fn api(status: u16, fields: &[(&str, &str)]) -> Error {
        Error::from_api(ApiError {
            status,
            code: None,
            message: String::new(),
            fields: fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            request_id: None,
            endpoint: String::new(),
            path: None,
            retry_after: None,
        })
    }

    #[test]
    fn readiness_verdicts() {
        assert!(not_ready_yet(&api(
            409,
            &[("desktop", "desktop_unavailable")]
        )));
        assert!(not_ready_yet(&api(429, &[])));
        assert!(not_ready_yet(&api(404, &[("screen", "screen not found")])));
        assert!(!not_ready_yet(&api(
            404,
            &[("sandbox", "sandbox not found")]
        )));
        assert!(!not_ready_yet(&api(501, &[])));
        assert!(!not_ready_yet(&api(400, &[])));
        assert!(!not_ready_yet(&api(401, &[])));
    }
}
