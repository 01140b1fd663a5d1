//! Herdr 0.8's key bindings as Herdr resolves them, so `cos setup herdr` never takes a key that
//! is already bound. Herdr registers the user's `[keys]` fields first, then every
//! `[[keys.command]]` entry (custom commands are user bindings), then the defaults of the
//! fields the user left alone; a default that clashes with a user binding is dropped without a
//! warning. A key bound by a default is therefore just as taken as one the user bound: a
//! custom command on it would silently replace the built-in action.
//!
//! Only prefix-mode bindings (`prefix+…`) matter here; navigate-mode keys live in a separate
//! table and direct chords never clash with prefix ones.

use std::collections::BTreeMap;

use toml_edit::{DocumentMut, Item, TableLike, Value};

/// Herdr's default bindings (`src/config/model.rs`, Herdr 0.8.0): field → binding, for the
/// fields that have one. Navigate-mode fields are left out (another key table).
pub const DEFAULT_BINDINGS: &[(&str, &str)] = &[
    ("help", "prefix+?"),
    ("settings", "prefix+s"),
    ("new_workspace", "prefix+shift+n"),
    ("new_worktree", "prefix+shift+g"),
    ("rename_workspace", "prefix+shift+w"),
    ("close_workspace", "prefix+shift+d"),
    ("workspace_picker", "prefix+w"),
    ("goto", "prefix+g"),
    ("detach", "prefix+q"),
    ("reload_config", "prefix+shift+r"),
    ("open_notification_target", "prefix+o"),
    ("new_tab", "prefix+c"),
    ("rename_tab", "prefix+shift+t"),
    ("previous_tab", "prefix+p"),
    ("next_tab", "prefix+n"),
    ("switch_tab", "prefix+1..9"),
    ("close_tab", "prefix+shift+x"),
    ("rename_pane", "prefix+shift+p"),
    ("edit_scrollback", "prefix+e"),
    ("copy_mode", "prefix+["),
    ("focus_pane_left", "prefix+h"),
    ("focus_pane_down", "prefix+j"),
    ("focus_pane_up", "prefix+k"),
    ("focus_pane_right", "prefix+l"),
    ("swap_pane_left", "prefix+shift+h"),
    ("swap_pane_down", "prefix+shift+j"),
    ("swap_pane_up", "prefix+shift+k"),
    ("swap_pane_right", "prefix+shift+l"),
    ("cycle_pane_next", "prefix+tab"),
    ("cycle_pane_previous", "prefix+shift+tab"),
    ("split_vertical", "prefix+v"),
    ("split_horizontal", "prefix+minus"),
    ("close_pane", "prefix+x"),
    ("zoom", "prefix+z"),
    ("resize_mode", "prefix+r"),
    ("toggle_sidebar", "prefix+b"),
];

/// The `[keys]` action fields without a default (a user may still bind them).
const UNSET_FIELDS: &[&str] = &[
    "open_worktree",
    "remove_worktree",
    "previous_workspace",
    "next_workspace",
    "previous_agent",
    "next_agent",
    "focus_agent",
    "switch_workspace",
    "last_pane",
];

/// Herdr's prefix key when `keys.prefix` is not set.
pub const DEFAULT_PREFIX: &str = "ctrl+b";

/// Modifier bits.
pub const CTRL: u8 = 1;
/// Alt (also `option`, `meta`).
pub const ALT: u8 = 2;
/// Shift.
pub const SHIFT: u8 = 4;
/// Super (also `cmd`, `command`).
pub const SUPER: u8 = 8;
/// Hyper.
pub const HYPER: u8 = 16;

/// A key without its modifiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    /// A character (letters lower-case; upper case is shift + the lower-case letter).
    Char(char),
    /// Enter.
    Enter,
    /// Escape.
    Esc,
    /// Tab.
    Tab,
    /// Shift+Tab.
    BackTab,
    /// Backspace.
    Backspace,
    /// Arrow keys.
    Left,
    /// Right arrow.
    Right,
    /// Up arrow.
    Up,
    /// Down arrow.
    Down,
    /// Function key.
    F(u8),
}

