#!/bin/sh
# usage: scripts/oracle/ort_run.sh MODEL OUTDIR NAME=FILE.npy ...
# Installs onnxruntime-node when needed, then runs ort_run.js with
# ORT_DISABLE_TELEMETRY=1. ORT_THREADS sets intraOpNumThreads (default 1).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
"$here/setup.sh"
ORT_DISABLE_TELEMETRY=1 exec node "$here/ort_run.js" "$@"
