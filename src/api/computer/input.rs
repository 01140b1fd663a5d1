//! Pointer and keyboard actions (E71–E80).

use std::time::Duration;

use serde::Serialize;

use super::models::{self, MouseButton, MouseClick, Point, ScrollDirection};
use super::Computer;
use crate::api::endpoints as ep;
use crate::error::{Error, Result};

/// Largest per-character delay accepted by [`Computer::type_text`].
pub const MAX_TYPE_DELAY: Duration = Duration::from_secs(10);

#[derive(Serialize)]
struct Button {
    button: MouseButton,
}

#[derive(Serialize)]
struct Keys<'a> {
    keys: &'a [String],
}

fn collect_keys<I, K>(keys: I) -> Result<Vec<String>>
where
    I: IntoIterator<Item = K>,
    K: Into<String>,
{
    let keys: Vec<String> = keys.into_iter().map(Into::into).collect();
    models::key_names("keys", &keys)?;
    Ok(keys)
}

impl Computer {
    /// Move the pointer to `to` (E71).
    ///
    /// ```no_run
    /// # async fn demo(c: createos_sandbox::api::computer::Computer) -> createos_sandbox::Result<()> {
    /// c.mouse_move((100, 200)).await?;
    /// let cursor = c.cursor().await?;
    /// assert_eq!((cursor.x, cursor.y), (100, 200));
    /// # Ok(()) }
    /// ```
    pub async fn mouse_move(&self, to: impl Into<Point>) -> Result<()> {
        let to = to.into();
        to.validate("to")?;
        self.act_json(&ep::COMPUTER_MOUSE_MOVE, &to).await
    }

    /// Click (E72): button, position (default: where the pointer is) and count (1–10).
    pub async fn mouse_click(&self, click: MouseClick) -> Result<()> {
        click.validate()?;
        self.act_json(&ep::COMPUTER_MOUSE_CLICK, &click).await
    }

    /// Turn the wheel `amount` notches (> 0) towards `direction` (E73).
    pub async fn mouse_scroll(&self, direction: ScrollDirection, amount: u32) -> Result<()> {
        if amount == 0 {
            return Err(Error::invalid("amount", "must be greater than zero"));
        }
        #[derive(Serialize)]
        struct Scroll {
            direction: ScrollDirection,
            amount: u32,
        }
        self.act_json(&ep::COMPUTER_MOUSE_SCROLL, &Scroll { direction, amount })
            .await
    }

    /// Press the left button at `from`, move to `to`, release (E74).
    pub async fn mouse_drag(&self, from: impl Into<Point>, to: impl Into<Point>) -> Result<()> {
        #[derive(Serialize)]
        struct Drag {
            from: Point,
            to: Point,
        }
        let (from, to) = (from.into(), to.into());
        from.validate("from")?;
        to.validate("to")?;
        self.act_json(&ep::COMPUTER_MOUSE_DRAG, &Drag { from, to })
            .await
    }

    /// Press and hold `button` where the pointer is (E75); release with [`Self::mouse_up`].
    pub async fn mouse_down(&self, button: MouseButton) -> Result<()> {
        self.act_json(&ep::COMPUTER_MOUSE_DOWN, &Button { button })
            .await
    }

    /// Release `button` (E76).
    pub async fn mouse_up(&self, button: MouseButton) -> Result<()> {
        self.act_json(&ep::COMPUTER_MOUSE_UP, &Button { button })
            .await
    }

    /// Type `text` into the focused window (E77), optionally pausing `delay` between characters
    /// (millisecond resolution, at most 10 s).
    ///
    /// ```no_run
    /// # async fn demo(c: createos_sandbox::api::computer::Computer) -> createos_sandbox::Result<()> {
    /// c.type_text("https://example.com\n", None).await?;
    /// # Ok(()) }
    /// ```
    pub async fn type_text(&self, text: &str, delay: Option<Duration>) -> Result<()> {
        models::non_empty("text", text)?;
        if let Some(delay) = delay {
            if delay > MAX_TYPE_DELAY {
                return Err(Error::invalid(
                    "delay",
                    format!("{delay:?} is longer than {MAX_TYPE_DELAY:?}"),
                ));
            }
        }
        #[derive(Serialize)]
        struct TypeText<'a> {
            text: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            delay_in_ms: Option<u64>,
        }
        let delay_in_ms = delay.map(|d| d.as_millis() as u64);
        self.act_json(&ep::COMPUTER_KEYBOARD_TYPE, &TypeText { text, delay_in_ms })
            .await
    }

    /// Press one chord, keys together, then release it (E78), e.g. `["ctrl", "l"]`.
    pub async fn press_keys<I, K>(&self, keys: I) -> Result<()>
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        let keys = collect_keys(keys)?;
        self.act_json(&ep::COMPUTER_KEYBOARD_PRESS, &Keys { keys: &keys })
            .await
    }

    /// Press and hold `keys` (E79); release with [`Self::keys_up`].
    pub async fn keys_down<I, K>(&self, keys: I) -> Result<()>
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        let keys = collect_keys(keys)?;
        self.act_json(&ep::COMPUTER_KEYBOARD_DOWN, &Keys { keys: &keys })
            .await
    }

    /// Release `keys` (E80).
    pub async fn keys_up<I, K>(&self, keys: I) -> Result<()>
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        let keys = collect_keys(keys)?;
        self.act_json(&ep::COMPUTER_KEYBOARD_UP, &Keys { keys: &keys })
            .await
    }
}