/// One key combination, normalised as Herdr does (`shift+tab` is back-tab, `X` is `shift+x`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Combo {
    /// The key.
    pub key: Key,
    /// Modifier bits.
    pub mods: u8,
}

/// A binding: a combo pressed after the prefix, or directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Chord {
    /// Pressed after the prefix key.
    pub prefix: bool,
    /// The combo.
    pub combo: Combo,
}

impl Chord {
    /// Herdr's label for the chord (`prefix+shift+x`).
    pub fn label(&self) -> String {
        let combo = combo_label(self.combo);
        if self.prefix {
            format!("prefix+{combo}")
        } else {
            combo
        }
    }
}

fn modifier(token: &str) -> Option<u8> {
    match token.to_lowercase().as_str() {
        "ctrl" | "control" => Some(CTRL),
        "shift" => Some(SHIFT),
        "alt" | "option" | "meta" => Some(ALT),
        "cmd" | "command" | "super" => Some(SUPER),
        "hyper" => Some(HYPER),
        _ => None,
    }
}

fn normalise(mut combo: Combo) -> Combo {
    if combo.key == Key::Tab && combo.mods & SHIFT != 0 {
        combo.key = Key::BackTab;
    }
    if combo.key == Key::BackTab {
        combo.mods &= !SHIFT;
    }
    combo
}

/// Parse a combo (`ctrl+b`, `shift+x`, `X`, `minus`, `f12`); `None` when Herdr would refuse it.
pub fn parse_combo(text: &str) -> Option<Combo> {
    let mut mods = 0;
    let mut key_text = None;
    for part in text.split('+') {
        let part = part.trim();
        if part.is_empty() {
            return None;
        }
        if let Some(m) = modifier(part) {
            mods |= m;
        } else if key_text.replace(part).is_some() {
            return None;
        }
    }
    let key_text = key_text?;
    let lower = key_text.to_lowercase();
    let mut chars = key_text.chars();
    let single = match (chars.next(), chars.next()) {
        (Some(c), None) => Some(c),
        _ => None,
    };
    let key = match lower.as_str() {
        "space" => Key::Char(' '),
        "enter" | "return" => Key::Enter,
        "esc" | "escape" => Key::Esc,
        "tab" => Key::Tab,
        "backspace" | "bs" => Key::Backspace,
        "left" => Key::Left,
        "right" => Key::Right,
        "up" => Key::Up,
        "down" => Key::Down,
        "minus" => Key::Char('-'),
        "comma" => Key::Char(','),
        "period" => Key::Char('.'),
        "slash" => Key::Char('/'),
        "backslash" => Key::Char('\\'),
        "quote" => Key::Char('\''),
        "double_quote" | "double-quote" => Key::Char('"'),
        "semicolon" => Key::Char(';'),
        "colon" => Key::Char(':'),
        "percent" => Key::Char('%'),
        "ampersand" => Key::Char('&'),
        "backtick" => Key::Char('`'),
        "plus" => Key::Char('+'),
        _ => match single {
            Some(c) if c.is_ascii_uppercase() => {
                mods |= SHIFT;
                Key::Char(c.to_ascii_lowercase())
            }
            Some(c) => Key::Char(c),
            None => Key::F(lower.strip_prefix('f')?.parse().ok()?),
        },
    };
    Some(normalise(Combo { key, mods }))
}

