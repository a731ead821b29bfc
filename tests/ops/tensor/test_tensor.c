/* Unit tests of the tensor op family: run hooks on hand-made tensors with
 * expectations computed by numpy (and the ONNX reference Resize), and the
 * infer hooks on symbolic and constant inputs. */
#include "core/mem.h"
#include "graph/graph.h"
#include "ops/op.h"
#include "ops/tensor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures, checks;

#define CHECK(cond, ...)                                                                                     \
    do {                                                                                                     \
        checks++;                                                                                            \
        if (!(cond)) {                                                                                       \
            failures++;                                                                                      \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                      \
            printf(__VA_ARGS__);                                                                             \
            printf("\n");                                                                                    \
        }                                                                                                    \
    } while (0)

/* ---- a one-node graph ---- */

typedef struct tnode {
    gr_model *m;
    gr_graph *g;
    int idx;
} tnode;

static tnode mk(const char *op, int64_t opset, int nin, int nout)
{
    tnode t = {NULL, NULL, -1};
    tdm_err e;
    gr_model_new(&e, &t.m);
    t.m->opsets = mem_calloc(1, sizeof *t.m->opsets);
    t.m->opsets[0].domain = mem_strdup("");
    t.m->opsets[0].version = opset;
    t.m->n_opsets = 1;
    gr_graph_new(&e, t.m, NULL, "g", &t.g);
    t.m->main = t.g;
    char in[8][16], out[8][16];
    const char *ip[8], *op_[8];
    for (int i = 0; i < nin; i++) {
        snprintf(in[i], sizeof in[i], "i%d", i);
        ip[i] = in[i];
    }
    for (int i = 0; i < nout; i++) {
        snprintf(out[i], sizeof out[i], "o%d", i);
        op_[i] = out[i];
    }
    gr_node_add(&e, t.g, "n", op, "", nin, ip, nout, op_, &t.idx);
    gr_node *n = &t.g->nodes[t.idx];
    if (op_resolve(&e, "", op, opset, &n->op, &n->version))
        printf("resolve %s: %s\n", op, e.msg);
    n->opset = opset;
    return t;
}

static gr_node *node(tnode *t) { return &t->g->nodes[t->idx]; }

static void a_int(tnode *t, const char *name, int64_t v)
{
    gr_attr *a = gr_attr_add(NULL, t->g, t->idx, name);
    a->type = GA_INT;
    a->i = v;
}

static void a_str(tnode *t, const char *name, const char *s)
{
    gr_attr *a = gr_attr_add(NULL, t->g, t->idx, name);
    a->type = GA_STRING;
    a->s = mem_strdup(s);
    a->s_len = strlen(s);
}

static void a_ints(tnode *t, const char *name, int n, const int64_t *v)
{
    gr_attr *a = gr_attr_add(NULL, t->g, t->idx, name);
    a->type = GA_INTS;
    a->n = (size_t)n;
    a->ints = mem_calloc((size_t)n + 1, sizeof *a->ints);
    memcpy(a->ints, v, sizeof *v * (size_t)n);
}

static void done(tnode *t) { gr_model_free(t->m); }

static tdm_tensor *tf(int rank, const int64_t *dims, const float *v)
{
    tdm_tensor *t;
    tensor_new(NULL, TDM_FLOAT, rank, dims, &t);
    memcpy(t->data, v, t->nbytes);
    return t;
}

static tdm_tensor *ti(int rank, const int64_t *dims, const int64_t *v)
{
    tdm_tensor *t;
    tensor_new(NULL, TDM_INT64, rank, dims, &t);
    memcpy(t->data, v, t->nbytes);
    return t;
}

static tdm_tensor *tarange(int rank, const int64_t *dims)
{
    tdm_tensor *t;
    tensor_new(NULL, TDM_FLOAT, rank, dims, &t);
    for (size_t i = 0; i < t->count; i++)
        ((float *)t->data)[i] = (float)i;
    return t;
}

/* Runs the node; outputs are fresh tensors the caller destroys. */
static tdm_status run(tnode *t, int nin, tdm_tensor **in, int nout, tdm_tensor **out, tdm_err *e)
{
    const gr_node *n = node(t);
    for (int i = 0; i < nout; i++)
        out[i] = mem_calloc(1, sizeof **out);
    op_ctx ctx = {n, n->version, nin, (const tdm_tensor *const *)in, nout, out, e, NULL, 1, NULL, NULL, 0};
    err_clear(e);
    return op_table[n->op].run(&ctx);
}

static void check_f(const char *what, const tdm_tensor *o, int rank, const int64_t *dims, const float *v, double tol)
{
    CHECK(o && shape_equal(o->rank, o->dims, rank, dims), "%s: shape", what);
    if (!o || !shape_equal(o->rank, o->dims, rank, dims))
        return;
    CHECK(o->dtype == TDM_FLOAT, "%s: dtype %s", what, tdm_dtype_name(o->dtype));
    for (size_t i = 0; i < o->count; i++) {
        double g = ((const float *)o->data)[i];
        CHECK(fabs(g - v[i]) <= tol, "%s: [%zu] = %g, expected %g", what, i, g, v[i]);
    }
}

