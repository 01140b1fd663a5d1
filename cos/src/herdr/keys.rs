//! The key bindings `cos setup herdr` adds to Herdr's `config.toml`, edited structurally
//! (`toml_edit`) so the user's formatting and comments survive and every way of writing the
//! bindings is understood: `[[keys.command]]` tables, `keys.command = [...]`, and `[keys]`
//! with `command = [...]` (or `keys = { command = [...] }`). New bindings are written in the
//! form the file already uses.
//!
//! Every key is checked against Herdr's effective bindings ([`super::keymap`]): the defaults
//! plus the user's `[keys]` and `[[keys.command]]`. A key that is taken is never used (Herdr
//! would silently drop the built-in action it carries); the next free key is, and the outcome
//! says which. A binding of ours that an earlier setup put on a taken key is moved.
//!
//! The edit is transactional ([`install_key_bindings`]): `herdr config check` runs before and
//! after it, and a diagnostic that was not there before puts the file back as it was.

use std::future::Future;
use std::path::{Path, PathBuf};

use toml_edit::{value, ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value};

use super::error::{HerdrError, HerdrResult};
use super::keymap::{command_entries, parse_binding, Bindings, CommandEntry};
use super::state::write_bytes_atomic;
use super::PLUGIN_ID;

/// Name of the backup of `config.toml` (the file as it was right before the last edit); a
/// config file of another name (`HERDR_CONFIG_PATH`) gets `<its name>.before-createos`.
pub const KEYS_BACKUP: &str = "config.toml.before-createos";

/// The backup of `config_toml`: `<its name>.before-createos` beside it.
pub fn backup_path(config_toml: &Path) -> PathBuf {
    let name = config_toml
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "config.toml".into());
    config_toml.with_file_name(format!("{name}.before-createos"))
}

/// The bindings `setup` adds: (preferred key, action, description). None of the keys is a
/// Herdr default; any that the user has taken is replaced by the next free one.
pub const KEY_BINDINGS: &[(&str, &str, &str)] = &[
    (
        "prefix+shift+s",
        "start",
        "start an agent in a new CreateOS sandbox",
    ),
    (
        "prefix+shift+c",
        "attach",
        "reattach the CreateOS agent to this pane",
    ),
    (
        "prefix+shift+y",
        "sync",
        "two-way sync with the CreateOS sandbox",
    ),
    (
        "prefix+shift+a",
        "apply",
        "apply CreateOS sandbox changes locally",
    ),
    (
        "prefix+shift+i",
        "info",
        "show this pane's CreateOS sandbox",
    ),
    (
        "prefix+shift+e",
        "delete",
        "delete this pane's CreateOS sandbox (twice to confirm)",
    ),
];

/// The comment put above the first binding added (in the `[[keys.command]]` form).
fn added_comment(path: &Path) -> String {
    let backup = backup_path(path);
    let name = backup
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("# CreateOS Sandbox (added by cos setup herdr; the file before it is {name})")
}

/// One binding of ours.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BoundKey {
    /// The plugin action.
    pub action: String,
    /// Herdr's label of the key.
    pub key: String,
}

/// What [`add_bindings_to`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeysOutcome {
    /// Bindings added now.
    pub added: Vec<BoundKey>,
    /// Bindings of ours (from an earlier setup) moved off a key that was taken.
    pub moved: Vec<BoundKey>,
    /// Why a key differs from the usual one, one sentence each.
    pub notes: Vec<String>,
    /// The backup written (only when something changed).
    pub backup: Option<PathBuf>,
}

impl KeysOutcome {
    /// Whether the file changes.
    pub fn changed(&self) -> bool {
        !self.added.is_empty() || !self.moved.is_empty()
    }
}

/// The command bindings of a parsed `config.toml`: (key, command) pairs, in any form.
pub fn existing_bindings(doc: &DocumentMut) -> Vec<(Option<String>, Option<String>)> {
    command_entries(doc)
        .into_iter()
        .map(|e| (e.keys.first().cloned(), e.command))
        .collect()
}

fn is_ours(entry: &CommandEntry) -> bool {
    entry.kind == "plugin_action"
        && entry.command.as_deref().is_some_and(|c| {
            c.strip_prefix(PLUGIN_ID)
                .is_some_and(|a| a.starts_with('.'))
        })
}

