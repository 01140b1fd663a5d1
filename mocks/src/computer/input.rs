//! Pointer and keyboard effects on a screen, as the XFCE window manager and the
//! applications would apply them: click-to-focus, title-bar buttons and drags, the task
//! list, scrolling the window under the pointer, and a small text-editing model (insert,
//! backspace, select-all, copy/cut/paste through the screen's clipboard, a browser's
//! address bar with ctrl+l … Return).

use std::collections::BTreeSet;

use super::apps::{self, AppKind};
use super::keys::{self, Key, KeyAction, Modifier};
use super::layout;
use super::model::{
    AddressEdit, Button, DesktopError, Grab, Hit, Part, Screen, Window, MAX_WINDOW_TEXT,
};

/// Lines one scroll notch moves (the toolkit default).
pub const LINES_PER_NOTCH: u32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScrollDirection {
    Up,
    Down,
}

impl ScrollDirection {
    pub fn parse(raw: Option<&str>) -> Result<ScrollDirection, DesktopError> {
        match raw.map(str::trim) {
            Some("up") => Ok(ScrollDirection::Up),
            Some("down") => Ok(ScrollDirection::Down),
            None | Some("") => Err(DesktopError::invalid(
                "direction",
                "direction is required (up|down)",
            )),
            Some(other) => Err(DesktopError::invalid(
                "direction",
                format!("unknown direction {other:?} (up|down)"),
            )),
        }
    }
}

impl Screen {
    /// Moves the pointer (clamped to the screen); a held title-bar grab drags its window.
    pub fn pointer_move(&mut self, x: i64, y: i64) {
        self.cursor = self.clamp_point(x, y);
        let Some(grab) = self.grab.clone() else {
            return;
        };
        if !self.buttons.contains(&Button::Left) {
            self.grab = None;
            return;
        }
        let top = self.work_area().y;
        let (cx, cy) = self.cursor;
        if let Ok(w) = self.window_mut(&grab.window) {
            w.frame.x = cx - grab.dx;
            // The window manager keeps title bars below the panel.
            w.frame.y = (cy - grab.dy).max(top);
            w.normal_frame = w.frame;
        }
    }

    /// Presses a button at the pointer: focus + raise what is under it; a left press on a
    /// title bar starts a move grab.
    pub fn button_down(&mut self, button: Button, nth: u32) {
        self.buttons.insert(button);
        let (x, y) = self.cursor;
        let hit = self.hit(x, y);
        match &hit {
            Hit::Window(id, part) => {
                let id = id.clone();
                let _ = self.activate(&id);
                let grabbable = button == Button::Left && nth == 1 && *part == Part::TitleBar;
                if let (true, Ok(w)) = (grabbable, self.window(&id)) {
                    if !w.maximized {
                        let grab = Grab {
                            window: id.clone(),
                            dx: x - w.frame.x,
                            dy: y - w.frame.y,
                        };
                        self.grab = Some(grab);
                    }
                }
            }
            Hit::Background if button == Button::Left => self.focused = None,
            _ => {}
        }
        if button == Button::Left {
            self.pressed = Some(hit);
        }
    }

    /// Releases a button; a left release over what it was pressed on completes a click.
    pub fn button_up(&mut self, button: Button, nth: u32) {
        self.buttons.remove(&button);
        if button != Button::Left {
            return;
        }
        self.grab = None;
        let pressed = self.pressed.take();
        let (x, y) = self.cursor;
        let hit = self.hit(x, y);
        if pressed.as_ref() == Some(&hit) {
            self.activate_hit(hit, nth);
        }
    }

    fn activate_hit(&mut self, hit: Hit, nth: u32) {
        let result = match hit {
            Hit::Window(id, Part::Close) => self.close(&id),
            Hit::Window(id, Part::Maximize) => self.toggle_maximize(&id),
            Hit::Window(id, Part::Minimize) => self.minimize(&id),
            Hit::Window(id, Part::TitleBar) if nth == 2 => self.toggle_maximize(&id),
            Hit::Window(id, Part::AddressBar) => self.window_mut(&id).map(|w| {
                // A click in the address bar selects the whole URL.
                let text = w.location.clone().unwrap_or_default();
                w.address_edit = Some(AddressEdit {
                    text,
                    selected: true,
                });
            }),
            Hit::Window(id, Part::Content) => self.window_mut(&id).map(|w| {
                w.address_edit = None;
                w.text_selected = nth >= 3 && !w.text.is_empty();
            }),
            Hit::TaskButton(id) => self.toggle_from_task_list(&id),
            _ => Ok(()),
        };
        // The target can vanish between press and release; nothing to do then.
        let _ = result;
    }

