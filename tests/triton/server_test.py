"""End-to-end test of libtriton_tandem.so in the real Triton server.

Starts `tritonserver` from PyTriton's wheel (the venv of
scripts/testenv.sh triton) on 127.0.0.1 with free ports and a model repository
of squeezenet1_1 served by tandem:

  sq_cpu     devices cpu, max_batch_size 8 (the model's batch is fixed at 1:
             row runs), dynamic batching
  sq_npu     devices vnpu:server-npu,cpu, same
  sqdyn_cpu  the model with a dynamic batch dim (made here with onnx),
             devices cpu: Triton's dynamic batcher hands several requests
             to one execute and tandem runs them as one batch
  sq_deny    devices vnpu:rk3588,cpu, fallback deny (its MaxPools use
             ceil_mode 1, which rk3588 refuses): must fail to load, naming
             every offender
  sq_fault   devices faulty:vnpu:server-npu?fail_every=150,cpu with the
             circuit breaker: injected device faults mid-stream, no failed
             request
  sq_edge    devices vnpu:edge-npu,cpu (4 MiB: one run at a time fits), two
             instances: concurrent clients, no failed request
  sq_auto    devices cpu, a config.pbtxt without input and output: the
             backend fills them from the ONNX model (auto-complete)
  str_upper  a string model (StringNormalizer, made here with onnx): BYTES
             in and out

then sends concurrent HTTP and gRPC requests with tritonclient, compares
the answers with onnxruntime's (computed by the test venv's python,
--ref-python), reads tandem's metrics from /metrics, and runs a bounded
load test (--load-requests requests or --load-seconds seconds, whichever
comes first, loopback only), printing throughput and p50/p99 latency.

Run with the Triton venv's python. Exit 0 on success, 1 on a failure.
"""
import argparse
import concurrent.futures as cf
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, flush=True)
    return cond


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


CONFIG = """backend: "tandem"
max_batch_size: 8
dynamic_batching {{ max_queue_delay_microseconds: {delay} }}
input [ {{ name: "input" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] }} ]
output [ {{ name: "output" data_type: TYPE_FP32 dims: [ 1000 ] }} ]
instance_group [ {{ count: {instances} kind: KIND_CPU }} ]
{params}
"""


def param(key, value):
    return 'parameters: { key: "%s" value: { string_value: "%s" } }' % (key, value)


AUTO_CONFIG = """backend: "tandem"
max_batch_size: 8
instance_group [ { count: 1 kind: KIND_CPU } ]
parameters: { key: "devices" value: { string_value: "cpu" } }
"""

STR_CONFIG = """backend: "tandem"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_STRING dims: [ 1, 3 ] } ]
output [ { name: "Y" data_type: TYPE_STRING dims: [ 1, 3 ] } ]
parameters: { key: "devices" value: { string_value: "cpu" } }
"""


def make_repo(root, onnx_path, dyn_path, str_path):
    models = {
        "sq_cpu": (onnx_path, [("devices", "cpu"), ("threads", "1")], 2, 500),
        "sq_npu": (onnx_path, [("devices", "vnpu:server-npu,cpu"), ("threads", "1")], 1, 500),
        "sqdyn_cpu": (dyn_path, [("devices", "cpu"), ("threads", "2")], 1, 20000),
        "sq_deny": (onnx_path, [("devices", "vnpu:rk3588,cpu"), ("fallback", "deny")], 1, 500),
        # Every 150th node call on the device fails; the breaker (never
        # opening here) re-executes each such run on cpu.
        "sq_fault": (onnx_path, [("devices", "faulty:vnpu:server-npu?fail_every=150,cpu"),
                                 ("breaker", "1000,100000,100000"), ("threads", "1")], 1, 500),
        "sq_edge": (onnx_path, [("devices", "vnpu:edge-npu,cpu"), ("threads", "1")], 2, 500),
    }
    for name, (src, params, instances, delay) in models.items():
        os.makedirs(os.path.join(root, name, "1"))
        os.symlink(src, os.path.join(root, name, "1", "model.onnx"))
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write(CONFIG.format(delay=delay, instances=instances,
                                  params="\n".join(param(k, v) for k, v in params)))
    for name, src, config in (("sq_auto", onnx_path, AUTO_CONFIG), ("str_upper", str_path, STR_CONFIG)):
        os.makedirs(os.path.join(root, name, "1"))
        os.symlink(src, os.path.join(root, name, "1", "model.onnx"))
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write(config)


