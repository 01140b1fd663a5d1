// The entry for OpenCode's V2 plugin API (`{id, setup(ctx)}`, plugins.md §4): tools through
// `ctx.tool.transform`, the per-turn text through the session `context` hook, commands
// through `ctx.command.transform`, and a cleanup function that stops `cos mcp`.
// The V2 context is typed structurally here: the published `@opencode-ai/plugin` does not
// yet ship these domains' types, and the plugin refuses a context that lacks them.

import { COMMANDS, runCommand } from "./commands.js";
import { contextText } from "./context.js";
import { PLUGIN_ID, startCore } from "./core.js";
import { NATIVE_PREFIX, ROUTED_NATIVE, ToolCallError, toReply, type ToolReply } from "./tools.js";

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

/** The parts of the V2 context this plugin uses. */
export interface V2Context {
  options?: Record<string, unknown>;
  location?: { directory?: string };
  tool?: { transform(cb: (editor: V2ToolEditor) => void): Promise<unknown> | unknown };
  command?: { transform(cb: (editor: V2CommandEditor) => void): Promise<unknown> | unknown };
  session?: {
    hook?(name: "context", cb: (event: V2ContextEvent) => Promise<void> | void): Promise<unknown> | unknown;
    synthetic?(input: { sessionID: string; text: string; resume?: boolean }): Promise<unknown>;
  };
}

/** The `context` hook event: system texts can be pushed before dispatch. */
export interface V2ContextEvent {
  sessionID?: string;
  system: string[];
}

const NAMESPACE = "sandbox";

function v2Result(reply: ToolReply): { content: string; metadata: Record<string, unknown> } {
  return { content: reply.output, metadata: reply.metadata ?? {} };
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
  const core = await startCore(ctx.options ?? {}, project, (msg) => process.stderr.write(`[${PLUGIN_ID}] ${msg}\n`));
  const call = async (mcpName: string, input: Record<string, unknown>, tctx: V2ToolContext) => {
    const result = await core.sidecar.call(mcpName, input ?? {}, {
      session: tctx.sessionID,
      signal: tctx.signal,
      onProgress: (p) => tctx.progress?.({ progress: p.progress, total: p.total, message: p.message }),
    });
    return v2Result(toReply(mcpName, result));
  };
  try {
    await ctx.tool!.transform((editor) => {
      if (core.config.mode === "remote") {
        for (const id of ROUTED_NATIVE) {
          const mcpName = `${NATIVE_PREFIX}${id}`;
          editor.update(id, (info) => {
            // The native output schema describes local resources; the remote result has none.
            delete info.output;
            info.execute = (input, tctx) => call(mcpName, input, tctx);
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
            if (ctx.session?.synthetic) {
              await ctx.session.synthetic({ sessionID, text: outcome.text, resume: false });
            } else if (!outcome.ok) {
              throw new ToolCallError(outcome.text);
            }
          },
        });
      }
    });
  } catch (err) {
    await core.close().catch(() => {});
    throw err;
  }
  return () => core.close();
}
