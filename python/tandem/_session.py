"""InferenceSession and friends: onnxruntime's shape over libtandem."""
import ctypes
import json
import math
import os

import numpy as np

from . import _capi
from ._capi import lib, text, take_string, c_void_p, c_char_p, c_int64, c_size_t, c_uint64

STATUS_NAMES = {0: "TDM_OK", 1: "TDM_E_USAGE", 2: "TDM_E_MODEL", 3: "TDM_E_UNSUPPORTED", 4: "TDM_E_INPUT",
                5: "TDM_E_IO", 6: "TDM_E_NOMEM", 7: "TDM_E_DEVICE", 8: "TDM_E_POLICY", 9: "TDM_E_RUNTIME",
                10: "TDM_E_INTERNAL"}

KIND_TENSOR, KIND_SEQUENCE, KIND_NONE, KIND_MAP = 0, 1, 2, 3
# SessionOptions.fusion: True and False stand for the library's words.
_FUSION_WORDS = {True: "on", False: "off"}

# numpy dtype -> tdm_dtype (ONNX TensorProto numbering), and back. bfloat16
# comes out as its uint16 bits, float8 and 4-bit types as uint8/int8 (as in
# tdm_tensor_save_npy).
_TO_TDM = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int8): 3, np.dtype(np.uint16): 4,
           np.dtype(np.int16): 5, np.dtype(np.int32): 6, np.dtype(np.int64): 7, np.dtype(np.bool_): 9,
           np.dtype(np.float16): 10, np.dtype(np.float64): 11, np.dtype(np.uint32): 12,
           np.dtype(np.uint64): 13, np.dtype(np.complex64): 14, np.dtype(np.complex128): 15}
_FROM_TDM = {v: k for k, v in _TO_TDM.items()}
_FROM_TDM.update({16: np.dtype(np.uint16), 17: np.dtype(np.uint8), 18: np.dtype(np.uint8),
                  19: np.dtype(np.uint8), 20: np.dtype(np.uint8), 21: np.dtype(np.uint8), 22: np.dtype(np.int8)})
TDM_STRING = 8


class TandemError(RuntimeError):
    """A tandem call failed: .status is the tdm_status number, .status_name its
    name ("TDM_E_INPUT"), .message the library's sentence."""

    def __init__(self, status, message):
        self.status = int(status)
        self.status_name = STATUS_NAMES.get(self.status, "TDM_E_%d" % self.status)
        self.message = message
        super().__init__("%s: %s" % (self.status_name, message))


def _check(status, sentence_fn):
    if status != 0:
        raise TandemError(status, sentence_fn() or text(lib.tdm_status_str(status)))


class NodeArg:
    """A graph input or output, as onnxruntime's NodeArg: .name, .shape (ints,
    symbol names or None per dimension), .type ("tensor(float)")."""

    def __init__(self, name, shape, type_, optional=False):
        self.name, self.shape, self.type, self.optional = name, shape, type_, optional

    def __repr__(self):
        return "NodeArg(name=%r, type=%r, shape=%r)" % (self.name, self.type, self.shape)


class SessionOptions:
    """What onnxruntime.SessionOptions offers that applies here, plus tandem's
    placement controls. Any object with intra_op_num_threads (an
    onnxruntime.SessionOptions, say) is accepted as sess_options too."""

    def __init__(self):
        self.intra_op_num_threads = 0     # 0: the default
        self.granularity = None           # "op", "subgraph" (default), "graph", "auto", "greedy"
        self.fallback = None              # "allow" (default), "deny", "deny-compute"
        self.max_fallback_ratio = None    # 0..1
        self.max_boundary_bytes = None
        self.pins = []                    # ["OP_OR_NODE=DEVICE", ...]
        self.plugins = []                 # paths of device plugins
        self.shapes = {}                  # input name -> dims (-1 keeps one)
        self.fusion = True                # True ("on"), False ("off") or "observed"
        self.verify = None                # the precision guard: "off", "first", "every:N"
        self.calibration = None           # a file of `tandem calibrate`
        self.calibration_inputs = []      # the precision guard's: [{input name: array}, ...], checked at load
        self.min_cosine = None
        self.max_abs = None


