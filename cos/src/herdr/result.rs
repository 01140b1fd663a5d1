//! The machine-readable outcome line every action ends with:
//! `CREATEOS_HERDR_RESULT: {"schemaVersion":1,"action":…,"ok":…,…}`.

use serde_json::{Map, Value};

/// Prefix of the result line.
pub const RESULT_PREFIX: &str = "CREATEOS_HERDR_RESULT: ";
/// Version of the line's schema.
pub const SCHEMA_VERSION: u64 = 1;

/// The outcome of one action, rendered as one line.
#[derive(Clone, Debug, PartialEq)]
pub struct ActionResult {
    action: String,
    ok: bool,
    fields: Map<String, Value>,
}

impl ActionResult {
    /// A success of `action`; add fields with [`ActionResult::with`].
    pub fn ok(action: &str) -> Self {
        ActionResult {
            action: action.to_string(),
            ok: true,
            fields: Map::new(),
        }
    }

    /// A failure of `action` with `error` as its message.
    pub fn failed(action: &str, error: &str) -> Self {
        let mut fields = Map::new();
        fields.insert("error".into(), Value::String(error.to_string()));
        ActionResult {
            action: action.to_string(),
            ok: false,
            fields,
        }
    }

    /// Add (or replace) a field. `schemaVersion`, `action` and `ok` cannot be overridden.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        if !matches!(key, "schemaVersion" | "action" | "ok") {
            self.fields.insert(key.to_string(), value.into());
        }
        self
    }

    /// Whether the action succeeded.
    pub fn is_ok(&self) -> bool {
        self.ok
    }

    /// The action name.
    pub fn action(&self) -> &str {
        &self.action
    }

    /// A field set with [`ActionResult::with`].
    pub fn field(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// The JSON object: `schemaVersion`, `action`, `ok` first, then the other fields.
    pub fn to_json(&self) -> Value {
        let mut doc = Map::new();
        doc.insert("schemaVersion".into(), Value::from(SCHEMA_VERSION));
        doc.insert("action".into(), Value::String(self.action.clone()));
        doc.insert("ok".into(), Value::Bool(self.ok));
        for (k, v) in &self.fields {
            doc.insert(k.clone(), v.clone());
        }
        Value::Object(doc)
    }

    /// The whole line, without a trailing newline. JSON never contains a raw newline, so the
    /// line is always one line.
    pub fn line(&self) -> String {
        // serde_json's map is sorted; write the fixed fields first by hand.
        let mut text = format!(
            "{RESULT_PREFIX}{{\"schemaVersion\":{SCHEMA_VERSION},\"action\":{},\"ok\":{}",
            Value::String(self.action.clone()),
            self.ok
        );
        for (k, v) in &self.fields {
            text.push(',');
            text.push_str(&Value::String(k.clone()).to_string());
            text.push(':');
            text.push_str(&v.to_string());
        }
        text.push('}');
        text
    }
}

/// Find the last result line in `output` and parse its JSON.
pub fn parse_last(output: &str) -> Option<Value> {
    output
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(RESULT_PREFIX))
        .and_then(|j| serde_json::from_str(j).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_has_fixed_fields_first_and_stays_one_line() {
        let r = ActionResult::failed("start", "bad\nthing")
            .with("ok", true)
            .with("box", "hd-x");
        let line = r.line();
        assert!(line.starts_with(
            "CREATEOS_HERDR_RESULT: {\"schemaVersion\":1,\"action\":\"start\",\"ok\":false"
        ));
        assert!(!line.contains('\n'));
        let v = parse_last(&format!("noise\n{line}\n")).unwrap();
        assert_eq!(v["error"], "bad\nthing");
        assert_eq!(v["box"], "hd-x");
    }
}
