/* The op table built from the X-macro files, op resolution and the helpers
 * shared by every op family. */
#include "ops/op.h"
#include "ops/control.h"
#include "ops/elementwise.h"
#include "ops/ml.h"
#include "ops/nn.h"
#include "ops/opset24.h"
#include "ops/reduce.h"
#include "ops/signal.h"
#include "ops/tensor.h"
#include "core/mem.h"

#include <string.h>

const op_def op_table[OP_COUNT] = {
#define OP(id, domain, run, infer, dtypes, flags, ...) {#id, domain, run, infer, dtypes, flags, {__VA_ARGS__}},
#include "ops/ops.def"
#undef OP
};

static int domain_is_default(const char *d) { return !d || !*d || strcmp(d, "ai.onnx") == 0; }

/* ONNX's own versions of the default domain's ops (see onnx_since.def). */
#define ONNX_MAX_SINCE 12
typedef struct onnx_since {
    const char *name;
    int v[ONNX_MAX_SINCE]; /* ascending by magnitude, 0-terminated; negative: widened types only */
} onnx_since;

static const onnx_since onnx_since_table[] = {
#define SINCE(id, ...) {#id, {__VA_ARGS__}},
#include "ops/onnx_since.def"
#undef SINCE
};

/* The version of ONNX's definition of op_type in effect at opset (0 when
 * the op does not exist there) and, in *semantic, the version whose
 * semantics it has (itself, or the one a types-only widening widened).
 * Returns -1 when ONNX has no such op in the default domain. */
static int onnx_version_at(const char *op_type, int64_t opset, int *semantic)
{
    size_t n = sizeof onnx_since_table / sizeof onnx_since_table[0];
    for (size_t i = 0; i < n; i++) {
        const onnx_since *s = &onnx_since_table[i];
        if (strcmp(s->name, op_type) != 0)
            continue;
        int k_eff = -1;
        for (int k = 0; k < ONNX_MAX_SINCE && s->v[k]; k++)
            if ((s->v[k] < 0 ? -s->v[k] : s->v[k]) <= opset)
                k_eff = k;
        if (k_eff < 0) {
            *semantic = 0;
            return 0;
        }
        int k_sem = k_eff;
        while (k_sem > 0 && s->v[k_sem] < 0)
            k_sem--;
        *semantic = s->v[k_sem] < 0 ? -s->v[k_sem] : s->v[k_sem];
        return s->v[k_eff] < 0 ? -s->v[k_eff] : s->v[k_eff];
    }
    return -1;
}

/* Operators tandem knows but cannot represent, with the reason. */
static const struct {
    const char *domain, *name, *why;
} op_refused_table[] = {
    {"ai.onnx.ml", "DictVectorizer", "it takes a map, and tandem's maps are only ZipMap's outputs"},
    {"ai.onnx.ml", "CastMap", "it takes a map, and tandem's maps are only ZipMap's outputs"},
};

/* Operators of other domains that a later opset of theirs removes
 * (onnx marks them deprecated there, and onnxruntime refuses them). */
static const struct {
    const char *domain, *name;
    int64_t from;
    const char *instead;
} op_removed_table[] = {
    {"ai.onnx.ml", "TreeEnsembleClassifier", 5, "TreeEnsemble"},
    {"ai.onnx.ml", "TreeEnsembleRegressor", 5, "TreeEnsemble"},
};

const char *op_refused(const char *domain, const char *op_type)
{
    const char *dom = domain_is_default(domain) ? "" : domain;
    for (size_t i = 0; op_type && i < sizeof op_refused_table / sizeof op_refused_table[0]; i++)
        if (strcmp(op_refused_table[i].name, op_type) == 0 && strcmp(op_refused_table[i].domain, dom) == 0)
            return op_refused_table[i].why;
    return NULL;
}

