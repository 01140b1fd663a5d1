// End-to-end test: the real OpenCode (`opencode run`) with this plugin, `cos mcp` and the
// emulator, driven by the scripted model server. Run through e2e/run.sh, which installs
// OpenCode and the packed plugin; this file needs:
//
//   OPENCODE_BIN  the opencode executable      MOCK_BIN  the createos-mock executable
//   PLUGIN_DIR    the plugin as npm installed it from its tarball (with the cos package beside it)
//   INSTALL_DIR   where npm installed it (node_modules/.bin/cos is the packaged cos)
//
// OpenCode runs with PATH=/usr/bin:/bin and no COS_BIN: the plugin runs the packaged binary.
//
// Scenarios (each a fresh `opencode run`):
//   local   sandbox_exec, then sandbox_write + sandbox_read, in the session sandbox
//   remote  OpenCode's own `bash`, routed to the session sandbox; then /sandbox and
//           /sandbox-release in the same session
// Every tool result must come back to the model in the next request, the emulator must
// have run the work, and no sandbox may be left at the end.

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { startModelServer } from "./model-server.mjs";

const RUN_TIMEOUT_MS = Number(process.env.E2E_RUN_TIMEOUT_MS ?? 240_000);

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run e2e/run.sh)`);
  if (name !== "PLUGIN_DIR" && !existsSync(v)) throw new Error(`${name}=${v} does not exist`);
  return v;
}

function log(msg) {
  process.stderr.write(`[e2e] ${msg}\n`);
}

let failures = 0;
function check(ok, what, detail = "") {
  if (ok) log(`ok    ${what}`);
  else {
    failures++;
    log(`FAIL  ${what}${detail ? `\n      ${detail.replace(/\n/g, "\n      ")}` : ""}`);
  }
  return ok;
}

/** Start the emulator; resolves with its base URL, API key and a stop function. */
async function startMock(bin, workDir) {
  const child = spawn(bin, ["--listen", "127.0.0.1:0", "--state-dir", join(workDir, "mock-state")], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d) => (stderr = (stderr + d).slice(-8000)));
  const ready = await new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`emulator printed no ready line in 60 s:\n${stderr}`)), 60_000);
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (d) => {
      out += d;
      const nl = out.indexOf("\n");
      if (nl >= 0) {
        clearTimeout(timer);
        try {
          resolve(JSON.parse(out.slice(0, nl)));
        } catch (e) {
          reject(new Error(`unreadable ready line ${out.slice(0, nl)}: ${e}`));
        }
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`emulator exited (${code}) before it was ready:\n${stderr}`));
    });
  });
  return {
    baseUrl: ready.base_url,
    apiKey: ready.api_key,
    stderr: () => stderr,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(t);
    },
  };
}

async function getJson(url, headers = {}) {
  const res = await fetch(url, { headers });
  if (!res.ok) throw new Error(`GET ${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** Live sandboxes of the emulator, polled until zero or `ms` passed. */
async function waitNoLiveSandboxes(mock, ms) {
  const end = Date.now() + ms;
  let stats;
  do {
    stats = await getJson(`${mock.baseUrl}/_mock/stats`, { "x-api-key": mock.apiKey });
    if (stats.live_sandboxes === 0 && stats.live_processes === 0) return stats;
    await new Promise((r) => setTimeout(r, 250));
  } while (Date.now() < end);
  return stats;
}

/** The OpenCode configuration of one run. */
function writeConfig(projectDir, modelUrl, pluginDir, pluginOptions) {
  const config = {
    $schema: "https://opencode.ai/config.json",
    autoupdate: false,
    share: "disabled",
    model: "scripted/scripted-1",
    small_model: "scripted/scripted-1",
    provider: {
      scripted: {
        npm: "@ai-sdk/openai-compatible",
        name: "Scripted e2e model",
        options: { baseURL: modelUrl, apiKey: "e2e-not-a-secret" },
        models: { "scripted-1": { name: "Scripted 1", tool_call: true, limit: { context: 100000, output: 4000 } } },
      },
    },
    plugin: [[pluginDir, pluginOptions]],
    permission: { bash: "allow", edit: "allow", read: "allow", webfetch: "deny" },
  };
  writeFileSync(join(projectDir, "opencode.json"), JSON.stringify(config, null, 2));
}

/** `opencode run` once; resolves with its exit code and output. */
function opencodeRun(bin, projectDir, env, args) {
  return new Promise((resolve) => {
    const child = spawn(bin, ["run", "--format", "json", "--model", "scripted/scripted-1", ...args], {
      cwd: projectDir,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8");
    child.stderr.setEncoding("utf8");
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr = (stderr + d).slice(-20000)));
    const timer = setTimeout(() => {
      stderr += `\n[e2e] opencode run timed out after ${RUN_TIMEOUT_MS} ms; killing it`;
      child.kill("SIGKILL");
    }, RUN_TIMEOUT_MS);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** How many `op` requests the emulator's handlers ran. */
function handled(stats, op) {
  return stats?.handled?.[op] ?? 0;
}

/** The tool result of step `i` as the model received it. */
function resultOfStep(turns, i) {
  const turn = turns.find((t) => t.results.length > i);
  const content = turn?.results[i]?.content;
  if (process.env.E2E_VERBOSE) log(`tool result ${i}: ${content}`);
  return content;
}

async function main() {
  const opencode = need("OPENCODE_BIN");
  const mockBin = need("MOCK_BIN");
  const pluginDir = need("PLUGIN_DIR");
  const installDir = need("INSTALL_DIR");
  if (!existsSync(join(pluginDir, "dist", "index.js"))) throw new Error(`${pluginDir}/dist/index.js is missing: run npm run build`);

  const work = mkdtempSync(join(tmpdir(), "createos-opencode-e2e-"));
  const home = join(work, "home");
  mkdirSync(home, { recursive: true });
  const mock = await startMock(mockBin, work);
  const model = await startModelServer();
  log(`emulator at ${mock.baseUrl}, model server at ${model.url}`);

  // OpenCode in a private home, with nothing fetched from the network and no updates.
  // No cargo and no cos on OpenCode's PATH: the plugin finds the packaged binary itself.
  const PATH = "/usr/bin:/bin";
  for (const tool of ["cos", "cargo"]) {
    if (PATH.split(":").some((d) => existsSync(join(d, tool)))) throw new Error(`${tool} is on ${PATH}; the test would not show the packaged binary is used`);
  }
  const env = {
    PATH,
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    XDG_DATA_HOME: join(home, ".local", "share"),
    XDG_CACHE_HOME: join(home, ".cache"),
    XDG_STATE_HOME: join(home, ".local", "state"),
    TMPDIR: process.env.TMPDIR ?? "/tmp",
    OPENCODE_DISABLE_AUTOUPDATE: "1",
    OPENCODE_DISABLE_MODELS_FETCH: "1",
    OPENCODE_DISABLE_SHARE: "1",
    OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
    OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
    OPENCODE_DISABLE_CLAUDE_CODE: "1",
    OPENCODE_DISABLE_EXTERNAL_SKILLS: "1",
    OPENCODE_DISABLE_PROJECT_CONFIG: "",
    CREATEOS_SANDBOX_BASE_URL: mock.baseUrl,
    CREATEOS_API_KEY: mock.apiKey,
    CREATEOS_STATE_DIR: join(work, "cos-state"),
    RUST_LOG: process.env.RUST_LOG ?? "warn",
  };
  delete env.OPENCODE_DISABLE_PROJECT_CONFIG;

  const nonce = randomBytes(4).toString("hex");
  try {
    await (await import("./signed-out.mjs")).signedOutScenario({ opencode, env, mock, model, pluginDir, installDir, work, nonce, check, log, opencodeRun, resultOfStep });
    // ── local mode: sandbox_exec, sandbox_write + sandbox_read ──────────────────────────
    {
      const project = join(work, "project-local");
      mkdirSync(project, { recursive: true });
      writeConfig(project, model.url, pluginDir, { mode: "local", persist: false });
      const content = `written-through-cos-${nonce}`;
      model.setScenario({
        steps: [
          { tool: "sandbox_exec", args: { command: `echo EXEC-$((6*7))-${nonce}; pwd; echo "host=$HOSTNAME"` } },
          { tool: "sandbox_write", args: { path: `/root/workspace/e2e-${nonce}.txt`, content } },
          { tool: "sandbox_read", args: { path: `/root/workspace/e2e-${nonce}.txt` } },
        ],
        final: `E2E-LOCAL-DONE-${nonce}`,
      });
      const before = await getJson(`${mock.baseUrl}/_mock/stats`, { "x-api-key": mock.apiKey });
      log("opencode run (local mode)");
      const run = await opencodeRun(opencode, project, env, ["Use the CreateOS sandbox tools."]);
      const turns = model.turns;
      check(run.code === 0, "opencode run (local) exits 0", `code=${run.code} signal=${run.signal}\n${run.stderr}`);
      const offered = turns[0]?.offered ?? [];
      check(offered.includes("sandbox_exec") && offered.includes("bash"), "the model is offered sandbox_* tools beside the native ones", offered.join(", "));
      const exec = resultOfStep(turns, 0) ?? "";
      check(exec.includes(`EXEC-42-${nonce}`), "sandbox_exec ran the command and its output came back", exec);
      check(exec.includes("/root/workspace"), "sandbox_exec ran in the session working directory", exec);
      const read = resultOfStep(turns, 2) ?? "";
      check(read.includes(content), "sandbox_write + sandbox_read round-trip the content", `write: ${resultOfStep(turns, 1)}\nread: ${read}`);
      check(turns.some((t) => t.system.includes("CreateOS sandboxes")), "the per-turn context text reaches the model");
      check(run.stdout.includes(`E2E-LOCAL-DONE-${nonce}`), "the final answer reaches OpenCode's output", run.stdout.slice(-2000));
      const after = await getJson(`${mock.baseUrl}/_mock/stats`, { "x-api-key": mock.apiKey });
      const created = (after.sandboxes_created ?? 0) - (before.sandboxes_created ?? 0);
      check(created === 1, "one session sandbox was created in the emulator", JSON.stringify(after));
      check(handled(after, "createProcess") > handled(before, "createProcess"), "the emulator ran the work as managed processes", JSON.stringify(after.handled));
      const left = await waitNoLiveSandboxes(mock, 30_000);
      check(left.live_sandboxes === 0, "cos mcp destroyed the session sandbox after OpenCode exited (persist: false)", JSON.stringify(left));
    }

    // ── remote mode: OpenCode's bash routed to the session sandbox; /sandbox and ──────────
    // /sandbox-release in later runs of the same session (persist: true, so the binding
    // outlives each `cos mcp` and only the release destroys the sandbox).
    {
      const project = join(work, "project-remote");
      mkdirSync(project, { recursive: true });
      writeConfig(project, model.url, pluginDir, { mode: "remote", persist: true });
      const marker = `ROUTED-${nonce}`;
      model.setScenario({
        steps: [{ tool: "bash", args: { command: `echo ${marker}-$((3+4)); pwd; touch routed-${nonce}; echo "host=$HOSTNAME"` } }],
        final: `E2E-REMOTE-DONE-${nonce}`,
      });
      const before = await getJson(`${mock.baseUrl}/_mock/stats`, { "x-api-key": mock.apiKey });
      log("opencode run (remote mode)");
      let run = await opencodeRun(opencode, project, env, ["Run the marker command."]);
      let turns = model.turns;
      check(run.code === 0, "opencode run (remote) exits 0", `code=${run.code} signal=${run.signal}\n${run.stderr}`);
      const bash = resultOfStep(turns, 0) ?? "";
      check(bash.includes(`${marker}-7`), "routed bash ran and its output came back", bash);
      check(bash.includes("/root/workspace"), "routed bash ran in the sandbox working directory, not the local project", bash);
      check(!existsSync(join(project, `routed-${nonce}`)), "routed bash did not touch the local project");
      check(turns.some((t) => t.system.includes("Remote mode")), "the remote-mode context text reaches the model");
      let after = await getJson(`${mock.baseUrl}/_mock/stats`, { "x-api-key": mock.apiKey });
      check((after.sandboxes_created ?? 0) - (before.sandboxes_created ?? 0) === 1, "routed bash created the session sandbox in the emulator", JSON.stringify(after));
      check(handled(after, "createProcess") > handled(before, "createProcess"), "routed bash ran as a managed process in the emulator", JSON.stringify(after.handled));
      check(run.stdout.includes(`E2E-REMOTE-DONE-${nonce}`), "the final answer reaches OpenCode's output", run.stdout.slice(-2000));
      check(after.live_sandboxes === 1, "with persist: true the session sandbox outlives OpenCode", JSON.stringify(after));

      model.setScenario({
        steps: [{ tool: "bash", args: { command: `ls routed-${nonce} && echo REATTACHED-${nonce}` } }],
        final: `E2E-REATTACH-DONE-${nonce}`,
      });
      log("opencode run --continue (same session, new cos mcp)");
      run = await opencodeRun(opencode, project, env, ["--continue", "Check the file is still there."]);
      turns = model.turns;
      check(run.code === 0, "opencode run --continue exits 0", `code=${run.code}\n${run.stderr}`);
      const again = resultOfStep(turns, 0) ?? "";
      check(again.includes(`REATTACHED-${nonce}`), "the next run of the session reattaches to the same sandbox", again);
      const later = await getJson(`${mock.baseUrl}/_mock/stats`, { "x-api-key": mock.apiKey });
      check(later.sandboxes_created === after.sandboxes_created, "reattaching created no new sandbox", JSON.stringify(later));

      model.setScenario({ steps: [], final: `E2E-STATUS-DONE-${nonce}` });
      log("opencode run --continue --command sandbox");
      run = await opencodeRun(opencode, project, env, ["--continue", "--command", "sandbox"]);
      turns = model.turns;
      check(run.code === 0, "/sandbox exits 0", `code=${run.code}\n${run.stderr}`);
      const statusPrompt = turns.at(-1)?.users.at(-1) ?? "";
      check(/"session": "ses_/.test(statusPrompt) && statusPrompt.includes("mode: remote") && statusPrompt.includes("already been executed"),
        "/sandbox runs in the plugin and its status reaches the conversation", statusPrompt);

      model.setScenario({ steps: [], final: `E2E-RELEASE-DONE-${nonce}` });
      log("opencode run --continue --command sandbox-release");
      run = await opencodeRun(opencode, project, env, ["--continue", "--command", "sandbox-release"]);
      turns = model.turns;
      check(run.code === 0, "/sandbox-release exits 0", `code=${run.code}\n${run.stderr}`);
      const releasePrompt = turns.at(-1)?.users.at(-1) ?? "";
      check(releasePrompt.includes("Released this session's sandbox"), "/sandbox-release reports the release", releasePrompt);
      const left = await waitNoLiveSandboxes(mock, 30_000);
      check(left.live_sandboxes === 0, "/sandbox-release destroyed the session sandbox", JSON.stringify(left));
    }
    await (await import("./sessions.mjs")).sessionScenarios({ opencode, env, mock, model, pluginDir, work, nonce, check, log, opencodeRun, writeConfig, resultOfStep });
  } finally {
    await model.close();
    await mock.stop();
    if (failures === 0 && !process.env.E2E_KEEP) rmSync(work, { recursive: true, force: true });
    else log(`work directory kept: ${work}`);
  }
  if (failures > 0) {
    log(`${failures} check(s) FAILED`);
    process.exit(1);
  }
  log("all end-to-end checks passed");
}

main().catch((err) => {
  log(`error: ${err?.stack ?? err}`);
  process.exit(1);
});
