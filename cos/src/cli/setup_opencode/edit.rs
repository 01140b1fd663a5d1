//! The one change `cos setup opencode` makes to an OpenCode configuration: an entry for the
//! plugin in its plugin list, edited in the concrete syntax tree so every comment, blank line
//! and indent the user wrote stays where it was.
//!
//! OpenCode 1.x reads `plugin`: a list of specs (`"name"`, `"name@1.2.3"`, a path) or
//! `[spec, options]` pairs. OpenCode 2 reads `plugins`, whose entries are specs or
//! `{"package", "options"}` objects (plugins.md §4.1). A file that already uses `plugins` gets
//! the V2 form; every other file gets `plugin`.

use anyhow::{bail, Result};
use jsonc_parser::cst::{CstArray, CstInputValue, CstNode, CstObject, CstRootNode};
use jsonc_parser::ParseOptions;

pub use crate::tools::config::Mode;

/// What to make sure is in the file.
#[derive(Clone, Debug)]
pub struct Wanted {
    /// The spec an added entry names (`@createos/opencode`, a pinned version, a path).
    pub spec: String,
    /// `None`: any entry for the plugin will do; an added one has no options (local mode).
    pub mode: Option<Mode>,
}

/// An entry for the plugin found in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The key holding the list (`plugin` or `plugins`).
    pub key: &'static str,
    /// The spec as written.
    pub spec: String,
    /// Its mode option (`local` when it has none).
    pub mode: String,
}

/// The outcome of [`ensure_entry`].
#[derive(Debug)]
pub struct Edited {
    /// The new text, `None` when the file already had what was wanted.
    pub text: Option<String>,
    /// The entry as it stands afterwards.
    pub entry: Found,
}

/// What OpenCode itself accepts (its parser allows comments and trailing commas, nothing of
/// JSON5 beyond that): refusing the rest here keeps a file OpenCode would reject from being
/// "fixed" into something else.
fn parse_options() -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        ..ParseOptions::default()
    }
}

fn parse(text: &str) -> Result<CstRootNode> {
    CstRootNode::parse(text, &parse_options())
        .map_err(|e| anyhow::anyhow!("not valid JSON with comments: {e}"))
}

/// The package name a spec loads: `@scope/name@1.2` → `@scope/name`, `name@^1` → `name`;
/// a path or URL is its own name.
pub fn package_name(spec: &str) -> &str {
    let spec = spec.trim();
    if spec.starts_with('.')
        || spec.starts_with('/')
        || spec.starts_with('~')
        || spec.contains("://")
    {
        return spec;
    }
    let start = usize::from(spec.starts_with('@'));
    match spec[start..].find('@') {
        Some(at) => &spec[..start + at],
        None => spec,
    }
}

fn string_of(node: &CstNode) -> Option<String> {
    node.as_string_lit().and_then(|s| s.decoded_value().ok())
}

/// The list key of the root object, `plugins` only when the file already uses it.
fn list_key(root: &CstObject) -> &'static str {
    if root.get("plugins").is_some() && root.get("plugin").is_none() {
        "plugins"
    } else {
        "plugin"
    }
}

/// The spec and options object of one list element, in either form.
fn element_parts(el: &CstNode) -> Option<(String, Option<CstObject>)> {
    if let Some(spec) = string_of(el) {
        return Some((spec, None));
    }
    if let Some(pair) = el.as_array() {
        let items = pair.elements();
        let spec = items.first().and_then(string_of)?;
        return Some((spec, items.get(1).and_then(|o| o.as_object())));
    }
    if let Some(obj) = el.as_object() {
        let spec = obj
            .get("package")
            .and_then(|p| p.value())
            .as_ref()
            .and_then(string_of)?;
        return Some((spec, obj.object_value("options")));
    }
    None
}

fn mode_of(options: Option<&CstObject>) -> String {
    options
        .and_then(|o| o.get("mode"))
        .and_then(|p| p.value())
        .as_ref()
        .and_then(string_of)
        .unwrap_or_else(|| "local".to_string())
}

/// The plugin list of a file and the entry naming the plugin in it, if any.
struct Located {
    list: CstArray,
    entry: Option<(CstNode, Found)>,
}

