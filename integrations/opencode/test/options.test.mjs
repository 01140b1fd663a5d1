import assert from "node:assert/strict";
import { test } from "node:test";

import { cosOptions, resolveOptions } from "../dist/options.js";

test("defaults follow the reference table", () => {
  const c = resolveOptions({}, {});
  assert.equal(c.mode, "local");
  assert.equal(c.shape, "s-2vcpu-2gb");
  assert.equal(c.rootfs, "devbox:1");
  assert.equal(c.cwd, "/root/workspace");
  assert.equal(c.autoPause, "30m");
  assert.equal(c.sync, "none");
  assert.equal(c.persist, true);
  assert.equal(c.timeout, 120000);
  assert.equal(c.syncSkills, true);
  assert.equal(c.bin, "cos");
  assert.equal(c.network, undefined);
});

test("environment overrides options, options override defaults", () => {
  const c = resolveOptions({ mode: "local", shape: "s-4vcpu-8gb", timeout: 5000 }, { CREATEOS_MODE: "remote", COS_BIN: "/opt/cos" });
  assert.equal(c.mode, "remote");
  assert.equal(c.shape, "s-4vcpu-8gb");
  assert.equal(c.timeout, 5000);
  assert.equal(c.bin, "/opt/cos");
  const empty = resolveOptions({ mode: "remote" }, { CREATEOS_MODE: "" });
  assert.equal(empty.mode, "remote", "an empty variable does not override");
});

test("unknown keys are refused with the known ones listed", () => {
  assert.throws(() => resolveOptions({ mode: "local", apiKey: "x" }, {}), (err) => {
    assert.match(err.message, /unknown option "apiKey"/);
    assert.match(err.message, /known: mode, shape/);
    assert.doesNotMatch(err.message, /"x"/);
    return true;
  });
});

test("invalid values name their origin", () => {
  assert.throws(() => resolveOptions({ mode: "cloud" }, {}), /option "mode": must be one of local, remote/);
  assert.throws(() => resolveOptions({}, { CREATEOS_MODE: "cloud" }), /CREATEOS_MODE: must be one of/);
  assert.throws(() => resolveOptions({ persist: "yes" }, {}), /option "persist": must be a boolean/);
  assert.throws(() => resolveOptions({}, { CREATEOS_PERSIST: "1" }), /CREATEOS_PERSIST: must be exactly `true` or `false`/);
  assert.throws(() => resolveOptions({ timeout: 0 }, {}), /outside 1\.\.3600000/);
  assert.throws(() => resolveOptions({ timeout: 3600001 }, {}), /outside/);
  assert.throws(() => resolveOptions({ timeout: 1.5 }, {}), /integer/);
  assert.throws(() => resolveOptions({}, { CREATEOS_TIMEOUT: "10s" }), /CREATEOS_TIMEOUT: "10s" is not an integer/);
  assert.throws(() => resolveOptions({ cwd: "work" }, {}), /option "cwd": must be an absolute path/);
  assert.throws(() => resolveOptions({ shape: "a\0b" }, {}), /NUL/);
  assert.throws(() => resolveOptions({ sync: "twice" }, {}), /must be one of none, once/);
  assert.throws(() => resolveOptions({ syncSkills: "true" }, {}), /option "syncSkills": must be a boolean/);
  assert.throws(() => resolveOptions([], {}), /options must be an object/);
});

test("cwd is normalized and the cos options leave out the plugin's own keys", () => {
  const c = resolveOptions({ cwd: "/root//work/./x/", bin: "/usr/local/bin/cos", network: "dev" }, {});
  assert.equal(c.cwd, "/root/work/x");
  const o = cosOptions(c);
  assert.equal(o.cwd, "/root/work/x");
  assert.equal(o.network, "dev");
  assert.equal(o.bin, undefined);
  assert.deepEqual(Object.keys(o).sort(), ["autoPause", "cwd", "mode", "network", "persist", "rootfs", "shape", "sync", "syncSkills", "timeout"]);
});
