/* ai.onnx.ml tree ensembles: TreeEnsembleClassifier and
 * TreeEnsembleRegressor (ai.onnx.ml 1 and 3: node lists keyed by tree and
 * node id, thresholds and weights as floats or *_as_tensor) and
 * TreeEnsemble (ai.onnx.ml 5: node and leaf arrays, set membership). The
 * three become one form (ens) and are evaluated and aggregated as
 * onnxruntime does: a weight counts for its target when its leaf is
 * reached, a target no leaf reached scores 0, base values are added after
 * SUM, AVERAGE (sum / trees), MIN or MAX, and the classifier's two-class
 * cases follow onnxruntime's rules (see finish_binary). */
#include "ops/ml.h"
#include "core/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { M_LEQ, M_LT, M_GTE, M_GT, M_EQ, M_NEQ, M_MEMBER, M_LEAF };
enum { AGG_AVERAGE, AGG_SUM, AGG_MIN, AGG_MAX };

/* A child or root: >= 0 a node index, < 0 the leaf -(ref + 1). */
typedef int64_t tref;

typedef struct tnode {
    int64_t feature;
    double th;
    int mode;
    int miss_true;
    tref child[2];        /* when true, when false */
    size_t set_at, set_n; /* M_MEMBER: its values in ens.sets */
} tnode;

typedef struct ens {
    size_t n_nodes;
    tnode *nodes;
    size_t n_leaves;
    size_t *leaf_at; /* n_leaves + 1 offsets into the weights */
    int64_t *w_target;
    double *w_value;
    size_t n_trees;
    tref *roots;
    double *sets;
    size_t n_sets;
    int64_t n_targets;
    int agg;
    ml_post post;
    double *base;
    size_t n_base;
} ens;

static void ens_free(ens *e)
{
    mem_free(e->nodes);
    mem_free(e->leaf_at);
    mem_free(e->w_target);
    mem_free(e->w_value);
    mem_free(e->roots);
    mem_free(e->sets);
    mem_free(e->base);
}

/* A float list attribute, or its *_as_tensor form (float or double), as
 * doubles; *n = 0 and *out = NULL when both are absent. */
static tdm_status attr_doubles(op_ctx *ctx, const char *name, double **out, size_t *n)
{
    char tname[64];
    *out = NULL;
    *n = 0;
    const float *f;
    int k = gr_attr_floats(ctx->node, name, &f);
    snprintf(tname, sizeof tname, "%s_as_tensor", name);
    const gr_attr *t = gr_attr_find(ctx->node, tname);
    const gr_attr *plain = gr_attr_find(ctx->node, name);
    if (plain && plain->type == GA_TENSOR) { /* ai.onnx.ml 5: the attribute itself is a tensor */
        t = plain;
        snprintf(tname, sizeof tname, "%s", name);
    }
    if (t && t->type == GA_TENSOR && t->t) {
        if (!(DT_BIT(t->t->dtype) & (DT_BIT(TDM_FLOAT) | DT_BIT(TDM_DOUBLE) | DT_BIT(TDM_FLOAT16))))
            return op_fail(ctx, TDM_E_MODEL, "attribute %s is a %s tensor, not a float or double one", tname,
                           tdm_dtype_name(t->t->dtype));
        k = (int)t->t->count;
        if (k > 0 && !(*out = mem_calloc((size_t)k, sizeof(double))))
            return op_fail(ctx, TDM_E_NOMEM, "out of memory for %s", tname);
        for (int i = 0; i < k; i++)
            (*out)[i] = tensor_get_f64(t->t, (size_t)i);
        *n = (size_t)(k > 0 ? k : 0);
        return TDM_OK;
    }
    if (k <= 0)
        return TDM_OK;
    if (!(*out = mem_calloc((size_t)k, sizeof(double))))
        return op_fail(ctx, TDM_E_NOMEM, "out of memory for %s", name);
    for (int i = 0; i < k; i++)
        (*out)[i] = f[i];
    *n = (size_t)k;
    return TDM_OK;
}

