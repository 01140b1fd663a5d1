// Networks, disks and templates through the TypeScript SDK.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import {
  CreateosSandboxNotFoundError,
  CreateosSandboxValidationError,
} from "@nodeops-createos/sandbox";
import { expectApiError, newClient, SandboxTracker, smallestShape, uniqueName } from "./_support.mjs";

const client = newClient();
const tracker = new SandboxTracker(client);
let shape;
let sandbox;

before(async () => {
  shape = await smallestShape(client);
  sandbox = await tracker.create({ shape: shape.id, name: uniqueName("ts-res") });
});

after(() => tracker.destroyAll());

// ── networks ────────────────────────────────────────────────────────────

test("networks: create, list, attach, members, detach, delete", async () => {
  const name = uniqueName("ts-net");
  const net = await client.networks.create({ name });
  assert.equal(net.name, name);
  assert.equal(typeof net.id, "string");
  assert.ok(!Number.isNaN(Date.parse(net.created_at)));
  assert.equal(net.member_count, 0);

  const listed = await client.networks.list();
  const row = listed.find((n) => n.id === net.id);
  assert.ok(row, "new network missing from list");
  assert.equal(row.member_count, 0);

  assert.deepEqual(await sandbox.attachNetwork(net.id), { ok: true });
  const byId = await client.networks.get(net.id);
  assert.equal(byId.members.length, 1);
  assert.equal(byId.members[0].sandbox_id, sandbox.id);
  assert.equal(byId.members[0].status, "running");
  const byName = await client.networks.get(name);
  assert.equal(byName.id, net.id);
  assert.equal((await client.networks.list()).find((n) => n.id === net.id).member_count, 1);

  assert.deepEqual(await sandbox.detachNetwork(net.id), { ok: true });
  assert.deepEqual((await client.networks.get(net.id)).members ?? [], []);

  assert.deepEqual(await client.networks.delete(net.id), { ok: true });
  await expectApiError(client.networks.get(net.id), CreateosSandboxNotFoundError, 404, {
    network: "network not found",
  });
});

test("networks: a sandbox created into a network is a member, a busy network cannot be deleted", async () => {
  const net = await client.networks.create({ name: uniqueName("ts-net") });
  const member = await tracker.create({ shape: shape.id, networks: [{ id: net.id }] });
  const got = await client.networks.get(net.id);
  assert.deepEqual(got.members.map((m) => m.sandbox_id), [member.id]);
  await expectApiError(client.networks.delete(net.id), CreateosSandboxValidationError, 409, {
    network: "network has active members",
  });
  await member.destroy();
  await member.waitUntilDestroyed();
  assert.deepEqual(await client.networks.delete(net.id), { ok: true });
});

test("networks: a duplicate name is a validation error", async () => {
  // The reference says 400, the project spec 409; the SDK maps both to ValidationError.
  const name = uniqueName("ts-net");
  const net = await client.networks.create({ name });
  try {
    await assert.rejects(client.networks.create({ name }), CreateosSandboxValidationError);
    assert.equal((await client.networks.list()).filter((n) => n.name === name).length, 1);
  } finally {
    await client.networks.delete(net.id);
  }
});

// ── disks ───────────────────────────────────────────────────────────────

function diskRequest(name) {
  return {
    name,
    kind: "s3",
    config: { bucket: "interop-bucket", endpoint: "https://s3.us-east-1.amazonaws.com", region: "us-east-1" },
    credentials: { access_key: "AKIAINTEROPTEST", secret_key: "interop-secret-key" },
  };
}

