//! A session's sandbox: allocation (single-flight, under the runtime's lifetime), reattach to a
//! stored binding, preparation (working directory, `sync: once`, skills), and recovery when a
//! call finds the bound sandbox gone or stopped.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{is_gone, Bound, Notice, Runtime, Session};
use crate::tools::progress::{self, Reporter};
use crate::tools::store::BindingRecord;
use crate::tools::{staging, CallCtx, Part, ToolError, ToolOutput};
use createos_sandbox::api::processes::{ProcessSpec, RunOptions};
use createos_sandbox::guest::{GuestErrorCode, Resident};
use createos_sandbox::{CreateSandbox, Error, Sandbox, SandboxStatus};

/// How long preparing a new sandbox (readiness, working directory) may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(180);

/// What a stored binding turned out to be.
enum Reattached {
    Bound(Bound),
    /// The sandbox no longer exists (its id).
    Gone(String),
}

/// An error that may mean the sandbox is gone or not running (the control plane refused the
/// request, so nothing ran): worth one revalidation and one retry.
fn maybe_unavailable(err: &ToolError) -> bool {
    matches!(err, ToolError::Api(Error::NotFound(_) | Error::Conflict(_)))
}

impl Runtime {
    /// Run `work` in the session's sandbox (allocated or reattached on first use). A warm
    /// call costs nothing extra: the binding is not revalidated. When `work` fails because the
    /// control plane refused it (404/409), the sandbox is looked at once: a paused one is
    /// resumed, a gone one is replaced by a fresh session sandbox (prepared as any new one),
    /// and `work` runs once more ([`crate::tools::call`] adds the notice to the result).
    pub async fn with_session<F, Fut>(
        self: &Arc<Self>,
        ctx: &CallCtx,
        work: F,
    ) -> Result<ToolOutput, ToolError>
    where
        F: Fn(Sandbox) -> Fut,
        Fut: Future<Output = Result<ToolOutput, ToolError>>,
    {
        let sandbox = self.session_sandbox(&ctx.session, ctx).await?;
        match work(sandbox.clone()).await {
            Err(err) if maybe_unavailable(&err) => {
                tracing::debug!(session = %ctx.session, sandbox = %sandbox.id(), error = %err, "revalidating the session sandbox");
                let fresh = self.revalidate(&ctx.session, &sandbox, ctx).await?;
                work(fresh).await
            }
            other => other,
        }
    }

    /// Add the pending notice of `session` (its sandbox was replaced), if any, to `output`:
    /// the model reads it once, in the result of the call that ran in the new sandbox.
    pub fn with_notice(&self, session: &str, mut output: ToolOutput) -> ToolOutput {
        let notice = self
            .session(session)
            .notice
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(n) = notice {
            output.content.push(Part::Text(format!(
                "Note: the previous session sandbox {} no longer exists; this call ran in a new sandbox, {}.",
                n.previous, n.current
            )));
            output
                .meta
                .insert("previousSandboxId".into(), json!(n.previous));
        }
        output
    }

    /// The session's sandbox, allocating or reattaching it on first use. Concurrent first calls
    /// share one allocation. The allocation itself runs under the runtime's lifetime, not the
    /// call's token: a cancelled call stops waiting, but the sandbox is still recorded. A bound
    /// sandbox is returned as it is (no request).
    pub async fn session_sandbox(
        self: &Arc<Self>,
        session: &str,
        ctx: &CallCtx,
    ) -> Result<Sandbox, ToolError> {
        let slot = self.session(session);
        if let Ok(binding) = slot.binding.try_lock() {
            if let Some(bound) = binding.as_ref() {
                return Ok(bound.sandbox.clone());
            }
        }
        let reporter = progress::announce(ctx, "preparing the session sandbox");
        let this = self.clone();
        let name = session.to_string();
        detached(ctx, "session allocation", async move {
            let mut binding = slot.binding.lock().await;
            if let Some(bound) = binding.as_ref() {
                return Ok(bound.sandbox.clone());
            }
            let bound = opening(&slot, this.open(&name, reporter.as_ref())).await?;
            let sandbox = bound.sandbox.clone();
            *binding = Some(bound);
            Ok(sandbox)
        })
        .await
    }

