// A small MCP client over the stdio of one child process (newline-delimited JSON-RPC 2.0).
// It speaks only what the plugin needs: initialize, tools/list, tools/call with `_meta`,
// progress notifications and notifications/cancelled.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";

/** MCP protocol revision the client asks for; the server answers with the one it speaks. */
export const PROTOCOL_VERSION = "2025-06-18";

/** How many bytes of the child's stderr are kept for error messages. */
const STDERR_TAIL_BYTES = 4096;

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

/** A JSON-RPC error answer of the server. */
export class McpRpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = "McpRpcError";
  }
}

interface Pending {
  resolve(value: unknown): void;
  reject(err: Error): void;
  onProgress?: (p: McpProgress) => void;
  progressToken?: string;
}

/** Options of one request. */
export interface RequestOptions {
  signal?: AbortSignal;
  onProgress?: (p: McpProgress) => void;
}

function abortError(signal: AbortSignal): Error {
  const reason = signal.reason;
  if (reason instanceof Error) return reason;
  const err = new Error(typeof reason === "string" ? reason : "aborted");
  err.name = "AbortError";
  return err;
}

/**
 * One running MCP server child. `start()` spawns it and completes the handshake; when the
 * child dies every pending request fails with `SidecarExitedError` and `alive` turns false
 * (the owner decides whether to start a new one).
 */
export class McpChild {
  private child?: ChildProcessWithoutNullStreams;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly byToken = new Map<string, Pending>();
  private buffer = "";
  private stderrTail = "";
  private exitInfo?: string;
  private exited?: Promise<void>;
  /** Instructions the server sent at initialize. */
  instructions?: string;
  /** Server name and version from initialize. */
  serverInfo?: { name?: string; version?: string };

  constructor(
    private readonly spec: ChildSpec,
    private readonly log: (msg: string) => void = () => {},
  ) {}

  /** True while the child runs and has not been stopped. */
  get alive(): boolean {
    return this.child !== undefined && this.exitInfo === undefined;
  }

  /** The tail of what the child wrote to stderr (for error messages). */
  get stderr(): string {
    return this.stderrTail.trim();
  }

