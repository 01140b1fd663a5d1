// The one `cos mcp` child of a plugin instance: started on load, started again on the next
// call if it died, stopped at unload. The MCP side is the official TypeScript SDK
// (@modelcontextprotocol/sdk: `Client` over `StdioClientTransport`): it negotiates the
// protocol version, sends `notifications/cancelled` when a call's AbortSignal fires, and
// routes `notifications/progress` to the call's `onprogress`, which also restarts the call's
// idle timer (`resetTimeoutOnProgress`).

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { cosBinary } from "./binary.js";

/** `_meta` key that names the session of a `tools/call` (see `cos mcp`). */
export const SESSION_META_KEY = "createos/session";

/** Restarts allowed within `RESTART_WINDOW_MS` before the sidecar is declared broken. */
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 60_000;

/**
 * How long a call may go without an answer or a progress notification before it is
 * cancelled (the SDK's default request timeout; `cos mcp` sends progress at least every 5 s
 * on every call that can take longer than a second, and each one restarts this timer).
 */
export const IDLE_TIMEOUT_MS = 60_000;

/** How long `cos mcp` gets to shut down (cancel calls, stop transports, destroy sandboxes). */
const STOP_GRACE_MS = 10_000;

/** How many bytes of the child's stderr are kept for error messages. */
const STDERR_TAIL_BYTES = 4096;

/** Largest single message read from `cos mcp` (a screenshot is up to 10 MiB before base64). */
const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

/** A tool as `tools/list` describes it. */
export interface McpTool {
  name: string;
  description?: string;
  inputSchema: Record<string, unknown>;
}

/** One content block of a tool result. */
export interface McpContent {
  type: string;
  text?: string;
  data?: string;
  mimeType?: string;
  [key: string]: unknown;
}

/** The result of `tools/call`. */
export interface McpCallResult {
  content: McpContent[];
  isError?: boolean;
  structuredContent?: unknown;
  _meta?: Record<string, unknown>;
}

/** A progress notification of a running call. */
export interface McpProgress {
  progress: number;
  total?: number;
  message?: string;
}

/** What to run and how. */
export interface ChildSpec {
  command: string;
  args: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

/** The child is gone (exited, failed to start, or was stopped). */
export class SidecarExitedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SidecarExitedError";
  }
}

/** Options of one call. */
export interface CallOptions {
  session: string;
  signal?: AbortSignal;
  onProgress?: (p: McpProgress) => void;
}

/** Tunables (tests shorten them). */
export interface SidecarOptions {
  /** See `IDLE_TIMEOUT_MS`. */
  idleTimeoutMs?: number;
}

function abortError(signal: AbortSignal): Error {
  const reason = signal.reason;
  if (reason instanceof Error) return reason;
  const err = new Error(typeof reason === "string" ? reason : "aborted");
  err.name = "AbortError";
  return err;
}

function definedEnv(env: NodeJS.ProcessEnv | undefined): Record<string, string> | undefined {
  if (!env) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) out[k] = v;
  return out;
}

/** One running `cos mcp`: an SDK client connected to it over stdio. */
class Connection {
  readonly client = new Client({ name: "createos-opencode", version: "0.1.0" }, { capabilities: {} });
  readonly transport: StdioClientTransport;
  private stderrTail = "";
  private closedFlag = false;
  readonly closed: Promise<void>;

  constructor(private readonly spec: ChildSpec) {
    this.transport = new StdioClientTransport({
      command: spec.command,
      args: spec.args,
      cwd: spec.cwd,
      // The whole environment: `cos` needs its credentials, endpoint and state variables.
      env: definedEnv(spec.env ?? process.env),
      stderr: "pipe",
      maxBufferSize: MAX_MESSAGE_BYTES,
    });
    this.transport.stderr?.on("data", (chunk: Buffer | string) => {
      this.stderrTail = (this.stderrTail + chunk.toString()).slice(-STDERR_TAIL_BYTES);
    });
    this.closed = new Promise<void>((resolve) => {
      this.client.onclose = () => {
        this.closedFlag = true;
        resolve();
      };
    });
    // Protocol-level noise (a stray line on stdout, a failed write to a dead child) is
    // reported through pending requests or onclose; nothing to do here.
    this.client.onerror = () => {};
  }

  get alive(): boolean {
    return !this.closedFlag && this.transport.pid !== null;
  }

  get pid(): number | undefined {
    return this.alive ? (this.transport.pid ?? undefined) : undefined;
  }

  get stderr(): string {
    return this.stderrTail.trim();
  }

  async start(signal?: AbortSignal): Promise<void> {
    await this.client.connect(this.transport, { signal });
  }

  /** Why this child is not usable, with its last stderr lines. */
  async describeExit(): Promise<string> {
    // The last stderr chunks travel through a pipe: let them arrive.
    await new Promise((r) => setTimeout(r, 20));
    const what = `cos mcp (${this.spec.command}) ${this.closedFlag ? "exited" : "is not running"}`;
    const tail = this.stderr;
    return tail ? `${what}; its last stderr lines:\n${tail}` : what;
  }

  /**
   * Ask `cos mcp` to shut down (SIGTERM, which it handles like the end of its input: calls
   * cancelled, transports stopped, non-persistent sandboxes destroyed), give it `graceMs`,
   * then let the SDK's close finish the job (stdin closed, SIGTERM, SIGKILL).
   */
  async stop(graceMs = STOP_GRACE_MS): Promise<void> {
    const pid = this.transport.pid;
    if (this.alive && pid !== null) {
      try {
        process.kill(pid, "SIGTERM");
      } catch {
        // already gone
      }
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.closed, new Promise<void>((r) => (timer = setTimeout(r, graceMs)))]);
      clearTimeout(timer);
    }
    await this.client.close().catch(() => {});
  }
}

