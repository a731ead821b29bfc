/* Unit tests of the signal, random and text ops: each group (argv[1]) calls
 * the run hooks on hand-made nodes and tensors and checks them against an
 * independent reference: a naive O(n²) DFT in double precision, the window
 * formulas, numpy-computed values (np.hanning, np.blackman, the ONNX mel
 * reference), the ONNX examples for the text ops, and statistical bounds for
 * the random ops. */
#include "ops/signal.h"
#include "graph/graph.h"
#include "core/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PI 3.14159265358979323846

static int failures;

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                               \
            printf(__VA_ARGS__);                                                                                       \
            printf("\n");                                                                                              \
        }                                                                                                              \
    } while (0)

/* ---- a node under test ---- */

typedef struct tnode {
    gr_model *m;
    gr_graph *g;
    int idx;
} tnode;

static tnode mk(const char *op, int n_in, int n_out)
{
    tnode t = {0};
    const char *in[8] = {"i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7"};
    const char *out[4] = {"o0", "o1", "o2", "o3"};
    if (gr_model_new(NULL, &t.m) || gr_graph_new(NULL, t.m, NULL, "g", &t.g) ||
        gr_node_add(NULL, t.g, "n", op, "", n_in, in, n_out, out, &t.idx)) {
        printf("FAIL: cannot build a %s node\n", op);
        exit(1);
    }
    return t;
}

static void done(tnode *t)
{
    gr_graph_free(t->g);
    gr_model_free(t->m);
}

static gr_attr *attr(tnode *t, const char *name, gr_attr_type type)
{
    gr_attr *a = gr_attr_add(NULL, t->g, t->idx, name);
    if (!a)
        exit(1);
    a->type = type;
    return a;
}

static void attr_i(tnode *t, const char *name, int64_t v) { attr(t, name, GA_INT)->i = v; }

static void attr_f(tnode *t, const char *name, float v) { attr(t, name, GA_FLOAT)->f = v; }

static void attr_s(tnode *t, const char *name, const char *v)
{
    gr_attr *a = attr(t, name, GA_STRING);
    a->s = mem_strdup(v);
    a->s_len = strlen(v);
}

static void attr_ints(tnode *t, const char *name, size_t n, const int64_t *v)
{
    gr_attr *a = attr(t, name, GA_INTS);
    a->n = n;
    a->ints = mem_alloc(sizeof(int64_t) * (n ? n : 1));
    memcpy(a->ints, v, sizeof(int64_t) * n);
}

static void attr_floats(tnode *t, const char *name, size_t n, const float *v)
{
    gr_attr *a = attr(t, name, GA_FLOATS);
    a->n = n;
    a->floats = mem_alloc(sizeof(float) * (n ? n : 1));
    memcpy(a->floats, v, sizeof(float) * n);
}

static void attr_strs(tnode *t, const char *name, size_t n, const char *const *v)
{
    gr_attr *a = attr(t, name, GA_STRINGS);
    a->n = n;
    a->strings = mem_calloc(n + 1, sizeof(char *));
    a->string_lens = mem_calloc(n + 1, sizeof(size_t));
    for (size_t k = 0; k < n; k++) {
        a->strings[k] = mem_strdup(v[k]);
        a->string_lens[k] = strlen(v[k]);
    }
}

static tdm_err last_err;

/* Runs the node; out[] receives new tensors (destroy with tdm_tensor_destroy). */
static tdm_status run(tnode *t, op_run_fn fn, int n_in, const tdm_tensor *const *in, int n_out, tdm_tensor **out,
                      uint64_t *rng)
{
    gr_node *node = &t->g->nodes[t->idx];
    for (int i = 0; i < n_out; i++)
        out[i] = mem_calloc(1, sizeof(tdm_tensor));
    op_ctx ctx = {node, 17, n_in, in, n_out, out, &last_err, NULL, 1, rng, NULL, 0};
    err_clear(&last_err);
    return fn(&ctx);
}

static tdm_tensor *tensor(tdm_dtype dt, int rank, const int64_t *dims)
{
    tdm_tensor *x;
    if (tensor_new(NULL, dt, rank, dims, &x))
        exit(1);
    return x;
}

static tdm_tensor *scalar_i64(int64_t v)
{
    tdm_tensor *x = tensor(TDM_INT64, 0, NULL);
    *(int64_t *)x->data = v;
    return x;
}

static tdm_tensor *scalar_f32(float v)
{
    tdm_tensor *x = tensor(TDM_FLOAT, 0, NULL);
    *(float *)x->data = v;
    return x;
}

static unsigned long long lcg = 88172645463325252ULL;

