// Warm exec worker for `cargo bench --bench compare`: the official TypeScript SDK
// (@nodeops-createos/sandbox) in one long-lived Node process, so start-up is not measured.
//
//   node exec_worker.mjs <dir holding node_modules/@nodeops-createos/sandbox>
//   env: COS_BENCH_BASE_URL, COS_BENCH_API_KEY
//
// Protocol, one line each way:  "init <sandbox id>" -> "ready <sdk version>";
// "exec" -> "ok <nanoseconds>" (one runCommand("true") timed inside this process);
// anything failing -> "err <message>".
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const sdkDir = process.argv[2];
if (!sdkDir) {
  console.log("err usage: exec_worker.mjs <interop/ts directory>");
  process.exit(2);
}

// Resolve the package's ESM entry from its own manifest (its `exports` has no require condition).
const pkgDir = join(sdkDir, "node_modules", "@nodeops-createos", "sandbox");
const manifest = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
const entry = manifest.exports?.["."]?.import ?? manifest.main;
const sdk = await import(pathToFileURL(join(pkgDir, entry)).href);

const client = new sdk.CreateosSandboxClient({
  baseUrl: process.env.COS_BENCH_BASE_URL,
  apiKey: process.env.COS_BENCH_API_KEY,
});
let sandbox = null;

function oneLine(err) {
  return String(err && err.message ? err.message : err).replace(/\s+/g, " ");
}

async function handle(line) {
  const [verb, arg] = line.trim().split(/\s+/, 2);
  if (verb === "init") {
    sandbox = await client.getSandbox(arg);
    return `ready ${manifest.version}`;
  }
  if (verb === "exec") {
    if (!sandbox) throw new Error("exec before init");
    const started = process.hrtime.bigint();
    const out = await sandbox.runCommand("true", []);
    const elapsed = process.hrtime.bigint() - started;
    if (out.result.exit_code !== undefined && out.result.exit_code !== 0) {
      throw new Error(`true exited with ${out.result.exit_code}`);
    }
    if (out.result.error) throw new Error(`exec failed: ${out.result.error}`);
    return `ok ${elapsed}`;
  }
  throw new Error(`unknown request ${JSON.stringify(verb)}`);
}

// Requests are answered strictly one at a time, in order.
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  let answer;
  try {
    answer = await handle(line);
  } catch (err) {
    answer = `err ${oneLine(err)}`;
  }
  process.stdout.write(answer + "\n");
}
process.exit(0);
