//! Checking tool arguments against their JSON Schema (the subset the catalog uses: an object
//! of strings, integers, booleans and string arrays, `required`, `additionalProperties:
//! false`, integer bounds, array lengths, string enums) and reading them typed.

use serde_json::{Map, Value};

use super::ToolError;

/// Arguments of one call, checked against the tool's schema.
#[derive(Debug, Default)]
pub struct Args(Map<String, Value>);

fn bad(msg: String) -> ToolError {
    ToolError::InvalidArgs(msg)
}

impl Args {
    /// Check `raw` against `schema`.
    pub fn check(schema: &Value, raw: Option<Map<String, Value>>) -> Result<Args, ToolError> {
        let raw = raw.unwrap_or_default();
        let props = schema["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        if let Some(extra) = raw.keys().find(|k| !props.contains_key(*k)) {
            let known: Vec<&String> = props.keys().collect();
            return Err(bad(format!(
                "unknown argument {extra:?} (accepted: {known:?})"
            )));
        }
        for req in schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if raw.get(req).is_none_or(Value::is_null) {
                return Err(bad(format!("missing required argument {req:?}")));
            }
        }
        for (key, value) in &raw {
            if !value.is_null() {
                check_value(key, &props[key], value)?;
            }
        }
        Ok(Args(raw))
    }

    fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    /// An optional string.
    pub fn opt_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    /// A required string (presence was checked against the schema).
    pub fn str(&self, key: &str) -> Result<&str, ToolError> {
        self.opt_str(key)
            .ok_or_else(|| bad(format!("missing required argument {key:?}")))
    }

    /// An optional integer.
    pub fn opt_u64(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(Value::as_u64)
    }

    /// A required integer.
    pub fn u64(&self, key: &str) -> Result<u64, ToolError> {
        self.opt_u64(key)
            .ok_or_else(|| bad(format!("missing required argument {key:?}")))
    }

    /// An optional boolean.
    pub fn opt_bool(&self, key: &str) -> Option<bool> {
        self.get(key).and_then(Value::as_bool)
    }

    /// An optional list of strings.
    pub fn strings(&self, key: &str) -> Vec<String> {
        self.get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn check_value(key: &str, schema: &Value, value: &Value) -> Result<(), ToolError> {
    match schema["type"].as_str() {
        Some("string") => {
            let s = value
                .as_str()
                .ok_or_else(|| bad(format!("{key:?} must be a string")))?;
            if s.contains('\0') {
                return Err(bad(format!("{key:?} contains a NUL byte")));
            }
            if let Some(choices) = schema["enum"].as_array() {
                if !choices.iter().any(|c| c == value) {
                    let names: Vec<&str> = choices.iter().filter_map(Value::as_str).collect();
                    return Err(bad(format!("{key:?} must be one of: {}", names.join(", "))));
                }
            }
            if let Some(min) = schema["minLength"].as_u64() {
                if (s.chars().count() as u64) < min {
                    return Err(bad(format!("{key:?} must not be empty")));
                }
            }
        }
        Some("integer") => {
            let n = value
                .as_u64()
                .ok_or_else(|| bad(format!("{key:?} must be a non-negative integer")))?;
            if schema["minimum"].as_u64().is_some_and(|min| n < min)
                || schema["maximum"].as_u64().is_some_and(|max| n > max)
            {
                return Err(bad(format!(
                    "{key:?} = {n} is outside {}..={}",
                    schema["minimum"], schema["maximum"]
                )));
            }
        }
        Some("boolean") => {
            value
                .as_bool()
                .ok_or_else(|| bad(format!("{key:?} must be a boolean")))?;
        }
        Some("array") => {
            let items = value
                .as_array()
                .ok_or_else(|| bad(format!("{key:?} must be an array")))?;
            if schema["minItems"]
                .as_u64()
                .is_some_and(|m| (items.len() as u64) < m)
            {
                return Err(bad(format!(
                    "{key:?} needs at least {} item(s)",
                    schema["minItems"]
                )));
            }
            if schema["maxItems"]
                .as_u64()
                .is_some_and(|m| (items.len() as u64) > m)
            {
                return Err(bad(format!(
                    "{key:?} takes at most {} item(s)",
                    schema["maxItems"]
                )));
            }
            for (i, item) in items.iter().enumerate() {
                check_value(&format!("{key}[{i}]"), &schema["items"], item)?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn enum_errors_list_the_choices_plainly() {
        let schema = json!({"type": "object", "additionalProperties": false, "required": ["op"],
            "properties": {"op": {"type": "string", "enum": ["screen", "click"]}}});
        let err = Args::check(&schema, json!({"op": "scroll"}).as_object().cloned()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid arguments: \"op\" must be one of: screen, click"
        );
    }

    #[test]
    fn checks_the_schema_subset() {
        let schema = json!({"type": "object", "additionalProperties": false, "required": ["a"],
            "properties": {"a": {"type": "string", "minLength": 1}, "n": {"type": "integer", "minimum": 1, "maximum": 5},
                           "l": {"type": "array", "minItems": 1, "items": {"type": "string"}}}});
        let ok = Args::check(
            &schema,
            json!({"a": "x", "n": 3, "l": ["q"]}).as_object().cloned(),
        )
        .unwrap();
        assert_eq!(ok.str("a").unwrap(), "x");
        assert_eq!(ok.opt_u64("n"), Some(3));
        assert_eq!(ok.strings("l"), vec!["q"]);
        for bad in [
            json!({}),
            json!({"a": ""}),
            json!({"a": "x", "z": 1}),
            json!({"a": "x", "n": 9}),
            json!({"a": "x", "l": []}),
            json!({"a": 1}),
        ] {
            assert!(
                Args::check(&schema, bad.as_object().cloned()).is_err(),
                "{bad}"
            );
        }
    }
}
