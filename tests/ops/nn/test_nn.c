/* The nn run hooks against naive reference loops written here, over
 * randomised shapes and attributes that reach every fast path (pointwise
 * GEMM, im2col in several chunks, depthwise direct, grouped; batched and
 * folded MatMul; Gemm broadcasting; pools with pads, strides, dilations,
 * ceil mode), and the error paths on bad inputs. */
#include "core/mem.h"
#include "graph/graph.h"
#include "ops/nn.h"
#include "ops/op.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gr_model *M;
static gr_graph *G;
static tdm_err E;
static int fails, cases;
static int Threads = 1; /* the threads the kernels run on */
static unsigned long long rng = 0x9E3779B97F4A7C15ULL;

static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) % 2001) / 1000.0f - 1.0f;
}

static tdm_tensor *tensor(tdm_dtype dt, int rank, const int64_t *dims)
{
    tdm_tensor *t;
    if (tensor_new(&E, dt, rank, dims, &t)) {
        printf("FAIL: tensor_new: %s\n", E.msg);
        exit(1);
    }
    if (dt == TDM_FLOAT)
        for (size_t i = 0; i < t->count; i++)
            ((float *)t->data)[i] = frand();
    return t;
}

static int node(const char *op, int n_in, int n_out)
{
    static const char *ins[] = {"i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7", "i8"};
    static const char *outs[] = {"o0", "o1", "o2"};
    int idx;
    if (gr_node_add(&E, G, NULL, op, "", n_in, ins, n_out, outs, &idx)) {
        printf("FAIL: gr_node_add: %s\n", E.msg);
        exit(1);
    }
    return idx;
}

static void attr_int(int n, const char *name, int64_t v)
{
    gr_attr *a = gr_attr_add(&E, G, n, name);
    a->type = GA_INT;
    a->i = v;
}

static void attr_float(int n, const char *name, float v)
{
    gr_attr *a = gr_attr_add(&E, G, n, name);
    a->type = GA_FLOAT;
    a->f = v;
}

static void attr_str(int n, const char *name, const char *v)
{
    gr_attr *a = gr_attr_add(&E, G, n, name);
    a->type = GA_STRING;
    a->s = mem_strdup(v);
    a->s_len = strlen(v);
}

static void attr_ints(int n, const char *name, int cnt, const int64_t *v)
{
    gr_attr *a = gr_attr_add(&E, G, n, name);
    a->type = GA_INTS;
    a->n = (size_t)cnt;
    a->ints = mem_alloc(sizeof(int64_t) * (size_t)(cnt + 1));
    memcpy(a->ints, v, sizeof(int64_t) * (size_t)cnt);
}

/* Runs node n at opset 17 on in[]; outputs land in out[] (new shells). */
static tdm_status run(int n, int n_in, const tdm_tensor **in, int n_out, tdm_tensor **out)
{
    gr_node *nd = &G->nodes[n];
    int op, ver;
    if (op_resolve(&E, "", nd->op_type, 17, &op, &ver)) {
        printf("FAIL: %s\n", E.msg);
        exit(1);
    }
    nd->op = op;
    nd->version = ver;
    for (int i = 0; i < n_out; i++)
        out[i] = mem_calloc(1, sizeof **out);
    op_ctx ctx = {nd, ver, n_in, in, n_out, out, &E, NULL, Threads, NULL, NULL, 0};
    err_clear(&E);
    return op_table[op].run(&ctx);
}

static void check(const char *what, const tdm_tensor *y, const double *want, size_t n, double tol)
{
    cases++;
    if (!y || y->count != n) {
        printf("FAIL %s: %zu values, want %zu\n", what, y ? y->count : 0, n);
        fails++;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        double got = tensor_get_f64(y, i);
        if (!(fabs(got - want[i]) <= tol * (1.0 + fabs(want[i])))) {
            printf("FAIL %s: [%zu] = %.7g, want %.7g\n", what, i, got, want[i]);
            fails++;
            return;
        }
    }
}

/* check() after a run that returned st; a failed run counts as one failed
 * case. Returns whether the run succeeded. */
static int check_run(const char *what, tdm_status st, const tdm_tensor *y, const double *want, size_t n, double tol)
{
    if (st) {
        printf("FAIL %s: %s\n", what, E.msg);
        fails++;
        cases++;
        return 0;
    }
    check(what, y, want, n, tol);
    return 1;
}

static void free_all(tdm_tensor **t, int n)
{
    for (int i = 0; i < n; i++)
        tdm_tensor_destroy(t[i]);
}

/* ------------------------------------------------------------------ Conv */

typedef struct conv_case {
    int nsp;
    int64_t n, c, m, group;
    int64_t in[3], k[3], s[3], d[3], pb[3], pe[3];
    const char *auto_pad;
    int bias;
} conv_case;

static int64_t out_len(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe)
{
    return (in + pb + pe - ((k - 1) * d + 1)) / s + 1;
}

