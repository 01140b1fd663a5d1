//! Routed native tools (remote mode, plugins.md §2.4): OpenCode's own shell and file tools,
//! with OpenCode's argument shapes, executed in the session sandbox.
//!
//! Design: the OpenCode plugin keeps its native tool ids (`bash`, `read`, …) and, in remote
//! mode, forwards each call unchanged to `cos mcp` as the MCP tool `native_<id>`. The
//! `native_` prefix keeps these apart from the `sandbox_*` catalog and from any MCP client's
//! own `read`/`bash`; they are listed by `tools/list` only when `mode` is `remote`, and a call
//! in local mode is refused (the plugin then keeps its local executor; nothing is routed).
//!
//! | MCP tool (alias) | arguments (`*` required) | runs |
//! |---|---|---|
//! | `native_bash` (`native_shell`) | `command`*, `timeout` (ms, 0 = none), `workdir`, `description`, `background` | `bash -lc` in `workdir` (default: the session cwd); `background`: a managed process |
//! | `native_read` | `filePath`*, `offset` (1-based), `limit` (≤ 2000) | guest `read` |
//! | `native_write` | `filePath`*, `content`* | guest `write` |
//! | `native_edit` | `filePath`*, `oldString`*, `newString`*, `replaceAll` | guest `edit` |
//! | `native_apply_patch` (`native_patch`) | `patchText`* | guest `patch` |
//! | `native_glob` | `pattern`*, `path` | guest `glob` |
//! | `native_grep` | `pattern`*, `path`, `include` | guest `grep` |
//!
//! Paths (`filePath`, `path`, `workdir`, patch headers) go through the guest [`PathMap`]:
//! relative under the guest cwd, absolute paths inside the host project onto it, other
//! absolute paths as guest paths. The shell command string is passed unchanged. Results: the
//! shell gives the JSON `{stdout, stderr, code, signal, truncated}` with metadata
//! `{sandboxId, exitCode, truncated}` (the same as `sandbox_exec`); a `background` command
//! answers at once with `{processId, pid, state, sandboxId, next}` and keeps running as a
//! managed process of the session sandbox (`sandbox_process_output`/`_stop` follow it); file
//! tools give the same text as the `sandbox_*` file tools with `sandboxId` in the metadata. Any remote failure fails the call: nothing ever runs
//! on this machine.
//!
//! [`PathMap`]: createos_sandbox::guest::PathMap

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::exec::{deadline, run_shell};
use super::files::{self, FileOp};
use super::run_error;
use crate::tools::args::Args;
use crate::tools::catalog::ToolDef;
use crate::tools::config::{Mode, MAX_TIMEOUT};
use crate::tools::runtime::Runtime;
use crate::tools::{CallCtx, ToolError, ToolOutput};
use createos_sandbox::api::processes::ProcessSpec;
use createos_sandbox::guest::{GlobOptions, GrepOptions, ReadOptions};
use createos_sandbox::Sandbox;

/// Prefix of the routed native tools' MCP names.
pub const NATIVE_PREFIX: &str = "native_";

/// Canonical native ids (OpenCode's) of the routed tools, in listing order.
const CANONICAL: [&str; 7] = [
    "bash",
    "read",
    "write",
    "edit",
    "apply_patch",
    "glob",
    "grep",
];

/// The canonical native id `name` routes to, if it is a routed tool (aliases included).
pub fn resolve(name: &str) -> Option<&'static str> {
    let id = name.strip_prefix(NATIVE_PREFIX)?;
    match id {
        "shell" => Some("bash"),
        "patch" => Some("apply_patch"),
        _ => CANONICAL.iter().copied().find(|c| *c == id),
    }
}

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn text(description: &str) -> Value {
    json!({"type": "string", "minLength": 1, "description": description})
}

fn integer(description: &str, min: u64, max: u64) -> Value {
    json!({"type": "integer", "minimum": min, "maximum": max, "description": description})
}

fn flag(description: &str) -> Value {
    json!({"type": "boolean", "description": description})
}

fn def(
    id: &str,
    description: &'static str,
    props: Vec<(&str, Value)>,
    required: &[&str],
) -> ToolDef {
    let properties: Map<String, Value> =
        props.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    ToolDef {
        name: format!("{NATIVE_PREFIX}{id}"),
        description,
        input_schema: json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false}),
    }
}

const FILE_PATH: &str = "Path: relative to the sandbox working directory, absolute inside the local project (mapped onto it), or an absolute sandbox path.";

