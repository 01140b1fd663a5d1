//! POSIX shell quoting, shared by everything that builds a command line for a shell: commands
//! run over SSH exec channels ([`crate::ssh`]) and lines typed into a terminal (the Herdr
//! panes, the Herdr actions of `cos`).

/// A word that cannot go into a line typed into a terminal.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{word:?} contains the control character {found:?}")]
pub struct ControlCharacter {
    /// The word.
    pub word: String,
    /// The first control character in it.
    pub found: char,
}

/// Quote `word` for a POSIX shell: words made only of `[A-Za-z0-9_./=:@,+-]` are left as they
/// are, anything else is single-quoted (a `'` becomes `'\''`). Safe for every character but NUL,
/// which no shell argument can hold.
pub fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'-' | b'_' | b'.' | b'/' | b'=' | b':' | b'@' | b',' | b'+'
                )
        });
    if plain {
        return word.to_string();
    }
    let mut quoted = String::with_capacity(word.len() + 2);
    quoted.push('\'');
    for c in word.chars() {
        if c == '\'' {
            quoted.push_str("'\\''");
        } else {
            quoted.push(c);
        }
    }
    quoted.push('\'');
    quoted
}

/// A command line running `program` with `args`, each quoted with [`quote`].
pub fn command_line<I, S>(program: &str, args: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut line = quote(program);
    for arg in args {
        line.push(' ');
        line.push_str(&quote(arg.as_ref()));
    }
    line
}

/// `words` as one quoted line for typing into a terminal. Control characters are refused: a
/// newline or carriage return would end the typed line early and run the rest as a second
/// command, and terminal control codes would be interpreted by the terminal.
pub fn typed_line<S: AsRef<str>>(words: &[S]) -> Result<String, ControlCharacter> {
    for word in words {
        let word = word.as_ref();
        if let Some(found) = word.chars().find(|c| c.is_control()) {
            return Err(ControlCharacter {
                word: word.to_string(),
                found,
            });
        }
    }
    Ok(words
        .iter()
        .map(|w| quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("abc/d-e_f.g"), "abc/d-e_f.g");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r#"'it'\''s'"#);
        assert_eq!(quote("$(rm -rf /)"), "'$(rm -rf /)'");
        assert_eq!(quote("a\nb"), "'a\nb'");
        assert_eq!(
            command_line("tar", ["-x", "-C", "/my dir"]),
            "tar -x -C '/my dir'"
        );
    }

    #[test]
    fn typed_lines_refuse_control_characters() {
        assert_eq!(
            typed_line(&["x", "$(y)", "it's"]).unwrap(),
            r#"x '$(y)' 'it'\''s'"#
        );
        for bad in ["a\nb", "a\rb", "\u{1b}[2J", "a\tb", "\u{7f}"] {
            let err = typed_line(&["cos", bad]).unwrap_err();
            assert_eq!(err.word, bad);
        }
    }
}