static void test_conv(const conv_case *cc)
{
    int64_t xd[5] = {cc->n, cc->c}, wd[5] = {cc->m, cc->c / cc->group}, bd[1] = {cc->m};
    int64_t pb[3], pe[3], od[3];
    for (int i = 0; i < cc->nsp; i++) {
        xd[2 + i] = cc->in[i];
        wd[2 + i] = cc->k[i];
        pb[i] = cc->pb[i];
        pe[i] = cc->pe[i];
        if (cc->auto_pad) { /* SAME_UPPER */
            int64_t o = (cc->in[i] + cc->s[i] - 1) / cc->s[i];
            int64_t tot = (o - 1) * cc->s[i] + (cc->k[i] - 1) * cc->d[i] + 1 - cc->in[i];
            tot = tot < 0 ? 0 : tot;
            pb[i] = tot / 2;
            pe[i] = tot - tot / 2;
        }
        od[i] = out_len(cc->in[i], cc->k[i], cc->s[i], cc->d[i], pb[i], pe[i]);
    }
    tdm_tensor *x = tensor(TDM_FLOAT, 2 + cc->nsp, xd), *w = tensor(TDM_FLOAT, 2 + cc->nsp, wd);
    tdm_tensor *b = cc->bias ? tensor(TDM_FLOAT, 1, bd) : NULL;
    int n = node("Conv", 3, 1);
    attr_int(n, "group", cc->group);
    attr_ints(n, "strides", cc->nsp, cc->s);
    attr_ints(n, "dilations", cc->nsp, cc->d);
    if (cc->auto_pad) {
        attr_str(n, "auto_pad", cc->auto_pad);
    } else {
        int64_t pads[6];
        for (int i = 0; i < cc->nsp; i++) {
            pads[i] = cc->pb[i];
            pads[cc->nsp + i] = cc->pe[i];
        }
        attr_ints(n, "pads", 2 * cc->nsp, pads);
    }
    const tdm_tensor *in[3] = {x, w, b};
    tdm_tensor *out[1];
    tdm_status st = run(n, 3, in, 1, out);
    /* reference: 3-D with leading ones */
    int64_t I[3] = {1, 1, 1}, K[3] = {1, 1, 1}, S[3] = {1, 1, 1}, D[3] = {1, 1, 1}, P[3] = {0, 0, 0}, O[3] = {1, 1, 1};
    for (int i = 0; i < cc->nsp; i++) {
        int j = 3 - cc->nsp + i;
        I[j] = cc->in[i];
        K[j] = cc->k[i];
        S[j] = cc->s[i];
        D[j] = cc->d[i];
        P[j] = pb[i];
        O[j] = od[i];
    }
    size_t total = (size_t)(cc->n * cc->m * O[0] * O[1] * O[2]);
    double *want = malloc(total * sizeof *want + 8);
    const float *X = x->data, *W = w->data, *B = b ? b->data : NULL;
    int64_t cg = cc->c / cc->group, mg = cc->m / cc->group;
    size_t o = 0;
    for (int64_t bn = 0; bn < cc->n; bn++)
        for (int64_t m = 0; m < cc->m; m++)
            for (int64_t z = 0; z < O[0]; z++)
                for (int64_t yy = 0; yy < O[1]; yy++)
                    for (int64_t xx = 0; xx < O[2]; xx++) {
                        double s = B ? B[m] : 0.0;
                        for (int64_t c = 0; c < cg; c++)
                            for (int64_t a = 0; a < K[0]; a++)
                                for (int64_t bb = 0; bb < K[1]; bb++)
                                    for (int64_t e = 0; e < K[2]; e++) {
                                        int64_t iz = z * S[0] + a * D[0] - P[0], iy = yy * S[1] + bb * D[1] - P[1];
                                        int64_t ix = xx * S[2] + e * D[2] - P[2];
                                        if (iz < 0 || iz >= I[0] || iy < 0 || iy >= I[1] || ix < 0 || ix >= I[2])
                                            continue;
                                        int64_t ic = (m / mg) * cg + c;
                                        s += (double)X[(((bn * cc->c + ic) * I[0] + iz) * I[1] + iy) * I[2] + ix] *
                                             W[(((m * cg + c) * K[0] + a) * K[1] + bb) * K[2] + e];
                                    }
                        want[o++] = s;
                    }
    char what[128];
    snprintf(what, sizeof what, "Conv %dD c=%lld m=%lld g=%lld k=%lld s=%lld", cc->nsp, (long long)cc->c,
             (long long)cc->m, (long long)cc->group, (long long)cc->k[cc->nsp - 1], (long long)cc->s[cc->nsp - 1]);
    check_run(what, st, out[0], want, total, 1e-4);
    free(want);
    free_all(out, 1);
    tdm_tensor_destroy(x);
    tdm_tensor_destroy(w);
    tdm_tensor_destroy(b);
}

/* --------------------------------------------------------- ConvTranspose */

static void test_convt(int64_t c, int64_t m, int64_t group, int64_t h, int64_t w_, int64_t k, int64_t s, int64_t d,
                       int64_t pb, int64_t pe, int64_t opad)
{
    int64_t xd[4] = {2, c, h, w_}, wd[4] = {c, m / group, k, k}, bd[1] = {m};
    tdm_tensor *x = tensor(TDM_FLOAT, 4, xd), *w = tensor(TDM_FLOAT, 4, wd), *b = tensor(TDM_FLOAT, 1, bd);
    int n = node("ConvTranspose", 3, 1);
    int64_t st2[2] = {s, s}, d2[2] = {d, d}, pads[4] = {pb, pb, pe, pe}, op2[2] = {opad, opad};
    attr_int(n, "group", group);
    attr_ints(n, "strides", 2, st2);
    attr_ints(n, "dilations", 2, d2);
    attr_ints(n, "pads", 4, pads);
    attr_ints(n, "output_padding", 2, op2);
    const tdm_tensor *in[3] = {x, w, b};
    tdm_tensor *out[1];
    tdm_status stt = run(n, 3, in, 1, out);
    int64_t oh = s * (h - 1) + opad + (k - 1) * d + 1 - pb - pe, ow = s * (w_ - 1) + opad + (k - 1) * d + 1 - pb - pe;
    size_t total = (size_t)(2 * m * oh * ow);
    double *want = calloc(total + 1, sizeof *want);
    const float *X = x->data, *W = w->data, *B = b->data;
    int64_t cg = c / group, mg = m / group;
    for (int64_t bn = 0; bn < 2; bn++)
        for (int64_t oc = 0; oc < m; oc++)
            for (int64_t i = 0; i < oh * ow; i++)
                want[(bn * m + oc) * oh * ow + i] = B[oc];
    for (int64_t bn = 0; bn < 2; bn++)
        for (int64_t ic = 0; ic < c; ic++)
            for (int64_t y = 0; y < h; y++)
                for (int64_t xx = 0; xx < w_; xx++)
                    for (int64_t j = 0; j < mg; j++)
                        for (int64_t ky = 0; ky < k; ky++)
                            for (int64_t kx = 0; kx < k; kx++) {
                                int64_t oy = y * s + ky * d - pb, ox = xx * s + kx * d - pb;
                                if (oy < 0 || oy >= oh || ox < 0 || ox >= ow)
                                    continue;
                                int64_t oc = (ic / cg) * mg + j;
                                want[((bn * m + oc) * oh + oy) * ow + ox] +=
                                    (double)X[((bn * c + ic) * h + y) * w_ + xx] * W[((ic * mg + j) * k + ky) * k + kx];
                            }
    char what[96];
    snprintf(what, sizeof what, "ConvTranspose c=%lld m=%lld g=%lld k=%lld s=%lld d=%lld", (long long)c,
             (long long)m, (long long)group, (long long)k, (long long)s, (long long)d);
    check_run(what, stt, out[0], want, total, 1e-4);
    free(want);
    free_all(out, 1);
    tdm_tensor_destroy(x);
    tdm_tensor_destroy(w);
    tdm_tensor_destroy(b);
}

/* ---------------------------------------------------------------- MatMul */

