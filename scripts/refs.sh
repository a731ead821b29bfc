#!/bin/sh
# Builds reference inputs and outputs for tandem's test models, two cases
# per model:
#   $TANDEM_CACHE/refs/<model>/          realistic inputs (scripts/oracle/
#                                        make_inputs.py: rendered scenes, pages
#                                        and text lines, sentence embeddings,
#                                        speech-like audio, a sentence's bytes
#                                        after a KV cache), the main case
#   $TANDEM_CACHE/refs/<model>.random/   fixed-seed uniform inputs, an extra case
# each holding
#   inputs/<sanitized input name>.npy, inputs.txt (one NAME=PATH line per
#   input), outputs/<sanitized output name>.npy, and text.txt for text lines;
#   a quantized model (*_qdq, *_qop) also outputs_unfused/: onnxruntime's
#   outputs with graph optimisation off (the QDQ graph run as written, no
#   integer fusion), in both cases and instead of outputs64/;
#   the realistic case also outputs64/: a float64 referee's outputs
#   (scripts/oracle/f64_ref.py; not for ppocr_det(_op19), where it takes a minute and
#   2 GB, nor for ssdlite320, whose selections a float64 run would change),
#   which the model tests consult where tandem and onnxruntime differ.
# Outputs come from onnxruntime's Python package (scripts/oracle/ort_run.py,
# CPU, ORT_THREADS default 1) in the test venv (scripts/testenv.sh), except
# graph outputs produced by a Sigmoid node, which are recomputed in float64
# from onnxruntime's own logits (scripts/oracle/exact_sigmoid.py says why).
# Runs scripts/models.sh first. Each case folder is built under a temporary
# name and renamed when complete, so an existing folder is a finished one and
# is skipped (unless its model file is newer, or it predates this layout).
# usage: scripts/refs.sh [MODEL ...]     (default: all 19)
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TANDEM_CACHE:-$ROOT/.cache}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
export TANDEM_CACHE="$CACHE"
REFS=$CACHE/refs
STAMP=.v3

ALL="resnet18 mobilenet_v2 squeezenet1_1 shufflenet_v2_x1_0 efficientnet_b0 \
transformer_op13 transformer_op17 ppocr_det ppocr_rec ppocr_cls silero_vad ssdlite320 \
decoder_op23 shufflenet_v2_op21 ppocr_det_op19 \
resnet18_qdq mobilenet_v2_qdq ppocr_det_qdq resnet18_qop"

# MODEL -> KIND SHAPE... [--set NAME=VALUE] (see make_inputs.py)
spec_of() {
    case $1 in
        transformer_*) echo embedding 1x128x256 ;;
        ppocr_det|ppocr_det_op19|ppocr_det_qdq) echo ocr-det 1x3x640x640 ;;
        ppocr_rec) echo ocr-line 1x3x48x320 ;;
        ppocr_cls) echo ocr-line 1x3x48x192 ;;
        silero_vad) echo audio 1x576 2x1x128 --set sr=16000 ;;
        ssdlite320) echo detect 3x320x320 ;;
        # 32 tokens after a past of 48 (the cache of layers 0 and 1)
        decoder_op23) echo decoder 1x32 1x32 1x2x48x32 1x2x48x32 1x2x48x32 1x2x48x32 ;;
        *) echo imagenet 1x3x224x224 ;;
    esac
}

models=${*:-$ALL}
for m in $models; do
    case " $ALL " in *" $m "*) ;; *) echo "refs: unknown model '$m'." >&2; exit 2 ;; esac
done

"$ROOT/scripts/models.sh"

todo=""
for m in $models; do
    for case_dir in "$m" "$m.random"; do
        # A folder older than its model (re-exported since) is rebuilt.
        if [ ! -f "$REFS/$case_dir/inputs.txt" ] || [ ! -f "$REFS/$case_dir/$STAMP" ] ||
           [ -n "$(find "$CACHE/models/$m.onnx" -newer "$REFS/$case_dir/inputs.txt")" ]; then
            todo="$todo $case_dir"
        fi
    done
done
[ -z "$todo" ] && exit 0

PY=$(sh "$ROOT/scripts/testenv.sh" --print)
ORACLE=$ROOT/scripts/oracle
mkdir -p "$REFS"

tmp=""
trap 'if [ -n "$tmp" ]; then rm -rf "$tmp"; fi' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for case_dir in $todo; do
    m=${case_dir%.random}
    # shellcheck disable=SC2046
    set -- $(spec_of "$m")
    [ "$case_dir" != "$m" ] && { shift; set -- random "$@"; }
    final=$REFS/$case_dir
    tmp=$REFS/.$case_dir.tmp.$$
    rm -rf "$tmp"
    mkdir -p "$tmp"
    REFS_FINAL_DIR=$final "$PY" "$ORACLE/make_inputs.py" "$CACHE/models/$m.onnx" "$tmp" "$@"
    # inputs.txt holds the final paths; point the oracle at the temporary ones.
    set --
    while IFS= read -r line; do
        name=${line%%=*}
        path=${line#*=}
        set -- "$@" "$name=$tmp/inputs/${path##*/}"
    done <"$tmp/inputs.txt"
    "$PY" "$ORACLE/ort_run.py" "$CACHE/models/$m.onnx" "$tmp/outputs" "$@"
    "$PY" "$ORACLE/exact_sigmoid.py" "$CACHE/models/$m.onnx" "$tmp/outputs" "$@" >/dev/null
    case $m in
        *_qdq|*_qop)
            ORT_OPT=off "$PY" "$ORACLE/ort_run.py" "$CACHE/models/$m.onnx" "$tmp/outputs_unfused" "$@" ;;
    esac
    if [ "$case_dir" = "$m" ] && [ "${m%_op19}" != ppocr_det ] && [ "$m" != ssdlite320 ] &&
       [ "${m%_qdq}" = "$m" ] && [ "${m%_qop}" = "$m" ]; then
        "$PY" "$ORACLE/f64_ref.py" "$CACHE/models/$m.onnx" "$tmp/outputs64" "$@"
    fi
    touch "$tmp/$STAMP"
    rm -rf "$final"
    mv "$tmp" "$final"
    tmp=""
    echo "refs: generated $case_dir"
done
