//! The key bindings `cos setup herdr` adds to Herdr's `config.toml`, edited structurally
//! (`toml_edit`) so the user's formatting and comments survive and every way of writing the
//! bindings is understood: `[[keys.command]]` tables, `keys.command = [...]`, and `[keys]`
//! with `command = [...]` (or `keys = { command = [...] }`). New bindings are written in the
//! form the file already uses.

use std::path::{Path, PathBuf};

use toml_edit::{value, ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value};

use super::error::{HerdrError, HerdrResult};
use super::state::write_bytes_atomic;
use super::PLUGIN_ID;

/// Name of the backup of `config.toml`.
pub const KEYS_BACKUP: &str = "config.toml.before-createos";

/// The bindings `setup` adds: (key, action, description).
pub const KEY_BINDINGS: &[(&str, &str, &str)] = &[
    ("prefix+shift+s", "start", "start an agent in a new CreateOS sandbox"),
    ("prefix+shift+c", "attach", "reattach the CreateOS agent to this pane"),
    ("prefix+shift+y", "sync", "two-way sync with the CreateOS sandbox"),
    ("prefix+shift+a", "apply", "apply CreateOS sandbox changes locally"),
    ("prefix+shift+i", "info", "show this pane's CreateOS sandbox"),
    ("prefix+shift+x", "delete", "delete this pane's CreateOS sandbox (twice to confirm)"),
];

/// The comment put above the first binding added (in the `[[keys.command]]` form).
const ADDED_COMMENT: &str = "# CreateOS Sandbox (added by cos setup herdr; undo with herdr config reset-keys)";

/// What [`add_key_bindings`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeysOutcome {
    /// Actions bound now.
    pub added: Vec<String>,
    /// Keys left out because the user already binds them to something else.
    pub conflicts: Vec<String>,
    /// The backup written (only when something was added).
    pub backup: Option<PathBuf>,
}

/// The command bindings of a parsed `config.toml`: (key, command) pairs, in any form.
pub fn existing_bindings(doc: &DocumentMut) -> Vec<(Option<String>, Option<String>)> {
    let field = |t: &dyn toml_edit::TableLike, name: &str| t.get(name).and_then(Item::as_str).map(str::to_string);
    let Some(commands) = doc.get("keys").and_then(Item::as_table_like).and_then(|k| k.get("command")) else {
        return Vec::new();
    };
    match commands {
        Item::ArrayOfTables(tables) => tables.iter().map(|t| (field(t, "key"), field(t, "command"))).collect(),
        Item::Value(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_inline_table)
            .map(|t| (field(t, "key"), field(t, "command")))
            .collect(),
        _ => Vec::new(),
    }
}

