// The entry for OpenCode's V2 plugin API (`{id, setup(ctx)}`, plugins.md §4): tools through
// `ctx.tool.transform`, the per-turn text through the session `context` hook, commands
// through `ctx.command.transform`, the RPC contract (`./rpc.ts`) through `ctx.rpc.register`,
// session deletion through `ctx.event.subscribe`, skills from `ctx.skill.list()`, bindings in
// `ctx.storage` when offered, and a cleanup function that stops `cos mcp`.
// The V2 context is typed structurally here: the published `@opencode-ai/plugin` does not
// yet ship these domains' types, and the plugin refuses a context that lacks the ones it needs.

import { HostBindings, isHostStorage } from "./bindings.js";
import { COMMANDS, runCommand } from "./commands.js";
import { contextText } from "./context.js";
import { PLUGIN_ID, startCore, type Core } from "./core.js";
import { SESSION_DELETED, deletedSessionId } from "./events.js";
import { CreateOS, type CreateOSErrorType, type CreateOSHandlers } from "./rpc.js";
import { bundleOf } from "./skills.js";
import { NATIVE_PREFIX, ToolCallError, toReply, type ToolReply } from "./tools.js";

/** Tool context handed to `execute` by V2. */
export interface V2ToolContext {
  sessionID: string;
  signal?: AbortSignal;
  progress?: (metadata: Record<string, unknown>) => void;
}

/** A V2 tool definition. */
export interface V2ToolInfo {
  name: string;
  description?: string;
  input?: unknown;
  output?: unknown;
  options?: Record<string, unknown>;
  execute(input: Record<string, unknown>, context: V2ToolContext): Promise<unknown>;
}

/** The tool registry editor of `ctx.tool.transform`. */
export interface V2ToolEditor {
  namespace?(info: { name: string; description: string }): void;
  add(info: V2ToolInfo): void;
  update(id: string, mutate: (info: V2ToolInfo) => void): void;
}

/** The command registry editor of `ctx.command.transform`. */
export interface V2CommandEditor {
  add(info: {
    name: string;
    description?: string;
    execute(input: { sessionID: string; prompt?: string; messageID?: string }): Promise<unknown>;
  }): void;
}

/** The RPC handler context: `error(type, message, data)` builds a declared error. */
export interface V2RpcContext {
  error?(type: string, message: string, data?: unknown): unknown;
}

/** The parts of the V2 context this plugin uses. */
export interface V2Context {
  options?: Record<string, unknown>;
  location?: { directory?: string; worktree?: string; project?: { worktree?: string } };
  tool?: { transform(cb: (editor: V2ToolEditor) => void): Promise<unknown> | unknown };
  command?: { transform(cb: (editor: V2CommandEditor) => void): Promise<unknown> | unknown };
  session?: {
    hook?(name: "context", cb: (event: V2ContextEvent) => Promise<void> | void): Promise<unknown> | unknown;
    synthetic?(input: { sessionID: string; text: string; resume?: boolean }): Promise<unknown>;
    get?(input: { sessionID: string }): Promise<unknown>;
  };
  event?: { subscribe?(type?: string): AsyncIterable<unknown> | Promise<AsyncIterable<unknown>> };
  skill?: { list?(): Promise<readonly unknown[]> | readonly unknown[] };
  storage?: unknown;
  rpc?: { register?(contract: typeof CreateOS, handlers: CreateOSHandlers<V2RpcContext>): Promise<unknown> | unknown };
}

/** The `context` hook event: system texts can be pushed before dispatch. */
export interface V2ContextEvent {
  sessionID?: string;
  system: string[];
}

const NAMESPACE = "sandbox";

/**
 * V2 tool ids routed in remote mode → the `cos mcp` routed tool they run as. V2 names the
 * shell tool `shell` and the patch tool `patch` (plugins.md §2.4); the classic ids route too.
 * Ids the host does not have are ignored by `editor.update`.
 */
export const V2_ROUTES: Readonly<Record<string, string>> = {
  shell: "bash",
  bash: "bash",
  read: "read",
  write: "write",
  edit: "edit",
  patch: "apply_patch",
  apply_patch: "apply_patch",
  glob: "glob",
  grep: "grep",
};

function v2Result(reply: ToolReply): { content: string; metadata: Record<string, unknown> } {
  return { content: reply.output, metadata: reply.metadata ?? {} };
}

/** A shell call's input as `native_bash` takes it (V2's shell may name the directory `cwd`). */
function shellInput(input: Record<string, unknown>): Record<string, unknown> {
  if (input.cwd === undefined || input.workdir !== undefined) return input;
  const { cwd, ...rest } = input;
  return { ...rest, workdir: cwd };
}

