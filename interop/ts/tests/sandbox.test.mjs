// Sandbox create / get / list / patch / resize / destroy through the TypeScript SDK.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { CreateosSandboxNotFoundError } from "@nodeops-createos/sandbox";
import { randomBytes } from "node:crypto";
import { newClient, SandboxTracker, smallestShape, uniqueName } from "./_support.mjs";

/** A well-formed OpenSSH ed25519 public key line (random key material). */
function ed25519PublicKey() {
  const field = (buf) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(buf.length);
    return Buffer.concat([len, buf]);
  };
  const blob = Buffer.concat([field(Buffer.from("ssh-ed25519")), field(randomBytes(32))]);
  return `ssh-ed25519 ${blob.toString("base64")} interop@test`;
}

const client = newClient();
const tracker = new SandboxTracker(client);
let shape;
let rootfs;
let sandbox;
const name = uniqueName("ts-sb");

before(async () => {
  shape = await smallestShape(client);
  rootfs = (await client.listRootfs()).default;
  sandbox = await tracker.create({
    shape: shape.id,
    rootfs,
    name,
    envs: { INTEROP_GREETING: "hello" },
    ssh_pubkeys: [],
  });
});

after(() => tracker.destroyAll());

test("createSandbox returns a running handle carrying the create response", () => {
  assert.equal(typeof sandbox.id, "string");
  assert.ok(sandbox.id.length > 0);
  assert.equal(sandbox.status, "running");
  assert.equal(sandbox.name, name);
  assert.equal(typeof sandbox.ip, "string");
  assert.ok(sandbox.ip.length > 0);
  const data = sandbox.data;
  assert.equal(data.shape, shape.id);
  assert.equal(data.rootfs, rootfs);
  assert.equal(data.vcpu, shape.vcpu);
  assert.equal(data.mem_mib, shape.mem_mib);
  assert.equal(data.disk_mib, shape.default_disk_mib);
  assert.equal(typeof data.spawn_ms, "number");
  assert.equal(data.ingress_enabled, false);
  assert.equal(data.ingress_url_template, undefined);
});

test("getSandbox returns the view, env names only", async () => {
  const got = await client.getSandbox(sandbox.id);
  assert.equal(got.id, sandbox.id);
  assert.equal(got.status, "running");
  assert.equal(got.name, name);
  assert.equal(got.ip, sandbox.ip);
  assert.ok(!Number.isNaN(Date.parse(got.data.created_at)), "created_at is not a timestamp");
  assert.deepEqual(got.data.envs, ["INTEROP_GREETING"]);
  assert.ok(!JSON.stringify(got.data).includes("hello"), "an env value leaked into the view");
  assert.equal(got.data.ingress_enabled, false);
});

test("refresh updates the handle in place", async () => {
  const again = await sandbox.refresh();
  assert.equal(again, sandbox);
  assert.equal(sandbox.status, "running");
  assert.ok(sandbox.data.created_at);
});

test("getSandboxByIP finds the sandbox by its private IP", async () => {
  const byIp = await client.getSandboxByIP(sandbox.ip);
  assert.equal(byIp.id, sandbox.id);
});

test("whoami counts the running sandbox", async () => {
  const me = await client.whoami();
  assert.ok(me.stats.running >= 1);
  assert.ok(me.stats.total >= 1);
});

test("listSandboxes walks pages, honours limit and the status filter", async () => {
  const second = await tracker.create({ shape: shape.id, name: uniqueName("ts-sb2") });
  const third = await tracker.create({ shape: shape.id, name: uniqueName("ts-sb3") });

  const all = await client.listSandboxes();
  const allIds = all.map((s) => s.id);
  for (const id of [sandbox.id, second.id, third.id]) assert.ok(allIds.includes(id), `${id} missing`);
  assert.equal(new Set(allIds).size, allIds.length, "a sandbox is listed twice");

  const capped = await client.listSandboxes({ limit: 2 });
  assert.equal(capped.length, 2);

  const streamed = [];
  for await (const s of client.iterateSandboxes({ status: "running" })) streamed.push(s);
  assert.ok(streamed.every((s) => s.status === "running"));
  assert.ok(streamed.some((s) => s.id === third.id));

  // One explicit page through the SDK's transport escape hatch: the paginated envelope.
  const page = await client.http.request("GET", "/v1/sandboxes", { query: { limit: 1, offset: 1 } });
  assert.equal(page.data.length, 1);
  assert.equal(page.pagination.limit, 1);
  assert.equal(page.pagination.offset, 1);
  assert.equal(page.pagination.count, 1);
  assert.equal(page.pagination.total, all.length);

  await second.destroy();
  await third.destroy();
  await second.waitUntilDestroyed();
  await third.waitUntilDestroyed();
  const destroyed = await client.listSandboxes({ status: "destroyed" });
  const destroyedIds = destroyed.map((s) => s.id);
  assert.ok(destroyedIds.includes(second.id) && destroyedIds.includes(third.id));
  assert.ok(destroyed.every((s) => s.status === "destroyed"));
});

test("setIngress adds and removes the preview URL template", async () => {
  await sandbox.setIngress(true);
  assert.equal(sandbox.data.ingress_enabled, true);
  assert.ok(sandbox.data.ingress_url_template.includes("<port>"));
  const url = sandbox.previewUrl(8080);
  assert.ok(url.includes("8080") && !url.includes("<port>"), url);
  assert.ok(url.startsWith("https://") || url.startsWith("http://"), url);

  await sandbox.setIngress(false);
  assert.equal(sandbox.data.ingress_enabled, false);
  assert.equal(sandbox.data.ingress_url_template, undefined);
  assert.throws(() => sandbox.previewUrl(8080));
});

test("setAutoPause sets and clears the idle timeout", async () => {
  await sandbox.setAutoPause(600);
  assert.equal(sandbox.data.auto_pause_after_seconds, 600);
  await sandbox.setAutoPause(null);
  assert.equal(sandbox.data.auto_pause_after_seconds, undefined);
  assert.equal(sandbox.status, "running");
});

test("resize grows the root disk", async () => {
  const bigger = sandbox.data.disk_mib * 2;
  const result = await sandbox.resize(bigger);
  assert.deepEqual(result, { id: sandbox.id, disk_mib: bigger });
  assert.equal(sandbox.data.disk_mib, bigger);
  assert.equal((await client.getSandbox(sandbox.id)).data.disk_mib, bigger);
});

test("addSSHPubkeys appends and de-duplicates keys", async () => {
  const key = ed25519PublicKey();
  assert.deepEqual(await sandbox.addSSHPubkeys([key]), { count: 1 });
  assert.deepEqual(await sandbox.addSSHPubkeys([key]), { count: 1 });
  assert.deepEqual((await client.getSandbox(sandbox.id)).data.ssh_pubkeys, [key]);
});

test("destroy is asynchronous, idempotent, and the row stays readable", async () => {
  const victim = await tracker.create({ shape: shape.id });
  const first = await victim.destroy();
  assert.equal(first.id, victim.id);
  assert.ok(["destroying", "destroyed"].includes(first.status), first.status);
  await victim.waitUntilDestroyed();
  assert.equal(victim.status, "destroyed");
  const again = await victim.destroy();
  assert.deepEqual(again, { id: victim.id, status: "destroyed" });
  const row = await client.getSandbox(victim.id);
  assert.equal(row.status, "destroyed");
  assert.ok(row.data.destroyed_at, "destroyed_at missing on a destroyed row");
});

test("getSandbox of an unknown id is NotFound", async () => {
  await assert.rejects(client.getSandbox("sb-00000000000000000000000000"), CreateosSandboxNotFoundError);
});
