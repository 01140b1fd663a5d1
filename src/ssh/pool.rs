//! [`SshPool`]: one [`SshSession`] per sandbox id, shared by every caller, so concurrent
//! users of a sandbox multiplex channels over a single connection (one tunnel).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::api::sandboxes::Sandbox;
use crate::error::Result;

use super::options::SshOptions;
use super::session::SshSession;

/// Sessions by sandbox id.
///
/// ```no_run
/// # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
/// use createos_sandbox::ssh::{SshOptions, SshPool};
/// let pool = SshPool::new(SshOptions::new());
/// let (a, b) = tokio::join!(pool.session(&sandbox), pool.session(&sandbox));
/// // Both callers got the same connection.
/// let (a, b) = (a?, b?);
/// let (x, y) = tokio::join!(a.exec("hostname"), b.exec("uptime"));
/// println!("{} {}", x?.stdout_text(), y?.stdout_text());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct SshPool {
    options: SshOptions,
    sessions: Mutex<HashMap<String, SshSession>>,
}

impl SshPool {
    /// A pool whose sessions use `options`.
    pub fn new(options: SshOptions) -> Self {
        SshPool {
            options,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// The process-wide pool with default options (root over the tunnel, keys in the user's
    /// config dir), used by [`Sandbox::ssh`].
    pub fn global() -> &'static SshPool {
        static POOL: OnceLock<SshPool> = OnceLock::new();
        POOL.get_or_init(|| SshPool::new(SshOptions::default()))
    }

    /// The options of new sessions.
    pub fn options(&self) -> &SshOptions {
        &self.options
    }

    /// The session of `sandbox`, created on first use, connected (or reconnected) before it
    /// is returned.
    pub async fn session(&self, sandbox: &Sandbox) -> Result<SshSession> {
        let session = self.entry(sandbox)?;
        session.ensure_connected().await?;
        Ok(session)
    }

    /// The session of `sandbox` without connecting (it connects on first use).
    pub fn entry(&self, sandbox: &Sandbox) -> Result<SshSession> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = sessions.get(sandbox.id()) {
            return Ok(existing.clone());
        }
        let session = SshSession::new(sandbox, self.options.clone())?;
        sessions.insert(sandbox.id().to_string(), session.clone());
        Ok(session)
    }

    /// The session of `sandbox_id` if the pool holds one; nothing is created or connected
    /// (see [`SshSession::is_connected`] for whether it is up).
    pub fn existing(&self, sandbox_id: &str) -> Option<SshSession> {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(sandbox_id)
            .cloned()
    }

    /// Drop the session of `sandbox_id` (e.g. after destroying the sandbox) and close its
    /// connection. Returns whether there was one.
    pub async fn remove(&self, sandbox_id: &str) -> bool {
        let removed = self
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(sandbox_id);
        match removed {
            Some(session) => {
                session.disconnect().await;
                true
            }
            None => false,
        }
    }

    /// Sandboxes with a session in the pool.
    pub fn len(&self) -> usize {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// No sessions.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Sandbox {
    /// The shared SSH session of this sandbox from [`SshPool::global`] (root over the
    /// tunnel; the guest is prepared on the first connect).
    ///
    /// ```no_run
    /// # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
    /// let ssh = sandbox.ssh().await?;
    /// let out = ssh.exec("cat /etc/os-release").await?;
    /// println!("{}", out.stdout_text());
    /// # Ok(()) }
    /// ```
    pub async fn ssh(&self) -> Result<SshSession> {
        SshPool::global().session(self).await
    }
}
