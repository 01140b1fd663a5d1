//! What the SSH-based rows share: a session of our SSH layer to the bench sandbox (its sshd is
//! the host's real OpenSSH `sshd`, started inside the sandbox), and a local port forwarded to
//! that same sshd through `/tunnel/22`, so OpenSSH's own clients (`scp`, `rsync -e ssh`) reach
//! the very server our client talks to, with the key our client registered.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{ensure, Context as _};
use createos_sandbox::ssh::{SshFiles, SshOptions, SshSession};
use createos_sandbox::tunnel::{RunningTunnel, TunnelListener};

use crate::env::Bench;

pub struct SshRig {
    pub ssh: SshSession,
    tunnel: RunningTunnel,
    key: PathBuf,
    /// Holds the key and known-hosts files of our client.
    _files: tempfile::TempDir,
}

impl SshRig {
    pub async fn open(bench: &Bench, needs: &[&str]) -> anyhow::Result<SshRig> {
        for program in needs {
            ensure!(
                crate::env::on_path(program),
                "`{program}` is needed by this row but is not on PATH (see cos/benches/setup.sh)"
            );
        }
        let files = tempfile::Builder::new()
            .prefix("cos-bench-ssh-")
            .tempdir()?;
        let options = SshOptions::new()
            .files(SshFiles::at(files.path()))
            .connect_timeout(Duration::from_secs(60));
        let ssh = SshSession::connect(&bench.sandbox, options)
            .await
            .context("connecting our SSH client")?;
        let probe = ssh.exec("true").await.context("a first command over SSH")?;
        ensure!(probe.success(), "`true` over SSH failed: {probe:?}");
        let key = ssh.key().path().to_path_buf();
        let tunnel = TunnelListener::bind(&bench.sandbox, 22, None)
            .await
            .context("forwarding a local port to :22")?;
        let tunnel = tunnel.spawn();
        Ok(SshRig {
            ssh,
            tunnel,
            key,
            _files: files,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.tunnel.local_addr()
    }

    /// Options every OpenSSH client gets: our key only, no prompts, no host-key bookkeeping
    /// (the forwarded port is ours, and our client pins the key itself).
    pub fn client_options(&self) -> Vec<String> {
        let mut out = vec!["-i".to_string(), self.key.display().to_string()];
        for option in [
            "IdentitiesOnly=yes",
            "BatchMode=yes",
            "StrictHostKeyChecking=no",
            "UserKnownHostsFile=/dev/null",
            "LogLevel=ERROR",
        ] {
            out.push("-o".to_string());
            out.push(option.to_string());
        }
        out
    }

    /// The `ssh` command line for `rsync -e`.
    pub fn rsh(&self) -> String {
        let mut parts = vec![
            "ssh".to_string(),
            "-p".to_string(),
            self.addr().port().to_string(),
        ];
        parts.extend(self.client_options());
        parts
            .iter()
            .map(|p| createos_sandbox::ssh::shell_quote(p))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// `root@127.0.0.1:<path>` for scp/rsync.
    pub fn remote(&self, path: &str) -> String {
        format!("root@{}:{path}", self.addr().ip())
    }

    pub async fn close(mut self) -> anyhow::Result<()> {
        self.tunnel.stop().await.context("stopping the tunnel")?;
        self.ssh.disconnect().await;
        Ok(())
    }
}