static void check_i(const char *what, const tdm_tensor *o, int rank, const int64_t *dims, const int64_t *v)
{
    CHECK(o && shape_equal(o->rank, o->dims, rank, dims), "%s: shape", what);
    if (!o || !shape_equal(o->rank, o->dims, rank, dims))
        return;
    for (size_t i = 0; i < o->count; i++)
        CHECK(tensor_get_i64(o, i) == v[i], "%s: [%zu] = %lld, expected %lld", what, i,
              (long long)tensor_get_i64(o, i), (long long)v[i]);
}

static void free_all(int n, tdm_tensor **t)
{
    for (int i = 0; i < n; i++) {
        tdm_tensor_destroy(t[i]);
        t[i] = NULL;
    }
}

/* ---- run hooks ---- */

static void test_reshape(void)
{
    tdm_err e;
    tnode t = mk("Reshape", 14, 2, 1);
    int64_t xd[3] = {2, 3, 4}, sd[1] = {2}, sh[2] = {0, -1};
    tdm_tensor *in[2] = {tarange(3, xd), ti(1, sd, sh)}, *out[1];
    CHECK(run(&t, 2, in, 1, out, &e) == TDM_OK, "reshape: %s", e.msg);
    int64_t od[2] = {2, 12};
    CHECK(shape_equal(out[0]->rank, out[0]->dims, 2, od) && ((float *)out[0]->data)[23] == 23, "reshape 0,-1");
    free_all(1, out);
    int64_t bad[2] = {5, -1};
    memcpy(in[1]->data, bad, sizeof bad);
    CHECK(run(&t, 2, in, 1, out, &e) == TDM_E_RUNTIME, "reshape 24 into 5x? must fail");
    free_all(1, out);
    free_all(2, in);
    done(&t);
}

static void test_transpose_slice(void)
{
    tdm_err e;
    tnode t = mk("Transpose", 13, 1, 1);
    int64_t perm[3] = {1, 0, 2}, xd[3] = {2, 3, 2};
    a_ints(&t, "perm", 3, perm);
    tdm_tensor *in[5] = {tarange(3, xd)}, *out[1];
    CHECK(run(&t, 1, in, 1, out, &e) == TDM_OK, "transpose: %s", e.msg);
    int64_t od[3] = {3, 2, 2};
    float ev[12] = {0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11};
    check_f("transpose", out[0], 3, od, ev, 0);
    free_all(1, out);
    free_all(1, in);
    done(&t);

    /* x[-1:-5:-1, 4:0:-2] of arange(20).reshape(4, 5) */
    t = mk("Slice", 13, 5, 1);
    int64_t d2[2] = {4, 5}, two = 2;
    int64_t s[2] = {-1, 4}, en[2] = {-5, 0}, ax[2] = {0, 1}, st[2] = {-1, -2};
    in[0] = tarange(2, d2);
    in[1] = ti(1, &two, s);
    in[2] = ti(1, &two, en);
    in[3] = ti(1, &two, ax);
    in[4] = ti(1, &two, st);
    CHECK(run(&t, 5, in, 1, out, &e) == TDM_OK, "slice: %s", e.msg);
    int64_t sd[2] = {4, 2};
    float sv[8] = {19, 17, 14, 12, 9, 7, 4, 2};
    check_f("slice negative steps", out[0], 2, sd, sv, 0);
    free_all(1, out);
    free_all(5, in);
    done(&t);

    /* opset 1 attribute form with INT64_MAX ends */
    t = mk("Slice", 9, 1, 1);
    int64_t s1[1] = {1}, e1[1] = {INT64_MAX}, a1[1] = {1};
    a_ints(&t, "starts", 1, s1);
    a_ints(&t, "ends", 1, e1);
    a_ints(&t, "axes", 1, a1);
    in[0] = tarange(2, d2);
    CHECK(run(&t, 1, in, 1, out, &e) == TDM_OK, "slice v1: %s", e.msg);
    int64_t s1d[2] = {4, 4};
    CHECK(out[0] && shape_equal(out[0]->rank, out[0]->dims, 2, s1d) && ((float *)out[0]->data)[4] == 6,
          "slice v1 clamps the end");
    free_all(1, out);
    free_all(1, in);
    done(&t);
}

static void test_gather(void)
{
    tdm_err e;
    tnode t = mk("Gather", 13, 2, 1);
    a_int(&t, "axis", 1);
    int64_t xd[2] = {2, 3}, idd[1] = {2}, idx[2] = {-1, 0};
    tdm_tensor *in[2] = {tarange(2, xd), ti(1, idd, idx)}, *out[1];
    CHECK(run(&t, 2, in, 1, out, &e) == TDM_OK, "gather: %s", e.msg);
    int64_t od[2] = {2, 2};
    float ev[4] = {2, 0, 5, 3};
    check_f("gather axis 1", out[0], 2, od, ev, 0);
    free_all(1, out);
    ((int64_t *)in[1]->data)[0] = 3;
    CHECK(run(&t, 2, in, 1, out, &e) == TDM_E_RUNTIME && strstr(e.msg, "out of range"),
          "gather with index 3 of 3 must fail: %s", e.msg);
    free_all(1, out);
    free_all(2, in);
    done(&t);

    /* strings */
    t = mk("Gather", 13, 2, 1);
    tdm_tensor *s;
    int64_t three = 3;
    tensor_new(NULL, TDM_STRING, 1, &three, &s);
    tdm_tensor_set_string(s, 0, "a", 1);
    tdm_tensor_set_string(s, 1, "bc", 2);
    tdm_tensor_set_string(s, 2, "", 0);
    int64_t gi[2] = {1, 1};
    in[0] = s;
    in[1] = ti(1, idd, gi);
    CHECK(run(&t, 2, in, 1, out, &e) == TDM_OK, "gather strings: %s", e.msg);
    CHECK(out[0]->count == 2 && !strcmp(tensor_str(out[0], 0), "bc") && !strcmp(tensor_str(out[0], 1), "bc"),
          "gather strings");
    free_all(1, out);
    free_all(2, in);
    done(&t);
}

