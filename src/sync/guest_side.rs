//! The guest side of a sync: its manifest (through the helper, over the remote's channel) and
//! the SHA-256 of chosen files (`sha256sum` over just those, so an incremental sync never
//! hashes the whole tree).

use std::collections::{BTreeMap, BTreeSet};

use super::state::Meta;
use crate::error::Result;
use crate::guest::{FileType, Manifest, ManifestOptions, PathMap};
use crate::transfer::Remote;

/// Hash the NUL-separated names on stdin, relative to `$1` (missing ones are skipped); exit
/// 127 when there is no `sha256sum`.
const HASH_LISTED: &str = r#"cd -- "$1" || exit 1
xargs -0 sha256sum -- 2>/dev/null
[ $? -eq 127 ] && exit 127
exit 0"#;

/// Files and symlinks of the guest directory, and the paths left alone because their names
/// (or link targets) are not UTF-8.
pub(super) struct GuestFiles {
    pub files: Vec<(String, Meta)>,
    pub skipped: Vec<String>,
}

/// The guest manifest of `dir`, VCS metadata left out; a missing directory is empty (the
/// first archive sent creates it).
pub(super) async fn list(remote: &dyn Remote, dir: &str) -> Result<GuestFiles> {
    let manifest = match manifest(remote, dir, false).await {
        Ok(manifest) => manifest,
        Err(err) if err.guest().is_some_and(|g| g.is_not_found()) => {
            return Ok(GuestFiles {
                files: Vec::new(),
                skipped: Vec::new(),
            })
        }
        Err(err) => return Err(err),
    };
    let mut out = GuestFiles {
        files: Vec::with_capacity(manifest.entries.len()),
        skipped: Vec::new(),
    };
    for entry in manifest.entries {
        if entry.path_b64.is_some() || entry.target_b64.is_some() {
            out.skipped.push(entry.path);
            continue;
        }
        let link = match entry.kind {
            FileType::File => None,
            FileType::Symlink => Some(entry.target.clone().unwrap_or_default()),
            _ => continue,
        };
        let mtime_ns = if entry.mtime_ns != 0 {
            entry.mtime_ns
        } else {
            (entry.mtime * 1e9) as i64
        };
        let size = if link.is_some() { 0 } else { entry.size };
        out.files.push((
            entry.path,
            Meta {
                size,
                mtime_ns,
                link,
            },
        ));
    }
    Ok(out)
}

async fn manifest(remote: &dyn Remote, dir: &str, sha256: bool) -> Result<Manifest> {
    let guest = remote.guest(PathMap::new(dir)?);
    let mut options = ManifestOptions::default()
        .path(dir.to_string())
        .sha256(sha256);
    for vcs in [".git", ".hg", ".svn"] {
        options = options.exclude(vcs);
    }
    guest.manifest(options).await
}

/// SHA-256 (lowercase hex) of `paths` under `dir`; a path that is gone is simply absent.
/// Uses `sha256sum` on just those files; a guest without it gets the hashing manifest.
pub(super) async fn hashes(
    remote: &dyn Remote,
    dir: &str,
    paths: &[String],
) -> Result<BTreeMap<String, String>> {
    let mut list = Vec::new();
    for path in paths {
        list.extend_from_slice(path.as_bytes());
        list.push(0);
    }
    let out = remote
        .run_sh(HASH_LISTED, vec![dir.to_string()], list)
        .await?;
    let wanted: BTreeSet<&String> = paths.iter().collect();
    if out.success() {
        return Ok(parse_sha256sum(&out.stdout)
            .into_iter()
            .filter(|(p, _)| wanted.contains(p))
            .collect());
    }
    if out.exit_code != 127 {
        return Err(out.failure("hashing files"));
    }
    tracing::debug!("sha256sum is not available in the guest; hashing through the manifest");
    Ok(manifest(remote, dir, true)
        .await?
        .entries
        .into_iter()
        .filter(|e| wanted.contains(&e.path))
        .filter_map(|e| Some((e.path, e.sha256?.to_ascii_lowercase())))
        .collect())
}

/// `sha256sum` lines: `<hex>  <name>`, or `\<hex>  <escaped name>` when the name holds a
/// backslash or newline (`\\` and `\n` escapes).
fn parse_sha256sum(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let (escaped, line) = match line.strip_prefix('\\') {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        let Some((hash, name)) = line.split_once(' ') else {
            continue;
        };
        // binary mode marks the name with `*`, text mode with a space
        let name = name
            .strip_prefix(' ')
            .or_else(|| name.strip_prefix('*'))
            .unwrap_or(name);
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let name = if escaped {
            unescape(name)
        } else {
            name.to_string()
        };
        out.insert(name, hash.to_ascii_lowercase());
    }
    out
}

fn unescape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256sum_output_is_parsed() {
        let a = "a".repeat(64);
        let b = "B".repeat(64);
        let text = format!(
            "{a}  plain name.txt\n\\{b}  back\\\\slash\\nnewline\nnot a line\n{a} *binary\n"
        );
        let parsed = parse_sha256sum(&text);
        assert_eq!(parsed.get("plain name.txt"), Some(&a));
        assert_eq!(parsed.get("back\\slash\nnewline"), Some(&"b".repeat(64)));
        assert_eq!(parsed.get("binary"), Some(&a));
        assert_eq!(parsed.len(), 3);
    }
}
