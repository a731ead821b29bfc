"""Write the inputs of one reference case for an ONNX model.

usage: python make_inputs.py MODEL OUTDIR KIND SHAPE [SHAPE ...] [--set NAME=VALUE ...]

KIND says what the inputs look like:
  random     fixed-seed uniform values (floats in [-1, 1], integers in [0, 10),
             bools random): an extra case, since uniform noise hides errors
  imagenet   a rendered scene (sky gradient, shapes, a word of text, sensor
             noise), resized to the input's HxW, RGB, normalised with
             ImageNet's mean/std as torchvision's classifiers expect
  detect     a rendered scene as RGB in [0, 1], CxHxW or NxCxHxW (torchvision's
             detection models normalise inside)
  ocr-det    a rendered page of text lines in DejaVu fonts (black and
             coloured text, a table rule, a stamp), PaddleOCR det's
             normalisation: BGR, /255, ImageNet mean/std
  ocr-line   one rendered line of text filling the height, PaddleOCR rec/cls's
             normalisation: /255, (x - 0.5) / 0.5; the text is written to
             OUTDIR/text.txt
  embedding  a sentence's token embeddings (a fixed table, N(0, 1)) plus
             sinusoidal positions, as a transformer encoder's input
  audio      16 kHz speech-like audio: a voiced vowel (glottal pulses through
             three formant resonators) with pitch movement and room noise;
             other float inputs (recurrent state) are zero
  decoder    a decoder with a KV cache (input_ids, position_ids, past_key_*/
             past_value_* of shape B x H x P x D): the bytes of an English
             sentence as token ids, positions P .. P+S-1 continuing after the
             past, and the past keys/values the model itself computes on the
             sentence's first P bytes under onnxruntime (each present_* output
             feeds the past_* input of the same suffix)
--set NAME=VALUE fixes an integer scalar input (e.g. Silero VAD's sr=16000).

SHAPE is like 1x3x224x224, one per graph input that --set does not fix
(inputs that are also initializers are skipped), in graph order; a SHAPE
must agree with every fixed dimension of the model. Writes
OUTDIR/inputs/<sanitized name>.npy and OUTDIR/inputs.txt with one NAME=PATH
line per input, PATH absolute as it will be once OUTDIR is renamed to FINAL
(env REFS_FINAL_DIR, default OUTDIR). Runs in the test venv (numpy, onnx,
pillow); fonts from Debian's fonts-dejavu-core.
"""
import os
import re
import sys

import numpy as np

SEED = 1234
FONT_DIR = "/usr/share/fonts/truetype/dejavu"
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)

LINES = [
    "Invoice 2026-118  Due: 14 Dec",
    "tandem runs ONNX on NPU + CPU",
    "Total amount: 1,284.50 EUR",
    "The quick brown fox jumps over",
    "Shipping to 42 Rue du Port",
    "Order #A7-3310  qty 12",
]

# Short lines for the text-line models (PaddleOCR rec reads 48x320: a ratio of
# at most about 6.7 keeps the glyphs unsqueezed).
SHORT_LINES = ["ab 12 Dec 2026", "Total: 1,284.50", "NPU + CPU", "Order A7-3310"]


