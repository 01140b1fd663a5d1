// The skill bundles OpenCode loads, as directories for `cos mcp` to mirror into the session
// sandbox when it is attached (`skillDirs` of `cos mcp --options`; cos copies each one to the
// same absolute path in the guest, and to the mapped path when it lies in the project).
//
// Where OpenCode looks, from its own source (anomalyco/opencode):
//   - `packages/opencode/src/skill/index.ts`, `Skill.loadSkills` (also in the earlier
//     `skill/skill.ts`): unless OPENCODE_DISABLE_EXTERNAL_SKILLS, `skills/**/SKILL.md` under
//     `~/.claude` and `~/.agents`, and under every `.claude` / `.agents` directory from the
//     session directory up to the worktree (hidden directories included); then
//     `{skill,skills}/**/SKILL.md` under each config directory; then `**/SKILL.md` under each
//     `skills.paths` entry of the configuration (`~/` expanded, relative to the directory);
//     `skills.urls` are downloads into OpenCode's cache and are not mirrored from here.
//   - `packages/opencode/src/config/paths.ts`, `ConfigPaths.directories`: the global config
//     directory (`$XDG_CONFIG_HOME/opencode`), every `.opencode` from the directory up to the
//     worktree (unless OPENCODE_DISABLE_PROJECT_CONFIG), `~/.opencode`, OPENCODE_CONFIG_DIR.
// A skill's bundle is the directory holding its SKILL.md. The V2 host lists its skills itself
// (`ctx.skill.list()`); the classic host does not, so there the same walk happens here.
//
// Confinement: a bundle is mirrored only if, after symlinks are resolved, it is a directory
// with a regular SKILL.md that is neither `/`, nor the home directory or one of its
// ancestors, nor inside a credential directory (`~/.ssh`, `~/.createos`, …). cos applies its
// snapshot deny-list on top (no keys, `.env` files or VCS metadata leave the machine).

import { existsSync, readdirSync, realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, resolve, sep } from "node:path";

/** Most bundles mirrored (a runaway `skills.paths` must not copy a whole tree of them). */
export const MAX_SKILL_DIRS = 64;
/** Deepest directory level searched below a root. */
const MAX_DEPTH = 8;
/** Most directories visited per root. */
const MAX_VISITS = 5000;

/** Directories under the home directory that hold credentials: never mirrored. */
const CREDENTIAL_DIRS = [".ssh", ".createos", ".aws", ".gnupg", ".kube", ".docker", ".azure", ".config/gcloud", ".config/gh"];

/** Where to look and which OpenCode switches apply. */
export interface SkillSearch {
  /** The session/instance directory (the project). */
  directory: string;
  /** The worktree root the upward walks stop at (OpenCode's `stop`), if known. */
  worktree?: string;
  /** `skills.paths` of the OpenCode configuration. */
  configPaths?: readonly string[];
  env?: NodeJS.ProcessEnv;
  home?: string;
}

/** The home directory `env` names (what OpenCode's `os.homedir()` returns in that environment). */
export function homeOf(env: NodeJS.ProcessEnv): string {
  return env.HOME && isAbsolute(env.HOME) ? env.HOME : homedir();
}

function flag(v: string | undefined): boolean {
  // OpenCode's truthy flag: "true" (any case) or "1".
  return v !== undefined && (v.toLowerCase() === "true" || v === "1");
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** `<dir>/<target>` for each directory from `start` up to `stop` (or `/`), nearest first. */
function up(targets: readonly string[], start: string, stop?: string): string[] {
  const found: string[] = [];
  let current = resolve(start);
  for (;;) {
    for (const t of targets) {
      const candidate = join(current, t);
      if (isDir(candidate)) found.push(candidate);
    }
    if (stop !== undefined && resolve(stop) === current) break;
    const parent = dirname(current);
    if (parent === current) break;
    current = parent;
  }
  return found;
}

/** Directories holding a SKILL.md at any depth below `root` (symlinks followed, cycles cut). */
function bundlesBelow(root: string, dot: boolean): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  let visits = 0;
  const walk = (dir: string, depth: number) => {
    if (depth > MAX_DEPTH || visits >= MAX_VISITS) return;
    let real: string;
    try {
      real = realpathSync(dir);
    } catch {
      return;
    }
    if (seen.has(real)) return;
    seen.add(real);
    visits++;
    let entries: string[];
    try {
      entries = readdirSync(dir);
    } catch {
      return;
    }
    if (entries.includes("SKILL.md")) out.push(dir);
    for (const name of entries.sort()) {
      if (!dot && name.startsWith(".")) continue;
      const child = join(dir, name);
      if (isDir(child)) walk(child, depth + 1);
    }
  };
  walk(root, 0);
  return out;
}