/// Parse a binding (`prefix+shift+x`, `alt+1..9`); a range gives its nine chords.
pub fn parse_binding(text: &str) -> Option<Vec<Chord>> {
    let text = text.trim();
    let (prefix, body) = match text.strip_prefix("prefix+") {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if body.split('+').any(|p| p.trim() == "1..9") {
        let mut mods = 0;
        let mut ranges = 0;
        for part in body.split('+').map(str::trim) {
            if part == "1..9" {
                ranges += 1;
            } else {
                mods |= modifier(part)?;
            }
        }
        if ranges != 1 {
            return None;
        }
        return Some(
            ('1'..='9')
                .map(|d| Chord {
                    prefix,
                    combo: normalise(Combo {
                        key: Key::Char(d),
                        mods,
                    }),
                })
                .collect(),
        );
    }
    parse_combo(body).map(|combo| vec![Chord { prefix, combo }])
}

fn combo_label(combo: Combo) -> String {
    let mut parts: Vec<String> = Vec::new();
    for (bit, name) in [
        (CTRL, "ctrl"),
        (ALT, "alt"),
        (SHIFT, "shift"),
        (SUPER, "super"),
        (HYPER, "hyper"),
    ] {
        if combo.mods & bit != 0 {
            parts.push(name.into());
        }
    }
    parts.push(match combo.key {
        Key::Char(' ') => "space".into(),
        Key::Char('-') => "minus".into(),
        Key::Char(c) => c.to_string(),
        Key::Enter => "enter".into(),
        Key::Esc => "esc".into(),
        Key::Tab => "tab".into(),
        Key::BackTab => "shift+tab".into(),
        Key::Backspace => "backspace".into(),
        Key::Left => "left".into(),
        Key::Right => "right".into(),
        Key::Up => "up".into(),
        Key::Down => "down".into(),
        Key::F(n) => format!("f{n}"),
    });
    parts.join("+")
}

/// The strings of a binding value: a string or an array of strings.
fn binding_values(item: &Item) -> Vec<String> {
    match item {
        Item::Value(Value::String(s)) => vec![s.value().clone()],
        Item::Value(Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// One `[[keys.command]]` entry, in any of its TOML forms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandEntry {
    /// Its position in `keys.command`.
    pub index: usize,
    /// `key` (all its values).
    pub keys: Vec<String>,
    /// `command`.
    pub command: Option<String>,
    /// `type` (`shell` when missing).
    pub kind: String,
}

/// The `[[keys.command]]` entries of a parsed `config.toml`.
pub fn command_entries(doc: &DocumentMut) -> Vec<CommandEntry> {
    let Some(commands) = keys_table(doc).and_then(|k| k.get("command")) else {
        return Vec::new();
    };
    let entry = |index: usize, t: &dyn TableLike| CommandEntry {
        index,
        keys: t.get("key").map(binding_values).unwrap_or_default(),
        command: t.get("command").and_then(Item::as_str).map(str::to_string),
        kind: t
            .get("type")
            .and_then(Item::as_str)
            .unwrap_or("shell")
            .to_string(),
    };
    match commands {
        Item::ArrayOfTables(tables) => tables
            .iter()
            .enumerate()
            .map(|(i, t)| entry(i, t))
            .collect(),
        Item::Value(Value::Array(items)) => items
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_inline_table().map(|t| entry(i, t)))
            .collect(),
        _ => Vec::new(),
    }
}

fn keys_table(doc: &DocumentMut) -> Option<&dyn TableLike> {
    doc.get("keys").and_then(Item::as_table_like)
}

/// Who holds a bound chord.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The config field (`keys.close_tab`, `keys.command[2]`).
    pub field: String,
    /// Whether it is Herdr's default (not written by the user).
    pub default: bool,
}

impl Holder {
    /// `keys.close_tab (Herdr's default)`.
    pub fn describe(&self) -> String {
        if self.default {
            format!("{} (Herdr's default)", self.field)
        } else {
            self.field.clone()
        }
    }
}

/// The effective bindings of a config: what is taken, and by whom.
#[derive(Clone, Debug, Default)]
pub struct Bindings {
    /// The prefix key: a prefix chord on the same combo is refused by Herdr.
    pub prefix: Option<Combo>,
    taken: BTreeMap<Chord, Holder>,
}

impl Bindings {
    /// Herdr's effective bindings for `doc`, ignoring the custom commands `skip` selects
    /// (the ones being re-placed).
    pub fn of(doc: &DocumentMut, skip: impl Fn(&CommandEntry) -> bool) -> Bindings {
        let keys = keys_table(doc);
        let prefix_text = keys
            .and_then(|k| k.get("prefix"))
            .and_then(Item::as_str)
            .unwrap_or(DEFAULT_PREFIX);
        let mut out = Bindings {
            prefix: parse_combo(prefix_text).or_else(|| parse_combo(DEFAULT_PREFIX)),
            ..Default::default()
        };
        let user_value = |field: &str| -> Option<&Item> {
            let k = keys?;
            k.get(field).or_else(|| {
                if field == "zoom" {
                    k.get("fullscreen")
                } else {
                    None
                }
            })
        };
        let fields = DEFAULT_BINDINGS
            .iter()
            .map(|(f, _)| *f)
            .chain(UNSET_FIELDS.iter().copied());
        // User fields first, then custom commands, then the defaults nobody replaced.
        for field in fields.clone() {
            if let Some(item) = user_value(field) {
                for value in binding_values(item) {
                    out.take_all(&value, &format!("keys.{field}"), false);
                }
            }
        }
        for entry in keys.map(|_| command_entries(doc)).unwrap_or_default() {
            if skip(&entry) || entry.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
                continue;
            }
            for value in &entry.keys {
                out.take_all(value, &format!("keys.command[{}]", entry.index), false);
            }
        }
        for (field, default) in DEFAULT_BINDINGS {
            if user_value(field).is_none() {
                out.take_all(default, &format!("keys.{field}"), true);
            }
        }
        out
    }

    fn take_all(&mut self, value: &str, field: &str, default: bool) {
        for chord in parse_binding(value).unwrap_or_default() {
            self.taken.entry(chord).or_insert_with(|| Holder {
                field: field.to_string(),
                default,
            });
        }
    }

    /// Who holds `chord`, if anyone (the prefix key itself counts as held).
    pub fn holder(&self, chord: &Chord) -> Option<Holder> {
        if chord.prefix && Some(chord.combo) == self.prefix {
            return Some(Holder {
                field: "keys.prefix".into(),
                default: false,
            });
        }
        self.taken.get(chord).cloned()
    }

    /// Mark `chord` as taken by `field`.
    pub fn take(&mut self, chord: Chord, field: &str) {
        self.taken.insert(
            chord,
            Holder {
                field: field.to_string(),
                default: false,
            },
        );
    }

    /// The first free chord among `wanted`, then `prefix+shift+<letter>` for the letters of
    /// `hint`, then every other `prefix+shift+<letter>`, then `prefix+alt+<letter>`.
    pub fn first_free(&self, wanted: &str, hint: &str) -> Option<Chord> {
        let letter = |mods: u8, c: char| Chord {
            prefix: true,
            combo: Combo {
                key: Key::Char(c),
                mods,
            },
        };
        let hinted = hint
            .chars()
            .filter(char::is_ascii_lowercase)
            .map(|c| letter(SHIFT, c));
        let shifted = ('a'..='z').map(|c| letter(SHIFT, c));
        let alted = ('a'..='z').map(|c| letter(ALT, c));
        parse_binding(wanted)
            .unwrap_or_default()
            .into_iter()
            .take(1)
            .chain(hinted)
            .chain(shifted)
            .chain(alted)
            .find(|c| self.holder(c).is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> DocumentMut {
        text.parse().unwrap()
    }

    fn chord(text: &str) -> Chord {
        parse_binding(text).unwrap()[0]
    }

    #[test]
    fn parsing_normalises_like_herdr() {
        assert_eq!(chord("prefix+shift+x"), chord("prefix+X"));
        assert_eq!(chord("prefix+Shift+X"), chord("prefix+shift+x"));
        assert_eq!(chord("prefix+shift+tab"), chord("prefix+shift+Tab"));
        assert_eq!(chord("prefix+minus").combo.key, Key::Char('-'));
        assert_eq!(chord("prefix+option+x"), chord("prefix+alt+x"));
        assert!(!chord("ctrl+x").prefix);
        assert_eq!(parse_binding("prefix+alt+1..9").unwrap().len(), 9);
        assert!(parse_binding("prefix+shift+").is_none());
        assert!(parse_binding("prefix+a+b").is_none());
        assert_eq!(chord("prefix+X").label(), "prefix+shift+x");
        assert_eq!(chord("prefix+f12").label(), "prefix+f12");
    }

    #[test]
    fn every_default_is_taken_in_an_empty_config() {
        let b = Bindings::of(&doc(""), |_| false);
        for (field, default) in DEFAULT_BINDINGS {
            for c in parse_binding(default).unwrap() {
                let holder = b.holder(&c).unwrap_or_else(|| panic!("{default} free"));
                assert_eq!(holder.field, format!("keys.{field}"));
                assert!(holder.default);
            }
        }
        let close_tab = b.holder(&chord("prefix+shift+x")).unwrap();
        assert_eq!(close_tab.describe(), "keys.close_tab (Herdr's default)");
        for free in [
            "prefix+shift+s",
            "prefix+shift+c",
            "prefix+shift+y",
            "prefix+shift+a",
            "prefix+shift+i",
            "prefix+shift+e",
        ] {
            assert!(b.holder(&chord(free)).is_none(), "{free} is taken");
        }
        // The prefix key itself cannot be a prefix binding.
        assert_eq!(
            b.holder(&chord("prefix+ctrl+b")).unwrap().field,
            "keys.prefix"
        );
    }

    #[test]
    fn user_settings_replace_defaults_and_take_their_own_keys() {
        let text = "[keys]\nprefix = \"ctrl+a\"\nclose_tab = \"prefix+alt+w\"\nsettings = \"\"\n\
                    new_tab = [\"prefix+shift+s\", \"ctrl+t\"]\nfullscreen = \"prefix+m\"\n\n\
                    [[keys.command]]\nkey = \"prefix+shift+y\"\ncommand = \"lazygit\"\n";
        let b = Bindings::of(&doc(text), |_| false);
        assert!(
            b.holder(&chord("prefix+shift+x")).is_none(),
            "close_tab was moved by the user"
        );
        assert!(
            b.holder(&chord("prefix+s")).is_none(),
            "settings was unbound"
        );
        assert_eq!(
            b.holder(&chord("prefix+alt+w")).unwrap().field,
            "keys.close_tab"
        );
        assert_eq!(
            b.holder(&chord("prefix+shift+s")).unwrap().field,
            "keys.new_tab"
        );
        assert!(
            b.holder(&chord("prefix+c")).is_none(),
            "new_tab's default is gone"
        );
        assert_eq!(b.holder(&chord("prefix+m")).unwrap().field, "keys.zoom");
        assert!(b.holder(&chord("prefix+z")).is_none());
        assert_eq!(
            b.holder(&chord("prefix+shift+y")).unwrap().field,
            "keys.command[0]"
        );
        assert_eq!(
            b.holder(&chord("prefix+ctrl+a")).unwrap().field,
            "keys.prefix"
        );
        assert!(b.holder(&chord("prefix+ctrl+b")).is_none());
        // A dotted or inline `keys` is read the same way.
        let b = Bindings::of(
            &doc("keys.command = [{ key = \"prefix+shift+i\", command = \"x\" }]\n"),
            |_| false,
        );
        assert_eq!(
            b.holder(&chord("prefix+shift+i")).unwrap().field,
            "keys.command[0]"
        );
        // An entry without a command is disabled by Herdr and takes nothing.
        let b = Bindings::of(&doc("[[keys.command]]\nkey = \"prefix+shift+i\"\n"), |_| {
            false
        });
        assert!(b.holder(&chord("prefix+shift+i")).is_none());
    }

    #[test]
    fn the_next_free_key_follows_the_hint() {
        let b = Bindings::of(&doc(""), |_| false);
        // X is close_tab, D is close_workspace, so delete gets E.
        assert_eq!(
            b.first_free("prefix+shift+x", "delete").unwrap().label(),
            "prefix+shift+e"
        );
        assert_eq!(
            b.first_free("prefix+shift+s", "start").unwrap().label(),
            "prefix+shift+s"
        );
        let mut b = Bindings::of(&doc("[keys]\nnew_tab = \"prefix+shift+e\"\n"), |_| false);
        assert_eq!(
            b.first_free("prefix+shift+x", "delete").unwrap().label(),
            "prefix+shift+a"
        );
        b.take(chord("prefix+shift+a"), "keys.command[0]");
        assert_eq!(
            b.first_free("prefix+shift+x", "delete").unwrap().label(),
            "prefix+shift+b"
        );
    }
}