/* An int list attribute that must have n entries (optional: may be absent). */
static tdm_status attr_ints_n(op_ctx *ctx, const char *name, size_t n, int optional, const int64_t **out)
{
    int k = gr_attr_ints(ctx->node, name, out);
    if (k < 0 && optional) {
        *out = NULL;
        return TDM_OK;
    }
    if (k < 0 || (size_t)k != n)
        return op_fail(ctx, TDM_E_MODEL, "attribute %s has %d values, %zu expected", name, k < 0 ? 0 : k, n);
    return TDM_OK;
}

/* --------------------------------------------------- ai.onnx.ml 1 and 3 form */

typedef struct key_ix {
    int64_t tree, node;
    size_t ix;
} key_ix;

static int key_cmp(const void *a, const void *b)
{
    const key_ix *x = a, *y = b;
    if (x->tree != y->tree)
        return x->tree < y->tree ? -1 : 1;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return 0;
}

static const key_ix *key_find(const key_ix *keys, size_t n, int64_t tree, int64_t node)
{
    key_ix k = {tree, node, 0};
    return bsearch(&k, keys, n, sizeof *keys, key_cmp);
}

static tref ref_of(const ens *e, size_t ix) { return e->nodes[ix].mode == M_LEAF ? -(tref)ix - 1 : (tref)ix; }

