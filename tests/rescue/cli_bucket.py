#!/usr/bin/env python3
"""Shape bucketing through the CLI (issue 18, static shapes; ctest rescue.bucket).

  cli_bucket.py TANDEM CACHE WORKDIR

PP-OCRv4 det (fully convolutional, dynamic H/W) on vnpu:edge-npu (static
shapes only, fp16) with --bucket 640x640,960x960:
  - a 608x480 crop of the reference image (not a bucket) is padded
    bottom/right to 640x640, run on the one 640x640 plan (nodes on the
    device), and its probability map cropped back to 608x480, for pad zero
    and edge (the mask makes them the same). Against cpu's unbucketed
    608x480 run: cosine >= 0.999 and the text boxes (threshold 0.3,
    8-connected, >= 16 pixels) equal; max |diff| over the map, in the
    interior 32 px from the padded edges and on that border printed;
  - the ledger's "bucket" object records input 608x480, bucket 640x640,
    crop 608x480, one padded run, the mask;
  - 600x500 (which cpu cannot run unbucketed: the FPN's Add meets 76 vs
    75) runs bucketed to 600x500 on the 640x640 plan;
  - 640x640 (a bucket): not padded, cosine >= 0.999 against cpu;
  - a 1000x1000 image fits no bucket: exit non-zero, one sentence;
  - --calibration-input with --bucket: one sentence, non-zero exit;
  - resnet18 (GlobalAveragePool -> Flatten -> Gemm) is refused with
    SHAPE_UNSUPPORTED naming Flatten and GlobalAveragePool;
  - --bucket 640, 640x0 and --bucket-pad reflect exit 1 (usage).
Exit 77 when the model set is absent.
"""
import json
import os
import subprocess
import sys

import numpy as np

TANDEM, CACHE, WORK = sys.argv[1:4]
os.makedirs(WORK, exist_ok=True)
DET = os.path.join(CACHE, "models", "ppocr_det.onnx")
RESNET = os.path.join(CACHE, "models", "resnet18.onnx")
X = os.path.join(CACHE, "refs", "ppocr_det", "inputs", "x.npy")
if not all(os.path.exists(p) for p in (DET, RESNET, X)):
    print("skip: the model set is absent")
    sys.exit(77)
DEV = "vnpu:edge-npu,cpu"
BUCKETS = "640x640,960x960"
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def tandem(*args):
    return subprocess.run([TANDEM, *args], capture_output=True, text=True)


def run(model, x, out, *opts):
    xin = os.path.join(WORK, out + "_in.npy")
    np.save(xin, x)
    odir = os.path.join(WORK, out)
    r = tandem("run", model, "--input", "x=" + xin, "--output-dir", odir, "--overwrite",
               "--ledger", odir + ".json", *opts)
    if r.returncode != 0:
        return r, None, None
    y = np.load(os.path.join(odir, "sigmoid_0.tmp_0.npy"))
    with open(odir + ".json") as f:
        return r, y, json.load(f)