static void test_pad(void)
{
    tdm_err e;
    tnode t = mk("Pad", 13, 2, 1);
    a_str(&t, "mode", "reflect");
    int64_t xd[2] = {3, 3}, four = 4, pads[4] = {1, 2, 2, 1};
    tdm_tensor *in[3] = {tarange(2, xd), ti(1, &four, pads)}, *out[1];
    CHECK(run(&t, 2, in, 1, out, &e) == TDM_OK, "pad: %s", e.msg);
    int64_t od[2] = {6, 6};
    float ev[36] = {5, 4, 3, 4, 5, 4, 2, 1, 0, 1, 2, 1, 5, 4, 3, 4, 5, 4,
                    8, 7, 6, 7, 8, 7, 5, 4, 3, 4, 5, 4, 2, 1, 0, 1, 2, 1};
    check_f("pad reflect", out[0], 2, od, ev, 0);
    free_all(1, out);
    free_all(2, in);
    done(&t);

    t = mk("Pad", 2, 1, 1); /* attribute form */
    a_str(&t, "mode", "edge");
    int64_t p2[4] = {1, 0, 0, 2};
    a_ints(&t, "pads", 4, p2);
    in[0] = tarange(2, xd);
    CHECK(run(&t, 1, in, 1, out, &e) == TDM_OK, "pad v2: %s", e.msg);
    int64_t ed[2] = {4, 5};
    float ee[20] = {0, 1, 2, 2, 2, 0, 1, 2, 2, 2, 3, 4, 5, 5, 5, 6, 7, 8, 8, 8};
    check_f("pad edge", out[0], 2, ed, ee, 0);
    free_all(1, out);
    free_all(1, in);
    done(&t);

    t = mk("Pad", 11, 3, 1); /* constant with value, negative pads crop */
    int64_t p3[4] = {-1, 1, 0, 0};
    float cv = 9;
    in[0] = tarange(2, xd);
    in[1] = ti(1, &four, p3);
    in[2] = tf(0, NULL, &cv);
    CHECK(run(&t, 3, in, 1, out, &e) == TDM_OK, "pad constant: %s", e.msg);
    int64_t cd[2] = {2, 4};
    float ce[8] = {9, 3, 4, 5, 9, 6, 7, 8};
    check_f("pad constant crop", out[0], 2, cd, ce, 0);
    free_all(1, out);
    free_all(3, in);
    done(&t);
}

static void test_resize(void)
{
    tdm_err e;
    tnode t = mk("Resize", 13, 3, 1);
    a_str(&t, "mode", "linear");
    int64_t xd[4] = {1, 1, 2, 2}, four = 4;
    float xv[4] = {1, 2, 3, 4}, sc[4] = {1, 1, 2, 2};
    tdm_tensor *in[4] = {tf(4, xd, xv), NULL, tf(1, &four, sc)}, *out[1];
    CHECK(run(&t, 3, in, 1, out, &e) == TDM_OK, "resize: %s", e.msg);
    int64_t od[4] = {1, 1, 4, 4};
    float ev[16] = {1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f, 4};
    check_f("resize linear", out[0], 4, od, ev, 1e-6);
    free_all(1, out);
    free_all(3, in);
    done(&t);

    t = mk("Resize", 13, 3, 1);
    a_str(&t, "mode", "cubic");
    int64_t x2[4] = {1, 1, 4, 4};
    float s2[4] = {1, 1, 0.8f, 0.8f};
    in[0] = tarange(4, x2);
    in[1] = NULL;
    in[2] = tf(1, &four, s2);
    CHECK(run(&t, 3, in, 1, out, &e) == TDM_OK, "resize cubic: %s", e.msg);
    int64_t o2[4] = {1, 1, 3, 3};
    float e2[9] = {0.4711913764476776f, 1.78125f, 3.08251953125f, 5.71142578125f, 7.021484375f,
                   8.32275390625f, 10.91650390625f, 12.2265625f, 13.52783203125f};
    check_f("resize cubic downsample", out[0], 4, o2, e2, 1e-5);
    free_all(1, out);
    free_all(3, in);
    done(&t);
}

