#!/usr/bin/env node
// A stand-in for `cos mcp` in the unit tests: a real child process speaking MCP over stdio.
// It logs what it received (one JSON line per event) to $FAKE_COS_LOG so tests can check what
// the plugin sent. Tools:
//   sandbox_status      {"session": <meta session>, "sandbox": null}
//   sandbox_echo        echoes its arguments and the request's _meta
//   sandbox_progress    two progress notifications, then "done"
//   sandbox_slow        answers only when cancelled (logs the cancellation) or after 30 s
//   sandbox_fail        an error result
//   sandbox_image       a text and an image block
//   sandbox_die         exits the process with code 3
//   sandbox_release     {"released": true, "sandbox": "sb-fake", "destroyed": !forget, "forget": <bool>};
//                       FAKE_COS_RELEASE=gone: a destroy fails as for a sandbox deleted elsewhere;
//                       FAKE_COS_RELEASE=busy: the first two are refused (calls in flight);
//                       FAKE_COS_RELEASE=none: nothing is bound
//   sandbox_destroy     {"destroyed": <sandbox_id>}
//   FAKE_COS_BOUND=<id> makes sandbox_status report that sandbox as bound (owned)
//   sandbox_big         a 3 MiB text result (framing across many pipe chunks)
//   native_<id>         (only with "mode":"remote" in --options, unless FAKE_COS_NO_NATIVE=1)
// Two tools/list pages, to exercise the cursor.

import { appendFileSync } from "node:fs";

const logFile = process.env.FAKE_COS_LOG;
const log = (event) => {
  if (logFile) appendFileSync(logFile, JSON.stringify({ pid: process.pid, ...event }) + "\n");
};

const argv = process.argv.slice(2);
log({ event: "start", argv });
if (argv[0] !== "mcp") {
  process.stderr.write(`fake cos: expected the mcp subcommand, got ${argv.join(" ")}\n`);
  process.exit(2);
}
if (process.env.FAKE_COS_FAIL_START) {
  process.stderr.write("error: invalid tool configuration: option \"shape\": bad shape\n");
  process.exit(2);
}
const optionsAt = argv.indexOf("--options");
const options = optionsAt >= 0 ? JSON.parse(argv[optionsAt + 1]) : {};

const obj = (properties, required = []) => ({ type: "object", properties, required, additionalProperties: false });
const str = { type: "string", minLength: 1 };
const page1 = [
  { name: "sandbox_status", description: "status", inputSchema: obj({}) },
  { name: "sandbox_echo", description: "echo", inputSchema: obj({ text: str, n: { type: "integer", minimum: 1, maximum: 5 } }, ["text"]) },
  { name: "sandbox_progress", description: "progress", inputSchema: obj({}) },
  { name: "sandbox_slow", description: "slow", inputSchema: obj({}) },
];
const page2 = [
  { name: "sandbox_fail", description: "fail", inputSchema: obj({}) },
  { name: "sandbox_image", description: "image", inputSchema: obj({}) },
  { name: "sandbox_die", description: "die", inputSchema: obj({}) },
  { name: "sandbox_release", description: "release", inputSchema: obj({ forget: { type: "boolean" } }) },
  { name: "sandbox_destroy", description: "destroy", inputSchema: obj({ sandbox_id: str }, ["sandbox_id"]) },
  { name: "sandbox_big", description: "3 MiB of output", inputSchema: obj({}) },
];
if (options.mode === "remote" && !process.env.FAKE_COS_NO_NATIVE) {
  for (const id of ["bash", "read", "write", "edit", "apply_patch", "glob", "grep"]) {
    page2.push({ name: `native_${id}`, description: `routed ${id}`, inputSchema: obj({ command: str, filePath: str }) });
  }
}

const send = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");
const text = (t) => ({ content: [{ type: "text", text: t }] });
const slow = new Map(); // request id → timer
let releases = 0;

