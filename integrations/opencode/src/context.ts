// The system text OpenCode sends with every turn: what the sandbox tools are for and, in
// remote mode, where the native tools run and how the paths map (plugins.md §2.11).

import type { PluginConfig } from "./options.js";
import { ROUTED_NATIVE } from "./tools.js";

/** What the text is built from. */
export interface ContextInput {
  config: PluginConfig;
  /** Host project directory (maps onto the guest cwd in remote mode). */
  project: string;
  /** Names of the tools `cos mcp` serves. */
  tools: string[];
  /** This session's sandbox id, when one is bound. */
  sandboxId?: string | null;
}

/** The per-turn context block. */
export function contextText(input: ContextInput): string {
  const { config, project, tools } = input;
  const has = (name: string) => tools.includes(name);
  const lines: string[] = ["# CreateOS sandboxes"];
  lines.push(
    "The `sandbox_*` tools run work on remote Linux machines (CreateOS sandboxes) through the `cos` sidecar. " +
      "This session gets its own sandbox, created on the first call that needs it and kept until /sandbox-release.",
  );
  const jobs: string[] = [];
  if (has("sandbox_run_code")) jobs.push("`sandbox_run_code` for one self-contained program");
  if (has("sandbox_offload")) jobs.push("`sandbox_offload` to build or test a copy of this project remotely");
  if (has("sandbox_fanout")) jobs.push("`sandbox_fanout` for several independent commands in parallel");
  if (jobs.length > 0) lines.push(`One-shot jobs get a fresh sandbox each: use ${jobs.join("; ")}.`);
  if (has("sandbox_process_start")) {
    lines.push("Servers, watchers and other long-running work go through `sandbox_process_start`, never a blocking command.");
  }
  lines.push(
    "Egress is open by default; `sandbox_firewall` accepts IP addresses and CIDR ranges only (hostname rules are not enforced by the platform). " +
      "Preview URLs and tunnels are unverified until you check them.",
  );
  if (config.mode === "remote") {
    lines.push(
      `Remote mode: ${ROUTED_NATIVE.map((t) => `\`${t}\``).join(", ")} run in this session's sandbox, not on this machine. ` +
        `The sandbox working directory is ${config.cwd}; paths under the local project ${project} map onto it, relative paths resolve under it, other absolute paths are sandbox paths.`,
    );
    lines.push(
      config.sync === "once"
        ? "The project was copied into a new sandbox once, before its first operation; later local edits are not copied."
        : "The sandbox working directory starts empty: nothing of the local project is copied unless you push or sync it.",
    );
    const moves = ["sandbox_push", "sandbox_pull", "sandbox_sync"].filter(has).map((t) => `\`${t}\``);
    lines.push(
      "Other tools (LSP, MCP servers, other plugins, OpenCode's own file views) still work on this machine" +
        (moves.length > 0 ? `; move files across with ${moves.join(", ")}.` : "."),
    );
  } else {
    lines.push("Local mode: OpenCode's own shell and file tools run on this machine; only `sandbox_*` tools reach sandboxes.");
  }
  if (input.sandboxId) lines.push(`This session's sandbox: ${input.sandboxId}.`);
  return lines.join("\n");
}
