/* The rewrite rules (rewrite.h): each builds, from one node of a built
 * model, nodes that compute the same values. Exact rules
 * (decompositions, fusions) compute the same function in real arithmetic;
 * approximations (GR_RW_APPROX) do not and are used only under
 * `--rescue all` once verified. A rule returns 0 when the node is outside
 * what it handles (a dynamic dimension it needs, a non-constant pad, an
 * optional output that is read, …). */
#include "graph/rewrite_build.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define NAME RWB_NAME
#define TDM_PI 3.14159265358979323846

void rwb_init(rwb *b, gr_rw *r, const gr_graph *g, int node)
{
    memset(b, 0, sizeof *b);
    b->r = r;
    b->g = g;
    b->n = &g->nodes[node];
    b->opset = b->n->opset;
    r->n_orig = 1;
    r->orig[0] = node;
    b->dt = b->n->n_inputs > 0 && b->n->inputs[0] >= 0 ? g->values[b->n->inputs[0]].type.dtype : TDM_UNDEFINED;
    b->ct = b->dt;
}

/* A fresh intermediate name. */
const char *rwb_tmp(rwb *b)
{
    if (b->nt >= RWB_TMPS) {
        b->fail = 1;
        return "";
    }
    return gr_rw_tmp(b->r, b->g, b->tmp[b->nt++], NAME);
}

const char *rwb_in_name(const rwb *b, int i)
{
    return i < b->n->n_inputs && b->n->inputs[i] >= 0 ? b->g->values[b->n->inputs[i]].name : "";
}

const char *rwb_out_name(const rwb *b, int i)
{
    return i < b->n->n_outputs && b->n->outputs[i] >= 0 ? b->g->values[b->n->outputs[i]].name : "";
}

const gr_type *rwb_in_type(const rwb *b, int i)
{
    static const gr_type none = {TDM_KIND_TENSOR, TDM_UNDEFINED, -1, {{0, NULL}}, 0, TDM_UNDEFINED};
    return i < b->n->n_inputs && b->n->inputs[i] >= 0 ? &b->g->values[b->n->inputs[i]].type : &none;
}

const tdm_tensor *rwb_in_const(const rwb *b, int i)
{
    return i < b->n->n_inputs && b->n->inputs[i] >= 0 ? b->g->values[b->n->inputs[i]].init : NULL;
}

/* Output i is produced and read (by a node or as a graph output). */
int rwb_out_used(const rwb *b, int i)
{
    if (i >= b->n->n_outputs || b->n->outputs[i] < 0)
        return 0;
    const gr_value *v = &b->g->values[b->n->outputs[i]];
    return v->is_output || v->n_consumers > 0;
}

int rwb_is_float(tdm_dtype dt)
{
    return dt == TDM_FLOAT || dt == TDM_FLOAT16 || dt == TDM_BFLOAT16 || dt == TDM_DOUBLE;
}

gr_rw_node *rwb_op(rwb *b, const char *type, int n_in, const char *a, const char *c, const char *out)
{
    const char *in[2] = {a, c};
    gr_rw_node *n = gr_rw_node_add(b->r, type, n_in, in, 1, &out);
    if (!n)
        b->fail = 1;
    return n;
}

/* A scalar constant of the input's float type. */
const char *rwb_scalar(rwb *b, double v)
{
    if (b->nt >= RWB_TMPS) {
        b->fail = 1;
        return "";
    }
    char *name = b->tmp[b->nt++];
    if (gr_rw_const(b->r, b->g, b->ct, 0, NULL, &v, name, NAME))
        b->fail = 1;
    return name;
}

const char *rwb_ints(rwb *b, int n, const int64_t *v)
{
    if (b->nt >= RWB_TMPS) {
        b->fail = 1;
        return "";
    }
    char *name = b->tmp[b->nt++];
    if (gr_rw_const_i64(b->r, b->g, n, v, name, NAME))
        b->fail = 1;
    return name;
}

/* ReduceMean over axes, keepdims (axes an attribute before opset 18, an
 * input from 18). */