/// The routed tools as listed in remote mode (canonical names only; the aliases
/// `native_shell` and `native_patch` are accepted by `tools/call`).
pub fn tools() -> Vec<ToolDef> {
    let max_ms = MAX_TIMEOUT.as_millis() as u64;
    vec![
        def("bash", "Remote mode: run a shell command (bash -lc) in this session's sandbox, from the sandbox working directory, and return {stdout, stderr, code, signal, truncated}. Cancelling or timing out stops the remote process tree. With `background` (servers, watchers) it returns at once with the processId of a managed process that keeps running.",
            vec![("command", text("Shell command line, passed unchanged.")),
                 ("timeout", integer("Deadline in milliseconds; 0 = none. Default: the configured timeout.", 0, max_ms)),
                 ("workdir", text("Working directory (mapped like file paths). Default: the sandbox working directory.")),
                 ("description", string("Short description of the command (informational).")),
                 ("background", flag("Start it as a managed background process and return at once with its processId (follow it with sandbox_process_output, stop it with sandbox_process_stop); `timeout` does not apply."))],
            &["command"]),
        def("read", "Remote mode: read a text file of the session sandbox as `N: text` lines (offset is 1-based, at most 2000 lines per call), or list a directory.",
            vec![("filePath", text(FILE_PATH)),
                 ("offset", integer("First line, 1-based (0 is taken as 1).", 0, u32::MAX as u64)),
                 ("limit", integer("Lines to show (default and maximum 2000).", 1, 2000))],
            &["filePath"]),
        def("write", "Remote mode: create or replace a text file in the session sandbox (atomic; parents created).",
            vec![("filePath", text(FILE_PATH)), ("content", string("The whole file content."))],
            &["filePath", "content"]),
        def("edit", "Remote mode: replace oldString with newString in a file of the session sandbox; oldString must occur exactly once unless replaceAll.",
            vec![("filePath", text(FILE_PATH)),
                 ("oldString", text("Exact text to replace.")),
                 ("newString", string("Replacement text.")),
                 ("replaceAll", flag("Replace every occurrence."))],
            &["filePath", "oldString", "newString"]),
        def("apply_patch", "Remote mode: apply a `*** Begin Patch` … `*** End Patch` patch (Add File / Delete File / Update File with optional Move to, `@@` hunks) in the session sandbox; header paths are mapped like file paths. Same grammar as sandbox_patch.",
            vec![("patchText", text("The whole patch text."))],
            &["patchText"]),
        def("glob", "Remote mode: list files of the session sandbox matching a glob (ripgrep selection), one per line, or `No matches found`.",
            vec![("pattern", text("Glob, e.g. **/*.ts.")), ("path", text("Directory to search (default: the working directory)."))],
            &["pattern"]),
        def("grep", "Remote mode: search file contents of the session sandbox for a regex; prints `path:line:text` rows or `No matches found`.",
            vec![("pattern", text("Regular expression (one line).")),
                 ("path", text("Directory or file to search (default: the working directory).")),
                 ("include", text("Only files matching this glob, e.g. *.{ts,tsx}."))],
            &["pattern"]),
    ]
}

/// Run the routed tool `id` (canonical, from [`resolve`]) called as `name`.
pub(super) async fn call(
    rt: &Arc<Runtime>,
    id: &str,
    name: &str,
    arguments: Option<Map<String, Value>>,
    ctx: CallCtx,
) -> Result<ToolOutput, ToolError> {
    if rt.config().mode != Mode::Remote {
        return Err(ToolError::Refused(format!(
            "{name} routes OpenCode's native `{id}` tool to the session sandbox and is served only in remote mode \
             (option mode: \"remote\" or CREATEOS_MODE=remote); in local mode the native tool runs locally"
        )));
    }
    let def = tools()
        .into_iter()
        .find(|d| d.name[NATIVE_PREFIX.len()..] == *id)
        .ok_or_else(|| ToolError::UnknownTool(name.to_string()))?;
    let args = Args::check(&def.input_schema, arguments)?;
    rt.require_isolation(name).await?;
    let _in_flight = rt.begin(&ctx.session)?;
    let (ctx, _heartbeat) = crate::tools::progress::heartbeat(ctx, &format!("{name} is running"));
    let op = match id {
        "bash" => return bash(rt, &args, &ctx).await,
        "read" => FileOp::Read {
            path: args.str("filePath")?.to_string(),
            options: ReadOptions {
                offset: args.opt_u64("offset").map(|o| o.max(1)),
                limit: args.opt_u64("limit"),
            },
        },
        "write" => FileOp::Write {
            path: args.str("filePath")?.to_string(),
            content: args.str("content")?.to_string(),
        },
        "edit" => FileOp::Edit {
            path: args.str("filePath")?.to_string(),
            old: args.str("oldString")?.to_string(),
            new: args.str("newString")?.to_string(),
            all: args.opt_bool("replaceAll").unwrap_or(false),
        },
        "apply_patch" => FileOp::Patch {
            text: args.str("patchText")?.to_string(),
        },
        "glob" => FileOp::Glob {
            pattern: args.str("pattern")?.to_string(),
            options: GlobOptions {
                path: args.opt_str("path").map(str::to_string),
                ..Default::default()
            },
        },
        "grep" => FileOp::Grep {
            pattern: args.str("pattern")?.to_string(),
            options: GrepOptions {
                path: args.opt_str("path").map(str::to_string),
                include: args.opt_str("include").map(str::to_string),
                ..Default::default()
            },
        },
        _ => return Err(ToolError::UnknownTool(name.to_string())),
    };
    files::run(rt, op, &ctx).await
}

