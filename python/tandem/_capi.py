"""ctypes bindings to libtandem's public header (include/tandem/tandem.h).

Nothing here knows tandem's internals: every structure mirrors a public
declaration, field for field. The library is looked for, in order, at
$TANDEM_LIBRARY, next to this package (and where `make install` put it
relative to the package), in the source tree's build/ folder, then on the
system's library path.
"""
import ctypes
import ctypes.util
import os

# The header this package was written against (TDM_VERSION_MAJOR).
API_MAJOR = 0

c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
c_int = ctypes.c_int
c_size_t = ctypes.c_size_t
c_double = ctypes.c_double
c_int64 = ctypes.c_int64
c_uint64 = ctypes.c_uint64
POINTER = ctypes.POINTER


class Dim(ctypes.Structure):
    _fields_ = [("value", c_int64), ("symbol", c_char_p)]


class ValueInfo(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("kind", c_int), ("dtype", c_int), ("rank", c_int),
                ("dims", POINTER(Dim)), ("optional", c_int)]


class ModelInfo(ctypes.Structure):
    _fields_ = [("path", c_char_p), ("ir_version", c_int64), ("producer_name", c_char_p),
                ("producer_version", c_char_p), ("domain", c_char_p), ("model_version", c_int64),
                ("graph_name", c_char_p), ("node_count", c_size_t), ("param_count", c_size_t),
                ("param_bytes", c_size_t), ("flops", c_double), ("flops_unknown", c_size_t)]


class PlanSummary(ctypes.Structure):
    _fields_ = [("nodes", c_size_t), ("partitions", c_size_t), ("fallback_nodes", c_size_t),
                ("boundary_bytes", c_uint64), ("boundary_unknown", c_size_t), ("weight_bytes", c_uint64),
                ("copies", c_size_t), ("estimated_ms", c_double), ("copies_ms", c_double),
                ("estimates_complete", c_int), ("modeled", c_int), ("fallback_ratio", c_double)]


class DeviceInfo(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("kind", c_char_p), ("available", c_int), ("description", c_char_p),
                ("why_not", c_char_p), ("memory_bytes", c_uint64), ("precision", c_char_p), ("source", c_char_p)]


class Event(ctypes.Structure):
    _fields_ = [("kind", c_int), ("name", c_char_p), ("op_type", c_char_p), ("device", c_char_p),
                ("from_", c_char_p), ("direction", c_char_p), ("reason", c_char_p), ("preferred", c_char_p),
                ("fallback", c_int), ("weight", c_int), ("node_index", c_size_t),
                ("start_ns", c_uint64), ("end_ns", c_uint64), ("bytes_in", c_uint64), ("bytes_out", c_uint64),
                ("modeled_ms", c_double), ("status", c_int), ("detail", c_char_p),
                ("n_inputs", c_int), ("n_outputs", c_int),
                ("inputs", POINTER(c_void_p)), ("outputs", POINTER(c_void_p)),
                ("device_ms", c_double)]


class MetricsSummary(ctypes.Structure):
    _fields_ = [("runs", c_uint64), ("run_failures", c_uint64), ("nodes", c_uint64), ("copies", c_uint64),
                ("copy_bytes", c_uint64), ("faults", c_uint64), ("replans", c_uint64),
                ("wall_ns", c_uint64), ("copy_ns", c_uint64), ("fallback_ns", c_uint64), ("node_ns", c_uint64),
                ("fallback_ratio", c_double), ("nodes_by_reason", c_uint64 * 16)]


OBSERVER = ctypes.CFUNCTYPE(None, c_void_p, POINTER(Event))

