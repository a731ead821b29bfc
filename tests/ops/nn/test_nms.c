/* NonMaxSuppression against a reference written here that tests every pair
 * (onnxruntime's SuppressByIOU, in float arithmetic as it is written
 * there), on inputs that reach every path of the kernel: thousands of boxes
 * in clusters, boxes spanning many grid cells, empty and inverted
 * boxes, both box encodings, classes far apart (torchvision's batched-NMS
 * offsets), tied scores, score thresholds present and absent, small and huge
 * max_output_boxes_per_class, IoU thresholds 0 and 1, and non-finite
 * coordinates (the pairwise fallback). The selected triples must be equal. */
#define _POSIX_C_SOURCE 199309L
#include "core/mem.h"
#include "graph/graph.h"
#include "ops/nn.h"
#include "ops/op.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static gr_model *M;
static gr_graph *G;
static tdm_err E;
static int fails, cases;
static unsigned long long rng = 0x2545F4914F6CDD1DULL;

static double urand(void) /* [0, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static tdm_tensor *tensor(tdm_dtype dt, int rank, const int64_t *dims)
{
    tdm_tensor *t;
    if (tensor_new(&E, dt, rank, dims, &t)) {
        printf("FAIL: tensor_new: %s\n", E.msg);
        exit(1);
    }
    return t;
}

/* ---- the reference: every candidate against every kept box ---- */

typedef struct ref_cand {
    float s;
    int64_t i;
} ref_cand;

static int ref_cmp(const void *a, const void *b)
{
    const ref_cand *x = a, *y = b;
    if (x->s != y->s)
        return x->s > y->s ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* onnxruntime's MaxMin */
static void maxmin(float lhs, float rhs, float *mn, float *mx)
{
    if (lhs >= rhs) {
        *mn = rhs;
        *mx = lhs;
    } else {
        *mn = lhs;
        *mx = rhs;
    }
}

static void corners(const float *b, int center, float *y0, float *x0, float *y1, float *x1)
{
    if (center) {
        *x0 = b[0] - b[2] / 2;
        *x1 = b[0] + b[2] / 2;
        *y0 = b[1] - b[3] / 2;
        *y1 = b[1] + b[3] / 2;
    } else {
        maxmin(b[0], b[2], y0, y1);
        maxmin(b[1], b[3], x0, x1);
    }
}

static int ref_suppress(const float *a, const float *b, int center, float thr)
{
    float ay0, ax0, ay1, ax1, by0, bx0, by1, bx1;
    corners(a, center, &ay0, &ax0, &ay1, &ax1);
    corners(b, center, &by0, &bx0, &by1, &bx1);
    float ix0 = ax0 > bx0 ? ax0 : bx0, ix1 = ax1 < bx1 ? ax1 : bx1;
    if (ix1 <= ix0)
        return 0;
    float iy0 = ay0 > by0 ? ay0 : by0, iy1 = ay1 < by1 ? ay1 : by1;
    if (iy1 <= iy0)
        return 0;
    float inter = (ix1 - ix0) * (iy1 - iy0);
    if (inter <= 0.0f)
        return 0;
    float a1 = (ay1 - ay0) * (ax1 - ax0), a2 = (by1 - by0) * (bx1 - bx0);
    float uni = a1 + a2 - inter;
    if (a1 <= 0.0f || a2 <= 0.0f || uni <= 0.0f)
        return 0;
    return inter / uni > thr;
}

static int64_t *reference(const float *bx, const float *sc, int64_t nb, int64_t nc, int64_t ns, int center,
                          int64_t maxo, float iou, int has_thr, float thr, size_t *n_out)
{
    int64_t *sel = mem_alloc((size_t)(nb * nc * ns * 3 + 3) * sizeof *sel);
    ref_cand *cand = mem_alloc((size_t)(ns + 1) * sizeof *cand);
    int64_t *kept = mem_alloc((size_t)(ns + 1) * sizeof *kept);
    size_t n = 0;
    if (maxo > ns)
        maxo = ns;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t c = 0; c < nc; c++) {
            const float *s = sc + (b * nc + c) * ns;
            size_t m = 0;
            for (int64_t i = 0; i < ns; i++)
                if (!has_thr || s[i] > thr)
                    cand[m++] = (ref_cand){s[i], i};
            qsort(cand, m, sizeof *cand, ref_cmp);
            int64_t nk = 0;
            for (size_t k = 0; k < m && nk < maxo; k++) {
                int keep = 1;
                for (int64_t j = 0; j < nk && keep; j++)
                    keep = !ref_suppress(bx + (b * ns + cand[k].i) * 4, bx + (b * ns + kept[j]) * 4, center, iou);
                if (!keep)
                    continue;
                kept[nk++] = cand[k].i;
                sel[n * 3] = b;
                sel[n * 3 + 1] = c;
                sel[n * 3 + 2] = cand[k].i;
                n++;
            }
        }
    mem_free(cand);
    mem_free(kept);
    *n_out = n;
    return sel;
}

