// End-to-end scenarios of the plugin's session handling, with the real OpenCode: run by
// run.mjs (which starts the emulator and the scripted model server) through
// `sessionScenarios(h)`, where `h` carries what run.mjs has:
//
//   opencode, env, mock {baseUrl, apiKey}, model, pluginDir, work, nonce,
//   check(ok, what, detail), log(msg), opencodeRun(bin, dir, env, args),
//   writeConfig(dir, modelUrl, pluginDir, options), resultOfStep(turns, i)
//
// Scenarios (remote mode, each in its own project):
//   skills    a skill bundle under .opencode/skills appears in the sandbox at its own absolute
//             path and at the mapped project path; the routed call runs through the plugin's
//             official MCP client
//   delete    `opencode session delete` of a session with a persisted sandbox destroys it
//             (emulator stats)
//   stale     the session's sandbox is deleted through the API; the next call of the session
//             runs in a fresh sandbox and says that the previous one no longer exists
// Every request to the emulator carries its API key (its `/_mock/*` routes require it too).

import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** A JSON request to the emulator with its key. */
async function api(mock, method, path) {
  const headers = { "X-Api-Key": mock.apiKey };
  if (method !== "GET") headers["Content-Length"] = "0";
  const res = await fetch(`${mock.baseUrl}${path}`, { method, headers });
  const text = await res.text();
  let body;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = text;
  }
  return { status: res.status, body };
}

async function stats(mock) {
  const { status, body } = await api(mock, "GET", "/_mock/stats");
  if (status !== 200) throw new Error(`GET /_mock/stats: ${status} ${JSON.stringify(body)}`);
  return body;
}

/** Poll the emulator's stats until `pred` holds or `ms` passed; the last stats either way. */
async function waitStats(mock, pred, ms = 30_000) {
  const end = Date.now() + ms;
  let s;
  do {
    s = await stats(mock);
    if (pred(s)) return s;
    await new Promise((r) => setTimeout(r, 250));
  } while (Date.now() < end);
  return s;
}

/** Ids of the sandboxes the emulator lists as not destroyed. */
async function liveSandboxIds(mock) {
  const { status, body } = await api(mock, "GET", "/v1/sandboxes");
  if (status !== 200) throw new Error(`GET /v1/sandboxes: ${status} ${JSON.stringify(body)}`);
  // JSend around a page: {status, data: {data: [SandboxView], pagination}}.
  const page = body?.data;
  const list = Array.isArray(page?.data) ? page.data : [];
  return list.filter((s) => s && !/^destroy/.test(String(s.status))).map((s) => s.id);
}

