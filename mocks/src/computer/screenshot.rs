//! Screenshots (E66): the screen's current state rendered into an RGB canvas — desktop
//! background, the panel with its task list, every visible window bottom to top (frame,
//! title bar with its buttons and title, content and text), and the pointer — then
//! cropped and encoded as PNG. Rendering depends only on the state, so the same state
//! always gives the same bytes.
//!
//! Text is drawn with the 5x7 bitmap font of `font.rs`.

use super::apps::AppKind;
use super::font;
use super::input;
use super::layout::{self, Rect, CELL_H, CELL_W, TEXT_PAD};
use super::model::Screen;

type Rgb = [u8; 3];

const BG_TOP: Rgb = [24, 54, 96];
const BG_BOTTOM: Rgb = [58, 110, 165];
const PANEL: Rgb = [38, 38, 42];
const PANEL_MENU: Rgb = [70, 130, 200];
const TASK_FOCUSED: Rgb = [80, 110, 160];
const TASK_NORMAL: Rgb = [64, 64, 70];
const TASK_MINIMIZED: Rgb = [50, 50, 54];
const TASK_TEXT: Rgb = [220, 220, 220];
const FRAME_BORDER: Rgb = [20, 20, 24];
const TITLE_FOCUSED: Rgb = [52, 101, 164];
const TITLE_UNFOCUSED: Rgb = [96, 96, 104];
const TITLE_TEXT: Rgb = [255, 255, 255];
const CLOSE_BUTTON: Rgb = [196, 64, 64];
const OTHER_BUTTON: Rgb = [128, 128, 136];
const BUTTON_ICON: Rgb = [240, 240, 240];
const ADDRESS_STRIP: Rgb = [228, 228, 232];
const ADDRESS_FIELD: Rgb = [255, 255, 255];
const ADDRESS_EDITING: Rgb = [51, 144, 255];
const SELECTION: Rgb = [51, 144, 255];
const SELECTED_TEXT: Rgb = [255, 255, 255];
const BLACK: Rgb = [0, 0, 0];
const WHITE: Rgb = [255, 255, 255];

/// The classic arrow pointer: `X` outline, `.` fill, space transparent; hot spot top-left.
const POINTER: &[&str] = &[
    "X",
    "XX",
    "X.X",
    "X..X",
    "X...X",
    "X....X",
    "X.....X",
    "X......X",
    "X.......X",
    "X........X",
    "X.....XXXXX",
    "X..X..X",
    "X.X X..X",
    "XX  X..X",
    "X    X..X",
    "     X..X",
    "      X..X",
    "      X..X",
    "       XX",
];

/// An RGB8 image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canvas {
    pub width: u32,
    pub height: u32,
    pixels: Vec<u8>,
}

impl Canvas {
    pub fn new(width: u32, height: u32, fill: Rgb) -> Canvas {
        let mut pixels = Vec::with_capacity(width as usize * height as usize * 3);
        for _ in 0..(width as usize * height as usize) {
            pixels.extend_from_slice(&fill);
        }
        Canvas {
            width,
            height,
            pixels,
        }
    }

    pub fn bounds(&self) -> Rect {
        Rect::new(0, 0, self.width, self.height)
    }

