"""tandem: run ONNX models across an accelerator and the CPU, with every
operator placement decided explicitly, explained and measured.

Shaped like onnxruntime, so that moving over is one line::

    import tandem as ort   # was: import onnxruntime as ort
    sess = ort.InferenceSession("model.onnx", providers=["vnpu:edge-npu", "cpu"])
    out = sess.run(None, {"x": x})
    sess.ledger["summary"]          # what onnxruntime cannot tell you

A client of libtandem's public header through ctypes (no compile step).
The library is found at $TANDEM_LIBRARY, next to this package, in the
source tree's build/ folder, or on the system's library path.
"""
from ._capi import lib as _lib
from ._session import (InferenceSession, SessionOptions, NodeArg, Plan, TandemError, ModelMetadata,
                       get_available_providers, plan)

__version__ = _lib.tdm_version().decode()
version = __version__
library_path = _lib._tandem_path

__all__ = ["InferenceSession", "SessionOptions", "NodeArg", "Plan", "TandemError", "ModelMetadata",
           "get_available_providers", "plan", "__version__"]