static double frand(void)
{
    lcg ^= lcg << 13;
    lcg ^= lcg >> 7;
    lcg ^= lcg << 17;
    return (double)(lcg >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* ---- DFT ---- */

/* Naive DFT of a line of n complex values (re, im pairs), with the angles
 * taken exactly from a table indexed by k*j mod n. */
static void naive_dft(const double *x, size_t n, int inverse, double *y)
{
    long double *c = malloc(sizeof(long double) * n), *s = malloc(sizeof(long double) * n);
    for (size_t j = 0; j < n; j++) {
        long double a = (inverse ? 2.0L : -2.0L) * (long double)PI * (long double)j / (long double)n;
        c[j] = cosl(a);
        s[j] = sinl(a);
    }
    for (size_t k = 0; k < n; k++) {
        long double re = 0, im = 0;
        for (size_t j = 0, kj = 0; j < n; j++, kj = (kj + k) % n) {
            re += x[2 * j] * c[kj] - x[2 * j + 1] * s[kj];
            im += x[2 * j] * s[kj] + x[2 * j + 1] * c[kj];
        }
        y[2 * k] = (double)(inverse ? re / n : re);
        y[2 * k + 1] = (double)(inverse ? im / n : im);
    }
    free(c);
    free(s);
}

/* x of shape [2, len, 3, c] (double), DFT along axis 1. */
static void dft_case(int64_t len, int c, int64_t dft_length, int inverse, int onesided, tdm_dtype dt)
{
    int64_t dims[4] = {2, len, 3, c};
    tdm_tensor *x = tensor(dt, 4, dims);
    for (size_t i = 0; i < x->count; i++)
        tensor_set_f64(x, i, frand());
    tnode t = mk("DFT", dft_length ? 2 : 1, 1);
    attr_i(&t, "axis", 1);
    if (inverse)
        attr_i(&t, "inverse", 1);
    if (onesided)
        attr_i(&t, "onesided", 1);
    tdm_tensor *dl = dft_length ? scalar_i64(dft_length) : NULL;
    const tdm_tensor *in[2] = {x, dl};
    tdm_tensor *y;
    tdm_status st = run(&t, op_run_DFT, dft_length ? 2 : 1, in, 1, &y, NULL);
    int64_t n = dft_length ? dft_length : len, nout = onesided ? n / 2 + 1 : n;
    CHECK(!st, "DFT len %lld: %s", (long long)len, last_err.msg);
    if (!st) {
        CHECK(y->rank == 4 && y->dims[0] == 2 && y->dims[1] == nout && y->dims[2] == 3 && y->dims[3] == 2 &&
                  y->dtype == dt,
              "DFT len %lld: output shape", (long long)len);
        double *line = calloc((size_t)n * 2, sizeof(double)), *ref = calloc((size_t)n * 2, sizeof(double));
        double tol = dt == TDM_DOUBLE ? 1e-9 : dt == TDM_FLOAT ? 1e-4 : 3e-2;
        double maxerr = 0;
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < 3; i++) {
                memset(line, 0, sizeof(double) * 2 * (size_t)n);
                for (int64_t k = 0; k < len && k < n; k++)
                    for (int ci = 0; ci < c; ci++)
                        line[2 * k + ci] = tensor_get_f64(x, (size_t)(((b * len + k) * 3 + i) * c + ci));
                naive_dft(line, (size_t)n, inverse, ref);
                for (int64_t k = 0; k < nout; k++)
                    for (int ci = 0; ci < 2; ci++) {
                        double got = tensor_get_f64(y, (size_t)(((b * nout + k) * 3 + i) * 2 + ci));
                        double e = fabs(got - ref[2 * k + ci]) / (1.0 + fabs(ref[2 * k + ci]));
                        maxerr = e > maxerr ? e : maxerr;
                    }
            }
        CHECK(maxerr < tol, "DFT len %lld c %d dft_length %lld inverse %d onesided %d %s: error %g",
              (long long)len, c, (long long)dft_length, inverse, onesided, tdm_dtype_name(dt), maxerr);
        free(line);
        free(ref);
    }
    tdm_tensor_destroy(y);
    tdm_tensor_destroy(x);
    tdm_tensor_destroy(dl);
    done(&t);
}

static void test_dft(void)
{
    /* powers of two (radix-2) and other lengths (Bluestein), real and complex */
    for (int64_t len = 1; len <= 40; len++)
        for (int c = 1; c <= 2; c++)
            for (int inv = 0; inv <= 1; inv++)
                dft_case(len, c, 0, inv, 0, TDM_DOUBLE);
    static const int64_t big[] = {64, 97, 128, 243, 256, 1000, 1024};
    for (size_t i = 0; i < sizeof big / sizeof *big; i++)
        dft_case(big[i], 1, 0, 0, 0, TDM_DOUBLE);
    dft_case(10, 1, 16, 0, 0, TDM_DOUBLE);  /* zero-padded */
    dft_case(10, 2, 7, 1, 0, TDM_DOUBLE);   /* truncated */
    dft_case(12, 1, 0, 0, 1, TDM_DOUBLE);   /* onesided, even */
    dft_case(13, 1, 0, 0, 1, TDM_DOUBLE);   /* onesided, odd */
    dft_case(16, 2, 0, 0, 0, TDM_FLOAT);
    dft_case(10, 1, 0, 0, 0, TDM_FLOAT);
    dft_case(8, 1, 0, 0, 0, TDM_FLOAT16);
    dft_case(8, 2, 0, 1, 0, TDM_BFLOAT16);

    /* the ONNX example: DFT along axis 2 of arange(100) as [1, 10, 10, 1] */
    int64_t dims[4] = {1, 10, 10, 1};
    tdm_tensor *x = tensor(TDM_FLOAT, 4, dims);
    for (int i = 0; i < 100; i++)
        ((float *)x->data)[i] = (float)i;
    tnode t = mk("DFT", 1, 1);
    attr_i(&t, "axis", -2); /* = axis 2 */
    const tdm_tensor *in[1] = {x};
    tdm_tensor *y;
    tdm_status st = run(&t, op_run_DFT, 1, in, 1, &y, NULL);
    CHECK(!st, "DFT axis -2: %s", last_err.msg);
    if (!st) {
        const float *p = y->data;
        /* numpy: fft(arange(10))[0:2] = 45, -5+15.388418j */
        CHECK(fabs(p[0] - 45) < 1e-4 && fabs(p[1]) < 1e-4 && fabs(p[2] + 5) < 1e-4 && fabs(p[3] - 15.388418) < 1e-4,
              "DFT axis -2: got %g %g %g %g", p[0], p[1], p[2], p[3]);
    }
    tdm_tensor_destroy(y);
    tdm_tensor_destroy(x);
    done(&t);
}

/* ---- STFT ---- */

static void stft_case(int with_window, int with_length, int onesided, int c, int64_t len, int64_t flen, int64_t step)
{
    int64_t dims[3] = {2, len, c};
    tdm_tensor *x = tensor(TDM_FLOAT, 3, dims);
    for (size_t i = 0; i < x->count; i++)
        ((float *)x->data)[i] = (float)frand();
    tdm_tensor *w = NULL;
    if (with_window) {
        w = tensor(TDM_FLOAT, 1, &flen);
        for (int64_t k = 0; k < flen; k++)
            ((float *)w->data)[k] = (float)(0.5 - 0.5 * cos(2 * PI * (double)k / (double)flen));
    }
    tdm_tensor *stp = scalar_i64(step), *fl = with_length ? scalar_i64(flen) : NULL;
    tnode t = mk("STFT", 4, 1);
    if (onesided >= 0)
        attr_i(&t, "onesided", onesided);
    const tdm_tensor *in[4] = {x, stp, w, fl};
    tdm_tensor *y;
    tdm_status st = run(&t, op_run_STFT, 4, in, 1, &y, NULL);
    int one = onesided != 0;
    int64_t frames = (len - flen) / step + 1, bins = one ? flen / 2 + 1 : flen;
    CHECK(!st, "STFT: %s", last_err.msg);
    if (!st) {
        CHECK(y->rank == 4 && y->dims[0] == 2 && y->dims[1] == frames && y->dims[2] == bins && y->dims[3] == 2,
              "STFT output shape");
        double *line = calloc((size_t)flen * 2, sizeof(double)), *ref = calloc((size_t)flen * 2, sizeof(double));
        double maxerr = 0;
        for (int b = 0; b < 2; b++)
            for (int64_t f = 0; f < frames; f++) {
                for (int64_t k = 0; k < flen; k++) {
                    double wk = w ? ((float *)w->data)[k] : 1.0;
                    for (int ci = 0; ci < 2; ci++)
                        line[2 * k + ci] =
                            ci < c ? wk * ((float *)x->data)[((b * len) + f * step + k) * c + ci] : 0.0;
                }
                naive_dft(line, (size_t)flen, 0, ref);
                for (int64_t k = 0; k < bins; k++)
                    for (int ci = 0; ci < 2; ci++) {
                        double got = ((float *)y->data)[((b * frames + f) * bins + k) * 2 + ci];
                        double e = fabs(got - ref[2 * k + ci]) / (1 + fabs(ref[2 * k + ci]));
                        maxerr = e > maxerr ? e : maxerr;
                    }
            }
        CHECK(maxerr < 1e-4, "STFT window %d flen %lld step %lld c %d: error %g", with_window, (long long)flen,
              (long long)step, c, maxerr);
        free(line);
        free(ref);
    }
    tdm_tensor_destroy(y);
    tdm_tensor_destroy(x);
    tdm_tensor_destroy(w);
    tdm_tensor_destroy(stp);
    tdm_tensor_destroy(fl);
    done(&t);
}

static void test_stft(void)
{
    stft_case(0, 1, -1, 1, 128, 16, 8); /* the ONNX example's shapes */
    stft_case(1, 0, -1, 1, 128, 16, 8);
    stft_case(1, 1, 1, 1, 100, 15, 7); /* Bluestein frames */
    stft_case(0, 1, 0, 2, 50, 12, 5);  /* complex, two-sided */
    stft_case(1, 0, 0, 1, 16, 16, 3);  /* one frame */
}

/* ---- windows ---- */

static void window_case(op_run_fn fn, const char *op, int periodic, int64_t size, tdm_dtype out_dt,
                        const double *expect)
{
    tnode t = mk(op, 1, 1);
    if (periodic >= 0)
        attr_i(&t, "periodic", periodic);
    if (out_dt != TDM_UNDEFINED)
        attr_i(&t, "output_datatype", out_dt);
    tdm_tensor *n = tensor(TDM_INT32, 0, NULL);
    *(int32_t *)n->data = (int32_t)size;
    const tdm_tensor *in[1] = {n};
    tdm_tensor *y;
    tdm_status st = run(&t, fn, 1, in, 1, &y, NULL);
    CHECK(!st, "%s: %s", op, last_err.msg);
    if (!st) {
        CHECK(y->rank == 1 && y->dims[0] == size, "%s: shape", op);
        CHECK(y->dtype == (out_dt ? out_dt : TDM_FLOAT), "%s: dtype %s", op, tdm_dtype_name(y->dtype));
        double tol = y->dtype == TDM_DOUBLE ? 1e-8 : y->dtype == TDM_FLOAT ? 1e-6 : 1e-2; /* references have 9 digits */
        for (int64_t k = 0; k < size; k++)
            CHECK(fabs(tensor_get_f64(y, (size_t)k) - expect[k]) < tol, "%s periodic %d [%lld]: %.9g, expected %.9g",
                  op, periodic, (long long)k, tensor_get_f64(y, (size_t)k), expect[k]);
    }
    tdm_tensor_destroy(y);
    tdm_tensor_destroy(n);
    done(&t);
}

static void test_window(void)
{
    /* numpy: np.hanning(10) (symmetric) */
    static const double hann_sym[10] = {0, 0.11697778, 0.41317591, 0.75, 0.96984631,
                                        0.96984631, 0.75, 0.41317591, 0.11697778, 0};
    double e[16];
    for (int k = 0; k < 10; k++)
        e[k] = hann_sym[k];
    window_case(op_run_HannWindow, "HannWindow", 0, 10, TDM_DOUBLE, e);
    /* periodic hann of 10 = np.hanning(11)[:-1] */
    for (int k = 0; k < 10; k++)
        e[k] = 0.5 - 0.5 * cos(2 * PI * k / 10.0);
    window_case(op_run_HannWindow, "HannWindow", -1, 10, TDM_UNDEFINED, e);
    window_case(op_run_HannWindow, "HannWindow", 1, 10, TDM_FLOAT16, e);
    /* numpy: np.blackman(9)[:-1], periodic blackman of 8 */
    static const double black[8] = {0, 6.64466094e-02, 0.34, 7.73553391e-01, 1, 7.73553391e-01, 0.34, 6.64466094e-02};
    window_case(op_run_BlackmanWindow, "BlackmanWindow", 1, 8, TDM_DOUBLE, black);
    /* ONNX's Hamming (25/46, 21/46), symmetric of 10: first value 4/46 */
    for (int k = 0; k < 10; k++)
        e[k] = 25.0 / 46 - 21.0 / 46 * cos(2 * PI * k / 9.0);
    CHECK(fabs(e[0] - 0.0869565) < 1e-7, "Hamming reference");
    window_case(op_run_HammingWindow, "HammingWindow", 0, 10, TDM_FLOAT, e);
    window_case(op_run_HammingWindow, "HammingWindow", 1, 0, TDM_FLOAT, e); /* empty */
    e[0] = 1;
    window_case(op_run_HannWindow, "HannWindow", 0, 1, TDM_FLOAT, e); /* one-point symmetric */
}

/* ---- MelWeightMatrix ---- */

static void mel_case(int64_t nmel, int64_t dftlen, int64_t rate, float lo, float hi, const float *expect, size_t nexp)
{
    tnode t = mk("MelWeightMatrix", 5, 1);
    tdm_tensor *a = scalar_i64(nmel), *b = scalar_i64(dftlen), *c = scalar_i64(rate), *d = scalar_f32(lo),
               *f = scalar_f32(hi);
    const tdm_tensor *in[5] = {a, b, c, d, f};
    tdm_tensor *y;
    tdm_status st = run(&t, op_run_MelWeightMatrix, 5, in, 1, &y, NULL);
    CHECK(!st, "MelWeightMatrix: %s", last_err.msg);
    if (!st) {
        CHECK(y->rank == 2 && y->dims[0] == dftlen / 2 + 1 && y->dims[1] == nmel, "MelWeightMatrix: shape");
        const float *p = y->data;
        for (size_t i = 0; i < y->count; i++) {
            float ex = i < nexp ? expect[i] : 0.0f;
            CHECK(fabsf(p[i] - ex) < 1e-6f, "MelWeightMatrix [%zu]: %g, expected %g", i, p[i], ex);
        }
    }
    tdm_tensor_destroy(y);
    tdm_tensor_destroy(a);
    tdm_tensor_destroy(b);
    tdm_tensor_destroy(c);
    tdm_tensor_destroy(d);
    tdm_tensor_destroy(f);
    done(&t);
}

static void test_mel(void)
{
    /* the ONNX example: rows 0..5 map to mel bins {0,1},{2,3},{4},{5},{6},{7} */
    float e1[72] = {0};
    e1[0] = e1[1] = e1[8 + 2] = e1[8 + 3] = e1[16 + 4] = e1[24 + 5] = e1[32 + 6] = e1[40 + 7] = 1;
    mel_case(8, 16, 8192, 0, 4096, e1, 72);
    /* numpy (the ONNX reference algorithm): 5 bins, dft 64, 16 kHz, 100..6000 Hz */
    static const float e2[] = {
        0, 0,          0,          0,          0,          1,          0,          0,          0,          0,
        0.5, 0.5,      0,          0,          0,          0,          1,          0,          0,          0,
        0, 0.5,        0.5,        0,          0,          0,          0,          1,          0,          0,
        0, 0,          0.666666687, 0.333333343, 0,        0,          0,          0.333333343, 0.666666687, 0,
        0, 0,          0,          1,          0,          0,          0,          0,          0.666666687, 0.333333343,
        0, 0,          0,          0.333333343, 0.666666687, 0,        0,          0,          0,          1,
        0, 0,          0,          0,          0.833333313, 0,         0,          0,          0,          0.666666687,
        0, 0,          0,          0,          0.5,        0,          0,          0,          0,          0.333333343,
        0, 0,          0,          0,          0.166666672};
    mel_case(5, 64, 16000, 100, 6000, e2, sizeof e2 / sizeof *e2);
}

/* ---- StringNormalizer ---- */

static void strnorm_case(int rank, size_t n, const char *const *x, const char *action, int sensitive,
                         size_t nstop, const char *const *stop, size_t nexp, const char *const *expect)
{
    tnode t = mk("StringNormalizer", 1, 1);
    if (action)
        attr_s(&t, "case_change_action", action);
    if (sensitive >= 0)
        attr_i(&t, "is_case_sensitive", sensitive);
    if (nstop)
        attr_strs(&t, "stopwords", nstop, stop);
    int64_t dims[2] = {1, (int64_t)n};
    tdm_tensor *xt = rank == 1 ? tensor(TDM_STRING, 1, dims + 1) : tensor(TDM_STRING, 2, dims);
    for (size_t i = 0; i < n; i++)
        ((char **)xt->data)[i] = mem_strdup(x[i]);
    const tdm_tensor *in[1] = {xt};
    tdm_tensor *y;
    tdm_status st = run(&t, op_run_StringNormalizer, 1, in, 1, &y, NULL);
    CHECK(!st, "StringNormalizer: %s", last_err.msg);
    if (!st) {
        CHECK(y->rank == rank && y->dims[rank - 1] == (int64_t)nexp && (rank == 1 || y->dims[0] == 1),
              "StringNormalizer: shape (rank %d, %lld values, expected %zu)", y->rank,
              (long long)y->dims[y->rank - 1], nexp);
        for (size_t i = 0; i < nexp && i < y->count; i++)
            CHECK(strcmp(tensor_str(y, i), expect[i]) == 0, "StringNormalizer [%zu]: '%s', expected '%s'", i,
                  tensor_str(y, i), expect[i]);
    }
    tdm_tensor_destroy(y);
    tdm_tensor_destroy(xt);
    done(&t);
}

static void test_strnorm(void)
{
    static const char *const days[] = {"monday", "tuesday", "wednesday", "thursday"};
    static const char *const monday[] = {"monday"};
    static const char *const lower3[] = {"tuesday", "wednesday", "thursday"};
    static const char *const upper3[] = {"TUESDAY", "WEDNESDAY", "THURSDAY"};
    strnorm_case(1, 4, days, "LOWER", 1, 1, monday, 3, lower3);
    strnorm_case(1, 4, days, NULL, 1, 1, monday, 3, lower3);
    strnorm_case(1, 4, days, "UPPER", 1, 1, monday, 3, upper3);
    static const char *const mm[] = {"monday", "monday"};
    static const char *const empty[] = {""};
    strnorm_case(1, 2, mm, "UPPER", 1, 1, monday, 1, empty);
    static const char *const two[] = {"Monday", "tuesday", "wednesday", "Monday", "tuesday", "wednesday"};
    static const char *const two_out[] = {"TUESDAY", "WEDNESDAY", "TUESDAY", "WEDNESDAY"};
    strnorm_case(2, 6, two, "UPPER", -1, 1, monday, 4, two_out);
    /* case-sensitive: "Monday" is not the stopword "monday" */
    static const char *const two_cs[] = {"MONDAY", "TUESDAY", "WEDNESDAY", "MONDAY", "TUESDAY", "WEDNESDAY"};
    strnorm_case(2, 6, two, "UPPER", 1, 1, monday, 6, two_cs);
    static const char *const latin[] = {"Éclair", "ÇA"};
    static const char *const latin_lower[] = {"éclair", "ça"};
    strnorm_case(1, 2, latin, "LOWER", 0, 0, NULL, 2, latin_lower);
    static const char *const stop_upper[] = {"ÇA"};
    static const char *const latin_rest[] = {"ÉCLAIR"};
    strnorm_case(1, 2, latin, "UPPER", 0, 1, stop_upper, 1, latin_rest);
}

/* ---- TfIdfVectorizer ---- */

static void tfidf_case(int rank, const char *mode, int64_t minn, int64_t maxn, int64_t skip, size_t ncounts,
                       const int64_t *counts, size_t nidx, const int64_t *idx, size_t npool, const int64_t *pool,
                       const float *weights, const float *expect, int64_t out_size)
{
    static const int32_t x[12] = {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8};
    tnode t = mk("TfIdfVectorizer", 1, 1);
    attr_s(&t, "mode", mode);
    attr_i(&t, "min_gram_length", minn);
    attr_i(&t, "max_gram_length", maxn);
    attr_i(&t, "max_skip_count", skip);
    attr_ints(&t, "ngram_counts", ncounts, counts);
    attr_ints(&t, "ngram_indexes", nidx, idx);
    attr_ints(&t, "pool_int64s", npool, pool);
    if (weights)
        attr_floats(&t, "weights", nidx, weights);
    int64_t dims[2] = {2, 6};
    tdm_tensor *xt = rank == 1 ? tensor(TDM_INT32, 1, (int64_t[]){12}) : tensor(TDM_INT32, 2, dims);
    memcpy(xt->data, x, sizeof x);
    const tdm_tensor *in[1] = {xt};
    tdm_tensor *y;
    tdm_status st = run(&t, op_run_TfIdfVectorizer, 1, in, 1, &y, NULL);
    CHECK(!st, "TfIdfVectorizer: %s", last_err.msg);
    if (!st) {
        CHECK(y->rank == rank && y->dims[rank - 1] == out_size && y->dtype == TDM_FLOAT, "TfIdfVectorizer: shape");
        for (size_t i = 0; i < y->count; i++)
            CHECK(fabsf(((float *)y->data)[i] - expect[i]) < 1e-6f,
                  "TfIdfVectorizer %s skip %lld [%zu]: %g, expected %g", mode, (long long)skip, i, ((float *)y->data)[i], expect[i]);
    }
    tdm_tensor_destroy(y);
    tdm_tensor_destroy(xt);
    done(&t);
}

static void test_tfidf(void)
{
    static const int64_t counts[2] = {0, 4}, idx[7] = {0, 1, 2, 3, 4, 5, 6};
    static const int64_t pool[10] = {2, 3, 5, 4, 5, 6, 7, 8, 6, 7};
    /* expectations of the ONNX examples */
    static const float only_bi0[7] = {0, 0, 0, 0, 1, 1, 1};
    tfidf_case(1, "TF", 2, 2, 0, 2, counts, 7, idx, 10, pool, NULL, only_bi0, 7);
    static const float only_bi5[7] = {0, 0, 0, 0, 1, 3, 1};
    tfidf_case(1, "TF", 2, 2, 5, 2, counts, 7, idx, 10, pool, NULL, only_bi5, 7);
    static const float uni_bi5[7] = {0, 3, 1, 0, 1, 3, 1};
    tfidf_case(1, "TF", 1, 2, 5, 2, counts, 7, idx, 10, pool, NULL, uni_bi5, 7);
    static const float batch_uni_bi5[14] = {0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1};
    tfidf_case(2, "TF", 1, 2, 5, 2, counts, 7, idx, 10, pool, NULL, batch_uni_bi5, 7);
    static const float batch_bi0[14] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1};
    tfidf_case(2, "TF", 2, 2, 0, 2, counts, 7, idx, 10, pool, NULL, batch_bi0, 7);
    static const int64_t counts0[2] = {0, 0}, idx3[3] = {0, 1, 2}, pool6[6] = {5, 6, 7, 8, 6, 7};
    static const float levelempty[3] = {1, 1, 1};
    tfidf_case(1, "TF", 2, 2, 0, 2, counts0, 3, idx3, 6, pool6, NULL, levelempty, 3);
    /* IDF and TFIDF with weights (per output index), permuted indexes */
    static const int64_t perm[7] = {6, 5, 4, 3, 2, 1, 0};
    static const float w[7] = {1, 2, 3, 4, 5, 6, 7};
    static const float idf[7] = {1, 2, 3, 0, 5, 6, 0};   /* counts reversed: 1 3 1 0 1 3 0 */
    static const float tfidf[7] = {1, 6, 3, 0, 5, 18, 0};
    tfidf_case(1, "IDF", 1, 2, 5, 2, counts, 7, perm, 10, pool, w, idf, 7);
    tfidf_case(1, "TFIDF", 1, 2, 5, 2, counts, 7, perm, 10, pool, w, tfidf, 7);

    /* strings */
    tnode t = mk("TfIdfVectorizer", 1, 1);
    static const char *const spool[] = {"a", "b", "a", "b", "b", "c"};
    static const int64_t scounts[2] = {0, 2}, sidx[4] = {0, 1, 2, 3};
    attr_s(&t, "mode", "TF");
    attr_i(&t, "min_gram_length", 1);
    attr_i(&t, "max_gram_length", 2);
    attr_i(&t, "max_skip_count", 1);
    attr_ints(&t, "ngram_counts", 2, scounts);
    attr_ints(&t, "ngram_indexes", 4, sidx);
    attr_strs(&t, "pool_strings", 6, spool);
    static const char *const sx[] = {"a", "x", "b", "a", "b", "c"};
    tdm_tensor *xt = tensor(TDM_STRING, 1, (int64_t[]){6});
    for (int i = 0; i < 6; i++)
        ((char **)xt->data)[i] = mem_strdup(sx[i]);
    const tdm_tensor *in[1] = {xt};
    tdm_tensor *y;
    tdm_status st = run(&t, op_run_TfIdfVectorizer, 1, in, 1, &y, NULL);
    /* a:2, b:2, (a,b): a0-b2 (skip 1), a3-b4 (skip 0) = 2; (b,c): b4-c5 (skip 0) = 1 (b2-c5 would need skip 2) */
    static const float sexp[4] = {2, 2, 2, 1};
    CHECK(!st, "TfIdfVectorizer strings: %s", last_err.msg);
    for (int i = 0; !st && i < 4; i++)
        CHECK(((float *)y->data)[i] == sexp[i], "TfIdfVectorizer strings [%d]: %g, expected %g", i,
              ((float *)y->data)[i], sexp[i]);
    tdm_tensor_destroy(y);
    tdm_tensor_destroy(xt);
    done(&t);
}