/** A declared RPC error (through the host's factory when it has one). */
function rpcError(hctx: V2RpcContext | undefined, type: CreateOSErrorType, message: string, data: unknown): unknown {
  if (typeof hctx?.error === "function") return hctx.error(type, message, data);
  return Object.assign(new Error(message), { type, data });
}

/** Skill bundles the host lists, or undefined when it cannot list them. */
async function hostSkillDirs(ctx: V2Context): Promise<string[] | undefined> {
  if (typeof ctx.skill?.list !== "function") return undefined;
  const skills = await ctx.skill.list();
  return skills.map(bundleOf).filter((d): d is string => d !== undefined);
}

/** V2 setup: register everything, return the cleanup. */
export async function setup(ctx: V2Context): Promise<() => Promise<void>> {
  const missing = (["tool", "command", "session"] as const).filter((d) => !ctx[d]);
  if (missing.length > 0 || typeof ctx.session?.hook !== "function") {
    throw new Error(
      `CreateOS plugin: this OpenCode's V2 plugin context lacks ${missing.join(", ") || "session.hook"}; ` +
        "load the plugin through the classic `plugin` entry of opencode.json instead",
    );
  }
  const project = ctx.location?.directory ?? process.cwd();
  const log = (msg: string) => process.stderr.write(`[${PLUGIN_ID}] ${msg}\n`);
  const core = await startCore(ctx.options ?? {}, project, log, process.env, {
    skillDirs: await hostSkillDirs(ctx),
    worktree: ctx.location?.worktree ?? ctx.location?.project?.worktree,
  });
  const stored = isHostStorage(ctx.storage) ? new HostBindings(ctx.storage, project, log) : undefined;
  const remember = async (session: string) => {
    if (!stored) return;
    const status = await core.status(session).catch(() => undefined);
    if (status) await stored.sync(session, status);
  };

  const call = async (mcpName: string, input: Record<string, unknown>, tctx: V2ToolContext) => {
    const args = input ?? {};
    const result = await core.sidecar.call(mcpName, args, {
      session: tctx.sessionID,
      signal: tctx.signal,
      onProgress: (p) => tctx.progress?.({ progress: p.progress, total: p.total, message: p.message }),
    });
    const reply = toReply(mcpName, result);
    // A call on the session sandbox that reports a sandbox other than the recorded one: the
    // binding was made (or remade); record it.
    const used = reply.metadata?.sandboxId;
    if (stored && typeof used === "string" && args.sandbox_id === undefined && stored.recorded(tctx.sessionID) !== used) {
      await remember(tctx.sessionID);
    }
    return v2Result(reply);
  };

  let stopEvents = () => {};
  try {
    await ctx.tool!.transform((editor) => {
      if (core.config.mode === "remote") {
        for (const [id, routed] of Object.entries(V2_ROUTES)) {
          const mcpName = `${NATIVE_PREFIX}${routed}`;
          editor.update(id, (info) => {
            // The native output schema describes local resources; the remote result has none.
            delete info.output;
            info.execute = (input, tctx) => call(mcpName, routed === "bash" ? shellInput(input ?? {}) : input, tctx);
          });
        }
      }
      editor.namespace?.({ name: NAMESPACE, description: "CreateOS sandboxes: remote Linux execution, files, processes, networks, disks and desktops" });
      for (const entry of core.catalog) {
        if (!entry.name.startsWith(`${NAMESPACE}_`)) continue;
        editor.add({
          name: entry.name.slice(NAMESPACE.length + 1),
          description: entry.description ?? entry.name,
          input: entry.inputSchema,
          options: { namespace: NAMESPACE, codemode: true },
          execute: (input, tctx) => call(entry.name, input, tctx),
        });
      }
    });
    const names = core.catalog.map((t) => t.name);
    await ctx.session!.hook!("context", async (event) => {
      const sandboxId = event.sessionID ? await core.boundSandbox(event.sessionID) : null;
      event.system.push(contextText({ config: core.config, project, tools: names, sandboxId }));
    });
    await ctx.command!.transform((editor) => {
      for (const [name, description] of Object.entries(COMMANDS)) {
        editor.add({
          name,
          description,
          execute: async ({ sessionID, prompt }) => {
            const outcome = await runCommand(core.sidecar, name as keyof typeof COMMANDS, prompt ?? "", sessionID, core.config.mode);
            if (name === "sandbox-release" && outcome.ok) await stored?.put(sessionID, null);
            if (ctx.session?.synthetic) {
              await ctx.session.synthetic({ sessionID, text: outcome.text, resume: false });
            } else if (!outcome.ok) {
              throw new ToolCallError(outcome.text);
            }
          },
        });
      }
    });
    if (typeof ctx.rpc?.register === "function") await ctx.rpc.register(CreateOS, rpcHandlers(ctx, core, project, stored));
    stopEvents = watchDeletions(ctx, core, stored, log);
  } catch (err) {
    stopEvents();
    await core.close().catch(() => {});
    throw err;
  }
  return async () => {
    stopEvents();
    await core.close();
  };
}