REF_SCRIPT = r"""
import sys, numpy as np, onnx, onnxruntime as ort
mode = sys.argv[1]
if mode == "dyn":
    m = onnx.load(sys.argv[2])
    for v in list(m.graph.input) + list(m.graph.output):
        d = v.type.tensor_type.shape.dim[0]
        d.ClearField("dim_value")
        d.dim_param = "N"
    onnx.save(m, sys.argv[3])
elif mode == "strings":
    from onnx import helper, TensorProto
    n = helper.make_node("StringNormalizer", ["X"], ["Y"], case_change_action="UPPER")
    g = helper.make_graph([n], "upper", [helper.make_tensor_value_info("X", TensorProto.STRING, [1, 3])],
                          [helper.make_tensor_value_info("Y", TensorProto.STRING, [1, 3])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[2])
else:
    s = ort.InferenceSession(sys.argv[2], providers=["CPUExecutionProvider"])
    x = np.load(sys.argv[3])
    y = np.concatenate([s.run(None, {"input": x[i:i + 1]})[0] for i in range(x.shape[0])])
    np.save(sys.argv[4], y)
"""


def ref_python(py, *args):
    subprocess.run([py, "-c", REF_SCRIPT] + list(args), check=True)


def start_server(args, repo, ports, log):
    cmd = [args.tritonserver, "--model-repository=" + repo, "--backend-directory=" + args.backend_dir,
           "--model-control-mode=explicit", "--load-model=sq_cpu", "--load-model=sq_npu",
           "--load-model=sqdyn_cpu", "--load-model=sq_fault",
           "--load-model=sq_edge", "--load-model=sq_auto", "--load-model=str_upper", "--http-address=127.0.0.1", "--grpc-address=127.0.0.1",
           "--metrics-address=127.0.0.1", "--http-port=%d" % ports[0], "--grpc-port=%d" % ports[1],
           "--metrics-port=%d" % ports[2], "--exit-timeout-secs=10"]
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_server_child)


def _server_child():
    """In the server's process: its own process group (stopped as one), and
    killed when this test dies (a ctest timeout) so no server is left."""
    os.setsid()
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def wait_ready(proc, url, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url + "/v2/health/ready", timeout=2) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


def infer_http(url, model, x):
    c = httpclient.InferenceServerClient(url)
    i = httpclient.InferInput("input", list(x.shape), "FP32")
    i.set_data_from_numpy(x, binary_data=True)
    return c.infer(model, [i]).as_numpy("output")


def infer_grpc(url, model, x):
    c = grpcclient.InferenceServerClient(url)
    i = grpcclient.InferInput("input", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    return c.infer(model, [i]).as_numpy("output")


def close_enough(y, ref, exact):
    if y.shape != ref.shape:
        return False, "shape %s != %s" % (y.shape, ref.shape)
    err = float(np.abs(y - ref).max())
    scale = max(1.0, float(np.abs(ref).max()))
    if exact:
        return err <= 1e-4 * scale, "max abs %.3g" % err
    cos = min(float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b))) for a, b in zip(y, ref))
    top = all(int(a.argmax()) == int(b.argmax()) for a, b in zip(y, ref))
    return cos >= 0.999 and top, "max abs %.3g, min cosine %.6f, top-1 %s" % (err, cos, "equal" if top else "differs")


def metrics_text(url):
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        return r.read().decode()


