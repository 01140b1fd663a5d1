//! VPN device tools: `device_register`, `device_status`, `device_attach`, `device_detach` and
//! the advisory `vpn_up` (api-reference.md §7.16, plugins.md §2.13/§2.14).
//!
//! Registration generates a WireGuard (X25519) key pair here; only the public key is sent. The
//! private key goes to `<state dir>/devices/<device id>.key` (mode 0600), and no result ever
//! holds it. Bringing an interface up needs root and the user's own terminal, so `vpn_up` only
//! says what to run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use curve25519_dalek::montgomery::MontgomeryPoint;
use futures::TryStreamExt;
use rand::RngCore;
use serde_json::{json, Value};
use zeroize::Zeroizing;

use super::{bounded, input_error};
use crate::tools::args::Args;
use crate::tools::runtime::Runtime;
use crate::tools::{CallCtx, ToolError, ToolOutput};
use createos_sandbox::api::devices::{validate_pubkey, Device};

/// wg-quick names the interface after the file: at most 15 characters.
const VPN_CONFIG: &str = "/tmp/cosvpn.conf";

pub(super) fn handles(short: &str) -> bool {
    matches!(
        short,
        "device_register" | "device_status" | "device_attach" | "device_detach" | "vpn_up"
    )
}

pub(super) async fn call(
    rt: &Arc<Runtime>,
    short: &str,
    args: &Args,
    ctx: &CallCtx,
) -> Result<ToolOutput, ToolError> {
    let limit = rt.config().timeout;
    match short {
        // Not raced against cancellation: the task finishes and cleans up by itself.
        "device_register" => register(rt, args, ctx).await,
        "device_status" => bounded(ctx, limit, status(rt)).await,
        "device_attach" => bounded(ctx, limit, attach(rt, args, true)).await,
        "device_detach" => bounded(ctx, limit, attach(rt, args, false)).await,
        "vpn_up" => bounded(ctx, limit, vpn_up(rt, args)).await,
        other => Err(ToolError::UnknownTool(format!(
            "{}{other}",
            crate::tools::catalog::PREFIX
        ))),
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A WireGuard key pair: the clamped private scalar and its X25519 public key, both base64.
fn key_pair() -> (Zeroizing<String>, String) {
    let mut secret = Zeroizing::new([0u8; 32]);
    rand::rngs::OsRng.fill_bytes(&mut *secret);
    // Clamped as `wg genkey` does, so every WireGuard tool reads the same key.
    secret[0] &= 248;
    secret[31] &= 127;
    secret[31] |= 64;
    let public = MontgomeryPoint::mul_base_clamped(*secret).to_bytes();
    (Zeroizing::new(b64(&*secret)), b64(&public))
}

fn keys_dir(rt: &Runtime) -> PathBuf {
    rt.state_dir().join("devices")
}

/// Where the private key of `device_id` lives (the id was checked to be a safe file name).
fn key_path(rt: &Runtime, device_id: &str) -> Result<PathBuf, ToolError> {
    createos_sandbox::validate::id("device id", device_id).map_err(input_error)?;
    Ok(keys_dir(rt).join(format!("{device_id}.key")))
}

/// Write `key` readable by the user only (created 0600, never widened afterwards).
fn write_private(path: &Path, key: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(key.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}

/// This machine's host name, when it is known and fits the device fields.
fn machine_hostname() -> Option<String> {
    let from_file = || {
        std::fs::read_to_string("/etc/hostname")
            .ok()
            .map(|s| s.trim().to_string())
    };
    std::env::var("HOSTNAME")
        .ok()
        .or_else(from_file)
        .filter(|h| {
            !h.is_empty()
                && h.len() <= createos_sandbox::api::devices::MAX_DEVICE_FIELD
                && !h.chars().any(char::is_control)
        })
}

fn device_view(d: &Device) -> Value {
    json!({"device_id": d.id, "name": d.name, "client_ip": d.client_ip, "pubkey": d.pubkey, "hostname": d.hostname, "os": d.os})
}

async fn register(rt: &Arc<Runtime>, args: &Args, ctx: &CallCtx) -> Result<ToolOutput, ToolError> {
    let hostname = machine_hostname();
    let name = args
        .opt_str("name")
        .map(str::to_string)
        .or_else(|| hostname.clone())
        .unwrap_or_else(|| "cos-device".into());
    let given = args.opt_str("pubkey").map(str::to_string);
    if let Some(key) = &given {
        validate_pubkey(key).map_err(input_error)?;
    }
    let rt = rt.clone();
    let cancel = ctx.cancel.clone();
    // A task, so a dropped call still either keeps the device with its key or revokes it.
    let task = tokio::spawn(async move {
        let (secret, public) = match given {
            Some(key) => (None, key),
            None => {
                let (secret, public) = key_pair();
                (Some(secret), public)
            }
        };
        let client = rt.client();
        let device = client
            .register_device(
                &name,
                &public,
                hostname.as_deref(),
                Some(std::env::consts::OS),
            )
            .await
            .map_err(input_error)?;
        let saved = match &secret {
            Some(secret) => key_path(&rt, &device.id).and_then(|path| {
                write_private(&path, secret)
                    .map(|()| Some(path.clone()))
                    .map_err(|e| {
                        ToolError::Refused(format!(
                            "saving the private key to {} failed: {e}",
                            path.display()
                        ))
                    })
            }),
            None => Ok(None),
        };
        let failure = match saved {
            Err(err) => Some(err),
            Ok(_) if cancel.is_cancelled() => Some(ToolError::Cancelled),
            Ok(_) => None,
        };
        if let Some(err) = failure {
            // Never leave a device behind whose key nobody holds.
            if let Ok(path) = key_path(&rt, &device.id) {
                let _ = std::fs::remove_file(path);
            }
            return Err(match client.revoke_device(&device.id).await {
                Ok(()) => err,
                Err(revoke) => ToolError::Refused(format!(
                    "{err}; revoking the new device {} also failed ({revoke}): remove it with `cos device rm {}`",
                    device.id, device.id
                )),
            });
        }
        let mut body = device_view(&device);
        body["private_key_file"] = match &secret {
            Some(_) => json!(key_path(&rt, &device.id)?.to_string_lossy()),
            None => Value::Null,
        };
        body["next"] = json!("sandbox_device_attach to reach a network, then sandbox_vpn_up for the commands that connect");
        Ok(ToolOutput::json(body))
    });
    task.await
        .map_err(|e| ToolError::Internal(format!("device registration task failed: {e}")))?
}

async fn status(rt: &Arc<Runtime>) -> Result<ToolOutput, ToolError> {
    let client = rt.client();
    let devices: Vec<Device> = client.list_devices().try_collect().await?;
    let views = futures::future::try_join_all(devices.iter().map(|d| async move {
        let networks = client.list_device_networks(&d.id).await?;
        let mut view = device_view(d);
        view["networks"] = json!(networks
            .iter()
            .map(|n| json!({"network_id": n.network_id, "name": n.network_name}))
            .collect::<Vec<_>>());
        view["local_private_key"] = json!(key_path(rt, &d.id).is_ok_and(|p| p.is_file()));
        Ok::<Value, ToolError>(view)
    }))
    .await?;
    Ok(ToolOutput::json(json!(views)))
}

async fn attach(rt: &Arc<Runtime>, args: &Args, on: bool) -> Result<ToolOutput, ToolError> {
    let device = args.str("device")?;
    let network = args.str("network")?;
    let client = rt.client();
    if on {
        client
            .attach_device_network(device, network)
            .await
            .map_err(input_error)?;
    } else {
        client
            .detach_device_network(device, network)
            .await
            .map_err(input_error)?;
    }
    Ok(ToolOutput::json(
        json!({"device": device, "network": network, "attached": on}),
    ))
}

async fn vpn_up(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    let client = rt.client();
    let device = match args.opt_str("device") {
        Some(id) => client.get_device(id).await.map_err(input_error)?,
        None => {
            let mut devices: Vec<Device> = client.list_devices().try_collect().await?;
            match devices.len() {
                0 => return Err(ToolError::Refused("no VPN device is registered; register this machine with sandbox_device_register first".into())),
                1 => devices.remove(0),
                _ => {
                    let ids: Vec<&str> = devices.iter().map(|d| d.id.as_str()).collect();
                    return Err(ToolError::InvalidArgs(format!("several devices are registered ({ids:?}); pass device")));
                }
            }
        }
    };
    let key = key_path(rt, &device.id)?;
    let has_key = key.is_file();
    let key_source = if has_key {
        format!(
            "\"$(cat {})\"",
            createos_sandbox::shell::quote(&key.to_string_lossy())
        )
    } else {
        "\"$WG_PRIVATE_KEY\"".into()
    };
    let open = format!(
        "umask 077 && cos device session open {} | awk -v k={key_source} '{{print}} /^\\[Interface\\]/ {{print \"PrivateKey = \" k}}' > {VPN_CONFIG} && sudo wg-quick up {VPN_CONFIG}",
        createos_sandbox::shell::quote(&device.id)
    );
    let mut notes = vec![
        "Run these in your own terminal: they need root (sudo) and wg-quick (wireguard-tools). Nothing was connected by this tool.".to_string(),
        "The first output line of `cos device session open` names the session and its expiry; renew it before then with `cos device session renew <device> <session>` (the server lifetime is short: renew about every 30 s while connected).".to_string(),
        format!("Disconnect with `sudo wg-quick down {VPN_CONFIG}` and `cos device session close <device> <session>`; then delete {VPN_CONFIG} (it holds the private key)."),
    ];
    if !has_key {
        notes.insert(1, format!("This machine does not hold the private key of {} (it was registered elsewhere or with your own key): set WG_PRIVATE_KEY to it first.", device.id));
    }
    Ok(ToolOutput::json(json!({
        "device_id": device.id,
        "client_ip": device.client_ip,
        "connected": false,
        "run_in_your_terminal": [open],
        "disconnect": [format!("sudo wg-quick down {VPN_CONFIG}")],
        "notes": notes,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x25519_public_key_matches_rfc7748() {
        // RFC 7748 §6.1, Alice.
        let secret: [u8; 32] =
            hex32("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
        let public = MontgomeryPoint::mul_base_clamped(secret).to_bytes();
        assert_eq!(
            public,
            hex32("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        );
    }

    #[test]
    fn generated_pairs_are_valid_and_distinct() {
        let (s1, p1) = key_pair();
        let (s2, p2) = key_pair();
        assert!(validate_pubkey(&p1).is_ok() && validate_pubkey(&p2).is_ok());
        assert_ne!(*s1, *s2);
        assert_ne!(p1, p2);
        let raw = base64::engine::general_purpose::STANDARD
            .decode(s1.as_bytes())
            .unwrap();
        let raw: [u8; 32] = raw.try_into().unwrap();
        assert_eq!(raw[0] & 7, 0);
        assert_eq!(raw[31] & 0xc0, 0x40);
        assert_eq!(b64(&MontgomeryPoint::mul_base_clamped(raw).to_bytes()), p1);
    }

    fn hex32(s: &str) -> [u8; 32] {
        let bytes: Vec<u8> = (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect();
        bytes.try_into().unwrap()
    }
}
