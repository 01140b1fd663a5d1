//! Built-in exclusions: version-control metadata and the credential deny-list.
//!
//! The deny-list stops well-known credential *shapes* (names and places); it does not look
//! inside files, so a secret in an ordinary source file still travels. Names are compared
//! ASCII case-insensitively so `.ENV` on a case-insensitive file system is caught as well.

use super::relpath::{basename, components, eq_ignore_case};

/// Directory names that hold version-control metadata (Git, Mercurial, Subversion, Jujutsu);
/// never uploaded, and never written from a sandbox (see [`crate::transfer::protect`]).
pub(crate) const VCS_DIRS: [&str; 4] = [".git", ".hg", ".svn", ".jj"];

/// Directories whose whole content is credentials, matched at any depth (`.createos` holds
/// this client's own `.token` and `.oauth`).
const DENIED_DIRS: [&str; 6] = [".ssh", ".aws", ".gnupg", ".kube", ".terraform", ".createos"];

/// File names that are credentials wherever they appear.
const DENIED_NAMES: [&str; 11] = [
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".envrc",
    ".git-credentials",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "credentials",
    "credentials.json",
];

/// Extensions of key stores, certificates with keys, and Terraform state.
const DENIED_SUFFIXES: [&str; 8] = [
    ".pem",
    ".key",
    ".p12",
    ".pfx",
    ".keystore",
    ".jks",
    ".tfstate",
    ".tfstate.backup",
];

/// `.env.*` variants that are templates, not secrets.
const ENV_TEMPLATES: [&str; 3] = [".env.example", ".env.sample", ".env.template"];

/// True when any component of `name` (directory or the entry itself) is VCS metadata. The
/// leaf counts too: a submodule or linked worktree has a `.git` *file*.
pub(crate) fn is_vcs(name: &[u8]) -> bool {
    components(name).any(|c| VCS_DIRS.iter().any(|v| eq_ignore_case(c, v.as_bytes())))
}

/// The deny-list rule that covers everything below the directory `dir`, if one does.
pub(crate) fn denied_dir(dir: &[u8]) -> Option<&'static str> {
    denied_dirs(dir)
}

/// The rule covering the `/`-separated directories `dirs` (empty: none), checked without
/// allocating: this runs once for every listed name.
fn denied_dirs(dirs: &[u8]) -> Option<&'static str> {
    if dirs.is_empty() {
        return None;
    }
    for dir in components(dirs) {
        if let Some(rule) = DENIED_DIRS
            .iter()
            .find(|d| eq_ignore_case(dir, d.as_bytes()))
        {
            return Some(dir_rule(rule));
        }
    }
    let mut previous: Option<&[u8]> = None;
    for dir in components(dirs) {
        if previous.is_some_and(|p| eq_ignore_case(p, b".config")) && eq_ignore_case(dir, b"gcloud")
        {
            return Some(".config/gcloud/");
        }
        previous = Some(dir);
    }
    None
}

/// The deny-list rule `name` falls under, spelled as in the documentation (`.ssh/`, `*.pem`).
pub(crate) fn denied_by(name: &[u8]) -> Option<&'static str> {
    let (dirs, leaf) = match name.iter().rposition(|b| *b == b'/') {
        Some(i) => (&name[..i], &name[i + 1..]),
        None => (&name[..0], name),
    };

    if let Some(rule) = denied_dirs(dirs) {
        return Some(rule);
    }
    if !dirs.is_empty()
        && eq_ignore_case(basename(dirs), b".docker")
        && eq_ignore_case(leaf, b"config.json")
    {
        return Some(".docker/config.json");
    }

    let leaf = basename(leaf);
    if eq_ignore_case(leaf, b".env") {
        return Some(".env");
    }
    if leaf.len() > 5
        && eq_ignore_case(&leaf[..5], b".env.")
        && !ENV_TEMPLATES
            .iter()
            .any(|t| eq_ignore_case(leaf, t.as_bytes()))
    {
        return Some(".env.*");
    }
    if let Some(rule) = DENIED_NAMES
        .iter()
        .find(|n| eq_ignore_case(leaf, n.as_bytes()))
    {
        return Some(rule);
    }
    // the longest suffix first, so `x.tfstate.backup` reports its own rule
    DENIED_SUFFIXES
        .iter()
        .rev()
        .find(|s| {
            leaf.len() > s.len() && eq_ignore_case(&leaf[leaf.len() - s.len()..], s.as_bytes())
        })
        .map(|s| suffix_rule(s))
}

