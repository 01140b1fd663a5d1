#!/usr/bin/env bash
# Installs what `cargo bench --bench compare` compares against: the official TypeScript SDK
# (@nodeops-createos/sandbox, npm ci in interop/ts) and the official Python SDK
# (createos-sandbox, a venv in interop/python/.venv), at the versions interop/ pins, exactly the
# way interop/run.sh installs them. The SDKs are never installed globally. An install that
# already matches the pins is left alone, so running this while the interop suites run is
# harmless.
#
# The SSH rows also need OpenSSH (server `/usr/sbin/sshd`, which the emulator runs inside each
# sandbox, and the `ssh`/`scp` clients) and `rsync` on the host (the sandboxes see the host's
# /usr, so the same rsync serves the remote end). On Debian/Ubuntu, when run as root, missing
# ones are installed with `apt-get install -y openssh-server openssh-client rsync`; otherwise
# the script stops and says what to install.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TS_DIR="$ROOT/interop/ts"
PY_DIR="$ROOT/interop/python"
VENV="$PY_DIR/.venv"

log() { printf '[bench-setup] %s\n' "$*" >&2; }
need() { command -v "$1" >/dev/null 2>&1 || { log "missing required tool: $1"; exit 2; }; }
need node
need npm
need python3

node_major="$(node -p 'process.versions.node.split(".")[0]')"
if (( node_major < 20 )); then
  log "node >= 20 is required (found $(node --version))"
  exit 2
fi

# ── OpenSSH and rsync (transfer and sync rows) ──────────────────────────────
missing_pkgs=()
[[ -x /usr/sbin/sshd ]] || missing_pkgs+=(openssh-server)
{ command -v ssh >/dev/null 2>&1 && command -v scp >/dev/null 2>&1; } || missing_pkgs+=(openssh-client)
command -v rsync >/dev/null 2>&1 || missing_pkgs+=(rsync)
if (( ${#missing_pkgs[@]} > 0 )); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    log "installing ${missing_pkgs[*]} (apt-get)"
    apt-get install -y "${missing_pkgs[@]}" >&2 || { apt-get update >&2 && apt-get install -y "${missing_pkgs[@]}" >&2; }
  else
    log "missing: ${missing_pkgs[*]} — install them (e.g. sudo apt-get install -y ${missing_pkgs[*]})"
    exit 2
  fi
fi
log "$(rsync --version | head -n 1)"

# ── TypeScript SDK ───────────────────────────────────────────────────────────
ts_pin="$(cd "$TS_DIR" && node -p 'require("./package.json").dependencies["@nodeops-createos/sandbox"]')"
ts_have="$(cd "$TS_DIR" && node -p 'try { require("./node_modules/@nodeops-createos/sandbox/package.json").version } catch { "" }')"
if [[ "$ts_have" == "$ts_pin" ]]; then
  log "@nodeops-createos/sandbox $ts_have already installed in interop/ts"
else
  log "installing @nodeops-createos/sandbox $ts_pin (npm ci in interop/ts)"
  (cd "$TS_DIR" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi

# ── Python SDK ───────────────────────────────────────────────────────────────
py_pin="$(sed -n 's/^createos-sandbox==\([^[:space:]]*\).*/\1/p' "$PY_DIR/requirements.txt")"
py_have=""
if [[ -x "$VENV/bin/python" ]]; then
  py_have="$("$VENV/bin/python" -c '
import importlib.metadata as m
try:
    import createos  # noqa: F401  (a broken install fails here)
    print(m.version("createos-sandbox"))
except Exception:
    print("")
' 2>/dev/null || true)"
fi
if [[ -n "$py_pin" && "$py_have" == "$py_pin" ]]; then
  log "createos-sandbox $py_have already installed in interop/python/.venv"
else
  if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating $VENV"
    python3 -m venv "$VENV"
  fi
  log "installing createos-sandbox $py_pin (pip, pinned, into interop/python/.venv)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$PY_DIR/requirements.txt" >&2
fi

log "ready: cargo bench --bench compare"