/* ---- the cases ---- */

typedef struct nms_case {
    const char *name;
    int64_t nb, nc, ns;
    int center;
    int64_t maxo;
    float iou;
    int has_thr;
    float thr;
    int layout;     /* 0 clusters, 1 classes far apart on a diagonal, 2 one big box among small ones */
    int nonfinite;  /* put NaN / inf coordinates into some boxes */
    int tied;       /* scores from a few levels only */
} nms_case;

static void fill(const nms_case *cs, float *bx, float *sc)
{
    int64_t nb = cs->nb, ns = cs->ns, nc = cs->nc;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < ns; i++) {
            float *p = bx + (b * ns + i) * 4;
            double cx, cy, w, h;
            int64_t cluster = (int64_t)(urand() * 12);
            cx = 40 + 25 * (double)cluster + 6 * urand();
            cy = 30 + 17 * (double)(cluster % 5) + 6 * urand();
            w = 4 + 30 * urand();
            h = 4 + 30 * urand();
            if (urand() < 0.25) { /* 30 to 300 wide, log-uniform: some on more cells than the limit */
                w = 30 * exp(2.3 * urand());
                h = w * (0.8 + 0.4 * urand());
            }
            if (urand() < 0.03)
                w = 0; /* empty */
            if (cs->layout == 1) { /* batched-NMS offsets: a class block per 400 units */
                double off = 400.0 * (double)(i % 40);
                cx += off;
                cy += off;
            }
            if (cs->layout == 2 && i == 7) {
                cx = cy = 200;
                w = h = 1e5;
            }
            if (cs->center) {
                if (urand() < 0.05)
                    w = -w; /* inverted: overlaps nothing */
                p[0] = (float)cx;
                p[1] = (float)cy;
                p[2] = (float)w;
                p[3] = (float)h;
            } else if (urand() < 0.5) {
                p[0] = (float)(cy - h / 2);
                p[1] = (float)(cx - w / 2);
                p[2] = (float)(cy + h / 2);
                p[3] = (float)(cx + w / 2);
            } else { /* corners in the other order */
                p[0] = (float)(cy + h / 2);
                p[1] = (float)(cx + w / 2);
                p[2] = (float)(cy - h / 2);
                p[3] = (float)(cx - w / 2);
            }
            if (cs->nonfinite && i % 97 == 5)
                p[i % 4] = i % 2 ? NAN : INFINITY;
        }
    for (int64_t i = 0; i < nb * nc * ns; i++)
        sc[i] = cs->tied ? (float)((int)(urand() * 6)) / 6.0f : (float)urand();
}

/* Runs the kernel on cs's inputs; *y receives the selection. */
static tdm_status run_nms(const nms_case *cs, const tdm_tensor *const *in, tdm_tensor **y)
{
    static const char *ins[] = {"b", "s", "m", "i", "t"}, *outs[] = {"y"};
    int n;
    if (gr_node_add(&E, G, NULL, "NonMaxSuppression", "", 5, ins, 1, outs, &n)) {
        printf("FAIL: gr_node_add: %s\n", E.msg);
        exit(1);
    }
    gr_attr *a = gr_attr_add(&E, G, n, "center_point_box");
    a->type = GA_INT;
    a->i = cs->center;
    gr_node *nd = &G->nodes[n];
    int op, ver;
    if (op_resolve(&E, "", nd->op_type, 13, &op, &ver)) {
        printf("FAIL: %s\n", E.msg);
        exit(1);
    }
    nd->op = op;
    nd->version = ver;
    *y = mem_calloc(1, sizeof **y);
    op_ctx ctx = {.node = nd, .version = ver, .n_in = 5, .in = in, .n_out = 1, .out = y, .err = &E, .threads = 1};
    err_clear(&E);
    return op_table[op].run(&ctx);
}

