/* Zero-copy data movement in the executor (run/exec.c): Reshape, Flatten,
 * Squeeze and Unsqueeze give their output the input's block (a move, when
 * the input dies at the node) or a borrowed view of it (when the input
 * lives on, or is a graph input or initializer) instead of copying. On
 * small graphs built by hand: sessions compute what a run under an
 * observer (which runs every node the normal way) computes, bit for bit;
 * the executor's counters show the copies avoided; a graph output whose
 * data are an input's is a copy; a view's source is not freed, donated or
 * reused while the view lives.
 *
 * usage: test_perf_alias CASE */
#include "core/arena.h"
#include "core/mem.h"
#include "graph/graph.h"
#include "graph/model.h"
#include "ops/op.h"
#include "run/exec.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_graph.h"



/* An int64 initializer. */
static void init_i64(gr_graph *g, const char *name, int64_t n, const int64_t *vals)
{
    int id;
    tdm_tensor *t;
    MUST(tensor_new(&err, TDM_INT64, 1, &n, &t));
    memcpy(t->data, vals, sizeof *vals * (size_t)n);
    MUST(gr_value_get(&err, g, name, &id));
    g->values[id].init = t;
    g->values[id].is_initializer = 1;
    g->values[id].has_type = 1;
    gr_type_from_tensor(&g->values[id].type, t);
}

static void check_same(const char *what, const tdm_tensor *got, const tdm_tensor *ref)
{
    CHECK(tdm_tensor_rank(got) == tdm_tensor_rank(ref));
    for (int d = 0; d < tdm_tensor_rank(ref) && d < tdm_tensor_rank(got); d++)
        CHECK(got->dims[d] == ref->dims[d]);
    CHECK(tdm_tensor_count(got) == tdm_tensor_count(ref));
    const float *a = tdm_tensor_cdata(got), *b = tdm_tensor_cdata(ref);
    long worst = 0;
    for (size_t i = 0; i < tdm_tensor_count(ref) && i < tdm_tensor_count(got); i++) {
        long u = ulps(a[i], b[i]);
        if (u > worst)
            worst = u;
    }
    fprintf(stderr, "%s: max %ld ulps\n", what, worst);
    CHECK(worst == 0);
}

/* Builds gm; compares sessions (fusion off and on, 1 and 2 threads)
 * against a run under an observer (no moves or views); then runs the
 * main graph twice with its own cache and checks the counters: want_moves,
 * want_views and want_concats (done in place) per run. Returns the model (for more checks); ins and
 * the cached run's outputs in outs. */
static tdm_model *check_model(const char *what, gr_model *gm, size_t want_moves, size_t want_views,
                              size_t want_concats, tdm_tensor **ins, tdm_tensor **outs)
{
    tdm_model *m;
    MUST(model_build(&err, gm, what, &m));
    size_t n_out = tdm_model_output_count(m);
    tdm_tensor *ref[4] = {NULL}, *got[4] = {NULL};
    make_inputs(m, ins, 3);
    obs_count oc;
    memset(&oc, 0, sizeof oc);
    run(m, TDM_FUSION_OFF, &oc, 1, (const tdm_tensor *const *)ins, ref);
    CHECK(oc.nodes == m->gm->main->n_nodes);
    static const int modes[3] = {TDM_FUSION_OFF, TDM_FUSION_ON, TDM_FUSION_ON};
    static const int nthreads[3] = {1, 1, 2};
    for (int v = 0; v < 3; v++) {
        run(m, modes[v], NULL, nthreads[v], (const tdm_tensor *const *)ins, got);
        for (size_t k = 0; k < n_out; k++) {
            char label[128];
            snprintf(label, sizeof label, "%s: fusion %d, %d thread(s), output %zu", what, modes[v], nthreads[v], k);
            check_same(label, got[k], ref[k]);
            tdm_tensor_destroy(got[k]);
            got[k] = NULL;
        }
    }
    /* the executor's counters, on its own cache */
    exec_cache c;
    MUST(exec_cache_init(&err, m->gm->main, &c));
    uint64_t rng = 1;
    for (int r = 0; r < 2; r++) {
        for (size_t k = 0; r && k < n_out; k++)
            tdm_tensor_destroy(outs[k]);
        MUST(exec_graph_cached(&err, m->gm->main, (const tdm_tensor *const *)ins, outs, 1, &rng, NULL, &c));
        for (size_t k = 0; k < n_out; k++) {
            char label[128];
            snprintf(label, sizeof label, "%s: cached run %d, output %zu", what, r, k);
            check_same(label, outs[k], ref[k]);
            CHECK(!outs[k]->borrowed); /* outputs own their data */
        }
    }
    size_t moves = atomic_load(&c.alias_moves), views = atomic_load(&c.alias_views);
    size_t cats = atomic_load(&c.concat_in_place);
    fprintf(stderr, "%s: %d nodes, %zu moves, %zu views, %zu concats in place in 2 runs\n", what,
            m->gm->main->n_nodes, moves, views, cats);
    CHECK(cats == 2 * want_concats);
    CHECK(moves == 2 * want_moves);
    CHECK(views == 2 * want_views);
    exec_cache_free(&c);
    for (size_t k = 0; k < n_out; k++)
        tdm_tensor_destroy(ref[k]);
    return m;
}

