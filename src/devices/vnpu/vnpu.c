/* The virtual NPU over a parsed profile: supports() from the profile's op
 * list, accounted memory, modeled times, and real numerics (ext.run_host
 * computes with the CPU kernel on inputs rounded to the profile precision
 * and rounds float outputs, as an NPU computing in fp16/bf16 would). */
#include "devices/vnpu/vnpu.h"
#include "devices/vnpu/vnpu_round.h"
#include "core/file.h"
#include "core/mem.h"
#include "graph/qdq.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* ---- supports ---- */

static int present(const tdm_tensor_desc *t) { return t->dtype != TDM_UNDEFINED; }

static const char *tname(const tdm_tensor_desc *t) { return t->name ? t->name : ""; }

static tdm_reason check_dtypes(const struct vnpu_ctx *c, const vnpu_op_rule *r, const tdm_node_desc *n, int op,
                               tdm_verdict *out)
{
    /* input 0, every float input (data, not indices or shapes), every output */
    for (int i = 0; i < n->n_inputs + n->n_outputs; i++) {
        int is_in = i < n->n_inputs;
        const tdm_tensor_desc *t = is_in ? &n->inputs[i] : &n->outputs[i - n->n_inputs];
        if (!present(t) || (int)t->dtype < 0 || (int)t->dtype >= 32)
            continue;
        if (is_in && i > 0 && !dtype_is_float(t->dtype))
            continue;
        if (!(r->dtypes & DT_BIT(t->dtype)))
            return dev_verdict(out, TDM_REASON_DTYPE_UNSUPPORTED, "%s has no %s kernel for %s (%s '%s')", c->name,
                               tdm_dtype_name(t->dtype), n->op_type, is_in ? "input" : "output", tname(t));
    }
    if (n->n_inputs > 0 && present(&n->inputs[0]) && (int)n->inputs[0].dtype < 32 &&
        !(op_table[op].dtypes & DT_BIT(n->inputs[0].dtype)))
        return dev_verdict(out, TDM_REASON_DTYPE_UNSUPPORTED,
                           "%s has no %s kernel for %s (input '%s'): tandem's kernels, which it computes with, lack "
                           "that type",
                           c->name, tdm_dtype_name(n->inputs[0].dtype), n->op_type, tname(&n->inputs[0]));
    return TDM_REASON_OK;
}

static tdm_reason check_shapes(const struct vnpu_ctx *c, const vnpu_op_rule *r, const tdm_node_desc *n,
                               tdm_verdict *out)
{
    char shape[128];
    for (int i = 0; i < n->n_inputs + n->n_outputs; i++) {
        int is_in = i < n->n_inputs;
        const tdm_tensor_desc *t = is_in ? &n->inputs[i] : &n->outputs[i - n->n_inputs];
        const char *what = is_in ? "input" : "output";
        if (!present(t))
            continue;
        if (t->rank < 0) {
            if (c->static_shapes)
                return dev_verdict(out, TDM_REASON_SHAPE_UNSUPPORTED,
                                   "%s takes static shapes only; the rank of %s '%s' of %s is unknown", c->name, what,
                                   tname(t), n->op_type);
            continue;
        }
        if (r->max_rank && t->rank > r->max_rank)
            return dev_verdict(out, TDM_REASON_SHAPE_UNSUPPORTED, "%s runs %s up to rank %d; %s '%s' has rank %d",
                               c->name, n->op_type, r->max_rank, what, tname(t), t->rank);
        for (int k = 0; k < t->rank; k++) {
            int64_t d = t->dims ? t->dims[k] : -1;
            if (d < 0 && c->static_shapes)
                return dev_verdict(out, TDM_REASON_SHAPE_UNSUPPORTED,
                                   "%s takes static shapes only; %s '%s' of %s has shape %s", c->name, what, tname(t),
                                   n->op_type, dev_shape_str(t, shape, sizeof shape));
            if (r->max_dim && d > r->max_dim)
                return dev_verdict(out, TDM_REASON_SHAPE_UNSUPPORTED,
                                   "%s runs %s with dimensions up to %lld; dimension %d of %s '%s' is %lld", c->name,
                                   n->op_type, (long long)r->max_dim, k, what, tname(t), (long long)d);
        }
    }
    return TDM_REASON_OK;
}

