//! What every row works with: the sizes of this run, the emulator, a client and a sandbox, and
//! the external tools (the official SDKs, `cos`, git, tar), checked before anything runs.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, ensure, Context as _};
use createos_sandbox::{Client, CreateSandbox, Sandbox};

use crate::report::{Pending, RequestCount};

/// Sample counts and sizes of one run.
#[derive(Clone, Debug)]
pub struct Sizes {
    pub exec_warmup: usize,
    pub exec_rounds: usize,
    pub stream_bytes: u64,
    pub stream_warmup: usize,
    pub stream_rounds: usize,
    pub attach_warmup: usize,
    pub attach_rounds: usize,
    pub snapshot_files: usize,
    pub snapshot_warmup: usize,
    pub snapshot_rounds: usize,
    pub transfer_bytes: u64,
    pub transfer_warmup: usize,
    pub transfer_rounds: usize,
    pub sync_files: usize,
    pub sync_changed: usize,
    pub sync_warmup: usize,
    pub sync_initial_rounds: usize,
    pub sync_incremental_rounds: usize,
    pub wan_warmup: usize,
    pub wan_rounds: usize,
    pub wan_first_rounds: usize,
}

impl Sizes {
    /// The real run: a few minutes on a small machine.
    pub fn full() -> Sizes {
        Sizes {
            exec_warmup: 20,
            exec_rounds: 300,
            stream_bytes: 200 * 1024 * 1024,
            stream_warmup: 1,
            stream_rounds: 5,
            attach_warmup: 20,
            attach_rounds: 300,
            snapshot_files: 20_000,
            snapshot_warmup: 1,
            snapshot_rounds: 7,
            transfer_bytes: 500_000_000,
            transfer_warmup: 1,
            transfer_rounds: 5,
            sync_files: 20_000,
            sync_changed: 10,
            sync_warmup: 1,
            sync_initial_rounds: 7,
            sync_incremental_rounds: 5,
            wan_warmup: 3,
            wan_rounds: 40,
            wan_first_rounds: 10,
        }
    }

    /// `COS_BENCH_QUICK=1`: tiny sizes, a handful of samples; checks the harness end to end.
    pub fn quick() -> Sizes {
        Sizes {
            exec_warmup: 2,
            exec_rounds: 10,
            stream_bytes: 4 * 1024 * 1024,
            stream_warmup: 0,
            stream_rounds: 3,
            attach_warmup: 2,
            attach_rounds: 10,
            snapshot_files: 500,
            snapshot_warmup: 0,
            snapshot_rounds: 3,
            transfer_bytes: 8_000_000,
            transfer_warmup: 0,
            transfer_rounds: 2,
            sync_files: 300,
            sync_changed: 10,
            sync_warmup: 0,
            sync_initial_rounds: 2,
            sync_incremental_rounds: 2,
            wan_warmup: 1,
            wan_rounds: 3,
            wan_first_rounds: 2,
        }
    }
}

/// External programs the comparisons need.
#[derive(Clone, Debug)]
pub struct Tools {
    /// The workspace root (holds interop/ and benches/).
    pub root: PathBuf,
    /// `interop/ts`, where `@nodeops-createos/sandbox` is installed.
    pub ts_dir: PathBuf,
    /// `interop/python/.venv/bin/python`, with `createos-sandbox` installed.
    pub python: PathBuf,
    /// The `cos` binary of this build.
    pub cos: PathBuf,
}

const SETUP_HINT: &str =
    "run `bash cos/benches/setup.sh` (it installs the pinned SDKs into interop/ the way interop/run.sh does)";

impl Tools {
    /// Find everything, or fail saying what is missing and how to get it.
    pub fn locate() -> anyhow::Result<Tools> {
        // The repository root: the bench belongs to the `cos` package, one level down.
        let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
        let tools = Tools {
            ts_dir: root.join("interop/ts"),
            python: root.join("interop/python/.venv/bin/python"),
            cos: PathBuf::from(env!("CARGO_BIN_EXE_cos")),
            root,
        };
        for program in ["node", "git", "tar", "sh", "head", "stty", "cat"] {
            if !on_path(program) {
                bail!("`{program}` is needed by the benchmark but was not found on PATH");
            }
        }
        if !tools
            .ts_dir
            .join("node_modules/@nodeops-createos/sandbox/package.json")
            .is_file()
        {
            bail!(
                "the official TypeScript SDK is not installed in {}: {SETUP_HINT}",
                tools.ts_dir.display()
            );
        }
        if !tools.python.is_file()
            || !runs(Command::new(&tools.python).args(["-c", "import createos"]))
        {
            bail!(
                "the official Python SDK is not importable from {}: {SETUP_HINT}",
                tools.python.display()
            );
        }
        if !tools.cos.is_file() {
            bail!("the `cos` binary was not built at {}", tools.cos.display());
        }
        Ok(tools)
    }

    pub fn worker_script(&self, name: &str) -> PathBuf {
        self.root.join("cos/benches/sdk").join(name)
    }

