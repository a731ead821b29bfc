/*
 * tandem — run ONNX models across an accelerator and the CPU, with every
 * operator placement decided explicitly, explained and measured.
 *
 * This header is the whole public API. Everything not declared here is
 * private. Conventions:
 *   - Constructors are `tdm_x_create(..., tdm_x **out)` or `tdm_x_load(...)`
 *     and return a tdm_status; on failure *out is NULL.
 *   - `tdm_x_destroy(NULL)` is a harmless no-op.
 *   - The library never prints, exits or aborts.
 *   - Borrowed pointers (names, dims, info structs) stay valid until the
 *     handle they came from is destroyed.
 *
 * Errors: one rule. A failing call returns a tdm_status and the handle it
 * was given keeps one sentence describing the failure (naming the file,
 * node, field or value), read with that handle's function:
 *   tdm_ctx_error(ctx)          every call that takes a ctx: loading models
 *                               and values, creating sessions and plans,
 *                               parsing an option's word, calibrating,
 *                               querying devices, extracting a node;
 *   tdm_session_error(session)  the session's runs (tdm_session_run);
 *   tdm_plan_error(plan)        the plan's verdict: a plan that violates the
 *                               fallback policy or a budget keeps that
 *                               sentence, and tdm_plan_status() tells it
 *                               apart (TDM_E_POLICY).
 * A handle's sentence is "" after a call that succeeded, and stays valid
 * until the next call on the handle. Calls without such a handle (option
 * setters; accessors of models, plans, tensors, metrics) fail only on a
 * bad argument (NULL, an index or value out of range): TDM_E_USAGE and no
 * sentence. They write nothing, so models and plans are read-only once
 * made and may be read from several threads.
 *
 * Threads: a ctx and a tdm_session_options belong to one thread at a time;
 * a model and a plan may be shared; a session may be run from several
 * threads at once (see "Threads" below), and is the one handle whose
 * sentence another thread may be writing: read it there with
 * tdm_session_error_copy().
 */
#ifndef TANDEM_H
#define TANDEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header. The library's own is tdm_version(); a
 * program built against one header and run with another shared library
 * can compare the two. MAJOR is the shared library's SONAME number. */
#define TDM_VERSION_MAJOR 0
#define TDM_VERSION_MINOR 3
#define TDM_VERSION_PATCH 0
#define TDM_VERSION_STRING "0.3.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH. */
#define TDM_VERSION_NUMBER (TDM_VERSION_MAJOR * 10000 + TDM_VERSION_MINOR * 100 + TDM_VERSION_PATCH)

/* TDM_API marks what libtandem.so exports: the library is compiled with
 * hidden visibility, so only the declarations below are visible to
 * programs and to Python. Define TDM_API yourself to override. */
#ifndef TDM_API
#if defined(_WIN32) || defined(__CYGWIN__)
#define TDM_API
#elif defined(__GNUC__) && __GNUC__ >= 4
#define TDM_API __attribute__((visibility("default")))
#else
#define TDM_API
#endif
#endif

/* The library's version, "MAJOR.MINOR.PATCH" (static), and the same as
 * MAJOR * 10000 + MINOR * 100 + PATCH. */
TDM_API const char *tdm_version(void);
TDM_API int tdm_version_number(void);

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
TDM_API const char *tdm_status_str(tdm_status status);

/* Copies sentence into dst (of size bytes, always NUL-terminated) with
 * every long value in it shortened in the middle ("first 40 chars…last
 * 20"), so that a sentence quoting a user's 5,000-character name still
 * ends with its reason. A value is a quoted stretch ('…' or "…") or a run
 * of characters without spaces, of more than 64 bytes. Every sentence the
 * library keeps is already shortened so; a program that builds its own
 * sentences around user values can use this. Returns strlen(dst). */
TDM_API size_t tdm_sentence_shorten(char *dst, size_t size, const char *sentence);

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
    TDM_INT4 = 22,
    TDM_FLOAT4E2M1 = 23,
    TDM_FLOAT8E8M0 = 24,
    TDM_UINT2 = 25,
    TDM_INT2 = 26
} tdm_dtype;

#define TDM_DTYPE_COUNT 27

/* Lower-case ONNX-style name of an element type ("float", "int64", …);
 * "undefined" for unknown values. */
TDM_API const char *tdm_dtype_name(tdm_dtype dtype);

/* Bytes per element; 0 for STRING and UNDEFINED; 1 for the 4-bit and
 * 2-bit types (tandem stores one such value per byte). */
TDM_API size_t tdm_dtype_size(tdm_dtype dtype);

/* ---------------------------------------------------------------- context */

/* A context holds settings shared by the models and sessions created from it
 * and the last error of calls made on it. Not thread-safe: use one per
 * thread, or serialise calls. */
typedef struct tdm_ctx tdm_ctx;

TDM_API tdm_status tdm_ctx_create(tdm_ctx **out);
TDM_API void tdm_ctx_destroy(tdm_ctx *ctx);

/* The sentence describing the last failure of a call made with ctx, or ""
 * when the last call succeeded. Owned by ctx; valid until the next call. */
TDM_API const char *tdm_ctx_error(const tdm_ctx *ctx);

/* ------------------------------------------------------------------ values */

/* What a value is: a tensor, a sequence (of tensors, or of maps), an
 * absent optional, or a map (since 0.3: what ai.onnx.ml's ZipMap makes, a
 * sequence of them). */
typedef enum tdm_kind {
    TDM_KIND_TENSOR = 0,
    TDM_KIND_SEQUENCE = 1,
    TDM_KIND_NONE = 2,
    TDM_KIND_MAP = 3
} tdm_kind;

/* A tensor (or sequence, or absent optional) in host memory, C order. */
typedef struct tdm_tensor tdm_tensor;

/* Creates a tensor of the given type and shape with zeroed contents
 * (empty strings for TDM_STRING). rank may be 0 (a scalar); dims may be
 * NULL when rank is 0. */
