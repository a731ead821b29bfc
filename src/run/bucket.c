/* Shape bucketing: the safety check, pad and crop (run/bucket.h). */
#include "run/bucket.h"
#include "core/mem.h"
#include "core/tensor.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BUCKETS 64

static int cmp_area(const void *a, const void *b)
{
    const bucket_shape *x = a, *y = b;
    int64_t ax = x->h * x->w, ay = y->h * y->w;
    return ax < ay ? -1 : ax > ay ? 1 : (x->h > y->h) - (x->h < y->h);
}

tdm_status bucket_parse(tdm_err *e, const char *spec, bucket_shape **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!spec || !*spec)
        return err_set(e, TDM_E_USAGE, "bucket shapes must be HxW[,HxW...], not an empty string");
    bucket_shape *b = mem_calloc(MAX_BUCKETS, sizeof *b);
    if (!b)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    size_t k = 0;
    const char *p = spec;
    for (;;) {
        char *end;
        long h = isdigit((unsigned char)*p) ? strtol(p, &end, 10) : -1;
        long w = -1;
        if (h > 0 && (*end == 'x' || *end == 'X') && isdigit((unsigned char)end[1]))
            w = strtol(end + 1, &end, 10);
        if (h < 1 || h > 65536 || w < 1 || w > 65536 || (*end && *end != ',') || k == MAX_BUCKETS) {
            mem_free(b);
            return err_set(e, TDM_E_USAGE,
                           k == MAX_BUCKETS ? "bucket shapes '%s': at most 64 shapes"
                                            : "bucket shapes '%s' must be HxW[,HxW...] with sides 1 to 65536",
                           spec);
        }
        b[k].h = h;
        b[k].w = w;
        k++;
        if (!*end)
            break;
        p = end + 1;
    }
    qsort(b, k, sizeof *b, cmp_area);
    *out = b;
    *n = k;
    return TDM_OK;
}

int bucket_pick(const bucket_shape *b, size_t n, int64_t h, int64_t w)
{
    for (size_t i = 0; i < n; i++)
        if (b[i].h >= h && b[i].w >= w)
            return (int)i;
    return -1;
}

/* ---- the safety check ---- */

enum { V_CONST = 0, V_SPATIAL = 1, V_GLOBAL = 2 };

static int in_list(const char *op, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(op, list[i]) == 0)
            return 1;
    return 0;
}

/* Ops local in space: each output pixel depends on a window of input pixels. */
static const char *const local_ops[] = {
    "Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "BatchNormalization", "Relu", "LeakyRelu",
    "PRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Elu", "Selu", "Celu", "Softplus", "Softsign",
    "Mish", "Gelu", "Erf", "Exp", "Log", "Abs", "Neg", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign",
    "Identity", "Dropout", "Cast", "QuantizeLinear", "DequantizeLinear", NULL};
/* Elementwise with broadcasting: a reduced (N, C, 1, 1) operand gates a map. */
static const char *const elementwise_ops[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean",
                                              "Where", NULL};
/* The one reduction bucket_mask_model can take over the real region. */
static const char *const global_ops[] = {"GlobalAveragePool", NULL};

/* Resize by scales only (fixed sizes break the stride relation). */
static int resize_by_scales(const gr_node *n)
{
    return !(n->n_inputs >= 4 && n->inputs[3] >= 0);
}

/* Concat on axis 1 (channels) of a rank-4 map. */
static int concat_on_channels(const gr_node *n)
{
    int64_t axis = gr_attr_int(n, "axis", 0);
    return axis == 1 || axis == -3;
}

/* Softmax / LogSoftmax over the channel axis only. */
static int softmax_on_channels(const gr_node *n)
{
    int64_t axis = gr_attr_int(n, "axis", n->opset >= 13 ? -1 : 1);
    return (axis == 1 || axis == -3) && n->opset >= 13;
}

static const char *role(int v) { return v == V_GLOBAL ? "a spatially reduced value" : "the image's spatial map"; }