# name: (restype, argtypes). Status-returning functions return c_int.
_S = c_int
_PROTOS = {
    "tdm_version": (c_char_p, []),
    "tdm_version_number": (c_int, []),
    "tdm_status_str": (c_char_p, [c_int]),
    "tdm_dtype_name": (c_char_p, [c_int]),
    "tdm_reason_str": (c_char_p, [c_int]),
    "tdm_free": (None, [c_void_p]),
    "tdm_ctx_create": (_S, [POINTER(c_void_p)]),
    "tdm_ctx_destroy": (None, [c_void_p]),
    "tdm_ctx_error": (c_char_p, [c_void_p]),
    "tdm_tensor_create": (_S, [c_int, c_int, POINTER(c_int64), POINTER(c_void_p)]),
    "tdm_sequence_create": (_S, [c_int, POINTER(c_void_p)]),
    "tdm_none_create": (_S, [POINTER(c_void_p)]),
    "tdm_sequence_append": (_S, [c_void_p, c_void_p]),
    "tdm_tensor_destroy": (None, [c_void_p]),
    "tdm_tensor_kind": (c_int, [c_void_p]),
    "tdm_tensor_dtype": (c_int, [c_void_p]),
    "tdm_tensor_rank": (c_int, [c_void_p]),
    "tdm_tensor_dims": (POINTER(c_int64), [c_void_p]),
    "tdm_tensor_count": (c_size_t, [c_void_p]),
    "tdm_tensor_nbytes": (c_size_t, [c_void_p]),
    "tdm_tensor_data": (c_void_p, [c_void_p]),
    "tdm_tensor_cdata": (c_void_p, [c_void_p]),
    "tdm_tensor_set_string": (_S, [c_void_p, c_size_t, c_char_p, c_size_t]),
    "tdm_sequence_length": (c_size_t, [c_void_p]),
    "tdm_sequence_item": (c_void_p, [c_void_p, c_size_t]),
    "tdm_map_keys": (c_void_p, [c_void_p]),
    "tdm_map_values": (c_void_p, [c_void_p]),
    "tdm_model_output_map_key": (c_int, [c_void_p, c_size_t]),
    "tdm_model_load": (_S, [c_void_p, c_char_p, POINTER(c_void_p)]),
    "tdm_model_load_memory": (_S, [c_void_p, c_char_p, c_size_t, c_char_p, POINTER(c_void_p)]),
    "tdm_model_destroy": (None, [c_void_p]),
    "tdm_model_get_info": (_S, [c_void_p, POINTER(ModelInfo)]),
    "tdm_model_metadata_count": (c_size_t, [c_void_p]),
    "tdm_model_metadata": (_S, [c_void_p, c_size_t, POINTER(c_char_p), POINTER(c_char_p)]),
    "tdm_model_input_count": (c_size_t, [c_void_p]),
    "tdm_model_input": (_S, [c_void_p, c_size_t, POINTER(ValueInfo)]),
    "tdm_model_output_count": (c_size_t, [c_void_p]),
    "tdm_model_output": (_S, [c_void_p, c_size_t, POINTER(ValueInfo)]),
    "tdm_session_options_create": (_S, [POINTER(c_void_p)]),
    "tdm_session_options_destroy": (None, [c_void_p]),
    "tdm_session_options_set_threads": (_S, [c_void_p, c_int]),
    "tdm_session_options_set_shape": (_S, [c_void_p, c_char_p, c_int, POINTER(c_int64)]),
    "tdm_session_options_set_devices": (_S, [c_void_p, c_char_p]),
    "tdm_granularity_parse": (_S, [c_void_p, c_char_p, POINTER(c_int)]),
    "tdm_fallback_mode_parse": (_S, [c_void_p, c_char_p, POINTER(c_int)]),
    "tdm_fusion_parse": (_S, [c_void_p, c_char_p, POINTER(c_int)]),
    "tdm_verify_mode_parse": (_S, [c_void_p, c_char_p, POINTER(c_int), POINTER(c_int)]),
    "tdm_session_options_set_granularity": (_S, [c_void_p, c_int]),
    "tdm_session_options_set_fallback": (_S, [c_void_p, c_int]),
    "tdm_session_options_set_max_fallback_ratio": (_S, [c_void_p, c_double]),
    "tdm_session_options_set_max_boundary_bytes": (_S, [c_void_p, c_int64]),
    "tdm_session_options_add_pin": (_S, [c_void_p, c_char_p]),
    "tdm_session_options_add_plugin": (_S, [c_void_p, c_char_p]),
    "tdm_session_options_set_fusion": (_S, [c_void_p, c_int]),
    "tdm_session_options_set_calibration": (_S, [c_void_p, c_char_p]),
    "tdm_session_options_set_precision": (_S, [c_void_p, c_double, c_double]),
    "tdm_session_options_set_verify": (_S, [c_void_p, c_int, c_int]),
    "tdm_session_options_add_calibration_input": (_S, [c_void_p, POINTER(c_char_p), POINTER(c_void_p), c_size_t]),
    "tdm_session_create": (_S, [c_void_p, c_void_p, c_void_p, POINTER(c_void_p)]),
    "tdm_session_destroy": (None, [c_void_p]),
    "tdm_session_error": (c_char_p, [c_void_p]),
    "tdm_session_run": (_S, [c_void_p, POINTER(c_void_p), POINTER(c_void_p)]),
    "tdm_session_plan": (c_void_p, [c_void_p]),
    "tdm_session_ledger_json": (_S, [c_void_p, POINTER(c_void_p)]),
    "tdm_session_set_observer": (_S, [c_void_p, c_void_p, c_void_p]),
    "tdm_plan_create": (_S, [c_void_p, c_void_p, c_void_p, POINTER(c_void_p)]),
    "tdm_plan_destroy": (None, [c_void_p]),
    "tdm_plan_get_summary": (_S, [c_void_p, POINTER(PlanSummary)]),
    "tdm_plan_device_count": (c_size_t, [c_void_p]),
    "tdm_plan_device_name": (c_char_p, [c_void_p, c_size_t]),
    "tdm_plan_device_nodes": (c_size_t, [c_void_p, c_size_t]),
    "tdm_plan_node_count": (c_size_t, [c_void_p]),
    "tdm_plan_node": (_S, [c_void_p, c_size_t] + [POINTER(c_char_p)] * 5),
    "tdm_plan_status": (_S, [c_void_p]),
    "tdm_plan_error": (c_char_p, [c_void_p]),
    "tdm_plan_violation_count": (c_size_t, [c_void_p]),
    "tdm_plan_violation": (_S, [c_void_p, c_size_t] + [POINTER(c_char_p)] * 3),
    "tdm_plan_ledger_json": (_S, [c_void_p, POINTER(c_void_p)]),
    "tdm_plan_report": (_S, [c_void_p, POINTER(c_void_p)]),
    "tdm_devices_query": (_S, [c_void_p, c_void_p, c_size_t, POINTER(c_void_p)]),
    "tdm_device_list_count": (c_size_t, [c_void_p]),
    "tdm_device_list_get": (_S, [c_void_p, c_size_t, POINTER(DeviceInfo)]),
    "tdm_device_list_destroy": (None, [c_void_p]),
    "tdm_metrics_create": (_S, [POINTER(c_void_p)]),
    "tdm_metrics_destroy": (None, [c_void_p]),
    "tdm_metrics_get": (_S, [c_void_p, POINTER(MetricsSummary)]),
    "tdm_metrics_device_count": (c_size_t, [c_void_p]),
    "tdm_metrics_device": (_S, [c_void_p, c_size_t, POINTER(c_char_p), POINTER(c_uint64), POINTER(c_uint64)]),
    "tdm_metrics_prometheus": (_S, [c_void_p, POINTER(c_void_p)]),
}


