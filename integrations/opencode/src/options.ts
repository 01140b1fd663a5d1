// Plugin options: environment variable > plugin option > default. Unknown keys and invalid
// values are refused at load, before anything starts, so a typo never falls back silently.

import { homedir } from "node:os";
import { posix } from "node:path";

/** Longest call deadline (1 h), as `cos` allows. */
export const MAX_TIMEOUT_MS = 3_600_000;

/** The resolved configuration. */
export interface PluginConfig {
  mode: "local" | "remote";
  shape: string;
  rootfs: string;
  cwd: string;
  network?: string;
  autoPause: string;
  sync: "none" | "once";
  persist: boolean;
  timeout: number;
  syncSkills: boolean;
  /**
   * Skill directories to mirror on top of the ones OpenCode loads (option only; absolute
   * paths, `~/` for the home directory).
   */
  skillDirs: string[];
  /** The `cos` executable. */
  bin: string;
}

/** A refused configuration. */
export class OptionsError extends Error {
  constructor(message: string) {
    super(`CreateOS plugin: ${message}`);
    this.name = "OptionsError";
  }
}

interface KeySpec {
  env?: string;
  parse(raw: unknown, fromEnv: boolean): unknown;
}

function text(raw: unknown): string {
  if (typeof raw !== "string") throw new Error("must be a string");
  if (raw.includes("\0")) throw new Error("contains a NUL byte");
  if (raw.trim() === "") throw new Error("must not be empty");
  return raw;
}

function choice<T extends string>(choices: readonly T[]) {
  return (raw: unknown): T => {
    const v = text(raw);
    if (!(choices as readonly string[]).includes(v)) throw new Error(`must be one of ${choices.join(", ")} (got ${JSON.stringify(v)})`);
    return v as T;
  };
}

function bool(raw: unknown, fromEnv: boolean): boolean {
  if (fromEnv) {
    if (raw === "true") return true;
    if (raw === "false") return false;
    throw new Error("must be exactly `true` or `false`");
  }
  if (typeof raw !== "boolean") throw new Error("must be a boolean");
  return raw;
}

/** An absolute POSIX path, normalized (no trailing slash except for `/`). */
export function absPosix(raw: unknown): string {
  const v = text(raw);
  if (!v.startsWith("/")) throw new Error(`must be an absolute path (got ${JSON.stringify(v)})`);
  const norm = posix.normalize(v);
  return norm.length > 1 && norm.endsWith("/") ? norm.slice(0, -1) : norm;
}

/** `skillDirs`: absolute directories (`~/…` expands to the home directory), without `..`. */
function dirList(raw: unknown, _fromEnv: boolean, home: string = homedir()): string[] {
  if (!Array.isArray(raw)) throw new Error("must be an array of absolute directory paths");
  return raw.map((item) => {
    let v = text(item);
    if (v === "~" || v.startsWith("~/")) v = home + v.slice(1);
    if (!v.startsWith("/")) throw new Error(`${JSON.stringify(item)} is not an absolute path`);
    if (v.split("/").includes("..")) throw new Error(`${JSON.stringify(item)} contains \`..\``);
    return absPosix(v);
  });
}

function timeout(raw: unknown, fromEnv: boolean): number {
  let n: number;
  if (fromEnv) {
    const s = String(raw).trim();
    if (!/^\d+$/.test(s)) throw new Error(`${JSON.stringify(s)} is not an integer`);
    n = Number(s);
  } else {
    if (typeof raw !== "number" || !Number.isInteger(raw)) throw new Error("must be an integer number of milliseconds");
    n = raw;
  }
  if (n < 1 || n > MAX_TIMEOUT_MS) throw new Error(`${n} ms is outside 1..${MAX_TIMEOUT_MS}`);
  return n;
}

const KEYS: Record<string, KeySpec> = {
  mode: { env: "CREATEOS_MODE", parse: choice(["local", "remote"] as const) },
  shape: { env: "CREATEOS_SHAPE", parse: text },
  rootfs: { env: "CREATEOS_ROOTFS", parse: text },
  cwd: { env: "CREATEOS_CWD", parse: absPosix },
  network: { env: "CREATEOS_NETWORK", parse: text },
  autoPause: { env: "CREATEOS_AUTO_PAUSE", parse: text },
  sync: { env: "CREATEOS_SYNC", parse: choice(["none", "once"] as const) },
  persist: { env: "CREATEOS_PERSIST", parse: bool },
  timeout: { env: "CREATEOS_TIMEOUT", parse: timeout },
  syncSkills: { parse: bool },
  skillDirs: { parse: dirList },
  bin: { env: "COS_BIN", parse: text },
};

const DEFAULTS: PluginConfig = {
  mode: "local",
  shape: "s-2vcpu-2gb",
  rootfs: "devbox:1",
  cwd: "/root/workspace",
  autoPause: "30m",
  sync: "none",
  persist: true,
  timeout: 120_000,
  syncSkills: true,
  skillDirs: [],
  bin: "cos",
};

/**
 * Keys passed through to `cos mcp --options` as they are (`bin` is the plugin's own;
 * `skillDirs` goes to cos merged with the discovered skill directories, see core.ts).
 */
const COS_KEYS = ["mode", "shape", "rootfs", "cwd", "network", "autoPause", "sync", "persist", "timeout", "syncSkills"] as const;

/** Resolve `options` against `env`. Throws `OptionsError` naming the offending key. */
export function resolveOptions(options: unknown, env: NodeJS.ProcessEnv = process.env): PluginConfig {
  if (options === undefined || options === null) options = {};
  if (typeof options !== "object" || Array.isArray(options)) throw new OptionsError("options must be an object");
  const given = options as Record<string, unknown>;
  const unknown = Object.keys(given).filter((k) => !(k in KEYS));
  if (unknown.length > 0) {
    throw new OptionsError(
      `unknown option ${unknown.map((k) => JSON.stringify(k)).join(", ")} (known: ${Object.keys(KEYS).join(", ")}). ` +
        "Credentials never go in plugin options: sign in with `createos login` or set CREATEOS_API_KEY.",
    );
  }
  const config: Record<string, unknown> = { ...DEFAULTS };
  for (const [key, spec] of Object.entries(KEYS)) {
    const envValue = spec.env ? env[spec.env] : undefined;
    const fromEnv = envValue !== undefined && envValue !== "";
    if (!fromEnv && !(key in given)) continue;
    if (!fromEnv && given[key] === undefined) continue;
    const raw = fromEnv ? envValue : given[key];
    try {
      config[key] = spec.parse(raw, fromEnv);
    } catch (err) {
      const origin = fromEnv ? spec.env : `option "${key}"`;
      throw new OptionsError(`${origin}: ${(err as Error).message}`);
    }
  }
  return config as unknown as PluginConfig;
}

/** The `--options` JSON for `cos mcp` (environment overrides are applied by `cos` too). */
export function cosOptions(config: PluginConfig): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of COS_KEYS) {
    const v = config[key];
    if (v !== undefined) out[key] = v;
  }
  return out;
}
