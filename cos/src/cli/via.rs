//! `--ssh`: move files over the sandbox's SSH connection (russh through the control plane's
//! tunnel to the guest sshd) instead of the files API. Shared by `push`, `pull` and `sync`.

use std::sync::Arc;

use anyhow::Result;
use clap::Args;

use createos_sandbox::transfer::{ApiRemote, Remote, SshRemote};
use createos_sandbox::Sandbox;

#[derive(Debug, Clone, Copy, Args)]
pub struct ViaArgs {
    /// Move the data over SSH (SFTP for one file, a tar stream through an exec channel for a
    /// directory) instead of the files API. Starts the guest's sshd if needed; the host key is
    /// pinned on first use.
    #[arg(long)]
    pub ssh: bool,
}

impl ViaArgs {
    /// The channel archives travel through.
    pub async fn remote(&self, sandbox: &Sandbox) -> Result<Arc<dyn Remote>> {
        Ok(if self.ssh {
            Arc::new(SshRemote::new(sandbox.ssh().await?))
        } else {
            Arc::new(ApiRemote::new(sandbox.clone()))
        })
    }

    /// How the data travelled, for reports.
    pub fn name(&self) -> &'static str {
        if self.ssh {
            "ssh"
        } else {
            "files-api"
        }
    }
}
