/*
 * tandem device ABI: what a device (built in, or a plugin loaded by path)
 * provides to the planner and the executor.
 *
 * A device is a `tdm_device_iface` (a static const table of function
 * pointers) plus a `void *ctx`. The table begins with api_version; members
 * are only ever appended, never reordered or removed. Members marked
 * (optional) may be NULL: the caller supplies the default written next to
 * them.
 *
 * Versions (SQLite's iVersion rule): each version appends members to the
 * table and raises TDM_DEVICE_API_VERSION; a member is marked with the
 * version that added it ("since 2"). tandem accepts a device of its own
 * version or an older one, and reads a member only when the device's
 * api_version says the table has it (an older table simply ends before
 * it); it refuses a device of a newer version, naming both numbers. A plugin is a shared library built against this header alone that
 * exports `tdm_device_plugin_init` (see the end of this file).
 *
 * Everything a device sees of a model is plain data described here: it
 * never sees tandem's internal types.
 */
#ifndef TANDEM_DEVICE_H
#define TANDEM_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "tandem/tandem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes. Bumped when members are appended.
 *   1  the table up to destroy
 *   2  last_run_ms
 *   3  rewrite, rewrite_free (a device's own rescue rewrites) */
#define TDM_DEVICE_API_VERSION 3

/* Why a node is (or is not) placed on a device. The numbers are part of the
 * ABI and of the ledger: new codes are appended, never renumbered. */
typedef enum tdm_reason {
    TDM_REASON_OK = 0,                /* runs on the first device in priority */
    TDM_REASON_OP_UNSUPPORTED = 1,    /* no kernel for this op type or opset version */
    TDM_REASON_DTYPE_UNSUPPORTED = 2, /* the device lacks this element type */
    TDM_REASON_ATTR_UNSUPPORTED = 3,  /* an attribute value is outside the device's range */
    TDM_REASON_SHAPE_UNSUPPORTED = 4, /* rank, dimension limit, or a dynamic shape */
    TDM_REASON_MEMORY = 5,            /* the partition's peak memory exceeds capacity */
    TDM_REASON_PRECISION = 6,         /* calibrated error exceeds the threshold */
    TDM_REASON_COST = 7,              /* cheaper elsewhere once transfers are counted */
    TDM_REASON_GRANULARITY = 8,       /* moved to keep a partition whole */
    TDM_REASON_USER = 9,              /* pinned by the user's policy */
    TDM_REASON_DEVICE_FAULT = 10,     /* the device failed at run time */
    TDM_REASON_RESCUED = 11           /* a verified rewrite of the node runs there (the rescue pass) */
} tdm_reason;

#define TDM_REASON_COUNT 12

/* "OK", "OP_UNSUPPORTED", …; "UNKNOWN" for other values. */
TDM_API const char *tdm_reason_str(tdm_reason reason);

/* A tensor as a device sees it. dims has rank entries; a dimension < 0 is
 * unknown (dynamic). data is non-NULL only for constants (initializers),
 * in host memory, C order. */
typedef struct tdm_tensor_desc {
    const char *name;
    tdm_dtype dtype;
    int rank;               /* -1: unknown rank */
    const int64_t *dims;
    const void *data;       /* constant value, or NULL; bytes as in the model's file,
                             * which may lie unaligned for dtype (ONNX raw_data inside
                             * the protobuf): read its elements with memcpy */
} tdm_tensor_desc;

/* Attribute types, numbered as ONNX's AttributeProto.AttributeType. */
typedef enum tdm_attr_type {
    TDM_ATTR_FLOAT = 1,
    TDM_ATTR_INT = 2,
    TDM_ATTR_STRING = 3,
    TDM_ATTR_TENSOR = 4,
    TDM_ATTR_GRAPH = 5,
    TDM_ATTR_FLOATS = 6,
    TDM_ATTR_INTS = 7,
    TDM_ATTR_STRINGS = 8
} tdm_attr_type;

typedef struct tdm_attr_desc {
    const char *name;
    tdm_attr_type type;
    int64_t i;
    float f;
    const char *s;            /* TDM_ATTR_STRING */
    size_t n;                 /* entries of ints / floats / strings */
    const int64_t *ints;
    const float *floats;
    const char *const *strings;
    const tdm_tensor_desc *t; /* TDM_ATTR_TENSOR */
} tdm_attr_desc;

/* A node as a device sees it, with the static types and shapes tandem
 * inferred for its inputs and outputs (an omitted optional input has
 * dtype TDM_UNDEFINED and name ""). */
typedef struct tdm_node_desc {
    const char *name;
    const char *op_type;
    const char *domain;       /* "" for ai.onnx */
    int64_t opset;            /* the model's opset for the domain */
    int n_inputs;
    const tdm_tensor_desc *inputs;
    int n_outputs;
    const tdm_tensor_desc *outputs;
    int n_attrs;
    const tdm_attr_desc *attrs;
} tdm_node_desc;

/* The answer to supports(): reason TDM_REASON_OK, or why not, with a
 * sentence ("edge-npu has no LayerNormalization kernel"). */
typedef struct tdm_verdict {
    tdm_reason reason;
    char detail[256];
} tdm_verdict;

/* A tensor in a device buffer, as passed to run(). The executor allocates
 * inputs; run() allocates each output with the device's buffer_alloc, sets
 * its dtype, rank and dims, and the executor frees it with buffer_free. */
typedef struct tdm_device_tensor {
    tdm_dtype dtype;
    int rank;
    int64_t dims[16];
    void *buf;                /* device buffer (owned by the device's allocator) */
    size_t bytes;
} tdm_device_tensor;

/* A fallback the device took internally (e.g. a plugin whose driver ran a
 * node on its own CPU path); reported so that it appears in the ledger. */
typedef struct tdm_device_fallback {
    const char *node;         /* node name */
    tdm_reason reason;
    const char *detail;
} tdm_device_fallback;

/* A device's own rewrite of a node it refuses (rewrite(), since 3): a
 * small graph of nodes it supports that computes the node's outputs from
 * its inputs. Value names are the node's own input and output names (as in
 * its tdm_node_desc), the names of consts, or new intermediate names of the
 * plugin's choosing (tandem renames these and the constants, so they need
 * only be unique within the rewrite). Nodes are in the ai.onnx domain at
 * the model's opset; an omitted optional input is "". Attributes use
 * tdm_attr_desc with type TDM_ATTR_INT, _FLOAT, _INTS or _STRING. */
typedef struct tdm_rewrite_node {
    const char *op_type;
    int n_inputs;
    const char *const *inputs;
    int n_outputs;
    const char *const *outputs;
    int n_attrs;
    const tdm_attr_desc *attrs;
} tdm_rewrite_node;

typedef struct tdm_rewrite {
    const char *name;        /* the rule's name; the ledger says "plugin:<device>:<name>" */
    int approximate;         /* 1: not exact, kept only with --rescue all, at the approximation tolerance */
    int n_nodes;
    const tdm_rewrite_node *nodes;
    int n_consts;            /* constants: name, dtype (float32 or double; int64 of rank 1), dims, data (C order) */
    const tdm_tensor_desc *consts;
    void *owner;             /* the plugin's own; tandem only hands it back to rewrite_free */
} tdm_rewrite;

typedef struct tdm_device_iface {
    uint32_t api_version;     /* TDM_DEVICE_API_VERSION the device was built with */

    /* Short name used in --devices and the ledger ("vnpu:edge-npu"). */
    const char *(*name)(void *ctx);

    /* One line describing the device ("PoCL OpenCL 1.2, 4 GiB, fp16"). (optional: "") */
    const char *(*description)(void *ctx);

    /* Can this device run node? Fills out and returns out->reason. Must not
     * allocate device memory or have side effects. */
    tdm_reason (*supports)(void *ctx, const tdm_node_desc *node, tdm_verdict *out);

    /* Bytes of device memory available to tandem. (optional: unlimited) */
    uint64_t (*memory_capacity)(void *ctx);

    /* Device buffers. */
    tdm_status (*buffer_alloc)(void *ctx, size_t bytes, void **buf);
    void (*buffer_free)(void *ctx, void *buf);

    /* Host ↔ device copies of bytes. */
    tdm_status (*copy_to_device)(void *ctx, void *dst, const void *src, size_t bytes);
    tdm_status (*copy_to_host)(void *ctx, void *dst, const void *src, size_t bytes);

    /* Runs one node. inputs[i].buf is NULL for an omitted optional input.
     * On failure returns a status and may write a sentence into err
     * (err_size bytes). */
    tdm_status (*run)(void *ctx, const tdm_node_desc *node, const tdm_device_tensor *inputs,
                      tdm_device_tensor *outputs, char *err, size_t err_size);

    /* Estimated time of node in milliseconds, and whether the figure is
     * modeled rather than measured. (optional: no estimate, returns < 0) */
    double (*estimate_ms)(void *ctx, const tdm_node_desc *node, int *modeled);

    /* Estimated time of a host↔device copy of bytes, in milliseconds.
     * (optional: 0) */
    double (*copy_ms)(void *ctx, size_t bytes, int to_device, int *modeled);

    /* Fallbacks the device took inside its last run() calls since the
     * previous call of this function; *n receives the count. The array
     * stays valid until the next call. (optional: none) */
    const tdm_device_fallback *(*take_fallbacks)(void *ctx, size_t *n);

    /* Releases ctx. (optional) */
    void (*destroy)(void *ctx);

    /* ---- since version 2 ---- */

    /* The device's own time of the last run() in milliseconds: the time its
     * kernels and device-side copies took, measured by the device (e.g.
     * OpenCL profiling events), waiting for them to finish when run() only
     * enqueued them. < 0 when unknown. tandem calls it right after run(),
     * from the thread that called run(). (optional: the wall time of run()
     * is used) */
    double (*last_run_ms)(void *ctx);

    /* ---- since version 3 ---- */

    /* A replacement for node, which supports() refused: returns 1 and fills
     * *out (zeroed by tandem), 0 when the device has none, < 0 on failure
     * (out of memory). Everything *out points to belongs to the device and
     * stays valid until tandem calls rewrite_free(ctx, out) with the same
     * struct, which it does exactly once after every call that returned 1
     * (tandem copies the rewrite first). tandem then treats it as its own
     * rules (README "Rescue"): kept only when every node is supported by
     * this device and it matches the node on cpu fp32; otherwise refused
     * with a sentence in the ledger and the node falls back. Called only
     * while planning, from the planning thread. *out may point into
     * node's strings, which stay valid until rewrite_free too.
     * (optional: no rewrites) */
    int (*rewrite)(void *ctx, const tdm_node_desc *node, tdm_rewrite *out);

    /* Releases what rewrite() gave in rw. (required when rewrite is set) */
    void (*rewrite_free)(void *ctx, tdm_rewrite *rw);
} tdm_device_iface;

/* A device instance: the table plus its state. */
typedef struct tdm_device {
    const tdm_device_iface *iface;
    void *ctx;
} tdm_device;

/* A plugin exports this symbol. `args` is the text after the plugin's name
 * in --devices ("myplugin:args"), or "". It fills *out and returns TDM_OK,
 * or returns a status and writes a sentence into err. tandem refuses a
 * device whose iface->api_version is newer than its own (or 0), naming both
 * numbers; an older one is used without the members it lacks. */
typedef tdm_status (*tdm_device_plugin_init_fn)(const char *args, tdm_device *out, char *err, size_t err_size);
#define TDM_DEVICE_PLUGIN_SYMBOL "tdm_device_plugin_init"

#ifdef __cplusplus
}
#endif

#endif /* TANDEM_DEVICE_H */