tdm_status op_resolve(tdm_err *e, const char *domain, const char *op_type, int64_t opset, int *op, int *version)
{
    *op = -1;
    *version = 0;
    const char *dom = domain_is_default(domain) ? "" : domain;
    const char *why = op_refused(dom, op_type);
    if (why)
        return err_set(e, TDM_E_UNSUPPORTED, "%s of domain %s is not supported: %s", op_type, dom, why);
    for (int i = 0; i < OP_COUNT; i++) {
        const op_def *d = &op_table[i];
        if (strcmp(d->name, op_type) != 0 || strcmp(d->domain, dom) != 0)
            continue;
        if (opset < 0)
            return err_set(e, TDM_E_MODEL, "the model imports no opset for domain '%s'",
                           *dom ? dom : "ai.onnx");
        for (size_t k = 0; *dom && k < sizeof op_removed_table / sizeof op_removed_table[0]; k++)
            if (strcmp(op_removed_table[k].name, op_type) == 0 && strcmp(op_removed_table[k].domain, dom) == 0 &&
                opset >= op_removed_table[k].from)
                return err_set(e, TDM_E_MODEL, "%s is deprecated in domain %s from opset %lld on (%s replaces it)",
                               op_type, dom, (long long)op_removed_table[k].from, op_removed_table[k].instead);
        if (strcmp(dom, "ai.onnx.ml") == 0 && opset > OP_MAX_ML_OPSET)
            return err_set(e, TDM_E_UNSUPPORTED,
                           "opset %lld of domain ai.onnx.ml is newer than tandem supports (up to %d)",
                           (long long)opset, OP_MAX_ML_OPSET);
        if (!*dom && opset > OP_MAX_OPSET)
            return err_set(e, TDM_E_UNSUPPORTED,
                           "opset %lld of domain ai.onnx is newer than tandem supports (up to %d)",
                           (long long)opset, OP_MAX_OPSET);
        int best = 0;
        for (int k = 0; k < OP_MAX_SINCE && d->since[k]; k++)
            if (d->since[k] <= opset)
                best = d->since[k];
        int sem = 0, onnx_v = *dom ? -1 : onnx_version_at(op_type, opset, &sem);
        if (onnx_v == 0)
            return err_set(e, TDM_E_MODEL, "%s does not exist at opset %lld of domain ai.onnx", op_type,
                           (long long)opset);
        if (onnx_v > 0 && best && best < sem)
            return err_set(e, TDM_E_UNSUPPORTED,
                           "%s at opset %lld is version %d of its definition; tandem implements it up to "
                           "version %d",
                           op_type, (long long)opset, onnx_v, best);
        if (!best)
            return err_set(e, TDM_E_UNSUPPORTED,
                           "%s at opset %lld of domain %s is older than any version tandem implements "
                           "(first: %d)",
                           op_type, (long long)opset, *dom ? dom : "ai.onnx", d->since[0]);
        *op = i;
        *version = best;
        return TDM_OK;
    }
    return err_set(e, TDM_E_UNSUPPORTED, "unknown operator %s in domain %s (opset %lld)", op_type,
                   *dom ? dom : "ai.onnx", (long long)opset);
}

tdm_status op_out(op_ctx *ctx, int i, tdm_dtype dtype, int rank, const int64_t *dims)
{
    if (i < 0 || i >= ctx->n_out)
        return err_set(ctx->err, TDM_E_INTERNAL, "output %d of %d requested", i, ctx->n_out);
    return tensor_alloc(ctx->err, ctx->out[i], dtype, rank, dims);
}

int op_out_wanted(const op_ctx *ctx, int i)
{
    return i >= 0 && i < ctx->n_out && i < ctx->node->n_outputs && ctx->node->outputs[i] >= 0;
}

int op_broadcast(int ra, const int64_t *a, int rb, const int64_t *b, int *rout, int64_t *out)
{
    int r = ra > rb ? ra : rb;
    if (r > TDM_MAX_RANK)
        return -1;
    for (int i = 0; i < r; i++) {
        int64_t da = i - (r - ra) >= 0 ? a[i - (r - ra)] : 1;
        int64_t db = i - (r - rb) >= 0 ? b[i - (r - rb)] : 1;
        if (da == db || db == 1)
            out[i] = da;
        else if (da == 1)
            out[i] = db;
        else
            return -1;
    }
    *rout = r;
    return 0;
}