/* ---- random ---- */

static tdm_tensor *random_run(const char *op, op_run_fn fn, tdm_dtype dt, int64_t n, int seeded, float seed,
                              uint64_t *rng, const tdm_tensor *like)
{
    tnode t = mk(op, like ? 1 : 0, 1);
    if (dt != TDM_UNDEFINED)
        attr_i(&t, "dtype", dt);
    if (!like)
        attr_ints(&t, "shape", 2, (int64_t[]){n / 4, 4});
    if (seeded)
        attr_f(&t, "seed", seed);
    if (fn == op_run_RandomUniform || fn == op_run_RandomUniformLike) {
        attr_f(&t, "low", -2.0f);
        attr_f(&t, "high", 6.0f);
    } else {
        attr_f(&t, "mean", 3.0f);
        attr_f(&t, "scale", 2.0f);
    }
    const tdm_tensor *in[1] = {like};
    tdm_tensor *y;
    tdm_status st = run(&t, fn, like ? 1 : 0, in, 1, &y, rng);
    CHECK(!st, "%s: %s", op, last_err.msg);
    done(&t);
    if (st) {
        tdm_tensor_destroy(y);
        return NULL;
    }
    return y;
}

static void moments(const tdm_tensor *y, double *mean, double *sd, double *lo, double *hi)
{
    double s = 0, s2 = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (size_t i = 0; i < y->count; i++) {
        double v = tensor_get_f64(y, i);
        s += v;
        s2 += v * v;
        *lo = v < *lo ? v : *lo;
        *hi = v > *hi ? v : *hi;
    }
    *mean = s / (double)y->count;
    *sd = sqrt(s2 / (double)y->count - *mean * *mean);
}

