#!/usr/bin/env bash
# Runs the official SDKs (TypeScript @nodeops-createos/sandbox, Python createos-sandbox)
# unchanged against a freshly started createos-mock, then checks that the emulator was left
# with no live sandbox or process.
#
#   interop/run.sh                  debug build of the emulator (shares the workspace's target dir)
#   INTEROP_PROFILE=release interop/run.sh
#   INTEROP_ONLY=ts|python interop/run.sh   run one suite
#
# Exits non-zero when the build, either suite or the final leak check fails.
set -uo pipefail

INTEROP_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$INTEROP_DIR/.." && pwd)"
PROFILE="${INTEROP_PROFILE:-debug}"
ONLY="${INTEROP_ONLY:-all}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/createos-interop.XXXXXX")"
MOCK_PID=""
FAILED=0

log() { printf '[interop] %s\n' "$*" >&2; }

stop_mock() {
  if [[ -n "$MOCK_PID" ]] && kill -0 "$MOCK_PID" 2>/dev/null; then
    kill -TERM "$MOCK_PID" 2>/dev/null
    # Give it time to kill its sandboxes' processes and remove its state dir.
    for _ in $(seq 1 100); do
      kill -0 "$MOCK_PID" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$MOCK_PID" 2>/dev/null; then
      log "emulator did not stop on SIGTERM; killing it"
      kill -KILL "$MOCK_PID" 2>/dev/null
      FAILED=1
    fi
    wait "$MOCK_PID" 2>/dev/null
  fi
  MOCK_PID=""
}