static void test_matmul(int ra, const int64_t *ad, int rb, const int64_t *bd)
{
    tdm_tensor *a = tensor(TDM_FLOAT, ra, ad), *b = tensor(TDM_FLOAT, rb, bd);
    int n = node("MatMul", 2, 1);
    const tdm_tensor *in[2] = {a, b};
    tdm_tensor *out[1];
    tdm_status st = run(n, 2, in, 1, out);
    /* reference with numpy rules */
    int64_t A[TDM_MAX_RANK + 1], Bd[TDM_MAX_RANK + 1];
    int r1 = ra, r2 = rb;
    memcpy(A, ad, sizeof(int64_t) * (size_t)ra);
    memcpy(Bd, bd, sizeof(int64_t) * (size_t)rb);
    if (r1 == 1) {
        A[1] = A[0];
        A[0] = 1;
        r1 = 2;
    }
    if (r2 == 1) {
        Bd[1] = 1;
        r2 = 2;
    }
    int64_t m = A[r1 - 2], k = A[r1 - 1], nn = Bd[r2 - 1];
    int nb = r1 - 2 > r2 - 2 ? r1 - 2 : r2 - 2;
    int64_t bdims[TDM_MAX_RANK];
    size_t batches = 1;
    for (int i = 0; i < nb; i++) {
        int ia = i - (nb - (r1 - 2)), ib = i - (nb - (r2 - 2));
        int64_t da = ia >= 0 ? A[ia] : 1, db = ib >= 0 ? Bd[ib] : 1;
        bdims[i] = da > db ? da : db;
        batches *= (size_t)bdims[i];
    }
    size_t total = batches * (size_t)(m * nn);
    double *want = malloc(total * sizeof *want + 8);
    const float *pa = a->data, *pb = b->data;
    for (size_t bi = 0; bi < batches; bi++) {
        size_t rem = bi, oa = 0, ob = 0, sa = 1, sb = 1;
        for (int i = nb - 1; i >= 0; i--) {
            size_t idx = rem % (size_t)bdims[i];
            rem /= (size_t)bdims[i];
            int ia = i - (nb - (r1 - 2)), ib = i - (nb - (r2 - 2));
            if (ia >= 0) {
                oa += (A[ia] == 1 ? 0 : idx) * sa;
                sa *= (size_t)A[ia];
            }
            if (ib >= 0) {
                ob += (Bd[ib] == 1 ? 0 : idx) * sb;
                sb *= (size_t)Bd[ib];
            }
        }
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < nn; j++) {
                double s = 0;
                for (int64_t p = 0; p < k; p++)
                    s += (double)pa[oa * (size_t)(m * k) + (size_t)(i * k + p)] *
                         pb[ob * (size_t)(k * nn) + (size_t)(p * nn + j)];
                want[bi * (size_t)(m * nn) + (size_t)(i * nn + j)] = s;
            }
    }
    if (st) {
        printf("FAIL MatMul: %s\n", E.msg);
        fails++;
        cases++;
    } else {
        check("MatMul", out[0], want, total, 1e-4);
    }
    free(want);
    free_all(out, 1);
    tdm_tensor_destroy(a);
    tdm_tensor_destroy(b);
}

/* ------------------------------------------------------------------ Gemm */

static void test_gemm(int64_t m, int64_t nn, int64_t k, int ta, int tb, int crank, float alpha, float beta)
{
    int64_t ad[2] = {ta ? k : m, ta ? m : k}, bd[2] = {tb ? nn : k, tb ? k : nn};
    int64_t cd[2] = {crank == 2 ? m : nn, nn};
    tdm_tensor *a = tensor(TDM_FLOAT, 2, ad), *b = tensor(TDM_FLOAT, 2, bd);
    tdm_tensor *c = crank >= 0 ? tensor(TDM_FLOAT, crank, crank == 1 ? cd + 1 : cd) : NULL;
    int n = node("Gemm", 3, 1);
    attr_int(n, "transA", ta);
    attr_int(n, "transB", tb);
    attr_float(n, "alpha", alpha);
    attr_float(n, "beta", beta);
    const tdm_tensor *in[3] = {a, b, c};
    tdm_tensor *out[1];
    tdm_status st = run(n, 3, in, 1, out);
    double *want = malloc((size_t)(m * nn) * sizeof *want + 8);
    const float *pa = a->data, *pb = b->data, *pc = c ? c->data : NULL;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < nn; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += (double)(ta ? pa[p * m + i] : pa[i * k + p]) * (tb ? pb[j * k + p] : pb[p * nn + j]);
            double cv = !pc ? 0 : crank == 0 ? pc[0] : crank == 1 ? pc[j] : pc[i * nn + j];
            want[i * nn + j] = alpha * s + beta * cv;
        }
    if (st) {
        printf("FAIL Gemm: %s\n", E.msg);
        fails++;
        cases++;
    } else {
        check("Gemm", out[0], want, (size_t)(m * nn), 1e-4);
    }
    free(want);
    free_all(out, 1);
    tdm_tensor_destroy(a);
    tdm_tensor_destroy(b);
    tdm_tensor_destroy(c);
}

/* ----------------------------------------------------------------- pools */

