/* Unit tests of the elementwise op family: the run hooks called directly on
 * hand-made tensors. The broadcast engine is checked against a naive
 * index-by-index reference over many shape pairs; the numpy-specific parts
 * (float → string text, the MT19937 stream behind seeded Dropout, Python
 * modulo signs) against values printed by numpy and quoted below.
 *
 * usage: test_ops_elementwise CASE   (exit 0 pass, 1 fail) */
#include "core/mem.h"
#include "graph/graph.h"
#include "ops/elementwise.h"
#include "ops/op.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(c)                                                                                              \
    do {                                                                                                      \
        if (!(c)) {                                                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);                             \
            failures++;                                                                                       \
        }                                                                                                     \
    } while (0)

static tdm_err err;
static gr_model *model;
static gr_graph *graph;

/* A node of the given op type with n_in inputs and n_out outputs. */
static int make_node(const char *op, int n_in, int n_out)
{
    static int counter;
    const char *in[4], *out[4];
    char names[8][32];
    for (int i = 0; i < n_in; i++) {
        snprintf(names[i], sizeof names[i], "i%d_%d", counter, i);
        in[i] = names[i];
    }
    for (int i = 0; i < n_out; i++) {
        snprintf(names[4 + i], sizeof names[4 + i], "o%d_%d", counter, i);
        out[i] = names[4 + i];
    }
    counter++;
    int idx;
    if (gr_node_add(&err, graph, NULL, op, "", n_in, in, n_out, out, &idx)) {
        fprintf(stderr, "gr_node_add: %s\n", err.msg);
        exit(1);
    }
    return idx;
}

static void attr_int(int node, const char *name, int64_t v)
{
    gr_attr *a = gr_attr_add(&err, graph, node, name);
    a->type = GA_INT;
    a->i = v;
}

static void attr_float(int node, const char *name, float v)
{
    gr_attr *a = gr_attr_add(&err, graph, node, name);
    a->type = GA_FLOAT;
    a->f = v;
}

static void attr_str(int node, const char *name, const char *s)
{
    gr_attr *a = gr_attr_add(&err, graph, node, name);
    a->type = GA_STRING;
    a->s = mem_strdup(s);
    a->s_len = strlen(s);
}

static tdm_tensor *tens(tdm_dtype dt, int rank, const int64_t *dims)
{
    tdm_tensor *t;
    if (tensor_new(&err, dt, rank, dims, &t)) {
        fprintf(stderr, "tensor_new: %s\n", err.msg);
        exit(1);
    }
    return t;
}

static tdm_tensor *tf32(int rank, const int64_t *dims, const float *v)
{
    tdm_tensor *t = tens(TDM_FLOAT, rank, dims);
    memcpy(t->data, v, t->nbytes);
    return t;
}

static int run_threads = 1; /* ctx.threads of run() */

/* Runs node (op type from the graph) at opset 13 (or version if > 0). */
static tdm_status run(int node, int version, int n_in, tdm_tensor **in, int n_out, tdm_tensor **out)
{
    gr_node *n = &graph->nodes[node];
    int op, ver;
    if (op_resolve(&err, "", n->op_type, version > 0 ? version : 13, &op, &ver)) {
        fprintf(stderr, "op_resolve: %s\n", err.msg);
        exit(1);
    }
    n->op = op;
    n->version = ver;
    for (int i = 0; i < n_out; i++) {
        out[i] = mem_calloc(1, sizeof(tdm_tensor));
        out[i]->kind = TDM_KIND_TENSOR;
    }
    op_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    uint64_t rng = 1;
    ctx.node = n;
    ctx.version = ver;
    ctx.n_in = n_in;
    ctx.in = (const tdm_tensor *const *)in;
    ctx.n_out = n_out;
    ctx.out = out;
    ctx.err = &err;
    ctx.threads = run_threads;
    ctx.rng = &rng;
    err_clear(&err);
    return op_table[op].run(&ctx);
}

static void freeall(tdm_tensor **t, int n)
{
    for (int i = 0; i < n; i++)
        tdm_tensor_destroy(t[i]);
}

/* ---- broadcast engine against a naive reference ---- */

static uint32_t lcg = 12345;
static uint32_t rnd(void)
{
    lcg = lcg * 1103515245u + 12345u;
    return (lcg >> 16) & 0x7fff;
}