TDM_API tdm_status tdm_tensor_create(tdm_dtype dtype, int rank, const int64_t *dims, tdm_tensor **out);

/* Creates an empty sequence whose items will have elem_dtype. */
TDM_API tdm_status tdm_sequence_create(tdm_dtype elem_dtype, tdm_tensor **out);

/* Creates an absent optional value. */
TDM_API tdm_status tdm_none_create(tdm_tensor **out);

/* Appends item to seq; seq takes ownership of item, also on failure. */
TDM_API tdm_status tdm_sequence_append(tdm_tensor *seq, tdm_tensor *item);

/* A deep copy. */
TDM_API tdm_status tdm_tensor_clone(const tdm_tensor *t, tdm_tensor **out);

TDM_API void tdm_tensor_destroy(tdm_tensor *t);

TDM_API tdm_kind tdm_tensor_kind(const tdm_tensor *t);
TDM_API tdm_dtype tdm_tensor_dtype(const tdm_tensor *t);
TDM_API int tdm_tensor_rank(const tdm_tensor *t);
TDM_API const int64_t *tdm_tensor_dims(const tdm_tensor *t);
/* Number of elements (product of dims). */
TDM_API size_t tdm_tensor_count(const tdm_tensor *t);
/* Bytes of element data; 0 for strings, sequences and none. */
TDM_API size_t tdm_tensor_nbytes(const tdm_tensor *t);
/* Element data, C order. For TDM_STRING it is an array of `char *`
 * (NUL-terminated, owned by the tensor; replace with tdm_tensor_set_string). */
TDM_API void *tdm_tensor_data(tdm_tensor *t);
TDM_API const void *tdm_tensor_cdata(const tdm_tensor *t);
/* Sets element i of a string tensor to a copy of the len bytes at s. */
TDM_API tdm_status tdm_tensor_set_string(tdm_tensor *t, size_t i, const char *s, size_t len);

TDM_API size_t tdm_sequence_length(const tdm_tensor *seq);
/* Borrowed; owned by seq. */
TDM_API const tdm_tensor *tdm_sequence_item(const tdm_tensor *seq, size_t i);

/* A map (TDM_KIND_MAP) is two 1-D tensors of the same length: its keys
 * (int64 or string, in the order the producer gave them) and its values
 * (entry i maps keys[i] to values[i]). tdm_tensor_dtype() of a map is its
 * values' type. Creates a map from keys and values; the map takes ownership
 * of both, also on failure (TDM_E_USAGE: not 1-D tensors of one length,
 * or keys neither int64 nor string). */
TDM_API tdm_status tdm_map_create(tdm_tensor *keys, tdm_tensor *values, tdm_tensor **out);
/* The keys and values of a map; borrowed, owned by map; NULL when map is
 * not a map. */
TDM_API const tdm_tensor *tdm_map_keys(const tdm_tensor *map);
TDM_API const tdm_tensor *tdm_map_values(const tdm_tensor *map);

/* Reads a value from a file: `.npy` (NumPy format 1.0–3.0, C order) or an
 * ONNX protobuf (`.pb`) holding a TensorProto, SequenceProto or
 * OptionalProto. `expect` may be NULL; when it names a kind, a .pb file is
 * decoded as that kind of message. Errors name the file and the field. */
TDM_API tdm_status tdm_value_load(tdm_ctx *ctx, const char *path, const tdm_kind *expect, tdm_tensor **out);

/* Writes a tensor as `.npy`. bfloat16 is written as uint16 bits, float8 and
 * 4-bit types as uint8/int8, strings as fixed-width unicode ('<U…').
 * The file is written to a temporary name and renamed, so a failure leaves
 * nothing behind; an existing file is replaced only when overwrite != 0. */
TDM_API tdm_status tdm_tensor_save_npy(tdm_ctx *ctx, const tdm_tensor *t, const char *path, int overwrite);

/* ------------------------------------------------------------------ models */

typedef struct tdm_model tdm_model;

/* Loads an ONNX model file. External data is resolved inside the model's
 * folder only. The model is validated (undefined inputs, cycles, duplicate
 * names, unknown operators, opsets) and its shapes inferred. */
TDM_API tdm_status tdm_model_load(tdm_ctx *ctx, const char *path, tdm_model **out);

/* Loads a model from memory. `name` is used in messages. External data is
 * refused (there is no folder to resolve it in). The bytes are not kept. */
TDM_API tdm_status tdm_model_load_memory(tdm_ctx *ctx, const void *data, size_t size, const char *name,
                                         tdm_model **out);

TDM_API void tdm_model_destroy(tdm_model *model);

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
    size_t param_count;    /* elements in initializers and Constant-node tensors */
    size_t param_bytes;    /* bytes of that data */
    double flops;          /* Conv/ConvTranspose/Gemm/MatMul with known shapes, 2 per MAC */
    size_t flops_unknown;  /* such nodes whose shapes were not known */
} tdm_model_info;

TDM_API tdm_status tdm_model_get_info(const tdm_model *model, tdm_model_info *out);

TDM_API size_t tdm_model_opset_count(const tdm_model *model);
/* domain is "" for ai.onnx. */
TDM_API tdm_status tdm_model_opset(const tdm_model *model, size_t i, const char **domain, int64_t *version);

TDM_API size_t tdm_model_metadata_count(const tdm_model *model);
TDM_API tdm_status tdm_model_metadata(const tdm_model *model, size_t i, const char **key, const char **value);

/* Operator histogram of the main graph, sorted by count (descending),
 * then op name. domain is "" for ai.onnx. */
TDM_API size_t tdm_model_op_type_count(const tdm_model *model);
TDM_API tdm_status tdm_model_op_type(const tdm_model *model, size_t i, const char **domain, const char **op_type,
                                     size_t *count);

