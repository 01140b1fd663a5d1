//! Provisioning a pane's sandbox: scan the worktree, create the sandbox, upload through the
//! snapshot filters, commit a baseline, install the agent, start its PTY at the pane's size.
//! Anything that fails (or is cancelled) after the create destroys the sandbox again.

use std::io::Write;
use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use createos_sandbox::api::processes::ProcessSpec;
use createos_sandbox::snapshot::{Snapshot, SnapshotOptions};
use createos_sandbox::stream::process_output::OutputEvent;
use createos_sandbox::transfer::{self, ApiRemote, Remote};
use createos_sandbox::{Client, CreateSandbox, ListSandboxes, Sandbox};

use super::agents::{Agent, AGENT_PATH_DIRS};
use super::command::ProvisionSpec;
use super::config::validate_remote_root;
use super::error::{HerdrError, HerdrResult};

/// Git ref in the guest that marks what the local worktree already has (moved by `apply`).
pub const BASE_REF: &str = "refs/herdr/base";

/// Guest script: commit the uploaded tree as the baseline. `$1` is the worktree.
const PREPARE: &str = r#"set -e
cd -- "$1"
git init -q
git config user.name herdr
git config user.email herdr@createos.local
git add -A
git -c commit.gpgsign=false commit -q --no-verify --allow-empty -m herdr-baseline
git update-ref refs/herdr/base HEAD
"#;

/// What provisioning produced.
#[derive(Clone, Debug)]
pub struct Provisioned {
    /// The sandbox.
    pub sandbox: Sandbox,
    /// The agent's PTY process.
    pub process_id: String,
    /// The agent's binary in the sandbox.
    pub bin: String,
    /// Files uploaded.
    pub files: u64,
}

/// Where progress text goes (the pane).
pub type Progress<'a> = &'a (dyn Fn(&[u8]) + Send + Sync);

/// Run every step; on failure or cancellation the sandbox created here is destroyed (looked up
/// by its unique name when the create itself was interrupted).
pub async fn provision(
    client: &Client,
    spec: &ProvisionSpec,
    size: (u16, u16),
    progress: Progress<'_>,
    cancel: &CancellationToken,
) -> HerdrResult<Provisioned> {
    let agent = Agent::from_key(&spec.agent)
        .ok_or_else(|| HerdrError::invalid("agent", Agent::unknown_message(&spec.agent)))?;
    validate_remote_root(&spec.remote_root)?;
    let say = |text: String| progress(format!("{text}\r\n").as_bytes());

    say(format!("[0/5] listing the files of {}", spec.local));
    let options = SnapshotOptions {
        excludes: spec.excludes.clone(),
        ..SnapshotOptions::new()
    };
    let snapshot = tokio::select! {
        s = Snapshot::scan_async(&spec.local, options) => s?,
        _ = cancel.cancelled() => return Err(cancelled()),
    };

    let mut created = Created::NotSent;
    let outcome = tokio::select! {
        r = steps(client, spec, agent, &snapshot, size, &say, progress, &mut created) => r,
        _ = cancel.cancelled() => Err(cancelled()),
    };
    match outcome {
        Ok(done) => Ok(done),
        Err(err) => {
            let sandbox = match created {
                Created::Done(sb) => Some(sb),
                // The create may have reached the server (or be about to register there)
                // even though its answer never arrived.
                Created::Sent => {
                    say(format!(
                        "checking whether sandbox {} was created after all",
                        spec.box_name
                    ));
                    find_by_name(client, &spec.box_name, CREATE_SETTLE, CREATE_POLL).await
                }
                Created::NotSent => None,
            };
            match sandbox {
                None => Err(err),
                Some(sb) => {
                    say(format!(
                        "cleaning up: deleting sandbox {} ({})",
                        spec.box_name,
                        sb.id()
                    ));
                    match sb.destroy().await {
                        Ok(_) if matches!(err, HerdrError::Api(createos_sandbox::Error::Cancelled)) => Err(HerdrError::Remote {
                            step: "provisioning".into(),
                            sandbox: sb.id().to_string(),
                            message: "interrupted (pane closed, Ctrl-C or SIGTERM); the sandbox was deleted".into(),
                        }),
                        Ok(_) => Err(err),
                        Err(e) => Err(HerdrError::Remote {
                            step: "cleanup".into(),
                            sandbox: sb.id().to_string(),
                            message: format!(
                                "{err}; deleting the sandbox also failed ({e}): it is still running and unmapped, delete it with `cos rm --yes {}`",
                                sb.id()
                            ),
                        }),
                    }
                }
            }
        }
    }
}