static void test_random(void)
{
    uint64_t rng = 12345;
    double mean, sd, lo, hi;
    const int64_t n = 40000;
    /* uniform [-2, 6): mean 2, sd 8/sqrt(12) = 2.309 */
    tdm_tensor *u = random_run("RandomUniform", op_run_RandomUniform, TDM_UNDEFINED, n, 0, 0, &rng, NULL);
    if (u) {
        moments(u, &mean, &sd, &lo, &hi);
        CHECK(u->dtype == TDM_FLOAT && u->rank == 2 && u->dims[0] == n / 4, "RandomUniform: type/shape");
        CHECK(fabs(mean - 2) < 0.05 && fabs(sd - 2.3094) < 0.05 && lo >= -2 && hi < 6,
              "RandomUniform: mean %g sd %g range [%g, %g]", mean, sd, lo, hi);
    }
    /* normal(3, 2) in double */
    tdm_tensor *g = random_run("RandomNormal", op_run_RandomNormal, TDM_DOUBLE, n, 0, 0, &rng, NULL);
    if (g) {
        moments(g, &mean, &sd, &lo, &hi);
        CHECK(g->dtype == TDM_DOUBLE, "RandomNormal: dtype");
        CHECK(fabs(mean - 3) < 0.05 && fabs(sd - 2) < 0.05, "RandomNormal: mean %g sd %g", mean, sd);
        /* about 68.3 % within one sd */
        size_t in1 = 0;
        for (size_t i = 0; i < g->count; i++)
            in1 += fabs(((double *)g->data)[i] - 3) < 2;
        CHECK(fabs((double)in1 / (double)g->count - 0.6827) < 0.01, "RandomNormal: %zu within one sd", in1);
    }
    /* the run's state advanced: a second unseeded run differs */
    tdm_tensor *u2 = random_run("RandomUniform", op_run_RandomUniform, TDM_UNDEFINED, n, 0, 0, &rng, NULL);
    if (u && u2)
        CHECK(memcmp(u->data, u2->data, u->nbytes) != 0, "RandomUniform: two draws are equal");
    /* seeded: the same on every run, whatever the run's state; another seed differs */
    uint64_t other = 999;
    tdm_tensor *s1 = random_run("RandomNormal", op_run_RandomNormal, TDM_FLOAT, 64, 1, 7.0f, &rng, NULL);
    tdm_tensor *s2 = random_run("RandomNormal", op_run_RandomNormal, TDM_FLOAT, 64, 1, 7.0f, &other, NULL);
    tdm_tensor *s3 = random_run("RandomNormal", op_run_RandomNormal, TDM_FLOAT, 64, 1, 8.0f, &other, NULL);
    if (s1 && s2 && s3) {
        CHECK(memcmp(s1->data, s2->data, s1->nbytes) == 0, "RandomNormal: seed 7 is not reproducible");
        CHECK(memcmp(s1->data, s3->data, s1->nbytes) != 0, "RandomNormal: seeds 7 and 8 agree");
    }
    /* *Like: shape of the input, dtype of the input or the attribute */
    int64_t ld[3] = {10, 20, 30};
    tdm_tensor *like = tensor(TDM_FLOAT16, 3, ld);
    tdm_tensor *ul = random_run("RandomUniformLike", op_run_RandomUniformLike, TDM_UNDEFINED, 0, 0, 0, &rng, like);
    if (ul) {
        moments(ul, &mean, &sd, &lo, &hi);
        CHECK(ul->dtype == TDM_FLOAT16 && ul->rank == 3 && ul->dims[2] == 30, "RandomUniformLike: type/shape");
        CHECK(fabs(mean - 2) < 0.2 && lo >= -2 && hi <= 6, "RandomUniformLike: mean %g range [%g, %g]", mean, lo, hi);
    }
    tdm_tensor *nl = random_run("RandomNormalLike", op_run_RandomNormalLike, TDM_DOUBLE, 0, 0, 0, &rng, like);
    if (nl)
        CHECK(nl->dtype == TDM_DOUBLE && nl->count == 6000, "RandomNormalLike: type/shape");

    /* Bernoulli: p = 0 and 1 are exact; p = 0.3 about 30 % */
    tnode t = mk("Bernoulli", 1, 1);
    attr_i(&t, "dtype", TDM_BOOL);
    tdm_tensor *p = tensor(TDM_DOUBLE, 1, (int64_t[]){30000});
    for (size_t i = 0; i < p->count; i++)
        ((double *)p->data)[i] = i % 3 == 0 ? 0.0 : i % 3 == 1 ? 1.0 : 0.3;
    const tdm_tensor *in[1] = {p};
    tdm_tensor *y;
    tdm_status st = run(&t, op_run_Bernoulli, 1, in, 1, &y, &rng);
    CHECK(!st, "Bernoulli: %s", last_err.msg);
    if (!st) {
        size_t ones = 0, bad = 0;
        for (size_t i = 0; i < y->count; i++) {
            uint8_t v = ((uint8_t *)y->data)[i];
            bad += (i % 3 == 0 && v) || (i % 3 == 1 && !v) || v > 1;
            ones += i % 3 == 2 && v;
        }
        CHECK(y->dtype == TDM_BOOL && !bad, "Bernoulli: %zu values disagree with p = 0 or 1", bad);
        CHECK(fabs((double)ones / 10000.0 - 0.3) < 0.02, "Bernoulli: %zu of 10000 at p = 0.3", ones);
    }
    tdm_tensor_destroy(y);
    done(&t);

    /* Multinomial: log-probabilities log(0.1), log(0.6), log(0.3), -inf */
    t = mk("Multinomial", 1, 1);
    attr_i(&t, "sample_size", 20000);
    attr_i(&t, "dtype", TDM_INT64);
    tdm_tensor *lp = tensor(TDM_FLOAT, 2, (int64_t[]){2, 4});
    float *lpp = lp->data;
    lpp[0] = logf(0.1f) + 5; /* unnormalised */
    lpp[1] = logf(0.6f) + 5;
    lpp[2] = logf(0.3f) + 5;
    lpp[3] = -INFINITY;
    lpp[4] = lpp[5] = lpp[6] = -INFINITY;
    lpp[7] = 0; /* row 1: always class 3 */
    in[0] = lp;
    st = run(&t, op_run_Multinomial, 1, in, 1, &y, &rng);
    CHECK(!st, "Multinomial: %s", last_err.msg);
    if (!st) {
        size_t cnt[5] = {0}, row1 = 0;
        const int64_t *v = y->data;
        CHECK(y->dtype == TDM_INT64 && y->dims[0] == 2 && y->dims[1] == 20000, "Multinomial: type/shape");
        for (int i = 0; i < 20000; i++) {
            cnt[v[i] >= 0 && v[i] < 4 ? v[i] : 4]++;
            row1 += v[20000 + i] == 3;
        }
        CHECK(cnt[3] == 0 && cnt[4] == 0 && row1 == 20000, "Multinomial: impossible classes drawn");
        CHECK(fabs(cnt[0] / 20000.0 - 0.1) < 0.015 && fabs(cnt[1] / 20000.0 - 0.6) < 0.015 &&
                  fabs(cnt[2] / 20000.0 - 0.3) < 0.015,
              "Multinomial: frequencies %zu %zu %zu", cnt[0], cnt[1], cnt[2]);
    }
    tdm_tensor_destroy(y);
    done(&t);

    tdm_tensor_destroy(lp);
    tdm_tensor_destroy(p);
    tdm_tensor_destroy(u);
    tdm_tensor_destroy(u2);
    tdm_tensor_destroy(g);
    tdm_tensor_destroy(s1);
    tdm_tensor_destroy(s2);
    tdm_tensor_destroy(s3);
    tdm_tensor_destroy(like);
    tdm_tensor_destroy(ul);
    tdm_tensor_destroy(nl);
}

