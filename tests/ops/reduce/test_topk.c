/* TopK against a reference written here (qsort of every row: values
 * descending or ascending, NaN above every number as numpy sorts, -0 tied
 * with +0, ties by the lower index), over float rows with NaN, infinities,
 * signed zeros and many ties, int32, int64 and uint64 rows with extreme
 * values, on the last axis and on an inner one, for K = 0, 1, a few, half
 * and all of the axis. Indices and values must be equal. */
#include "core/mem.h"
#include "graph/graph.h"
#include "ops/op.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gr_model *M;
static gr_graph *G;
static tdm_err E;
static int fails, cases;
static unsigned long long rng = 0x9E3779B97F4A7C15ULL;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

typedef struct ref_e {
    double f;     /* float rows */
    int64_t s;    /* signed rows */
    uint64_t u;   /* uint64 rows */
    int64_t i;
} ref_e;

static int Largest;
static tdm_dtype Dt;

static int ref_cmp(const void *pa, const void *pb)
{
    const ref_e *a = pa, *b = pb;
    int c = 0;
    if (Dt == TDM_FLOAT || Dt == TDM_DOUBLE) {
        int an = a->f != a->f, bn = b->f != b->f;
        if (an != bn)
            c = an ? 1 : -1; /* NaN is the largest */
        else if (!an && a->f != b->f)
            c = a->f < b->f ? -1 : 1;
    } else if (Dt == TDM_UINT64) {
        c = a->u < b->u ? -1 : a->u > b->u;
    } else {
        c = a->s < b->s ? -1 : a->s > b->s;
    }
    if (Largest)
        c = -c;
    if (c)
        return c;
    return a->i < b->i ? -1 : a->i > b->i;
}

static void fill(tdm_tensor *x)
{
    static const double specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 0.5};
    for (size_t i = 0; i < x->count; i++) {
        uint64_t r = next();
        switch (x->dtype) {
        case TDM_FLOAT:
            ((float *)x->data)[i] = r % 5 == 0 ? (float)specials[(r >> 8) % 8] : (float)((int)((r >> 16) % 41) - 20) / 4;
            break;
        case TDM_DOUBLE:
            ((double *)x->data)[i] = r % 5 == 0 ? specials[(r >> 8) % 8] : (double)(int64_t)(r >> 20) * 1e-6;
            break;
        case TDM_INT32:
            ((int32_t *)x->data)[i] = r % 7 == 0 ? (r % 2 ? INT32_MIN : INT32_MAX) : (int32_t)((r >> 16) % 9) - 4;
            break;
        case TDM_INT64:
            ((int64_t *)x->data)[i] = r % 7 == 0 ? (r % 2 ? INT64_MIN : INT64_MAX) : (int64_t)((r >> 16) % 9) - 4;
            break;
        case TDM_UINT64:
            ((uint64_t *)x->data)[i] = r % 3 == 0 ? UINT64_MAX - (r >> 60) : (r >> 16) % 9;
            break;
        default:
            break;
        }
    }
}

static ref_e elem(const tdm_tensor *x, size_t off, int64_t i)
{
    ref_e e = {0, 0, 0, i};
    switch (x->dtype) {
    case TDM_FLOAT: e.f = ((const float *)x->data)[off]; break;
    case TDM_DOUBLE: e.f = ((const double *)x->data)[off]; break;
    case TDM_INT32: e.s = ((const int32_t *)x->data)[off]; break;
    case TDM_INT64: e.s = ((const int64_t *)x->data)[off]; break;
    case TDM_UINT64: e.u = ((const uint64_t *)x->data)[off]; break;
    default: break;
    }
    return e;
}