static void test_pool(const char *op, int64_t h, int64_t w_, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                      int ceil_mode, int include_pad)
{
    int64_t xd[4] = {2, 3, h, w_};
    tdm_tensor *x = tensor(TDM_FLOAT, 4, xd);
    int is_max = strcmp(op, "MaxPool") == 0;
    int n = node(op, 1, is_max ? 2 : 1);
    int64_t k2[2] = {k, k}, s2[2] = {s, s}, d2[2] = {d, d}, pads[4] = {pb, pb, pe, pe};
    attr_ints(n, "kernel_shape", 2, k2);
    attr_ints(n, "strides", 2, s2);
    if (is_max)
        attr_ints(n, "dilations", 2, d2);
    attr_ints(n, "pads", 4, pads);
    attr_int(n, "ceil_mode", ceil_mode);
    if (!is_max)
        attr_int(n, "count_include_pad", include_pad);
    const tdm_tensor *in[1] = {x};
    tdm_tensor *out[2] = {NULL, NULL};
    tdm_status st = run(n, 1, in, is_max ? 2 : 1, out);
    int64_t ek = (k - 1) * d + 1;
    int64_t oh = (h + pb + pe - ek + (ceil_mode ? s - 1 : 0)) / s + 1;
    int64_t ow = (w_ + pb + pe - ek + (ceil_mode ? s - 1 : 0)) / s + 1;
    if (ceil_mode && (oh - 1) * s >= h + pb)
        oh--;
    if (ceil_mode && (ow - 1) * s >= w_ + pb)
        ow--;
    size_t total = (size_t)(6 * oh * ow);
    double *want = malloc(total * sizeof *want + 8), *wi = malloc(total * sizeof *wi + 8);
    const float *X = x->data;
    size_t o = 0;
    for (int64_t pl = 0; pl < 6; pl++)
        for (int64_t y = 0; y < oh; y++)
            for (int64_t xx = 0; xx < ow; xx++, o++) {
                double best = -INFINITY, sum = 0;
                int64_t bi = -1, cnt = 0, cntp = 0;
                for (int64_t a = 0; a < k; a++)
                    for (int64_t b = 0; b < k; b++) {
                        int64_t iy = y * s + a * d - pb, ix = xx * s + b * d - pb;
                        if (iy < h + pe && ix < w_ + pe)
                            cntp++;
                        if (iy < 0 || iy >= h || ix < 0 || ix >= w_)
                            continue;
                        double v = X[(pl * h + iy) * w_ + ix];
                        if (v > best) {
                            best = v;
                            bi = (pl * h + iy) * w_ + ix;
                        }
                        sum += v;
                        cnt++;
                    }
                want[o] = is_max ? best : sum / (double)(include_pad ? cntp : cnt);
                wi[o] = (double)bi;
            }
    char what[96];
    snprintf(what, sizeof what, "%s %lldx%lld k=%lld s=%lld d=%lld pads=%lld,%lld ceil=%d", op, (long long)h,
             (long long)w_, (long long)k, (long long)s, (long long)d, (long long)pb, (long long)pe, ceil_mode);
    if (check_run(what, st, out[0], want, total, 1e-5) && is_max)
        check("MaxPool indices", out[1], wi, total, 0);
    free(want);
    free(wi);
    free_all(out, is_max ? 2 : 1);
    tdm_tensor_destroy(x);
}

/* MaxPool without Indices (the fast float paths: the AVX2 row kernel at
 * strides 1 and 2 across, the portable one else) against the reference
 * fold written here (first tap, then v > best in (kh, kw) order), bit for
 * bit, on data with ties, signed zeros and NaNs; on 1 and 2 threads; and
 * against the Indices path's Y. */
static int same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

static void test_maxpool_exact(int64_t planes, int64_t h, int64_t w_, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                               int64_t pt, int64_t pl, int64_t pb, int64_t pr, int ceil_mode, int specials)
{
    int64_t xd[4] = {1, planes, h, w_};
    tdm_tensor *x = tensor(TDM_FLOAT, 4, xd);
    float *X = x->data;
    if (specials)
        for (size_t i = 0; i < x->count; i++) {
            unsigned r = (unsigned)(rng >> 40) % 23;
            frand();
            if (r == 0)
                X[i] = NAN;
            else if (r == 1)
                X[i] = -0.0f;
            else if (r == 2)
                X[i] = 0.0f;
            else if (r == 3)
                X[i] = -INFINITY;
        }
    int64_t oh = (h + pt + pb - kh + (ceil_mode ? sh - 1 : 0)) / sh + 1;
    int64_t ow = (w_ + pl + pr - kw + (ceil_mode ? sw - 1 : 0)) / sw + 1;
    if (ceil_mode && (oh - 1) * sh >= h + pt)
        oh--;
    if (ceil_mode && (ow - 1) * sw >= w_ + pl)
        ow--;
    size_t total = (size_t)(planes * oh * ow);
    float *want = malloc(total * sizeof *want + 4);
    size_t o = 0;
    for (int64_t p = 0; p < planes; p++)
        for (int64_t y = 0; y < oh; y++)
            for (int64_t xx = 0; xx < ow; xx++, o++) {
                float best = 0;
                int first = 1;
                for (int64_t a = 0; a < kh; a++)
                    for (int64_t b = 0; b < kw; b++) {
                        int64_t iy = y * sh + a - pt, ix = xx * sw + b - pl;
                        if (iy < 0 || iy >= h || ix < 0 || ix >= w_)
                            continue;
                        float v = X[(p * h + iy) * w_ + ix];
                        if (first || v > best) {
                            best = v;
                            first = 0;
                        }
                    }
                want[o] = best;
            }
    char what[128];
    snprintf(what, sizeof what, "MaxPool exact %lldx%lldx%lld k=%lldx%lld s=%lld,%lld pads=%lld,%lld,%lld,%lld ceil=%d",
             (long long)planes, (long long)h, (long long)w_, (long long)kh, (long long)kw, (long long)sh,
             (long long)sw, (long long)pt, (long long)pl, (long long)pb, (long long)pr, ceil_mode);
    for (int with_idx = 0; with_idx <= 1; with_idx++)
        for (Threads = 1; Threads <= 2; Threads++) {
            int n = node("MaxPool", 1, 1 + with_idx);
            int64_t k2[2] = {kh, kw}, s2[2] = {sh, sw}, pads[4] = {pt, pl, pb, pr};
            attr_ints(n, "kernel_shape", 2, k2);
            attr_ints(n, "strides", 2, s2);
            attr_ints(n, "pads", 4, pads);
            attr_int(n, "ceil_mode", ceil_mode);
            const tdm_tensor *in[1] = {x};
            tdm_tensor *out[2] = {NULL, NULL};
            tdm_status st = run(n, 1, in, 1 + with_idx, out);
            cases++;
            if (st) {
                printf("FAIL %s: %s\n", what, E.msg);
                fails++;
            } else if (out[0]->count != total || !same_bits(out[0]->data, want, total)) {
                printf("FAIL %s (threads %d, indices %d): not bit-identical to the reference\n", what, Threads,
                       with_idx);
                fails++;
            }
            free_all(out, 1 + with_idx);
        }
    Threads = 1;
    free(want);
    tdm_tensor_destroy(x);
}

/* GlobalAveragePool (float: the AVX2 kernel when usable) against the
 * portable sum written here (8 partial sums, element i into sum i mod 8,
 * the tail from sum 0, combined in a fixed order), bit for bit, on 1 and
 * 2 threads. */
