//! The agents a pane can run, how each is installed in the sandbox, and how Herdr knows it.

/// Directories the installers put binaries in; searched after an install.
pub const AGENT_PATH_DIRS: &str =
    "$HOME/.local/bin:$HOME/.opencode/bin:$HOME/.cursor/bin:$HOME/.pi/bin:$HOME/.codex/bin:$HOME/.bun/bin";

/// One row of the agent table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Agent {
    /// The configuration key.
    pub key: &'static str,
    /// Human name, shown in pane titles.
    pub title: &'static str,
    /// `HERDR_AGENT` label for the pane (`None`: a plain shell, no label).
    pub herdr_label: Option<&'static str>,
    /// The binary to resolve after installing.
    pub binary: &'static str,
    /// The official installer, run with `bash -lc` in the sandbox (`None`: nothing to install).
    pub installer: Option<&'static str>,
}

/// Every supported agent.
pub const AGENTS: &[Agent] = &[
    Agent {
        key: "claude-code",
        title: "Claude Code",
        herdr_label: Some("claude"),
        binary: "claude",
        installer: Some("curl -fsSL https://claude.ai/install.sh | bash"),
    },
    Agent {
        key: "codex",
        title: "Codex",
        herdr_label: Some("codex"),
        binary: "codex",
        installer: Some(
            "curl -fsSL https://chatgpt.com/codex/install.sh | CODEX_NON_INTERACTIVE=1 sh",
        ),
    },
    Agent {
        key: "opencode",
        title: "OpenCode",
        herdr_label: Some("opencode"),
        binary: "opencode",
        installer: Some("curl -fsSL https://opencode.ai/install | bash"),
    },
    Agent {
        key: "pi",
        title: "Pi",
        herdr_label: Some("pi"),
        binary: "pi",
        installer: Some("curl -fsSL https://pi.dev/install.sh | sh"),
    },
    Agent {
        key: "cursor",
        title: "Cursor",
        herdr_label: Some("cursor"),
        binary: "cursor-agent",
        installer: Some("curl https://cursor.com/install -fsS | bash"),
    },
    Agent {
        key: "shell",
        title: "Shell",
        herdr_label: None,
        binary: "bash",
        installer: None,
    },
];

impl Agent {
    /// The agent with configuration key `key`.
    pub fn from_key(key: &str) -> Option<Agent> {
        AGENTS.iter().copied().find(|a| a.key == key)
    }

    /// The error text for an unknown key.
    pub fn unknown_message(key: &str) -> String {
        let keys: Vec<&str> = AGENTS.iter().map(|a| a.key).collect();
        format!("{key:?} is not an agent; use one of {}", keys.join(", "))
    }

    /// The guest script that installs the agent (if it has an installer) and prints the
    /// absolute path of its binary; it fails when the binary cannot be found afterwards.
    pub fn install_script(&self) -> String {
        let install = match self.installer {
            Some(cmd) => format!("set -o pipefail; {cmd} || exit $?\n"),
            None => String::new(),
        };
        format!(
            "{install}export PATH=\"{AGENT_PATH_DIRS}:$PATH\"\nbin=$(command -v {bin}) || {{ echo '{bin} was not found after the install' >&2; exit 127; }}\nprintf '%s\\n' \"$bin\"\n",
            bin = self.binary
        )
    }

    /// Arguments after the binary when the agent starts (a login shell for `shell`).
    pub fn args(&self) -> Vec<String> {
        if self.installer.is_none() {
            vec!["-l".to_string()]
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_the_six_agents() {
        let keys: Vec<&str> = AGENTS.iter().map(|a| a.key).collect();
        assert_eq!(
            keys,
            ["claude-code", "codex", "opencode", "pi", "cursor", "shell"]
        );
        assert_eq!(Agent::from_key("cursor").unwrap().binary, "cursor-agent");
        assert!(Agent::from_key("gemini").is_none());
        assert!(Agent::from_key("shell")
            .unwrap()
            .install_script()
            .starts_with("export PATH"));
        assert!(Agent::unknown_message("x").contains("claude-code, codex"));
    }
}