    /// The emulator's own binary (`createos-mock`, the WAN rows run it as a separate server),
    /// built now in the profile `cos` was built in so it is never stale; `cargo build` returns at
    /// once when it is up to date.
    pub fn mock_binary(&self) -> anyhow::Result<PathBuf> {
        let dir = self
            .cos
            .parent()
            .context("the cos binary has no directory")?;
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut build = Command::new(cargo);
        build.current_dir(&self.root).args([
            "build",
            "--quiet",
            "-p",
            "createos-mock",
            "--bin",
            "createos-mock",
        ]);
        // What cargo set for this run (the bench's package name, manifest dir, …): build scripts
        // such as ring's rerun when those change, and every crate above them would rebuild, here
        // and again in the next `cargo bench`.
        const RUN_VARS: [&str; 8] = [
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_TARGET_TMPDIR",
            "CARGO_RUSTC_CURRENT_DIR",
            "CARGO_MAKEFLAGS",
        ];
        for (name, _) in std::env::vars_os() {
            if name
                .to_str()
                .is_some_and(|n| RUN_VARS.iter().any(|p| n.starts_with(p)))
            {
                build.env_remove(&name);
            }
        }
        if dir.file_name().is_some_and(|name| name == "release") {
            build.arg("--release");
        }
        let status = build
            .status()
            .context("running cargo build -p createos-mock")?;
        ensure!(
            status.success(),
            "cargo build -p createos-mock failed ({status})"
        );
        let mock = dir.join("createos-mock");
        ensure!(
            mock.is_file(),
            "cargo built createos-mock, but not at {}",
            mock.display()
        );
        Ok(mock)
    }
}

/// A control plane a child process (`cos`) is pointed at: its base URL, the key, and the CA
/// file that signs its certificate when it serves HTTPS with a certificate of its own.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub base_url: String,
    pub api_key: String,
    pub ca_file: Option<PathBuf>,
}

impl Endpoint {
    /// Point `command` (a `cos` invocation, before its subcommand) at this endpoint: the URL
    /// as `--endpoint`, the key and the CA file through the environment (never the command
    /// line), and nothing inherited that could redirect it.
    pub fn apply(&self, command: &mut tokio::process::Command) {
        command
            .arg("--endpoint")
            .arg(&self.base_url)
            .env("CREATEOS_API_KEY", &self.api_key)
            .env_remove("CREATEOS_SANDBOX_BASE_URL")
            .env_remove("CREATEOS_SANDBOX_URL")
            .env_remove("CREATEOS_CA_FILE")
            .env_remove("SSL_CERT_FILE")
            .env_remove("RUST_LOG");
        if let Some(ca) = &self.ca_file {
            command.env("CREATEOS_CA_FILE", ca);
        }
    }
}

fn runs(cmd: &mut Command) -> bool {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

/// The shared state of a run. The emulator itself lives on its own runtime (see `main`), so
/// its threads never compete with the client's executor for scheduling.
pub struct Bench {
    pub sizes: Sizes,
    pub tools: Tools,
    pub sandbox: Sandbox,
    base_url: String,
    api_key: String,
    /// Measurements a row found it could not take in this run (listed as pending).
    pending: std::sync::Mutex<Vec<Pending>>,
    /// Control-plane requests counted per call (listed in their own table).
    requests: std::sync::Mutex<Vec<RequestCount>>,
    /// How a row's own set-up ran (listed with the machine), e.g. the WAN emulator's isolation.
    settings: std::sync::Mutex<Vec<(String, String)>>,
}

impl Bench {
    pub async fn connect(
        sizes: Sizes,
        tools: Tools,
        base_url: String,
        api_key: String,
    ) -> anyhow::Result<Bench> {
        let client = Client::builder()
            .base_url(&base_url)
            .api_key(&api_key)
            .env(|_| None)
            .build()
            .context("building the client")?;
        let sandbox = client
            .create_sandbox(CreateSandbox::new("s-1vcpu-1gb"))
            .await
            .context("creating the sandbox")?;
        Ok(Bench {
            sizes,
            tools,
            sandbox,
            base_url,
            api_key,
            pending: Default::default(),
            requests: Default::default(),
            settings: Default::default(),
        })
    }

    /// Record that `title` could not be measured in this run, and why (printed as
    /// `pending: …` and listed under "Pending rows").
    pub fn note_pending(&self, title: impl Into<String>, why: impl Into<String>) {
        let (title, why) = (title.into(), why.into());
        eprintln!("[bench] pending: {why}");
        if let Ok(mut pending) = self.pending.lock() {
            pending.push(Pending { title, why });
        }
    }

    /// The pending notes recorded so far.
    pub fn take_pending(&self) -> Vec<Pending> {
        self.pending
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default()
    }

    /// Record the requests one call made at the emulator.
    pub fn note_requests(&self, count: RequestCount) {
        eprintln!("[bench] {}: {} request(s)", count.call, count.total());
        if let Ok(mut requests) = self.requests.lock() {
            requests.push(count);
        }
    }

    /// Record how a row's set-up ran (`key: value`, listed with the machine in BENCHMARKS.md).
    pub fn note_setting(&self, key: impl Into<String>, value: impl Into<String>) {
        let (key, value) = (key.into(), value.into());
        eprintln!("[bench] {key}: {value}");
        if let Ok(mut settings) = self.settings.lock() {
            settings.push((key, value));
        }
    }

    /// The settings recorded so far.
    pub fn take_settings(&self) -> Vec<(String, String)> {
        self.settings
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }

    /// The request counts recorded so far.
    pub fn take_requests(&self) -> Vec<RequestCount> {
        self.requests
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default()
    }

    /// The loopback emulator, for child processes.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint {
            base_url: self.base_url.clone(),
            api_key: self.api_key.clone(),
            ca_file: None,
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The emulator's key (given to child processes through their environment, never printed).
    pub fn api_key(&self) -> &str {
        &self.api_key
    }

    pub async fn close(self) -> anyhow::Result<()> {
        self.sandbox
            .destroy()
            .await
            .context("destroying the sandbox")?;
        Ok(())
    }
}
