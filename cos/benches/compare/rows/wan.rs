//! Tool calls over a modelled WAN link: a second emulator behind 50 ms RTT (25 ms each way,
//! TCP and TLS handshakes included; see `link.rs` and `wan.rs`), where every sequential
//! request costs what it costs on the real service. A warm `cos mcp` against the shell-outs it
//! replaces (one `cos` process per call, or the plugin's former four), the first call of a
//! session (create + exec), and the requests every tool call makes, counted at the emulator.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, ensure, Context as _};
use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio::sync::Mutex;

use createos_sandbox::Client;

use super::mcp_client::{McpCall, McpClient};
use super::shellout::{plugin_exec, run as run_cos, CosCli, CosExec, PluginSequence};
use super::Row;
use crate::env::{Bench, Sizes};
use crate::interleave::{alternate, durations, Contender, Sample};
use crate::stats::{Comparison, Goal, Measure, Side};
use crate::wan::{WanRig, COUNT_SETTLE, ONE_WAY};

/// The file the read rows read (two lines), and the one the edit and patch counts change.
const READ_PATH: &str = "/root/cos-bench-read.txt";
const READ_CONTENT: &str = "first line\nsecond line\n";
const EDIT_PATH: &str = "/root/cos-bench-edit.txt";
/// The shape the plugin created its session sandboxes with (and `cos mcp`'s default).
const SESSION_SHAPE: &str = "s-2vcpu-2gb";
/// Goals, in round trips of the link.
const EXEC_GOAL_RTT: f64 = 1.5;
const READ_GOAL_RTT: f64 = 1.3;
/// At least this many times faster than the four-process shell-out / one `cos exec` per call.
const PLUGIN_GOAL_SPEEDUP: f64 = 8.0;
const COS_EXEC_GOAL_SPEEDUP: f64 = 2.5;

pub fn row() -> Row {
    Row {
        id: "wan",
        title: "tool calls over a modelled WAN link (50 ms RTT)",
        method,
        run: |bench| Box::pin(run(bench)),
    }
}

fn rtt_ms() -> f64 {
    (ONE_WAY * 2).as_secs_f64() * 1000.0
}

fn method(sizes: &Sizes) -> String {
    format!(
        "A second emulator runs as its own `createos-mock` process, with `--tls` when the binary offers it: \
         it then serves HTTPS with a certificate it generates and names its CA file in its ready line, and \
         every `cos` process trusts that CA through `CREATEOS_CA_FILE` (the ready line decides: without a \
         CA file the rows run over plain HTTP and the run lists TLS as pending). Every contender reaches it \
         through a delay link the bench starts on loopback (`benches/compare/link.rs`): a TCP relay that \
         holds every byte {one_way} ms in each direction, so a request on a warm connection costs one \
         {rtt} ms round trip; the kernel's instant TCP handshake to the relay is made up for by letting \
         nothing cross a new connection before one RTT after it was accepted, so a new process pays TCP + \
         TLS + its requests as on a real link. The machine's loopback is not changed. No bandwidth limit: \
         latency only.\n\n\
         One `cos --endpoint <link> mcp` is started and its session sandbox bound by a first, untimed \
         `sandbox_exec`. {warm} warm-up rounds, then {n} rounds, alternating:\n\n\
         - **`sandbox_exec true`**: `tools/call` of `sandbox_exec` with `{{\"command\": \"true\"}}` on the \
         session sandbox, timed from writing the request to reading the answer; against `cos exec <sandbox> \
         -- bash -lc true` spawned per call, and the plugin's former four processes per call (`process \
         start --cwd <session cwd>`, `process input --close`, `process wait --tree`, `process logs`, as in \
         the loopback `cos mcp` row). Goals: within {exec_goal} RTT ({exec_ms} ms, absolute), at least \
         {cos_x}× faster than `cos exec` per call (ratio ≤ {cos_r}), at least {plugin_x}× faster than the \
         four processes (ratio ≤ {plugin_r}).\n\
         - **`sandbox_read`** of a two-line file (`{read}`), against `cos fs <sandbox> read {read}` spawned \
         per call. Goal: within {read_goal} RTT ({read_ms} ms, absolute).\n\
         - **floor**: one warm `GET /v1/sandboxes/{{id}}` through the link with a keep-alive `reqwest` \
         client: one round trip plus the emulator's handling, shown as the baseline of the absolute goals.\n\
         - **session first call**: a `sandbox_exec true` on a session without a sandbox (create + \
         readiness + first exec), after an untimed `sandbox_release` of the previous one; against the \
         plugin's first call with `cos` standing in for the `createos` CLI: `create --shape {shape}` \
         (JSON), `get` until running, `exec <id> -- bash -lc 'mkdir -p <cwd>'`, then the four processes; \
         its sandbox destroyed untimed. {first} rounds, alternating.\n\n\
         The requests per call (table above) are counted on the same server: `/_mock/stats` reset, one \
         call, {settle} ms for requests still on the link, then read.",
        one_way = ONE_WAY.as_millis(),
        rtt = rtt_ms(),
        warm = sizes.wan_warmup,
        n = sizes.wan_rounds,
        exec_goal = EXEC_GOAL_RTT,
        exec_ms = EXEC_GOAL_RTT * rtt_ms(),
        cos_x = COS_EXEC_GOAL_SPEEDUP,
        cos_r = 1.0 / COS_EXEC_GOAL_SPEEDUP,
        plugin_x = PLUGIN_GOAL_SPEEDUP,
        plugin_r = 1.0 / PLUGIN_GOAL_SPEEDUP,
        read = READ_PATH,
        read_goal = READ_GOAL_RTT,
        read_ms = READ_GOAL_RTT * rtt_ms(),
        shape = SESSION_SHAPE,
        first = sizes.wan_first_rounds,
        settle = COUNT_SETTLE.as_millis(),
    )
}