/* One attribute element, as a number or a string. */
typedef struct aval {
    int is_str;
    double num;
    const char *str;
} aval;

static int val_matches(const vnpu_val *allowed, const aval *v, int64_t channels)
{
    if (allowed->is_channels)
        return !v->is_str && channels >= 0 && v->num == (double)channels;
    if (allowed->is_str)
        return v->is_str && strcmp(allowed->str, v->str) == 0;
    return !v->is_str && allowed->num == v->num;
}

static void append(char *buf, size_t size, size_t *used, const char *fmt, const char *s, double d)
{
    if (*used >= size)
        return;
    int w = s ? snprintf(buf + *used, size - *used, fmt, s) : snprintf(buf + *used, size - *used, fmt, d);
    if (w > 0)
        *used += (size_t)w;
}

/* "{1, $channels (32)}" / "[0, 4]" for a rule. */
static const char *rule_str(const vnpu_attr_rule *ar, int64_t channels, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = 0;
    if (ar->n_one_of) {
        append(buf, size, &used, "%s", "{", 0);
        for (size_t k = 0; k < ar->n_one_of; k++) {
            const vnpu_val *a = &ar->one_of[k];
            if (k)
                append(buf, size, &used, "%s", ", ", 0);
            if (a->is_channels) {
                append(buf, size, &used, "%s", "the input channel count", 0);
                if (channels >= 0)
                    append(buf, size, &used, " (%g)", NULL, (double)channels);
            } else if (a->is_str) {
                append(buf, size, &used, "\"%s\"", a->str, 0);
            } else {
                append(buf, size, &used, "%g", NULL, a->num);
            }
        }
        append(buf, size, &used, "%s", "}", 0);
    }
    if (ar->has_min || ar->has_max) {
        if (ar->n_one_of)
            append(buf, size, &used, "%s", " and ", 0);
        if (ar->has_min && ar->has_max) {
            append(buf, size, &used, "[%g, ", NULL, ar->min);
            append(buf, size, &used, "%g]", NULL, ar->max);
        } else if (ar->has_min) {
            append(buf, size, &used, ">= %g", NULL, ar->min);
        } else {
            append(buf, size, &used, "<= %g", NULL, ar->max);
        }
    }
    return buf;
}

/* The attribute's value (or the rule's default) as "2", "\"linear\"" or "[2, 2]". */
static void attr_value_str(const tdm_attr_desc *a, const vnpu_attr_rule *ar, size_t count, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = 0;
    int list = a ? (a->type == TDM_ATTR_INTS || a->type == TDM_ATTR_FLOATS || a->type == TDM_ATTR_STRINGS)
                 : ar->n_dflt != 1;
    if (list)
        append(buf, size, &used, "%s", "[", 0);
    for (size_t i = 0; i < count && i < 16; i++) {
        if (i)
            append(buf, size, &used, "%s", ", ", 0);
        if (!a) {
            if (ar->dflt[i].is_str)
                append(buf, size, &used, "\"%s\"", ar->dflt[i].str, 0);
            else
                append(buf, size, &used, "%g", NULL, ar->dflt[i].num);
        } else if (a->type == TDM_ATTR_INT) {
            append(buf, size, &used, "%g", NULL, (double)a->i);
        } else if (a->type == TDM_ATTR_FLOAT) {
            append(buf, size, &used, "%g", NULL, a->f);
        } else if (a->type == TDM_ATTR_STRING) {
            append(buf, size, &used, "\"%s\"", a->s ? a->s : "", 0);
        } else if (a->type == TDM_ATTR_INTS) {
            append(buf, size, &used, "%g", NULL, a->ints ? (double)a->ints[i] : 0);
        } else if (a->type == TDM_ATTR_FLOATS) {
            append(buf, size, &used, "%g", NULL, a->floats ? a->floats[i] : 0);
        } else {
            append(buf, size, &used, "\"%s\"", a->strings && a->strings[i] ? a->strings[i] : "", 0);
        }
    }
    if (count > 16)
        append(buf, size, &used, "%s", ", …", 0);
    if (list)
        append(buf, size, &used, "%s", "]", 0);
}

