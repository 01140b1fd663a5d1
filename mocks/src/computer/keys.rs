//! Key names accepted by the keyboard routes (E78–E80): X11 keysym names as xdotool
//! understands them, the usual short aliases (`ctrl`, `esc`, `enter`, …) and any single
//! printable character. Matching is case-insensitive for names; a single character keeps
//! its case (`A` is a shifted `a`).

/// A modifier key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Modifier {
    Ctrl,
    Alt,
    Shift,
    Super,
}

/// What a key does to the focused window when pressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAction {
    /// Held together with other keys.
    Modifier(Modifier),
    /// Produces a character (before shift is applied).
    Text(char),
    Return,
    BackSpace,
    Delete,
    Escape,
    /// A real key with no effect on the emulated text model (arrows, F-keys, …).
    Inert,
}

/// A validated key: its canonical keysym name and its action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub name: String,
    pub action: KeyAction,
}

impl Key {
    pub fn modifier(&self) -> Option<Modifier> {
        match self.action {
            KeyAction::Modifier(m) => Some(m),
            _ => None,
        }
    }
}

use KeyAction::{BackSpace, Delete, Escape, Inert, Return, Text};
use Modifier::{Alt, Ctrl, Shift, Super};

/// (accepted spellings, canonical keysym, action). Spellings are compared lowercase.
const NAMED_KEYS: &[(&[&str], &str, KeyAction)] = &[
    (
        &["ctrl", "control", "control_l", "ctrl_l", "lctrl"],
        "Control_L",
        KeyAction::Modifier(Ctrl),
    ),
    (
        &["control_r", "ctrl_r", "rctrl"],
        "Control_R",
        KeyAction::Modifier(Ctrl),
    ),
    (
        &["alt", "alt_l", "lalt", "option"],
        "Alt_L",
        KeyAction::Modifier(Alt),
    ),
    (
        &["alt_r", "ralt", "altgr", "iso_level3_shift"],
        "Alt_R",
        KeyAction::Modifier(Alt),
    ),
    (
        &["shift", "shift_l", "lshift"],
        "Shift_L",
        KeyAction::Modifier(Shift),
    ),
    (
        &["shift_r", "rshift"],
        "Shift_R",
        KeyAction::Modifier(Shift),
    ),
    (
        &[
            "super", "super_l", "win", "windows", "cmd", "command", "meta", "meta_l",
        ],
        "Super_L",
        KeyAction::Modifier(Super),
    ),
    (
        &["super_r", "meta_r", "hyper", "hyper_l"],
        "Super_R",
        KeyAction::Modifier(Super),
    ),
    (&["return", "enter", "ret"], "Return", Return),
    (&["kp_enter"], "KP_Enter", Return),
    (&["tab"], "Tab", Text('\t')),
    (&["iso_left_tab"], "ISO_Left_Tab", Inert),
    (&["space", "spacebar"], "space", Text(' ')),
    (&["backspace", "back_space", "bksp"], "BackSpace", BackSpace),
    (&["delete", "del"], "Delete", Delete),
    (&["escape", "esc"], "Escape", Escape),
    (&["insert", "ins"], "Insert", Inert),
    (&["home"], "Home", Inert),
    (&["end"], "End", Inert),
    (&["page_up", "pageup", "pgup", "prior"], "Prior", Inert),
    (&["page_down", "pagedown", "pgdn", "next"], "Next", Inert),
    (&["up", "arrowup"], "Up", Inert),
    (&["down", "arrowdown"], "Down", Inert),
    (&["left", "arrowleft"], "Left", Inert),
    (&["right", "arrowright"], "Right", Inert),
    (&["caps_lock", "capslock"], "Caps_Lock", Inert),
    (&["num_lock", "numlock"], "Num_Lock", Inert),
    (&["scroll_lock", "scrolllock"], "Scroll_Lock", Inert),
    (
        &["print", "printscreen", "prtsc", "sys_req"],
        "Print",
        Inert,
    ),
    (&["pause", "break"], "Pause", Inert),
    (&["menu", "apps"], "Menu", Inert),
    (&["minus"], "minus", Text('-')),
    (&["equal"], "equal", Text('=')),
    (&["plus"], "plus", Text('+')),
    (&["comma"], "comma", Text(',')),
    (&["period"], "period", Text('.')),
    (&["slash"], "slash", Text('/')),
    (&["backslash"], "backslash", Text('\\')),
    (&["semicolon"], "semicolon", Text(';')),
    (&["colon"], "colon", Text(':')),
    (&["apostrophe", "quoteright"], "apostrophe", Text('\'')),
    (&["quotedbl"], "quotedbl", Text('"')),
    (&["grave", "quoteleft"], "grave", Text('`')),
    (&["asciitilde"], "asciitilde", Text('~')),
    (&["bracketleft"], "bracketleft", Text('[')),
    (&["bracketright"], "bracketright", Text(']')),
    (&["braceleft"], "braceleft", Text('{')),
    (&["braceright"], "braceright", Text('}')),
    (&["parenleft"], "parenleft", Text('(')),
    (&["parenright"], "parenright", Text(')')),
    (&["less"], "less", Text('<')),
    (&["greater"], "greater", Text('>')),
    (&["question"], "question", Text('?')),
    (&["exclam"], "exclam", Text('!')),
    (&["at"], "at", Text('@')),
    (&["numbersign"], "numbersign", Text('#')),
    (&["dollar"], "dollar", Text('$')),
    (&["percent"], "percent", Text('%')),
    (&["asciicircum"], "asciicircum", Text('^')),
    (&["ampersand"], "ampersand", Text('&')),
    (&["asterisk"], "asterisk", Text('*')),
    (&["underscore"], "underscore", Text('_')),
    (&["bar"], "bar", Text('|')),
    (&["kp_add"], "KP_Add", Text('+')),
    (&["kp_subtract"], "KP_Subtract", Text('-')),
    (&["kp_multiply"], "KP_Multiply", Text('*')),
    (&["kp_divide"], "KP_Divide", Text('/')),
    (&["kp_decimal"], "KP_Decimal", Text('.')),
    (&["xf86audiomute"], "XF86AudioMute", Inert),
    (&["xf86audioraisevolume"], "XF86AudioRaiseVolume", Inert),
    (&["xf86audiolowervolume"], "XF86AudioLowerVolume", Inert),
    (&["xf86audioplay"], "XF86AudioPlay", Inert),
    (&["xf86audiopause"], "XF86AudioPause", Inert),
    (&["xf86audionext"], "XF86AudioNext", Inert),
    (&["xf86audioprev"], "XF86AudioPrev", Inert),
    (&["xf86back"], "XF86Back", Inert),
    (&["xf86forward"], "XF86Forward", Inert),
    (&["xf86reload", "xf86refresh"], "XF86Reload", Inert),
];

