/* The ONNX loader: protobuf files → graph IR and host tensors. */
#ifndef TDM_ONNX_ONNX_H
#define TDM_ONNX_ONNX_H

#include "graph/graph.h"

/* Reads an ONNX model file into a new gr_model (not yet finalized or
 * validated). External data resolves inside the file's folder only.
 * Errors: TDM_E_IO (missing/unreadable), TDM_E_MODEL (malformed),
 * TDM_E_UNSUPPORTED; the sentence names the file and the field. */
tdm_status onnx_load_file(tdm_err *e, const char *path, gr_model **out);

/* The same from memory; external data is refused. */
tdm_status onnx_load_memory(tdm_err *e, const void *data, size_t size, const char *name, gr_model **out);

/* Reads a TensorProto / SequenceProto / OptionalProto file (the ONNX backend
 * tests' input_N.pb, output_N.pb). expect (may be NULL) says which message
 * the file holds; when NULL, TensorProto is tried first. */
tdm_status onnx_read_value(tdm_err *e, const char *path, const tdm_kind *expect, tdm_tensor **out);

#endif