/** Is `sessionID` a session of this plugin's location? Throws the declared errors if not. */
async function checkSession(ctx: V2Context, project: string, sessionID: string, hctx?: V2RpcContext): Promise<void> {
  let session: unknown;
  try {
    session = typeof ctx.session?.get === "function" ? await ctx.session.get({ sessionID }) : undefined;
  } catch {
    session = undefined;
  }
  if (!session || typeof session !== "object") {
    throw rpcError(hctx, "session_unavailable", `session ${sessionID} is not available`, { sessionID });
  }
  const s = session as { location?: { directory?: unknown }; directory?: unknown };
  const directory = s.location?.directory ?? s.directory;
  if (directory !== project) {
    throw rpcError(hctx, "location_mismatch", `session ${sessionID} belongs to another location than ${project}`, { sessionID });
  }
}

const str = (v: unknown) => (typeof v === "string" ? v : null);

function rpcHandlers(ctx: V2Context, core: Core, project: string, stored: HostBindings | undefined): CreateOSHandlers<V2RpcContext> {
  return {
    async status({ sessionID }, hctx) {
      await checkSession(ctx, project, sessionID, hctx);
      const s = await core.status(sessionID);
      return {
        sessionID,
        mode: core.config.mode,
        sandbox: str(s.sandbox),
        stored: str(s.stored),
        owned: typeof s.owned === "boolean" ? s.owned : null,
        initializing: s.initializing === true,
        cwd: typeof s.cwd === "string" ? s.cwd : core.config.cwd,
        persist: core.config.persist,
        inFlight: typeof s.in_flight === "number" ? s.in_flight : 0,
      };
    },
    async binding({ sessionID }, hctx) {
      await checkSession(ctx, project, sessionID, hctx);
      const s = await core.status(sessionID);
      if (stored) await stored.sync(sessionID, s);
      const host = stored ? await stored.get(sessionID) : undefined;
      return {
        sessionID,
        sandbox: str(s.sandbox),
        stored: str(s.stored),
        owned: typeof s.owned === "boolean" ? s.owned : (host?.owned ?? null),
        host: host?.sandbox ?? null,
      };
    },
    async release({ sessionID, destroy }, hctx) {
      await checkSession(ctx, project, sessionID, hctx);
      const res = await core.sidecar.call("sandbox_release", destroy ? {} : { forget: true }, { session: sessionID });
      const text = (res.content ?? []).map((c) => (typeof c.text === "string" ? c.text : "")).join("\n");
      // The refusal text goes through the declared error: OpenCode masks plain exceptions.
      if (res.isError) throw rpcError(hctx, "release_failed", text || "release failed", { sessionID, destroy });
      await stored?.put(sessionID, null);
      const body = JSON.parse(text) as { released?: unknown; sandbox?: unknown; destroyed?: unknown };
      return { released: body.released === true, sandbox: str(body.sandbox), destroyed: body.destroyed === true };
    },
  };
}

/** Release each deleted session's sandbox; returns the stop function. */
function watchDeletions(ctx: V2Context, core: Core, stored: HostBindings | undefined, log: (msg: string) => void): () => void {
  if (typeof ctx.event?.subscribe !== "function") {
    log("this host offers no event subscription: deleting a session leaves its sandbox until /sandbox-release");
    return () => {};
  }
  let stopped = false;
  let iterator: AsyncIterator<unknown> | undefined;
  const subscribe = ctx.event.subscribe.bind(ctx.event);
  void (async () => {
    try {
      const stream = await subscribe(SESSION_DELETED);
      iterator = stream[Symbol.asyncIterator]();
      while (!stopped) {
        const next = await iterator.next();
        if (next.done) break;
        const session = deletedSessionId(next.value);
        if (!session) continue;
        const done = await core.sessionDeleted(session);
        if (stored && !done.sandbox && !done.error) {
          // cos knew no binding (its state directory was lost): the host's record may.
          const host = await stored.get(session);
          if (host?.owned) {
            const res = await core.sidecar.call("sandbox_destroy", { sandbox_id: host.sandbox }, { session }).catch((e: Error) => e);
            if (res instanceof Error || res.isError) log(`destroying the stored sandbox ${host.sandbox} of deleted session ${session} failed`);
          }
        }
        await stored?.put(session, null);
      }
    } catch (err) {
      if (!stopped) log(`the session event stream ended: ${(err as Error).message}`);
    }
  })();
  return () => {
    stopped = true;
    void iterator?.return?.();
  };
}
