//! The files `createos login` keeps under `<home>/.createos/`: `.token` (an API key) and `.oauth`
//! (an OAuth session), plus the atomic rewrite of `.oauth` after a refresh.
//!
//! Parse errors never quote file contents: a mistyped field could hold a token.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use super::secret::Secret;
use crate::error::Error;

/// Seconds before `expires_at` at which a session already counts as expired (the CLI's skew).
pub(crate) const EXPIRY_SKEW_SECS: i64 = 60;

/// Paths of the CLI's credential store for one home directory.
#[derive(Clone, Debug)]
pub(crate) struct StorePaths {
    pub oauth: PathBuf,
    pub token: PathBuf,
    /// Advisory lock serialising refreshes across processes; never deleted (deleting a lock
    /// file lets two processes each lock a different inode).
    pub lock: PathBuf,
}

impl StorePaths {
    pub fn under_home(home: &Path) -> Self {
        let dir = home.join(".createos");
        StorePaths {
            oauth: dir.join(".oauth"),
            token: dir.join(".token"),
            lock: dir.join(".oauth.lock"),
        }
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(_) => 0,
    }
}

/// The contents of `.oauth`.
#[derive(Clone, Debug)]
pub(crate) struct OAuthSession {
    pub access_token: Secret,
    pub refresh_token: Secret,
    /// Unix seconds.
    pub expires_at: i64,
    /// May be empty in files written by old CLI versions.
    pub token_endpoint: String,
    /// Keys this crate does not know, written back unchanged.
    other: Map<String, Value>,
}

const ACCESS_TOKEN: &str = "access_token";
const REFRESH_TOKEN: &str = "refresh_token";
const EXPIRES_AT: &str = "expires_at";
const TOKEN_ENDPOINT: &str = "token_endpoint";

impl OAuthSession {
    /// Parse the JSON of `.oauth`. The error is a reason that names fields, never values.
    pub fn parse(text: &str) -> Result<Self, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            format!(
                "it is not valid JSON (error at line {} column {})",
                e.line(),
                e.column()
            )
        })?;
        let Value::Object(mut map) = value else {
            return Err("it is not a JSON object".into());
        };
        let access_token = Secret::new(take_string(&mut map, ACCESS_TOKEN)?);
        let refresh_token = Secret::new(take_string(&mut map, REFRESH_TOKEN)?);
        let token_endpoint = take_string(&mut map, TOKEN_ENDPOINT)?;
        let expires_at = take_unix_seconds(&mut map, EXPIRES_AT)?;
        if access_token.is_empty() && refresh_token.is_empty() {
            return Err("it holds neither an access token nor a refresh token".into());
        }
        Ok(OAuthSession {
            access_token,
            refresh_token,
            expires_at,
            token_endpoint,
            other: map,
        })
    }

    /// True when the access token must be refreshed before use: missing, or within
    /// [`EXPIRY_SKEW_SECS`] of its expiry.
    pub fn is_expired(&self, now: i64) -> bool {
        self.access_token.is_empty() || now >= self.expires_at.saturating_sub(EXPIRY_SKEW_SECS)
    }

    fn to_json(&self) -> Vec<u8> {
        let mut map = self.other.clone();
        map.insert(
            ACCESS_TOKEN.into(),
            Value::String(self.access_token.expose().to_owned()),
        );
        map.insert(
            REFRESH_TOKEN.into(),
            Value::String(self.refresh_token.expose().to_owned()),
        );
        map.insert(EXPIRES_AT.into(), Value::from(self.expires_at));
        map.insert(
            TOKEN_ENDPOINT.into(),
            Value::String(self.token_endpoint.clone()),
        );
        let mut bytes = serde_json::to_vec_pretty(&Value::Object(map)).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }
}

/// A string field; missing or `null` reads as empty.
fn take_string(map: &mut Map<String, Value>, key: &str) -> Result<String, String> {
    match map.remove(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(format!("`{key}` is not a string")),
    }
}

/// Unix seconds written as an integer (the CLI's format), a float or a numeric string.
/// Missing reads as 0, i.e. expired, which is what the CLI's zero value means too.
fn take_unix_seconds(map: &mut Map<String, Value>, key: &str) -> Result<i64, String> {
    let bad = || format!("`{key}` is not a number of unix seconds");
    match map.remove(key) {
        None | Some(Value::Null) => Ok(0),
        Some(Value::Number(n)) => {
            if let Some(i) = n.as_i64() {
                Ok(i)
            } else if n.as_u64().is_some() {
                Ok(i64::MAX)
            } else {
                // Saturating float-to-int cast; NaN cannot come out of JSON.
                n.as_f64().map(|f| f as i64).ok_or_else(bad)
            }
        }
        Some(Value::String(s)) => s.trim().parse::<i64>().map_err(|_| bad()),
        Some(_) => Err(bad()),
    }
}