static void reduce_mean(rwb *b, const char *x, int n_axes, const int64_t *axes, const char *out)
{
    gr_rw_node *n;
    if (b->opset >= 18)
        n = rwb_op(b, "ReduceMean", 2, x, rwb_ints(b, n_axes, axes), out);
    else if ((n = rwb_op(b, "ReduceMean", 1, x, NULL, out)) != NULL)
        gr_rw_attr_ints(n, "axes", n_axes, axes);
    if (n)
        gr_rw_attr_int(n, "keepdims", 1);
}

/* Clip(x, lo, hi): bounds as inputs from opset 11, attributes before. */
static void clip(rwb *b, const char *x, double lo, double hi, const char *out)
{
    if (b->opset >= 11) {
        const char *in[3] = {x, rwb_scalar(b, lo), rwb_scalar(b, hi)};
        if (!gr_rw_node_add(b->r, "Clip", 3, in, 1, &out))
            b->fail = 1;
        return;
    }
    gr_rw_node *n = rwb_op(b, "Clip", 1, x, NULL, out);
    if (n) {
        gr_rw_attr_float(n, "min", (float)lo);
        gr_rw_attr_float(n, "max", (float)hi);
    }
}

/* (x - mean(x)) / sqrt(var(x) + eps) over axes, into out. */
static void normalize(rwb *b, const char *x, int n_axes, const int64_t *axes, double eps, const char *out)
{
    const char *mean = rwb_tmp(b), *d = rwb_tmp(b), *sq = rwb_tmp(b), *var = rwb_tmp(b), *ve = rwb_tmp(b), *sd = rwb_tmp(b);
    reduce_mean(b, x, n_axes, axes, mean);
    rwb_op(b, "Sub", 2, x, mean, d);
    rwb_op(b, "Mul", 2, d, d, sq);
    reduce_mean(b, sq, n_axes, axes, var);
    rwb_op(b, "Add", 2, var, rwb_scalar(b, eps), ve);
    rwb_op(b, "Sqrt", 1, ve, NULL, sd);
    rwb_op(b, "Div", 2, d, sd, out);
}

int rwb_done(const rwb *b) { return b->fail ? -1 : 1; }

static int narrow(tdm_dtype dt) { return dt == TDM_FLOAT16 || dt == TDM_BFLOAT16; }

/* x as float32 when the node's type is float16/bfloat16 (the
 * normalisations compute in float32: LayerNormalization's stash_type, the
 * kernels), else x itself. */
static const char *widen(rwb *b, const char *x)
{
    if (!narrow(b->dt) || !*x)
        return x;
    const char *w = rwb_tmp(b);
    gr_rw_node *n = rwb_op(b, "Cast", 1, x, NULL, w);
    if (n)
        gr_rw_attr_int(n, "to", TDM_FLOAT);
    return w;
}

/* The output name of a normalisation: a float32 temporary that narrow()
 * casts back into out when the node's type is narrow. */
static const char *wide_out(rwb *b, const char *out) { return narrow(b->dt) ? rwb_tmp(b) : out; }

static void narrow_back(rwb *b, const char *w, const char *out)
{
    if (!narrow(b->dt))
        return;
    gr_rw_node *n = rwb_op(b, "Cast", 1, w, NULL, out);
    if (n)
        gr_rw_attr_int(n, "to", b->dt);
}

/* ---- normalisations ---- */

static int rule_layernorm(const gr_graph *g, int node, gr_rw *r)
{
    rwb b;
    rwb_init(&b, r, g, node);
    const gr_type *xt = rwb_in_type(&b, 0);
    int rank = xt->rank;
    if (rank < 1 || !rwb_is_float(b.dt) || rwb_out_used(&b, 1) || rwb_out_used(&b, 2))
        return 0;
    int64_t axis = gr_attr_int(b.n, "axis", -1);
    if (axis < 0)
        axis += rank;
    if (axis < 0 || axis >= rank)
        return 0;
    double eps = gr_attr_float(b.n, "epsilon", 1e-5f);
    int64_t axes[TDM_MAX_RANK];
    int na = 0;
    for (int64_t a = axis; a < rank; a++)
        axes[na++] = a;
    if (narrow(b.dt))
        b.ct = TDM_FLOAT;
    const char *nr = rwb_tmp(&b), *has_b = rwb_in_name(&b, 2), *out = wide_out(&b, rwb_out_name(&b, 0));
    normalize(&b, widen(&b, rwb_in_name(&b, 0)), na, axes, eps, nr);
    if (*has_b) {
        const char *y = rwb_tmp(&b);
        rwb_op(&b, "Mul", 2, nr, widen(&b, rwb_in_name(&b, 1)), y);
        rwb_op(&b, "Add", 2, y, widen(&b, has_b), out);
    } else {
        rwb_op(&b, "Mul", 2, nr, widen(&b, rwb_in_name(&b, 1)), out);
    }
    narrow_back(&b, out, rwb_out_name(&b, 0));
    return rwb_done(&b);
}

