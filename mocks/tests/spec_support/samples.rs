//! Valid request pieces for the generic probes: a spec-conforming JSON body per operation
//! and stand-in values for path and query parameters.

use serde_json::{json, Value};

/// An OpenSSH ed25519 public key line (a syntactically valid key).
pub const SSH_KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f conformance@test";
/// A Curve25519 public key: standard base64 of 32 bytes.
pub const DEVICE_PUBKEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
/// A sandbox id that exists nowhere.
pub const UNKNOWN_SANDBOX: &str = "sb-01JZZZZZZZZZZZZZZZZZZZZZZZ";

/// A body the spec accepts for `op_id` (only for operations with a JSON body).
pub fn body(op_id: &str) -> Option<Value> {
    let v = match op_id {
        "createSandbox" => json!({"shape": "s-1vcpu-1gb"}),
        "updateSandbox" => json!({"ingress_enabled": true}),
        "forkSandbox" => json!({"start_paused": true}),
        "resizeSandbox" => json!({"disk_mib": 20480}),
        "addSshPubkeys" => json!({"keys": [SSH_KEY]}),
        "exec" => json!({"cmd": "true"}),
        "createProcess" => json!({"cmd": "true"}),
        "writeProcessInput" => json!({"data_base64": "aGkK"}),
        "resizeProcess" => json!({"rows": 30, "cols": 100}),
        "signalProcess" => json!({"signal": "SIGTERM"}),
        "setEgress" => json!({"egress": ["example.com"]}),
        "rechargeBandwidth" => json!({"add_bytes": 1024}),
        "createNetwork" => json!({"name": "probe-net"}),
        "attachNetwork" => json!({"id": "net-probe"}),
        "createDisk" => json!({
            "name": "probe-disk",
            "config": {"bucket": "probe", "endpoint": "https://s3.example.com"},
            "credentials": {"access_key": "AKPROBE", "secret_key": "probe-secret"},
        }),
        "updateDiskCredentials" => {
            json!({"credentials": {"access_key": "AKPROBE2", "secret_key": "probe-secret-2"}})
        }
        "attachDisk" => json!({"disk_id": "disk_probe", "mount_path": "/workspace/probe"}),
        "createTemplate" => {
            json!({"name": "probe-tpl", "dockerfile": "FROM nodeops/sandbox:debian\n"})
        }
        "setComputerClipboard" => json!({"text": "probe"}),
        "computerOpen" => json!({"target": "https://example.com"}),
        "computerLaunch" => json!({"application": "xterm"}),
        "computerMouseMove" | "moveComputerWindow" => json!({"x": 10, "y": 40}),
        "computerMouseClick" => json!({"x": 5, "y": 5}),
        "computerMouseScroll" => json!({"direction": "down", "amount": 1}),
        "computerMouseDrag" => json!({"from": {"x": 1, "y": 1}, "to": {"x": 2, "y": 2}}),
        "computerMouseDown" | "computerMouseUp" => json!({"button": "left"}),
        "computerKeyboardType" => json!({"text": "a"}),
        "computerKeyboardPress" | "computerKeyboardDown" | "computerKeyboardUp" => {
            json!({"keys": ["shift"]})
        }
        "resizeComputerWindow" => json!({"width": 300, "height": 200}),
        "createComputerScreen" | "resizeComputerScreen" => json!({"width": 640, "height": 480}),
        "registerDevice" => json!({"name": "probe-device", "pubkey": DEVICE_PUBKEY}),
        "attachDeviceNetwork" => json!({"network_id": "net-probe"}),
        _ => return None,
    };
    Some(v)
}

/// A stand-in for a path parameter other than the sandbox id (names no real resource).
pub fn path_param(name: &str) -> &'static str {
    match name {
        "process_id" => "proc_probe",
        "window_id" => "0x0badf00d",
        "screen_id" => "screen-5",
        "port" => "8080",
        "network" => "net-probe",
        "disk" => "disk-probe",
        "disk_id" => "disk_probe",
        "template" => "tpl-probe",
        "device_id" => "dev_probe",
        "session_id" => "vpn_probe",
        "ip" => "10.255.255.254",
        other => panic!("no stand-in for path parameter {other}"),
    }
}

/// Query parameters an operation needs to get past request parsing.
pub fn required_query(op_id: &str) -> Vec<(&'static str, &'static str)> {
    match op_id {
        "uploadFile" | "downloadFile" => vec![("path", "/root/probe.txt")],
        _ => Vec::new(),
    }
}
