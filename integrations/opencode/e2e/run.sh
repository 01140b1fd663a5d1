#!/usr/bin/env bash
# End-to-end test of the OpenCode plugin with the real OpenCode from npm, installed as a user
# installs it: from the packed npm tarballs (packaging/build.sh: @createos/opencode and the
# @createos/cos-<os>-<cpu> binary package), `npm install`ed into a fresh directory; OpenCode
# then runs with only /usr/bin:/bin on PATH (no cargo, no cos), so the plugin must find the
# packaged binary itself. Installs the pinned opencode-ai (e2e/package.json, into
# e2e/node_modules, never globally), builds the emulator (createos-mock), then runs
# e2e/run.mjs: a scripted OpenAI-compatible model server on loopback drives `opencode run`
# through sandbox_exec, sandbox_write + sandbox_read and a routed `bash` (remote mode), all
# reaching the emulator through `cos mcp`, and a signed-out run (e2e/signed-out.mjs).
#
#   integrations/opencode/e2e/run.sh
#   E2E_DIST=dist integrations/opencode/e2e/run.sh   # use these tarballs (CI packs them once)
#   E2E_PROFILE=release …                            # release build of createos-mock
#   E2E_SKIP_BUILD=1 …                               # reuse the built emulator
#   E2E_KEEP=1 E2E_VERBOSE=1 …                       # keep the work dir; print tool results
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

# ── the emulator ─────────────────────────────────────────────────────────────
TARGET_DIR="$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps \
  | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).target_directory))')" \
  || die "cargo metadata failed"
if [[ -z "${E2E_SKIP_BUILD:-}" ]]; then
  release=()
  [[ "$PROFILE" == "release" ]] && release=(--release)
  log "building createos-mock ($PROFILE)"
  (cd "$ROOT" && cargo build "${release[@]}" -p createos-mock --bin createos-mock) || die "cargo build of createos-mock failed"
fi
MOCK_BIN="$TARGET_DIR/$PROFILE/createos-mock"
[[ -x "$MOCK_BIN" ]] || die "createos-mock not found at $MOCK_BIN"

# ── the plugin and cos, from the packed tarballs ─────────────────────────────
if [[ -n "${E2E_DIST:-}" ]]; then
  DIST="$(cd "$E2E_DIST" && pwd)"
else
  DIST="$(mktemp -d "${TMPDIR:-/tmp}/createos-e2e-dist.XXXXXX")"
  log "packing the release (packaging/build.sh into $DIST)"
  COS_DIST_DIR="$DIST" bash "$ROOT/packaging/build.sh" || die "packaging/build.sh failed"
fi
pkg_version="$(node -p 'require(process.argv[1]).version' "$PKG_DIR/package.json")"
case "$(node -p 'process.platform + "-" + process.arch')" in
  linux-x64) platform=linux-x64 ;; linux-arm64) platform=linux-arm64 ;;
  darwin-x64) platform=darwin-x64 ;; darwin-arm64) platform=darwin-arm64 ;;
  *) die "no cos package for this platform" ;;
esac
PLUGIN_TGZ="$DIST/createos-opencode-$pkg_version.tgz"
COS_TGZ="$DIST/createos-cos-$platform-$pkg_version.tgz"
[[ -f "$PLUGIN_TGZ" && -f "$COS_TGZ" ]] || die "missing $PLUGIN_TGZ or $COS_TGZ (run packaging/build.sh)"
INSTALL_DIR="$(mktemp -d "${TMPDIR:-/tmp}/createos-e2e-install.XXXXXX")"
trap 'rm -rf "$INSTALL_DIR"' EXIT
printf '{ "name": "createos-e2e-install", "private": true }\n' >"$INSTALL_DIR/package.json"
log "npm install of the two tarballs into $INSTALL_DIR (third-party dependencies from the registry)"
(cd "$INSTALL_DIR" && npm install --no-audit --no-fund --loglevel=error "$PLUGIN_TGZ" "$COS_TGZ") >&2 \
  || die "npm install of the packed plugin failed"
PLUGIN_DIR="$INSTALL_DIR/node_modules/@createos/opencode"
[[ -f "$PLUGIN_DIR/dist/index.js" ]] || die "the installed plugin has no dist/index.js"

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
log "opencode $version, plugin $PLUGIN_DIR"

export OPENCODE_BIN MOCK_BIN PLUGIN_DIR INSTALL_DIR
unset COS_BIN
node "$E2E_DIR/run.mjs" || die "end-to-end checks failed (see the lines above)"
log "passed"