/* A per-channel vector v (shape [C]) as [C, 1, …] (rank - 1 entries) for
 * broadcasting against [N, C, …]. */
static const char *per_channel(rwb *b, const char *v, int rank)
{
    int64_t shape[TDM_MAX_RANK];
    shape[0] = -1;
    for (int k = 1; k < rank - 1; k++)
        shape[k] = 1;
    const char *out = rwb_tmp(b);
    rwb_op(b, "Reshape", 2, v, rwb_ints(b, rank - 1, shape), out);
    return out;
}

static int rule_instancenorm(const gr_graph *g, int node, gr_rw *r)
{
    rwb b;
    rwb_init(&b, r, g, node);
    int rank = rwb_in_type(&b, 0)->rank;
    if (rank < 3 || !rwb_is_float(b.dt))
        return 0;
    int64_t axes[TDM_MAX_RANK];
    for (int a = 2; a < rank; a++)
        axes[a - 2] = a;
    if (narrow(b.dt))
        b.ct = TDM_FLOAT;
    const char *nr = rwb_tmp(&b), *y = rwb_tmp(&b), *out = wide_out(&b, rwb_out_name(&b, 0));
    normalize(&b, widen(&b, rwb_in_name(&b, 0)), rank - 2, axes, gr_attr_float(b.n, "epsilon", 1e-5f), nr);
    rwb_op(&b, "Mul", 2, nr, per_channel(&b, widen(&b, rwb_in_name(&b, 1)), rank), y);
    rwb_op(&b, "Add", 2, y, per_channel(&b, widen(&b, rwb_in_name(&b, 2)), rank), out);
    narrow_back(&b, out, rwb_out_name(&b, 0));
    return rwb_done(&b);
}

static int rule_groupnorm(const gr_graph *g, int node, gr_rw *r)
{
    rwb b;
    rwb_init(&b, r, g, node);
    const gr_type *xt = rwb_in_type(&b, 0);
    int rank = xt->rank;
    int64_t G = gr_attr_int(b.n, "num_groups", 0);
    if (rank < 3 || !rwb_is_float(b.dt) || G < 1)
        return 0;
    for (int d = 1; d < rank; d++)
        if (xt->dims[d].v < 0)
            return 0;
    if (xt->dims[1].v % G)
        return 0;
    int per_channel_scale = b.n->version >= 21;
    int64_t grouped[3] = {0, G, -1}, back[TDM_MAX_RANK], ax[1] = {2}, g3[3] = {1, G, 1};
    back[0] = 0;
    for (int d = 1; d < rank; d++)
        back[d] = xt->dims[d].v;
    if (narrow(b.dt))
        b.ct = TDM_FLOAT;
    const char *xr = rwb_tmp(&b), *nr = rwb_tmp(&b), *y = rwb_tmp(&b), *z = rwb_tmp(&b), *out = wide_out(&b, rwb_out_name(&b, 0));
    rwb_op(&b, "Reshape", 2, widen(&b, rwb_in_name(&b, 0)), rwb_ints(&b, 3, grouped), xr);
    normalize(&b, xr, 1, ax, gr_attr_float(b.n, "epsilon", 1e-5f), nr);
    if (per_channel_scale) {
        rwb_op(&b, "Reshape", 2, nr, rwb_ints(&b, rank, back), y);
        rwb_op(&b, "Mul", 2, y, per_channel(&b, widen(&b, rwb_in_name(&b, 1)), rank), z);
        rwb_op(&b, "Add", 2, z, per_channel(&b, widen(&b, rwb_in_name(&b, 2)), rank), out);
    } else {
        const char *s = rwb_tmp(&b), *c = rwb_tmp(&b), *w = rwb_tmp(&b);
        rwb_op(&b, "Reshape", 2, widen(&b, rwb_in_name(&b, 1)), rwb_ints(&b, 3, g3), s);
        rwb_op(&b, "Reshape", 2, widen(&b, rwb_in_name(&b, 2)), rwb_ints(&b, 3, g3), c);
        rwb_op(&b, "Mul", 2, nr, s, y);
        rwb_op(&b, "Add", 2, y, c, w);
        rwb_op(&b, "Reshape", 2, w, rwb_ints(&b, rank, back), out);
    }
    narrow_back(&b, out, rwb_out_name(&b, 0));
    return rwb_done(&b);
}

