// `/sandbox` (this session's binding) and `/sandbox-release [forget]` (destroy the session
// sandbox, or only drop the binding). Both run in the plugin, through `cos mcp`.

import type { Sidecar } from "./sidecar.js";

/** The commands: name → description. */
export const COMMANDS = {
  sandbox: "Show this session's CreateOS sandbox (id, whether it is being created, mode).",
  "sandbox-release": "Destroy this session's CreateOS sandbox; `/sandbox-release forget` only drops the binding.",
} as const;

/** Is `name` one of ours? */
export function isOurCommand(name: string): name is keyof typeof COMMANDS {
  return Object.prototype.hasOwnProperty.call(COMMANDS, name);
}

/** What a command did, as text for the user. */
export interface CommandOutcome {
  ok: boolean;
  text: string;
}

function resultText(content: { type: string; text?: unknown }[] | undefined): string {
  return (content ?? [])
    .filter((c) => c.type === "text" && typeof c.text === "string")
    .map((c) => c.text as string)
    .join("\n");
}

/** Run `/sandbox` or `/sandbox-release` for `session`. Never throws: failures are outcomes. */
export async function runCommand(
  sidecar: Sidecar,
  name: keyof typeof COMMANDS,
  argText: string,
  session: string,
  mode: string,
): Promise<CommandOutcome> {
  const words = argText.trim().split(/\s+/).filter(Boolean);
  try {
    if (name === "sandbox") {
      if (words.length > 0) return { ok: false, text: "usage: /sandbox (takes no arguments)" };
      const res = await sidecar.call("sandbox_status", {}, { session });
      const body = resultText(res.content);
      if (res.isError) return { ok: false, text: `CreateOS status failed: ${body}` };
      return { ok: true, text: `CreateOS sandbox (mode: ${mode}):\n${body}` };
    }
    if (words.length > 1 || (words.length === 1 && words[0] !== "forget")) {
      return { ok: false, text: "usage: /sandbox-release [forget]" };
    }
    const forget = words[0] === "forget";
    const res = await sidecar.call("sandbox_release", forget ? { forget: true } : {}, { session });
    const body = resultText(res.content);
    if (res.isError) return { ok: false, text: `CreateOS release refused: ${body}` };
    return {
      ok: true,
      text: forget
        ? `Forgot this session's sandbox binding (the sandbox keeps running):\n${body}`
        : `Released this session's sandbox:\n${body}`,
    };
  } catch (err) {
    return { ok: false, text: `CreateOS /${name} failed: ${(err as Error).message}` };
  }
}