/* Graph inputs (initializers excluded) and outputs. */
TDM_API size_t tdm_model_input_count(const tdm_model *model);
TDM_API tdm_status tdm_model_input(const tdm_model *model, size_t i, tdm_value_info *out);
TDM_API size_t tdm_model_output_count(const tdm_model *model);
TDM_API tdm_status tdm_model_output(const tdm_model *model, size_t i, tdm_value_info *out);
/* The key type of graph output i when its value is a sequence of maps
 * (ONNX seq(map(K, V)), as ZipMap makes; tdm_model_output then gives kind
 * TDM_KIND_SEQUENCE and dtype V): TDM_INT64 or TDM_STRING. TDM_UNDEFINED
 * for any other output or a bad argument. */
TDM_API tdm_dtype tdm_model_output_map_key(const tdm_model *model, size_t i);

/* Reads a value file for a graph input or output declared as vi: as
 * tdm_value_load with expect = &vi->kind, and when vi->optional, a .pb file
 * holding an OptionalProto of that kind (as the ONNX node tests store a
 * value declared optional(...)) yields its tensor or sequence, or a
 * TDM_KIND_NONE value when it is absent; the plain TensorProto /
 * SequenceProto and .npy are read as for tdm_value_load. Sequences of
 * sequences, maps and optionals of optionals are refused with a sentence
 * (TDM_E_UNSUPPORTED). */
TDM_API tdm_status tdm_value_load_for(tdm_ctx *ctx, const char *path, const tdm_value_info *vi, tdm_tensor **out);

/* Writes a value in the form the ONNX node tests store one declared as vi
 * (a graph input or output; the message is named vi->name): a TensorProto
 * or a SequenceProto of tensors, inside an OptionalProto when vi->optional;
 * an absent value (TDM_KIND_NONE) as an OptionalProto without a value.
 * bfloat16 keeps its type (raw bits); 4-bit types are refused. Written as
 * tdm_tensor_save_npy writes (temporary name, then renamed). */
TDM_API tdm_status tdm_value_save_pb(tdm_ctx *ctx, const tdm_tensor *v, const tdm_value_info *vi, const char *path,
                                     int overwrite);

/* --------------------------------------------------------- session options */

/* Every setting of a session, of a plan made without one (tdm_plan_create)
 * and of a calibration (tdm_calibrate): one object, one setter per setting,
 * all declared here. A setter returns TDM_E_USAGE and changes nothing when
 * opts is NULL or the value is out of its range (given below), TDM_E_NOMEM
 * when a copy fails. Choices are enums. The words a user types for them
 * ("subgraph", "deny-compute", "every:4") are read by the tdm_*_parse
 * functions, the one reader of those words: the CLI, the Python package
 * and the Triton backend all parse through them. A parser returns TDM_OK
 * and sets *out, or TDM_E_USAGE and keeps on ctx (which may be NULL) a
 * sentence quoting the word and listing the accepted ones. tdm_*_name gives
 * the word of a value ("?" when out of range). An options object may be
 * given to several sessions and destroyed once they are created. */
typedef struct tdm_session_options tdm_session_options;

TDM_API tdm_status tdm_session_options_create(tdm_session_options **out);
TDM_API void tdm_session_options_destroy(tdm_session_options *opts);

/* How nodes are grouped when placed. */
typedef enum tdm_granularity {
    TDM_GRANULARITY_OP = 0,       /* "op": each node on its first able device */
    TDM_GRANULARITY_SUBGRAPH = 1, /* "subgraph", the default: small islands join their neighbours */
    TDM_GRANULARITY_GRAPH = 2,    /* "graph": all on the first device that runs every node */
    TDM_GRANULARITY_AUTO = 3,     /* "auto": the placement of least estimated time, copies included */
    TDM_GRANULARITY_GREEDY = 4    /* "greedy", the baseline: each device claims every node it
                                   * supports, in priority order */
} tdm_granularity;

/* The fallback policy. When never set, the environment variable
 * TANDEM_FALLBACK (one of the words) is read at planning time. */
typedef enum tdm_fallback_mode {
    TDM_FALLBACK_ALLOW = 0,       /* "allow", the default */
    TDM_FALLBACK_DENY = 1,        /* "deny": any node off the first device (unless pinned) violates it */
    TDM_FALLBACK_DENY_COMPUTE = 2 /* "deny-compute": only shape bookkeeping ops may fall back */
} tdm_fallback_mode;

/* Elementwise fusion on plans that run wholly on cpu: the elementwise
 * nodes after a node (activations, Add/Mul/... with constants or a
 * residual) run inside it, their intermediates never stored. */
typedef enum tdm_fusion {
    TDM_FUSION_OFF = 0,     /* "off": never */
    TDM_FUSION_ON = 1,      /* "on", the default: fused, except in runs with an observer
                             * (tdm_session_set_observer), which see every node's outputs */
    TDM_FUSION_OBSERVED = 2 /* "observed": fused even under an observer, which then sees each node
                             * fused away with zero time (its time is in the node it was fused
                             * into) and without output values */
} tdm_fusion;

/* The precision guard (DESIGN.md "Placement"): when the plan puts nodes on
 * a device that computes in a type narrower than float32 (fp16, bf16), a
 * run is checked against the cpu fp32 reference before its outputs are
 * returned — the first run probes ranges and per-node errors and re-plans
 * (nodes refused with PRECISION and the figures); the outputs are verified
 * (cosine >= output_min_cosine, 0.999 by default, no non-finite values, and
 * cpu's top-1 along the last axis of score outputs of rank <= 3), and on a
 * breach the first node that crosses is refused, the session re-plans and
 * re-runs, at most `rounds` times (8). Unset: "first" when a narrower
 * device is in the plan, else off. */
typedef enum tdm_verify_mode {
    TDM_VERIFY_OFF = 0,   /* "off" */
    TDM_VERIFY_FIRST = 1, /* "first": the first run */
    TDM_VERIFY_EVERY = 2  /* "every:N": the first run, then one run in N */
} tdm_verify_mode;