/// How far the create got when provisioning stopped.
enum Created {
    /// Not sent: nothing can exist.
    NotSent,
    /// Sent, no answer: the sandbox may exist (or appear shortly) under its unique name.
    Sent,
    /// Created.
    Done(Sandbox),
}

/// How long an interrupted create is looked for by name: the server may register it after
/// our first look.
pub const CREATE_SETTLE: Duration = Duration::from_secs(20);
/// Pause between two looks.
const CREATE_POLL: Duration = Duration::from_secs(1);

fn cancelled() -> HerdrError {
    HerdrError::Api(createos_sandbox::Error::Cancelled)
}

#[allow(clippy::too_many_arguments)]
async fn steps(
    client: &Client,
    spec: &ProvisionSpec,
    agent: Agent,
    snapshot: &Snapshot,
    (rows, cols): (u16, u16),
    say: &(dyn Fn(String) + Send + Sync),
    progress: Progress<'_>,
    created: &mut Created,
) -> HerdrResult<Provisioned> {
    say(format!(
        "[1/5] creating sandbox {} ({})",
        spec.box_name, spec.shape
    ));
    let mut request = CreateSandbox::new(&spec.shape)
        .name(&spec.box_name)
        .auto_pause_after(spec.auto_pause_secs);
    if let Some(rootfs) = &spec.rootfs {
        request = request.rootfs(rootfs);
    }
    if !spec.egress.is_empty() {
        request = request.egress(spec.egress.iter().cloned());
    }
    // Checked here so a refused request is known never to have been sent.
    request.validate()?;
    *created = Created::Sent;
    let sandbox = match client.create_sandbox(request).await {
        Ok(sandbox) => sandbox,
        Err(e) => {
            // A definite refusal (4xx other than timeout / rate limit) created nothing.
            if e.status()
                .is_some_and(|s| (400..500).contains(&s) && s != 408 && s != 429)
            {
                *created = Created::NotSent;
            }
            return Err(e.into());
        }
    };
    *created = Created::Done(sandbox.clone());

    say(format!(
        "[2/5] uploading {} files to {}",
        snapshot.files().len(),
        spec.remote_root
    ));
    let remote = ApiRemote::new(sandbox.clone());
    let uploaded = transfer::upload_snapshot(&remote, snapshot, &spec.remote_root, None).await?;

    say("[3/5] committing the baseline".to_string());
    let out = remote
        .run_sh(PREPARE, vec![spec.remote_root.clone()], Vec::new())
        .await?;
    if !out.success() {
        return Err(remote_failure(
            "baseline commit",
            &sandbox,
            &out.stderr,
            &out.stdout,
            out.exit_code,
        ));
    }

    say(match agent.installer {
        Some(_) => format!(
            "[4/5] installing {} with its official installer",
            agent.title
        ),
        None => format!("[4/5] {} needs no install", agent.title),
    });
    let bin = install(&sandbox, agent, progress).await?;

    say(format!("[5/5] starting {} ({rows}x{cols})", agent.title));
    let process = sandbox
        .processes()
        .start(agent_process(agent, &bin, &spec.remote_root, rows, cols))
        .await?;
    Ok(Provisioned {
        sandbox,
        process_id: process.id().to_string(),
        bin,
        files: uploaded.files,
    })
}

fn remote_failure(
    step: &str,
    sandbox: &Sandbox,
    stderr: &str,
    stdout: &str,
    code: i32,
) -> HerdrError {
    let text = if stderr.trim().is_empty() {
        stdout.trim()
    } else {
        stderr.trim()
    };
    let tail: Vec<&str> = text.lines().rev().take(5).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    HerdrError::Remote {
        step: step.into(),
        sandbox: sandbox.id().to_string(),
        message: format!(
            "exit {code}{}{}",
            if tail.is_empty() { "" } else { ": " },
            tail.join(" / ")
        ),
    }
}