void op_infer_copy(op_infer_ctx *ctx, int i, int j)
{
    if (i < ctx->n_out && j < ctx->n_in && ctx->in[j])
        ctx->out[i] = *ctx->in[j];
}

tdm_status op_infer_same(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    return TDM_OK;
}

static tdm_status infer_broadcast_as(op_infer_ctx *ctx, tdm_dtype dtype)
{
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = dtype;
    o->rank = 0;
    for (int k = 0; k < ctx->n_in; k++) {
        const gr_type *t = ctx->in[k];
        if (!t)
            continue;
        if (t->rank < 0) {
            o->rank = -1;
            return TDM_OK;
        }
        int r = o->rank > t->rank ? o->rank : t->rank;
        gr_dim dims[TDM_MAX_RANK];
        for (int i = 0; i < r; i++) {
            gr_dim da = i - (r - o->rank) >= 0 ? o->dims[i - (r - o->rank)] : (gr_dim){1, NULL};
            gr_dim db = i - (r - t->rank) >= 0 ? t->dims[i - (r - t->rank)] : (gr_dim){1, NULL};
            if (da.v >= 0 && db.v >= 0) {
                if (da.v != db.v && da.v != 1 && db.v != 1) {
                    return err_set(ctx->err, TDM_E_MODEL,
                                   "input %d cannot be broadcast: dimension %d is %lld against %lld", k, i,
                                   (long long)db.v, (long long)da.v);
                }
                dims[i] = da.v == 1 ? db : da;
            } else if (da.v == 1) {
                dims[i] = db;
            } else if (db.v == 1) {
                dims[i] = da;
            } else if (da.v < 0 && db.v < 0 && da.sym && db.sym && strcmp(da.sym, db.sym) == 0) {
                dims[i] = da;
            } else if (da.v > 1) {
                dims[i] = da; /* the unknown one must be 1 or equal */
            } else if (db.v > 1) {
                dims[i] = db;
            } else {
                dims[i] = (gr_dim){-1, NULL};
            }
        }
        o->rank = r;
        memcpy(o->dims, dims, sizeof(gr_dim) * (size_t)r);
    }
    return TDM_OK;
}

int op_legacy_bcast_rank(const gr_node *n, int version, int rank_a, int rank_b)
{
    if (version >= 7 || !gr_attr_int(n, "broadcast", 0) || !gr_attr_find(n, "axis"))
        return rank_b;
    int64_t axis = gr_attr_int(n, "axis", 0);
    if (axis < 0)
        axis += rank_a;
    if (axis < 0 || axis + rank_b > rank_a)
        return rank_b;
    return rank_a - (int)axis;
}

tdm_status op_infer_broadcast(op_infer_ctx *ctx)
{
    tdm_dtype dt = ctx->n_in > 0 && ctx->in[0] ? ctx->in[0]->dtype : TDM_UNDEFINED;
    if (ctx->version < 7 && ctx->n_in == 2 && ctx->in[0] && ctx->in[1] && ctx->in[0]->rank >= 0 &&
        ctx->in[1]->rank >= 0) {
        /* before 7: B aligned at 'axis' of A (trailing 1s appended) */
        int rb = op_legacy_bcast_rank(ctx->node, ctx->version, ctx->in[0]->rank, ctx->in[1]->rank);
        if (rb != ctx->in[1]->rank) {
            gr_type b = *ctx->in[1];
            for (int d = b.rank; d < rb; d++)
                b.dims[d] = (gr_dim){1, NULL};
            b.rank = rb;
            const gr_type *in[2] = {ctx->in[0], &b};
            op_infer_ctx c2 = *ctx;
            c2.in = in;
            return infer_broadcast_as(&c2, dt);
        }
    }
    return infer_broadcast_as(ctx, dt);
}

tdm_status op_infer_bool_broadcast(op_infer_ctx *ctx) { return infer_broadcast_as(ctx, TDM_BOOL); }