tdm_status bucket_check(tdm_err *e, const gr_graph *g, int *n_gates)
{
    int gates = 0;
    int *st = mem_calloc((size_t)g->n_values + 1, sizeof *st);
    int *src = mem_calloc((size_t)g->n_values + 1, sizeof *src); /* the reduction a GLOBAL value comes from */
    if (!st || !src) {
        mem_free(st);
        mem_free(src);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    tdm_status rc = TDM_OK;
    int n_images = 0;
    for (int k = 0; k < g->n_inputs; k++) {
        const gr_value *v = &g->values[g->inputs[k]];
        if (v->type.kind == TDM_KIND_TENSOR && v->type.rank == 4) {
            st[g->inputs[k]] = V_SPATIAL;
            n_images++;
        }
    }
    if (!n_images) {
        rc = err_set(e, TDM_E_UNSUPPORTED,
                     "bucketing refused (SHAPE_UNSUPPORTED): the model has no rank-4 (N, C, H, W) image input");
        goto done;
    }
    for (int i = 0; i < g->n_nodes && !rc; i++) {
        const gr_node *n = &g->nodes[g->order ? g->order[i] : i];
        int spatial = 0, global = 0, from = -1, which = -1;
        for (int j = 0; j < n->n_inputs; j++) {
            int v = n->inputs[j];
            if (v < 0)
                continue;
            if (st[v] == V_SPATIAL) {
                spatial = 1;
                if (which < 0)
                    which = v;
            }
            if (st[v] == V_GLOBAL) {
                global = 1;
                from = src[v];
                which = v;
            }
        }
        int out = V_CONST, ok = 1;
        const char *why = "is not local in space";
        if (!spatial && !global) {
            out = V_CONST;
        } else if (in_list(n->op_type, global_ops)) {
            out = V_GLOBAL;
            from = g->order ? g->order[i] : i;
        } else if (in_list(n->op_type, elementwise_ops)) {
            out = spatial ? V_SPATIAL : V_GLOBAL;
            gates += spatial && global;
        } else if (spatial && global) {
            ok = 0;
            why = "mixes a spatially reduced value into the map";
        } else if (in_list(n->op_type, local_ops) ||
                   (strcmp(n->op_type, "Resize") == 0 && (resize_by_scales(n) || !spatial)) ||
                   (strcmp(n->op_type, "Upsample") == 0) ||
                   (strcmp(n->op_type, "Concat") == 0 && (concat_on_channels(n) || !spatial)) ||
                   ((strcmp(n->op_type, "Softmax") == 0 || strcmp(n->op_type, "LogSoftmax") == 0) &&
                    softmax_on_channels(n))) {
            out = spatial ? V_SPATIAL : V_GLOBAL;
        } else {
            ok = 0;
            why = strcmp(n->op_type, "Resize") == 0   ? "resizes to fixed sizes"
                  : strcmp(n->op_type, "Concat") == 0 ? "concatenates on an axis other than channels"
                  : strncmp(n->op_type, "Softmax", 7) == 0 || strcmp(n->op_type, "LogSoftmax") == 0
                      ? "normalises over an axis other than channels"
                  : strncmp(n->op_type, "Reduce", 6) == 0 ? "reduces over axes that may be spatial"
                  : global                                 ? "takes a spatially reduced value"
                                                           : "is not known to be local in space";
        }
        if (!ok) {
            if (global && from >= 0)
                rc = err_set(e, TDM_E_UNSUPPORTED,
                             "bucketing refused (SHAPE_UNSUPPORTED): %s '%s' %s (the output of %s '%s'), so padding "
                             "the image would change the result; the model is not fully convolutional",
                             n->op_type, n->name, why, g->nodes[from].op_type, g->nodes[from].name);
            else
                rc = err_set(e, TDM_E_UNSUPPORTED,
                             "bucketing refused (SHAPE_UNSUPPORTED): %s '%s' %s and reads %s ('%s'), so padding "
                             "the image would change the result",
                             n->op_type, n->name, why, role(which >= 0 ? st[which] : V_SPATIAL),
                             which >= 0 ? g->values[which].name : "?");
            break;
        }
        for (int j = 0; j < n->n_outputs; j++)
            if (n->outputs[j] >= 0) {
                st[n->outputs[j]] = out;
                src[n->outputs[j]] = from;
            }
    }
    for (int k = 0; !rc && k < g->n_outputs; k++) {
        int v = g->outputs[k];
        if (st[v] == V_GLOBAL)
            rc = err_set(e, TDM_E_UNSUPPORTED,
                         "bucketing refused (SHAPE_UNSUPPORTED): output '%s' is reduced over the spatial axes by "
                         "%s '%s', so it does not follow the image's height and width",
                         g->values[v].name, g->nodes[src[v]].op_type, g->nodes[src[v]].name);
    }
done:
    mem_free(st);
    mem_free(src);
    if (!rc && n_gates)
        *n_gates = gates;
    return rc;
}

/* ---- pad and crop ---- */

tdm_status bucket_pad(tdm_err *e, const tdm_tensor *in, int64_t bh, int64_t bw, int mode, tdm_tensor **out)
{
    *out = NULL;
    if (in->kind != TDM_KIND_TENSOR || in->rank != 4 || in->dims[2] > bh || in->dims[3] > bw)
        return err_set(e, TDM_E_INTERNAL, "bucket_pad needs a rank-4 tensor within the bucket");
    int64_t dims[4] = {in->dims[0], in->dims[1], bh, bw};
    tdm_tensor *t = NULL;
    tdm_status st = tensor_new(e, in->dtype, 4, dims, &t);
    if (st)
        return st;
    size_t es = tdm_dtype_size(in->dtype);
    int64_t h = in->dims[2], w = in->dims[3], planes = in->dims[0] * in->dims[1];
    const unsigned char *s = in->data;
    unsigned char *d = t->data;
    memset(d, 0, t->nbytes);
    for (int64_t p = 0; p < planes && h > 0 && w > 0; p++) {
        const unsigned char *sp = s + (size_t)(p * h * w) * es;
        unsigned char *dp = d + (size_t)(p * bh * bw) * es;
        for (int64_t y = 0; y < bh; y++) {
            if (y >= h && mode != BUCKET_PAD_EDGE)
                break;
            const unsigned char *row = sp + (size_t)((y < h ? y : h - 1) * w) * es;
            unsigned char *drow = dp + (size_t)(y * bw) * es;
            memcpy(drow, row, (size_t)w * es);
            if (mode == BUCKET_PAD_EDGE)
                for (int64_t x = w; x < bw; x++)
                    memcpy(drow + (size_t)x * es, row + (size_t)(w - 1) * es, es);
        }
    }
    *out = t;
    return TDM_OK;
}

tdm_status bucket_crop(tdm_err *e, const tdm_tensor *t, int64_t bh, int64_t bw, int64_t h, int64_t w,
                       tdm_tensor **out)
{
    *out = NULL;
    int r = t->rank;
    int64_t oh = r >= 2 ? t->dims[r - 2] : 0, ow = r >= 2 ? t->dims[r - 1] : 0;
    if (t->kind != TDM_KIND_TENSOR || r < 3 || oh < 1 || ow < 1 || bh % oh || bw % ow || bh / oh != bw / ow ||
        t->dtype == TDM_STRING)
        return err_set(e, TDM_E_RUNTIME,
                       "bucketing: an output of shape %lldx%lld (last two axes) does not follow the %lldx%lld bucket "
                       "by one stride, so it cannot be cropped",
                       (long long)oh, (long long)ow, (long long)bh, (long long)bw);
    int64_t s = bh / oh, ch = (h + s - 1) / s, cw = (w + s - 1) / s;
    int64_t dims[TDM_MAX_RANK];
    memcpy(dims, t->dims, sizeof dims);
    dims[r - 2] = ch;
    dims[r - 1] = cw;
    tdm_tensor *c = NULL;
    tdm_status st = tensor_new(e, t->dtype, r, dims, &c);
    if (st)
        return st;
    size_t es = tdm_dtype_size(t->dtype);
    int64_t planes = 1;
    for (int d = 0; d < r - 2; d++)
        planes *= t->dims[d];
    for (int64_t p = 0; p < planes; p++)
        for (int64_t y = 0; y < ch; y++)
            memcpy((unsigned char *)c->data + (size_t)((p * ch + y) * cw) * es,
                   (const unsigned char *)t->data + (size_t)((p * oh + y) * ow) * es, (size_t)cw * es);
    *out = c;
    return TDM_OK;
}

/* ---- a session's bucketing ---- */

tdm_status bucket_init(tdm_err *e, bucket_state *b, const char *spec, const char *pad, const gr_graph *g)
{
    memset(b, 0, sizeof *b);
    if (!spec)
        return TDM_OK;
    if (pad && strcmp(pad, "zero") != 0 && strcmp(pad, "edge") != 0)
        return err_set(e, TDM_E_USAGE, "bucket padding must be zero or edge, not '%s'", pad);
    b->pad = pad && strcmp(pad, "edge") == 0 ? BUCKET_PAD_EDGE : BUCKET_PAD_ZERO;
    tdm_status st = bucket_check(e, g, &b->gates);
    if (!st)
        st = bucket_parse(e, spec, &b->shapes, &b->n);
    return st;
}

void bucket_free(bucket_state *b)
{
    mem_free(b->shapes);
    memset(b, 0, sizeof *b);
}

tdm_status bucket_inputs(tdm_err *e, const bucket_state *b, const tdm_tensor *const *in, size_t n,
                         tdm_tensor **padded, bucket_run *r)
{
    memset(r, 0, sizeof *r);
    int have = 0;
    for (size_t k = 0; k < n; k++) {
        padded[k] = NULL;
        const tdm_tensor *t = in[k];
        if (!t || t->kind != TDM_KIND_TENSOR || t->rank != 4)
            continue;
        if (have && (t->dims[2] != r->h || t->dims[3] != r->w))
            return err_set(e, TDM_E_INPUT, "bucketing needs one image size: input %zu is %lldx%lld, another %lldx%lld", k,
                           (long long)t->dims[2], (long long)t->dims[3], (long long)r->h, (long long)r->w);
        r->h = t->dims[2];
        r->w = t->dims[3];
        have = 1;
    }
    if (!have)
        return TDM_OK;
    int i = bucket_pick(b->shapes, b->n, r->h, r->w);
    if (i < 0)
        return err_set(e, TDM_E_INPUT, "an image of %lldx%lld fits no bucket shape (the largest holds %lldx%lld)",
                       (long long)r->h, (long long)r->w, (long long)b->shapes[b->n - 1].h,
                       (long long)b->shapes[b->n - 1].w);
    r->bh = b->shapes[i].h;
    r->bw = b->shapes[i].w;
    r->padded = r->bh != r->h || r->bw != r->w;
    for (size_t k = 0; r->padded && k < n; k++) {
        if (!in[k] || in[k]->kind != TDM_KIND_TENSOR || in[k]->rank != 4)
            continue;
        tdm_status st = bucket_pad(e, in[k], r->bh, r->bw, b->pad, &padded[k]);
        if (st) {
            for (size_t j = 0; j < k; j++) {
                tdm_tensor_destroy(padded[j]);
                padded[j] = NULL;
            }
            return st;
        }
    }
    return TDM_OK;
}

tdm_status bucket_mask(tdm_err *e, const bucket_run *r, tdm_tensor **out)
{
    int64_t dims[4] = {1, 1, r->bh, r->bw};
    tdm_status st = tensor_new(e, TDM_FLOAT, 4, dims, out);
    if (st)
        return st;
    float *d = (*out)->data;
    memset(d, 0, (*out)->nbytes);
    for (int64_t y = 0; y < r->h; y++)
        for (int64_t x = 0; x < r->w; x++)
            d[y * r->bw + x] = 1.0f;
    return TDM_OK;
}

tdm_status bucket_outputs(tdm_err *e, bucket_run *r, tdm_tensor **out, size_t n)
{
    if (!r->padded)
        return TDM_OK;
    tdm_tensor **c = mem_calloc(n + 1, sizeof *c);
    if (!c)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    tdm_status st = TDM_OK;
    for (size_t k = 0; k < n && !st; k++)
        if (out[k])
            st = bucket_crop(e, out[k], r->bh, r->bw, r->h, r->w, &c[k]);
    for (size_t k = 0; k < n; k++) {
        if (!st && c[k]) {
            if (!r->ch) {
                r->ch = c[k]->dims[c[k]->rank - 2];
                r->cw = c[k]->dims[c[k]->rank - 1];
            }
            tdm_tensor_destroy(out[k]);
            out[k] = c[k];
        } else if (c[k]) {
            tdm_tensor_destroy(c[k]);
        }
    }
    mem_free(c);
    return st;
}

void bucket_note(bucket_state *b, const bucket_run *r)
{
    b->runs++;
    if (!r->padded)
        return;
    b->padded++;
    b->h = r->h;
    b->w = r->w;
    b->bh = r->bh;
    b->bw = r->bw;
    b->ch = r->ch;
    b->cw = r->cw;
}

static cJSON *pair(int64_t a, int64_t b)
{
    cJSON *x = cJSON_CreateArray();
    if (x) {
        cJSON_AddItemToArray(x, cJSON_CreateNumber((double)a));
        cJSON_AddItemToArray(x, cJSON_CreateNumber((double)b));
    }
    return x;
}

void *bucket_json(const bucket_state *b)
{
    if (!b->shapes)
        return NULL;
    cJSON *o = cJSON_CreateObject(), *sh = cJSON_AddArrayToObject(o, "shapes");
    for (size_t i = 0; sh && i < b->n; i++)
        cJSON_AddItemToArray(sh, pair(b->shapes[i].h, b->shapes[i].w));
    cJSON_AddStringToObject(o, "pad", b->pad == BUCKET_PAD_EDGE ? "edge" : "zero");
    cJSON_AddStringToObject(o, "pad_sides", "bottom,right");
    cJSON_AddNumberToObject(o, "channel_gates", b->gates);
    /* bucket_mask_model: without the mask, ppocr_det at 608x480 in 640x640
     * gave cosine 0.978 against cpu's unbucketed run; with it 1.000000 */
    cJSON_AddStringToObject(o, "mask", "the padded region is zeroed before every Conv, ConvTranspose and pool and "
                                       "left out of every GlobalAveragePool's mean (input bucket_mask)");
    cJSON_AddNumberToObject(o, "runs", (double)b->runs);
    cJSON_AddNumberToObject(o, "padded_runs", (double)b->padded);
    if (b->padded) {
        cJSON *l = cJSON_AddObjectToObject(o, "last");
        if (l) {
            cJSON_AddItemToObject(l, "input", pair(b->h, b->w));
            cJSON_AddItemToObject(l, "bucket", pair(b->bh, b->bw));
            cJSON_AddItemToObject(l, "crop", pair(b->ch, b->cw));
        }
    }
    return o;
}