    /// The colour at (x, y), `None` outside.
    pub fn pixel(&self, x: u32, y: u32) -> Option<Rgb> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let i = (y as usize * self.width as usize + x as usize) * 3;
        Some([self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]])
    }

    fn put(&mut self, x: i64, y: i64, c: Rgb, clip: &Rect) {
        if !clip.contains(x as i32, y as i32)
            || x < 0
            || y < 0
            || x >= self.width as i64
            || y >= self.height as i64
        {
            return;
        }
        let i = (y as usize * self.width as usize + x as usize) * 3;
        self.pixels[i..i + 3].copy_from_slice(&c);
    }

    /// Fills a rectangle (clipped to the canvas).
    pub fn fill(&mut self, r: Rect, c: Rgb) {
        let Some(r) = r.intersect(&self.bounds()) else {
            return;
        };
        let row_bytes = self.width as usize * 3;
        for y in r.y as usize..r.bottom() as usize {
            let start = y * row_bytes + r.x as usize * 3;
            for px in self.pixels[start..start + r.width as usize * 3].chunks_exact_mut(3) {
                px.copy_from_slice(&c);
            }
        }
    }

    fn outline(&mut self, r: Rect, c: Rgb) {
        if r.width == 0 || r.height == 0 {
            return;
        }
        self.fill(Rect::new(r.x, r.y, r.width, 1), c);
        self.fill(Rect::new(r.x, r.bottom() as i32 - 1, r.width, 1), c);
        self.fill(Rect::new(r.x, r.y, 1, r.height), c);
        self.fill(Rect::new(r.right() as i32 - 1, r.y, 1, r.height), c);
    }

    /// One character cell at (x, y), clipped to `clip`.
    fn glyph(&mut self, x: i32, y: i32, ch: char, c: Rgb, clip: &Rect) {
        let bits = font::glyph_bits(ch);
        let (w, h) = (font::GLYPH_W as i64, font::GLYPH_H as i64);
        for row in 0..h {
            for col in 0..w {
                if bits & (1u64 << (row * w + col)) != 0 {
                    self.put(x as i64 + col, y as i64 + row, c, clip);
                }
            }
        }
    }

    /// A line of text from (x, y); returns the x after the last cell.
    fn text(&mut self, x: i32, y: i32, s: &str, c: Rgb, clip: &Rect) -> i32 {
        let mut cx = x;
        for ch in s.chars() {
            if cx as i64 >= clip.right() {
                break;
            }
            if ch == '\t' {
                cx += CELL_W * 4;
                continue;
            }
            self.glyph(cx, y, ch, c, clip);
            cx += CELL_W;
        }
        cx
    }

    /// The sub-image `r` (must lie inside the canvas).
    pub fn crop(&self, r: Rect) -> Canvas {
        let r = r.intersect(&self.bounds()).unwrap_or(Rect::new(0, 0, 0, 0));
        let mut pixels = Vec::with_capacity(r.width as usize * r.height as usize * 3);
        let row_bytes = self.width as usize * 3;
        for y in r.y as usize..r.bottom() as usize {
            let start = y * row_bytes + r.x as usize * 3;
            pixels.extend_from_slice(&self.pixels[start..start + r.width as usize * 3]);
        }
        Canvas {
            width: r.width,
            height: r.height,
            pixels,
        }
    }

    /// PNG bytes (RGB, 8 bits per channel).
    pub fn encode_png(&self) -> Result<Vec<u8>, png::EncodingError> {
        let mut out = Vec::new();
        {
            let mut encoder = png::Encoder::new(&mut out, self.width, self.height);
            encoder.set_color(png::ColorType::Rgb);
            encoder.set_depth(png::BitDepth::Eight);
            encoder.set_compression(png::Compression::Fast);
            let mut writer = encoder.write_header()?;
            writer.write_image_data(&self.pixels)?;
            writer.finish()?;
        }
        Ok(out)
    }
}

fn lerp(a: Rgb, b: Rgb, num: u32, den: u32) -> Rgb {
    let den = den.max(1);
    let mix = |x: u8, y: u8| ((x as u32 * (den - num) + y as u32 * num) / den) as u8;
    [mix(a[0], b[0]), mix(a[1], b[1]), mix(a[2], b[2])]
}

fn content_colors(kind: AppKind) -> (Rgb, Rgb) {
    match kind {
        AppKind::Browser => ([255, 255, 255], [30, 30, 30]),
        AppKind::Terminal => ([30, 30, 30], [210, 230, 210]),
        AppKind::Editor => ([252, 252, 250], [30, 30, 30]),
        AppKind::FileManager => ([244, 244, 246], [40, 40, 60]),
        AppKind::ImageViewer => ([48, 48, 52], [220, 220, 220]),
        AppKind::Utility => ([236, 236, 238], [40, 40, 40]),
    }
}

