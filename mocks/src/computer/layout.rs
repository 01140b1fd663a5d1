//! Geometry of the emulated XFCE session: the top panel with its task list, window
//! frames (title bar with minimize / maximize / close buttons, client area, a browser's
//! address bar) and text cells. Input hit-testing and the screenshot renderer both use
//! these, so what a click hits is exactly what the screenshot shows there.

/// Height of the top panel (task list); windows are maximized below it.
pub const PANEL_HEIGHT: i32 = 28;
/// Height of a window's title bar.
pub const TITLE_HEIGHT: i32 = 24;
/// Side of a title-bar button and the gap around it.
pub const BUTTON_SIZE: i32 = 16;
pub const BUTTON_GAP: i32 = 4;
/// Height of a browser's address bar strip at the top of its client area.
pub const ADDRESS_BAR_HEIGHT: i32 = 28;
/// Text cell (a 5x7 glyph plus spacing) and the padding around text.
pub const CELL_W: i32 = 6;
pub const CELL_H: i32 = 10;
pub const TEXT_PAD: i32 = 6;
/// The task list starts after the panel's menu button.
pub const TASKLIST_X: i32 = 32;
pub const TASK_BUTTON_MAX_W: i32 = 160;
pub const TASK_BUTTON_H: i32 = 20;

/// An axis-aligned rectangle in screen pixels (x/y may be negative: windows can hang
/// off the screen edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    pub x: i32,
    pub y: i32,
    pub width: u32,
    pub height: u32,
}

impl Rect {
    pub const fn new(x: i32, y: i32, width: u32, height: u32) -> Rect {
        Rect {
            x,
            y,
            width,
            height,
        }
    }

    pub fn right(&self) -> i64 {
        self.x as i64 + self.width as i64
    }

    pub fn bottom(&self) -> i64 {
        self.y as i64 + self.height as i64
    }

    pub fn contains(&self, px: i32, py: i32) -> bool {
        (px as i64) >= self.x as i64
            && (px as i64) < self.right()
            && (py as i64) >= self.y as i64
            && (py as i64) < self.bottom()
    }

    /// The overlap of two rectangles, `None` when they do not overlap.
    pub fn intersect(&self, other: &Rect) -> Option<Rect> {
        let x0 = (self.x as i64).max(other.x as i64);
        let y0 = (self.y as i64).max(other.y as i64);
        let x1 = self.right().min(other.right());
        let y1 = self.bottom().min(other.bottom());
        (x1 > x0 && y1 > y0)
            .then(|| Rect::new(x0 as i32, y0 as i32, (x1 - x0) as u32, (y1 - y0) as u32))
    }

    /// Shrinks the rectangle by `d` on every side (never below zero size).
    pub fn inset(&self, d: i32) -> Rect {
        let d2 = (2 * d).max(0) as u32;
        Rect::new(
            self.x + d,
            self.y + d,
            self.width.saturating_sub(d2),
            self.height.saturating_sub(d2),
        )
    }
}

/// Where maximized windows go and new windows are placed: the screen minus the panel.
pub fn work_area(width: u32, height: u32) -> Rect {
    Rect::new(
        0,
        PANEL_HEIGHT,
        width,
        height.saturating_sub(PANEL_HEIGHT as u32),
    )
}

pub fn title_bar(frame: &Rect) -> Rect {
    Rect::new(
        frame.x,
        frame.y,
        frame.width,
        frame.height.min(TITLE_HEIGHT as u32),
    )
}

fn title_button(frame: &Rect, slot: i32) -> Rect {
    let x = frame.right() - ((BUTTON_GAP + BUTTON_SIZE) * (slot + 1)) as i64;
    let y = frame.y + (TITLE_HEIGHT - BUTTON_SIZE) / 2;
    Rect::new(x as i32, y, BUTTON_SIZE as u32, BUTTON_SIZE as u32)
}

pub fn close_button(frame: &Rect) -> Rect {
    title_button(frame, 0)
}

pub fn maximize_button(frame: &Rect) -> Rect {
    title_button(frame, 1)
}

pub fn minimize_button(frame: &Rect) -> Rect {
    title_button(frame, 2)
}

/// The window's content below the title bar, inside a 1-pixel border.
pub fn client_area(frame: &Rect) -> Rect {
    Rect::new(
        frame.x + 1,
        frame.y + TITLE_HEIGHT,
        frame.width.saturating_sub(2),
        frame.height.saturating_sub(TITLE_HEIGHT as u32 + 1),
    )
}

/// A browser's address bar strip (top of its client area).
pub fn address_bar(frame: &Rect) -> Rect {
    let client = client_area(frame);
    Rect::new(
        client.x,
        client.y,
        client.width,
        client.height.min(ADDRESS_BAR_HEIGHT as u32),
    )
}

/// The area page / document text is drawn in (`browser`: below the address bar).
pub fn text_area(frame: &Rect, browser: bool) -> Rect {
    let client = client_area(frame);
    if !browser {
        return client;
    }
    let top = ADDRESS_BAR_HEIGHT.min(client.height as i32);
    Rect::new(
        client.x,
        client.y + top,
        client.width,
        client.height - top as u32,
    )
}

/// How many text columns fit a width.
pub fn text_columns(width: u32) -> usize {
    ((width as i32 - 2 * TEXT_PAD).max(0) / CELL_W) as usize
}

/// How many text rows fit a height.
pub fn text_rows(height: u32) -> usize {
    ((height as i32 - 2 * TEXT_PAD).max(0) / CELL_H) as usize
}

/// The task-list buttons of `count` windows (creation order) on a screen `width` wide.
pub fn task_buttons(width: u32, count: usize) -> Vec<Rect> {
    if count == 0 {
        return Vec::new();
    }
    let available = (width as i32 - TASKLIST_X - BUTTON_GAP).max(0);
    let each = (available / count as i32).min(TASK_BUTTON_MAX_W);
    let y = (PANEL_HEIGHT - TASK_BUTTON_H) / 2;
    (0..count)
        .map(|i| {
            Rect::new(
                TASKLIST_X + i as i32 * each,
                y,
                (each - 2).max(0) as u32,
                TASK_BUTTON_H as u32,
            )
        })
        .collect()
}

/// Where the `n`-th window placed on a screen goes (cascading, wrapping every ten).
pub fn cascade_origin(work: &Rect, n: u32) -> (i32, i32) {
    let step = 28 * (n % 10) as i32;
    (work.x + 40 + step, work.y + 20 + step)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rect_math() {
        let a = Rect::new(0, 0, 10, 10);
        let b = Rect::new(5, 5, 10, 10);
        assert_eq!(a.intersect(&b), Some(Rect::new(5, 5, 5, 5)));
        assert_eq!(a.intersect(&Rect::new(10, 0, 3, 3)), None);
        assert!(a.contains(9, 9));
        assert!(!a.contains(10, 0));
        assert!(Rect::new(-5, -5, 10, 10).contains(-5, 4));
    }

    #[test]
    fn buttons_sit_inside_the_title_bar() {
        let frame = Rect::new(100, 100, 400, 300);
        let bar = title_bar(&frame);
        for b in [
            close_button(&frame),
            maximize_button(&frame),
            minimize_button(&frame),
        ] {
            assert_eq!(b.intersect(&bar), Some(b));
        }
        assert!(close_button(&frame).x > maximize_button(&frame).x);
        assert_eq!(task_buttons(1280, 3).len(), 3);
    }
}
