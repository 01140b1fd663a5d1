// Which `cos` executable the plugin runs. npm installs the binary for this machine as one of the
// optional dependencies @createos/cos-<os>-<cpu> (each declares its `os` and `cpu`, so npm
// fetches only the matching one), so nothing has to be on PATH.

import { accessSync, chmodSync, constants, statSync } from "node:fs";
import { createRequire } from "node:module";
import { delimiter, dirname, isAbsolute, join, resolve } from "node:path";

/** The platforms a binary package is published for: `<process.platform>-<process.arch>`. */
export const PLATFORMS = ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64"] as const;

/** The default of the `bin` option: "the packaged binary, else `cos` on PATH". */
export const DEFAULT_BIN = "cos";

/** The binary package for this machine, e.g. `@createos/cos-linux-x64`. */
export function platformPackage(platform: string = process.platform, arch: string = process.arch): string {
  return `@createos/cos-${platform}-${arch}`;
}

export interface CosBinaryOptions {
  /** The plugin's `bin` option. */
  bin?: string;
  /** Where COS_BIN and PATH are read (default: this process's environment). */
  env?: NodeJS.ProcessEnv;
}

function isExecutable(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** A command as given: a path (made absolute) or a name looked up on PATH. */
function lookUp(command: string, env: NodeJS.ProcessEnv): string | undefined {
  if (command.includes("/")) return resolve(command);
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (!dir || !isAbsolute(dir)) continue;
    const candidate = join(dir, command);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

/** The binary inside the installed platform package, if there is one. */
export function packagedBinary(): string | undefined {
  const require = createRequire(import.meta.url);
  let manifest: string;
  try {
    manifest = require.resolve(`${platformPackage()}/package.json`);
  } catch {
    return undefined;
  }
  const bin = join(dirname(manifest), "bin", "cos");
  try {
    statSync(bin);
  } catch {
    return undefined;
  }
  // Some installers drop the mode bits of packed files; the binary is ours to fix.
  if (!isExecutable(bin)) {
    try {
      chmodSync(bin, 0o755);
    } catch {
      return undefined;
    }
  }
  return isExecutable(bin) ? bin : undefined;
}

/**
 * The absolute path of the `cos` to run: `COS_BIN`, else the `bin` option, else the binary of
 * the installed @createos/cos-<os>-<cpu> package, else `cos` on PATH. Throws, saying what was
 * looked at, when there is none.
 */
export function cosBinary(options: CosBinaryOptions = {}): string {
  const env = options.env ?? process.env;
  const fromEnv = env.COS_BIN?.trim();
  if (fromEnv) {
    const found = lookUp(fromEnv, env);
    if (!found) throw new Error(`COS_BIN=${fromEnv} is not an executable on PATH`);
    return found;
  }
  const bin = options.bin?.trim();
  if (bin && bin !== DEFAULT_BIN) {
    const found = lookUp(bin, env);
    if (!found) throw new Error(`the "bin" option ${JSON.stringify(bin)} is not an executable on PATH`);
    return found;
  }
  const packaged = packagedBinary();
  if (packaged) return packaged;
  const onPath = lookUp(DEFAULT_BIN, env);
  if (onPath) return onPath;
  const here = `${process.platform}-${process.arch}`;
  const why = (PLATFORMS as readonly string[]).includes(here)
    ? `${platformPackage()} is not installed (npm installs it with @createos/opencode unless optional dependencies are omitted)`
    : `there is no cos package for ${here} (there are ${PLATFORMS.join(", ")})`;
  throw new Error(`no cos binary: ${why}, and cos is not on PATH. Set COS_BIN or the plugin option "bin" to a cos executable`);
}
