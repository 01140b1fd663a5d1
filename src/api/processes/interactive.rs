//! Entry points of the interactive byte streams on [`Sandbox`] (E31–E33). The machinery lives
//! in [`crate::pty`] (shell sessions), [`crate::tunnel`] (port forwarding) and
//! [`crate::transport::upgrade`] (the HTTP/1.1 Upgrade).

use crate::api::sandboxes::Sandbox;
use crate::error::Result;
use crate::pty::ShellSession;
use crate::transport::upgrade::Upgraded;

impl Sandbox {
    /// An interactive login shell on a fresh `rows`×`cols` PTY over an HTTP/1.1 Upgrade (E31).
    /// No SSH key is needed; it runs as the sandbox's default user.
    ///
    /// ```no_run
    /// # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
    /// use futures::StreamExt;
    /// use tokio::io::AsyncWriteExt;
    /// let mut shell = sandbox.shell(24, 80).await?;
    /// shell.input.write_all(b"uname -a; exit\n").await?;
    /// while let Some(chunk) = shell.output.next().await {
    ///     print!("{}", String::from_utf8_lossy(&chunk?));
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn shell(&self, rows: u16, cols: u16) -> Result<ShellSession> {
        crate::pty::open_raw(self, rows, cols).await
    }

    /// The same shell over a WebSocket (E32; this project's framing, see `decisions.md`):
    /// useful where only WebSockets pass (some proxies).
    pub async fn shell_ws(&self, rows: u16, cols: u16) -> Result<ShellSession> {
        crate::pty::open_ws(self, rows, cols).await
    }

    /// One raw TCP connection to `port` inside the sandbox (E33), loopback-bound services
    /// included. For a local listening port use [`crate::tunnel::TunnelListener`].
    ///
    /// ```no_run
    /// # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
    /// use tokio::io::{AsyncReadExt, AsyncWriteExt};
    /// let mut conn = sandbox.tunnel(8080).await?;
    /// conn.write_all(b"GET / HTTP/1.0\r\n\r\n").await?;
    /// let mut answer = Vec::new();
    /// conn.read_to_end(&mut answer).await?;
    /// # Ok(()) }
    /// ```
    pub async fn tunnel(&self, port: u16) -> Result<Upgraded> {
        crate::tunnel::open(self, port).await
    }
}