static int case_broadcast(void)
{
    const char *ops[] = {"Add", "Sub", "Mul", "Div", "Max", "PRelu"};
    for (int iter = 0; iter < 400; iter++) {
        int ro = 1 + (int)(rnd() % 5);
        int64_t od[8], ad[8], bd[8];
        for (int i = 0; i < ro; i++)
            od[i] = 1 + rnd() % 4;
        int ra = (int)(rnd() % (unsigned)(ro + 1)), rb = ro;
        for (int i = 0; i < ra; i++)
            ad[i] = rnd() % 3 == 0 ? 1 : od[ro - ra + i];
        for (int i = 0; i < rb; i++)
            bd[i] = rnd() % 3 == 0 ? 1 : od[ro - rb + i];
        if (iter % 2) { /* swap roles sometimes */
            int64_t tmp[8];
            int tr = ra;
            memcpy(tmp, ad, sizeof tmp);
            memcpy(ad, bd, sizeof tmp);
            memcpy(bd, tmp, sizeof tmp);
            ra = rb;
            rb = tr;
        }
        const char *opn = ops[iter % 6];
        int prelu = strcmp(opn, "PRelu") == 0;
        if (prelu) { /* X must have the output shape */
            memcpy(ad, od, sizeof od);
            ra = ro;
        }
        tdm_tensor *in[2] = {tens(TDM_FLOAT, ra, ad), tens(TDM_FLOAT, rb, bd)}, *out[1];
        for (size_t i = 0; i < in[0]->count; i++)
            ((float *)in[0]->data)[i] = (float)((int)(rnd() % 200) - 100) / 8.0f;
        for (size_t i = 0; i < in[1]->count; i++)
            ((float *)in[1]->data)[i] = (float)((int)(rnd() % 200) + 1) / 16.0f;
        int nd = make_node(opn, 2, 1);
        tdm_status st = run(nd, 0, 2, in, 1, out);
        CHECK(st == TDM_OK);
        if (st) {
            fprintf(stderr, "%s\n", err.msg);
            freeall(in, 2);
            freeall(out, 1);
            continue;
        }
        int r;
        int64_t dims[8];
        CHECK(op_broadcast(ra, ad, rb, bd, &r, dims) == 0);
        CHECK(shape_equal(out[0]->rank, out[0]->dims, r, dims));
        /* naive: decompose the flat index per dimension */
        for (size_t i = 0; i < out[0]->count; i++) {
            size_t rem = i, ia = 0, ib = 0, sa = 1, sb = 1;
            for (int d = r - 1; d >= 0; d--) {
                size_t idx = rem % (size_t)dims[d];
                rem /= (size_t)dims[d];
                int da = d - (r - ra), db = d - (r - rb);
                if (da >= 0) {
                    ia += (ad[da] == 1 ? 0 : idx) * sa;
                    sa *= (size_t)ad[da];
                }
                if (db >= 0) {
                    ib += (bd[db] == 1 ? 0 : idx) * sb;
                    sb *= (size_t)bd[db];
                }
            }
            float x = ((float *)in[0]->data)[ia], y = ((float *)in[1]->data)[ib], want;
            switch (iter % 6) {
            case 0: want = x + y; break;
            case 1: want = x - y; break;
            case 2: want = x * y; break;
            case 3: want = x / y; break;
            case 4: want = x > y ? x : y; break;
            default: want = x < 0 ? y * x : x; break;
            }
            if (((float *)out[0]->data)[i] != want) {
                fprintf(stderr, "%s iter %d element %zu: %g, want %g\n", opn, iter, i,
                        ((float *)out[0]->data)[i], want);
                failures++;
                break;
            }
        }
        freeall(in, 2);
        freeall(out, 1);
    }
    /* incompatible shapes are an error naming both */
    int64_t d1[2] = {2, 3}, d2[1] = {4};
    tdm_tensor *in[2] = {tens(TDM_FLOAT, 2, d1), tens(TDM_FLOAT, 1, d2)}, *out[1];
    tdm_status st = run(make_node("Add", 2, 1), 0, 2, in, 1, out);
    CHECK(st == TDM_E_RUNTIME && strstr(err.msg, "2x3") && strstr(err.msg, "4"));
    freeall(in, 2);
    freeall(out, 1);
    return failures;
}

/* ---- integer semantics ---- */

static int case_integers(void)
{
    int64_t d6[1] = {6};
    /* numpy: np.mod([-4,7,5,4,-7,8], [2,-3,8,-2,3,5]) = [0,-2,5,0,2,3];
     * np.fmod gives [0,1,5,0,-1,3] */
    int32_t xa[6] = {-4, 7, 5, 4, -7, 8}, ya[6] = {2, -3, 8, -2, 3, 5};
    int32_t mod_want[6] = {0, -2, 5, 0, 2, 3}, fmod_want[6] = {0, 1, 5, 0, -1, 3};
    for (int fm = 0; fm < 2; fm++) {
        tdm_tensor *in[2] = {tens(TDM_INT32, 1, d6), tens(TDM_INT32, 1, d6)}, *out[1];
        memcpy(in[0]->data, xa, sizeof xa);
        memcpy(in[1]->data, ya, sizeof ya);
        int nd = make_node("Mod", 2, 1);
        attr_int(nd, "fmod", fm);
        CHECK(run(nd, 0, 2, in, 1, out) == TDM_OK);
        CHECK(out[0]->dtype == TDM_INT32);
        CHECK(memcmp(out[0]->data, fm ? fmod_want : mod_want, sizeof xa) == 0);
        freeall(in, 2);
        freeall(out, 1);
    }
    /* int8 addition wraps; division truncates; division by zero is an error */
    int64_t d3[1] = {3};
    tdm_tensor *in[2] = {tens(TDM_INT8, 1, d3), tens(TDM_INT8, 1, d3)}, *out[1];
    int8_t a8[3] = {120, -7, 100}, b8[3] = {10, 2, -3};
    memcpy(in[0]->data, a8, 3);
    memcpy(in[1]->data, b8, 3);
    CHECK(run(make_node("Add", 2, 1), 0, 2, in, 1, out) == TDM_OK);
    int8_t *o8 = out[0]->data;
    CHECK(o8[0] == -126 && o8[1] == -5 && o8[2] == 97);
    freeall(out, 1);
    CHECK(run(make_node("Div", 2, 1), 0, 2, in, 1, out) == TDM_OK);
    o8 = out[0]->data;
    CHECK(o8[0] == 12 && o8[1] == -3 && o8[2] == -33);
    freeall(out, 1);
    ((int8_t *)in[1]->data)[1] = 0;
    CHECK(run(make_node("Div", 2, 1), 0, 2, in, 1, out) == TDM_E_RUNTIME && strstr(err.msg, "zero"));
    freeall(out, 1);
    freeall(in, 2);
    /* BitShift on uint8: 16 << 4 wraps to 0 in 8 bits, 255 >> 9 = 0 */
    tdm_tensor *u[2] = {tens(TDM_UINT8, 1, d3), tens(TDM_UINT8, 1, d3)};
    uint8_t ua[3] = {16, 255, 3}, ub[3] = {4, 9, 1};
    memcpy(u[0]->data, ua, 3);
    memcpy(u[1]->data, ub, 3);
    int nd = make_node("BitShift", 2, 1);
    attr_str(nd, "direction", "LEFT");
    CHECK(run(nd, 0, 2, u, 1, out) == TDM_OK);
    CHECK(((uint8_t *)out[0]->data)[0] == 0 && ((uint8_t *)out[0]->data)[2] == 6);
    freeall(out, 1);
    nd = make_node("BitShift", 2, 1);
    attr_str(nd, "direction", "RIGHT");
    CHECK(run(nd, 0, 2, u, 1, out) == TDM_OK);
    CHECK(((uint8_t *)out[0]->data)[0] == 1 && ((uint8_t *)out[0]->data)[1] == 0 &&
          ((uint8_t *)out[0]->data)[2] == 1);
    freeall(out, 1);
    nd = make_node("BitShift", 2, 1);
    attr_str(nd, "direction", "UP");
    CHECK(run(nd, 0, 2, u, 1, out) == TDM_E_MODEL && strstr(err.msg, "direction"));
    freeall(out, 1);
    freeall(u, 2);
    /* Pow with mixed types: int64 base, float exponent → int64 */
    tdm_tensor *pw[2] = {tens(TDM_INT64, 1, d3), tens(TDM_FLOAT, 1, d3)};
    int64_t pb[3] = {1, 2, 3};
    float pe[3] = {4, 5, 0.5f};
    memcpy(pw[0]->data, pb, sizeof pb);
    memcpy(pw[1]->data, pe, sizeof pe);
    CHECK(run(make_node("Pow", 2, 1), 0, 2, pw, 1, out) == TDM_OK);
    CHECK(out[0]->dtype == TDM_INT64);
    int64_t *po = out[0]->data;
    CHECK(po[0] == 1 && po[1] == 32 && po[2] == 1);
    freeall(out, 1);
    freeall(pw, 2);
    /* Clip int8 with only max given */
    tdm_tensor *c[3] = {tens(TDM_INT8, 1, d3), NULL, tens(TDM_INT8, 0, NULL)};
    int8_t cv[3] = {-128, 5, 127};
    memcpy(c[0]->data, cv, 3);
    ((int8_t *)c[2]->data)[0] = 6;
    CHECK(run(make_node("Clip", 3, 1), 0, 3, c, 1, out) == TDM_OK);
    o8 = out[0]->data;
    CHECK(o8[0] == -128 && o8[1] == 5 && o8[2] == 6);
    freeall(out, 1);
    freeall(c, 3);
    return failures;
}

