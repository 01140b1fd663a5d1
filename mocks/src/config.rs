//! Emulator configuration (`MockConfig`): listen address, tenants' API keys, state
//! directory, injected faults, simulated latencies, stream heartbeat and isolation mode.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// How sandbox processes are isolated from the host and from each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationMode {
    /// Namespaces + cgroup v2 when running as root on Linux, otherwise the fallback.
    #[default]
    Auto,
    /// Namespaces + cgroup v2 or refuse to start.
    Namespaces,
    /// Always the fallback (process groups, sandbox dir as HOME/cwd).
    None,
}

impl FromStr for IsolationMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "namespaces" => Ok(Self::Namespaces),
            "none" => Ok(Self::None),
            other => Err(format!(
                "unknown isolation mode {other:?} (auto|namespaces|none)"
            )),
        }
    }
}

/// What answers on port 22 inside each sandbox's network view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GuestSshd {
    /// `OpenSsh` when the host has `/usr/sbin/sshd`, else `Embedded`.
    #[default]
    Auto,
    /// Like an image that ships OpenSSH: nothing listens at boot; the client starts the
    /// host's real `/usr/sbin/sshd` inside the sandbox through the exec API.
    OpenSsh,
    /// An in-process SSH server (exec, SFTP, direct-tcpip) listens on port 22 of every
    /// running sandbox from boot, as if the image's sshd were running.
    Embedded,
    /// An image without sshd: nothing listens and no sshd binary is visible in the guest.
    Absent,
}

/// Env var that selects [`GuestSshd`] for `MockConfig::default()` (and so for the binary).
pub const GUEST_SSHD_ENV: &str = "CREATEOS_MOCK_GUEST_SSHD";

/// Where OpenSSH's server lives on the host (and, through the host filesystem, in guests).
pub const HOST_SSHD_PATH: &str = "/usr/sbin/sshd";

impl GuestSshd {
    /// `Auto` resolved against this host.
    pub fn resolve(self) -> GuestSshd {
        match self {
            GuestSshd::Auto if std::path::Path::new(HOST_SSHD_PATH).exists() => GuestSshd::OpenSsh,
            GuestSshd::Auto => GuestSshd::Embedded,
            other => other,
        }
    }

    /// The value of `CREATEOS_MOCK_GUEST_SSHD`: `None` when unset or empty, an error naming
    /// the accepted values when it is not one of them.
    pub fn from_env() -> Result<Option<GuestSshd>, String> {
        match std::env::var(GUEST_SSHD_ENV) {
            Ok(raw) if raw.trim().is_empty() => Ok(None),
            Ok(raw) => raw
                .parse()
                .map(Some)
                .map_err(|e| format!("{GUEST_SSHD_ENV}: {e}")),
            Err(_) => Ok(None),
        }
    }
}

impl FromStr for GuestSshd {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "openssh" => Ok(Self::OpenSsh),
            "embedded" => Ok(Self::Embedded),
            "absent" | "none" => Ok(Self::Absent),
            other => Err(format!(
                "unknown guest sshd mode {other:?} (auto|openssh|embedded|absent)"
            )),
        }
    }
}

/// Simulated durations of slow control-plane operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Latencies {
    /// Time POST /v1/sandboxes takes before answering (create is synchronous).
    pub create: Duration,
    /// Time a sandbox stays `pausing`.
    pub pause: Duration,
    /// Time a sandbox stays `resuming`.
    pub resume: Duration,
    /// Time a fork child stays `forking`.
    pub fork: Duration,
    /// Time a sandbox stays `destroying`.
    pub destroy: Duration,
    /// Time per Dockerfile instruction of a template build.
    pub template_build: Duration,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            create: Duration::from_millis(5),
            pause: Duration::from_millis(20),
            resume: Duration::from_millis(20),
            fork: Duration::from_millis(20),
            destroy: Duration::from_millis(10),
            template_build: Duration::from_millis(10),
        }
    }
}

impl Latencies {
    /// Applies `op=DUR[,op=DUR…]` (e.g. `pause=300ms,resume=1s`).
    pub fn apply_spec(&mut self, spec: &str) -> Result<(), String> {
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (op, dur) = part
                .split_once('=')
                .ok_or_else(|| format!("latency {part:?} must look like op=DUR"))?;
            let dur = parse_duration(dur)?;
            match op.trim() {
                "create" => self.create = dur,
                "pause" => self.pause = dur,
                "resume" => self.resume = dur,
                "fork" => self.fork = dur,
                "destroy" => self.destroy = dur,
                "template_build" => self.template_build = dur,
                other => {
                    return Err(format!(
                        "unknown latency op {other:?} (create|pause|resume|fork|destroy|template_build)"
                    ))
                }
            }
        }
        Ok(())
    }
}

/// Parses `250ms`, `2s`, `1.5s`, `1m`, `500us` or a bare number of milliseconds.
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    let raw = raw.trim();
    let split = raw
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(raw.len());
    let (num, unit) = raw.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration {raw:?}"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("invalid duration {raw:?}"));
    }
    let secs = match unit {
        "" | "ms" => value / 1000.0,
        "us" => value / 1_000_000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("invalid duration unit in {raw:?} (us|ms|s|m|h)")),
    };
    Ok(Duration::from_secs_f64(secs))
}

/// Output retained per managed process unless configured otherwise (8 MiB).
pub const DEFAULT_JOURNAL_BYTES: usize = 8 << 20;

