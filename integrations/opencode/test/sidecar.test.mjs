import assert from "node:assert/strict";
import { test } from "node:test";

import { Sidecar, SidecarExitedError } from "../dist/sidecar.js";
import { FAKE_COS, alive, events, fakeEnv, waitFor } from "./helpers.mjs";

function sidecar(extraEnv = {}, options = {}) {
  const { log, env } = fakeEnv(extraEnv);
  const sc = new Sidecar({ command: FAKE_COS, args: ["mcp", "--project", "/tmp", "--options", JSON.stringify(options)], env });
  return { sc, log };
}

test("start reads the whole catalog across tools/list pages", async () => {
  const { sc, log } = sidecar();
  try {
    const tools = await sc.start();
    assert.deepEqual(tools.map((t) => t.name).slice(0, 5), ["sandbox_status", "sandbox_echo", "sandbox_progress", "sandbox_slow", "sandbox_fail"]);
    assert.equal(tools.length, 10);
    assert.equal(sc.instructions, "fake instructions");
    assert.ok(events(log).some((e) => e.event === "initialized"), "notifications/initialized sent");
  } finally {
    await sc.close();
  }
});

test("every call carries its session id in _meta", async () => {
  const { sc } = sidecar();
  try {
    await sc.start();
    const a = await sc.call("sandbox_echo", { text: "hi" }, { session: "ses_A" });
    const b = await sc.call("sandbox_echo", { text: "ho" }, { session: "ses_B" });
    assert.equal(JSON.parse(a.content[0].text).meta["createos/session"], "ses_A");
    assert.equal(JSON.parse(b.content[0].text).meta["createos/session"], "ses_B");
    assert.deepEqual(JSON.parse(b.content[0].text).args, { text: "ho" });
    assert.equal(a._meta.sandboxId, "sb-fake");
  } finally {
    await sc.close();
  }
});

test("an abort sends notifications/cancelled for that request and rejects at once", async () => {
  const { sc, log } = sidecar();
  try {
    await sc.start();
    const ctl = new AbortController();
    const pending = sc.call("sandbox_slow", {}, { session: "s", signal: ctl.signal });
    await waitFor(() => events(log).some((e) => e.event === "call" && e.name === "sandbox_slow"), "the slow call to arrive");
    const callId = events(log).find((e) => e.name === "sandbox_slow").id;
    ctl.abort();
    await assert.rejects(pending, /aborted|AbortError/);
    await waitFor(() => events(log).some((e) => e.event === "cancelled" && e.id === callId), "notifications/cancelled");
    // The child stays usable.
    const r = await sc.call("sandbox_echo", { text: "after" }, { session: "s" });
    assert.match(r.content[0].text, /after/);
  } finally {
    await sc.close();
  }
});

test("a multi-megabyte result arrives whole, and the next call still works", async () => {
  const { sc } = sidecar();
  try {
    await sc.start();
    const big = await sc.call("sandbox_big", {}, { session: "s" });
    assert.equal(big.content[0].text.length, 3 * 1024 * 1024 + 3);
    assert.ok(big.content[0].text.endsWith("END"));
    const r = await sc.call("sandbox_echo", { text: "next" }, { session: "s" });
    assert.match(r.content[0].text, /next/);
  } finally {
    await sc.close();
  }
});

test("progress notifications reach the caller", async () => {
  const { sc } = sidecar();
  try {
    await sc.start();
    const seen = [];
    const r = await sc.call("sandbox_progress", {}, { session: "s", onProgress: (p) => seen.push(p) });
    assert.equal(r.content[0].text, "done");
    assert.deepEqual(seen, [{ progress: 1, total: 2, message: "half" }, { progress: 2, total: 2, message: undefined }]);
  } finally {
    await sc.close();
  }
});

test("a dead child fails its pending call with its stderr and is restarted on the next call", async () => {
  const { sc, log } = sidecar();
  try {
    await sc.start();
    const first = sc.pid;
    await assert.rejects(sc.call("sandbox_die", {}, { session: "s" }), (err) => {
      assert.ok(err instanceof SidecarExitedError);
      assert.match(err.message, /cos mcp \(.*fake-cos\.mjs\) exited/);
      assert.match(err.message, /dying on purpose/);
      return true;
    });
    const r = await sc.call("sandbox_echo", { text: "again" }, { session: "s" });
    assert.match(r.content[0].text, /again/);
    assert.notEqual(sc.pid, first, "a new child");
    assert.equal(events(log).filter((e) => e.event === "start").length, 2);
  } finally {
    await sc.close();
  }
});

test("close asks the child to shut down cleanly (SIGTERM); calls after close are refused", async () => {
  const { sc, log } = sidecar();
  await sc.start();
  const pid = sc.pid;
  await sc.close();
  assert.ok(events(log).some((e) => e.event === "sigterm"), "cos mcp was asked to shut down");
  await waitFor(() => !alive(pid), "the child to exit");
  await assert.rejects(sc.call("sandbox_echo", { text: "x" }, { session: "s" }), /unloading/);
});

test("a child that cannot start reports its error output", async () => {
  const { sc } = sidecar({ FAKE_COS_FAIL_START: "1" });
  await assert.rejects(sc.start(), /starting cos mcp failed: .* exited; its last stderr lines:\n[\s\S]*option "shape": bad shape/);
  await sc.close();
  const missing = new Sidecar({ command: "/nonexistent/cos", args: ["mcp"] });
  await assert.rejects(missing.start(), /could not be started: spawn \/nonexistent\/cos ENOENT/);
  await missing.close();
});