/* The rescue pass (DESIGN.md "Placement"): before placement, a node a
 * device rejects is rewritten into nodes that device supports (LayerNorm
 * decomposed, MatMul + Add fused into Gemm, Pad(reflect) as Slice +
 * Concat, ...) when the rewrite, run on cpu in float32, matches the
 * original; the new nodes get reason RESCUED and the ledger's "rescue"
 * lists every attempt with its figures. */
typedef enum tdm_rescue_mode {
    TDM_RESCUE_OFF = 0,  /* "off" */
    TDM_RESCUE_SAFE = 1, /* "safe", the default: exact rewrites only */
    TDM_RESCUE_ALL = 2   /* "all": also approximations (GELU's tanh form) that pass the check */
} tdm_rescue_mode;

TDM_API tdm_status tdm_granularity_parse(tdm_ctx *ctx, const char *word, tdm_granularity *out);
TDM_API tdm_status tdm_fallback_mode_parse(tdm_ctx *ctx, const char *word, tdm_fallback_mode *out);
TDM_API tdm_status tdm_fusion_parse(tdm_ctx *ctx, const char *word, tdm_fusion *out);
/* "off", "first" or "every:N" (N from 1 to 1000000000); *every is N, or 0. */
TDM_API tdm_status tdm_verify_mode_parse(tdm_ctx *ctx, const char *word, tdm_verify_mode *out, int *every);
TDM_API const char *tdm_granularity_name(tdm_granularity granularity);
TDM_API const char *tdm_fallback_mode_name(tdm_fallback_mode mode);
TDM_API const char *tdm_fusion_name(tdm_fusion fusion);
/* "every" for TDM_VERIFY_EVERY (the N is the setter's). */
TDM_API const char *tdm_verify_mode_name(tdm_verify_mode mode);
TDM_API tdm_status tdm_rescue_mode_parse(tdm_ctx *ctx, const char *word, tdm_rescue_mode *out);
TDM_API const char *tdm_rescue_mode_name(tdm_rescue_mode mode);

/* Placement. */
/* Devices in priority order, comma-separated ("vnpu:edge-npu,cpu"):
 * `vnpu:PROFILE` (a shipped profile name or a .json path), `opencl[:N]`, a
 * plugin's name, `cpu`. cpu is implied last. NULL or "": every loaded
 * plugin, then cpu. A device that is unavailable makes tdm_session_create
 * fail with TDM_E_DEVICE. */
TDM_API tdm_status tdm_session_options_set_devices(tdm_session_options *opts, const char *list);
TDM_API tdm_status tdm_session_options_set_granularity(tdm_session_options *opts, tdm_granularity granularity);
/* "OP_OR_NODE=DEVICE" (split at the last '='): nodes of that name, or
 * else of that op type, run on DEVICE with reason USER when DEVICE
 * supports them. May be given several times. */
TDM_API tdm_status tdm_session_options_add_pin(tdm_session_options *opts, const char *pin);
/* Loads a device plugin (a shared library built against tandem/device.h)
 * from path when a session is created; the paths in the environment
 * variable TANDEM_PLUGINS (colon-separated) are loaded too. */
TDM_API tdm_status tdm_session_options_add_plugin(tdm_session_options *opts, const char *path);

/* The fallback policy and budgets; a plan outside them is a violation
 * (tdm_plan_status() == TDM_E_POLICY; tdm_session_create fails with it). */
TDM_API tdm_status tdm_session_options_set_fallback(tdm_session_options *opts, tdm_fallback_mode mode);
/* Budget on the fallback ratio R in [0, 1]: the estimated time of the
 * nodes that fall back (nodes not on the first device and not pinned)
 * over the estimated time of all nodes; by node count when a device gives
 * no estimate for some node. Negative: no budget (the default). */
TDM_API tdm_status tdm_session_options_set_max_fallback_ratio(tdm_session_options *opts, double ratio);
/* Budget on the bytes copied between devices per run (activations, graph
 * inputs and outputs; weight uploads are not counted). Negative: none. */
TDM_API tdm_status tdm_session_options_set_max_boundary_bytes(tdm_session_options *opts, int64_t bytes);

/* Precision. With a calibration file (`tandem calibrate`), a device
 * refuses a node whose calibrated error is outside the thresholds (reason
 * PRECISION, with the figures), including the node where error accumulated
 * along a chain crosses them; measured times replace the devices'
 * estimates. min_cosine: 0..1 (default 0.99); max_abs: < 0 no limit (the
 * default). */
TDM_API tdm_status tdm_session_options_set_calibration(tdm_session_options *opts, const char *path);
TDM_API tdm_status tdm_session_options_set_precision(tdm_session_options *opts, double min_cosine, double max_abs);
/* The precision guard's mode; every is N for TDM_VERIFY_EVERY (1 to
 * 1000000000), 0 otherwise. The default is TDM_VERIFY_FIRST when the plan
 * puts a node on a device narrower than fp32 or keeps a rescue (a rewrite
 * of a node a device could not run; tdm_session_options_set_rescue): then
 * each kept rescue is checked against its original node on cpu fp32 on
 * the values the first run (and each calibration input set, at
 * tdm_session_create) sends it, before any output is returned, and one
 * that misses the tolerance is dropped (the session re-plans without it:
 * TDM_EVENT_REPLAN with the figures; the ledger's "rescue" lists each
 * check). TDM_VERIFY_OFF leaves rescues checked on synthetic inputs only
 * (the ledger says so); TDM_VERIFY_EVERY does not check them again. */
TDM_API tdm_status tdm_session_options_set_verify(tdm_session_options *opts, tdm_verify_mode mode, int every);
/* output_min_cosine 0..1 (0.999), rounds 0..1000 (8). */
TDM_API tdm_status tdm_session_options_set_verify_thresholds(tdm_session_options *opts, double output_min_cosine,
                                                             int rounds);