/* Builds ens from the node lists; wp is "target" or "class". */
static tdm_status build_v1(op_ctx *ctx, const char *wp, ens *e)
{
    tdm_status st = TDM_OK;
    key_ix *keys = NULL;
    double *vals = NULL;
    size_t nv;
    const int64_t *tid, *nid, *fid, *tn, *fn, *miss;
    char *const *modes;
    int nm = ml_attr_strings(ctx->node, "nodes_modes", &modes);
    if (nm <= 0)
        return op_fail(ctx, TDM_E_MODEL, "attribute nodes_modes is missing or empty");
    size_t n = (size_t)nm;
    if ((st = attr_ints_n(ctx, "nodes_treeids", n, 0, &tid)) || (st = attr_ints_n(ctx, "nodes_nodeids", n, 0, &nid)) ||
        (st = attr_ints_n(ctx, "nodes_featureids", n, 0, &fid)) ||
        (st = attr_ints_n(ctx, "nodes_truenodeids", n, 0, &tn)) ||
        (st = attr_ints_n(ctx, "nodes_falsenodeids", n, 0, &fn)) ||
        (st = attr_ints_n(ctx, "nodes_missing_value_tracks_true", n, 1, &miss)) ||
        (st = attr_doubles(ctx, "nodes_values", &vals, &nv)))
        goto done;
    if (nv != n) {
        st = op_fail(ctx, TDM_E_MODEL, "nodes_values has %zu values for %zu nodes", nv, n);
        goto done;
    }
    e->n_nodes = e->n_leaves = n;
    if (!(e->nodes = mem_calloc(n, sizeof *e->nodes)) || !(keys = mem_calloc(n, sizeof *keys)) ||
        !(e->roots = mem_calloc(n, sizeof *e->roots)) || !(e->leaf_at = mem_calloc(n + 1, sizeof(size_t)))) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory for %zu tree nodes", n);
        goto done;
    }
    static const char *const names[] = {"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT",
                                        "BRANCH_EQ",  "BRANCH_NEQ", "BRANCH_MEMBER", "LEAF"};
    for (size_t i = 0; i < n; i++) {
        tnode *t = &e->nodes[i];
        t->mode = -1;
        for (int m = 0; m < 8; m++)
            if (m != M_MEMBER && strcmp(modes[i], names[m]) == 0)
                t->mode = m;
        if (t->mode < 0) {
            st = op_fail(ctx, TDM_E_UNSUPPORTED, "node %zu of the ensemble has mode '%.32s'", i, modes[i]);
            goto done;
        }
        t->feature = fid[i];
        t->th = vals[i];
        t->miss_true = miss && miss[i] == 1;
        keys[i] = (key_ix){tid[i], nid[i], i};
        if (i == 0 || tid[i] != tid[i - 1]) /* a tree starts where its id first appears */
            e->roots[e->n_trees++] = (tref)i;
    }
    qsort(keys, n, sizeof *keys, key_cmp);
    for (size_t i = 1; i < n; i++)
        if (!key_cmp(&keys[i - 1], &keys[i])) {
            st = op_fail(ctx, TDM_E_MODEL, "node %lld of tree %lld appears twice", (long long)keys[i].node,
                         (long long)keys[i].tree);
            goto done;
        }
    for (size_t i = 0; i < n; i++) {
        tnode *t = &e->nodes[i];
        if (t->mode == M_LEAF)
            continue;
        for (int b = 0; b < 2; b++) {
            const key_ix *k = key_find(keys, n, tid[i], b ? fn[i] : tn[i]);
            if (!k || k->ix == i) {
                st = op_fail(ctx, TDM_E_MODEL, "node %lld of tree %lld: its %s node %lld is not in the tree",
                             (long long)nid[i], (long long)tid[i], b ? "false" : "true",
                             (long long)(b ? fn[i] : tn[i]));
                goto done;
            }
            t->child[b] = (tref)k->ix;
        }
    }
    for (size_t i = 0; i < n; i++) {
        for (int b = 0; b < 2; b++)
            if (e->nodes[i].mode != M_LEAF)
                e->nodes[i].child[b] = ref_of(e, (size_t)e->nodes[i].child[b]);
    }
    for (size_t r = 0; r < e->n_trees; r++)
        e->roots[r] = ref_of(e, (size_t)e->roots[r]);

    /* the weights, grouped by leaf */
    char an[48];
    const int64_t *wt, *wn, *wi;
    snprintf(an, sizeof an, "%s_treeids", wp);
    int nw = gr_attr_ints(ctx->node, an, &wt);
    if (nw < 0)
        nw = 0;
    size_t w = (size_t)nw;
    mem_free(vals);
    vals = NULL;
    snprintf(an, sizeof an, "%s_nodeids", wp);
    if ((st = attr_ints_n(ctx, an, w, 0, &wn)))
        goto done;
    snprintf(an, sizeof an, "%s_ids", wp);
    if ((st = attr_ints_n(ctx, an, w, 0, &wi)))
        goto done;
    snprintf(an, sizeof an, "%s_weights", wp);
    if ((st = attr_doubles(ctx, an, &vals, &nv)))
        goto done;
    if (nv != w) {
        st = op_fail(ctx, TDM_E_MODEL, "%s has %zu values for %zu leaves", an, nv, w);
        goto done;
    }
    if (w && (!(e->w_target = mem_calloc(w, sizeof(int64_t))) || !(e->w_value = mem_calloc(w, sizeof(double))))) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory for %zu leaf weights", w);
        goto done;
    }
    size_t *leaf_of = w ? mem_calloc(w, sizeof(size_t)) : NULL;
    if (w && !leaf_of) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory for %zu leaf weights", w);
        goto done;
    }
    for (size_t i = 0; i < w; i++) {
        const key_ix *k = key_find(keys, n, wt[i], wn[i]);
        if (!k || e->nodes[k->ix].mode != M_LEAF) {
            mem_free(leaf_of);
            st = op_fail(ctx, TDM_E_MODEL, "weight %zu names node %lld of tree %lld, which is not a leaf", i,
                         (long long)wn[i], (long long)wt[i]);
            goto done;
        }
        leaf_of[i] = k->ix;
        e->leaf_at[k->ix + 1]++;
    }
    for (size_t i = 0; i < n; i++)
        e->leaf_at[i + 1] += e->leaf_at[i];
    size_t *fill = mem_calloc(n + 1, sizeof(size_t));
    if (!fill) {
        mem_free(leaf_of);
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory for %zu leaf weights", w);
        goto done;
    }
    for (size_t i = 0; i < w; i++) {
        size_t at = e->leaf_at[leaf_of[i]] + fill[leaf_of[i]]++;
        e->w_target[at] = wi[i];
        e->w_value[at] = vals[i];
    }
    mem_free(fill);
    mem_free(leaf_of);
