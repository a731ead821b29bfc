/*
 * tandem — run ONNX models across an accelerator and the CPU, with every
 * operator placement decided explicitly, explained and measured.
 *
 * This header is the whole public API. Everything not declared here is
 * private. Conventions:
 *   - Constructors are `tdm_x_create(..., tdm_x **out)` or `tdm_x_load(...)`
 *     and return a tdm_status; on failure *out is NULL.
 *   - `tdm_x_destroy(NULL)` is a harmless no-op.
 *   - The library never prints, exits or aborts. A failing call returns a
 *     status and keeps one sentence describing it on the handle it was
 *     given (tdm_ctx_error(), tdm_session_error()).
 *   - Borrowed pointers (names, dims, info structs) stay valid until the
 *     handle they came from is destroyed.
 */
#ifndef TANDEM_H
#define TANDEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TDM_VERSION_STRING "0.1.0"

/* Status codes. The numbers are part of the ABI: never reused, never
 * renumbered; new codes are appended. */
typedef enum tdm_status {
    TDM_OK = 0,
    TDM_E_USAGE = 1,       /* a bad argument or option value */
    TDM_E_MODEL = 2,       /* the model is invalid (malformed, inconsistent) */
    TDM_E_UNSUPPORTED = 3, /* valid ONNX that tandem cannot run (op, opset, type) */
    TDM_E_INPUT = 4,       /* a bad input tensor: unknown name, wrong shape or type, undecodable */
    TDM_E_IO = 5,          /* a file is missing, unreadable or unwritable */
    TDM_E_NOMEM = 6,       /* out of memory, or a size that overflows */
    TDM_E_DEVICE = 7,      /* a device is unavailable or failed */
    TDM_E_POLICY = 8,      /* the fallback policy was violated */
    TDM_E_RUNTIME = 9,     /* an operator failed on the data it was given */
    TDM_E_INTERNAL = 10    /* a bug in tandem */
} tdm_status;

/* A static string naming the status ("TDM_E_MODEL"); never NULL. */
const char *tdm_status_str(tdm_status status);

/* Element types, numbered as ONNX's TensorProto.DataType. */
typedef enum tdm_dtype {
    TDM_UNDEFINED = 0,
    TDM_FLOAT = 1,
    TDM_UINT8 = 2,
    TDM_INT8 = 3,
    TDM_UINT16 = 4,
    TDM_INT16 = 5,
    TDM_INT32 = 6,
    TDM_INT64 = 7,
    TDM_STRING = 8,
    TDM_BOOL = 9,
    TDM_FLOAT16 = 10,
    TDM_DOUBLE = 11,
    TDM_UINT32 = 12,
    TDM_UINT64 = 13,
    TDM_COMPLEX64 = 14,
    TDM_COMPLEX128 = 15,
    TDM_BFLOAT16 = 16,
    TDM_FLOAT8E4M3FN = 17,
    TDM_FLOAT8E4M3FNUZ = 18,
    TDM_FLOAT8E5M2 = 19,
    TDM_FLOAT8E5M2FNUZ = 20,
    TDM_UINT4 = 21,
    TDM_INT4 = 22
} tdm_dtype;

#define TDM_DTYPE_COUNT 23

/* Lower-case ONNX-style name of an element type ("float", "int64", …);
 * "undefined" for unknown values. */
const char *tdm_dtype_name(tdm_dtype dtype);

/* Bytes per element; 0 for STRING and UNDEFINED; 1 for the 4-bit types
 * (tandem stores one 4-bit value per byte). */
size_t tdm_dtype_size(tdm_dtype dtype);

/* ---------------------------------------------------------------- context */

/* A context holds settings shared by the models and sessions created from it
 * and the last error of calls made on it. Not thread-safe: use one per
 * thread, or serialise calls. */
typedef struct tdm_ctx tdm_ctx;

tdm_status tdm_ctx_create(tdm_ctx **out);
void tdm_ctx_destroy(tdm_ctx *ctx);

/* The sentence describing the last failure of a call made with ctx, or ""
 * when the last call succeeded. Owned by ctx; valid until the next call. */