static void test_gap_exact(int64_t planes, int64_t h, int64_t w_)
{
    int64_t xd[4] = {1, planes, h, w_};
    tdm_tensor *x = tensor(TDM_FLOAT, 4, xd);
    const float *X = x->data;
    size_t sp = (size_t)(h * w_);
    float *want = malloc((size_t)planes * sizeof *want + 4);
    for (int64_t p = 0; p < planes; p++) {
        const float *v = X + (size_t)p * sp;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        size_t i = 0;
        for (; i + 8 <= sp; i += 8)
            for (size_t l = 0; l < 8; l++)
                acc[l] += v[i + l];
        for (size_t l = 0; i < sp; i++, l++)
            acc[l] += v[i];
        float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
        want[p] = s / (float)sp;
    }
    for (Threads = 1; Threads <= 2; Threads++) {
        int n = node("GlobalAveragePool", 1, 1);
        const tdm_tensor *in[1] = {x};
        tdm_tensor *out[1] = {NULL};
        tdm_status st = run(n, 1, in, 1, out);
        cases++;
        if (st || out[0]->count != (size_t)planes || !same_bits(out[0]->data, want, (size_t)planes)) {
            printf("FAIL GlobalAveragePool exact %lldx%lldx%lld (threads %d)\n", (long long)planes, (long long)h,
                   (long long)w_, Threads);
            fails++;
        }
        free_all(out, 1);
    }
    Threads = 1;
    free(want);
    tdm_tensor_destroy(x);
}

/* LpPool / GlobalLpPool / GlobalMaxPool on a hand-checked 2x2 plane. */
static void test_lp(void)
{
    int64_t xd[4] = {1, 1, 2, 2};
    tdm_tensor *x = tensor(TDM_FLOAT, 4, xd);
    float *xp = x->data;
    xp[0] = 1;
    xp[1] = -2;
    xp[2] = 3;
    xp[3] = 4;
    const tdm_tensor *in[1] = {x};
    tdm_tensor *out[1];
    int n = node("LpPool", 1, 1);
    int64_t k2[2] = {2, 2};
    attr_ints(n, "kernel_shape", 2, k2);
    double w1 = sqrt(30.0), w2 = 10.0, w3 = 4.0, w4 = cbrt(100.0);
    if (run(n, 1, in, 1, out)) {
        printf("FAIL LpPool p=2: %s\n", E.msg);
        fails++;
        cases++;
    } else {
        check("LpPool p=2", out[0], &w1, 1, 1e-6);
    }
    free_all(out, 1);
    n = node("GlobalLpPool", 1, 1);
    attr_int(n, "p", 1);
    if (run(n, 1, in, 1, out)) {
        printf("FAIL GlobalLpPool p=1: %s\n", E.msg);
        fails++;
        cases++;
    } else {
        check("GlobalLpPool p=1", out[0], &w2, 1, 1e-6);
    }
    free_all(out, 1);
    n = node("GlobalMaxPool", 1, 1);
    if (run(n, 1, in, 1, out)) {
        printf("FAIL GlobalMaxPool: %s\n", E.msg);
        fails++;
        cases++;
    } else {
        check("GlobalMaxPool", out[0], &w3, 1, 1e-6);
    }
    free_all(out, 1);
    n = node("LpPool", 1, 1);
    attr_ints(n, "kernel_shape", 2, k2);
    attr_int(n, "p", 3);
    if (run(n, 1, in, 1, out)) {
        printf("FAIL LpPool p=3: %s\n", E.msg);
        fails++;
        cases++;
    } else {
        check("LpPool p=3", out[0], &w4, 1, 1e-6);
    }
    free_all(out, 1);
    tdm_tensor_destroy(x);
}

/* ------------------------------------------------------- other dtypes */

static tdm_tensor *convert(const tdm_tensor *f, tdm_dtype dt)
{
    tdm_tensor *t = tensor(dt, f->rank, f->dims);
    for (size_t i = 0; i < f->count; i++) {
        float v = ((const float *)f->data)[i];
        if (dt == TDM_FLOAT16)
            ((uint16_t *)t->data)[i] = f32_to_fp16(v);
        else
            tensor_set_f64(t, i, v);
    }
    return t;
}

/* Runs op on float inputs and on their double / float16 copies (float16
 * inputs are first rounded, so both runs see the same values) and
 * compares. */
static void test_dtypes(const char *op, int n_in, const int64_t (*shapes)[5], const int *ranks,
                        void (*attrs)(int n))
{
    static const tdm_dtype dts[2] = {TDM_DOUBLE, TDM_FLOAT16};
    tdm_tensor *f[4];
    for (int i = 0; i < n_in; i++) {
        f[i] = tensor(TDM_FLOAT, ranks[i], shapes[i]);
        for (size_t k = 0; k < f[i]->count; k++) /* exactly representable in float16 */
            ((float *)f[i]->data)[k] = fp16_to_f32(f32_to_fp16(((float *)f[i]->data)[k]));
    }
    int n = node(op, n_in, 1);
    if (attrs)
        attrs(n);
    tdm_tensor *ref[1];
    if (run(n, n_in, (const tdm_tensor **)f, 1, ref)) {
        printf("FAIL %s float: %s\n", op, E.msg);
        fails++;
        cases++;
        free_all(f, n_in);
        return;
    }
    double *want = malloc(ref[0]->count * sizeof *want + 8);
    for (size_t k = 0; k < ref[0]->count; k++)
        want[k] = ((const float *)ref[0]->data)[k];
    for (int d = 0; d < 2; d++) {
        tdm_tensor *c[4], *out[1];
        for (int i = 0; i < n_in; i++)
            c[i] = convert(f[i], dts[d]);
        char what[64];
        snprintf(what, sizeof what, "%s %s", op, tdm_dtype_name(dts[d]));
        if (run(n, n_in, (const tdm_tensor **)c, 1, out)) {
            printf("FAIL %s: %s\n", what, E.msg);
            fails++;
            cases++;
        } else if (out[0]->dtype != dts[d]) {
            printf("FAIL %s: output is %s\n", what, tdm_dtype_name(out[0]->dtype));
            fails++;
            cases++;
        } else {
            check(what, out[0], want, ref[0]->count, d == 0 ? 1e-5 : 1e-2);
        }
        free_all(out, 1);
        free_all(c, n_in);
    }
    free(want);
    free_all(ref, 1);
    free_all(f, n_in);
}

static void attrs_conv(int n)
{
    int64_t p4[4] = {1, 1, 1, 1}, s2[2] = {2, 1};
    attr_ints(n, "pads", 4, p4);
    attr_ints(n, "strides", 2, s2);
}

static void attrs_pool(int n)
{
    int64_t k2[2] = {3, 3}, p4[4] = {1, 1, 1, 1};
    attr_ints(n, "kernel_shape", 2, k2);
    attr_ints(n, "pads", 4, p4);
}

static void attrs_gemm(int n)
{
    attr_int(n, "transB", 1);
    attr_float(n, "alpha", 0.5f);
}