/// Parses one key name; `None` when it is not a key the desktop knows.
pub fn parse_key(raw: &str) -> Option<Key> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        // A lone space is the space key.
        return (raw == " ").then(|| Key {
            name: "space".into(),
            action: Text(' '),
        });
    }
    let mut chars = trimmed.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        if !c.is_control() {
            return Some(Key {
                name: c.to_string(),
                action: Text(c),
            });
        }
        return None;
    }
    let lower = trimmed.to_ascii_lowercase();
    if let Some((_, canonical, action)) = NAMED_KEYS
        .iter()
        .find(|(names, _, _)| names.contains(&lower.as_str()))
    {
        return Some(Key {
            name: (*canonical).to_string(),
            action: *action,
        });
    }
    if let Some(digit) = lower.strip_prefix("kp_") {
        if let Ok(n) = digit.parse::<u8>() {
            if n <= 9 {
                return Some(Key {
                    name: format!("KP_{n}"),
                    action: Text(char::from(b'0' + n)),
                });
            }
        }
    }
    if let Some(num) = lower.strip_prefix('f') {
        if let Ok(n) = num.parse::<u8>() {
            if (1..=35).contains(&n) && !num.starts_with('0') {
                return Some(Key {
                    name: format!("F{n}"),
                    action: Inert,
                });
            }
        }
    }
    None
}

/// The character a text key produces with shift held (US layout).
pub fn shifted(c: char) -> char {
    match c {
        'a'..='z' => c.to_ascii_uppercase(),
        '1' => '!',
        '2' => '@',
        '3' => '#',
        '4' => '$',
        '5' => '%',
        '6' => '^',
        '7' => '&',
        '8' => '*',
        '9' => '(',
        '0' => ')',
        '-' => '_',
        '=' => '+',
        '[' => '{',
        ']' => '}',
        '\\' => '|',
        ';' => ':',
        '\'' => '"',
        ',' => '<',
        '.' => '>',
        '/' => '?',
        '`' => '~',
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_parse() {
        assert_eq!(parse_key("ctrl").unwrap().action, KeyAction::Modifier(Ctrl));
        assert_eq!(parse_key("Control_L").unwrap().name, "Control_L");
        assert_eq!(parse_key("ENTER").unwrap().action, Return);
        assert_eq!(parse_key("F12").unwrap().name, "F12");
        assert_eq!(parse_key("kp_7").unwrap().action, Text('7'));
        assert_eq!(parse_key("A").unwrap().action, Text('A'));
        assert_eq!(parse_key("é").unwrap().action, Text('é'));
        assert_eq!(parse_key(" ").unwrap().name, "space");
    }

    #[test]
    fn unknown_names_are_rejected() {
        for bad in ["", "ctrlx", "F0", "F36", "F01", "kp_10", "\u{7}", "hello"] {
            assert!(parse_key(bad).is_none(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn shift_maps_us_layout() {
        assert_eq!(shifted('a'), 'A');
        assert_eq!(shifted('1'), '!');
        assert_eq!(shifted('Z'), 'Z');
    }
}