/* ---- cases ---- */

/* Relu -> Reshape -> Unsqueeze -> Squeeze -> Flatten (a graph output):
 * every step moves the Relu's block; the last (the output) too. The
 * output's data is the block of the Relu, which an in-place Neg took. */
static void t_move(void)
{
    gr_model *m = model_new(13);
    gr_graph *g = m->main;
    int64_t xd[3] = {2, 3, 40};
    int64_t shape[3] = {6, -1, 0}, ax0[1] = {0}, ax2[1] = {-1};
    input(g, "x", 3, xd);
    init_i64(g, "shape", 3, shape); /* 0 with fewer dims: keeps x's dim 2 */
    init_i64(g, "ax0", 1, ax0);
    init_i64(g, "ax2", 1, ax2);
    node(g, "relu", "Relu", "x", "a");
    node(g, "reshape", "Reshape", "a,shape", "b"); /* [6,1,40]... */
    node(g, "unsq", "Unsqueeze", "b,ax0", "c");
    node(g, "sq", "Squeeze", "c,ax0", "d");
    node(g, "neg", "Neg", "d", "e");               /* in place: takes d's block */
    node(g, "sq2", "Unsqueeze", "e,ax2", "f");
    node(g, "flat", "Flatten", "f", "y");
    output(g, "y");
    tdm_tensor *ins[4] = {NULL}, *outs[4] = {NULL};
    tdm_model *tm = check_model("move", m, 5, 0, 0, ins, outs);
    CHECK(outs[0]->rank == 2 && outs[0]->dims[0] == 6 && outs[0]->dims[1] == 40);
    tdm_tensor_destroy(outs[0]);
    tdm_tensor_destroy(ins[0]);
    tdm_model_destroy(tm);
}

/* Views: of a graph input, of an intermediate that is
 * used after the view is made (and donated in place at its last direct
 * use if the view did not keep it), a view of a view that outlives its
 * source's direct uses; a graph output that is a reshaped input is a
 * copy. Opset 11: Squeeze/Unsqueeze axes as attributes. */
static void t_view(void)
{
    gr_model *m = model_new(11);
    gr_graph *g = m->main;
    int64_t xd[2] = {4, 30}, wd[2] = {1, 120};
    int64_t shape[2] = {12, 10}, shape2[1] = {-1};
    input(g, "x", 2, xd);
    init(g, "w", 2, wd, NULL);
    init_i64(g, "shape", 2, shape);
    init_i64(g, "shape2", 1, shape2);
    scalar(g, "two", 2.0f);
    node(g, "rx", "Reshape", "x,shape2", "xv");   /* view of the input */
    node(g, "rw", "Reshape", "w,shape2", "wv");   /* of an initializer: folded */
    node(g, "mix", "Add", "xv,wv", "a");          /* [120] */
    node(g, "ra", "Reshape", "a,shape", "b");     /* view of a: a lives on */
    int n = node(g, "ub", "Unsqueeze", "b", "c"); /* view of the view */
    int64_t ax[1] = {0};
    attr_ints(g, n, "axes", 1, ax);
    node(g, "mul", "Mul", "a,two", "z");          /* a's last direct use: no donation to z */
    node(g, "neg", "Neg", "z", "z2");             /* z dies: donated, another block */
    node(g, "relu", "Relu", "z2", "z3");
    n = node(g, "sc", "Squeeze", "c", "d");       /* c's source a outlives */
    attr_ints(g, n, "axes", 1, ax);
    node(g, "fd", "Flatten", "d", "e");           /* [12,10]: view */
    node(g, "r3", "Reshape", "z3,shape", "z4");   /* z3 dies here: a move */
    node(g, "out", "Add", "e,z4", "y");
    node(g, "cpy", "Reshape", "x,shape", "y2");   /* an output: copied */
    output(g, "y");
    output(g, "y2");
    tdm_tensor *ins[4] = {NULL}, *outs[4] = {NULL};
    /* views: rx, ra, ub, sc, fd (rw is folded when the model is built);
     * moves: r3 */
    tdm_model *tm = check_model("view", m, 1, 5, 0, ins, outs);
    CHECK(outs[1]->data != ins[0]->data);
    CHECK(!memcmp(outs[1]->data, ins[0]->data, ins[0]->nbytes));
    tdm_tensor_destroy(outs[0]);
    tdm_tensor_destroy(outs[1]);
    tdm_tensor_destroy(ins[0]);
    tdm_model_destroy(tm);
}

