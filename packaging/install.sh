#!/bin/sh
# Install cos, the CreateOS sandbox client, from a release: download the archive for this
# machine, check it against its published SHA-256, and only then install the binary.
#
#   curl -fsSL https://github.com/createos-sandbox/createos-sandbox/releases/download/v0.1.0/install.sh | sh
#
# Environment:
#   COS_VERSION       the release to install (default: the one this script comes with)
#   COS_INSTALL_BASE  where the archives are (default: that release's download URL)
#   COS_INSTALL_DIR   where cos goes (default: ~/.local/bin)
#
# On any failure (no download, a checksum that does not match, an unknown platform) it says
# why, exits non-zero, and leaves nothing behind: nothing is written outside a temporary
# directory until the archive has been verified.
set -eu

COS_VERSION="${COS_VERSION:-0.1.0}"
REPOSITORY="https://github.com/createos-sandbox/createos-sandbox"
BASE="${COS_INSTALL_BASE:-$REPOSITORY/releases/download/v$COS_VERSION}"
BASE="${BASE%/}"

say() { printf 'cos install: %s\n' "$*" >&2; }
fail() { say "error: $*"; exit 1; }

detect_target() {
  os="$(uname -s)"
  arch="$(uname -m)"
  case "$arch" in
    x86_64 | amd64) arch=x86_64 ;;
    aarch64 | arm64) arch=aarch64 ;;
    *) fail "no cos build for the CPU $arch (there are x86_64 and aarch64 builds)" ;;
  esac
  case "$os" in
    Linux) echo "$arch-unknown-linux-gnu" ;;
    Darwin) echo "$arch-apple-darwin" ;;
    *) fail "no cos build for $os (there are Linux and macOS builds)" ;;
  esac
}

download() { # url file
  case "$1" in
    file://*) cp "${1#file://}" "$2" 2>/dev/null || return 1 ;;
    *)
      if command -v curl >/dev/null 2>&1; then
        curl --proto '=https,http' -fsSL "$1" -o "$2" || return 1
      elif command -v wget >/dev/null 2>&1; then
        wget -q -O "$2" "$1" || return 1
      else
        fail "neither curl nor wget is available to download $1"
      fi
      ;;
  esac
}

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  elif command -v shasum >/dev/null 2>&1; then
    shasum -a 256 "$1" | cut -d' ' -f1
  elif command -v openssl >/dev/null 2>&1; then
    openssl dgst -sha256 "$1" | sed 's/^.*= *//'
  else
    fail "no sha256sum, shasum or openssl to check the download with"
  fi
}

target="$(detect_target)"
name="cos-$COS_VERSION-$target"
archive="$name.tar.gz"
install_dir="${COS_INSTALL_DIR:-${HOME:?HOME is not set; set COS_INSTALL_DIR}/.local/bin}"

tmp="$(mktemp -d 2>/dev/null || mktemp -d -t cos-install)"
trap 'rm -rf "$tmp"' EXIT
trap 'rm -rf "$tmp"; exit 130' INT TERM HUP

say "downloading $BASE/$archive"
download "$BASE/$archive" "$tmp/$archive" || fail "could not download $BASE/$archive"
download "$BASE/$archive.sha256" "$tmp/$archive.sha256" || fail "could not download $BASE/$archive.sha256"

expected="$(cut -d' ' -f1 <"$tmp/$archive.sha256" | tr 'A-F' 'a-f')"
case "$expected" in
  *[!0-9a-f]* | "") fail "$archive.sha256 holds no SHA-256" ;;
esac
[ "${#expected}" -eq 64 ] || fail "$archive.sha256 holds no SHA-256"
actual="$(sha256_of "$tmp/$archive")"
if [ "$actual" != "$expected" ]; then
  fail "checksum mismatch for $archive: expected $expected, got $actual. Nothing was installed."
fi

mkdir "$tmp/x"
# Only the one member this needs is unpacked.
tar -xzf "$tmp/$archive" -C "$tmp/x" "$name/cos" || fail "could not unpack $name/cos from $archive"
bin="$tmp/x/$name/cos"
[ -f "$bin" ] || fail "$archive has no $name/cos"
chmod 755 "$bin"

# Verified: now, and only now, the install directory is touched. The binary lands under a
# temporary name beside its destination and is renamed into place, so a running cos is never
# half-overwritten.
mkdir -p "$install_dir" || fail "cannot create $install_dir"
cp "$bin" "$install_dir/.cos.install.$$" || { rm -f "$install_dir/.cos.install.$$"; fail "cannot write to $install_dir"; }
mv -f "$install_dir/.cos.install.$$" "$install_dir/cos" || { rm -f "$install_dir/.cos.install.$$"; fail "cannot install $install_dir/cos"; }

say "installed $("$install_dir/cos" --version 2>/dev/null || echo cos) to $install_dir/cos"
case ":${PATH:-}:" in
  *":$install_dir:"*) ;;
  *) say "note: $install_dir is not on PATH; add it (e.g. export PATH=\"$install_dir:\$PATH\")" ;;
esac
