// The one `cos mcp` child of a plugin instance: started on load, started again on the next
// call if it died, stopped at unload.

import { cosBinary } from "./binary.js";
import { McpChild, SidecarExitedError, type ChildSpec, type McpCallResult, type McpProgress, type McpTool } from "./mcp.js";

/** `_meta` key that names the session of a `tools/call` (see `cos mcp`). */
export const SESSION_META_KEY = "createos/session";

/** Restarts allowed within `RESTART_WINDOW_MS` before the sidecar is declared broken. */
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 60_000;

/** Options of one call. */
export interface CallOptions {
  session: string;
  signal?: AbortSignal;
  onProgress?: (p: McpProgress) => void;
}

/** A supervised `cos mcp` child. */
export class Sidecar {
  private child?: McpChild;
  private starting?: Promise<McpChild>;
  private restarts: number[] = [];
  private closed = false;
  /** The catalog read at the first start. */
  tools: McpTool[] = [];
  /** The server's instructions from the first start. */
  instructions?: string;

  constructor(
    private readonly spec: ChildSpec,
    private readonly log: (msg: string) => void = () => {},
  ) {}

  /** Start the child and read its catalog. */
  async start(): Promise<McpTool[]> {
    const child = await this.ensure();
    this.tools = await child.listTools();
    this.instructions = child.instructions;
    return this.tools;
  }

  /** The pid of the running child, if any (tests use it). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Call `name` for `session`; a dead child is restarted first. */
  async call(name: string, args: Record<string, unknown>, options: CallOptions): Promise<McpCallResult> {
    const child = await this.ensure(options.signal);
    return child.callTool(name, args, { [SESSION_META_KEY]: options.session }, {
      signal: options.signal,
      onProgress: options.onProgress,
    });
  }

  /** Stop the child (stdin closed first so `cos mcp` shuts its runtime down cleanly). */
  async close(): Promise<void> {
    this.closed = true;
    const child = this.child ?? (await this.starting?.catch(() => undefined));
    this.child = undefined;
    await child?.stop();
  }

  private async ensure(signal?: AbortSignal): Promise<McpChild> {
    if (this.closed) throw new SidecarExitedError("the CreateOS plugin is unloading; cos mcp is stopped");
    if (this.child?.alive) return this.child;
    if (this.starting) return this.starting;
    const now = Date.now();
    this.restarts = this.restarts.filter((t) => now - t < RESTART_WINDOW_MS);
    if (this.child && this.restarts.length >= MAX_RESTARTS) {
      throw new SidecarExitedError(
        `cos mcp died ${MAX_RESTARTS} times within a minute; not restarting it. Last failure: ${this.child.stderr || "no stderr"}`,
      );
    }
    if (this.child) {
      this.restarts.push(now);
      this.log(`cos mcp is not running (${this.child.stderr.split("\n").pop() || "no stderr"}); restarting it`);
    }
    // The `cos` to run: COS_BIN, the "bin" option, the installed platform package, PATH.
    const child = new McpChild({ ...this.spec, command: cosBinary({ bin: this.spec.command, env: this.spec.env }) }, this.log);
    this.starting = child
      .start(signal)
      .then(() => {
        this.child = child;
        return child;
      })
      .catch(async (err: unknown) => {
        this.child = child;
        await child.stop(1000).catch(() => {});
        throw err instanceof SidecarExitedError ? err : new SidecarExitedError(`starting cos mcp failed: ${String(err)}`);
      })
      .finally(() => {
        this.starting = undefined;
      });
    const started = await this.starting;
    if (this.closed) {
      await started.stop();
      throw new SidecarExitedError("the CreateOS plugin is unloading; cos mcp is stopped");
    }
    return started;
  }
}