/* ---- activations ---- */

/* 0.5 * x * (1 + erf(x / sqrt 2)) */
static void gelu_erf(rwb *b, const char *x, const char *out)
{
    const char *a = rwb_tmp(b), *e = rwb_tmp(b), *c = rwb_tmp(b), *d = rwb_tmp(b);
    rwb_op(b, "Mul", 2, x, rwb_scalar(b, 1.0 / sqrt(2.0)), a);
    rwb_op(b, "Erf", 1, a, NULL, e);
    rwb_op(b, "Add", 2, e, rwb_scalar(b, 1.0), c);
    rwb_op(b, "Mul", 2, x, c, d);
    rwb_op(b, "Mul", 2, d, rwb_scalar(b, 0.5), out);
}

/* 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) */
static void gelu_tanh(rwb *b, const char *x, const char *out)
{
    const char *x2 = rwb_tmp(b), *x3 = rwb_tmp(b), *k = rwb_tmp(b), *s = rwb_tmp(b), *u = rwb_tmp(b), *t = rwb_tmp(b), *c = rwb_tmp(b), *d = rwb_tmp(b);
    rwb_op(b, "Mul", 2, x, x, x2);
    rwb_op(b, "Mul", 2, x2, x, x3);
    rwb_op(b, "Mul", 2, x3, rwb_scalar(b, 0.044715), k);
    rwb_op(b, "Add", 2, x, k, s);
    rwb_op(b, "Mul", 2, s, rwb_scalar(b, sqrt(2.0 / TDM_PI)), u);
    rwb_op(b, "Tanh", 1, u, NULL, t);
    rwb_op(b, "Add", 2, t, rwb_scalar(b, 1.0), c);
    rwb_op(b, "Mul", 2, x, c, d);
    rwb_op(b, "Mul", 2, d, rwb_scalar(b, 0.5), out);
}

static int rule_gelu(const gr_graph *g, int node, gr_rw *r)
{
    rwb b;
    rwb_init(&b, r, g, node);
    if (!rwb_is_float(b.dt))
        return 0;
    if (strcmp(gr_attr_str(b.n, "approximate", "none"), "tanh") == 0)
        gelu_tanh(&b, rwb_in_name(&b, 0), rwb_out_name(&b, 0));
    else
        gelu_erf(&b, rwb_in_name(&b, 0), rwb_out_name(&b, 0));
    return rwb_done(&b);
}

static int rule_gelu_tanh(const gr_graph *g, int node, gr_rw *r)
{
    rwb b;
    rwb_init(&b, r, g, node);
    if (!rwb_is_float(b.dt) || strcmp(gr_attr_str(b.n, "approximate", "none"), "none") != 0)
        return 0;
    gelu_tanh(&b, rwb_in_name(&b, 0), rwb_out_name(&b, 0));
    return rwb_done(&b);
}

/* erf(z) ~ tanh(2/sqrt(pi) * (z + 0.044715 * 2 * z^3)): GELU's tanh form
 * written for erf (z = x / sqrt 2). */