done:
    mem_free(keys);
    mem_free(vals);
    return st;
}

/* ----------------------------------------------------------- ai.onnx.ml 5 form */

static tdm_status build_v5(op_ctx *ctx, ens *e)
{
    tdm_status st = TDM_OK;
    double *splits = NULL, *lw = NULL, *mem = NULL;
    size_t ns, nlw, nmem;
    const int64_t *fid, *tn, *tl, *fn, *fl, *miss, *roots, *ltid;
    int nf = gr_attr_ints(ctx->node, "nodes_featureids", &fid);
    int nr = gr_attr_ints(ctx->node, "tree_roots", &roots);
    int nl = gr_attr_ints(ctx->node, "leaf_targetids", &ltid);
    const gr_attr *ma = gr_attr_find(ctx->node, "nodes_modes");
    if (nf < 0 || nr <= 0 || nl <= 0 || !ma || ma->type != GA_TENSOR || !ma->t || !(DT_BIT(ma->t->dtype) & DT_INTS))
        return op_fail(ctx, TDM_E_MODEL,
                       "TreeEnsemble needs nodes_featureids, nodes_modes (an integer tensor), tree_roots and "
                       "leaf_targetids");
    size_t n = (size_t)nf, nleaf = (size_t)nl;
    if ((st = attr_ints_n(ctx, "nodes_truenodeids", n, 0, &tn)) ||
        (st = attr_ints_n(ctx, "nodes_trueleafs", n, 0, &tl)) ||
        (st = attr_ints_n(ctx, "nodes_falsenodeids", n, 0, &fn)) ||
        (st = attr_ints_n(ctx, "nodes_falseleafs", n, 0, &fl)) ||
        (st = attr_ints_n(ctx, "nodes_missing_value_tracks_true", n, 1, &miss)))
        return st;
    if ((st = attr_doubles(ctx, "nodes_splits", &splits, &ns)) || (st = attr_doubles(ctx, "leaf_weights", &lw, &nlw)) ||
        (st = attr_doubles(ctx, "membership_values", &mem, &nmem)))
        goto done;
    if (ns != n || ma->t->count != n || nlw != nleaf) {
        st = op_fail(ctx, TDM_E_MODEL, "nodes_splits (%zu) and nodes_modes (%zu) for %zu nodes, leaf_weights (%zu) "
                     "for %zu leaves", ns, ma->t->count, n, nlw, nleaf);
        goto done;
    }
    e->n_nodes = n;
    e->n_leaves = nleaf;
    e->n_trees = (size_t)nr;
    e->sets = mem;
    e->n_sets = nmem;
    mem = NULL;
    if ((n && !(e->nodes = mem_calloc(n, sizeof *e->nodes))) || !(e->roots = mem_calloc((size_t)nr, sizeof(tref))) ||
        !(e->leaf_at = mem_calloc(nleaf + 1, sizeof(size_t))) || !(e->w_target = mem_calloc(nleaf, sizeof(int64_t)))) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory for %zu tree nodes", n);
        goto done;
    }
    e->w_value = lw;
    lw = NULL;
    for (size_t i = 0; i < nleaf; i++) {
        e->leaf_at[i + 1] = i + 1;
        e->w_target[i] = ltid[i];
    }
    size_t set_pos = 0;
    for (size_t i = 0; i < n; i++) {
        tnode *t = &e->nodes[i];
        int64_t m = tensor_get_i64(ma->t, i);
        if (m < M_LEQ || m > M_MEMBER) {
            st = op_fail(ctx, TDM_E_MODEL, "node %zu has mode %lld, not 0 to 6", i, (long long)m);
            goto done;
        }
        t->mode = (int)m;
        t->feature = fid[i];
        t->th = splits[i];
        t->miss_true = miss && miss[i] == 1;
        const int64_t id[2] = {tn[i], fn[i]}, leaf[2] = {tl[i], fl[i]};
        for (int b = 0; b < 2; b++) {
            size_t lim = leaf[b] ? nleaf : n;
            if (id[b] < 0 || (size_t)id[b] >= lim) {
                st = op_fail(ctx, TDM_E_MODEL, "node %zu: its %s %s %lld is out of range", i, b ? "false" : "true",
                             leaf[b] ? "leaf" : "node", (long long)id[b]);
                goto done;
            }
            t->child[b] = leaf[b] ? -id[b] - 1 : id[b];
        }
        if (t->mode == M_MEMBER) { /* its values: up to the next NaN of membership_values */
            t->set_at = set_pos;
            while (set_pos < e->n_sets && !isnan(e->sets[set_pos]))
                set_pos++;
            t->set_n = set_pos - t->set_at;
            if (set_pos >= e->n_sets) {
                st = op_fail(ctx, TDM_E_MODEL, "membership_values has no set for member node %zu", i);
                goto done;
            }
            set_pos++;
        }
    }
    for (int r = 0; r < nr; r++) {
        if (roots[r] < 0 || (size_t)roots[r] >= n) {
            st = op_fail(ctx, TDM_E_MODEL, "tree_roots[%d] = %lld is not a node", r, (long long)roots[r]);
            goto done;
        }
        size_t k = (size_t)roots[r];
        /* a tree that is a leaf: both branches to one leaf */
        e->roots[r] = tl[k] && fl[k] && tn[k] == fn[k] ? -tn[k] - 1 : (tref)k;
    }
