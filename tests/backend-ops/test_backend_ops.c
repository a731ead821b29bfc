/* backend-ops: every non-cpu device against the CPU kernels, op by op.
 *
 * Each case is one node (op × dtype × shape × attributes). Its inputs are
 * random (fixed seed per case; some cases sprinkle NaN and ±Inf); the node
 * runs on the CPU through op_table[op].run, and on each device through the
 * public iface: buffer_alloc + copy_to_device of every input, supports(),
 * run(), copy_to_host of every output. A case passes when
 *   - the device accepts the node (supports() == OK),
 *   - every output has the CPU's element type and shape,
 *   - float outputs: NaN exactly where the CPU has NaN, ±Inf where the CPU
 *     has the same-signed Inf, and over the other elements the normalised
 *     mean squared error sum((d - c)^2) / sum(c^2) is at most 1e-6 (float32)
 *     or 1e-5 (float16: both sides round to half);
 *   - other outputs are bit-identical;
 *   - the input buffers still hold what was copied in, and the guard bytes
 *     after every device buffer (inputs and outputs; the device fills them
 *     with 0xFF at allocation) are untouched.
 * Then refusal cases check supports() answers with the right reason code
 * and a sentence, and fault cases check that device failures come back as
 * TDM_E_DEVICE with a sentence (no crash).
 *
 * Usage: test_backend_ops [-o OP[,OP…]] [-b DEVICE] [-v]
 * Prints one line per failing case (every case with -v) and
 * "N passed, N failed". Exit 0 when nothing failed, 77 (skip) when there is
 * no non-cpu device, 1 otherwise. */
#include "core/mem.h"
#include "core/tensor.h"
#include "devices/opencl/opencl.h"
#include "graph/graph.h"
#include "ops/op.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64
#define MAX_IN 6
#define MAX_OUT 4
#define MAX_ATTR 8

/* ------------------------------------------------------------ devices */

typedef struct tdev {
    char name[64];
    tdm_device dev;
    int is_ocl;
} tdev;

static tdev devs[8];
static int n_devs;

/* ------------------------------------------------------------- options */

static const char *opt_ops;    /* -o */
static const char *opt_dev;    /* -b */
static int verbose;
static int passed, failed;

static int op_selected(const char *op)
{
    if (!opt_ops)
        return 1;
    size_t n = strlen(op);
    for (const char *p = opt_ops; *p;) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (len == n && !strncmp(p, op, n))
            return 1;
        p += len + (q ? 1 : 0);
    }
    return 0;
}

/* ---------------------------------------------------------- case setup */

enum { IN_RAND, IN_POS, IN_SPECIAL, IN_INTS, IN_FLOATS, IN_NONE, IN_INDEX };

typedef struct tin {
    int kind;
    tdm_dtype dt;
    int rank;
    int64_t dims[TDM_MAX_RANK];
    int64_t ivals[16];
    float fvals[16];
    int nvals;
    int constant;           /* value given to the device in the description */
    int64_t index_max;      /* IN_INDEX: values in [-index_max, index_max) */
} tin;

typedef struct tattr {
    char name[32];
    tdm_attr_type type;
    int64_t i;
    float f;
    char s[32];
    int n;
    int64_t ints[16];
} tattr;

typedef struct tcase {
    char op[32];
    int opset;
    char label[160];
    int n_in;
    tin in[MAX_IN];
    int n_out;
    int n_attr;
    tattr attr[MAX_ATTR];
    int dynamic;            /* describe outputs with unknown dims */
} tcase;

static tcase C;
static unsigned long long rng_state;
static const char *label_suffix = ""; /* appended to every case label */

static void begin(const char *op, int opset, const char *fmt, ...)
{
    memset(&C, 0, sizeof C);
    snprintf(C.op, sizeof C.op, "%s", op);
    C.opset = opset;
    C.n_out = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(C.label, sizeof C.label, fmt, ap);
    va_end(ap);
    size_t n = strlen(C.label);
    snprintf(C.label + n, sizeof C.label - n, "%s", label_suffix);
}

static tin *add_in(int kind, tdm_dtype dt, int rank, const int64_t *dims)
{
    tin *t = &C.in[C.n_in++];
    t->kind = kind;
    t->dt = dt;
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->dims[i] = dims[i];
    return t;
}

#define D(...) (const int64_t[]){__VA_ARGS__}
#define NDIMS(...) ((int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define IN(kind, dt, ...) add_in(kind, dt, NDIMS(__VA_ARGS__), D(__VA_ARGS__))
#define IN0(kind, dt) add_in(kind, dt, 0, NULL)

static void in_ints(int n, const int64_t *v)
{
    int64_t d = n;
    tin *t = add_in(IN_INTS, TDM_INT64, 1, &d);
    t->nvals = n;
    memcpy(t->ivals, v, sizeof *v * (size_t)n);
    t->constant = 1;
}
#define INTS(...) in_ints(NDIMS(__VA_ARGS__), D(__VA_ARGS__))

static void in_floats(tdm_dtype dt, int n, const float *v)
{
    int64_t d = n;
    tin *t = add_in(IN_FLOATS, dt, 1, &d);
    t->nvals = n;
    if (n > 0)
        memcpy(t->fvals, v, sizeof *v * (size_t)n);
    t->constant = 1;
}

static void in_none(void) { add_in(IN_NONE, TDM_UNDEFINED, 0, NULL); }

static tattr *add_attr(const char *name, tdm_attr_type type)
{
    tattr *a = &C.attr[C.n_attr++];
    snprintf(a->name, sizeof a->name, "%s", name);
    a->type = type;
    return a;
}

static void a_int(const char *name, int64_t v) { add_attr(name, TDM_ATTR_INT)->i = v; }
static void a_float(const char *name, float v) { add_attr(name, TDM_ATTR_FLOAT)->f = v; }
static void a_str(const char *name, const char *v) { snprintf(add_attr(name, TDM_ATTR_STRING)->s, 32, "%s", v); }
static void a_ints(const char *name, int n, const int64_t *v)
{
    tattr *a = add_attr(name, TDM_ATTR_INTS);
    a->n = n;
    memcpy(a->ints, v, sizeof *v * (size_t)n);
}
#define AINTS(name, ...) a_ints(name, NDIMS(__VA_ARGS__), D(__VA_ARGS__))

/* ----------------------------------------------------------- the values */

static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static unsigned long long hash_str(const char *s)
{
    unsigned long long h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h | 1;
}

static tdm_err E;

static tdm_tensor *make_input(const tin *t)
{
    tdm_tensor *x;
    if (tensor_new(&E, t->dt, t->rank, t->dims, &x)) {
        printf("FAIL setup: tensor_new: %s\n", E.msg);
        exit(1);
    }
    for (size_t i = 0; i < x->count; i++) {
        double v;
        if (t->kind == IN_INTS) {
            tensor_set_i64(x, i, t->ivals[i]);
            continue;
        }
        switch (t->kind) {
        case IN_POS: v = 0.1 + 1.9 * urand(); break;
        case IN_FLOATS: v = t->fvals[i]; break;
        case IN_INDEX: v = floor(urand() * 2.0 * (double)t->index_max) - (double)t->index_max; break;
        case IN_SPECIAL: {
            double u = urand();
            v = u < 0.04 ? NAN : u < 0.08 ? INFINITY : u < 0.12 ? -INFINITY : 8.0 * urand() - 4.0;
            break;
        }
        default: v = 2.0 * urand() - 1.0; break;
        }
        if (t->kind == IN_INDEX)
            tensor_set_i64(x, i, (int64_t)v);
        else
            tensor_set_f64(x, i, v);
    }
    return x;
}

/* ----------------------------------------------------------- CPU side */

static tdm_status cpu_run(gr_graph *g, int node, int n_in, tdm_tensor **in, int n_out, tdm_tensor **out)
{
    gr_node *nd = &g->nodes[node];
    int op, ver;
    if (op_resolve(&E, "", nd->op_type, C.opset, &op, &ver))
        return E.status;
    nd->op = op;
    nd->version = ver;
    nd->opset = C.opset;
    for (int i = 0; i < n_out; i++)
        out[i] = mem_calloc(1, sizeof **out);
    op_ctx ctx = {nd, ver, n_in, (const tdm_tensor *const *)in, n_out, out, &E, NULL, 1, NULL, NULL, 0};
    err_clear(&E);
    return op_table[op].run(&ctx);
}

