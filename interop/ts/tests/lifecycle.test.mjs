// Pause → wait → resume → wait, and fork of a paused sandbox, through the TypeScript SDK.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { CreateosSandboxValidationError } from "@nodeops-createos/sandbox";
import { expectApiError, newClient, SandboxTracker, smallestShape } from "./_support.mjs";

const client = newClient();
const tracker = new SandboxTracker(client);
let shape;
let sandbox;

before(async () => {
  shape = await smallestShape(client);
  sandbox = await tracker.create({ shape: shape.id, envs: { INTEROP_ROLE: "parent" } });
  await sandbox.files.upload("/root/state.txt", "before pause\n");
});

after(() => tracker.destroyAll());

test("fork of a running sandbox is refused with 409", async () => {
  await expectApiError(sandbox.fork(), CreateosSandboxValidationError, 409, {
    sandbox: "sandbox must be paused to fork",
  });
});

test("resume of a running sandbox is a no-op that keeps it running", async () => {
  await sandbox.resume();
  assert.equal(sandbox.status, "running");
});

test("pause then waitUntilPaused", async () => {
  await sandbox.pause();
  assert.ok(["pausing", "paused"].includes(sandbox.status), sandbox.status);
  assert.equal(sandbox.id, sandbox.data.id);
  await sandbox.waitUntilPaused({ timeoutMs: 30_000 });
  assert.equal(sandbox.status, "paused");
  assert.ok(sandbox.data.paused_at, "paused_at missing");
});

test("pausing a paused sandbox is accepted and stays paused", async () => {
  await sandbox.pause();
  assert.equal(sandbox.status, "paused");
});

test("exec and files on a paused sandbox are refused with 409", async () => {
  await expectApiError(sandbox.runCommand("true"), CreateosSandboxValidationError, 409, {
    sandbox: "sandbox is not running",
  });
  await expectApiError(sandbox.files.download("/root/state.txt"), CreateosSandboxValidationError, 409);
});

test("whoami counts the paused sandbox", async () => {
  const me = await client.whoami();
  assert.ok(me.stats.paused >= 1);
});

let child;

test("fork of the paused sandbox creates an independent child", async () => {
  child = tracker.add(await sandbox.fork({ envs: { INTEROP_ROLE: "child" } }));
  assert.notEqual(child.id, sandbox.id);
  assert.equal(child.data.forked_from, sandbox.id);
  assert.ok(["forking", "running"].includes(child.status), child.status);
  await child.waitUntilRunning({ timeoutMs: 30_000 });

  const copied = new TextDecoder().decode(await child.files.download("/root/state.txt"));
  assert.equal(copied, "before pause\n");
  const role = await child.runCommand("sh", ["-c", 'printf "%s" "$INTEROP_ROLE"']);
  assert.equal(role.result.stdout, "child");

  await child.files.upload("/root/state.txt", "child only\n");
  await sandbox.refresh();
  assert.equal(sandbox.status, "paused", "the parent must stay paused");
});

test("fork with start_paused leaves the child paused", async () => {
  const sleeper = tracker.add(await sandbox.fork({ start_paused: true }));
  assert.equal(sleeper.data.forked_from, sandbox.id);
  await sleeper.waitUntilPaused({ timeoutMs: 30_000 });
  assert.equal(sleeper.status, "paused");
  await sleeper.destroy();
  await sleeper.waitUntilDestroyed();
});

test("resume then waitUntilRunning restores the parent with its files", async () => {
  await sandbox.resume();
  assert.ok(["resuming", "running"].includes(sandbox.status), sandbox.status);
  await sandbox.waitUntilRunning({ timeoutMs: 30_000 });
  assert.equal(sandbox.status, "running");
  assert.ok(sandbox.data.last_resumed_at, "last_resumed_at missing");
  const text = new TextDecoder().decode(await sandbox.files.download("/root/state.txt"));
  assert.equal(text, "before pause\n", "the child's write leaked into the parent");
  const role = await sandbox.runCommand("sh", ["-c", 'printf "%s" "$INTEROP_ROLE"']);
  assert.equal(role.result.stdout, "parent");
});

test("pause → resume round trip a second time", async () => {
  await sandbox.pause();
  await sandbox.waitUntilPaused({ timeoutMs: 30_000 });
  await sandbox.resume();
  await sandbox.waitUntilRunning({ timeoutMs: 30_000 });
  const out = await sandbox.runCommand("echo", ["alive"]);
  assert.equal(out.result.stdout, "alive\n");
});
