#!/bin/sh
# Runs one model of the test set on tandem and compares its outputs with
# onnxruntime's (the oracle), using the inputs scripts/refs.sh generated.
#   run_model.sh TANDEM_BINARY CACHE_DIR CASE [extra tandem run options…]
# CASE is MODEL (realistic inputs) or MODEL.random (uniform random inputs).
set -eu
tandem=$1 cache=$2 case_name=$3
shift 3
model=${case_name%.random}
refs="$cache/refs/$case_name"
if [ ! -f "$cache/models/$model.onnx" ] || [ ! -f "$refs/inputs.txt" ]; then
    echo "run_model: $refs is missing: run 'make data' (scripts/refs.sh) first" >&2
    exit 1
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/tandem-model.XXXXXX")
trap 'rm -rf "$out"' EXIT
args=""
while IFS= read -r line; do
    [ -n "$line" ] && args="$args --input $line"
done < "$refs/inputs.txt"
# shellcheck disable=SC2086
"$tandem" run "$cache/models/$model.onnx" $args --output-dir "$out/got" "$@"
if [ -d "$refs/outputs_unfused" ]; then
    # a quantized model: dequantized outputs are judged in steps of their scale
    /usr/bin/python3 "$(dirname "$0")/compare.py" "$out/got" "$refs/outputs" \
        --model "$cache/models/$model.onnx" --unfused "$refs/outputs_unfused"
else
    /usr/bin/python3 "$(dirname "$0")/compare.py" "$out/got" "$refs/outputs" "$refs/outputs64"
fi
/usr/bin/python3 "$(dirname "$0")/semantic.py" "$out/got" "$refs/outputs" "$cache/models/$model.onnx" "$refs"