static void test_all_dtypes(void)
{
    static const int64_t conv[3][5] = {{1, 4, 7, 6}, {6, 4, 3, 3}, {6}};
    static const int r_conv[3] = {4, 4, 1};
    test_dtypes("Conv", 3, conv, r_conv, attrs_conv);
    static const int64_t convt[3][5] = {{1, 4, 5, 5}, {4, 3, 3, 3}, {3}};
    test_dtypes("ConvTranspose", 3, convt, r_conv, attrs_conv);
    static const int64_t mm[2][5] = {{2, 5, 7}, {7, 3}};
    static const int r_mm[2] = {3, 2};
    test_dtypes("MatMul", 2, mm, r_mm, NULL);
    static const int64_t gm[3][5] = {{5, 7}, {4, 7}, {4}};
    static const int r_gm[3] = {2, 2, 1};
    test_dtypes("Gemm", 3, gm, r_gm, attrs_gemm);
    static const int64_t pool[1][5] = {{2, 3, 7, 8}};
    static const int r_pool[1] = {4};
    test_dtypes("MaxPool", 1, pool, r_pool, attrs_pool);
    test_dtypes("AveragePool", 1, pool, r_pool, attrs_pool);
    test_dtypes("GlobalAveragePool", 1, pool, r_pool, NULL);
}

/* ----------------------------------------------------------------- infer */

static gr_type ty(tdm_dtype dt, int rank, const int64_t *dims)
{
    gr_type t;
    memset(&t, 0, sizeof t);
    t.kind = TDM_KIND_TENSOR;
    t.dtype = dt;
    t.rank = rank;
    for (int i = 0; i < rank; i++)
        t.dims[i] = (gr_dim){dims[i], dims[i] < 0 ? "batch" : NULL};
    return t;
}

/* Runs node n's infer hook on in[] and checks output 0's dtype and dims. */
static void check_infer(const char *what, int n, int n_in, const gr_type **in, tdm_dtype want_dt, int want_rank,
                        const int64_t *want)
{
    gr_node *nd = &G->nodes[n];
    int op, ver;
    cases++;
    if (op_resolve(&E, "", nd->op_type, 17, &op, &ver) || !op_table[op].infer) {
        printf("FAIL %s: no infer hook\n", what);
        fails++;
        return;
    }
    nd->op = op;
    nd->version = ver;
    gr_type out[2];
    memset(out, 0, sizeof out);
    out[0].rank = out[1].rank = -1;
    const tdm_tensor *vals[9] = {NULL};
    op_infer_ctx ictx = {nd, ver, n_in, in, vals, nd->n_outputs, out, M, &E};
    if (op_table[op].infer(&ictx)) {
        printf("FAIL %s: %s\n", what, E.msg);
        fails++;
        return;
    }
    int bad = out[0].dtype != want_dt || out[0].rank != want_rank;
    for (int i = 0; !bad && i < want_rank; i++)
        bad = out[0].dims[i].v != want[i];
    if (bad) {
        printf("FAIL %s: dtype %d rank %d dims", what, (int)out[0].dtype, out[0].rank);
        for (int i = 0; i < out[0].rank; i++)
            printf(" %lld", (long long)out[0].dims[i].v);
        printf("\n");
        fails++;
    }
}

static void test_infer(void)
{
    {
        int64_t xd[4] = {-1, 3, 224, 224}, wd[4] = {64, 3, 7, 7}, want[4] = {-1, 64, 112, 112};
        gr_type x = ty(TDM_FLOAT, 4, xd), w = ty(TDM_FLOAT, 4, wd);
        const gr_type *in[2] = {&x, &w};
        int n = node("Conv", 2, 1);
        int64_t s2[2] = {2, 2}, p4[4] = {3, 3, 3, 3};
        attr_ints(n, "strides", 2, s2);
        attr_ints(n, "pads", 4, p4);
        check_infer("infer Conv", n, 2, in, TDM_FLOAT, 4, want);
    }
    {
        int64_t xd[4] = {1, 4, 3, 3}, wd[4] = {4, 2, 3, 3}, want[4] = {1, 4, 10, 8};
        gr_type x = ty(TDM_FLOAT, 4, xd), w = ty(TDM_FLOAT, 4, wd);
        const gr_type *in[2] = {&x, &w};
        int n = node("ConvTranspose", 2, 1);
        int64_t s2[2] = {3, 2}, os[2] = {10, 8};
        attr_int(n, "group", 2);
        attr_ints(n, "strides", 2, s2);
        attr_ints(n, "output_shape", 2, os);
        check_infer("infer ConvTranspose", n, 2, in, TDM_FLOAT, 4, want);
    }
    {
        int64_t ad[4] = {-1, 1, 5, 7}, bd[3] = {3, 7, 2}, want[4] = {-1, 3, 5, 2};
        gr_type a = ty(TDM_FLOAT, 4, ad), b = ty(TDM_FLOAT, 3, bd);
        const gr_type *in[2] = {&a, &b};
        check_infer("infer MatMul", node("MatMul", 2, 1), 2, in, TDM_FLOAT, 4, want);
    }
    {
        int64_t ad[2] = {7, 5}, bd[2] = {9, 7}, want[2] = {5, 9};
        gr_type a = ty(TDM_FLOAT, 2, ad), b = ty(TDM_FLOAT, 2, bd);
        const gr_type *in[2] = {&a, &b};
        int n = node("Gemm", 2, 1);
        attr_int(n, "transA", 1);
        attr_int(n, "transB", 1);
        check_infer("infer Gemm", n, 2, in, TDM_FLOAT, 2, want);
    }
    {
        int64_t xd[4] = {1, 3, 4, 4}, want[4] = {1, 3, 2, 2};
        gr_type x = ty(TDM_FLOAT, 4, xd);
        const gr_type *in[1] = {&x};
        int n = node("MaxPool", 1, 1);
        int64_t k2[2] = {3, 3}, s2[2] = {2, 2};
        attr_ints(n, "kernel_shape", 2, k2);
        attr_ints(n, "strides", 2, s2);
        attr_int(n, "ceil_mode", 1);
        check_infer("infer MaxPool ceil", n, 1, in, TDM_FLOAT, 4, want);
    }
    {
        int64_t xd[4] = {2, 3, 7, 5}, want[4] = {2, 3, 1, 1};
        gr_type x = ty(TDM_FLOAT, 4, xd);
        const gr_type *in[1] = {&x};
        check_infer("infer GlobalAveragePool", node("GlobalAveragePool", 1, 1), 1, in, TDM_FLOAT, 4, want);
    }
    {
        int64_t xd[2] = {3, 4}, one[1] = {1};
        gr_type x = ty(TDM_FLOAT, 2, xd), s = ty(TDM_FLOAT, 0, one), z = ty(TDM_INT8, 0, one);
        const gr_type *in[3] = {&x, &s, &z};
        check_infer("infer QuantizeLinear", node("QuantizeLinear", 3, 1), 3, in, TDM_INT8, 2, xd);
        gr_type q = ty(TDM_UINT8, 2, xd);
        const gr_type *in2[2] = {&q, &s};
        check_infer("infer DequantizeLinear", node("DequantizeLinear", 2, 1), 2, in2, TDM_FLOAT, 2, xd);
    }
}

