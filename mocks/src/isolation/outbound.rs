//! Outbound network for sandboxes in namespaces mode (Linux, root).
//!
//! A sandbox's network namespace starts with loopback only. When the host allows it,
//! each sandbox also gets a veth pair: the host end `cosmk<N>` holds `10.213.x.y+1/30`,
//! the guest end `eth0` holds `+2/30` with a default route through the host end. That
//! alone lets sandbox processes reach the host (its veth address and its other local
//! addresses). With `nft` or `iptables` on the host, IPv4 forwarding is switched on and
//! a MASQUERADE rule per sandbox lets them reach whatever the host reaches.
//!
//! The `/30` index doubles as a host-wide lock: the host interface name is derived from
//! it, so two emulators on one host never pick the same subnet (creation fails with
//! "File exists" and the next index is tried). Everything is removed on destroy; a
//! crashed emulator's pairs disappear with their namespaces.
//!
//! When something is missing (no `ip`, no permission, no NAT tool) one clear warning is
//! logged and sandboxes keep what still works: loopback only, or host-only.

use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use rand::Rng;

/// First address of the range the `/30` links are carved from (10.213.0.0/16).
const LINK_RANGE_BASE: u32 = u32::from_be_bytes([10, 213, 0, 0]);
/// Number of `/30` subnets in the range.
const LINK_SLOTS: u32 = 1 << 14;
/// Host interface names start with this (followed by the slot number).
pub const HOST_IF_PREFIX: &str = "cosmk";
/// Slots tried before giving up on one sandbox.
const SLOT_ATTEMPTS: usize = 64;

/// What sandboxes of this emulator can reach beyond their own loopback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboundReach {
    /// Everything the host reaches (veth + forwarding + MASQUERADE).
    Nat,
    /// The host's own addresses only (veth, but no NAT tool).
    HostOnly,
    /// Nothing: loopback only (tools or permissions missing).
    LoopbackOnly,
}

/// The host's NAT tool.
#[derive(Debug, Clone)]
enum NatTool {
    Nft(PathBuf),
    Iptables(PathBuf),
}

/// Host-wide outbound setup of one emulator.
#[derive(Debug)]
pub struct Outbound {
    ip: Option<PathBuf>,
    nat: Option<NatTool>,
    /// Set once creating links failed for a reason that will not go away.
    broken: AtomicBool,
    /// Set once NAT failed for a reason that will not go away.
    nat_broken: AtomicBool,
    warned: AtomicBool,
    nat_warned: AtomicBool,
    forwarding: Mutex<bool>,
}

/// One sandbox's veth link (and NAT rules), removed by [`SandboxLink::teardown`].
#[derive(Debug)]
pub struct SandboxLink {
    host_if: String,
    host_ip: Ipv4Addr,
    guest_ip: Ipv4Addr,
    ip: PathBuf,
    nat: Option<NatRules>,
    torn_down: AtomicBool,
}

#[derive(Debug)]
struct NatRules {
    tool: NatTool,
    subnet: String,
}

/// Looks a tool up like `command -v` does, also in the sbin directories root's tools
/// live in (a service's PATH often lacks them).
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(
            ["/usr/local/sbin", "/usr/sbin", "/sbin"]
                .iter()
                .map(PathBuf::from),
        )
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

impl Outbound {
    /// Finds the tools; creates nothing yet.
    pub fn probe() -> Outbound {
        let nat = find_tool("nft")
            .map(NatTool::Nft)
            .or_else(|| find_tool("iptables").map(NatTool::Iptables));
        Outbound {
            ip: find_tool("ip"),
            nat,
            broken: AtomicBool::new(false),
            nat_broken: AtomicBool::new(false),
            warned: AtomicBool::new(false),
            nat_warned: AtomicBool::new(false),
            forwarding: Mutex::new(false),
        }
    }