/* ---- Cast ---- */

static int case_cast(void)
{
    /* numpy: str(np.float32(v)) for these values */
    float v[] = {0.0001f, 0.00012345f, 0.00009f, 1e15f, 1e16f, 123456789.0f, 1.0f, -2.5f, 3.4e38f, -0.0f,
                 1.0f / 3.0f, NAN, -INFINITY, 0.47892547f};
    const char *want[] = {"1e-04",  "0.00012345", "9e-05", "1000000000000000.0", "1e+16",
                          "123456790.0", "1.0", "-2.5", "3.4e+38", "-0.0", "0.33333334", "nan", "-inf",
                          "0.47892547"};
    int n = (int)(sizeof v / sizeof v[0]);
    int64_t dn[1] = {n};
    tdm_tensor *in[1] = {tf32(1, dn, v)}, *out[1];
    int nd = make_node("Cast", 1, 1);
    attr_int(nd, "to", TDM_STRING);
    CHECK(run(nd, 0, 1, in, 1, out) == TDM_OK);
    for (int i = 0; i < n; i++)
        if (strcmp(tensor_str(out[0], (size_t)i), want[i]) != 0) {
            fprintf(stderr, "float %d → \"%s\", want \"%s\"\n", i, tensor_str(out[0], (size_t)i), want[i]);
            failures++;
        }
    /* and back: strings to float, including NaN/INF spellings */
    tdm_tensor *s[1] = {tens(TDM_STRING, 1, (int64_t[]){4})}, *f[1];
    const char *txt[4] = {"0.5", "NaN", "+INF", "-INF"};
    for (int i = 0; i < 4; i++)
        ((char **)s[0]->data)[i] = mem_strdup(txt[i]);
    nd = make_node("Cast", 1, 1);
    attr_int(nd, "to", TDM_FLOAT);
    CHECK(run(nd, 0, 1, s, 1, f) == TDM_OK);
    float *fo = f[0]->data;
    CHECK(fo[0] == 0.5f && isnan(fo[1]) && fo[2] == INFINITY && fo[3] == -INFINITY);
    freeall(f, 1);
    /* a string that is not a number is an error naming it */
    mem_free(((char **)s[0]->data)[0]);
    ((char **)s[0]->data)[0] = mem_strdup("abc");
    CHECK(run(nd, 0, 1, s, 1, f) == TDM_E_RUNTIME && strstr(err.msg, "abc"));
    freeall(f, 1);
    freeall(s, 1);
    freeall(out, 1);
    freeall(in, 1);
    /* float → int8 truncates toward zero; → bfloat16 truncates; → float16 rounds */
    float g[4] = {-1.7f, 2.9f, 0.47892547f, 65519.0f};
    tdm_tensor *gi[1] = {tf32(1, (int64_t[]){4}, g)};
    nd = make_node("Cast", 1, 1);
    attr_int(nd, "to", TDM_INT8);
    CHECK(run(nd, 0, 1, gi, 1, out) == TDM_OK);
    CHECK(((int8_t *)out[0]->data)[0] == -1 && ((int8_t *)out[0]->data)[1] == 2);
    freeall(out, 1);
    nd = make_node("Cast", 1, 1);
    attr_int(nd, "to", TDM_BFLOAT16);
    CHECK(run(nd, 0, 1, gi, 1, out) == TDM_OK);
    uint32_t bits;
    memcpy(&bits, &g[2], 4);
    CHECK(((uint16_t *)out[0]->data)[2] == (uint16_t)(bits >> 16));
    freeall(out, 1);
    nd = make_node("Cast", 1, 1);
    attr_int(nd, "to", TDM_FLOAT16);
    CHECK(run(nd, 0, 1, gi, 1, out) == TDM_OK);
    CHECK(((uint16_t *)out[0]->data)[3] == 0x7bff); /* 65519 rounds to 65504 */
    freeall(out, 1);
    nd = make_node("Cast", 1, 1);
    attr_int(nd, "to", 99);
    CHECK(run(nd, 0, 1, gi, 1, out) == TDM_E_MODEL && strstr(err.msg, "'to'"));
    freeall(out, 1);
    /* CastLike takes the type of input 1 */
    tdm_tensor *cl[2] = {gi[0], tens(TDM_DOUBLE, 0, NULL)};
    CHECK(run(make_node("CastLike", 2, 1), 15, 2, cl, 1, out) == TDM_OK);
    CHECK(out[0]->dtype == TDM_DOUBLE && ((double *)out[0]->data)[1] == (double)2.9f);
    freeall(out, 1);
    freeall(cl, 2);
    return failures;
}

