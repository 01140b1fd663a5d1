//! Helpers shared by the SSH test binaries (`ssh.rs`, `ssh_keys.rs`, `ssh_gateway.rs`):
//! the guest sshd modes, the `each_guest!` dual-mode runner and small utilities.
#![allow(dead_code)]

use std::time::Duration;

use createos_mock::{GuestSshd, MockConfig};
use createos_sandbox::api::exec::ExecRequest;
use createos_sandbox::ssh::{SshError, SshFiles, SshOptions};
use createos_sandbox::{CreateSandbox, Error, Sandbox};
use sha2::{Digest, Sha256};

use crate::common;

/// Bound on anything that could hang, so a broken connection fails the test.
pub const GUARD: Duration = Duration::from_secs(120);

/// Which guest sshd a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guest {
    /// Real OpenSSH when the machine has it (else the embedded server).
    OpenSsh,
    /// The emulator's embedded server, always.
    Embedded,
}

impl Guest {
    pub fn config(self) -> MockConfig {
        let mode = match self {
            Guest::OpenSsh => GuestSshd::Auto,
            Guest::Embedded => GuestSshd::Embedded,
        };
        MockConfig::default().guest_sshd(mode)
    }

    pub async fn start(self) -> common::Env {
        common::start_with(self.config()).await
    }
}

/// Whether `env`'s guests run the embedded server (rather than real OpenSSH).
pub fn embedded(env: &common::Env) -> bool {
    env.mock.state().guest_sshd.mode() == GuestSshd::Embedded
}

/// Runs the async test fn `$name(guest)` once per guest sshd mode.
macro_rules! each_guest {
    ($name:ident) => {
        mod $name {
            #[tokio::test]
            async fn openssh() {
                super::$name($crate::ssh_support::Guest::OpenSsh).await
            }

            #[tokio::test]
            async fn embedded() {
                super::$name($crate::ssh_support::Guest::Embedded).await
            }
        }
    };
}

pub fn options(dir: &tempfile::TempDir) -> SshOptions {
    SshOptions::new()
        .files(SshFiles::at(dir.path()))
        .connect_timeout(Duration::from_secs(60))
}

pub async fn sandbox(env: &common::Env) -> Sandbox {
    env.client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb"))
        .await
        .expect("create sandbox")
}

pub async fn guarded<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {GUARD:?}"))
}

/// Deterministic pseudo-random bytes (xorshift), so a mismatch is reproducible.
pub fn pattern(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        out.extend_from_slice(&seed.to_le_bytes());
    }
    out.truncate(len);
    out
}

pub fn hex_sha256(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Run a shell script in the sandbox through the exec API (not SSH).
pub async fn api_sh(sb: &Sandbox, script: &str) -> String {
    let out = sb
        .exec_with(ExecRequest::new("sh").args(["-c", script]))
        .await
        .expect("exec API");
    assert!(
        out.success(),
        "script failed ({}): {}\n{}",
        out.exit_code,
        out.stderr,
        script
    );
    out.stdout
}

pub fn ssh_error(err: &Error) -> &SshError {
    err.ssh()
        .unwrap_or_else(|| panic!("expected an SSH error, got {err:?}"))
}