const char *tdm_ctx_error(const tdm_ctx *ctx);

/* ------------------------------------------------------------------ values */

/* What a value is: a tensor, a sequence of tensors, or an absent optional. */
typedef enum tdm_kind {
    TDM_KIND_TENSOR = 0,
    TDM_KIND_SEQUENCE = 1,
    TDM_KIND_NONE = 2
} tdm_kind;

/* A tensor (or sequence, or absent optional) in host memory, C order. */
typedef struct tdm_tensor tdm_tensor;

/* Creates a tensor of the given type and shape with zeroed contents
 * (empty strings for TDM_STRING). rank may be 0 (a scalar); dims may be
 * NULL when rank is 0. */
tdm_status tdm_tensor_create(tdm_dtype dtype, int rank, const int64_t *dims, tdm_tensor **out);

/* Creates an empty sequence whose items will have elem_dtype. */
tdm_status tdm_sequence_create(tdm_dtype elem_dtype, tdm_tensor **out);

/* Creates an absent optional value. */
tdm_status tdm_none_create(tdm_tensor **out);

/* Appends item to seq; seq takes ownership of item, also on failure. */
tdm_status tdm_sequence_append(tdm_tensor *seq, tdm_tensor *item);

/* A deep copy. */
tdm_status tdm_tensor_clone(const tdm_tensor *t, tdm_tensor **out);

void tdm_tensor_destroy(tdm_tensor *t);

tdm_kind tdm_tensor_kind(const tdm_tensor *t);
tdm_dtype tdm_tensor_dtype(const tdm_tensor *t);
int tdm_tensor_rank(const tdm_tensor *t);
const int64_t *tdm_tensor_dims(const tdm_tensor *t);
/* Number of elements (product of dims). */
size_t tdm_tensor_count(const tdm_tensor *t);
/* Bytes of element data; 0 for strings, sequences and none. */
size_t tdm_tensor_nbytes(const tdm_tensor *t);
/* Element data, C order. For TDM_STRING it is an array of `char *`
 * (NUL-terminated, owned by the tensor; replace with tdm_tensor_set_string). */
void *tdm_tensor_data(tdm_tensor *t);
const void *tdm_tensor_cdata(const tdm_tensor *t);
/* Sets element i of a string tensor to a copy of the len bytes at s. */
tdm_status tdm_tensor_set_string(tdm_tensor *t, size_t i, const char *s, size_t len);

size_t tdm_sequence_length(const tdm_tensor *seq);
/* Borrowed; owned by seq. */
const tdm_tensor *tdm_sequence_item(const tdm_tensor *seq, size_t i);

/* Reads a value from a file: `.npy` (NumPy format 1.0–3.0, C order) or an
 * ONNX protobuf (`.pb`) holding a TensorProto, SequenceProto or
 * OptionalProto. `expect` may be NULL; when it names a kind, a .pb file is
 * decoded as that kind of message. Errors name the file and the field. */
tdm_status tdm_value_load(tdm_ctx *ctx, const char *path, const tdm_kind *expect, tdm_tensor **out);

/* Writes a tensor as `.npy`. bfloat16 is written as uint16 bits, float8 and
 * 4-bit types as uint8/int8, strings as fixed-width unicode ('<U…').
 * The file is written to a temporary name and renamed, so a failure leaves
 * nothing behind; an existing file is replaced only when overwrite != 0. */
tdm_status tdm_tensor_save_npy(tdm_ctx *ctx, const tdm_tensor *t, const char *path, int overwrite);

/* ------------------------------------------------------------------ models */

typedef struct tdm_model tdm_model;

/* Loads an ONNX model file. External data is resolved inside the model's
 * folder only. The model is validated (undefined inputs, cycles, duplicate
 * names, unknown operators, opsets) and its shapes inferred. */
tdm_status tdm_model_load(tdm_ctx *ctx, const char *path, tdm_model **out);

/* Loads a model from memory. `name` is used in messages. External data is
 * refused (there is no folder to resolve it in). The bytes are not kept. */
