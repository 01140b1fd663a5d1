// Shared helpers of the unit tests: the fake `cos` and its event log.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { CreateOSPlugin } from "../dist/index.js";

export const FAKE_COS = join(dirname(fileURLToPath(import.meta.url)), "fake-cos.mjs");

const dirs = [];
process.on("exit", () => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A fresh log file path and the env that points the fake at it. */
export function fakeEnv(extra = {}) {
  const dir = mkdtempSync(join(tmpdir(), "fake-cos-"));
  dirs.push(dir);
  const log = join(dir, "events.jsonl");
  return { log, env: { ...process.env, FAKE_COS_LOG: log, COS_BIN: FAKE_COS, ...extra } };
}

/** Events the fake logged so far. */
export function events(log) {
  if (!existsSync(log)) return [];
  return readFileSync(log, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
}

/** Poll `pred` until true or fail after `ms`. */
export async function waitFor(pred, what, ms = 10_000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await pred()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Is a process alive? */
export function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A minimal OpenCode tool context. */
export function toolCtx(sessionID, signal = new AbortController().signal) {
  const metadata = [];
  const asked = [];
  return {
    sessionID,
    messageID: "msg_1",
    agent: "build",
    directory: "/tmp",
    worktree: "/tmp",
    abort: signal,
    metadata: (m) => metadata.push(m),
    ask: async (a) => {
      asked.push(a);
    },
    seen: metadata,
    asked,
  };
}

/** Run the classic entry with the fake cos; `env` is swapped in for the duration. */
export async function classic(options, extraEnv = {}, input = { directory: "/tmp", worktree: "/tmp", client: {} }) {
  const { log, env } = fakeEnv(extraEnv);
  const saved = process.env;
  process.env = env;
  try {
    const hooks = await CreateOSPlugin(input, options);
    return { hooks, log };
  } finally {
    process.env = saved;
  }
}
