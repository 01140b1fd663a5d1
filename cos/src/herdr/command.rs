//! Command lines typed into a pane with `herdr pane run` (a shell reads them, so every word is
//! single-quoted), and the provisioning spec that travels inside one as base64 JSON.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::error::{HerdrError, HerdrResult};

/// Words → one quoted line for `herdr pane run` ([`createos_sandbox::shell::typed_line`]); a word with a
/// control character (a newline would end the typed line early) is refused.
pub fn sh_line<S: AsRef<str>>(words: &[S]) -> HerdrResult<String> {
    createos_sandbox::shell::typed_line(words)
        .map_err(|e| HerdrError::invalid("command word", e.to_string()))
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
        serde_json::from_slice(&bytes)
            .map_err(|e| HerdrError::invalid("provision spec", e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_lines() {
        assert_eq!(
            sh_line(&["/usr/bin/cos", "a b", ""]).unwrap(),
            "/usr/bin/cos 'a b' ''"
        );
        assert!(sh_line(&["cos", "a\nb"])
            .unwrap_err()
            .to_string()
            .contains("control character"));
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
        assert!(text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert_eq!(ProvisionSpec::decode(&text).unwrap(), spec);
        assert!(ProvisionSpec::decode("!!").is_err());
    }
}
