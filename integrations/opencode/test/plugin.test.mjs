import assert from "node:assert/strict";
import { test } from "node:test";

import plugin, { CreateOSPlugin, setup } from "../dist/index.js";
import { alive, classic, events, fakeEnv, toolCtx, waitFor } from "./helpers.mjs";

test("the default export carries both entries under one id", () => {
  assert.equal(plugin.id, "createos.sandbox");
  assert.equal(plugin.server, CreateOSPlugin);
  assert.equal(plugin.setup, setup);
});

test("local mode: the catalog becomes tools, native tools stay local, cos gets project and options", async () => {
  const { hooks, log } = await classic({ shape: "s-4vcpu-8gb" });
  try {
    assert.ok(hooks.tool.sandbox_echo && hooks.tool.sandbox_status);
    assert.equal(hooks.tool.bash, undefined, "no routing in local mode");
    const start = events(log).find((e) => e.event === "start");
    assert.deepEqual(start.argv.slice(0, 3), ["mcp", "--project", "/tmp"]);
    const opts = JSON.parse(start.argv[start.argv.indexOf("--options") + 1]);
    assert.equal(opts.shape, "s-4vcpu-8gb");
    assert.equal(opts.mode, "local");
    assert.equal(opts.bin, undefined);
    const out = await hooks.tool.sandbox_echo.execute({ text: "x", n: 2 }, toolCtx("ses_1"));
    const body = JSON.parse(out.output);
    assert.equal(body.meta["createos/session"], "ses_1");
    assert.deepEqual(body.args, { text: "x", n: 2 });
    assert.equal(out.metadata.sandboxId, "sb-fake");
  } finally {
    await hooks.dispose();
  }
});

test("tool args are zod shapes that enforce the MCP schema", async () => {
  const { hooks } = await classic({});
  try {
    const { z } = await import("zod");
    const args = z.object(hooks.tool.sandbox_echo.args);
    assert.equal(args.safeParse({ text: "ok" }).success, true);
    assert.equal(args.safeParse({ n: 2 }).success, false);
    assert.equal(args.safeParse({ text: "ok", n: 9 }).success, false);
  } finally {
    await hooks.dispose();
  }
});

test("errors, images and aborts are translated", async () => {
  const { hooks, log } = await classic({});
  try {
    await assert.rejects(hooks.tool.sandbox_fail.execute({}, toolCtx("s")), /sandbox is not running/);
    const img = await hooks.tool.sandbox_image.execute({}, toolCtx("s"));
    assert.equal(img.output, "screen");
    assert.deepEqual(img.attachments, [{ type: "file", mime: "image/png", url: "data:image/png;base64,iVBORw0KGgo=" }]);
    const ctl = new AbortController();
    const running = hooks.tool.sandbox_slow.execute({}, toolCtx("s", ctl.signal));
    await waitFor(() => events(log).some((e) => e.name === "sandbox_slow"), "the slow call");
    ctl.abort();
    await assert.rejects(running);
    await waitFor(() => events(log).some((e) => e.event === "cancelled"), "the MCP cancellation");
    const ctx = toolCtx("s");
    await hooks.tool.sandbox_progress.execute({}, ctx);
    assert.equal(ctx.seen[0].title, "half");
  } finally {
    await hooks.dispose();
  }
});

test("remote mode registers the routed tools under OpenCode's ids and forwards them unchanged", async () => {
  const { hooks, log } = await classic({ mode: "remote" });
  try {
    for (const id of ["bash", "read", "write", "edit", "apply_patch", "glob", "grep"]) assert.ok(hooks.tool[id], id);
    assert.equal(hooks.tool.native_bash, undefined, "not under the MCP name");
    const ctx = toolCtx("ses_r");
    const out = await hooks.tool.bash.execute({ command: "uname -a" }, ctx);
    assert.deepEqual(JSON.parse(out.output), { routed: "native_bash", args: { command: "uname -a" }, session: "ses_r" });
    assert.deepEqual(ctx.asked[0].permission, "bash", "the user's bash permission rules still apply");
    assert.deepEqual(ctx.asked[0].patterns, ["uname -a"]);
    const denied = toolCtx("ses_r");
    denied.ask = async () => {
      throw new Error("permission denied by rule");
    };
    await assert.rejects(hooks.tool.write.execute({ filePath: "a.txt" }, denied), /permission denied/);
    assert.ok(!events(log).some((e) => e.name === "native_write"), "a denied call never reaches cos");
    const local = toolCtx("ses_r");
    await hooks.tool.sandbox_echo.execute({ text: "x" }, local);
    assert.equal(local.asked.length, 0, "sandbox tools do not ask");
  } finally {
    await hooks.dispose();
  }
});

test("remote mode with a cos that serves no routed tools is refused at load", async () => {
  await assert.rejects(classic({ mode: "remote" }, { FAKE_COS_NO_NATIVE: "1" }), /remote mode needs .* native_bash, native_read/);
});

test("bad options are refused before cos is started", async () => {
  const { log, env } = fakeEnv();
  const saved = process.env;
  process.env = env;
  try {
    await assert.rejects(CreateOSPlugin({ directory: "/tmp", client: {} }, { mode: "remote", token: "secret" }), /unknown option "token"/);
  } finally {
    process.env = saved;
  }
  assert.equal(events(log).length, 0, "nothing spawned");
});

