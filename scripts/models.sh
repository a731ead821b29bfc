#!/bin/sh
# Produces tandem's test models in $TANDEM_CACHE/models/ (default <repo>/.cache):
#   resnet18 mobilenet_v2 squeezenet1_1 shufflenet_v2_x1_0 efficientnet_b0
#       torchvision, random weights (fixed seed), opset 13, input "input"
#       1x3x224x224, output "output"
#   transformer_op13 transformer_op17
#       4-layer nn.TransformerEncoder (d_model 256, 4 heads, ff 1024, gelu),
#       input "input" 1x128x256, output "output"; op17 has LayerNormalization
#   ppocr_det ppocr_rec ppocr_cls
#       pretrained PP-OCRv4 det/rec and ppocr mobile v2 cls from the PyPI
#       wheel rapidocr-onnxruntime (rec carries its character dictionary in
#       its metadata, key "character")
#   silero_vad
#       pretrained Silero VAD v5 (opset 16, an If on the sample rate, LSTM)
#       from the PyPI wheel silero-vad
# Idempotent: prints nothing and does nothing when all 11 files exist.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TANDEM_CACHE:-$ROOT/.cache}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
OUT=$CACHE/models
PY=/usr/bin/python3

TORCH_MODELS="resnet18 mobilenet_v2 squeezenet1_1 shufflenet_v2_x1_0 efficientnet_b0 transformer_op13 transformer_op17"

missing=""
for m in $TORCH_MODELS; do
    [ -f "$OUT/$m.onnx" ] || missing="$missing $m"
done
if [ -n "$missing" ]; then
    mkdir -p "$OUT"
    # shellcheck disable=SC2086
    "$PY" "$ROOT/scripts/models/export_torchvision.py" "$OUT" $missing
fi

# name in the cache : file inside the test venv's site-packages (the wheels of
# scripts/py/models.txt, installed by scripts/testenv.sh)
PAIRS="ppocr_det:rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx
ppocr_rec:rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx
ppocr_cls:rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx
silero_vad:silero_vad/data/silero_vad.onnx"
wheel_missing=0
for pair in $PAIRS; do
    [ -f "$OUT/${pair%%:*}.onnx" ] || wheel_missing=1
done
[ "$wheel_missing" -eq 0 ] && exit 0

VPY=$(TANDEM_CACHE=$CACHE sh "$ROOT/scripts/testenv.sh" --print)
site=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$OUT"
for pair in $PAIRS; do
    name=${pair%%:*}
    src=$site/${pair#*:}
    [ -f "$OUT/$name.onnx" ] && continue
    if [ ! -f "$src" ]; then
        echo "models: $src is missing from the test environment (scripts/py/models.txt)." >&2
        exit 1
    fi
    tmp=$OUT/.$name.onnx.tmp.$$
    cp "$src" "$tmp"
    mv "$tmp" "$OUT/$name.onnx"
    echo "models: copied $name.onnx"
done
