/* The ONNX loader: protobuf files → graph IR and host tensors; and the
 * writer: host tensors, values and one-node models → protobuf. */
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


/* ---- writing (write.c) ----
 * Each packs a message into *bytes (allocated, mem_free) of *size bytes;
 * tensor data is borrowed only while packing. Errors: TDM_E_UNSUPPORTED
 * (not a tensor where one is needed, 4-bit elements, an attribute kind a
 * one-node model does not carry), TDM_E_NOMEM. */

/* Tensor t as a TensorProto named name (NULL: unnamed). */
tdm_status onnx_write_tensor(tdm_err *e, const tdm_tensor *t, const char *name, void **bytes, size_t *size);

/* Value v as the ONNX node tests store a value named name: a TensorProto
 * or SequenceProto, inside an OptionalProto when the value is declared
 * optional (of kind TDM_KIND_TENSOR or TDM_KIND_SEQUENCE) or is absent
 * (v->kind TDM_KIND_NONE: an empty OptionalProto of that kind). */
tdm_status onnx_write_value(tdm_err *e, const tdm_tensor *v, const char *name, int optional, tdm_kind kind,
                            void **bytes, size_t *size);

/* Node i of graph g as a one-node ModelProto: the inputs that are graph
 * constants become initializers, the others graph inputs typed from
 * inputs[k] when given (inputs may be NULL), else from the graph. gm (may
 * be NULL) gives the IR version and the default domain's opset. */
tdm_status onnx_write_node_model(tdm_err *e, const gr_model *gm, const gr_graph *g, size_t i,
                                 const tdm_tensor *const *inputs, void **bytes, size_t *size);

#endif