static tdm_reason check_attrs(const struct vnpu_ctx *c, const vnpu_op_rule *r, const tdm_node_desc *n,
                              tdm_verdict *out)
{
    int64_t channels = -1;
    if (n->n_inputs > 0 && present(&n->inputs[0]) && n->inputs[0].rank >= 2 && n->inputs[0].dims)
        channels = n->inputs[0].dims[1];
    for (size_t k = 0; k < r->n_attrs; k++) {
        const vnpu_attr_rule *ar = &r->attrs[k];
        const tdm_attr_desc *a = NULL;
        for (int j = 0; j < n->n_attrs; j++)
            if (n->attrs[j].name && strcmp(n->attrs[j].name, ar->name) == 0)
                a = &n->attrs[j];
        size_t count = 0;
        if (a) {
            switch (a->type) {
            case TDM_ATTR_INT: case TDM_ATTR_FLOAT: case TDM_ATTR_STRING: count = 1; break;
            case TDM_ATTR_INTS: case TDM_ATTR_FLOATS: case TDM_ATTR_STRINGS: count = a->n; break;
            case TDM_ATTR_TENSOR: case TDM_ATTR_GRAPH: count = 0; break;
            }
            if (a->type == TDM_ATTR_TENSOR || a->type == TDM_ATTR_GRAPH || (int)a->type > TDM_ATTR_STRINGS)
                return dev_verdict(out, TDM_REASON_ATTR_UNSUPPORTED,
                                   "%s limits attribute %s of %s, but the node's value is not a number or string",
                                   c->name, ar->name, n->op_type);
        } else if (ar->has_dflt) {
            count = ar->n_dflt;
        } else {
            continue;
        }
        for (size_t i = 0; i < count; i++) {
            aval v = {0, 0, NULL};
            if (!a) {
                v.is_str = ar->dflt[i].is_str;
                v.num = ar->dflt[i].num;
                v.str = ar->dflt[i].str;
            } else if (a->type == TDM_ATTR_INT) {
                v.num = (double)a->i;
            } else if (a->type == TDM_ATTR_FLOAT) {
                v.num = a->f;
            } else if (a->type == TDM_ATTR_STRING) {
                v.is_str = 1;
                v.str = a->s ? a->s : "";
            } else if (a->type == TDM_ATTR_INTS) {
                v.num = a->ints ? (double)a->ints[i] : 0;
            } else if (a->type == TDM_ATTR_FLOATS) {
                v.num = a->floats ? a->floats[i] : 0;
            } else {
                v.is_str = 1;
                v.str = a->strings && a->strings[i] ? a->strings[i] : "";
            }
            int ok = 1;
            if (ar->n_one_of) {
                ok = 0;
                for (size_t m = 0; m < ar->n_one_of && !ok; m++)
                    ok = val_matches(&ar->one_of[m], &v, channels);
            }
            if (ok && (ar->has_min || ar->has_max))
                ok = !v.is_str && (!ar->has_min || v.num >= ar->min) && (!ar->has_max || v.num <= ar->max);
            if (!ok) {
                char allowed[160], value[96];
                attr_value_str(a, ar, count, value, sizeof value);
                return dev_verdict(out, TDM_REASON_ATTR_UNSUPPORTED, "%s runs %s only with %s in %s; this node has %s%s",
                                   c->name, n->op_type, ar->name, rule_str(ar, channels, allowed, sizeof allowed),
                                   value, a ? "" : " (the default)");
            }
        }
    }
    return TDM_REASON_OK;
}