/** The skill bundle directories OpenCode would load for `search` (absolute, unconfined). */
export function discoverSkillDirs(search: SkillSearch): string[] {
  const env = search.env ?? process.env;
  const home = search.home ?? homeOf(env);
  const { directory, worktree } = search;
  const found: string[] = [];
  if (!flag(env.OPENCODE_DISABLE_EXTERNAL_SKILLS)) {
    const roots = [
      ...[".claude", ".agents"].map((d) => join(home, d)).filter(isDir),
      ...up([".claude", ".agents"], directory, worktree),
    ];
    for (const root of roots) found.push(...bundlesBelow(join(root, "skills"), true));
  }
  const xdgConfig = env.XDG_CONFIG_HOME && isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : join(home, ".config");
  const configDirs = [
    join(xdgConfig, "opencode"),
    ...(flag(env.OPENCODE_DISABLE_PROJECT_CONFIG) ? [] : up([".opencode"], directory, worktree)),
    ...up([".opencode"], home, home),
    ...(env.OPENCODE_CONFIG_DIR ? [env.OPENCODE_CONFIG_DIR] : []),
  ];
  for (const dir of configDirs) {
    for (const sub of ["skill", "skills"]) found.push(...bundlesBelow(join(dir, sub), false));
  }
  found.push(...configPathBundles(search.configPaths ?? [], directory, home));
  return found;
}

/** Bundles below the `skills.paths` entries of the configuration (as OpenCode resolves them). */
export function configPathBundles(paths: readonly unknown[], directory: string, home: string = homedir()): string[] {
  const found: string[] = [];
  for (const item of paths) {
    if (typeof item !== "string" || item === "") continue;
    const expanded = item.startsWith("~/") ? join(home, item.slice(2)) : item;
    const dir = isAbsolute(expanded) ? expanded : join(directory, expanded);
    found.push(...bundlesBelow(dir, false));
  }
  return found;
}

/**
 * The bundle directory of one skill the host lists (`location` or `path` of a SKILL.md), or
 * undefined for virtual and built-in skills that have no local bundle.
 */
export function bundleOf(skill: unknown): string | undefined {
  if (typeof skill !== "object" || skill === null) return undefined;
  const s = skill as { location?: unknown; path?: unknown };
  let file = typeof s.path === "string" ? s.path : typeof s.location === "string" ? s.location : undefined;
  if (file?.startsWith("file://")) {
    try {
      file = decodeURIComponent(new URL(file).pathname);
    } catch {
      return undefined;
    }
  }
  if (!file || !isAbsolute(file) || !file.endsWith(`${sep}SKILL.md`)) return undefined;
  return dirname(file);
}

/** Why `dir` may not be mirrored, or undefined when it may. */
export function refusal(dir: string, home: string = homedir()): string | undefined {
  if (!isAbsolute(dir) || dir.includes("\0")) return "not an absolute path";
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    return "does not exist";
  }
  if (!isDir(real)) return "not a directory";
  try {
    if (!statSync(join(real, "SKILL.md")).isFile()) return "its SKILL.md is not a regular file";
  } catch {
    return "has no SKILL.md";
  }
  const realHome = existsSync(home) ? realpathSync(home) : resolve(home);
  const inside = (p: string, parent: string) => p === parent || p.startsWith(parent.endsWith(sep) ? parent : parent + sep);
  if (real === sep) return "is the root directory";
  if (inside(realHome, real)) return "is the home directory or contains it";
  for (const cred of CREDENTIAL_DIRS) {
    if (inside(real, join(realHome, cred))) return `lies in ~/${cred}`;
  }
  return undefined;
}

/**
 * The directories to pass to `cos mcp`: confined, de-duplicated, without bundles already
 * covered by an enclosing one, at most `MAX_SKILL_DIRS`. Refusals are logged, not fatal.
 */
export function confineSkillDirs(dirs: readonly string[], log: (msg: string) => void, home: string = homedir()): string[] {
  const accepted: { given: string; real: string }[] = [];
  for (const given of new Set(dirs)) {
    const why = refusal(given, home);
    if (why) {
      if (why !== "does not exist") log(`skill directory ${given} is not mirrored: it ${why}`);
      continue;
    }
    accepted.push({ given: resolve(given), real: realpathSync(given) });
  }
  accepted.sort((a, b) => a.real.length - b.real.length || a.real.localeCompare(b.real));
  const kept: { given: string; real: string }[] = [];
  for (const a of accepted) {
    if (kept.some((k) => a.real === k.real || a.real.startsWith(k.real + sep))) continue;
    kept.push(a);
  }
  if (kept.length > MAX_SKILL_DIRS) {
    log(`${kept.length} skill directories found; mirroring the first ${MAX_SKILL_DIRS}`);
  }
  return kept.slice(0, MAX_SKILL_DIRS).map((k) => k.given);
}