/// Renders the whole screen.
pub fn render(screen: &Screen) -> Canvas {
    let mut canvas = Canvas::new(screen.width, screen.height, BG_TOP);
    let last_row = screen.height.saturating_sub(1);
    for y in 0..screen.height {
        canvas.fill(
            Rect::new(0, y as i32, screen.width, 1),
            lerp(BG_TOP, BG_BOTTOM, y, last_row),
        );
    }
    draw_panel(&mut canvas, screen);
    for w in screen.stacking() {
        draw_window(&mut canvas, screen, w);
    }
    draw_pointer(&mut canvas, screen.cursor);
    canvas
}

fn draw_panel(canvas: &mut Canvas, screen: &Screen) {
    canvas.fill(
        Rect::new(0, 0, screen.width, layout::PANEL_HEIGHT as u32),
        PANEL,
    );
    canvas.fill(Rect::new(4, 4, 20, 20), PANEL_MENU);
    let buttons = layout::task_buttons(screen.width, screen.windows.len());
    for (w, b) in screen.windows.iter().zip(buttons) {
        let color = if w.minimized {
            TASK_MINIMIZED
        } else if screen.focused.as_deref() == Some(w.id.as_str()) {
            TASK_FOCUSED
        } else {
            TASK_NORMAL
        };
        canvas.fill(b, color);
        let clip = b.inset(3);
        canvas.text(b.x + 6, b.y + 7, &w.title, TASK_TEXT, &clip);
    }
}

fn draw_window(canvas: &mut Canvas, screen: &Screen, w: &super::model::Window) {
    let focused = screen.focused.as_deref() == Some(w.id.as_str());
    let frame = w.frame;
    canvas.fill(frame, FRAME_BORDER);
    let bar = layout::title_bar(&frame);
    canvas.fill(
        bar.inset(1),
        if focused {
            TITLE_FOCUSED
        } else {
            TITLE_UNFOCUSED
        },
    );
    let minimize = layout::minimize_button(&frame);
    let title_clip = Rect::new(
        bar.x,
        bar.y,
        (minimize.x - 4 - bar.x).max(0) as u32,
        bar.height,
    );
    canvas.text(bar.x + 8, bar.y + 8, &w.title, TITLE_TEXT, &title_clip);
    draw_title_buttons(canvas, &frame, &bar);

    let (bg, fg) = content_colors(w.app.kind);
    let client = layout::client_area(&frame);
    canvas.fill(client, bg);
    if w.is_browser() {
        let strip = layout::address_bar(&frame);
        canvas.fill(strip, ADDRESS_STRIP);
        let field = strip.inset(4);
        canvas.fill(field, ADDRESS_FIELD);
        let (text, selected) = input::address_text(w);
        if w.address_edit.is_some() {
            canvas.outline(field, ADDRESS_EDITING);
        }
        let clip = field.inset(2);
        let (tx, ty) = (field.x + 6, field.y + (field.height as i32 - 7) / 2);
        if selected && !text.is_empty() {
            let width = (text.chars().count() as i32 * CELL_W) as u32;
            canvas.fill(
                Rect::new(tx - 1, ty - 2, width + 2, 11)
                    .intersect(&clip)
                    .unwrap_or(clip),
                SELECTION,
            );
            canvas.text(tx, ty, text, SELECTED_TEXT, &clip);
        } else {
            canvas.text(tx, ty, text, BLACK, &clip);
        }
    }
    let area = layout::text_area(&frame, w.is_browser());
    let rows = layout::text_rows(area.height);
    let lines = input::visible_lines(w, rows);
    let clip = area.inset(2);
    let total_lines = w.line_count();
    for (i, line) in lines.iter().enumerate() {
        let x = area.x + TEXT_PAD;
        let y = area.y + TEXT_PAD + i as i32 * CELL_H;
        let (color, highlight) = if w.text_selected {
            (SELECTED_TEXT, true)
        } else {
            (fg, false)
        };
        if highlight && !line.is_empty() {
            let width = (line.chars().count() as i32 * CELL_W) as u32;
            if let Some(r) = Rect::new(x - 1, y - 2, width + 2, CELL_H as u32).intersect(&clip) {
                canvas.fill(r, SELECTION);
            }
        }
        let end_x = canvas.text(x, y, line, color, &clip);
        let is_last = w.scroll as usize + i + 1 == total_lines;
        if focused && is_last && w.address_edit.is_none() && input::shows_caret(w) {
            canvas.fill(
                Rect::new(end_x, y - 1, 1, 9)
                    .intersect(&clip)
                    .unwrap_or(Rect::new(0, 0, 0, 0)),
                fg,
            );
        }
    }
}