def _providers_list(providers):
    names = []
    for p in providers or []:
        if isinstance(p, (tuple, list)):
            p = p[0]
        p = str(p)
        if p == "CPUExecutionProvider":
            p = "cpu"
        names.append(p)
    return ",".join(names)


class _Options:
    """A tdm_session_options built from providers and sess_options; the words
    of choices (granularity, fallback, fusion, verify) are parsed by the
    library (tdm_*_parse), whose sentence goes to ctx."""

    def __init__(self, providers, so, ctx):
        self.p = c_void_p()
        self.ctx = ctx
        _check(lib.tdm_session_options_create(ctypes.byref(self.p)), lambda: "")
        try:
            self._str(lib.tdm_session_options_set_devices, "providers", _providers_list(providers))
            if so is None:
                return
            threads = getattr(so, "intra_op_num_threads", 0) or 0
            if threads:
                self._call(lib.tdm_session_options_set_threads, "intra_op_num_threads %r" % threads, int(threads))
            get = lambda name, default=None: getattr(so, name, default)
            if get("granularity"):
                self._choice(lib.tdm_session_options_set_granularity, lib.tdm_granularity_parse, get("granularity"))
            if get("fallback"):
                self._choice(lib.tdm_session_options_set_fallback, lib.tdm_fallback_mode_parse, get("fallback"))
            if get("verify"):
                self._choice(lib.tdm_session_options_set_verify, lib.tdm_verify_mode_parse, get("verify"), every=True)
            if get("max_fallback_ratio") is not None:
                self._call(lib.tdm_session_options_set_max_fallback_ratio, "max_fallback_ratio", float(get("max_fallback_ratio")))
            if get("max_boundary_bytes") is not None:
                self._call(lib.tdm_session_options_set_max_boundary_bytes, "max_boundary_bytes", int(get("max_boundary_bytes")))
            for pin in get("pins", []) or []:
                self._str(lib.tdm_session_options_add_pin, "pin", pin)
            for path in get("plugins", []) or []:
                self._str(lib.tdm_session_options_add_plugin, "plugin", os.fspath(path))
            for name, dims in (get("shapes", {}) or {}).items():
                dims = [-1 if d is None or isinstance(d, str) else int(d) for d in dims]
                arr = (c_int64 * max(len(dims), 1))(*dims)
                self._call(lib.tdm_session_options_set_shape, "shape of %r" % name,
                           name.encode(), len(dims), arr)
            fusion = get("fusion", True)
            if isinstance(fusion, bool):
                fusion = _FUSION_WORDS[fusion]
            self._choice(lib.tdm_session_options_set_fusion, lib.tdm_fusion_parse, fusion)
            if get("calibration"):
                self._str(lib.tdm_session_options_set_calibration, "calibration", os.fspath(get("calibration")))
            for k, feed in enumerate(get("calibration_inputs", []) or []):
                self._calibration_set(k, feed)
            if get("min_cosine") is not None or get("max_abs") is not None:
                mc = get("min_cosine")
                ma = get("max_abs")
                self._call(lib.tdm_session_options_set_precision, "min_cosine/max_abs",
                           0.99 if mc is None else float(mc), -1.0 if ma is None else float(ma))
        except BaseException:
            self.close()
            raise

    def _choice(self, setter, parse, word, every=False):
        """A choice's word (str) through the library's parser, then its setter."""
        value, n = ctypes.c_int(), ctypes.c_int()
        args = (ctypes.byref(value), ctypes.byref(n)) if every else (ctypes.byref(value),)
        st = parse(self.ctx, str(word).encode(), *args)
        if st != 0:
            raise TandemError(st, text(lib.tdm_ctx_error(self.ctx)))
        return self._call(setter, "%r" % (word,), value.value, *((n.value,) if every else ()))

    def _calibration_set(self, k, feed):
        """One {input name: array} of calibration_inputs (the library copies it)."""
        items = list(dict(feed).items())
        names = (c_char_p * max(len(items), 1))(*[str(n).encode() for n, _ in items])
        vals = (c_void_p * max(len(items), 1))()
        try:
            for i, (_, v) in enumerate(items):
                vals[i] = _to_tensor(v, KIND_TENSOR)
            self._call(lib.tdm_session_options_add_calibration_input, "calibration_inputs[%d]" % k, names, vals,
                       len(items))
        finally:
            for t in vals:
                if t:
                    lib.tdm_tensor_destroy(t)

    def _str(self, fn, what, value):
        return self._call(fn, "%s %r" % (what, value), str(value).encode())

    def _call(self, fn, what, *args):
        st = fn(self.p, *args)
        if st != 0:
            raise TandemError(st, "bad session option: %s" % what)
        return st

    def close(self):
        if self.p:
            lib.tdm_session_options_destroy(self.p)
            self.p = c_void_p()


