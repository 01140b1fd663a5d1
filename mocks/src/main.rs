//! `createos-mock` binary: serves the emulator until SIGTERM/SIGINT, printing one JSON
//! line `{"base_url": …, "api_key": …}` on stdout once ready.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use createos_mock::computer::DEFAULT_SCREENSHOTS_PER_SECOND;
use createos_mock::config::{parse_duration, IsolationMode, Latencies, DEFAULT_JOURNAL_BYTES};
use createos_mock::MockConfig;

#[derive(Debug, Parser)]
#[command(
    name = "createos-mock",
    version,
    about = "Local emulator of the CreateOS sandbox control plane"
)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// API key of a tenant (repeatable; one tenant per key). Default: one random key.
    #[arg(long = "api-key")]
    api_keys: Vec<String>,
    /// Where sandbox files live (kept at exit). Default: a temp dir removed at exit.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Fault rule, e.g. "POST /v1/sandboxes status=503 count=1" (repeatable).
    #[arg(long = "fault")]
    faults: Vec<String>,
    /// Latencies, e.g. "pause=300ms,resume=1s" (create|pause|resume|fork|destroy|template_build).
    #[arg(long)]
    latency: Vec<String>,
    /// Output retained per managed process, in bytes (default 8 MiB).
    #[arg(long, default_value_t = DEFAULT_JOURNAL_BYTES)]
    journal_bytes: usize,
    /// Heartbeat interval of streams (e.g. 5s).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    heartbeat: std::time::Duration,
    /// auto|namespaces|none. Namespaces (root, Linux): private mounts and network per sandbox,
    /// with outbound access over a veth link when `ip` (and nft/iptables for NAT) exist.
    #[arg(long, default_value = "auto")]
    isolation: IsolationMode,
    /// Answer the disks API with 503 "disks API not configured".
    #[arg(long)]
    no_disks: bool,
    /// Wall-clock length of one second of auto_pause_after_seconds (e.g. 10ms in tests).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    auto_pause_unit: std::time::Duration,
    /// How long a desktop sandbox's desktop stays booting (409) after it starts running (e.g. 2s).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    desktop_startup: std::time::Duration,
    /// Screenshots per second per sandbox before 429 (0 = unlimited).
    #[arg(long, default_value_t = DEFAULT_SCREENSHOTS_PER_SECOND)]
    screenshots_per_second: u32,
    /// Also serve the SSH gateway (user = sandbox id; only direct-tcpip to its 127.0.0.1:22);
    /// its address is added to the ready line as "ssh_gateway".
    #[arg(long)]
    ssh_gateway: bool,
    /// Serve HTTPS with a certificate from a CA generated at start; the CA's PEM file is
    /// named in the ready line as "ca_file".
    #[arg(long)]
    tls: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let mut latencies = Latencies::default();
    for spec in &args.latency {
        latencies.apply_spec(spec).map_err(anyhow::Error::msg)?;
    }
    let mut config = MockConfig::default()
        .listen(args.listen)
        .latencies(latencies)
        .journal_bytes(args.journal_bytes)
        .heartbeat(args.heartbeat)
        .isolation(args.isolation)
        .disks_configured(!args.no_disks)
        .auto_pause_unit(args.auto_pause_unit)
        .desktop_startup(args.desktop_startup)
        .screenshots_per_second(args.screenshots_per_second)
        .ssh_gateway(args.ssh_gateway)
        .tls(args.tls);
    config.api_keys = args.api_keys;
    config.state_dir = args.state_dir;
    config.faults = args.faults;

    let handle = createos_mock::start(config).await?;
    let mut line = serde_json::json!({
        "base_url": handle.base_url(),
        "api_key": handle.api_key(),
        "isolation": handle.isolation(),
    });
    if let Some(ca) = handle.ca_file() {
        line["ca_file"] = serde_json::json!(ca.display().to_string());
    }
    if let Some(gateway) = handle.ssh_gateway_addr() {
        line["ssh_gateway"] = serde_json::json!(gateway.to_string());
    }
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}")?;
        out.flush()?;
    }
    wait_for_signal().await;
    tracing::info!("shutting down");
    handle.shutdown().await;
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