static tdm_reason vnpu_supports(void *ctx, const tdm_node_desc *n, tdm_verdict *out)
{
    const struct vnpu_ctx *c = ctx;
    tdm_err e;
    int op, ver;
    err_clear(&e);
    if (op_resolve(&e, n->domain, n->op_type, n->opset, &op, &ver) != TDM_OK)
        return dev_verdict(out, TDM_REASON_OP_UNSUPPORTED, "%s has no %s kernel (%s)", c->name, n->op_type, e.msg);
    const vnpu_op_rule *r = vnpu_rule(c, n->op_type);
    if (!r)
        return dev_verdict(out, TDM_REASON_OP_UNSUPPORTED, "%s has no %s kernel", c->name, n->op_type);
    if (r->opset_min && n->opset < r->opset_min)
        return dev_verdict(out, TDM_REASON_OP_UNSUPPORTED, "%s runs %s from opset %lld; the model uses opset %lld",
                           c->name, n->op_type, (long long)r->opset_min, (long long)n->opset);
    if (r->opset_max && n->opset > r->opset_max)
        return dev_verdict(out, TDM_REASON_OP_UNSUPPORTED, "%s runs %s up to opset %lld; the model uses opset %lld",
                           c->name, n->op_type, (long long)r->opset_max, (long long)n->opset);
    tdm_reason why;
    if ((why = check_dtypes(c, r, n, op, out)) != TDM_REASON_OK)
        return why;
    if ((why = check_shapes(c, r, n, out)) != TDM_REASON_OK)
        return why;
    if ((why = check_attrs(c, r, n, out)) != TDM_REASON_OK)
        return why;
    for (int i = 0; i < n->n_inputs && i < 32; i++)
        if ((r->const_inputs >> i & 1u) && present(&n->inputs[i]) && !n->inputs[i].data)
            return dev_verdict(out, TDM_REASON_ATTR_UNSUPPORTED,
                               "%s runs %s only with input %d constant; '%s' is computed at run time", c->name,
                               n->op_type, i, tname(&n->inputs[i]));
    int tiles = vnpu_tiles(c, n, out);
    if (!tiles)
        return TDM_REASON_MEMORY;
    if (tiles > 1)
        return dev_verdict(out, TDM_REASON_OK, "%s runs %s in %d row tiles (its working set is larger than the %llu bytes on chip)",
                           c->name, n->op_type, tiles, (unsigned long long)c->onchip_bytes);
    return dev_verdict(out, TDM_REASON_OK, "%s runs %s", c->name, n->op_type);
}

/* ---- iface ---- */

static const char *vnpu_name(void *ctx) { return ((struct vnpu_ctx *)ctx)->dev_name; }
static const char *vnpu_description(void *ctx) { return ((struct vnpu_ctx *)ctx)->summary; }
static uint64_t vnpu_memory_capacity(void *ctx) { return ((struct vnpu_ctx *)ctx)->memory_bytes; }

static tdm_status vnpu_reserve(void *ctx, size_t bytes, tdm_err *e)
{
    struct vnpu_ctx *c = ctx;
    pthread_mutex_lock(&c->lock);
    uint64_t avail = c->memory_bytes - c->used;
    if ((uint64_t)bytes > avail) {
        pthread_mutex_unlock(&c->lock);
        return err_set(e, TDM_E_DEVICE, "%s is out of memory: %llu bytes requested, %llu free", c->dev_name,
                       (unsigned long long)bytes, (unsigned long long)avail);
    }
    c->used += bytes;
    pthread_mutex_unlock(&c->lock);
    return TDM_OK;
}

static void vnpu_release(void *ctx, size_t bytes)
{
    struct vnpu_ctx *c = ctx;
    pthread_mutex_lock(&c->lock);
    c->used = (uint64_t)bytes > c->used ? 0 : c->used - bytes;
    pthread_mutex_unlock(&c->lock);
}

/* A buffer is [header][bytes]; the header keeps its size for the accounting. */
typedef union buf_hdr {
    max_align_t align;
    size_t bytes;
} buf_hdr;

static tdm_status vnpu_buffer_alloc(void *ctx, size_t bytes, void **buf)
{
    size_t total;
    *buf = NULL;
    if (mem_add(bytes, sizeof(buf_hdr), &total))
        return TDM_E_NOMEM;
    if (vnpu_reserve(ctx, bytes, NULL) != TDM_OK)
        return TDM_E_DEVICE;
    buf_hdr *h = mem_alloc(total);
    if (!h) {
        vnpu_release(ctx, bytes);
        return TDM_E_NOMEM;
    }
    h->bytes = bytes;
    *buf = (char *)h + sizeof(buf_hdr);
    return TDM_OK;
}

static void vnpu_buffer_free(void *ctx, void *buf)
{
    if (!buf)
        return;
    buf_hdr *h = (buf_hdr *)(void *)((char *)buf - sizeof(buf_hdr));
    vnpu_release(ctx, h->bytes);
    mem_free(h);
}

static tdm_status vnpu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes)
        memcpy(dst, src, bytes);
    return TDM_OK;
}

static tdm_status vnpu_run(void *ctx, const tdm_node_desc *node, const tdm_device_tensor *inputs,
                           tdm_device_tensor *outputs, char *err, size_t err_size)
{
    (void)inputs;
    (void)outputs;
    if (err && err_size)
        snprintf(err, err_size, "%s runs %s through tandem's host path (run_host), not the device run() entry",
                 ((struct vnpu_ctx *)ctx)->dev_name, node && node->op_type ? node->op_type : "nodes");
    return TDM_E_UNSUPPORTED;
}