static void test_unique(void)
{
    tdm_err e;
    tnode t = mk("Unique", 11, 1, 4);
    a_int(&t, "sorted", 0);
    int64_t six = 6;
    float xv[6] = {2, 1, 1, 3, 4, 3};
    tdm_tensor *in[1] = {tf(1, &six, xv)}, *out[4];
    CHECK(run(&t, 1, in, 4, out, &e) == TDM_OK, "unique: %s", e.msg);
    int64_t four = 4;
    float y[4] = {2, 1, 3, 4};
    int64_t idx[4] = {0, 1, 3, 4}, inv[6] = {0, 1, 1, 2, 3, 2}, cnt[4] = {1, 2, 2, 1};
    check_f("unique Y", out[0], 1, &four, y, 0);
    check_i("unique indices", out[1], 1, &four, idx);
    check_i("unique inverse", out[2], 1, &six, inv);
    check_i("unique counts", out[3], 1, &four, cnt);
    free_all(4, out);
    free_all(1, in);
    done(&t);
}

static void test_misc(void)
{
    tdm_err e;
    tdm_tensor *in[3], *out[3];
    /* Tile */
    tnode t = mk("Tile", 13, 2, 1);
    int64_t xd[2] = {1, 2}, two = 2, rep[2] = {2, 2};
    in[0] = tarange(2, xd);
    in[1] = ti(1, &two, rep);
    CHECK(run(&t, 2, in, 1, out, &e) == TDM_OK, "tile: %s", e.msg);
    int64_t td[2] = {2, 4};
    float tv[8] = {0, 1, 0, 1, 0, 1, 0, 1};
    check_f("tile", out[0], 2, td, tv, 0);
    free_all(1, out);
    free_all(2, in);
    done(&t);

    /* Split opset 11 (attribute) */
    t = mk("Split", 11, 1, 2);
    int64_t sp[2] = {1, 3}, four = 4;
    a_ints(&t, "split", 2, sp);
    in[0] = tarange(1, &four);
    CHECK(run(&t, 1, in, 2, out, &e) == TDM_OK, "split: %s", e.msg);
    int64_t one = 1, three = 3;
    float s0[1] = {0}, s1[3] = {1, 2, 3};
    check_f("split 0", out[0], 1, &one, s0, 0);
    check_f("split 1", out[1], 1, &three, s1, 0);
    free_all(2, out);
    free_all(1, in);
    done(&t);

    /* ScatterND add with duplicate indices */
    t = mk("ScatterND", 16, 3, 1);
    a_str(&t, "reduction", "add");
    int64_t id2[2] = {2, 1}, iv[2] = {1, 1};
    float uv[2] = {10, 20};
    in[0] = tarange(1, &four);
    in[1] = ti(2, id2, iv);
    in[2] = tf(1, &two, uv);
    CHECK(run(&t, 3, in, 1, out, &e) == TDM_OK, "scatternd: %s", e.msg);
    float sv[4] = {0, 31, 2, 3};
    check_f("scatternd add", out[0], 1, &four, sv, 0);
    free_all(1, out);
    free_all(3, in);
    done(&t);

    /* Squeeze opset 11 (attribute), Unsqueeze opset 13 (input) */
    t = mk("Squeeze", 11, 1, 1);
    int64_t ax[1] = {-3}, sd[3] = {1, 2, 1};
    a_ints(&t, "axes", 1, ax);
    in[0] = tarange(3, sd);
    CHECK(run(&t, 1, in, 1, out, &e) == TDM_OK, "squeeze: %s", e.msg);
    CHECK(out[0]->rank == 2 && out[0]->dims[0] == 2 && out[0]->dims[1] == 1, "squeeze axes -3");
    free_all(1, out);
    free_all(1, in);
    done(&t);

    /* DepthToSpace CRD */
    t = mk("DepthToSpace", 13, 1, 1);
    a_int(&t, "blocksize", 2);
    a_str(&t, "mode", "CRD");
    int64_t dd[4] = {1, 4, 1, 1};
    in[0] = tarange(4, dd);
    CHECK(run(&t, 1, in, 1, out, &e) == TDM_OK, "d2s: %s", e.msg);
    int64_t d2[4] = {1, 1, 2, 2};
    float dv[4] = {0, 1, 2, 3};
    check_f("depthtospace crd", out[0], 4, d2, dv, 0);
    free_all(1, out);
    free_all(1, in);
    done(&t);

    /* Constant value_ints; Range */
    t = mk("Constant", 13, 0, 1);
    int64_t vi[3] = {4, 5, 6};
    a_ints(&t, "value_ints", 3, vi);
    CHECK(run(&t, 0, in, 1, out, &e) == TDM_OK, "constant: %s", e.msg);
    check_i("constant value_ints", out[0], 1, &three, vi);
    free_all(1, out);
    done(&t);

    t = mk("Range", 11, 3, 1);
    float r0 = 1, r1 = 2.1f, r2 = 0.5f;
    in[0] = tf(0, NULL, &r0);
    in[1] = tf(0, NULL, &r1);
    in[2] = tf(0, NULL, &r2);
    CHECK(run(&t, 3, in, 1, out, &e) == TDM_OK, "range: %s", e.msg);
    float rv[3] = {1, 1.5f, 2};
    check_f("range", out[0], 1, &three, rv, 0);
    free_all(1, out);
    free_all(3, in);
    done(&t);

    /* Resize nearest through Upsample opset 7 */
    t = mk("Upsample", 8, 1, 1);
    gr_attr *a = gr_attr_add(NULL, t.g, t.idx, "scales");
    a->type = GA_FLOATS;
    a->n = 2;
    a->floats = mem_calloc(2, sizeof(float));
    a->floats[0] = 1;
    a->floats[1] = 3;
    in[0] = tarange(2, xd);
    CHECK(run(&t, 1, in, 1, out, &e) == TDM_OK, "upsample: %s", e.msg);
    int64_t ud[2] = {1, 6};
    float uvv[6] = {0, 0, 0, 1, 1, 1};
    check_f("upsample nearest", out[0], 2, ud, uvv, 0);
    free_all(1, out);
    free_all(1, in);
    done(&t);
}