cleanup() {
  local rc=$?
  stop_mock
  if [[ -s "$WORK/mock.err" && ( $rc -ne 0 || $FAILED -ne 0 ) ]]; then
    log "last emulator log lines:"
    tail -n 40 "$WORK/mock.err" >&2
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need() {
  command -v "$1" >/dev/null 2>&1 || { log "missing required tool: $1"; exit 2; }
}
need cargo
need node
need npm
need python3
need curl

node_major="$(node -p 'process.versions.node.split(".")[0]')"
if (( node_major < 20 )); then
  log "node >= 20 is required (found $(node --version))"
  exit 2
fi

# ── build the emulator ────────────────────────────────────────────────────────
log "building createos-mock ($PROFILE)"
build_args=(build -p createos-mock --bin createos-mock)
[[ "$PROFILE" == "release" ]] && build_args+=(--release)
(cd "$ROOT" && cargo "${build_args[@]}") || { log "cargo build failed"; exit 1; }
TARGET_DIR="$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
MOCK_BIN="$TARGET_DIR/$PROFILE/createos-mock"
[[ -x "$MOCK_BIN" ]] || { log "emulator binary not found at $MOCK_BIN"; exit 1; }

# ── install the SDKs (pinned) ────────────────────────────────────────────────
install_ts() {
  log "installing the TypeScript SDK (npm ci)"
  (cd "$INTEROP_DIR/ts" && npm ci --no-audit --no-fund --loglevel=error) >&2
}

install_python() {
  local venv="$INTEROP_DIR/python/.venv"
  if [[ ! -x "$venv/bin/python" ]]; then
    log "creating $venv"
    python3 -m venv "$venv" || return 1
  fi
  log "installing the Python SDK (pip, pinned)"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$INTEROP_DIR/python/requirements.txt" >&2
}

if [[ "$ONLY" == "all" || "$ONLY" == "ts" ]]; then
  install_ts || { log "npm ci failed"; exit 1; }
fi
if [[ "$ONLY" == "all" || "$ONLY" == "python" ]]; then
  install_python || { log "pip install failed"; exit 1; }
fi

# ── start the emulator ───────────────────────────────────────────────────────
log "starting $MOCK_BIN"
"$MOCK_BIN" --listen 127.0.0.1:0 >"$WORK/mock.out" 2>"$WORK/mock.err" &
MOCK_PID=$!

ready_line=""
for _ in $(seq 1 300); do
  # Only a complete (newline-terminated) first line counts.
  if [[ "$(wc -l <"$WORK/mock.out")" -ge 1 ]]; then
    ready_line="$(head -n 1 "$WORK/mock.out")"
    break
  fi
  kill -0 "$MOCK_PID" 2>/dev/null || break
  sleep 0.1
done
if [[ -z "$ready_line" ]]; then
  log "the emulator printed no ready line"
  exit 1
fi

read -r BASE_URL API_KEY < <(printf '%s' "$ready_line" | python3 -c '
import json, sys
ready = json.loads(sys.stdin.read())
print(ready["base_url"], ready["api_key"])
') || { log "unreadable ready line from the emulator"; exit 1; }
[[ -n "$BASE_URL" && -n "$API_KEY" ]] || { log "ready line lacks base_url/api_key"; exit 1; }
log "emulator ready at $BASE_URL"

export CREATEOS_SANDBOX_BASE_URL="$BASE_URL"
export CREATEOS_SANDBOX_API_KEY="$API_KEY"
export CREATEOS_API_KEY="$API_KEY"

# ── the suites ───────────────────────────────────────────────────────────────
run_ts() {
  log "TypeScript suite (node --test)"
  local tap="$WORK/ts.tap"
  (cd "$INTEROP_DIR/ts" && node --test --test-concurrency=1 \
      --test-reporter=spec --test-reporter-destination=stdout \
      --test-reporter=tap --test-reporter-destination="$tap" \
      tests/*.test.mjs)
  local rc=$?
  local passed failed
  passed="$(sed -n 's/^# pass \([0-9][0-9]*\)$/\1/p' "$tap" | tail -n 1)"
  failed="$(sed -n 's/^# fail \([0-9][0-9]*\)$/\1/p' "$tap" | tail -n 1)"
  echo "ts: ${passed:-0} passed, ${failed:-0} failed"
  if [[ $rc -ne 0 || -z "$passed" || "${failed:-1}" != "0" || "${passed:-0}" == "0" ]]; then
    return 1
  fi
}

run_python() {
  log "Python suite (pytest)"
  local xml="$WORK/python.xml"
  (cd "$INTEROP_DIR/python" && .venv/bin/python -m pytest -p no:cacheprovider --junitxml="$xml")
  local rc=$?
  local counts
  counts="$(python3 - "$xml" <<'PY'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print("0 0 0")
    raise SystemExit
suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
total = sum(int(s.get("tests", 0)) for s in suites)
failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
skipped = sum(int(s.get("skipped", 0)) for s in suites)
print(total - failed - skipped, failed, skipped)
PY
)"
  local passed failed skipped
  read -r passed failed skipped <<<"$counts"
  echo "python: ${passed} passed, ${failed} failed, ${skipped} skipped"
  if [[ $rc -ne 0 || "$passed" == "0" || "$failed" != "0" ]]; then
    return 1
  fi
}

if [[ "$ONLY" == "all" || "$ONLY" == "ts" ]]; then
  run_ts || FAILED=1
fi
if [[ "$ONLY" == "all" || "$ONLY" == "python" ]]; then
  run_python || FAILED=1
fi

# ── nothing may be left running ──────────────────────────────────────────────
leak_check() {
  local body live
  for _ in $(seq 1 50); do
    body="$(curl -fsS -H "X-Api-Key: $API_KEY" "$BASE_URL/_mock/stats")" || { log "GET /_mock/stats failed"; return 1; }
    live="$(printf '%s' "$body" | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(s.get("live_sandboxes", -1), s.get("live_processes", -1))
')"
    [[ "$live" == "0 0" ]] && { log "leak check: no live sandboxes or processes"; return 0; }
    sleep 0.2
  done
  log "leak check failed: live_sandboxes live_processes = $live"
  log "stats: $body"
  return 1
}
leak_check || FAILED=1

stop_mock
if [[ $FAILED -ne 0 ]]; then
  log "FAILED"
  exit 1
fi
log "all interop suites passed"