test("a missing cos binary names the option to set", async () => {
  await assert.rejects(classic({ bin: "/nonexistent/cos" }, { COS_BIN: "" }), /could not start `\/nonexistent\/cos mcp` \(is .* installed\? set the plugin option "bin" or COS_BIN/);
});

test("commands are added to the config and run in the plugin", async () => {
  const { hooks, log } = await classic({});
  try {
    const cfg = { command: { mine: { template: "x" } } };
    await hooks.config(cfg);
    assert.ok(cfg.command.sandbox && cfg.command["sandbox-release"] && cfg.command.mine);
    const out = { parts: [{ type: "text", text: "Run the CreateOS /sandbox command." }] };
    await hooks["command.execute.before"]({ command: "sandbox", sessionID: "ses_c", arguments: "" }, out);
    assert.equal(out.parts.length, 1);
    assert.match(out.parts[0].text, /already been executed/);
    assert.match(out.parts[0].text, /"session": "ses_c"/);
    const rel = { parts: [{ type: "text", text: "x" }] };
    await hooks["command.execute.before"]({ command: "sandbox-release", sessionID: "ses_c", arguments: "forget" }, rel);
    assert.match(rel.parts[0].text, /Forgot this session's sandbox binding[\s\S]*"forget":true/);
    const bad = { parts: [{ type: "text", text: "x" }] };
    await hooks["command.execute.before"]({ command: "sandbox-release", sessionID: "ses_c", arguments: "now" }, bad);
    assert.match(bad.parts[0].text, /usage: \/sandbox-release \[forget\]/);
    const other = { parts: [{ type: "text", text: "untouched" }] };
    await hooks["command.execute.before"]({ command: "mine", sessionID: "ses_c", arguments: "" }, other);
    assert.equal(other.parts[0].text, "untouched");
    const calls = events(log).filter((e) => e.event === "call").map((e) => [e.name, e.meta["createos/session"]]);
    assert.deepEqual(calls, [["sandbox_status", "ses_c"], ["sandbox_release", "ses_c"]]);
  } finally {
    await hooks.dispose();
  }
});

test("every turn gets the context text for its mode", async () => {
  for (const mode of ["local", "remote"]) {
    const { hooks } = await classic({ mode, cwd: "/srv/app" });
    try {
      const out = { system: [] };
      await hooks["experimental.chat.system.transform"]({ sessionID: "ses_t", model: {} }, out);
      assert.equal(out.system.length, 1);
      assert.match(out.system[0], /CreateOS sandboxes/);
      if (mode === "remote") assert.match(out.system[0], /Remote mode: `bash`.*\/srv\/app/s);
      else assert.match(out.system[0], /Local mode/);
    } finally {
      await hooks.dispose();
    }
  }
});

test("dispose stops cos mcp", async () => {
  const { hooks, log } = await classic({});
  const pid = events(log).find((e) => e.event === "start").pid;
  assert.ok(alive(pid));
  await hooks.dispose();
  await waitFor(() => !alive(pid), "cos to exit");
  assert.ok(events(log).some((e) => e.event === "sigterm"), "cos mcp was asked to shut down");
});

test("V2 setup registers tools, routes, the context hook and commands; cleanup stops cos", async () => {
  const { log, env } = fakeEnv();
  const added = [];
  const updated = new Map();
  const commands = [];
  const hooks = {};
  const synthetic = [];
  const native = () => ({ name: "bash", output: { type: "object" }, execute: async () => "local!" });
  const ctx = {
    options: { mode: "remote" },
    location: { directory: "/tmp" },
    tool: {
      transform: (cb) =>
        cb({
          namespace: () => {},
          add: (info) => added.push(info),
          update: (id, mutate) => {
            const info = native();
            mutate(info);
            updated.set(id, info);
          },
        }),
    },
    command: { transform: (cb) => cb({ add: (c) => commands.push(c) }) },
    session: {
      hook: (name, cb) => {
        hooks[name] = cb;
      },
      synthetic: async (m) => synthetic.push(m),
    },
  };
  const saved = process.env;
  process.env = env;
  let cleanup;
  try {
    cleanup = await setup(ctx);
  } finally {
    process.env = saved;
  }
  try {
    assert.ok(added.some((t) => t.name === "echo" && t.options.namespace === "sandbox"));
    assert.equal(added.find((t) => t.name === "echo").input.required[0], "text", "JSON Schema passed as is");
    const bash = updated.get("bash");
    assert.equal(bash.output, undefined, "native output schema removed");
    const res = await bash.execute({ command: "id" }, { sessionID: "ses_v2" });
    assert.deepEqual(JSON.parse(res.content), { routed: "native_bash", args: { command: "id" }, session: "ses_v2" });
    assert.deepEqual(Object.keys(hooks), ["context"]);
    const event = { sessionID: "ses_v2", system: [] };
    await hooks.context(event);
    assert.match(event.system[0], /Remote mode/);
    assert.deepEqual(commands.map((c) => c.name), ["sandbox", "sandbox-release"]);
    await commands[0].execute({ sessionID: "ses_v2", prompt: "" });
    assert.match(synthetic[0].text, /"session": "ses_v2"/);
    assert.equal(synthetic[0].resume, false);
  } finally {
    await cleanup();
  }
  const pid = events(log).find((e) => e.event === "start").pid;
  await waitFor(() => !alive(pid), "cos to exit after cleanup");
});

test("V2 setup refuses a context without the domains it needs", async () => {
  await assert.rejects(setup({ options: {} }), /lacks tool, command, session/);
});