/* Bad inputs fail with a sentence (or, where ONNX defines a result, give
 * it) and never read out of bounds: run under ASan/UBSan too. */
static void test_errors(void)
{
    tdm_err e;
    tdm_tensor *in[5], *out[2];
    int64_t d2[2] = {2, 3}, one = 1, two = 2;

    tnode t = mk("Slice", 13, 5, 1); /* INT64_MIN step: x[-1::INT64_MIN] along axis 1 */
    int64_t s = -1, en = INT64_MIN, ax = 1, st = INT64_MIN;
    in[0] = tarange(2, d2);
    in[1] = ti(1, &one, &s);
    in[2] = ti(1, &one, &en);
    in[3] = ti(1, &one, &ax);
    in[4] = ti(1, &one, &st);
    CHECK(run(&t, 5, in, 1, out, &e) == TDM_OK, "slice INT64_MIN step: %s", e.msg);
    int64_t od[2] = {2, 1};
    float ov[2] = {2, 5};
    check_f("slice INT64_MIN step", out[0], 2, od, ov, 0);
    free_all(1, out);
    free_all(5, in);
    done(&t);

    t = mk("Trilu", 14, 2, 1); /* k = INT64_MAX keeps nothing of the upper part */
    int64_t k = INT64_MAX;
    in[0] = tarange(2, d2);
    in[1] = ti(0, NULL, &k);
    CHECK(run(&t, 2, in, 1, out, &e) == TDM_OK, "trilu huge k: %s", e.msg);
    float z[6] = {0, 0, 0, 0, 0, 0};
    check_f("trilu huge k", out[0], 2, d2, z, 0);
    free_all(1, out);
    free_all(2, in);
    done(&t);

    t = mk("Reshape", 13, 2, 1);
    int64_t sh[2] = {-1, -1};
    in[0] = tarange(2, d2);
    in[1] = ti(1, &two, sh);
    CHECK(run(&t, 2, in, 1, out, &e) == TDM_E_RUNTIME && strstr(e.msg, "-1"), "reshape two -1: %s", e.msg);
    free_all(1, out);
    free_all(2, in);
    done(&t);

    t = mk("Transpose", 13, 1, 1);
    int64_t perm[2] = {0, 0};
    a_ints(&t, "perm", 2, perm);
    in[0] = tarange(2, d2);
    CHECK(run(&t, 1, in, 1, out, &e) != TDM_OK && strstr(e.msg, "perm"), "transpose bad perm: %s", e.msg);
    free_all(1, out);
    free_all(1, in);
    done(&t);

    t = mk("Unsqueeze", 13, 2, 1);
    int64_t dup[2] = {1, -3}; /* -3 of rank 4 is 1 again */
    in[0] = tarange(2, d2);
    in[1] = ti(1, &two, dup);
    CHECK(run(&t, 2, in, 1, out, &e) == TDM_E_RUNTIME, "unsqueeze duplicate axes: %s", e.msg);
    free_all(1, out);
    free_all(2, in);
    done(&t);

    t = mk("ScatterElements", 16, 3, 1);
    int64_t idx[6] = {0, 1, 2, 3, 0, 1};
    float uv[6] = {1, 1, 1, 1, 1, 1};
    a_int(&t, "axis", 1);
    in[0] = tarange(2, d2);
    in[1] = ti(2, d2, idx);
    in[2] = tf(2, d2, uv);
    CHECK(run(&t, 3, in, 1, out, &e) == TDM_E_RUNTIME && strstr(e.msg, "out of range"),
          "scatter index 3 on an axis of 3: %s", e.msg);
    free_all(1, out);
    free_all(3, in);
    done(&t);

    t = mk("Concat", 13, 2, 1);
    a_int(&t, "axis", 0);
    int64_t d3[2] = {2, 4};
    in[0] = tarange(2, d2);
    in[1] = tarange(2, d3);
    CHECK(run(&t, 2, in, 1, out, &e) == TDM_E_RUNTIME && strstr(e.msg, "dimension 1"), "concat mismatch: %s", e.msg);
    free_all(1, out);
    free_all(2, in);
    done(&t);

    t = mk("Resize", 13, 3, 1);
    float sc[2] = {1, 2};
    in[0] = tarange(2, d2);
    in[1] = NULL;
    in[2] = tf(1, &one, sc);
    CHECK(run(&t, 3, in, 1, out, &e) == TDM_E_RUNTIME && strstr(e.msg, "scales"), "resize short scales: %s", e.msg);
    free_all(1, out);
    free_all(3, in);
    done(&t);

    t = mk("GatherND", 13, 2, 1);
    int64_t gd[2] = {1, 2}, gi[2] = {1, -4};
    in[0] = tarange(2, d2);
    in[1] = ti(2, gd, gi);
    CHECK(run(&t, 2, in, 1, out, &e) == TDM_E_RUNTIME && strstr(e.msg, "out of range"), "gathernd -4: %s", e.msg);
    free_all(1, out);
    free_all(2, in);
    done(&t);
}

