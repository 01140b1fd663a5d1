//! `credentials`: the CLI's credential files, parsed in memory and read through
//! [`Resolver`] from a scratch home directory.
//!
//! Input: the file contents, used both as `.oauth` and as `.token`.
//!
//! The secret-hiding property is checked as independence: when the input is a JSON object, the
//! same object with its `access_token` / `refresh_token` values swapped for unrelated ones
//! (strings nested inside them too, emptiness kept) must give *identical* `Debug` text, error
//! text and outcome. Whatever a `Debug` or error shows, it then shows nothing of the tokens —
//! not a prefix, not a length. For `.token` the same holds against a fixed key.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value};

use super::show;
use crate::auth::{fuzz_parse_oauth, CredentialKind, CredentialSource, Credentials, Resolver};
use crate::error::Error;

const TOKEN_FIELDS: [&str; 2] = ["access_token", "refresh_token"];
const OAUTH: &str = ".oauth";
const TOKEN: &str = ".token";

/// Check the `credentials` properties on one input (panics on a violation).
pub fn credentials(data: &[u8]) {
    let object = match serde_json::from_slice::<Value>(data) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    };
    check_parsed_session(data, object.as_ref());
    HOME.with(|home| {
        check_oauth_file(home, data, object.as_ref());
        check_token_file(home, data);
    });
}

/// The in-memory parse: the outcome depends on the JSON value only (not its spelling), and
/// not at all on the token values.
fn check_parsed_session(data: &[u8], object: Option<&Map<String, Value>>) {
    let raw = fuzz_parse_oauth(data);
    let Some(object) = object else { return };
    let canonical = fuzz_parse_oauth(&to_json(object));
    assert_eq!(
        raw,
        canonical,
        "the same JSON value parsed differently when respelled: {}",
        show(data)
    );
    for fill in ['q', 'Z'] {
        let swapped = fuzz_parse_oauth(&to_json(&swap_tokens(object, fill)));
        assert_eq!(
            canonical,
            swapped,
            "the parsed session's Debug (or refusal) depends on the token values: {}",
            show(data)
        );
    }
}

/// `.oauth` read by the resolver: a session (sent as an access token, sourced from the file) or
/// a credentials error; either way its text does not depend on the token values.
fn check_oauth_file(home: &ScratchHome, data: &[u8], object: Option<&Map<String, Value>>) {
    let got = home.resolve_with(OAUTH, data);
    match &got {
        Ok(credentials) => {
            assert_eq!(
                credentials.kind(),
                CredentialKind::AccessToken,
                "{}",
                show(data)
            );
            assert_eq!(
                credentials.source(),
                &CredentialSource::OAuthFile(home.file(OAUTH)),
                "{}",
                show(data)
            );
        }
        Err(Error::Credentials { .. }) => {}
        Err(other) => panic!(
            "an unreadable .oauth gave {other:?}, not a credentials error: {}",
            show(data)
        ),
    }
    let Some(object) = object else { return };
    let canonical = describe(&home.resolve_with(OAUTH, &to_json(object)));
    for fill in ['q', 'Z'] {
        let swapped = describe(&home.resolve_with(OAUTH, &to_json(&swap_tokens(object, fill))));
        assert_eq!(
            canonical,
            swapped,
            "resolving .oauth shows token values: {}",
            show(data)
        );
    }
}

/// `.token` read by the resolver: trimmed non-empty UTF-8 is an API key from the file whose
/// `Debug` equals that of any other key; blank is "not signed in"; other bytes are a
/// credentials error that says nothing of them.
fn check_token_file(home: &ScratchHome, data: &[u8]) {
    let got = home.resolve_with(TOKEN, data);
    match std::str::from_utf8(data) {
        Ok(text) if !text.trim().is_empty() => {
            let credentials = got
                .unwrap_or_else(|e| panic!("a readable .token was refused: {e} ({})", show(data)));
            assert_eq!(credentials.kind(), CredentialKind::ApiKey);
            assert_eq!(
                credentials.source(),
                &CredentialSource::TokenFile(home.file(TOKEN))
            );
            let reference = describe(&home.resolve_with(TOKEN, b"fixed-reference-key"));
            assert_eq!(
                describe(&Ok(credentials)),
                reference,
                "Debug shows the key: {}",
                show(data)
            );
        }
        Ok(_) => assert!(
            matches!(got, Err(Error::NotSignedIn(_))),
            "blank .token gave {got:?}"
        ),
        Err(_) => {
            assert!(
                matches!(got, Err(Error::Credentials { .. })),
                "non-UTF-8 .token gave {got:?}"
            );
            let reference = describe(&home.resolve_with(TOKEN, b"\xff\xfe"));
            assert_eq!(
                describe(&got),
                reference,
                "the error shows the file's bytes: {}",
                show(data)
            );
        }
    }
}

/// Everything a caller could print about a resolution.
fn describe(result: &Result<Credentials, Error>) -> String {
    match result {
        Ok(credentials) => format!("ok {credentials:?}"),
        Err(error) => format!("error {error} / {error:?}"),
    }
}

fn to_json(object: &Map<String, Value>) -> Vec<u8> {
    serde_json::to_vec(object).expect("a JSON value serialises")
}

/// `object` with every string inside the token fields replaced by `fill`s (empty stays empty).
fn swap_tokens(object: &Map<String, Value>, fill: char) -> Map<String, Value> {
    let mut swapped = object.clone();
    for field in TOKEN_FIELDS {
        if let Some(value) = swapped.get_mut(field) {
            swap_strings(value, fill);
        }
    }
    swapped
}

fn swap_strings(value: &mut Value, fill: char) {
    match value {
        Value::String(s) if !s.is_empty() => *s = fill.to_string().repeat(3 + s.len() % 5),
        Value::Array(items) => items.iter_mut().for_each(|v| swap_strings(v, fill)),
        Value::Object(map) => map.values_mut().for_each(|v| swap_strings(v, fill)),
        _ => {}
    }
}

/// A scratch home with a `.createos/` directory, one per thread, removed when the thread ends.
struct ScratchHome {
    root: PathBuf,
}

static NEXT_HOME: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static HOME: ScratchHome = ScratchHome::new();
}

impl ScratchHome {
    fn new() -> Self {
        let n = NEXT_HOME.fetch_add(1, Ordering::Relaxed);
        let root =
            std::env::temp_dir().join(format!("createos-fuzz-home-{}-{n}", std::process::id()));
        let store = root.join(".createos");
        fs::create_dir_all(&store)
            .unwrap_or_else(|e| panic!("cannot create the scratch home {}: {e}", store.display()));
        ScratchHome { root }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.root.join(".createos").join(name)
    }

    /// Resolve with only `name` present, holding `contents`, and no environment at all.
    fn resolve_with(&self, name: &str, contents: &[u8]) -> Result<Credentials, Error> {
        for other in [OAUTH, TOKEN] {
            remove(&self.file(other));
        }
        let path = self.file(name);
        fs::write(&path, contents)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        Resolver::new().home(&self.root).env(|_| None).resolve()
    }
}

impl Drop for ScratchHome {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn remove(path: &Path) {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("cannot remove {}: {e}", path.display()),
    }
}