async fn run(bench: &Bench) -> anyhow::Result<Vec<Comparison>> {
    let rig = WanRig::start(bench).await?;
    let measured = measure(bench, &rig).await;
    let closed = rig.close().await;
    let out = measured?;
    closed?;
    Ok(out)
}

/// The session's sandbox and working directory, from `sandbox_status`.
struct Session {
    sandbox: String,
    cwd: String,
}

async fn measure(bench: &Bench, rig: &WanRig) -> anyhow::Result<Vec<Comparison>> {
    let proto = if rig.tls { "TLS" } else { "plain HTTP" };
    if !rig.tls {
        bench.note_pending(
            "WAN rows over TLS",
            "this createos-mock has no --tls: the WAN rows ran over plain HTTP (they switch to HTTPS by \
             themselves once the emulator's ready line names a ca_file)",
        );
    }
    let scratch = tempfile::Builder::new()
        .prefix("cos-bench-wan-")
        .tempdir()?;
    let project = scratch.path().join("project");
    std::fs::create_dir_all(&project)?;
    std::fs::write(project.join("README.txt"), "wan bench project\n")?;
    let mut server =
        McpClient::start(&bench.tools.cos, &rig.endpoint, scratch.path(), &project).await?;
    let tools = server.tool_names().await?;
    for tool in [
        "sandbox_exec",
        "sandbox_read",
        "sandbox_write",
        "sandbox_status",
        "sandbox_release",
    ] {
        ensure!(
            tools.iter().any(|t| t == tool),
            "cos mcp does not serve {tool}"
        );
    }
    server
        .call("sandbox_exec", json!({"command": "true"}))
        .await
        .context("binding the session sandbox")?;
    let status = server.call_json("sandbox_status", json!({})).await?;
    let session = Session {
        sandbox: status["sandbox"]
            .as_str()
            .context("sandbox_status names no sandbox")?
            .to_string(),
        cwd: status["cwd"]
            .as_str()
            .context("sandbox_status names no cwd")?
            .to_string(),
    };
    server
        .call(
            "sandbox_write",
            json!({"path": READ_PATH, "content": READ_CONTENT}),
        )
        .await
        .context("writing the file the read rows read")?;
    let cli = CosCli::new(&bench.tools.cos, rig.endpoint.clone());
    count_requests(bench, rig, &mut server, &cli, &session).await?;

    let floor_label = format!("one warm request over the link ({proto})");
    let server = Arc::new(Mutex::new(server));
    ensure!(
        rig.rtt() == ONE_WAY * 2,
        "the link models {:?}, not the RTT the goals assume",
        rig.rtt()
    );
    let suffix = format!("— WAN {} ms RTT, {proto}", rtt_ms());
    let mut out = Vec::new();

    // sandbox_exec true
    let labels = [
        "cos mcp sandbox_exec (warm)".to_string(),
        "`cos exec … bash -lc true` per call".to_string(),
        "plugin shell-out: 4 `cos` processes per call".to_string(),
        floor_label.clone(),
    ];
    let mut contenders: Vec<Box<dyn Contender>> = vec![
        Box::new(McpCall {
            server: Arc::clone(&server),
            tool: "sandbox_exec",
            arguments: json!({"command": "true"}),
            label: labels[0].clone(),
        }),
        Box::new(CosExec::at(
            &cli,
            &session.sandbox,
            labels[1].clone(),
            &["bash", "-lc", "true"],
        )),
        Box::new(PluginSequence::at(
            cli.clone(),
            &session.sandbox,
            labels[2].clone(),
            &session.cwd,
            "true",
        )),
        Box::new(Floor::new(rig, &session.sandbox, labels[3].clone())?),
    ];
    let samples = alternate(
        &mut contenders,
        bench.sizes.wan_warmup,
        bench.sizes.wan_rounds,
    )
    .await?;
    drop(contenders);
    let side = |i: usize| -> anyhow::Result<Side> {
        Ok(Side {
            label: labels[i].clone(),
            measure: Measure::latency(&durations(&samples[i])).context("no samples")?,
        })
    };
    let what = format!("tool call `sandbox_exec true` {suffix}");
    let goals = [
        (3, Goal::Below(EXEC_GOAL_RTT * rtt_ms())),
        (1, Goal::AtMost(1.0 / COS_EXEC_GOAL_SPEEDUP)),
        (2, Goal::AtMost(1.0 / PLUGIN_GOAL_SPEEDUP)),
    ];
    for (baseline, goal) in goals {
        out.push(Comparison {
            what: what.clone(),
            ours: side(0)?,
            baseline: side(baseline)?,
            goal,
        });
    }

    // sandbox_read
    let labels = [
        "cos mcp sandbox_read (warm)".to_string(),
        "`cos fs read` per call".to_string(),
        floor_label.clone(),
    ];
    let mut contenders: Vec<Box<dyn Contender>> = vec![
        Box::new(McpCall {
            server: Arc::clone(&server),
            tool: "sandbox_read",
            arguments: json!({"path": READ_PATH}),
            label: labels[0].clone(),
        }),
        Box::new(CosExec::process(
            &cli,
            "fs read",
            &["fs", &session.sandbox, "read", READ_PATH],
            labels[1].clone(),
        )),
        Box::new(Floor::new(rig, &session.sandbox, labels[2].clone())?),
    ];
    let samples = alternate(
        &mut contenders,
        bench.sizes.wan_warmup,
        bench.sizes.wan_rounds,
    )
    .await?;
    drop(contenders);
    let side = |i: usize| -> anyhow::Result<Side> {
        Ok(Side {
            label: labels[i].clone(),
            measure: Measure::latency(&durations(&samples[i])).context("no samples")?,
        })
    };
    let what = format!("tool call `sandbox_read` (2 lines) {suffix}");
    out.push(Comparison {
        what: what.clone(),
        ours: side(0)?,
        baseline: side(2)?,
        goal: Goal::Below(READ_GOAL_RTT * rtt_ms()),
    });
    out.push(Comparison {
        what,
        ours: side(0)?,
        baseline: side(1)?,
        goal: Goal::None,
    });

    // the first call of a session: create + exec
    {
        let mut server = server.lock().await;
        release(&mut server).await?;
        let (count, _) = rig
            .count(
                "`sandbox_exec true`, first call of a session (create + exec)",
                server.call("sandbox_exec", json!({"command": "true"})),
            )
            .await?;
        bench.note_requests(count);
        release(&mut server).await?;
    }
    let labels = [
        "cos mcp first sandbox_exec (session sandbox created)".to_string(),
        "plugin shell-out first call: create, get, mkdir, 4 processes".to_string(),
    ];
    let mut contenders: Vec<Box<dyn Contender>> = vec![
        Box::new(FirstCall {
            server: Arc::clone(&server),
            label: labels[0].clone(),
        }),
        Box::new(PluginFirstCall {
            cli: cli.clone(),
            client: rig.client.clone(),
            cwd: session.cwd.clone(),
            label: labels[1].clone(),
        }),
    ];
    let samples = alternate(&mut contenders, 0, bench.sizes.wan_first_rounds).await?;
    drop(contenders);
    out.push(Comparison {
        what: format!("session first call (create + `sandbox_exec true`) {suffix}"),
        ours: Side {
            label: labels[0].clone(),
            measure: Measure::latency(&durations(&samples[0])).context("no samples")?,
        },
        baseline: Side {
            label: labels[1].clone(),
            measure: Measure::latency(&durations(&samples[1])).context("no samples")?,
        },
        goal: Goal::None,
    });

    let mut server = Arc::try_unwrap(server)
        .map_err(|_| anyhow!("the MCP client is still shared"))?
        .into_inner();
    release(&mut server).await?;
    server.close().await?;
    eprintln!("[bench] the WAN link carried {}", rig.link_summary()?);
    Ok(out)
}