/// The plugin list and the entry naming `name` in it, if any.
fn locate(root: &CstObject, name: &str) -> Result<Option<Located>> {
    let key = list_key(root);
    let Some(prop) = root.get(key) else {
        return Ok(None);
    };
    let Some(list) = prop.array_value() else {
        bail!("`{key}` is not a list")
    };
    let found = list.elements().into_iter().find_map(|el| {
        let (spec, options) = element_parts(&el)?;
        (package_name(&spec) == name).then(|| {
            let mode = mode_of(options.as_ref());
            (el, Found { key, spec, mode })
        })
    });
    Ok(Some(Located { list, entry: found }))
}

/// The entry for the plugin in `text`, if there is one (for `--doctor`).
pub fn find_entry(text: &str, spec: &str) -> Result<Option<Found>> {
    let root = parse(text)?;
    let Some(obj) = root.object_value() else {
        if root.value().is_none() {
            return Ok(None);
        }
        bail!("the configuration is not a JSON object");
    };
    Ok(locate(&obj, package_name(spec))?.and_then(|l| l.entry.map(|(_, f)| f)))
}

fn new_element(key: &str, spec: &str, mode: Option<Mode>) -> CstInputValue {
    let options = |m: Mode| CstInputValue::Object(vec![("mode".to_string(), m.as_str().into())]);
    match (key, mode) {
        (_, None) | (_, Some(Mode::Local)) => spec.into(),
        ("plugins", Some(m)) => CstInputValue::Object(vec![
            ("package".to_string(), spec.into()),
            ("options".to_string(), options(m)),
        ]),
        (_, Some(m)) => CstInputValue::Array(vec![spec.into(), options(m)]),
    }
}

/// Make sure `text` has an entry for the plugin in the wanted mode. An existing entry keeps its
/// spec and its other options; only its mode changes.
pub fn ensure_entry(text: &str, wanted: &Wanted) -> Result<Edited> {
    let root = parse(text)?;
    if root.value().is_some() && root.object_value().is_none() {
        bail!("the configuration is not a JSON object");
    }
    let obj = root.object_value_or_set();
    let name = package_name(&wanted.spec).to_string();
    match locate(&obj, &name)? {
        None => {
            let key = list_key(&obj);
            obj.append(
                key,
                CstInputValue::Array(vec![new_element(key, &wanted.spec, wanted.mode)]),
            );
        }
        Some(Located { list, entry: None }) => {
            let key = list_key(&obj);
            list.append(new_element(key, &wanted.spec, wanted.mode));
        }
        Some(Located {
            entry: Some((el, found)),
            ..
        }) => match wanted.mode {
            Some(m) if m.as_str() != found.mode => set_mode(el, &found, m)?,
            _ => {
                return Ok(Edited {
                    text: None,
                    entry: found,
                })
            }
        },
    }
    let text = root.to_string();
    let entry = find_entry(&text, &wanted.spec)?
        .ok_or_else(|| anyhow::anyhow!("the added entry is not in the result"))?;
    Ok(Edited {
        text: Some(text),
        entry,
    })
}