/// Add the missing bindings to `text` (a whole `config.toml`): returns the new text (None when
/// nothing was added) and the outcome. Text that is not TOML, or a `keys`/`keys.command` of
/// an unexpected type, is refused rather than rewritten.
pub fn add_bindings_to(text: &str, path: &Path) -> HerdrResult<(Option<String>, KeysOutcome)> {
    let refuse = |message: String| HerdrError::Config { path: path.to_path_buf(), message };
    let mut doc: DocumentMut = text.parse().map_err(|e| refuse(format!("is not valid TOML ({e}); left unchanged")))?;
    let bound = existing_bindings(&doc);
    let mut outcome = KeysOutcome::default();
    let mut wanted = Vec::new();
    for (key, action, description) in KEY_BINDINGS {
        let command = format!("{PLUGIN_ID}.{action}");
        if bound.iter().any(|(_, c)| c.as_deref() == Some(command.as_str())) {
            continue;
        }
        if bound.iter().any(|(k, _)| k.as_deref() == Some(*key)) {
            outcome.conflicts.push(format!("{key} (wanted for {command})"));
            continue;
        }
        wanted.push((*key, command, *description));
        outcome.added.push((*action).to_string());
    }
    if wanted.is_empty() {
        return Ok((None, outcome));
    }

    let root = doc.as_table_mut();
    let keys = root.entry("keys").or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    // A `[keys]` header (or no keys at all) takes `[[keys.command]]` tables; dotted
    // (`keys.x = …`) and inline (`keys = { … }`) forms take an inline array.
    let tables_form = matches!(keys, Item::Table(t) if !t.is_dotted());
    let keys = keys.as_table_like_mut().ok_or_else(|| refuse("`keys` is not a table; left unchanged".into()))?;
    if keys.get("command").is_none() {
        let empty = if tables_form { Item::ArrayOfTables(ArrayOfTables::new()) } else { value(toml_edit::Array::new()) };
        keys.insert("command", empty);
    }
    match keys.get_mut("command") {
        Some(Item::ArrayOfTables(tables)) => {
            for (i, (key, command, description)) in wanted.iter().enumerate() {
                let mut t = Table::new();
                t.insert("key", value(*key));
                t.insert("type", value("plugin_action"));
                t.insert("command", value(command.as_str()));
                t.insert("description", value(*description));
                if i == 0 {
                    t.decor_mut().set_prefix(format!("\n{ADDED_COMMENT}\n"));
                }
                tables.push(t);
            }
        }
        Some(Item::Value(Value::Array(items))) => {
            for (key, command, description) in &wanted {
                let mut t = InlineTable::new();
                t.insert("key", (*key).into());
                t.insert("type", "plugin_action".into());
                t.insert("command", command.as_str().into());
                t.insert("description", (*description).into());
                items.push(t);
            }
            // One binding per line, like a hand-written list.
            for item in items.iter_mut() {
                item.decor_mut().set_prefix("\n  ");
            }
            items.set_trailing("\n");
            items.set_trailing_comma(true);
        }
        _ => return Err(refuse("`keys.command` is neither a list nor [[keys.command]] tables; left unchanged".into())),
    }
    Ok((Some(doc.to_string()), outcome))
}

/// Add the missing bindings to `config_toml` (created when missing), backing the file up to
/// `config.toml.before-createos` first (an existing backup is kept: it holds the original). A
/// symlinked `config.toml` (dotfile managers) is written through: its target is updated and
/// the link stays a link.
pub fn add_key_bindings(config_toml: &Path) -> HerdrResult<KeysOutcome> {
    let target = write_target(config_toml)?;
    let existing_text = match std::fs::read_to_string(&target) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(HerdrError::io(format!("reading {}", target.display()), e)),
    };
    let (new_text, mut outcome) = add_bindings_to(existing_text.as_deref().unwrap_or_default(), config_toml)?;
    let Some(new_text) = new_text else { return Ok(outcome) };
    let dir = config_toml.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| HerdrError::io(format!("creating {}", dir.display()), e))?;
    if let Some(original) = &existing_text {
        let backup = dir.join(KEYS_BACKUP);
        if !backup.exists() {
            write_bytes_atomic(&backup, original.as_bytes(), 0o600)?;
        }
        outcome.backup = Some(backup);
    }
    let mode = file_mode(&target).unwrap_or(0o600);
    write_bytes_atomic(&target, new_text.as_bytes(), mode)?;
    Ok(outcome)
}

/// The file to write for `path`: itself, or — for a symlink — the file it points to (a
/// dangling link's target is created), so the atomic rename does not replace the link.
fn write_target(path: &Path) -> HerdrResult<PathBuf> {
    let mut current = path.to_path_buf();
    // Bounded: a symlink loop is refused instead of followed forever.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = std::fs::read_link(&current)
                    .map_err(|e| HerdrError::io(format!("reading the link {}", current.display()), e))?;
                current = match current.parent() {
                    Some(parent) if link.is_relative() => parent.join(link),
                    _ => link,
                };
            }
            _ => return Ok(current),
        }
    }
    Err(HerdrError::invalid("config.toml", format!("{} is a symlink loop", path.display())))
}

