/*
 * An example tandem device plugin, built against include/tandem/device.h
 * alone (it links nothing of libtandem).
 *
 * Device "example": Relu, Sigmoid, Add and Mul in float32, static shapes,
 * Add/Mul with equal shapes or a one-element second operand. It computes on
 * its own host buffers through the public run() entry, with a memory
 * capacity it enforces (64 MiB unless given).
 *
 * Its Sigmoid "hardware kernel" takes at most sigmoid_limit elements
 * (4096 unless given); a larger Sigmoid runs on the plugin's own host path
 * and is reported through take_fallbacks(), so that it appears in tandem's
 * ledger as an internal fallback.
 *
 * It has no HardSwish kernel, and offers tandem's rescue pass its own
 * rewrite of one (device API 3, rewrite/rewrite_free) in the ops it has:
 *   a = Relu(x * (1/6) + 0.5);  b = 1 - Relu(1 - a)   (= min(a, 1));
 *   y = x * b
 * which tandem verifies on cpu fp32 and records as rule
 * "plugin:example:hardswish-relu".
 *
 * Arguments (after "example:" in --devices; no commas, the list uses them):
 *   sigmoid_limit=N   memory=BYTES   rewrite=0..4   (separated by '+',
 *   e.g. "example:sigmoid_limit=16+memory=1048576"); rewrite=1 (the
 *   default) offers the HardSwish rewrite, 0 none; for tests, 2 a wrong one
 *   ("hardswish-noclamp": x * Relu(x/6 + 0.5), without the clamp at 1,
 *   which verification must refuse), 3 a malformed one
 *   ("hardswish-broken": reads a value nothing produces) and 4 one that is
 *   exact for x <= 1000 and wrong beyond ("hardswish-upto1000": rewrite
 *   1's y minus Relu(x - 1000), so 1000 for any x above it): the synthetic
 *   edge values (up to ±300) pass it, a run's inputs of 5000 must not.
 *
 * It speaks device API version 3: last_run_ms gives the time its kernel of
 * the last run() took (its "device timer"; the CPU's monotonic clock here)
 * (since 2), and rewrite offers the HardSwish rewrite (since 3).
 *
 * Build variants for tests: EXAMPLE_API_VERSION=N claims another device API
 * version (EXAMPLE_API_VERSION=1: a plugin of version 1, whose table still
 * carries last_run_ms and rewrite here, members tandem must then not read);
 * EXAMPLE_NO_INIT leaves out the entry symbol.
 */
#define _POSIX_C_SOURCE 200809L
#include "tandem/device.h"

#include <math.h>
#include <time.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef EXAMPLE_API_VERSION
#define EXAMPLE_API_VERSION TDM_DEVICE_API_VERSION
#endif

#if defined(__GNUC__)
#define EXAMPLE_EXPORT __attribute__((visibility("default")))
#else
#define EXAMPLE_EXPORT
#endif

typedef struct fallback_rec {
    char node[128];
    char detail[192];
} fallback_rec;

typedef struct example_ctx {
    size_t sigmoid_limit;
    uint64_t capacity;
    uint64_t used;
    pthread_mutex_t lock;
    /* fallbacks recorded by run() since the last take_fallbacks() */
    fallback_rec *pending;
    size_t n_pending, cap_pending;
    /* what the last take_fallbacks() returned */
    fallback_rec *taken;
    tdm_device_fallback *taken_view;
    size_t n_taken;
    char description[160];
    double last_ms; /* time of the last run()'s kernel, -1 before the first */
    int rewrite;    /* 0 none, 1 HardSwish, 2 a wrong HardSwish, 3 a malformed one, 4 wrong above 1000 (tests) */
} example_ctx;

/* Buffers carry their size in front for the accounting. */
typedef union buf_hdr {
    double align_d;
    void *align_p;
    long long align_ll;
    size_t bytes;
} buf_hdr;