/* --------------------------------------------------------- comparison */

static const char *cmp_outputs(const tdm_tensor *c, const void *d, double tol, double *nmse_out, char *why,
                               size_t why_size)
{
    *nmse_out = 0;
    if (!dtype_is_float(c->dtype)) {
        if (memcmp(c->data, d, c->nbytes)) {
            snprintf(why, why_size, "values differ");
            return why;
        }
        return NULL;
    }
    tdm_tensor view = *c;
    view.data = (void *)(uintptr_t)d;
    view.borrowed = 1;
    double num = 0, den = 0;
    for (size_t i = 0; i < c->count; i++) {
        double a = tensor_get_f64(c, i), b = tensor_get_f64(&view, i);
        if (isnan(a) || isnan(b)) {
            if (isnan(a) != isnan(b)) {
                snprintf(why, why_size, "[%zu] is %g on the device, %g on cpu (NaN rule)", i, b, a);
                return why;
            }
            continue;
        }
        if (isinf(a) || isinf(b)) {
            if (a != b) {
                snprintf(why, why_size, "[%zu] is %g on the device, %g on cpu (Inf rule)", i, b, a);
                return why;
            }
            continue;
        }
        num += (a - b) * (a - b);
        den += a * a;
    }
    double nmse = den > 0 ? num / den : num;
    *nmse_out = nmse;
    if (!(nmse <= tol)) {
        snprintf(why, why_size, "NMSE %.3g exceeds %.0e", nmse, tol);
        return why;
    }
    return NULL;
}

/* --------------------------------------------------- one case, one device */

typedef struct prepared {
    gr_model *m;
    gr_graph *g;
    tdm_tensor *in[MAX_IN];
    tdm_tensor *out[MAX_OUT];
    tdm_tensor_desc din[MAX_IN], dout[MAX_OUT];
    int64_t ddims[MAX_OUT][TDM_MAX_RANK];
    tdm_attr_desc attrs[MAX_ATTR];
    char names[MAX_IN + MAX_OUT][8];
    tdm_node_desc nd;
    tdm_status cpu_status;
} prepared;

static void prepared_free(prepared *p)
{
    for (int i = 0; i < MAX_IN; i++)
        tdm_tensor_destroy(p->in[i]);
    for (int i = 0; i < MAX_OUT; i++)
        tdm_tensor_destroy(p->out[i]);
    gr_model_free(p->m);
}

/* Builds the graph node, runs it on the CPU and describes it for devices. */
static int prepare(prepared *p)
{
    memset(p, 0, sizeof *p);
    rng_state = hash_str(C.label) ^ hash_str(C.op);
    if (gr_model_new(&E, &p->m) || gr_graph_new(&E, p->m, NULL, "t", &p->g)) {
        printf("FAIL setup: %s\n", E.msg);
        exit(1);
    }
    p->m->main = p->g;
    const char *ins[MAX_IN], *outs[MAX_OUT];
    for (int i = 0; i < C.n_in; i++) {
        snprintf(p->names[i], 8, "i%d", i);
        ins[i] = C.in[i].kind == IN_NONE ? "" : p->names[i];
    }
    for (int i = 0; i < C.n_out; i++) {
        snprintf(p->names[MAX_IN + i], 8, "o%d", i);
        outs[i] = p->names[MAX_IN + i];
    }
    int idx;
    if (gr_node_add(&E, p->g, "n", C.op, "", C.n_in, ins, C.n_out, outs, &idx)) {
        printf("FAIL setup: %s\n", E.msg);
        exit(1);
    }
    for (int i = 0; i < C.n_attr; i++) {
        const tattr *a = &C.attr[i];
        gr_attr *g = gr_attr_add(&E, p->g, idx, a->name);
        tdm_attr_desc *d = &p->attrs[i];
        d->name = a->name;
        d->type = a->type;
        switch (a->type) {
        case TDM_ATTR_INT: g->type = GA_INT; g->i = d->i = a->i; break;
        case TDM_ATTR_FLOAT: g->type = GA_FLOAT; g->f = d->f = a->f; break;
        case TDM_ATTR_STRING:
            g->type = GA_STRING;
            g->s = mem_strdup(a->s);
            g->s_len = strlen(a->s);
            d->s = a->s;
            break;
        default:
            g->type = GA_INTS;
            g->n = (size_t)a->n;
            g->ints = mem_calloc((size_t)a->n + 1, sizeof(int64_t));
            memcpy(g->ints, a->ints, sizeof(int64_t) * (size_t)a->n);
            d->n = (size_t)a->n;
            d->ints = a->ints;
            break;
        }
    }
    for (int i = 0; i < C.n_in; i++) {
        tdm_tensor_desc *d = &p->din[i];
        if (C.in[i].kind == IN_NONE) {
            d->name = "";
            d->dtype = TDM_UNDEFINED;
            d->rank = -1;
            continue;
        }
        p->in[i] = make_input(&C.in[i]);
        d->name = p->names[i];
        d->dtype = C.in[i].dt;
        d->rank = C.in[i].rank;
        d->dims = C.in[i].dims;
        d->data = C.in[i].constant ? p->in[i]->data : NULL;
    }
    p->cpu_status = cpu_run(p->g, idx, C.n_in, p->in, C.n_out, p->out);
    for (int i = 0; i < C.n_out; i++) {
        tdm_tensor_desc *d = &p->dout[i];
        d->name = p->names[MAX_IN + i];
        d->dtype = p->out[i] ? p->out[i]->dtype : TDM_UNDEFINED;
        d->rank = p->out[i] ? p->out[i]->rank : -1;
        for (int k = 0; k < d->rank; k++)
            p->ddims[i][k] = C.dynamic ? -1 : p->out[i]->dims[k];
        d->dims = p->ddims[i];
    }
    p->nd.name = "n";
    p->nd.op_type = C.op;
    p->nd.domain = "";
    p->nd.opset = C.opset;
    p->nd.n_inputs = C.n_in;
    p->nd.inputs = p->din;
    p->nd.n_outputs = C.n_out;
    p->nd.outputs = p->dout;
    p->nd.n_attrs = C.n_attr;
    p->nd.attrs = p->attrs;
    return p->cpu_status == TDM_OK;
}

static void report(const tdev *d, const char *dtn, int ok, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (ok)
        passed++;
    else
        failed++;
    if (!ok || verbose)
        printf("%s %-6s %-18s %-7s %s: %s\n", ok ? "ok  " : "FAIL", d->name, C.op, dtn, C.label, buf);
}