/// Destroy the session sandbox (`sandbox_release`), so the next session call creates one.
async fn release(server: &mut McpClient) -> anyhow::Result<()> {
    server
        .call("sandbox_release", json!({}))
        .await
        .context("sandbox_release")?;
    Ok(())
}

/// Count the requests of one warm call of every tool of issue 14's list, and of the shell-outs.
/// Each is made once untimed first (so helpers, connections and caches are warm), then counted.
/// A tool that fails is listed as pending instead of failing the row.
async fn count_requests(
    bench: &Bench,
    rig: &WanRig,
    server: &mut McpClient,
    cli: &CosCli,
    session: &Session,
) -> anyhow::Result<()> {
    server
        .call(
            "sandbox_write",
            json!({"path": EDIT_PATH, "content": "alpha\n"}),
        )
        .await
        .context("writing the file the edit counts change")?;
    let sb = session.sandbox.as_str();
    let started = server
        .call_json(
            "sandbox_process_start",
            json!({"sandbox_id": sb, "command": "echo bench"}),
        )
        .await
        .context("starting a process for sandbox_process_output")?;
    let process_id = started
        .get("process_id")
        .or_else(|| started.get("id"))
        .and_then(Value::as_str)
        .context("sandbox_process_start named no process_id")?
        .to_string();
    let patch = |from: &str, to: &str| {
        format!(
            "*** Begin Patch\n*** Update File: {EDIT_PATH}\n@@\n-{from}\n+{to}\n*** End Patch\n"
        )
    };
    // (label, tool, warm-up arguments, counted arguments)
    let calls: Vec<(&str, &str, Value, Value)> = vec![
        (
            "`sandbox_exec true`",
            "sandbox_exec",
            json!({"command": "true"}),
            json!({"command": "true"}),
        ),
        (
            "`sandbox_read` (2 lines)",
            "sandbox_read",
            json!({"path": READ_PATH}),
            json!({"path": READ_PATH}),
        ),
        (
            "`sandbox_write` (2 lines)",
            "sandbox_write",
            json!({"path": READ_PATH, "content": READ_CONTENT}),
            json!({"path": READ_PATH, "content": READ_CONTENT}),
        ),
        (
            "`sandbox_edit` (one replacement)",
            "sandbox_edit",
            json!({"path": EDIT_PATH, "oldString": "alpha", "newString": "beta"}),
            json!({"path": EDIT_PATH, "oldString": "beta", "newString": "alpha"}),
        ),
        (
            "`sandbox_patch` (one hunk)",
            "sandbox_patch",
            json!({"patchText": patch("alpha", "beta")}),
            json!({"patchText": patch("beta", "alpha")}),
        ),
        (
            "`sandbox_glob` (`*.txt` in /root)",
            "sandbox_glob",
            json!({"pattern": "*.txt", "path": "/root"}),
            json!({"pattern": "*.txt", "path": "/root"}),
        ),
        (
            "`sandbox_grep` (one file)",
            "sandbox_grep",
            json!({"pattern": "second", "path": READ_PATH}),
            json!({"pattern": "second", "path": READ_PATH}),
        ),
        (
            "`sandbox_process_output`",
            "sandbox_process_output",
            json!({"sandbox_id": sb, "process_id": process_id}),
            json!({"sandbox_id": sb, "process_id": process_id}),
        ),
    ];
    for (label, tool, warm, counted) in calls {
        let label = format!("{label}, warm `cos mcp`");
        let outcome = async {
            server.call(tool, warm).await.context("warm-up call")?;
            rig.count(label.clone(), server.call(tool, counted)).await
        }
        .await;
        match outcome {
            Ok((count, _)) => bench.note_requests(count),
            Err(err) => bench.note_pending(format!("requests of {label}"), format!("{err:#}")),
        }
    }
    // the shell-outs, once each (a process has nothing to warm)
    let (count, _) = rig
        .count(
            "`cos exec … bash -lc true` (one process)",
            run_cos(
                &mut cli.command(&["exec", sb, "--", "bash", "-lc", "true"]),
                "exec",
            ),
        )
        .await?;
    bench.note_requests(count);
    let (count, _) = rig
        .count(
            "`cos fs read` (one process)",
            run_cos(&mut cli.command(&["fs", sb, "read", READ_PATH]), "fs read"),
        )
        .await?;
    bench.note_requests(count);
    let (count, _) = rig
        .count(
            "plugin shell-out `sandbox_exec` (4 processes)",
            plugin_exec(cli, sb, &session.cwd, "true"),
        )
        .await?;
    bench.note_requests(count);
    Ok(())
}

