/* Helpers shared by the nn op files: optional inputs, float conversions and
 * the window geometry of convolutions and pools. */
#include "ops/nn.h"
#include "core/mem.h"

#include <string.h>

/* ---- packed constant operands (tensor_aux) ---- */

typedef struct packed_aux {
    tensor_aux h;
    float *data; /* 64-byte aligned inside raw */
    void *raw;
} packed_aux;

static void packed_free(tensor_aux *a)
{
    packed_aux *p = (packed_aux *)a;
    mem_free(p->raw);
    mem_free(p);
}

uint64_t op_nn_pack_key(const uint64_t *v, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a over the values' bytes */
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 8; b++) {
            h ^= (v[i] >> (8 * b)) & 0xff;
            h *= 0x100000001b3ULL;
        }
    return h;
}

const float *op_nn_loadable(const op_ctx *ctx, int input, const float *p)
{
    if (input < 0 || input >= ctx->n_in || !ctx->in[input])
        return p;
    return tensor_align(ctx->in[input]);
}

const float *op_nn_packed_const(const op_ctx *ctx, int input, uint64_t key, size_t floats,
                                void (*fill)(const void *arg, const void *src, float *dst), const void *arg,
                                int as_bytes)
{
    const gr_node *node = ctx->node;
    if (!node || input < 0 || input >= ctx->n_in || input >= node->n_inputs || !ctx->in[input])
        return NULL;
    const tdm_tensor *t = ctx->in[input];
    if (!op_input_const(ctx, input))
        return NULL; /* neither an initializer nor marked constant (a folded weight, graph/fuse.c) */
    tensor_aux *found = tensor_aux_find(t, key);
    if (found)
        return ((packed_aux *)found)->data;
    size_t bytes;
    if (mem_mul(floats, sizeof(float), &bytes) || mem_add(bytes, 64, &bytes))
        return NULL;
    packed_aux *p = mem_calloc(1, sizeof *p);
    void *raw = p ? mem_alloc(bytes) : NULL;
    if (!raw) {
        mem_free(p);
        return NULL;
    }
    void *tmp = NULL;
    const void *src = as_bytes ? t->data : tensor_read_aligned(t, &tmp);
    if (!src) {
        mem_free(raw);
        mem_free(p);
        return NULL;
    }
    p->h.key = key;
    p->h.free_fn = packed_free;
    p->raw = raw;
    p->data = (float *)((char *)raw + (64 - (uintptr_t)raw % 64) % 64);
    fill(arg, src, p->data);
    mem_free(tmp);
    const float *r = ((packed_aux *)tensor_aux_attach(t, &p->h))->data;
    /* the original is resident once, packed: its pages in a file mapping
     * are dropped (anything that reads it later pages it in again) */
    tensor_drop_pages(t);
    return r;
}

const tdm_tensor *op_nn_in(const op_ctx *ctx, int i)
{
    if (i < 0 || i >= ctx->n_in)
        return NULL;
    const tdm_tensor *t = ctx->in[i];
    if (!t || t->kind != TDM_KIND_TENSOR)
        return NULL;
    return t;
}

float *op_nn_to_f32(const tdm_tensor *t)
{
    float *o = mem_alloc(t->count * sizeof *o + 1);
    if (!o)
        return NULL;
    size_t n = t->count;
    switch (t->dtype) {
    case TDM_FLOAT:
        if (n)
            memcpy(o, t->data, n * sizeof *o);
        break;
    case TDM_DOUBLE: {
        const double *p = t->data;
        for (size_t i = 0; i < n; i++)
            o[i] = (float)p[i];
        break;
    }
    case TDM_FLOAT16: {
        const uint16_t *p = t->data;
        for (size_t i = 0; i < n; i++)
            o[i] = fp16_to_f32(p[i]);
        break;
    }
    case TDM_BFLOAT16: {
        const uint16_t *p = t->data;
        for (size_t i = 0; i < n; i++)
            o[i] = bf16_to_f32(p[i]);
        break;
    }
    default:
        for (size_t i = 0; i < n; i++)
            o[i] = (float)tensor_get_f64(t, i);
        break;
    }
    return o;
}

void op_nn_from_f32(tdm_tensor *t, const float *src)
{
    size_t n = t->count;
    switch (t->dtype) {
    case TDM_FLOAT:
        if (n)
            memcpy(t->data, src, n * sizeof *src);
        break;
    case TDM_DOUBLE: {
        double *p = t->data;
        for (size_t i = 0; i < n; i++)
            p[i] = src[i];
        break;
    }
    case TDM_FLOAT16: {
        uint16_t *p = t->data;
        for (size_t i = 0; i < n; i++)
            p[i] = f32_to_fp16(src[i]);
        break;
    }
    case TDM_BFLOAT16: {
        uint16_t *p = t->data;
        for (size_t i = 0; i < n; i++)
            p[i] = f32_to_bf16(src[i]);
        break;
    }
    default:
        for (size_t i = 0; i < n; i++)
            tensor_set_f64(t, i, src[i]);
        break;
    }
}

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

