#!/usr/bin/env bash
# Build a release of cos and write what it publishes under dist/ (COS_DIST_DIR to change):
#
#   cos-<version>-<target>.tar.gz (+ .sha256)  the binary, README.md, LICENSE (for install.sh)
#   createos-cos-<os>-<cpu>-<version>.tgz        npm package @createos/cos-<os>-<cpu>: the binary
#   createos-opencode-<version>.tgz              npm package @createos/opencode: the plugin
#   install.sh                                   the installer, as published beside the archives
#
# Every platform package is declared (the plugin's optionalDependencies name all four); one is
# built when this machine has its Rust target and a linker for it, and skipped with the reason
# otherwise. The release build uses the normal target directory, so a second run only packs.
#
#   packaging/build.sh                 build and pack
#   COS_SKIP_BUILD=1 packaging/build.sh  pack the existing target/release/cos (CI built it)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIST="${COS_DIST_DIR:-$ROOT/dist}"
PLUGIN_DIR="$ROOT/integrations/opencode"

# What a parent `cargo test` / `cargo run` sets for its child. Inherited, these would count as
# changed inputs of build scripts (ring's reruns when CARGO_MANIFEST_DIR changes) and the
# release build would start over instead of finding the one CI already made.
while IFS= read -r var; do
  case "$var" in
    CARGO_MANIFEST_DIR | CARGO_MANIFEST_PATH | CARGO_MANIFEST_LINKS | CARGO_PKG_* | CARGO_CRATE_NAME | CARGO_BIN_NAME | \
      CARGO_BIN_EXE_* | CARGO_TARGET_TMPDIR | CARGO_PRIMARY_PACKAGE | CARGO_RUSTC_CURRENT_DIR | OUT_DIR) unset "$var" ;;
  esac
done < <(compgen -e)

log() { printf '[build] %s\n' "$*" >&2; }
die() { printf '[build] FAILED: %s\n' "$*" >&2; exit 1; }

for tool in cargo rustc node npm tar; do
  command -v "$tool" >/dev/null 2>&1 || die "missing required tool: $tool"
done
if command -v sha256sum >/dev/null 2>&1; then sha256() { sha256sum "$1" | cut -d' ' -f1; }
elif command -v shasum >/dev/null 2>&1; then sha256() { shasum -a 256 "$1" | cut -d' ' -f1; }
else die "neither sha256sum nor shasum is available"; fi

# The version of the root package ([package] of Cargo.toml), and the plugin's, which must agree.
version="$(awk '/^\[package\]/{p=1;next} /^\[/{p=0} p && /^version *=/{gsub(/[" ]/,"",$0); sub(/^version=/,"",$0); print; exit}' "$ROOT/Cargo.toml")"
[[ -n "$version" ]] || die "no version in Cargo.toml's [package]"
plugin_version="$(node -p 'require(process.argv[1]).version' "$PLUGIN_DIR/package.json")"
[[ "$plugin_version" == "$version" ]] || die "integrations/opencode/package.json has version $plugin_version, Cargo.toml $version"

host="$(rustc -vV | sed -n 's/^host: //p')"
installed_targets="$(rustup target list --installed 2>/dev/null || echo "$host")"
target_dir="$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps \
  | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).target_directory))')"

# target triple | npm os | npm cpu | linker a cross build needs
PLATFORMS=(
  "x86_64-unknown-linux-gnu|linux|x64|"
  "aarch64-unknown-linux-gnu|linux|arm64|aarch64-linux-gnu-gcc"
  "x86_64-apple-darwin|darwin|x64|"
  "aarch64-apple-darwin|darwin|arm64|"
)

# Why `target` cannot be built here, or nothing when it can.
unbuildable() {
  local target="$1" linker="$2"
  [[ "$target" == "$host" ]] && return 0
  if ! grep -qx "$target" <<<"$installed_targets"; then
    echo "the Rust target $target is not installed (rustup target add $target)"; return 0
  fi
  if [[ "$target" == *-apple-darwin && "$host" != *-apple-darwin ]]; then
    echo "linking for macOS needs Apple's SDK and linker, which only a Mac has"; return 0
  fi
  if [[ -n "$linker" ]] && ! command -v "$linker" >/dev/null 2>&1; then
    echo "no $linker linker on PATH"; return 0
  fi
}

binary_of() {
  local target="$1"
  if [[ "$target" == "$host" ]]; then echo "$target_dir/release/cos"; else echo "$target_dir/$target/release/cos"; fi
}

build_binary() {
  local target="$1" linker="$2"
  if [[ -n "${COS_SKIP_BUILD:-}" ]]; then return 0; fi
  local args=(build --release --locked --bin cos)
  if [[ "$target" != "$host" ]]; then
    args+=(--target "$target")
    if [[ -n "$linker" ]]; then
      local var="CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$target")_LINKER"
      export "$var=$linker"
    fi
  fi
  log "cargo ${args[*]}"
  local start=$SECONDS
  (cd "$ROOT" && cargo "${args[@]}") || die "cargo build for $target failed"
  log "release build of cos for $target: $((SECONDS - start)) s"
}