static void run_on(const tdev *td, prepared *p)
{
    const tdm_device_iface *f = td->dev.iface;
    void *ctx = td->dev.ctx;
    const char *dtn = C.n_in > 0 && C.in[0].kind != IN_NONE ? tdm_dtype_name(C.in[0].dt) : "-";
    tdm_verdict v;
    memset(&v, 0, sizeof v);
    if (f->supports(ctx, &p->nd, &v) != TDM_REASON_OK) {
        report(td, dtn, 0, "refused: %s (%s)", tdm_reason_str(v.reason), v.detail);
        return;
    }
    tdm_device_tensor din[MAX_IN], dout[MAX_OUT];
    memset(din, 0, sizeof din);
    memset(dout, 0, sizeof dout);
    char err[512] = "";
    char why[512] = "";
    int ok = 1;
    unsigned char *host = NULL;
    for (int i = 0; i < C.n_in && ok; i++) {
        if (!p->in[i])
            continue;
        din[i].dtype = p->in[i]->dtype;
        din[i].rank = p->in[i]->rank;
        memcpy(din[i].dims, p->in[i]->dims, sizeof din[i].dims[0] * (size_t)din[i].rank);
        din[i].bytes = p->in[i]->nbytes;
        if (f->buffer_alloc(ctx, din[i].bytes, &din[i].buf) ||
            f->copy_to_device(ctx, din[i].buf, p->in[i]->data, din[i].bytes)) {
            snprintf(why, sizeof why, "input %d: alloc/copy failed: %s", i, ocl_last_error(&td->dev));
            ok = 0;
        }
    }
    if (ok) {
        tdm_status st = f->run(ctx, &p->nd, din, dout, err, sizeof err);
        if (st) {
            snprintf(why, sizeof why, "run failed (%s): %s", tdm_status_str(st), err);
            ok = 0;
        }
    }
    double worst = 0;
    for (int i = 0; i < C.n_out && ok; i++) {
        const tdm_tensor *c = p->out[i];
        if (!c || !c->data) {
            if (dout[i].buf) {
                snprintf(why, sizeof why, "output %d: produced, the cpu did not", i);
                ok = 0;
            }
            continue;
        }
        if (!dout[i].buf || dout[i].dtype != c->dtype || !shape_equal(dout[i].rank, dout[i].dims, c->rank, c->dims)) {
            char s1[96], s2[96];
            snprintf(why, sizeof why, "output %d: %s %s on the device, %s %s on cpu", i,
                     tdm_dtype_name(dout[i].dtype), shape_str(dout[i].rank, dout[i].dims, s1, sizeof s1),
                     tdm_dtype_name(c->dtype), shape_str(c->rank, c->dims, s2, sizeof s2));
            ok = 0;
            break;
        }
        if (dout[i].bytes < c->nbytes) {
            snprintf(why, sizeof why, "output %d: buffer of %zu bytes, %zu needed", i, dout[i].bytes, c->nbytes);
            ok = 0;
            break;
        }
        mem_free(host);
        host = mem_alloc(c->nbytes + 1);
        if (f->copy_to_host(ctx, host, dout[i].buf, c->nbytes)) {
            snprintf(why, sizeof why, "output %d: copy to host failed: %s", i, ocl_last_error(&td->dev));
            ok = 0;
            break;
        }
        double tol = c->dtype == TDM_FLOAT16 ? 1e-5 : 1e-6, nmse;
        const char *bad = cmp_outputs(c, host, tol, &nmse, why, sizeof why);
        if (bad) {
            char w2[512];
            snprintf(w2, sizeof w2, "output %d: %s", i, bad);
            snprintf(why, sizeof why, "%s", w2);
            ok = 0;
            break;
        }
        if (nmse > worst)
            worst = nmse;
        if (td->is_ocl && ocl_debug_guard_ok(&td->dev, dout[i].buf, c->nbytes) != 1) {
            snprintf(why, sizeof why, "output %d: guard bytes after the buffer were overwritten", i);
            ok = 0;
        }
    }
    /* the inputs must be intact, guards included */
    for (int i = 0; i < C.n_in && ok; i++) {
        if (!din[i].buf)
            continue;
        mem_free(host);
        host = mem_alloc(din[i].bytes + 1);
        if (f->copy_to_host(ctx, host, din[i].buf, din[i].bytes) || memcmp(host, p->in[i]->data, din[i].bytes)) {
            snprintf(why, sizeof why, "input %d was modified by the device", i);
            ok = 0;
        } else if (td->is_ocl && ocl_debug_guard_ok(&td->dev, din[i].buf, din[i].bytes) != 1) {
            snprintf(why, sizeof why, "input %d: guard bytes after the buffer were overwritten", i);
            ok = 0;
        }
    }
    if (ok && td->is_ocl && ocl_last_run_ms(&td->dev) < 0) {
        snprintf(why, sizeof why, "no device timing: %s", ocl_last_error(&td->dev));
        ok = 0;
    }
    mem_free(host);
    for (int i = 0; i < MAX_IN; i++)
        if (din[i].buf)
            f->buffer_free(ctx, din[i].buf);
    for (int i = 0; i < MAX_OUT; i++)
        if (dout[i].buf)
            f->buffer_free(ctx, dout[i].buf);
    if (ok)
        report(td, dtn, 1, "NMSE %.2g", worst);
    else
        report(td, dtn, 0, "%s", why);
}

/* Runs the current case C on every selected device. */
static void run_case(void)
{
    if (!op_selected(C.op))
        return;
    prepared p;
    if (!prepare(&p)) {
        printf("FAIL cpu    %-18s %s: the cpu kernel failed: %s\n", C.op, C.label, E.msg);
        failed++;
        prepared_free(&p);
        return;
    }
    for (int d = 0; d < n_devs; d++)
        run_on(&devs[d], &p);
    prepared_free(&p);
}

/* A case the device must refuse with reason want. */
static void expect_refusal(tdm_reason want)
{
    if (!op_selected(C.op))
        return;
    tdm_tensor_desc din[MAX_IN], dout[MAX_OUT];
    tdm_attr_desc attrs[MAX_ATTR];
    static const char *names[] = {"i0", "i1", "i2", "i3", "i4", "i5"};
    static const char *onames[] = {"o0", "o1", "o2", "o3"};
    memset(din, 0, sizeof din);
    memset(dout, 0, sizeof dout);
    memset(attrs, 0, sizeof attrs);
    for (int i = 0; i < C.n_in; i++) {
        din[i].name = C.in[i].kind == IN_NONE ? "" : names[i];
        din[i].dtype = C.in[i].dt;
        din[i].rank = C.in[i].kind == IN_NONE ? -1 : C.in[i].rank;
        din[i].dims = C.in[i].dims;
    }
    for (int i = 0; i < C.n_out; i++) {
        dout[i].name = onames[i];
        dout[i].dtype = C.n_in ? C.in[0].dt : TDM_FLOAT;
        dout[i].rank = -1;
    }
    for (int i = 0; i < C.n_attr; i++) {
        attrs[i].name = C.attr[i].name;
        attrs[i].type = C.attr[i].type;
        attrs[i].i = C.attr[i].i;
        attrs[i].f = C.attr[i].f;
        attrs[i].s = C.attr[i].s;
        attrs[i].n = (size_t)C.attr[i].n;
        attrs[i].ints = C.attr[i].ints;
    }
    tdm_node_desc nd = {"n", C.op, "", C.opset, C.n_in, din, C.n_out, dout, C.n_attr, attrs};
    for (int d = 0; d < n_devs; d++) {
        tdm_verdict v;
        memset(&v, 0, sizeof v);
        tdm_reason got = devs[d].dev.iface->supports(devs[d].dev.ctx, &nd, &v);
        int ok = got == want && v.reason == want && strlen(v.detail) > 10;
        report(&devs[d], "-", ok, "refusal: got %s (%s), want %s", tdm_reason_str(got), v.detail,
               tdm_reason_str(want));
    }
}

/* ------------------------------------------------------------- the cases */

static const tdm_dtype FLOATS[] = {TDM_FLOAT, TDM_FLOAT16};
#define FOR_FLOATS(dt) for (size_t fi_ = 0; fi_ < 2; fi_++) for (tdm_dtype dt = FLOATS[fi_]; dt; dt = TDM_UNDEFINED)