/* ---- infer hooks ---- */

static gr_type ty(tdm_dtype dt, int rank, const gr_dim *dims)
{
    gr_type t;
    memset(&t, 0, sizeof t);
    t.kind = TDM_KIND_TENSOR;
    t.dtype = dt;
    t.rank = rank;
    for (int i = 0; i < rank; i++)
        t.dims[i] = dims[i];
    return t;
}

static tdm_status infer(tnode *t, int nin, const gr_type *const *in, const tdm_tensor *const *val, int nout,
                        gr_type *out)
{
    const gr_node *n = node(t);
    tdm_err e;
    for (int i = 0; i < nout; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].rank = -1;
    }
    op_infer_ctx ctx = {n, n->version, nin, in, val, nout, out, t->m, &e};
    return op_table[n->op].infer(&ctx);
}

static void test_infer(void)
{
    const char *N = "N";
    gr_dim xd[3] = {{-1, N}, {3, NULL}, {4, NULL}};
    gr_type x = ty(TDM_FLOAT, 3, xd), o[2];
    gr_dim two = {2, NULL};
    gr_type shp = ty(TDM_INT64, 1, &two);

    /* Reshape [N,3,4] by constant [0,-1] -> [N, 12] */
    tnode t = mk("Reshape", 14, 2, 1);
    int64_t sd = 2, sv[2] = {0, -1};
    tdm_tensor *s = ti(1, &sd, sv);
    const gr_type *in[2] = {&x, &shp};
    const tdm_tensor *val[2] = {NULL, s};
    CHECK(infer(&t, 2, in, val, 1, o) == TDM_OK, "infer reshape");
    CHECK(o[0].rank == 2 && o[0].dims[0].sym == N && o[0].dims[1].v == 12, "reshape [N,3,4] by [0,-1] = [N,12]");
    /* without the value: rank from the shape's length */
    val[1] = NULL;
    infer(&t, 2, in, val, 1, o);
    CHECK(o[0].rank == 2 && o[0].dims[0].v == -1, "reshape by an unknown shape of 2 entries has rank 2");
    done(&t);
    tdm_tensor_destroy(s);

    /* Shape -> Gather(0) -> Unsqueeze -> Concat: the PyTorch chain's types */
    t = mk("Shape", 15, 1, 1);
    in[0] = &x;
    val[0] = NULL;
    infer(&t, 1, in, val, 1, o);
    CHECK(o[0].dtype == TDM_INT64 && o[0].rank == 1 && o[0].dims[0].v == 3, "shape of rank 3 is int64[3]");
    done(&t);

    gr_type shape3 = o[0], scalar = ty(TDM_INT64, 0, NULL);
    t = mk("Gather", 13, 2, 1);
    in[0] = &shape3;
    in[1] = &scalar;
    infer(&t, 2, in, val, 1, o);
    CHECK(o[0].dtype == TDM_INT64 && o[0].rank == 0, "gather of a scalar index is a scalar");
    done(&t);

    t = mk("Unsqueeze", 13, 2, 1);
    int64_t one = 1, zero = 0;
    tdm_tensor *axes = ti(1, &one, &zero);
    gr_dim d1 = {1, NULL};
    gr_type axt = ty(TDM_INT64, 1, &d1);
    in[0] = &scalar;
    in[1] = &axt;
    val[1] = axes;
    infer(&t, 2, in, val, 1, o);
    CHECK(o[0].rank == 1 && o[0].dims[0].v == 1, "unsqueeze scalar at 0 is [1]");
    done(&t);
    tdm_tensor_destroy(axes);

    t = mk("Concat", 13, 2, 1);
    a_int(&t, "axis", 0);
    gr_type v1 = o[0];
    in[0] = &v1;
    in[1] = &v1;
    val[1] = NULL;
    infer(&t, 2, in, val, 1, o);
    CHECK(o[0].rank == 1 && o[0].dims[0].v == 2, "concat of [1] and [1] is [2]");
    done(&t);

    /* Slice with constants: x[:, 1:] on [N,3,4] along axis 1 */
    t = mk("Slice", 13, 4, 1);
    int64_t st = 1, en = INT64_MAX, ax = 1;
    tdm_tensor *ts = ti(1, &one, &st), *te = ti(1, &one, &en), *ta = ti(1, &one, &ax);
    const gr_type *sin[4] = {&x, &axt, &axt, &axt};
    const tdm_tensor *sval[4] = {NULL, ts, te, ta};
    infer(&t, 4, sin, sval, 1, o);
    CHECK(o[0].rank == 3 && o[0].dims[0].sym == N && o[0].dims[1].v == 2 && o[0].dims[2].v == 4,
          "slice [N,3,4][:,1:] = [N,2,4]");
    done(&t);
    tdm_tensor_destroy(ts);
    tdm_tensor_destroy(te);
    tdm_tensor_destroy(ta);

    /* Resize by constant scales */
    t = mk("Resize", 13, 3, 1);
    gr_dim id[4] = {{1, NULL}, {3, NULL}, {5, NULL}, {7, NULL}};
    gr_type img = ty(TDM_FLOAT, 4, id);
    int64_t four = 4;
    float scv[4] = {1, 1, 2, 0.5f};
    tdm_tensor *sc = tf(1, &four, scv);
    const gr_type *rin[3] = {&img, NULL, &img};
    const tdm_tensor *rval[3] = {NULL, NULL, sc};
    infer(&t, 3, rin, rval, 1, o);
    CHECK(o[0].rank == 4 && o[0].dims[2].v == 10 && o[0].dims[3].v == 3, "resize [1,3,5,7] by [1,1,2,.5]");
    done(&t);
    tdm_tensor_destroy(sc);

    /* Split into two equal parts, Flatten */
    t = mk("Split", 13, 1, 2);
    a_int(&t, "axis", 2);
    in[0] = &x;
    infer(&t, 1, in, val, 2, o);
    CHECK(o[0].rank == 3 && o[0].dims[2].v == 2 && o[1].dims[2].v == 2 && o[1].dims[0].sym == N, "split [N,3,4] on 2");
    done(&t);
    t = mk("Flatten", 13, 1, 1);
    infer(&t, 1, in, val, 1, o);
    CHECK(o[0].rank == 2 && o[0].dims[0].sym == N && o[0].dims[1].v == 12, "flatten [N,3,4] = [N,12]");
    done(&t);
}