/* ---- unary ---- */

static int case_unary(void)
{
    float x[6] = {-2.0f, -0.5f, 0.0f, 0.5f, 2.5f, 3.5f};
    int64_t d6[1] = {6};
    struct {
        const char *op;
        double (*ref)(double);
    } fns[] = {{"Exp", exp}, {"Tanh", tanh}, {"Sin", sin}, {"Atan", atan}, {"Erf", erf}, {"Floor", floor},
               {"Abs", fabs}};
    tdm_tensor *in[1] = {tf32(1, d6, x)}, *out[2];
    for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
        CHECK(run(make_node(fns[k].op, 1, 1), 0, 1, in, 1, out) == TDM_OK);
        for (int i = 0; i < 6; i++)
            if (fabs(((float *)out[0]->data)[i] - fns[k].ref(x[i])) > 1e-6 * (1 + fabs(fns[k].ref(x[i])))) {
                fprintf(stderr, "%s(%g) = %g\n", fns[k].op, x[i], ((float *)out[0]->data)[i]);
                failures++;
            }
        freeall(out, 1);
    }
    /* Round is half to even: numpy.round([-2,-0.5,0,0.5,2.5,3.5]) = [-2,-0,0,0,2,4] */
    CHECK(run(make_node("Round", 1, 1), 0, 1, in, 1, out) == TDM_OK);
    float rw[6] = {-2, -0.0f, 0, 0, 2, 4};
    CHECK(memcmp(out[0]->data, rw, sizeof rw) == 0);
    freeall(out, 1);
    /* Selu with defaults, Sigmoid, HardSwish against their formulas */
    CHECK(run(make_node("Sigmoid", 1, 1), 0, 1, in, 1, out) == TDM_OK);
    for (int i = 0; i < 6; i++)
        CHECK(fabs(((float *)out[0]->data)[i] - 1 / (1 + exp(-x[i]))) < 1e-7);
    freeall(out, 1);
    /* the float32 Sigmoid has its own exp: sweep [-100, 100] and the specials */
    {
        int64_t dn[1] = {20004};
        tdm_tensor *sw[1] = {tens(TDM_FLOAT, 1, dn)};
        float *sv = sw[0]->data;
        for (int i = 0; i < 20001; i++)
            sv[i] = (float)(i - 10000) / 100.0f;
        sv[20001] = NAN;
        sv[20002] = INFINITY;
        sv[20003] = -INFINITY;
        CHECK(run(make_node("Sigmoid", 1, 1), 0, 1, sw, 1, out) == TDM_OK);
        const float *so = out[0]->data;
        double worst = 0;
        for (int i = 0; i < 20001; i++) {
            double w = 1 / (1 + exp(-(double)sv[i])), e = fabs(so[i] - w);
            if (w > 1e-30 && e / w > worst)
                worst = e / w;
            if (w <= 1e-30 && e > 1e-37)
                worst = 1;
        }
        if (worst > 1e-6)
            fprintf(stderr, "Sigmoid relative error %g\n", worst);
        CHECK(worst <= 1e-6);
        CHECK(isnan(so[20001]) && so[20002] == 1.0f && so[20003] >= 0 && so[20003] < 1e-37f);
        freeall(out, 1);
        freeall(sw, 1);
    }
    CHECK(run(make_node("HardSwish", 1, 1), 14, 1, in, 1, out) == TDM_OK);
    for (int i = 0; i < 6; i++)
        CHECK(fabs(((float *)out[0]->data)[i] - x[i] * fmax(0, fmin(1, x[i] / 6 + 0.5))) < 1e-6);
    freeall(out, 1);
    int nd = make_node("LeakyRelu", 1, 1);
    attr_float(nd, "alpha", 0.5f);
    CHECK(run(nd, 0, 1, in, 1, out) == TDM_OK);
    CHECK(((float *)out[0]->data)[0] == -1.0f && ((float *)out[0]->data)[4] == 2.5f);
    freeall(out, 1);
    /* Clip, attribute form (opset 6) */
    nd = make_node("Clip", 1, 1);
    attr_float(nd, "min", -1.0f);
    attr_float(nd, "max", 1.0f);
    CHECK(run(nd, 7, 1, in, 1, out) == TDM_OK);
    CHECK(((float *)out[0]->data)[0] == -1.0f && ((float *)out[0]->data)[3] == 0.5f &&
          ((float *)out[0]->data)[5] == 1.0f);
    freeall(out, 1);
    /* float16 Relu and Sqrt computed in float, rounded per element */
    tdm_tensor *h[1] = {tens(TDM_FLOAT16, 1, d6)};
    for (int i = 0; i < 6; i++)
        ((uint16_t *)h[0]->data)[i] = f32_to_fp16(x[i]);
    CHECK(run(make_node("Relu", 1, 1), 0, 1, h, 1, out) == TDM_OK);
    CHECK(out[0]->dtype == TDM_FLOAT16 && fp16_to_f32(((uint16_t *)out[0]->data)[0]) == 0.0f &&
          fp16_to_f32(((uint16_t *)out[0]->data)[5]) == 3.5f);
    freeall(out, 1);
    CHECK(run(make_node("Sqrt", 1, 1), 0, 1, h, 1, out) == TDM_OK);
    CHECK(((uint16_t *)out[0]->data)[4] == f32_to_fp16(sqrtf(2.5f)));
    freeall(out, 1);
    freeall(h, 1);
    /* IsInf / IsNaN */
    float sp[4] = {INFINITY, -INFINITY, NAN, 1};
    tdm_tensor *spi[1] = {tf32(1, (int64_t[]){4}, sp)};
    nd = make_node("IsInf", 1, 1);
    attr_int(nd, "detect_negative", 0);
    CHECK(run(nd, 0, 1, spi, 1, out) == TDM_OK);
    CHECK(out[0]->dtype == TDM_BOOL && memcmp(out[0]->data, "\1\0\0\0", 4) == 0);
    freeall(out, 1);
    CHECK(run(make_node("IsNaN", 1, 1), 0, 1, spi, 1, out) == TDM_OK);
    CHECK(memcmp(out[0]->data, "\0\0\1\0", 4) == 0);
    freeall(out, 1);
    freeall(spi, 1);
    /* an int tensor into a float-only op is refused with the type named */
    tdm_tensor *it[1] = {tens(TDM_INT32, 1, d6)};
    memset(it[0]->data, 0, it[0]->nbytes);
    CHECK(run(make_node("Exp", 1, 1), 0, 1, it, 1, out) == TDM_E_UNSUPPORTED && strstr(err.msg, "int32"));
    freeall(out, 1);
    freeall(it, 1);
    /* Dropout, inference: identity and an all-true mask */
    nd = make_node("Dropout", 1, 2);
    CHECK(run(nd, 0, 1, in, 2, out) == TDM_OK);
    CHECK(memcmp(out[0]->data, x, sizeof x) == 0 && out[1]->dtype == TDM_BOOL &&
          memcmp(out[1]->data, "\1\1\1\1\1\1", 6) == 0);
    freeall(out, 2);
    freeall(in, 1);
    return failures;
}