  /** Spawn the child and run the MCP handshake. */
  async start(signal?: AbortSignal): Promise<void> {
    const child = spawn(this.spec.command, this.spec.args, {
      cwd: this.spec.cwd,
      env: this.spec.env,
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.child = child;
    this.exited = new Promise<void>((resolve) => {
      let done = false;
      const finish = (info: string) => {
        if (done) return;
        done = true;
        this.exitInfo = info;
        this.failAll(new SidecarExitedError(this.describeExit()));
        resolve();
      };
      child.on("error", (err) => finish(`could not be started: ${err.message}`));
      child.on("exit", (code, sig) => finish(sig ? `was killed by ${sig}` : `exited with code ${code}`));
    });
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => this.onStdout(chunk));
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL_BYTES);
    });
    // A write to a dead child must not crash the host: the exit handler reports it.
    child.stdin.on("error", () => {});
    const init = (await this.request(
      "initialize",
      {
        protocolVersion: PROTOCOL_VERSION,
        capabilities: {},
        clientInfo: { name: "createos-opencode", version: "0.1.0" },
      },
      { signal },
    )) as { instructions?: string; serverInfo?: { name?: string; version?: string } };
    this.instructions = init?.instructions;
    this.serverInfo = init?.serverInfo;
    this.notify("notifications/initialized", {});
  }

  /** Every tool of the server (follows `nextCursor`). */
  async listTools(signal?: AbortSignal): Promise<McpTool[]> {
    const tools: McpTool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 100; page++) {
      const res = (await this.request("tools/list", cursor ? { cursor } : {}, { signal })) as {
        tools?: McpTool[];
        nextCursor?: string;
      };
      tools.push(...(res.tools ?? []));
      if (!res.nextCursor) return tools;
      cursor = res.nextCursor;
    }
    throw new Error("tools/list did not end after 100 pages");
  }

  /** Call a tool with `meta` in the request's `_meta`. */
  async callTool(
    name: string,
    args: Record<string, unknown>,
    meta: Record<string, unknown>,
    options: RequestOptions = {},
  ): Promise<McpCallResult> {
    return (await this.request("tools/call", { name, arguments: args, _meta: meta }, options)) as McpCallResult;
  }

  /** Send a request and wait for its answer; an abort sends notifications/cancelled. */
  request(method: string, params: Record<string, unknown>, options: RequestOptions = {}): Promise<unknown> {
    const { signal, onProgress } = options;
    if (signal?.aborted) return Promise.reject(abortError(signal));
    if (!this.child || this.exitInfo !== undefined) {
      return Promise.reject(new SidecarExitedError(this.describeExit()));
    }
    const id = this.nextId++;
    let progressToken: string | undefined;
    if (onProgress) {
      progressToken = `p${id}`;
      const meta = (params._meta as Record<string, unknown> | undefined) ?? {};
      params = { ...params, _meta: { ...meta, progressToken } };
    }
    return new Promise<unknown>((resolve, reject) => {
      const onAbort = () => {
        if (!this.pending.has(id)) return;
        this.forget(id);
        this.notify("notifications/cancelled", { requestId: id, reason: "cancelled by OpenCode" });
        reject(abortError(signal!));
      };
      const entry: Pending = {
        resolve: (v) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(v);
        },
        reject: (e) => {
          signal?.removeEventListener("abort", onAbort);
          reject(e);
        },
        onProgress,
        progressToken,
      };
      this.pending.set(id, entry);
      if (progressToken) this.byToken.set(progressToken, entry);
      signal?.addEventListener("abort", onAbort, { once: true });
      this.send({ jsonrpc: "2.0", id, method, params });
    });
  }

  /** Close stdin (the server's signal to shut down), then SIGTERM, then SIGKILL. */
  async stop(graceMs = 10_000): Promise<void> {
    const child = this.child;
    if (!child || this.exitInfo !== undefined) return;
    child.stdin.end();
    if (await this.waitExit(graceMs)) return;
    this.log(`cos mcp did not exit ${graceMs} ms after stdin closed; sending SIGTERM`);
    child.kill("SIGTERM");
    if (await this.waitExit(3000)) return;
    child.kill("SIGKILL");
    await this.waitExit(3000);
  }

  /** The child's pid, while it runs. */
  get pid(): number | undefined {
    return this.alive ? this.child?.pid : undefined;
  }

  private async waitExit(ms: number): Promise<boolean> {
    if (!this.exited) return true;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    });
    const result = await Promise.race([this.exited.then(() => true as const), timeout]);
    clearTimeout(timer);
    return result;
  }

  private describeExit(): string {
    const what = `cos mcp (${this.spec.command}) ${this.exitInfo ?? "is not running"}`;
    const tail = this.stderr;
    return tail ? `${what}; its last stderr lines:\n${tail}` : what;
  }

  private forget(id: number): void {
    const entry = this.pending.get(id);
    this.pending.delete(id);
    if (entry?.progressToken) this.byToken.delete(entry.progressToken);
  }

  private failAll(err: Error): void {
    const entries = [...this.pending.values()];
    this.pending.clear();
    this.byToken.clear();
    for (const e of entries) e.reject(err);
  }

  private send(message: unknown): void {
    if (!this.child || this.exitInfo !== undefined) return;
    this.child.stdin.write(JSON.stringify(message) + "\n");
  }

  private notify(method: string, params: Record<string, unknown>): void {
    this.send({ jsonrpc: "2.0", method, params });
  }

  private onStdout(chunk: string): void {
    // Only the new chunk can hold the end of the pending line (results can be megabytes).
    if (!chunk.includes("\n")) {
      this.buffer += chunk;
      return;
    }
    this.buffer += chunk;
    let nl: number;
    while ((nl = this.buffer.indexOf("\n")) >= 0) {
      const line = this.buffer.slice(0, nl).trim();
      this.buffer = this.buffer.slice(nl + 1);
      if (!line) continue;
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(line) as Record<string, unknown>;
      } catch {
        this.log(`cos mcp wrote a line that is not JSON-RPC: ${line.slice(0, 200)}`);
        continue;
      }
      this.onMessage(msg);
    }
  }

  private onMessage(msg: Record<string, unknown>): void {
    const hasId = typeof msg.id === "number" || typeof msg.id === "string";
    if (hasId && typeof msg.method === "string") {
      // A request from the server: answer ping, refuse the rest (we offer no client features).
      if (msg.method === "ping") this.send({ jsonrpc: "2.0", id: msg.id, result: {} });
      else this.send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: `method not supported: ${msg.method}` } });
      return;
    }
    if (hasId) {
      const id = Number(msg.id);
      const entry = this.pending.get(id);
      if (!entry) return; // a late answer to a cancelled request
      this.forget(id);
      if (msg.error && typeof msg.error === "object") {
        const e = msg.error as { code?: number; message?: string; data?: unknown };
        entry.reject(new McpRpcError(e.code ?? -32603, e.message ?? "unknown error", e.data));
      } else {
        entry.resolve(msg.result);
      }
      return;
    }
    if (msg.method === "notifications/progress" && msg.params && typeof msg.params === "object") {
      const p = msg.params as { progressToken?: unknown; progress?: number; total?: number; message?: string };
      const entry = this.byToken.get(String(p.progressToken));
      entry?.onProgress?.({ progress: p.progress ?? 0, total: p.total, message: p.message });
    }
    // Other notifications (logging, list_changed) carry nothing the plugin acts on.
  }
}