/* ---- errors: a sentence, never a crash ---- */

static void expect_fail(tnode *t, op_run_fn fn, int n_in, const tdm_tensor *const *in, const char *word)
{
    tdm_tensor *y;
    tdm_status st = run(t, fn, n_in, in, 1, &y, NULL);
    CHECK(st != TDM_OK && strstr(last_err.msg, word), "expected a failure naming '%s', got %d '%s'", word, (int)st,
          last_err.msg);
    tdm_tensor_destroy(y);
    done(t);
}

static void test_errors(void)
{
    int64_t d3[3] = {1, 8, 3};
    tdm_tensor *x3 = tensor(TDM_FLOAT, 3, d3);
    memset(x3->data, 0, x3->nbytes);
    const tdm_tensor *in[5] = {x3};
    tnode t = mk("DFT", 1, 1);
    expect_fail(&t, op_run_DFT, 1, in, "last dimension");
    int64_t d2[3] = {1, 8, 2};
    tdm_tensor *x = tensor(TDM_FLOAT, 3, d2);
    memset(x->data, 0, x->nbytes);
    in[0] = x;
    t = mk("DFT", 1, 1);
    attr_i(&t, "axis", 2);
    expect_fail(&t, op_run_DFT, 1, in, "axis");
    tdm_tensor *zero = scalar_i64(0), *neg = scalar_i64(-3);
    in[1] = zero;
    t = mk("DFT", 2, 1);
    expect_fail(&t, op_run_DFT, 2, in, "dft_length");
    /* STFT: frame longer than the signal; no frame length at all; bad step */
    tdm_tensor *step = scalar_i64(2), *fl = scalar_i64(9);
    in[1] = step;
    in[2] = NULL;
    in[3] = fl;
    t = mk("STFT", 4, 1);
    expect_fail(&t, op_run_STFT, 4, in, "shorter");
    in[3] = NULL;
    t = mk("STFT", 4, 1);
    expect_fail(&t, op_run_STFT, 4, in, "frame_length");
    in[1] = zero;
    t = mk("STFT", 4, 1);
    expect_fail(&t, op_run_STFT, 4, in, "frame_step");
    /* windows */
    in[0] = neg;
    t = mk("HannWindow", 1, 1);
    expect_fail(&t, op_run_HannWindow, 1, in, "size");
    in[0] = step;
    t = mk("HannWindow", 1, 1);
    attr_i(&t, "output_datatype", TDM_STRING);
    expect_fail(&t, op_run_HannWindow, 1, in, "output_datatype");
    /* StringNormalizer */
    t = mk("StringNormalizer", 1, 1);
    in[0] = x;
    expect_fail(&t, op_run_StringNormalizer, 1, in, "string");
    /* TfIdf: a pool that does not split into n-grams; an out-of-range weight table */
    t = mk("TfIdfVectorizer", 1, 1);
    tdm_tensor *ix = tensor(TDM_INT64, 1, (int64_t[]){3});
    memset(ix->data, 0, ix->nbytes);
    in[0] = ix;
    attr_s(&t, "mode", "TF");
    attr_i(&t, "min_gram_length", 1);
    attr_i(&t, "max_gram_length", 2);
    attr_ints(&t, "ngram_counts", 2, (int64_t[]){0, 2});
    attr_ints(&t, "ngram_indexes", 2, (int64_t[]){0, 1});
    attr_ints(&t, "pool_int64s", 5, (int64_t[]){1, 2, 3, 4, 5});
    expect_fail(&t, op_run_TfIdfVectorizer, 1, in, "ngram_counts");
    t = mk("TfIdfVectorizer", 1, 1);
    attr_s(&t, "mode", "TFIDF");
    attr_i(&t, "min_gram_length", 1);
    attr_i(&t, "max_gram_length", 1);
    attr_ints(&t, "ngram_counts", 1, (int64_t[]){0});
    attr_ints(&t, "ngram_indexes", 2, (int64_t[]){0, 5});
    attr_ints(&t, "pool_int64s", 2, (int64_t[]){1, 2});
    attr_floats(&t, "weights", 2, (float[]){1, 2});
    expect_fail(&t, op_run_TfIdfVectorizer, 1, in, "weights");
    t = mk("TfIdfVectorizer", 1, 1);
    attr_s(&t, "mode", "BM25");
    expect_fail(&t, op_run_TfIdfVectorizer, 1, in, "mode");
    /* random */
    t = mk("RandomNormal", 0, 1);
    expect_fail(&t, op_run_RandomNormal, 0, in, "shape");
    t = mk("RandomUniform", 0, 1);
    attr_ints(&t, "shape", 1, (int64_t[]){4});
    attr_i(&t, "dtype", TDM_INT32);
    expect_fail(&t, op_run_RandomUniform, 0, in, "dtype");
    t = mk("Multinomial", 1, 1);
    tdm_tensor *ninf = tensor(TDM_FLOAT, 2, (int64_t[]){1, 2});
    ((float *)ninf->data)[0] = ((float *)ninf->data)[1] = -INFINITY;
    in[0] = ninf;
    expect_fail(&t, op_run_Multinomial, 1, in, "log-probability");
    tdm_tensor_destroy(ninf);
    tdm_tensor_destroy(ix);
    tdm_tensor_destroy(x3);
    tdm_tensor_destroy(x);
    tdm_tensor_destroy(zero);
    tdm_tensor_destroy(neg);
    tdm_tensor_destroy(step);
    tdm_tensor_destroy(fl);
}