static int rule_erf_tanh(const gr_graph *g, int node, gr_rw *r)
{
    rwb b;
    rwb_init(&b, r, g, node);
    if (!rwb_is_float(b.dt))
        return 0;
    const char *z = rwb_in_name(&b, 0), *z2 = rwb_tmp(&b), *z3 = rwb_tmp(&b), *k = rwb_tmp(&b), *s = rwb_tmp(&b), *u = rwb_tmp(&b);
    rwb_op(&b, "Mul", 2, z, z, z2);
    rwb_op(&b, "Mul", 2, z2, z, z3);
    rwb_op(&b, "Mul", 2, z3, rwb_scalar(&b, 0.044715 * 2.0), k);
    rwb_op(&b, "Add", 2, z, k, s);
    rwb_op(&b, "Mul", 2, s, rwb_scalar(&b, 2.0 / sqrt(TDM_PI)), u);
    rwb_op(&b, "Tanh", 1, u, NULL, rwb_out_name(&b, 0));
    return rwb_done(&b);
}

static int rule_hardsigmoid(const gr_graph *g, int node, gr_rw *r)
{
    rwb b;
    rwb_init(&b, r, g, node);
    if (!rwb_is_float(b.dt))
        return 0;
    const char *a = rwb_tmp(&b), *s = rwb_tmp(&b);
    rwb_op(&b, "Mul", 2, rwb_in_name(&b, 0), rwb_scalar(&b, gr_attr_float(b.n, "alpha", 0.2f)), a);
    rwb_op(&b, "Add", 2, a, rwb_scalar(&b, gr_attr_float(b.n, "beta", 0.5f)), s);
    clip(&b, s, 0.0, 1.0, rwb_out_name(&b, 0));
    return rwb_done(&b);
}

static int rule_hardswish(const gr_graph *g, int node, gr_rw *r)
{
    rwb b;
    rwb_init(&b, r, g, node);
    if (!rwb_is_float(b.dt))
        return 0;
    const char *x = rwb_in_name(&b, 0), *a = rwb_tmp(&b), *s = rwb_tmp(&b), *c = rwb_tmp(&b);
    rwb_op(&b, "Mul", 2, x, rwb_scalar(&b, 1.0 / 6.0), a);
    rwb_op(&b, "Add", 2, a, rwb_scalar(&b, 0.5), s);
    clip(&b, s, 0.0, 1.0, c);
    rwb_op(&b, "Mul", 2, x, c, rwb_out_name(&b, 0));
    return rwb_done(&b);
}

/* softplus(x) = relu(x) + log(1 + exp(-|x|)): no overflow for large x. */
static void softplus(rwb *b, const char *x, const char *out)
{
    const char *a = rwb_tmp(b), *n = rwb_tmp(b), *e = rwb_tmp(b), *p = rwb_tmp(b), *l = rwb_tmp(b), *rl = rwb_tmp(b);
    rwb_op(b, "Abs", 1, x, NULL, a);
    rwb_op(b, "Neg", 1, a, NULL, n);
    rwb_op(b, "Exp", 1, n, NULL, e);
    rwb_op(b, "Add", 2, e, rwb_scalar(b, 1.0), p);
    rwb_op(b, "Log", 1, p, NULL, l);
    rwb_op(b, "Relu", 1, x, NULL, rl);
    rwb_op(b, "Add", 2, rl, l, out);
}

static int rule_softplus(const gr_graph *g, int node, gr_rw *r)
{
    rwb b;
    rwb_init(&b, r, g, node);
    if (!rwb_is_float(b.dt))
        return 0;
    softplus(&b, rwb_in_name(&b, 0), rwb_out_name(&b, 0));
    return rwb_done(&b);
}

static int rule_mish(const gr_graph *g, int node, gr_rw *r)
{
    rwb b;
    rwb_init(&b, r, g, node);
    if (!rwb_is_float(b.dt))
        return 0;
    const char *sp = rwb_tmp(&b), *t = rwb_tmp(&b);
    softplus(&b, rwb_in_name(&b, 0), sp);
    rwb_op(&b, "Tanh", 1, sp, NULL, t);
    rwb_op(&b, "Mul", 2, rwb_in_name(&b, 0), t, rwb_out_name(&b, 0));
    return rwb_done(&b);
}

/* ---- data movement ---- */