static void cases_unary(void)
{
    static const char *const ops[] = {"Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round",
                                      "Sign", "Erf", "Sin", "Cos", "Tan", "Atan", "Sinh", "Cosh", "Asinh", "Relu",
                                      "LeakyRelu", "Elu", "Selu", "Celu", "Sigmoid", "HardSigmoid", "HardSwish",
                                      "Softplus", "Softsign", "Tanh", "ThresholdedRelu"};
    FOR_FLOATS(dt)
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        int pos = !strcmp(ops[i], "Log") || !strcmp(ops[i], "Sqrt") || !strcmp(ops[i], "Reciprocal");
        begin(ops[i], 17, "[2,3,17]");
        IN(pos ? IN_POS : IN_RAND, dt, 2, 3, 17);
        run_case();
        begin(ops[i], 17, "[1031] NaN/Inf");
        IN(IN_SPECIAL, dt, 1031);
        run_case();
    }
    FOR_FLOATS(dt)
    {
        begin("Asin", 17, "[5,7]");
        IN(IN_RAND, dt, 5, 7);
        run_case();
        begin("Acos", 17, "[5,7]");
        IN(IN_RAND, dt, 5, 7);
        run_case();
        begin("LeakyRelu", 17, "alpha=0.2 [64]");
        IN(IN_RAND, dt, 64);
        a_float("alpha", 0.2f);
        run_case();
        begin("HardSigmoid", 17, "alpha=0.1667 beta=0.5 [3,33]");
        IN(IN_SPECIAL, dt, 3, 33);
        a_float("alpha", 1.0f / 6);
        a_float("beta", 0.5f);
        run_case();
        begin("Elu", 17, "alpha=0.5 [4,9]");
        IN(IN_RAND, dt, 4, 9);
        a_float("alpha", 0.5f);
        run_case();
        /* Clip: inputs (opset 13), none, one, and attributes (opset 6) */
        float lo = -0.25f, hi = 0.5f;
        begin("Clip", 13, "min/max inputs [2,5,7]");
        IN(IN_SPECIAL, dt, 2, 5, 7);
        in_floats(dt, 1, &lo);
        C.in[1].rank = 0;
        in_floats(dt, 1, &hi);
        C.in[2].rank = 0;
        run_case();
        begin("Clip", 13, "max only [100]");
        IN(IN_RAND, dt, 100);
        in_none();
        in_floats(dt, 1, &hi);
        C.in[2].rank = 0;
        run_case();
        begin("Clip", 13, "min non-constant [3,4]");
        IN(IN_RAND, dt, 3, 4);
        in_floats(dt, 1, &lo);
        C.in[1].rank = 0;
        C.in[1].constant = 0;
        run_case();
        begin("Clip", 6, "attrs 0..6 [2,9]");
        IN(IN_SPECIAL, dt, 2, 9);
        a_float("min", 0.0f);
        a_float("max", 6.0f);
        run_case();
    }
}

static void cases_binary(void)
{
    static const char *const ops[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"};
    FOR_FLOATS(dt)
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        int pow_ = !strcmp(ops[i], "Pow");
        int k0 = pow_ ? IN_POS : IN_RAND;
        begin(ops[i], 14, "same [2,3,5,7]");
        IN(k0, dt, 2, 3, 5, 7);
        IN(IN_RAND, dt, 2, 3, 5, 7);
        run_case();
        begin(ops[i], 14, "channel bcast [1,6,5,5]x[1,6,1,1]");
        IN(k0, dt, 1, 6, 5, 5);
        IN(IN_RAND, dt, 1, 6, 1, 1);
        run_case();
        begin(ops[i], 14, "scalar b [4,33]x[]");
        IN(k0, dt, 4, 33);
        IN0(IN_RAND, dt);
        run_case();
        begin(ops[i], 14, "scalar a []x[4,33]");
        IN0(k0, dt);
        IN(IN_RAND, dt, 4, 33);
        run_case();
        begin(ops[i], 14, "both ways [3,1,7]x[1,5,1]");
        IN(k0, dt, 3, 1, 7);
        IN(IN_RAND, dt, 1, 5, 1);
        run_case();
        begin(ops[i], 14, "rank differ [2,3,4,5]x[4,1]");
        IN(k0, dt, 2, 3, 4, 5);
        IN(IN_RAND, dt, 4, 1);
        run_case();
        begin(ops[i], 14, "NaN/Inf [9,13]x[13]");
        IN(pow_ ? IN_POS : IN_SPECIAL, dt, 9, 13);
        IN(IN_SPECIAL, dt, 13);
        run_case();
    }
    FOR_FLOATS(dt)
    {
        begin("Pow", 14, "square [3,77]x[]");
        IN(IN_RAND, dt, 3, 77);
        in_floats(dt, 1, (const float[]){2.0f});
        C.in[1].rank = 0;
        run_case();
        begin("Max", 13, "3 inputs [2,3,4]x[3,1]x[4]");
        IN(IN_SPECIAL, dt, 2, 3, 4);
        IN(IN_RAND, dt, 3, 1);
        IN(IN_RAND, dt, 4);
        run_case();
        begin("Min", 13, "1 input [7,3]");
        IN(IN_RAND, dt, 7, 3);
        run_case();
        begin("Sum", 13, "3 inputs [5,6]x[6]x[5,1]");
        IN(IN_RAND, dt, 5, 6);
        IN(IN_RAND, dt, 6);
        IN(IN_RAND, dt, 5, 1);
        run_case();
        begin("Mean", 13, "2 inputs [8,8]x[8,8]");
        IN(IN_RAND, dt, 8, 8);
        IN(IN_RAND, dt, 8, 8);
        run_case();
        begin("PRelu", 16, "slope [1,4,1,1] x [2,4,5,5]");
        IN(IN_RAND, dt, 2, 4, 5, 5);
        IN(IN_RAND, dt, 4, 1, 1);
        run_case();
    }
}

typedef struct conv_c {
    const char *label;
    int64_t n, c, m, group, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
    const char *auto_pad;
    int bias, one_d;
} conv_c;

static void conv_case(const char *op, tdm_dtype dt, const conv_c *k)
{
    begin(op, 11, "%s", k->label);
    int transposed = !strcmp(op, "ConvTranspose");
    if (k->one_d) {
        IN(IN_RAND, dt, k->n, k->c, k->w);
        if (transposed)
            IN(IN_RAND, dt, k->c, k->m / k->group, k->kw);
        else
            IN(IN_RAND, dt, k->m, k->c / k->group, k->kw);
        AINTS("strides", k->sw);
        AINTS("dilations", k->dw);
        if (!k->auto_pad)
            AINTS("pads", k->pl, k->pr);
        AINTS("kernel_shape", k->kw);
    } else {
        IN(IN_RAND, dt, k->n, k->c, k->h, k->w);
        if (transposed)
            IN(IN_RAND, dt, k->c, k->m / k->group, k->kh, k->kw);
        else
            IN(IN_RAND, dt, k->m, k->c / k->group, k->kh, k->kw);
        AINTS("strides", k->sh, k->sw);
        AINTS("dilations", k->dh, k->dw);
        if (!k->auto_pad)
            AINTS("pads", k->pt, k->pl, k->pb, k->pr);
    }
    if (k->bias)
        IN(IN_RAND, dt, k->m);
    if (k->group != 1)
        a_int("group", k->group);
    if (k->auto_pad)
        a_str("auto_pad", k->auto_pad);
    run_case();
}

