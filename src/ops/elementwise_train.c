/* The optimizer ops of the ai.onnx.preview.training domain: Adagrad, Adam
 * and Momentum. Each updates n tensors elementwise in one node; inputs are
 * R (learning rate), T (step count), then n tensors per group (X, G, and
 * the optimizer's state), outputs n tensors per updated group. Scalars are
 * computed in double, elements in double and rounded to the tensor type. */
#include "ops/elementwise.h"

#include <math.h>
#include <string.h>

enum { OPT_ADAGRAD, OPT_ADAM, OPT_MOMENTUM };

#define OCHUNK 256

typedef struct optpar {
    int kind;
    double r, norm, eps, alpha, beta, post, gbeta;
    int nesterov;
} optpar;

/* Updates element chunk: x, g, s1 (H / V), s2 (Adam's H) in place. */
static void opt_chunk(const optpar *p, size_t n, double *x, const double *g, double *s1, double *s2)
{
    for (size_t i = 0; i < n; i++) {
        double gr = p->norm * x[i] + g[i];
        switch (p->kind) {
        case OPT_ADAGRAD:
            s1[i] = s1[i] + gr * gr;
            x[i] = x[i] - p->r * gr / (sqrt(s1[i]) + p->eps);
            break;
        case OPT_ADAM:
            s1[i] = p->alpha * s1[i] + (1 - p->alpha) * gr;
            s2[i] = p->beta * s2[i] + (1 - p->beta) * gr * gr;
            x[i] = (1 - p->post) * (x[i] - p->r * (s1[i] / (sqrt(s2[i]) + p->eps)));
            break;
        default:
            s1[i] = p->alpha * s1[i] + p->gbeta * gr;
            x[i] = p->nesterov ? x[i] - p->r * (gr + p->alpha * s1[i]) : x[i] - p->r * s1[i];
            break;
        }
    }
}