/* Slice(x, [start], [end], [axis], [step]) into out (opset >= 10). */
static void slice1(rwb *b, const char *x, int64_t start, int64_t end, int64_t axis, int64_t step, const char *out)
{
    const char *in[5] = {x, rwb_ints(b, 1, &start), rwb_ints(b, 1, &end), rwb_ints(b, 1, &axis), rwb_ints(b, 1, &step)};
    if (!gr_rw_node_add(b->r, "Slice", 5, in, 1, &out))
        b->fail = 1;
}

/* The node's constant int64 list input i (or attribute name when the
 * input is absent): count, or -1 when neither is constant. */
int rwb_const_ints(const rwb *b, int i, const char *attr, int64_t *v, int cap)
{
    const tdm_tensor *t = rwb_in_const(b, i);
    if (t) {
        size_t n = tdm_tensor_count(t);
        if (n > (size_t)cap || (t->dtype != TDM_INT64 && t->dtype != TDM_INT32))
            return -1;
        for (size_t k = 0; k < n; k++)
            v[k] = tensor_get_i64(t, k);
        return (int)n;
    }
    if (*rwb_in_name(b, i))
        return -1;
    const int64_t *a;
    int n = attr ? gr_attr_ints(b->n, attr, &a) : -1;
    if (n < 0 || n > cap)
        return -1;
    for (int k = 0; k < n; k++)
        v[k] = a[k];
    return n;
}

static int rule_pad(const gr_graph *g, int node, gr_rw *r)
{
    rwb b;
    rwb_init(&b, r, g, node);
    const char *mode = gr_attr_str(b.n, "mode", "constant");
    int reflect = strcmp(mode, "reflect") == 0, edge = strcmp(mode, "edge") == 0;
    const gr_type *xt = rwb_in_type(&b, 0);
    int rank = xt->rank;
    int64_t pads[2 * TDM_MAX_RANK], axes[TDM_MAX_RANK];
    if ((!reflect && !edge) || rank < 1 || b.opset < 10)
        return 0;
    int np = rwb_const_ints(&b, 1, b.opset < 11 ? "pads" : NULL, pads, 2 * TDM_MAX_RANK);
    int na = *rwb_in_name(&b, 3) ? rwb_const_ints(&b, 3, NULL, axes, TDM_MAX_RANK) : rank;
    if (np < 0 || na < 0 || np != 2 * na)
        return 0;
    if (!*rwb_in_name(&b, 3))
        for (int k = 0; k < rank; k++)
            axes[k] = k;
    const char *cur = rwb_in_name(&b, 0);
    int last = -1;
    for (int k = 0; k < na; k++) {
        if (axes[k] < 0)
            axes[k] += rank;
        if (axes[k] < 0 || axes[k] >= rank || pads[k] < 0 || pads[k + na] < 0)
            return 0;
        if (pads[k] || pads[k + na])
            last = k;
    }
    if (last < 0)
        return 0;
    for (int k = 0; k <= last; k++) {
        int64_t a = axes[k], lo = pads[k], hi = pads[k + na], n = xt->dims[a].v;
        if (!lo && !hi)
            continue;
        if (n < 1 || (reflect && (lo > n - 1 || hi > n - 1)) || (edge && lo + hi + 1 > GR_RW_MAX_IO))
            return 0;
        const char *in[GR_RW_MAX_IO];
        int m = 0;
        const char *left = lo ? rwb_tmp(&b) : NULL, *right = hi ? rwb_tmp(&b) : NULL;
        if (reflect) {
            if (lo)
                slice1(&b, cur, lo, 0, a, -1, left);
            if (hi)
                slice1(&b, cur, n - 2, n - 2 - hi >= 0 ? n - 2 - hi : -(n + 1), a, -1, right);
            if (lo)
                in[m++] = left;
            in[m++] = cur;
            if (hi)
                in[m++] = right;
        } else {
            if (lo)
                slice1(&b, cur, 0, 1, a, 1, left);
            if (hi)
                slice1(&b, cur, n - 1, n, a, 1, right);
            for (int64_t i = 0; i < lo; i++)
                in[m++] = left;
            in[m++] = cur;
            for (int64_t i = 0; i < hi; i++)
                in[m++] = right;
        }
        const char *out = k == last ? rwb_out_name(&b, 0) : rwb_tmp(&b);
        gr_rw_node *c = gr_rw_node_add(b.r, "Concat", m, in, 1, &out);
        if (!c)
            return -1;
        gr_rw_attr_int(c, "axis", a);
        cur = out;
    }
    return rwb_done(&b);
}

