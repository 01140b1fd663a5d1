// Error classes, retries and Retry-After through the TypeScript SDK.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import {
  CreateosSandboxAuthError,
  CreateosSandboxNotFoundError,
  CreateosSandboxRateLimitError,
  CreateosSandboxValidationError,
} from "@nodeops-createos/sandbox";
import {
  addFault,
  clearFaults,
  expectApiError,
  mockApi,
  newClient,
  SandboxTracker,
  smallestShape,
  stats,
} from "./_support.mjs";

const client = newClient();
const tracker = new SandboxTracker(client);
let shape;

before(async () => {
  await clearFaults();
  shape = await smallestShape(client);
});

after(async () => {
  await clearFaults();
  await tracker.destroyAll();
});

test("unknown sandbox id → CreateosSandboxNotFoundError (404)", async () => {
  const err = await expectApiError(
    client.getSandbox("sb-00000000000000000000000000"),
    CreateosSandboxNotFoundError,
    404,
    { sandbox: "sandbox not found" },
  );
  assert.equal(err.resourceId, "sb-00000000000000000000000000");
  assert.equal(err.method, "GET");
});

test("unknown shape → CreateosSandboxValidationError (400)", async () => {
  await expectApiError(client.createSandbox({ shape: "s-bad" }), CreateosSandboxValidationError, 400, {
    shape: "unknown shape: s-bad",
  });
});

test("invalid env name and auto-pause range → CreateosSandboxValidationError (400)", async () => {
  await expectApiError(
    client.createSandbox({ shape: shape.id, envs: { "1X": "v" } }),
    CreateosSandboxValidationError,
    400,
  );
  await expectApiError(
    client.createSandbox({ shape: shape.id, auto_pause_after_seconds: 10 }),
    CreateosSandboxValidationError,
    400,
    { auto_pause_after_seconds: "must be between 60 and 86400" },
  );
});

test("sandbox name clash is refused", async () => {
  const name = `ts-clash-${Date.now().toString(36)}`;
  await tracker.create({ shape: shape.id, name });
  await expectApiError(client.createSandbox({ shape: shape.id, name }), CreateosSandboxValidationError, 409, {
    name: "name already in use",
  });
});

test("wrong API key → CreateosSandboxAuthError (401); public catalog still answers", async () => {
  const wrong = newClient({ apiKey: "skp_not_a_real_key" });
  await expectApiError(wrong.whoami(), CreateosSandboxAuthError, 401, { auth: "invalid api key" });
  await expectApiError(wrong.listSandboxes(), CreateosSandboxAuthError, 401);
  assert.ok((await wrong.listShapes()).length > 0);
  assert.deepEqual(await wrong.healthz(), { up: true });
});

test("another tenant's sandbox is NotFound, never Forbidden", async () => {
  const mine = await tracker.create({ shape: shape.id });
  const tenant = await mockApi("POST", "/tenants");
  const other = newClient({ apiKey: tenant.api_key });
  const me = await client.whoami();
  assert.notEqual((await other.whoami()).user_id, me.user_id);
  await expectApiError(other.getSandbox(mine.id), CreateosSandboxNotFoundError, 404);
  assert.ok(!(await other.listSandboxes()).some((s) => s.id === mine.id));
});

test("429 with Retry-After → CreateosSandboxRateLimitError when retries are off", async () => {
  await addFault("GET /v1/whoami status=429 retry_after=7 count=1");
  const before = await stats();
  const err = await expectApiError(client.whoami({ retry: false }), CreateosSandboxRateLimitError, 429, {
    rate: "rate limited",
  });
  assert.equal(err.retryAfterSeconds, 7);
  assert.equal(err.response.headers.get("retry-after"), "7");
  const afterStats = await stats();
  assert.equal((afterStats.handled.whoami ?? 0) - (before.handled.whoami ?? 0), 0, "the handler ran");
  assert.equal(afterStats.faults_injected - before.faults_injected, 1);
  // count=1: the rule is spent, the next call goes through.
  assert.ok((await client.whoami({ retry: false })).user_id);
});

test("the SDK waits Retry-After and retries a 429 on its own", async () => {
  const retries = [];
  const observed = newClient({ hooks: { onRetry: (ctx) => retries.push(ctx) } });
  await addFault("GET /v1/whoami status=429 retry_after=1 count=1");
  const before = await stats();
  const me = await observed.whoami();
  assert.ok(me.user_id);
  assert.equal(retries.length, 1);
  assert.equal(retries[0].status, 429);
  assert.equal(retries[0].reason, "rate-limit");
  assert.equal(retries[0].delayMs, 1000);
  const afterStats = await stats();
  assert.equal(afterStats.requests.whoami - (before.requests.whoami ?? 0), 2);
  assert.equal(afterStats.handled.whoami - (before.handled.whoami ?? 0), 1);
});

test("persistent 429 exhausts the SDK's retries", async () => {
  await addFault("GET /v1/whoami status=429 retry_after=0 count=3");
  const before = await stats();
  const err = await expectApiError(client.whoami(), CreateosSandboxRateLimitError, 429);
  assert.equal(err.retryAfterSeconds, 0);
  const afterStats = await stats();
  assert.equal(afterStats.requests.whoami - (before.requests.whoami ?? 0), 3, "1 try + 2 retries");
});

test("a 503 on POST exec is retried and the command runs exactly once", async () => {
  const sandbox = await tracker.create({ shape: shape.id });
  const retries = [];
  const observed = newClient({ hooks: { onRetry: (ctx) => retries.push(ctx) } });
  const handle = await observed.getSandbox(sandbox.id);
  await addFault(`POST /v1/sandboxes/${sandbox.id}/exec status=503 count=1`);
  const before = await stats();
  const out = await handle.runCommand("sh", ["-c", "echo ran >> /root/runs.log; cat /root/runs.log"]);
  assert.equal(out.result.stdout, "ran\n");
  assert.equal(retries.length, 1);
  assert.equal(retries[0].status, 503);
  const afterStats = await stats();
  assert.equal(afterStats.requests.exec - (before.requests.exec ?? 0), 2);
  assert.equal(afterStats.handled.exec - (before.handled.exec ?? 0), 1);
});