fn dir_rule(dir: &str) -> &'static str {
    match dir {
        ".ssh" => ".ssh/",
        ".aws" => ".aws/",
        ".gnupg" => ".gnupg/",
        ".kube" => ".kube/",
        ".createos" => ".createos/",
        _ => ".terraform/",
    }
}

fn suffix_rule(suffix: &str) -> &'static str {
    match suffix {
        ".pem" => "*.pem",
        ".key" => "*.key",
        ".p12" => "*.p12",
        ".pfx" => "*.pfx",
        ".keystore" => "*.keystore",
        ".jks" => "*.jks",
        ".tfstate" => "*.tfstate",
        _ => "*.tfstate.backup",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_shapes_are_denied() {
        for (path, rule) in [
            (".env", ".env"),
            ("sub/.env.local", ".env.*"),
            (".ssh/id_ed25519", ".ssh/"),
            ("deep/.ssh/known_hosts", ".ssh/"),
            (".aws/credentials", ".aws/"),
            (".kube/config", ".kube/"),
            (".createos/.token", ".createos/"),
            ("home/.createos/.oauth", ".createos/"),
            (".gnupg/pubring.kbx", ".gnupg/"),
            (
                ".config/gcloud/application_default_credentials.json",
                ".config/gcloud/",
            ),
            (".docker/config.json", ".docker/config.json"),
            (".git-credentials", ".git-credentials"),
            (".envrc", ".envrc"),
            (".pypirc", ".pypirc"),
            (".npmrc", ".npmrc"),
            (".netrc", ".netrc"),
            ("keys/id_rsa", "id_rsa"),
            ("certs/server.pem", "*.pem"),
            ("tls/server.KEY", "*.key"),
            ("a.p12", "*.p12"),
            ("a.pfx", "*.pfx"),
            ("release.keystore", "*.keystore"),
            ("x.jks", "*.jks"),
            ("state.tfstate", "*.tfstate"),
            ("state.tfstate.backup", "*.tfstate.backup"),
            ("infra/.terraform/providers/x", ".terraform/"),
            ("conf/credentials", "credentials"),
            ("credentials.json", "credentials.json"),
            (".ENV", ".env"),
        ] {
            assert_eq!(denied_by(path.as_bytes()), Some(rule), "{path}");
        }
    }

    #[test]
    fn ordinary_and_template_files_pass() {
        for path in [
            ".env.example",
            "sub/.env.sample",
            ".env.template",
            "src/env.rs",
            ".environment",
            "docs/ssh.md",
            ".ssh",
            ".docker/daemon.json",
            "config.json",
            ".config/nvim/init.lua",
            "src/credentials/mod.rs",
            "keys.pem.txt",
            ".pem",
            "id_rsa.pub",
        ] {
            assert_eq!(denied_by(path.as_bytes()), None, "{path}");
        }
    }

    #[test]
    fn credential_directories_are_recognised_as_directories() {
        assert_eq!(denied_dir(b".ssh"), Some(".ssh/"));
        assert_eq!(denied_dir(b"home/.aws/sso"), Some(".aws/"));
        assert_eq!(denied_dir(b".config/gcloud"), Some(".config/gcloud/"));
        assert_eq!(denied_dir(b".config"), None);
        assert_eq!(
            denied_dir(b".docker"),
            None,
            "only .docker/config.json is denied"
        );
    }

    #[test]
    fn vcs_metadata_is_recognised() {
        assert!(is_vcs(b".git/config"));
        assert!(is_vcs(b"vendor/lib/.git"));
        assert!(is_vcs(b"a/.hg/store/x"));
        assert!(is_vcs(b".svn/entries"));
        assert!(is_vcs(b"sub/.jj/repo/store"));
        assert!(!is_vcs(b".gitignore"));
        assert!(!is_vcs(b".github/workflows/ci.yml"));
    }
}
