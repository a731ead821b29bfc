#!/usr/bin/python3
"""What a user checks, beyond the numbers: the class, the text, the boxes.

usage: /usr/bin/python3 tests/models/semantic.py GOT_DIR REF_DIR MODEL CASE_DIR

For each output in REF_DIR (onnxruntime's) that has a meaning:
  - classifier logits (1 x C, C >= 100): tandem's top-1 class equals
    onnxruntime's;
  - a CTC text recogniser's probabilities (N x T x C, with the model's
    character list in its metadata key "character", as PP-OCR rec keeps it):
    the greedy CTC decode of tandem's output equals the text that was
    rendered (CASE_DIR/text.txt, one line per batch item) and onnxruntime's;
  - a text detector's probability map (1 x 1 x H x W): the boxes of the
    connected regions above 0.3 (PaddleOCR DB's threshold, 4-connected,
    at least 10 pixels) are the same boxes as onnxruntime's, and a rendered
    page (not a .random case) has some.
  - a decoder's "logits" (B x S x V): the next token tandem predicts
    (argmax) at every position equals onnxruntime's; its "present_*" KV
    cache (B x H x P+S x D) begins with the "past_*" input of the case
    (CASE_DIR/inputs/past_*.npy), bit for bit, and is S longer.
For a quantized model's case the class and the boxes are onnxruntime's
fused (integer) run's, as tandem runs QDQ groups in integer arithmetic too;
its unfused run (CASE_DIR/outputs_unfused) is printed beside, not judged.
Prints one line per check; exits 1 when one fails, 0 when all pass (also
when no output has such a meaning: the numeric comparison covers it).
"""
import os
import sys

import numpy as np


def ctc_decode(probs, chars):
    out = []
    for seq in probs.argmax(-1):
        text, prev = [], 0
        for i in seq:
            if i != prev and i != 0:
                text.append(chars[i] if i < len(chars) else "?")
            prev = i
        out.append("".join(text))
    return out


def regions(mask, min_pixels=10):
    """Bounding boxes (y0, x0, y1, x1) of 4-connected regions, sorted."""
    h, w = mask.shape
    label = np.zeros((h, w), np.int32)
    boxes = []
    n = 0
    for y, x in zip(*np.nonzero(mask)):
        if label[y, x]:
            continue
        n += 1
        stack = [(y, x)]
        label[y, x] = n
        y0 = y1 = y
        x0 = x1 = x
        count = 0
        while stack:
            cy, cx = stack.pop()
            count += 1
            y0, y1, x0, x1 = min(y0, cy), max(y1, cy), min(x0, cx), max(x1, cx)
            for ny, nx in ((cy - 1, cx), (cy + 1, cx), (cy, cx - 1), (cy, cx + 1)):
                if 0 <= ny < h and 0 <= nx < w and mask[ny, nx] and not label[ny, nx]:
                    label[ny, nx] = n
                    stack.append((ny, nx))
        if count >= min_pixels:
            boxes.append((int(y0), int(x0), int(y1), int(x1)))
    return sorted(boxes)


def characters(model_path):
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    for p in m.metadata_props:
        if p.key == "character":
            # PP-OCR: index 0 is the CTC blank, then the dictionary, then a space.
            return ["<blank>"] + p.value.splitlines() + [" "]
    return None


def main(argv):
    if len(argv) != 5:
        sys.stderr.write("usage: semantic.py GOT_DIR REF_DIR MODEL CASE_DIR\n")
        return 2
    got_dir, ref_dir, model_path, case_dir = argv[1:]
    failed = 0
    chars = None
    read_text = False
    for f in sorted(os.listdir(ref_dir)):
        if not f.endswith(".npy") or not os.path.isfile(os.path.join(got_dir, f)):
            continue
        ref = np.load(os.path.join(ref_dir, f))
        got = np.load(os.path.join(got_dir, f))
        name = f[:-4]
        if got.shape != ref.shape or not np.issubdtype(ref.dtype, np.floating):
            continue
        if name == "logits" and ref.ndim == 3:
            g, r = got.argmax(-1), ref.argmax(-1)
            top2 = np.sort(ref, -1)[..., -2:]
            ok = np.array_equal(g, r)
            print("%s: %s next token at %d positions, %d differ (onnxruntime's smallest top-1 margin %.3g)" % (
                name, "ok" if ok else "FAIL", r.size, int(np.count_nonzero(g != r)),
                float((top2[..., 1] - top2[..., 0]).min())))
            failed += not ok
            continue
        if name.startswith("present_") and ref.ndim == 4:
            past_file = os.path.join(case_dir, "inputs", "past_" + name[len("present_"):] + ".npy")
            if os.path.isfile(past_file):
                past = np.load(past_file)
                p = past.shape[2]
                ok = (got.shape[:2] == past.shape[:2] and got.shape[3] == past.shape[3] and
                      got.shape[2] > p and np.array_equal(got[:, :, :p], past))
                print("%s: %s cache of %d keeps the past %d bit for bit and adds %d" % (
                    name, "ok" if ok else "FAIL", got.shape[2], p, got.shape[2] - p))
                failed += not ok
                continue
        unfused_file = os.path.join(case_dir, "outputs_unfused", f)
        unfused = np.load(unfused_file) if os.path.isfile(unfused_file) else None
        if ref.ndim == 2 and ref.shape[0] == 1 and ref.shape[1] >= 100:
            # a quantized model's: onnxruntime's fused (integer) answer, as
            # tandem's; its unfused float evaluation only printed
            ok = int(got.argmax()) == int(ref.argmax())
            also = ", unfused %d" % unfused.argmax() if unfused is not None else ""
            print("%s: %s top-1 class %d (onnxruntime %d%s)" % (
                name, "ok" if ok else "FAIL", got.argmax(), ref.argmax(), also))
            failed += not ok
        elif ref.ndim == 3:
            if chars is None:
                chars = characters(model_path) or []
            if len(chars) != ref.shape[2]:
                continue
            text_file = os.path.join(case_dir, "text.txt")
            want = open(text_file).read().splitlines() if os.path.isfile(text_file) else None
            g, r = ctc_decode(got, chars), ctc_decode(ref, chars)
            ok = g == r and (want is None or g == want[:len(g)])
            print("%s: %s read %r (onnxruntime %r, rendered %r)" % (name, "ok" if ok else "FAIL", g, r, want))
            failed += not ok
            read_text = True
        elif ref.ndim == 4 and ref.shape[:2] == (1, 1) and ref.shape[2] >= 32:
            bg, br = regions(got[0, 0] > 0.3), regions(ref[0, 0] > 0.3)
            # A rendered page has text: finding none would be a failure too
            # (uniform random input has none, in both runtimes).
            also = ""
            if unfused is not None:
                also = "; onnxruntime unfused %d" % len(regions(unfused[0, 0] > 0.3))
            ok = bg == br and (len(br) > 0 or case_dir.rstrip('/').endswith('.random'))
            print("%s: %s %d text boxes at threshold 0.3 (onnxruntime %d)%s%s" % (
                name, "ok" if ok else "FAIL", len(bg), len(br), also,
                "" if bg == br else ", boxes differ: %s" % sorted(set(bg) ^ set(br))[:4]))
            failed += not ok
    # A case rendered from text (text.txt) must have been read back: a model
    # whose character list could not be matched to its output is a failure,
    # not a case with nothing to check.
    if os.path.isfile(os.path.join(case_dir, "text.txt")) and not read_text and \
            characters(model_path) is not None:
        print("FAIL: %s has text.txt but no output was decoded as text" % case_dir)
        failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
