//! What answers on port 22 inside each sandbox (`MockConfig::guest_sshd`):
//!
//! * `OpenSsh`: nothing at boot; the client starts the host's real `/usr/sbin/sshd` inside
//!   the sandbox through the exec API, as the CLI does with real images.
//! * `Embedded`: an in-process russh server listens on port 22 of the sandbox's network
//!   namespace from boot (exec with stdin/stdout/stderr and exit status, SFTP, and
//!   direct-tcpip to the sandbox's loopback), with a host key kept for the sandbox's
//!   lifetime. Paused sandboxes do not answer; destroying one closes its server.
//! * `Absent`: an image without sshd: nothing listens and `/usr/sbin` is empty in the guest.
//!
//! `/_mock/sandboxes/{id}/guest-sshd` shows the embedded server's state and
//! `…/guest-sshd/restart` restarts it (optionally with a new host key), like restarting
//! sshd in a real guest (module [`routes`]; the rest imports no route module).

mod channel;
mod gate;
pub mod routes;
mod server;
mod session;
mod sftp;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::config::GuestSshd;
use crate::isolation::IsolationKind;
use crate::sandbox::SandboxRef;

/// Whether one authorized_keys line lists a key (kept here for callers of the guest sshd API).
pub use crate::ssh_common::line_lists_key as line_allows;
pub use server::{GuestServer, GUEST_SSH_PORT};

/// Guest directory an `Absent` image shows empty (where images ship sshd).
const SSHD_DIR: &str = "/usr/sbin";

/// The embedded servers of all sandboxes, and the mode in effect.
#[derive(Default)]
pub struct GuestSshds {
    mode: Mutex<GuestSshd>,
    servers: Mutex<HashMap<String, Arc<GuestServer>>>,
}

impl std::fmt::Debug for GuestSshds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestSshds")
            .field("mode", &self.mode())
            .finish_non_exhaustive()
    }
}

impl GuestSshds {
    /// Uses `mode` (with `Auto` resolved against this host) from now on.
    pub fn set_mode(&self, mode: GuestSshd) {
        *self.mode.lock().unwrap_or_else(|e| e.into_inner()) = mode.resolve();
    }

    /// The mode in effect (never `Auto`).
    pub fn mode(&self) -> GuestSshd {
        self.mode
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .resolve()
    }

    fn servers(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<GuestServer>>> {
        self.servers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The embedded server of sandbox `id`, when one runs.
    pub fn server(&self, id: &str) -> Option<Arc<GuestServer>> {
        self.servers().get(id).cloned()
    }

    /// Prepares port 22 of a new sandbox (created or forked) as the mode says; the server
    /// stops with `shutdown` (the emulator's). Failures are logged: the sandbox works, only
    /// SSH into it does not.
    pub fn boot(&self, shutdown: &CancellationToken, sandbox: &SandboxRef) {
        match self.mode() {
            GuestSshd::Embedded => {
                match GuestServer::start(sandbox.clone(), shutdown.child_token()) {
                    Ok(server) => {
                        self.servers().insert(sandbox.id.clone(), server);
                    }
                    Err(err) => tracing::warn!(
                        sandbox = %sandbox.id,
                        "embedded guest sshd not started ({err}); it needs a network namespace per sandbox \
                         (run the emulator as root on Linux)"
                    ),
                }
            }
            GuestSshd::Absent => hide_sshd(sandbox),
            GuestSshd::OpenSsh | GuestSshd::Auto => {}
        }
    }

    /// Freezes (pause) or thaws (resume) the sandbox's embedded server.
    pub fn set_frozen(&self, id: &str, frozen: bool) {
        if let Some(server) = self.server(id) {
            server.set_frozen(frozen);
        }
    }

    /// Closes the sandbox's server and every session (destroy).
    pub fn remove(&self, id: &str) {
        if let Some(server) = self.servers().remove(id) {
            server.stop();
        }
    }

    /// Closes every server (emulator shutdown).
    pub fn stop_all(&self) {
        for (_, server) in self.servers().drain() {
            server.stop();
        }
    }
}

/// Shows an empty directory at `/usr/sbin` in the sandbox's mount namespace, so the
/// host's sshd is not visible there.
fn hide_sshd(sandbox: &SandboxRef) {
    let runtime = sandbox.runtime();
    if runtime.kind() != IsolationKind::Namespaces {
        tracing::warn!(
            sandbox = %sandbox.id,
            "guest sshd mode `absent` cannot hide the host's {SSHD_DIR} without namespace isolation"
        );
        return;
    }
    // Beside the sandbox's private dirs, so the guest cannot see or fill it.
    let empty = runtime.dir().join(".image").join("usr-sbin");
    if let Err(err) = runtime.add_mount(Path::new(&empty), SSHD_DIR) {
        tracing::warn!(sandbox = %sandbox.id, "cannot hide {SSHD_DIR}: {err}");
    }
}