static int rule_split(const gr_graph *g, int node, gr_rw *r)
{
    rwb b;
    rwb_init(&b, r, g, node);
    const gr_type *xt = rwb_in_type(&b, 0);
    int rank = xt->rank, nout = b.n->n_outputs;
    int64_t axis = gr_attr_int(b.n, "axis", 0), sizes[GR_RW_MAX_IO];
    if (rank < 1 || b.opset < 10 || nout < 1 || nout > GR_RW_MAX_IO)
        return 0;
    if (axis < 0)
        axis += rank;
    if (axis < 0 || axis >= rank || xt->dims[axis].v < 0)
        return 0;
    int64_t n = xt->dims[axis].v;
    int ns = rwb_const_ints(&b, 1, b.opset < 13 ? "split" : NULL, sizes, GR_RW_MAX_IO);
    if (ns < 0 && *rwb_in_name(&b, 1))
        return 0;
    if (ns <= 0) {
        /* equal parts; the last smaller (opset 18 num_outputs) */
        int64_t part = (n + nout - 1) / nout;
        for (int k = 0; k < nout; k++)
            sizes[k] = k < nout - 1 ? part : n - part * (nout - 1);
        if (n % nout && b.opset < 18)
            return 0;
        ns = nout;
    }
    if (ns != nout)
        return 0;
    int64_t off = 0;
    for (int k = 0; k < nout; k++) {
        if (sizes[k] < 0)
            return 0;
        if (*rwb_out_name(&b, k))
            slice1(&b, rwb_in_name(&b, 0), off, off + sizes[k], axis, 1, rwb_out_name(&b, k));
        off += sizes[k];
    }
    if (off != n)
        return 0;
    return rwb_done(&b);
}

/* ---- fusions ---- */

/* MatMul(A[M,K], B[K,N]) whose only reader is Add(·, C) with C of shape
 * [N], [1,N] or [M,N] → Gemm(A, B, C). */
static int rule_gemm(const gr_graph *g, int node, gr_rw *r)
{
    rwb b;
    rwb_init(&b, r, g, node);
    const gr_type *at = rwb_in_type(&b, 0), *bt = rwb_in_type(&b, 1);
    if (at->rank != 2 || bt->rank != 2 || !rwb_is_float(b.dt) || b.n->outputs[0] < 0)
        return 0;
    int v = b.n->outputs[0];
    if (g->values[v].is_output || g->values[v].n_consumers != 1)
        return 0;
    int add = -1;
    for (int k = 0; k < g->n_nodes && add < 0; k++)
        for (int i = 0; i < g->nodes[k].n_inputs; i++)
            if (g->nodes[k].inputs[i] == v)
                add = k;
    if (add < 0 || strcmp(g->nodes[add].op_type, "Add") != 0 || *g->nodes[add].domain || g->nodes[add].n_inputs != 2)
        return 0;
    const gr_node *an = &g->nodes[add];
    int cv = an->inputs[0] == v ? an->inputs[1] : an->inputs[0];
    if (cv < 0 || cv == v)
        return 0;
    const gr_type *ct = &g->values[cv].type;
    int64_t M = at->dims[0].v, N = bt->dims[1].v;
    int ok = N >= 0 && ct->dtype == b.dt &&
             ((ct->rank == 1 && ct->dims[0].v == N) ||
              (ct->rank == 2 && ct->dims[1].v == N && (ct->dims[0].v == 1 || (M >= 0 && ct->dims[0].v == M))));
    if (!ok || an->outputs[0] < 0)
        return 0;
    r->orig[r->n_orig++] = add;
    const char *in[3] = {rwb_in_name(&b, 0), rwb_in_name(&b, 1), g->values[cv].name};
    const char *out = g->values[an->outputs[0]].name;
    if (!gr_rw_node_add(r, "Gemm", 3, in, 1, &out))
        return -1;
    return rwb_done(&b);
}