static void run_case(const nms_case *cs)
{
    int64_t bd[3] = {cs->nb, cs->ns, 4}, sd[3] = {cs->nb, cs->nc, cs->ns}, one[1] = {1};
    tdm_tensor *bx = tensor(TDM_FLOAT, 3, bd), *sc = tensor(TDM_FLOAT, 3, sd);
    tdm_tensor *tm = tensor(TDM_INT64, 1, one), *ti = tensor(TDM_FLOAT, 1, one), *ts = tensor(TDM_FLOAT, 1, one);
    fill(cs, bx->data, sc->data);
    ((int64_t *)tm->data)[0] = cs->maxo;
    ((float *)ti->data)[0] = cs->iou;
    ((float *)ts->data)[0] = cs->thr;

    const tdm_tensor *in[5] = {bx, sc, tm, ti, cs->has_thr ? ts : NULL};
    tdm_tensor *y;
    tdm_status st = run_nms(cs, in, &y);

    size_t nref;
    int64_t *ref = reference(bx->data, sc->data, cs->nb, cs->nc, cs->ns, cs->center, cs->maxo, cs->iou,
                             cs->has_thr, cs->thr, &nref);
    cases++;
    if (st) {
        printf("FAIL %s: %s\n", cs->name, E.msg);
        fails++;
    } else if (y->rank != 2 || y->dims[1] != 3 || (size_t)y->dims[0] != nref) {
        printf("FAIL %s: %lld selected, want %zu\n", cs->name, y->rank == 2 ? (long long)y->dims[0] : -1LL, nref);
        fails++;
    } else if (nref && memcmp(y->data, ref, nref * 3 * sizeof *ref)) {
        const int64_t *g = y->data;
        size_t k = 0;
        while (g[k] == ref[k])
            k++;
        printf("FAIL %s: selection %zu is (%lld %lld %lld), want (%lld %lld %lld)\n", cs->name, k / 3,
               (long long)g[k / 3 * 3], (long long)g[k / 3 * 3 + 1], (long long)g[k / 3 * 3 + 2],
               (long long)ref[k / 3 * 3], (long long)ref[k / 3 * 3 + 1], (long long)ref[k / 3 * 3 + 2]);
        fails++;
    } else {
        printf("ok %s: %zu of %lld boxes selected\n", cs->name, nref, (long long)(cs->nb * cs->nc * cs->ns));
    }
    mem_free(ref);
    tdm_tensor_destroy(y);
    tdm_tensor_destroy(bx);
    tdm_tensor_destroy(sc);
    tdm_tensor_destroy(tm);
    tdm_tensor_destroy(ti);
    tdm_tensor_destroy(ts);
}

/* `test_ops_nn_nms bench`: the kernel on a detector's batched NMS (as
 * torchvision exports it: 90 classes of 300 boxes each, moved apart by
 * class * 321 so that classes never overlap, one NonMaxSuppression over all
 * 27,000), CPU milliseconds per call. Prints figures, asserts nothing. */