    /// `count` clicks of `button` at the pointer.
    pub fn click(&mut self, button: Button, count: u32) {
        for nth in 1..=count {
            self.button_down(button, nth);
            self.button_up(button, nth);
        }
    }

    /// Press at `from`, move to `to`, release.
    pub fn drag(&mut self, button: Button, from: (i64, i64), to: (i64, i64)) {
        self.pointer_move(from.0, from.1);
        self.button_down(button, 1);
        self.pointer_move(to.0, to.1);
        self.button_up(button, 1);
    }

    /// Scrolls the window under the pointer by `amount` notches.
    pub fn scroll(&mut self, direction: ScrollDirection, amount: u32) {
        let (x, y) = self.cursor;
        let Hit::Window(id, _) = self.hit(x, y) else {
            return;
        };
        if let Ok(w) = self.window_mut(&id) {
            let max = w.line_count().saturating_sub(1) as u32;
            let delta = amount.saturating_mul(LINES_PER_NOTCH);
            w.scroll = match direction {
                ScrollDirection::Down => w.scroll.saturating_add(delta).min(max),
                ScrollDirection::Up => w.scroll.saturating_sub(delta),
            };
        }
    }

    fn held_modifiers(&self) -> BTreeSet<Modifier> {
        self.keys_down.values().filter_map(Key::modifier).collect()
    }

    /// Presses and releases a chord: modifiers of the chord (plus any held down) apply
    /// to each of its other keys, in order.
    pub fn press_chord(&mut self, chord: &[Key]) -> Result<(), DesktopError> {
        let mut mods = self.held_modifiers();
        mods.extend(chord.iter().filter_map(Key::modifier));
        for key in chord.iter().filter(|k| k.modifier().is_none()) {
            self.key_effect(key, &mods)?;
        }
        Ok(())
    }

    /// Holds keys down (a non-modifier key acts once, with the modifiers held).
    pub fn keys_down_add(&mut self, keys: &[Key]) -> Result<(), DesktopError> {
        for key in keys {
            let already = self.keys_down.contains_key(&key.name);
            self.keys_down.insert(key.name.clone(), key.clone());
            if key.modifier().is_none() && !already {
                let mods = self.held_modifiers();
                self.key_effect(key, &mods)?;
            }
        }
        Ok(())
    }

    /// Releases keys (releasing a key that is not down is harmless, as in X).
    pub fn keys_up(&mut self, keys: &[Key]) {
        for key in keys {
            self.keys_down.remove(&key.name);
        }
    }

    /// Types literal text into the focused window (`\n` presses Return).
    pub fn type_text(&mut self, text: &str) -> Result<(), DesktopError> {
        let no_modifiers = BTreeSet::new();
        let enter = Key {
            name: "Return".into(),
            action: KeyAction::Return,
        };
        for c in text.replace("\r\n", "\n").chars() {
            match c {
                '\n' | '\r' => self.key_effect(&enter, &no_modifiers)?,
                '\t' => self.insert_char('\t')?,
                c if c.is_control() => {}
                c => self.insert_char(c)?,
            }
        }
        Ok(())
    }

    fn insert_char(&mut self, c: char) -> Result<(), DesktopError> {
        let Some(w) = self.focused_window_mut() else {
            return Ok(());
        };
        edit(w, |text, selected| {
            if *selected {
                text.clear();
                *selected = false;
            }
            text.push(c);
        })
    }

    fn key_effect(&mut self, key: &Key, mods: &BTreeSet<Modifier>) -> Result<(), DesktopError> {
        let ctrl = mods.contains(&Modifier::Ctrl);
        let alt = mods.contains(&Modifier::Alt);
        let shift = mods.contains(&Modifier::Shift);
        let super_key = mods.contains(&Modifier::Super);
        let Some(focused) = self.focused.clone() else {
            return Ok(());
        };
        if alt && !ctrl && key.name == "F4" {
            return self.close(&focused);
        }
        let kind = self.window(&focused)?.app.kind;
        if ctrl && !alt && !super_key {
            if let KeyAction::Text(c) = key.action {
                return self.ctrl_shortcut(&focused, kind, c.to_ascii_lowercase(), shift);
            }
            return Ok(());
        }
        if alt || super_key {
            return Ok(());
        }
        match key.action {
            KeyAction::Text(c) => self.insert_char(if shift { keys::shifted(c) } else { c }),
            KeyAction::Return => self.press_return(&focused),
            KeyAction::BackSpace => {
                let w = self.window_mut(&focused)?;
                edit(w, |text, selected| {
                    if *selected {
                        text.clear();
                        *selected = false;
                    } else {
                        text.pop();
                    }
                })
            }
            KeyAction::Delete => {
                let w = self.window_mut(&focused)?;
                edit(w, |text, selected| {
                    if *selected {
                        text.clear();
                        *selected = false;
                    }
                })
            }
            KeyAction::Escape => {
                let w = self.window_mut(&focused)?;
                w.address_edit = None;
                w.text_selected = false;
                Ok(())
            }
            KeyAction::Modifier(_) | KeyAction::Inert => Ok(()),
        }
    }

