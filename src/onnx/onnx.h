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
 * the file holds: TDM_KIND_TENSOR a TensorProto, TDM_KIND_SEQUENCE a
 * SequenceProto, TDM_KIND_NONE an OptionalProto (which yields its tensor or
 * sequence, or a TDM_KIND_NONE value when empty). When NULL, TensorProto is
 * tried first, then SequenceProto, then OptionalProto (the last two share
 * field numbers: an optional holding a tensor reads as a sequence of one, so
 * pass expect when the kind is known). Errors: TDM_E_IO, TDM_E_INPUT
 * (undecodable or inconsistent), TDM_E_UNSUPPORTED (maps, nested sequences). */
tdm_status onnx_read_value(tdm_err *e, const char *path, const tdm_kind *expect, tdm_tensor **out);

/* The same from memory (name is used in messages); external data is
 * refused. */
tdm_status onnx_read_value_memory(tdm_err *e, const void *data, size_t size, const char *name,
                                  const tdm_kind *expect, tdm_tensor **out);

/* For a value declared optional(kind), kind TDM_KIND_TENSOR or
 * TDM_KIND_SEQUENCE: bytes that hold an OptionalProto of that kind (as the
 * node tests store such a value) yield its tensor or sequence, or a
 * TDM_KIND_NONE value when absent; the plain TensorProto / SequenceProto is
 * read when they do not, or when their optional reading fails and the
 * plain one succeeds. (An optional of a sequence and a sequence of one
 * sequence are the same bytes: only the declared type tells them apart.) */
tdm_status onnx_read_optional(tdm_err *e, const char *path, tdm_kind kind, tdm_tensor **out);
tdm_status onnx_read_optional_memory(tdm_err *e, const void *data, size_t size, const char *name, tdm_kind kind,
                                     tdm_tensor **out);

#endif