static double vnpu_estimate_ms(void *ctx, const tdm_node_desc *node, int *modeled)
{
    const struct vnpu_ctx *c = ctx;
    if (modeled)
        *modeled = 1;
    /* a tiled node: one dispatch per tile; its bytes cross memory_bandwidth as before */
    int tiles = vnpu_tiles(c, node, NULL);
    return dev_node_flops(node) / (c->peak_gflops * 1e6) + (tiles > 1 ? tiles : 1) * c->launch_us / 1000.0 +
           dev_node_bytes(node) / (c->mem_bw_gbps * 1e6);
}

/* A node its compiler fuses into its producer's launch ("fusion":
 * "epilogue"): its arithmetic, and the operands it reads from memory
 * (a residual), but no launch and no round trip of the chain's values; a
 * BatchNormalization folded into its Conv's weights computes nothing. */
static double vnpu_estimate_fused_away_ms(void *ctx, const tdm_node_desc *node, uint32_t mem_inputs, int *modeled)
{
    const struct vnpu_ctx *c = ctx;
    if (modeled)
        *modeled = 1;
    if (node->op_type && strcmp(node->op_type, "BatchNormalization") == 0)
        return 0;
    return dev_node_flops(node) / (c->peak_gflops * 1e6) + dev_inputs_bytes(node, mem_inputs) / (c->mem_bw_gbps * 1e6);
}

static double vnpu_copy_ms(void *ctx, size_t bytes, int to_device, int *modeled)
{
    const struct vnpu_ctx *c = ctx;
    (void)to_device;
    if (modeled)
        *modeled = 1;
    return c->host_latency_us / 1000.0 + (double)bytes / (c->host_bw_gbps * 1e6);
}

static void vnpu_destroy(void *ctx) { vnpu_ctx_free(ctx); }

const tdm_device_iface vnpu_iface = {
    .api_version = TDM_DEVICE_API_VERSION,
    .name = vnpu_name,
    .description = vnpu_description,
    .supports = vnpu_supports,
    .memory_capacity = vnpu_memory_capacity,
    .buffer_alloc = vnpu_buffer_alloc,
    .buffer_free = vnpu_buffer_free,
    .copy_to_device = vnpu_copy,
    .copy_to_host = vnpu_copy,
    .run = vnpu_run,
    .estimate_ms = vnpu_estimate_ms,
    .copy_ms = vnpu_copy_ms,
    .take_fallbacks = NULL,
    .destroy = vnpu_destroy,
};

/* ---- numerics ---- */

static float round_f(float x, tdm_dtype prec)
{
    return prec == TDM_FLOAT16 ? fp16_to_f32(f32_to_fp16(x)) : bf16_to_f32(f32_to_bf16(x));
}

void vnpu_round_f32_scalar(float *dst, const float *src, size_t n, tdm_dtype prec)
{
    if (prec != TDM_FLOAT16 && prec != TDM_BFLOAT16) {
        if (dst != src && n)
            memmove(dst, src, n * sizeof *dst);
        return;
    }
    for (size_t i = 0; i < n; i++)
        dst[i] = round_f(src[i], prec);
}

void vnpu_round_f32(float *dst, const float *src, size_t n, tdm_dtype prec)
{
    size_t done = 0;
    if ((prec == TDM_FLOAT16 || prec == TDM_BFLOAT16) && vnpu_round_avx2_usable())
        done = vnpu_round_f32_avx2(dst, src, n, prec == TDM_BFLOAT16);
    vnpu_round_f32_scalar(dst + done, src + done, n - done, prec);
}

static uint32_t bits_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

size_t vnpu_round_same_scalar(const float *src, size_t n, tdm_dtype prec)
{
    if (prec != TDM_FLOAT16 && prec != TDM_BFLOAT16)
        return n;
    for (size_t i = 0; i < n; i++)
        if (bits_of(round_f(src[i], prec)) != bits_of(src[i]))
            return i;
    return n;
}

size_t vnpu_round_same(const float *src, size_t n, tdm_dtype prec)
{
    size_t done = 0;
    if ((prec == TDM_FLOAT16 || prec == TDM_BFLOAT16) && vnpu_round_avx2_usable())
        done = vnpu_round_same_avx2(src, n, prec == TDM_BFLOAT16);
    return done + vnpu_round_same_scalar(src + done, n - done, prec);
}

