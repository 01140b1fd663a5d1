//! The agent tool catalog: names (`sandbox_<name>`), descriptions that say when to use which
//! tool, and JSON Schemas of the inputs (`additionalProperties: false` everywhere).

mod background;
mod devices;
mod files;
mod jobs;

use serde_json::{json, Map, Value};

/// Prefix of every tool name.
pub const PREFIX: &str = "sandbox_";

/// One tool of the catalog.
#[derive(Clone, Debug)]
pub struct ToolDef {
    /// Full name, e.g. `sandbox_exec`.
    pub name: String,
    /// What it does and when to use it.
    pub description: &'static str,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
}

pub(super) fn s(description: &str) -> Value {
    json!({"type": "string", "minLength": 1, "description": description})
}

pub(super) fn int(description: &str, min: u64, max: u64) -> Value {
    json!({"type": "integer", "minimum": min, "maximum": max, "description": description})
}

pub(super) fn boolean(description: &str) -> Value {
    json!({"type": "boolean", "description": description})
}

pub(super) fn one_of(description: &str, choices: &[&str]) -> Value {
    json!({"type": "string", "enum": choices, "description": description})
}

pub(super) fn strings(description: &str, min_items: u64) -> Value {
    json!({"type": "array", "minItems": min_items, "items": {"type": "string", "minLength": 1}, "description": description})
}

pub(super) const SID_OPT: &str =
    "Sandbox id; omit to use this session's sandbox (created on first use).";
pub(super) const SID: &str = "Sandbox id (`sb-…`).";
pub(super) const PID: &str =
    "Managed process id (from sandbox_process_start or sandbox_process_list).";
pub(super) const TIMEOUT: &str = "Deadline in milliseconds; 0 = none (cancellation still stops the remote process tree). Default: the configured timeout (120000).";

pub(super) fn tool(
    name: &str,
    description: &'static str,
    props: &[(&str, Value)],
    required: &[&str],
) -> ToolDef {
    let properties: Map<String, Value> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    ToolDef {
        name: format!("{PREFIX}{name}"),
        description,
        input_schema: json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        }),
    }
}

/// Every tool this build serves, in a stable order.
pub fn catalog() -> Vec<ToolDef> {
    let mut tools = core();
    tools.extend(jobs::tools());
    tools.extend(files::tools());
    tools.extend(background::tools());
    tools.extend(devices::tools());
    tools
}