/// Grace between SIGTERM and SIGKILL when a background start is cancelled.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// The routed shell: the command as given, from the (mapped) working directory; to
/// completion, or as a managed background process with `background`.
async fn bash(rt: &Arc<Runtime>, args: &Args, ctx: &CallCtx) -> Result<ToolOutput, ToolError> {
    let command = args.str("command")?;
    let map = files::path_map(rt)?;
    let cwd = match args.opt_str("workdir") {
        Some(dir) => map
            .to_guest(dir)
            .map_err(|e| ToolError::InvalidArgs(e.to_string()))?,
        None => map.guest_root.clone(),
    };
    let background = args.opt_bool("background").unwrap_or(false);
    if background && args.opt_u64("timeout").is_some_and(|ms| ms > 0) {
        return Err(ToolError::InvalidArgs(
            "\"timeout\" does not apply to a background command (it runs until it exits or is stopped with sandbox_process_stop)".into(),
        ));
    }
    let limit = deadline(rt, args);
    let cwd = &cwd;
    rt.with_session(ctx, |sandbox| async move {
        if background {
            return start_background(&sandbox, command, cwd, ctx).await;
        }
        run_shell(&sandbox, command, cwd, limit, ctx).await
    })
    .await
}

/// Start `command` as a managed process of the session sandbox that outlives the call (stdin
/// open for sandbox_process_input), and say how to follow and stop it.
async fn start_background(
    sandbox: &Sandbox,
    command: &str,
    cwd: &str,
    ctx: &CallCtx,
) -> Result<ToolOutput, ToolError> {
    let spec = ProcessSpec::shell(command).cwd(cwd);
    let started = sandbox.processes().start(spec).await.map_err(run_error)?;
    if ctx.cancel.is_cancelled() {
        // The caller gave up while it was starting: leave no orphan behind.
        started.stop(Some(STOP_GRACE)).await.map_err(run_error)?;
        return Err(ToolError::Cancelled);
    }
    let details = started.details();
    let sandbox_id = sandbox.id();
    let follow = json!({"sandbox_id": sandbox_id, "process_id": details.process_id});
    let body = json!({
        "processId": details.process_id,
        "pid": details.pid,
        "state": details.state,
        "sandboxId": sandbox_id,
        "background": true,
        "next": format!(
            "Running in the background. Read its output with sandbox_process_output {follow}, \
             send input with sandbox_process_input, stop it with sandbox_process_stop {follow}."
        ),
    });
    Ok(ToolOutput::json(body)
        .with("sandboxId", sandbox_id)
        .with("processId", details.process_id.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_resolve() {
        assert_eq!(resolve("native_shell"), Some("bash"));
        assert_eq!(resolve("native_bash"), Some("bash"));
        assert_eq!(resolve("native_patch"), Some("apply_patch"));
        assert_eq!(resolve("native_apply_patch"), Some("apply_patch"));
        assert_eq!(resolve("native_grep"), Some("grep"));
        assert_eq!(resolve("read"), None);
        assert_eq!(resolve("native_exec"), None);
        assert_eq!(resolve("sandbox_read"), None);
        let tools = tools();
        assert_eq!(tools.len(), CANONICAL.len());
        for (t, id) in tools.iter().zip(CANONICAL) {
            assert_eq!(t.name, format!("{NATIVE_PREFIX}{id}"));
            assert_eq!(resolve(&t.name), Some(id));
            assert_eq!(t.input_schema["additionalProperties"], false);
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
