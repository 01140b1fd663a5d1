//! Relative paths as raw bytes.
//!
//! Git and the file system hand out names as bytes; on Unix a name does not have to be UTF-8,
//! so the snapshot keeps every project-relative path as `/`-separated bytes and only turns it
//! into a [`PathBuf`] at the public edge.

use std::path::{Path, PathBuf};

/// Why a listed name cannot be archived safely, if it cannot.
pub(crate) fn unsafe_name(name: &[u8]) -> Option<&'static str> {
    if name.is_empty() {
        return Some("empty name");
    }
    if name.contains(&0) {
        return Some("name contains a NUL byte");
    }
    if name.starts_with(b"/") {
        return Some("absolute path");
    }
    for component in name.split(|b| *b == b'/') {
        match component {
            b".." => return Some("`..` component escapes the project directory"),
            b"." | b"" => return Some("path is not normalised (`.` or empty component)"),
            _ => {}
        }
    }
    None
}

/// The `/`-separated components of a relative path.
pub(crate) fn components(name: &[u8]) -> impl DoubleEndedIterator<Item = &[u8]> {
    name.split(|b| *b == b'/')
}

/// The last component of a relative path.
pub(crate) fn basename(name: &[u8]) -> &[u8] {
    match name.iter().rposition(|b| *b == b'/') {
        Some(i) => &name[i + 1..],
        None => name,
    }
}

/// Every proper ancestor of `name` (`a`, `a/b` for `a/b/c`), shortest first.
pub(crate) fn ancestors(name: &[u8]) -> impl Iterator<Item = &[u8]> {
    name.iter()
        .enumerate()
        .filter(|(_, b)| **b == b'/')
        .map(move |(i, _)| &name[..i])
}

/// ASCII case-insensitive equality (credential names are matched that way so `.ENV` on a
/// case-insensitive file system is caught too).
pub(crate) fn eq_ignore_case(a: &[u8], b: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b)
}

#[cfg(unix)]
pub(crate) fn to_path(name: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(name))
}

#[cfg(not(unix))]
pub(crate) fn to_path(name: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(name).into_owned())
}

/// Append the relative `name` to `buf` (without a new allocation on Unix).
#[cfg(unix)]
pub(crate) fn push_name(buf: &mut PathBuf, name: &[u8]) {
    use std::os::unix::ffi::OsStrExt;
    buf.push(std::ffi::OsStr::from_bytes(name));
}

#[cfg(not(unix))]
pub(crate) fn push_name(buf: &mut PathBuf, name: &[u8]) {
    buf.push(to_path(name));
}

/// The bytes of a path; `None` if the platform cannot represent it as bytes losslessly.
#[cfg(unix)]
pub(crate) fn path_bytes(path: &Path) -> Option<&[u8]> {
    use std::os::unix::ffi::OsStrExt;
    Some(path.as_os_str().as_bytes())
}

#[cfg(not(unix))]
pub(crate) fn path_bytes(path: &Path) -> Option<&[u8]> {
    path.to_str().map(|s| s.as_bytes())
}

/// `name` relative to `root`, as `/`-separated bytes.
pub(crate) fn relative_bytes(root: &Path, path: &Path) -> Option<Vec<u8>> {
    let rel = path.strip_prefix(root).ok()?;
    let mut out = Vec::new();
    for (i, component) in rel.components().enumerate() {
        if i > 0 {
            out.push(b'/');
        }
        out.extend_from_slice(path_bytes(Path::new(component.as_os_str()))?);
    }
    Some(out)
}

/// A name for messages: lossy UTF-8, with control characters escaped so a newline in a file
/// name cannot forge extra lines of output.
pub(crate) fn display(name: &[u8]) -> String {
    String::from_utf8_lossy(name).escape_debug().to_string()
}

/// The absolute path of `name` under `root`.
pub(crate) fn join(root: &Path, name: &[u8]) -> PathBuf {
    root.join(to_path(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_names_are_caught() {
        assert_eq!(unsafe_name(b"a/b"), None);
        assert_eq!(unsafe_name(b"a b/c\nd"), None);
        assert!(unsafe_name(b"").is_some());
        assert!(unsafe_name(b"/etc/passwd").is_some());
        assert!(unsafe_name(b"../x").is_some());
        assert!(unsafe_name(b"a/../../x").is_some());
        assert!(unsafe_name(b"a//b").is_some());
        assert!(unsafe_name(b"./a").is_some());
        assert!(unsafe_name(b"a\0b").is_some());
        // `..` inside a name is just a name
        assert_eq!(unsafe_name(b"a..b/..c"), None);
    }

    #[test]
    fn ancestors_and_prefixes() {
        let got: Vec<&[u8]> = ancestors(b"a/b/c").collect();
        assert_eq!(got, vec![&b"a"[..], &b"a/b"[..]]);
        assert_eq!(ancestors(b"top").count(), 0);
        assert_eq!(basename(b"a/b/c.txt"), b"c.txt");
        assert_eq!(basename(b"c.txt"), b"c.txt");
    }

    #[test]
    fn display_escapes_control_characters() {
        assert_eq!(display(b"a\nb"), "a\\nb");
    }
}