    /// After a refused call: look at `stale` once. Running: the helper was the problem, start
    /// it afresh. Paused or moving: bring it back. Gone: bind a fresh session sandbox. Returns
    /// the sandbox to retry in.
    async fn revalidate(
        self: &Arc<Self>,
        session: &str,
        stale: &Sandbox,
        ctx: &CallCtx,
    ) -> Result<Sandbox, ToolError> {
        let slot = self.session(session);
        let this = self.clone();
        let name = session.to_string();
        let stale = stale.clone();
        let reporter =
            progress::announce(ctx, format!("checking the session sandbox {}", stale.id()));
        detached(ctx, "session recovery", async move {
            let mut binding = slot.binding.lock().await;
            if let Some(bound) = binding.as_ref().filter(|b| b.sandbox.id() != stale.id()) {
                // Another call replaced it meanwhile.
                return Ok(bound.sandbox.clone());
            }
            let current = match this.client().get_sandbox(stale.id()).await {
                Ok(current) if !is_gone(&current.status()) => Some(current),
                Ok(_) => None,
                Err(e) if e.is_not_found() => None,
                Err(e) => return Err(ToolError::from(e)),
            };
            if let Some(current) = current {
                if current.status() == SandboxStatus::Running {
                    // The sandbox is fine: its helper was what refused. Start it afresh.
                    Resident::of(&stale).reset().await;
                    return Ok(stale.clone());
                }
                if let Some(r) = &reporter {
                    r.phase(format!("resuming the session sandbox {}", stale.id()));
                }
                ready(&current).await?;
                return Ok(stale.clone());
            }
            tracing::info!(session = %name, sandbox = %stale.id(), "the session sandbox no longer exists; allocating a new one");
            Resident::forget(&stale);
            this.background.stop_for_sandbox(stale.id()).await;
            *binding = None;
            if this.config.persist {
                this.store().await?.remove(&name)?;
            }
            let bound = opening(&slot, this.create(&name, reporter.as_ref())).await?;
            let sandbox = bound.sandbox.clone();
            *slot.notice.lock().unwrap_or_else(|e| e.into_inner()) = Some(Notice { previous: stale.id().to_string(), current: sandbox.id().to_string() });
            *binding = Some(bound);
            Ok(sandbox)
        })
        .await
    }

    /// Reattach to the stored binding, or create and prepare a new sandbox.
    async fn open(&self, session: &str, progress: Option<&Reporter>) -> Result<Bound, ToolError> {
        if self.lifetime.is_cancelled() {
            return Err(ToolError::Refused(
                "the tool server is shutting down".into(),
            ));
        }
        if self.config.persist {
            if let Some(record) = self.store().await?.load(session)? {
                match self.reattach(session, record, progress).await? {
                    Reattached::Bound(bound) => return Ok(bound),
                    Reattached::Gone(previous) => {
                        tracing::info!(session, sandbox = %previous, "the stored session sandbox no longer exists; allocating a new one");
                        self.store().await?.remove(session)?;
                        let bound = self.create(session, progress).await?;
                        let current = bound.record.id.clone();
                        *self
                            .session(session)
                            .notice
                            .lock()
                            .unwrap_or_else(|e| e.into_inner()) =
                            Some(Notice { previous, current });
                        return Ok(bound);
                    }
                }
            }
        }
        self.create(session, progress).await
    }

