//! SSH to a sandbox's guest: commands and file transfer over the guest's own sshd.
//!
//! The bytes travel through a `/tunnel/22` upgrade of the control plane (or, optionally,
//! through the SSH gateway). On the first connect the guest is made ready through the exec
//! API, as the `createos` CLI does: the sandbox's key is registered (`ssh-pubkeys`) and
//! appended to `authorized_keys` if missing, and sshd is started unless port 22 listens.
//!
//! - keys: one ed25519 key per sandbox, generated in-process, kept 0600 under
//!   `<config dir>/createos-sandbox/keys/` ([`SshFiles`], [`SandboxKey`]);
//! - host keys: pinned on first use per sandbox id in `<config dir>/createos-sandbox/known_hosts`;
//!   a changed key is refused with [`SshError::HostKeyChanged`] ([`KnownHosts`]);
//! - connections: one per sandbox, shared by every caller ([`SshPool`], [`SshSession`]),
//!   reconnected transparently when it drops;
//! - commands: [`SshSession::exec`] and friends (stdout, stderr, exit status, stdin,
//!   streaming both ways);
//! - files: SFTP with pipelined, streaming reads and atomic writes
//!   ([`SshSession::read_file`], [`SshSession::write_file`], `stat`, `list`, `mkdir_p`,
//!   `rename`, `remove_*`);
//! - ciphers: AES-GCM first where the CPU runs it in hardware, ChaCha20-Poly1305 first
//!   elsewhere ([`preferred_ciphers`]).
//!
//! ```no_run
//! # async fn demo(sandbox: createos_sandbox::Sandbox) -> createos_sandbox::Result<()> {
//! use createos_sandbox::ssh::{SshOptions, SshPool, WriteOptions};
//!
//! let pool = SshPool::new(SshOptions::new());
//! let ssh = pool.session(&sandbox).await?;
//! ssh.write_bytes("/work/hello.txt", "hi\n", WriteOptions::new()).await?;
//! let out = ssh.exec("wc -c < /work/hello.txt").await?;
//! assert_eq!(out.stdout_text().trim(), "3");
//! for entry in ssh.list("/work").await? {
//!     println!("{} {} bytes", entry.name, entry.metadata.size);
//! }
//! # Ok(()) }
//! ```

mod ciphers;
mod connect;
mod error;
mod exec;
mod files;
mod guest;
mod keys;
mod known_hosts;
mod options;
mod pool;
mod reaper;
mod session;
mod sftp;
mod sftp_io;

pub use ciphers::{hardware_aes_gcm, preferred_ciphers};
pub use error::{SftpErrorKind, SshError};
pub use exec::{command_line, shell_quote, ExitSignal, SshExit, SshOutput, MAX_STREAMING_STDERR};
pub use files::{SshFiles, APP_DIR};
pub use guest::{home_of, DEFAULT_SSHD_PATH};
pub use keys::{canonical_public_key, public_path, SandboxKey};
pub use known_hosts::{HostKeyStatus, KnownHosts};
pub use options::{SshOptions, SshRoute, DEFAULT_GATEWAY_HOST, DEFAULT_GATEWAY_PORT};
pub use pool::SshPool;
pub use reaper::EXEC_MARKER;
pub use session::SshSession;
pub use sftp::{RemoteEntry, RemoteFileKind, RemoteMetadata};
pub use sftp_io::{
    RemoteReader, WriteOptions, READS_IN_FLIGHT, READ_CHUNK, WRITES_IN_FLIGHT, WRITE_CHUNK,
};