def _candidates():
    env = os.environ.get("TANDEM_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("libtandem.so", "libtandem.so.%d" % API_MAJOR):
        yield os.path.join(here, name)
    try:
        from . import _installed  # written by `make install`
        for name in ("libtandem.so.%d" % API_MAJOR, "libtandem.so"):
            yield os.path.normpath(os.path.join(here, _installed.LIBDIR, name))
    except ImportError:
        pass
    # The source tree: python/tandem/ -> <repo>/build/libtandem.so.
    yield os.path.join(os.path.dirname(os.path.dirname(here)), "build", "libtandem.so")
    found = ctypes.util.find_library("tandem")
    if found:
        yield found
    yield "libtandem.so.%d" % API_MAJOR


def _load():
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        lib._tandem_path = path
        return lib
    raise ImportError("tandem: libtandem.so not found; set TANDEM_LIBRARY to its path (tried: %s)"
                      % "; ".join(tried))


lib = _load()
for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

if lib.tdm_version_number() // 10000 != API_MAJOR:
    raise ImportError("tandem: %s is version %s; this package needs major version %d"
                      % (lib._tandem_path, lib.tdm_version().decode(), API_MAJOR))

# The library's tdm_metrics_observe, passed to tdm_session_set_observer as is
# (no Python on the run's path).
metrics_observe = ctypes.cast(lib.tdm_metrics_observe, c_void_p)


def text(b):
    return b.decode("utf-8", "replace") if b is not None else ""


def take_string(p):
    """A library-allocated char * as str, freed with tdm_free."""
    try:
        return ctypes.string_at(p.value).decode("utf-8", "replace")
    finally:
        lib.tdm_free(p)
