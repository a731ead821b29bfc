/* Unit tests of the reduce op family: each kernel is run through its run
 * hook on pseudo-random tensors and compared with a naive reference
 * written here (direct loops over index tuples), plus hand-checked cases
 * (ties, empty sets, errors). Usage: test_ops_reduce [GROUP] */
#include "core/mem.h"
#include "graph/graph.h"
#include "ops/op.h"
#include "ops/reduce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks;

#define CHECK(cond, ...)                                                                                   \
    do {                                                                                                   \
        checks++;                                                                                          \
        if (!(cond)) {                                                                                     \
            failures++;                                                                                    \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                    \
            printf(__VA_ARGS__);                                                                           \
            printf("\n");                                                                                  \
        }                                                                                                  \
    } while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static int irand(int n) { return (int)(urand() * n); }

/* ---- a one-node harness ---- */

typedef struct node_h {
    gr_model *m;
    gr_graph *g;
    int idx;
    tdm_err err;
} node_h;

static void node_new(node_h *h, const char *op, int opset, int n_in, int n_out)
{
    static const char *ins[] = {"i0", "i1", "i2", "i3", "i4", "i5"};
    static const char *outs[] = {"o0", "o1", "o2", "o3", "o4"};
    memset(h, 0, sizeof *h);
    gr_model_new(&h->err, &h->m);
    gr_graph_new(&h->err, h->m, NULL, "g", &h->g);
    gr_node_add(&h->err, h->g, "n", op, "", n_in, ins, n_out, outs, &h->idx);
    gr_node *n = &h->g->nodes[h->idx];
    int id, ver;
    if (op_resolve(&h->err, "", op, opset, &id, &ver)) {
        printf("resolve %s: %s\n", op, h->err.msg);
        exit(2);
    }
    n->op = id;
    n->version = ver;
    n->opset = opset;
}

static void attr_int(node_h *h, const char *name, int64_t v)
{
    gr_attr *a = gr_attr_add(&h->err, h->g, h->idx, name);
    a->type = GA_INT;
    a->i = v;
}

static void attr_float(node_h *h, const char *name, float v)
{
    gr_attr *a = gr_attr_add(&h->err, h->g, h->idx, name);
    a->type = GA_FLOAT;
    a->f = v;
}

static void attr_str(node_h *h, const char *name, const char *s)
{
    gr_attr *a = gr_attr_add(&h->err, h->g, h->idx, name);
    a->type = GA_STRING;
    a->s = mem_strdup(s);
    a->s_len = strlen(s);
}

static void attr_ints(node_h *h, const char *name, int n, const int64_t *v)
{
    gr_attr *a = gr_attr_add(&h->err, h->g, h->idx, name);
    a->type = GA_INTS;
    a->n = (size_t)n;
    a->ints = mem_calloc((size_t)n + 1, sizeof *a->ints);
    memcpy(a->ints, v, sizeof *v * (size_t)n);
}

/* Runs the node; out[] receive new tensors (NULL on failure). */
static tdm_status node_run(node_h *h, int n_in, const tdm_tensor *const *in, int n_out, tdm_tensor **out)
{
    const gr_node *n = &h->g->nodes[h->idx];
    for (int i = 0; i < n_out; i++)
        out[i] = mem_calloc(1, sizeof **out);
    uint64_t rng = 1;
    op_ctx ctx = {n, n->version, n_in, in, n_out, out, &h->err, NULL, 1, &rng, NULL, 0};
    tdm_status st = op_table[n->op].run(&ctx);
    if (st)
        for (int i = 0; i < n_out; i++) {
            tdm_tensor_destroy(out[i]);
            out[i] = NULL;
        }
    return st;
}

static void node_free(node_h *h)
{
    gr_graph_free(h->g);
    gr_model_free(h->m);
}

static tdm_tensor *tensor_rand(tdm_dtype dt, int rank, const int64_t *dims)
{
    tdm_tensor *t;
    tensor_new(NULL, dt, rank, dims, &t);
    for (size_t i = 0; i < t->count; i++) {
        if (dtype_is_float(dt))
            tensor_set_f64(t, i, urand() * 4 - 2);
        else
            tensor_set_i64(t, i, irand(9) - (dtype_is_signed(dt) ? 4 : 0));
    }
    return t;
}

static tdm_tensor *tensor_of(tdm_dtype dt, int rank, const int64_t *dims, const double *v)
{
    tdm_tensor *t;
    tensor_new(NULL, dt, rank, dims, &t);
    for (size_t i = 0; i < t->count; i++)
        tensor_set_f64(t, i, v[i]);
    return t;
}

static int close_to(double got, double want, double rtol)
{
    if (want != want)
        return got != got;
    if (isinf(want))
        return got == want;
    return fabs(got - want) <= 1e-6 + rtol * fabs(want);
}

static double rtol_of(tdm_dtype dt)
{
    return dt == TDM_FLOAT16 ? 2e-3 : dt == TDM_BFLOAT16 ? 1e-2 : dt == TDM_FLOAT ? 1e-5 : 1e-9;
}

/* unravels i in shape dims */
static void unravel(size_t i, int rank, const int64_t *dims, int64_t *idx)
{
    for (int d = rank - 1; d >= 0; d--) {
        idx[d] = (int64_t)(i % (size_t)dims[d]);
        i /= (size_t)dims[d];
    }
}

