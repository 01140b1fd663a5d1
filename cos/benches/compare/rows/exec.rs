//! exec round trip: `true` run through our crate, a hand-written reqwest call, the official
//! TypeScript and Python SDKs (warm worker processes) and a `cos exec` process per call.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use futures::future::BoxFuture;
use serde_json::{json, Value};

use createos_sandbox::Sandbox;

use super::shellout::CosExec;
use super::Row;
use crate::env::{Bench, Sizes};
use crate::interleave::{alternate, durations, Contender, Sample};
use crate::sdk::Worker;
use crate::stats::{Comparison, Goal, Measure, Side};

pub fn row() -> Row {
    Row {
        id: "exec",
        title: "exec round trip (`true`)",
        method,
        run: |bench| Box::pin(run(bench)),
    }
}

fn method(sizes: &Sizes) -> String {
    format!(
        "One buffered exec of `true` (`POST /v1/sandboxes/{{id}}/exec`, body `{{\"cmd\":\"true\"}}`) in one \
         sandbox of the emulator, which runs a real process each time. {warm} warm-up rounds, then {n} \
         rounds; each round takes one sample of every contender, in an order shuffled every round.\n\n\
         - **createos_sandbox**: `Sandbox::exec(\"true\", [])` (reqwest + rustls client, pooled keep-alive \
         connection, typed decoding), timed around the call.\n\
         - **raw reqwest**: a `reqwest::Client` built like the crate's (rustls, 60 s idle pool, \
         TCP_NODELAY) posting the same JSON with the `X-Api-Key` header and decoding the answer into a \
         `serde_json::Value`, checked for `status: success` — the floor for any Rust client.\n\
         - **TypeScript SDK**: `@nodeops-createos/sandbox` (interop/ts) in one long-lived Node process \
         (`cos/benches/sdk/exec_worker.mjs`); `sandbox.runCommand(\"true\", [])` is timed inside Node with \
         `process.hrtime.bigint()`, so neither process start-up nor the stdin/stdout hop is counted.\n\
         - **Python SDK**: `createos-sandbox` (interop/python/.venv) in one long-lived Python process \
         (`cos/benches/sdk/exec_worker.py`), `sandbox.run_command(...)` timed with `time.perf_counter_ns()`.\n\
         - **`cos exec` per call**: `cos --endpoint <emulator> exec <sandbox id> -- true` spawned for each \
         sample, timed from spawn to exit: what an integration shelling out to a CLI pays per command \
         (process start, credential lookup, `GET` of the sandbox, streamed exec).",
        warm = sizes.exec_warmup,
        n = sizes.exec_rounds,
    )
}

async fn run(bench: &Bench) -> anyhow::Result<Vec<Comparison>> {
    let tools = &bench.tools;
    let mut node = Worker::spawn(
        "node",
        "node".as_ref(),
        &[
            tools.worker_script("exec_worker.mjs").into(),
            tools.ts_dir.clone().into(),
        ],
        bench,
    )
    .await?;
    let ts_version = node.init(bench.sandbox.id()).await?;
    let mut python = Worker::spawn(
        "python",
        &tools.python,
        &[OsString::from(tools.worker_script("exec_worker.py"))],
        bench,
    )
    .await?;
    let py_version = python.init(bench.sandbox.id()).await?;

    let labels = [
        "createos_sandbox".to_string(),
        "raw reqwest".to_string(),
        format!("TypeScript SDK {ts_version} (warm node)"),
        format!("Python SDK {py_version} (warm python)"),
        "`cos exec` per call".to_string(),
    ];
    let mut contenders: Vec<Box<dyn Contender>> = vec![
        Box::new(Ours {
            sandbox: bench.sandbox.clone(),
            label: labels[0].clone(),
        }),
        Box::new(Raw::new(bench, labels[1].clone())?),
        Box::new(Sdk {
            worker: node,
            label: labels[2].clone(),
        }),
        Box::new(Sdk {
            worker: python,
            label: labels[3].clone(),
        }),
        Box::new(CosExec::new(bench, labels[4].clone(), &["true"])),
    ];
    let samples = alternate(
        &mut contenders,
        bench.sizes.exec_warmup,
        bench.sizes.exec_rounds,
    )
    .await?;
    for contender in contenders {
        contender.close().await?;
    }

    let measure = |i: usize| Measure::latency(&durations(&samples[i])).context("no exec samples");
    let ours = Side {
        label: labels[0].clone(),
        measure: measure(0)?,
    };
    let what = "exec `true` round trip";
    let goals = [
        (1, Goal::AtMost(1.2)),
        (2, Goal::Faster),
        (3, Goal::Faster),
        (4, Goal::None),
    ];
    goals
        .into_iter()
        .map(|(i, goal)| {
            Ok(Comparison {
                what: what.to_string(),
                ours: ours.clone(),
                baseline: Side {
                    label: labels[i].clone(),
                    measure: measure(i)?,
                },
                goal,
            })
        })
        .collect()
}

struct Ours {
    sandbox: Sandbox,
    label: String,
}

impl Contender for Ours {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move {
            let started = Instant::now();
            let out = self.sandbox.exec("true", Vec::<String>::new()).await?;
            let elapsed = started.elapsed();
            ensure!(
                out.success(),
                "`true` failed: exit {} {:?}",
                out.exit_code,
                out.error
            );
            Ok(Sample::time(elapsed))
        })
    }
}

/// The same request written by hand.
struct Raw {
    http: reqwest::Client,
    url: String,
    key: String,
    label: String,
}

impl Raw {
    fn new(bench: &Bench, label: String) -> anyhow::Result<Raw> {
        let http = reqwest::Client::builder()
            .use_rustls_tls()
            .pool_idle_timeout(Duration::from_secs(60))
            .tcp_nodelay(true)
            .build()?;
        let url = format!(
            "{}/v1/sandboxes/{}/exec",
            bench.base_url().trim_end_matches('/'),
            bench.sandbox.id()
        );
        Ok(Raw {
            http,
            url,
            key: bench.api_key().to_string(),
            label,
        })
    }
}

impl Contender for Raw {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move {
            let started = Instant::now();
            let response = self
                .http
                .post(&self.url)
                .header("x-api-key", &self.key)
                .json(&json!({ "cmd": "true" }))
                .send()
                .await?;
            let status = response.status();
            let body = response.bytes().await?;
            let answer: Value = serde_json::from_slice(&body)?;
            let elapsed = started.elapsed();
            ensure!(
                status.is_success() && answer["status"] == "success",
                "exec answered {status}: {answer}"
            );
            let code = &answer["data"]["result"]["exit_code"];
            ensure!(code.is_null() || code == 0, "`true` exited with {code}");
            Ok(Sample::time(elapsed))
        })
    }
}

/// An official SDK in a warm worker.
struct Sdk {
    worker: Worker,
    label: String,
}

impl Contender for Sdk {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn sample(&mut self) -> BoxFuture<'_, anyhow::Result<Sample>> {
        Box::pin(async move { Ok(Sample::time(self.worker.exec().await?)) })
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, anyhow::Result<()>> {
        let this = *self;
        Box::pin(this.worker.close())
    }
}