static const gr_rw_rule rules[] = {
    {"layernorm", "LayerNormalization", GR_RW_DECOMPOSE, rule_layernorm,
     "ReduceMean, Sub, Mul, Add, Sqrt, Div (+ Mul, Add for scale and bias)", GR_RW_WHEN_OP},
    {"groupnorm", "GroupNormalization", GR_RW_DECOMPOSE, rule_groupnorm,
     "Reshape to groups, ReduceMean, Sub, Mul, Add, Sqrt, Div, Reshape back, Mul, Add", GR_RW_WHEN_OP},
    {"instancenorm", "InstanceNormalization", GR_RW_DECOMPOSE, rule_instancenorm,
     "ReduceMean over the spatial axes, Sub, Mul, Add, Sqrt, Div, Mul, Add", GR_RW_WHEN_OP},
    {"gelu", "Gelu", GR_RW_DECOMPOSE, rule_gelu, "0.5 x (1 + erf(x / sqrt 2)) with Mul, Erf, Add (its tanh form with Tanh)", GR_RW_WHEN_OP},
    {"gelu-tanh", "Gelu", GR_RW_APPROX, rule_gelu_tanh, "the tanh approximation of GELU with Mul, Add, Tanh", GR_RW_WHEN_OP},
    {"erf-tanh", "Erf", GR_RW_APPROX, rule_erf_tanh, "tanh(2/sqrt(pi) (z + 0.0894 z^3)) with Mul, Add, Tanh", GR_RW_WHEN_OP},
    {"hardsigmoid", "HardSigmoid", GR_RW_DECOMPOSE, rule_hardsigmoid, "Clip(alpha x + beta, 0, 1)", GR_RW_WHEN_OP},
    {"hardswish", "HardSwish", GR_RW_DECOMPOSE, rule_hardswish, "x Clip(x / 6 + 0.5, 0, 1)", GR_RW_WHEN_OP},
    {"softplus", "Softplus", GR_RW_DECOMPOSE, rule_softplus, "Relu(x) + Log(1 + Exp(-|x|))", GR_RW_WHEN_OP},
    {"mish", "Mish", GR_RW_DECOMPOSE, rule_mish, "x Tanh(softplus(x)), softplus as Relu, Abs, Neg, Exp, Add, Log", GR_RW_WHEN_OP},
    {"pad", "Pad", GR_RW_DECOMPOSE, rule_pad, "reflect and edge padding as Slice + Concat per axis", GR_RW_WHEN_OP},
    {"split", "Split", GR_RW_DECOMPOSE, rule_split, "one Slice per output", GR_RW_WHEN_OP},
    {"gemm", "MatMul", GR_RW_FUSE, rule_gemm, "MatMul + Add of a row or matrix bias as one Gemm", GR_RW_WHEN_OP},
    {"gather-scalar", "Gather", GR_RW_DECOMPOSE, gr_rw_rule_gather_scalar,
     "Gather with a one-element index, then Squeeze of the gathered axis", GR_RW_WHEN_SHAPE},
    {"einsum", "Einsum", GR_RW_DECOMPOSE, gr_rw_rule_einsum,
     "1 to 4 operands as Transpose, Reshape, Slice (diagonals), ReduceSum, MatMul, pairwise from the left", GR_RW_WHEN_OP},
    {"conv-bn", "BatchNormalization", GR_RW_FUSE, gr_rw_rule_conv_bn,
     "Conv or ConvTranspose + BatchNormalization as one Conv with folded weights and bias", GR_RW_WHEN_OP},
    {"cast-insert", "*", GR_RW_DTYPE, gr_rw_rule_cast_insert,
     "int64 inputs and outputs through int32 (Cast) where their range is proven", GR_RW_WHEN_DTYPE},
    {"cast-fp16", "*float", GR_RW_APPROX, gr_rw_rule_cast_fp16,
     "float32 inputs and outputs through float16 (Cast), the node in float16", GR_RW_WHEN_DTYPE},
};

const gr_rw_rule *gr_rw_rules(size_t *n)
{
    *n = sizeof rules / sizeof rules[0];
    return rules;
}