/* One set of calibration inputs for the precision guard (call again for
 * more sets): n values, values[k] for the model input named names[k] (names
 * may be NULL, or an entry NULL, when n is 1 and the model has one input).
 * The values are copied. With verify not off, tdm_session_create checks
 * every kept rescue on each set (tdm_session_options_set_verify). When the
 * guard is active (a narrow device in the plan, verify not off), tdm_session_create probes and verifies every set
 * before it returns — a node is refused when any set shows a problem, the
 * probes' figures combined worst-first — and the first run is then
 * verified on its own inputs (outputs against cpu fp32, re-planned on a
 * breach) without a second probe. A set that does not name every model
 * input, names one the model lacks, or has a value the model does not take
 * (every set of the same shapes) makes tdm_session_create fail with
 * TDM_E_INPUT and a sentence naming the set and the input, the guard
 * active or not. */
TDM_API tdm_status tdm_session_options_add_calibration_input(tdm_session_options *opts, const char *const *names,
                                                             const tdm_tensor *const *values, size_t n);
/* The rescue pass's mode (default TDM_RESCUE_SAFE). A rewrite is kept when
 * it matches the original node on cpu fp32 on synthetic inputs at plan
 * time; a session then checks it on real inputs (tdm_session_options_set_verify). */
TDM_API tdm_status tdm_session_options_set_rescue(tdm_session_options *opts, tdm_rescue_mode mode);
/* Binds the model input named input to a fixed value for deployment
 * (copied; binding the same input again replaces it). Plans and sessions
 * made with opts take it as a constant: constant folding runs on it, and an
 * If whose condition becomes a constant is replaced by the branch it takes
 * (rescue entry "if-inline"), so that devices can claim the nodes inside
 * (e.g. a streaming audio model's network inside an If on the sample rate).
 * An If whose condition is a constant in the file is inlined without a
 * bind. Plan and session creation fail with TDM_E_INPUT and a sentence
 * when input is not a model input (naming the inputs) or the value is not
 * of its element type and shape. At run time the caller may pass NULL for
 * a bound input (the bound value is used) or the same value; another value
 * is refused with TDM_E_INPUT. */
TDM_API tdm_status tdm_session_options_bind(tdm_session_options *opts, const char *input, const tdm_tensor *value);
/* Shape bucketing (issue 18): shapes "HxW[,HxW...]" (NULL: off), or
 * "profile": the image sizes of the first device of the list that was
 * compiled for a finite set of them (a vnpu profile's "image_sizes"; none:
 * tdm_session_create fails with TDM_E_USAGE and a sentence). A run
 * whose rank-4 image input is not one of them is padded (bottom/right;
 * pad "zero" or "edge", NULL: "zero") to the smallest that holds it, runs
 * on the plan of that shape (the plan cache is turned on) and its outputs
 * that follow the image's height and width are cropped back. A model that
 * is not fully convolutional is refused at tdm_session_create
 * (TDM_E_UNSUPPORTED, a SHAPE_UNSUPPORTED sentence naming the op). */
TDM_API tdm_status tdm_session_options_set_buckets(tdm_session_options *opts, const char *shapes, const char *pad);

/* Execution. */
/* Worker threads for the CPU device; 0 means the default. */
TDM_API tdm_status tdm_session_options_set_threads(tdm_session_options *opts, int threads);
/* Fixes a dynamic dimension of an input: dims has rank entries, -1 keeps
 * a dimension as it is. */
TDM_API tdm_status tdm_session_options_set_shape(tdm_session_options *opts, const char *input, int rank,
                                                 const int64_t *dims);
/* The model specialised to the shapes of opts (set_shape), in memory, as a
 * session or plan made with opts sees it: inputs and outputs with the fixed
 * dimensions, shapes inferred again, tdm_model_get_info's FLOPs counted
 * with them (the rest of the info describes the file). A shape naming no
 * input, or disagreeing with the model's rank or fixed dimensions, is
 * TDM_E_INPUT with a sentence on ctx. *out is a new model the caller
 * destroys (it does not borrow from model), or NULL when opts fixes no
 * shape. */
TDM_API tdm_status tdm_model_specialize(tdm_ctx *ctx, const tdm_model *model, const tdm_session_options *opts,
                                        tdm_model **out);
TDM_API tdm_status tdm_session_options_set_fusion(tdm_session_options *opts, tdm_fusion fusion);

/* Run-time adaptation of a long-lived session (tdm_session_adaptation_json
 * reports it). The circuit breaker (off by default: faults 0): a run that
 * hits a device fault (TDM_E_DEVICE) is re-executed at once on a plan with
 * every node on cpu (reason DEVICE_FAULT) and returns its outputs; `faults`
 * (0..1000000) such faults within window_ms send every run to that plan;
 * after cooldown_ms one run probes the devices again (half-open): success
 * closes the breaker, a fault re-opens it. */
TDM_API tdm_status tdm_session_options_set_breaker(tdm_session_options *opts, int faults, double window_ms,
                                                   double cooldown_ms);
/* Re-planning with measured costs (off by default: slow_ratio 0). Per run,
 * each partition on a non-cpu device is timed (the device's timer, a
 * simulated device's model, else wall time); one at >= slow_ratio (>= 1,
 * e.g. 1.5) times its estimate in `runs` consecutive runs (0: 3) triggers a
 * re-plan with its measured per-node times replacing the estimates. The new
 * plan is adopted only when its estimate is >= 10 % below the current
 * placement's with the same measured figures (hysteresis); at most one
 * re-plan per min_runs runs. Each decision is recorded with its figures
 * (tdm_session_adaptation_json "decisions"; the adopted plan's ledger
 * "replan") and emitted as TDM_EVENT_REPLAN. */
TDM_API tdm_status tdm_session_options_set_adaptation(tdm_session_options *opts, double slow_ratio, int runs,
                                                      int min_runs);
/* Plans cached per input-shape signature (0: off, the default; at most
 * 4096): each run's input shapes select a plan made for them (the model
 * specialized to those shapes, as with set_shape), the `size` least
 * recently used kept. A new signature whose placement differs from the
 * previous signature's is reported as a shape-dependent fallback (which
 * nodes moved, from and to which device, why) in the adaptation JSON and as
 * TDM_EVENT_REPLAN. Needs a model loaded from a file. */
