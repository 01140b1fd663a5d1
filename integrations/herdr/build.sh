#!/bin/sh
# Writes run.sh, the launcher every manifest entry runs, with the absolute path of `cos`.
# Herdr runs this during `herdr plugin install` (not on `plugin link`: run it by hand then).
# Only cos's path is baked in: the launcher finds nothing relative to a checkout directory,
# because Herdr builds GitHub installs in a temporary checkout that it moves afterwards.
set -eu

here=$(cd -- "$(dirname -- "$0")" && pwd -P)

find_cos() {
    if [ -n "${COS_BIN:-}" ]; then
        printf '%s\n' "$COS_BIN"
        return 0
    fi
    if found=$(command -v cos 2>/dev/null) && [ -n "$found" ]; then
        printf '%s\n' "$found"
        return 0
    fi
    for candidate in "${HOME:-/nonexistent}/.cargo/bin/cos" "${HOME:-/nonexistent}/.local/bin/cos" \
        /opt/homebrew/bin/cos /usr/local/bin/cos /usr/bin/cos; do
        if [ -x "$candidate" ]; then
            printf '%s\n' "$candidate"
            return 0
        fi
    done
    return 1
}

if ! cos=$(find_cos); then
    echo "build.sh: cos was not found (set COS_BIN, or install it: cargo install --locked --path <createos-sandbox>/cos)" >&2
    exit 1
fi
case "$cos" in
    /*) ;;
    *) cos="$(cd -- "$(dirname -- "$cos")" && pwd -P)/$(basename -- "$cos")" ;;
esac
if [ ! -x "$cos" ]; then
    echo "build.sh: $cos is not executable" >&2
    exit 1
fi
case "$cos" in
    *"
"*) echo "build.sh: the path of cos contains a newline" >&2; exit 1 ;;
esac
if ! "$cos" herdr --help >/dev/null 2>&1; then
    echo "build.sh: $cos does not provide the herdr actions (too old?)" >&2
    exit 1
fi

# Single-quote the path for the launcher: ' becomes '\''.
quoted=$(printf '%s' "$cos" | sed "s/'/'\\\\''/g")
tmp="$here/.run.sh.$$"
trap 'rm -f "$tmp"' EXIT
{
    echo '#!/bin/sh'
    echo '# Written by build.sh: the CreateOS Herdr actions, run by cos.'
    echo "COS_BIN='$quoted'"
    echo 'export COS_BIN'
    echo 'exec "$COS_BIN" herdr "$@"'
} > "$tmp"
chmod 755 "$tmp"
mv -f "$tmp" "$here/run.sh"
trap - EXIT
echo "build.sh: run.sh runs $cos"
