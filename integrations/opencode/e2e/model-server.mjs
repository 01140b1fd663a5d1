// A scripted OpenAI-compatible chat-completions server on loopback for the end-to-end test.
// It plays the model: each turn answers with the next scripted tool call, and records the
// tool result OpenCode sends back so the test can check what reached the conversation.
//
// A scenario is `{ steps: [{ tool, args }], final }`. For a request that offers tools, the
// number of tool results since the latest user message says which step comes next; after the
// last step it answers `final` as text. Requests without tools (OpenCode's title and summary
// helpers) get a short text answer.

import { createServer } from "node:http";

function chunk(id, model, delta, finish = null, usage) {
  const body = {
    id,
    object: "chat.completion.chunk",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, delta, finish_reason: finish }],
  };
  if (usage) body.usage = usage;
  return `data: ${JSON.stringify(body)}\n\n`;
}

function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p?.text === "string" ? p.text : "")).join("");
  return "";
}

/** Start the server; `scenario` can be swapped between runs with `setScenario`. */
export async function startModelServer() {
  let scenario = { steps: [], final: "done" };
  /** One record per tool-offering request: what the model saw. */
  const turns = [];
  let requests = 0;
  let callSeq = 0;

  const server = createServer((req, res) => {
    if (req.method === "GET" && req.url?.endsWith("/models")) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: "scripted-1", object: "model", owned_by: "e2e" }] }));
      return;
    }
    if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
      return;
    }
    let raw = "";
    req.setEncoding("utf8");
    req.on("data", (d) => (raw += d));
    req.on("end", () => {
      requests++;
      let body;
      try {
        body = JSON.parse(raw);
      } catch {
        res.writeHead(400, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: "body is not JSON" } }));
        return;
      }
      answer(body, res);
    });
  });

  function answer(body, res) {
    const model = body.model ?? "scripted-1";
    const id = `chatcmpl-${requests}`;
    const messages = Array.isArray(body.messages) ? body.messages : [];
    const offered = Array.isArray(body.tools) ? body.tools.map((t) => t?.function?.name).filter(Boolean) : [];
    let reply; // { text } or { tool, args }
    if (offered.length === 0) {
      reply = { text: "E2E session" };
    } else {
      // Steps count from the latest user message, so a continued session starts its new
      // script at step 0.
      const lastUser = messages.map((m) => m.role).lastIndexOf("user");
      const results = messages
        .slice(lastUser + 1)
        .filter((m) => m.role === "tool")
        .map((m) => ({ id: m.tool_call_id, content: textOf(m.content) }));
      const system = messages.filter((m) => m.role === "system").map((m) => textOf(m.content)).join("\n");
      const users = messages.filter((m) => m.role === "user").map((m) => textOf(m.content));
      const step = scenario.steps[results.length];
      turns.push({ offered, results, system, users, stepIndex: results.length });
      if (step && offered.includes(step.tool)) reply = { tool: step.tool, args: step.args };
      else if (step) reply = { text: `E2E FAILURE: tool ${step.tool} was not offered (offered: ${offered.join(", ")})` };
      else reply = { text: scenario.final };
    }
    if (!body.stream) {
      const message = reply.text !== undefined
        ? { role: "assistant", content: reply.text }
        : {
            role: "assistant",
            content: null,
            tool_calls: [{ id: `call_${++callSeq}`, type: "function", function: { name: reply.tool, arguments: JSON.stringify(reply.args) } }],
          };
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({
        id,
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model,
        choices: [{ index: 0, message, finish_reason: reply.text !== undefined ? "stop" : "tool_calls" }],
        usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
      }));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
    if (reply.text !== undefined) {
      res.write(chunk(id, model, { role: "assistant", content: "" }));
      res.write(chunk(id, model, { content: reply.text }));
      res.write(chunk(id, model, {}, "stop", usage));
    } else {
      const callId = `call_${++callSeq}`;
      const args = JSON.stringify(reply.args);
      res.write(chunk(id, model, {
        role: "assistant",
        content: null,
        tool_calls: [{ index: 0, id: callId, type: "function", function: { name: reply.tool, arguments: "" } }],
      }));
      // Arguments in two pieces, as real providers stream them.
      const half = Math.floor(args.length / 2);
      res.write(chunk(id, model, { tool_calls: [{ index: 0, function: { arguments: args.slice(0, half) } }] }));
      res.write(chunk(id, model, { tool_calls: [{ index: 0, function: { arguments: args.slice(half) } }] }));
      res.write(chunk(id, model, {}, "tool_calls", usage));
    }
    res.write("data: [DONE]\n\n");
    res.end();
  }

  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/v1`,
    turns,
    setScenario(next) {
      scenario = next;
      turns.length = 0;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
