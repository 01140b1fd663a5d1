//! `sandbox_screenshot` and `sandbox_computer` on desktop sandboxes.

use std::sync::Arc;

use serde_json::json;

use super::{named, to_json, ToolOutput};
use crate::tools::args::Args;
use crate::tools::runtime::Runtime;
use crate::tools::{Part, ToolError};
use createos_sandbox::api::computer::{MouseButton, MouseClick, Point, ScreenshotRegion};

/// Largest screenshot returned inline.
const MAX_SCREENSHOT_BYTES: usize = 10 << 20;

pub(super) async fn screenshot(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    let sandbox = named(rt, args)?;
    let png = sandbox
        .computer()
        .screenshot(ScreenshotRegion::full_screen())
        .await?;
    if png.len() > MAX_SCREENSHOT_BYTES {
        return Err(ToolError::Refused(format!(
            "the screenshot is {} bytes, over the {MAX_SCREENSHOT_BYTES}-byte inline limit",
            png.len()
        )));
    }
    Ok(ToolOutput {
        content: vec![Part::Png(png.to_vec())],
        meta: Default::default(),
    }
    .with("sandboxId", sandbox.id()))
}

fn point(args: &Args) -> Result<Option<Point>, ToolError> {
    match (args.opt_u64("x"), args.opt_u64("y")) {
        (Some(x), Some(y)) => Ok(Some(Point::new(x as i32, y as i32))),
        (None, None) => Ok(None),
        _ => Err(ToolError::InvalidArgs(
            "give both x and y, or neither".into(),
        )),
    }
}

pub(super) async fn computer(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    let sandbox = named(rt, args)?;
    let pc = sandbox.computer();
    let op = args.str("op")?;
    let result = match op {
        "screen" => to_json(pc.screen_size().await?)?,
        "cursor" => to_json(pc.cursor().await?)?,
        "windows" => to_json(pc.windows(None).await?)?,
        "move" => {
            let to =
                point(args)?.ok_or_else(|| ToolError::InvalidArgs("move needs x and y".into()))?;
            pc.mouse_move(to).await?;
            json!({"moved": to})
        }
        "click" => {
            let mut click = MouseClick::new(MouseButton::Left);
            if let Some(at) = point(args)? {
                click = click.at(at);
            }
            pc.mouse_click(click).await?;
            json!({"clicked": true})
        }
        "type" => {
            let text = args
                .opt_str("text")
                .ok_or_else(|| ToolError::InvalidArgs("type needs text".into()))?;
            pc.type_text(text, None).await?;
            json!({"typed": text.chars().count()})
        }
        "key" => {
            let keys = args.strings("keys");
            if keys.is_empty() {
                return Err(ToolError::InvalidArgs(
                    "key needs at least one key in keys".into(),
                ));
            }
            pc.press_keys(keys.clone()).await?;
            json!({"pressed": keys})
        }
        "open" => {
            let target = args
                .opt_str("target")
                .ok_or_else(|| ToolError::InvalidArgs("open needs target".into()))?;
            pc.open(target).await?;
            json!({"opened": target})
        }
        other => return Err(ToolError::InvalidArgs(format!("unknown op {other:?}"))),
    };
    Ok(ToolOutput::json(result).with("sandboxId", sandbox.id()))
}

/// How long the desktop may take to come up.
const DESKTOP_READY: std::time::Duration = std::time::Duration::from_secs(180);

pub(super) async fn desktop(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    let sandbox = named(rt, args)?;
    let view = sandbox
        .update(createos_sandbox::UpdateSandbox {
            ingress_enabled: Some(true),
            ..Default::default()
        })
        .await?;
    let pc = sandbox.computer();
    let size = pc.wait_until_ready(DESKTOP_READY).await?;
    let link = pc.connect_screen(pc.screen_id()).await?;
    Ok(ToolOutput::json(json!({
        "sandbox_id": view.id,
        "ingress_enabled": view.ingress_enabled,
        "screen": size,
        "novnc": to_json(link)?,
        "verified": false,
    }))
    .with("sandboxId", sandbox.id()))
}
