// buildTools without a sidecar: which permission each tool asks before it is forwarded.
import assert from "node:assert/strict";
import { test } from "node:test";

import { buildTools, transferPermission } from "../dist/tools.js";
import { toolCtx } from "./helpers.mjs";

const transferSchema = {
  type: "object",
  properties: { sandbox_id: { type: "string" }, local_path: { type: "string" }, remote_path: { type: "string" } },
  required: ["sandbox_id", "local_path", "remote_path"],
  additionalProperties: false,
};

const catalog = [
  { name: "sandbox_push", description: "push", inputSchema: transferSchema },
  { name: "sandbox_pull", description: "pull", inputSchema: transferSchema },
  { name: "sandbox_status", description: "status", inputSchema: { type: "object", properties: {} } },
  { name: "native_read", description: "read", inputSchema: { type: "object", properties: { filePath: { type: "string" } }, required: ["filePath"] } },
];

/** Tools whose invoke records what reached it (in order with the asks). */
function setup(mode) {
  const trail = [];
  const invoke = async (name, args) => {
    trail.push({ invoked: name, args });
    return { output: "ok" };
  };
  return { tools: buildTools(catalog, mode, invoke), trail };
}

/** A context in `/work/proj/app` (worktree `/work/proj`) that logs asks into `trail`. */
function ctxFor(trail) {
  const ctx = toolCtx("ses_t");
  ctx.directory = "/work/proj/app";
  ctx.worktree = "/work/proj";
  ctx.ask = async (a) => {
    ctx.asked.push(a);
    trail.push({ asked: a.permission });
  };
  return ctx;
}

for (const mode of ["local", "remote"]) {
  test(`${mode} mode: push asks read and pull asks edit with the local path, before forwarding`, async () => {
    const { tools, trail } = setup(mode);
    const ctx = ctxFor(trail);
    await tools.sandbox_push.execute({ sandbox_id: "sb-1", local_path: "dist/app.tar", remote_path: "/root/" }, ctx);
    assert.deepEqual(ctx.asked[0].permission, "read");
    assert.deepEqual(ctx.asked[0].patterns, ["/work/proj/app/dist/app.tar"]);
    assert.deepEqual(ctx.asked[0].always, ["*"]);
    await tools.sandbox_pull.execute({ sandbox_id: "sb-1", local_path: "out/report.txt", remote_path: "/root/r.txt" }, ctx);
    assert.deepEqual(ctx.asked[1].permission, "edit");
    assert.deepEqual(ctx.asked[1].patterns, ["app/out/report.txt"], "edit patterns are worktree-relative, as OpenCode's edit spells them");
    assert.deepEqual(trail.map((t) => t.asked ?? t.invoked), ["read", "sandbox_push", "edit", "sandbox_pull"]);
    await tools.sandbox_status.execute({}, ctx);
    assert.equal(ctx.asked.length, 2, "other sandbox tools do not ask");
  });

  test(`${mode} mode: a denied push or pull never reaches cos`, async () => {
    const { tools, trail } = setup(mode);
    const ctx = toolCtx("ses_t");
    ctx.ask = async (a) => {
      throw new Error(`permission ${a.permission} denied for ${a.patterns[0]}`);
    };
    await assert.rejects(tools.sandbox_push.execute({ sandbox_id: "sb-1", local_path: "/home/me/.ssh/id_ed25519", remote_path: "/root/k" }, ctx), /permission read denied for \/home\/me\/\.ssh\/id_ed25519/);
    await assert.rejects(tools.sandbox_pull.execute({ sandbox_id: "sb-1", local_path: "/home/me/.bashrc", remote_path: "/root/x" }, ctx), /permission edit denied/);
    assert.deepEqual(trail, []);
  });
}

test("transfer patterns: absolute paths, paths outside the worktree, other tools", () => {
  const where = { directory: "/work/proj/app", worktree: "/work/proj" };
  assert.deepEqual(transferPermission("sandbox_push", { local_path: "/etc/hosts" }, where).patterns, ["/etc/hosts"]);
  assert.deepEqual(transferPermission("sandbox_push", { local_path: "../x" }, where).patterns, ["/work/proj/x"]);
  assert.deepEqual(transferPermission("sandbox_pull", { local_path: "/work/proj/a/b.txt" }, where).patterns, ["a/b.txt"]);
  assert.deepEqual(transferPermission("sandbox_pull", { local_path: "/home/me/.bashrc" }, where).patterns, ["../../home/me/.bashrc"]);
  assert.deepEqual(transferPermission("sandbox_pull", { local_path: "." }, { directory: "/w", worktree: "/w" }).patterns, ["."]);
  assert.equal(transferPermission("sandbox_exec", { local_path: "x" }, where), undefined);
});