/// Add the missing bindings to `text` (a whole `config.toml`): returns the new text (None when
/// nothing changed) and the outcome. Text that is not TOML, or a `keys`/`keys.command` of
/// an unexpected type, is refused rather than rewritten.
pub fn add_bindings_to(text: &str, path: &Path) -> HerdrResult<(Option<String>, KeysOutcome)> {
    let refuse = |message: String| HerdrError::Config {
        path: path.to_path_buf(),
        message,
    };
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e| refuse(format!("is not valid TOML ({e}); left unchanged")))?;
    if doc.get("keys").is_some_and(|k| k.as_table_like().is_none()) {
        return Err(refuse("`keys` is not a table; left unchanged".into()));
    }
    let entries = command_entries(&doc);
    let mut taken = Bindings::of(&doc, is_ours);
    let mut outcome = KeysOutcome::default();

    // Ours first, in file order: a key an earlier setup took from Herdr is given back.
    let mut moves = Vec::new();
    for entry in entries.iter().filter(|e| is_ours(e)) {
        let command = entry.command.clone().unwrap_or_default();
        let action = command.rsplit('.').next().unwrap_or_default().to_string();
        let field = format!("keys.command[{}]", entry.index);
        let [key] = entry.keys.as_slice() else {
            continue;
        };
        let Some(chord) = parse_binding(key).and_then(|c| (c.len() == 1).then(|| c[0])) else {
            continue;
        };
        match taken.holder(&chord) {
            None => taken.take(chord, &field),
            Some(holder) => {
                let Some(free) = taken.first_free(key, &action) else {
                    outcome.notes.push(format!(
                        "{command} on {key} clashes with {}; no free key",
                        holder.describe()
                    ));
                    continue;
                };
                taken.take(free, &field);
                outcome.notes.push(format!(
                    "{command} was on {key}, which is {}; moved to {}",
                    holder.describe(),
                    free.label()
                ));
                outcome.moved.push(BoundKey {
                    action,
                    key: free.label(),
                });
                moves.push((entry.index, free.label()));
            }
        }
    }

    let missing: Vec<_> = KEY_BINDINGS
        .iter()
        .filter(|(_, action, _)| {
            let command = format!("{PLUGIN_ID}.{action}");
            !entries
                .iter()
                .any(|e| is_ours(e) && e.command.as_deref() == Some(command.as_str()))
        })
        .collect();
    // The usual keys that are free are kept for their own action: a substitute never takes
    // the key another of ours is about to use.
    let reserved = |action: &str| format!("keys.command (new, {action})");
    let wanted_chord = |key: &str| parse_binding(key).map(|c| c[0]);
    for (key, action, _) in &missing {
        if let Some(chord) = wanted_chord(key).filter(|c| taken.holder(c).is_none()) {
            taken.take(chord, &reserved(action));
        }
    }
    let mut wanted = Vec::new();
    for (key, action, description) in missing {
        let command = format!("{PLUGIN_ID}.{action}");
        let own = wanted_chord(key)
            .filter(|c| taken.holder(c).is_some_and(|h| h.field == reserved(action)));
        let Some(chord) = own.or_else(|| taken.first_free(key, action)) else {
            outcome
                .notes
                .push(format!("{command}: no free key found; bind it by hand"));
            continue;
        };
        let field = reserved(action);
        if chord.label() != *key {
            let why = parse_binding(key)
                .and_then(|c| taken.holder(&c[0]))
                .map(|h| h.describe())
                .unwrap_or_else(|| "taken".into());
            outcome.notes.push(format!(
                "{action}: {key} is {why}; took {} instead",
                chord.label()
            ));
        }
        taken.take(chord, &field);
        wanted.push((chord.label(), command, *description));
        outcome.added.push(BoundKey {
            action: (*action).to_string(),
            key: chord.label(),
        });
    }
    if wanted.is_empty() && moves.is_empty() {
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
    let keys = keys
        .as_table_like_mut()
        .ok_or_else(|| refuse("`keys` is not a table; left unchanged".into()))?;
    if keys.get("command").is_none() {
        let empty = if tables_form {
            Item::ArrayOfTables(ArrayOfTables::new())
        } else {
            value(toml_edit::Array::new())
        };
        keys.insert("command", empty);
    }
    match keys.get_mut("command") {
        Some(Item::ArrayOfTables(tables)) => {
            for (index, key) in &moves {
                if let Some(t) = tables.get_mut(*index) {
                    t.insert("key", value(key.as_str()));
                }
            }
            for (i, (key, command, description)) in wanted.iter().enumerate() {
                let mut t = Table::new();
                t.insert("key", value(key.as_str()));
                t.insert("type", value("plugin_action"));
                t.insert("command", value(command.as_str()));
                t.insert("description", value(*description));
                if i == 0 {
                    t.decor_mut()
                        .set_prefix(format!("\n{}\n", added_comment(path)));
                }
                tables.push(t);
            }
        }
        Some(Item::Value(Value::Array(items))) => {
            for (index, key) in &moves {
                if let Some(t) = items.get_mut(*index).and_then(Value::as_inline_table_mut) {
                    t.insert("key", key.as_str().into());
                }
            }
            for (key, command, description) in &wanted {
                let mut t = InlineTable::new();
                t.insert("key", key.as_str().into());
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
        _ => {
            return Err(refuse(
                "`keys.command` is neither a list nor [[keys.command]] tables; left unchanged"
                    .into(),
            ))
        }
    }
    Ok((Some(doc.to_string()), outcome))
}

/// Add the missing bindings to `config_toml` (created when missing), transactionally: `check`
/// (`herdr config check`, its diagnostics) runs before and after the edit, and when the edit
/// brings a diagnostic that was not there before, the file is put back exactly as it was and
/// the setup fails naming it. Diagnostics the file already had are the user's and are left
/// alone. The file as it was is kept in `config.toml.before-createos` (rewritten at every
/// edit, so it is always the state right before the last one). A symlinked `config.toml`
/// (dotfile managers) is written through: its target is updated and the link stays a link.
pub async fn install_key_bindings<F, Fut>(
    config_toml: &Path,
    mut check: F,
) -> HerdrResult<KeysOutcome>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = HerdrResult<Vec<String>>>,
{
    let target = write_target(config_toml)?;
    let existing_text = match std::fs::read_to_string(&target) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(HerdrError::io(format!("reading {}", target.display()), e)),
    };
    let (new_text, mut outcome) =
        add_bindings_to(existing_text.as_deref().unwrap_or_default(), config_toml)?;
    let Some(new_text) = new_text else {
        return Ok(outcome);
    };
    let before = check().await?;
    let dir = config_toml
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| HerdrError::io(format!("creating {}", dir.display()), e))?;
    if let Some(original) = &existing_text {
        let backup = backup_path(config_toml);
        write_bytes_atomic(&backup, original.as_bytes(), 0o600)?;
        outcome.backup = Some(backup);
    }
    let mode = file_mode(&target).unwrap_or(0o600);
    write_bytes_atomic(&target, new_text.as_bytes(), mode)?;
    let after = check().await;
    let fresh: Vec<String> = match &after {
        Ok(after) => after
            .iter()
            .filter(|d| !before.contains(d))
            .cloned()
            .collect(),
        Err(e) => vec![e.to_string()],
    };
    if fresh.is_empty() {
        return Ok(outcome);
    }
    let restored = match &existing_text {
        Some(original) => write_bytes_atomic(&target, original.as_bytes(), mode),
        None => std::fs::remove_file(&target)
            .map_err(|e| HerdrError::io(format!("removing {}", target.display()), e)),
    };
    let state = match restored {
        Ok(()) => format!(
            "{} was put back as it was; nothing changed",
            config_toml.display()
        ),
        Err(e) => format!(
            "putting {} back failed too ({e}): copy {} over it",
            config_toml.display(),
            backup_path(config_toml).display()
        ),
    };
    Err(HerdrError::Config {
        path: config_toml.to_path_buf(),
        message: format!(
            "`herdr config check` reported new problems after adding the keys: {}; {state}",
            fresh.join(" | ")
        ),
    })
}

