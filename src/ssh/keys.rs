//! Per-sandbox ed25519 keys: generated in-process on first use, kept 0600 under
//! [`SshFiles::keys_dir`], never leaving this machine except as the public half.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::RngCore;
use russh::keys::ssh_key::private::Ed25519Keypair;
use russh::keys::ssh_key::LineEnding;
use russh::keys::{HashAlg, PrivateKey, PublicKey};
use zeroize::Zeroizing;

use super::error::SshError;
use super::files::{self, SshFiles};

/// The key pair a sandbox is reached with.
#[derive(Clone)]
pub struct SandboxKey {
    private: Arc<PrivateKey>,
    public_line: String,
    canonical: String,
    path: PathBuf,
}

// The private half never reaches Debug output.
impl fmt::Debug for SandboxKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SandboxKey")
            .field("path", &self.path)
            .field("fingerprint", &self.fingerprint())
            .finish()
    }
}

impl SandboxKey {
    /// Load the key of `sandbox_id`, generating it (ed25519, comment `createos-sandbox <id>`)
    /// when there is none. Directories are made 0700 and both files 0600.
    pub fn load_or_generate(files: &SshFiles, sandbox_id: &str) -> Result<Self, SshError> {
        crate::validate::id("sandbox id", sandbox_id)
            .map_err(|e| SshError::local_file(files.keys_dir(), e.to_string()))?;
        files.ensure_dirs()?;
        let path = files.key_path(sandbox_id);
        if !path.exists() {
            let generated = generate(sandbox_id)?;
            let pem = generated.to_openssh(LineEnding::LF).map_err(|e| {
                SshError::local_file(&path, format!("cannot encode the new key: {e}"))
            })?;
            // Another process may generate at the same time: the first link wins, the others
            // load its key.
            files::create_file_once(&path, pem.as_bytes())?;
        }
        let key = Self::load(&path)?;
        // The public half is derived from the private one; rewrite it when missing or stale.
        let pub_path = public_path(&path);
        let wanted = format!("{}\n", key.public_line);
        if std::fs::read_to_string(&pub_path).ok().as_deref() != Some(wanted.as_str()) {
            files::replace_file(&pub_path, wanted.as_bytes())?;
        }
        files::set_mode(&pub_path, 0o600)?;
        Ok(key)
    }

    /// Load an OpenSSH private key file (unencrypted), tightening its mode to 0600.
    pub fn load(path: &Path) -> Result<Self, SshError> {
        let pem = std::fs::read_to_string(path)
            .map_err(|e| SshError::local_file(path, format!("cannot read the key: {e}")))?;
        let private = PrivateKey::from_openssh(pem.trim_start())
            .map_err(|e| SshError::local_file(path, format!("not an OpenSSH private key: {e}")))?;
        if private.is_encrypted() {
            return Err(SshError::local_file(
                path,
                "the key is passphrase-protected; use an unencrypted key",
            ));
        }
        files::set_mode(path, 0o600)?;
        let public = private.public_key();
        let public_line = public.to_openssh().map_err(|e| {
            SshError::local_file(path, format!("cannot encode the public key: {e}"))
        })?;
        let canonical = canonical_public_key(&public_line).ok_or_else(|| {
            SshError::local_file(path, "the public key has no `type base64` form")
        })?;
        Ok(SandboxKey {
            private: Arc::new(private),
            public_line,
            canonical,
            path: path.to_path_buf(),
        })
    }

    /// The OpenSSH public key line (`ssh-ed25519 AAAA… createos-sandbox <id>`).
    pub fn public_key_line(&self) -> &str {
        &self.public_line
    }

    /// `type base64` of the public key, the form authorized-keys lines are compared by.
    pub fn canonical_public_key(&self) -> &str {
        &self.canonical
    }

    /// The public key.
    pub fn public_key(&self) -> &PublicKey {
        self.private.public_key()
    }

    /// `SHA256:…` fingerprint of the public key.
    pub fn fingerprint(&self) -> String {
        self.private
            .public_key()
            .fingerprint(HashAlg::Sha256)
            .to_string()
    }

    /// The private key file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn private_key(&self) -> Arc<PrivateKey> {
        self.private.clone()
    }
}