/// One warm request through the link: `GET /v1/sandboxes/{id}` on a keep-alive connection.
struct Floor {
    http: reqwest::Client,
    url: String,
    key: String,
    label: String,
}

impl Floor {
    fn new(rig: &WanRig, sandbox: &str, label: String) -> anyhow::Result<Floor> {
        Ok(Floor {
            http: rig.http().clone(),
            url: format!("{}/v1/sandboxes/{sandbox}", rig.endpoint.base_url),
            key: rig.endpoint.api_key.clone(),
            label,
        })
    }
}

impl Contender for Floor {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move {
            let started = Instant::now();
            let response = self
                .http
                .get(&self.url)
                .header("X-Api-Key", &self.key)
                .send()
                .await?;
            let status = response.status();
            let body = response.bytes().await?;
            let elapsed = started.elapsed();
            ensure!(
                status.is_success(),
                "GET sandbox answered {status}: {}",
                String::from_utf8_lossy(&body)
            );
            Ok(Sample::time(elapsed))
        })
    }
}

/// The first `sandbox_exec` of a session without a sandbox; the sandbox is released afterwards,
/// untimed.
struct FirstCall {
    server: Arc<Mutex<McpClient>>,
    label: String,
}

impl Contender for FirstCall {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move {
            let mut server = self.server.lock().await;
            let started = Instant::now();
            server
                .call("sandbox_exec", json!({"command": "true"}))
                .await?;
            let elapsed = started.elapsed();
            release(&mut server).await?;
            Ok(Sample::time(elapsed))
        })
    }
}