static void cases_conv(void)
{
    static const conv_c convs[] = {
        /* label                      n  c   m   g   h   w  kh kw sh sw dh dw pt pl pb pr */
        {"3x3 pad1 [2,3,9,11]->8", 2, 3, 8, 1, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, NULL, 1, 0},
        {"pointwise 16->24 [7,6]", 1, 16, 24, 1, 7, 6, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, NULL, 1, 0},
        {"pointwise no bias 32->40 [5,5]", 2, 32, 40, 1, 5, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, NULL, 0, 0},
        {"1x1 stride2 [9,9]", 1, 8, 12, 1, 9, 9, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, NULL, 0, 0},
        {"depthwise 3x3 [10,9]", 2, 6, 6, 6, 10, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, NULL, 1, 0},
        {"depthwise s2 asym pads [11,11]", 1, 6, 6, 6, 11, 11, 3, 3, 2, 2, 1, 1, 1, 0, 1, 2, NULL, 1, 0},
        {"depthwise x2 5x5 [8,8]", 1, 4, 8, 4, 8, 8, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, NULL, 0, 0},
        {"grouped 4 [8,7] s(1,2)", 1, 8, 12, 4, 8, 7, 3, 3, 1, 2, 1, 1, 1, 0, 0, 1, NULL, 1, 0},
        {"grouped 2 Mg=16 [9,9]", 1, 8, 32, 2, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, NULL, 1, 0},
        {"16->32 3x3 [33,31]", 1, 16, 32, 1, 33, 31, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, NULL, 1, 0},
        {"dilated asym [13,12]", 1, 3, 5, 1, 13, 12, 3, 2, 2, 3, 2, 1, 2, 0, 1, 3, NULL, 1, 0},
        {"SAME_UPPER s2 [7,8]", 1, 3, 4, 1, 7, 8, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, "SAME_UPPER", 1, 0},
        {"SAME_LOWER [6,5]", 1, 3, 9, 1, 6, 5, 4, 2, 1, 1, 1, 1, 0, 0, 0, 0, "SAME_LOWER", 1, 0},
        {"stem 7x7 s2 [3,37,37]", 1, 3, 16, 1, 37, 37, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, NULL, 1, 0},
        {"1-D grouped [20]", 2, 4, 6, 2, 1, 20, 1, 5, 1, 3, 1, 2, 0, 2, 0, 1, NULL, 1, 1},
        {"single channel [12,12]", 1, 1, 7, 1, 12, 12, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, NULL, 0, 0},
        {"narrow 32->40 3x3 [7,7]", 2, 32, 40, 1, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, NULL, 1, 0},
        {"narrow grouped Mg=12 s2 [6,5]", 1, 6, 24, 2, 6, 5, 3, 3, 2, 2, 1, 1, 1, 1, 0, 1, NULL, 1, 0},
        {"narrow 1x1 s2 [13,13]->[7,7]", 1, 16, 16, 1, 13, 13, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, NULL, 0, 0},
    };
    FOR_FLOATS(dt)
    for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++)
        conv_case("Conv", dt, &convs[i]);
    static const conv_c convts[] = {
        {"2x2 s2 [5,6]", 1, 4, 3, 1, 5, 6, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, NULL, 1, 0},
        {"3x3 s2 pad1 [4,4]", 2, 3, 5, 1, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, NULL, 0, 0},
        {"grouped 2 dilated [5,5]", 1, 4, 6, 2, 5, 5, 3, 3, 1, 2, 2, 1, 0, 1, 1, 0, NULL, 1, 0},
        {"1-D s3 [7]", 1, 2, 3, 1, 1, 7, 1, 4, 1, 3, 1, 1, 0, 1, 0, 2, NULL, 1, 1},
        {"SAME_UPPER s2 [3,5]", 1, 2, 2, 1, 3, 5, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, "SAME_UPPER", 0, 0},
    };
    FOR_FLOATS(dt)
    for (size_t i = 0; i < sizeof convts / sizeof convts[0]; i++)
        conv_case("ConvTranspose", dt, &convts[i]);
    FOR_FLOATS(dt)
    {
        begin("ConvTranspose", 11, "output_padding [3,4] s2");
        IN(IN_RAND, dt, 1, 3, 3, 4);
        IN(IN_RAND, dt, 3, 2, 3, 3);
        AINTS("strides", 2, 2);
        AINTS("output_padding", 1, 0);
        run_case();
        begin("ConvTranspose", 11, "output_shape [4,4]->[9,8]");
        IN(IN_RAND, dt, 1, 2, 4, 4);
        IN(IN_RAND, dt, 2, 3, 3, 3);
        AINTS("strides", 2, 2);
        AINTS("output_shape", 9, 8);
        run_case();
    }
}

static void cases_gemm(void)
{
    FOR_FLOATS(dt)
    {
        begin("Gemm", 13, "[5,7]x[7,9]+[9]");
        IN(IN_RAND, dt, 5, 7);
        IN(IN_RAND, dt, 7, 9);
        IN(IN_RAND, dt, 9);
        run_case();
        begin("Gemm", 13, "transB [1,512]x[1000,512]^T+[1000]");
        IN(IN_RAND, dt, 1, 512);
        IN(IN_RAND, dt, 1000, 512);
        IN(IN_RAND, dt, 1000);
        a_int("transB", 1);
        run_case();
        begin("Gemm", 13, "transA alpha beta C[33,1] [17,33]^T x [17,20]");
        IN(IN_RAND, dt, 17, 33);
        IN(IN_RAND, dt, 17, 20);
        IN(IN_RAND, dt, 33, 1);
        a_int("transA", 1);
        a_float("alpha", 0.5f);
        a_float("beta", 2.0f);
        run_case();
        begin("Gemm", 13, "both trans, no C [31,3]^T x [29,31]^T");
        IN(IN_RAND, dt, 31, 3);
        IN(IN_RAND, dt, 29, 31);
        a_int("transA", 1);
        a_int("transB", 1);
        run_case();
        begin("Gemm", 13, "scalar C [16,16]x[16,16]");
        IN(IN_RAND, dt, 16, 16);
        IN(IN_RAND, dt, 16, 16);
        IN0(IN_RAND, dt);
        run_case();
        begin("MatMul", 13, "2-D [19,23]x[23,17]");
        IN(IN_RAND, dt, 19, 23);
        IN(IN_RAND, dt, 23, 17);
        run_case();
        begin("MatMul", 13, "batched [3,4,5,6]x[3,4,6,7]");
        IN(IN_RAND, dt, 3, 4, 5, 6);
        IN(IN_RAND, dt, 3, 4, 6, 7);
        run_case();
        begin("MatMul", 13, "shared B [2,33,64]x[64,48]");
        IN(IN_RAND, dt, 2, 33, 64);
        IN(IN_RAND, dt, 64, 48);
        run_case();
        begin("MatMul", 13, "broadcast batch [2,1,5,6]x[3,6,4]");
        IN(IN_RAND, dt, 2, 1, 5, 6);
        IN(IN_RAND, dt, 3, 6, 4);
        run_case();
        begin("MatMul", 13, "shared A [5,6]x[4,6,3]");
        IN(IN_RAND, dt, 5, 6);
        IN(IN_RAND, dt, 4, 6, 3);
        run_case();
        begin("MatMul", 13, "vector x matrix [7]x[2,7,3]");
        IN(IN_RAND, dt, 7);
        IN(IN_RAND, dt, 2, 7, 3);
        run_case();
        begin("MatMul", 13, "matrix x vector [4,9]x[9]");
        IN(IN_RAND, dt, 4, 9);
        IN(IN_RAND, dt, 9);
        run_case();
        begin("MatMul", 13, "attention [1,4,32,64]x[1,4,64,32]");
        IN(IN_RAND, dt, 1, 4, 32, 64);
        IN(IN_RAND, dt, 1, 4, 64, 32);
        run_case();
    }
}

static void cases_pool(void)
{
    FOR_FLOATS(dt)
    {
        begin("MaxPool", 12, "3x3 s2 pad1 [1,4,11,12]");
        IN(IN_RAND, dt, 1, 4, 11, 12);
        AINTS("kernel_shape", 3, 3);
        AINTS("strides", 2, 2);
        AINTS("pads", 1, 1, 1, 1);
        run_case();
        begin("MaxPool", 12, "2x2 ceil dil [2,3,9,9]");
        IN(IN_SPECIAL, dt, 2, 3, 9, 9);
        AINTS("kernel_shape", 2, 2);
        AINTS("strides", 2, 2);
        AINTS("dilations", 2, 1);
        a_int("ceil_mode", 1);
        run_case();
        begin("MaxPool", 12, "1-D k3 s2 [2,3,15]");
        IN(IN_RAND, dt, 2, 3, 15);
        AINTS("kernel_shape", 3);
        AINTS("strides", 2);
        run_case();
        begin("MaxPool", 8, "SAME_UPPER opset 8 [1,2,7,6]");
        IN(IN_RAND, dt, 1, 2, 7, 6);
        AINTS("kernel_shape", 3, 2);
        AINTS("strides", 2, 2);
        a_str("auto_pad", "SAME_UPPER");
        run_case();
        begin("AveragePool", 11, "3x3 s2 pad1 exclude [1,3,10,9]");
        IN(IN_RAND, dt, 1, 3, 10, 9);
        AINTS("kernel_shape", 3, 3);
        AINTS("strides", 2, 2);
        AINTS("pads", 1, 1, 1, 1);
        run_case();
        begin("AveragePool", 11, "3x3 s2 pad1 include ceil [1,3,10,9]");
        IN(IN_RAND, dt, 1, 3, 10, 9);
        AINTS("kernel_shape", 3, 3);
        AINTS("strides", 2, 2);
        AINTS("pads", 1, 1, 1, 1);
        a_int("count_include_pad", 1);
        a_int("ceil_mode", 1);
        run_case();
        begin("AveragePool", 11, "2x2 s2 [2,4,8,8]");
        IN(IN_RAND, dt, 2, 4, 8, 8);
        AINTS("kernel_shape", 2, 2);
        AINTS("strides", 2, 2);
        run_case();
        begin("GlobalAveragePool", 1, "[2,5,7,9]");
        IN(IN_RAND, dt, 2, 5, 7, 9);
        run_case();
        begin("GlobalAveragePool", 1, "[1,32,56,56]");
        IN(IN_RAND, dt, 1, 32, 56, 56);
        run_case();
        begin("GlobalAveragePool", 1, "1-D [3,4,11]");
        IN(IN_RAND, dt, 3, 4, 11);
        run_case();
        begin("GlobalMaxPool", 1, "[2,3,5,5]");
        IN(IN_SPECIAL, dt, 2, 3, 5, 5);
        run_case();
    }
}

