// What both plugin entries share: options, the `cos mcp` child and its catalog.

import { resolveOptions, cosOptions, type PluginConfig } from "./options.js";
import { Sidecar } from "./sidecar.js";
import { missingRoutes } from "./tools.js";
import type { McpTool } from "./mcp.js";

/** A started plugin instance. */
export interface Core {
  config: PluginConfig;
  project: string;
  sidecar: Sidecar;
  catalog: McpTool[];
  close(): Promise<void>;
  /** This session's bound sandbox id, if any (asks `sandbox_status`; allocates nothing). */
  boundSandbox(session: string): Promise<string | null>;
}

/** Plugin id (both entries). */
export const PLUGIN_ID = "createos.sandbox";

/** Validate the options, start `cos mcp` for `project` and read its catalog. */
export async function startCore(
  options: unknown,
  project: string,
  log: (msg: string) => void,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Core> {
  const config = resolveOptions(options, env);
  const args = ["mcp", "--project", project, "--options", JSON.stringify(cosOptions(config))];
  const sidecar = new Sidecar({ command: config.bin, args, cwd: project, env: { ...env, NO_COLOR: "1" } }, log);
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
  return {
    config,
    project,
    sidecar,
    catalog,
    close: () => sidecar.close(),
    async boundSandbox(session) {
      try {
        const res = await sidecar.call("sandbox_status", {}, { session, signal: AbortSignal.timeout(2000) });
        const text = res.content?.find((c) => c.type === "text")?.text;
        if (res.isError || typeof text !== "string") return null;
        const status = JSON.parse(text) as { sandbox?: unknown };
        return typeof status.sandbox === "string" ? status.sandbox : null;
      } catch {
        return null;
      }
    },
  };
}