done:
    mem_free(splits);
    mem_free(lw);
    mem_free(mem);
    return st;
}

/* ------------------------------------------------------------------ evaluation */

static int branch(const ens *e, const tnode *t, double v)
{
    int r;
    switch (t->mode) {
    case M_LEQ: r = v <= t->th; break;
    case M_LT: r = v < t->th; break;
    case M_GTE: r = v >= t->th; break;
    case M_GT: r = v > t->th; break;
    case M_EQ: r = v == t->th; break;
    case M_NEQ: r = v != t->th; break;
    default:
        r = 0;
        for (size_t k = 0; k < t->set_n && !r; k++)
            r = e->sets[t->set_at + k] == v;
        break;
    }
    return r || (t->miss_true && isnan(v));
}

/* The leaf row x (c features) reaches from root. */
static tdm_status walk(op_ctx *ctx, const ens *e, const tdm_tensor *x, size_t row, int64_t c, tref root,
                       size_t *leaf)
{
    tref cur = root;
    for (size_t steps = 0; cur >= 0; steps++) {
        const tnode *t = &e->nodes[cur];
        if (steps > e->n_nodes)
            return op_fail(ctx, TDM_E_MODEL, "a tree of the ensemble loops (node %lld)", (long long)cur);
        if (t->feature < 0 || t->feature >= c)
            return op_fail(ctx, TDM_E_RUNTIME, "a tree node reads feature %lld of %lld", (long long)t->feature,
                           (long long)c);
        double v = x->dtype == TDM_FLOAT ? ((const float *)x->data)[row * (size_t)c + (size_t)t->feature]
                                         : tensor_get_f64(x, row * (size_t)c + (size_t)t->feature);
        cur = t->child[branch(e, t, v) ? 0 : 1];
    }
    *leaf = (size_t)(-cur - 1);
    if (*leaf >= e->n_leaves)
        return op_fail(ctx, TDM_E_MODEL, "a tree of the ensemble reaches leaf %zu of %zu", *leaf, e->n_leaves);
    return TDM_OK;
}

