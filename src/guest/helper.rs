//! The embedded helper (`guest/cos_guest.py`), where it lives in a sandbox, and the bootstrap
//! that runs it.
//!
//! The helper is stored under a content-hashed directory, so a client with a different helper
//! never runs a stale copy and the old copy is simply left behind. It is not run as a script:
//! a short `python3 -c` bootstrap checks its SHA-256 (a missing, partial or stale file exits
//! [`EXIT_MISSING`], and the client uploads it again) and imports it as a module, which lets
//! Python cache its bytecode beside it instead of recompiling ~2,300 lines on every call.

use std::sync::Arc;

use sha2::{Digest, Sha256};

/// The helper shipped with this crate.
pub const EMBEDDED_SOURCE: &str = include_str!("../../guest/cos_guest.py");

/// Directory that holds every installed helper version (mode 0700).
pub const INSTALL_ROOT: &str = "/tmp/.cos-guest";

/// Bootstrap exit status: the helper file is missing or its content does not match.
pub const EXIT_MISSING: i32 = 97;
/// Bootstrap exit status: `python3` is older than 3.9.
pub const EXIT_TOO_OLD: i32 = 98;
/// Conventional status of a command that could not be found.
pub const EXIT_NOT_FOUND: i32 = 127;

/// Hex digits of the hash used in the directory name.
const DIR_HASH_LEN: usize = 16;

/// Runs the helper at argv[1] after checking that its SHA-256 is argv[2]. Kept to syntax that
/// any Python 3 parses, so an old interpreter still gets to the version check.
const BOOTSTRAP: &str = r#"import sys
if sys.version_info < (3, 9):
    sys.stderr.write("cos-guest: python3 is %d.%d; the file helper needs Python 3.9 or newer\n" % sys.version_info[:2])
    sys.exit(98)
import hashlib, importlib.util
path, digest = sys.argv[1], sys.argv[2]
try:
    with open(path, "rb") as f:
        data = f.read()
except OSError:
    data = None
if data is None or hashlib.sha256(data).hexdigest() != digest:
    sys.stderr.write("cos-guest: the helper at %s is missing or stale\n" % path)
    sys.exit(97)
spec = importlib.util.spec_from_file_location("cos_guest", path)
module = importlib.util.module_from_spec(spec)
sys.modules["cos_guest"] = module
spec.loader.exec_module(module)
sys.exit(module.main(sys.argv[3:]) if len(sys.argv) > 3 else module.main())
"#;

/// Where one helper version is installed in a sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelperLocation {
    /// [`INSTALL_ROOT`].
    pub root: String,
    /// `<root>/<sha256 prefix>`: created with mode 0700.
    pub dir: String,
    /// `<dir>/cos_guest.py`.
    pub file: String,
}

/// One helper version: its source and where it goes.
#[derive(Debug)]
pub(crate) struct Helper {
    pub source: Arc<str>,
    pub sha256: String,
    pub location: HelperLocation,
}

impl Helper {
    pub fn new(source: Arc<str>) -> Self {
        let sha256 = hex(&Sha256::digest(source.as_bytes()));
        let dir = format!("{INSTALL_ROOT}/{}", &sha256[..DIR_HASH_LEN]);
        let location = HelperLocation {
            root: INSTALL_ROOT.to_string(),
            file: format!("{dir}/cos_guest.py"),
            dir,
        };
        Helper {
            source,
            sha256,
            location,
        }
    }

    pub fn embedded() -> Self {
        Helper::new(Arc::from(EMBEDDED_SOURCE))
    }

    /// The command that runs the helper: one operation with the request on stdin (append
    /// `once <base64 request>` to pass it in argv instead, or `serve` for resident mode).
    pub fn argv(&self, python: &str) -> Vec<String> {
        vec![
            python.to_string(),
            // Isolated: no PYTHONPATH/PYTHONHOME or user site packages can change what runs.
            "-I".to_string(),
            "-c".to_string(),
            BOOTSTRAP.to_string(),
            self.location.file.clone(),
            self.sha256.clone(),
        ]
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A shell script (`sh -c SCRIPT sh DIR ROOT FILE`) that stores stdin as the helper: private
/// directories, a temporary name, then an atomic rename.
pub(crate) const INSTALL_FROM_STDIN: &str = r#"umask 077
mkdir -p "$1" && chmod 700 "$2" "$1" || exit 1
tmp="$1/.upload.$$"
cat > "$tmp" && mv -f "$tmp" "$3" || { rm -f "$tmp"; exit 1; }
"#;

/// A shell script (`sh -c SCRIPT sh DIR ROOT TMP FILE`) that finishes an upload made through
/// the files API: private directories and file, then an atomic rename.
pub(crate) const FINISH_UPLOAD: &str = r#"umask 077
chmod 700 "$2" "$1" && chmod 600 "$3" && mv -f "$3" "$4" || { rm -f "$3"; exit 1; }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_is_content_addressed() {
        let a = Helper::embedded();
        assert_eq!(a.sha256.len(), 64);
        assert_eq!(
            a.location.dir,
            format!("/tmp/.cos-guest/{}", &a.sha256[..16])
        );
        assert_eq!(a.location.file, format!("{}/cos_guest.py", a.location.dir));
        let b = Helper::new(Arc::from(format!("{EMBEDDED_SOURCE}\n# another build\n")));
        assert_ne!(a.location.dir, b.location.dir);
        assert!(a
            .argv("python3")
            .ends_with(&[a.location.file.clone(), a.sha256.clone()]));
    }

    #[test]
    fn sha256_matches_a_known_vector() {
        let h = Helper::new(Arc::from("abc"));
        assert_eq!(
            h.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