# --------------------------------------------------------------- values

def _to_tensor(value, info_kind):
    """A new tdm_tensor (c_void_p) holding value; the caller destroys it."""
    out = c_void_p()
    if value is None:
        _check(lib.tdm_none_create(ctypes.byref(out)), lambda: "")
        return out
    if info_kind == KIND_SEQUENCE or (isinstance(value, (list, tuple)) and info_kind != KIND_TENSOR):
        items = [np.asarray(v) for v in value]
        elem = _TO_TDM.get(items[0].dtype, TDM_STRING) if items else 1
        _check(lib.tdm_sequence_create(elem, ctypes.byref(out)), lambda: "")
        try:
            for item in items:
                t = _to_tensor(item, KIND_TENSOR)
                _check(lib.tdm_sequence_append(out, t), lambda: "cannot append to a sequence")
        except BaseException:
            lib.tdm_tensor_destroy(out)
            raise
        return out
    arr = np.asarray(value)
    if arr.dtype.kind in "USO":
        code = TDM_STRING
    elif arr.dtype in _TO_TDM:
        code = _TO_TDM[arr.dtype]
    else:
        raise TandemError(4, "numpy element type %s has no tandem equivalent" % arr.dtype)
    arr = np.ascontiguousarray(arr)
    dims = (c_int64 * max(arr.ndim, 1))(*arr.shape)
    _check(lib.tdm_tensor_create(code, arr.ndim, dims, ctypes.byref(out)), lambda: "cannot create a tensor")
    try:
        if code == TDM_STRING:
            for i, s in enumerate(arr.reshape(-1)):
                b = s if isinstance(s, bytes) else str(s).encode("utf-8")
                _check(lib.tdm_tensor_set_string(out, i, b, len(b)), lambda: "cannot set a string")
        elif arr.nbytes:
            ctypes.memmove(lib.tdm_tensor_data(out), arr.ctypes.data, arr.nbytes)
    except BaseException:
        lib.tdm_tensor_destroy(out)
        raise
    return out