static void attr_int(gr_graph *g, int n, const char *name, int64_t v)
{
    gr_attr *a = gr_attr_add(&err, g, n, name);
    a->type = GA_INT;
    a->i = v;
}

/* Concat into place: along the channels of [1,C,H,W] (a Conv with its
 * fused Relu, a plain Conv, an elementwise op, a Reshape that copies into
 * its slab) and along axis 0; not when an input is a graph input, is used
 * elsewhere, or the slabs are not contiguous (axis 2 of [1,C,H,W]). */
static void t_concat(void)
{
    gr_model *m = model_new(13);
    gr_graph *g = m->main;
    int64_t xd[4] = {1, 3, 9, 7}, ud[2] = {2, 63}, wd[2] = {3, 63}, rs[4] = {1, 2, 9, 7};
    input(g, "x", 4, xd);
    input(g, "u", 2, ud);
    input(g, "w", 2, wd);
    init_i64(g, "rs", 4, rs);
    conv(g, "c1", "x", "c1o", 3, 4);
    node(g, "relu1", "Relu", "c1o", "a");
    conv(g, "c2", "x", "b", 3, 5);
    node(g, "neg", "Neg", "x", "c");
    node(g, "ru", "Reshape", "u,rs", "d"); /* u: [2,63] -> [1,2,9,7] */
    int n = node(g, "cat1", "Concat", "a,b,c,d", "y1");
    attr_int(g, n, "axis", 1);
    node(g, "sig", "Sigmoid", "y1", "y");        /* [1,14,9,7] */
    node(g, "r0", "Relu", "u", "p");
    node(g, "s0", "Tanh", "w", "q");
    n = node(g, "cat0", "Concat", "p,q", "z1");  /* [5,63] */
    attr_int(g, n, "axis", 0);
    node(g, "n0", "Neg", "z1", "z");
    /* not in place: a graph input; a value used twice; axis 2 */
    node(g, "e1", "Exp", "x", "f");
    n = node(g, "cat2", "Concat", "f,x", "v1");
    attr_int(g, n, "axis", 1);
    node(g, "e2", "Abs", "x", "h");
    n = node(g, "cat3", "Concat", "h,h", "v2");
    attr_int(g, n, "axis", 1);
    node(g, "e3", "Abs", "x", "k");
    node(g, "e4", "Neg", "x", "l");
    n = node(g, "cat4", "Concat", "k,l", "v3");
    attr_int(g, n, "axis", 2);
    node(g, "m1", "Add", "v1,v2", "v4");
    node(g, "m2", "Relu", "v3", "v5");
    output(g, "y");
    output(g, "z");
    output(g, "v4");
    output(g, "v5");
    tdm_tensor *ins[4] = {NULL}, *outs[4] = {NULL};
    tdm_model *tm = check_model("concat", m, 0, 0, 2, ins, outs);
    for (int k = 0; k < 4; k++)
        tdm_tensor_destroy(outs[k]);
    for (int k = 0; k < 3; k++)
        tdm_tensor_destroy(ins[k]);
    tdm_model_destroy(tm);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_perf_alias CASE\n");
        return 2;
    }
    const char *c = argv[1];
    if (!strcmp(c, "move"))
        t_move();
    else if (!strcmp(c, "view"))
        t_view();
    else if (!strcmp(c, "concat"))
        t_concat();
    else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
