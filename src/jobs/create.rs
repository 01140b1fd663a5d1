//! Creating a sandbox whose id is never lost, whatever happens to the caller: used by the jobs
//! and by `cos run`.
//!
//! - The request carries a name chosen here (`<prefix>-<12 hex digits>`) unless the caller chose
//!   one, so a sandbox whose answer never arrived can still be found.
//! - The request runs in a task of its own: a caller that is cancelled or dropped does not abort
//!   it. If nobody waits for the answer any more, the sandbox it brings is destroyed.
//! - When the answer is lost (the connection broke after the request was sent, no answer in
//!   time, an undecodable answer, a 5xx other than 503), the live sandboxes carrying the name are
//!   looked up and destroyed. [`CreateFailed::reclaim`] says which, or names the name when that
//!   could not be told. A refusal (4xx, 503, nothing sent) created nothing and looks nothing up.

use std::fmt;

use futures::TryStreamExt;

use crate::error::Error;
use crate::{Client, CreateSandbox, ListSandboxes, Sandbox};

/// What was done after a create whose answer was lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reclaim {
    /// The name the request carried.
    pub name: String,
    /// Sandboxes found under that name and destroyed.
    pub destroyed: Vec<String>,
    /// Why it is unknown whether a sandbox of that name is left (the lookup or a destroy
    /// failed); `None` when none is.
    pub unknown: Option<String>,
}

impl Reclaim {
    /// Whether no sandbox of the name is left.
    pub fn is_clean(&self) -> bool {
        self.unknown.is_none()
    }
}

impl fmt::Display for Reclaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.name;
        match (&self.unknown, self.destroyed.as_slice()) {
            (None, []) => write!(f, "no sandbox named {name} exists"),
            (None, ids) => write!(
                f,
                "the sandbox it created ({}, named {name}) was destroyed",
                ids.join(", ")
            ),
            (Some(why), ids) => {
                if !ids.is_empty() {
                    write!(f, "destroyed {} (named {name}); ", ids.join(", "))?;
                }
                write!(f, "a sandbox named {name} may still exist ({why}): look with `cos ls` and remove it with `cos rm --yes {name}`")
            }
        }
    }
}

/// A create that failed, with what was done about a lost answer.
#[derive(Debug, thiserror::Error)]
#[error("{error}{}", .reclaim.as_ref().map(|r| format!("; the answer was lost: {r}")).unwrap_or_default())]
pub struct CreateFailed {
    /// The error.
    pub error: Error,
    /// `Some` when the answer was lost and the name was looked up.
    pub reclaim: Option<Reclaim>,
}

impl CreateFailed {
    /// Whether no sandbox is left of this create.
    pub fn left_nothing(&self) -> bool {
        self.reclaim.as_ref().is_none_or(Reclaim::is_clean)
    }
}

/// Create `request` (named `<prefix>-…` unless it has a name) so that its sandbox is never
/// lost: the request runs in a task of its own (a dropped caller does not abort it; a sandbox
/// nobody waits for is destroyed), and a lost answer is looked up by the name and what it
/// found destroyed ([`CreateFailed::reclaim`]). A refusal looks nothing up.
pub async fn create_reclaimable(
    client: &Client,
    mut request: CreateSandbox,
    prefix: &str,
) -> Result<Sandbox, CreateFailed> {
    let name = match &request.name {
        Some(name) => name.clone(),
        None => {
            let name = format!("{prefix}-{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
            request.name = Some(name.clone());
            name
        }
    };
    request.validate().map_err(|source| CreateFailed {
        error: source,
        reclaim: None,
    })?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let client = client.clone();
    let wanted = name.clone();
    tokio::spawn(async move {
        let outcome = match client.create_sandbox(request).await {
            Ok(sandbox) => Ok(sandbox),
            Err(source) if answer_lost(&source) => {
                tracing::warn!(name = %name, error = %source, "the answer to a sandbox create was lost; looking the sandbox up by name");
                let reclaim = reclaim(&client, &name).await;
                Err(CreateFailed {
                    error: source,
                    reclaim: Some(reclaim),
                })
            }
            Err(source) => Err(CreateFailed {
                error: source,
                reclaim: None,
            }),
        };
        if let Err(Ok(orphan)) = tx.send(outcome) {
            destroy_logged(&orphan, "nobody waited for its create any more").await;
        }
    });
    match rx.await {
        Ok(outcome) => outcome,
        Err(_) => Err(CreateFailed {
            error: Error::Cancelled,
            reclaim: Some(Reclaim {
                name: wanted,
                destroyed: Vec::new(),
                unknown: Some("the create task ended without an answer".into()),
            }),
        }),
    }
}

/// Whether the request may have been applied although no usable answer came back.
fn answer_lost(err: &Error) -> bool {
    match err {
        Error::Connection { source, .. } => !source
            .downcast_ref::<reqwest::Error>()
            .is_some_and(reqwest::Error::is_connect),
        Error::Timeout { .. } | Error::Decode { .. } => true,
        Error::Server(api) | Error::Api(api) => {
            api.status != 503 && (api.status >= 500 || api.status == 408)
        }
        _ => false,
    }
}

/// Find the live sandboxes named `name` and destroy them.
async fn reclaim(client: &Client, name: &str) -> Reclaim {
    let mut reclaim = Reclaim {
        name: name.to_string(),
        destroyed: Vec::new(),
        unknown: None,
    };
    let views: Vec<_> = match client
        .list_sandboxes(ListSandboxes::default())
        .try_collect()
        .await
    {
        Ok(views) => views,
        Err(err) => {
            reclaim.unknown = Some(format!("listing the sandboxes failed: {err}"));
            return reclaim;
        }
    };
    for view in views
        .into_iter()
        .filter(|v| v.name.as_deref() == Some(name) && !v.status.is_terminal())
    {
        let destroyed = match client.sandbox(&view.id) {
            Ok(sandbox) => sandbox.destroy().await.map(drop),
            Err(err) => Err(err),
        };
        match destroyed {
            Ok(()) => reclaim.destroyed.push(view.id),
            Err(err) => reclaim.unknown = Some(format!("destroying {} failed: {err}", view.id)),
        }
    }
    reclaim
}

/// Destroy `sandbox`, logging the outcome (`why` says how it came to be unwanted).
pub(crate) async fn destroy_logged(sandbox: &Sandbox, why: &str) {
    match sandbox.destroy().await {
        Ok(_) => tracing::info!(sandbox = %sandbox.id(), "destroyed a sandbox: {why}"),
        Err(err) => {
            tracing::error!(sandbox = %sandbox.id(), error = %err, "destroying a sandbox ({why}) failed; it is still allocated")
        }
    }
}
