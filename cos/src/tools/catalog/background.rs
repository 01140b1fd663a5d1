//! Catalog entries of the background-task tools (sync watchers, tunnels).

use serde_json::json;

use super::{int, one_of, s, tool, ToolDef, SID};

/// The background-task tools.
pub(super) fn tools() -> Vec<ToolDef> {
    vec![
        tool("sync", "Copy a local directory into a sandbox directory. mode once (default) uploads it now and returns what was sent. one-way (sandbox extras kept), mirror (sandbox extras deleted) and two-way (changes both ways; when both sides changed a file the local version wins and the sandbox version is kept beside it as <name>.remote-conflict-<time>) sync now, then keep a background watcher running that syncs again after every local change; they return a transport_id for sandbox_transport_stop (sandbox_status lists the running ones). Refuses `/`, the home directory and credential folders (~/.ssh, ~/.config, …); secrets such as .env and *.pem and VCS metadata are never sent.",
            &[("sandbox_id", s(SID)),
              ("local_dir", s("Local directory inside the project (symlinks resolved); relative paths are resolved against the project directory.")),
              ("remote_dir", s("Absolute directory in the sandbox, e.g. /root/app (not /, not under /etc, /usr, /proc, …).")),
              ("mode", one_of("once | one-way | mirror | two-way. Default once.", &["once", "one-way", "mirror", "two-way"])),
              ("exclude", json!({"type": "array", "items": {"type": "string", "minLength": 1},
                  "description": "Paths or globs to leave out on both sides: `build` (that path or directory), `dist/`, `*.log` (any depth), `docs/**/*.png` (anchored at the project root)."}))],
            &["sandbox_id", "local_dir", "remote_dir"]),
        tool("tunnel", "Forward a local TCP port (127.0.0.1) to a port inside a sandbox, in the background, so local tools (a browser, curl, a database client) reach a server running there. Returns the transport_id (stop it with sandbox_transport_stop) and the local URL. verified is false: nothing checks that the sandbox port listens.",
            &[("sandbox_id", s(SID)),
              ("remote_port", int("Port inside the sandbox.", 1, 65535)),
              ("local_port", int("Local port; 0 or omitted picks a free one.", 0, 65535))],
            &["sandbox_id", "remote_port"]),
        tool("transport_stop", "Stop a background sync watcher or tunnel started by sandbox_sync or sandbox_tunnel (all of them also stop when the tool server exits).",
            &[("transport_id", s("Background task id (`tr-…`) from sandbox_sync, sandbox_tunnel or sandbox_status."))], &["transport_id"]),
    ]
}