/// Everything the emulator needs to start. `Default` is fast, uses one random API key,
/// a temporary state directory and automatic isolation.
#[derive(Debug, Clone)]
pub struct MockConfig {
    pub listen: SocketAddr,
    /// One tenant per key; empty → one random key.
    pub api_keys: Vec<String>,
    /// Where sandbox filesystems live; `None` → a temp dir removed at shutdown.
    pub state_dir: Option<PathBuf>,
    /// Fault rules (grammar in `faults.rs`) active from the start.
    pub faults: Vec<String>,
    pub latencies: Latencies,
    /// Retained output per managed process (bytes).
    pub journal_bytes: usize,
    /// Interval of `{"hb":true}` / heartbeat frames on streams.
    pub heartbeat: Duration,
    pub isolation: IsolationMode,
    /// When false the disks API answers 503 `disks API not configured`.
    pub disks_configured: bool,
    /// Wall-clock length of one "second" of `auto_pause_after_seconds` (tests shrink it).
    pub auto_pause_unit: Duration,
    /// How long a VPN session lives without renewal.
    pub vpn_session_ttl: Duration,
    /// Region reported in sandbox views.
    pub region: String,
    /// How long after a desktop sandbox starts running its desktop answers 409 (booting).
    pub desktop_startup: Duration,
    /// Screenshots per second per sandbox before 429 (0 = unlimited).
    pub screenshots_per_second: u32,
    /// Also serve the SSH gateway (user = sandbox id, `direct-tcpip` to its port 22) on an
    /// ephemeral port of the listen address; see `MockHandle::ssh_gateway_addr`.
    pub ssh_gateway: bool,
    /// What listens on port 22 in each sandbox (default: `CREATEOS_MOCK_GUEST_SSHD`, else auto).
    pub guest_sshd: GuestSshd,
    /// Serve HTTPS with a certificate from a CA generated at start (`MockHandle::ca_file`).
    pub tls: bool,
}

impl Default for MockConfig {
    fn default() -> Self {
        MockConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            api_keys: Vec::new(),
            state_dir: None,
            faults: Vec::new(),
            latencies: Latencies::default(),
            journal_bytes: DEFAULT_JOURNAL_BYTES,
            heartbeat: Duration::from_secs(5),
            isolation: IsolationMode::Auto,
            disks_configured: true,
            auto_pause_unit: Duration::from_secs(1),
            vpn_session_ttl: Duration::from_secs(60),
            region: "local".to_string(),
            desktop_startup: Duration::ZERO,
            screenshots_per_second: crate::computer::DEFAULT_SCREENSHOTS_PER_SECOND,
            ssh_gateway: false,
            // An invalid value is reported by `start` (see `GuestSshd::from_env`).
            guest_sshd: GuestSshd::from_env().ok().flatten().unwrap_or_default(),
            tls: false,
        }
    }
}

impl MockConfig {
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_keys.push(key.into());
        self
    }
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_dir = Some(dir.into());
        self
    }
    pub fn fault(mut self, rule: impl Into<String>) -> Self {
        self.faults.push(rule.into());
        self
    }
    pub fn latencies(mut self, latencies: Latencies) -> Self {
        self.latencies = latencies;
        self
    }
    pub fn journal_bytes(mut self, bytes: usize) -> Self {
        self.journal_bytes = bytes;
        self
    }
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every;
        self
    }
    pub fn isolation(mut self, mode: IsolationMode) -> Self {
        self.isolation = mode;
        self
    }
    pub fn disks_configured(mut self, on: bool) -> Self {
        self.disks_configured = on;
        self
    }
    pub fn auto_pause_unit(mut self, unit: Duration) -> Self {
        self.auto_pause_unit = unit;
        self
    }
    pub fn vpn_session_ttl(mut self, ttl: Duration) -> Self {
        self.vpn_session_ttl = ttl;
        self
    }
    pub fn desktop_startup(mut self, delay: Duration) -> Self {
        self.desktop_startup = delay;
        self
    }
    pub fn screenshots_per_second(mut self, limit: u32) -> Self {
        self.screenshots_per_second = limit;
        self
    }
    pub fn ssh_gateway(mut self, on: bool) -> Self {
        self.ssh_gateway = on;
        self
    }
    pub fn guest_sshd(mut self, mode: GuestSshd) -> Self {
        self.guest_sshd = mode;
        self
    }
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("15").unwrap(), Duration::from_millis(15));
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("3days").is_err());
    }

    #[test]
    fn guest_sshd_modes_parse() {
        assert_eq!(
            "embedded".parse::<GuestSshd>().unwrap(),
            GuestSshd::Embedded
        );
        assert_eq!("OpenSSH".parse::<GuestSshd>().unwrap(), GuestSshd::OpenSsh);
        assert_eq!("absent".parse::<GuestSshd>().unwrap(), GuestSshd::Absent);
        assert!("dropbear".parse::<GuestSshd>().is_err());
        assert_ne!(GuestSshd::Auto.resolve(), GuestSshd::Auto);
        assert_eq!(GuestSshd::Absent.resolve(), GuestSshd::Absent);
    }

    #[test]
    fn latency_spec_applies() {
        let mut l = Latencies::default();
        l.apply_spec("pause=1s, resume=30ms").unwrap();
        assert_eq!(l.pause, Duration::from_secs(1));
        assert_eq!(l.resume, Duration::from_millis(30));
        assert!(l.apply_spec("bogus=1s").is_err());
    }
}