    /// What new sandboxes can be expected to reach (before any failure: the best case).
    pub fn reach(&self) -> OutboundReach {
        if self.ip.is_none() || self.broken.load(Ordering::Relaxed) {
            OutboundReach::LoopbackOnly
        } else if self.nat.is_none() || self.nat_broken.load(Ordering::Relaxed) {
            OutboundReach::HostOnly
        } else {
            OutboundReach::Nat
        }
    }

    /// Logs at startup what is already known to be missing.
    pub fn announce(&self) {
        if self.ip.is_none() {
            self.warn_once("the `ip` tool of iproute2 was not found");
        } else if self.nat.is_none() {
            self.warn_nat_once("neither nft nor iptables was found");
        }
    }

    fn warn_once(&self, why: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::debug!(
                "sandboxes get no outbound network ({why}); processes inside them reach only their own \
                 loopback. Run the emulator as root on Linux with iproute2 (`ip`) for outbound access"
            );
        }
    }

    fn warn_nat_once(&self, why: &str) {
        if !self.nat_warned.swap(true, Ordering::Relaxed) {
            tracing::debug!(
                "sandboxes reach the host only, not other networks ({why}); install nft or iptables \
                 for NAT (MASQUERADE) of sandbox traffic"
            );
        }
    }

    /// Gives the namespace `netns` a veth link to the host (plus NAT when possible).
    /// `None` (after one warning per emulator) when the host does not allow it.
    pub fn attach(&self, netns: &OwnedFd) -> Option<SandboxLink> {
        let Some(ip) = self.ip.clone() else {
            self.warn_once("the `ip` tool of iproute2 was not found");
            return None;
        };
        if self.broken.load(Ordering::Relaxed) {
            return None;
        }
        let ns_path = format!("/proc/{}/fd/{}", std::process::id(), netns.as_raw_fd());
        let start = rand::thread_rng().gen_range(0..LINK_SLOTS);
        for attempt in 0..SLOT_ATTEMPTS {
            let slot = (start + attempt as u32 * 7919) % LINK_SLOTS;
            let base = LINK_RANGE_BASE + slot * 4;
            let (host_ip, guest_ip) = (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2));
            let host_if = format!("{HOST_IF_PREFIX}{slot}");
            let created = run(
                &ip,
                &[
                    "link", "add", &host_if, "type", "veth", "peer", "name", "eth0", "netns",
                    &ns_path,
                ],
            );
            match created {
                Ok(()) => {}
                Err(err) if err.contains("File exists") => continue,
                Err(err) => {
                    self.broken.store(true, Ordering::Relaxed);
                    self.warn_once(&format!("creating a veth pair failed: {err}"));
                    return None;
                }
            }
            let mut link = SandboxLink {
                host_if,
                host_ip,
                guest_ip,
                ip: ip.clone(),
                nat: None,
                torn_down: AtomicBool::new(false),
            };
            if let Err(err) = link.configure(netns) {
                link.teardown();
                self.broken.store(true, Ordering::Relaxed);
                self.warn_once(&format!("configuring a veth pair failed: {err}"));
                return None;
            }
            link.nat = self.add_nat(&link);
            return Some(link);
        }
        self.warn_once("no free /30 in 10.213.0.0/16 after many attempts");
        None
    }

    /// Forwarding + MASQUERADE for one link, when a NAT tool exists and works.
    fn add_nat(&self, link: &SandboxLink) -> Option<NatRules> {
        let Some(tool) = self.nat.clone() else {
            self.warn_nat_once("neither nft nor iptables was found");
            return None;
        };
        if self.nat_broken.load(Ordering::Relaxed) {
            return None;
        }
        if let Err(err) = self.enable_forwarding() {
            self.nat_broken.store(true, Ordering::Relaxed);
            self.warn_nat_once(&format!("cannot enable IPv4 forwarding: {err}"));
            return None;
        }
        let rules = NatRules {
            tool,
            subnet: format!("{}/30", Ipv4Addr::from(u32::from(link.host_ip) - 1)),
        };
        match rules.add(&link.host_if) {
            Ok(()) => Some(rules),
            Err(err) => {
                rules.remove(&link.host_if);
                self.nat_broken.store(true, Ordering::Relaxed);
                self.warn_nat_once(&format!("adding the MASQUERADE rule failed: {err}"));
                None
            }
        }
    }

    /// Switches IPv4 forwarding on (once per emulator). It is left on at exit: other
    /// emulators on the host may still rely on it.
    fn enable_forwarding(&self) -> std::io::Result<()> {
        let mut done = self.forwarding.lock().unwrap_or_else(|e| e.into_inner());
        if *done {
            return Ok(());
        }
        let knob = "/proc/sys/net/ipv4/ip_forward";
        if std::fs::read_to_string(knob)?.trim() != "1" {
            std::fs::write(knob, "1")?;
            tracing::info!("enabled IPv4 forwarding for sandbox NAT (left enabled at exit)");
        }
        *done = true;
        Ok(())
    }
}