/* numpy: np.random.seed(0); np.random.uniform(0, 1, 6) =
 * [0.5488135, 0.71518937, 0.60276338, 0.54488318, 0.4236548, 0.64589411];
 * with ratio 0.5 all but element 4 are kept, scaled by 2. */
static int case_dropout(void)
{
    float x[6] = {1, 2, 3, 4, 5, 6};
    tdm_tensor *in[3] = {tf32(1, (int64_t[]){6}, x), tens(TDM_FLOAT, 0, NULL), tens(TDM_BOOL, 0, NULL)}, *out[2];
    ((float *)in[1]->data)[0] = 0.5f;
    ((uint8_t *)in[2]->data)[0] = 1;
    int nd = make_node("Dropout", 3, 2);
    attr_int(nd, "seed", 0);
    CHECK(run(nd, 0, 3, in, 2, out) == TDM_OK);
    float want[6] = {2, 4, 6, 8, 0, 12};
    CHECK(memcmp(out[0]->data, want, sizeof want) == 0);
    CHECK(memcmp(out[1]->data, "\1\1\1\1\0\1", 6) == 0);
    freeall(out, 2);
    ((float *)in[1]->data)[0] = 1.0f;
    CHECK(run(nd, 0, 3, in, 2, out) == TDM_E_RUNTIME && strstr(err.msg, "ratio"));
    freeall(out, 2);
    freeall(in, 3);
    return failures;
}

/* ---- variadic, Where, comparisons, strings ---- */

static int case_misc(void)
{
    float a[3] = {1, 5, 3}, b[1] = {2}, c[6] = {0, 9, 1, 4, 4, 4};
    tdm_tensor *in[3] = {tf32(1, (int64_t[]){3}, a), tf32(1, (int64_t[]){1}, b), tf32(2, (int64_t[]){2, 3}, c)},
               *out[1];
    CHECK(run(make_node("Max", 3, 1), 0, 3, in, 1, out) == TDM_OK);
    float mx[6] = {2, 9, 3, 4, 5, 4};
    CHECK(out[0]->rank == 2 && memcmp(out[0]->data, mx, sizeof mx) == 0);
    freeall(out, 1);
    CHECK(run(make_node("Mean", 3, 1), 0, 3, in, 1, out) == TDM_OK);
    for (int i = 0; i < 6; i++)
        CHECK(fabsf(((float *)out[0]->data)[i] - (a[i % 3] + b[0] + c[i]) / 3) < 1e-6f);
    freeall(out, 1);
    CHECK(run(make_node("Sum", 1, 1), 0, 1, in, 1, out) == TDM_OK);
    CHECK(memcmp(out[0]->data, a, sizeof a) == 0 && ((float *)in[0]->data)[1] == 5);
    freeall(out, 1);
    CHECK(run(make_node("Less", 2, 1), 0, 2, in, 1, out) == TDM_OK);
    CHECK(out[0]->dtype == TDM_BOOL && memcmp(out[0]->data, "\1\0\0", 3) == 0);
    freeall(out, 1);
    freeall(in, 3);
    /* Where over strings with a broadcast condition */
    tdm_tensor *w[3] = {tens(TDM_BOOL, 2, (int64_t[]){2, 1}), tens(TDM_STRING, 1, (int64_t[]){2}),
                        tens(TDM_STRING, 2, (int64_t[]){2, 2})};
    ((uint8_t *)w[0]->data)[0] = 1;
    ((uint8_t *)w[0]->data)[1] = 0;
    const char *xs[2] = {"a", "b"}, *ys[4] = {"p", "q", "r", "s"};
    for (int i = 0; i < 2; i++)
        ((char **)w[1]->data)[i] = mem_strdup(xs[i]);
    for (int i = 0; i < 4; i++)
        ((char **)w[2]->data)[i] = mem_strdup(ys[i]);
    CHECK(run(make_node("Where", 3, 1), 16, 3, w, 1, out) == TDM_OK);
    const char *ww[4] = {"a", "b", "r", "s"};
    for (int i = 0; i < 4; i++)
        CHECK(strcmp(tensor_str(out[0], (size_t)i), ww[i]) == 0);
    freeall(out, 1);
    /* Equal on strings */
    tdm_tensor *e[2] = {w[1], tens(TDM_STRING, 0, NULL)};
    ((char **)e[1]->data)[0] = mem_strdup("b");
    CHECK(run(make_node("Equal", 2, 1), 0, 2, e, 1, out) == TDM_OK);
    CHECK(memcmp(out[0]->data, "\0\1", 2) == 0);
    freeall(out, 1);
    tdm_tensor_destroy(e[1]);
    freeall(w, 3);
    /* And on bools; And on floats is refused */
    tdm_tensor *l[2] = {tens(TDM_BOOL, 1, (int64_t[]){4}), tens(TDM_BOOL, 1, (int64_t[]){4})};
    memcpy(l[0]->data, "\0\1\0\1", 4);
    memcpy(l[1]->data, "\0\0\1\1", 4);
    CHECK(run(make_node("Xor", 2, 1), 0, 2, l, 1, out) == TDM_OK);
    CHECK(memcmp(out[0]->data, "\0\1\1\0", 4) == 0);
    freeall(out, 1);
    freeall(l, 2);
    return failures;
}