    fn ctrl_shortcut(
        &mut self,
        id: &str,
        kind: AppKind,
        c: char,
        shift: bool,
    ) -> Result<(), DesktopError> {
        // Terminals keep ctrl+c/ctrl+v for the shell and copy/paste with ctrl+shift.
        let terminal = kind == AppKind::Terminal;
        let clipboard_shortcut = if terminal { shift } else { !shift };
        match c {
            'a' if !terminal => edit(self.window_mut(id)?, |_, selected| *selected = true),
            'c' | 'x' if clipboard_shortcut => {
                let w = self.window_mut(id)?;
                let mut copied = None;
                edit(w, |text, selected| {
                    if *selected {
                        copied = Some(text.clone());
                        if c == 'x' && !terminal {
                            text.clear();
                            *selected = false;
                        }
                    }
                })?;
                if let Some(text) = copied {
                    self.clipboard = text;
                }
                Ok(())
            }
            'v' if clipboard_shortcut => {
                let paste = self.clipboard.clone();
                edit(self.window_mut(id)?, |text, selected| {
                    if *selected {
                        text.clear();
                        *selected = false;
                    }
                    text.push_str(&paste);
                })
            }
            'l' if kind == AppKind::Browser => {
                let w = self.window_mut(id)?;
                let text = w.location.clone().unwrap_or_default();
                w.address_edit = Some(AddressEdit {
                    text,
                    selected: true,
                });
                Ok(())
            }
            'q' if kind != AppKind::Terminal => self.close(id),
            _ => Ok(()),
        }
    }

    fn press_return(&mut self, id: &str) -> Result<(), DesktopError> {
        let w = self.window_mut(id)?;
        if let Some(edit) = w.address_edit.take() {
            navigate(w, &edit.text);
            return Ok(());
        }
        edit(w, |text, selected| {
            if *selected {
                text.clear();
                *selected = false;
            }
            text.push('\n');
        })
    }
}

/// Applies an edit to the window's active text (address bar while editing, else the
/// document), refusing to grow it past [`MAX_WINDOW_TEXT`].
fn edit(w: &mut Window, f: impl FnOnce(&mut String, &mut bool)) -> Result<(), DesktopError> {
    if let Some(bar) = w.address_edit.as_mut() {
        f(&mut bar.text, &mut bar.selected);
        if bar.text.len() > MAX_WINDOW_TEXT {
            bar.text
                .truncate(floor_char_boundary(&bar.text, MAX_WINDOW_TEXT));
            return Err(DesktopError::ActionFailed(
                "address bar text is too long".into(),
            ));
        }
        return Ok(());
    }
    f(&mut w.text, &mut w.text_selected);
    if w.text.len() > MAX_WINDOW_TEXT {
        w.text
            .truncate(floor_char_boundary(&w.text, MAX_WINDOW_TEXT));
        return Err(DesktopError::ActionFailed(format!(
            "window {} cannot hold more than {MAX_WINDOW_TEXT} bytes of text",
            w.id
        )));
    }
    Ok(())
}

