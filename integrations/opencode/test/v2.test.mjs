// The V2 entry against the fake cos: routing of `shell` and `patch`, skills from the host's
// list, session deletion through the event stream, the RPC handlers and host storage.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { setup } from "../dist/v2.js";
import { CreateOS } from "../dist/rpc.js";
import { alive, events, fakeEnv, waitFor } from "./helpers.mjs";

/** An async iterable whose events the test pushes. */
function eventStream() {
  const queue = [];
  let wake;
  let ended = false;
  return {
    push(e) {
      queue.push(e);
      wake?.();
    },
    subscribed: [],
    subscribe(type) {
      this.subscribed.push(type);
      return {
        [Symbol.asyncIterator]() {
          return {
            async next() {
              while (queue.length === 0 && !ended) await new Promise((r) => (wake = r));
              if (queue.length === 0) return { done: true, value: undefined };
              return { done: false, value: queue.shift() };
            },
            async return() {
              ended = true;
              wake?.();
              return { done: true, value: undefined };
            },
          };
        },
      };
    },
  };
}

/** A V2 context recording what the plugin registers. */
function v2Context({ options = {}, skills, storage, sessions = { ses_v2: "/tmp" } } = {}) {
  const rec = { added: [], updated: new Map(), commands: [], hooks: {}, synthetic: [], rpc: [] };
  const native = (id) => ({ name: id, output: { type: "object" }, execute: async () => `local ${id}!` });
  const events = eventStream();
  const ctx = {
    options,
    location: { directory: "/tmp" },
    tool: {
      transform: (cb) =>
        cb({
          namespace: () => {},
          add: (info) => rec.added.push(info),
          update: (id, mutate) => {
            const info = native(id);
            mutate(info);
            rec.updated.set(id, info);
          },
        }),
    },
    command: { transform: (cb) => cb({ add: (c) => rec.commands.push(c) }) },
    session: {
      hook: (name, cb) => {
        rec.hooks[name] = cb;
      },
      synthetic: async (m) => rec.synthetic.push(m),
      get: async ({ sessionID }) => (sessions[sessionID] ? { id: sessionID, location: { directory: sessions[sessionID] } } : undefined),
    },
    event: events,
    rpc: { register: (contract, handlers) => rec.rpc.push({ contract, handlers }) },
  };
  if (skills) ctx.skill = { list: async () => skills };
  if (storage) ctx.storage = storage;
  return { ctx, rec, events };
}

/** Run V2 setup with the fake cos. */
async function start(spec = {}, extraEnv = {}) {
  const { log, env } = fakeEnv(extraEnv);
  const v = v2Context(spec);
  const saved = process.env;
  process.env = env;
  try {
    v.cleanup = await setup(v.ctx);
  } finally {
    process.env = saved;
  }
  return { ...v, log };
}

function cosOptionsOf(log) {
  const startEv = events(log).find((e) => e.event === "start");
  return JSON.parse(startEv.argv[startEv.argv.indexOf("--options") + 1]);
}

test("V2 remote mode routes shell and patch as well as bash and apply_patch", async () => {
  const { rec, cleanup, log } = await start({ options: { mode: "remote" } });
  try {
    for (const id of ["shell", "bash", "patch", "apply_patch", "read", "write", "edit", "glob", "grep"]) {
      assert.ok(rec.updated.has(id), `${id} is routed`);
      assert.equal(rec.updated.get(id).output, undefined, `${id}: native output schema removed`);
    }
    const shell = await rec.updated.get("shell").execute({ command: "uname -a", cwd: "/work/x" }, { sessionID: "ses_v2" });
    assert.deepEqual(JSON.parse(shell.content), { routed: "native_bash", args: { command: "uname -a", workdir: "/work/x" }, session: "ses_v2" });
    assert.equal(shell.metadata.sandboxId, "sb-fake");
    const patch = await rec.updated.get("patch").execute({ patchText: "*** Begin Patch\n*** End Patch" }, { sessionID: "ses_v2" });
    assert.equal(JSON.parse(patch.content).routed, "native_apply_patch");
    const bash = await rec.updated.get("bash").execute({ command: "id", workdir: "/w" }, { sessionID: "ses_v2" });
    assert.deepEqual(JSON.parse(bash.content).args, { command: "id", workdir: "/w" }, "workdir is left alone");
    const ap = await rec.updated.get("apply_patch").execute({ patchText: "x" }, { sessionID: "ses_v2" });
    assert.equal(JSON.parse(ap.content).routed, "native_apply_patch");
    const routed = events(log).filter((e) => e.event === "call" && e.name.startsWith("native_")).map((e) => e.name);
    assert.deepEqual(routed, ["native_bash", "native_apply_patch", "native_bash", "native_apply_patch"]);
  } finally {
    await cleanup();
  }
});