/* ---- the fast movers against an index-by-index reference, 1 and 2 threads ---- */

static tdm_status run_t(tnode *t, int threads, int nin, tdm_tensor **in, int nout, tdm_tensor **out, tdm_err *e)
{
    const gr_node *n = node(t);
    for (int i = 0; i < nout; i++)
        out[i] = mem_calloc(1, sizeof **out);
    op_ctx ctx = {n, n->version, nin, (const tdm_tensor *const *)in, nout, out, e, NULL, threads, NULL, NULL, 0};
    err_clear(e);
    return op_table[n->op].run(&ctx);
}

/* A tensor of the given type whose element i holds the bytes of i (mod 2^bits). */
static tdm_tensor *tcount(tdm_dtype dt, int rank, const int64_t *dims)
{
    tdm_tensor *t;
    tensor_new(NULL, dt, rank, dims, &t);
    size_t es = tdm_dtype_size(dt);
    for (size_t i = 0; i < t->count; i++) {
        uint64_t v = (uint64_t)i * 2654435761u;
        memcpy((char *)t->data + i * es, &v, es);
    }
    return t;
}

/* out[idx] == x[base + sum idx[d] * st[d]] for every output index. */
static int strided_equal(const tdm_tensor *o, const tdm_tensor *x, int64_t base, const int64_t *st)
{
    size_t es = tdm_dtype_size(x->dtype);
    for (size_t i = 0; i < o->count; i++) {
        size_t q = i;
        int64_t off = base;
        for (int d = o->rank - 1; d >= 0; d--) {
            off += (int64_t)(q % (size_t)o->dims[d]) * st[d];
            q /= (size_t)o->dims[d];
        }
        if (memcmp((const char *)o->data + i * es, (const char *)x->data + (size_t)off * es, es))
            return 0;
    }
    return 1;
}

