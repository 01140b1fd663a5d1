//! Catalog entries of the jobs tools: one-shot work in throwaway sandboxes (offload, fanout,
//! run_code).

use serde_json::json;

use super::{boolean, int, one_of, s, strings, tool, ToolDef, TIMEOUT};
use createos_sandbox::jobs::{Language, MAX_FANOUT_COMMANDS, MAX_FANOUT_JOBS};

const OFFLOAD: &str = "Run one command on a copy of the local project in a fresh, throwaway sandbox: the project directory is uploaded to /work (Git's file list; .git, node_modules, .env files and keys are left out), the command runs there with `bash -lc`, and the sandbox is destroyed afterwards. Use it for heavy or risky one-off work on the local code (a full build, the test suite, a benchmark) without touching the session sandbox; `out` brings a result file or directory back into the local project. The sandbox is kept (and named in the result) only when the command's outcome is uncertain, when it failed and keep_on_fail is set, or when `out` could not be retrieved. For a command in the session sandbox use sandbox_exec; for several independent commands at once use sandbox_fanout; for servers or background work use sandbox_process_start.";
const FANOUT: &str = "Run several independent commands in parallel, each in its own fresh sandbox with its own copy of the local project in /work (like sandbox_offload per command, without `out`). Use it to split a test suite, try several variants, or build for several targets at once. At most `jobs` sandboxes run at a time (default 2, max 10). Results come back in input order with each command's exit code, stdout, stderr and truncated flag; one failing command does not stop the others. Sandboxes are destroyed afterwards (failing ones too unless keep_on_fail); cancelling stops dispatch and destroys the running ones.";
const RUN_CODE: &str = "Run a self-contained code snippet in a fresh, throwaway sandbox (destroyed afterwards): the code is written to /work/main.<ext> and run by its toolchain — py: python3, js/mjs/cjs: node, ts: bun, sh: bash, go: go run, rb: ruby, c: gcc, cpp: g++, rs: rustc (compiled, then ./main). `stdin` is fed to the program; otherwise it reads EOF. The image must contain the toolchain (a missing one is reported clearly). Use it for quick experiments that need no project files; to run code of the local project use sandbox_offload, to run in the session sandbox use sandbox_exec.";

const DIR: &str = "Local directory to upload (default: the project directory); relative paths resolve against the project directory, and it must lie inside it once symlinks are resolved (.git, credential folders and the home directory are refused).";
const SHAPE: &str = "Size of the throwaway sandbox, e.g. s-4vcpu-8gb (see sandbox_shapes). Default: the configured shape.";
const ROOTFS: &str =
    "Base image of the throwaway sandbox (see sandbox_images). Default: the configured image.";
const KEEP: &str = "Keep the sandbox when the command fails (nonzero exit or timeout) so it can be inspected with sandbox_exec; remove it with sandbox_destroy afterwards.";

/// The jobs tools.
pub(super) fn tools() -> Vec<ToolDef> {
    let max_ms = createos_sandbox::jobs::MAX_JOB_TIMEOUT.as_millis() as u64;
    let mut commands = strings("Shell command lines, one per sandbox.", 1);
    commands["maxItems"] = json!(MAX_FANOUT_COMMANDS);
    vec![
        tool("offload", OFFLOAD, &[
            ("command", s("Shell command line, run by bash -lc in /work (stdin is empty).")),
            ("dir", s(DIR)),
            ("out", s("Artifact to bring back: a file or directory relative to /work (or absolute under /work), written to the same relative path under `dir`. Retrieved only when the command exits 0.")),
            ("shape", s(SHAPE)),
            ("rootfs", s(ROOTFS)),
            ("timeout", int(TIMEOUT, 0, max_ms)),
            ("keep_on_fail", boolean(KEEP)),
        ], &["command"]),
        tool("fanout", FANOUT, &[
            ("commands", commands),
            ("dir", s(DIR)),
            ("jobs", int("How many sandboxes run at once (default 2).", 1, MAX_FANOUT_JOBS as u64)),
            ("shape", s(SHAPE)),
            ("rootfs", s(ROOTFS)),
            ("timeout", int("Deadline of each command in milliseconds; 0 = none. Default: the configured timeout (120000).", 0, max_ms)),
            ("keep_on_fail", boolean(KEEP)),
        ], &["commands"]),
        tool("run_code", RUN_CODE, &[
            ("code", s("The whole program source.")),
            ("lang", one_of("Language (file extension).", &Language::names())),
            ("stdin", json!({"type": "string", "description": "Text fed to the program's standard input."})),
            ("timeout", int(TIMEOUT, 0, max_ms)),
            ("shape", s(SHAPE)),
            ("rootfs", s(ROOTFS)),
        ], &["code", "lang"]),
    ]
}