/* ---------------------------------------------------------------- errors */

static void expect_error(const char *what, tdm_status st, tdm_status want)
{
    cases++;
    if (st != want) {
        printf("FAIL %s: status %d, want %d (%s)\n", what, (int)st, (int)want, E.msg);
        fails++;
    } else if (!E.msg[0]) {
        printf("FAIL %s: no error sentence\n", what);
        fails++;
    }
}

static void test_errors(void)
{
    int64_t xd[4] = {1, 3, 5, 5}, wd[4] = {4, 2, 3, 3};
    tdm_tensor *x = tensor(TDM_FLOAT, 4, xd), *w = tensor(TDM_FLOAT, 4, wd);
    tdm_tensor *out[2];
    {
        int n = node("Conv", 2, 1);
        const tdm_tensor *in[2] = {x, w};
        expect_error("Conv channel mismatch", run(n, 2, in, 1, out), TDM_E_RUNTIME);
        free_all(out, 1);
    }
    {
        int n = node("Conv", 2, 1);
        int64_t st0[2] = {0, 1};
        attr_ints(n, "strides", 2, st0);
        int64_t wd2[4] = {4, 3, 3, 3};
        tdm_tensor *w2 = tensor(TDM_FLOAT, 4, wd2);
        const tdm_tensor *in[2] = {x, w2};
        expect_error("Conv zero stride", run(n, 2, in, 1, out), TDM_E_MODEL);
        free_all(out, 1);
        tdm_tensor_destroy(w2);
    }
    {
        int64_t ad[2] = {3, 4}, bd[2] = {5, 2};
        tdm_tensor *a = tensor(TDM_FLOAT, 2, ad), *b = tensor(TDM_FLOAT, 2, bd);
        int n = node("MatMul", 2, 1);
        const tdm_tensor *in[2] = {a, b};
        expect_error("MatMul inner mismatch", run(n, 2, in, 1, out), TDM_E_RUNTIME);
        free_all(out, 1);
        tdm_tensor_destroy(a);
        tdm_tensor_destroy(b);
    }
    {
        int64_t d1[4] = {1, 1, 2, 2};
        tdm_tensor *v = tensor(TDM_FLOAT, 4, d1), *ind = tensor(TDM_INT64, 4, d1);
        int64_t *ip = ind->data;
        ip[0] = 0;
        ip[1] = 1;
        ip[2] = 2;
        ip[3] = 1000;
        int n = node("MaxUnpool", 2, 1);
        int64_t k2[2] = {2, 2}, s2[2] = {2, 2};
        attr_ints(n, "kernel_shape", 2, k2);
        attr_ints(n, "strides", 2, s2);
        const tdm_tensor *in[2] = {v, ind};
        expect_error("MaxUnpool index out of range", run(n, 2, in, 1, out), TDM_E_RUNTIME);
        free_all(out, 1);
        tdm_tensor_destroy(v);
        tdm_tensor_destroy(ind);
    }
    {
        int n = node("MaxPool", 1, 1);
        int64_t k2[2] = {9, 9};
        attr_ints(n, "kernel_shape", 2, k2);
        const tdm_tensor *in[1] = {x};
        expect_error("MaxPool window larger than input", run(n, 1, in, 1, out), TDM_E_RUNTIME);
        free_all(out, 1);
    }
    tdm_tensor_destroy(x);
    tdm_tensor_destroy(w);
}

