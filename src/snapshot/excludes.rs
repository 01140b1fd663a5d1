//! User excludes: the patterns a user passes to keep paths out of a snapshot.
//!
//! Forms (all relative to the project directory):
//! - `path/to/thing` — that exact path; when it is a directory, everything below it;
//! - `dir/` — everything below the directory `dir`;
//! - `*.ext` or any glob without a `/` — matched against every name on the path (the file's
//!   own name and each directory above it), at any depth;
//! - a glob with a `/` (`docs/**/*.png`, `/build*`) — matched against the whole relative path
//!   and each of its parent directories; `*` does not cross `/`, `**` does.
//!
//! A leading `/` anchors a pattern at the project root (it is implied whenever the pattern has a
//! `/`), a leading `./` is dropped, and a trailing `/` restricts the match to directories.
//! Negation (`!pattern`) is refused: excludes only ever remove paths.

use globset::{GlobBuilder, GlobMatcher};

use super::relpath::{ancestors, basename, to_path, unsafe_name};
use crate::error::Error;

const FIELD: &str = "excludes";

/// The parsed user excludes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Excludes {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
struct Rule {
    /// The pattern exactly as the user wrote it (reported back by `--explain`).
    pattern: String,
    /// Only directories above the entry can match, never the entry itself.
    dir_only: bool,
    matcher: Matcher,
}

#[derive(Debug, Clone)]
enum Matcher {
    /// A literal relative path.
    Literal(Vec<u8>),
    /// A glob matched against single names.
    Name(GlobMatcher),
    /// A glob matched against root-relative paths.
    Path(GlobMatcher),
}

impl Excludes {
    /// Parse `patterns`; a malformed one is an [`Error::InvalidInput`] naming it.
    pub(crate) fn parse(patterns: &[String]) -> Result<Self, Error> {
        let rules = patterns
            .iter()
            .map(|p| Rule::parse(p))
            .collect::<Result<_, _>>()?;
        Ok(Excludes { rules })
    }

    /// The first pattern that excludes `name` (a safe relative path), if any.
    pub(crate) fn matching(&self, name: &[u8]) -> Option<&str> {
        self.rules
            .iter()
            .find(|r| r.matches(name))
            .map(|r| r.pattern.as_str())
    }

    /// The first pattern that excludes everything below the directory `dir`, if any.
    pub(crate) fn covering_dir(&self, dir: &[u8]) -> Option<&str> {
        self.rules
            .iter()
            .find(|r| r.covers_dir(dir))
            .map(|r| r.pattern.as_str())
    }
}

