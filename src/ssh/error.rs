//! [`SshError`]: what can go wrong on the SSH path, as variants a caller can match on. It
//! reaches callers inside [`crate::Error::Ssh`].

use std::path::PathBuf;

/// Why an SFTP operation failed, from the server's status code (or the local transport).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SftpErrorKind {
    /// The path does not exist (`SSH_FX_NO_SUCH_FILE`).
    NotFound,
    /// The guest refused access (`SSH_FX_PERMISSION_DENIED`).
    PermissionDenied,
    /// The server reported a generic failure (`SSH_FX_FAILURE`): e.g. the target exists, a
    /// directory is not empty, or the disk is full.
    Failure,
    /// The server does not implement the operation.
    Unsupported,
    /// The SFTP channel or the SSH connection went away.
    ConnectionLost,
    /// No answer within the request timeout.
    Timeout,
    /// The server sent something the protocol does not allow.
    Protocol,
}

/// A failure on the SSH path: connecting, verifying the guest, running a command or
/// moving files.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SshError {
    /// The guest image has no SSH server at the expected path.
    #[error(
        "sandbox {sandbox_id} has no SSH server ({sshd_path} is missing); create the sandbox from an image that \
         ships sshd, e.g. rootfs `devbox:1`"
    )]
    SshdMissing {
        /// The sandbox.
        sandbox_id: String,
        /// The sshd binary that was looked for.
        sshd_path: String,
    },
    /// Preparing or starting the guest sshd failed.
    #[error("could not start sshd in sandbox {sandbox_id} (exit code {exit_code}): {detail}")]
    SshdStart {
        /// The sandbox.
        sandbox_id: String,
        /// Exit code of the preparation script.
        exit_code: i32,
        /// Its stderr (trimmed), or what went wrong.
        detail: String,
    },
    /// The host key differs from the one pinned on first use: possibly a man in the middle,
    /// or the guest's host keys were regenerated.
    #[error(
        "the SSH host key of {host} changed: pinned {pinned}, offered {offered}. If the change is expected \
         (the guest's host keys were regenerated), delete the line starting with `{host} ` from {} and connect again",
        known_hosts.display()
    )]
    HostKeyChanged {
        /// The sandbox id (or gateway `[host]:port`) the key was pinned for.
        host: String,
        /// SHA-256 fingerprint of the pinned key.
        pinned: String,
        /// SHA-256 fingerprint of the key the server offered.
        offered: String,
        /// The known-hosts file holding the pin.
        known_hosts: PathBuf,
    },
    /// The server did not accept our key.
    #[error("{target} refused public-key authentication for user {user:?} (key {fingerprint})")]
    AuthRejected {
        /// What refused: `sandbox <id>` or `gateway <addr>`.
        target: String,
        /// The user we logged in as.
        user: String,
        /// SHA-256 fingerprint of the key we offered.
        fingerprint: String,
    },
    /// The SSH handshake or session failed (connection lost, protocol error, timeout).
    #[error("SSH {context}: {message}")]
    Protocol {
        /// What was being done.
        context: String,
        /// What went wrong.
        message: String,
    },
    /// The server refused to open a channel (session, SFTP, or a gateway forward).
    #[error("SSH server refused to open a {kind} channel: {reason}")]
    ChannelRefused {
        /// `session`, `direct-tcpip`, …
        kind: String,
        /// The server's reason.
        reason: String,
    },
    /// The server refused to run a command or start a subsystem on a channel.
    #[error("SSH server refused the {request} request")]
    RequestRefused {
        /// `exec`, `subsystem sftp`, …
        request: String,
    },
    /// An SFTP operation failed.
    #[error("SFTP {op} {path}: {message}")]
    Sftp {
        /// The operation (`open`, `stat`, `rename`, …).
        op: &'static str,
        /// The remote path.
        path: String,
        /// Classification for callers.
        kind: SftpErrorKind,
        /// The server's message (or the local transport error).
        message: String,
    },
    /// A key or known-hosts file of ours could not be read, parsed or written.
    #[error("{path}: {message}")]
    LocalFile {
        /// The file.
        path: PathBuf,
        /// What went wrong and what to do.
        message: String,
    },
}

impl SshError {
    /// True when an SFTP operation failed because the path does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            SshError::Sftp {
                kind: SftpErrorKind::NotFound,
                ..
            }
        )
    }

    pub(crate) fn protocol(context: impl Into<String>, message: impl std::fmt::Display) -> Self {
        SshError::Protocol {
            context: context.into(),
            message: message.to_string(),
        }
    }

    pub(crate) fn local_file(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        SshError::LocalFile {
            path: path.into(),
            message: message.into(),
        }
    }

    /// Whether the failure means the connection is gone (worth one reconnect).
    pub(crate) fn is_connection_lost(&self) -> bool {
        match self {
            SshError::Protocol { .. } => true,
            SshError::Sftp { kind, .. } => matches!(kind, SftpErrorKind::ConnectionLost),
            _ => false,
        }
    }
}

impl From<SshError> for crate::Error {
    fn from(err: SshError) -> Self {
        crate::Error::Ssh(crate::error::Detail::new(err))
    }
}

impl crate::Error {
    /// The SSH failure, for [`crate::Error::Ssh`].
    pub fn ssh(&self) -> Option<&SshError> {
        match self {
            crate::Error::Ssh(e) => e.downcast_ref::<SshError>(),
            _ => None,
        }
    }
}

/// Map an SFTP client error for `op` on `path`.
pub(crate) fn sftp_error(
    op: &'static str,
    path: &str,
    err: russh_sftp::client::error::Error,
) -> SshError {
    use russh_sftp::client::error::Error as E;
    use russh_sftp::protocol::StatusCode as S;
    let (kind, message) = match err {
        E::Status(status) => {
            let kind = match status.status_code {
                S::NoSuchFile => SftpErrorKind::NotFound,
                S::PermissionDenied => SftpErrorKind::PermissionDenied,
                S::OpUnsupported => SftpErrorKind::Unsupported,
                S::NoConnection | S::ConnectionLost => SftpErrorKind::ConnectionLost,
                S::BadMessage => SftpErrorKind::Protocol,
                _ => SftpErrorKind::Failure,
            };
            let message = if status.error_message.trim().is_empty() {
                status.status_code.to_string()
            } else {
                status.error_message
            };
            (kind, message)
        }
        E::Timeout => (
            SftpErrorKind::Timeout,
            "no answer from the SFTP server".to_string(),
        ),
        E::IO(m) => (SftpErrorKind::ConnectionLost, m),
        // "session closed" / "sender dropped": the channel is gone.
        E::UnexpectedBehavior(m) => (SftpErrorKind::ConnectionLost, m),
        E::UnexpectedPacket => (SftpErrorKind::Protocol, "unexpected packet".to_string()),
        E::Limited(m) => (SftpErrorKind::Failure, m),
    };
    SshError::Sftp {
        op,
        path: path.to_string(),
        kind,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_error_gives_the_ssh_error_back() {
        let err = crate::Error::from(SshError::protocol("handshake", "reset"));
        let ssh = err.ssh();
        assert!(matches!(ssh, Some(SshError::Protocol { context, .. }) if context == "handshake"));
        assert_eq!(err.to_string(), "SSH handshake: reset");
        assert!(format!("{err:?}").starts_with("Ssh(Protocol {"), "{err:?}");
        assert!(crate::Error::Cancelled.ssh().is_none());
    }
}
