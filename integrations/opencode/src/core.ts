// What both plugin entries share: options, the skill directories, the `cos mcp` child and its
// catalog, and what happens when OpenCode deletes a session.

import { resolveOptions, cosOptions, type PluginConfig } from "./options.js";
import { Sidecar, type McpTool } from "./sidecar.js";
import { confineSkillDirs, discoverSkillDirs, homeOf } from "./skills.js";
import { missingRoutes } from "./tools.js";

/** A started plugin instance. */
export interface Core {
  config: PluginConfig;
  project: string;
  sidecar: Sidecar;
  catalog: McpTool[];
  /** The skill directories `cos mcp` mirrors at attach. */
  skillDirs: string[];
  close(): Promise<void>;
  /** This session's bound sandbox id, if any (asks `sandbox_status`; allocates nothing). */
  boundSandbox(session: string): Promise<string | null>;
  /** This session's status as `sandbox_status` reports it (allocates nothing). */
  status(session: string, signal?: AbortSignal): Promise<Record<string, unknown>>;
  /**
   * OpenCode deleted `session`: destroy its owned sandbox and drop the binding (explicit
   * sandboxes, forks and processes are untouched: only the session binding is released).
   */
  sessionDeleted(session: string): Promise<SessionCleanup>;
  /** More skill directories became known (the host's configuration); see `Sidecar.respawnWith`. */
  addSkillDirs(dirs: readonly string[]): Promise<void>;
}

/** What the deletion of a session did. */
export interface SessionCleanup {
  session: string;
  /** The released sandbox, if one was bound. */
  sandbox: string | null;
  /** Destroyed (true), forgotten because it was gone already (false), or nothing bound. */
  destroyed: boolean;
  /** Why nothing could be done, when so. */
  error?: string;
}

/** Plugin id (both entries). */
export const PLUGIN_ID = "createos.sandbox";

/** Where the host says its skills are (V2 lists them; the classic host does not). */
export interface HostInfo {
  /** Skill bundle directories the host loads; undefined: discover them as OpenCode would. */
  skillDirs?: readonly string[];
  /** The worktree root (upward searches stop there). */
  worktree?: string;
}

/** Release retries while the session's last calls wind down (deletion aborts them). */
const RELEASE_TRIES = 6;
const RELEASE_BACKOFF_MS = 500;
/** Longest wait at unload for releases of deleted sessions. */
const UNLOAD_WAIT_MS = 30_000;

function textOf(res: { content?: { type: string; text?: unknown }[] }): string {
  return (res.content ?? [])
    .filter((c) => c.type === "text" && typeof c.text === "string")
    .map((c) => c.text as string)
    .join("\n");
}

function cosArgs(project: string, config: PluginConfig, skillDirs: readonly string[]): string[] {
  const options: Record<string, unknown> = cosOptions(config);
  if (config.syncSkills && skillDirs.length > 0) options.skillDirs = skillDirs;
  return ["mcp", "--project", project, "--options", JSON.stringify(options)];
}