static const char *ex_name(void *ctx)
{
    (void)ctx;
    return "example";
}

static const char *ex_description(void *ctx)
{
    return ((example_ctx *)ctx)->description;
}

static tdm_reason verdict(tdm_verdict *out, tdm_reason r, const char *msg, const char *a, const char *b)
{
    if (out) {
        out->reason = r;
        snprintf(out->detail, sizeof out->detail, msg, a, b);
    }
    return r;
}

static int elems(const tdm_tensor_desc *t, size_t *n)
{
    size_t c = 1;
    if (t->rank < 0 || t->rank > 16)
        return -1;
    for (int k = 0; k < t->rank; k++) {
        if (t->dims[k] < 0)
            return -1;
        if (t->dims[k] && c > SIZE_MAX / (size_t)t->dims[k])
            return -1;
        c *= (size_t)t->dims[k];
    }
    *n = c;
    return 0;
}

static tdm_reason ex_supports(void *ctx, const tdm_node_desc *n, tdm_verdict *out)
{
    (void)ctx;
    const char *op = n->op_type;
    int binary = strcmp(op, "Add") == 0 || strcmp(op, "Mul") == 0;
    int unary = strcmp(op, "Relu") == 0 || strcmp(op, "Sigmoid") == 0;
    if ((n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0) || (!binary && !unary))
        return verdict(out, TDM_REASON_OP_UNSUPPORTED, "example has no %s kernel%s", op, "");
    if (n->n_inputs != (binary ? 2 : 1) || n->n_outputs != 1)
        return verdict(out, TDM_REASON_OP_UNSUPPORTED, "example's %s kernel takes %s", op,
                       binary ? "two inputs and one output" : "one input and one output");
    for (int i = 0; i < n->n_inputs + n->n_outputs; i++) {
        const tdm_tensor_desc *t = i < n->n_inputs ? &n->inputs[i] : &n->outputs[i - n->n_inputs];
        if (t->dtype != TDM_FLOAT)
            return verdict(out, TDM_REASON_DTYPE_UNSUPPORTED, "example computes %s in float32 only ('%s')", op,
                           t->name ? t->name : "");
        size_t c;
        if (elems(t, &c))
            return verdict(out, TDM_REASON_SHAPE_UNSUPPORTED, "example needs static shapes ('%s' of %s)",
                           t->name ? t->name : "", op);
    }
    if (binary) {
        const tdm_tensor_desc *a = &n->inputs[0], *b = &n->inputs[1];
        size_t cb;
        int same = a->rank == b->rank;
        for (int k = 0; same && k < a->rank; k++)
            same = a->dims[k] == b->dims[k];
        if (!same && !(elems(b, &cb) == 0 && cb == 1))
            return verdict(out, TDM_REASON_SHAPE_UNSUPPORTED,
                           "example's %s needs equal shapes or a one-element second operand ('%s')", op,
                           b->name ? b->name : "");
    }
    return verdict(out, TDM_REASON_OK, "example runs %s%s", op, "");
}

static uint64_t ex_memory_capacity(void *ctx)
{
    return ((example_ctx *)ctx)->capacity;
}

static tdm_status ex_buffer_alloc(void *ctx, size_t bytes, void **buf)
{
    example_ctx *c = ctx;
    *buf = NULL;
    if (bytes > SIZE_MAX - sizeof(buf_hdr))
        return TDM_E_NOMEM;
    pthread_mutex_lock(&c->lock);
    if (bytes > c->capacity - c->used) {
        pthread_mutex_unlock(&c->lock);
        return TDM_E_DEVICE;
    }
    c->used += bytes;
    pthread_mutex_unlock(&c->lock);
    buf_hdr *h = malloc(sizeof(buf_hdr) + (bytes ? bytes : 1));
    if (!h) {
        pthread_mutex_lock(&c->lock);
        c->used -= bytes;
        pthread_mutex_unlock(&c->lock);
        return TDM_E_NOMEM;
    }
    h->bytes = bytes;
    *buf = (char *)h + sizeof(buf_hdr);
    return TDM_OK;
}