static tdm_status opt_run(op_ctx *ctx, int kind)
{
    tdm_status st;
    const gr_node *nd = ctx->node;
    int groups = kind == OPT_ADAM ? 4 : 3; /* input groups after R, T */
    int outs = groups - 1;                 /* X and the state, not G */
    if (ctx->n_in < 2 + groups || (ctx->n_in - 2) % groups)
        return op_fail(ctx, TDM_E_MODEL, "%s takes R, T and %d groups of equally many tensors, not %d inputs",
                       nd->op_type, groups, ctx->n_in);
    int n = (ctx->n_in - 2) / groups;
    if (ctx->n_out > outs * n)
        return op_fail(ctx, TDM_E_MODEL, "%s updating %d tensors has at most %d outputs, not %d", nd->op_type, n,
                       outs * n, ctx->n_out);
    for (int i = 0; i < ctx->n_in; i++) {
        const tdm_tensor *t = ctx->in[i];
        if (!t || t->kind != TDM_KIND_TENSOR)
            return op_fail(ctx, TDM_E_RUNTIME, "input %d must be a tensor", i);
        if (i >= 2 && t->dtype != TDM_FLOAT && t->dtype != TDM_DOUBLE)
            return op_fail(ctx, TDM_E_UNSUPPORTED, "input %d must be float or double, not %s", i,
                           tdm_dtype_name(t->dtype));
    }
    const tdm_tensor *R = ctx->in[0], *T = ctx->in[1];
    if (R->count != 1 || !dtype_is_float(R->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 (R) must be a float scalar");
    if (T->count != 1 || T->dtype != TDM_INT64)
        return op_fail(ctx, TDM_E_RUNTIME, "input 1 (T) must be an int64 scalar");
    double r = tensor_get_f64(R, 0);
    int64_t t = ((const int64_t *)T->data)[0];
    optpar p;
    memset(&p, 0, sizeof p);
    p.kind = kind;
    p.norm = gr_attr_float(nd, "norm_coefficient", 0.0f);
    p.eps = gr_attr_float(nd, "epsilon", 1e-6f); /* the schema default */
    if (kind == OPT_ADAGRAD) {
        p.r = r / (1 + (double)t * gr_attr_float(nd, "decay_factor", 0.0f));
    } else if (kind == OPT_ADAM) {
        p.alpha = gr_attr_float(nd, "alpha", 0.9f);
        p.beta = gr_attr_float(nd, "beta", 0.999f);
        p.post = gr_attr_float(nd, "norm_coefficient_post", 0.0f);
        p.r = t > 0 ? r * sqrt(1 - pow(p.beta, (double)t)) / (1 - pow(p.alpha, (double)t)) : r;
    } else {
        const char *mode = gr_attr_str(nd, "mode", "");
        if (strcmp(mode, "standard") != 0 && strcmp(mode, "nesterov") != 0)
            return op_fail(ctx, TDM_E_MODEL, "attribute 'mode' must be \"standard\" or \"nesterov\", not \"%s\"",
                           mode);
        p.nesterov = mode[0] == 'n';
        p.alpha = gr_attr_float(nd, "alpha", 0.0f);
        p.beta = gr_attr_float(nd, "beta", 0.0f);
        p.gbeta = t > 0 ? p.beta : 1.0;
        p.r = r;
    }
    for (int j = 0; j < n; j++) {
        const tdm_tensor *x = ctx->in[2 + j];
        const tdm_tensor *grp[4];
        for (int g = 0; g < groups; g++) {
            grp[g] = ctx->in[2 + g * n + j];
            if (!shape_equal(grp[g]->rank, grp[g]->dims, x->rank, x->dims) || grp[g]->dtype != x->dtype)
                return op_fail(ctx, TDM_E_RUNTIME, "input %d must have the shape and type of input %d",
                               2 + g * n + j, 2 + j);
        }
        tdm_tensor *o[3] = {NULL, NULL, NULL};
        for (int k = 0; k < outs; k++) {
            int oi = k * n + j;
            if (!op_out_wanted(ctx, oi))
                continue;
            if ((st = op_out(ctx, oi, x->dtype, x->rank, x->dims)))
                return st;
            o[k] = ctx->out[oi];
        }
        double bx[OCHUNK], bg[OCHUNK], b1[OCHUNK], b2[OCHUNK];
        for (size_t off = 0; off < x->count; off += OCHUNK) {
            size_t m = x->count - off < OCHUNK ? x->count - off : OCHUNK;
            op_ew_load(x->data, x->dtype, off, m, EW_F64, bx);
            op_ew_load(grp[1]->data, x->dtype, off, m, EW_F64, bg);
            op_ew_load(grp[2]->data, x->dtype, off, m, EW_F64, b1);
            if (groups == 4)
                op_ew_load(grp[3]->data, x->dtype, off, m, EW_F64, b2);
            opt_chunk(&p, m, bx, bg, b1, b2);
            const double *res[3] = {bx, b1, b2};
            for (int k = 0; k < outs; k++)
                if (o[k])
                    op_ew_store(res[k], EW_F64, o[k]->data, x->dtype, off, m);
        }
    }
    return TDM_OK;
}

tdm_status op_run_Adagrad(op_ctx *ctx) { return opt_run(ctx, OPT_ADAGRAD); }
tdm_status op_run_Adam(op_ctx *ctx) { return opt_run(ctx, OPT_ADAM); }
tdm_status op_run_Momentum(op_ctx *ctx) { return opt_run(ctx, OPT_MOMENTUM); }

/* Outputs have the types of X and the state tensors, group by group. */
tdm_status op_infer_optimizer(op_infer_ctx *ctx)
{
    int groups = strcmp(ctx->node->op_type, "Adam") == 0 ? 4 : 3;
    if (ctx->n_in < 2 + groups || (ctx->n_in - 2) % groups)
        return TDM_OK;
    int n = (ctx->n_in - 2) / groups;
    for (int oi = 0; oi < ctx->n_out; oi++) {
        int k = oi / n, j = oi % n; /* k: 0 = X, 1.. = state groups (skipping G) */
        int g = k == 0 ? 0 : k + 1;
        if (g < groups)
            op_infer_copy(ctx, oi, 2 + g * n + j);
    }
    return TDM_OK;
}
