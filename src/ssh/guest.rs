//! Getting a guest ready for SSH, through the exec API (before sshd runs there is no other
//! way in): register our key with the control plane, put it into the guest's
//! `authorized_keys` (appending, never overwriting), and start sshd unless it already listens.
//!
//! Every value reaches the guest as a positional argument of `sh -c <script>`, never spliced
//! into the script text.

use crate::api::exec::{ExecOutput, ExecRequest};
use crate::api::sandboxes::Sandbox;
use crate::error::{Error, Result};

use super::error::SshError;
use super::keys::{canonical_public_key, SandboxKey};

/// Where images ship sshd.
pub const DEFAULT_SSHD_PATH: &str = "/usr/sbin/sshd";

/// Exit codes of [`PREPARE_SSHD`].
const EXIT_NO_SSHD: i32 = 100;
const EXIT_NOT_LISTENING: i32 = 101;

/// `$1` sshd binary, `$2` the user's home, `$3` the user. Exit 100: nothing listens on port
/// 22 and there is no sshd; 101: started but port 22 never listened; 102: directories; 103:
/// host keys; 104: sshd refused to start. An sshd that already listens is enough: such a guest
/// needs no binary at `$1`.
const PREPARE_SSHD: &str = r#"set -u
sshd=$1 home=$2 user=$3
# Port 22 is 0016 in /proc/net/tcp*; state 0A is LISTEN.
listening() {
  for table in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$table" ] || continue
    while read -r _ local _ state _; do
      case "$local" in *:0016) [ "$state" = 0A ] && return 0 ;; esac
    done < "$table"
  done
  return 1
}
mkdir -p "$home/.ssh" || exit 102
chmod 700 "$home/.ssh" || exit 102
if [ -f "$home/.ssh/authorized_keys" ]; then chmod 600 "$home/.ssh/authorized_keys"; fi
if [ "$user" != root ]; then chown -R "$user" "$home/.ssh" || exit 102; fi
listening && exit 0
[ -x "$sshd" ] || exit 100
mkdir -p /run/sshd || exit 102
chmod 755 /run/sshd || exit 102
if command -v ssh-keygen >/dev/null 2>&1; then ssh-keygen -A >/dev/null || exit 103; fi
"$sshd" || exit 104
i=0
while ! listening; do
  i=$((i + 1))
  if [ "$i" -ge 100 ]; then echo "sshd started but nothing listens on port 22 after 10s" >&2; exit 101; fi
  sleep 0.1
done
"#;

/// `$1` authorized_keys file, `$2` the key line, `$3` its `type base64`. Appends unless the
/// key is already there (checked again here in case another client raced us). Prints
/// `appended` or `present`.
const APPEND_AUTHORIZED_KEY: &str = r#"set -u
file=$1 key=$2 canonical=$3
umask 077
dir=$(dirname -- "$file")
mkdir -p -- "$dir" && chmod 700 -- "$dir" || exit 1
if [ -f "$file" ] && grep -qF -- "$canonical" "$file"; then echo present; exit 0; fi
if [ -s "$file" ] && [ -n "$(tail -c 1 -- "$file")" ]; then printf '\n' >> "$file" || exit 1; fi
printf '%s\n' "$key" >> "$file" || exit 1
chmod 600 -- "$file"
echo appended
"#;

/// `$1` the file to print (nothing when missing).
const READ_FILE: &str = r#"cat -- "$1" 2>/dev/null; exit 0"#;

/// Home directory of a guest user (`/root` for root, `/home/<user>` otherwise).
pub fn home_of(user: &str) -> String {
    if user == "root" {
        "/root".to_string()
    } else {
        format!("/home/{user}")
    }
}

/// A POSIX user name we are willing to pass around: `[a-z_][a-z0-9_-]*`, at most 32.
pub(crate) fn validate_user(user: &str) -> Result<()> {
    let mut chars = user.chars();
    let ok = user.len() <= 32
        && matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "user",
            format!("{user:?} is not a valid user name ([a-z_][a-z0-9_-]*)"),
        ))
    }
}

async fn run_script(sandbox: &Sandbox, script: &str, args: &[&str]) -> Result<ExecOutput> {
    let request = ExecRequest::new("sh")
        .arg("-c")
        .arg(script)
        .arg("cos-ssh")
        .args(args.iter().copied());
    sandbox.exec_with(request).await
}

