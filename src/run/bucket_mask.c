/* Masked bucketing (run/bucket.h, bucket_mask_model): the model rewritten
 * so that the padded region is zero before every spatial window op and
 * out of every channel gate's mean, as in an unpadded run. */
#include "run/bucket.h"
#include "core/mem.h"
#include "core/tensor.h"
#include "graph/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_STRIDES 16

typedef struct mctx {
    tdm_err *e;
    gr_graph *g;
    int mask;                 /* the mask input's value id */
    int strides[MAX_STRIDES]; /* the mask at each stride: value ids */
    int at[MAX_STRIDES], gap[MAX_STRIDES];
    int n;
    int serial;
} mctx;

static tdm_status add_node(mctx *c, const char *op, int n_in, const char *const *in, const char *out, int *idx)
{
    char name[256];
    snprintf(name, sizeof name, "bucket_mask/%s/%d", op, c->serial++);
    const char *outs[1] = {out};
    return gr_node_add(c->e, c->g, name, op, "", n_in, in, 1, outs, idx);
}

static tdm_status add_i64(mctx *c, const char *name, int64_t a, int64_t b)
{
    int id;
    int64_t dims[1] = {2};
    tdm_tensor *t = NULL;
    tdm_status st = tensor_new(c->e, TDM_INT64, 1, dims, &t);
    if (st || (st = gr_value_get(c->e, c->g, name, &id)) != TDM_OK) {
        tdm_tensor_destroy(t);
        return st;
    }
    ((int64_t *)t->data)[0] = a;
    ((int64_t *)t->data)[1] = b;
    c->g->values[id].init = t;
    c->g->values[id].is_initializer = 1;
    gr_type_from_tensor(&c->g->values[id].type, t);
    return TDM_OK;
}

/* The mask at stride s (Slice of the input mask with steps s), its value name in out. */
static tdm_status mask_at(mctx *c, int s, const char **out)
{
    for (int i = 0; i < c->n; i++)
        if (c->at[i] == s) {
            *out = c->g->values[c->strides[i]].name;
            return TDM_OK;
        }
    if (c->n == MAX_STRIDES)
        return err_set(c->e, TDM_E_UNSUPPORTED, "bucketing: more than %d strides", MAX_STRIDES);
    tdm_status st;
    char mname[64];
    int idx;
    if (s == 1) {
        snprintf(mname, sizeof mname, "%s", c->g->values[c->mask].name);
    } else {
        char st_[64], en[64], ax[64], sp[64];
        snprintf(st_, sizeof st_, "bucket_mask/starts");
        snprintf(en, sizeof en, "bucket_mask/ends");
        snprintf(ax, sizeof ax, "bucket_mask/axes");
        snprintf(sp, sizeof sp, "bucket_mask/steps_%d", s);
        snprintf(mname, sizeof mname, "bucket_mask/stride_%d", s);
        if ((gr_value_find(c->g, st_) < 0 && ((st = add_i64(c, st_, 0, 0)) != TDM_OK ||
                                              (st = add_i64(c, en, INT64_MAX, INT64_MAX)) != TDM_OK ||
                                              (st = add_i64(c, ax, 2, 3)) != TDM_OK)) ||
            (st = add_i64(c, sp, s, s)) != TDM_OK)
            return st;
        const char *in[5] = {c->g->values[c->mask].name, st_, en, ax, sp};
        if ((st = add_node(c, "Slice", 5, in, mname, &idx)) != TDM_OK)
            return st;
    }
    int id = gr_value_find(c->g, mname);
    c->at[c->n] = s;
    c->strides[c->n] = id;
    c->gap[c->n] = -1;
    c->n++;
    *out = c->g->values[id].name;
    return TDM_OK;
}

/* The scale factor a Resize's constant scales give the last axis (0: unknown). */
static double resize_scale(const gr_graph *g, const gr_node *n)
{
    int v = n->n_inputs >= 3 ? n->inputs[2] : -1;
    const tdm_tensor *t = v >= 0 ? g->values[v].init : NULL;
    if (!t || tdm_tensor_count(t) != 4)
        return 0;
    double h = tensor_get_f64(t, 2), w = tensor_get_f64(t, 3);
    return h == w ? h : 0;
}