def sanitize(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def die(msg):
    sys.stderr.write("make_inputs: %s\n" % msg)
    sys.exit(1)


def font(name, size):
    from PIL import ImageFont
    path = os.path.join(FONT_DIR, name)
    if not os.path.isfile(path):
        die("font %s is missing (apt-get install fonts-dejavu-core)." % path)
    return ImageFont.truetype(path, size)


def scene(h, w, rng):
    """A natural-looking RGB image: gradient sky, ground, shapes, text, noise."""
    from PIL import Image, ImageDraw
    W, H = 448, 448
    y = np.linspace(0.0, 1.0, H, dtype=np.float32)[:, None]
    sky = np.stack([120 + 80 * y, 170 + 50 * y, 235 - 20 * y], -1) * np.ones((1, W, 1), np.float32)
    img = Image.fromarray(np.clip(sky, 0, 255).astype(np.uint8))
    d = ImageDraw.Draw(img)
    d.rectangle([0, 300, W, H], fill=(86, 125, 70))
    d.ellipse([300, 40, 380, 120], fill=(250, 220, 90))
    d.polygon([(60, 300), (170, 150), (280, 300)], fill=(120, 110, 100))
    d.rectangle([250, 220, 400, 340], fill=(180, 60, 50), outline=(40, 20, 20), width=4)
    d.rectangle([290, 270, 330, 340], fill=(70, 45, 30))
    for k in range(6):
        x0 = int(rng.integers(0, W - 60))
        y0 = int(rng.integers(320, H - 30))
        d.ellipse([x0, y0, x0 + 50, y0 + 25], fill=tuple(int(c) for c in rng.integers(30, 200, 3)))
    d.text((20, 20), "STOP 42", font=font("DejaVuSans-Bold.ttf", 44), fill=(255, 255, 255))
    img = img.resize((w, h), Image.BILINEAR)
    a = np.asarray(img, np.float32)
    a = a + rng.normal(0.0, 3.0, a.shape).astype(np.float32)
    return np.clip(a, 0, 255)


def page(h, w, rng):
    """A page of text: lines of several sizes and colours, a rule, a stamp."""
    from PIL import Image, ImageDraw
    img = Image.new("RGB", (w, h), (250, 248, 240))
    d = ImageDraw.Draw(img)
    y = 18
    faces = ["DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf", "DejaVuSans-Bold.ttf"]
    k = 0
    while y < h - 40:
        size = int(rng.integers(18, 34))
        colour = (20, 20, 20) if k % 3 else (30, 40, 150)
        d.text((int(rng.integers(12, 60)), y), LINES[k % len(LINES)], font=font(faces[k % len(faces)], size),
               fill=colour)
        y += int(size * 1.9)
        k += 1
        if k == 4:
            d.line([(12, y - 6), (w - 12, y - 6)], fill=(90, 90, 90), width=2)
    d.ellipse([w - 170, h - 170, w - 30, h - 30], outline=(200, 30, 30), width=5)
    d.text((w - 150, h - 115), "PAID", font=font("DejaVuSans-Bold.ttf", 36), fill=(200, 30, 30))
    a = np.asarray(img, np.float32)
    return np.clip(a + rng.normal(0.0, 2.0, a.shape).astype(np.float32), 0, 255)


def text_line(h, w, text):
    """One line of black text on white, scaled to fill the height, padded right
    (PaddleOCR's resize_norm_img keeps the aspect ratio and pads)."""
    from PIL import Image, ImageDraw
    f = font("DejaVuSans.ttf", 64)
    box = f.getbbox(text)
    tw, th = box[2] + 16, 96
    img = Image.new("RGB", (tw, th), (255, 255, 255))
    ImageDraw.Draw(img).text((8, 8), text, font=f, fill=(0, 0, 0))
    nw = min(w, max(1, int(round(tw * h / th))))
    img = img.resize((nw, h), Image.BILINEAR)
    a = np.zeros((h, w, 3), np.float32)  # zero after normalisation = grey 127.5
    a[:, :nw] = np.asarray(img, np.float32)
    a[:, nw:] = 127.5
    return a


def audio(n, rng, rate=16000):
    """A voiced vowel: glottal pulse train (f0 gliding 120 -> 160 Hz) through
    formant resonators at 700, 1200 and 2600 Hz, plus room noise."""
    t = np.arange(n) / rate
    f0 = 120.0 + 40.0 * t / max(t[-1], 1e-9)
    phase = np.cumsum(f0 / rate)
    src = (np.diff(np.floor(phase), prepend=0.0) > 0).astype(np.float64)
    out = np.zeros(n)
    for fc, bw in ((700.0, 110.0), (1200.0, 120.0), (2600.0, 160.0)):
        r = np.exp(-np.pi * bw / rate)
        a1, a2 = 2 * r * np.cos(2 * np.pi * fc / rate), -r * r
        y1 = y2 = 0.0
        for i in range(n):
            y = src[i] + a1 * y1 + a2 * y2
            out[i] += y
            y2, y1 = y1, y
    out = out / (np.abs(out).max() + 1e-12) * 0.4
    out += rng.normal(0.0, 0.005, n)
    return out.astype(np.float32)


def embedding(shape, rng):
    b, t, d = shape
    vocab = rng.normal(0.0, 1.0, (512, d)).astype(np.float32)
    words = " ".join(LINES).lower().split()
    ids = [sum(map(ord, words[i % len(words)])) % 512 for i in range(t)]
    pos = np.arange(t)[:, None] / np.power(10000.0, (2 * (np.arange(d)[None, :] // 2)) / d)
    pe = np.where(np.arange(d)[None, :] % 2 == 0, np.sin(pos), np.cos(pos)).astype(np.float32)
    x = vocab[ids] + pe
    return np.broadcast_to(x, (b, t, d)).astype(np.float32)


def decoder(model_path, free, shape_of):
    """Inputs of a KV-cached decoder: a sentence's bytes continuing a past.

    Returns {input name: array}. The prefix run uses onnxruntime (in the test
    venv) on the model itself, with an empty past."""
    import onnxruntime as ort
    from onnx import helper
    shapes = {v.name: tuple(int(d) for d in shape_of[v.name].split("x")) for v in free}
    ints = [v for v in free if v.type.tensor_type.elem_type != 1]
    pasts = [v for v in free if v.type.tensor_type.elem_type == 1]
    ids_in = next((v for v in ints if "position" not in v.name), None)
    pos_in = next((v for v in ints if "position" in v.name), None)
    if ids_in is None or pos_in is None or not pasts or any(len(shapes[v.name]) != 4 for v in pasts):
        die("decoder inputs are input_ids, position_ids and BxHxPxD past_* tensors.")
    b, s = shapes[ids_in.name]
    p = shapes[pasts[0].name][2]
    text = " ".join(LINES).encode("ascii")
    if p + s > len(text):
        die("decoder inputs: past %d + sequence %d exceed the sentence's %d bytes." % (p, s, len(text)))
    tokens = np.frombuffer(text, np.uint8).astype(np.int64)
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    feeds = {ids_in.name: np.tile(tokens[:p], (b, 1)),
             pos_in.name: np.tile(np.arange(p, dtype=np.int64), (b, 1))}
    for v in pasts:
        d = shapes[v.name]
        feeds[v.name] = np.zeros((b, d[1], 0, d[3]), helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type))
    names = [o.name for o in sess.get_outputs()]
    outs = dict(zip(names, sess.run(None, feeds)))
    out = {ids_in.name: np.tile(tokens[p:p + s], (b, 1)),
           pos_in.name: np.tile(np.arange(p, p + s, dtype=np.int64), (b, 1))}
    for v in pasts:
        present = v.name.replace("past", "present", 1)
        if present not in outs or outs[present].shape != shapes[v.name]:
            die("decoder input '%s' has no output '%s' of shape %s." % (v.name, present, shapes[v.name]))
        out[v.name] = outs[present]
    return out


def make(kind, v, shape, dtype, k, outdir, first_float):
    rng = np.random.default_rng(SEED + k)
    if kind == "random" or not np.issubdtype(dtype, np.floating):
        if np.issubdtype(dtype, np.floating):
            return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
        if dtype == np.bool_:
            return rng.integers(0, 2, size=shape).astype(np.bool_)
        if np.issubdtype(dtype, np.integer):
            return rng.integers(0, 10, size=shape).astype(dtype)
        die("input '%s' has an unsupported type." % v.name)
    if kind == "audio":
        if not first_float:
            return np.zeros(shape, dtype)
        n = int(np.prod(shape[1:]))
        return np.stack([audio(n, rng) for _ in range(shape[0])]).reshape(shape).astype(dtype)
    if kind == "embedding":
        if len(shape) != 3:
            die("embedding inputs are BxTxD, not %s." % (shape,))
        return embedding(shape, rng).astype(dtype)
    if kind == "detect" and len(shape) == 3 and shape[0] == 3:
        return np.transpose(scene(shape[1], shape[2], rng) / 255.0, (2, 0, 1)).astype(dtype)
    if len(shape) != 4 or shape[1] != 3:
        die("%s inputs are Nx3xHxW, not %s." % (kind, shape))
    n, _, h, w = shape
    imgs = []
    for i in range(n):
        if kind == "imagenet":
            a = (scene(h, w, rng) / 255.0 - IMAGENET_MEAN) / IMAGENET_STD
        elif kind == "detect":
            a = scene(h, w, rng) / 255.0
        elif kind == "ocr-det":
            a = (page(h, w, rng)[:, :, ::-1] / 255.0 - IMAGENET_MEAN) / IMAGENET_STD
        elif kind == "ocr-line":
            text = SHORT_LINES[(i + k) % len(SHORT_LINES)]
            with open(os.path.join(outdir, "text.txt"), "a") as f:
                f.write(text + "\n")
            a = (text_line(h, w, text) / 255.0 - 0.5) / 0.5
        else:
            die("unknown KIND '%s'." % kind)
        imgs.append(np.transpose(a, (2, 0, 1)))
    return np.stack(imgs).astype(dtype)


def main(argv):
    sets = {}
    args = []
    it = iter(argv[1:])
    for a in it:
        if a == "--set":
            kv = next(it, "")
            name, eq, val = kv.partition("=")
            if not eq:
                die("--set expects NAME=VALUE, not '%s'." % kv)
            sets[name] = int(val)
        else:
            args.append(a)
    if len(args) < 3:
        die("usage: make_inputs.py MODEL OUTDIR KIND SHAPE [SHAPE ...] [--set NAME=VALUE ...]")
    import onnx
    from onnx import helper
    model_path, outdir, kind, shapes = args[0], args[1], args[2], args[3:]
    final = os.path.abspath(os.environ.get("REFS_FINAL_DIR", outdir))
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    inputs = [v for v in m.graph.input if v.name not in inits]
    free = [v for v in inputs if v.name not in sets]
    if len(free) != len(shapes):
        die("%s has %d inputs to fill but %d shapes were given." % (model_path, len(free), len(shapes)))
    os.makedirs(os.path.join(outdir, "inputs"), exist_ok=True)
    lines = []
    shape_of = dict(zip((v.name for v in free), shapes))
    first_float = True
    fixed = decoder(model_path, free, shape_of) if kind == "decoder" else {}
    for k, v in enumerate(inputs):
        tt = v.type.tensor_type
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if v.name in sets:
            a = np.array(sets[v.name], dtype=dtype)
        elif v.name in fixed:
            a = fixed[v.name]
        else:
            s = shape_of[v.name]
            shape = tuple(int(d) for d in s.split("x")) if s else ()
            dims = list(tt.shape.dim)
            if len(dims) != len(shape) or any(
                    d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != n
                    for d, n in zip(dims, shape)):
                die("shape %s does not fit input '%s' of %s." % (s, v.name, model_path))
            a = make(kind, v, shape, dtype, k, outdir, first_float)
            if np.issubdtype(dtype, np.floating):
                first_float = False
        fname = sanitize(v.name) + ".npy"
        np.save(os.path.join(outdir, "inputs", fname), a)
        lines.append("%s=%s\n" % (v.name, os.path.join(final, "inputs", fname)))
    with open(os.path.join(outdir, "inputs.txt"), "w") as f:
        f.writelines(lines)


if __name__ == "__main__":
    main(sys.argv)