static void run_case(tdm_dtype dt, int64_t outer, int64_t n, int64_t inner, int64_t k, int largest)
{
    int64_t dims[3] = {outer, n, inner}, kd[1] = {1};
    tdm_tensor *x, *kt;
    if (tensor_new(&E, dt, 3, dims, &x) || tensor_new(&E, TDM_INT64, 1, kd, &kt)) {
        printf("FAIL: tensor_new: %s\n", E.msg);
        exit(1);
    }
    fill(x);
    ((int64_t *)kt->data)[0] = k;
    static const char *ins[] = {"x", "k"}, *outs[] = {"v", "i"};
    int nn;
    if (gr_node_add(&E, G, NULL, "TopK", "", 2, ins, 2, outs, &nn)) {
        printf("FAIL: gr_node_add: %s\n", E.msg);
        exit(1);
    }
    gr_attr *a = gr_attr_add(&E, G, nn, "axis");
    a->type = GA_INT;
    a->i = 1;
    a = gr_attr_add(&E, G, nn, "largest");
    a->type = GA_INT;
    a->i = largest;
    gr_node *nd = &G->nodes[nn];
    int op, ver;
    if (op_resolve(&E, "", nd->op_type, 13, &op, &ver)) {
        printf("FAIL: %s\n", E.msg);
        exit(1);
    }
    nd->op = op;
    nd->version = ver;
    const tdm_tensor *in[2] = {x, kt};
    tdm_tensor *y[2] = {mem_calloc(1, sizeof *y[0]), mem_calloc(1, sizeof *y[1])};
    op_ctx ctx = {.node = nd, .version = ver, .n_in = 2, .in = in, .n_out = 2, .out = y, .err = &E, .threads = 1};
    err_clear(&E);
    tdm_status st = op_table[op].run(&ctx);

    char what[96];
    snprintf(what, sizeof what, "%s %lldx%lldx%lld K=%lld largest=%d", tdm_dtype_name(dt), (long long)outer,
             (long long)n, (long long)inner, (long long)k, largest);
    cases++;
    if (st) {
        printf("FAIL %s: %s\n", what, E.msg);
        fails++;
    } else {
        ref_e *row = mem_alloc((size_t)(n + 1) * sizeof *row);
        size_t es = tdm_dtype_size(dt);
        int bad = 0;
        Largest = largest;
        Dt = dt;
        for (int64_t o = 0; o < outer && !bad; o++)
            for (int64_t j = 0; j < inner && !bad; j++) {
                for (int64_t i = 0; i < n; i++)
                    row[i] = elem(x, (size_t)((o * n + i) * inner + j), i);
                qsort(row, (size_t)n, sizeof *row, ref_cmp);
                for (int64_t i = 0; i < k && !bad; i++) {
                    size_t at = (size_t)((o * k + i) * inner + j);
                    int64_t gi = ((const int64_t *)y[1]->data)[at];
                    const char *gv = (const char *)y[0]->data + at * es;
                    const char *wv = (const char *)x->data + (size_t)((o * n + row[i].i) * inner + j) * es;
                    if (gi != row[i].i || memcmp(gv, wv, es)) {
                        printf("FAIL %s: row %lld/%lld rank %lld is index %lld, want %lld\n", what, (long long)o,
                               (long long)j, (long long)i, (long long)gi, (long long)row[i].i);
                        bad = 1;
                    }
                }
            }
        mem_free(row);
        fails += bad;
        if (!bad)
            printf("ok %s\n", what);
    }
    tdm_tensor_destroy(x);
    tdm_tensor_destroy(kt);
    tdm_tensor_destroy(y[0]);
    tdm_tensor_destroy(y[1]);
}

int main(void)
{
    if (gr_model_new(&E, &M) || gr_graph_new(&E, M, NULL, "t", &G)) {
        printf("FAIL: setup: %s\n", E.msg);
        return 1;
    }
    M->main = G;
    static const tdm_dtype dts[] = {TDM_FLOAT, TDM_DOUBLE, TDM_INT32, TDM_INT64, TDM_UINT64};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (int largest = 0; largest < 2; largest++) {
            static const int64_t shapes[][4] = {
                /* outer n inner k */
                {3, 500, 1, 0}, {3, 500, 1, 1}, {2, 3234, 1, 300}, {4, 257, 1, 128},
                {2, 100, 1, 100}, {2, 60, 3, 7}, {1, 1, 1, 1}, {1, 9, 4, 9},
            };
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                run_case(dts[d], shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], largest);
        }
    gr_model_free(M);
    printf("%d of %d TopK cases failed\n", fails, cases);
    return fails != 0;
}