def _from_tensor(t):
    """A numpy array (or list for a sequence, None for an absent optional,
    a dict for a map as onnxruntime gives ZipMap's) copied out of the
    tdm_tensor t."""
    kind = lib.tdm_tensor_kind(t)
    if kind == KIND_NONE:
        return None
    if kind == KIND_MAP:
        return dict(zip(_from_tensor(lib.tdm_map_keys(t)).tolist(), _from_tensor(lib.tdm_map_values(t)).tolist()))
    if kind == KIND_SEQUENCE:
        return [_from_tensor(lib.tdm_sequence_item(t, i)) for i in range(lib.tdm_sequence_length(t))]
    rank = lib.tdm_tensor_rank(t)
    dims_p = lib.tdm_tensor_dims(t)
    shape = tuple(dims_p[i] for i in range(rank))
    code = lib.tdm_tensor_dtype(t)
    n = lib.tdm_tensor_count(t)
    if code == TDM_STRING:
        ptrs = ctypes.cast(lib.tdm_tensor_cdata(t), ctypes.POINTER(c_char_p))
        vals = [(ptrs[i] or b"").decode("utf-8", "replace") for i in range(n)]
        return np.array(vals, dtype=object).reshape(shape)
    dt = _FROM_TDM.get(code)
    if dt is None:
        raise TandemError(3, "element type %s cannot be returned to numpy" % text(lib.tdm_dtype_name(code)))
    nbytes = lib.tdm_tensor_nbytes(t)
    arr = np.empty(shape, dtype=dt)
    if nbytes:
        ctypes.memmove(arr.ctypes.data, lib.tdm_tensor_cdata(t), min(nbytes, arr.nbytes))
    return arr


def _value_info(v, map_key=0):
    """map_key: the key type of a sequence of maps (output only), else 0."""
    if v.rank < 0:
        shape = []
    else:
        shape = []
        for k in range(v.rank):
            d = v.dims[k]
            shape.append(int(d.value) if d.value >= 0 else (text(d.symbol) if d.symbol else None))
    t = "tensor(%s)" % text(lib.tdm_dtype_name(v.dtype))
    if map_key:
        t = "map(%s,%s)" % (text(lib.tdm_dtype_name(map_key)), t)
    if v.kind == KIND_SEQUENCE:
        t = "seq(%s)" % t
    if v.optional:
        t = "optional(%s)" % t
    return NodeArg(text(v.name), shape, t, bool(v.optional)), v.kind


# ------------------------------------------------------------------ plan

class Plan:
    """A placement: which device runs every node and why. .nodes (dicts: name,
    op, device, reason, detail), .devices ({name: node count}), .summary
    (dict), .policy_error (the plan's verdict, tdm_plan_error: "" when within
    the policy), .violations,
    .ledger (the ledger JSON as Python objects), .report (the text
    `tandem plan` prints)."""

    def __init__(self, handle, owner):
        self._p = handle
        self._owner = owner  # keeps the session (or the Plan's own handle) alive

    @property
    def summary(self):
        s = _capi.PlanSummary()
        _check(lib.tdm_plan_get_summary(self._p, ctypes.byref(s)), lambda: "")
        return {name: getattr(s, name) for name, _ in s._fields_}

    @property
    def devices(self):
        return {text(lib.tdm_plan_device_name(self._p, i)): int(lib.tdm_plan_device_nodes(self._p, i))
                for i in range(lib.tdm_plan_device_count(self._p))}

    @property
    def nodes(self):
        out = []
        for i in range(lib.tdm_plan_node_count(self._p)):
            f = [c_char_p() for _ in range(5)]
            _check(lib.tdm_plan_node(self._p, i, *[ctypes.byref(x) for x in f]), lambda: "")
            out.append(dict(zip(("name", "op", "device", "reason", "detail"), (text(x.value) for x in f))))
        return out

    @property
    def policy_error(self):
        return text(lib.tdm_plan_error(self._p))

    @property
    def violations(self):
        out = []
        for i in range(lib.tdm_plan_violation_count(self._p)):
            f = [c_char_p() for _ in range(3)]
            _check(lib.tdm_plan_violation(self._p, i, *[ctypes.byref(x) for x in f]), lambda: "")
            out.append(dict(zip(("node", "reason", "detail"), (text(x.value) for x in f))))
        return out

    @property
    def ledger(self):
        p = c_void_p()
        _check(lib.tdm_plan_ledger_json(self._p, ctypes.byref(p)), lambda: "")
        return json.loads(take_string(p))

    @property
    def report(self):
        p = c_void_p()
        _check(lib.tdm_plan_report(self._p, ctypes.byref(p)), lambda: "")
        return take_string(p)

    def explain(self, node_name):
        return _explain(self.ledger, node_name)

    def __repr__(self):
        return "<tandem.Plan %s>" % ", ".join("%s: %d" % kv for kv in self.devices.items())


