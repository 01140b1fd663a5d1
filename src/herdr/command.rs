//! Command lines typed into a pane with `herdr pane run` (a shell reads them, so every word is
//! single-quoted), and the provisioning spec that travels inside one as base64 JSON.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::error::{HerdrError, HerdrResult};

/// Quote `word` for a POSIX shell. Control characters (a newline would end the typed line
/// early) are refused.
pub fn sh_quote(word: &str) -> HerdrResult<String> {
    if let Some(c) = word.chars().find(|c| c.is_control()) {
        return Err(HerdrError::invalid("command word", format!("{word:?} contains the control character {c:?}")));
    }
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "/._-=:@+,".contains(c)) {
        return Ok(word.to_string());
    }
    Ok(format!("'{}'", word.replace('\'', r#"'\''"#)))
}

/// Words → one quoted line.
pub fn sh_line<S: AsRef<str>>(words: &[S]) -> HerdrResult<String> {
    Ok(words.iter().map(|w| sh_quote(w.as_ref())).collect::<HerdrResult<Vec<_>>>()?.join(" "))
}

/// What `start` hands to `provision` in the new pane.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProvisionSpec {
    /// The pane `start` was invoked from (its reservation is released at the end).
    pub source_pane: String,
    /// The pane the agent runs in.
    pub pane: String,
    /// Sandbox name.
    #[serde(rename = "box")]
    pub box_name: String,
    /// Local Git root to upload.
    pub local: String,
    /// Agent key.
    pub agent: String,
    /// Shape.
    pub shape: String,
    /// Base image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<String>,
    /// Auto-pause after this many idle seconds.
    pub auto_pause_secs: u32,
    /// Worktree directory in the sandbox.
    pub remote_root: String,
    /// Egress allow-list.
    #[serde(default)]
    pub egress: Vec<String>,
    /// Upload excludes.
    #[serde(default)]
    pub excludes: Vec<String>,
}

impl ProvisionSpec {
    /// URL-safe base64 of the JSON (one shell word, nothing to quote).
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).expect("the spec serializes");
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    /// Inverse of [`ProvisionSpec::encode`].
    pub fn decode(text: &str) -> HerdrResult<ProvisionSpec> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text.trim())
            .map_err(|e| HerdrError::invalid("provision spec", format!("is not base64: {e}")))?;
        serde_json::from_slice(&bytes).map_err(|e| HerdrError::invalid("provision spec", e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(sh_quote("/usr/bin/cos").unwrap(), "/usr/bin/cos");
        assert_eq!(sh_quote("a b").unwrap(), "'a b'");
        assert_eq!(sh_quote("it's").unwrap(), r#"'it'\''s'"#);
        assert_eq!(sh_quote("").unwrap(), "''");
        assert!(sh_quote("a\nb").is_err());
        assert_eq!(sh_line(&["x", "$(y)"]).unwrap(), "x '$(y)'");
    }

    #[test]
    fn spec_round_trip() {
        let spec = ProvisionSpec {
            source_pane: "w:1".into(),
            pane: "w:2".into(),
            box_name: "hd-a-123456".into(),
            local: "/src/a b".into(),
            agent: "shell".into(),
            shape: "s".into(),
            rootfs: None,
            auto_pause_secs: 1800,
            remote_root: "/workspace".into(),
            egress: vec![],
            excludes: vec!["*.mp4".into()],
        };
        let text = spec.encode();
        assert!(text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert_eq!(ProvisionSpec::decode(&text).unwrap(), spec);
        assert!(ProvisionSpec::decode("!!").is_err());
    }
}