static void cases_norm(void)
{
    FOR_FLOATS(dt)
    {
        begin("BatchNormalization", 15, "[2,5,6,7]");
        IN(IN_RAND, dt, 2, 5, 6, 7);
        IN(IN_RAND, dt, 5);
        IN(IN_RAND, dt, 5);
        IN(IN_RAND, dt, 5);
        IN(IN_POS, dt, 5);
        run_case();
        begin("BatchNormalization", 9, "eps 1e-3 [3,4]");
        IN(IN_RAND, dt, 3, 4);
        IN(IN_RAND, dt, 4);
        IN(IN_RAND, dt, 4);
        IN(IN_RAND, dt, 4);
        IN(IN_POS, dt, 4);
        a_float("epsilon", 1e-3f);
        run_case();
        begin("Softmax", 13, "axis -1 [4,5,37]");
        IN(IN_RAND, dt, 4, 5, 37);
        run_case();
        begin("Softmax", 13, "axis 1 [3,7,5]");
        IN(IN_RAND, dt, 3, 7, 5);
        a_int("axis", 1);
        run_case();
        begin("Softmax", 11, "opset 11 coerced axis 1 [2,3,4]");
        IN(IN_RAND, dt, 2, 3, 4);
        run_case();
        begin("Softmax", 13, "NaN/Inf rows [6,10]");
        IN(IN_SPECIAL, dt, 6, 10);
        run_case();
        begin("Softmax", 13, "attention [1,4,128,128]");
        IN(IN_RAND, dt, 1, 4, 128, 128);
        run_case();
        begin("LogSoftmax", 13, "[3,29]");
        IN(IN_RAND, dt, 3, 29);
        run_case();
        begin("LayerNormalization", 17, "axis -1 [2,7,256]");
        IN(IN_RAND, dt, 2, 7, 256);
        IN(IN_RAND, dt, 256);
        IN(IN_RAND, dt, 256);
        run_case();
        begin("LayerNormalization", 17, "axis 1 no B eps [3,4,5]");
        IN(IN_RAND, dt, 3, 4, 5);
        IN(IN_RAND, dt, 4, 5);
        a_int("axis", 1);
        a_float("epsilon", 1e-3f);
        run_case();
        begin("LayerNormalization", 17, "short rows [5,3]");
        IN(IN_RAND, dt, 5, 3);
        IN(IN_RAND, dt, 3);
        IN(IN_RAND, dt, 3);
        run_case();
    }
}

static void cases_reduce(void)
{
    FOR_FLOATS(dt)
    {
        begin("ReduceMean", 13, "axes [-1] keep [2,3,50]");
        IN(IN_RAND, dt, 2, 3, 50);
        AINTS("axes", -1);
        run_case();
        begin("ReduceMean", 13, "axes [2,3] nokeep [2,4,5,6]");
        IN(IN_RAND, dt, 2, 4, 5, 6);
        AINTS("axes", 2, 3);
        a_int("keepdims", 0);
        run_case();
        begin("ReduceMean", 13, "axes [0,2] [3,4,5]");
        IN(IN_RAND, dt, 3, 4, 5);
        AINTS("axes", 0, 2);
        run_case();
        begin("ReduceMean", 13, "all [4,7]");
        IN(IN_RAND, dt, 4, 7);
        run_case();
        begin("ReduceSum", 13, "axes input [1] [3,9,4]");
        IN(IN_RAND, dt, 3, 9, 4);
        INTS(1);
        run_case();
        begin("ReduceSum", 13, "axes input [0,3] nokeep [2,3,4,5]");
        IN(IN_RAND, dt, 2, 3, 4, 5);
        INTS(0, 3);
        a_int("keepdims", 0);
        run_case();
        begin("ReduceSum", 13, "no axes: all [5,6]");
        IN(IN_RAND, dt, 5, 6);
        run_case();
        begin("ReduceSum", 13, "noop_with_empty_axes [5,6]");
        IN(IN_RAND, dt, 5, 6);
        a_int("noop_with_empty_axes", 1);
        run_case();
        begin("ReduceSum", 11, "opset 11 axes attr [1] [4,6,2]");
        IN(IN_RAND, dt, 4, 6, 2);
        AINTS("axes", 1);
        run_case();
        begin("ReduceMax", 13, "axes [1] NaN [5,8,3]");
        IN(IN_SPECIAL, dt, 5, 8, 3);
        AINTS("axes", 1);
        run_case();
        begin("ReduceMin", 13, "axes [-1] [5,8,3]");
        IN(IN_RAND, dt, 5, 8, 3);
        AINTS("axes", -1);
        run_case();
    }
}

