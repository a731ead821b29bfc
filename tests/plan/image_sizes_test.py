#!/usr/bin/python3
"""A device compiled for a finite set of image sizes (a vnpu profile's
"image_sizes", dev_ext.image_sizes) and `--bucket profile`:

    image_sizes_test.py TANDEM CACHE WORKDIR

edge-sized: edge-npu with "image_sizes": ["640x640", "960x960"].
- PP-OCRv4 det with a dynamic input, or at 608x480: every node SHAPE_UNSUPPORTED
  on it, the sentence naming the sizes and the input, the hint --bucket profile;
  at 640x640 no node is refused for its shape;
- run --bucket profile at 608x480: padded to 640x640 (the ledger says so), the
  probability map within fp16 of cpu's unbucketed run (cosine >= 0.999);
- --bucket profile on a list without image sizes: exit 1 (usage), one sentence;
- a malformed "image_sizes" entry: the profile refused naming it.
Skips (77) when the cache lacks the model."""
import json
import os
import subprocess
import sys

import numpy as np

tandem, cache, work = sys.argv[1:4]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(args):
    p = subprocess.run([tandem] + args, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


det = os.path.join(cache, "models", "ppocr_det.onnx")
x640 = os.path.join(cache, "refs", "ppocr_det", "inputs", "x.npy")
if not (os.path.isfile(det) and os.path.isfile(x640)):
    print("the cache lacks ppocr_det (make data)")
    sys.exit(77)
os.makedirs(work, exist_ok=True)
here = os.path.dirname(os.path.abspath(__file__))
prof = json.load(open(os.path.join(os.path.dirname(os.path.dirname(here)), "profiles", "edge-npu.json")))
prof["name"], prof["image_sizes"] = "edge-sized", ["640x640", "960x960"]
sized = os.path.join(work, "edge-sized.json")
json.dump(prof, open(sized, "w"))
dev = "vnpu:" + sized + ",cpu"

for shape, what in ((None, "a dynamic size"), ("x=1x3x608x480", "is 608x480")):
    rc, out, err = run(["plan", det, "--devices", dev, "--json"] + (["--shape", shape] if shape else []))
    led = json.loads(out) if rc == 0 else {}
    nodes = led.get("nodes", [])
    refused = [n for n in nodes if n["reason"] == "SHAPE_UNSUPPORTED" and "640x640, 960x960" in n.get("detail", "")
               and what in n.get("detail", "")]
    check(rc == 0 and nodes and len(refused) == len(nodes),
          "%s: every node refused naming the sizes and '%s' (%d of %d; %s)" % (shape, what, len(refused), len(nodes),
                                                                            (nodes or [{}])[0].get("detail")))
    rc, out, err = run(["plan", det, "--devices", dev] + (["--shape", shape] if shape else []))
    check(rc == 0 and "--bucket profile" in out, "%s: the story's hint names --bucket profile: %s" % (shape, out))
rc, out, err = run(["plan", det, "--devices", dev, "--json", "--shape", "x=1x3x640x640"])
led = json.loads(out) if rc == 0 else {}
check(rc == 0 and not any(n["reason"] == "SHAPE_UNSUPPORTED" for n in led.get("nodes", [])),
      "640x640: no node refused for its shape")

x = np.load(x640)
x608 = os.path.join(work, "x608.npy")
np.save(x608, np.ascontiguousarray(x[:, :, :608, :480]))
outs = {}
for name, args in (("bucketed", ["--devices", dev, "--bucket", "profile"]), ("cpu", ["--devices", "cpu"])):
    o = os.path.join(work, name)
    rc, out, err = run(["run", det, "--input", "x=" + x608, "--output-dir", o, "--overwrite", "--ledger", o + ".json"]
                       + args)
    check(rc == 0, "run %s: exit 0 (%s)" % (name, err))
    outs[name] = np.load(os.path.join(o, "sigmoid_0.tmp_0.npy")) if rc == 0 else None
    if name == "bucketed" and rc == 0:
        b = json.load(open(o + ".json")).get("bucket", {})
        check(b.get("shapes") == [[640, 640], [960, 960]] and b.get("last", {}).get("bucket") == [640, 640],
              "the ledger's bucket: the profile's sizes, the run padded to 640x640: %s" % b)
a, c = outs.get("bucketed"), outs.get("cpu")
if a is not None and c is not None:
    cos = float(a.ravel() @ c.ravel() / (np.linalg.norm(a) * np.linalg.norm(c)))
    check(a.shape == c.shape == (1, 1, 608, 480) and cos >= 0.999 and np.abs(a - c).max() < 0.05,
          "the cropped map equals cpu's within fp16 (cosine %.6f, max %.4g)" % (cos, np.abs(a - c).max()))
    print("608x480 through the 640x640 bucket on edge-sized: cosine %.6f, max |diff| %.4g" % (cos, np.abs(a - c).max()))

rc, out, err = run(["run", det, "--devices", "vnpu:edge-npu,cpu", "--input", "x=" + x608, "--bucket", "profile",
                    "--output-dir", os.path.join(work, "none"), "--overwrite"])
check(rc == 1 and len(err.strip().splitlines()) == 1 and "--bucket profile" in err and "image_sizes" in err,
      "--bucket profile without image sizes: exit 1 (usage), one sentence (%d: %r)" % (rc, err))

prof["image_sizes"] = ["640x640", "640"]
bad = os.path.join(work, "edge-bad.json")
json.dump(prof, open(bad, "w"))
rc, out, err = run(["plan", det, "--devices", "vnpu:" + bad + ",cpu"])
check(rc != 0 and "image_sizes[1]" in err and len(err.strip().splitlines()) == 1,
      "a malformed entry: refused naming image_sizes[1] (%d: %r)" % (rc, err))

print("image_sizes: %d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