def metric_value(text, name, **labels):
    for line in text.splitlines():
        if line.startswith(name + "{") and all('%s="%s"' % kv in line for kv in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def load_test(url, model, x, requests, seconds, concurrency):
    """Bounded: stops at `requests` requests or `seconds` seconds."""
    lat, errors = [], []
    deadline = time.time() + seconds
    sent = [0]

    def worker():
        c = httpclient.InferenceServerClient(url)
        i = httpclient.InferInput("input", list(x.shape), "FP32")
        i.set_data_from_numpy(x, binary_data=True)
        while time.time() < deadline:
            if sent[0] >= requests:
                return
            sent[0] += 1
            t = time.perf_counter()
            try:
                c.infer(model, [i])
                lat.append(time.perf_counter() - t)
            except Exception as e:  # noqa: BLE001 - counted and reported
                errors.append(str(e))

    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(concurrency) as ex:
        for f in [ex.submit(worker) for _ in range(concurrency)]:
            f.result()
    wall = time.perf_counter() - t0
    lat.sort()
    q = (lambda p: 1000 * lat[min(len(lat) - 1, int(p * len(lat)))]) if lat else (lambda p: float("nan"))
    return {"model": model, "requests": len(lat), "failed": len(errors), "concurrency": concurrency,
            "seconds": round(wall, 2), "throughput_per_s": round(len(lat) / wall, 2) if wall else 0,
            "p50_ms": round(q(0.50), 2), "p99_ms": round(q(0.99), 2), "first_error": errors[0] if errors else ""}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tritonserver", default="")
    ap.add_argument("--backend-dir", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--ref-python", required=True)
    ap.add_argument("--load-requests", type=int, default=300)
    ap.add_argument("--load-seconds", type=float, default=30)
    ap.add_argument("--load-concurrency", type=int, default=4)
    ap.add_argument("--json", default="")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if not args.tritonserver:
        import pytriton
        args.tritonserver = os.path.join(os.path.dirname(pytriton.__file__), "tritonserver", "bin", "tritonserver")
    if not os.path.exists(args.model):
        print("no model %s" % args.model)
        return 77

    work = tempfile.mkdtemp(prefix="tandem-triton-")
    proc = None
    log_path = os.path.join(work, "server.log")
    try:
        dyn = os.path.join(work, "squeezenet1_1_dyn.onnx")
        ref_python(args.ref_python, "dyn", args.model, dyn)
        strs = os.path.join(work, "upper.onnx")
        ref_python(args.ref_python, "strings", strs)
        repo = os.path.join(work, "repo")
        make_repo(repo, os.path.abspath(args.model), dyn, strs)
        rng = np.random.default_rng(21)
        x = rng.random((8, 3, 224, 224), dtype=np.float32)
        np.save(os.path.join(work, "x.npy"), x)
        ref_python(args.ref_python, "ref", args.model, os.path.join(work, "x.npy"), os.path.join(work, "ref.npy"))
        ref = np.load(os.path.join(work, "ref.npy"))

        ports = free_ports(3)
        http_url, grpc_url, metrics_url = ("127.0.0.1:%d" % p for p in ports)
        log = open(log_path, "w")
        proc = start_server(args, repo, ports, log)
        if not check(wait_ready(proc, "http://" + http_url, 180), "tritonserver became ready"):
            log.flush()
            print(open(log_path).read()[-4000:])
            return 1
        print("tritonserver ready on 127.0.0.1:%d (http), :%d (grpc), :%d (metrics)" % tuple(ports), flush=True)

        # Concurrent HTTP and gRPC requests of 1 and 2 rows on every model.
        jobs = []
        with cf.ThreadPoolExecutor(8) as ex:
            for model in ("sq_cpu", "sq_npu", "sqdyn_cpu"):
                for k in range(8):
                    rows = slice(k, k + 1) if k % 3 else slice(k - 1 if k else 0, (k - 1 if k else 0) + 2)
                    fn = infer_http if k % 2 == 0 else infer_grpc
                    url = http_url if fn is infer_http else grpc_url
                    jobs.append((model, fn.__name__, rows, ex.submit(fn, url, model, np.ascontiguousarray(x[rows]))))
            for model, proto, rows, fut in jobs:
                try:
                    y = fut.result()
                except Exception as e:  # noqa: BLE001
                    check(False, "%s %s rows %s: %s" % (model, proto, rows, e))
                    continue
                ok, how = close_enough(y, ref[rows], exact=model != "sq_npu")
                check(ok, "%s %s rows %d:%d equal to onnxruntime's (%s)" % (model, proto, rows.start, rows.stop, how))
        print("%d concurrent requests (HTTP and gRPC) compared with onnxruntime" % len(jobs), flush=True)

        # Batching: Triton's dynamic batcher gave tandem several requests in
        # one execute, which ran them as one batch (fewer runs than requests).
        c = httpclient.InferenceServerClient(http_url)
        with cf.ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda k: infer_http(http_url, "sqdyn_cpu", np.ascontiguousarray(x[k:k + 1])), range(8)))
        st = c.get_inference_statistics("sqdyn_cpu")["model_stats"][0]
        print("sqdyn_cpu: %d inferences in %d executions" % (st["inference_count"], st["execution_count"]))
        check(st["execution_count"] < st["inference_count"], "sqdyn_cpu batched requests into fewer executions")

        text = metrics_text("http://" + metrics_url)
        runs_dyn = metric_value(text, "tandem_runs_total", model="sqdyn_cpu")
        check(runs_dyn is not None and runs_dyn == st["execution_count"],
              "tandem_runs_total of sqdyn_cpu (%s) equals Triton's execution count (%d)" % (runs_dyn, st["execution_count"]))
        check((metric_value(text, "tandem_runs_total", model="sq_cpu") or 0) >= 8, "tandem_runs_total of sq_cpu")
        check(metric_value(text, "tandem_plan_nodes", model="sq_cpu", device="cpu") == 65, "plan nodes of sq_cpu on cpu")
        check(metric_value(text, "tandem_plan_boundary_bytes", model="sq_npu") is not None, "boundary bytes of sq_npu")
        for line in text.splitlines():
            if line.startswith("tandem_") and 'model="sq_npu"' in line:
                print("  " + line)

        # Device faults mid-stream: the breaker re-runs on cpu, no request fails.
        with cf.ThreadPoolExecutor(4) as ex:
            futs = [(k, ex.submit(infer_http if k % 2 else infer_grpc, http_url if k % 2 else grpc_url, "sq_fault",
                                  np.ascontiguousarray(x[k % 8:k % 8 + 1]))) for k in range(16)]
            for k, fut in futs:
                try:
                    ok, how = close_enough(fut.result(), ref[k % 8:k % 8 + 1], exact=False)
                    check(ok, "sq_fault request %d equal to onnxruntime's (%s)" % (k, how))
                except Exception as e:  # noqa: BLE001
                    check(False, "sq_fault request %d failed: %s" % (k, e))
        text = metrics_text("http://" + metrics_url)
        faults = metric_value(text, "tandem_device_faults_total", model="sq_fault")
        print("sq_fault: 16 requests, %s device faults, %s failed runs" %
              (faults, metric_value(text, "tandem_run_failures_total", model="sq_fault")))
        check((faults or 0) >= 1, "sq_fault saw injected device faults")

        # A small device (vnpu:edge-npu: one run's tensors fill its 4 MiB)
        # under concurrent clients on two instances: no request fails.
        with cf.ThreadPoolExecutor(8) as ex:
            futs = [(k, ex.submit(infer_http if k % 2 else infer_grpc, http_url if k % 2 else grpc_url, "sq_edge",
                                  np.ascontiguousarray(x[k % 8:k % 8 + 1]))) for k in range(24)]
            failed = 0
            for k, fut in futs:
                try:
                    ok, how = close_enough(fut.result(), ref[k % 8:k % 8 + 1], exact=False)
                    check(ok, "sq_edge request %d equal to onnxruntime's (%s)" % (k, how))
                except Exception as e:  # noqa: BLE001
                    failed += 1
                    check(False, "sq_edge request %d failed: %s" % (k, e))
        text = metrics_text("http://" + metrics_url)
        print("sq_edge: 24 concurrent requests (8 clients, 2 instances), %d failed; admission waits %s, refused %s" %
              (failed, metric_value(text, "tandem_run_admission_waits_total", model="sq_edge"),
               metric_value(text, "tandem_run_admission_refused_total", model="sq_edge")), flush=True)
        check(metric_value(text, "tandem_run_admission_refused_total", model="sq_edge") == 0,
              "sq_edge: tandem_run_admission_refused_total is 0")

        # Auto-complete: sq_auto's config.pbtxt has no input or output.
        cfg = c.get_model_config("sq_auto")
        ins = [(i["name"], i["data_type"], [int(d) for d in i["dims"]]) for i in cfg.get("input", [])]
        outs = [(o["name"], o["data_type"], [int(d) for d in o["dims"]]) for o in cfg.get("output", [])]
        print("sq_auto: inputs %s, outputs %s" % (ins, outs))
        check(ins == [("input", "TYPE_FP32", [3, 224, 224])] and outs == [("output", "TYPE_FP32", [1000])],
              "sq_auto's inputs and outputs filled from the model")
        try:
            ok, how = close_enough(infer_http(http_url, "sq_auto", np.ascontiguousarray(x[:1])), ref[:1], exact=True)
            check(ok, "sq_auto equal to onnxruntime's (%s)" % how)
        except Exception as e:  # noqa: BLE001
            check(False, "sq_auto request failed: %s" % e)

        # Strings: BYTES in and out, over HTTP and gRPC.
        words = np.array([[b"alpha", b"", b"Mixed Case 42"]], dtype=object)
        for proto, mod, url in (("http", httpclient, http_url), ("grpc", grpcclient, grpc_url)):
            try:
                i = mod.InferInput("X", [1, 3], "BYTES")
                i.set_data_from_numpy(words)
                y = mod.InferenceServerClient(url).infer("str_upper", [i]).as_numpy("Y")
                got = [v.decode() if isinstance(v, bytes) else str(v) for v in y.reshape(-1)]
                check(got == ["ALPHA", "", "MIXED CASE 42"],
                      "str_upper over %s: %s" % (proto, got))
            except Exception as e:  # noqa: BLE001
                check(False, "str_upper over %s failed: %s" % (proto, e))

        # A model that violates deny does not load; the error lists every offender.
        try:
            c.load_model("sq_deny")
            check(False, "sq_deny (fallback deny on vnpu:rk3588) was refused")
        except Exception as e:  # noqa: BLE001
            msg = str(e)
            print("sq_deny refused: " + msg[:600])
            check("offending node" in msg and msg.count("MaxPool") >= 3 and "ATTR_UNSUPPORTED" in msg,
                  "sq_deny's error names its three MaxPool offenders")
        check(c.is_model_ready("sq_cpu"), "sq_cpu still ready after the refused load")

        # The bounded load test (loopback, HTTP, one image per request), with
        # the server's own view (Triton's statistics: mean queue and compute
        # per request) beside the client's latencies.
        before = c.get_inference_statistics("sq_cpu")["model_stats"][0]["inference_stats"]
        figures = load_test(http_url, "sq_cpu", np.ascontiguousarray(x[:1]), args.load_requests, args.load_seconds,
                            args.load_concurrency)
        after = c.get_inference_statistics("sq_cpu")["model_stats"][0]["inference_stats"]
        for key in ("queue", "compute_infer"):
            n = int(after[key]["count"]) - int(before[key]["count"])
            ns = int(after[key]["ns"]) - int(before[key]["ns"])
            figures["server_%s_ms_mean" % key] = round(ns / n / 1e6, 2) if n else None
        print("load test: " + json.dumps(figures), flush=True)
        check(figures["failed"] == 0 and figures["requests"] > 0, "load test without failed requests")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(figures, f)
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if FAILURES and os.path.exists(log_path):
            print("--- server log (tail) ---")
            print("".join(line for line in open(log_path).readlines()[-60:] if not line.startswith(("|", "+"))))
        if args.keep:
            print("kept " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    if FAILURES:
        print("%d failure(s)" % len(FAILURES))
        return 1
    print("triton server: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
