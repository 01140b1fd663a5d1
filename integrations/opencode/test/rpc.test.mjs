// The RPC contract as `<package>/rpc` exports it: importable alone, typed, validating.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const PKG_DIR = join(dirname(fileURLToPath(import.meta.url)), "..");
const pkg = JSON.parse(readFileSync(join(PKG_DIR, "package.json"), "utf8"));

test("the contract is exported as <package>/rpc and loads nothing of the implementation", async () => {
  assert.deepEqual(pkg.exports["./rpc"], { types: "./dist/rpc.d.ts", import: "./dist/rpc.js" });
  // A self-reference by the package's own name goes through the exports map, as a client's import would.
  const { CreateOS } = await import(`${pkg.name}/rpc`);
  assert.equal(CreateOS.id, "createos");
  assert.deepEqual(Object.keys(CreateOS.methods).sort(), ["binding", "release", "status"]);
  assert.deepEqual(CreateOS.events, {});
  const source = readFileSync(join(PKG_DIR, "dist", "rpc.js"), "utf8");
  const imports = [...source.matchAll(/^import .* from "([^"]+)";$/gm)].map((m) => m[1]);
  assert.deepEqual(imports, ["zod"], "only the schema library: no sidecar, no cos");
});

test("inputs, outputs and errors validate as declared (Standard Schema validators)", async () => {
  const { CreateOS } = await import(`${pkg.name}/rpc`);
  const { status, binding, release } = CreateOS.methods;
  for (const m of [status, binding, release]) {
    assert.equal(typeof m.input["~standard"].validate, "function");
    assert.equal(typeof m.output["~standard"].validate, "function");
  }
  assert.equal(status.input.safeParse({ sessionID: "ses_1" }).success, true);
  assert.equal(status.input.safeParse({}).success, false, "sessionID is required");
  assert.equal(status.input.safeParse({ sessionID: "" }).success, false);
  assert.equal(status.input.safeParse({ sessionID: "s", extra: 1 }).success, false, "closed input");
  assert.equal(release.input.safeParse({ sessionID: "s" }).success, false, "destroy is required");
  assert.equal(release.input.safeParse({ sessionID: "s", destroy: "yes" }).success, false);
  const okStatus = { sessionID: "s", mode: "remote", sandbox: null, stored: "sb-1", owned: null, initializing: false, cwd: "/root/workspace", persist: true, inFlight: 0 };
  assert.equal(status.output.safeParse(okStatus).success, true);
  assert.equal(status.output.safeParse({ ...okStatus, mode: "cloud" }).success, false);
  assert.equal(binding.output.safeParse({ sessionID: "s", sandbox: "sb-1", stored: null, owned: true, host: "sb-1" }).success, true);
  assert.equal(binding.output.safeParse({ sessionID: "s", sandbox: 3, stored: null, owned: true, host: null }).success, false);
  assert.deepEqual(Object.keys(release.errors).sort(), ["location_mismatch", "release_failed", "session_unavailable"]);
  assert.deepEqual(Object.keys(status.errors).sort(), ["location_mismatch", "session_unavailable"]);
  assert.equal(release.errors.release_failed.safeParse({ sessionID: "s", destroy: true }).success, true);
  assert.equal(release.errors.release_failed.safeParse({ sessionID: "s" }).success, false);
});

test("the published declarations give a typed client (tsc over test/rpc-types.ts)", () => {
  const tsc = join(PKG_DIR, "node_modules", "typescript", "bin", "tsc");
  try {
    execFileSync(process.execPath, [tsc, "-p", join(PKG_DIR, "test", "tsconfig.json")], { cwd: PKG_DIR, encoding: "utf8", stdio: "pipe" });
  } catch (err) {
    assert.fail(`the RPC types do not check:\n${err.stdout}${err.stderr}`);
  }
});
