/* Helpers shared by the devices: modeled work of a node, verdicts, shapes. */
#include "devices/device_internal.h"
#include "ops/nn.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Elements of a tensor desc (unknown dims and unknown rank count as 1). */
static double elems(const tdm_tensor_desc *t)
{
    double n = 1;
    for (int k = 0; t->rank > 0 && t->dims && k < t->rank; k++)
        if (t->dims[k] >= 0)
            n *= (double)t->dims[k];
    return n;
}

static double dim_or1(const tdm_tensor_desc *t, int k)
{
    if (t->rank < 0 || k < 0 || k >= t->rank || !t->dims || t->dims[k] < 0)
        return 1;
    return (double)t->dims[k];
}

static int present(const tdm_node_desc *n, int i)
{
    return i < n->n_inputs && n->inputs[i].dtype != TDM_UNDEFINED;
}

static int64_t attr_int(const tdm_node_desc *n, const char *name, int64_t dflt)
{
    for (int a = 0; a < n->n_attrs; a++)
        if (strcmp(n->attrs[a].name, name) == 0 && n->attrs[a].type == TDM_ATTR_INT)
            return n->attrs[a].i;
    return dflt;
}

double dev_node_flops(const tdm_node_desc *n)
{
    const char *op = n->op_type;
    int std = !n->domain || !*n->domain || strcmp(n->domain, "ai.onnx") == 0;
    if (std && n->n_outputs > 0 && present(n, 0) && present(n, 1)) {
        const tdm_tensor_desc *x = &n->inputs[0], *w = &n->inputs[1], *y = &n->outputs[0];
        if (strcmp(op, "Conv") == 0) {
            double k = 1;
            for (int d = 1; d < w->rank; d++)
                k *= dim_or1(w, d);
            return 2.0 * elems(y) * k;
        }
        if (strcmp(op, "ConvTranspose") == 0) {
            double k = 1;
            for (int d = 1; d < w->rank; d++)
                k *= dim_or1(w, d);
            return 2.0 * elems(x) * k;
        }
        if (strcmp(op, "Gemm") == 0) {
            double kdim = attr_int(n, "transA", 0) ? dim_or1(x, 0) : dim_or1(x, 1);
            return 2.0 * elems(y) * kdim;
        }
        if (strcmp(op, "MatMul") == 0) {
            double kdim = x->rank >= 1 ? dim_or1(x, x->rank - 1) : 1;
            return 2.0 * elems(y) * kdim;
        }
    }
    double f = 0;
    for (int i = 0; i < n->n_outputs; i++)
        if (n->outputs[i].dtype != TDM_UNDEFINED)
            f += elems(&n->outputs[i]);
    return f;
}

/* Attribute name's ints entry k, or dflt. */
static int64_t attr_ints_at(const tdm_node_desc *n, const char *name, size_t k, int64_t dflt)
{
    for (int a = 0; a < n->n_attrs; a++)
        if (strcmp(n->attrs[a].name, name) == 0 && n->attrs[a].type == TDM_ATTR_INTS)
            return k < n->attrs[a].n ? n->attrs[a].ints[k] : dflt;
    return dflt;
}