TDM_API tdm_status tdm_session_options_set_plan_cache(tdm_session_options *opts, int size);
/* Admission of concurrent runs (a session run from several threads): a
 * run starts only when what it may hold on each device with a memory
 * capacity (a vnpu profile's memory_bytes, ...) fits beside the runs
 * already running; otherwise it waits its turn, first come first served,
 * so no run fails for lack of memory that would succeed alone. max_queue
 * (0 to 1000000; default 64) bounds the runs waiting at once: one more is
 * refused at once with TDM_E_DEVICE ("vnpu:edge-npu is busy: 64 runs
 * already wait for its memory, ..."); 0: none waits. Each wait and refusal
 * is a TDM_EVENT_ADMIT (tdm_metrics_admission). */
TDM_API tdm_status tdm_session_options_set_max_queue(tdm_session_options *opts, int max_queue);

/* ---------------------------------------------------------------- sessions */

typedef struct tdm_session tdm_session;

/* Prepares model for running. opts may be NULL. The model must outlive the
 * session. */
TDM_API tdm_status tdm_session_create(tdm_ctx *ctx, const tdm_model *model, const tdm_session_options *opts,
                                      tdm_session **out);
TDM_API void tdm_session_destroy(tdm_session *session);

/* The sentence describing the failure of the session's last run, or ""
 * (the errors rule at the top; while other threads may be running it,
 * tdm_session_error_copy()). */
TDM_API const char *tdm_session_error(const tdm_session *session);

/* Runs the model. inputs has tdm_model_input_count() entries in model input
 * order (NULL for an absent optional input, or for an input bound by
 * tdm_session_options_bind: its bound value); they are borrowed. outputs has
 * tdm_model_output_count() entries, each set to a new value the caller
 * destroys. On failure no output is set. */
TDM_API tdm_status tdm_session_run(tdm_session *session, const tdm_tensor *const *inputs, tdm_tensor **outputs);

/* ------------------------------------------- devices, plans and the ledger */

/* Frees memory the library allocated for the caller (ledger JSON, plan
 * reports). NULL is a harmless no-op. */
TDM_API void tdm_free(void *p);

/* A plan: every node of the model's main graph with its device, reason
 * code and the devices that rejected it; partitions, boundary copies,
 * peak memory and estimated times; the fallback policy's verdict. Reason
 * codes are the names of tdm_reason (tandem/device.h): "OK",
 * "OP_UNSUPPORTED", … Estimated times from a virtual device are modeled
 * and marked so. */
typedef struct tdm_plan tdm_plan;

/* Plans model with the devices and policy of opts (NULL: defaults)
 * without creating a session. Unlike tdm_session_create, a policy
 * violation does not fail: it is the plan's verdict, tdm_plan_status(),
 * tdm_plan_error() and tdm_plan_violation(). Fails with TDM_E_DEVICE (a device unavailable),
 * TDM_E_USAGE (a bad option, pin or TANDEM_FALLBACK), TDM_E_UNSUPPORTED (a
 * node that no device can run, named). */
TDM_API tdm_status tdm_plan_create(tdm_ctx *ctx, const tdm_model *model, const tdm_session_options *opts, tdm_plan **out);
TDM_API void tdm_plan_destroy(tdm_plan *plan);

/* The plan a session runs (owned by the session). */
TDM_API const tdm_plan *tdm_session_plan(const tdm_session *session);

/* Summary of a plan. Times are in milliseconds; negative when no device
 * gave an estimate. */
typedef struct tdm_plan_summary {
    size_t nodes;
    size_t partitions;
    size_t fallback_nodes;     /* not on the first device, not pinned */
    uint64_t boundary_bytes;   /* copies of known size between devices per run */
    size_t boundary_unknown;   /* copies whose size is not known statically */
    uint64_t weight_bytes;     /* weights uploaded to devices per run */
    size_t copies;             /* boundary and weight copies per run */
    double estimated_ms;       /* nodes and copies */
    double copies_ms;
    int estimates_complete;    /* every node had an estimate */
    int modeled;               /* some figure is modeled, not measured */
    double fallback_ratio;     /* as in tdm_session_options_set_max_fallback_ratio */
} tdm_plan_summary;

TDM_API tdm_status tdm_plan_get_summary(const tdm_plan *plan, tdm_plan_summary *out);

/* Devices of the plan in priority order (cpu last), and how many nodes
 * each runs. */
TDM_API size_t tdm_plan_device_count(const tdm_plan *plan);
TDM_API const char *tdm_plan_device_name(const tdm_plan *plan, size_t i);
TDM_API size_t tdm_plan_device_nodes(const tdm_plan *plan, size_t i);

/* Node i (graph order) of the plan: name, op type, device, reason code
 * name and detail sentence ("" when none). Any out pointer may be NULL. */
TDM_API size_t tdm_plan_node_count(const tdm_plan *plan);
TDM_API tdm_status tdm_plan_node(const tdm_plan *plan, size_t i, const char **name, const char **op_type, const char **device,
                                 const char **reason, const char **detail);

/* The plan's verdict (the errors rule at the top): TDM_E_POLICY when the
 * plan violates the fallback policy or a budget, else TDM_OK; and its
 * sentence, "" when within them. Each violation names a node ("" for a
 * graph output copied to the host), its reason code name and a sentence;
 * the list holds EVERY offending node, in execution order. */
TDM_API tdm_status tdm_plan_status(const tdm_plan *plan);
TDM_API const char *tdm_plan_error(const tdm_plan *plan);
TDM_API size_t tdm_plan_violation_count(const tdm_plan *plan);
TDM_API tdm_status tdm_plan_violation(const tdm_plan *plan, size_t i, const char **node, const char **reason,
                                      const char **detail);