def cosine(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def boxes(prob, thresh=0.3, min_pixels=16):
    """DB's boxes: 8-connected components of prob > thresh, as (y0, x0, y1, x1)."""
    m = prob[0, 0] > thresh
    h, w = m.shape
    seen = np.zeros_like(m)
    out = []
    for y, x in zip(*np.nonzero(m)):
        if seen[y, x]:
            continue
        stack = [(y, x)]
        seen[y, x] = True
        ys, xs = [], []
        while stack:
            cy, cx = stack.pop()
            ys.append(cy)
            xs.append(cx)
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    ny, nx = cy + dy, cx + dx
                    if 0 <= ny < h and 0 <= nx < w and m[ny, nx] and not seen[ny, nx]:
                        seen[ny, nx] = True
                        stack.append((ny, nx))
        if len(ys) >= min_pixels:
            out.append((min(ys), min(xs), max(ys), max(xs)))
    return sorted(out)


x = np.load(X)
# 608x480: a size cpu runs unbucketed (multiples of 32), not a bucket
x608 = np.ascontiguousarray(x[:, :, :608, :480])
r, ref, _ = run(DET, x608, "cpu608")
check(r.returncode == 0, f"cpu runs ppocr_det at 608x480 ({r.stderr.strip()[:200]})")
ref_boxes = boxes(ref) if ref is not None else []
print(f"     cpu 608x480: {len(ref_boxes)} text boxes")
for pad in ("zero", "edge"):
    r, y, led = run(DET, x608, "bucket608_" + pad, "--devices", DEV, "--bucket", BUCKETS, "--bucket-pad", pad)
    check(r.returncode == 0, f"{pad}: bucketed run on {DEV} succeeds ({r.stderr.strip()[:300]})")
    if y is None or ref is None:
        continue
    check(y.shape == ref.shape, f"{pad}: output cropped to {ref.shape} (got {y.shape})")
    if y.shape != ref.shape:
        continue
    d = np.abs(y.astype(np.float64) - ref)
    inner = d[..., :608 - 32, :480 - 32]
    border = np.concatenate([d[..., 608 - 32:, :].ravel(), d[..., :608 - 32, 480 - 32:].ravel()])
    c = cosine(y, ref)
    print(f"     {pad}: cosine {c:.6f}, max|diff| {d.max():.4g}, interior (32 px from the padded edges) "
          f"max {inner.max():.4g} mean {inner.mean():.3g}, border max {border.max():.4g} mean {border.mean():.3g}")
    check(c >= 0.999, f"{pad}: cosine on the region {c:.6f} >= 0.999")
    yb = boxes(y)
    check(yb == ref_boxes, f"{pad}: text boxes equal cpu's ({len(yb)} vs {len(ref_boxes)}, "
          f"{len(set(yb) & set(ref_boxes))} identical)")
    cached = led.get("adaptation", {}).get("shapes", {}).get("cached", [])
    check([k.get("signature") for k in cached] == ["x=1x3x640x640;bucket_mask=1x1x640x640"]
          and cached[0].get("nodes_by_device", {}).get("vnpu:edge-npu", 0) > 0,
          f"{pad}: one plan, for the 640x640 bucket, with nodes on the static-shape device "
          f"({[(k.get('signature'), k.get('nodes_by_device')) for k in cached]})")
    b = led.get("bucket", {})
    last = b.get("last", {})
    check(last.get("input") == [608, 480] and last.get("bucket") == [640, 640] and last.get("crop") == [608, 480]
          and b.get("padded_runs") == 1 and b.get("pad") == pad and "bucket_mask" in b.get("mask", ""),
          f"{pad}: ledger bucket records input 608x480, bucket 640x640, crop 608x480 ({json.dumps(b)[:300]})")
    print(f"     {pad}: GlobalAveragePool channel gates averaged over the real region: {b.get('channel_gates')}")

# an image that is a bucket already: no padding, no crop, equal to cpu's
r, ref640, _ = run(DET, x, "cpu640")
r2, y640, led = run(DET, x, "bucket640", "--devices", DEV, "--bucket", BUCKETS)
if ref640 is not None and y640 is not None:
    c = cosine(y640, ref640)
    check(y640.shape == ref640.shape and c >= 0.999 and led.get("bucket", {}).get("padded_runs") == 0
          and led["bucket"].get("runs") == 1, f"640x640 (a bucket): not padded, cosine {c:.6f} against cpu")
else:
    check(False, f"640x640 runs ({r.stderr.strip()[:200]} / {r2.stderr.strip()[:200]})")

# 600x500: cpu cannot run it unbucketed; bucketed, it equals cpu on the padded image
x600 = np.ascontiguousarray(x[:, :, :600, :500])
r, _, _ = run(DET, x600, "cpu600")
check(r.returncode != 0, "cpu alone cannot run ppocr_det at 600x500 (not a multiple of 32)")
r, y, led = run(DET, x600, "bucket600", "--devices", DEV, "--bucket", BUCKETS)
check(r.returncode == 0 and y is not None and y.shape == (1, 1, 600, 500),
      f"600x500 bucketed runs, output 1x1x600x500 ({r.stderr.strip()[:300]})")
if y is not None and ref is not None:
    # no cpu reference exists at 600x500; the figure against the 608x480 map
    # on the common 600x480 region is printed
    c = cosine(y[..., :, :480], ref[..., :600, :])
    print(f"     600x500 vs cpu's 608x480 map on the common 600x480 region: cosine {c:.6f}")
    sig = [k.get("signature") for k in led.get("adaptation", {}).get("shapes", {}).get("cached", [])]
    check(sig == ["x=1x3x640x640;bucket_mask=1x1x640x640"], f"600x500 runs the 640x640 plan ({sig})")

# no bucket holds 1000x1000
big = np.zeros((1, 3, 1000, 1000), np.float32)
r, _, _ = run(DET, big, "big", "--devices", DEV, "--bucket", BUCKETS)
check(r.returncode != 0 and "fits no bucket" in r.stderr, f"1000x1000 fits no bucket: {r.stderr.strip()[:200]}")

# calibration input sets are refused with bucketing (one sentence)
r = tandem("run", DET, "--input", "x=" + os.path.join(WORK, "cpu608_in.npy"), "--devices", DEV, "--bucket", BUCKETS,
           "--calibration-input", "x=" + os.path.join(WORK, "cpu608_in.npy"))
check(r.returncode != 0 and "calibration input sets" in r.stderr, f"calibration sets refused: {r.stderr.strip()[:200]}")

# a classifier is refused
xin = os.path.join(WORK, "res_in.npy")
np.save(xin, np.zeros((1, 3, 224, 224), np.float32))
r = tandem("run", RESNET, "--input", "data=" + xin, "--devices", DEV, "--bucket", "224x224,256x256")
if "not an input" in r.stderr:  # the input's name
    r = tandem("run", RESNET, "--random", "--devices", DEV, "--bucket", "224x224,256x256")
check(r.returncode != 0 and "SHAPE_UNSUPPORTED" in r.stderr and "Flatten" in r.stderr
      and "GlobalAveragePool" in r.stderr, f"resnet18 refused: {r.stderr.strip()[:300]}")

# bad values
for opts in (["--bucket", "640"], ["--bucket", "640x0"], ["--bucket-pad", "reflect", "--bucket", "640x640"]):
    r = tandem("run", DET, "--random", "--devices", DEV, *opts)
    check(r.returncode == 1, f"{' '.join(opts)} exits 1 (usage) ({r.returncode}: {r.stderr.strip()[:160]})")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all checks passed")