/* ---- infer hooks ---- */

static void test_infer(void)
{
    gr_type tin = {TDM_KIND_TENSOR, TDM_FLOAT, 4, {{1, NULL}, {-1, "T"}, {10, NULL}, {1, NULL}}, 0, TDM_UNDEFINED};
    tdm_tensor *dl = scalar_i64(16);
    const gr_type *ins[2] = {&tin, &tin};
    const tdm_tensor *vals[2] = {NULL, dl};
    gr_type out[1];
    tnode t = mk("DFT", 2, 1);
    attr_i(&t, "axis", 1);
    attr_i(&t, "onesided", 1);
    memset(out, 0, sizeof out);
    out[0].rank = -1;
    op_infer_ctx ic = {&t.g->nodes[t.idx], 17, 2, ins, vals, 1, out, t.m, &last_err};
    CHECK(op_infer_DFT(&ic) == TDM_OK, "infer DFT");
    CHECK(out[0].rank == 4 && out[0].dims[1].v == 9 && out[0].dims[2].v == 10 && out[0].dims[3].v == 2,
          "infer DFT: dims %lld %lld %lld", (long long)out[0].dims[1].v, (long long)out[0].dims[2].v,
          (long long)out[0].dims[3].v);
    done(&t);
    /* without dft_length: the symbolic dim stays unknown after onesided */
    t = mk("DFT", 1, 1);
    ic.node = &t.g->nodes[t.idx];
    ic.n_in = 1;
    out[0].rank = -1;
    CHECK(op_infer_DFT(&ic) == TDM_OK && out[0].rank == 4 && out[0].dims[1].v == -1 && out[0].dims[1].sym &&
              strcmp(out[0].dims[1].sym, "T") == 0,
          "infer DFT: symbolic dim");
    done(&t);
    /* window of constant size */
    t = mk("HannWindow", 1, 1);
    attr_i(&t, "output_datatype", TDM_DOUBLE);
    ic.node = &t.g->nodes[t.idx];
    vals[0] = dl;
    out[0].rank = -1;
    CHECK(op_infer_window(&ic) == TDM_OK && out[0].rank == 1 && out[0].dims[0].v == 16 && out[0].dtype == TDM_DOUBLE,
          "infer HannWindow");
    done(&t);
    /* random from attributes */
    t = mk("RandomNormal", 0, 1);
    attr_ints(&t, "shape", 2, (int64_t[]){3, 5});
    ic.node = &t.g->nodes[t.idx];
    ic.n_in = 0;
    out[0].rank = -1;
    CHECK(op_infer_random(&ic) == TDM_OK && out[0].rank == 2 && out[0].dims[1].v == 5 && out[0].dtype == TDM_FLOAT,
          "infer RandomNormal");
    done(&t);
    tdm_tensor_destroy(dl);
}

