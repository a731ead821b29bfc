#!/bin/sh
# Builds reference inputs and outputs for tandem's test models:
#   $TANDEM_CACHE/refs/<model>/inputs/<sanitized input name>.npy
#   $TANDEM_CACHE/refs/<model>/inputs.txt     one NAME=PATH line per input
#   $TANDEM_CACHE/refs/<model>/outputs/<sanitized output name>.npy
# Inputs are fixed-seed uniform [-1, 1] float32; outputs come from
# onnxruntime-node (scripts/oracle/ort_run.js, CPU, ORT_THREADS default 1),
# except graph outputs produced by a Sigmoid node, which are recomputed in
# float64 from onnxruntime's own logits (scripts/oracle/exact_sigmoid.py
# says why).
# Runs scripts/models.sh first. Each model's folder is built under a
# temporary name and renamed when complete, so an existing folder is a
# finished one and is skipped (unless its model file is newer).
# usage: scripts/refs.sh [MODEL ...]     (default: all 10)
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TANDEM_CACHE:-$ROOT/.cache}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
export TANDEM_CACHE="$CACHE"
PY=/usr/bin/python3
REFS=$CACHE/refs

ALL="resnet18 mobilenet_v2 squeezenet1_1 shufflenet_v2_x1_0 efficientnet_b0 \
transformer_op13 transformer_op17 ppocr_det ppocr_rec ppocr_cls"

shape_of() {
    case $1 in
        transformer_*) echo 1x128x256 ;;
        ppocr_det) echo 1x3x640x640 ;;
        ppocr_rec) echo 1x3x48x320 ;;
        ppocr_cls) echo 1x3x48x192 ;;
        *) echo 1x3x224x224 ;;
    esac
}

models=${*:-$ALL}
for m in $models; do
    case " $ALL " in *" $m "*) ;; *) echo "refs: unknown model '$m'." >&2; exit 2 ;; esac
done

"$ROOT/scripts/models.sh"

todo=""
for m in $models; do
    # A folder older than its model (re-exported since) is rebuilt.
    if [ ! -f "$REFS/$m/inputs.txt" ] || [ ! -f "$REFS/$m/.v2" ] ||
       [ -n "$(find "$CACHE/models/$m.onnx" -newer "$REFS/$m/inputs.txt")" ]; then
        todo="$todo $m"
    fi
done
[ -z "$todo" ] && exit 0

"$ROOT/scripts/oracle/setup.sh"
mkdir -p "$REFS"

tmp=""
trap 'if [ -n "$tmp" ]; then rm -rf "$tmp"; fi' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for m in $todo; do
    final=$REFS/$m
    tmp=$REFS/.$m.tmp.$$
    rm -rf "$tmp"
    mkdir -p "$tmp"
    REFS_FINAL_DIR=$final "$PY" "$ROOT/scripts/oracle/make_inputs.py" \
        "$CACHE/models/$m.onnx" "$tmp" "$(shape_of "$m")"
    # inputs.txt holds the final paths; point ort_run at the temporary ones.
    set --
    while IFS= read -r line; do
        name=${line%%=*}
        path=${line#*=}
        set -- "$@" "$name=$tmp/inputs/${path##*/}"
    done <"$tmp/inputs.txt"
    ORT_DISABLE_TELEMETRY=1 node "$ROOT/scripts/oracle/ort_run.js" \
        "$CACHE/models/$m.onnx" "$tmp/outputs" "$@"
    "$PY" "$ROOT/scripts/oracle/exact_sigmoid.py" "$CACHE/models/$m.onnx" "$tmp/outputs" "$@" >/dev/null
    touch "$tmp/.v2"
    rm -rf "$final"
    mv "$tmp" "$final"
    tmp=""
    echo "refs: generated $m"
done
