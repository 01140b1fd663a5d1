// Shared helpers for the interop tests: a client built the way the SDK README says
// (configuration from the environment), the emulator's /_mock API, and cleanup of every
// sandbox a test file creates so the emulator ends with nothing live.
import assert from "node:assert/strict";
import {
  CreateosSandboxClient,
  CreateosSandboxApiError,
  CreateosSandboxNotFoundError,
} from "@nodeops-createos/sandbox";

/** Base URL of the emulator, as run.sh exported it. */
export function baseUrl() {
  const url = process.env.CREATEOS_SANDBOX_BASE_URL;
  if (!url) {
    throw new Error("CREATEOS_SANDBOX_BASE_URL is not set (run the suite through interop/run.sh)");
  }
  return url.replace(/\/+$/, "");
}

/** A client configured only from CREATEOS_SANDBOX_BASE_URL / CREATEOS_SANDBOX_API_KEY. */
export function newClient(options = {}) {
  baseUrl();
  if (!process.env.CREATEOS_SANDBOX_API_KEY && options.apiKey === undefined) {
    throw new Error("CREATEOS_SANDBOX_API_KEY is not set (run the suite through interop/run.sh)");
  }
  return new CreateosSandboxClient(options);
}

/** Calls the emulator's /_mock API (plain JSON, not JSend; it needs the emulator's key). */
export async function mockApi(method, path, body) {
  const init = { method, headers: { "x-api-key": process.env.CREATEOS_SANDBOX_API_KEY } };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(`${baseUrl()}/_mock${path}`, init);
  const text = await response.text();
  assert.ok(response.ok, `/_mock${path} answered ${response.status}: ${text}`);
  return text ? JSON.parse(text) : undefined;
}

export function addFault(rule) {
  return mockApi("POST", "/faults", { rule });
}

export function clearFaults() {
  return mockApi("DELETE", "/faults");
}

export function stats() {
  return mockApi("GET", "/stats");
}

/** A name no other test run uses (sandbox, network, disk and template names). */
export function uniqueName(prefix) {
  const rand = Math.random().toString(36).slice(2, 8);
  return `${prefix}-${Date.now().toString(36)}-${rand}`;
}

/** The smallest shape the catalog offers (cheapest to run). */
export async function smallestShape(client) {
  const shapes = await client.listShapes();
  assert.ok(shapes.length > 0, "the shape catalog is empty");
  return [...shapes].sort((a, b) => a.mem_mib - b.mem_mib || a.vcpu - b.vcpu)[0];
}

/**
 * Tracks sandboxes a test file creates; `destroyAll` destroys each one still present and
 * waits for `destroyed`, so the emulator's live counters drop back to zero.
 */
export class SandboxTracker {
  #client;
  #ids = new Set();

  constructor(client) {
    this.#client = client;
  }

  add(sandbox) {
    this.#ids.add(sandbox.id);
    return sandbox;
  }

  async create(request) {
    return this.add(await this.#client.createSandbox(request));
  }

  async destroyAll() {
    const failures = [];
    for (const id of this.#ids) {
      try {
        const sandbox = await this.#client.getSandbox(id);
        if (sandbox.status !== "destroyed") {
          await sandbox.destroy();
          await sandbox.waitUntilDestroyed({ timeoutMs: 30_000 });
        }
      } catch (err) {
        if (!(err instanceof CreateosSandboxNotFoundError)) failures.push(`${id}: ${err}`);
      }
    }
    this.#ids.clear();
    assert.deepEqual(failures, [], "cleanup of sandboxes failed");
  }
}

/**
 * Asserts that `promise` rejects with an SDK API error of class `ErrorClass`, HTTP status
 * `status` and (when given) exactly the JSend `data` of a `fail` envelope. Returns the error.
 */
export async function expectApiError(promise, ErrorClass, status, failData) {
  let caught;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  assert.ok(caught, `expected a ${ErrorClass.name} (${status}), but the call succeeded`);
  assert.ok(
    caught instanceof ErrorClass,
    `expected ${ErrorClass.name}, got ${caught?.name}: ${caught?.message}`,
  );
  assert.ok(caught instanceof CreateosSandboxApiError);
  assert.equal(caught.statusCode, status);
  assert.ok(caught.requestId, "error carries no X-Request-Id");
  if (failData !== undefined) {
    assert.equal(caught.envelope?.status, "fail", `envelope: ${JSON.stringify(caught.envelope)}`);
    for (const [key, value] of Object.entries(failData)) {
      assert.equal(caught.envelope.data?.[key], value, `fail data ${JSON.stringify(caught.envelope.data)}`);
    }
  }
  return caught;
}
