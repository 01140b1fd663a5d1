//! `path_filter`: which listed names a snapshot archives (unsafe-name checks, submodules, user
//! excludes, the credential deny-list, VCS metadata).
//!
//! Input: `[counts][line\n…]` — the low two bits of `counts` say how many lines are user
//! exclude patterns (read as lossy UTF-8), bit 2 whether the next line is a submodule path; the
//! remaining lines (up to 16) are names as Git or the walk would list them.
//!
//! Properties:
//! - a name that would be archived is non-empty, relative, free of NUL, `..`, `.` and empty
//!   components, and (on Unix) turns into a path of exactly that many normal components;
//! - a credential shape or VCS metadata (an independent reading of the documented deny-list) is
//!   never archived;
//! - everything below a directory the walk would prune is also refused as a file, so walking
//!   and `git ls-files` agree;
//! - a literal exclude removes that path (unless dir-only) and everything below it; a submodule
//!   path is removed with everything below it;
//! - patterns that are negations or not paths inside the project are refused as `excludes`.

use super::show;
use crate::error::Error;
use crate::snapshot::{classify_names, NameVerdict};

const MAX_NAMES: usize = 16;

const VCS_DIRS: [&str; 4] = [".git", ".hg", ".svn", ".jj"];
const DENIED_DIRS: [&str; 6] = [".ssh", ".aws", ".gnupg", ".kube", ".terraform", ".createos"];
const DENIED_NAMES: [&str; 12] = [
    ".env",
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
const ENV_TEMPLATES: [&str; 3] = [".env.example", ".env.sample", ".env.template"];

/// Check the `path_filter` properties on one input (panics on a violation).
pub fn path_filter(data: &[u8]) {
    let Some((&counts, rest)) = data.split_first() else {
        return;
    };
    let mut lines = rest.split(|b| *b == b'\n');
    let patterns: Vec<String> = lines
        .by_ref()
        .take(usize::from(counts & 3))
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    let gitlinks: Vec<Vec<u8>> = lines
        .by_ref()
        .take(usize::from((counts >> 2) & 1))
        .map(<[u8]>::to_vec)
        .collect();
    let names: Vec<Vec<u8>> = lines.take(MAX_NAMES).map(<[u8]>::to_vec).collect();

    // What to ask about: the names, every directory above them, and the paths that the
    // literal excludes and submodules must remove.
    let literals: Vec<(Vec<u8>, bool)> =
        patterns.iter().filter_map(|p| literal_exclude(p)).collect();
    let links: Vec<Vec<u8>> = gitlinks.iter().filter(|g| safe(g)).cloned().collect();
    let mut queries: Vec<Vec<u8>> = Vec::new();
    let paths = literals.iter().map(|(path, _)| path).chain(&links);
    for path in names
        .iter()
        .cloned()
        .chain(paths.flat_map(|p| [p.clone(), below(p)]))
    {
        queries.extend(ancestors(&path).map(<[u8]>::to_vec));
        queries.push(path);
    }
    let refs: Vec<&[u8]> = queries.iter().map(Vec::as_slice).collect();
    let context = || {
        format!(
            "patterns {patterns:?}, submodules {gitlinks:?}, data {}",
            show(data)
        )
    };

    let answers = match classify_names(&patterns, &gitlinks, &refs) {
        Ok(answers) => answers,
        Err(Error::InvalidInput { field, .. }) if field == "excludes" => return,
        Err(other) => panic!("bad patterns gave {other:?} ({})", context()),
    };
    if let Some(bad) = patterns.iter().find(|p| must_refuse(p)) {
        panic!("the exclude pattern {bad:?} was accepted ({})", context());
    }
    let reason = |path: &[u8]| -> &NameVerdict {
        let i = queries
            .iter()
            .position(|q| q == path)
            .expect("every checked path was queried");
        &answers[i]
    };

    for (query, NameVerdict { as_file: file, .. }) in queries.iter().zip(&answers) {
        let _ = file.as_ref().map(ToString::to_string);
        if file.is_none() {
            assert!(
                safe(query),
                "the unsafe name {} would be archived ({})",
                show(query),
                context()
            );
            assert_normal_path(query, &context);
            assert!(
                !denied(query),
                "the credential or VCS path {} would be archived ({})",
                show(query),
                context()
            );
            if let Some(dir) = ancestors(query).find(|d| reason(d).as_dir.is_some()) {
                panic!(
                    "{} would be archived although a walk prunes {} ({:?}) ({})",
                    show(query),
                    show(dir),
                    reason(dir).as_dir,
                    context()
                );
            }
        }
    }
    for (path, dir_only) in &literals {
        assert!(
            *dir_only || reason(path).as_file.is_some(),
            "the excluded path {} would be archived ({})",
            show(path),
            context()
        );
        assert!(
            reason(&below(path)).as_file.is_some(),
            "a file below the excluded {} would be archived ({})",
            show(path),
            context()
        );
    }
    for link in &links {
        assert!(
            reason(link).as_file.is_some(),
            "the submodule {} would be archived ({})",
            show(link),
            context()
        );
        assert!(
            reason(&below(link)).as_file.is_some(),
            "a file in submodule {} would be archived ({})",
            show(link),
            context()
        );
    }
}

/// Every proper ancestor of a `/`-separated name.
fn ancestors(name: &[u8]) -> impl Iterator<Item = &[u8]> {
    name.iter()
        .enumerate()
        .filter(|(_, b)| **b == b'/')
        .map(move |(i, _)| &name[..i])
}

fn below(path: &[u8]) -> Vec<u8> {
    let mut child = path.to_vec();
    child.extend_from_slice(b"/child");
    child
}

/// A name that can be extracted below the project directory and nowhere else.
fn safe(name: &[u8]) -> bool {
    !name.is_empty()
        && !name.contains(&0)
        && !name.starts_with(b"/")
        && name
            .split(|b| *b == b'/')
            .all(|c| !matches!(c, b"" | b"." | b".."))
}

#[cfg(unix)]
fn assert_normal_path(name: &[u8], context: &dyn Fn() -> String) {
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Component, Path};
    let path = Path::new(std::ffi::OsStr::from_bytes(name));
    let parts: Vec<Component<'_>> = path.components().collect();
    let expected = name.split(|b| *b == b'/').count();
    assert!(
        parts.len() == expected && parts.iter().all(|c| matches!(c, Component::Normal(_))),
        "the archived name {} becomes the path {parts:?} ({})",
        show(name),
        context()
    );
}