fn file_mode(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).ok().map(|m| m.permissions().mode() & 0o777)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(text: &str) -> (String, KeysOutcome) {
        let (new, outcome) = add_bindings_to(text, Path::new("config.toml")).unwrap();
        let new = new.expect("something was added");
        // The result must be TOML, and a second run must find every binding.
        let (again, second) = add_bindings_to(&new, Path::new("config.toml")).unwrap();
        assert!(again.is_none(), "added twice:\n{new}");
        assert!(second.added.is_empty());
        (new, outcome)
    }

    fn commands(text: &str) -> Vec<String> {
        let doc: DocumentMut = text.parse().unwrap();
        existing_bindings(&doc).into_iter().filter_map(|(_, c)| c).collect()
    }

    #[test]
    fn array_of_tables_form() {
        let (text, outcome) = add("[ui]\ntheme = \"dark\"\n\n[[keys.command]]\nkey = \"prefix+shift+x\"\ntype = \"shell\"\ncommand = \"htop\"\n");
        assert_eq!(outcome.added, ["start", "attach", "sync", "apply", "info"]);
        assert_eq!(outcome.conflicts.len(), 1);
        assert!(text.starts_with("[ui]\ntheme = \"dark\""));
        assert!(text.contains(ADDED_COMMENT));
        assert_eq!(commands(&text).len(), 6);
        assert_eq!(text.matches("[[keys.command]]").count(), 6);
    }

    #[test]
    fn dotted_inline_array_form() {
        let (text, outcome) =
            add("# mine\nkeys.command = [{ key = \"prefix+g\", type = \"shell\", command = \"lazygit\" }]\n");
        assert_eq!(outcome.added.len(), 6);
        assert!(!text.contains("[[keys.command]]"), "{text}");
        assert!(text.starts_with("# mine\n"));
        let all = commands(&text);
        assert_eq!(all[0], "lazygit");
        assert!(all.contains(&"createos.sandbox.delete".to_string()));
    }

    #[test]
    fn keys_table_with_command_array_form() {
        let (text, _) = add("[keys]\nprefix = \"ctrl+b\"\ncommand = [\n  { key = \"prefix+g\", command = \"lazygit\" },\n]\n");
        assert!(!text.contains("[[keys.command]]"), "{text}");
        assert!(text.contains("prefix = \"ctrl+b\""));
        assert_eq!(commands(&text).len(), 7);
        let (text, _) = add("keys = { command = [] }\n");
        assert_eq!(commands(&text).len(), 6);
    }

    #[test]
    fn keys_table_without_commands_and_empty_file() {
        let (text, _) = add("[keys]\nprefix = \"ctrl+b\"\n");
        assert_eq!(commands(&text).len(), 6);
        let (text, _) = add("");
        assert_eq!(commands(&text).len(), 6);
        assert!(text.contains("[[keys.command]]"));
    }

    #[test]
    fn bad_toml_and_odd_types_are_refused() {
        assert!(add_bindings_to("[keys\n", Path::new("c")).is_err());
        assert!(add_bindings_to("keys = 3\n", Path::new("c")).is_err());
        assert!(add_bindings_to("[keys]\ncommand = \"x\"\n", Path::new("c")).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_config_is_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let dotfiles = dir.path().join("dotfiles");
        std::fs::create_dir(&dotfiles).unwrap();
        let real = dotfiles.join("herdr.toml");
        std::fs::write(&real, "[ui]\ntheme = \"dark\"\n").unwrap();
        let link = dir.path().join("config.toml");
        std::os::unix::fs::symlink("dotfiles/herdr.toml", &link).unwrap();
        let outcome = add_key_bindings(&link).unwrap();
        assert_eq!(outcome.added.len(), 6);
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link was replaced");
        let text = std::fs::read_to_string(&real).unwrap();
        assert_eq!(commands(&text).len(), 6);
        assert_eq!(std::fs::read_to_string(dir.path().join(KEYS_BACKUP)).unwrap(), "[ui]\ntheme = \"dark\"\n");
        assert!(add_key_bindings(&link).unwrap().added.is_empty());
    }
}
