/* Shared by the perf tests that build small graphs by hand and run them
 * through sessions (test_perf_fuse.c, test_perf_alias.c): CHECK/MUST, graph
 * builders (inputs, outputs, initializers, nodes, attributes), a node
 * counting observer, a two-run session helper and a float ulp distance. */
#ifndef TDM_TESTS_PERF_GRAPH_H
#define TDM_TESTS_PERF_GRAPH_H

#include "core/mem.h"
#include "graph/graph.h"
#include "graph/model.h"
#include "ops/op.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static tdm_err err;

#define CHECK(c)                                                                                         \
    do {                                                                                                 \
        if (!(c)) {                                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);                        \
            failures++;                                                                                  \
        }                                                                                                \
    } while (0)

#define MUST(x)                                                                                          \
    do {                                                                                                 \
        tdm_status st_ = (x);                                                                            \
        if (st_) {                                                                                       \
            fprintf(stderr, "%s:%d: %s failed: %s %s\n", __FILE__, __LINE__, #x, tdm_status_str(st_),    \
                    err.msg);                                                                            \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

/* ---- building graphs ---- */

static inline double rnd(void)
{
    static uint64_t seed = 12345;
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(seed >> 11) / 9007199254740992.0 * 2 - 1;
}

static inline gr_model *model_new(int64_t opset)
{
    gr_model *m;
    MUST(gr_model_new(&err, &m));
    m->opsets = mem_calloc(2, sizeof *m->opsets);
    m->opsets[0].domain = mem_strdup("");
    m->opsets[0].version = opset;
    m->n_opsets = 1;
    MUST(gr_graph_new(&err, m, NULL, "main", &m->main));
    return m;
}

static inline void set_type(gr_graph *g, int id, int rank, const int64_t *dims)
{
    gr_type *t = &g->values[id].type;
    gr_type_unknown(t);
    t->dtype = TDM_FLOAT;
    t->rank = rank;
    for (int k = 0; k < rank; k++)
        t->dims[k] = (gr_dim){dims[k], NULL};
    g->values[id].has_type = 1;
}

static inline void input(gr_graph *g, const char *name, int rank, const int64_t *dims)
{
    int id;
    MUST(gr_value_get(&err, g, name, &id));
    g->values[id].is_input = 1;
    set_type(g, id, rank, dims);
    g->inputs = mem_realloc(g->inputs, sizeof *g->inputs * (size_t)(g->n_inputs + 1));
    g->inputs[g->n_inputs++] = id;
}

static inline void output(gr_graph *g, const char *name)
{
    int id;
    MUST(gr_value_get(&err, g, name, &id));
    g->values[id].is_output = 1;
    g->outputs = mem_realloc(g->outputs, sizeof *g->outputs * (size_t)(g->n_outputs + 1));
    g->outputs[g->n_outputs++] = id;
}

/* A float initializer; vals NULL: random in [-1, 1]. */
static inline void init(gr_graph *g, const char *name, int rank, const int64_t *dims, const float *vals)
{
    int id;
    tdm_tensor *t;
    MUST(tensor_new(&err, TDM_FLOAT, rank, dims, &t));
    for (size_t i = 0; i < t->count; i++)
        ((float *)t->data)[i] = vals ? vals[i] : (float)rnd();
    MUST(gr_value_get(&err, g, name, &id));
    g->values[id].init = t;
    g->values[id].is_initializer = 1;
    g->values[id].has_type = 1;
    gr_type_from_tensor(&g->values[id].type, t);
}

static inline void scalar(gr_graph *g, const char *name, float v) { init(g, name, 0, NULL, &v); }

/* node(g, "name", "Op", "in1,in2", "out"); an empty field: omitted. */
static inline int node(gr_graph *g, const char *name, const char *op, const char *ins, const char *outs)
{
    const char *in[16], *out[16];
    char ib[256], ob[256];
    int ni = 0, no = 0, idx;
    snprintf(ib, sizeof ib, "%s", ins);
    snprintf(ob, sizeof ob, "%s", outs);
    for (char *p = ib; *ins;) {
        in[ni++] = p;
        char *c = strchr(p, ',');
        if (!c)
            break;
        *c = '\0';
        p = c + 1;
    }
    for (char *p = ob; *outs;) {
        out[no++] = p;
        char *c = strchr(p, ',');
        if (!c)
            break;
        *c = '\0';
        p = c + 1;
    }
    MUST(gr_node_add(&err, g, name, op, "", ni, in, no, out, &idx));
    return idx;
}

static inline void attr_ints(gr_graph *g, int n, const char *name, int count, const int64_t *v)
{
    gr_attr *a = gr_attr_add(&err, g, n, name);
    a->type = GA_INTS;
    a->n = (size_t)count;
    a->ints = mem_calloc((size_t)count, sizeof *a->ints);
    memcpy(a->ints, v, (size_t)count * sizeof *v);
}

/* ---- running ---- */

typedef struct obs_count {
    int nodes;     /* node events */
    int no_output; /* node events without an output value */
} obs_count;

static inline void observe(void *user, const tdm_event *ev)
{
    obs_count *c = user;
    if (ev->kind != TDM_EVENT_NODE)
        return;
    c->nodes++;
    if (ev->n_outputs < 1 || !ev->outputs || !ev->outputs[0])
        c->no_output++;
}

/* Runs model m's session (fusion mode, observer when oc) on ins;
 * outs receives the outputs. Runs twice (the arena's second run reuses). */
static inline void run(tdm_model *m, int mode, obs_count *oc, int threads, const tdm_tensor *const *ins, tdm_tensor **outs)
{
    tdm_ctx *ctx;
    tdm_session_options *so;
    tdm_session *s;
    MUST(tdm_ctx_create(&ctx));
    MUST(tdm_session_options_create(&so));
    MUST(tdm_session_options_set_fusion(so, mode));
    MUST(tdm_session_options_set_threads(so, threads));
    MUST(tdm_session_create(ctx, m, so, &s));
    if (oc)
        MUST(tdm_session_set_observer(s, observe, oc));
    size_t n_out = tdm_model_output_count(m);
    for (int r = 0; r < 2; r++) {
        if (r) {
            for (size_t k = 0; k < n_out; k++)
                tdm_tensor_destroy(outs[k]);
            if (oc)
                memset(oc, 0, sizeof *oc);
        }
        tdm_status st = tdm_session_run(s, ins, outs);
        if (st) {
            fprintf(stderr, "run failed: %s\n", tdm_ctx_error(ctx));
            exit(1);
        }
    }
    tdm_session_destroy(s);
    tdm_session_options_destroy(so);
    tdm_ctx_destroy(ctx);
}

/* Distance in float ulps. */
static inline long ulps(float a, float b)
{
    if (a == b)
        return 0;
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b) ? 0 : 1L << 30;
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    if (ia < 0)
        ia = INT32_MIN - ia;
    if (ib < 0)
        ib = INT32_MIN - ib;
    long d = (long)ia - (long)ib;
    return d < 0 ? -d : d;
}

/* Fixed-seed random inputs (uniform, scale x rnd()) for every input of m. */
static inline void make_inputs(tdm_model *m, tdm_tensor **ins, double scale)
{
    for (size_t k = 0; k < tdm_model_input_count(m); k++) {
        tdm_value_info vi;
        int64_t dims[TDM_MAX_RANK];
        MUST(tdm_model_input(m, k, &vi));
        for (int d = 0; d < vi.rank; d++)
            dims[d] = vi.dims[d].value;
        MUST(tdm_tensor_create(TDM_FLOAT, vi.rank, dims, &ins[k]));
        float *x = tdm_tensor_data(ins[k]);
        for (size_t i = 0; i < tdm_tensor_count(ins[k]); i++)
            x[i] = (float)(scale * rnd());
    }
}

/* A 3x3 pad-1 Conv of x ([1,ci,h,w]) into out with ci -> co channels. */
static inline void conv(gr_graph *g, const char *name, const char *x, const char *out, int64_t ci, int64_t co)
{
    char w[64], b[64], ins[200];
    int64_t wd[4] = {co, ci, 3, 3}, bd[1] = {co};
    snprintf(w, sizeof w, "%s_w", name);
    snprintf(b, sizeof b, "%s_b", name);
    init(g, w, 4, wd, NULL);
    init(g, b, 1, bd, NULL);
    snprintf(ins, sizeof ins, "%s,%s,%s", x, w, b);
    int n = node(g, name, "Conv", ins, out);
    int64_t pads[4] = {1, 1, 1, 1}, ks[2] = {3, 3};
    attr_ints(g, n, "pads", 4, pads);
    attr_ints(g, n, "kernel_shape", 2, ks);
}

/* The data of initializer name of m, or NULL. */
static inline const float *init_data(tdm_model *m, const char *name)
{
    gr_graph *g = m->gm->main;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].init && g->values[v].name && !strcmp(g->values[v].name, name))
            return g->values[v].init->data;
    return NULL;
}

/* The Conv kernel itself on x with ctx->fast = fast (no fusion). */
static inline tdm_tensor *run_kernel(tdm_model *m, const tdm_tensor *x, int fast, int threads)
{
    gr_graph *g = m->gm->main;
    int ni = -1;
    for (int k = 0; k < g->n_nodes; k++)
        if (!strcmp(g->nodes[k].op_type, "Conv"))
            ni = k;
    CHECK(ni >= 0);
    gr_node *nd = &g->nodes[ni];
    int op, ver;
    MUST(op_resolve(&err, "", "Conv", 13, &op, &ver));
    const tdm_tensor *in[3] = {x, NULL, NULL};
    for (int k = 1; k < nd->n_inputs; k++)
        in[k] = g->values[nd->inputs[k]].init;
    tdm_tensor *out = mem_calloc(1, sizeof *out);
    tdm_tensor *outs[1] = {out};
    op_ctx ctx = {nd, ver, nd->n_inputs, in, 1, outs, &err, NULL, threads, NULL, NULL, fast};
    MUST(op_table[op].run(&ctx));
    return out;
}

#endif