/* Rounds a float tensor's elements to prec in place (other types unchanged). */
static void round_tensor(tdm_tensor *t, tdm_dtype prec)
{
    if (!t || t->kind != TDM_KIND_TENSOR || !t->data || prec == TDM_FLOAT)
        return;
    size_t n = t->count;
    switch (t->dtype) {
    case TDM_FLOAT:
        vnpu_round_f32(t->data, t->data, n, prec);
        break;
    case TDM_DOUBLE: {
        double *p = t->data;
        for (size_t i = 0; i < n; i++)
            p[i] = (double)round_f((float)p[i], prec);
        break;
    }
    case TDM_FLOAT16:
        if (prec == TDM_BFLOAT16) {
            uint16_t *p = t->data;
            for (size_t i = 0; i < n; i++)
                p[i] = f32_to_fp16(round_f(fp16_to_f32(p[i]), prec));
        }
        break;
    case TDM_BFLOAT16:
        if (prec == TDM_FLOAT16) {
            uint16_t *p = t->data;
            for (size_t i = 0; i < n; i++)
                p[i] = f32_to_bf16(round_f(bf16_to_f32(p[i]), prec));
        }
        break;
    default:
        break;
    }
}

static int needs_rounding(const tdm_tensor *t, tdm_dtype prec)
{
    if (!t || t->kind != TDM_KIND_TENSOR || !t->count)
        return 0;
    return t->dtype == TDM_FLOAT || t->dtype == TDM_DOUBLE || (t->dtype == TDM_FLOAT16 && prec == TDM_BFLOAT16) ||
           (t->dtype == TDM_BFLOAT16 && prec == TDM_FLOAT16);
}

/* A constant float input at the profile's precision, kept on the constant
 * (tensor_aux) from its first use: a rounded copy, or a view of the
 * constant when rounding changes none of its elements. Neither is marked
 * immutable: the kernel sees a computed input, as it did when the copy
 * was made on every call (a constant operand can take another kernel path,
 * e.g. a GEMM with packed weights instead of dot products, which sums in
 * another order). */
typedef struct rounded_aux {
    tensor_aux h;
    tdm_tensor *t;
} rounded_aux;

static void rounded_free(tensor_aux *a)
{
    tdm_tensor_destroy(((rounded_aux *)a)->t);
    mem_free(a);
}

#define ROUNDED_KEY 0x766e7075726f756eULL /* "vnpuroun", + the precision */

/* x (TDM_FLOAT) at prec: x itself when rounding changes none of its
 * elements, else a new rounded copy in *copy. */
static tdm_status round_f32_input(tdm_err *e, const tdm_tensor *x, tdm_dtype prec, tdm_tensor **copy)
{
    *copy = NULL;
    void *tmp;
    const float *s = tensor_read_aligned(x, &tmp); /* a weight misaligned in the file: a temporary copy */
    if (!s)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    size_t same = vnpu_round_same(s, x->count, prec);
    tdm_status st = same == x->count ? TDM_OK : tensor_new(e, TDM_FLOAT, x->rank, x->dims, copy);
    if (!st && *copy) {
        float *d = (*copy)->data;
        memcpy(d, s, same * sizeof *d);
        vnpu_round_f32(d + same, s + same, x->count - same, prec);
        (*copy)->held = prec;
    }
    mem_free(tmp);
    return st;
}

/* Input i of op at prec in *use: a computed input itself when it is held
 * at prec already (the output of a node on this device), a rounded copy in
 * *owned for the caller to destroy when not; a constant's form kept on it
 * (rounded_aux), except a constant in a file mapping, rounded afresh on
 * each call (below). Numerically the same as
 * rounding it on every call: rounding is a pure function of the bits. */