/* ---- infer hooks ---- */

static int case_infer(void)
{
    int nd = make_node("Cast", 1, 1);
    attr_int(nd, "to", TDM_FLOAT16);
    gr_type tin, tout;
    memset(&tin, 0, sizeof tin);
    tin.kind = TDM_KIND_TENSOR;
    tin.dtype = TDM_FLOAT;
    tin.rank = 2;
    tin.dims[0] = (gr_dim){-1, "N"};
    tin.dims[1] = (gr_dim){4, NULL};
    const gr_type *ins[3] = {&tin, &tin, &tin};
    const tdm_tensor *vals[3] = {NULL, NULL, NULL};
    op_infer_ctx ic;
    memset(&ic, 0, sizeof ic);
    memset(&tout, 0, sizeof tout);
    tout.rank = -1;
    ic.node = &graph->nodes[nd];
    ic.version = 13;
    ic.n_in = 1;
    ic.in = ins;
    ic.value = vals;
    ic.n_out = 1;
    ic.out = &tout;
    ic.model = model;
    ic.err = &err;
    CHECK(op_infer_Cast(&ic) == TDM_OK);
    CHECK(tout.dtype == TDM_FLOAT16 && tout.rank == 2 && tout.dims[1].v == 4 && tout.dims[0].sym &&
          strcmp(tout.dims[0].sym, "N") == 0);
    /* Where: broadcast of three, dtype of input 1 */
    gr_type tc = tin, tx = tin;
    tc.dtype = TDM_BOOL;
    tc.rank = 1;
    tc.dims[0] = (gr_dim){4, NULL};
    tx.dtype = TDM_INT64;
    const gr_type *w[3] = {&tc, &tx, &tin};
    ic.n_in = 3;
    ic.in = w;
    memset(&tout, 0, sizeof tout);
    tout.rank = -1;
    CHECK(op_infer_Where(&ic) == TDM_OK);
    CHECK(tout.dtype == TDM_INT64 && tout.rank == 2 && tout.dims[1].v == 4);
    return failures;
}

/* ---- the vector kernels against scalar references, bit for bit, 1 and 2 threads ---- */

static float special(uint32_t k)
{
    static const float v[] = {0.0f, -0.0f, 1.0f, -1.5f, 3.0e38f, -3.0e38f, 1.0e-40f, -1.0e-40f, 7.25f, -0.125f};
    uint32_t r = k % 14;
    if (r < 10)
        return v[r];
    if (r == 10)
        return NAN;
    if (r == 11)
        return INFINITY;
    if (r == 12)
        return -INFINITY;
    return (float)((int)(rnd() % 2000) - 1000) / 7.0f;
}

static int same_bits(float a, float b) { return !memcmp(&a, &b, sizeof a); }

static int case_simd(void)
{
    const char *ops[] = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
    /* b's shape: same, scalar, per channel, per row (a is [2, 19, 23, 7]) */
    const int64_t ad[4] = {2, 19, 23, 7};
    const int64_t bds[4][4] = {{2, 19, 23, 7}, {1, 1, 1, 1}, {1, 19, 1, 1}, {1, 1, 1, 7}};
    for (int threads = 1; threads <= 2; threads++) {
        run_threads = threads;
        for (int o = 0; o < 6; o++)
            for (int bs = 0; bs < 4; bs++)
                for (int swap = 0; swap < 2; swap++) {
                    tdm_tensor *x = tens(TDM_FLOAT, 4, ad), *y = tens(TDM_FLOAT, 4, bds[bs]), *out[1];
                    for (size_t i = 0; i < x->count; i++)
                        ((float *)x->data)[i] = special(rnd());
                    for (size_t i = 0; i < y->count; i++)
                        ((float *)y->data)[i] = special(rnd());
                    tdm_tensor *in[2] = {swap ? y : x, swap ? x : y};
                    int nd = make_node(ops[o], 2, 1);
                    tdm_status st = run(nd, 0, 2, in, 1, out);
                    CHECK(st == TDM_OK);
                    for (size_t i = 0; st == TDM_OK && i < x->count; i++) {
                        size_t c = (i / (23 * 7)) % 19, w = i % 7;
                        size_t j = bs == 0 ? i : bs == 1 ? 0 : bs == 2 ? c : w;
                        float p = ((float *)x->data)[i], q = ((float *)y->data)[j];
                        float a = swap ? q : p, b = swap ? p : q, want;
                        switch (o) {
                        case 0: want = a + b; break;
                        case 1: want = a - b; break;
                        case 2: want = a * b; break;
                        case 3: want = a / b; break;
                        case 4: want = (a != a || a > b) ? a : b; break;
                        default: want = (a != a || a < b) ? a : b; break;
                        }
                        float got = ((float *)out[0]->data)[i];
                        if (!same_bits(got, want) && !(got != got && want != want)) {
                            fprintf(stderr, "%s b-shape %d swap %d threads %d element %zu: %g, want %g\n", ops[o],
                                    bs, swap, threads, i, got, want);
                            failures++;
                            break;
                        }
                    }
                    tdm_tensor_destroy(x);
                    tdm_tensor_destroy(y);
                    freeall(out, 1);
                }
        /* Pow with the exponent 2 (computed as x * x) */
        {
            int64_t d[1] = {4099};
            float two = 2.0f;
            tdm_tensor *in[2] = {tens(TDM_FLOAT, 1, d), tf32(0, d, &two)}, *out[1];
            for (size_t i = 0; i < in[0]->count; i++)
                ((float *)in[0]->data)[i] = special(rnd());
            int nd = make_node("Pow", 2, 1);
            tdm_status st = run(nd, 0, 2, in, 1, out);
            CHECK(st == TDM_OK);
            for (size_t i = 0; st == TDM_OK && i < in[0]->count; i++) {
                float v = ((float *)in[0]->data)[i], want = (float)pow(v, 2.0), got = ((float *)out[0]->data)[i];
                if (!same_bits(got, want) && !(got != got && want != want)) {
                    fprintf(stderr, "Pow 2 element %zu: %g, want %g\n", i, got, want);
                    failures++;
                    break;
                }
            }
            freeall(in, 2);
            freeall(out, 1);
        }
        /* Relu and Clip */
        for (int o = 0; o < 2; o++) {
            int64_t d[1] = {100003};
            tdm_tensor *in[3] = {tens(TDM_FLOAT, 1, d), NULL, NULL}, *out[1];
            for (size_t i = 0; i < in[0]->count; i++)
                ((float *)in[0]->data)[i] = special(rnd());
            int nd = make_node(o ? "Clip" : "Relu", o ? 3 : 1, 1);
            if (o) {
                int64_t sd[1] = {1};
                float lo = -1.0f, hi = 6.0f;
                in[1] = tf32(0, sd, &lo);
                in[2] = tf32(0, sd, &hi);
            }
            tdm_status st = run(nd, 0, o ? 3 : 1, in, 1, out);
            CHECK(st == TDM_OK);
            for (size_t i = 0; st == TDM_OK && i < in[0]->count; i++) {
                float v = ((float *)in[0]->data)[i], want;
                if (o) {
                    v = v < -1.0f ? -1.0f : v;
                    want = v > 6.0f ? 6.0f : v;
                } else {
                    want = v < 0 ? 0.0f : v;
                }
                float got = ((float *)out[0]->data)[i];
                if (!same_bits(got, want) && !(got != got && want != want)) {
                    fprintf(stderr, "%s threads %d element %zu: %g, want %g\n", o ? "Clip" : "Relu", threads, i, got,
                            want);
                    failures++;
                    break;
                }
            }
            freeall(in, o ? 3 : 1);
            freeall(out, 1);
        }
    }
    run_threads = 1;
    return failures ? 1 : 0;
}