/* The ledger (DESIGN.md "The ledger") as one JSON document; *json is
 * freed with tdm_free(). The session's ledger adds "run": the figures of
 * its last completed run (copies, bytes, device fallbacks reported by
 * plugins). */
TDM_API tdm_status tdm_plan_ledger_json(const tdm_plan *plan, char **json);
TDM_API tdm_status tdm_session_ledger_json(tdm_session *session, char **json);

/* The readable report `tandem plan` prints: partitions, nodes per device,
 * every fallback node with its reason, boundary tensors and bytes,
 * estimated time per device (marked modeled where it is). Freed with
 * tdm_free(). */
TDM_API tdm_status tdm_plan_report(const tdm_plan *plan, char **text);

/* Threads. A session may be run from several threads at once: each
 * tdm_session_run keeps its state to itself, and the plan and devices are
 * read-only or locked (a virtual device's memory accounting is shared by
 * the concurrent runs, so concurrent runs on a small device may fail with
 * TDM_E_DEVICE where one run alone fits). The session's last-error
 * sentence is written under a lock by whichever run ended last; while
 * other threads may be running the session, the pointer tdm_session_error()
 * returns may be rewritten as it is read: copy the sentence under that lock
 * instead (always NUL-terminated, cut to size bytes). The session is the
 * only handle used from several threads at once, so the only one with such
 * a copy. */
TDM_API tdm_status tdm_session_error_copy(const tdm_session *session, char *buf, size_t size);

/* What the devices tandem knows are: available here, or why not. */
typedef struct tdm_device_info {
    const char *name;          /* "cpu", "vnpu:edge-npu", "opencl", a plugin's name */
    const char *kind;          /* "cpu", "vnpu", "opencl", "plugin" */
    int available;
    const char *description;
    const char *why_not;       /* "" when available */
    uint64_t memory_bytes;     /* UINT64_MAX: unlimited; 0: unknown */
    const char *precision;     /* "fp32", "fp16", "bf16", "" */
    const char *source;        /* "builtin", "embedded", a profile or plugin path */
} tdm_device_info;

typedef struct tdm_device_list tdm_device_list;

/* Lists cpu, every shipped vnpu profile, opencl, and the plugins of
 * plugin_paths (and TANDEM_PLUGINS). */
TDM_API tdm_status tdm_devices_query(tdm_ctx *ctx, const char *const *plugin_paths, size_t n_plugins, tdm_device_list **out);
TDM_API size_t tdm_device_list_count(const tdm_device_list *list);
TDM_API tdm_status tdm_device_list_get(const tdm_device_list *list, size_t i, tdm_device_info *out);
TDM_API void tdm_device_list_destroy(tdm_device_list *list);


/* ------------------------------------------- observation and diagnostics */

/* The executor's event hook: every diagnostic (profile, trace, compare,
 * metrics, report) is a client of it; devices carry no diagnostic code.
 * Times are CLOCK_MONOTONIC nanoseconds. */
typedef enum tdm_event_kind {
    TDM_EVENT_NODE = 0,   /* a node ran */
    TDM_EVENT_COPY = 1,   /* a tensor was copied between devices */
    TDM_EVENT_FAULT = 2,  /* a device failed on a node (message in detail) */
    TDM_EVENT_RUN = 3,    /* a run ended (status in status; wall time start..end) */
    TDM_EVENT_REPLAN = 4, /* the session re-planned (emitted by the runtime when it does) */
    TDM_EVENT_ADMIT = 5   /* a run waited for device memory (start..end: the wait; device: the device;
                           * bytes_in: the run's need there) or was refused by a full queue
                           * (status TDM_E_DEVICE, detail the sentence): tdm_session_options_set_max_queue */
} tdm_event_kind;

typedef struct tdm_event {
    tdm_event_kind kind;
    const char *name;        /* node name; copy: the tensor copied; run: "" */
    const char *op_type;     /* node/fault: op type; else "" */
    const char *device;      /* node/fault: its device; copy: the destination */
    const char *from;        /* copy: the source device ("cpu" is the host); else "" */
    const char *direction;   /* copy: "h2d", "d2h" or "d2d"; else "" */
    const char *reason;      /* node/fault: the placement's reason code name ("OK", ...); else "" */
    const char *preferred;   /* node: the first device that supports it (== device unless moved) */
    int fallback;            /* node: counted as a fallback by the plan (not on the first device, not pinned) */
    int weight;              /* copy: a weight upload */
    size_t node_index;       /* node/fault: index in the graph (tdm_plan_node order) */
    uint64_t start_ns, end_ns;
    uint64_t bytes_in, bytes_out; /* node: bytes read and written; copy: bytes copied (both) */
    double modeled_ms;       /* the device's modeled duration (vnpu), < 0 when none */
    int status;              /* run: its tdm_status */
    const char *detail;      /* fault: the sentence; else "" */
    /* node: the host values read and written, valid during the callback
     * only (NULL entries: absent, or an input held by a plugin device; a
     * plugin node's outputs are copied to the host for the event unless the
     * session's fusion is TDM_FUSION_OBSERVED). */
    int n_inputs, n_outputs;
    const tdm_tensor *const *inputs;
    const tdm_tensor *const *outputs;
    /* node: the time the device itself measured (OpenCL profiling events),
     * in milliseconds; < 0 when the device has no timer. The wall interval
     * start_ns..end_ns then ends when the device finished the node. */
    double device_ms;
} tdm_event;

/* Called from the thread that runs the session, once per event; concurrent
 * runs call it concurrently. It must not call back into the session. */
typedef void (*tdm_observer_fn)(void *user, const tdm_event *event);

/* Registers fn (NULL: none, the default; nothing is timed then) to observe
 * every run of session. Not to be called while the session runs. */
TDM_API tdm_status tdm_session_set_observer(tdm_session *session, tdm_observer_fn fn, void *user);

/* Counters for embedders, fed by tdm_metrics_observe (a tdm_observer_fn
 * whose user pointer is the tdm_metrics), thread-safe. */
