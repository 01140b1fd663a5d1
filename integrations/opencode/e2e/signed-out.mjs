// End-to-end scenario: a new user, signed out, sets the plugin up with the packaged `cos` and
// runs OpenCode. Run by run.mjs through `signedOutScenario(h)`, where `h` carries what run.mjs
// has: opencode, env, mock {baseUrl, apiKey}, model, pluginDir, installDir, work, nonce,
// check(ok, what, detail), log(msg), opencodeRun(bin, dir, env, args), resultOfStep(turns, i).
//
//   1. `cos setup opencode` (node_modules/.bin/cos from the tarballs) adds the plugin to a
//      project's opencode.jsonc, keeping its comments, with a backup;
//   2. `cos setup opencode --doctor` finds the real OpenCode and its version, the entry, and
//      says that sign-in is missing;
//   3. OpenCode loads the plugin with no credential anywhere: the sandbox_* tools are listed,
//      and a call answers with an error result saying how to sign in; nothing reaches the
//      emulator's sandboxes.

import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

/** The emulator's statistics (its /_mock routes need its key). */
async function stats(mock) {
  const res = await fetch(`${mock.baseUrl}/_mock/stats`, { headers: { "X-Api-Key": mock.apiKey } });
  if (!res.ok) throw new Error(`GET /_mock/stats: ${res.status} ${await res.text()}`);
  return res.json();
}

export async function signedOutScenario(h) {
  const { opencode, env, mock, model, pluginDir, installDir, work, nonce, check, log, opencodeRun, resultOfStep } = h;
  const cos = join(installDir, "node_modules", ".bin", "cos");
  const home = join(work, "home-signed-out");
  mkdirSync(home, { recursive: true });
  // Signed out: no key in the environment and no ~/.createos.
  const outEnv = { ...env, HOME: home, XDG_CONFIG_HOME: join(home, ".config"), XDG_DATA_HOME: join(home, ".local", "share"),
    XDG_CACHE_HOME: join(home, ".cache"), XDG_STATE_HOME: join(home, ".local", "state") };
  for (const k of Object.keys(outEnv)) if (/^CREATEOS_.*(API_KEY|TOKEN)$/.test(k)) delete outEnv[k];
  const project = join(work, "project-signed-out");
  mkdirSync(join(project, ".git"), { recursive: true });

  const original = `{
  // The scripted model of this test (a comment \`cos setup opencode\` must keep).
  "$schema": "https://opencode.ai/config.json",
  "autoupdate": false,
  "share": "disabled",
  "model": "scripted/scripted-1",
  "small_model": "scripted/scripted-1",
  "provider": {
    "scripted": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "Scripted e2e model",
      "options": { "baseURL": "${model.url}", "apiKey": "e2e-not-a-secret" },
      "models": { "scripted-1": { "name": "Scripted 1", "tool_call": true, "limit": { "context": 100000, "output": 4000 } } },
    },
  },
  /* Tools run without asking. */
  "permission": { "bash": "allow", "edit": "allow", "read": "allow", "webfetch": "deny" },
}
`;
  const config = join(project, "opencode.jsonc");
  writeFileSync(config, original);

  // 1. setup, with the packaged cos and only system directories on PATH.
  const setup = spawnSync(cos, ["setup", "opencode", "--package", pluginDir], { cwd: project, env: outEnv, encoding: "utf8" });
  check(setup.status === 0, "cos setup opencode (packaged cos, PATH=/usr/bin:/bin, signed out) exits 0", `${setup.stdout}\n${setup.stderr}`);
  const edited = readFileSync(config, "utf8");
  check(edited.includes("// The scripted model of this test") && edited.includes("/* Tools run without asking. */"),
    "setup kept the config's comments", edited);
  check(edited.includes(JSON.stringify(pluginDir)), "setup added the plugin entry", edited);
  check(existsSync(`${config}.before-createos`) && readFileSync(`${config}.before-createos`, "utf8") === original,
    "setup backed the old config up first");
  check(/createos login/.test(setup.stderr), "setup says how to sign in", setup.stderr);

  // 2. --doctor with the real OpenCode on PATH.
  const doctorEnv = { ...outEnv, PATH: `${dirname(opencode)}:${outEnv.PATH}` };
  const doctor = spawnSync(cos, ["-o", "json", "setup", "opencode", "--doctor", "--package", pluginDir], { cwd: project, env: doctorEnv, encoding: "utf8" });
  let report = {};
  try {
    report = JSON.parse(doctor.stdout);
  } catch {}
  const byName = Object.fromEntries((report.checks ?? []).map((c) => [c.name, c]));
  const version = spawnSync(opencode, ["--version"], { encoding: "utf8" }).stdout.trim();
  check(doctor.status === 1 && byName["sign-in"]?.ok === false && /createos login/.test(byName["sign-in"]?.detail ?? ""),
    "--doctor reports that sign-in is missing", `${doctor.stdout}\n${doctor.stderr}`);
  check(byName.opencode?.ok === true && byName.opencode.detail.includes(version), `--doctor finds OpenCode ${version}`, JSON.stringify(byName.opencode));
  check(byName["plugin entry"]?.ok === true, "--doctor finds the plugin entry", JSON.stringify(byName["plugin entry"]));

  // 3. OpenCode, signed out.
  model.setScenario({
    steps: [{ tool: "sandbox_exec", args: { command: `echo SIGNED-OUT-${nonce}` } }],
    final: `E2E-SIGNED-OUT-DONE-${nonce}`,
  });
  const before = await stats(mock);
  log("opencode run (signed out)");
  const run = await opencodeRun(opencode, project, outEnv, ["Try the sandbox."]);
  const turns = model.turns;
  check(run.code === 0, "opencode run (signed out) exits 0: the plugin loads without credentials", `code=${run.code}\n${run.stderr}`);
  const offered = turns[0]?.offered ?? [];
  check(offered.includes("sandbox_exec") && offered.includes("sandbox_create"), "signed out, the sandbox_* tools are still listed", offered.join(", "));
  const result = resultOfStep(turns, 0) ?? "";
  check(/createos login/.test(result) && /CREATEOS_API_KEY/.test(result) && !result.includes(`SIGNED-OUT-${nonce}`),
    "a signed-out call returns an error saying how to sign in", result);
  check(run.stdout.includes(`E2E-SIGNED-OUT-DONE-${nonce}`), "the conversation goes on after the sign-in error", run.stdout.slice(-2000));
  const after = await stats(mock);
  check((after.sandboxes_created ?? 0) === (before.sandboxes_created ?? 0), "signed out, no sandbox was created", JSON.stringify(after));
}