static size_t ravel(int rank, const int64_t *dims, const int64_t *idx)
{
    size_t o = 0;
    for (int d = 0; d < rank; d++)
        o = o * (size_t)dims[d] + (size_t)idx[d];
    return o;
}

/* ---- reductions ---- */

static const char *red_ops[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                                "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};

static double red_ref(int op, const double *v, size_t n)
{
    double a = op == 4 ? 1 : op == 2 ? -INFINITY : op == 3 ? INFINITY : 0, m = -INFINITY;
    for (size_t k = 0; k < n; k++) {
        double x = v[k];
        switch (op) {
        case 0: case 1: a += x; break;
        case 2: a = x > a ? x : a; break;
        case 3: a = x < a ? x : a; break;
        case 4: a *= x; break;
        case 5: a += fabs(x); break;
        case 6: case 9: a += x * x; break;
        case 7: a += x; break;
        case 8: m = x > m ? x : m; break;
        }
    }
    if (op == 8) {
        if (isinf(m))
            return m;
        for (size_t k = 0; k < n; k++)
            a += exp(v[k] - m);
        return log(a) + m;
    }
    return op == 1 ? a / (double)n : op == 6 ? sqrt(a) : op == 7 ? log(a) : a;
}

static void test_reduce_random(void)
{
    static const tdm_dtype dts[] = {TDM_FLOAT, TDM_DOUBLE, TDM_FLOAT16, TDM_INT32, TDM_INT64};
    for (int iter = 0; iter < 400; iter++) {
        int op = irand(10);
        tdm_dtype dt = dts[irand(5)];
        if (dtype_is_int(dt) && (op == 1 || op >= 6) && op != 9)
            dt = TDM_FLOAT;
        int rank = 1 + irand(4);
        int64_t dims[4];
        for (int d = 0; d < rank; d++)
            dims[d] = 1 + irand(5);
        int64_t axes[4];
        int na = 0;
        unsigned char red[4] = {0};
        for (int d = 0; d < rank; d++)
            if (irand(2)) {
                axes[na++] = irand(2) ? d : d - rank;
                red[d] = 1;
            }
        if (na == 0)
            memset(red, 1, sizeof red);
        int keep = irand(2);
        int opset = irand(2) ? 11 : 13;
        node_h h;
        int axes_in = op == 0 && opset == 13;
        node_new(&h, red_ops[op], opset, axes_in ? 2 : 1, 1);
        if (!keep)
            attr_int(&h, "keepdims", 0);
        tdm_tensor *ax = NULL;
        if (axes_in) {
            int64_t ad = na;
            tensor_new(NULL, TDM_INT64, 1, &ad, &ax);
            memcpy(ax->data, axes, sizeof(int64_t) * (size_t)na);
        } else if (na) {
            attr_ints(&h, "axes", na, axes);
        }
        tdm_tensor *x = tensor_rand(dt, rank, dims), *y;
        if (op == 4)
            for (size_t i = 0; i < x->count; i++) {
                if (dtype_is_float(dt))
                    tensor_set_f64(x, i, 0.97 + 0.06 * urand());
                else
                    tensor_set_i64(x, i, irand(3) - 1);
            }
        if (op == 7)
            for (size_t i = 0; i < x->count; i++)
                tensor_set_f64(x, i, 0.1 + urand());
        const tdm_tensor *in[2] = {x, ax};
        tdm_status st = node_run(&h, axes_in ? 2 : 1, in, 1, &y);
        CHECK(st == TDM_OK, "%s: %s", red_ops[op], h.err.msg);
        if (st == TDM_OK) {
            /* reference: per output element, gather its reduced elements */
            int64_t odims[4];
            int orank = 0;
            for (int d = 0; d < rank; d++)
                if (!red[d] || keep)
                    odims[orank++] = red[d] ? 1 : dims[d];
            CHECK(shape_equal(y->rank, y->dims, orank, odims), "%s: output shape", red_ops[op]);
            CHECK(y->dtype == dt, "%s: output dtype", red_ops[op]);
            double *vals = mem_calloc(x->count, sizeof *vals), *want = mem_calloc(y->count + 1, sizeof *want);
            size_t *cnt = mem_calloc(y->count + 1, sizeof *cnt);
            double *gather = mem_calloc(x->count * (y->count + 1), sizeof *gather);
            for (size_t i = 0; i < x->count; i++) {
                int64_t idx[4], oidx[4];
                unravel(i, rank, dims, idx);
                int r = 0;
                int64_t full[4];
                for (int d = 0; d < rank; d++)
                    full[d] = red[d] ? 0 : idx[d];
                for (int d = 0; d < rank; d++)
                    if (!red[d] || keep)
                        oidx[r++] = full[d];
                size_t o = ravel(orank, odims, oidx);
                gather[o * x->count + cnt[o]++] = tensor_get_f64(x, i);
            }
            int bad = 0;
            for (size_t o = 0; o < y->count && !bad; o++) {
                double w = red_ref(op, gather + o * x->count, cnt[o]);
                if (dtype_is_int(dt))
                    w = trunc(w);
                double g = tensor_get_f64(y, o);
                if (!close_to(g, w, rtol_of(dt))) {
                    bad = 1;
                    CHECK(0, "%s %s rank %d keep %d: element %zu is %g, expected %g", red_ops[op],
                          tdm_dtype_name(dt), rank, keep, o, g, w);
                }
            }
            CHECK(!bad, "%s", red_ops[op]);
            mem_free(vals);
            mem_free(want);
            mem_free(cnt);
            mem_free(gather);
            tdm_tensor_destroy(y);
        }
        tdm_tensor_destroy(x);
        tdm_tensor_destroy(ax);
        node_free(&h);
    }
}

static void test_reduce_edges(void)
{
    /* empty set: ReduceSum over a 0-sized axis is 0, ReduceMax is -inf, ReduceProd 1 */
    int64_t dims[2] = {2, 0};
    static const double want[] = {0, -INFINITY, 1, INFINITY};
    static const char *ops[] = {"ReduceSum", "ReduceMax", "ReduceProd", "ReduceMin"};
    for (int k = 0; k < 4; k++) {
        node_h h;
        node_new(&h, ops[k], 11, 1, 1);
        int64_t ax = 1;
        attr_ints(&h, "axes", 1, &ax);
        tdm_tensor *x, *y;
        tensor_new(NULL, TDM_FLOAT, 2, dims, &x);
        const tdm_tensor *in[1] = {x};
        tdm_status st = node_run(&h, 1, in, 1, &y);
        CHECK(st == TDM_OK && y->count == 2 && tensor_get_f64(y, 0) == want[k] && tensor_get_f64(y, 1) == want[k],
              "%s over an empty axis", ops[k]);
        tdm_tensor_destroy(x);
        tdm_tensor_destroy(y);
        node_free(&h);
    }
    /* ReduceSum-13 with no axes and noop_with_empty_axes is an identity */
    {
        node_h h;
        node_new(&h, "ReduceSum", 13, 1, 1);
        attr_int(&h, "noop_with_empty_axes", 1);
        int64_t d[2] = {2, 3};
        tdm_tensor *x = tensor_rand(TDM_FLOAT, 2, d), *y;
        const tdm_tensor *in[1] = {x};
        tdm_status st = node_run(&h, 1, in, 1, &y);
        CHECK(st == TDM_OK && y->count == 6 && memcmp(x->data, y->data, x->nbytes) == 0, "noop_with_empty_axes");
        tdm_tensor_destroy(x);
        tdm_tensor_destroy(y);
        node_free(&h);
    }
    /* an axis out of range is an error naming 'axes' */
    {
        node_h h;
        node_new(&h, "ReduceMean", 13, 1, 1);
        int64_t ax = 5;
        attr_ints(&h, "axes", 1, &ax);
        int64_t d[2] = {2, 3};
        tdm_tensor *x = tensor_rand(TDM_FLOAT, 2, d), *y;
        const tdm_tensor *in[1] = {x};
        tdm_status st = node_run(&h, 1, in, 1, &y);
        CHECK(st == TDM_E_RUNTIME && strstr(h.err.msg, "axes"), "bad axis: %d %s", st, h.err.msg);
        tdm_tensor_destroy(x);
        node_free(&h);
    }
    /* uint64 max keeps values above 2^63 */
    {
        node_h h;
        node_new(&h, "ReduceMax", 13, 1, 1);
        attr_int(&h, "keepdims", 0);
        int64_t d = 3;
        tdm_tensor *x, *y;
        tensor_new(NULL, TDM_UINT64, 1, &d, &x);
        uint64_t *p = x->data;
        p[0] = 5;
        p[1] = 0xf000000000000000u;
        p[2] = 7;
        const tdm_tensor *in[1] = {x};
        tdm_status st = node_run(&h, 1, in, 1, &y);
        CHECK(st == TDM_OK && y->rank == 0 && ((uint64_t *)y->data)[0] == 0xf000000000000000u, "uint64 max");
        tdm_tensor_destroy(x);
        tdm_tensor_destroy(y);
        node_free(&h);
    }
}

/* ---- ArgMax / ArgMin ---- */

static void test_arg(void)
{
    int64_t dims[2] = {2, 4};
    static const double v[] = {1, 3, 3, 0, 2, 2, -1, 2};
    for (int last = 0; last < 2; last++) {
        for (int mx = 0; mx < 2; mx++) {
            node_h h;
            node_new(&h, mx ? "ArgMax" : "ArgMin", 13, 1, 1);
            attr_int(&h, "axis", -1);
            attr_int(&h, "keepdims", 0);
            attr_int(&h, "select_last_index", last);
            tdm_tensor *x = tensor_of(TDM_FLOAT, 2, dims, v), *y;
            const tdm_tensor *in[1] = {x};
            tdm_status st = node_run(&h, 1, in, 1, &y);
            int64_t w0 = mx ? (last ? 2 : 1) : 3, w1 = mx ? (last ? 3 : 0) : 2;
            CHECK(st == TDM_OK && y->rank == 1 && y->dtype == TDM_INT64 && ((int64_t *)y->data)[0] == w0 &&
                      ((int64_t *)y->data)[1] == w1,
                  "Arg%s last=%d", mx ? "Max" : "Min", last);
            tdm_tensor_destroy(x);
            if (!st)
                tdm_tensor_destroy(y);
            node_free(&h);
        }
    }
    /* axis 0 over a strided layout, int32 */
    {
        node_h h;
        node_new(&h, "ArgMax", 11, 1, 1);
        int64_t d[3] = {3, 2, 2};
        static const double iv[] = {0, 5, 1, 1, 4, 5, 1, 9, 4, 0, 7, 2};
        tdm_tensor *x = tensor_of(TDM_INT32, 3, d, iv), *y;
        const tdm_tensor *in[1] = {x};
        tdm_status st = node_run(&h, 1, in, 1, &y);
        static const int64_t w[] = {1, 0, 2, 1};
        CHECK(st == TDM_OK && y->rank == 3 && y->dims[0] == 1 && memcmp(y->data, w, sizeof w) == 0, "ArgMax axis 0");
        tdm_tensor_destroy(x);
        if (!st)
            tdm_tensor_destroy(y);
        node_free(&h);
    }
}

/* ---- softmax family ---- */

static void test_softmax(void)
{
    static const char *ops[] = {"Softmax", "LogSoftmax", "Hardmax"};
    static const tdm_dtype dts[] = {TDM_FLOAT, TDM_DOUBLE, TDM_FLOAT16};
    for (int iter = 0; iter < 120; iter++) {
        int op = irand(3), opset = irand(2) ? 11 : 13;
        tdm_dtype dt = dts[irand(3)];
        int rank = 1 + irand(4);
        int64_t dims[4];
        for (int d = 0; d < rank; d++)
            dims[d] = 1 + irand(5);
        int axis = irand(rank);
        node_h h;
        node_new(&h, ops[op], opset, 1, 1);
        attr_int(&h, "axis", irand(2) ? axis : axis - rank);
        tdm_tensor *x = tensor_rand(dt, rank, dims), *y;
        const tdm_tensor *in[1] = {x};
        tdm_status st = node_run(&h, 1, in, 1, &y);
        CHECK(st == TDM_OK, "%s: %s", ops[op], h.err.msg);
        if (st)
            goto next;
        /* reference: group elements by all coordinates except the normalised ones */
        size_t outer = 1, n = 1, inner = 1;
        for (int d = 0; d < axis; d++)
            outer *= (size_t)dims[d];
        if (opset >= 13) {
            n = (size_t)dims[axis];
            for (int d = axis + 1; d < rank; d++)
                inner *= (size_t)dims[d];
        } else {
            for (int d = axis; d < rank; d++)
                n *= (size_t)dims[d];
        }
        int bad = 0;
        for (size_t a = 0; a < outer; a++)
            for (size_t j = 0; j < inner; j++) {
                double m = -INFINITY, s = 0;
                size_t am = 0;
                for (size_t i = 0; i < n; i++) {
                    double v = tensor_get_f64(x, (a * n + i) * inner + j);
                    if (v > m) {
                        m = v;
                        am = i;
                    }
                }
                for (size_t i = 0; i < n; i++)
                    s += exp(tensor_get_f64(x, (a * n + i) * inner + j) - m);
                for (size_t i = 0; i < n; i++) {
                    size_t k = (a * n + i) * inner + j;
                    double v = tensor_get_f64(x, k), w;
                    w = op == 0 ? exp(v - m) / s : op == 1 ? v - m - log(s) : (double)(i == am);
                    if (!bad && !close_to(tensor_get_f64(y, k), w, dt == TDM_FLOAT16 ? 3e-3 : 1e-5)) {
                        bad = 1;
                        CHECK(0, "%s-%d %s axis %d: element %zu is %g, expected %g", ops[op], opset,
                              tdm_dtype_name(dt), axis, k, tensor_get_f64(y, k), w);
                    }
                }
            }
        checks++;
        tdm_tensor_destroy(y);
    next:
        tdm_tensor_destroy(x);
        node_free(&h);
    }
}

/* ---- normalisations ---- */

static void test_layernorm(void)
{
    for (int iter = 0; iter < 40; iter++) {
        tdm_dtype dt = irand(2) ? TDM_FLOAT : TDM_DOUBLE;
        int rank = 1 + irand(4);
        int64_t dims[4];
        for (int d = 0; d < rank; d++)
            dims[d] = 1 + irand(6);
        int axis = irand(rank);
        node_h h;
        node_new(&h, "LayerNormalization", 17, 3, 3);
        attr_int(&h, "axis", axis);
        attr_float(&h, "epsilon", 1e-3f);
        tdm_tensor *x = tensor_rand(dt, rank, dims), *y[3];
        tdm_tensor *s = tensor_rand(dt, rank - axis, dims + axis), *b = tensor_rand(dt, rank - axis, dims + axis);
        const tdm_tensor *in[3] = {x, s, b};
        tdm_status st = node_run(&h, 3, in, 3, y);
        CHECK(st == TDM_OK, "LayerNormalization: %s", h.err.msg);
        if (!st) {
            size_t cols = s->count, rows = x->count / cols;
            int bad = 0;
            CHECK(y[1]->dtype == TDM_FLOAT && y[1]->rank == rank && y[1]->count == rows, "Mean output");
            for (size_t r = 0; r < rows && !bad; r++) {
                double m = 0, v = 0;
                for (size_t c = 0; c < cols; c++)
                    m += tensor_get_f64(x, r * cols + c);
                m /= (double)cols;
                for (size_t c = 0; c < cols; c++)
                    v += pow(tensor_get_f64(x, r * cols + c) - m, 2);
                v /= (double)cols;
                double inv = 1 / sqrt(v + 1e-3);
                bad |= !close_to(tensor_get_f64(y[1], r), m, 1e-5) || !close_to(tensor_get_f64(y[2], r), inv, 1e-5);
                for (size_t c = 0; c < cols; c++) {
                    double w = (tensor_get_f64(x, r * cols + c) - m) * inv * tensor_get_f64(s, c) + tensor_get_f64(b, c);
                    bad |= !close_to(tensor_get_f64(y[0], r * cols + c), w, 1e-4);
                }
            }
            CHECK(!bad, "LayerNormalization values (rank %d axis %d)", rank, axis);
            for (int i = 0; i < 3; i++)
                tdm_tensor_destroy(y[i]);
        }
        tdm_tensor_destroy(x);
        tdm_tensor_destroy(s);
        tdm_tensor_destroy(b);
        node_free(&h);
    }
}

static void test_batchnorm(void)
{
    for (int training = 0; training < 2; training++) {
        node_h h;
        node_new(&h, "BatchNormalization", 15, 5, training ? 3 : 1);
        if (training)
            attr_int(&h, "training_mode", 1);
        int64_t dims[4] = {2, 3, 4, 5}, c = 3;
        tdm_tensor *x = tensor_rand(TDM_FLOAT, 4, dims), *p[4], *y[3];
        for (int i = 0; i < 4; i++) {
            p[i] = tensor_rand(TDM_FLOAT, 1, &c);
            if (i == 3)
                for (int k = 0; k < 3; k++)
                    tensor_set_f64(p[i], (size_t)k, 0.5 + urand());
        }
        const tdm_tensor *in[5] = {x, p[0], p[1], p[2], p[3]};
        tdm_status st = node_run(&h, 5, in, training ? 3 : 1, y);
        CHECK(st == TDM_OK, "BatchNormalization: %s", h.err.msg);
        if (!st) {
            int bad = 0;
            for (int ch = 0; ch < 3; ch++) {
                double m = tensor_get_f64(p[2], (size_t)ch), v = tensor_get_f64(p[3], (size_t)ch);
                if (training) {
                    double s = 0, q = 0;
                    for (int n = 0; n < 2; n++)
                        for (int j = 0; j < 20; j++)
                            s += tensor_get_f64(x, (size_t)((n * 3 + ch) * 20 + j));
                    double bm = s / 40;
                    for (int n = 0; n < 2; n++)
                        for (int j = 0; j < 20; j++)
                            q += pow(tensor_get_f64(x, (size_t)((n * 3 + ch) * 20 + j)) - bm, 2);
                    double bv = q / 40;
                    bad |= !close_to(tensor_get_f64(y[1], (size_t)ch), m * 0.9 + bm * 0.1, 1e-5);
                    bad |= !close_to(tensor_get_f64(y[2], (size_t)ch), v * 0.9 + bv * 0.1, 1e-5);
                    m = bm;
                    v = bv;
                }
                for (int n = 0; n < 2; n++)
                    for (int j = 0; j < 20; j++) {
                        size_t k = (size_t)((n * 3 + ch) * 20 + j);
                        double w = tensor_get_f64(p[0], (size_t)ch) * (tensor_get_f64(x, k) - m) / sqrt(v + 1e-5) +
                                   tensor_get_f64(p[1], (size_t)ch);
                        bad |= !close_to(tensor_get_f64(y[0], k), w, 1e-4);
                    }
            }
            CHECK(!bad, "BatchNormalization values (training %d)", training);
            for (int i = 0; i < (training ? 3 : 1); i++)
                tdm_tensor_destroy(y[i]);
        }
        tdm_tensor_destroy(x);
        for (int i = 0; i < 4; i++)
            tdm_tensor_destroy(p[i]);
        node_free(&h);
    }
}

/* ---- TopK, CumSum ---- */

static void test_topk_cumsum(void)
{
    int64_t d = 6, one = 1;
    static const double v[] = {3, 1, 3, 7, 1, 7};
    for (int largest = 0; largest < 2; largest++) {
        node_h h;
        node_new(&h, "TopK", 11, 2, 2);
        attr_int(&h, "largest", largest);
        tdm_tensor *x = tensor_of(TDM_INT32, 1, &d, v), *k, *y[2];
        tensor_new(NULL, TDM_INT64, 1, &one, &k);
        ((int64_t *)k->data)[0] = 3;
        const tdm_tensor *in[2] = {x, k};
        tdm_status st = node_run(&h, 2, in, 2, y);
        static const int64_t wl[] = {3, 5, 0}, ws[] = {1, 4, 0};
        static const int32_t vl[] = {7, 7, 3}, vs[] = {1, 1, 3};
        CHECK(st == TDM_OK && y[0]->count == 3 && memcmp(y[1]->data, largest ? wl : ws, sizeof wl) == 0 &&
                  memcmp(y[0]->data, largest ? vl : vs, sizeof vl) == 0,
              "TopK largest=%d ties by lower index", largest);
        ((int64_t *)k->data)[0] = 7;
        tdm_tensor *z[2];
        if (!st)
            for (int i = 0; i < 2; i++)
                tdm_tensor_destroy(y[i]);
        st = node_run(&h, 2, in, 2, z);
        CHECK(st == TDM_E_RUNTIME, "TopK with K > n fails");
        tdm_tensor_destroy(x);
        tdm_tensor_destroy(k);
        node_free(&h);
    }
    for (int mode = 0; mode < 4; mode++) {
        node_h h;
        node_new(&h, "CumSum", 14, 2, 1);
        attr_int(&h, "exclusive", mode & 1);
        attr_int(&h, "reverse", mode >> 1);
        int64_t dims[2] = {2, 3};
        static const double cv[] = {1, 2, 3, 4, 5, 6};
        tdm_tensor *x = tensor_of(TDM_INT64, 2, dims, cv), *ax, *y;
        tensor_new(NULL, TDM_INT32, 0, NULL, &ax);
        ((int32_t *)ax->data)[0] = 1;
        const tdm_tensor *in[2] = {x, ax};
        tdm_status st = node_run(&h, 2, in, 1, &y);
        static const int64_t w[4][6] = {{1, 3, 6, 4, 9, 15}, {0, 1, 3, 0, 4, 9}, {6, 5, 3, 15, 11, 6}, {5, 3, 0, 11, 6, 0}};
        CHECK(st == TDM_OK && memcmp(y->data, w[mode], sizeof w[mode]) == 0, "CumSum mode %d", mode);
        tdm_tensor_destroy(x);
        tdm_tensor_destroy(ax);
        if (!st)
            tdm_tensor_destroy(y);
        node_free(&h);
    }
}

/* ---- Einsum, Det ---- */

static void test_einsum(void)
{
    /* batched matmul with an ellipsis against a direct loop */
    {
        node_h h;
        node_new(&h, "Einsum", 12, 2, 1);
        attr_str(&h, "equation", "...ij, ...jk -> ...ik");
        int64_t da[3] = {2, 3, 4}, db[3] = {2, 4, 5};
        tdm_tensor *a = tensor_rand(TDM_DOUBLE, 3, da), *b = tensor_rand(TDM_DOUBLE, 3, db), *y;
        const tdm_tensor *in[2] = {a, b};
        tdm_status st = node_run(&h, 2, in, 1, &y);
        CHECK(st == TDM_OK && y->rank == 3 && y->dims[0] == 2 && y->dims[1] == 3 && y->dims[2] == 5, "Einsum bmm: %s",
              h.err.msg);
        int bad = 0;
        for (int n = 0; !st && n < 2; n++)
            for (int i = 0; i < 3; i++)
                for (int k = 0; k < 5; k++) {
                    double s = 0;
                    for (int j = 0; j < 4; j++)
                        s += tensor_get_f64(a, (size_t)(n * 12 + i * 4 + j)) * tensor_get_f64(b, (size_t)(n * 20 + j * 5 + k));
                    bad |= !close_to(tensor_get_f64(y, (size_t)(n * 15 + i * 5 + k)), s, 1e-12);
                }
        CHECK(!bad, "Einsum bmm values");
        tdm_tensor_destroy(a);
        tdm_tensor_destroy(b);
        if (!st)
            tdm_tensor_destroy(y);
        node_free(&h);
    }
    /* implicit output, trace and diagonal */
    {
        static const char *eqs[] = {"ii", "ii->i", "ji", "bij"};
        for (int e = 0; e < 4; e++) {
            node_h h;
            node_new(&h, "Einsum", 12, 1, 1);
            attr_str(&h, "equation", eqs[e]);
            int64_t d3[3] = {2, 3, 3};
            int rank = e == 3 ? 3 : 2;
            tdm_tensor *a = tensor_rand(TDM_FLOAT, rank, e == 3 ? d3 : d3 + 1), *y;
            const tdm_tensor *in[1] = {a};
            tdm_status st = node_run(&h, 1, in, 1, &y);
            CHECK(st == TDM_OK, "Einsum %s: %s", eqs[e], h.err.msg);
            if (st)
                goto next;
            if (e == 0) {
                double t = 0;
                for (int i = 0; i < 3; i++)
                    t += tensor_get_f64(a, (size_t)(i * 4));
                CHECK(y->rank == 0 && close_to(tensor_get_f64(y, 0), t, 1e-5), "trace");
            } else if (e == 1) {
                CHECK(y->rank == 1 && y->dims[0] == 3 && tensor_get_f64(y, 2) == tensor_get_f64(a, 8), "diagonal");
            } else if (e == 2) {
                /* implicit output "ij": a transpose */
                CHECK(y->rank == 2 && tensor_get_f64(y, 1) == tensor_get_f64(a, 3), "implicit transpose");
            } else {
                CHECK(y->rank == 3 && memcmp(y->data, a->data, a->nbytes) == 0, "identity");
            }
            tdm_tensor_destroy(y);
        next:
            tdm_tensor_destroy(a);
            node_free(&h);
        }
    }
    /* a malformed equation is an error naming it */
    {
        node_h h;
        node_new(&h, "Einsum", 12, 1, 1);
        attr_str(&h, "equation", "ij,jk->ik");
        int64_t d[2] = {2, 2};
        tdm_tensor *a = tensor_rand(TDM_FLOAT, 2, d), *y;
        const tdm_tensor *in[1] = {a};
        tdm_status st = node_run(&h, 1, in, 1, &y);
        CHECK(st == TDM_E_RUNTIME && strstr(h.err.msg, "equation"), "Einsum term count: %s", h.err.msg);
        tdm_tensor_destroy(a);
        node_free(&h);
    }
    /* Det of 3x3 matrices by the rule of Sarrus */
    {
        node_h h;
        node_new(&h, "Det", 11, 1, 1);
        int64_t d[3] = {4, 3, 3};
        tdm_tensor *a = tensor_rand(TDM_DOUBLE, 3, d), *y;
        const tdm_tensor *in[1] = {a};
        tdm_status st = node_run(&h, 1, in, 1, &y);
        int bad = st != TDM_OK;
        for (int b = 0; !st && b < 4; b++) {
            const double *m = (const double *)a->data + b * 9;
            double w = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
                       m[2] * (m[3] * m[7] - m[4] * m[6]);
            bad |= !close_to(tensor_get_f64(y, (size_t)b), w, 1e-9);
        }
        CHECK(!bad, "Det");
        tdm_tensor_destroy(a);
        if (!st)
            tdm_tensor_destroy(y);
        node_free(&h);
    }
}

/* ---- losses ---- */

static void test_loss(void)
{
    node_h h;
    node_new(&h, "SoftmaxCrossEntropyLoss", 13, 3, 2);
    attr_str(&h, "reduction", "mean");
    attr_int(&h, "ignore_index", 2);
    int64_t dx[3] = {2, 3, 2}, dt[2] = {2, 2}, dc = 3;
    tdm_tensor *x = tensor_rand(TDM_FLOAT, 3, dx), *t, *w = tensor_rand(TDM_FLOAT, 1, &dc), *y[2];
    static const double tv[] = {0, 2, 1, 0};
    t = tensor_of(TDM_INT64, 2, dt, tv);
    const tdm_tensor *in[3] = {x, t, w};
    tdm_status st = node_run(&h, 3, in, 2, y);
    CHECK(st == TDM_OK, "SoftmaxCrossEntropyLoss: %s", h.err.msg);
    if (!st) {
        double num = 0, den = 0;
        for (int n = 0; n < 2; n++)
            for (int d = 0; d < 2; d++) {
                int cls = (int)tv[n * 2 + d];
                double m = -INFINITY, s = 0;
                for (int c = 0; c < 3; c++)
                    m = fmax(m, tensor_get_f64(x, (size_t)((n * 3 + c) * 2 + d)));
                for (int c = 0; c < 3; c++)
                    s += exp(tensor_get_f64(x, (size_t)((n * 3 + c) * 2 + d)) - m);
                double lp = tensor_get_f64(x, (size_t)((n * 3 + (cls == 2 ? 0 : cls)) * 2 + d)) - m - log(s);
                if (cls == 2)
                    continue;
                num += -lp * tensor_get_f64(w, (size_t)cls);
                den += tensor_get_f64(w, (size_t)cls);
            }
        CHECK(y[0]->rank == 0 && close_to(tensor_get_f64(y[0], 0), num / den, 1e-5), "SCE mean: %g vs %g",
              tensor_get_f64(y[0], 0), num / den);
        CHECK(y[1]->rank == 3 && y[1]->count == 12, "SCE log_prob output");
        tdm_tensor_destroy(y[0]);
        tdm_tensor_destroy(y[1]);
    }
    /* a target outside [0, C) is an error */
    ((int64_t *)t->data)[0] = 3;
    st = node_run(&h, 3, in, 2, y);
    CHECK(st == TDM_E_RUNTIME && strstr(h.err.msg, "target"), "target out of range: %s", h.err.msg);
    tdm_tensor_destroy(x);
    tdm_tensor_destroy(t);
    tdm_tensor_destroy(w);
    node_free(&h);
}

/* ---- infer hooks ---- */

static gr_type type_of(tdm_dtype dt, int rank, const int64_t *dims)
{
    gr_type t;
    memset(&t, 0, sizeof t);
    t.kind = TDM_KIND_TENSOR;
    t.dtype = dt;
    t.rank = rank;
    for (int k = 0; k < rank; k++)
        t.dims[k] = (gr_dim){dims[k], NULL};
    return t;
}

static int infer(node_h *h, int n_in, const gr_type *const *in, const tdm_tensor *const *val, int n_out, gr_type *out)
{
    const gr_node *n = &h->g->nodes[h->idx];
    for (int i = 0; i < n_out; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].rank = -1;
    }
    op_infer_ctx ctx = {n, n->version, n_in, in, val, n_out, out, h->m, &h->err};
    return op_table[n->op].infer(&ctx);
}