static void cases_movement(void)
{
    static const tdm_dtype any[] = {TDM_FLOAT, TDM_FLOAT16, TDM_INT64, TDM_UINT8};
    for (size_t di = 0; di < sizeof any / sizeof any[0]; di++) {
        tdm_dtype dt = any[di];
        int k = dt == TDM_INT64 || dt == TDM_UINT8 ? IN_INDEX : IN_RAND;
        tin *t;
#define DATA(...) (t = IN(k, dt, __VA_ARGS__), t->index_max = 100)
        begin("Transpose", 13, "perm [0,2,3,1] [2,3,4,5]");
        DATA(2, 3, 4, 5);
        AINTS("perm", 0, 2, 3, 1);
        run_case();
        begin("Transpose", 13, "default perm [3,5,7]");
        DATA(3, 5, 7);
        run_case();
        begin("Transpose", 13, "shufflenet [1,2,58,7,7] perm [0,2,1,3,4]");
        DATA(1, 2, 58, 7, 7);
        AINTS("perm", 0, 2, 1, 3, 4);
        run_case();
        begin("Concat", 13, "axis 1 [2,3,4]+[2,5,4]+[2,1,4]");
        DATA(2, 3, 4);
        DATA(2, 5, 4);
        DATA(2, 1, 4);
        a_int("axis", 1);
        run_case();
        begin("Concat", 13, "axis -1 [3,2]+[3,7]");
        DATA(3, 2);
        DATA(3, 7);
        a_int("axis", -1);
        run_case();
        begin("Concat", 13, "axis 0 [2,3]+[1,3]");
        DATA(2, 3);
        DATA(1, 3);
        a_int("axis", 0);
        run_case();
        begin("Split", 13, "equal axis 1 [2,6,3] -> 3");
        DATA(2, 6, 3);
        a_int("axis", 1);
        C.n_out = 3;
        run_case();
        begin("Split", 13, "split input [1,4] axis -1 [3,5]");
        DATA(3, 5);
        INTS(1, 4);
        a_int("axis", -1);
        C.n_out = 2;
        run_case();
        begin("Split", 11, "split attr [2,1,3] axis 0 [6,2]");
        DATA(6, 2);
        AINTS("split", 2, 1, 3);
        C.n_out = 3;
        run_case();
        begin("Slice", 13, "starts/ends [1,2,10]->[0,1,2]..");
        DATA(3, 4, 10);
        INTS(1, 2);
        INTS(3, 9);
        INTS(0, 2);
        run_case();
        begin("Slice", 13, "negative step [8,6]");
        DATA(8, 6);
        INTS(-1, 5);
        INTS(-9, 0);
        INTS(0, 1);
        INTS(-2, -2);
        run_case();
        begin("Slice", 13, "INT64_MAX end, step 3 [4,11]");
        DATA(4, 11);
        INTS(1);
        INTS(INT64_MAX);
        INTS(1);
        INTS(3);
        run_case();
        begin("Slice", 13, "non-constant starts [5,7]");
        DATA(5, 7);
        INTS(2);
        INTS(5);
        C.in[1].constant = 0;
        C.in[2].constant = 0;
        run_case();
        begin("Slice", 9, "opset 9 attrs [6,4]");
        DATA(6, 4);
        AINTS("starts", 1, 0);
        AINTS("ends", 4, 3);
        run_case();
        begin("Reshape", 14, "[2,3,4]->[4,0,-1]");
        DATA(2, 3, 4);
        INTS(4, 0, -1);
        run_case();
        begin("Reshape", 14, "dynamic [6,5]->[-1]");
        DATA(6, 5);
        INTS(-1);
        C.dynamic = 1;
        run_case();
        begin("Flatten", 13, "axis 2 [2,3,4,5]");
        DATA(2, 3, 4, 5);
        a_int("axis", 2);
        run_case();
        begin("Flatten", 13, "default [2,512,1,1]");
        DATA(2, 512, 1, 1);
        run_case();
        begin("Squeeze", 13, "axes input [1,3] [2,1,4,1]");
        DATA(2, 1, 4, 1);
        INTS(1, 3);
        run_case();
        begin("Squeeze", 11, "no axes [1,3,1,2]");
        DATA(1, 3, 1, 2);
        run_case();
        begin("Unsqueeze", 13, "axes [0,-1] [3,4]");
        DATA(3, 4);
        INTS(0, -1);
        run_case();
        begin("Unsqueeze", 11, "attr axes [1] [5]");
        DATA(5);
        AINTS("axes", 1);
        run_case();
        begin("Identity", 13, "[7,3]");
        DATA(7, 3);
        run_case();
        begin("Expand", 13, "[3,1]->[2,3,4]");
        DATA(3, 1);
        INTS(2, 3, 4);
        run_case();
        begin("Gather", 13, "axis 0 indices [2,2] data [5,3]");
        DATA(5, 3);
        t = IN(IN_INDEX, TDM_INT64, 2, 2);
        t->index_max = 5;
        run_case();
        begin("Gather", 13, "axis 1 scalar index data [2,7,3]");
        DATA(2, 7, 3);
        t = IN0(IN_INDEX, TDM_INT64);
        t->index_max = 7;
        a_int("axis", 1);
        run_case();
        begin("Gather", 13, "constant int32 indices axis -1 [4,6]");
        DATA(4, 6);
        t = IN(IN_INDEX, TDM_INT32, 3);
        t->index_max = 6;
        t->constant = 1;
        a_int("axis", -1);
        run_case();
        begin("Shape", 15, "[2,3,4,5]");
        DATA(2, 3, 4, 5);
        run_case();
        begin("Shape", 15, "start 1 end -1 [2,3,4,5]");
        DATA(2, 3, 4, 5);
        a_int("start", 1);
        a_int("end", -1);
        run_case();
#undef DATA
    }
}