/// `<key>.pub`.
pub fn public_path(private: &Path) -> PathBuf {
    let mut name = private.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

fn generate(sandbox_id: &str) -> Result<PrivateKey, SshError> {
    let mut seed = Zeroizing::new([0u8; 32]);
    rand::rngs::OsRng.fill_bytes(seed.as_mut());
    let pair = Ed25519Keypair::from_seed(&seed);
    let mut key = PrivateKey::from(pair);
    key.set_comment(format!("createos-sandbox {sandbox_id}"));
    Ok(key)
}

/// `type base64` of an OpenSSH public key or authorized-keys line (options and comment
/// dropped), or `None` when the line holds no key.
pub fn canonical_public_key(line: &str) -> Option<String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let fields = split_fields(line);
    // The key type is the first field that names one; authorized_keys options come before it.
    let at = fields.iter().position(|f| is_key_type(f))?;
    let kind = fields[at];
    let blob = fields.get(at + 1)?;
    let valid_blob = !blob.is_empty()
        && blob
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
    valid_blob.then(|| format!("{kind} {blob}"))
}

fn is_key_type(field: &str) -> bool {
    field.starts_with("ssh-")
        || field.starts_with("ecdsa-sha2-")
        || field.starts_with("sk-ssh-")
        || field.starts_with("sk-ecdsa-")
}

/// Whitespace-separated fields, keeping double-quoted option values (which may hold spaces)
/// in one piece.
fn split_fields(line: &str) -> Vec<&str> {
    let mut fields = Vec::new();
    let mut start = None;
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' if quoted => escaped = true,
            '"' => {
                quoted = !quoted;
                start.get_or_insert(i);
            }
            c if c.is_whitespace() && !quoted => {
                if let Some(s) = start.take() {
                    fields.push(&line[s..i]);
                }
            }
            _ => {
                start.get_or_insert(i);
            }
        }
    }
    if let Some(s) = start {
        fields.push(&line[s..]);
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms() {
        assert_eq!(
            canonical_public_key("ssh-ed25519 AAAAC3Nz me@host").as_deref(),
            Some("ssh-ed25519 AAAAC3Nz")
        );
        assert_eq!(
            canonical_public_key("  ssh-rsa AAAAB3== ").as_deref(),
            Some("ssh-rsa AAAAB3==")
        );
        assert_eq!(
            canonical_public_key(r#"command="echo \"a b\"",no-pty ssh-ed25519 AAAAC3Nz c"#)
                .as_deref(),
            Some("ssh-ed25519 AAAAC3Nz")
        );
        assert_eq!(
            canonical_public_key("ecdsa-sha2-nistp256 AAAAE2V x").as_deref(),
            Some("ecdsa-sha2-nistp256 AAAAE2V")
        );
        assert_eq!(canonical_public_key("# ssh-ed25519 AAAA"), None);
        assert_eq!(canonical_public_key("ssh-ed25519"), None);
        assert_eq!(canonical_public_key("ssh-ed25519 not*base64"), None);
        assert_eq!(canonical_public_key(""), None);
    }

    #[test]
    fn generate_load_and_modes() {
        let base = std::env::temp_dir().join(format!("cos-ssh-keys-{}", rand::random::<u64>()));
        let files = SshFiles::at(&base);
        let first = SandboxKey::load_or_generate(&files, "sb-one").unwrap();
        assert!(first.public_key_line().starts_with("ssh-ed25519 AAAA"));
        assert!(first
            .public_key_line()
            .ends_with(" createos-sandbox sb-one"));
        let again = SandboxKey::load_or_generate(&files, "sb-one").unwrap();
        assert_eq!(first.canonical_public_key(), again.canonical_public_key());
        let other = SandboxKey::load_or_generate(&files, "sb-two").unwrap();
        assert_ne!(first.canonical_public_key(), other.canonical_public_key());
        assert!(!format!("{first:?}").contains("PRIVATE"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&files.key_path("sb-one")), 0o600);
            assert_eq!(mode(&public_path(&files.key_path("sb-one"))), 0o600);
            assert_eq!(mode(&files.keys_dir()), 0o700);
            assert_eq!(mode(&base), 0o700);
        }
        assert!(SandboxKey::load_or_generate(&files, "../escape").is_err());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