/* Aggregates the trees for one row into score/has (n_targets each). */
static tdm_status score_row(op_ctx *ctx, const ens *e, const tdm_tensor *x, size_t row, int64_t c, double *score,
                            unsigned char *has)
{
    memset(score, 0, sizeof(double) * (size_t)e->n_targets);
    memset(has, 0, (size_t)e->n_targets);
    for (size_t t = 0; t < e->n_trees; t++) {
        size_t leaf = 0;
        tdm_status st = walk(ctx, e, x, row, c, e->roots[t], &leaf);
        if (st)
            return st;
        for (size_t k = e->leaf_at[leaf]; k < e->leaf_at[leaf + 1]; k++) {
            int64_t j = e->w_target[k];
            double w = e->w_value[k];
            if (j < 0 || j >= e->n_targets)
                return op_fail(ctx, TDM_E_MODEL, "a leaf weight is for target %lld of %lld", (long long)j,
                               (long long)e->n_targets);
            if (e->agg == AGG_MIN)
                score[j] = !has[j] || w < score[j] ? w : score[j];
            else if (e->agg == AGG_MAX)
                score[j] = !has[j] || w > score[j] ? w : score[j];
            else
                score[j] += w;
            has[j] = 1;
        }
    }
    return TDM_OK;
}

static tdm_status agg_attr(op_ctx *ctx, ens *e)
{
    const gr_attr *a = gr_attr_find(ctx->node, "aggregate_function");
    e->agg = AGG_SUM;
    if (!a)
        return TDM_OK;
    if (a->type == GA_INT) {
        if (a->i < AGG_AVERAGE || a->i > AGG_MAX)
            return op_fail(ctx, TDM_E_MODEL, "aggregate_function %lld is not one of 0 to 3", (long long)a->i);
        e->agg = (int)a->i;
        return TDM_OK;
    }
    static const char *const names[] = {"AVERAGE", "SUM", "MIN", "MAX"};
    for (int k = 0; k < 4; k++)
        if (a->s && strcmp(a->s, names[k]) == 0) {
            e->agg = k;
            return TDM_OK;
        }
    return op_fail(ctx, TDM_E_MODEL, "aggregate_function '%.32s' is not AVERAGE, SUM, MIN or MAX",
                   a->s ? a->s : "");
}

static tdm_status check_x(op_ctx *ctx, uint32_t types, int64_t *n, int64_t *c)
{
    const tdm_tensor *x = ctx->in[0];
    if (!x || x->kind != TDM_KIND_TENSOR || !(DT_BIT(x->dtype) & types))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "input X of element type %s is not supported",
                       x ? tdm_dtype_name(x->dtype) : "absent");
    return ml_rows(ctx, x, n, c);
}

/* Regression: score (+ base), post-transformed (one target: PROBIT only,
 * as onnxruntime), into out (n_targets floats or doubles). */
static tdm_status regress(op_ctx *ctx, ens *e, tdm_tensor *y, int64_t n, int64_t c)
{
    tdm_status st = TDM_OK;
    size_t nt = (size_t)e->n_targets;
    double *score = mem_calloc(nt, sizeof(double));
    unsigned char *has = mem_calloc(nt, 1);
    float *row = mem_calloc(nt, sizeof(float));
    if (!score || !has || !row) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory for %zu targets", nt);
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        if ((st = score_row(ctx, e, ctx->in[0], (size_t)i, c, score, has)))
            goto done;
        for (size_t j = 0; j < nt; j++) {
            double v = has[j] ? score[j] : 0.0;
            if (e->agg == AGG_AVERAGE)
                v /= (double)e->n_trees;
            if (e->n_base == nt)
                v += e->base[j];
            score[j] = v;
            row[j] = (float)v;
        }
        if (nt > 1 || e->post == ML_POST_PROBIT)
            ml_post_row(e->post, row, nt);
        for (size_t j = 0; j < nt; j++) {
            size_t at = (size_t)i * nt + j;
            if (y->dtype == TDM_DOUBLE)
                ((double *)y->data)[at] = e->post == ML_POST_NONE ? score[j] : (double)row[j];
            else
                ((float *)y->data)[at] = row[j];
        }
    }