impl SandboxLink {
    /// The host end's address (what sandbox processes use as their gateway).
    pub fn host_ip(&self) -> Ipv4Addr {
        self.host_ip
    }

    /// The sandbox's own address on `eth0`.
    pub fn guest_ip(&self) -> Ipv4Addr {
        self.guest_ip
    }

    /// The host end's interface name.
    pub fn host_interface(&self) -> &str {
        &self.host_if
    }

    /// Whether traffic beyond the host is masqueraded.
    pub fn has_nat(&self) -> bool {
        self.nat.is_some()
    }

    fn configure(&self, netns: &OwnedFd) -> Result<(), String> {
        let host_cidr = format!("{}/30", self.host_ip);
        run(&self.ip, &["addr", "add", &host_cidr, "dev", &self.host_if])?;
        run(&self.ip, &["link", "set", &self.host_if, "up"])?;
        let guest_batch = format!(
            "addr add {}/30 dev eth0\nlink set eth0 up\nroute add default via {}\n",
            self.guest_ip, self.host_ip
        );
        run_in_netns(&self.ip, netns, &guest_batch)
    }

    /// Removes the NAT rules and the veth pair (idempotent).
    pub fn teardown(&self) {
        if self.torn_down.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(rules) = &self.nat {
            rules.remove(&self.host_if);
        }
        // Deleting one end removes its peer inside the namespace too.
        if let Err(err) = run(&self.ip, &["link", "del", &self.host_if]) {
            if !err.contains("Cannot find device") {
                tracing::debug!(interface = %self.host_if, "veth removal failed: {err}");
            }
        }
    }
}

impl NatRules {
    /// nft: one table per sandbox (removed as a whole). iptables: MASQUERADE in
    /// nat/POSTROUTING plus FORWARD accepts for the link (hosts with a DROP policy).
    fn add(&self, host_if: &str) -> Result<(), String> {
        match &self.tool {
            NatTool::Nft(nft) => {
                let table = nft_table(host_if);
                let script = format!(
                    "table ip {table} {{\n\
                     chain postrouting {{ type nat hook postrouting priority 100; policy accept; \
                     ip saddr {subnet} oifname != \"{host_if}\" masquerade; }}\n\
                     chain forward {{ type filter hook forward priority 0; policy accept; \
                     iifname \"{host_if}\" accept; oifname \"{host_if}\" ct state established,related accept; }}\n\
                     }}\n",
                    subnet = self.subnet
                );
                run_with_stdin(nft, &["-f", "-"], &script)
            }
            NatTool::Iptables(ipt) => {
                for rule in iptables_rules(&self.subnet, host_if) {
                    let mut args = vec!["-w", rule.table, rule.insert];
                    args.extend(rule.spec.iter().map(String::as_str));
                    run(ipt, &args)?;
                }
                Ok(())
            }
        }
    }