# Deterministic tar (GNU tar options when this tar has them).
tar_czf() {
  local out="$1" dir="$2" name="$3"
  if tar --version 2>/dev/null | grep -q 'GNU tar'; then
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='@0' -C "$dir" -czf "$out" "$name"
  else
    tar -C "$dir" -czf "$out" "$name"
  fi
}

mkdir -p "$DIST"
stage="$(mktemp -d "${TMPDIR:-/tmp}/cos-build.XXXXXX")"
trap 'rm -rf "$stage"' EXIT

built=()
for entry in "${PLATFORMS[@]}"; do
  IFS='|' read -r target os cpu linker <<<"$entry"
  reason="$(unbuildable "$target" "$linker")"
  if [[ -n "$reason" ]]; then
    log "skipping $target (@createos/cos-$os-$cpu): $reason"
    continue
  fi
  build_binary "$target" "$linker"
  bin="$(binary_of "$target")"
  [[ -x "$bin" ]] || die "no binary at $bin"
  built+=("$target")

  # The archive install.sh downloads.
  name="cos-$version-$target"
  mkdir -p "$stage/$name"
  cp "$bin" "$stage/$name/cos"
  cp "$ROOT/README.md" "$ROOT/LICENSE" "$stage/$name/"
  tar_czf "$DIST/$name.tar.gz" "$stage" "$name"
  printf '%s  %s\n' "$(sha256 "$DIST/$name.tar.gz")" "$name.tar.gz" >"$DIST/$name.tar.gz.sha256"
  log "wrote $name.tar.gz and its .sha256"

  # The npm platform package.
  pkg="$stage/npm-$os-$cpu"
  mkdir -p "$pkg/bin"
  cp "$bin" "$pkg/bin/cos"
  chmod 755 "$pkg/bin/cos"
  cp "$ROOT/LICENSE" "$pkg/"
  node - "$pkg/package.json" "$version" "$os" "$cpu" "$target" <<'JS'
const [file, version, os, cpu, target] = process.argv.slice(2);
const pkg = {
  name: `@createos/cos-${os}-${cpu}`,
  version,
  description: `The cos binary (CreateOS sandbox client) for ${target}; installed by @createos/opencode`,
  license: "Apache-2.0",
  repository: { type: "git", url: "git+https://github.com/createos-sandbox/createos-sandbox.git" },
  os: [os],
  cpu: [cpu],
  files: ["bin/cos", "LICENSE"],
  preferUnplugged: true,
};
require("node:fs").writeFileSync(file, JSON.stringify(pkg, null, 2) + "\n");
JS
  printf '# @createos/cos-%s-%s\n\nThe `cos` binary for %s. Install `@createos/opencode` (it depends on this package\nfor your platform) or see https://github.com/createos-sandbox/createos-sandbox.\n' \
    "$os" "$cpu" "$target" >"$pkg/README.md"
  (cd "$pkg" && npm pack --silent --pack-destination "$DIST" >/dev/null) || die "npm pack of @createos/cos-$os-$cpu failed"
  log "wrote createos-cos-$os-$cpu-$version.tgz"
done
[[ ${#built[@]} -gt 0 ]] || die "no platform could be built here"

# The plugin: built from its sources, packed as npm would publish it.
if [[ ! -x "$PLUGIN_DIR/node_modules/.bin/tsc" ]]; then
  log "npm ci in integrations/opencode"
  (cd "$PLUGIN_DIR" && npm ci --no-audit --no-fund --loglevel=error) >&2 || die "npm ci of the plugin failed"
fi
(cd "$PLUGIN_DIR" && npm run --silent build) >&2 || die "the plugin does not build (tsc)"
# The optional dependencies on every platform package are added to the packed manifest only:
# in the checked-in package.json they would break `npm ci` of a checkout, since a lock file
# cannot hold packages the registry does not have yet.
plugin_stage="$stage/npm-opencode"
mkdir -p "$plugin_stage"
cp -R "$PLUGIN_DIR/package.json" "$PLUGIN_DIR/README.md" "$PLUGIN_DIR/dist" "$PLUGIN_DIR/bin" "$plugin_stage/"
cp "$ROOT/LICENSE" "$plugin_stage/"
platform_names=()
for entry in "${PLATFORMS[@]}"; do
  IFS='|' read -r _ os cpu _ <<<"$entry"
  platform_names+=("@createos/cos-$os-$cpu")
done
node - "$plugin_stage/package.json" "$version" "${platform_names[@]}" <<'JS'
const [file, version, ...names] = process.argv.slice(2);
const fs = require("node:fs");
const pkg = JSON.parse(fs.readFileSync(file, "utf8"));
pkg.optionalDependencies = Object.fromEntries(names.map((n) => [n, version]));
delete pkg.devDependencies;
delete pkg.scripts;
fs.writeFileSync(file, JSON.stringify(pkg, null, 2) + "\n");
JS
(cd "$plugin_stage" && npm pack --silent --pack-destination "$DIST" >/dev/null) || die "npm pack of the plugin failed"
log "wrote createos-opencode-$version.tgz (optionalDependencies: ${platform_names[*]})"

cp "$ROOT/packaging/install.sh" "$DIST/install.sh"
chmod 755 "$DIST/install.sh"
log "done: $DIST (built: ${built[*]})"