tdm_status tdm_model_load_memory(tdm_ctx *ctx, const void *data, size_t size, const char *name,
                                 tdm_model **out);

void tdm_model_destroy(tdm_model *model);

/* One dimension of a shape: value >= 0 when known; otherwise value is -1
 * and symbol names it (NULL when it has no name). */
typedef struct tdm_dim {
    int64_t value;
    const char *symbol;
} tdm_dim;

/* Type and shape of a graph input or output. rank is -1 when unknown. */
typedef struct tdm_value_info {
    const char *name;
    tdm_kind kind;
    tdm_dtype dtype;
    int rank;
    const tdm_dim *dims;
    int optional;   /* declared optional(...): an absent value (TDM_KIND_NONE) is accepted */
} tdm_value_info;

/* Summary of a model, for `tandem info`. */
typedef struct tdm_model_info {
    const char *path;
    int64_t ir_version;
    const char *producer_name;
    const char *producer_version;
    const char *domain;
    int64_t model_version;
    const char *graph_name;
    size_t node_count;     /* nodes of the main graph */
    size_t param_count;    /* elements in initializers */
    size_t param_bytes;    /* bytes of initializer data */
    double flops;          /* Conv/ConvTranspose/Gemm/MatMul with known shapes, 2 per MAC */
    size_t flops_unknown;  /* such nodes whose shapes were not known */
} tdm_model_info;

tdm_status tdm_model_get_info(const tdm_model *model, tdm_model_info *out);

size_t tdm_model_opset_count(const tdm_model *model);
/* domain is "" for ai.onnx. */
tdm_status tdm_model_opset(const tdm_model *model, size_t i, const char **domain, int64_t *version);

size_t tdm_model_metadata_count(const tdm_model *model);
tdm_status tdm_model_metadata(const tdm_model *model, size_t i, const char **key, const char **value);

/* Operator histogram of the main graph, sorted by count (descending),
 * then op name. domain is "" for ai.onnx. */
size_t tdm_model_op_type_count(const tdm_model *model);
tdm_status tdm_model_op_type(const tdm_model *model, size_t i, const char **domain, const char **op_type,
                             size_t *count);

/* Graph inputs (initializers excluded) and outputs. */
size_t tdm_model_input_count(const tdm_model *model);
tdm_status tdm_model_input(const tdm_model *model, size_t i, tdm_value_info *out);
size_t tdm_model_output_count(const tdm_model *model);
tdm_status tdm_model_output(const tdm_model *model, size_t i, tdm_value_info *out);

/* ---------------------------------------------------------------- sessions */

typedef struct tdm_session_options tdm_session_options;

tdm_status tdm_session_options_create(tdm_session_options **out);
void tdm_session_options_destroy(tdm_session_options *opts);
/* Worker threads for the CPU device; 0 means the default. */
tdm_status tdm_session_options_set_threads(tdm_session_options *opts, int threads);
/* Fixes a dynamic dimension of an input: dims has rank entries, -1 keeps
 * a dimension as it is. */
tdm_status tdm_session_options_set_shape(tdm_session_options *opts, const char *input, int rank,
                                         const int64_t *dims);

typedef struct tdm_session tdm_session;

/* Prepares model for running. opts may be NULL. The model must outlive the
 * session. */
tdm_status tdm_session_create(tdm_ctx *ctx, const tdm_model *model, const tdm_session_options *opts,
                              tdm_session **out);
void tdm_session_destroy(tdm_session *session);

/* The sentence describing the session's last failure, or "". */
const char *tdm_session_error(const tdm_session *session);

/* Runs the model. inputs has tdm_model_input_count() entries in model input
 * order (NULL for an absent optional input); they are borrowed. outputs has
 * tdm_model_output_count() entries, each set to a new value the caller
 * destroys. On failure no output is set. */
tdm_status tdm_session_run(tdm_session *session, const tdm_tensor *const *inputs, tdm_tensor **outputs);

#ifdef __cplusplus
}
#endif

#endif /* TANDEM_H */
