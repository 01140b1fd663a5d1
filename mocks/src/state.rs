//! The shared state: [`Mock`] (everything the emulator knows), the [`AppState`] handle
//! routes receive, and the ownership helpers (`sandbox_for`, `running_sandbox`,
//! `require_credit`). It sits below every route module: it imports the stores it holds
//! (tenants, sandboxes, resources, processes, desktops, guest sshds, isolation, stats,
//! faults), never a route module nor the router (`app`).

use std::ops::Deref;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;

use crate::auth::{Caller, Tenants};
use crate::config::MockConfig;
use crate::envelope::ApiError;
use crate::faults::Faults;
use crate::isolation::Isolation;
use crate::resources::Resources;
use crate::sandbox::{SandboxRef, Sandboxes, Status};
use crate::stats::Stats;

/// Everything the emulator knows. Reached from handlers through [`AppState`].
pub struct Mock {
    pub config: MockConfig,
    /// Root of sandbox files (`<state_dir>/sandboxes/<id>/`) and disks.
    pub state_dir: PathBuf,
    /// True when the state dir is a temp dir the mock removes at shutdown.
    pub owns_state_dir: bool,
    pub isolation: Isolation,
    pub tenants: Tenants,
    pub sandboxes: Sandboxes,
    pub resources: Resources,
    pub stats: Stats,
    pub faults: Faults,
    /// Desktop state per sandbox (computer-use routes, module `computer`).
    pub computer: crate::computer::Desktops,
    /// Managed processes (module `process`).
    pub processes: crate::process::ProcessTable,
    /// What listens on port 22 in each sandbox (module `guest_sshd`).
    pub guest_sshd: crate::guest_sshd::GuestSshds,
    /// `http://127.0.0.1:PORT`, set once the listener is bound.
    pub base_url: OnceLock<String>,
    /// Cancelled when the mock shuts down (streams and background tasks stop).
    pub shutdown: CancellationToken,
}

impl std::fmt::Debug for Mock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mock")
            .field("state_dir", &self.state_dir)
            .finish_non_exhaustive()
    }
}

/// Cheap clonable handle to the [`Mock`]; derefs to it.
#[derive(Clone, Debug)]
pub struct AppState(pub Arc<Mock>);

impl Deref for AppState {
    type Target = Mock;
    fn deref(&self) -> &Mock {
        &self.0
    }
}

impl Mock {
    pub fn new(
        config: MockConfig,
        state_dir: PathBuf,
        owns_state_dir: bool,
        isolation: Isolation,
    ) -> Mock {
        let computer = crate::computer::Desktops::default();
        computer.set_startup_delay(config.desktop_startup);
        computer.set_screenshots_per_second(config.screenshots_per_second);
        let guest_sshd = crate::guest_sshd::GuestSshds::default();
        guest_sshd.set_mode(config.guest_sshd);
        Mock {
            config,
            state_dir,
            owns_state_dir,
            isolation,
            tenants: Tenants::default(),
            sandboxes: Sandboxes::default(),
            resources: Resources::default(),
            stats: Stats::default(),
            faults: Faults::default(),
            computer,
            processes: Default::default(),
            guest_sshd,
            base_url: OnceLock::new(),
            shutdown: CancellationToken::new(),
        }
    }

    /// `http://127.0.0.1:PORT` (empty before the listener is bound).
    pub fn base_url(&self) -> &str {
        self.base_url.get().map(String::as_str).unwrap_or("")
    }

    /// Directory of one sandbox's files.
    pub fn sandbox_dir(&self, id: &str) -> PathBuf {
        self.state_dir.join("sandboxes").join(id)
    }

    /// The caller's sandbox `id`: 404 `sandbox not found` when unknown, owned by another
    /// tenant, or when a delegated token of another sandbox is used.
    pub fn sandbox_for(&self, caller: &Caller, id: &str) -> Result<SandboxRef, ApiError> {
        let sandbox = self
            .sandboxes
            .get(id)
            .ok_or_else(ApiError::not_found_sandbox)?;
        if sandbox.tenant != caller.tenant {
            return Err(ApiError::not_found_sandbox());
        }
        if let Some(scope) = &caller.delegated_for {
            if scope != id {
                return Err(ApiError::not_found_sandbox());
            }
        }
        Ok(sandbox)
    }

    /// Like [`sandbox_for`](Self::sandbox_for), then 409 `sandbox is not running`
    /// unless the sandbox is running. Counts as activity for idle auto-pause.
    pub fn running_sandbox(&self, caller: &Caller, id: &str) -> Result<SandboxRef, ApiError> {
        let sandbox = self.sandbox_for(caller, id)?;
        if sandbox.status() != Status::Running {
            return Err(ApiError::not_running());
        }
        sandbox.touch();
        Ok(sandbox)
    }

    /// 402 when the caller's tenant has no credit (call after the owner check).
    pub fn require_credit(&self, caller: &Caller) -> Result<(), ApiError> {
        if self.tenants.has_credit(&caller.tenant) {
            Ok(())
        } else {
            Err(ApiError::payment_required())
        }
    }
}
