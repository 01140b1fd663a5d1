#!/usr/bin/env bash
# End-to-end test of the OpenCode plugin with the real OpenCode from npm:
#   builds cos and createos-mock, installs and builds this package, installs the pinned
#   opencode-ai (e2e/package.json + lock, into e2e/node_modules — never globally), then runs
#   e2e/run.mjs: a scripted OpenAI-compatible model server on loopback drives `opencode run`
#   through sandbox_exec, sandbox_write + sandbox_read and a routed `bash` (remote mode),
#   all reaching the emulator through `cos mcp`.
#
#   integrations/opencode/e2e/run.sh
#   E2E_PROFILE=release integrations/opencode/e2e/run.sh   # release builds of cos/createos-mock
#   E2E_SKIP_BUILD=1 …                                      # reuse built binaries and dist/
#   E2E_KEEP=1 E2E_VERBOSE=1 …                              # keep the work dir; print tool results
#
# Exits non-zero, saying what failed, on any build, install or check failure.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PKG_DIR="$(cd "$E2E_DIR/.." && pwd)"
ROOT="$(cd "$PKG_DIR/../.." && pwd)"
PROFILE="${E2E_PROFILE:-debug}"

log() { printf '[opencode-e2e] %s\n' "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

for tool in cargo node npm; do
  command -v "$tool" >/dev/null 2>&1 || die "missing required tool: $tool"
done
node_major="$(node -p 'process.versions.node.split(".")[0]')"
(( node_major >= 20 )) || die "node >= 20 is required (found $(node --version))"

# ── cos and the emulator ─────────────────────────────────────────────────────
TARGET_DIR="$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps \
  | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).target_directory))')" \
  || die "cargo metadata failed"
if [[ -z "${E2E_SKIP_BUILD:-}" ]]; then
  release=()
  [[ "$PROFILE" == "release" ]] && release=(--release)
  log "building cos and createos-mock ($PROFILE)"
  (cd "$ROOT" && cargo build "${release[@]}" -p createos-sandbox --bin cos) || die "cargo build of cos failed"
  (cd "$ROOT" && cargo build "${release[@]}" -p createos-mock --bin createos-mock) || die "cargo build of createos-mock failed"
fi
COS_BIN="$TARGET_DIR/$PROFILE/cos"
MOCK_BIN="$TARGET_DIR/$PROFILE/createos-mock"
[[ -x "$COS_BIN" ]] || die "cos not found at $COS_BIN"
[[ -x "$MOCK_BIN" ]] || die "createos-mock not found at $MOCK_BIN"

# ── the plugin ───────────────────────────────────────────────────────────────
if [[ -z "${E2E_SKIP_BUILD:-}" || ! -f "$PKG_DIR/dist/index.js" ]]; then
  log "installing and building the plugin (npm ci, npm run build)"
  (cd "$PKG_DIR" && npm ci --no-audit --no-fund --loglevel=error) >&2 || die "npm ci of the plugin failed"
  (cd "$PKG_DIR" && npm run --silent build) >&2 || die "the plugin does not build (tsc)"
fi

# ── OpenCode from npm (pinned) ───────────────────────────────────────────────
log "installing opencode-ai (npm install in e2e/, exact version from e2e/package.json)"
(cd "$E2E_DIR" && npm install --no-audit --no-fund --no-package-lock --loglevel=error) >&2 || die "npm install of opencode-ai failed (is the npm registry reachable?)"
OPENCODE_BIN="$E2E_DIR/node_modules/.bin/opencode"
if ! "$OPENCODE_BIN" --version >/dev/null 2>&1; then
  # npm may skip install scripts: run the package's own installer that places the binary.
  log "opencode binary not in place; running opencode-ai's postinstall"
  (cd "$E2E_DIR/node_modules/opencode-ai" && node ./postinstall.mjs) >&2 || die "opencode-ai's postinstall failed"
fi
version="$("$OPENCODE_BIN" --version 2>/dev/null)" || die "$OPENCODE_BIN --version failed"
log "opencode $version, cos $COS_BIN"

export OPENCODE_BIN COS_BIN MOCK_BIN
export PLUGIN_DIR="$PKG_DIR"
node "$E2E_DIR/run.mjs" || die "end-to-end checks failed (see the lines above)"
log "passed"