static void cases_resize(void)
{
    FOR_FLOATS(dt)
    {
        static const char *const ctms[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"};
        for (int m = 0; m < 2; m++)
            for (int c = 0; c < 4; c++) {
                const char *mode = m ? "linear" : "nearest";
                begin("Resize", 13, "%s %s x2 [1,3,5,6]", mode, ctms[c]);
                IN(IN_RAND, dt, 1, 3, 5, 6);
                in_none();
                in_floats(TDM_FLOAT, 4, (const float[]){1, 1, 2, 2});
                a_str("mode", mode);
                a_str("coordinate_transformation_mode", ctms[c]);
                run_case();
            }
        static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
        for (int k = 0; k < 4; k++) {
            begin("Resize", 13, "nearest %s sizes [2,3,7,5]->[2,3,11,3]", nms[k]);
            IN(IN_RAND, dt, 2, 3, 7, 5);
            in_none();
            in_none();
            INTS(2, 3, 11, 3);
            a_str("mode", "nearest");
            a_str("nearest_mode", nms[k]);
            run_case();
        }
        begin("Resize", 13, "linear downscale 0.6 [1,2,10,9]");
        IN(IN_RAND, dt, 1, 2, 10, 9);
        in_none();
        in_floats(TDM_FLOAT, 4, (const float[]){1, 1, 0.6f, 0.6f});
        a_str("mode", "linear");
        run_case();
        begin("Resize", 13, "linear 3 axes sizes [2,3,4]->[3,5,7]");
        IN(IN_RAND, dt, 2, 3, 4);
        in_none();
        in_none();
        INTS(3, 5, 7);
        a_str("mode", "linear");
        run_case();
        begin("Resize", 13, "linear exclude_outside half_pixel [1,1,4,4]x1.7");
        IN(IN_RAND, dt, 1, 1, 4, 4);
        in_none();
        in_floats(TDM_FLOAT, 4, (const float[]){1, 1, 1.7f, 1.7f});
        a_str("mode", "linear");
        a_int("exclude_outside", 1);
        run_case();
        begin("Resize", 10, "opset 10 nearest x2 [1,2,3,3]");
        IN(IN_RAND, dt, 1, 2, 3, 3);
        in_floats(TDM_FLOAT, 4, (const float[]){1, 1, 2, 2});
        run_case();
        begin("Resize", 11, "opset 11 linear asym x4 [1,4,5,5]");
        IN(IN_RAND, dt, 1, 4, 5, 5);
        in_floats(TDM_FLOAT, 0, NULL);
        in_floats(TDM_FLOAT, 4, (const float[]){1, 1, 4, 4});
        a_str("mode", "linear");
        a_str("coordinate_transformation_mode", "asymmetric");
        run_case();
    }
}

static void cases_refusals(void)
{
    begin("TopK", 13, "no kernel");
    IN(IN_RAND, TDM_FLOAT, 4, 5);
    INTS(2);
    C.n_out = 2;
    expect_refusal(TDM_REASON_OP_UNSUPPORTED);
    begin("Resize", 13, "cubic");
    IN(IN_RAND, TDM_FLOAT, 1, 1, 4, 4);
    a_str("mode", "cubic");
    expect_refusal(TDM_REASON_ATTR_UNSUPPORTED);
    begin("Resize", 13, "tf_crop_and_resize");
    IN(IN_RAND, TDM_FLOAT, 1, 1, 4, 4);
    a_str("coordinate_transformation_mode", "tf_crop_and_resize");
    expect_refusal(TDM_REASON_ATTR_UNSUPPORTED);
    begin("Conv", 11, "int8");
    IN(IN_RAND, TDM_INT8, 1, 1, 4, 4);
    IN(IN_RAND, TDM_INT8, 1, 1, 3, 3);
    expect_refusal(TDM_REASON_DTYPE_UNSUPPORTED);
    begin("Conv", 11, "3-D");
    IN(IN_RAND, TDM_FLOAT, 1, 1, 4, 4, 4);
    IN(IN_RAND, TDM_FLOAT, 1, 1, 3, 3, 3);
    expect_refusal(TDM_REASON_SHAPE_UNSUPPORTED);
    begin("Add", 14, "int64");
    IN(IN_RAND, TDM_INT64, 4);
    IN(IN_RAND, TDM_INT64, 4);
    expect_refusal(TDM_REASON_DTYPE_UNSUPPORTED);
    begin("Add", 14, "double");
    IN(IN_RAND, TDM_DOUBLE, 4);
    IN(IN_RAND, TDM_DOUBLE, 4);
    expect_refusal(TDM_REASON_DTYPE_UNSUPPORTED);
    begin("MaxPool", 12, "Indices output");
    IN(IN_RAND, TDM_FLOAT, 1, 1, 4, 4);
    AINTS("kernel_shape", 2, 2);
    C.n_out = 2;
    expect_refusal(TDM_REASON_ATTR_UNSUPPORTED);
    begin("BatchNormalization", 15, "training_mode");
    IN(IN_RAND, TDM_FLOAT, 2, 3, 4);
    for (int i = 0; i < 4; i++)
        IN(IN_RAND, TDM_FLOAT, 3);
    a_int("training_mode", 1);
    expect_refusal(TDM_REASON_ATTR_UNSUPPORTED);
    begin("LayerNormalization", 17, "Mean output");
    IN(IN_RAND, TDM_FLOAT, 2, 8);
    IN(IN_RAND, TDM_FLOAT, 8);
    C.n_out = 2;
    expect_refusal(TDM_REASON_ATTR_UNSUPPORTED);
    begin("Transpose", 13, "rank 10");
    IN(IN_RAND, TDM_FLOAT, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2);
    expect_refusal(TDM_REASON_SHAPE_UNSUPPORTED);
    begin("Identity", 13, "string");
    IN(IN_RAND, TDM_STRING, 2);
    expect_refusal(TDM_REASON_DTYPE_UNSUPPORTED);
}

/* Device failures come back as TDM_E_DEVICE with a sentence. */
static void cases_faults(void)
{
    if (!op_selected("faults"))
        return;
    for (int d = 0; d < n_devs; d++) {
        const tdev *td = &devs[d];
        if (!td->is_ocl)
            continue;
        const tdm_device_iface *f = td->dev.iface;
        void *buf = NULL;
        snprintf(C.op, sizeof C.op, "faults");
        snprintf(C.label, sizeof C.label, "allocation past capacity");
        tdm_status st = f->buffer_alloc(td->dev.ctx, (size_t)1 << 62, &buf);
        report(td, "-", st == TDM_E_DEVICE && !buf && strlen(ocl_last_error(&td->dev)) > 10, "%s: %s",
               tdm_status_str(st), ocl_last_error(&td->dev));
        /* an enqueue failure, then the device works again */
        begin("Relu", 14, "[10]");
        IN(IN_RAND, TDM_FLOAT, 10);
        prepared p;
        prepare(&p);
        p.nd.op_type = "Relu"; /* C.op is relabelled for the reports below */
        tdm_device_tensor din[1], dout[1];
        char err[512] = "";
        memset(din, 0, sizeof din);
        din[0].dtype = TDM_FLOAT;
        din[0].rank = 1;
        din[0].dims[0] = 10;
        din[0].bytes = 40;
        if (f->buffer_alloc(td->dev.ctx, 40, &din[0].buf) || f->copy_to_device(td->dev.ctx, din[0].buf, p.in[0]->data, 40)) {
            report(td, "-", 0, "setup: %s", ocl_last_error(&td->dev));
            prepared_free(&p);
            continue;
        }
        ocl_debug_inject(&td->dev, 2);
        st = f->run(td->dev.ctx, &p.nd, din, dout, err, sizeof err);
        snprintf(C.op, sizeof C.op, "faults");
        snprintf(C.label, sizeof C.label, "enqueue failure");
        report(td, "-", st == TDM_E_DEVICE && !dout[0].buf && strstr(err, "enqueue"), "%s: %s", tdm_status_str(st), err);
        st = f->run(td->dev.ctx, &p.nd, din, dout, err, sizeof err);
        snprintf(C.label, sizeof C.label, "recovers after an enqueue failure");
        report(td, "-", st == TDM_OK && dout[0].buf, "%s", st ? err : "ok");
        if (dout[0].buf)
            f->buffer_free(td->dev.ctx, dout[0].buf);
        dout[0].buf = NULL;
        /* a build failure, on a fresh instance of the device */
        tdm_device fresh;
        tdm_err e;
        if (ocl_device_open(&e, 0, &fresh) == TDM_OK) {
            void *b2 = NULL;
            fresh.iface->buffer_alloc(fresh.ctx, 40, &b2);
            fresh.iface->copy_to_device(fresh.ctx, b2, p.in[0]->data, 40);
            tdm_device_tensor d2 = din[0];
            d2.buf = b2;
            ocl_debug_inject(&fresh, 1);
            st = fresh.iface->run(fresh.ctx, &p.nd, &d2, dout, err, sizeof err);
            snprintf(C.label, sizeof C.label, "kernel build failure");
            report(td, "-", st == TDM_E_DEVICE && !dout[0].buf && strstr(err, "build"), "%s: %s",
                   tdm_status_str(st), err);
            fresh.iface->buffer_free(fresh.ctx, b2);
            fresh.iface->destroy(fresh.ctx);
        } else {
            report(td, "-", 0, "reopen failed: %s", e.msg);
        }
        /* a buffer smaller than its shape says */
        din[0].dims[0] = 1000;
        st = f->run(td->dev.ctx, &p.nd, din, dout, err, sizeof err);
        snprintf(C.label, sizeof C.label, "input buffer smaller than its shape");
        report(td, "-", st != TDM_OK && !dout[0].buf && strlen(err) > 10, "%s: %s", tdm_status_str(st), err);
        f->buffer_free(td->dev.ctx, din[0].buf);
        /* timing of a copy */
        snprintf(C.label, sizeof C.label, "copy timing");
        double ms = ocl_last_copy_ms(&td->dev);
        report(td, "-", ms >= 0, "last copy %.4f ms", ms);
        prepared_free(&p);
    }
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            opt_ops = argv[++i];
        else if (!strcmp(argv[i], "-b") && i + 1 < argc)
            opt_dev = argv[++i];
        else if (!strcmp(argv[i], "-v"))
            verbose = 1;
        else {
            fprintf(stderr, "usage: %s [-o OP[,OP...]] [-b DEVICE] [-v]\n", argv[0]);
            return 2;
        }
    }
    /* the devices: every OpenCL device */
    ocl_info *info = NULL;
    size_t n_info = 0;
    char why[256] = "";
    if (ocl_probe(&E, &info, &n_info, why, sizeof why)) {
        printf("FAIL: ocl_probe: %s\n", E.msg);
        return 1;
    }
    for (size_t i = 0; i < n_info && n_devs < 8; i++) {
        tdev *d = &devs[n_devs];
        if (ocl_device_open(&E, (int)i, &d->dev)) {
            printf("FAIL: opencl:%zu: %s\n", i, E.msg);
            failed++;
            continue;
        }
        snprintf(d->name, sizeof d->name, "%s", d->dev.iface->name(d->dev.ctx));
        if (opt_dev && strcmp(opt_dev, d->name) && !(i == 0 && !strcmp(opt_dev, "opencl:0"))) {
            d->dev.iface->destroy(d->dev.ctx);
            continue;
        }
        d->is_ocl = 1;
        ocl_debug_set_guard(&d->dev, GUARD);
        printf("device %s: %s\n", d->name, d->dev.iface->description(d->dev.ctx));
        n_devs++;
    }
    mem_free(info);
    if (n_devs == 0) {
        printf("no non-cpu device to test%s%s%s\n", opt_dev ? " named " : "", opt_dev ? opt_dev : "",
               why[0] ? ": " : "");
        if (why[0])
            printf("%s\n", why);
        return failed ? 1 : 77;
    }
    for (int d = 0; d < n_devs; d++)
        if (devs[d].is_ocl)
            ocl_debug_inject(&devs[d].dev, 4); /* register-blocked GEMM/Conv first */
    cases_unary();
    cases_binary();
    cases_conv();
    cases_gemm();
    /* GEMM and Conv again with the other kernel family (local-memory tiles
     * on GPUs, register blocks elsewhere): both must agree with the cpu */
    for (int d = 0; d < n_devs; d++)
        if (devs[d].is_ocl)
            ocl_debug_inject(&devs[d].dev, 3);
    label_suffix = " (tiled kernels)";
    cases_conv();
    cases_gemm();
    label_suffix = "";
    for (int d = 0; d < n_devs; d++)
        if (devs[d].is_ocl)
            ocl_debug_inject(&devs[d].dev, 4);
    cases_pool();
    cases_norm();
    cases_reduce();
    cases_movement();
    cases_resize();
    cases_refusals();
    cases_faults();
    for (int d = 0; d < n_devs; d++)
        devs[d].dev.iface->destroy(devs[d].dev.ctx);
    printf("%d passed, %d failed\n", passed, failed);
    if (passed + failed == 0) {
        printf("no case matched the filters\n");
        return 1;
    }
    return failed ? 1 : 0;
}
