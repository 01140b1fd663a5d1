//! Sandboxes (E7–E17): create, find, list, and the [`Sandbox`] handle with its lifecycle.

mod models;
mod wait;

use std::sync::{Arc, RwLock};
use std::time::Duration;

pub use models::*;
pub use wait::WaitSchedule;

use crate::api::endpoints as ep;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::pagination::Paginated;
use crate::transport::Call;
use crate::validate;

impl Client {
    /// Create a sandbox and return it running (E7). Not retried on a broken connection (the
    /// server may have created it); 429/503 are retried because the server did not apply them.
    pub async fn create_sandbox(&self, request: CreateSandbox) -> Result<Sandbox> {
        request.validate()?;
        let call = Call::new(&ep::CREATE_SANDBOX).json(&request)?;
        let view: SandboxView = self.transport.json(call).await?;
        Ok(Sandbox::from_view(self.clone(), view))
    }

    /// Every sandbox of the caller, newest last, optionally of one status (E8).
    pub fn list_sandboxes(&self, filter: ListSandboxes) -> Paginated<SandboxView> {
        let status = filter.status.map(|s| s.as_str().to_string());
        Paginated::new(self.transport.clone(), move || {
            Call::new(&ep::LIST_SANDBOXES).query_opt("status", status.clone())
        })
    }

    /// Fetch a sandbox by id (E9). Destroyed sandboxes stay readable.
    pub async fn get_sandbox(&self, id: &str) -> Result<Sandbox> {
        validate::id("sandbox id", id)?;
        let view: SandboxView = self
            .transport
            .json(Call::new(&ep::GET_SANDBOX).param(id))
            .await?;
        Ok(Sandbox::from_view(self.clone(), view))
    }

    /// Fetch the caller's sandbox with this private IP (E10).
    pub async fn get_sandbox_by_ip(&self, ip: &str) -> Result<Sandbox> {
        let parsed: std::net::IpAddr = ip
            .parse()
            .map_err(|_| Error::invalid("ip", format!("{ip:?} is not an IP address")))?;
        let call = Call::new(&ep::GET_SANDBOX_BY_IP).param(parsed.to_string());
        let view: SandboxView = self.transport.json(call).await?;
        Ok(Sandbox::from_view(self.clone(), view))
    }

    /// A handle on a sandbox id without fetching it; the cached view holds only the id until the
    /// first call that returns one (or [`Sandbox::refresh`]).
    pub fn sandbox(&self, id: &str) -> Result<Sandbox> {
        validate::id("sandbox id", id)?;
        Ok(Sandbox::from_view(
            self.clone(),
            SandboxView {
                id: id.to_string(),
                ..Default::default()
            },
        ))
    }
}

/// A sandbox: its id, the client it lives on, and the last view the server gave of it.
///
/// Cheap to clone; clones share the cached view, which every mutating call refreshes.
#[derive(Clone)]
pub struct Sandbox {
    pub(crate) client: Client,
    id: Arc<str>,
    view: Arc<RwLock<SandboxView>>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("id", &self.id)
            .field("status", &self.status())
            .finish()
    }
}

impl Sandbox {
    pub(crate) fn from_view(client: Client, view: SandboxView) -> Self {
        Sandbox {
            client,
            id: Arc::from(view.id.as_str()),
            view: Arc::new(RwLock::new(view)),
        }
    }

    /// The `sb-…` id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The client this sandbox lives on.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The last view the server gave.
    pub fn view(&self) -> SandboxView {
        self.view.read().expect("view lock").clone()
    }

    /// Status in the cached view.
    pub fn status(&self) -> SandboxStatus {
        self.view.read().expect("view lock").status.clone()
    }

    /// Replace the cached view (ids must match).
    pub(crate) fn store(&self, view: SandboxView) {
        if view.id == *self.id {
            *self.view.write().expect("view lock") = view;
        }
    }

    /// Merge a partial answer (pause/resume may carry only id and status).
    fn store_partial(&self, view: SandboxView) {
        let mut cached = self.view.write().expect("view lock");
        if view.vcpu == 0 && view.created_at.is_none() {
            cached.status = view.status;
        } else if view.id == *self.id {
            *cached = view;
        }
    }

    /// Fetch the current view (E9) and cache it.
    pub async fn refresh(&self) -> Result<SandboxView> {
        let view: SandboxView = self
            .client
            .transport
            .json(Call::new(&ep::GET_SANDBOX).param(&*self.id))
            .await?;
        self.store(view.clone());
        Ok(view)
    }

    /// Change settings (E11).
    pub async fn update(&self, changes: UpdateSandbox) -> Result<SandboxView> {
        changes.validate()?;
        let call = Call::new(&ep::UPDATE_SANDBOX)
            .param(&*self.id)
            .json(&changes)?;
        let view: SandboxView = self.client.transport.json(call).await?;
        self.store(view.clone());
        Ok(view)
    }

    /// Destroy (E12). Idempotent: destroying a destroyed sandbox succeeds, and a 404 counts as
    /// already gone.
    pub async fn destroy(&self) -> Result<Destroyed> {
        let call = Call::new(&ep::DESTROY_SANDBOX).param(&*self.id);
        let out = match self.client.transport.json::<Destroyed>(call).await {
            Ok(d) => d,
            Err(e) if e.is_not_found() => Destroyed {
                id: self.id.to_string(),
                status: SandboxStatus::Destroyed,
            },
            Err(e) => return Err(e),
        };
        self.view.write().expect("view lock").status = out.status.clone();
        Ok(out)
    }