int dev_conv_winograd_tile(const tdm_node_desc *n)
{
    int std = !n->domain || !*n->domain || strcmp(n->domain, "ai.onnx") == 0;
    if (!std || strcmp(n->op_type, "Conv") != 0 || n->n_outputs < 1 || !present(n, 0) || !present(n, 1))
        return 0;
    const tdm_tensor_desc *x = &n->inputs[0], *w = &n->inputs[1], *y = &n->outputs[0];
    if (x->rank != 4 || w->rank != 4 || y->rank != 4 || !x->dims || !w->dims || !y->dims)
        return 0;
    for (int k = 0; k < 4; k++)
        if (x->dims[k] < 0 || w->dims[k] < 0 || y->dims[k] < 0)
            return 0;
    /* the kernel's conv_plan (ops/nn_conv.c conv_prepare), from the shapes
     * and attributes the device sees */
    conv_plan p;
    memset(&p, 0, sizeof p);
    nn_geom *g = &p.g;
    g->nsp = 2;
    g->in[0] = g->k[0] = g->s[0] = g->d[0] = g->out[0] = 1;
    for (int k = 0; k < 2; k++) {
        int slot = NN_MAX_SP - 2 + k;
        g->in[slot] = x->dims[2 + k];
        g->k[slot] = w->dims[2 + k];
        g->out[slot] = y->dims[2 + k];
        g->s[slot] = attr_ints_at(n, "strides", (size_t)k, 1);
        g->d[slot] = attr_ints_at(n, "dilations", (size_t)k, 1);
        /* explicit pads, else what auto_pad leaves (at most one more at the end) */
        int64_t total = (g->out[slot] - 1) * g->s[slot] + (g->k[slot] - 1) * g->d[slot] + 1 - g->in[slot];
        g->pb[slot] = attr_ints_at(n, "pads", (size_t)k, total > 0 ? total / 2 : 0);
        g->pe[slot] = attr_ints_at(n, "pads", (size_t)k + 2, total > 0 ? total - total / 2 : 0);
    }
    p.n = x->dims[0];
    p.c = x->dims[1];
    p.m = w->dims[0];
    p.group = attr_int(n, "group", 1);
    if (p.group < 1 || p.c % p.group || p.m % p.group)
        return 0;
    p.cg = p.c / p.group;
    p.mg = p.m / p.group;
    op_nn_conv_plan_sizes(&p, 2);
    return op_conv_winograd_tile(&p);
}

static double tensor_bytes(const tdm_tensor_desc *t)
{
    if (t->dtype == TDM_UNDEFINED)
        return 0;
    size_t sz = tdm_dtype_size(t->dtype);
    return elems(t) * (double)(sz ? sz : sizeof(void *));
}

double dev_node_bytes(const tdm_node_desc *n)
{
    double b = 0;
    for (int i = 0; i < n->n_inputs; i++)
        b += tensor_bytes(&n->inputs[i]);
    for (int i = 0; i < n->n_outputs; i++)
        b += tensor_bytes(&n->outputs[i]);
    return b;
}

double dev_inputs_bytes(const tdm_node_desc *n, uint32_t mask)
{
    double b = 0;
    for (int i = 0; i < n->n_inputs && i < 32; i++)
        if (mask >> i & 1u)
            b += tensor_bytes(&n->inputs[i]);
    return b;
}

size_t dev_stored_bytes(const dev_instance *di, tdm_dtype dtype, size_t bytes)
{
    if (!di || !di->ext || (dtype != TDM_FLOAT && dtype != TDM_DOUBLE))
        return bytes;
    tdm_dtype st = di->ext->storage;
    if (st != TDM_FLOAT16 && st != TDM_BFLOAT16)
        return bytes;
    size_t from = tdm_dtype_size(dtype), to = tdm_dtype_size(st);
    return from > to ? bytes / from * to : bytes;
}

tdm_reason dev_verdict(tdm_verdict *out, tdm_reason reason, const char *fmt, ...)
{
    if (!out)
        return reason;
    out->reason = reason;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->detail, sizeof out->detail, fmt, ap);
    va_end(ap);
    return reason;
}

const char *dev_shape_str(const tdm_tensor_desc *t, char *buf, size_t size)
{
    if (!size)
        return buf;
    buf[0] = 0;
    if (t->rank < 0) {
        snprintf(buf, size, "?");
        return buf;
    }
    if (t->rank == 0) {
        snprintf(buf, size, "scalar");
        return buf;
    }
    size_t used = 0;
    for (int k = 0; k < t->rank && used < size; k++) {
        int w;
        if (!t->dims || t->dims[k] < 0)
            w = snprintf(buf + used, size - used, "%s?", k ? "x" : "");
        else
            w = snprintf(buf + used, size - used, "%s%lld", k ? "x" : "", (long long)t->dims[k]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return buf;
}

int dev_has_run_timer(const dev_instance *di)
{
    const tdm_device_iface *f = di ? di->dev.iface : NULL;
    return f && f->api_version >= 2 && f->last_run_ms;
}

double dev_last_run_ms(const dev_instance *di)
{
    return dev_has_run_timer(di) ? di->dev.iface->last_run_ms(di->dev.ctx) : -1;
}

double dev_slowdown(const dev_instance *di) { return di && di->slowdown >= 1 ? di->slowdown : 1; }
