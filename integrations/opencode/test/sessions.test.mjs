// The classic entry's `event` hook: a deleted OpenCode session releases its sandbox.
import assert from "node:assert/strict";
import { test } from "node:test";

import { deletedSessionId } from "../dist/events.js";
import { classic, events, toolCtx } from "./helpers.mjs";

const releases = (log) => events(log).filter((e) => e.name === "sandbox_release").map((e) => [e.meta["createos/session"], e.args]);

test("the session-deleted event in both published shapes names the session; other events do not", () => {
  const session = { id: "ses_1", projectID: "p", directory: "/tmp", title: "t", version: "1", time: { created: 1, updated: 1 } };
  assert.equal(deletedSessionId({ type: "session.deleted", properties: { info: session } }), "ses_1");
  assert.equal(deletedSessionId({ id: "e1", type: "session.deleted", properties: { sessionID: "ses_2", info: session } }), "ses_2");
  assert.equal(deletedSessionId({ id: "e2", type: "session.deleted", data: { sessionID: "ses_3", info: session } }), "ses_3");
  assert.equal(deletedSessionId({ type: "session.updated", properties: { info: session } }), undefined);
  assert.equal(deletedSessionId({ type: "session.deleted", properties: {} }), undefined);
  assert.equal(deletedSessionId({ type: "session.deleted", properties: { info: { id: "" } } }), undefined);
  assert.equal(deletedSessionId(null), undefined);
  assert.equal(deletedSessionId("session.deleted"), undefined);
});

test("a deleted session's sandbox is destroyed through sandbox_release for that session only", async () => {
  const { hooks, log } = await classic();
  try {
    await hooks.tool.sandbox_echo.execute({ text: "x" }, toolCtx("ses_keep"));
    await hooks.event({ event: { type: "session.updated", properties: { info: { id: "ses_keep" } } } });
    await hooks.event({ event: { type: "session.idle", properties: { sessionID: "ses_keep" } } });
    assert.deepEqual(releases(log), [], "other events release nothing");
    await hooks.event({ event: { type: "session.deleted", properties: { info: { id: "ses_gone", directory: "/tmp" } } } });
    assert.deepEqual(releases(log), [["ses_gone", {}]], "one destroying release, for the deleted session");
    assert.ok(!events(log).some((e) => e.name === "sandbox_destroy"), "explicit sandboxes are never destroyed");
  } finally {
    await hooks.dispose();
  }
});

test("a release refused while the session's calls wind down is retried", async () => {
  const { hooks, log } = await classic({}, { FAKE_COS_RELEASE: "busy" });
  try {
    await hooks.event({ event: { type: "session.deleted", properties: { info: { id: "ses_busy" } } } });
    assert.deepEqual(releases(log), [["ses_busy", {}], ["ses_busy", {}], ["ses_busy", {}]]);
  } finally {
    await hooks.dispose();
  }
});

test("a sandbox already deleted elsewhere: only the binding is dropped", async () => {
  const { hooks, log } = await classic({}, { FAKE_COS_RELEASE: "gone" });
  try {
    await hooks.event({ event: { type: "session.deleted", properties: { info: { id: "ses_x" } } } });
    assert.deepEqual(releases(log), [["ses_x", {}], ["ses_x", { forget: true }]]);
  } finally {
    await hooks.dispose();
  }
});

test("a session event after unload is ignored without an error", async () => {
  const { hooks, log } = await classic();
  await hooks.dispose();
  await hooks.event({ event: { type: "session.deleted", properties: { info: { id: "ses_late" } } } });
  assert.deepEqual(releases(log), []);
});

test("unload waits for a deleted session's release still retrying", async () => {
  const { hooks, log } = await classic({}, { FAKE_COS_RELEASE: "busy" });
  const pending = hooks.event({ event: { type: "session.deleted", properties: { info: { id: "ses_exit" } } } });
  await hooks.dispose();
  assert.deepEqual(releases(log), [["ses_exit", {}], ["ses_exit", {}], ["ses_exit", {}]], "the third, accepted release ran before cos stopped");
  await pending;
});
