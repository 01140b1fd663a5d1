#!/usr/bin/env node
// `cos` as installed by @createos/opencode (node_modules/.bin/cos, `npx cos`): runs the binary
// that cosBinary() finds (COS_BIN, else the installed @createos/cos-<os>-<cpu> package, else
// cos on PATH) with the same arguments, terminal and exit status.

import { spawn } from "node:child_process";
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { cosBinary } from "../dist/binary.js";

function fail(message) {
  process.stderr.write(`error: ${message}\n`);
  process.exit(127);
}

let bin;
try {
  bin = cosBinary();
} catch (err) {
  fail(err.message);
}
const self = realpathSync(fileURLToPath(import.meta.url));
if (realpathSync(bin) === self) fail("cos on PATH is this launcher itself; install the platform package or set COS_BIN");

const child = spawn(bin, process.argv.slice(2), { stdio: "inherit" });
// A terminal's Ctrl-C reaches cos directly (same process group): the launcher only waits. Signals
// sent to the launcher alone are passed on.
process.on("SIGINT", () => {});
for (const signal of ["SIGTERM", "SIGHUP", "SIGQUIT"]) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (err) => fail(`cannot run ${bin}: ${err.message}`));
child.on("exit", (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 1);
});