fn floor_char_boundary(s: &str, mut at: usize) -> usize {
    while at > 0 && !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Loads what was typed into a browser's address bar: a URL as is, a bare host gets
/// `https://`, anything else becomes a search.
pub fn navigate(w: &mut Window, typed: &str) {
    let typed = typed.trim();
    if typed.is_empty() {
        return;
    }
    let url = if typed.contains("://") || typed.starts_with("about:") {
        typed.to_string()
    } else if !typed.contains(' ') && typed.contains('.') {
        format!("https://{typed}")
    } else {
        let q = percent_encoding::utf8_percent_encode(typed, percent_encoding::NON_ALPHANUMERIC);
        format!("https://duckduckgo.com/?q={q}")
    };
    w.title = apps::browser_title(w.app, &url);
    w.location = Some(url);
    w.text.clear();
    w.text_selected = false;
    w.scroll = 0;
}

/// Whether the window shows a blinking text caret (used by the renderer).
pub fn shows_caret(w: &Window) -> bool {
    w.address_edit.is_some() || matches!(w.app.kind, AppKind::Editor | AppKind::Terminal)
}

/// The address bar text a browser shows.
pub fn address_text(w: &Window) -> (&str, bool) {
    match &w.address_edit {
        Some(e) => (e.text.as_str(), e.selected),
        None => (w.location.as_deref().unwrap_or(""), false),
    }
}

/// Visible text lines of a window: from its scroll position, at most `rows`.
pub fn visible_lines(w: &Window, rows: usize) -> Vec<&str> {
    w.text
        .split('\n')
        .skip(w.scroll as usize)
        .take(rows)
        .collect()
}

/// Rows the text area of a window shows.
pub fn text_rows_of(w: &Window) -> usize {
    layout::text_rows(layout::text_area(&w.frame, w.is_browser()).height)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::computer::desktop::Desktop;
    use crate::computer::keys::parse_key;

    fn keys(names: &[&str]) -> Vec<Key> {
        names.iter().map(|n| parse_key(n).unwrap()).collect()
    }

    fn desktop_with(app: &str) -> (Desktop, String) {
        let mut d = Desktop::default();
        let id = d.new_window_id();
        let spec = apps::find_app(app).unwrap();
        d.screen_mut(0)
            .unwrap()
            .add_window(id.clone(), spec, "w".into())
            .unwrap();
        (d, id)
    }

    #[test]
    fn typing_and_editing_shortcuts() {
        let (mut d, id) = desktop_with("mousepad");
        let s = d.screen_mut(0).unwrap();
        s.type_text("hello").unwrap();
        s.press_chord(&keys(&["shift", "1"])).unwrap();
        assert_eq!(s.window(&id).unwrap().text, "hello!");
        s.press_chord(&keys(&["ctrl", "a"])).unwrap();
        s.press_chord(&keys(&["ctrl", "c"])).unwrap();
        assert_eq!(s.clipboard, "hello!");
        s.press_chord(&keys(&["BackSpace"])).unwrap();
        assert_eq!(s.window(&id).unwrap().text, "");
        s.press_chord(&keys(&["ctrl", "v"])).unwrap();
        s.press_chord(&keys(&["ctrl", "v"])).unwrap();
        assert_eq!(s.window(&id).unwrap().text, "hello!hello!");
    }

    #[test]
    fn held_modifier_applies_to_later_keys() {
        let (mut d, _) = desktop_with("mousepad");
        let s = d.screen_mut(0).unwrap();
        s.keys_down_add(&keys(&["alt"])).unwrap();
        s.press_chord(&keys(&["F4"])).unwrap();
        assert!(s.windows.is_empty(), "alt held + F4 closes the window");
    }

    #[test]
    fn browser_address_bar_navigation() {
        let (mut d, id) = desktop_with("firefox");
        let s = d.screen_mut(0).unwrap();
        s.press_chord(&keys(&["ctrl", "l"])).unwrap();
        s.type_text("example.com\n").unwrap();
        let w = s.window(&id).unwrap();
        assert_eq!(w.location.as_deref(), Some("https://example.com"));
        assert!(w.title.starts_with("https://example.com"));
        assert!(w.address_edit.is_none());
    }

    #[test]
    fn title_bar_drag_moves_and_buttons_work() {
        let (mut d, id) = desktop_with("mousepad");
        let s = d.screen_mut(0).unwrap();
        let f = s.window(&id).unwrap().frame;
        s.drag(
            Button::Left,
            (f.x as i64 + 20, f.y as i64 + 10),
            (f.x as i64 + 70, f.y as i64 + 60),
        );
        let moved = s.window(&id).unwrap().frame;
        assert_eq!((moved.x, moved.y), (f.x + 50, f.y + 50));
        let max = layout::maximize_button(&moved);
        s.pointer_move(max.x as i64 + 2, max.y as i64 + 2);
        s.click(Button::Left, 1);
        assert!(s.window(&id).unwrap().maximized);
        let close = layout::close_button(&s.window(&id).unwrap().frame);
        s.pointer_move(close.x as i64 + 2, close.y as i64 + 2);
        s.click(Button::Left, 1);
        assert!(s.windows.is_empty());
    }

    #[test]
    fn scroll_moves_the_window_under_the_pointer() {
        let (mut d, id) = desktop_with("mousepad");
        let s = d.screen_mut(0).unwrap();
        s.type_text(&"line\n".repeat(20)).unwrap();
        let f = s.window(&id).unwrap().frame;
        s.pointer_move(f.x as i64 + 50, f.y as i64 + 100);
        s.scroll(ScrollDirection::Down, 2);
        assert_eq!(s.window(&id).unwrap().scroll, 6);
        s.scroll(ScrollDirection::Up, 5);
        assert_eq!(s.window(&id).unwrap().scroll, 0);
    }
}