impl Rule {
    fn parse(pattern: &str) -> Result<Self, Error> {
        let refuse = |why: &str| Error::invalid(FIELD, format!("pattern {pattern:?}: {why}"));
        if pattern.starts_with('!') {
            return Err(refuse(
                "negation is not supported; excludes can only remove paths",
            ));
        }
        let mut body = pattern;
        while let Some(rest) = body.strip_prefix("./") {
            body = rest;
        }
        let anchored = body.starts_with('/');
        body = body.trim_start_matches('/');
        let dir_only = body.ends_with('/');
        body = body.trim_end_matches('/');
        if body.is_empty() {
            return Err(refuse("the pattern is empty (it would exclude everything)"));
        }
        if let Some(why) = unsafe_name(body.as_bytes()) {
            return Err(refuse(&format!("not a path inside the project ({why})")));
        }

        let has_glob = body.contains(['*', '?', '[', '{']) || body.contains('\\');
        let matcher = if !has_glob {
            Matcher::Literal(body.as_bytes().to_vec())
        } else {
            let glob = GlobBuilder::new(body)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| refuse(&format!("invalid glob: {e}")))?
                .compile_matcher();
            if anchored || body.contains('/') {
                Matcher::Path(glob)
            } else {
                Matcher::Name(glob)
            }
        };
        Ok(Rule {
            pattern: pattern.to_string(),
            dir_only,
            matcher,
        })
    }

    fn matches(&self, name: &[u8]) -> bool {
        let parent = name.iter().rposition(|b| *b == b'/').map(|i| &name[..i]);
        parent.is_some_and(|p| self.covers_dir(p)) || (!self.dir_only && self.matches_path(name))
    }

    /// True when the pattern matches `dir` or one of its parents, so everything below is out.
    fn covers_dir(&self, dir: &[u8]) -> bool {
        ancestors(dir).chain([dir]).any(|p| self.matches_path(p))
    }

    /// The pattern against one path (a literal or path glob) or its last name (a name glob).
    fn matches_path(&self, path: &[u8]) -> bool {
        match &self.matcher {
            Matcher::Literal(literal) => path == literal.as_slice(),
            Matcher::Path(glob) => glob.is_match(to_path(path)),
            Matcher::Name(glob) => glob.is_match(to_path(basename(path))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn excludes(patterns: &[&str]) -> Excludes {
        Excludes::parse(&patterns.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .expect("valid patterns")
    }

    #[test]
    fn exact_paths_cover_files_and_directories() {
        let ex = excludes(&["fixtures/data.bin", "vendor"]);
        assert_eq!(ex.matching(b"fixtures/data.bin"), Some("fixtures/data.bin"));
        assert_eq!(ex.matching(b"fixtures/data.bin2"), None);
        assert_eq!(ex.matching(b"vendor/lib/a.c"), Some("vendor"));
        assert_eq!(ex.matching(b"vendor"), Some("vendor"));
        assert_eq!(
            ex.matching(b"src/vendor/a.c"),
            None,
            "literal paths are anchored"
        );
    }

    #[test]
    fn dir_prefix_matches_only_below_the_directory() {
        let ex = excludes(&["fixtures/"]);
        assert_eq!(ex.matching(b"fixtures/a.bin"), Some("fixtures/"));
        assert_eq!(
            ex.matching(b"fixtures"),
            None,
            "a file named like the dir is not below it"
        );
        assert_eq!(ex.matching(b"fixturesX/a"), None);
    }

    #[test]
    fn extension_and_name_globs_match_at_any_depth() {
        let ex = excludes(&["*.mp4", "node_mod*/"]);
        assert_eq!(ex.matching(b"big.mp4"), Some("*.mp4"));
        assert_eq!(ex.matching(b"media/clips/big.mp4"), Some("*.mp4"));
        assert_eq!(ex.matching(b"big.mp4.txt"), None);
        assert_eq!(
            ex.matching(b"web/node_modules/x/index.js"),
            Some("node_mod*/")
        );
        assert_eq!(
            ex.matching(b"web/node_modules"),
            None,
            "dir-only patterns never match the entry itself"
        );
    }

    #[test]
    fn directories_covered_by_a_pattern_are_recognised() {
        let ex = excludes(&["fixtures/", "vendor", "*.mp4", "node_mod*/", "/build*"]);
        assert_eq!(ex.covering_dir(b"fixtures"), Some("fixtures/"));
        assert_eq!(ex.covering_dir(b"fixtures/deep"), Some("fixtures/"));
        assert_eq!(ex.covering_dir(b"vendor"), Some("vendor"));
        assert_eq!(ex.covering_dir(b"a/node_modules"), Some("node_mod*/"));
        assert_eq!(ex.covering_dir(b"build-out"), Some("/build*"));
        assert_eq!(
            ex.covering_dir(b"clips.mp4"),
            Some("*.mp4"),
            "a directory named like the glob"
        );
        assert_eq!(ex.covering_dir(b"src"), None);
    }

    #[test]
    fn path_globs_are_anchored_and_respect_separators() {
        let ex = excludes(&["docs/*.png", "/build*", "assets/**/*.psd"]);
        assert_eq!(ex.matching(b"docs/a.png"), Some("docs/*.png"));
        assert_eq!(ex.matching(b"docs/sub/a.png"), None);
        assert_eq!(ex.matching(b"build-out/x/y"), Some("/build*"));
        assert_eq!(ex.matching(b"src/build-out/x"), None);
        assert_eq!(ex.matching(b"assets/a/b/c.psd"), Some("assets/**/*.psd"));
        assert_eq!(ex.matching(b"assets/c.psd"), Some("assets/**/*.psd"));
    }

    #[test]
    fn leading_dot_slash_is_ignored() {
        let ex = excludes(&["./secret.txt"]);
        assert_eq!(ex.matching(b"secret.txt"), Some("./secret.txt"));
    }

    #[test]
    fn bad_patterns_are_refused() {
        for bad in ["", "/", "!keep.txt", "../outside", "a/../b", "[unclosed"] {
            let err = Excludes::parse(&[bad.to_string()]).expect_err(bad);
            assert!(matches!(err, Error::InvalidInput { .. }), "{bad}: {err}");
        }
    }
}
