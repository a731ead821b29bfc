#!/bin/sh
# examples.ocr: render the demo page, read it with tandem-ocr on
# vnpu:rk3588,cpu and cpu (--expect: every line exactly, both the same).
# usage: ocr_test.sh TANDEM_OCR SOURCE_DIR CACHE WORK
set -eu
ocr=$1 src=$2 cache=$3 work=$4
for m in ppocr_det ppocr_rec; do
    [ -f "$cache/models/$m.onnx" ] || { echo "examples.ocr: $cache/models/$m.onnx is missing (scripts/models.sh)"; exit 77; }
done
rm -rf "$work" && mkdir -p "$work"
/usr/bin/python3 "$src/examples/ocr/render_page.py" "$work/page.ppm" "$work/page.txt"
"$ocr" "$work/page.ppm" "$cache/models/ppocr_det.onnx" "$cache/models/ppocr_rec.onnx" \
    --devices vnpu:rk3588,cpu --expect "$work/page.txt" --ledger-dir "$work" | tee "$work/out.txt"
# what the demo promises to show: the placement by reason, the guard, the text
grep -q '^det on vnpu:rk3588,cpu: ' "$work/out.txt"
grep -q 'precision guard: ' "$work/out.txt"
grep -q '5 of 5 expected lines read exactly' "$work/out.txt"
grep -q 'read the same text' "$work/out.txt"
for f in device-det.ledger.json device-rec.ledger.json det-input.npy; do
    [ -s "$work/$f" ] || { echo "examples.ocr: $work/$f was not written"; exit 1; }
done
# a page it cannot read is one sentence and exit 2, not a crash
printf 'P3\n1 1\n255\n0 0 0\n' > "$work/bad.ppm"
set +e
"$ocr" "$work/bad.ppm" "$cache/models/ppocr_det.onnx" "$cache/models/ppocr_rec.onnx" 2> "$work/bad.err"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "is not a binary PPM" "$work/bad.err" || { echo "examples.ocr: a P3 page gave exit $rc"; cat "$work/bad.err"; exit 1; }
echo "examples.ocr: ok"