typedef struct tdm_metrics tdm_metrics;

typedef struct tdm_metrics_summary {
    uint64_t runs, run_failures, nodes, copies, copy_bytes, faults, replans;
    uint64_t wall_ns, copy_ns, fallback_ns, node_ns;
    double fallback_ratio;   /* fallback_ns / node_ns; 0 without nodes */
    uint64_t nodes_by_reason[16]; /* by tdm_reason number (tandem/device.h) */
} tdm_metrics_summary;

TDM_API tdm_status tdm_metrics_create(tdm_metrics **out);
TDM_API void tdm_metrics_destroy(tdm_metrics *metrics);
TDM_API void tdm_metrics_observe(void *metrics, const tdm_event *event);
TDM_API tdm_status tdm_metrics_get(const tdm_metrics *metrics, tdm_metrics_summary *out);
/* Busy nanoseconds and node count of device i (i < count), by name. */
TDM_API size_t tdm_metrics_device_count(const tdm_metrics *metrics);
TDM_API tdm_status tdm_metrics_device(const tdm_metrics *metrics, size_t i, const char **name, uint64_t *busy_ns,
                                      uint64_t *nodes);
/* Admission (TDM_EVENT_ADMIT): runs that waited for device memory, the
 * total and the longest wait in nanoseconds, runs refused by a full queue.
 * Any out pointer may be NULL. */
TDM_API tdm_status tdm_metrics_admission(const tdm_metrics *metrics, uint64_t *waits, uint64_t *wait_ns,
                                         uint64_t *max_wait_ns, uint64_t *refused);
/* The dataflow of node i of a plan (tdm_plan_node order), for drawing
 * it: how many inputs and outputs it has, and the value name of each ("" for
 * an absent optional input). NULL when out of range. */
TDM_API size_t tdm_plan_node_input_count(const tdm_plan *plan, size_t i);
TDM_API size_t tdm_plan_node_output_count(const tdm_plan *plan, size_t i);
TDM_API const char *tdm_plan_node_input(const tdm_plan *plan, size_t i, size_t k);
TDM_API const char *tdm_plan_node_output(const tdm_plan *plan, size_t i, size_t k);

/* Minimal reproductions. Whether input k of node i is a constant of the
 * model (an initializer or folded value: kept inside the reproduction). */
TDM_API int tdm_plan_node_input_is_constant(const tdm_plan *plan, size_t i, size_t k);
/* Node i of plan as a one-node ONNX model (a serialized ModelProto): the
 * node with its attributes, its constant inputs as initializers, its other
 * inputs as graph inputs typed and shaped as inputs[k] (NULL entries or a
 * NULL array: the static type), its outputs with their static types, and
 * the opset of its domain. Nodes with subgraph, sparse or type attributes
 * are refused (TDM_E_UNSUPPORTED). *bytes is freed with tdm_free(); on
 * failure the sentence is kept on ctx (may be NULL). */
TDM_API tdm_status tdm_plan_extract_node(tdm_ctx *ctx, const tdm_plan *plan, size_t i, const tdm_tensor *const *inputs,
                                         void **bytes, size_t *size);
/* A tensor as a serialized ONNX TensorProto named name (raw_data, or
 * string_data for strings; 4-bit types are refused). Freed with tdm_free(). */
TDM_API tdm_status tdm_tensor_to_proto(const tdm_tensor *t, const char *name, void **bytes, size_t *size);

/* The counters in Prometheus text exposition format (version 0.0.4),
 * metric names prefixed "tandem_"; *text is freed with tdm_free(). */
TDM_API tdm_status tdm_metrics_prometheus(const tdm_metrics *metrics, char **text);

/* ------------------------------------------- calibration and adaptation */

/* Calibration (`tandem calibrate`): per node and device its time (cpu:
 * median of `repeat` runs; vnpu: modeled), per non-cpu device its error
 * against cpu fp32 on inputs (max abs, RMSE, cosine, alone and along the
 * chain), the copy cost per copy and per byte; JSON keyed by a node
 * signature that survives renames (src/plan/calib.h documents the file).
 * opts gives the devices (and shapes); inputs has one entry per model
 * input (NULL: its initializer). progress (may be NULL) is called before
 * each node with done < total and once with done == total. *json is freed
 * with tdm_free(). */
typedef void (*tdm_progress_fn)(void *user, size_t done, size_t total, const char *what);
TDM_API tdm_status tdm_calibrate(tdm_ctx *ctx, const tdm_model *model, const tdm_session_options *opts,
                                 const tdm_tensor *const *inputs, int repeat, tdm_progress_fn progress, void *user,
                                 char **json);

/* How the plan's calibration file fitted the model: *entries node entries
 * in the file, *matched of them matching a node of the model (by its
 * signature), *missing nodes of the model the file has no figures for.
 * TDM_E_USAGE when the plan was made without a calibration file. Any
 * out-pointer may be NULL. */
TDM_API tdm_status tdm_plan_calibration_match(const tdm_plan *plan, size_t *entries, size_t *matched, size_t *missing);

/* The guard's record as JSON (freed with tdm_free()): "active", "verify",
 * "checks", "breaches", "moved_nodes", "first_moved", "first_run_extra_ms"
 * (what the first guarded run cost beyond a plain run), "extra_ms",
 * "output_cosine_before"/"_after", "decisions" (each with its figures). */
TDM_API tdm_status tdm_session_guard_json(tdm_session *s, char **json);

/* The breaker's state and counters (runs, faults, re-executed runs, opens,
 * probes) and the cpu plan's ledger once built, the re-planning decisions
 * and the plan cache (entries, hits, shape-dependent fallbacks), as JSON;
 * tdm_free(). With the breaker, re-planning or the plan cache on,
 * tdm_session_ledger_json includes the same object as "adaptation". */
TDM_API tdm_status tdm_session_adaptation_json(tdm_session *session, char **json);

#ifdef __cplusplus
}
#endif

#endif /* TANDEM_H */