    /// Create and prepare a new session sandbox, recorded before it is prepared so a crash
    /// never loses track of it; destroyed again if preparing it fails.
    async fn create(&self, session: &str, progress: Option<&Reporter>) -> Result<Bound, ToolError> {
        if let Some(r) = progress {
            r.phase("creating the session sandbox");
        }
        let mut request = CreateSandbox::new(&self.config.shape)
            .rootfs(&self.config.rootfs)
            .name(format!(
                "cos-{:012x}",
                rand::random::<u64>() & 0xffff_ffff_ffff
            ));
        if let Some(net) = &self.config.network {
            request = request.network(net);
        }
        if let Some(secs) = self.config.auto_pause_secs() {
            request = request.auto_pause_after(secs);
        }
        let sandbox = self.client().create_sandbox(request).await?;
        let mut record = BindingRecord {
            id: sandbox.id().to_string(),
            cwd: self.config.cwd.clone(),
            source: self.source(),
            owned: true,
            initialized: false,
        };
        tracing::info!(session, sandbox = %record.id, "allocated a session sandbox");
        let prepared = async {
            if self.config.persist {
                self.store().await?.save(session, &record)?;
            }
            tokio::time::timeout(SETUP_TIMEOUT, self.prepare(&sandbox, progress))
                .await
                .map_err(|_| ToolError::Timeout(SETUP_TIMEOUT))??;
            record.initialized = true;
            if self.config.persist {
                self.store().await?.save(session, &record)?;
            }
            Ok::<(), ToolError>(())
        }
        .await;
        if let Err(err) = prepared {
            // Never leak what this runtime just created.
            let cleanup = sandbox.destroy().await;
            Resident::forget(&sandbox);
            if self.config.persist {
                if let Ok(store) = self.store().await {
                    let _ = store.remove(session);
                }
            }
            return Err(match cleanup {
                Ok(_) => err,
                Err(destroy_err) => ToolError::Refused(format!(
                    "{err}; destroying the new sandbox {} also failed ({destroy_err}): it is still allocated, remove it with `cos rm {}`",
                    record.id, record.id
                )),
            });
        }
        Ok(Bound { sandbox, record })
    }

    async fn reattach(
        &self,
        session: &str,
        mut record: BindingRecord,
        progress: Option<&Reporter>,
    ) -> Result<Reattached, ToolError> {
        if record.source != self.source() || record.cwd != self.config.cwd {
            return Err(ToolError::Refused(format!(
                "stored sandbox configuration changed (bound {} at {}, configured {} at {}); release it (or forget it) before reopening",
                record.source,
                record.cwd,
                self.source(),
                self.config.cwd
            )));
        }
        let sandbox = match self.client().get_sandbox(&record.id).await {
            Ok(s) if is_gone(&s.status()) => return Ok(Reattached::Gone(record.id)),
            Ok(s) => s,
            Err(e) if e.is_not_found() => return Ok(Reattached::Gone(record.id)),
            Err(e) => return Err(e.into()),
        };
        if sandbox.status() != SandboxStatus::Running {
            if let Some(r) = progress {
                r.phase(format!("resuming the session sandbox {}", record.id));
            }
        }
        ready(&sandbox).await?;
        if !record.initialized {
            self.prepare(&sandbox, progress).await?;
            record.initialized = true;
            self.store().await?.save(session, &record)?;
        } else {
            // Skills may have changed since the last attach; the project copy never repeats.
            self.stage_skills(&sandbox, progress).await?;
        }
        tracing::info!(session, sandbox = %record.id, "reattached the session sandbox");
        Ok(Reattached::Bound(Bound { sandbox, record }))
    }

    /// Make a sandbox that was never initialized ready: working directory, the one-time
    /// project copy (`sync: "once"`), then the skills.
    async fn prepare(
        &self,
        sandbox: &Sandbox,
        progress: Option<&Reporter>,
    ) -> Result<(), ToolError> {
        ready(sandbox).await?;
        make_dir(sandbox, &self.config.cwd).await?;
        if let Some(r) =
            progress.filter(|_| self.config.sync == crate::tools::config::ProjectSync::Once)
        {
            r.phase("copying the project into the session sandbox");
        }
        if let Some(files) =
            staging::stage_project(sandbox, &self.config, &self.project_dir).await?
        {
            tracing::info!(sandbox = %sandbox.id(), files, "copied the project into the session sandbox");
        }
        self.stage_skills(sandbox, progress).await
    }