/// Read a file, `None` when it does not exist.
fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("could not read {}", path.display()), e)),
    }
}

/// Read `.oauth`. `Ok(None)` when the file does not exist; an error naming the file when it
/// exists but is not a usable session.
pub(crate) fn read_oauth(path: &Path) -> Result<Option<OAuthSession>, Error> {
    let Some(bytes) = read_optional(path)? else {
        return Ok(None);
    };
    let parsed = std::str::from_utf8(&bytes)
        .map_err(|_| "it is not UTF-8 text".to_owned())
        .and_then(OAuthSession::parse);
    match parsed {
        Ok(session) => Ok(Some(session)),
        Err(reason) => Err(Error::credentials(format!(
            "the saved session {} is unreadable: {reason}; run `createos login` again, or delete the \
             file to fall back to ~/.createos/.token",
            path.display()
        ))),
    }
}

/// Fuzzing entry (see `crate::fuzzing`): parse `.oauth` contents exactly as `read_oauth`
/// does and give the session's `Debug` text, or the reason it was refused. Only the text leaves,
/// so a harness can compare it across inputs that differ in their token values.
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_parse_oauth(contents: &[u8]) -> Result<String, String> {
    std::str::from_utf8(contents)
        .map_err(|_| "it is not UTF-8 text".to_owned())
        .and_then(OAuthSession::parse)
        .map(|session| format!("{session:?}"))
}

/// Read `.token`, trimmed. `Ok(None)` when it does not exist or holds only whitespace.
pub(crate) fn read_token(path: &Path) -> Result<Option<Secret>, Error> {
    let Some(bytes) = read_optional(path)? else {
        return Ok(None);
    };
    let text = String::from_utf8(bytes).map_err(|_| {
        Error::credentials(format!(
            "the saved API key {} is not UTF-8 text; run `createos login` again",
            path.display()
        ))
    })?;
    let key = text.trim();
    Ok((!key.is_empty()).then(|| Secret::new(key)))
}

/// Replace `.oauth` atomically: a temporary file in the same directory, created with mode 0600,
/// written, fsynced, then renamed over the target. A reader (this crate or the CLI) sees the old
/// or the new session, never half of one. A symlinked `.oauth` is replaced at its target.
pub(crate) fn write_oauth(path: &Path, session: &OAuthSession) -> Result<(), Error> {
    let target = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let dir = target.parent().unwrap_or_else(|| Path::new("."));
    let file_name = target
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(".oauth");
    let temp = dir.join(format!(
        ".{file_name}.tmp.{}.{:016x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    let context = || {
        format!(
            "could not save the refreshed session to {}",
            target.display()
        )
    };

    let written =
        write_new_private_file(&temp, &session.to_json()).and_then(|()| fs::rename(&temp, &target));
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(Error::io(context(), e));
    }
    sync_dir(dir);
    Ok(())
}

fn write_new_private_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Make the rename durable. Best effort: some filesystems refuse to fsync a directory.
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_keeps_unknown_keys_and_tolerates_shapes() {
        let s = OAuthSession::parse(
            r#"{"access_token":"a","refresh_token":"r","expires_at":"17","token_endpoint":null,"x":[1]}"#,
        )
        .unwrap();
        assert_eq!(s.expires_at, 17);
        assert_eq!(s.token_endpoint, "");
        let back: Value = serde_json::from_slice(&s.to_json()).unwrap();
        assert_eq!(back["x"], serde_json::json!([1]));
        assert_eq!(back["expires_at"], serde_json::json!(17));
    }

    #[test]
    fn parse_errors_never_quote_values() {
        let err =
            OAuthSession::parse(r#"{"access_token":"a","expires_at":"secret-ish"}"#).unwrap_err();
        assert!(!err.contains("secret-ish"), "{err}");
        let err = OAuthSession::parse(r#"{"access_token":{"v":"hidden"}}"#).unwrap_err();
        assert!(!err.contains("hidden"), "{err}");
        assert!(OAuthSession::parse("[]").is_err());
        assert!(OAuthSession::parse(r#"{"expires_at":5}"#).is_err());
    }

    #[test]
    fn expiry_uses_the_sixty_second_skew() {
        let s = OAuthSession::parse(r#"{"access_token":"a","expires_at":1000}"#).unwrap();
        assert!(!s.is_expired(939));
        assert!(s.is_expired(940));
        let empty =
            OAuthSession::parse(r#"{"refresh_token":"r","expires_at":99999999999}"#).unwrap();
        assert!(empty.is_expired(0));
    }
}
