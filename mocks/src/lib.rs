//! `createos-mock`: a local emulator of the CreateOS sandbox control plane that runs
//! real processes. Start it in-process with [`start`] or as the `createos-mock` binary.

pub mod app;
pub mod auth;
pub mod catalog;
pub mod clock;
pub mod computer;
pub mod config;
pub mod envelope;
pub mod exec;
mod extract;
pub mod faults;
pub mod files;
pub mod fsutil;
pub mod guest_fs;
pub mod guest_sshd;
pub mod ids;
pub mod isolation;
mod lifecycle_tasks;
pub mod middleware;
pub mod mock_api;
pub mod ndjson;
pub mod oauth;
pub mod operation;
pub mod process;
pub mod resources;
pub mod routes;
pub mod sandbox;
pub mod server;
pub mod ssh_common;
pub mod ssh_gateway;
pub mod state;
pub mod stats;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::task::JoinHandle;

pub use config::{GuestSshd, IsolationMode, Latencies, MockConfig};
pub use isolation::IsolationReport;
pub use state::{AppState, Mock};

/// A running emulator. Call [`MockHandle::shutdown`] to stop it; dropping the handle
/// also kills every process it started (synchronously, best effort).
pub struct MockHandle {
    state: AppState,
    addr: SocketAddr,
    /// The CA of `--tls` (`None`: plain HTTP).
    ca_file: Option<PathBuf>,
    ssh_gateway: Option<ssh_gateway::SshGateway>,
    server: Option<JoinHandle<()>>,
    cleaned: Arc<AtomicBool>,
}

impl std::fmt::Debug for MockHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockHandle")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl MockHandle {
    /// `http://127.0.0.1:PORT` (`https://` with `MockConfig::tls`).
    pub fn base_url(&self) -> String {
        self.state.base_url().to_string()
    }

    /// The PEM file of the CA that signed the emulator's certificate (`MockConfig::tls`).
    pub fn ca_file(&self) -> Option<&std::path::Path> {
        self.ca_file.as_deref()
    }

    /// The first tenant's API key.
    pub fn api_key(&self) -> String {
        self.state.tenants.first_key().unwrap_or_default()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn state(&self) -> AppState {
        self.state.clone()
    }

    /// What this emulator isolates (the same object as its ready line's `"isolation"` and
    /// `GET /_mock/isolation`). `isolated` is false when sandbox commands are not kept
    /// apart from the host: a caller that routes untrusted work into sandboxes should then
    /// refuse unless the user opted out.
    pub fn isolation(&self) -> IsolationReport {
        self.state.isolation.report().clone()
    }

    /// The SSH gateway's address, when started with `MockConfig::ssh_gateway`.
    pub fn ssh_gateway_addr(&self) -> Option<SocketAddr> {
        self.ssh_gateway.as_ref().map(|g| g.addr())
    }

    /// Stops serving, kills every sandbox process, removes cgroups and temp state.
    pub async fn shutdown(mut self) {
        self.state.shutdown.cancel();
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
        let state = self.state.clone();
        let cleaned = Arc::clone(&self.cleaned);
        let _ = tokio::task::spawn_blocking(move || cleanup(&state, &cleaned)).await;
    }
}

impl Drop for MockHandle {
    fn drop(&mut self) {
        self.state.shutdown.cancel();
        cleanup(&self.state, &self.cleaned);
    }
}

/// Kills everything and removes what the mock created (idempotent).
fn cleanup(state: &AppState, cleaned: &AtomicBool) {
    if cleaned.swap(true, Ordering::SeqCst) {
        return;
    }
    state.guest_sshd.stop_all();
    state.processes.kill_all();
    for sandbox in state.sandboxes.all() {
        state.processes.kill_sandbox(&sandbox.id);
        sandbox.runtime().destroy(state.owns_state_dir);
    }
    state.isolation.cleanup();
    if state.owns_state_dir {
        let _ = std::fs::remove_dir_all(&state.state_dir);
    }
}

fn temp_state_dir() -> PathBuf {
    std::env::temp_dir().join(format!(
        "createos-mock-{}-{}",
        std::process::id(),
        ids::random_token(8)
    ))
}

/// Starts the emulator: binds the listener, prepares isolation and tenants, and serves
/// in a background task of the current tokio runtime.
pub async fn start(config: MockConfig) -> anyhow::Result<MockHandle> {
    // Everything that can fail on bad input is checked before anything is created.
    let faults = faults::Faults::default();
    for rule in &config.faults {
        faults
            .add(rule)
            .map_err(|e| anyhow::anyhow!("--fault {rule:?}: {e}"))?;
    }
    config::GuestSshd::from_env().map_err(anyhow::Error::msg)?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let (state_dir, owns) = match &config.state_dir {
        Some(dir) => (dir.clone(), false),
        None => (temp_state_dir(), true),
    };
    std::fs::create_dir_all(state_dir.join("sandboxes"))?;
    let state_dir = state_dir.canonicalize()?;
    #[cfg(unix)]
    if owns {
        // Sandbox files are the emulator's: no other host user (nor a sandbox's uid) walks in.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&state_dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let isolation = {
        let mode = config.isolation;
        let dir = state_dir.clone();
        tokio::task::spawn_blocking(move || isolation::Isolation::init(mode, &dir)).await?
    };
    let isolation = match isolation {
        Ok(i) => i,
        Err(err) => {
            if owns {
                let _ = std::fs::remove_dir_all(&state_dir);
            }
            return Err(err);
        }
    };

    let mut mock = Mock::new(config.clone(), state_dir, owns, isolation);
    mock.faults = faults;
    let keys = if config.api_keys.is_empty() {
        vec![format!("skp_{}", ids::random_token(40))]
    } else {
        config.api_keys.clone()
    };
    for key in keys {
        mock.tenants.add(key, true);
    }
    let tls = if config.tls {
        match tls::setup(&mock.state_dir, addr.ip()) {
            Ok(tls) => Some(tls),
            Err(err) => {
                mock.isolation.cleanup();
                if owns {
                    let _ = std::fs::remove_dir_all(&mock.state_dir);
                }
                return Err(err);
            }
        }
    } else {
        None
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let host = addr.to_string();
    let _ = mock.base_url.set(format!("{scheme}://{host}"));
    let state = AppState(Arc::new(mock));

    let ssh_gateway = if config.ssh_gateway {
        let listen = SocketAddr::new(config.listen.ip(), 0);
        match ssh_gateway::start(state.clone(), listen).await {
            Ok(gateway) => Some(gateway),
            Err(err) => {
                state.shutdown.cancel();
                cleanup(&state, &AtomicBool::new(false));
                return Err(err.context("starting the SSH gateway"));
            }
        }
    } else {
        None
    };
    lifecycle_tasks::spawn_background(&state);
    let router = app::build_router(state.clone());
    let ca_file = tls.as_ref().map(|t| t.ca_file.clone());
    let server = tokio::spawn(server::serve(
        listener,
        router,
        state.shutdown.clone(),
        tls.map(|t| t.acceptor),
    ));
    tracing::info!(base_url = %state.base_url(), "createos-mock listening");
    Ok(MockHandle {
        state,
        addr,
        ca_file,
        ssh_gateway,
        server: Some(server),
        cleaned: Arc::new(AtomicBool::new(false)),
    })
}
