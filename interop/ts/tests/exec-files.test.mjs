// Exec (buffered and streamed), files, egress and bandwidth through the TypeScript SDK.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import {
  CreateosSandboxError,
  CreateosSandboxNotFoundError,
  CreateosSandboxValidationError,
} from "@nodeops-createos/sandbox";
import { expectApiError, newClient, SandboxTracker, smallestShape } from "./_support.mjs";

const client = newClient();
const tracker = new SandboxTracker(client);
let sandbox;

before(async () => {
  const shape = await smallestShape(client);
  sandbox = await tracker.create({ shape: shape.id, envs: { INTEROP_FOO: "bar baz" } });
});

after(() => tracker.destroyAll());

test("runCommand returns stdout, stderr, exit code and timing", async () => {
  const out = await sandbox.runCommand("sh", ["-c", "echo out; echo err >&2; exit 3"]);
  assert.equal(out.result.stdout, "out\n");
  assert.equal(out.result.stderr, "err\n");
  assert.equal(out.result.exit_code, 3);
  assert.equal(out.result.error, undefined);
  assert.equal(typeof out.exec_ms, "number");
  assert.ok(out.exec_ms >= 0);
});

test("runCommand passes argv verbatim (no shell) and exports the sandbox envs", async () => {
  const argv = await sandbox.runCommand("printf", ["%s|", "a b", "$HOME", "*"]);
  assert.equal(argv.result.stdout, "a b|$HOME|*|");
  const env = await sandbox.runCommand("sh", ["-c", 'printf "%s" "$INTEROP_FOO"']);
  assert.equal(env.result.stdout, "bar baz");
});

test("runCommand of a missing program reports a failure, not an HTTP error", async () => {
  const out = await sandbox.runCommand("/definitely/not/here", []);
  assert.ok(out.result.exit_code !== 0 || out.result.error, JSON.stringify(out.result));
});

test("sh runs a bash script and throws on a non-zero exit", async () => {
  const ok = await sandbox.sh("echo one | tr a-z A-Z");
  assert.equal(ok.result.stdout, "ONE\n");
  await assert.rejects(sandbox.sh("echo nope >&2; exit 7", { label: "probe" }), (err) => {
    assert.ok(err instanceof CreateosSandboxError);
    assert.match(err.message, /probe: command exited 7/);
    assert.match(err.message, /nope/);
    return true;
  });
});

test("streamCommand yields stdout, stderr and exit events in order", async () => {
  const events = [];
  for await (const event of sandbox.streamCommand("sh", [
    "-c",
    "echo first; sleep 0.2; echo second >&2; sleep 0.2; echo third; exit 4",
  ])) {
    events.push(event);
  }
  const data = events.filter((e) => e.type !== "heartbeat");
  const stdout = data.filter((e) => e.type === "stdout").map((e) => e.data).join("");
  const stderr = data.filter((e) => e.type === "stderr").map((e) => e.data).join("");
  assert.equal(stdout, "first\nthird\n");
  assert.equal(stderr, "second\n");
  assert.deepEqual(data.at(-1), { type: "exit", exitCode: 4 });
  assert.equal(data.filter((e) => e.type === "exit").length, 1);
  const firstOut = data.findIndex((e) => e.type === "stdout");
  const firstErr = data.findIndex((e) => e.type === "stderr");
  assert.ok(firstOut < firstErr, "stdout chunk before the stderr chunk");
});

test("streamCommand can stop early without hanging the sandbox", async () => {
  for await (const event of sandbox.streamCommand("sh", ["-c", "echo tick; sleep 5"])) {
    if (event.type === "stdout") break;
  }
  const after = await sandbox.runCommand("true", []);
  assert.equal(after.result.exit_code, 0);
});

test("files upload/download round-trips binary data", async () => {
  const bytes = new Uint8Array(4096);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7 + 3) % 256;
  await sandbox.files.upload("/root/interop/nested/blob.bin", bytes);
  const back = new Uint8Array(await sandbox.files.download("/root/interop/nested/blob.bin"));
  assert.deepEqual(back, bytes);

  await sandbox.files.upload("/root/interop/hello.txt", "hello from ts\n");
  const cat = await sandbox.runCommand("cat", ["/root/interop/hello.txt"]);
  assert.equal(cat.result.stdout, "hello from ts\n");

  await sandbox.files.upload("/root/interop/hello.txt", "overwritten");
  const text = new TextDecoder().decode(await sandbox.files.download("/root/interop/hello.txt"));
  assert.equal(text, "overwritten");
});

test("a file written by exec downloads unchanged", async () => {
  await sandbox.sh("printf 'made by exec' > /tmp/interop-exec.txt");
  const text = new TextDecoder().decode(await sandbox.files.download("/tmp/interop-exec.txt"));
  assert.equal(text, "made by exec");
});

test("files errors: missing file 404, relative path 400", async () => {
  await expectApiError(
    sandbox.files.download("/root/interop/missing.txt"),
    CreateosSandboxNotFoundError,
    404,
    { path: "file not found" },
  );
  await expectApiError(sandbox.files.upload("relative/x.txt", "x"), CreateosSandboxValidationError, 400);
});

test("egress get/set replaces the allow-list; null allows all", async () => {
  assert.deepEqual(await sandbox.getEgress(), { id: sandbox.id, egress: [] });
  const rules = ["api.example.com:443", "*.example.org", "10.1.0.0/16"];
  assert.deepEqual(await sandbox.setEgress(rules), { id: sandbox.id, egress: rules });
  assert.deepEqual(await sandbox.getEgress(), { id: sandbox.id, egress: rules });
  assert.deepEqual((await client.getSandbox(sandbox.id)).data.egress, rules);
  assert.deepEqual(await sandbox.setEgress(null), { id: sandbox.id, egress: [] });
  assert.deepEqual(await sandbox.setEgress([]), { id: sandbox.id, egress: [] });
});

test("egress rejects a malformed rule with a validation error", async () => {
  await expectApiError(sandbox.setEgress(["example.com:99999"]), CreateosSandboxValidationError, 400);
  assert.deepEqual((await sandbox.getEgress()).egress, []);
});

test("bandwidth view is consistent and recharge adds to the quota", async () => {
  const bw = await sandbox.getBandwidth();
  assert.equal(bw.id, sandbox.id);
  for (const key of ["quota_bytes", "used_bytes", "ingress_bytes", "remaining_bytes"]) {
    assert.ok(Number.isInteger(bw[key]), `${key} = ${bw[key]}`);
  }
  assert.ok(bw.quota_bytes > 0);
  assert.equal(bw.remaining_bytes, bw.quota_bytes - bw.used_bytes);
  assert.equal(bw.capped, false);

  const added = 1024 * 1024;
  const after = await sandbox.rechargeBandwidth(added);
  assert.equal(after.quota_bytes, bw.quota_bytes + added);
  assert.equal(after.remaining_bytes, after.quota_bytes - after.used_bytes);
  assert.equal((await sandbox.getBandwidth()).quota_bytes, bw.quota_bytes + added);

  await expectApiError(sandbox.rechargeBandwidth(0), CreateosSandboxValidationError, 400);
});
