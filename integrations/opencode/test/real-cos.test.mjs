// The official MCP TypeScript SDK client against a real `cos mcp` (built from this repository:
// `cargo build --bin cos`; COS_BIN names another build) over `cos --local`, its in-process
// emulator. A strict client with a 3 s request timeout keeps a 10 s `sandbox_exec` alive only
// through the progress notifications cos sends (resetTimeoutOnProgress); without that reset
// the same timeout ends the call.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

import { Sidecar } from "../dist/sidecar.js";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const STRICT_TIMEOUT_MS = 3000;
/** A 10 s command that prints as it goes. */
const TEN_SECONDS = "for i in 1 2 3 4 5 6 7 8 9 10; do echo tick $i; sleep 1; done; echo EXEC-DONE";

function cosBinary() {
  const fromEnv = process.env.COS_BIN;
  if (fromEnv && !fromEnv.endsWith("fake-cos.mjs")) return fromEnv;
  const target = process.env.CARGO_TARGET_DIR ? resolve(process.env.CARGO_TARGET_DIR) : join(REPO, "target");
  return join(target, "debug", "cos");
}

const COS = cosBinary();
let work;

before(() => {
  assert.ok(existsSync(COS), `no cos binary at ${COS}: build it with \`cargo build --bin cos\` (or set COS_BIN)`);
  work = mkdtempSync(join(tmpdir(), "real-cos-"));
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** The environment of a `cos --local` child: no credentials or endpoint of the caller's. */
function localEnv() {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k.startsWith("CREATEOS_") || k === "COS_BIN") continue;
    env[k] = v;
  }
  env.RUST_LOG = "warn";
  env.NO_COLOR = "1";
  return env;
}

function cosArgs(name) {
  const project = mkdtempSync(join(work, `${name}-project-`));
  const state = mkdtempSync(join(work, `${name}-state-`));
  return ["--local", "mcp", "--project", project, "--state-dir", state, "--options", JSON.stringify({ persist: false })];
}

const textOf = (res) => (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");

/** An SDK client connected to a fresh `cos --local mcp`, its session sandbox warmed up. */
async function connected(name) {
  const transport = new StdioClientTransport({ command: COS, args: cosArgs(name), env: localEnv(), stderr: "pipe" });
  let stderr = "";
  transport.stderr?.on("data", (d) => (stderr = (stderr + d).slice(-8000)));
  const client = new Client({ name: "real-cos-test", version: "0" });
  await client.connect(transport);
  // The session sandbox is created by the first call; give that one time of its own.
  try {
    const warm = await client.callTool({ name: "sandbox_exec", arguments: { command: "echo warm" } }, undefined, { timeout: 120_000 });
    assert.notEqual(warm.isError, true, textOf(warm));
  } catch (err) {
    await client.close();
    throw err;
  }
  return { client, stderr: () => stderr };
}

test("a 3 s request timeout with resetTimeoutOnProgress: a 10 s sandbox_exec succeeds on cos's progress", async () => {
  const { client, stderr } = await connected("reset");
  try {
    const progress = [];
    const res = await client
      .callTool({ name: "sandbox_exec", arguments: { command: TEN_SECONDS } }, undefined, {
        timeout: STRICT_TIMEOUT_MS,
        resetTimeoutOnProgress: true,
        onprogress: (p) => progress.push(p),
      })
      .catch((err) => assert.fail(`the call failed (${progress.length} progress notifications): ${err.message}\n${stderr()}`));
    assert.notEqual(res.isError, true, textOf(res));
    assert.match(textOf(res), /EXEC-DONE/);
    assert.ok(progress.length >= 2, `progress notifications: ${progress.length}`);
    const values = progress.map((p) => p.progress);
    assert.deepEqual([...values].sort((a, b) => a - b), values, "progress only grows");
  } finally {
    await client.close();
  }
});

test("the same 3 s timeout without resetTimeoutOnProgress ends the 10 s call (the limit is real)", async () => {
  const { client } = await connected("strict");
  try {
    await assert.rejects(
      client.callTool({ name: "sandbox_exec", arguments: { command: TEN_SECONDS } }, undefined, { timeout: STRICT_TIMEOUT_MS }),
      /Request timed out/,
    );
    // The cancelled call left the session usable.
    const res = await client.callTool({ name: "sandbox_exec", arguments: { command: "echo after" } }, undefined, { timeout: 60_000 });
    assert.match(textOf(res), /after/);
  } finally {
    await client.close();
  }
});

test("the plugin's sidecar (the same SDK client) with a 3 s idle timeout runs the 10 s exec", async () => {
  const sidecar = new Sidecar({ command: COS, args: cosArgs("sidecar"), env: localEnv() }, () => {}, { idleTimeoutMs: STRICT_TIMEOUT_MS });
  try {
    const tools = await sidecar.start();
    assert.ok(tools.some((t) => t.name === "sandbox_exec"));
    // Creating the session sandbox may outlast one idle period on a slow machine; cos keeps
    // allocating under its own lifetime, so a second call picks the same sandbox up.
    for (let attempt = 1; ; attempt++) {
      const ok = await sidecar.call("sandbox_exec", { command: "echo warm" }, { session: "ses_real" }).then(
        () => true,
        (err) => (attempt < 5 ? false : Promise.reject(err)),
      );
      if (ok) break;
    }
    const seen = [];
    const res = await sidecar.call("sandbox_exec", { command: TEN_SECONDS }, { session: "ses_real", onProgress: (p) => seen.push(p) });
    assert.notEqual(res.isError, true, textOf(res));
    assert.match(textOf(res), /EXEC-DONE/);
    assert.ok(seen.length >= 2, `progress reached the plugin: ${seen.length}`);
  } finally {
    await sidecar.close();
  }
});