def _release(obj, *handles):
    """Destroys each (attribute, destroy function) handle of obj once."""
    for attr, destroy in handles:
        h = getattr(obj, attr, None)
        if h:
            destroy(h)
            setattr(obj, attr, None)


class _OwnedPlan:
    def __init__(self, ctx, model, handle):
        self.ctx, self.model, self.handle = ctx, model, handle

    def __del__(self):
        _release(self, ("handle", lib.tdm_plan_destroy))


def _explain(ledger, node_name):
    for node in ledger.get("nodes", []):
        if node.get("name") == node_name:
            return node
    raise KeyError("tandem: the model has no node named %r" % (node_name,))


class _Model:
    """Loads a model into a fresh context: (ctx, model) handles."""

    def __init__(self, path_or_bytes):
        self.ctx = c_void_p()
        self.model = c_void_p()
        _check(lib.tdm_ctx_create(ctypes.byref(self.ctx)), lambda: "cannot create a tandem context")
        err = lambda: text(lib.tdm_ctx_error(self.ctx))
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            data = bytes(path_or_bytes)
            _check(lib.tdm_model_load_memory(self.ctx, data, len(data), b"<bytes>", ctypes.byref(self.model)), err)
        else:
            _check(lib.tdm_model_load(self.ctx, os.fsencode(os.fspath(path_or_bytes)), ctypes.byref(self.model)),
                   err)

    def error(self):
        return text(lib.tdm_ctx_error(self.ctx))

    def __del__(self):
        _release(self, ("model", lib.tdm_model_destroy), ("ctx", lib.tdm_ctx_destroy))

    def value_infos(self, count_fn, get_fn, outputs=False):
        out = []
        for i in range(count_fn(self.model)):
            v = _capi.ValueInfo()
            _check(get_fn(self.model, i, ctypes.byref(v)), self.error)
            key = lib.tdm_model_output_map_key(self.model, i) if outputs else 0
            out.append(_value_info(v, key))
        return out


def plan(path_or_bytes, providers=None, sess_options=None):
    """Plans a model without running it: where every node would run, and why.
    A fallback-policy violation is reported on the plan (.policy_error,
    .violations) rather than raised."""
    m = _Model(path_or_bytes)
    opts = _Options(providers, sess_options, m.ctx)
    try:
        h = c_void_p()
        _check(lib.tdm_plan_create(m.ctx, m.model, opts.p, ctypes.byref(h)), m.error)
    finally:
        opts.close()
    return Plan(h, _OwnedPlan(m.ctx, m, h))


# --------------------------------------------------------------- session