/// The plugin's first call with `cos` for the CLI: create, readiness, `mkdir -p` of the working
/// directory, then the four-process managed execution. Its sandbox is destroyed untimed.
struct PluginFirstCall {
    cli: CosCli,
    client: Client,
    cwd: String,
    label: String,
}

/// Readiness polls before giving up (the plugin polls once a second; the bench does not sleep).
const READY_POLLS: usize = 600;

impl PluginFirstCall {
    async fn once(&self) -> anyhow::Result<String> {
        let created = run_cos(
            &mut self
                .cli
                .command(&["-o", "json", "create", "--shape", SESSION_SHAPE]),
            "create",
        )
        .await?;
        let view: Value =
            serde_json::from_slice(&created.stdout).context("create printed no JSON")?;
        let id = view["id"]
            .as_str()
            .context("create printed no id")?
            .to_string();
        let mut ready = false;
        for _ in 0..READY_POLLS {
            let got = run_cos(&mut self.cli.command(&["-o", "json", "get", &id]), "get").await?;
            let view: Value = serde_json::from_slice(&got.stdout).context("get printed no JSON")?;
            if view["status"].as_str() == Some("running") {
                ready = true;
                break;
            }
        }
        ensure!(ready, "sandbox {id} did not reach running");
        let mkdir = format!("mkdir -p {}", createos_sandbox::shell::quote(&self.cwd));
        run_cos(
            &mut self
                .cli
                .command(&["exec", &id, "--", "bash", "-lc", &mkdir]),
            "exec mkdir",
        )
        .await?;
        plugin_exec(&self.cli, &id, &self.cwd, "true").await?;
        Ok(id)
    }
}

impl Contender for PluginFirstCall {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move {
            let started = Instant::now();
            let id = self.once().await?;
            let elapsed = started.elapsed();
            let sandbox = self.client.sandbox(&id)?;
            sandbox
                .destroy()
                .await
                .with_context(|| format!("destroying {id}"))?;
            Ok(Sample::time(elapsed))
        })
    }
}