/* ---- float4e2m1, float8e8m0, int2/uint2 ----
 * Expected codes from the ONNX 1.23 reference (ml_dtypes 0.5 astype for
 * float4e2m1 and the 2-bit integers, onnx.numpy_helper.to_float8e8m0 for
 * e8m0), printed by numpy for exactly these float32 inputs. */

/* Casts the float32 values v to dt with Cast 25 (round_mode NULL: the
 * default), checking each code against want. */
static void lowbit_cast(const float *v, int n, tdm_dtype dt, int saturate, const char *round_mode,
                        const uint8_t *want, const char *what)
{
    tdm_tensor *in[1] = {tf32(1, (int64_t[]){n}, v)}, *out[1];
    int nd = make_node("Cast", 1, 1);
    attr_int(nd, "to", dt);
    if (saturate >= 0)
        attr_int(nd, "saturate", saturate);
    if (round_mode)
        attr_str(nd, "round_mode", round_mode);
    CHECK(run(nd, 25, 1, in, 1, out) == TDM_OK);
    CHECK(out[0]->dtype == dt && out[0]->count == (size_t)n);
    for (int i = 0; i < n && out[0]->count == (size_t)n; i++)
        if (((uint8_t *)out[0]->data)[i] != want[i]) {
            fprintf(stderr, "%s: %g -> code %u, want %u\n", what, v[i], ((uint8_t *)out[0]->data)[i], want[i]);
            failures++;
        }
    freeall(in, 1);
    freeall(out, 1);
}

