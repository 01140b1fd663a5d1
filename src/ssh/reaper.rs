//! Stopping commands whose caller went away.
//!
//! OpenSSH keeps a session (one of at most 10 per connection) until its command exits, even
//! after the client closed the channel, and it refuses `signal` requests for root logins (no
//! privilege separation after a root login). So every command is started with a marker in
//! its environment, `COS_SSH_EXEC=<token>`, inherited by everything it spawns; when the caller
//! drops the command, a short clean-up command on the same connection sends TERM to every
//! process carrying the marker, and the channel's slot is given back once the server
//! confirms the close.

use std::sync::Arc;
use std::time::Duration;

use russh::client::Msg;
use russh::{ChannelMsg, ChannelReadHalf, ChannelWriteHalf};
use tokio::sync::OwnedSemaphorePermit;

use super::error::SshError;
use super::exec::shell_quote;
use super::session::{open_session_channel, Connection, OpenChannel};

/// The environment variable marking a command's processes.
pub const EXEC_MARKER: &str = "COS_SSH_EXEC";
/// How long clean-up may take before the slot is given back anyway.
const ABANDON_WAIT: Duration = Duration::from_secs(10);

/// Arguments: marker tokens. TERM every process whose environment holds one of them, with
/// one `grep -z` over all of /proc when grep can (GNU), one check per process otherwise.
const REAP: &str = r#"[ "$#" -gt 0 ] || exit 0
set -- $(for t do printf ' -e COS_SSH_EXEC=%s' "$t"; done)
if printf 'a\0' | grep -qxz a 2>/dev/null; then
  pids=$(grep -lsxzF "$@" /proc/[0-9]*/environ | sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p')
else
  pids=$(for env in /proc/[0-9]*/environ; do
    if tr '\0' '\n' < "$env" 2>/dev/null | grep -qxF "$@"; then p=${env#/proc/}; echo "${p%/environ}"; fi
  done)
fi
[ -n "$pids" ] && kill -TERM $pids 2>/dev/null
exit 0"#;

/// The command line actually sent: the guest user's shell runs `command` as sshd would, with
/// the marker exported first.
pub(crate) fn wrap(command: &str, token: &str) -> String {
    format!(
        "export {EXEC_MARKER}={token}; exec \"${{SHELL:-/bin/sh}}\" -c {}",
        shell_quote(command)
    )
}

/// A command in progress; see the module docs for what dropping it early does.
pub(crate) struct Running {
    read: Option<ChannelReadHalf>,
    write: Arc<ChannelWriteHalf<Msg>>,
    slot: Option<OwnedSemaphorePermit>,
    conn: Arc<Connection>,
    token: String,
    done: bool,
}

impl Running {
    pub(crate) fn new(open: OpenChannel) -> Self {
        let (read, write) = open.channel.split();
        Running {
            read: Some(read),
            write: Arc::new(write),
            slot: Some(open.slot),
            conn: open.conn,
            token: format!("{:032x}", rand::random::<u128>()),
            done: false,
        }
    }

    /// The command line to send for `command`.
    pub(crate) fn wrapped(&self, command: &str) -> String {
        wrap(command, &self.token)
    }

    pub(crate) fn writer(&self) -> Arc<ChannelWriteHalf<Msg>> {
        self.write.clone()
    }

    pub(crate) fn reader(&mut self) -> Result<&mut ChannelReadHalf, SshError> {
        self.read.as_mut().ok_or_else(|| {
            SshError::protocol("running a command", "the channel was already released")
        })
    }

    /// The command ended on its own: nothing to clean up.
    pub(crate) fn finished(&mut self) {
        self.done = true;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (read, write, slot) = (self.read.take(), self.write.clone(), self.slot.take());
        let (conn, token) = (self.conn.clone(), std::mem::take(&mut self.token));
        runtime.spawn(async move {
            // The server closes the channel once the command is gone. Closing it from our
            // side first would not free the server's session any sooner (and russh then
            // never reports the server's close), so that is only the last resort.
            let cleanup = async {
                // Works for non-root users (privilege separation); harmless otherwise.
                let _ = write.signal(russh::Sig::TERM).await;
                let _ = write.eof().await;
                if let Err(err) = reap(&conn, token).await {
                    tracing::debug!(error = %err, "could not stop an abandoned command");
                }
                if let Some(mut read) = read {
                    while let Some(msg) = read.wait().await {
                        if matches!(msg, ChannelMsg::Close) {
                            break;
                        }
                    }
                }
            };
            if tokio::time::timeout(ABANDON_WAIT, cleanup).await.is_err() {
                let _ = write.close().await;
            }
            drop(slot);
        });
    }
}

/// Stop the processes marked with `token`, over a fresh channel of `conn`. Clean-ups run one
/// at a time (a burst of abandoned commands must not exceed the server's session limit), and
/// each run takes every token queued so far.
async fn reap(conn: &Connection, token: String) -> Result<(), SshError> {
    conn.reap_queue
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(token);
    let _turn = conn.reaper.lock().await;
    let tokens = std::mem::take(&mut *conn.reap_queue.lock().unwrap_or_else(|p| p.into_inner()));
    if tokens.is_empty() {
        return Ok(()); // an earlier run took ours
    }
    let channel = open_session_channel(&conn.guest).await?;
    let command = format!("sh -c {} cos-reap {}", shell_quote(REAP), tokens.join(" "));
    channel
        .exec(true, command.as_bytes())
        .await
        .map_err(|e| SshError::protocol("stopping a command", e))?;
    let (mut read, _write) = channel.split();
    while let Some(msg) = read.wait().await {
        if matches!(msg, ChannelMsg::Close) {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_the_command_intact() {
        let line = wrap("echo 'a b' | wc -c", "abc123");
        assert_eq!(
            line,
            r#"export COS_SSH_EXEC=abc123; exec "${SHELL:-/bin/sh}" -c 'echo '\''a b'\'' | wc -c'"#
        );
        assert!(REAP.contains("COS_SSH_EXEC="));
        assert!(REAP.contains(EXEC_MARKER));
    }
}