/// Change the mode of an existing entry, in whichever form it was written.
fn set_mode(el: CstNode, found: &Found, mode: Mode) -> Result<()> {
    let (spec, options) =
        element_parts(&el).ok_or_else(|| anyhow::anyhow!("unreadable plugin entry"))?;
    match options {
        Some(opts) => match opts.get("mode") {
            Some(prop) => prop.set_value(mode.as_str().into()),
            None => {
                opts.append("mode", mode.as_str().into());
            }
        },
        // A bare spec, or a pair/object without options: write the full form.
        None => {
            let replacement = new_element(found.key, &spec, Some(mode));
            let replaced = match (el.as_string_lit(), el.as_array(), el.as_object()) {
                (Some(s), _, _) => s.replace_with(replacement),
                (_, Some(a), _) => a.replace_with(replacement),
                (_, _, Some(o)) => o.replace_with(replacement),
                _ => None,
            };
            replaced.ok_or_else(|| anyhow::anyhow!("could not replace the plugin entry"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(mode: Option<Mode>) -> Wanted {
        Wanted {
            spec: "@createos/opencode".into(),
            mode,
        }
    }

    fn value_of(text: &str) -> serde_json::Value {
        parse(text).unwrap().to_serde_value().unwrap()
    }

    fn edit(text: &str, mode: Option<Mode>) -> String {
        ensure_entry(text, &wanted(mode))
            .unwrap()
            .text
            .expect("a change")
    }

    #[test]
    fn package_names() {
        assert_eq!(package_name("@createos/opencode"), "@createos/opencode");
        assert_eq!(
            package_name("@createos/opencode@0.1.0"),
            "@createos/opencode"
        );
        assert_eq!(package_name("oh-my-opencode@2.4.3"), "oh-my-opencode");
        assert_eq!(package_name("/abs/path@x"), "/abs/path@x");
        assert_eq!(package_name("file:///p/q"), "file:///p/q");
    }

    #[test]
    fn adds_to_an_existing_list_keeping_comments_and_layout() {
        let text = "{\n  // my model\n  \"model\": \"a/b\", /* trailing */\n\n  \"plugin\": [\n    \"other-plugin\" // keep me\n  ],\n}\n";
        let out = edit(text, Some(Mode::Remote));
        assert!(
            out.contains("// my model")
                && out.contains("/* trailing */")
                && out.contains("// keep me"),
            "{out}"
        );
        assert!(out.starts_with("{\n  // my model\n  \"model\": \"a/b\", /* trailing */\n\n  \"plugin\": [\n    \"other-plugin\""), "{out}");
        let value = value_of(&out);
        assert_eq!(
            value["plugin"],
            serde_json::json!(["other-plugin", ["@createos/opencode", { "mode": "remote" }]])
        );
        assert_eq!(value["model"], "a/b");
    }

    #[test]
    fn adds_the_key_when_missing_and_creates_an_object_in_an_empty_file() {
        let out = edit("{\n  \"model\": \"a/b\"\n}\n", None);
        let value = value_of(&out);
        assert_eq!(value["plugin"], serde_json::json!(["@createos/opencode"]));
        let out = edit("", Some(Mode::Local));
        let value = value_of(&out);
        assert_eq!(
            value,
            serde_json::json!({ "plugin": ["@createos/opencode"] })
        );
    }

    #[test]
    fn an_existing_entry_is_kept_or_only_its_mode_changes() {
        // Already there, any mode wanted: no change at all.
        let text = "{ \"plugin\": [\"@createos/opencode@0.1.0\"] }";
        let edited = ensure_entry(text, &wanted(None)).unwrap();
        assert!(edited.text.is_none());
        assert_eq!(edited.entry.spec, "@createos/opencode@0.1.0");
        assert!(ensure_entry(text, &wanted(Some(Mode::Local)))
            .unwrap()
            .text
            .is_none());
        // Remote wanted: the pinned spec stays, options are added.
        let out = edit(text, Some(Mode::Remote));
        let value = value_of(&out);
        assert_eq!(
            value["plugin"],
            serde_json::json!([["@createos/opencode@0.1.0", { "mode": "remote" }]])
        );
        // Other options survive a mode change.
        let text = "{ \"plugin\": [[\"@createos/opencode\", { \"persist\": false, \"mode\": \"remote\" }]] }";
        let out = edit(text, Some(Mode::Local));
        let value = value_of(&out);
        assert_eq!(
            value["plugin"],
            serde_json::json!([["@createos/opencode", { "persist": false, "mode": "local" }]])
        );
    }

    #[test]
    fn a_v2_file_gets_the_v2_form() {
        let text = "{\n  \"plugins\": [\"x\"]\n}";
        let out = edit(text, Some(Mode::Remote));
        let value = value_of(&out);
        assert_eq!(
            value["plugins"],
            serde_json::json!(["x", { "package": "@createos/opencode", "options": { "mode": "remote" } }])
        );
        assert!(value.get("plugin").is_none());
        let found = find_entry(&out, "@createos/opencode").unwrap().unwrap();
        assert_eq!((found.key, found.mode.as_str()), ("plugins", "remote"));
    }

    #[test]
    fn refuses_what_opencode_would_refuse() {
        for bad in [
            "[1, 2]",
            "{ plugin: [] }",
            "{ 'plugin': [] }",
            "{ \"plugin\": \"x\" }",
            "{ \"a\": 1 \"b\": 2 }",
            "{",
        ] {
            assert!(
                ensure_entry(bad, &wanted(None)).is_err(),
                "{bad} was accepted"
            );
        }
    }
}