/// Run the agent's installer as a managed process, echoing its output into the pane; the last
/// stdout line is the binary's path.
async fn install(sandbox: &Sandbox, agent: Agent, progress: Progress<'_>) -> HerdrResult<String> {
    let spec = ProcessSpec::shell(agent.install_script());
    let process = sandbox.processes().start(spec).await?;
    let mut events = process.connect(0).await?;
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let mut exit: Option<(Option<i32>, Option<String>)> = None;
    while let Some(event) = events.next().await {
        match event? {
            OutputEvent::Data { bytes, stream, .. } => {
                let is_err = matches!(
                    stream,
                    createos_sandbox::stream::process_output::StreamKind::Stderr
                );
                if is_err {
                    stderr.extend_from_slice(&bytes);
                } else {
                    stdout.extend_from_slice(&bytes);
                }
                // Terminals in raw mode need \r\n.
                let text = String::from_utf8_lossy(&bytes)
                    .replace("\r\n", "\n")
                    .replace('\n', "\r\n");
                progress(text.as_bytes());
            }
            OutputEvent::Exit { code, signal } => {
                exit = Some((code, signal));
                break;
            }
            OutputEvent::Gap { .. } => {}
            OutputEvent::Error(message) => {
                return Err(HerdrError::Remote {
                    step: "agent install".into(),
                    sandbox: sandbox.id().into(),
                    message,
                })
            }
        }
    }
    let (code, signal) = match exit {
        Some(e) => e,
        None => {
            let info = process
                .wait(
                    createos_sandbox::api::processes::WaitScope::Leader,
                    Some(Duration::from_secs(600)),
                )
                .await?;
            (info.exit_code, info.signal)
        }
    };
    let stdout = String::from_utf8_lossy(&stdout).into_owned();
    let stderr = String::from_utf8_lossy(&stderr).into_owned();
    if code != Some(0) {
        let code = code.unwrap_or(-1);
        let mut err = remote_failure("agent install", sandbox, &stderr, &stdout, code);
        if let (Some(sig), HerdrError::Remote { message, .. }) = (signal, &mut err) {
            message.push_str(&format!(" (signal {sig})"));
        }
        return Err(err);
    }
    let bin = stdout
        .lines()
        .map(str::trim)
        .rfind(|l| l.starts_with('/'))
        .unwrap_or_default()
        .to_string();
    if bin.is_empty() {
        return Err(HerdrError::Remote {
            step: "agent install".into(),
            sandbox: sandbox.id().into(),
            message: format!(
                "{} was installed but its path could not be resolved",
                agent.binary
            ),
        });
    }
    Ok(bin)
}

/// The agent's PTY process: `bash -lc` puts the installers' directories on PATH, then execs the
/// binary (passed as `$0`, never interpolated) in the worktree.
pub fn agent_process(
    agent: Agent,
    bin: &str,
    remote_root: &str,
    rows: u16,
    cols: u16,
) -> ProcessSpec {
    let script = format!("export PATH=\"{AGENT_PATH_DIRS}:$PATH\"; exec \"$0\" \"$@\"");
    ProcessSpec::shell(script)
        .arg(bin)
        .args(agent.args())
        .cwd(remote_root)
        .pty(rows.max(1), cols.max(1))
}

/// The live sandbox named `name`, looked for every `poll` until `within` has passed (a create
/// whose answer was lost may be registered by the server only after our first look). The
/// names are unique per start, so a match is ours.
pub async fn find_by_name(
    client: &Client,
    name: &str,
    within: Duration,
    poll: Duration,
) -> Option<Sandbox> {
    use futures::TryStreamExt;
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let listed: Result<Vec<createos_sandbox::SandboxView>, _> = client
            .list_sandboxes(ListSandboxes::default())
            .try_collect()
            .await;
        if let Ok(all) = listed {
            if let Some(view) = all
                .into_iter()
                .rev()
                .find(|v| v.name.as_deref() == Some(name) && !v.status.is_terminal())
            {
                return client.sandbox(&view.id).ok();
            }
        }
        if tokio::time::Instant::now() + poll > deadline {
            return None;
        }
        tokio::time::sleep(poll).await;
    }
}

/// Write progress to stderr (what a pane shows).
pub fn stderr_progress(bytes: &[u8]) {
    let mut err = std::io::stderr();
    let _ = err.write_all(bytes);
    let _ = err.flush();
}