    fn remove(&self, host_if: &str) {
        let outcome = match &self.tool {
            NatTool::Nft(nft) => run(nft, &["delete", "table", "ip", &nft_table(host_if)]),
            NatTool::Iptables(ipt) => {
                let mut last = Ok(());
                for rule in iptables_rules(&self.subnet, host_if) {
                    let mut args = vec!["-w", rule.table, "-D"];
                    args.extend(rule.spec.iter().map(String::as_str));
                    if let Err(e) = run(ipt, &args) {
                        last = Err(e);
                    }
                }
                last
            }
        };
        if let Err(err) = outcome {
            tracing::debug!(interface = %host_if, "NAT rule removal: {err}");
        }
    }
}

fn nft_table(host_if: &str) -> String {
    format!("createos_mock_{host_if}")
}

struct IptablesRule {
    table: &'static str,
    /// `-A` or `-I` (the spec after it is also what `-D` takes).
    insert: &'static str,
    spec: Vec<String>,
}

fn iptables_rules(subnet: &str, host_if: &str) -> Vec<IptablesRule> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        IptablesRule {
            table: "-tnat",
            insert: "-A",
            spec: s(&[
                "POSTROUTING",
                "-s",
                subnet,
                "!",
                "-o",
                host_if,
                "-j",
                "MASQUERADE",
            ]),
        },
        IptablesRule {
            table: "-tfilter",
            insert: "-I",
            spec: s(&["FORWARD", "-i", host_if, "-j", "ACCEPT"]),
        },
        IptablesRule {
            table: "-tfilter",
            insert: "-I",
            spec: s(&[
                "FORWARD",
                "-o",
                host_if,
                "-m",
                "conntrack",
                "--ctstate",
                "RELATED,ESTABLISHED",
                "-j",
                "ACCEPT",
            ]),
        },
    ]
}

/// Runs a tool, mapping a failure to its stderr.
fn run(tool: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new(tool)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    outcome(tool, out)
}

fn run_with_stdin(tool: &Path, args: &[&str], input: &str) -> Result<(), String> {
    let mut cmd = Command::new(tool);
    cmd.args(args);
    feed(cmd, input).and_then(|out| outcome(tool, out))
}

/// Runs `ip -batch -` inside the namespace `netns` (the child joins it before exec).
fn run_in_netns(ip: &Path, netns: &OwnedFd, batch: &str) -> Result<(), String> {
    let raw = netns.as_raw_fd();
    let mut cmd = Command::new(ip);
    cmd.args(["-batch", "-"]);
    // SAFETY: enter_in_child only issues setns(2), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || crate::process::netns::enter_in_child(raw));
    }
    feed(cmd, batch).and_then(|out| outcome(ip, out))
}

fn feed(mut cmd: Command, input: &str) -> Result<std::process::Output, String> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    child.wait_with_output().map_err(|e| e.to_string())
}

fn outcome(tool: &Path, out: std::process::Output) -> Result<(), String> {
    if out.status.success() {
        return Ok(());
    }
    let name = tool
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    Err(format!(
        "{name}: {} ({})",
        if stderr.is_empty() { "failed" } else { &stderr },
        out.status
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_found_like_command_v() {
        assert!(find_tool("sh").is_some());
        assert!(find_tool("definitely-not-a-tool-name").is_none());
    }

    #[test]
    fn iptables_rules_delete_what_they_add() {
        let rules = iptables_rules("10.213.0.4/30", "cosmk1");
        assert_eq!(rules.len(), 3);
        assert_eq!(
            rules[0].spec.join(" "),
            "POSTROUTING -s 10.213.0.4/30 ! -o cosmk1 -j MASQUERADE"
        );
        assert!(rules.iter().all(|r| r.spec.iter().any(|a| a == "cosmk1")));
    }

    #[test]
    fn slots_map_to_disjoint_subnets() {
        let addr = |slot: u32| Ipv4Addr::from(LINK_RANGE_BASE + slot * 4 + 1);
        assert_eq!(addr(0), Ipv4Addr::new(10, 213, 0, 1));
        assert_eq!(addr(LINK_SLOTS - 1), Ipv4Addr::new(10, 213, 255, 253));
        assert!(
            format!("{HOST_IF_PREFIX}{}", LINK_SLOTS - 1).len() <= 15,
            "IFNAMSIZ"
        );
    }
}
