/* The virtual NPU: a parsed profile (profile.c) and the device over it
 * (vnpu.c). The profile format is described in profiles/README.md. */
#ifndef TDM_DEVICES_VNPU_VNPU_H
#define TDM_DEVICES_VNPU_VNPU_H

#include "devices/device_internal.h"

#include <pthread.h>

/* A shipped profile embedded at build time (gen/vnpu_profiles.c). */
typedef struct vnpu_embedded_profile {
    const char *name;   /* file stem: "edge-npu" */
    const char *text;   /* JSON, NUL-terminated */
    size_t len;
} vnpu_embedded_profile;
extern const vnpu_embedded_profile vnpu_embedded[];

/* A value in an attribute rule: a number, a string, or the "$channels"
 * token (dimension 1 of input 0). */
typedef struct vnpu_val {
    int is_str;
    int is_channels;
    double num;
    char *str;
} vnpu_val;

typedef struct vnpu_attr_rule {
    char *name;
    vnpu_val *one_of;       /* allowed values (every element of a list attribute) */
    size_t n_one_of;
    int has_min, has_max;
    double min, max;
    vnpu_val *dflt;         /* value checked when the attribute is absent */
    size_t n_dflt;
    int has_dflt;
} vnpu_attr_rule;

typedef struct vnpu_op_rule {
    char *op;               /* op type; "*" for the wildcard */
    uint32_t dtypes;        /* DT_BIT mask */
    int max_rank;           /* 0: no limit */
    int64_t max_dim;        /* 0: no limit */
    int64_t opset_min, opset_max; /* 0: no bound */
    vnpu_attr_rule *attrs;
    size_t n_attrs;
    uint32_t const_inputs;  /* bit i: input i must be a constant ("const_inputs") */
} vnpu_op_rule;

struct vnpu_ctx {
    char *name;             /* profile name ("edge-npu") */
    char *dev_name;         /* "vnpu:edge-npu" */
    char *label;            /* file label for messages ("edge-npu.json") */
    char *description;      /* the profile's text */
    char *summary;          /* description() line */
    tdm_dtype precision;    /* TDM_FLOAT, TDM_FLOAT16, TDM_BFLOAT16 */
    tdm_dtype storage;      /* float storage type ("storage", default: precision) */
    uint64_t memory_bytes;
    uint64_t onchip_bytes;  /* "onchip_bytes": nodes run in row tiles (tiling.c); 0: none */
    double peak_gflops;
    double launch_us;
    double mem_bw_gbps;
    double host_bw_gbps;
    double host_latency_us;
    double partition_us;    /* per-partition round trip ("partition_overhead_us") */
    int fusion;             /* "fusion": DEV_FUSION_NONE or DEV_FUSION_EPILOGUE (dev_ext.fusion) */
    int static_shapes;
    int64_t (*image_sizes)[2]; /* "image_sizes": H, W pairs; NULL: any (dev_ext) */
    size_t n_image_sizes;
    vnpu_op_rule *ops;      /* explicit rules */
    size_t n_ops;
    vnpu_op_rule *all;      /* the "*" rule, or NULL */
    char **exclude;
    size_t n_exclude;
    char **sensitive;       /* "precision_sensitive": op types */
    size_t n_sensitive;
    char **rescue;          /* "rescue": rewrite rules it wants (graph/rewrite.h) */
    size_t n_rescue;
    int has_rescue;         /* the key is present (absent: every rule) */
    int64_t unroll_loops;   /* "unroll_loops": Loops of at most this many iterations unrolled (0: none) */
    int quantized;          /* "quantized": QDQ groups run as int8 x int8 -> int32 (vnpu_qdq.c) */
    int q_round;            /* its "rounding": VNPU_ROUND_HALF_EVEN or VNPU_ROUND_HALF_AWAY */
    /* memory accounting */
    pthread_mutex_t lock;
    uint64_t used;
    dev_ext ext;
};

enum { VNPU_ROUND_HALF_EVEN = 0, VNPU_ROUND_HALF_AWAY = 1 };

/* Runs op (a node with a QDQ group, op->node->qdq) in integer arithmetic
 * on a "quantized" profile (vnpu_qdq.c); its float output is the group's
 * requantized result, dequantized exactly. */
tdm_status vnpu_qdq_run(const struct vnpu_ctx *c, op_ctx *op);

/* The row tiles node n runs in on a profile with "onchip_bytes" (tiling.c):
 * 1 when it fits on chip (or the profile has none, or sizes are unknown),
 * 0 when it cannot run there (out: MEMORY and the sentence), else T. */
int vnpu_tiles(const struct vnpu_ctx *c, const tdm_node_desc *n, tdm_verdict *out);

/* The rule for an op type (explicit, or the wildcard unless excluded), or NULL. */
const vnpu_op_rule *vnpu_rule(const struct vnpu_ctx *c, const char *op_type);

extern const tdm_device_iface vnpu_iface;

#endif