/// Session, lifecycle, exec, process, resource and desktop tools.
fn core() -> Vec<ToolDef> {
    let max_ms = super::config::MAX_TIMEOUT.as_millis() as u64;
    vec![
        tool("status", "Show this session's sandbox binding (id or null, whether it is being created) and the runtime configuration. Allocates nothing.", &[], &[]),
        tool("release", "Release this session's sandbox: destroy it (default) or, with forget: true, only drop the binding and leave the sandbox running (after external deletion, or to keep it). Refused while this session has other calls running. The next session call creates a fresh sandbox.",
            &[("forget", boolean("Only forget the binding; do not destroy the sandbox."))], &[]),
        tool("create", "Create a new, separate sandbox that persists until sandbox_destroy (it is never destroyed implicitly). Use it for long-lived work such as a dev server beside the session sandbox; for a one-off command just use sandbox_exec.",
            &[("shape", s("Size, e.g. s-2vcpu-2gb (see sandbox_shapes). Default: the configured shape.")),
              ("rootfs", s("Base image, e.g. devbox:1 or desktop:1 (see sandbox_images). Default: the configured image.")),
              ("name", s("Unique name (also its hostname inside networks).")),
              ("network", s("Private network to join."))], &[]),
        tool("info", "Show a sandbox: status, shape, image, IP, ingress and preview URL template, egress rules.", &[("sandbox_id", s(SID_OPT))], &[]),
        tool("list", "List every sandbox of the account with its status.", &[], &[]),
        tool("pause", "Pause a sandbox (memory and disk are snapshotted, compute is freed). Resume it with sandbox_resume; session calls resume it by themselves.", &[("sandbox_id", s(SID_OPT))], &[]),
        tool("resume", "Resume a paused sandbox and wait until it runs.", &[("sandbox_id", s(SID_OPT))], &[]),
        tool("fork", "Clone a sandbox into a new one (the source is paused first if it is running). The fork persists until sandbox_destroy.", &[("sandbox_id", s(SID_OPT))], &[]),
        tool("destroy", "Destroy a sandbox for good, dropping any session binding to it. Refused while a session using it has calls running.", &[("sandbox_id", s(SID))], &["sandbox_id"]),
        tool("exec", "Run one shell command (bash -lc) in a sandbox and return stdout, stderr, exit code and whether output was truncated. Waits for it to finish; cancelling the call or hitting the timeout stops the whole remote process tree. Use sandbox_process_start instead for servers, watchers or anything that must keep running in the background.",
            &[("command", s("Shell command line.")),
              ("sandbox_id", s(SID_OPT)),
              ("cwd", s("Absolute working directory. Default: the session working directory (/root/workspace) for the session sandbox, /root for an explicit sandbox_id.")),
              ("timeout", int(TIMEOUT, 0, max_ms))], &["command"]),
        tool("shapes", "List the sandbox sizes (vCPU, memory, disk) usable at create.", &[], &[]),
        tool("images", "List the base images (rootfs) and templates usable at create.", &[], &[]),
        tool("ingress", "Turn public ingress (preview URLs for listening ports) on or off.", &[("sandbox_id", s(SID)), ("enabled", boolean("On or off."))], &["sandbox_id", "enabled"]),
        tool("preview_url", "The public URL a port of the sandbox would be served at. Does not enable ingress (use sandbox_ingress) and does not check that anything listens: the URL is unverified.",
            &[("sandbox_id", s(SID)), ("port", int("Port inside the sandbox.", 1, 65535))], &["sandbox_id", "port"]),
        tool("firewall", "Replace the egress allow-list. Rules must be IP addresses or CIDR ranges (hostname rules are not enforced by the platform, so they are refused). Egress is unrestricted by default; control-plane services such as link-local addresses stay reachable.",
            &[("sandbox_id", s(SID)), ("rules", strings("IPv4/IPv6 addresses or CIDRs, e.g. 10.0.0.0/8.", 1))], &["sandbox_id", "rules"]),
        tool("bandwidth", "Show the egress bandwidth quota and usage of a sandbox.", &[("sandbox_id", s(SID))], &["sandbox_id"]),
        tool("process_start", "Start a background process (bash -lc) that keeps running after this call: servers, watchers, long jobs. Returns its process id; read its output with sandbox_process_output and stop it with sandbox_process_stop. It is never stopped implicitly.",
            &[("sandbox_id", s(SID)), ("command", s("Shell command line.")), ("cwd", s("Absolute working directory (default /root)."))], &["sandbox_id", "command"]),
        tool("process_list", "List the managed processes of a sandbox, running and exited.", &[("sandbox_id", s(SID))], &["sandbox_id"]),
        tool("process_get", "Show one managed process: state, exit code, output window.", &[("sandbox_id", s(SID)), ("process_id", s(PID))], &["sandbox_id", "process_id"]),
        tool("process_output", "The output a managed process has produced so far (stdout and stderr apart), without waiting for more.", &[("sandbox_id", s(SID)), ("process_id", s(PID))], &["sandbox_id", "process_id"]),
        tool("process_stop", "Stop a managed process and its whole process tree (SIGTERM, then SIGKILL).", &[("sandbox_id", s(SID)), ("process_id", s(PID))], &["sandbox_id", "process_id"]),
        tool("process_input", "Write text to the standard input of a managed process.", &[("sandbox_id", s(SID)), ("process_id", s(PID)), ("text", json!({"type": "string", "description": "Text to write (no newline is added)."}))], &["sandbox_id", "process_id", "text"]),
        tool("process_close_stdin", "Close the standard input of a managed process (sends EOF).", &[("sandbox_id", s(SID)), ("process_id", s(PID))], &["sandbox_id", "process_id"]),
        tool("network_create", "Create a private network that sandboxes and registered devices can join.", &[("name", s("Network name."))], &["name"]),
        tool("network_list", "List the private networks of the account.", &[], &[]),
        tool("network_show", "Show a private network and its members.", &[("name", s("Network name or id."))], &["name"]),
        tool("network_delete", "Delete a private network.", &[("name", s("Network name or id."))], &["name"]),
        tool("network_attach", "Add a sandbox to a private network.", &[("network", s("Network name or id.")), ("member", s("Sandbox id."))], &["network", "member"]),
        tool("network_detach", "Remove a sandbox from a private network.", &[("network", s("Network name or id.")), ("member", s("Sandbox id."))], &["network", "member"]),
        tool("disk_create", "Register an S3 bucket as a disk that sandboxes can mount. Credentials are never passed as arguments: name two environment variables of the tool server that hold the access key and secret key.",
            &[("name", s("Disk name (lowercase letters, digits, dashes).")), ("bucket", s("Bucket name.")), ("endpoint", s("S3 endpoint URL, e.g. https://s3.eu-west-1.amazonaws.com.")),
              ("access_key_env", s("Name of the server environment variable holding the access key, e.g. S3_ACCESS_KEY.")),
              ("secret_key_env", s("Name of the server environment variable holding the secret key.")),
              ("region", s("Bucket region.")), ("path_style", boolean("Path-style addressing (MinIO and most self-hosted S3)."))],
            &["name", "bucket", "endpoint", "access_key_env", "secret_key_env"]),
        tool("disk_list", "List the S3-backed disks of the account.", &[], &[]),
        tool("disk_show", "Show a disk (never its credentials).", &[("name", s("Disk name or id."))], &["name"]),
        tool("disk_delete", "Delete a disk registration (the bucket is untouched).", &[("name", s("Disk name or id."))], &["name"]),
        tool("disk_attach", "Mount a disk into a sandbox.", &[("sandbox_id", s(SID)), ("disk", s("Disk name or id.")), ("mount_path", s("Absolute mount path in the sandbox."))], &["sandbox_id", "disk", "mount_path"]),
        tool("disk_detach", "Unmount a disk from a sandbox.", &[("sandbox_id", s(SID)), ("disk", s("Disk name or id.")), ("mount_path", s("Absolute mount path in the sandbox."))], &["sandbox_id", "disk", "mount_path"]),
        tool("desktop", "Open the desktop of a desktop sandbox (rootfs desktop:1) for a person: enables ingress, waits for the desktop, and returns a noVNC link (a credential: share it only with the user).", &[("sandbox_id", s(SID))], &["sandbox_id"]),
        tool("screenshot", "Capture the screen of a desktop sandbox (rootfs desktop:1) as a PNG image. Coordinates in sandbox_computer are raw X11 pixels of this screen.", &[("sandbox_id", s(SID))], &["sandbox_id"]),
        tool("computer", "One desktop action on a desktop sandbox (rootfs desktop:1): screen (size), cursor (position), windows (list), move (x, y), click (optionally at x, y), type (text), key (keys, e.g. [\"ctrl\", \"c\"]), open (target URL or file). Coordinates are raw X11 pixels; read the screen size first.",
            &[("sandbox_id", s(SID)),
              ("op", one_of("Action.", &["screen", "cursor", "windows", "move", "click", "type", "key", "open"])),
              ("x", int("X pixel.", 0, 100_000)), ("y", int("Y pixel.", 0, 100_000)),
              ("text", json!({"type": "string", "description": "Text for type."})),
              ("keys", strings("Keys pressed together for key.", 1)),
              ("target", s("URL or path for open."))], &["sandbox_id", "op"]),
    ]
}

/// The definition of `name`, if served.
pub fn find(name: &str) -> Option<ToolDef> {
    catalog().into_iter().find(|t| t.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_is_closed_and_names_are_unique() {
        let tools = catalog();
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), tools.len());
        for t in &tools {
            assert!(t.name.starts_with(PREFIX));
            assert_eq!(t.input_schema["additionalProperties"], false, "{}", t.name);
            for req in t.input_schema["required"].as_array().unwrap() {
                assert!(
                    t.input_schema["properties"]
                        .get(req.as_str().unwrap())
                        .is_some(),
                    "{}: {req}",
                    t.name
                );
            }
        }
    }
}