    async fn stage_skills(
        &self,
        sandbox: &Sandbox,
        progress: Option<&Reporter>,
    ) -> Result<(), ToolError> {
        if let Some(r) =
            progress.filter(|_| self.config.sync_skills && !self.config.skill_dirs.is_empty())
        {
            r.phase("copying the skills into the session sandbox");
        }
        let staged = staging::stage_skills(sandbox, &self.config, &self.project_dir).await?;
        if !staged.is_empty() {
            tracing::info!(sandbox = %sandbox.id(), dirs = ?staged, "copied skill directories into the session sandbox");
        }
        Ok(())
    }
}

/// Run `work` on a task of its own, so it completes (and its sandbox is recorded) even when the
/// caller gives up; the caller waits for it unless its call is cancelled.
async fn detached<T: Send + 'static>(
    ctx: &CallCtx,
    what: &str,
    work: impl Future<Output = Result<T, ToolError>> + Send + 'static,
) -> Result<T, ToolError> {
    let task = tokio::spawn(work);
    tokio::select! {
        joined = task => joined.map_err(|e| ToolError::Internal(format!("{what} task failed: {e}")))?,
        _ = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
    }
}

/// `work` with the session marked as allocating (for `status`).
async fn opening<T>(slot: &Session, work: impl Future<Output = T>) -> T {
    slot.opening.store(true, Ordering::SeqCst);
    let out = work.await;
    slot.opening.store(false, Ordering::SeqCst);
    out
}

/// Create the working directory: through the resident helper (which the session's calls use
/// next anyway), or a managed `mkdir -p` where the helper cannot run.
async fn make_dir(sandbox: &Sandbox, dir: &str) -> Result<(), ToolError> {
    let resident = Resident::of(sandbox);
    match resident
        .call(
            "mkdir",
            "/",
            json!({"path": dir, "parents": true}),
            Some(Duration::from_secs(60)),
        )
        .await
    {
        Ok(_) => return Ok(()),
        Err(err)
            if matches!(
                err.guest_code(),
                Some(
                    GuestErrorCode::PythonMissing
                        | GuestErrorCode::PythonTooOld
                        | GuestErrorCode::InstallFailed
                )
            ) =>
        {
            tracing::debug!(sandbox = %sandbox.id(), error = %err, "no resident helper; creating the working directory with mkdir");
        }
        Err(err @ Error::Guest(_)) => {
            return Err(ToolError::Refused(format!(
                "creating the working directory {dir} in {} failed: {err}",
                sandbox.id()
            )))
        }
        Err(err) => return Err(err.into()),
    }
    let spec = ProcessSpec::new("mkdir").args(["-p", "--", dir]);
    let out = sandbox
        .processes()
        .run(spec, RunOptions::default().timeout(Duration::from_secs(60)))
        .await?;
    if !out.success() {
        return Err(ToolError::Refused(format!(
            "creating the working directory {dir} in {} failed: {}",
            sandbox.id(),
            out.stderr_lossy().trim()
        )));
    }
    Ok(())
}

/// Bring `sandbox` to `running`: resume it when paused, wait while it moves.
pub async fn ready(sandbox: &Sandbox) -> Result<(), ToolError> {
    let view = sandbox.refresh().await?;
    match view.status {
        SandboxStatus::Running => Ok(()),
        SandboxStatus::Paused | SandboxStatus::Error => {
            sandbox.resume_and_wait().await?;
            Ok(())
        }
        SandboxStatus::Pausing => {
            sandbox.wait_until_paused(None).await?;
            sandbox.resume_and_wait().await?;
            Ok(())
        }
        SandboxStatus::Creating | SandboxStatus::Resuming | SandboxStatus::Forking => {
            sandbox.wait_until_running(None).await?;
            Ok(())
        }
        other => Err(ToolError::Refused(format!(
            "sandbox {} is {}; it cannot be used any more (release or forget its binding)",
            sandbox.id(),
            other.as_str()
        ))),
    }
}
