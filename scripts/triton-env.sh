#!/bin/sh
# Makes the Triton environment for the tandem backend's end-to-end test: a
# virtual environment under $TANDEM_CACHE/venv-triton (default
# <repo>/.cache/venv-triton) holding PyTriton's wheel (it carries the
# `tritonserver` binary and libtritonserver.so) and tritonclient, pinned.
# Never touches a system Python. Idempotent: does nothing when the
# environment matches the pins; prints the environment's python on stdout
# with --print. Exits 0 with a message (and no venv) when pip cannot
# install the pins here, so `make test` goes on without the server test.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TANDEM_CACHE:-$ROOT/.cache}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
VENV=$CACHE/venv-triton
# The pins (numpy < 2: pytriton 0.7.0's requirement; the server itself
# needs none of it).
PINS="nvidia-pytriton==0.7.0 tritonclient[http,grpc]==2.73.0"
stamp=$VENV/.tandem-stamp
want=$(printf '%s\n' "$PINS" | cksum)

print=0
[ "${1:-}" = "--print" ] && print=1

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    base=""
    for py in python3 /usr/bin/python3; do
        if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then
            base=$py
            break
        fi
    done
    if [ -z "$base" ]; then
        echo "triton-env: no python3 with the venv module (apt-get install python3-venv); the Triton server test is not built." >&2
        exit 0
    fi
    log=$CACHE/.triton-env.$$.log
    trap 'rm -f "$log"' EXIT
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$CACHE/.triton-env.lock"
        flock 9
    fi
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "triton-env: installing $PINS into $VENV" >&2
        rm -rf "$VENV"
        # shellcheck disable=SC2086 # PINS is a word list on purpose
        if ! { "$base" -m venv "$VENV" &&
               "$VENV/bin/python" -m pip install -q --disable-pip-version-check $PINS; } >"$log" 2>&1; then
            tail -n 20 "$log" >&2
            echo "triton-env: pip could not install the Triton environment into $VENV; the Triton server test is not built." >&2
            rm -rf "$VENV"
            exit 0
        fi
        printf '%s\n' "$want" >"$stamp"
    fi
fi
[ "$print" -eq 1 ] && [ -f "$stamp" ] && echo "$VENV/bin/python"
exit 0