fn draw_title_buttons(canvas: &mut Canvas, frame: &Rect, bar: &Rect) {
    let close = layout::close_button(frame);
    let maximize = layout::maximize_button(frame);
    let minimize = layout::minimize_button(frame);
    for (b, color) in [
        (close, CLOSE_BUTTON),
        (maximize, OTHER_BUTTON),
        (minimize, OTHER_BUTTON),
    ] {
        if let Some(visible) = b.intersect(bar) {
            canvas.fill(visible, color);
        }
    }
    let clip = *bar;
    // Close: a cross.
    for i in 4..12 {
        canvas.put(
            (close.x + i) as i64,
            (close.y + i) as i64,
            BUTTON_ICON,
            &clip,
        );
        canvas.put(
            (close.x + 15 - i) as i64,
            (close.y + i) as i64,
            BUTTON_ICON,
            &clip,
        );
    }
    // Maximize: a square outline.
    if let Some(r) = Rect::new(maximize.x + 4, maximize.y + 4, 8, 8).intersect(&clip) {
        canvas.outline(r, BUTTON_ICON);
    }
    // Minimize: a bar.
    if let Some(r) = Rect::new(minimize.x + 4, minimize.y + 11, 8, 2).intersect(&clip) {
        canvas.fill(r, BUTTON_ICON);
    }
}

fn draw_pointer(canvas: &mut Canvas, (cx, cy): (i32, i32)) {
    let clip = canvas.bounds();
    for (dy, row) in POINTER.iter().enumerate() {
        for (dx, cell) in row.chars().enumerate() {
            let color = match cell {
                'X' => BLACK,
                '.' => WHITE,
                _ => continue,
            };
            canvas.put(cx as i64 + dx as i64, cy as i64 + dy as i64, color, &clip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::computer::apps;
    use crate::computer::desktop::Desktop;

    #[test]
    fn rendering_is_deterministic_and_reflects_state() {
        let mut d = Desktop::default();
        let id = d.new_window_id();
        let s = d.screen_mut(0).unwrap();
        let blank = render(s);
        s.add_window(
            id.clone(),
            apps::find_app("mousepad").unwrap(),
            "notes".into(),
        )
        .unwrap();
        let a = render(s);
        assert_eq!(a, render(s));
        assert_ne!(a, blank);
        s.move_window(&id, 300, 300).unwrap();
        assert_ne!(render(s), a);
    }

    #[test]
    fn pointer_is_drawn_at_the_cursor() {
        let mut s = Screen::new(0, 320, 240);
        s.pointer_move(100, 150);
        let c = render(&s);
        assert_eq!(c.pixel(100, 150), Some(BLACK));
        assert_eq!(c.pixel(101, 152), Some(WHITE));
    }

    #[test]
    fn png_round_trips_with_the_right_size() {
        let s = Screen::new(0, 320, 240);
        let canvas = render(&s).crop(Rect::new(10, 20, 30, 40));
        let bytes = canvas.encode_png().unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let reader = decoder.read_info().unwrap();
        assert_eq!((reader.info().width, reader.info().height), (30, 40));
    }
}