static int case_lowbit(void)
{
    /* float4e2m1: ties to the even code (0.25 -> 0, 0.75 and 1.25 -> 1.0,
     * 2.5 -> 2, 5 -> 4), beyond 6 and infinities saturate, -0.1 is -0, a
     * NaN with the sign clear is 0x8 and one with it set 0x0 */
    float f4in[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 5.5f, 6.5f, 100.0f, INFINITY, -INFINITY,
                    NAN, -NAN, -0.0f, -0.1f, 0.26f};
    const uint8_t f4want[] = {0, 2, 2, 4, 4, 6, 6, 7, 7, 7, 7, 15, 8, 0, 8, 8, 1};
    lowbit_cast(f4in, 17, TDM_FLOAT4E2M1, -1, NULL, f4want, "float -> float4e2m1");
    /* and back: the 16 codes */
    tdm_tensor *c4[1] = {tens(TDM_FLOAT4E2M1, 1, (int64_t[]){16})}, *d4[1];
    for (int i = 0; i < 16; i++)
        ((uint8_t *)c4[0]->data)[i] = (uint8_t)i;
    int nd = make_node("Cast", 1, 1);
    attr_int(nd, "to", TDM_FLOAT);
    CHECK(run(nd, 25, 1, c4, 1, d4) == TDM_OK);
    const float f4val[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    for (int i = 0; i < 16; i++) {
        float got = ((float *)d4[0]->data)[i];
        CHECK(got == f4val[i] && signbit(got) == signbit(f4val[i]));
    }
    freeall(c4, 1);
    freeall(d4, 1);

    /* float8e8m0: the exponent byte; round_mode up / nearest / down; with
     * saturate 0xFE does not round up into 0xFF (NaN); the sign is dropped;
     * a subnormal rounds up to code 1 */
    float e8in[] = {0.0f, 1.0f, 1.5f, 1.25f, 3.0f, 0x1.8p127f, INFINITY, NAN, -4.0f, 1e-40f};
    const uint8_t up_sat[] = {0, 127, 128, 128, 129, 254, 255, 255, 129, 1};
    const uint8_t up_nosat[] = {0, 127, 128, 128, 129, 255, 255, 255, 129, 1};
    const uint8_t nearest[] = {0, 127, 128, 127, 129, 254, 255, 255, 129, 0};
    const uint8_t nearest_nosat[] = {0, 127, 128, 127, 129, 255, 255, 255, 129, 0};
    const uint8_t down[] = {0, 127, 127, 127, 128, 254, 255, 255, 129, 0};
    lowbit_cast(e8in, 10, TDM_FLOAT8E8M0, -1, NULL, up_sat, "float -> e8m0 (default up, saturate)");
    lowbit_cast(e8in, 10, TDM_FLOAT8E8M0, 0, "up", up_nosat, "float -> e8m0 up, saturate 0");
    lowbit_cast(e8in, 10, TDM_FLOAT8E8M0, 1, "nearest", nearest, "float -> e8m0 nearest");
    lowbit_cast(e8in, 10, TDM_FLOAT8E8M0, 0, "nearest", nearest_nosat, "float -> e8m0 nearest, saturate 0");
    lowbit_cast(e8in, 10, TDM_FLOAT8E8M0, 0, "down", down, "float -> e8m0 down");
    CHECK(op_float8e8m0_to_f64(127) == 1.0 && op_float8e8m0_to_f64(0) == ldexp(1.0, -127) &&
          op_float8e8m0_to_f64(254) == ldexp(1.0, 127) && isnan(op_float8e8m0_to_f64(255)));
    /* an unknown round_mode is an error naming the attribute */
    tdm_tensor *one[1] = {tf32(1, (int64_t[]){1}, (float[]){1.0f})}, *bad[1];
    nd = make_node("Cast", 1, 1);
    attr_int(nd, "to", TDM_FLOAT8E8M0);
    attr_str(nd, "round_mode", "sideways");
    CHECK(run(nd, 25, 1, one, 1, bad) == TDM_E_MODEL && strstr(err.msg, "round_mode"));
    freeall(one, 1);
    freeall(bad, 1);

    /* int2 / uint2: truncated toward zero, then 0 outside the range (NaN
     * and infinities too), held one per byte, int2 sign-extended */
    float i2in[] = {-3.0f, -2.5f, -2.0f, -1.0f, 1.9f, 2.0f, NAN, INFINITY};
    const uint8_t i2want[] = {0, 0xFE, 0xFE, 0xFF, 1, 0, 0, 0};
    lowbit_cast(i2in, 8, TDM_INT2, -1, NULL, i2want, "float -> int2");
    float u2in[] = {-1.0f, 0.5f, 3.9f, 4.0f};
    const uint8_t u2want[] = {0, 0, 3, 0};
    lowbit_cast(u2in, 4, TDM_UINT2, -1, NULL, u2want, "float -> uint2");
    CHECK(op_lowbit_to_f64(0xFE, TDM_INT2) == -2.0 && op_lowbit_to_f64(3, TDM_UINT2) == 3.0);

    /* QuantizeLinear 25 to int2 rounds half to even and saturates (unlike
     * Cast); to float4e2m1 it rounds as Cast does */
    float qx[] = {-3.0f, -0.5f, 0.5f, 1.5f, 2.5f};
    tdm_tensor *q[3] = {tf32(1, (int64_t[]){5}, qx), tf32(0, NULL, (float[]){1.0f}), tens(TDM_INT2, 0, NULL)};
    ((uint8_t *)q[2]->data)[0] = 0;
    tdm_tensor *qo[1];
    nd = make_node("QuantizeLinear", 3, 1);
    CHECK(run(nd, 25, 3, q, 1, qo) == TDM_OK);
    const uint8_t qwant[] = {0xFE, 0, 0, 1, 1};
    CHECK(qo[0]->dtype == TDM_INT2 && memcmp(qo[0]->data, qwant, 5) == 0);
    freeall(qo, 1);
    tdm_tensor_destroy(q[2]);
    q[2] = tens(TDM_FLOAT4E2M1, 0, NULL);
    ((uint8_t *)q[2]->data)[0] = 0;
    ((float *)q[1]->data)[0] = 0.5f;
    CHECK(run(nd, 25, 3, q, 1, qo) == TDM_OK);
    const uint8_t qf4want[] = {15, 10, 2, 5, 6};
    CHECK(qo[0]->dtype == TDM_FLOAT4E2M1 && memcmp(qo[0]->data, qf4want, 5) == 0);
    /* and DequantizeLinear back: code * scale */
    tdm_tensor *dq[2] = {qo[0], q[1]}, *dqo[1];
    nd = make_node("DequantizeLinear", 2, 1);
    CHECK(run(nd, 25, 2, dq, 1, dqo) == TDM_OK);
    const float dqwant[] = {-3.0f, -0.5f, 0.5f, 1.5f, 2.0f};
    CHECK(dqo[0]->dtype == TDM_FLOAT && memcmp(dqo[0]->data, dqwant, sizeof dqwant) == 0);
    freeall(dqo, 1);
    freeall(qo, 1);
    freeall(q, 3);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CASE\n", argv[0]);
        return 2;
    }
    if (gr_model_new(&err, &model) || gr_graph_new(&err, model, NULL, "g", &graph)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return 1;
    }
    model->main = graph;
    const char *c = argv[1];
    int rc;
    if (!strcmp(c, "broadcast"))
        rc = case_broadcast();
    else if (!strcmp(c, "integers"))
        rc = case_integers();
    else if (!strcmp(c, "cast"))
        rc = case_cast();
    else if (!strcmp(c, "lowbit"))
        rc = case_lowbit();
    else if (!strcmp(c, "unary"))
        rc = case_unary();
    else if (!strcmp(c, "dropout"))
        rc = case_dropout();
    else if (!strcmp(c, "misc"))
        rc = case_misc();
    else if (!strcmp(c, "infer"))
        rc = case_infer();
    else if (!strcmp(c, "simd"))
        rc = case_simd();
    else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    gr_model_free(model);
    return rc ? 1 : 0;
}
