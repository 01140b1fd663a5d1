// The `cos mcp` catalog as OpenCode tools: each MCP tool becomes a tool whose execute
// forwards the call with the OpenCode session id and abort signal. In remote mode the
// routed tools (`native_<id>`) are registered under OpenCode's own ids (`bash`, `read`, …),
// which replaces the local executors.

import { relative, resolve } from "node:path";

import type { ToolContext, ToolDefinition } from "@opencode-ai/plugin";

import { objectShape } from "./schema.js";
import type { McpCallResult, McpTool, Sidecar } from "./sidecar.js";

/** MCP name prefix of the routed native tools. */
export const NATIVE_PREFIX = "native_";

/** OpenCode's native tools that remote mode routes (the ids OpenCode registers them under). */
export const ROUTED_NATIVE = ["bash", "read", "write", "edit", "apply_patch", "glob", "grep"] as const;

/** What a tool's execute returns to OpenCode. */
export interface ToolReply {
  title?: string;
  output: string;
  metadata?: Record<string, unknown>;
  attachments?: { type: "file"; mime: string; url: string; filename?: string }[];
}

/** A failed tool call: OpenCode shows the message to the model as the tool's error. */
export class ToolCallError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ToolCallError";
  }
}

/** Turn an MCP result into OpenCode's tool result; an MCP error result throws. */
export function toReply(name: string, result: McpCallResult): ToolReply {
  const texts: string[] = [];
  const attachments: NonNullable<ToolReply["attachments"]> = [];
  for (const block of result.content ?? []) {
    if (block.type === "text" && typeof block.text === "string") {
      texts.push(block.text);
    } else if (block.type === "image" && typeof block.data === "string") {
      const mime = typeof block.mimeType === "string" ? block.mimeType : "image/png";
      attachments.push({ type: "file", mime, url: `data:${mime};base64,${block.data}` });
    } else {
      texts.push(JSON.stringify(block));
    }
  }
  const output = texts.join("\n");
  if (result.isError) throw new ToolCallError(output || `${name} failed`);
  const reply: ToolReply = { title: name, output, metadata: { ...(result._meta ?? {}) } };
  if (attachments.length > 0) {
    reply.attachments = attachments;
    if (!output) reply.output = `${attachments.length} image(s) attached`;
  }
  return reply;
}

/** A runner of one MCP tool for one OpenCode session. */
export type Invoke = (mcpName: string, args: Record<string, unknown>, ctx: ToolContext) => Promise<ToolReply>;

/** Forward a call to the sidecar: session id in `_meta`, abort → MCP cancellation. */
export function invoker(sidecar: Sidecar): Invoke {
  return async (mcpName, args, ctx) => {
    const result = await sidecar.call(mcpName, args ?? {}, {
      session: ctx.sessionID,
      signal: ctx.abort,
      onProgress: (p) => {
        const title = p.message ?? (p.total ? `${p.progress}/${p.total}` : `${p.progress}`);
        try {
          ctx.metadata({ title, metadata: { progress: p.progress, total: p.total } });
        } catch {
          // A finished call may refuse late progress; it carries nothing essential.
        }
      },
    });
    return toReply(mcpName, result);
  };
}

/** The OpenCode id a catalog entry is registered under, or undefined to skip it. */
export function exposedName(mcpName: string, mode: "local" | "remote"): string | undefined {
  if (mcpName.startsWith(NATIVE_PREFIX)) {
    if (mode !== "remote") return undefined;
    const id = mcpName.slice(NATIVE_PREFIX.length);
    return (ROUTED_NATIVE as readonly string[]).includes(id) ? id : undefined;
  }
  return mcpName;
}

/** Routed native tools that remote mode needs but the catalog lacks. */
export function missingRoutes(catalog: McpTool[]): string[] {
  const names = new Set(catalog.map((t) => t.name));
  return ROUTED_NATIVE.filter((id) => !names.has(`${NATIVE_PREFIX}${id}`));
}

/**
 * The permission OpenCode's own tool `id` asks for, so the user's permission rules
 * (`permission.bash`, `permission.edit`, …) still apply once the tool is routed.
 */
export function routedPermission(id: string, args: Record<string, unknown>) {
  const str = (k: string) => (typeof args[k] === "string" ? (args[k] as string) : "");
  switch (id) {
    case "bash":
      return { permission: "bash", patterns: [str("command")], always: [`${str("command").split(/\s+/)[0]} *`] };
    case "write":
    case "edit":
      return { permission: "edit", patterns: [str("filePath")], always: ["*"] };
    case "apply_patch":
      return { permission: "edit", patterns: ["*"], always: ["*"] };
    case "read":
      return { permission: "read", patterns: [str("filePath")], always: ["*"] };
    default:
      return { permission: id, patterns: [str("pattern")], always: ["*"] };
  }
}

/** Catalog tools that move files between this machine and a sandbox, by MCP name. */
const TRANSFERS: Record<string, "read" | "edit"> = {
  // push reads a local file and sends it away: OpenCode's `read` rules decide
  sandbox_push: "read",
  // pull writes a local file: OpenCode's `edit` rules decide
  sandbox_pull: "edit",
};

/**
 * The permission a push or pull asks for, with the local path as pattern the way OpenCode's
 * own tools spell it: `read` with the absolute path, `edit` with the path relative to the
 * worktree. Undefined for other tools.
 */
export function transferPermission(mcpName: string, args: Record<string, unknown>, where: { directory: string; worktree: string }) {
  const permission = TRANSFERS[mcpName];
  if (!permission) return undefined;
  const local = typeof args.local_path === "string" ? args.local_path : "";
  const absolute = resolve(where.directory, local);
  if (permission === "read") return { permission, patterns: [absolute], always: ["*"] };
  // (a path outside the worktree stays `../…`, like OpenCode's edit; cos refuses it anyway)
  const inWorktree = relative(where.worktree || where.directory, absolute);
  return { permission, patterns: [inWorktree || "."], always: ["*"] };
}

/** One OpenCode tool definition per exposed catalog entry, keyed by OpenCode id. */
export function buildTools(catalog: McpTool[], mode: "local" | "remote", invoke: Invoke) {
  // Plain `{description, args, execute}` objects: what `tool()` of @opencode-ai/plugin returns
  // (it is the identity), without loading that package at run time.
  const tools: Record<string, ToolDefinition> = {};
  for (const entry of catalog) {
    const id = exposedName(entry.name, mode);
    if (!id) continue;
    const shape = objectShape(entry.inputSchema ?? {}, entry.name);
    const definition: ToolDefinition = {
      description: entry.description ?? entry.name,
      args: shape,
      execute: async (args, ctx) => {
        const input = args as Record<string, unknown>;
        if (id !== entry.name) {
          // A routed native tool: ask as the native one would (rules allow, deny or prompt).
          await ctx.ask({ ...routedPermission(id, input), metadata: { remote: true } });
        } else {
          // Push and pull touch local files: the user's read/edit rules apply to them too.
          const transfer = transferPermission(entry.name, input, ctx);
          if (transfer) await ctx.ask({ ...transfer, metadata: { sandbox: input.sandbox_id, remote: input.remote_path } });
        }
        return invoke(entry.name, input, ctx);
      },
    };
    tools[id] = definition;
  }
  return tools;
}