static tdm_status round_input(op_ctx *op, int i, tdm_dtype prec, const tdm_tensor **use, tdm_tensor **owned)
{
    const tdm_tensor *x = op->in[i];
    *use = x;
    *owned = NULL;
    if (!needs_rounding(x, prec) || (x->dtype == TDM_FLOAT && x->held == prec))
        return TDM_OK;
    if (x->dtype != TDM_FLOAT) {
        tdm_status st = tensor_clone(op->err, x, owned);
        if (st)
            return st;
        round_tensor(*owned, prec);
        *use = *owned;
        return TDM_OK;
    }
    if (!op_input_const(op, i) || tensor_in_file(x)) {
        /* a computed value, or a weight in a file mapping: rounded afresh
         * each run into a copy that lives for this node only, so that the
         * device's form is not a second resident copy of the file beside
         * the forms the cpu reference packs (issue 20 item 5); the
         * mapping's pages are dropped after the copy is made */
        tdm_status st = round_f32_input(op->err, x, prec, owned);
        if (*owned) {
            *use = *owned;
            tensor_drop_pages(x); /* nothing unless in a file mapping */
        }
        return st;
    }
    uint64_t key = ROUNDED_KEY + (uint64_t)prec;
    rounded_aux *a = (rounded_aux *)tensor_aux_find(x, key);
    if (!a) {
        if (!(a = mem_calloc(1, sizeof *a)))
            return err_set(op->err, TDM_E_NOMEM, "out of memory");
        a->h.key = key;
        a->h.free_fn = rounded_free;
        tdm_status st = round_f32_input(op->err, x, prec, &a->t);
        if (!st && !a->t && (st = tensor_view(op->err, x, &a->t)) == TDM_OK)
            a->t->immutable = 0;
        if (st) {
            mem_free(a);
            return st;
        }
        a = (rounded_aux *)tensor_aux_attach(x, &a->h);
    }
    *use = a->t;
    return TDM_OK;
}

/* Ops whose float outputs hold only elements of their float inputs (moved,
 * selected or compared), zeros or infinities: with the inputs at the
 * profile's precision, rounding the outputs changes no bit, so it is
 * skipped (devices.vnpu.held checks it on every model of the set). An op
 * that writes a value of an attribute (Pad's, ConstantOfShape's) or
 * computes one is not listed. */
static const char *const copy_ops[] = {
    "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose", "Slice", "Concat", "Split", "Gather",
    "GatherElements", "GatherND", "Tile", "Expand", "DepthToSpace", "SpaceToDepth", "MaxPool", "GlobalMaxPool",
    "ReduceMax", "ReduceMin", "Relu", "Max", "Min", "Where", NULL};

static int copies_inputs(const char *op_type)
{
    for (int k = 0; copy_ops[k]; k++)
        if (strcmp(copy_ops[k], op_type) == 0)
            return 1;
    return 0;
}

/* Inputs a node has without an allocation for its lists. */
#define VNPU_INLINE_INPUTS 8

static tdm_status vnpu_run_host(void *ctx, op_ctx *op)
{
    const struct vnpu_ctx *c = ctx;
    if (op->node->op < 0 || op->node->op >= OP_COUNT)
        return err_set(op->err, TDM_E_UNSUPPORTED, "%s has no %s kernel", c->name, op->node->op_type);
    op_run_fn run = op_table[op->node->op].run;
    if (c->quantized && op->node->qdq && !op->node->qdq->wrapped)
        return vnpu_qdq_run(c, op);
    /* On an integer device (De)QuantizeLinear change a tensor's representation, with exact scales, and
     * an op wrapped between them (graph/qdq.h) runs in the quantized domain: not float arithmetic at
     * the profile's precision. */
    if (c->precision == TDM_FLOAT || (c->quantized && op->node->qdq) ||
        (c->quantized && !*op->node->domain &&
         (strcmp(op->node->op_type, "QuantizeLinear") == 0 || strcmp(op->node->op_type, "DequantizeLinear") == 0)))
        return run(op);

    tdm_status st = TDM_OK;
    const tdm_tensor *rin_inline[VNPU_INLINE_INPUTS];
    tdm_tensor *owned_inline[VNPU_INLINE_INPUTS];
    const tdm_tensor **rin = rin_inline;
    tdm_tensor **owned = owned_inline;
    int n_in = op->n_in;
    if (n_in > VNPU_INLINE_INPUTS) {
        rin = mem_calloc((size_t)n_in, sizeof *rin);
        owned = mem_calloc((size_t)n_in, sizeof *owned);
        if (!rin || !owned) {
            st = err_set(op->err, TDM_E_NOMEM, "out of memory");
            n_in = 0;
            goto done;
        }
    }
    for (int i = 0; i < n_in; i++)
        owned[i] = NULL;
    for (int i = 0; i < n_in; i++)
        if ((st = round_input(op, i, c->precision, &rin[i], &owned[i])) != TDM_OK)
            goto done;
    const tdm_tensor *const *saved = op->in;
    op->in = rin;
    st = run(op);
    op->in = saved;
    if (st == TDM_OK) {
        int copies = !*op->node->domain && copies_inputs(op->node->op_type);
        for (int i = 0; i < op->n_out; i++) {
            tdm_tensor *y = op->out[i];
            if (!copies)
                round_tensor(y, c->precision);
            if (y && y->kind == TDM_KIND_TENSOR && y->dtype == TDM_FLOAT)
                y->held = c->precision;
        }
    }
done:
    for (int i = 0; i < n_in; i++)
        tdm_tensor_destroy(owned[i]);
    if (rin != rin_inline) {
        mem_free(owned);
        mem_free(rin);
    }
    return st;
}