static void ex_buffer_free(void *ctx, void *buf)
{
    example_ctx *c = ctx;
    if (!buf)
        return;
    buf_hdr *h = (buf_hdr *)(void *)((char *)buf - sizeof(buf_hdr));
    pthread_mutex_lock(&c->lock);
    c->used -= h->bytes <= c->used ? h->bytes : c->used;
    pthread_mutex_unlock(&c->lock);
    free(h);
}

static tdm_status ex_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes)
        memcpy(dst, src, bytes);
    return TDM_OK;
}

static void record_fallback(example_ctx *c, const char *node, const char *detail)
{
    pthread_mutex_lock(&c->lock);
    if (c->n_pending == c->cap_pending) {
        size_t cap = c->cap_pending ? c->cap_pending * 2 : 8;
        fallback_rec *p = realloc(c->pending, cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&c->lock);
            return; /* out of memory: the record is lost, the result is not */
        }
        c->pending = p;
        c->cap_pending = cap;
    }
    fallback_rec *r = &c->pending[c->n_pending++];
    snprintf(r->node, sizeof r->node, "%s", node ? node : "");
    snprintf(r->detail, sizeof r->detail, "%s", detail);
    pthread_mutex_unlock(&c->lock);
}

static tdm_status ex_compute(void *ctx, const tdm_node_desc *node, const tdm_device_tensor *inputs,
                             tdm_device_tensor *outputs, char *err, size_t err_size)
{
    example_ctx *c = ctx;
    const tdm_device_tensor *a = &inputs[0];
    size_t n = 1;
    for (int k = 0; k < a->rank; k++)
        n *= (size_t)a->dims[k];
    if (a->dtype != TDM_FLOAT || !a->buf || a->bytes < n * sizeof(float)) {
        snprintf(err, err_size, "example: input 0 of %s is not a float32 buffer of %zu elements", node->name, n);
        return TDM_E_RUNTIME;
    }
    tdm_device_tensor *y = &outputs[0];
    y->dtype = TDM_FLOAT;
    y->rank = a->rank;
    memcpy(y->dims, a->dims, sizeof y->dims);
    y->bytes = n * sizeof(float);
    tdm_status st = ex_buffer_alloc(ctx, y->bytes, &y->buf);
    if (st) {
        snprintf(err, err_size, "example is out of memory: %zu bytes requested for %s", y->bytes, node->name);
        return st;
    }
    const float *x = a->buf;
    float *out = y->buf;
    const char *op = node->op_type;
    if (strcmp(op, "Relu") == 0) {
        for (size_t i = 0; i < n; i++)
            out[i] = x[i] > 0 ? x[i] : 0;
    } else if (strcmp(op, "Sigmoid") == 0) {
        if (n > c->sigmoid_limit) {
            char detail[192];
            snprintf(detail, sizeof detail,
                     "example's Sigmoid kernel takes at most %zu elements; %zu ran on the plugin's host path",
                     c->sigmoid_limit, n);
            record_fallback(c, node->name, detail);
        }
        for (size_t i = 0; i < n; i++)
            out[i] = 1.0f / (1.0f + expf(-x[i]));
    } else if (strcmp(op, "Add") == 0 || strcmp(op, "Mul") == 0) {
        const tdm_device_tensor *b = &inputs[1];
        size_t nb = 1;
        for (int k = 0; k < b->rank; k++)
            nb *= (size_t)b->dims[k];
        if (b->dtype != TDM_FLOAT || !b->buf || (nb != n && nb != 1) || b->bytes < nb * sizeof(float)) {
            ex_buffer_free(ctx, y->buf);
            y->buf = NULL;
            snprintf(err, err_size, "example: input 1 of %s does not match input 0", node->name);
            return TDM_E_RUNTIME;
        }
        const float *bv = b->buf;
        int add = op[0] == 'A';
        for (size_t i = 0; i < n; i++) {
            float v = bv[nb == 1 ? 0 : i];
            out[i] = add ? x[i] + v : x[i] * v;
        }
    } else {
        ex_buffer_free(ctx, y->buf);
        y->buf = NULL;
        snprintf(err, err_size, "example has no %s kernel", op);
        return TDM_E_UNSUPPORTED;
    }
    return TDM_OK;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static tdm_status ex_run(void *ctx, const tdm_node_desc *node, const tdm_device_tensor *inputs,
                         tdm_device_tensor *outputs, char *err, size_t err_size)
{
    example_ctx *c = ctx;
    double t0 = now_ms();
    tdm_status st = ex_compute(ctx, node, inputs, outputs, err, err_size);
    double ms = now_ms() - t0;
    pthread_mutex_lock(&c->lock);
    c->last_ms = st == TDM_OK ? ms : -1;
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* Since device API 2: the time of the last run()'s kernel. */
static double ex_last_run_ms(void *ctx)
{
    example_ctx *c = ctx;
    pthread_mutex_lock(&c->lock);
    double ms = c->last_ms;
    pthread_mutex_unlock(&c->lock);
    return ms;
}

static double ex_estimate_ms(void *ctx, const tdm_node_desc *node, int *modeled)
{
    (void)ctx;
    size_t n = 1;
    if (node->n_outputs < 1 || elems(&node->outputs[0], &n))
        n = 1;
    if (modeled)
        *modeled = 1;
    return 0.005 + (double)n / 1e6; /* 1 G elements/s plus 5 µs per launch */
}

static double ex_copy_ms(void *ctx, size_t bytes, int to_device, int *modeled)
{
    (void)ctx;
    (void)to_device;
    if (modeled)
        *modeled = 1;
    return 0.002 + (double)bytes / 8e6; /* 8 GB/s */
}

static const tdm_device_fallback *ex_take_fallbacks(void *ctx, size_t *n)
{
    example_ctx *c = ctx;
    pthread_mutex_lock(&c->lock);
    free(c->taken);
    free(c->taken_view);
    c->taken = c->pending;
    c->n_taken = c->n_pending;
    c->pending = NULL;
    c->n_pending = c->cap_pending = 0;
    c->taken_view = c->n_taken ? calloc(c->n_taken, sizeof *c->taken_view) : NULL;
    if (c->n_taken && !c->taken_view)
        c->n_taken = 0;
    for (size_t i = 0; i < c->n_taken; i++) {
        c->taken_view[i].node = c->taken[i].node;
        c->taken_view[i].reason = TDM_REASON_SHAPE_UNSUPPORTED;
        c->taken_view[i].detail = c->taken[i].detail;
    }
    *n = c->n_taken;
    const tdm_device_fallback *v = c->taken_view;
    pthread_mutex_unlock(&c->lock);
    return v;
}

static void ex_destroy(void *ctx)
{
    example_ctx *c = ctx;
    if (!c)
        return;
    pthread_mutex_destroy(&c->lock);
    free(c->pending);
    free(c->taken);
    free(c->taken_view);
    free(c);
}

/* ---- since device API 3: the HardSwish rewrite ---- */

enum { EX_RW_NODES = 13, EX_RW_CONSTS = 5 };

/* One block per rewrite, freed by ex_rewrite_free (tdm_rewrite.owner). */
typedef struct ex_rw_block {
    tdm_rewrite_node nodes[EX_RW_NODES];
    const char *io[EX_RW_NODES][3];
    tdm_tensor_desc consts[EX_RW_CONSTS];
    float vals[EX_RW_CONSTS];
    char *x, *y; /* the node's input and output names, copied */
} ex_rw_block;

static const int64_t ex_one_dim[1] = {1};

static char *ex_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static void ex_node(ex_rw_block *w, int k, const char *op, const char *a, const char *b, const char *y)
{
    w->io[k][0] = a;
    w->io[k][1] = b;
    w->io[k][2] = y;
    w->nodes[k].op_type = op;
    w->nodes[k].n_inputs = b ? 2 : 1;
    w->nodes[k].inputs = w->io[k];
    w->nodes[k].n_outputs = 1;
    w->nodes[k].outputs = &w->io[k][2];
}

static int ex_rewrite(void *ctx, const tdm_node_desc *n, tdm_rewrite *out)
{
    example_ctx *c = ctx;
    static const char *const cname[EX_RW_CONSTS] = {"sixth", "half", "minus_one", "one", "minus_thousand"};
    const float cval[EX_RW_CONSTS] = {1.0f / 6.0f, 0.5f, -1.0f, 1.0f, -1000.0f};
    if (!c->rewrite || strcmp(n->op_type, "HardSwish") != 0 || n->n_inputs != 1 || n->n_outputs != 1 ||
        n->inputs[0].dtype != TDM_FLOAT || !n->inputs[0].name || !n->outputs[0].name)
        return 0;
    ex_rw_block *w = calloc(1, sizeof *w);
    if (!w || !(w->x = ex_strdup(n->inputs[0].name)) || !(w->y = ex_strdup(n->outputs[0].name))) {
        if (w)
            free(w->x);
        free(w);
        return -1;
    }
    for (int k = 0; k < EX_RW_CONSTS; k++) {
        w->vals[k] = cval[k];
        w->consts[k].name = cname[k];
        w->consts[k].dtype = TDM_FLOAT;
        w->consts[k].rank = 1;
        w->consts[k].dims = ex_one_dim;
        w->consts[k].data = &w->vals[k];
    }
    int k = 0;
    ex_node(w, k++, "Mul", w->x, "sixth", "t1");
    ex_node(w, k++, "Add", "t1", "half", "t2");
    if (c->rewrite == 2) { /* wrong on purpose: no clamp at 1 */
        ex_node(w, k++, "Relu", "t2", NULL, "a");
        ex_node(w, k++, "Mul", w->x, "a", w->y);
    } else if (c->rewrite == 3) { /* malformed on purpose: reads a value nothing makes */
        ex_node(w, k++, "Relu", "t2", NULL, "a");
        ex_node(w, k++, "Mul", "nowhere", "a", w->y);
    } else {
        ex_node(w, k++, "Relu", "t2", NULL, "a");
        ex_node(w, k++, "Mul", "a", "minus_one", "t4");
        ex_node(w, k++, "Add", "t4", "one", "t5");
        ex_node(w, k++, "Relu", "t5", NULL, "t6");
        ex_node(w, k++, "Mul", "t6", "minus_one", "t7");
        ex_node(w, k++, "Add", "t7", "one", "b");
        if (c->rewrite == 4) { /* wrong on purpose above 1000: y - Relu(x - 1000) */
            ex_node(w, k++, "Mul", w->x, "b", "t8");
            ex_node(w, k++, "Add", w->x, "minus_thousand", "t9");
            ex_node(w, k++, "Relu", "t9", NULL, "t10");
            ex_node(w, k++, "Mul", "t10", "minus_one", "t11");
            ex_node(w, k++, "Add", "t8", "t11", w->y);
        } else {
            ex_node(w, k++, "Mul", w->x, "b", w->y);
        }
    }
    out->name = c->rewrite == 2   ? "hardswish-noclamp"
                : c->rewrite == 3 ? "hardswish-broken"
                : c->rewrite == 4 ? "hardswish-upto1000"
                                  : "hardswish-relu";
    out->approximate = 0;
    out->n_nodes = k;
    out->nodes = w->nodes;
    out->n_consts = c->rewrite == 4 ? EX_RW_CONSTS : EX_RW_CONSTS - 1;
    out->consts = w->consts;
    out->owner = w;
    return 1;
}

static void ex_rewrite_free(void *ctx, tdm_rewrite *rw)
{
    (void)ctx;
    ex_rw_block *w = rw ? rw->owner : NULL;
    if (!w)
        return;
    free(w->x);
    free(w->y);
    free(w);
    rw->owner = NULL;
}

static const tdm_device_iface example_iface = {
    .api_version = EXAMPLE_API_VERSION,
    .name = ex_name,
    .description = ex_description,
    .supports = ex_supports,
    .memory_capacity = ex_memory_capacity,
    .buffer_alloc = ex_buffer_alloc,
    .buffer_free = ex_buffer_free,
    .copy_to_device = ex_copy,
    .copy_to_host = ex_copy,
    .run = ex_run,
    .estimate_ms = ex_estimate_ms,
    .copy_ms = ex_copy_ms,
    .take_fallbacks = ex_take_fallbacks,
    .destroy = ex_destroy,
    .last_run_ms = ex_last_run_ms,
    .rewrite = ex_rewrite,
    .rewrite_free = ex_rewrite_free,
};


/* Parses "key=N" options separated by '+'. */
static int parse_args(example_ctx *c, const char *args, char *err, size_t err_size)
{
    const char *s = args;
    while (s && *s) {
        const char *end = strchr(s, '+');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        char opt[64];
        if (len >= sizeof opt) {
            snprintf(err, err_size, "example: option '%.*s…' is too long", 20, s);
            return -1;
        }
        memcpy(opt, s, len);
        opt[len] = 0;
        char *eq = strchr(opt, '=');
        char *stop = NULL;
        unsigned long long v = eq ? strtoull(eq + 1, &stop, 10) : 0;
        if (!eq || !eq[1] || *stop || eq[1] == '-') {
            snprintf(err, err_size, "example: option '%s' must be KEY=NUMBER (sigmoid_limit, memory, rewrite)", opt);
            return -1;
        }
        *eq = 0;
        if (strcmp(opt, "sigmoid_limit") == 0)
            c->sigmoid_limit = (size_t)v;
        else if (strcmp(opt, "memory") == 0)
            c->capacity = v;
        else if (strcmp(opt, "rewrite") == 0 && v <= 4)
            c->rewrite = (int)v;
        else {
            snprintf(err, err_size, "example: unknown option '%s' (known: sigmoid_limit, memory, rewrite=0..4)", opt);
            return -1;
        }
        s = end ? end + 1 : NULL;
    }
    return 0;
}

#ifdef EXAMPLE_NO_INIT
#define EXAMPLE_INIT example_init_without_the_entry_symbol
#else
#define EXAMPLE_INIT tdm_device_plugin_init
#endif

EXAMPLE_EXPORT tdm_status EXAMPLE_INIT(const char *args, tdm_device *out, char *err, size_t err_size);

EXAMPLE_EXPORT tdm_status EXAMPLE_INIT(const char *args, tdm_device *out, char *err, size_t err_size)
{
    example_ctx *c = calloc(1, sizeof *c);
    out->iface = NULL;
    out->ctx = NULL;
    if (!c) {
        snprintf(err, err_size, "example: out of memory");
        return TDM_E_NOMEM;
    }
    c->sigmoid_limit = 4096;
    c->capacity = (uint64_t)64 << 20;
    c->rewrite = 1;
    if (parse_args(c, args, err, err_size)) {
        free(c);
        return TDM_E_USAGE;
    }
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        snprintf(err, err_size, "example: cannot create a lock");
        return TDM_E_DEVICE;
    }
    snprintf(c->description, sizeof c->description,
             "example plugin: Relu, Sigmoid, Add, Mul in float32 (Sigmoid on device up to %zu elements)",
             c->sigmoid_limit);
    c->last_ms = -1;
    out->iface = &example_iface;
    out->ctx = c;
    return TDM_OK;
}
