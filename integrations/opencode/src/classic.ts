// The entry for OpenCode's published plugin API (`@opencode-ai/plugin`: a function from the
// plugin input and options to hooks), as `opencode-ai` on npm loads it.

import type { Hooks, Plugin, PluginInput } from "@opencode-ai/plugin";

import { COMMANDS, isOurCommand, runCommand } from "./commands.js";
import { contextText } from "./context.js";
import { startCore } from "./core.js";
import { deletedSessionId } from "./events.js";
import { configPathBundles, homeOf } from "./skills.js";
import { buildTools, invoker } from "./tools.js";

function logger(input: PluginInput): (msg: string) => void {
  return (msg) => {
    // Structured log through OpenCode when it offers one; stderr otherwise. Never stdout.
    const app = (input.client as unknown as { app?: { log?: (o: unknown) => Promise<unknown> } })?.app;
    if (app?.log) {
      app.log({ body: { service: "createos.sandbox", level: "info", message: msg } }).catch(() => {});
    } else {
      process.stderr.write(`[createos.sandbox] ${msg}\n`);
    }
  };
}

/** The prompt a command leaves for the model: the result, to be relayed as is. */
function relay(name: string, text: string): string {
  return (
    `The /${name} command has already been executed by the CreateOS plugin. ` +
    "Reply to the user with its result below, verbatim, and call no tools.\n\n" +
    text
  );
}

/** Classic OpenCode plugin: the `cos mcp` catalog as tools, remote routing, context, commands. */
export const CreateOSPlugin: Plugin = async (input, options) => {
  const log = logger(input);
  const core = await startCore(options, input.directory, log, process.env, { worktree: input.worktree });
  const tools = buildTools(core.catalog, core.config.mode, invoker(core.sidecar));
  const names = core.catalog.map((t) => t.name);
  const hooks: Hooks = {
    tool: tools,
    config: async (cfg) => {
      const c = cfg as { command?: Record<string, unknown>; skills?: { paths?: unknown } };
      // `skills.paths` of the configuration: OpenCode loads bundles from there too.
      const paths = Array.isArray(c.skills?.paths) ? (c.skills.paths as unknown[]) : [];
      if (paths.length > 0) await core.addSkillDirs(configPathBundles(paths, input.directory, homeOf(process.env)));
      c.command ??= {};
      for (const [name, description] of Object.entries(COMMANDS)) {
        // A user's own command of the same name wins.
        c.command[name] ??= { template: `Run the CreateOS /${name} command. $ARGUMENTS`, description };
      }
    },
    "command.execute.before": async (inp, out) => {
      if (!isOurCommand(inp.command)) return;
      const outcome = await runCommand(core.sidecar, inp.command, inp.arguments ?? "", inp.sessionID, core.config.mode);
      const parts = out.parts as unknown as Record<string, unknown>[];
      const text = relay(inp.command, outcome.text);
      const first = parts.find((p) => p.type === "text");
      const replacement = first ? { ...first, text } : { type: "text", text };
      parts.splice(0, parts.length, replacement);
    },
    "experimental.chat.system.transform": async (inp, out) => {
      const sandboxId = inp.sessionID ? await core.boundSandbox(inp.sessionID) : null;
      out.system.push(contextText({ config: core.config, project: core.project, tools: names, sandboxId }));
    },
    event: async ({ event }) => {
      const session = deletedSessionId(event);
      if (session) await core.sessionDeleted(session);
    },
    dispose: async () => {
      await core.close();
    },
  };
  return hooks;
};