/** `opencode <args>` (not `run`) in `dir`; resolves with its exit code and output. */
function opencodeCommand(h, dir, args, ms = 120_000) {
  return new Promise((resolve) => {
    const child = spawn(h.opencode, args, { cwd: dir, env: h.env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d) => (stderr = (stderr + d).slice(-20000)));
    const timer = setTimeout(() => child.kill("SIGKILL"), ms);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** The session id `opencode run --format json` reported. */
function sessionOf(stdout) {
  return stdout.match(/"sessionID"\s*:\s*"(ses_[^"]+)"/)?.[1];
}

function project(h, name) {
  const dir = join(h.work, `project-${name}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

async function skills(h) {
  const dir = project(h, "skills");
  const name = `e2e-skill-${h.nonce}`;
  const skillDir = join(dir, ".opencode", "skills", name);
  mkdirSync(skillDir, { recursive: true });
  const marker = `SKILL-MARKER-${h.nonce}`;
  writeFileSync(join(skillDir, "SKILL.md"), `---\nname: ${name}\ndescription: End-to-end test skill.\n---\n\n${marker}\n`);
  writeFileSync(join(skillDir, "helper.sh"), `echo HELPER-${h.nonce}\n`);
  writeFileSync(join(dir, `HOST-ONLY-${h.nonce}.txt`), "not part of any skill\n");
  h.writeConfig(dir, h.model.url, h.pluginDir, { mode: "remote", persist: false });
  const hostOnly = join(dir, `HOST-ONLY-${h.nonce}.txt`);
  h.model.setScenario({
    steps: [
      {
        tool: "bash",
        args: {
          command:
            `cat '${join(skillDir, "SKILL.md")}'; ` +
            `bash /root/workspace/.opencode/skills/${name}/helper.sh; ` +
            `test -e '${hostOnly}' && echo HOST-PATH-VISIBLE || echo HOST-PATH-HIDDEN`,
          description: "Read the mirrored skill",
        },
      },
    ],
    final: `E2E-SKILLS-DONE-${h.nonce}`,
  });
  h.log("opencode run (skills)");
  const run = await h.opencodeRun(h.opencode, dir, h.env, ["Read the skill."]);
  h.check(run.code === 0, "opencode run (skills) exits 0", `code=${run.code}\n${run.stderr}`);
  const out = h.resultOfStep(h.model.turns, 0) ?? "";
  h.check(out.includes(marker), "the skill's SKILL.md is in the sandbox at its own absolute path", out);
  h.check(out.includes(`HELPER-${h.nonce}`), "the skill bundle is also at the mapped project path (/root/workspace/.opencode/skills/…)", out);
  h.check(out.includes("HOST-PATH-HIDDEN"), "only the skill was mirrored: a project file outside it is not in the sandbox", out);
  const sidecar = join(h.pluginDir, "dist", "sidecar.js");
  const official = existsSync(sidecar) && readFileSync(sidecar, "utf8").includes("@modelcontextprotocol/sdk/client/stdio.js");
  h.check(official && !existsSync(join(h.pluginDir, "dist", "mcp.js")) && out.includes(marker),
    "the routed call ran through the plugin's official MCP SDK client", `sidecar.js uses the SDK: ${official}`);
  const left = await waitStats(h.mock, (s) => s.live_sandboxes === 0);
  h.check(left.live_sandboxes === 0, "the skills session's sandbox is gone after OpenCode exits (persist: false)", JSON.stringify(left));
}

async function deletion(h) {
  const dir = project(h, "delete");
  h.writeConfig(dir, h.model.url, h.pluginDir, { mode: "remote", persist: true });
  h.model.setScenario({ steps: [{ tool: "bash", args: { command: `echo DELETE-ME-${h.nonce}`, description: "Marker" } }], final: `E2E-DELETE-RUN-${h.nonce}` });
  const before = await stats(h.mock);
  h.log("opencode run (session to delete)");
  const run = await h.opencodeRun(h.opencode, dir, h.env, ["Run the marker command."]);
  h.check(run.code === 0, "opencode run (session to delete) exits 0", `code=${run.code}\n${run.stderr}`);
  const session = sessionOf(run.stdout);
  h.check(Boolean(session), "the run reports its session id", run.stdout.slice(0, 2000));
  const during = await stats(h.mock);
  h.check(during.live_sandboxes === before.live_sandboxes + 1, "the session's sandbox outlives the run (persist: true)", JSON.stringify(during));
  if (!session) return;
  h.log(`opencode session delete ${session}`);
  const del = await opencodeCommand(h, dir, ["session", "delete", session]);
  h.check(del.code === 0, "opencode session delete exits 0", `code=${del.code}\n${del.stderr}`);
  const after = await waitStats(h.mock, (s) => s.live_sandboxes === before.live_sandboxes);
  h.check(after.live_sandboxes === before.live_sandboxes, "deleting the session destroyed its sandbox (emulator stats)", JSON.stringify(after));
  h.check((after.handled?.destroySandbox ?? 0) > (during.handled?.destroySandbox ?? 0), "the emulator handled a destroy of it", JSON.stringify(after.handled));
}

async function stale(h) {
  const dir = project(h, "stale");
  h.writeConfig(dir, h.model.url, h.pluginDir, { mode: "remote", persist: true });
  const alreadyLive = new Set(await liveSandboxIds(h.mock));
  h.model.setScenario({ steps: [{ tool: "bash", args: { command: `echo FIRST-${h.nonce}`, description: "First" } }], final: `E2E-STALE-1-${h.nonce}` });
  h.log("opencode run (stale binding: first run)");
  let run = await h.opencodeRun(h.opencode, dir, h.env, ["First command."]);
  h.check(run.code === 0, "opencode run (stale binding, first) exits 0", `code=${run.code}\n${run.stderr}`);
  const first = (await liveSandboxIds(h.mock)).filter((id) => !alreadyLive.has(id));
  h.check(first.length === 1, "the first run bound one sandbox", JSON.stringify(first));
  if (first.length !== 1) return;
  const gone = first[0];
  const del = await api(h.mock, "DELETE", `/v1/sandboxes/${gone}`);
  h.check(del.status === 200 || del.status === 202, `the sandbox ${gone} was deleted through the API`, JSON.stringify(del));
  const before = await stats(h.mock);
  h.model.setScenario({ steps: [{ tool: "bash", args: { command: `echo SECOND-${h.nonce}`, description: "Second" } }], final: `E2E-STALE-2-${h.nonce}` });
  h.log("opencode run --continue (stale binding)");
  run = await h.opencodeRun(h.opencode, dir, h.env, ["--continue", "Second command."]);
  h.check(run.code === 0, "opencode run --continue (stale binding) exits 0", `code=${run.code}\n${run.stderr}`);
  const out = h.resultOfStep(h.model.turns, 0) ?? "";
  h.check(out.includes(`SECOND-${h.nonce}`), "the call after the deletion succeeded", out);
  h.check(out.includes(gone) && /no longer exists/.test(out), "its result says the previous sandbox no longer exists and a new one ran the call", out);
  const after = await stats(h.mock);
  h.check(after.sandboxes_created === before.sandboxes_created + 1, "a fresh session sandbox was created", JSON.stringify(after));
  h.model.setScenario({ steps: [], final: `E2E-STALE-RELEASE-${h.nonce}` });
  await h.opencodeRun(h.opencode, dir, h.env, ["--continue", "--command", "sandbox-release"]);
  const left = await waitStats(h.mock, (s) => s.live_sandboxes === 0);
  h.check(left.live_sandboxes === 0, "no sandbox is left after /sandbox-release", JSON.stringify(left));
}

/** Run every scenario; failures are reported through `h.check`. */
export async function sessionScenarios(h) {
  for (const scenario of [skills, deletion, stale]) {
    try {
      await scenario(h);
    } catch (err) {
      h.check(false, `scenario ${scenario.name} ran to its end`, err?.stack ?? String(err));
    }
  }
}