test("disks: register, get, list, rotate credentials, delete", async () => {
  const name = uniqueName("ts-disk");
  const disk = await client.disks.create(diskRequest(name));
  assert.equal(disk.name, name);
  assert.equal(disk.kind, "s3");
  assert.equal(disk.config.bucket, "interop-bucket");
  assert.ok(!JSON.stringify(disk).includes("interop-secret-key"), "a secret came back");
  assert.equal(disk.credentials, undefined);

  assert.equal((await client.disks.get(disk.id)).id, disk.id);
  assert.equal((await client.disks.get(name)).id, disk.id);
  assert.ok((await client.disks.list()).some((d) => d.id === disk.id));

  const rotated = await client.disks.rotateCredentials(name, { access_key: "AKIAROTATED", secret_key: "rotated" });
  assert.equal(rotated.id, disk.id);
  assert.ok(!JSON.stringify(rotated).includes("rotated\""), "a secret came back");

  assert.deepEqual(await client.disks.delete(disk.id), { deleted: true });
  await expectApiError(client.disks.get(disk.id), CreateosSandboxNotFoundError, 404, { disk: "disk not found" });
});

test("disks: a bad name is a validation error", async () => {
  await expectApiError(client.disks.create(diskRequest("Bad Name!")), CreateosSandboxValidationError, 400);
});

test("disks: attach to a running sandbox, list mounts, refuse delete, detach", async () => {
  const disk = await client.disks.create(diskRequest(uniqueName("ts-disk")));
  try {
    const ack = await sandbox.attachDisk({ diskId: disk.id, mountPath: "/mnt/interop" });
    assert.equal(ack.ok, true);

    const mounts = await sandbox.listDisks();
    assert.equal(mounts.length, 1);
    assert.equal(mounts[0].disk_id, disk.id);
    assert.equal(mounts[0].mount_path, "/mnt/interop");
    assert.ok(["pending", "mounted"].includes(mounts[0].mount_status), mounts[0].mount_status);

    await expectApiError(client.disks.delete(disk.id), CreateosSandboxValidationError, 409, {
      disk: "disk is attached to a sandbox",
    });

    assert.deepEqual(await sandbox.detachDisk({ diskId: disk.id, mountPath: "/mnt/interop" }), { detached: true });
    assert.deepEqual(await sandbox.listDisks(), []);
  } finally {
    await client.disks.delete(disk.id);
  }
});

// ── templates ───────────────────────────────────────────────────────────

const DOCKERFILE = "FROM nodeops/sandbox:debian\nRUN echo building interop template\nENV INTEROP_TEMPLATE=1\n";

test("templates: build, follow logs to the end, get with dockerfile, list, use, delete", async () => {
  const name = uniqueName("ts-tpl");
  const tpl = await client.templates.create({ name, dockerfile: DOCKERFILE });
  assert.equal(tpl.name, name);
  assert.ok(["pending", "building", "ready"].includes(tpl.status), tpl.status);
  assert.equal(typeof tpl.created_at, "string");

  let final;
  for await (const event of client.templates.followLogs(tpl.id)) {
    if (event.final) {
      final = event;
      break;
    }
  }
  assert.ok(final, "the log stream ended without a final event");
  assert.equal(final.status, "ready");

  const ready = await client.templates.get(tpl.id, { include: "dockerfile" });
  assert.equal(ready.status, "ready");
  assert.equal(ready.dockerfile, DOCKERFILE);
  assert.ok(ready.built_at, "built_at missing on a ready template");
  assert.ok(ready.ext4_size_bytes > 0);
  const plain = await client.templates.get(name);
  assert.equal(plain.id, tpl.id);
  assert.equal(plain.dockerfile, undefined);

  const text = await client.templates.logs(tpl.id);
  assert.match(text, /building interop template/);

  assert.ok((await client.templates.list()).some((t) => t.id === tpl.id));

  const built = await tracker.create({ shape: shape.id, rootfs: tpl.id });
  assert.equal(built.data.rootfs, tpl.id);
  await built.destroy();
  await built.waitUntilDestroyed();

  assert.deepEqual(await client.templates.delete(tpl.id), { ok: true });
  await expectApiError(client.templates.get(tpl.id), CreateosSandboxNotFoundError, 404, {
    template: "template not found",
  });
});

test("templates: a Dockerfile with COPY is rejected", async () => {
  await expectApiError(
    client.templates.create({ name: uniqueName("ts-tpl"), dockerfile: "FROM nodeops/sandbox:debian\nCOPY . /app\n" }),
    CreateosSandboxValidationError,
    400,
  );
});
