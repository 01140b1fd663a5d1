//! Catalog entries of the VPN device tools.

use super::{s, tool, ToolDef};

/// The device tools.
pub(super) fn tools() -> Vec<ToolDef> {
    vec![
        tool("device_register", "Register this machine as a VPN device (WireGuard) so it can reach sandbox private networks. A key pair is generated here: the private key is saved in a file only the user can read (its path is returned, never the key) and only the public key is sent. Then use sandbox_device_attach and sandbox_vpn_up.",
            &[("name", s("Device name (default: this machine's host name).")),
              ("pubkey", s("Use this existing WireGuard public key (base64) instead of generating a key pair."))], &[]),
        tool("device_status", "List the registered VPN devices with their VPN address, the networks each can reach, and whether this machine holds its private key.", &[], &[]),
        tool("device_attach", "Let a registered VPN device reach a private network (its sandboxes become reachable over the VPN).",
            &[("device", s("Device id (from sandbox_device_status).")), ("network", s("Network name or id."))], &["device", "network"]),
        tool("device_detach", "Stop a VPN device reaching a private network.",
            &[("device", s("Device id (from sandbox_device_status).")), ("network", s("Network name or id."))], &["device", "network"]),
        tool("vpn_up", "Advice only: bringing a VPN interface up needs the user's own terminal (root, wg-quick). Returns the commands for the user to run; it does not connect anything.",
            &[("device", s("Device id; default: the only registered device."))], &[]),
    ]
}