test("V2 local mode routes nothing: native tools keep their executors", async () => {
  const { rec, cleanup } = await start({ options: { mode: "local" } });
  try {
    assert.equal(rec.updated.size, 0);
    assert.ok(rec.added.some((t) => t.name === "exec" || t.name === "echo"));
  } finally {
    await cleanup();
  }
});

test("V2 passes the host's skill bundles to cos mcp, skipping virtual ones and confining paths", async () => {
  const root = mkdtempSync(join(tmpdir(), "v2-skills-"));
  const lint = join(root, "lint");
  mkdirSync(lint);
  writeFileSync(join(lint, "SKILL.md"), "---\nname: lint\ndescription: x\n---\n");
  const noFile = join(root, "empty");
  mkdirSync(noFile);
  const skills = [
    { name: "lint", location: join(lint, "SKILL.md") },
    { name: "builtin", location: "builtin://using-opencode" },
    { name: "virtual", content: "no bundle" },
    { name: "claimed", location: join(noFile, "SKILL.md") },
    { name: "rootish", path: "/SKILL.md" },
  ];
  const { cleanup, log } = await start({ skills, options: { skillDirs: [] } });
  try {
    assert.deepEqual(cosOptionsOf(log).skillDirs, [lint]);
  } finally {
    await cleanup();
  }
  const off = await start({ skills, options: { syncSkills: false } });
  try {
    assert.equal(cosOptionsOf(off.log).skillDirs, undefined, "syncSkills: false passes none");
  } finally {
    await off.cleanup();
  }
});

test("V2: deleting a session releases that session's sandbox through cos mcp", async () => {
  const { events: stream, cleanup, log } = await start();
  try {
    assert.deepEqual(stream.subscribed, ["session.deleted"]);
    stream.push({ type: "session.deleted", data: { sessionID: "ses_gone", info: { id: "ses_gone" } } });
    await waitFor(() => events(log).some((e) => e.name === "sandbox_release"), "the release");
    const rel = events(log).filter((e) => e.name === "sandbox_release");
    assert.deepEqual(rel.map((e) => [e.meta["createos/session"], e.args]), [["ses_gone", {}]], "a destroying release of that session only");
    stream.push({ type: "session.deleted", properties: { sessionID: "ses_two", info: { id: "ses_two" } } });
    await waitFor(() => events(log).filter((e) => e.name === "sandbox_release").length === 2, "the second release");
    assert.equal(events(log).filter((e) => e.name === "sandbox_release")[1].meta["createos/session"], "ses_two");
  } finally {
    await cleanup();
  }
  const pid = events(log).find((e) => e.event === "start").pid;
  await waitFor(() => !alive(pid), "cos to exit after cleanup");
});