/** A supervised `cos mcp` child. */
export class Sidecar {
  private conn?: Connection;
  private starting?: Promise<Connection>;
  private restarts: number[] = [];
  private closed = false;
  private calls = 0;
  private readonly idleTimeoutMs: number;
  /** The catalog read at the first start. */
  tools: McpTool[] = [];
  /** The server's instructions from the first start. */
  instructions?: string;

  constructor(
    private spec: ChildSpec,
    private readonly log: (msg: string) => void = () => {},
    options: SidecarOptions = {},
  ) {
    this.idleTimeoutMs = options.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
  }

  /** Start the child and read its catalog. */
  async start(): Promise<McpTool[]> {
    const conn = await this.ensure();
    const tools: McpTool[] = [];
    let cursor: string | undefined;
    for (let page = 0; ; page++) {
      if (page === 100) throw new Error("tools/list did not end after 100 pages");
      const res = await conn.client.listTools(cursor ? { cursor } : undefined, { timeout: this.idleTimeoutMs });
      tools.push(...(res.tools as McpTool[]));
      if (!res.nextCursor) break;
      cursor = res.nextCursor;
    }
    this.tools = tools;
    this.instructions = conn.client.getInstructions();
    return this.tools;
  }

  /** The pid of the running child, if any (tests use it). */
  get pid(): number | undefined {
    return this.conn?.pid;
  }

  /** Has any tool been called yet (then the child holds session state)? */
  get used(): boolean {
    return this.calls > 0;
  }

  /**
   * Replace the child's arguments before its first call (the skill directories can grow
   * once the host's configuration is known). A running child is stopped; the next call
   * starts one with the new arguments. Refused (false) once a call was made.
   */
  async respawnWith(args: string[]): Promise<boolean> {
    if (this.used || this.closed) return false;
    this.spec = { ...this.spec, args };
    const conn = this.conn ?? (await this.starting?.catch(() => undefined));
    this.conn = undefined;
    await conn?.stop();
    return true;
  }

  /** Call `name` for `session`; a dead child is restarted first. */
  async call(name: string, args: Record<string, unknown>, options: CallOptions): Promise<McpCallResult> {
    const { signal, onProgress } = options;
    if (signal?.aborted) throw abortError(signal);
    const conn = await this.ensure(signal);
    this.calls++;
    try {
      const result = await conn.client.callTool(
        { name, arguments: args, _meta: { [SESSION_META_KEY]: options.session } },
        undefined,
        {
          signal,
          // Always ask for progress: it keeps long calls alive and feeds OpenCode's metadata.
          onprogress: (p) => onProgress?.({ progress: p.progress, total: p.total, message: p.message }),
          resetTimeoutOnProgress: true,
          timeout: this.idleTimeoutMs,
        },
      );
      return result as unknown as McpCallResult;
    } catch (err) {
      if (signal?.aborted) throw abortError(signal);
      if (!conn.alive) throw new SidecarExitedError(await conn.describeExit());
      if (err instanceof McpError && err.code === ErrorCode.RequestTimeout) {
        throw new Error(
          `${name}: cos mcp sent neither a result nor progress for ${this.idleTimeoutMs / 1000} s; the call was cancelled`,
          { cause: err },
        );
      }
      throw err;
    }
  }

  /** Stop the child (it shuts its runtime down cleanly first). */
  async close(): Promise<void> {
    this.closed = true;
    const conn = this.conn ?? (await this.starting?.catch(() => undefined));
    this.conn = undefined;
    await conn?.stop();
  }

  private async ensure(signal?: AbortSignal): Promise<Connection> {
    if (this.closed) throw new SidecarExitedError("the CreateOS plugin is unloading; cos mcp is stopped");
    if (this.conn?.alive) return this.conn;
    if (this.starting) return this.starting;
    const now = Date.now();
    this.restarts = this.restarts.filter((t) => now - t < RESTART_WINDOW_MS);
    if (this.conn && this.restarts.length >= MAX_RESTARTS) {
      throw new SidecarExitedError(
        `cos mcp died ${MAX_RESTARTS} times within a minute; not restarting it. Last failure: ${this.conn.stderr || "no stderr"}`,
      );
    }
    if (this.conn) {
      this.restarts.push(now);
      this.log(`cos mcp is not running (${this.conn.stderr.split("\n").pop() || "no stderr"}); restarting it`);
    }
    // The `cos` to run: COS_BIN, the "bin" option, the installed platform package, PATH.
    const conn = new Connection({ ...this.spec, command: cosBinary({ bin: this.spec.command, env: this.spec.env }) });
    this.starting = conn
      .start(signal)
      .then(() => {
        this.conn = conn;
        return conn;
      })
      .catch(async (err: unknown) => {
        this.conn = conn;
        const why = conn.alive ? String((err as Error)?.message ?? err) : await conn.describeExit();
        await conn.stop(1000).catch(() => {});
        if (signal?.aborted) throw abortError(signal);
        throw new SidecarExitedError(
          (err as NodeJS.ErrnoException)?.code === "ENOENT" || String(err).includes("ENOENT")
            ? `cos mcp could not be started: ${String((err as Error)?.message ?? err)}`
            : `starting cos mcp failed: ${why}`,
        );
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