    /// Ask for a pause (E13) and return at once; the status is `pausing` (or `paused`). Use
    /// [`Self::pause_and_wait`] to wait for the snapshot.
    pub async fn pause(&self) -> Result<SandboxView> {
        let (view, _) = self.lifecycle(&ep::PAUSE_SANDBOX).await?;
        Ok(view)
    }

    /// Pause and wait until `paused`, honouring the server's `X-Poll-After`.
    pub async fn pause_and_wait(&self) -> Result<SandboxView> {
        let (_, poll_after) = self.lifecycle(&ep::PAUSE_SANDBOX).await?;
        self.wait_for(SandboxStatus::Paused, None, poll_after).await
    }

    /// Ask for a resume (E14) from `paused` or `error`.
    pub async fn resume(&self) -> Result<SandboxView> {
        let (view, _) = self.lifecycle(&ep::RESUME_SANDBOX).await?;
        Ok(view)
    }

    /// Resume and wait until `running`.
    pub async fn resume_and_wait(&self) -> Result<SandboxView> {
        let (_, poll_after) = self.lifecycle(&ep::RESUME_SANDBOX).await?;
        self.wait_for(SandboxStatus::Running, None, poll_after)
            .await
    }

    async fn lifecycle(
        &self,
        endpoint: &'static ep::Endpoint,
    ) -> Result<(SandboxView, Option<Duration>)> {
        let answer = self
            .client
            .transport
            .json_answer::<SandboxView>(Call::new(endpoint).param(&*self.id))
            .await?;
        let poll_after = answer
            .headers
            .get("x-poll-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0 && *s < 600.0)
            .map(Duration::from_secs_f64);
        self.store_partial(answer.data);
        Ok((self.view(), poll_after))
    }

    /// Clone this paused sandbox into a new one (E15). The source must be `paused` or `pausing`;
    /// attached disks are not carried over.
    pub async fn fork(&self, options: ForkOptions) -> Result<Sandbox> {
        if let Some(envs) = &options.envs {
            validate::envs("envs", envs)?;
        }
        if let Some(rules) = &options.egress {
            for rule in rules {
                crate::api::security::validate_egress_rule(rule)?;
            }
        }
        let call = Call::new(&ep::FORK_SANDBOX)
            .param(&*self.id)
            .json(&options)?;
        let child: SandboxView = self.client.transport.json(call).await?;
        Ok(Sandbox::from_view(self.client.clone(), child))
    }

    /// Grow the root disk to `disk_mib` (E16); it must exceed the current size.
    pub async fn resize_disk(&self, disk_mib: u64) -> Result<Resized> {
        if disk_mib == 0 {
            return Err(Error::invalid("disk_mib", "must be greater than zero"));
        }
        let call = Call::new(&ep::RESIZE_SANDBOX)
            .param(&*self.id)
            .json(&serde_json::json!({ "disk_mib": disk_mib }))?;
        let out: Resized = self.client.transport.json(call).await?;
        self.view.write().expect("view lock").disk_mib = out.disk_mib;
        Ok(out)
    }

    /// Authorize more SSH public keys (E17); answers the total after de-duplication.
    pub async fn add_ssh_pubkeys(&self, keys: &[String]) -> Result<SshKeyCount> {
        if keys.is_empty() {
            return Err(Error::invalid("keys", "no key given"));
        }
        for key in keys {
            let mut parts = key.split_whitespace();
            let ok = matches!(parts.next(), Some(kind) if kind.starts_with("ssh-") || kind.starts_with("ecdsa-") || kind.starts_with("sk-"))
                && parts.next().is_some();
            if !ok {
                return Err(Error::invalid(
                    "keys",
                    "each key must be an OpenSSH public key line (`ssh-ed25519 AAAA… comment`)",
                ));
            }
        }
        let call = Call::new(&ep::ADD_SSH_PUBKEYS)
            .param(&*self.id)
            .json(&serde_json::json!({ "keys": keys }))?;
        self.client.transport.json(call).await
    }

    /// Wait until `running` (aborting on `error`, `failed`, `destroying`, `destroyed`).
    pub async fn wait_until_running(&self, timeout: Option<Duration>) -> Result<SandboxView> {
        self.wait_for(SandboxStatus::Running, timeout, None).await
    }

    /// Wait until `paused`.
    pub async fn wait_until_paused(&self, timeout: Option<Duration>) -> Result<SandboxView> {
        self.wait_for(SandboxStatus::Paused, timeout, None).await
    }

    /// Wait until `destroyed` (a 404 also counts: the row is gone).
    pub async fn wait_until_destroyed(&self, timeout: Option<Duration>) -> Result<SandboxView> {
        self.wait_for(SandboxStatus::Destroyed, timeout, None).await
    }

    async fn wait_for(
        &self,
        target: SandboxStatus,
        timeout: Option<Duration>,
        first_delay: Option<Duration>,
    ) -> Result<SandboxView> {
        let budget = timeout.unwrap_or_else(|| self.client.wait_timeout());
        wait::poll_until(self, target, budget, first_delay).await
    }
}