int main(void)
{
    if (gr_model_new(&E, &M) || gr_graph_new(&E, M, NULL, "t", &G)) {
        printf("FAIL: setup: %s\n", E.msg);
        return 1;
    }
    M->main = G;
    static const conv_case convs[] = {
        /* nsp n c m g  in  k  s  d  pb  pe  auto bias */
        {2, 2, 3, 8, 1, {9, 11}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, NULL, 1},
        {2, 1, 16, 24, 1, {7, 6}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, NULL, 1},    /* pointwise */
        {2, 1, 8, 12, 1, {9, 9}, {1, 1}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, NULL, 0},     /* 1x1 strided */
        {2, 2, 6, 6, 6, {10, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, NULL, 1},     /* depthwise */
        {2, 1, 6, 6, 6, {11, 11}, {3, 3}, {2, 2}, {1, 1}, {1, 0}, {1, 2}, NULL, 1},    /* depthwise s2 */
        {2, 1, 4, 8, 4, {8, 8}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}, NULL, 0},      /* depthwise x2 */
        {2, 1, 8, 12, 4, {8, 7}, {3, 3}, {1, 2}, {1, 1}, {1, 0}, {0, 1}, NULL, 1},     /* grouped */
        {2, 1, 16, 32, 1, {64, 64}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, NULL, 1},  /* chunked im2col */
        {2, 1, 3, 5, 1, {13, 12}, {3, 2}, {2, 3}, {2, 1}, {2, 0}, {1, 3}, NULL, 1},    /* dilated, asym */
        {2, 1, 3, 4, 1, {7, 8}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, "SAME_UPPER", 1},
        {1, 2, 4, 6, 2, {20}, {5}, {3}, {2}, {2}, {1}, NULL, 1},                       /* 1-D */
        {3, 1, 2, 3, 1, {5, 6, 7}, {3, 2, 3}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1}, {1, 1, 0}, NULL, 1}, /* 3-D */
        {2, 1, 1, 7, 1, {12, 12}, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, NULL, 0},    /* single channel */
        /* stride 1, output rows as wide as the input's (the AVX2 im2col panels) */
        {2, 1, 64, 13, 1, {10, 17}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, NULL, 1},  /* two K blocks */
        {2, 2, 5, 7, 1, {9, 9}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, NULL, 1},      /* dilated */
        {2, 1, 3, 6, 1, {6, 20}, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {2, 2}, NULL, 0},     /* pads at the end */
        {2, 1, 4, 9, 1, {5, 3}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}, NULL, 1},      /* kernel wider than x */
        {2, 1, 2, 3, 1, {4, 40}, {1, 7}, {1, 1}, {1, 1}, {0, 3}, {0, 3}, NULL, 1},     /* 1x7 */
        {1, 1, 3, 5, 1, {37}, {3}, {1}, {1}, {1}, {1}, NULL, 1},                       /* 1-D */
        /* stride 2, 16 outputs of a row read with plain loads inside the row */
        {2, 1, 3, 8, 1, {9, 70}, {7, 7}, {2, 2}, {1, 1}, {3, 3}, {3, 3}, NULL, 1},     /* 7x7 s2 */
        {2, 2, 4, 5, 1, {7, 67}, {3, 3}, {2, 2}, {1, 2}, {1, 1}, {0, 1}, NULL, 0},     /* dilated, odd */
    };
    for (Threads = 1; Threads <= 2; Threads++) {
        for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++)
            test_conv(&convs[i]);
        test_convt(3, 4, 1, 5, 4, 3, 2, 1, 1, 0, 1);
        test_convt(4, 6, 2, 4, 4, 3, 1, 2, 0, 1, 0);
        test_convt(2, 2, 1, 3, 3, 4, 3, 1, 0, 0, 2);
        test_convt(40, 20, 1, 12, 9, 2, 2, 1, 0, 0, 1);
    }
    for (Threads = 1; Threads <= 2; Threads++) {
        int64_t a1[4] = {2, 1, 3, 4}, b1[3] = {5, 4, 6};
        test_matmul(4, a1, 3, b1);
        int64_t a2[1] = {4}, b2[3] = {3, 4, 2};
        test_matmul(1, a2, 3, b2);
        int64_t a3[3] = {2, 3, 4}, b3[1] = {4};
        test_matmul(3, a3, 1, b3);
        int64_t a4[3] = {3, 5, 7}, b4[2] = {7, 2};
        test_matmul(3, a4, 2, b4);
        int64_t a5[2] = {1, 300}, b5[2] = {300, 700};
        test_matmul(2, a5, 2, b5);
        int64_t a6[1] = {5}, b6[1] = {5};
        test_matmul(1, a6, 1, b6);
        int64_t a7[4] = {1, 4, 33, 16}, b7[4] = {1, 4, 16, 29}; /* attention-like heads */
        test_matmul(4, a7, 4, b7);
    }
    Threads = 1;
    test_gemm(5, 7, 3, 0, 0, 2, 1.0f, 1.0f);
    test_gemm(5, 7, 3, 1, 1, 1, 0.5f, 2.0f);
    test_gemm(13, 9, 20, 1, 0, 0, 1.0f, -1.0f);
    test_gemm(4, 6, 8, 0, 1, -1, 2.0f, 1.0f);
    test_pool("MaxPool", 9, 8, 3, 2, 1, 1, 1, 0, 0);
    test_pool("MaxPool", 10, 10, 3, 2, 2, 0, 1, 1, 0);
    test_pool("MaxPool", 7, 9, 2, 1, 1, 0, 0, 0, 0);
    test_pool("AveragePool", 9, 8, 3, 2, 1, 1, 1, 0, 0);
    test_pool("AveragePool", 9, 8, 3, 2, 1, 1, 1, 0, 1);
    test_pool("AveragePool", 10, 11, 3, 3, 1, 0, 0, 1, 0);
    /* planes h w kh kw sh sw pads(t l b r) ceil specials */
    test_maxpool_exact(3, 111, 111, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1); /* squeezenet */
    test_maxpool_exact(2, 27, 27, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1);
    test_maxpool_exact(64, 13, 13, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1); /* split over threads */
    test_maxpool_exact(2, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1, 0, 1); /* resnet18 */
    test_maxpool_exact(3, 20, 37, 3, 3, 1, 1, 1, 1, 1, 1, 0, 1);
    test_maxpool_exact(2, 9, 8, 2, 2, 2, 2, 0, 0, 0, 0, 0, 1);
    test_maxpool_exact(2, 10, 10, 3, 3, 2, 2, 0, 0, 1, 1, 1, 1); /* ceil with pads at the end */
    test_maxpool_exact(2, 16, 7, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1);  /* rows narrower than 8 */
    test_maxpool_exact(2, 19, 21, 5, 3, 1, 2, 2, 1, 2, 1, 1, 1); /* 5x3, strides 1 down, 2 across */
    test_maxpool_exact(2, 17, 40, 2, 4, 2, 1, 0, 1, 1, 2, 1, 1);
    test_maxpool_exact(2, 11, 33, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1); /* stride 3: the portable path */
    test_maxpool_exact(2, 6, 70, 1, 7, 1, 2, 0, 3, 0, 3, 0, 0);
    test_maxpool_exact(2, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1);
    test_maxpool_exact(4, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0);
    /* the stride-2 kernel (op_maxpool_s2_avx2): 3x3 at stride 2 two output
     * rows at a time (an odd count leaves one), other windows and strides
     * down one row at a time; n = 8, 16, widths even and odd, the last
     * vector overlapping, border rows of 2 taps (pads, ceil_mode) */
    test_maxpool_exact(64, 55, 55, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1); /* squeezenet, split over threads */
    test_maxpool_exact(2, 24, 34, 3, 3, 2, 2, 0, 0, 0, 0, 0, 1); /* n = 16, 11 rows */
    test_maxpool_exact(2, 17, 17, 3, 3, 2, 2, 0, 0, 0, 0, 0, 1); /* n = 8 */
    test_maxpool_exact(2, 12, 33, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1); /* ceil: last row of 2 taps */
    test_maxpool_exact(5, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1, 0, 1);
    test_maxpool_exact(3, 21, 50, 3, 3, 2, 2, 1, 0, 0, 1, 1, 1);
    test_maxpool_exact(2, 12, 40, 2, 2, 2, 2, 0, 0, 0, 0, 0, 1);  /* kw = 2 */
    test_maxpool_exact(3, 9, 41, 3, 4, 2, 2, 1, 1, 1, 1, 1, 1);   /* kw = 4 */
    test_maxpool_exact(2, 14, 50, 2, 5, 3, 2, 0, 2, 0, 2, 1, 1);  /* kw = 5, stride 3 down */
    test_maxpool_exact(2, 9, 29, 3, 1, 2, 2, 0, 0, 0, 0, 0, 1);   /* kw = 1: the portable path */
    test_gap_exact(32, 112, 112);
    test_gap_exact(9, 7, 7);
    test_gap_exact(5, 1, 3);
    test_gap_exact(1300, 3, 5);
    test_errors();
    test_infer();
    test_all_dtypes();
    test_lp();
    printf("%d of %d nn cases passed\n", cases - fails, cases);
    gr_model_free(M);
    return fails ? 1 : 0;
}