function call(id, params) {
  const meta = params._meta ?? {};
  const session = meta["createos/session"];
  log({ event: "call", id, name: params.name, args: params.arguments, meta });
  switch (params.name) {
    case "sandbox_status": {
      const bound = process.env.FAKE_COS_BOUND || null;
      const status = { session, sandbox: bound, stored: null, owned: bound ? true : null, initializing: false, cwd: "/root/workspace", persist: true, in_flight: 0 };
      return send({ jsonrpc: "2.0", id, result: text(JSON.stringify(status, null, 2)) });
    }
    case "sandbox_echo":
      return send({ jsonrpc: "2.0", id, result: { ...text(JSON.stringify({ args: params.arguments, meta })), _meta: { sandboxId: "sb-fake" } } });
    case "sandbox_progress":
      send({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: meta.progressToken, progress: 1, total: 2, message: "half" } });
      send({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: meta.progressToken, progress: 2, total: 2 } });
      // A real call reports progress while it runs, well before its result.
      return setTimeout(() => send({ jsonrpc: "2.0", id, result: text("done") }), 50);
    case "sandbox_slow":
      slow.set(id, setTimeout(() => send({ jsonrpc: "2.0", id, result: text("slow done") }), 30_000));
      return;
    case "sandbox_fail":
      return send({ jsonrpc: "2.0", id, result: { ...text("sandbox is not running"), isError: true } });
    case "sandbox_image":
      return send({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text: "screen" }, { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" }] } });
    case "sandbox_die":
      process.stderr.write("fake cos: dying on purpose\n");
      process.exit(3);
      return;
    case "sandbox_big":
      return send({ jsonrpc: "2.0", id, result: text("x".repeat(3 * 1024 * 1024) + "END") });
    case "sandbox_release": {
      const forget = params.arguments?.forget === true;
      releases++;
      if (process.env.FAKE_COS_RELEASE === "gone" && !forget) {
        return send({ jsonrpc: "2.0", id, result: { ...text("API error 404 on DELETE /v1/sandboxes/sb-fake: sandbox not found"), isError: true } });
      }
      if (process.env.FAKE_COS_RELEASE === "none") {
        return send({ jsonrpc: "2.0", id, result: text(JSON.stringify({ released: false, sandbox: null, reason: "no sandbox is bound to this session" })) });
      }
      if (process.env.FAKE_COS_RELEASE === "busy" && releases <= 2) {
        return send({ jsonrpc: "2.0", id, result: { ...text(`session "${session}" has 1 call(s) in flight; release it when they finish`), isError: true } });
      }
      return send({ jsonrpc: "2.0", id, result: text(JSON.stringify({ released: true, sandbox: "sb-fake", destroyed: !forget, forget })) });
    }
    case "sandbox_destroy":
      return send({ jsonrpc: "2.0", id, result: text(JSON.stringify({ destroyed: params.arguments?.sandbox_id })) });
    default:
      if (params.name?.startsWith("native_")) {
        return send({ jsonrpc: "2.0", id, result: { ...text(JSON.stringify({ routed: params.name, args: params.arguments, session })), _meta: { sandboxId: "sb-fake" } } });
      }
      return send({ jsonrpc: "2.0", id, error: { code: -32602, message: `unknown tool ${JSON.stringify(params.name)}` } });
  }
}

let buffer = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buffer += chunk;
  let nl;
  while ((nl = buffer.indexOf("\n")) >= 0) {
    const line = buffer.slice(0, nl);
    buffer = buffer.slice(nl + 1);
    if (!line.trim()) continue;
    const msg = JSON.parse(line);
    if (msg.method === "initialize") {
      send({ jsonrpc: "2.0", id: msg.id, result: { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "fake-cos", version: "0" }, instructions: "fake instructions" } });
    } else if (msg.method === "notifications/initialized") {
      log({ event: "initialized" });
    } else if (msg.method === "tools/list") {
      if (msg.params?.cursor === "page2") send({ jsonrpc: "2.0", id: msg.id, result: { tools: page2 } });
      else send({ jsonrpc: "2.0", id: msg.id, result: { tools: page1, nextCursor: "page2" } });
    } else if (msg.method === "tools/call") {
      call(msg.id, msg.params);
    } else if (msg.method === "notifications/cancelled") {
      const id = msg.params.requestId;
      log({ event: "cancelled", id, reason: msg.params.reason });
      clearTimeout(slow.get(id));
      slow.delete(id);
    }
  }
});
process.stdin.on("end", () => {
  log({ event: "stdin-closed" });
  process.exit(0);
});
// `cos mcp` shuts down cleanly on SIGTERM as on the end of its input.
process.on("SIGTERM", () => {
  log({ event: "sigterm" });
  process.exit(0);
});