/// Register `key` with the control plane unless the sandbox already lists it. Returns
/// whether it was added.
pub(crate) async fn ensure_registered(sandbox: &Sandbox, key: &SandboxKey) -> Result<bool> {
    let view = sandbox.refresh().await?;
    let listed = view
        .ssh_pubkeys
        .unwrap_or_default()
        .iter()
        .any(|k| canonical_public_key(k).as_deref() == Some(key.canonical_public_key()));
    if listed {
        return Ok(false);
    }
    sandbox
        .add_ssh_pubkeys(&[key.public_key_line().to_string()])
        .await?;
    Ok(true)
}

/// Put `key` into `<home>/.ssh/authorized_keys` unless an equal key (same `type base64`) is
/// there. Returns whether it was appended.
pub(crate) async fn ensure_authorized_key(
    sandbox: &Sandbox,
    home: &str,
    key: &SandboxKey,
) -> Result<bool> {
    let file = format!("{home}/.ssh/authorized_keys");
    let current = run_script(sandbox, READ_FILE, &[&file]).await?;
    if let Some(error) = &current.error {
        return Err(prep_failure(
            sandbox,
            current.exit_code,
            format!("reading {file}: {error}"),
        ));
    }
    let present = current
        .stdout
        .lines()
        .any(|line| canonical_public_key(line).as_deref() == Some(key.canonical_public_key()));
    if present {
        return Ok(false);
    }
    let out = run_script(
        sandbox,
        APPEND_AUTHORIZED_KEY,
        &[&file, key.public_key_line(), key.canonical_public_key()],
    )
    .await?;
    if !out.success() {
        let detail = out
            .error
            .clone()
            .unwrap_or_else(|| out.stderr.trim().to_string());
        return Err(prep_failure(
            sandbox,
            out.exit_code,
            format!("appending to {file}: {detail}"),
        ));
    }
    Ok(out.stdout.trim() == "appended")
}

/// Prepare and start the guest sshd (the CLI's recipe) unless one already listens on port
/// 22: refuse clearly when nothing listens and the image has no sshd.
pub(crate) async fn prepare_sshd(sandbox: &Sandbox, sshd_path: &str, user: &str) -> Result<()> {
    let home = home_of(user);
    let out = run_script(sandbox, PREPARE_SSHD, &[sshd_path, &home, user]).await?;
    if out.success() {
        return Ok(());
    }
    if out.exit_code == EXIT_NO_SSHD {
        return Err(SshError::SshdMissing {
            sandbox_id: sandbox.id().to_string(),
            sshd_path: sshd_path.to_string(),
        }
        .into());
    }
    let detail = match (&out.error, out.stderr.trim()) {
        (Some(error), _) => error.clone(),
        (None, "") if out.exit_code == EXIT_NOT_LISTENING => {
            "sshd never listened on port 22".to_string()
        }
        (None, "") => "no error output".to_string(),
        (None, stderr) => stderr.chars().take(2000).collect(),
    };
    Err(prep_failure(sandbox, out.exit_code, detail))
}

fn prep_failure(sandbox: &Sandbox, exit_code: i32, detail: String) -> Error {
    SshError::SshdStart {
        sandbox_id: sandbox.id().to_string(),
        exit_code,
        detail,
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_and_homes() {
        assert_eq!(home_of("root"), "/root");
        assert_eq!(home_of("dev"), "/home/dev");
        assert!(validate_user("root").is_ok());
        assert!(validate_user("_svc-1").is_ok());
        for bad in ["", "Root", "a b", "../x", "a;b", "1abc"] {
            assert!(validate_user(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn scripts_take_values_positionally() {
        // The scripts must reference their inputs only as "$1".."$3".
        for script in [PREPARE_SSHD, APPEND_AUTHORIZED_KEY, READ_FILE] {
            assert!(!script.contains("{}"));
            assert!(!script.contains("/root"));
        }
    }

    #[test]
    fn a_listening_sshd_is_found_before_the_binary_is_required() {
        let listening = PREPARE_SSHD
            .find("listening && exit 0")
            .expect("early exit when port 22 listens");
        let binary = PREPARE_SSHD
            .find(r#"[ -x "$sshd" ] || exit 100"#)
            .expect("the binary check");
        assert!(
            listening < binary,
            "a guest whose sshd already runs must not need the binary"
        );
    }
}