static void test_movers_threads(void)
{
    tdm_err e;
    const tdm_dtype types[4] = {TDM_FLOAT, TDM_INT64, TDM_UINT8, TDM_FLOAT16};
    /* Transpose: channel shuffle, attention heads, NCHW <-> NHWC, K^T, full reversal */
    const struct {
        int r;
        int64_t d[5];
        int64_t p[5];
    } tr[] = {
        {5, {1, 2, 58, 28, 28}, {0, 2, 1, 3, 4}}, {4, {1, 128, 12, 64}, {0, 2, 1, 3}},
        {4, {1, 12, 128, 64}, {0, 1, 3, 2}},      {4, {2, 24, 40, 37}, {0, 2, 3, 1}},
        {4, {2, 40, 37, 24}, {0, 3, 1, 2}},       {3, {33, 70, 90}, {2, 1, 0}},
        {2, {3, 5}, {1, 0}},                      {4, {1, 1, 300, 1}, {3, 2, 1, 0}},
    };
    for (size_t c = 0; c < sizeof tr / sizeof tr[0]; c++)
        for (int ty = 0; ty < 4; ty++)
            for (int threads = 1; threads <= 2; threads++) {
                tnode t = mk("Transpose", 13, 1, 1);
                a_ints(&t, "perm", tr[c].r, tr[c].p);
                tdm_tensor *in[1] = {tcount(types[ty], tr[c].r, tr[c].d)}, *out[1];
                int64_t xs[5], st[5];
                shape_strides(tr[c].r, tr[c].d, xs);
                for (int d = 0; d < tr[c].r; d++)
                    st[d] = xs[tr[c].p[d]];
                tdm_status rs = run_t(&t, threads, 1, in, 1, out, &e);
                CHECK(rs == TDM_OK && strided_equal(out[0], in[0], 0, st), "transpose case %zu type %d threads %d",
                      c, ty, threads);
                free_all(1, in);
                free_all(1, out);
                done(&t);
            }
    /* Slice: channel halves, steps, negative steps, inner ranges */
    const struct {
        int64_t d[4], starts[4], ends[4], steps[4];
    } sl[] = {
        {{1, 232, 14, 14}, {0, 116, 0, 0}, {1, 232, 14, 14}, {1, 1, 1, 1}},
        {{1, 64, 55, 55}, {0, 0, 1, 2}, {1, 64, 50, 55}, {1, 1, 2, 3}},
        {{2, 30, 20, 33}, {1, 29, 19, 32}, {-3, -31, -21, -34}, {-1, -2, -1, -5}},
        {{1, 128, 768, 1}, {0, 0, 256, 0}, {1, 128, 512, 1}, {1, 1, 1, 1}},
    };
    for (size_t c = 0; c < sizeof sl / sizeof sl[0]; c++)
        for (int ty = 0; ty < 4; ty++)
            for (int threads = 1; threads <= 2; threads++) {
                tnode t = mk("Slice", 13, 5, 1);
                int64_t four = 4, axes[4] = {0, 1, 2, 3};
                tdm_tensor *in[5] = {tcount(types[ty], 4, sl[c].d), ti(1, &four, sl[c].starts),
                                     ti(1, &four, sl[c].ends), ti(1, &four, axes), ti(1, &four, sl[c].steps)};
                tdm_tensor *out[1];
                int64_t xs[4], st[4], base = 0;
                shape_strides(4, sl[c].d, xs);
                for (int d = 0; d < 4; d++) {
                    int64_t s0 = sl[c].starts[d], p = sl[c].steps[d];
                    op_tensor_slice(sl[c].d[d], &s0, sl[c].ends[d], &p);
                    base += s0 * xs[d];
                    st[d] = p * xs[d];
                }
                tdm_status rs = run_t(&t, threads, 5, in, 1, out, &e);
                CHECK(rs == TDM_OK && strided_equal(out[0], in[0], base, st), "slice case %zu type %d threads %d", c,
                      ty, threads);
                free_all(5, in);
                free_all(1, out);
                done(&t);
            }
    /* Resize nearest x2 (asymmetric, floor), the upsampling of a detector's FPN */
    for (int threads = 1; threads <= 2; threads++) {
        tnode t = mk("Resize", 13, 3, 1);
        a_str(&t, "mode", "nearest");
        a_str(&t, "coordinate_transformation_mode", "asymmetric");
        a_str(&t, "nearest_mode", "floor");
        int64_t xd[4] = {1, 24, 40, 52}, four = 4;
        float sc[4] = {1, 1, 2, 2};
        tdm_tensor *in[3] = {tcount(TDM_FLOAT, 4, xd), NULL, tf(1, &four, sc)}, *out[1];
        tdm_status rs = run_t(&t, threads, 3, in, 1, out, &e);
        int ok = rs == TDM_OK && out[0]->count == in[0]->count * 4;
        const uint32_t *xv = in[0]->data, *yv = ok ? out[0]->data : NULL;
        for (int64_t c = 0; ok && c < 24; c++)
            for (int64_t h = 0; h < 80; h++)
                for (int64_t w = 0; w < 104; w++)
                    ok &= yv[(c * 80 + h) * 104 + w] == xv[(c * 40 + h / 2) * 52 + w / 2];
        CHECK(ok, "resize nearest x2 threads %d", threads);
        free_all(3, in);
        free_all(1, out);
        done(&t);
    }
    /* Split and Concat round trip along each axis */
    for (int axis = 0; axis < 3; axis++)
        for (int threads = 1; threads <= 2; threads++) {
            int64_t d[3] = {6, 90, 300}, parts[3] = {1, 2, 3};
            for (int k = 0; k < 3; k++)
                parts[k] = d[axis] / 6 * (k + 1);
            tnode t = mk("Split", 13, 2, 3);
            a_int(&t, "axis", axis);
            int64_t three = 3;
            tdm_tensor *in[2] = {tcount(TDM_FLOAT, 3, d), ti(1, &three, parts)}, *out[3];
            tdm_status rs = run_t(&t, threads, 2, in, 3, out, &e);
            CHECK(rs == TDM_OK, "split axis %d: %s", axis, e.msg);
            int64_t xs[3], base = 0;
            shape_strides(3, d, xs);
            for (int k = 0; k < 3 && rs == TDM_OK; k++) {
                CHECK(out[k]->dims[axis] == parts[k] && strided_equal(out[k], in[0], base, xs),
                      "split axis %d threads %d part %d", axis, threads, k);
                base += parts[k] * xs[axis];
            }
            done(&t);
            tnode c = mk("Concat", 13, 3, 1);
            a_int(&c, "axis", axis);
            tdm_tensor *cat[1];
            rs = run_t(&c, threads, 3, out, 1, cat, &e);
            CHECK(rs == TDM_OK && cat[0]->count == in[0]->count &&
                      !memcmp(cat[0]->data, in[0]->data, in[0]->nbytes),
                  "concat axis %d threads %d", axis, threads);
            free_all(1, cat);
            free_all(3, out);
            free_all(2, in);
            done(&c);
        }
}

int main(void)
{
    test_movers_threads();
    test_reshape();
    test_transpose_slice();
    test_gather();
    test_pad();
    test_resize();
    test_unique();
    test_misc();
    test_errors();
    test_infer();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
