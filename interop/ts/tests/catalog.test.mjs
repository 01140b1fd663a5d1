// Health, identity and catalogs through the TypeScript SDK.
import { test } from "node:test";
import assert from "node:assert/strict";
import { newClient } from "./_support.mjs";

const client = newClient();

test("healthz reports up", async () => {
  assert.deepEqual(await client.healthz(), { up: true });
});

test("readyz reports ready", async () => {
  const ready = await client.readyz();
  assert.equal(ready.ready, true);
});

test("whoami returns the caller and sandbox counts", async () => {
  const me = await client.whoami();
  assert.equal(typeof me.user_id, "string");
  assert.ok(me.user_id.length > 0);
  for (const key of ["running", "paused", "other", "total"]) {
    assert.equal(typeof me.stats[key], "number", `stats.${key}`);
    assert.ok(me.stats[key] >= 0);
  }
  assert.ok(me.stats.total >= me.stats.running + me.stats.paused);
});

test("listShapes walks the paginated catalog", async () => {
  const shapes = await client.listShapes();
  assert.ok(shapes.length > 0);
  const ids = new Set();
  for (const shape of shapes) {
    assert.match(shape.id, /^s-\d+vcpu-\d+(mb|gb)$/);
    assert.ok(Number.isInteger(shape.vcpu) && shape.vcpu > 0);
    assert.ok(Number.isInteger(shape.mem_mib) && shape.mem_mib > 0);
    assert.ok(Number.isInteger(shape.default_disk_mib) && shape.default_disk_mib > 0);
    ids.add(shape.id);
  }
  assert.equal(ids.size, shapes.length, "shape ids repeat across pages");
});

test("listRootfs returns the catalog with its default", async () => {
  const catalog = await client.listRootfs();
  assert.ok(Array.isArray(catalog.rootfs) && catalog.rootfs.length > 0);
  assert.equal(typeof catalog.default, "string");
  assert.ok(catalog.rootfs.includes(catalog.default), "default rootfs is not in the list");
  if (catalog.entries !== undefined) {
    const names = catalog.entries.map((e) => e.name);
    for (const name of catalog.rootfs) assert.ok(names.includes(name), `no entry for ${name}`);
  }
});