static int bench(void)
{
    int64_t ns = 27000, bd[3] = {1, ns, 4}, sd[3] = {1, 1, ns}, one[1] = {1};
    tdm_tensor *bx = tensor(TDM_FLOAT, 3, bd), *sc = tensor(TDM_FLOAT, 3, sd);
    tdm_tensor *tm = tensor(TDM_INT64, 1, one), *ti = tensor(TDM_FLOAT, 1, one);
    float *b = bx->data, *s = sc->data;
    for (int64_t i = 0; i < ns; i++) {
        double off = 321.0 * (double)(i / 300);
        double cx = 8 + 16 * (double)(int)(urand() * 20), cy = 8 + 16 * (double)(int)(urand() * 20);
        double w = 30 * exp(2.37 * urand()), h = w * (0.5 + urand());
        b[i * 4] = (float)(fmax(0, cx - w / 2) + off);
        b[i * 4 + 1] = (float)(fmax(0, cy - h / 2) + off);
        b[i * 4 + 2] = (float)(fmin(320, cx + w / 2) + off);
        b[i * 4 + 3] = (float)(fmin(320, cy + h / 2) + off);
        s[i] = (float)urand();
    }
    ((int64_t *)tm->data)[0] = INT64_MAX;
    ((float *)ti->data)[0] = 0.55f;
    nms_case cs = {"bench", 1, 1, ns, 0, INT64_MAX, 0.55f, 0, 0.0f, 0, 0, 0};
    const tdm_tensor *in[5] = {bx, sc, tm, ti, NULL};
    double best = 1e30;
    int64_t kept = 0;
    for (int rep = 0; rep < 5; rep++) {
        struct timespec t0, t1;
        tdm_tensor *y;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
        tdm_status st = run_nms(&cs, in, &y);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
        if (st) {
            printf("FAIL bench: %s\n", E.msg);
            return 1;
        }
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        best = ms < best ? ms : best;
        kept = y->dims[0];
        tdm_tensor_destroy(y);
    }
    printf("NonMaxSuppression over %lld boxes (%lld kept): %.2f ms CPU (best of 5)\n", (long long)ns,
           (long long)kept, best);
    tdm_tensor_destroy(bx);
    tdm_tensor_destroy(sc);
    tdm_tensor_destroy(tm);
    tdm_tensor_destroy(ti);
    return 0;
}

int main(int argc, char **argv)
{
    if (gr_model_new(&E, &M) || gr_graph_new(&E, M, NULL, "t", &G)) {
        printf("FAIL: setup: %s\n", E.msg);
        return 1;
    }
    M->main = G;
    if (argc > 1 && strcmp(argv[1], "bench") == 0) {
        int rc = bench();
        gr_model_free(M);
        return rc;
    }
    static const nms_case cs[] = {
        /* name               nb nc   ns  ctr  maxo       iou  thr?  thr lay nf tied */
        {"clusters",           1, 1, 3000, 0, INT64_MAX, 0.5f, 0, 0.0f, 0, 0, 0},
        {"clusters-center",    1, 1, 3000, 1, INT64_MAX, 0.5f, 0, 0.0f, 0, 0, 0},
        {"batched-offsets",    1, 1, 6000, 0, INT64_MAX, 0.55f, 1, 0.2f, 1, 0, 0},
        {"classes-batches",    2, 3, 1500, 0, 40, 0.3f, 1, 0.5f, 0, 0, 0},
        {"tied-scores",        1, 2, 2000, 0, INT64_MAX, 0.45f, 1, 0.1f, 0, 0, 1},
        {"iou-0",              1, 1, 1000, 0, INT64_MAX, 0.0f, 0, 0.0f, 0, 0, 0},
        {"iou-1",              1, 1, 1000, 1, INT64_MAX, 1.0f, 0, 0.0f, 0, 0, 0},
        {"max-output-1",       2, 2, 500, 0, 1, 0.5f, 0, 0.0f, 0, 0, 0},
        {"max-output-0",       1, 1, 500, 0, 0, 0.5f, 0, 0.0f, 0, 0, 0},
        {"one-huge-box",       1, 1, 2000, 0, INT64_MAX, 0.5f, 0, 0.0f, 2, 0, 0},
        {"non-finite",         1, 2, 2000, 0, INT64_MAX, 0.5f, 0, 0.0f, 0, 1, 0},
        {"non-finite-center",  1, 1, 2000, 1, INT64_MAX, 0.5f, 1, 0.3f, 1, 1, 0},
        {"few-boxes",          1, 1, 5, 0, INT64_MAX, 0.5f, 0, 0.0f, 0, 0, 0},
        {"no-box",             1, 1, 0, 0, INT64_MAX, 0.5f, 0, 0.0f, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        run_case(&cs[i]);
    gr_model_free(M);
    printf("%d of %d NonMaxSuppression cases failed\n", fails, cases);
    return fails != 0;
}