test("V2 registers the typed RPC contract; its handlers check the session's location", async () => {
  const { rec, cleanup, log } = await start({ sessions: { ses_v2: "/tmp", ses_other: "/elsewhere" } }, { FAKE_COS_BOUND: "sb-bound" });
  try {
    assert.equal(rec.rpc.length, 1);
    assert.equal(rec.rpc[0].contract, CreateOS);
    const h = rec.rpc[0].handlers;
    assert.deepEqual(Object.keys(h).sort(), ["binding", "release", "status"]);
    const status = await h.status({ sessionID: "ses_v2" }, {});
    assert.deepEqual(CreateOS.methods.status.output.parse(status), status, "status matches its declared schema");
    assert.equal(status.sandbox, "sb-bound");
    assert.equal(status.mode, "local");
    const binding = await h.binding({ sessionID: "ses_v2" }, {});
    assert.deepEqual(binding, { sessionID: "ses_v2", sandbox: "sb-bound", stored: null, owned: true, host: null });
    const made = [];
    const hctx = { error: (type, message, data) => (made.push({ type, message, data }), new Error(`${type}: ${message}`)) };
    await assert.rejects(h.status({ sessionID: "ses_missing" }, hctx), /session_unavailable/);
    await assert.rejects(h.binding({ sessionID: "ses_other" }, hctx), /location_mismatch/);
    await assert.rejects(h.release({ sessionID: "ses_other", destroy: true }, hctx), /location_mismatch/);
    assert.deepEqual(made.map((m) => [m.type, m.data]), [
      ["session_unavailable", { sessionID: "ses_missing" }],
      ["location_mismatch", { sessionID: "ses_other" }],
      ["location_mismatch", { sessionID: "ses_other" }],
    ]);
    assert.ok(!events(log).some((e) => e.name === "sandbox_release"), "refused before anything reached cos");
    const released = await h.release({ sessionID: "ses_v2", destroy: false }, hctx);
    assert.deepEqual(CreateOS.methods.release.output.parse(released), { released: true, sandbox: "sb-fake", destroyed: false });
    assert.deepEqual(events(log).find((e) => e.name === "sandbox_release").args, { forget: true }, "destroy: false only forgets");
  } finally {
    await cleanup();
  }
});

test("V2 records bindings in the host's storage and drops them on release and deletion", async () => {
  const store = new Map();
  const storage = { get: async (k) => store.get(k), set: async (k, v) => void store.set(k, v), remove: async (k) => void store.delete(k) };
  const { rec, events: stream, cleanup, log } = await start({ options: { mode: "remote" }, storage }, { FAKE_COS_BOUND: "sb-fake" });
  try {
    await rec.updated.get("shell").execute({ command: "true" }, { sessionID: "ses_v2" });
    await waitFor(() => store.size === 1, "the binding to be stored");
    const [key, value] = [...store.entries()][0];
    assert.match(key, /^createos\/v1\/[0-9a-f]{64}\/ses_v2$/, "scoped by location and session");
    assert.deepEqual(value, { sandbox: "sb-fake", owned: true });
    const binding = await rec.rpc[0].handlers.binding({ sessionID: "ses_v2" }, {});
    assert.equal(binding.host, "sb-fake");
    // Another call on the same sandbox writes nothing new.
    const statusCalls = () => events(log).filter((e) => e.name === "sandbox_status").length;
    const before = statusCalls();
    await rec.updated.get("read").execute({ filePath: "a" }, { sessionID: "ses_v2" });
    assert.equal(statusCalls(), before, "no status round trip when the sandbox is the recorded one");
    stream.push({ type: "session.deleted", properties: { info: { id: "ses_v2" } } });
    await waitFor(() => store.size === 0, "the stored binding to go with the session");
  } finally {
    await cleanup();
  }
});

test("V2: a deleted session whose binding only the host still holds gets that sandbox destroyed", async () => {
  const store = new Map();
  const storage = { get: async (k) => store.get(k), set: async (k, v) => void store.set(k, v), remove: async (k) => void store.delete(k) };
  const { events: stream, cleanup, log } = await start({ storage }, { FAKE_COS_RELEASE: "none" });
  try {
    // cos forgot the binding (lost state directory); the host storage kept it.
    const { createHash } = await import("node:crypto");
    store.set(`createos/v1/${createHash("sha256").update("/tmp").digest("hex")}/ses_lost`, { sandbox: "sb-lost", owned: true });
    stream.push({ type: "session.deleted", properties: { info: { id: "ses_lost" } } });
    await waitFor(() => store.size === 0, "the stored binding to be dropped");
    const calls = events(log).filter((e) => e.event === "call").map((e) => [e.name, e.args]);
    assert.deepEqual(calls, [
      ["sandbox_release", {}],
      ["sandbox_destroy", { sandbox_id: "sb-lost" }],
    ]);
  } finally {
    await cleanup();
  }
});
