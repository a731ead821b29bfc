#!/bin/sh
# Installs the reference runtime, onnxruntime-node, into $TANDEM_CACHE/npm
# (default <repo>/.cache/npm). Idempotent and quiet when already installed.
set -eu
ORT_VERSION=1.30.0
exec "$(dirname "$0")/npm-ensure.sh" onnxruntime-node "$ORT_VERSION"