done:
    mem_free(score);
    mem_free(has);
    mem_free(row);
    return st;
}

tdm_status op_run_TreeEnsembleRegressor(op_ctx *ctx)
{
    ens e = {0};
    int64_t n, c;
    tdm_status st;
    if ((st = check_x(ctx, DT_ML_NUM, &n, &c)) || (st = ml_post_attr(ctx, &e.post)) || (st = agg_attr(ctx, &e)))
        return st;
    e.n_targets = gr_attr_int(ctx->node, "n_targets", 1);
    if (e.n_targets < 1)
        return op_fail(ctx, TDM_E_MODEL, "n_targets is %lld", (long long)e.n_targets);
    if ((st = build_v1(ctx, "target", &e)) || (st = attr_doubles(ctx, "base_values", &e.base, &e.n_base)))
        goto done;
    int64_t dims[2] = {n, e.n_targets};
    if ((st = op_out(ctx, 0, TDM_FLOAT, 2, dims)))
        goto done;
    st = regress(ctx, &e, ctx->out[0], n, c);
done:
    ens_free(&e);
    return st;
}

tdm_status op_run_TreeEnsemble(op_ctx *ctx)
{
    ens e = {0};
    int64_t n, c;
    tdm_status st;
    if ((st = check_x(ctx, DT_BIT(TDM_FLOAT) | DT_BIT(TDM_DOUBLE), &n, &c)) || (st = ml_post_attr(ctx, &e.post)) ||
        (st = agg_attr(ctx, &e)))
        return st;
    e.n_targets = gr_attr_int(ctx->node, "n_targets", 0);
    if (e.n_targets < 1)
        return op_fail(ctx, TDM_E_MODEL, "n_targets is %lld (1 or more needed)", (long long)e.n_targets);
    if ((st = build_v5(ctx, &e)))
        goto done;
    int64_t dims[2] = {n, e.n_targets};
    if ((st = op_out(ctx, 0, ctx->in[0]->dtype, 2, dims)))
        goto done;
    st = regress(ctx, &e, ctx->out[0], n, c);
done:
    ens_free(&e);
    return st;
}

/* The two-class classifier, as onnxruntime decides it: with one class
 * id in the weights ("binary case") the one score s decides (> 0.5 when
 * every weight is positive, else > 0) and the scores become [1-s, s],
 * [-s, s] or, under LOGISTIC, [logistic(-s), logistic(s)]. Returns the
 * label index (0 or 1) in *label. */
static void finish_binary(const ens *e, int binary_case, int all_pos, double *score, unsigned char *has, float *z,
                          int64_t *label)
{
    size_t size = 2;
    int add = -1;
    if (e->n_base == 2) {
        if (has[1]) { /* onnxruntime's rule: base_values[1] + the first class's score */
            score[1] = e->base[1] + score[0];
            score[0] = -score[1];
        } else {
            score[1] += e->base[1];
            score[0] += e->base[0];
        }
    } else if (e->n_base == 1) {
        score[0] += e->base[0];
        if (!has[1])
            size = 1;
    } else {
        add = 3;
        if (!has[1])
            size = 1;
    }
    double pos = size == 2 && has[1] ? score[1] : has[0] ? score[0] : 0.0;
    if (binary_case) {
        if (all_pos) {
            add = pos > 0.5 ? 0 : 1;
            *label = pos > 0.5;
        } else {
            add = pos > 0 ? 2 : 3;
            *label = pos > 0;
        }
    } else {
        *label = pos > 0;
    }
    if (size == 2) { /* a class no leaf scored is written as 0 */
        z[0] = has[0] ? (float)score[0] : 0.0f;
        z[1] = has[1] ? (float)score[1] : 0.0f;
        ml_post_row(e->post, z, 2);
        return;
    }
    float s = (float)score[0];
    if (e->post == ML_POST_PROBIT) {
        z[0] = ml_probit(s);
        z[1] = 0.0f;
    } else if (add == 0 || add == 1) {
        z[0] = 1.0f - s;
        z[1] = s;
    } else if (e->post == ML_POST_LOGISTIC) {
        z[0] = ml_logistic(-s);
        z[1] = ml_logistic(s);
    } else {
        z[0] = -s;
        z[1] = s;
    }
}