/** Validate the options, start `cos mcp` for `project` and read its catalog. */
export async function startCore(
  options: unknown,
  project: string,
  log: (msg: string) => void,
  env: NodeJS.ProcessEnv = process.env,
  host: HostInfo = {},
): Promise<Core> {
  const config = resolveOptions(options, env);
  let skillDirs: string[] = [];
  if (config.syncSkills) {
    const loaded = host.skillDirs ?? discoverSkillDirs({ directory: project, worktree: host.worktree, env });
    skillDirs = confineSkillDirs([...loaded, ...config.skillDirs], log, homeOf(env));
  }
  const sidecar = new Sidecar(
    { command: config.bin, args: cosArgs(project, config, skillDirs), cwd: project, env: { ...env, NO_COLOR: "1" } },
    log,
  );
  let catalog: McpTool[];
  try {
    catalog = await sidecar.start();
  } catch (err) {
    await sidecar.close().catch(() => {});
    const hint =
      (err as NodeJS.ErrnoException)?.message?.includes("ENOENT") || String(err).includes("ENOENT")
        ? ` (is \`${config.bin}\` installed? set the plugin option "bin" or COS_BIN to its path)`
        : "";
    throw new Error(`CreateOS plugin: could not start \`${config.bin} mcp\`${hint}: ${(err as Error).message}`);
  }
  if (config.mode === "remote") {
    const missing = missingRoutes(catalog);
    if (missing.length > 0) {
      await sidecar.close().catch(() => {});
      throw new Error(
        `CreateOS plugin: remote mode needs \`${config.bin} mcp\` to serve the routed tools ${missing
          .map((m) => `native_${m}`)
          .join(", ")}, which this cos build does not; upgrade cos or use mode "local"`,
      );
    }
  }

  const status = async (session: string, signal?: AbortSignal) => {
    const res = await sidecar.call("sandbox_status", {}, { session, signal });
    const text = textOf(res);
    if (res.isError) throw new Error(text || "sandbox_status failed");
    return JSON.parse(text) as Record<string, unknown>;
  };

  /** Release a deleted session's sandbox: destroy it, or forget it when it is gone already. */
  const release = async (session: string): Promise<SessionCleanup> => {
    let last = "";
    for (let attempt = 0; attempt < RELEASE_TRIES; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, RELEASE_BACKOFF_MS * attempt));
      let res;
      try {
        res = await sidecar.call("sandbox_release", {}, { session });
      } catch (err) {
        return { session, sandbox: null, destroyed: false, error: (err as Error).message };
      }
      const text = textOf(res);
      if (!res.isError) {
        const body = JSON.parse(text) as { sandbox?: unknown; destroyed?: unknown };
        const sandbox = typeof body.sandbox === "string" ? body.sandbox : null;
        if (sandbox) log(`session ${session} was deleted; destroyed its sandbox ${sandbox}`);
        return { session, sandbox, destroyed: body.destroyed === true };
      }
      last = text;
      if (/in flight|allocating|being released/.test(text)) continue;
      if (/no longer exists|not found|404|destroyed|destroying|externally owned/i.test(text)) {
        // Gone already (deleted elsewhere), or not ours to destroy: only the binding is
        // left to drop.
        const forgot = await sidecar.call("sandbox_release", { forget: true }, { session }).catch(() => undefined);
        const body = forgot && !forgot.isError ? (JSON.parse(textOf(forgot)) as { sandbox?: unknown }) : {};
        return { session, sandbox: typeof body.sandbox === "string" ? body.sandbox : null, destroyed: false };
      }
      break;
    }
    log(`session ${session} was deleted, but its sandbox was not released: ${last}`);
    return { session, sandbox: null, destroyed: false, error: last };
  };

  // Deletions still releasing: unload waits for them, so a host that deletes a session and
  // then exits (`opencode session delete`) still gets the sandbox destroyed.
  const releasing = new Set<Promise<unknown>>();
  const track = <T>(p: Promise<T>): Promise<T> => {
    releasing.add(p);
    void p.finally(() => releasing.delete(p)).catch(() => {});
    return p;
  };

  const core: Core = {
    config,
    project,
    sidecar,
    catalog,
    skillDirs,
    async close() {
      if (releasing.size > 0) {
        let timer: NodeJS.Timeout | undefined;
        const limit = new Promise((r) => (timer = setTimeout(r, UNLOAD_WAIT_MS)));
        await Promise.race([Promise.allSettled([...releasing]), limit]);
        clearTimeout(timer);
      }
      await sidecar.close();
    },
    status,
    async boundSandbox(session) {
      try {
        const s = await status(session, AbortSignal.timeout(2000));
        return typeof s.sandbox === "string" ? s.sandbox : null;
      } catch {
        return null;
      }
    },
    sessionDeleted(session) {
      return track(release(session));
    },
    async addSkillDirs(dirs) {
      if (!config.syncSkills) return;
      const next = confineSkillDirs([...core.skillDirs, ...dirs], log, homeOf(env));
      if (next.length === core.skillDirs.length && next.every((d, i) => d === core.skillDirs[i])) return;
      if (await sidecar.respawnWith(cosArgs(project, config, next))) {
        core.skillDirs = next;
      } else {
        log(`skill directories ${dirs.join(", ")} take effect when OpenCode restarts (cos mcp is already in use)`);
      }
    },
  };
  return core;
}