#[cfg(not(unix))]
fn assert_normal_path(_name: &[u8], _context: &dyn Fn() -> String) {}

/// The documented deny-list and VCS metadata, read independently of the implementation.
fn denied(name: &[u8]) -> bool {
    let parts: Vec<&[u8]> = name.split(|b| *b == b'/').collect();
    let Some((leaf, dirs)) = parts.split_last() else {
        return false;
    };
    let is =
        |part: &[u8], list: &[&str]| list.iter().any(|l| part.eq_ignore_ascii_case(l.as_bytes()));
    parts.iter().any(|p| is(p, &VCS_DIRS))
        || dirs.iter().any(|d| is(d, &DENIED_DIRS))
        || dirs
            .windows(2)
            .any(|w| w[0].eq_ignore_ascii_case(b".config") && w[1].eq_ignore_ascii_case(b"gcloud"))
        || (dirs
            .last()
            .is_some_and(|d| d.eq_ignore_ascii_case(b".docker"))
            && leaf.eq_ignore_ascii_case(b"config.json"))
        || is(leaf, &DENIED_NAMES)
        || (leaf.len() > 5 && leaf[..5].eq_ignore_ascii_case(b".env.") && !is(leaf, &ENV_TEMPLATES))
        || DENIED_SUFFIXES.iter().any(|s| {
            leaf.len() > s.len() && leaf[leaf.len() - s.len()..].eq_ignore_ascii_case(s.as_bytes())
        })
}

/// The path part of a pattern: `./` and `/` prefixes and `/` suffixes dropped, with whether it
/// is restricted to directories.
fn pattern_body(pattern: &str) -> (&str, bool) {
    let mut body = pattern;
    while let Some(rest) = body.strip_prefix("./") {
        body = rest;
    }
    let body = body.trim_start_matches('/');
    let trimmed = body.trim_end_matches('/');
    (trimmed, trimmed.len() != body.len())
}

/// A pattern the documented forms do not allow.
fn must_refuse(pattern: &str) -> bool {
    let (body, _) = pattern_body(pattern);
    pattern.starts_with('!') || !safe(body.as_bytes())
}

/// For a pattern without glob syntax: the literal path it names and whether it is dir-only.
fn literal_exclude(pattern: &str) -> Option<(Vec<u8>, bool)> {
    let (body, dir_only) = pattern_body(pattern);
    let glob = body.contains(['*', '?', '[', '{', '\\']);
    (!glob && !must_refuse(pattern)).then(|| (body.as_bytes().to_vec(), dir_only))
}