class InferenceSession:
    """onnxruntime.InferenceSession's shape over libtandem.

    providers: tandem devices in priority order ("vnpu:edge-npu", "opencl",
    a plugin's name, "cpu"; cpu is implied last; onnxruntime's
    "CPUExecutionProvider" means cpu). sess_options: a tandem.SessionOptions
    (or anything with intra_op_num_threads)."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        self._s = c_void_p()
        self._m = _Model(path_or_bytes)
        self._source = path_or_bytes
        self._sess_options = sess_options
        self._providers = providers
        self._metrics = None
        self._observer = None
        opts = _Options(providers, sess_options, self._m.ctx)
        try:
            _check(lib.tdm_session_create(self._m.ctx, self._m.model, opts.p, ctypes.byref(self._s)), self._m.error)
        finally:
            opts.close()
        self._inputs = self._m.value_infos(lib.tdm_model_input_count, lib.tdm_model_input)
        self._outputs = self._m.value_infos(lib.tdm_model_output_count, lib.tdm_model_output, outputs=True)

    def __del__(self):
        _release(self, ("_s", lib.tdm_session_destroy), ("_metrics", lib.tdm_metrics_destroy))

    def _error(self):
        return text(lib.tdm_session_error(self._s))

    # onnxruntime's API
    def get_inputs(self):
        return [a for a, _ in self._inputs]

    def get_outputs(self):
        return [a for a, _ in self._outputs]

    def get_providers(self):
        return list(self.plan.devices)

    def get_modelmeta(self):
        info = _capi.ModelInfo()
        _check(lib.tdm_model_get_info(self._m.model, ctypes.byref(info)), self._m.error)
        meta = {}
        for i in range(lib.tdm_model_metadata_count(self._m.model)):
            k, v = c_char_p(), c_char_p()
            _check(lib.tdm_model_metadata(self._m.model, i, ctypes.byref(k), ctypes.byref(v)), self._m.error)
            meta[text(k.value)] = text(v.value)
        return ModelMetadata(text(info.producer_name), text(info.graph_name), text(info.domain),
                             int(info.model_version), meta)

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model: input_feed maps input names to numpy arrays (lists
        for sequences, None for an absent optional); returns the outputs
        named in output_names (None or []: all), in that order."""
        outs = self._run(input_feed)
        names = [a.name for a, _ in self._outputs]
        if not output_names:
            return outs
        result = []
        for n in output_names:
            if n not in names:
                raise TandemError(4, "the model has no output named %r (outputs: %s)" % (n, ", ".join(names)))
            result.append(outs[names.index(n)])
        return result

    def _run(self, input_feed):
        names = [a.name for a, _ in self._inputs]
        unknown = [k for k in input_feed if k not in names]
        if unknown:
            raise TandemError(4, "the model has no input named %r (inputs: %s)" % (unknown[0], ", ".join(names)))
        n_in, n_out = len(self._inputs), len(self._outputs)
        ins = (c_void_p * max(n_in, 1))()
        owned = []
        try:
            for i, (arg, kind) in enumerate(self._inputs):
                if arg.name in input_feed:
                    t = _to_tensor(input_feed[arg.name], kind)
                    owned.append(t)
                    ins[i] = t
            outs = (c_void_p * max(n_out, 1))()
            _check(lib.tdm_session_run(self._s, ins, outs), self._error)
            try:
                return [_from_tensor(outs[i]) for i in range(n_out)]
            finally:
                for i in range(n_out):
                    lib.tdm_tensor_destroy(outs[i])
        finally:
            for t in owned:
                lib.tdm_tensor_destroy(t)

    # what onnxruntime lacks
    @property
    def plan(self):
        """The placement this session runs (a tandem.Plan)."""
        return Plan(lib.tdm_session_plan(self._s), self)

    @property
    def ledger(self):
        """The ledger as Python objects: the plan, and the figures of the last
        completed run under "run"."""
        p = c_void_p()
        _check(lib.tdm_session_ledger_json(self._s, ctypes.byref(p)), self._error)
        return json.loads(take_string(p))

    def explain(self, node_name):
        """The ledger's entry for one node: its device, reason code, sentence and
        the devices that rejected it (with theirs)."""
        return _explain(self.ledger, node_name)

    def _set_observer(self, fn):
        self._observer = fn
        if fn is not None:
            st = lib.tdm_session_set_observer(self._s, ctypes.cast(fn, c_void_p), None)
        elif self._metrics:
            st = lib.tdm_session_set_observer(self._s, _capi.metrics_observe, self._metrics)
        else:
            st = lib.tdm_session_set_observer(self._s, None, None)
        _check(st, self._error)

    def _observed_run(self, input_feed, on_event):
        def cb(_user, ev):
            try:
                on_event(ev.contents)
            except Exception as e:  # an exception cannot cross the C frame
                errors.append(e)
        errors = []
        fn = _capi.OBSERVER(cb)
        self._set_observer(fn)
        try:
            outs = self._run(input_feed)
        finally:
            self._set_observer(None)
        if errors:
            raise errors[0]
        return outs

    def profile(self, input_feed, iterations=1):
        """Runs iterations times and returns where the time went: "runs" (wall ms
        per run), "nodes" (per node: name, op, device, reason, fallback, ms
        (median), modeled_ms, device_ms), "copies", "by_device" (ms per run).
        Times on a virtual device are host emulation; its modeled figures are
        in modeled_ms."""
        per_node, copies, runs = {}, [], []

        def on_event(ev):
            ms = (ev.end_ns - ev.start_ns) / 1e6
            if ev.kind == 0:
                rec = per_node.setdefault(ev.node_index, {
                    "name": text(ev.name), "op": text(ev.op_type), "device": text(ev.device),
                    "reason": text(ev.reason), "fallback": bool(ev.fallback), "times": [],
                    "modeled_ms": ev.modeled_ms if ev.modeled_ms >= 0 else None,
                    "device_ms": ev.device_ms if ev.device_ms >= 0 else None})
                rec["times"].append(ms)
            elif ev.kind == 1 and len(runs) == 0:
                copies.append({"tensor": text(ev.name), "from": text(ev.from_), "to": text(ev.device),
                               "direction": text(ev.direction), "bytes": int(ev.bytes_in), "ms": ms,
                               "weight": bool(ev.weight)})
            elif ev.kind == 3:
                runs.append(ms)

        for _ in range(max(1, int(iterations))):
            self._observed_run(input_feed, on_event)
        nodes, by_device = [], {}
        for idx in sorted(per_node):
            rec = per_node[idx]
            times = sorted(rec.pop("times"))
            rec["ms"] = times[len(times) // 2]
            by_device[rec["device"]] = by_device.get(rec["device"], 0.0) + rec["ms"]
            nodes.append(rec)
        return {"runs": runs, "nodes": nodes, "copies": copies, "by_device": by_device}

    def compare(self, input_feed, min_cosine=0.999, max_abs=None):
        """Every node's outputs on this session's plan against the cpu fp32
        reference (unfused), on the same inputs: per node max_abs, rmse and
        cosine (worst over its outputs), in execution order; "first" is the
        first node whose error crosses the threshold (cosine below min_cosine,
        or max_abs above max_abs), or None."""
        mine = self._capture(self, input_feed)
        so = _RefOptions(self._sess_options)
        ref_session = InferenceSession(self._source, sess_options=so, providers=["cpu"])
        ref = self._capture(ref_session, input_feed)
        rows, first, skipped = [], None, 0
        for idx, (info, outs) in mine.items():
            r = ref.get(idx)
            best = None
            if r is not None:
                for a, b in zip(outs, r[1]):
                    m = _metrics(a, b)
                    if m and (best is None or m["cosine"] < best["cosine"]):
                        best = m
            if best is None:
                skipped += 1
                continue
            row = dict(info, **best)
            rows.append(row)
            crosses = row["cosine"] < min_cosine or (max_abs is not None and row["max_abs"] > max_abs)
            if crosses and first is None:
                first = row["name"]
        worst = sorted(rows, key=lambda x: (x["cosine"], -x["max_abs"]))[:10]
        return {"nodes": rows, "first": first, "worst": worst, "compared": len(rows), "skipped": skipped,
                "min_cosine": min_cosine, "max_abs": max_abs}

    @staticmethod
    def _capture(session, input_feed):
        got = {}

        def on_event(ev):
            if ev.kind != 0:
                return
            outs = []
            for k in range(ev.n_outputs):
                p = ev.outputs[k]
                outs.append(_from_tensor(p) if p else None)
            got[ev.node_index] = ({"name": text(ev.name), "op": text(ev.op_type), "device": text(ev.device),
                                   "reason": text(ev.reason)}, outs)

        session._observed_run(input_feed, on_event)
        return got

    def enable_metrics(self):
        """Counts every later run into tdm_metrics (read with metrics()); the
        counting is done in C, with no Python on the run's path."""
        if not self._metrics:
            h = c_void_p()
            _check(lib.tdm_metrics_create(ctypes.byref(h)), lambda: "")
            self._metrics = h
            self._set_observer(None)

    def metrics(self, prometheus=False):
        """The counters since enable_metrics(): a dict (runs, nodes, copies,
        fallback_ratio, nodes_by_reason by reason name, busy time by device),
        or the Prometheus text exposition with prometheus=True."""
        if not self._metrics:
            raise TandemError(1, "metrics are off: call enable_metrics() before running")
        if prometheus:
            p = c_void_p()
            _check(lib.tdm_metrics_prometheus(self._metrics, ctypes.byref(p)), lambda: "")
            return take_string(p)
        s = _capi.MetricsSummary()
        _check(lib.tdm_metrics_get(self._metrics, ctypes.byref(s)), lambda: "")
        out = {name: getattr(s, name) for name, _ in s._fields_ if name != "nodes_by_reason"}
        out["nodes_by_reason"] = {text(lib.tdm_reason_str(i)): int(s.nodes_by_reason[i])
                                  for i in range(16) if s.nodes_by_reason[i]}
        devices = {}
        for i in range(lib.tdm_metrics_device_count(self._metrics)):
            n, busy, nodes = c_char_p(), c_uint64(), c_uint64()
            _check(lib.tdm_metrics_device(self._metrics, i, ctypes.byref(n), ctypes.byref(busy),
                                          ctypes.byref(nodes)), lambda: "")
            devices[text(n.value)] = {"busy_ns": busy.value, "nodes": nodes.value}
        out["devices"] = devices
        return out


class _RefOptions(SessionOptions):
    """The cpu fp32 reference for compare(): the same shapes and threads,
    unfused, no pins, plugins or calibration."""

    def __init__(self, so):
        super().__init__()
        if so is not None:
            self.intra_op_num_threads = getattr(so, "intra_op_num_threads", 0) or 0
            self.shapes = dict(getattr(so, "shapes", {}) or {})
        self.fusion = False


def _metrics(a, b):
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray) or a.shape != b.shape:
        return None
    if a.dtype.kind not in "fiub" or b.dtype.kind not in "fiub":
        return None
    x = a.astype(np.float64).ravel()
    y = b.astype(np.float64).ravel()
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    d = np.abs(x - y)
    mx = float(d.max()) if d.size else 0.0
    rmse = float(math.sqrt(float((d * d).mean()))) if a.size else 0.0
    na, nr = float((x * x).sum()), float((y * y).sum())
    if mx == 0 or (na == 0 and nr == 0):
        cos = 1.0
    elif na == 0 or nr == 0:
        cos = 0.0
    else:
        cos = float((x * y).sum() / (math.sqrt(na) * math.sqrt(nr)))
    return {"max_abs": mx, "rmse": rmse, "cosine": cos}


class ModelMetadata:
    def __init__(self, producer_name, graph_name, domain, version, custom_metadata_map):
        self.producer_name, self.graph_name, self.domain = producer_name, graph_name, domain
        self.version, self.custom_metadata_map = version, custom_metadata_map
        self.description = ""


def get_available_providers():
    """The devices available here, in tandem's names ("cpu", "vnpu:edge-npu", ...)."""
    ctx = c_void_p()
    _check(lib.tdm_ctx_create(ctypes.byref(ctx)), lambda: "")
    lst = c_void_p()
    try:
        _check(lib.tdm_devices_query(ctx, None, 0, ctypes.byref(lst)), lambda: text(lib.tdm_ctx_error(ctx)))
        out = []
        for i in range(lib.tdm_device_list_count(lst)):
            d = _capi.DeviceInfo()
            _check(lib.tdm_device_list_get(lst, i, ctypes.byref(d)), lambda: "")
            if d.available:
                out.append(text(d.name))
        return out
    finally:
        lib.tdm_device_list_destroy(lst)
        lib.tdm_ctx_destroy(ctx)