/// The file to write for `path`: itself, or — for a symlink — the file it points to (a
/// dangling link's target is created), so the atomic rename does not replace the link.
fn write_target(path: &Path) -> HerdrResult<PathBuf> {
    let mut current = path.to_path_buf();
    // Bounded: a symlink loop is refused instead of followed forever.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = std::fs::read_link(&current).map_err(|e| {
                    HerdrError::io(format!("reading the link {}", current.display()), e)
                })?;
                current = match current.parent() {
                    Some(parent) if link.is_relative() => parent.join(link),
                    _ => link,
                };
            }
            _ => return Ok(current),
        }
    }
    Err(HerdrError::invalid(
        "config.toml",
        format!("{} is a symlink loop", path.display()),
    ))
}

fn file_mode(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path)
            .ok()
            .map(|m| m.permissions().mode() & 0o777)
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
        existing_bindings(&doc)
            .into_iter()
            .filter_map(|(_, c)| c)
            .collect()
    }

    fn key_of(outcome: &KeysOutcome, action: &str) -> String {
        outcome
            .added
            .iter()
            .chain(&outcome.moved)
            .find(|b| b.action == action)
            .unwrap()
            .key
            .clone()
    }

    /// Every key we write is free in Herdr's effective bindings of the file *before* our
    /// entries (defaults + the user's): none replaces a built-in action or a user binding.
    fn assert_no_key_is_taken(before: &str, after: &str) {
        let doc: DocumentMut = before.parse().unwrap();
        let taken = Bindings::of(&doc, is_ours);
        let after_doc: DocumentMut = after.parse().unwrap();
        let ours: Vec<_> = command_entries(&after_doc)
            .into_iter()
            .filter(is_ours)
            .collect();
        assert!(!ours.is_empty());
        let mut seen = std::collections::BTreeSet::new();
        for e in ours {
            let chord = parse_binding(&e.keys[0]).unwrap()[0];
            assert!(
                taken.holder(&chord).is_none(),
                "{} took {} from {:?}",
                e.command.unwrap(),
                e.keys[0],
                taken.holder(&chord)
            );
            assert!(seen.insert(chord), "two of ours on {}", e.keys[0]);
        }
    }

    #[test]
    fn herdrs_default_close_tab_key_is_never_taken() {
        let (text, outcome) = add("");
        assert_no_key_is_taken("", &text);
        assert_eq!(key_of(&outcome, "delete"), "prefix+shift+e");
        assert!(!text.contains("prefix+shift+x"), "{text}");
        assert!(outcome.notes.is_empty(), "{:?}", outcome.notes);
    }

    #[test]
    fn a_key_the_user_took_is_replaced_by_the_next_free_one_and_said() {
        let before = "[keys]\nnew_tab = \"prefix+shift+s\"\n\n[[keys.command]]\nkey = \"prefix+shift+a\"\ncommand = \"lazygit\"\n";
        let (text, outcome) = add(before);
        assert_no_key_is_taken(before, &text);
        // start: s taken by new_tab, t by rename_tab (default), a by lazygit, r by reload_config;
        // b is free.
        assert_eq!(key_of(&outcome, "start"), "prefix+shift+b");
        let notes = outcome.notes.join("\n");
        assert!(
            notes.contains("start: prefix+shift+s is keys.new_tab; took prefix+shift+b"),
            "{notes}"
        );
        assert!(
            notes.contains("apply: prefix+shift+a is keys.command[0]"),
            "{notes}"
        );
        // A substitute never takes the usual key of another of ours.
        let before = "[keys]\nnew_tab = \"prefix+shift+s\"\n";
        let (text, outcome) = add(before);
        assert_no_key_is_taken(before, &text);
        assert_eq!(key_of(&outcome, "apply"), "prefix+shift+a");
        assert_eq!(key_of(&outcome, "start"), "prefix+shift+b");
        // The user's own prefix key cannot be used either.
        let before = "[keys]\nprefix = \"shift+s\"\n";
        let (text, outcome) = add(before);
        assert_no_key_is_taken(before, &text);
        assert_ne!(key_of(&outcome, "start"), "prefix+shift+s");
    }

    #[test]
    fn our_binding_on_close_tab_from_an_earlier_setup_is_moved() {
        let before = "[[keys.command]]\nkey = \"prefix+shift+x\"\ntype = \"plugin_action\"\ncommand = \"createos.sandbox.delete\"\n";
        let (text, outcome) = add(before);
        assert_eq!(
            outcome.moved,
            [BoundKey {
                action: "delete".into(),
                key: "prefix+shift+e".into()
            }]
        );
        assert!(
            outcome.notes[0].contains("keys.close_tab (Herdr's default)"),
            "{:?}",
            outcome.notes
        );
        assert_eq!(text.matches("createos.sandbox.delete").count(), 1);
        assert!(!text.contains("prefix+shift+x"), "{text}");
        assert_no_key_is_taken("", &text);
        // When the user moved close_tab away, prefix+shift+x is free and ours stays.
        let kept = "[keys]\nclose_tab = \"prefix+alt+x\"\n\n[[keys.command]]\nkey = \"prefix+shift+x\"\ntype = \"plugin_action\"\ncommand = \"createos.sandbox.delete\"\n";
        let (text, outcome) = add(kept);
        assert!(outcome.moved.is_empty());
        assert!(text.contains("key = \"prefix+shift+x\""));
    }

    #[test]
    fn array_of_tables_form() {
        let (text, outcome) = add("[ui]\ntheme = \"dark\"\n\n[[keys.command]]\nkey = \"prefix+shift+s\"\ntype = \"shell\"\ncommand = \"htop\"\n");
        assert_eq!(outcome.added.len(), 6);
        assert_ne!(key_of(&outcome, "start"), "prefix+shift+s");
        assert!(text.starts_with("[ui]\ntheme = \"dark\""));
        assert!(text.contains(&added_comment(Path::new("config.toml"))));
        assert!(text.contains("config.toml.before-createos"));
        assert!(!text.contains("reset-keys"));
        assert_eq!(commands(&text).len(), 7);
        assert_eq!(text.matches("[[keys.command]]").count(), 7);
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
        // An inline entry of ours on a default key is moved in place.
        let (text, outcome) = add("keys.command = [{ key = \"prefix+shift+x\", type = \"plugin_action\", command = \"createos.sandbox.delete\" }]\n");
        assert_eq!(outcome.moved.len(), 1);
        assert!(!text.contains("prefix+shift+x"), "{text}");
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

    fn checker(
        answers: Vec<Vec<&'static str>>,
    ) -> impl FnMut() -> std::future::Ready<HerdrResult<Vec<String>>> {
        let mut answers = answers.into_iter();
        move || {
            std::future::ready(Ok(answers
                .next()
                .expect("checked too often")
                .into_iter()
                .map(String::from)
                .collect()))
        }
    }

    #[tokio::test]
    async fn a_new_diagnostic_puts_the_file_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        let original = "[ui]\nbogus = 1\n";
        std::fs::write(&path, original).unwrap();
        let pre = "unknown config key ui.bogus; ignoring";
        // A diagnostic the file already had is the user's: the keys stay.
        let outcome = install_key_bindings(&path, checker(vec![vec![pre], vec![pre]]))
            .await
            .unwrap();
        assert_eq!(outcome.added.len(), 6);
        assert_eq!(
            std::fs::read_to_string(dir.path().join(KEYS_BACKUP)).unwrap(),
            original
        );
        assert_eq!(commands(&std::fs::read_to_string(&path).unwrap()).len(), 6);
        // A new one puts the file back exactly, and says so without suggesting reset-keys.
        std::fs::write(&path, original).unwrap();
        let err = install_key_bindings(
            &path,
            checker(vec![
                vec![pre],
                vec![pre, "prefix+shift+s: kept a, disabled b"],
            ]),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("prefix+shift+s: kept a, disabled b") && err.contains("put back"),
            "{err}"
        );
        assert!(!err.contains(pre) && !err.contains("reset-keys"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
        // A file that did not exist is removed again.
        let fresh = dir.path().join("new.toml");
        install_key_bindings(&fresh, checker(vec![vec![], vec!["x"]]))
            .await
            .unwrap_err();
        assert!(!fresh.exists());
        // Nothing to add: no check runs at all.
        install_key_bindings(&path, checker(vec![vec![], vec![]]))
            .await
            .unwrap();
        install_key_bindings(&path, checker(vec![])).await.unwrap();
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_symlinked_config_is_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let dotfiles = dir.path().join("dotfiles");
        std::fs::create_dir(&dotfiles).unwrap();
        let real = dotfiles.join("herdr.toml");
        std::fs::write(&real, "[ui]\ntheme = \"dark\"\n").unwrap();
        let link = dir.path().join("config.toml");
        std::os::unix::fs::symlink("dotfiles/herdr.toml", &link).unwrap();
        let outcome = install_key_bindings(&link, checker(vec![vec![], vec![]]))
            .await
            .unwrap();
        assert_eq!(outcome.added.len(), 6);
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink(),
            "the link was replaced"
        );
        let text = std::fs::read_to_string(&real).unwrap();
        assert_eq!(commands(&text).len(), 6);
        assert_eq!(
            std::fs::read_to_string(dir.path().join(KEYS_BACKUP)).unwrap(),
            "[ui]\ntheme = \"dark\"\n"
        );
        assert!(install_key_bindings(&link, checker(vec![]))
            .await
            .unwrap()
            .added
            .is_empty());
    }
}