static int is_op(const gr_node *n, const char *const *ops)
{
    for (size_t i = 0; ops[i]; i++)
        if (strcmp(n->op_type, ops[i]) == 0)
            return 1;
    return 0;
}

tdm_status bucket_mask_model(tdm_err *e, const tdm_model *m, tdm_model **out)
{
    static const char *const window_ops[] = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", NULL};
    static const char *const gap_ops[] = {"GlobalAveragePool", NULL};
    *out = NULL;
    gr_model *gm = NULL;
    tdm_status st = gr_model_clone(e, m->gm, &gm);
    if (st)
        return st;
    gr_graph *g = gm->main;
    mctx c;
    memset(&c, 0, sizeof c);
    c.e = e;
    c.g = g;
    /* the stride of each value against the image (0: not spatial; -1: reduced) */
    /* each node adds at most 8 values (a Mul, the Slice and its constants, a mean and a Div) */
    double *sv = mem_calloc((size_t)g->n_values + 8 * (size_t)g->n_nodes + 64, sizeof *sv);
    int *order = mem_calloc((size_t)g->n_nodes + 1, sizeof *order);
    int n_nodes = g->n_nodes, image = -1;
    if (!sv || !order) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < n_nodes; i++)
        order[i] = g->order ? g->order[i] : i;
    for (int k = 0; k < g->n_inputs; k++)
        if (g->values[g->inputs[k]].type.rank == 4 && image < 0)
            image = g->inputs[k];
    if (image < 0) {
        st = err_set(e, TDM_E_UNSUPPORTED, "bucketing: the model has no rank-4 image input");
        goto fail;
    }
    sv[image] = 1;
    /* the mask input: 1 x 1 x H x W of the image's H and W */
    {
        gr_type t = g->values[image].type;
        int id;
        if ((st = gr_value_get(e, g, "bucket_mask", &id)) != TDM_OK)
            goto fail;
        t.dtype = TDM_FLOAT;
        t.dims[0].v = 1;
        t.dims[0].sym = NULL;
        t.dims[1].v = 1;
        t.dims[1].sym = NULL;
        g->values[id].type = t;
        g->values[id].has_type = 1;
        g->values[id].is_input = 1;
        int *ins = mem_realloc(g->inputs, ((size_t)g->n_inputs + 1) * sizeof *ins);
        if (!ins) {
            st = err_set(e, TDM_E_NOMEM, "out of memory");
            goto fail;
        }
        g->inputs = ins;
        g->inputs[g->n_inputs++] = id;
        c.mask = id;
    }
    for (int i = 0; i < n_nodes; i++) {
        int ni = order[i];
        double s = 0;
        int global = 0;
        for (int j = 0; j < g->nodes[ni].n_inputs; j++) {
            int v = g->nodes[ni].inputs[j];
            if (v >= 0 && sv[v] > 0 && s == 0)
                s = sv[v];
            if (v >= 0 && sv[v] < 0)
                global = 1;
        }
        if (s == 0) {
            for (int j = 0; global && j < g->nodes[ni].n_outputs; j++)
                if (g->nodes[ni].outputs[j] >= 0)
                    sv[g->nodes[ni].outputs[j]] = -1;
            continue;
        }
        const gr_node *n = &g->nodes[ni];
        double so = s;
        int x = n->inputs[0];
        int masked = x >= 0 && sv[x] > 0 && (is_op(n, window_ops) || is_op(n, gap_ops));
        if (is_op(n, window_ops)) {
            const int64_t *strides = NULL;
            int k = gr_attr_ints(n, "strides", &strides);
            int64_t sh = k >= 2 ? strides[0] : 1, sw = k >= 2 ? strides[1] : 1;
            if (sh != sw) {
                st = err_set(e, TDM_E_UNSUPPORTED,
                             "bucketing refused (SHAPE_UNSUPPORTED): %s '%s' has strides %lldx%lld; masking needs equal "
                             "strides on H and W",
                             n->op_type, n->name, (long long)sh, (long long)sw);
                goto fail;
            }
            so = strcmp(n->op_type, "ConvTranspose") == 0 ? s / (double)sh : s * (double)sh;
        } else if (is_op(n, gap_ops)) {
            so = -1;
        } else if (strcmp(n->op_type, "Resize") == 0 || strcmp(n->op_type, "Upsample") == 0) {
            double r = resize_scale(g, n);
            if (r <= 0) {
                st = err_set(e, TDM_E_UNSUPPORTED,
                             "bucketing refused (SHAPE_UNSUPPORTED): %s '%s' has no constant scales equal on H and W",
                             n->op_type, n->name);
                goto fail;
            }
            so = s / r;
        }
        if (masked) {
            double xs = sv[x];
            int is = (int)lround(xs);
            if (is < 1 || fabs(xs - is) > 1e-9) {
                st = err_set(e, TDM_E_UNSUPPORTED,
                             "bucketing refused (SHAPE_UNSUPPORTED): %s '%s' reads a map at stride %g of the image, "
                             "not a whole number",
                             n->op_type, n->name, xs);
                goto fail;
            }
            const char *mname = NULL;
            char xm[300];
            int idx;
            if ((st = mask_at(&c, is, &mname)) != TDM_OK)
                goto fail;
            char xname[256], mcopy[64];
            snprintf(xname, sizeof xname, "%s", g->values[x].name);
            snprintf(mcopy, sizeof mcopy, "%s", mname);
            snprintf(xm, sizeof xm, "%s/bucket_masked/%d", xname, ni);
            const char *in[2] = {xname, mcopy};
            if ((st = add_node(&c, "Mul", 2, in, xm, &idx)) != TDM_OK)
                goto fail;
            int xm_id = gr_value_find(g, xm);
            g->nodes[ni].inputs[0] = xm_id;
            if (is_op(&g->nodes[ni], gap_ops)) {
                /* the mean over the real region: GAP(X * M) / GAP(M) */
                int slot = -1;
                for (int k = 0; k < c.n; k++)
                    if (c.at[k] == is)
                        slot = k;
                char gm_name[64], raw[300], yname[256];
                snprintf(gm_name, sizeof gm_name, "bucket_mask/mean_%d", is);
                if (c.gap[slot] < 0) {
                    const char *gin[1] = {mcopy};
                    if ((st = add_node(&c, "GlobalAveragePool", 1, gin, gm_name, &idx)) != TDM_OK)
                        goto fail;
                    c.gap[slot] = gr_value_find(g, gm_name);
                }
                int y = g->nodes[ni].outputs[0];
                snprintf(yname, sizeof yname, "%s", g->values[y].name);
                snprintf(raw, sizeof raw, "%s/bucket_mean", yname);
                const char *din[2] = {yname, gm_name};
                if ((st = add_node(&c, "Div", 2, din, raw, &idx)) != TDM_OK)
                    goto fail;
                int raw_id = gr_value_find(g, raw);
                sv[raw_id] = -1;
                /* the consumers of y read the corrected mean */
                for (int k = 0; k < g->n_nodes; k++)
                    for (int j = 0; k != idx && j < g->nodes[k].n_inputs; j++)
                        if (g->nodes[k].inputs[j] == y)
                            g->nodes[k].inputs[j] = raw_id;
                for (int k = 0; k < g->n_outputs; k++)
                    if (g->outputs[k] == y) {
                        st = err_set(e, TDM_E_UNSUPPORTED, "bucketing: output '%s' is a channel mean", yname);
                        goto fail;
                    }
            }
        }
        for (int j = 0; j < g->nodes[ni].n_outputs; j++)
            if (g->nodes[ni].outputs[j] >= 0 && g->nodes[ni].outputs[j] < g->n_values)
                sv[g->nodes[ni].outputs[j]] = so;
    }
    mem_free(sv);
    mem_free(order);
    return model_build(e, gm, m->path ? m->path : "bucket", out);
fail:
    mem_free(sv);
    mem_free(order);
    gr_model_free(gm);
    return st;
}
