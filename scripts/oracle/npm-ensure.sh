#!/bin/sh
# usage: scripts/oracle/npm-ensure.sh PACKAGE VERSION
# Installs PACKAGE@VERSION from the npm registry into $TANDEM_CACHE/npm
# (default <repo>/.cache/npm) unless it is already there. Quiet on success.
# onnxruntime-node's postinstall (which would download extra binaries) is
# skipped through ONNXRUNTIME_NODE_INSTALL=skip; its npm tarball already ships
# the linux-x64 CPU binaries.
set -eu

[ $# -eq 2 ] || { echo "usage: npm-ensure.sh PACKAGE VERSION" >&2; exit 2; }
pkg=$1
ver=$2

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${TANDEM_CACHE:-$ROOT/.cache}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
PREFIX=$CACHE/npm
stamp=$PREFIX/.installed-$(printf '%s@%s' "$pkg" "$ver" | tr -c 'A-Za-z0-9._@-' '_')

have() {
    [ -f "$stamp" ] && grep -q "\"version\": *\"$ver\"" "$PREFIX/node_modules/$pkg/package.json" 2>/dev/null
}
have && exit 0

command -v npm >/dev/null 2>&1 || { echo "npm-ensure: npm is not installed (run scripts/install-deps.sh)." >&2; exit 1; }
mkdir -p "$PREFIX"
log=$PREFIX/.npm-install.$$.log
install() {
    ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund \
        --loglevel=error --save-exact --prefix "$PREFIX" "$pkg@$ver" >"$log" 2>&1
}
# Serialise concurrent installs into the same prefix when flock is available.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$PREFIX/.lock"
    flock 9
    # Another process may have finished the same install while we waited.
    have && exit 0
fi
if ! install; then
    tail -n 20 "$log" >&2
    rm -f "$log"
    echo "npm-ensure: npm could not install $pkg@$ver into $PREFIX." >&2
    exit 1
fi
rm -f "$log"
got=$(node -e 'console.log(require(process.argv[1]).version)' "$PREFIX/node_modules/$pkg/package.json")
if [ "$got" != "$ver" ]; then
    echo "npm-ensure: expected $pkg@$ver in $PREFIX but found version $got." >&2
    exit 1
fi
: >"$stamp"
echo "npm-ensure: installed $pkg@$ver"