/* ---- out of memory: every allocation of a hook fails in turn ---- */

/* Runs fn with the k-th allocation failing, for k = 1, 2, … until the run
 * succeeds; each failure must be TDM_E_NOMEM (ASan checks for leaks). */
static void oom_case(tnode *t, op_run_fn fn, int n_in, const tdm_tensor *const *in, const char *what)
{
    gr_node *node = &t->g->nodes[t->idx];
    for (long k = 1; k < 200; k++) {
        tdm_tensor *y = mem_calloc(1, sizeof *y);
        uint64_t rng = 1;
        op_ctx ctx = {node, 17, n_in, in, 1, &y, &last_err, NULL, 1, &rng, NULL, 0};
        mem_fail_after(k);
        tdm_status st = fn(&ctx);
        mem_fail_after(0);
        tdm_tensor_destroy(y);
        if (st == TDM_OK) {
            CHECK(k > 1, "%s: no allocation to fail", what);
            done(t);
            return;
        }
        CHECK(st == TDM_E_NOMEM, "%s: allocation %ld failing gave %d '%s'", what, k, (int)st, last_err.msg);
    }
    CHECK(0, "%s: still failing after 200 allocations", what);
    done(t);
}

static void test_oom(void)
{
    int64_t d[3] = {2, 10, 2};
    tdm_tensor *x = tensor(TDM_FLOAT, 3, d);
    for (size_t i = 0; i < x->count; i++)
        ((float *)x->data)[i] = (float)i;
    tdm_tensor *step = scalar_i64(3), *fl = scalar_i64(6);
    const tdm_tensor *in[5] = {x, step, NULL, fl};
    tnode t = mk("DFT", 1, 1);
    oom_case(&t, op_run_DFT, 1, in, "DFT");
    t = mk("STFT", 4, 1);
    attr_i(&t, "onesided", 0);
    oom_case(&t, op_run_STFT, 4, in, "STFT");
    t = mk("Multinomial", 1, 1);
    tdm_tensor *lp = tensor(TDM_FLOAT, 2, (int64_t[]){2, 3});
    memset(lp->data, 0, lp->nbytes);
    in[0] = lp;
    oom_case(&t, op_run_Multinomial, 1, in, "Multinomial");
    static const char *const sx[] = {"a", "B", "b", "c"};
    tdm_tensor *xs = tensor(TDM_STRING, 1, (int64_t[]){4});
    for (int i = 0; i < 4; i++)
        ((char **)xs->data)[i] = mem_strdup(sx[i]);
    in[0] = xs;
    t = mk("StringNormalizer", 1, 1);
    attr_s(&t, "case_change_action", "UPPER");
    attr_strs(&t, "stopwords", 1, (const char *const[]){"b"});
    oom_case(&t, op_run_StringNormalizer, 1, in, "StringNormalizer");
    t = mk("TfIdfVectorizer", 1, 1);
    attr_s(&t, "mode", "TF");
    attr_i(&t, "min_gram_length", 1);
    attr_i(&t, "max_gram_length", 2);
    attr_i(&t, "max_skip_count", 1);
    attr_ints(&t, "ngram_counts", 2, (int64_t[]){0, 2});
    attr_ints(&t, "ngram_indexes", 3, (int64_t[]){0, 1, 2});
    attr_strs(&t, "pool_strings", 4, (const char *const[]){"a", "b", "a", "c"});
    oom_case(&t, op_run_TfIdfVectorizer, 1, in, "TfIdfVectorizer");
    tdm_tensor *m[5] = {scalar_i64(4), scalar_i64(32), scalar_i64(8000), scalar_f32(0), scalar_f32(4000)};
    t = mk("MelWeightMatrix", 5, 1);
    oom_case(&t, op_run_MelWeightMatrix, 5, (const tdm_tensor *const *)m, "MelWeightMatrix");
    t = mk("HannWindow", 1, 1);
    oom_case(&t, op_run_HannWindow, 1, (const tdm_tensor *const *)m, "HannWindow");
    for (int i = 0; i < 5; i++)
        tdm_tensor_destroy(m[i]);
    tdm_tensor_destroy(xs);
    tdm_tensor_destroy(lp);
    tdm_tensor_destroy(x);
    tdm_tensor_destroy(step);
    tdm_tensor_destroy(fl);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } groups[] = {{"dft", test_dft},         {"stft", test_stft},   {"window", test_window},
                  {"mel", test_mel},         {"strnorm", test_strnorm}, {"tfidf", test_tfidf},
                  {"random", test_random},   {"errors", test_errors}, {"infer", test_infer}, {"oom", test_oom}};
    int ran = 0;
    for (size_t i = 0; i < sizeof groups / sizeof *groups; i++)
        if (argc < 2 || strcmp(argv[1], groups[i].name) == 0) {
            groups[i].fn();
            ran++;
        }
    if (!ran) {
        printf("unknown group '%s'\n", argv[1]);
        return 2;
    }
    printf("%s: %d failure(s)\n", argc > 1 ? argv[1] : "all", failures);
    return failures ? 1 : 0;
}