tdm_status op_run_TreeEnsembleClassifier(op_ctx *ctx)
{
    ens e = {0};
    int64_t n, c;
    tdm_status st;
    double *score = NULL;
    unsigned char *has = NULL;
    if ((st = check_x(ctx, DT_ML_NUM, &n, &c)) || (st = ml_post_attr(ctx, &e.post)))
        return st;
    const int64_t *ints;
    char *const *strs;
    size_t nlab;
    ml_labels(ctx->node, "classlabels_int64s", &ints, &strs, &nlab);
    if (nlab < 2)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "a tree classifier needs two or more class labels (%zu given)", nlab);
    e.n_targets = (int64_t)nlab;
    if ((st = build_v1(ctx, "class", &e)) || (st = attr_doubles(ctx, "base_values", &e.base, &e.n_base)))
        goto done;
    int all_pos = 1, one_id = 1;
    size_t nw = e.leaf_at[e.n_leaves];
    for (size_t k = 0; k < nw; k++) {
        all_pos = all_pos && e.w_value[k] >= 0;
        one_id = one_id && e.w_target[k] == e.w_target[0];
    }
    int binary_case = nlab == 2 && nw > 0 && one_id;
    int64_t ydims[1] = {n}, zdims[2] = {n, (int64_t)nlab};
    if ((st = op_out(ctx, 0, strs ? TDM_STRING : TDM_INT64, 1, ydims)) ||
        (st = op_out(ctx, 1, TDM_FLOAT, 2, zdims)))
        goto done;
    if (!(score = mem_calloc(nlab, sizeof(double))) || !(has = mem_calloc(nlab, 1))) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory for %zu classes", nlab);
        goto done;
    }
    float *z = ctx->out[1]->data;
    for (int64_t i = 0; i < n; i++) {
        float *zr = z + (size_t)i * nlab;
        if ((st = score_row(ctx, &e, ctx->in[0], (size_t)i, c, score, has)))
            goto done;
        int64_t best = 0;
        if (nlab == 2) {
            finish_binary(&e, binary_case, all_pos, score, has, zr, &best);
            if (!binary_case && !strs && ints) { /* onnxruntime answers 1 or 0 here, not a label */
                ((int64_t *)ctx->out[0]->data)[i] = best;
                continue;
            }
        } else {
            for (size_t k = 0; k < e.n_base && k < nlab; k++) {
                score[k] += e.base[k];
                has[k] = 1;
            }
            best = -1;
            for (size_t k = 0; k < nlab; k++)
                if (has[k] && (best < 0 || score[k] > score[best]))
                    best = (int64_t)k;
            if (best < 0)
                best = 0;
            for (size_t k = 0; k < nlab; k++)
                zr[k] = (float)score[k];
            ml_post_row(e.post, zr, nlab);
        }
        if ((st = ml_put_label(ctx, ctx->out[0], (size_t)i, ints, strs, best)))
            goto done;
    }
done:
    mem_free(score);
    mem_free(has);
    ens_free(&e);
    return st;
}

/* ------------------------------------------------------------------------ infer */

tdm_status op_infer_TreeEnsembleRegressor(op_infer_ctx *ctx)
{
    ml_infer_rows(ctx, &ctx->out[0], TDM_FLOAT, gr_attr_int(ctx->node, "n_targets", 1));
    return TDM_OK;
}

tdm_status op_infer_TreeEnsemble(op_infer_ctx *ctx)
{
    int64_t nt = gr_attr_int(ctx->node, "n_targets", -1);
    ml_infer_rows(ctx, &ctx->out[0], ctx->n_in > 0 && ctx->in[0] ? ctx->in[0]->dtype : TDM_UNDEFINED, nt > 0 ? nt : -1);
    return TDM_OK;
}
