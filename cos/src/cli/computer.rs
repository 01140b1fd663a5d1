//! `cos computer <sandbox> …`: drive the desktop of a `desktop:1` sandbox.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;

use createos_sandbox::api::computer::{
    MouseButton, MouseClick, Point, ScreenSize, ScreenshotRegion, ScrollDirection,
};

use super::{resolve, Ctx};

#[derive(Debug, Args)]
pub struct ComputerArgs {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// Screen to act on (`screen-0` … `screen-7`).
    #[arg(long, default_value = "screen-0")]
    pub screen: String,
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Button {
    Left,
    Middle,
    Right,
}

impl From<Button> for MouseButton {
    fn from(b: Button) -> Self {
        match b {
            Button::Left => MouseButton::Left,
            Button::Middle => MouseButton::Middle,
            Button::Right => MouseButton::Right,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Direction {
    Up,
    Down,
}

#[derive(Debug, Subcommand)]
pub enum Action {
    /// Wait until the desktop answers (up to --timeout seconds).
    WaitReady {
        #[arg(long, default_value_t = 120)]
        timeout: u64,
    },
    /// Screen size.
    Screen,
    /// Pointer position.
    Cursor,
    /// Save a PNG screenshot.
    Screenshot {
        /// Output file.
        #[arg(long, short = 'f')]
        file: PathBuf,
        /// Only this window.
        #[arg(long)]
        window: Option<String>,
        /// Only this rectangle: X,Y,WIDTH,HEIGHT.
        #[arg(long, value_parser = parse_rect)]
        region: Option<(i32, i32, u32, u32)>,
    },
    /// Read the clipboard, or set it with --set.
    Clipboard {
        #[arg(long)]
        set: Option<String>,
    },
    /// Open a URL or path with the desktop's handler.
    Open { target: String },
    /// Launch an application.
    Launch {
        application: String,
        #[arg(long)]
        uri: Option<String>,
    },
    /// Move the pointer.
    Move { x: i32, y: i32 },
    /// Click (at the pointer, or at --at X,Y).
    Click {
        #[arg(long, value_enum, default_value = "left")]
        button: Button,
        #[arg(long, value_parser = parse_point)]
        at: Option<(i32, i32)>,
        #[arg(long, default_value_t = 1)]
        count: u32,
    },
    /// Scroll.
    Scroll {
        #[arg(value_enum)]
        direction: Direction,
        amount: u32,
    },
    /// Drag from one point to another.
    Drag {
        from_x: i32,
        from_y: i32,
        to_x: i32,
        to_y: i32,
    },
    /// Press a mouse button.
    MouseDown {
        #[arg(long, value_enum, default_value = "left")]
        button: Button,
    },
    /// Release a mouse button.
    MouseUp {
        #[arg(long, value_enum, default_value = "left")]
        button: Button,
    },
    /// Type text.
    Type {
        text: String,
        /// Delay between keystrokes, ms.
        #[arg(long)]
        delay_ms: Option<u64>,
    },
    /// Press a chord (e.g. `ctrl l`).
    Press {
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Hold keys down.
    KeyDown {
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Release keys.
    KeyUp {
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// List windows.
    Windows {
        #[arg(long)]
        application: Option<String>,
    },
    /// The focused window.
    CurrentWindow,
    /// Act on one window.
    Window {
        id: String,
        #[command(subcommand)]
        op: Option<WindowOp>,
    },
    /// Extra virtual screens.
    #[command(subcommand)]
    Screens(ScreensOp),
}

#[derive(Debug, Subcommand)]
pub enum WindowOp {
    Geometry,
    Focus,
    Move { x: i32, y: i32 },
    Resize { width: u32, height: u32 },
    Maximize,
    Minimize,
    Restore,
    Close,
}

#[derive(Debug, Subcommand)]
pub enum ScreensOp {
    Ls,
    Create {
        #[arg(long)]
        width: Option<u32>,
        #[arg(long)]
        height: Option<u32>,
    },
    Get {
        screen: String,
    },
    Rm {
        screen: String,
    },
    Resize {
        screen: String,
        width: u32,
        height: u32,
    },
    /// A noVNC link (needs ingress; the link is a credential until it expires).
    Connect {
        screen: String,
    },
}

fn parse_point(s: &str) -> std::result::Result<(i32, i32), String> {
    let (x, y) = s.split_once(',').ok_or("expected X,Y")?;
    Ok((
        x.trim().parse().map_err(|_| "bad X")?,
        y.trim().parse().map_err(|_| "bad Y")?,
    ))
}

fn parse_rect(s: &str) -> std::result::Result<(i32, i32, u32, u32), String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    let [x, y, w, h] = parts.as_slice() else {
        return Err("expected X,Y,WIDTH,HEIGHT".into());
    };
    Ok((
        x.parse().map_err(|_| "bad X")?,
        y.parse().map_err(|_| "bad Y")?,
        w.parse().map_err(|_| "bad WIDTH")?,
        h.parse().map_err(|_| "bad HEIGHT")?,
    ))
}

fn done(ctx: &Ctx, what: String) {
    ctx.out
        .show(&json!({ "ok": true, "action": what }), || what.clone());
}

pub async fn computer(ctx: &Ctx, args: ComputerArgs) -> Result<()> {
    // The screenshot is the sandbox's bytes: refuse a protected target before any request.
    if let Action::Screenshot { file, .. } = &args.action {
        createos_sandbox::transfer::protect::check_target(file)?;
    }
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let pc = sb.computer_on(&args.screen)?;
    match args.action {
        Action::WaitReady { timeout } => {
            let size = pc.wait_until_ready(Duration::from_secs(timeout)).await?;
            ctx.out
                .show(&size, || format!("ready: {}x{}", size.width, size.height));
        }
        Action::Screen => {
            let s = pc.screen_size().await?;
            ctx.out.show(&s, || format!("{}x{}", s.width, s.height));
        }
        Action::Cursor => {
            let c = pc.cursor().await?;
            ctx.out.show(&c, || format!("{},{}", c.x, c.y));
        }
        Action::Screenshot {
            file,
            window,
            region,
        } => {
            let mut r = match window {
                Some(w) => ScreenshotRegion::window(w),
                None => ScreenshotRegion::full_screen(),
            };
            if let Some((x, y, w, h)) = region {
                r = r.crop(x, y, w, h);
            }
            let png = pc.screenshot(r).await?;
            std::fs::write(&file, &png).with_context(|| format!("writing {}", file.display()))?;
            ctx.out
                .show(&json!({ "file": file, "bytes": png.len() }), || {
                    format!("saved {} ({} bytes)", file.display(), png.len())
                });
        }
        Action::Clipboard { set: Some(text) } => {
            pc.set_clipboard(&text).await?;
            done(ctx, "clipboard set".into());
        }
        Action::Clipboard { set: None } => {
            let c = pc.clipboard().await?;
            ctx.out.show(&c, || c.text.clone());
        }
        Action::Open { target } => {
            pc.open(&target).await?;
            done(ctx, format!("opened {target}"));
        }
        Action::Launch { application, uri } => {
            pc.launch(&application, uri.as_deref()).await?;
            done(ctx, format!("launched {application}"));
        }
        Action::Move { x, y } => {
            pc.mouse_move(Point::new(x, y)).await?;
            done(ctx, format!("moved to {x},{y}"));
        }
        Action::Click { button, at, count } => {
            let mut click = MouseClick::new(button.into()).count(count);
            if let Some((x, y)) = at {
                click = click.at(Point::new(x, y));
            }
            pc.mouse_click(click).await?;
            done(ctx, "clicked".into());
        }
        Action::Scroll { direction, amount } => {
            let d = match direction {
                Direction::Up => ScrollDirection::Up,
                Direction::Down => ScrollDirection::Down,
            };
            pc.mouse_scroll(d, amount).await?;
            done(ctx, "scrolled".into());
        }
        Action::Drag {
            from_x,
            from_y,
            to_x,
            to_y,
        } => {
            pc.mouse_drag(Point::new(from_x, from_y), Point::new(to_x, to_y))
                .await?;
            done(ctx, "dragged".into());
        }
        Action::MouseDown { button } => {
            pc.mouse_down(button.into()).await?;
            done(ctx, "button down".into());
        }
        Action::MouseUp { button } => {
            pc.mouse_up(button.into()).await?;
            done(ctx, "button up".into());
        }
        Action::Type { text, delay_ms } => {
            pc.type_text(&text, delay_ms.map(Duration::from_millis))
                .await?;
            done(ctx, "typed".into());
        }
        Action::Press { keys } => {
            pc.press_keys(keys.iter().map(String::as_str)).await?;
            done(ctx, format!("pressed {}", keys.join("+")));
        }
        Action::KeyDown { keys } => {
            pc.keys_down(keys.iter().map(String::as_str)).await?;
            done(ctx, format!("holding {}", keys.join("+")));
        }
        Action::KeyUp { keys } => {
            pc.keys_up(keys.iter().map(String::as_str)).await?;
            done(ctx, format!("released {}", keys.join("+")));
        }
        Action::Windows { application } => {
            let w = pc.windows(application.as_deref()).await?;
            ctx.out.show(&w, || {
                w.iter()
                    .map(|w| format!("{} {}", w.id, w.title.clone().unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
        Action::CurrentWindow => ctx.out.value(&pc.current_window().await?),
        Action::Window { id, op } => match op {
            None => ctx.out.value(&pc.window(&id).await?),
            Some(WindowOp::Geometry) => ctx.out.value(&pc.window_geometry(&id).await?),
            Some(WindowOp::Focus) => {
                pc.focus_window(&id).await?;
                done(ctx, format!("focused {id}"));
            }
            Some(WindowOp::Move { x, y }) => {
                pc.move_window(&id, Point::new(x, y)).await?;
                done(ctx, format!("moved {id}"));
            }
            Some(WindowOp::Resize { width, height }) => {
                pc.resize_window(&id, width, height).await?;
                done(ctx, format!("resized {id}"));
            }
            Some(WindowOp::Maximize) => {
                pc.maximize_window(&id).await?;
                done(ctx, format!("maximized {id}"));
            }
            Some(WindowOp::Minimize) => {
                pc.minimize_window(&id).await?;
                done(ctx, format!("minimized {id}"));
            }
            Some(WindowOp::Restore) => {
                pc.restore_window(&id).await?;
                done(ctx, format!("restored {id}"));
            }
            Some(WindowOp::Close) => {
                pc.close_window(&id).await?;
                done(ctx, format!("closed {id}"));
            }
        },
        Action::Screens(op) => match op {
            ScreensOp::Ls => ctx.out.value(&pc.screens().await?),
            ScreensOp::Create { width, height } => {
                let size = match (width, height) {
                    (Some(w), Some(h)) => Some(ScreenSize::new(w, h)),
                    (None, None) => None,
                    _ => anyhow::bail!("give both --width and --height, or neither"),
                };
                ctx.out.value(&pc.create_screen(size).await?);
            }
            ScreensOp::Get { screen } => ctx.out.value(&pc.screen(&screen).await?),
            ScreensOp::Rm { screen } => {
                pc.delete_screen(&screen).await?;
                done(ctx, format!("deleted {screen}"));
            }
            ScreensOp::Resize {
                screen,
                width,
                height,
            } => {
                ctx.out.value(
                    &pc.resize_screen(&screen, ScreenSize::new(width, height))
                        .await?,
                );
            }
            ScreensOp::Connect { screen } => {
                let c = pc.connect_screen(&screen).await?;
                let doc = json!({
                    "screen_id": c.screen_id,
                    "port": c.port,
                    "path": c.path,
                    "expires_at": c.expires_at,
                    "url": c.url.as_ref().map(|u| u.expose().to_string()),
                });
                ctx.out.show(&doc, || {
                    format!(
                        "{}\n(valid until {})",
                        doc["url"].as_str().unwrap_or(""),
                        c.expires_at.clone().unwrap_or_default()
                    )
                });
            }
        },
    }
    Ok(())
}