static int dims_are(const gr_type *t, int rank, const int64_t *dims)
{
    if (t->rank != rank)
        return 0;
    for (int k = 0; k < rank; k++)
        if (t->dims[k].v != dims[k])
            return 0;
    return 1;
}

static void test_infer(void)
{
    int64_t d[4] = {2, 3, 4, 5};
    gr_type x = type_of(TDM_FLOAT, 4, d), o[3];
    {
        node_h h;
        node_new(&h, "ReduceSum", 13, 2, 1);
        attr_int(&h, "keepdims", 0);
        int64_t two = 2;
        tdm_tensor *ax;
        tensor_new(NULL, TDM_INT64, 1, &two, &ax);
        ((int64_t *)ax->data)[0] = 1;
        ((int64_t *)ax->data)[1] = -1;
        gr_type at = type_of(TDM_INT64, 1, &two);
        const gr_type *in[2] = {&x, &at};
        const tdm_tensor *val[2] = {NULL, ax};
        static const int64_t w[] = {2, 4};
        CHECK(infer(&h, 2, in, val, 1, o) == TDM_OK && dims_are(&o[0], 2, w), "ReduceSum-13 infer");
        /* unknown axes with keepdims 0: unknown rank */
        val[1] = NULL;
        CHECK(infer(&h, 2, in, val, 1, o) == TDM_OK && o[0].rank == -1, "ReduceSum-13 infer, unknown axes");
        tdm_tensor_destroy(ax);
        node_free(&h);
    }
    {
        node_h h;
        node_new(&h, "ReduceMean", 13, 1, 1);
        static const int64_t ax[] = {2, 3}, w[] = {2, 3, 1, 1};
        attr_ints(&h, "axes", 2, ax);
        const gr_type *in[1] = {&x};
        const tdm_tensor *val[1] = {NULL};
        CHECK(infer(&h, 1, in, val, 1, o) == TDM_OK && dims_are(&o[0], 4, w) && o[0].dtype == TDM_FLOAT,
              "ReduceMean infer");
        node_free(&h);
    }
    {
        node_h h;
        node_new(&h, "ArgMax", 13, 1, 1);
        attr_int(&h, "axis", 1);
        attr_int(&h, "keepdims", 0);
        static const int64_t w[] = {2, 4, 5};
        const gr_type *in[1] = {&x};
        const tdm_tensor *val[1] = {NULL};
        CHECK(infer(&h, 1, in, val, 1, o) == TDM_OK && dims_are(&o[0], 3, w) && o[0].dtype == TDM_INT64, "ArgMax infer");
        node_free(&h);
    }
    {
        node_h h;
        node_new(&h, "TopK", 11, 2, 2);
        attr_int(&h, "axis", 2);
        int64_t one = 1;
        tdm_tensor *k;
        tensor_new(NULL, TDM_INT64, 1, &one, &k);
        ((int64_t *)k->data)[0] = 2;
        gr_type kt = type_of(TDM_INT64, 1, &one);
        const gr_type *in[2] = {&x, &kt};
        const tdm_tensor *val[2] = {NULL, k};
        static const int64_t w[] = {2, 3, 2, 5};
        CHECK(infer(&h, 2, in, val, 2, o) == TDM_OK && dims_are(&o[0], 4, w) && dims_are(&o[1], 4, w) &&
                  o[1].dtype == TDM_INT64,
              "TopK infer");
        tdm_tensor_destroy(k);
        node_free(&h);
    }
    {
        node_h h;
        node_new(&h, "LayerNormalization", 17, 3, 3);
        attr_int(&h, "axis", 2);
        static const int64_t w[] = {2, 3, 1, 1};
        const gr_type *in[3] = {&x, NULL, NULL};
        const tdm_tensor *val[3] = {NULL, NULL, NULL};
        CHECK(infer(&h, 3, in, val, 3, o) == TDM_OK && dims_are(&o[0], 4, d) && dims_are(&o[1], 4, w) &&
                  dims_are(&o[2], 4, w),
              "LayerNormalization infer");
        node_free(&h);
    }
    {
        node_h h;
        node_new(&h, "Einsum", 12, 2, 1);
        attr_str(&h, "equation", "bij,bjk");
        int64_t da[3] = {7, 3, 4}, db[3] = {7, 4, 6};
        gr_type a = type_of(TDM_FLOAT, 3, da), b = type_of(TDM_FLOAT, 3, db);
        const gr_type *in[2] = {&a, &b};
        const tdm_tensor *val[2] = {NULL, NULL};
        static const int64_t w[] = {3, 6}; /* implicit output: the letters used once, i and k */
        CHECK(infer(&h, 2, in, val, 1, o) == TDM_OK && dims_are(&o[0], 2, w), "Einsum infer");
        node_free(&h);
    }
    {
        node_h h;
        node_new(&h, "SoftmaxCrossEntropyLoss", 13, 2, 2);
        attr_str(&h, "reduction", "none");
        int64_t dx[3] = {2, 5, 3}, dt[2] = {2, 3};
        gr_type a = type_of(TDM_FLOAT, 3, dx), b = type_of(TDM_INT64, 2, dt);
        const gr_type *in[2] = {&a, &b};
        const tdm_tensor *val[2] = {NULL, NULL};
        CHECK(infer(&h, 2, in, val, 2, o) == TDM_OK && dims_are(&o[0], 2, dt) && o[0].dtype == TDM_FLOAT &&
                  dims_are(&o[1], 3, dx),
              "SoftmaxCrossEntropyLoss infer");
        node_free(&h);
    }
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    struct {
        const char *name;
        void (*fn)(void);
    } groups[] = {{"reduce", test_reduce_random}, {"reduce_edges", test_reduce_edges}, {"arg", test_arg},
                  {"softmax", test_softmax},      {"layernorm", test_layernorm},       {"batchnorm", test_batchnorm},
                  {"topk_cumsum", test_topk_cumsum}, {"einsum", test_einsum},          {"loss", test_loss},
                  {"infer", test_infer}};
    int ran = 0;
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
        if (!only || strcmp(only, groups[i].name) == 0) {
            groups[i].fn();
            ran++;
        }
    if (!ran) {
        printf("unknown group '%s'\n", only);
        return 2;
    }
    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0 || checks == 0;
}