tdm_status op_nn_geom(tdm_err *e, const gr_node *node, int nsp, const int64_t *in, const int64_t *kernel,
                      int use_dil, int use_ceil, nn_geom *g)
{
    const int64_t *ks = NULL, *st = NULL, *dl = NULL, *pd = NULL;
    int nk, ns, nd, np;

    memset(g, 0, sizeof *g);
    if (nsp < 1 || nsp > NN_MAX_SP)
        return err_set(e, TDM_E_UNSUPPORTED, "%d spatial dimensions are not supported (1 to %d)", nsp, NN_MAX_SP);
    g->nsp = nsp;
    for (int i = 0; i < NN_MAX_SP; i++) {
        g->in[i] = g->k[i] = g->s[i] = g->d[i] = g->out[i] = 1;
        g->pb[i] = g->pe[i] = 0;
    }
    nk = gr_attr_ints(node, "kernel_shape", &ks);
    ns = gr_attr_ints(node, "strides", &st);
    nd = use_dil ? gr_attr_ints(node, "dilations", &dl) : -1;
    np = gr_attr_ints(node, "pads", &pd);
    if (nk < 0 && !kernel)
        return err_set(e, TDM_E_MODEL, "attribute kernel_shape is missing");
    if (nk >= 0 && nk != nsp)
        return err_set(e, TDM_E_MODEL, "attribute kernel_shape has %d values for %d spatial dimensions", nk, nsp);
    if (ns >= 0 && ns != nsp)
        return err_set(e, TDM_E_MODEL, "attribute strides has %d values for %d spatial dimensions", ns, nsp);
    if (nd >= 0 && nd != nsp)
        return err_set(e, TDM_E_MODEL, "attribute dilations has %d values for %d spatial dimensions", nd, nsp);
    if (np >= 0 && np != 2 * nsp)
        return err_set(e, TDM_E_MODEL, "attribute pads has %d values for %d spatial dimensions", np, nsp);
    const char *ap = gr_attr_str(node, "auto_pad", "NOTSET");
    int mode;
    if (!*ap || strcmp(ap, "NOTSET") == 0)
        mode = 0;
    else if (strcmp(ap, "SAME_UPPER") == 0)
        mode = 1;
    else if (strcmp(ap, "SAME_LOWER") == 0)
        mode = 2;
    else if (strcmp(ap, "VALID") == 0)
        mode = 3;
    else
        return err_set(e, TDM_E_MODEL, "attribute auto_pad has the unknown value '%s'", ap);
    int ceil_mode = use_ceil ? (int)gr_attr_int(node, "ceil_mode", 0) : 0;

    int off = NN_MAX_SP - nsp;
    for (int i = 0; i < nsp; i++) {
        int j = off + i;
        g->in[j] = in[i];
        g->k[j] = nk >= 0 ? ks[i] : kernel[i];
        g->s[j] = ns >= 0 ? st[i] : 1;
        g->d[j] = nd >= 0 ? dl[i] : 1;
        g->pb[j] = np >= 0 && mode == 0 ? pd[i] : 0;
        g->pe[j] = np >= 0 && mode == 0 ? pd[i + nsp] : 0;
        if (g->k[j] < 1 || g->k[j] > ((int64_t)1 << 31))
            return err_set(e, TDM_E_MODEL, "kernel size %lld of spatial dimension %d is invalid",
                           (long long)g->k[j], i);
        if (g->s[j] < 1 || g->s[j] > ((int64_t)1 << 31))
            return err_set(e, TDM_E_MODEL, "attribute strides has the invalid value %lld", (long long)g->s[j]);
        if (g->d[j] < 1 || g->d[j] > ((int64_t)1 << 31))
            return err_set(e, TDM_E_MODEL, "attribute dilations has the invalid value %lld", (long long)g->d[j]);
        if (g->pb[j] < 0 || g->pe[j] < 0 || g->pb[j] > ((int64_t)1 << 31) || g->pe[j] > ((int64_t)1 << 31))
            return err_set(e, TDM_E_MODEL, "attribute pads has an invalid value");
        int64_t ek = (g->k[j] - 1) * g->d[j] + 1;
        if (g->in[j] < 0) {
            g->out[j] = -1;
            continue;
        }
        int64_t n = g->in[j];
        if (mode == 1 || mode == 2) {
            int64_t o = ceil_div(n, g->s[j]);
            int64_t total = (o - 1) * g->s[j] + ek - n;
            if (total < 0)
                total = 0;
            if (mode == 1) {
                g->pb[j] = total / 2;
                g->pe[j] = total - total / 2;
            } else {
                g->pb[j] = total - total / 2;
                g->pe[j] = total / 2;
            }
            g->out[j] = o;
        } else {
            int64_t num = n + g->pb[j] + g->pe[j] - ek;
            if (num < 0)
                return err_set(e, TDM_E_RUNTIME,
                               "the window (%lld after dilation) is larger than the padded input (%lld) in spatial "
                               "dimension %d",
                               (long long)ek, (long long)(n + g->pb[j] + g->pe[j]), i);
            int64_t o = (ceil_mode ? ceil_div(num, g->s[j]) : num / g->s[j]) + 1;
            if (ceil_mode && (o - 1) * g->s[j] >= n + g->pb[j])
                o--;
            g->out[j] = o;
        }
    }
    return TDM_OK;
}

tdm_status op_nn_conv_via_f32(op_ctx *ctx, const conv_plan *p, const tdm_tensor *x, const tdm_tensor *w,
                              const tdm_tensor *b, tdm_tensor *y, op_nn_conv_f32_fn fn)
{
    tdm_status st;
    float *fx = op_nn_to_f32(x), *fw = op_nn_to_f32(w), *fb = b ? op_nn_to_f32(b) : NULL;
    float *fy = mem_alloc(y->count * sizeof *fy);
    if (!fx || !fw || (b && !fb) || !fy)
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
    else
        st = fn(ctx, p, fx, fw, -1, fb, fy);
    if (!st)
        op_nn_from_f32(y, fy);
    mem_free(fx);
    mem_free(fw);
    mem_free(fb);
    mem_free(fy);
    return st;
}