/* ---- opening ---- */

static const char *shipped_names[64];
static pthread_once_t shipped_once = PTHREAD_ONCE_INIT;

static void shipped_fill(void)
{
    size_t k = 0;
    for (; vnpu_embedded[k].name && k + 1 < sizeof shipped_names / sizeof shipped_names[0]; k++)
        shipped_names[k] = vnpu_embedded[k].name;
    shipped_names[k] = NULL;
}

const char *const *vnpu_shipped_profiles(void)
{
    pthread_once(&shipped_once, shipped_fill);
    return shipped_names;
}

static int is_path(const char *p)
{
    size_t n = strlen(p);
    return strchr(p, '/') != NULL || (n > 5 && strcmp(p + n - 5, ".json") == 0);
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

tdm_status vnpu_open(tdm_err *e, const char *profile, dev_instance *out)
{
    struct vnpu_ctx *c = NULL;
    tdm_status st;
    memset(out, 0, sizeof *out);
    if (!profile || !*profile) {
        char list[256] = "";
        size_t used = 0;
        for (size_t k = 0; vnpu_embedded[k].name; k++)
            append(list, sizeof list, &used, k ? ", %s" : "%s", vnpu_embedded[k].name, 0);
        return err_set(e, TDM_E_DEVICE,
                       "vnpu needs a profile: vnpu:NAME with a shipped profile (%s) or vnpu:path/to/profile.json", list);
    }
    if (is_path(profile)) {
        char *text;
        size_t len;
        if ((st = file_read_text(e, &file_profile, profile, &text, &len)) != TDM_OK)
            return st;
        st = vnpu_parse(e, base_name(profile), text, len, &c);
        mem_free(text);
        if (st)
            return st;
    } else {
        const vnpu_embedded_profile *p = NULL;
        char list[256] = "";
        size_t used = 0;
        for (size_t k = 0; vnpu_embedded[k].name; k++) {
            if (strcmp(vnpu_embedded[k].name, profile) == 0)
                p = &vnpu_embedded[k];
            append(list, sizeof list, &used, k ? ", %s" : "%s", vnpu_embedded[k].name, 0);
        }
        if (!p)
            return err_set(e, TDM_E_DEVICE,
                           "vnpu:%s: no shipped profile has that name (shipped: %s); give a path to a .json file for "
                           "your own",
                           profile, list);
        char label[128];
        snprintf(label, sizeof label, "%s.json", p->name);
        if ((st = vnpu_parse(e, label, p->text, p->len, &c)) != TDM_OK)
            return st;
    }
    if (!(out->name = mem_strdup(c->dev_name))) {
        vnpu_ctx_free(c);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    c->ext.run_host = vnpu_run_host;
    c->ext.reserve = vnpu_reserve;
    c->ext.release = vnpu_release;
    c->ext.precision = c->precision;
    c->ext.sensitive = (const char *const *)c->sensitive;
    c->ext.n_sensitive = c->n_sensitive;
    c->ext.image_sizes = (const int64_t(*)[2])c->image_sizes;
    c->ext.n_image_sizes = c->n_image_sizes;
    c->ext.quantized = c->quantized;
    c->ext.estimate_fused_away_ms = vnpu_estimate_fused_away_ms;
    out->dev.iface = &vnpu_iface;
    out->dev.ctx = c;
    out->kind = DEV_KIND_VNPU;
    out->ext = &c->ext;
    return TDM_OK;
}
