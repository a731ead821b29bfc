/* `tandem compare`: the plan against the cpu fp32 golden reference, node
 * by node. Both sessions run on the same inputs with an observer that keeps
 * a copy of every node output (tdm_session_set_observer); outputs are
 * matched by node name and output index. */
#include "cli.h"
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void usage_compare(FILE *f)
{
    fputs("usage: tandem compare MODEL [--devices LIST] [--json] [--top K] [--min-cosine C] [--max-abs X]\n"
          "                      [--input NAME=FILE]... [--shape NAME=DxD]... [--threads N] [RUN OPTIONS]\n"
          "\n"
          "Runs the plan and the cpu fp32 golden reference on the same inputs (fixed-seed\n"
          "random unless given) and compares every node output: max abs error, RMSE and\n"
          "cosine similarity. Prints the first node (in execution order) whose error crosses\n"
          "the threshold (cosine below C, default 0.999, or max abs error above X when\n"
          "given) and the K worst nodes (default 10). A plugin device's outputs (opencl) are\n"
          "copied to the host for the comparison; a node with no numeric output is skipped\n"
          "(counted), and a compare that compared no node exits 4.\n"
          "\n"
          "  --json         one JSON document on stdout instead\n"
          "  --top K        how many of the worst nodes to list (default 10; 0: all)\n"
          "  (--min-cosine and --max-abs: see the run options below)\n"
          "\n",
          f);
    usage_runopts(f);
}

/* The outputs of one run, by node index of its plan. */
typedef struct cap_node {
    int seen;
    size_t order;          /* execution position */
    int n_out;
    tdm_tensor **out;      /* clones (NULL: not on the host) */
} cap_node;

typedef struct capture {
    const tdm_plan *plan;
    size_t n;
    cap_node *nodes;
    size_t next;
    int oom;
} capture;

static void cap_observe(void *user, const tdm_event *ev)
{
    capture *c = user;
    if (ev->kind != TDM_EVENT_NODE || ev->node_index >= c->n)
        return;
    cap_node *x = &c->nodes[ev->node_index];
    if (x->seen)
        return;
    x->seen = 1;
    x->order = c->next++;
    x->n_out = ev->n_outputs;
    x->out = calloc((size_t)ev->n_outputs + 1, sizeof *x->out);
    if (!x->out) {
        c->oom = 1;
        return;
    }
    for (int i = 0; i < ev->n_outputs; i++) {
        const tdm_tensor *t = ev->outputs ? ev->outputs[i] : NULL;
        if (t && tdm_tensor_kind(t) == TDM_KIND_TENSOR && tdm_tensor_clone(t, &x->out[i]) != TDM_OK)
            c->oom = 1;
    }
}

static int cap_init(capture *c, const tdm_plan *plan)
{
    memset(c, 0, sizeof *c);
    c->plan = plan;
    c->n = tdm_plan_node_count(plan);
    c->nodes = calloc(c->n + 1, sizeof *c->nodes);
    return c->nodes ? 0 : -1;
}

static void cap_free(capture *c)
{
    for (size_t k = 0; c->nodes && k < c->n; k++) {
        for (int i = 0; i < c->nodes[k].n_out; i++)
            tdm_tensor_destroy(c->nodes[k].out[i]);
        free(c->nodes[k].out);
    }
    free(c->nodes);
    memset(c, 0, sizeof *c);
}

/* Element i as a double; 0 when the type has no numeric reading. */
static int numeric(tdm_dtype t)
{
    switch (t) {
    case TDM_FLOAT: case TDM_DOUBLE: case TDM_FLOAT16: case TDM_BFLOAT16: case TDM_INT8: case TDM_UINT8:
    case TDM_INT16: case TDM_UINT16: case TDM_INT32: case TDM_UINT32: case TDM_INT64: case TDM_UINT64: case TDM_BOOL:
        return 1;
    default:
        return 0;
    }
}

static double elem(const tdm_tensor *t, size_t i)
{
    const void *p = tdm_tensor_cdata(t);
    switch (tdm_tensor_dtype(t)) {
    case TDM_FLOAT: return ((const float *)p)[i];
    case TDM_DOUBLE: return ((const double *)p)[i];
    case TDM_FLOAT16: return cli_f16_to_f32(((const uint16_t *)p)[i]);
    case TDM_BFLOAT16: return cli_bf16_to_f32(((const uint16_t *)p)[i]);
    case TDM_INT8: return ((const int8_t *)p)[i];
    case TDM_UINT8: case TDM_BOOL: return ((const uint8_t *)p)[i];
    case TDM_INT16: return ((const int16_t *)p)[i];
    case TDM_UINT16: return ((const uint16_t *)p)[i];
    case TDM_INT32: return ((const int32_t *)p)[i];
    case TDM_UINT32: return ((const uint32_t *)p)[i];
    case TDM_INT64: return (double)((const int64_t *)p)[i];
    case TDM_UINT64: return (double)((const uint64_t *)p)[i];
    default: return 0;
    }
}

typedef diag_cmp_row cmp_row;

/* Compares two tensors; 0 when comparable. */
static int cmp_tensor(const tdm_tensor *a, const tdm_tensor *r, double *max_abs, double *rmse, double *cosine,
                      int *nonfinite)
{
    if (!a || !r || !numeric(tdm_tensor_dtype(a)) || !numeric(tdm_tensor_dtype(r)))
        return -1;
    size_t n = tdm_tensor_count(a);
    if (n != tdm_tensor_count(r) || tdm_tensor_rank(a) != tdm_tensor_rank(r))
        return -1;
    double mx = 0, se = 0, dot = 0, na = 0, nr = 0;
    int nf = 0;
    for (size_t i = 0; i < n; i++) {
        double x = elem(a, i), y = elem(r, i);
        if (!isfinite(x) || !isfinite(y)) {
            if (isfinite(y) || (isnan(x) != isnan(y)) || (isinf(x) && x != y))
                nf = 1;
            continue;
        }
        double d = fabs(x - y);
        if (d > mx)
            mx = d;
        se += d * d;
        dot += x * y;
        na += x * x;
        nr += y * y;
    }
    *max_abs = mx;
    *rmse = n ? sqrt(se / (double)n) : 0;
    if (mx == 0 || (na == 0 && nr == 0))
        *cosine = 1; /* identical values: exactly 1, not 1 - rounding */
    else if (na == 0 || nr == 0)
        *cosine = 0;
    else
        *cosine = dot / (sqrt(na) * sqrt(nr));
    *nonfinite = nf;
    return 0;
}

static int by_order(const void *x, const void *y)
{
    const cmp_row *a = x, *b = y;
    return a->order < b->order ? -1 : a->order > b->order;
}

static int by_worst(const void *x, const void *y)
{
    const cmp_row *a = x, *b = y;
    if (a->nonfinite != b->nonfinite)
        return b->nonfinite - a->nonfinite;
    if (a->cosine != b->cosine)
        return a->cosine < b->cosine ? -1 : 1;
    if (a->max_abs != b->max_abs)
        return a->max_abs > b->max_abs ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

typedef struct cmp_args {
    diag_common c;
    int json, has_abs;
    long long top;
    double min_cos, max_abs;
} cmp_args;

int diag_threshold_opt(const char *cmd, int argc, char **argv, int *i, diag_common *d, double *min_cos,
                       int *has_abs, double *max_abs, int *rc)
{
    const char *val;
    int r;
    *rc = 0;
    if ((r = cli_opt_value(cmd, argc, argv, i, "--min-cosine", &val)) != 0) {
        if (r < 0 || diag_parse_ratio(cmd, "--min-cosine", val, min_cos)) {
            *rc = EXIT_USAGE;
            return 1;
        }
        d->ro.min_cosine = *min_cos;
        d->ro.has_min_cosine = 1;
        return 1;
    }
    if ((r = cli_opt_value(cmd, argc, argv, i, "--max-abs", &val)) != 0) {
        char *end = NULL;
        double v = r > 0 ? strtod(val, &end) : 0;
        if (r < 0 || !*val || *end || !(v >= 0) || isinf(v)) {
            if (r > 0)
                cli_error("%s: --max-abs expects a non-negative number, not '%s'", cmd, val);
            *rc = EXIT_USAGE;
            return 1;
        }
        *max_abs = v;
        *has_abs = 1;
        d->ro.max_abs = v;
        d->ro.has_max_abs = 1;
        return 1;
    }
    return 0;
}

static int cmp_parse(int argc, char **argv, cmp_args *a)
{
    const char *cmd = "compare", *val;
    int rc, r;
    a->top = 10;
    a->min_cos = 0.999;
    for (int i = 1; i < argc; i++) {
        if ((r = cli_opt_value(cmd, argc, argv, &i, "--top", &val)) != 0) {
            if (r < 0 || cli_parse_i64(val, &a->top)) {
                if (r > 0)
                    cli_error("compare: --top expects a whole number (0: all), not '%s'", val);
                return EXIT_USAGE;
            }
        } else if (diag_threshold_opt(cmd, argc, argv, &i, &a->c, &a->min_cos, &a->has_abs, &a->max_abs, &rc)) {
            if (rc)
                return rc;
        } else if (strcmp(argv[i], "--json") == 0) {
            a->json = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage_compare(stdout);
            return -1;
        } else if (diag_common_opt(cmd, argc, argv, &i, &a->c, &rc)) {
            if (rc)
                return rc;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("compare: unknown option '%s'; `tandem compare --help` lists the options", argv[i]);
            return EXIT_USAGE;
        } else if (!a->c.model) {
            a->c.model = argv[i];
        } else {
            cli_error("compare: one model only ('%s' and '%s')", a->c.model, argv[i]);
            return EXIT_USAGE;
        }
    }
    if (!a->c.model) {
        cli_error("compare: no model given; usage: tandem compare MODEL --devices LIST");
        return EXIT_USAGE;
    }
    return 0;
}

static void row_json(jw *w, const tdm_plan *plan, const cmp_row *r)
{
    const char *name = "", *op = "", *dev = "", *reason = "", *detail = "";
    tdm_plan_node(plan, r->node, &name, &op, &dev, &reason, &detail);
    jw_obj_begin(w);
    jw_key(w, "node");
    jw_str(w, name);
    jw_key(w, "op");
    jw_str(w, op);
    jw_key(w, "device");
    jw_str(w, dev);
    jw_key(w, "reason");
    jw_str(w, reason);
    jw_key(w, "position");
    jw_uint(w, r->order);
    jw_key(w, "max_abs");
    jw_num(w, r->max_abs);
    jw_key(w, "rmse");
    jw_num(w, r->rmse);
    jw_key(w, "cosine");
    jw_num(w, r->cosine);
    jw_key(w, "nonfinite");
    jw_bool(w, r->nonfinite);
    jw_key(w, "crosses");
    jw_bool(w, r->crosses);
    jw_obj_end(w);
}

static void row_text(const tdm_plan *plan, const cmp_row *r)
{
    const char *name = "", *op = "", *dev = "", *reason = "", *detail = "";
    tdm_plan_node(plan, r->node, &name, &op, &dev, &reason, &detail);
    size_t l = strlen(name);
    /* 1 - cosine tells apart rows whose cosines all print as 1.000000 */
    printf("%5zu  %-40s %-14.14s %-16.16s %11.4g %11.4g %10.6f %10.3e%s%s\n", r->order,
           l > 40 ? name + l - 40 : name, op, dev, r->max_abs, r->rmse, r->cosine, 1.0 - r->cosine,
           r->nonfinite ? "  NaN/Inf" : "", r->crosses ? "  <" : "");
}

void diag_cmp_free(diag_cmp *r)
{
    free(r->rows);
    memset(r, 0, sizeof *r);
}

int diag_compare(const char *cmd, diag_setup *x, const diag_common *d, double min_cos, int has_abs, double max_abs,
                 diag_cmp *res)
{
    tdm_session *ref = NULL;
    capture cp, cr;
    int rc;
    memset(&cp, 0, sizeof cp);
    memset(&cr, 0, sizeof cr);
    memset(res, 0, sizeof *res);
    res->first = -1;
    if ((rc = diag_session(cmd, x, d, "cpu", &ref)) != 0)
        goto done;
    const tdm_plan *plan = tdm_session_plan(x->s), *rplan = tdm_session_plan(ref);
    if (cap_init(&cp, plan) || cap_init(&cr, rplan)) {
        rc = cli_fail(TDM_E_NOMEM, NULL, "out of memory");
        goto done;
    }
    tdm_session_set_observer(x->s, cap_observe, &cp);
    tdm_session_set_observer(ref, cap_observe, &cr);
    rc = diag_run(x, x->s);
    tdm_session_set_observer(x->s, NULL, NULL);
    if (rc || (rc = diag_run(x, ref)) != 0)
        goto done;
    if (cp.oom || cr.oom) {
        rc = cli_fail(TDM_E_NOMEM, NULL, "out of memory while keeping every node output");
        goto done;
    }
    res->rows = calloc(cp.n + 1, sizeof *res->rows);
    if (!res->rows) {
        rc = cli_fail(TDM_E_NOMEM, NULL, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < cp.n; k++) {
        const cap_node *p = &cp.nodes[k];
        const char *name = NULL;
        if (!p->seen || tdm_plan_node(plan, k, &name, NULL, NULL, NULL, NULL) != TDM_OK)
            continue;
        /* the reference node of the same name */
        size_t j = k;
        const char *rname = NULL;
        if (j >= cr.n || tdm_plan_node(rplan, j, &rname, NULL, NULL, NULL, NULL) != TDM_OK || strcmp(rname, name))
            for (j = 0; j < cr.n; j++)
                if (tdm_plan_node(rplan, j, &rname, NULL, NULL, NULL, NULL) == TDM_OK && strcmp(rname, name) == 0)
                    break;
        if (j >= cr.n || !cr.nodes[j].seen) {
            res->skipped++;
            continue;
        }
        cmp_row r;
        memset(&r, 0, sizeof r);
        r.node = k;
        r.order = p->order;
        r.cosine = 1;
        for (int i = 0; i < p->n_out && i < cr.nodes[j].n_out; i++) {
            double ma, rm, co;
            int nf;
            if (cmp_tensor(p->out[i], cr.nodes[j].out[i], &ma, &rm, &co, &nf))
                continue;
            r.compared++;
            if (ma > r.max_abs)
                r.max_abs = ma;
            if (rm > r.rmse)
                r.rmse = rm;
            if (co < r.cosine)
                r.cosine = co;
            r.nonfinite |= nf;
        }
        if (!r.compared) {
            res->skipped++;
            continue;
        }
        r.crosses = r.nonfinite || r.cosine < min_cos || (has_abs && r.max_abs > max_abs);
        res->crossing += (size_t)r.crosses;
        res->rows[res->n_rows++] = r;
    }
    qsort(res->rows, res->n_rows, sizeof *res->rows, by_order);
    for (size_t k = 0; k < res->n_rows && res->first < 0; k++)
        if (res->rows[k].crosses)
            res->first = (long)k;
done:
    tdm_session_destroy(ref);
    cap_free(&cp);
    cap_free(&cr);
    if (rc)
        diag_cmp_free(res);
    return rc;
}

/* rows sorted worst first (a copy the caller frees). */
diag_cmp_row *diag_cmp_worst(const diag_cmp *r)
{
    diag_cmp_row *w = malloc((r->n_rows + 1) * sizeof *w);
    if (!w)
        return NULL;
    if (r->n_rows)
        memcpy(w, r->rows, r->n_rows * sizeof *w);
    qsort(w, r->n_rows, sizeof *w, by_worst);
    return w;
}

int cmd_compare(int argc, char **argv)
{
    cmp_args a;
    memset(&a, 0, sizeof a);
    diag_common_init(&a.c);
    diag_setup x;
    memset(&x, 0, sizeof x);
    diag_cmp res;
    memset(&res, 0, sizeof res);
    cmp_row *rows = NULL;
    int rc = cmp_parse(argc, argv, &a);
    if (rc) {
        diag_common_free(&a.c);
        return rc < 0 ? 0 : rc;
    }
    if ((rc = diag_open("compare", &a.c, &x)) != 0 ||
        (rc = diag_compare("compare", &x, &a.c, a.min_cos, a.has_abs, a.max_abs, &res)) != 0)
        goto done;
    const tdm_plan *plan = tdm_session_plan(x.s);
    size_t n_rows = res.n_rows, skipped = res.skipped, crossing = res.crossing;
    if (!n_rows && skipped) {
        /* a compare that compared nothing has not shown the plan is right */
        cli_error("compare: none of the %zu node%s could be compared: no output of %s was a numeric tensor on "
                  "the host in both runs",
                  skipped, skipped == 1 ? "" : "s", skipped == 1 ? "it" : "theirs");
        rc = EXIT_DEVICE;
        goto done;
    }
    const cmp_row *first = res.first >= 0 ? &res.rows[res.first] : NULL;
    cmp_row last = n_rows ? res.rows[n_rows - 1] : (cmp_row){0, 0, 0, 0, 0, 1, 0, 0};
    if (!(rows = diag_cmp_worst(&res))) {
        rc = cli_fail(TDM_E_NOMEM, NULL, "out of memory");
        goto done;
    }
    size_t top = a.top && (size_t)a.top < n_rows ? (size_t)a.top : n_rows; /* 0: all */
    char thr[96];
    if (a.has_abs)
        snprintf(thr, sizeof thr, "cosine < %g or max abs > %g", a.min_cos, a.max_abs);
    else
        snprintf(thr, sizeof thr, "cosine < %g", a.min_cos);
    if (a.json) {
        jw w;
        jw_init(&w, stdout);
        jw_obj_begin(&w);
        jw_key(&w, "model");
        jw_str(&w, a.c.model);
        jw_key(&w, "devices");
        jw_arr_begin_inline(&w);
        for (size_t d = 0; d < tdm_plan_device_count(plan); d++)
            jw_str(&w, tdm_plan_device_name(plan, d));
        jw_arr_end(&w);
        jw_key(&w, "reference");
        jw_str(&w, "cpu");
        jw_key(&w, "threshold");
        jw_obj_begin(&w);
        jw_key(&w, "min_cosine");
        jw_num(&w, a.min_cos);
        jw_key(&w, "max_abs");
        if (a.has_abs)
            jw_num(&w, a.max_abs);
        else
            jw_null(&w);
        jw_obj_end(&w);
        jw_key(&w, "nodes_compared");
        jw_uint(&w, n_rows);
        jw_key(&w, "nodes_skipped");
        jw_uint(&w, skipped);
        jw_key(&w, "nodes_crossing");
        jw_uint(&w, crossing);
        jw_key(&w, "first_crossing");
        if (first)
            row_json(&w, plan, first);
        else
            jw_null(&w);
        jw_key(&w, "last_node");
        if (n_rows)
            row_json(&w, plan, &last);
        else
            jw_null(&w);
        jw_key(&w, "worst");
        jw_arr_begin(&w);
        for (size_t k = 0; k < top; k++)
            row_json(&w, plan, &rows[k]);
        jw_arr_end(&w);
        jw_key(&w, "nodes");
        jw_arr_begin(&w);
        for (size_t k = 0; k < n_rows; k++)
            row_json(&w, plan, &res.rows[k]);
        jw_arr_end(&w);
        jw_obj_end(&w);
        jw_finish(&w);
    } else {
        printf("compare %s: plan on", a.c.model);
        for (size_t d = 0; d < tdm_plan_device_count(plan); d++)
            printf("%s%s", d ? "," : " ", tdm_plan_device_name(plan, d));
        printf(" against the cpu fp32 reference\n");
        printf("nodes compared: %zu, skipped: %zu, crossing the threshold (%s): %zu\n", n_rows, skipped, thr,
               crossing);
        printf("\n%5s  %-40s %-14s %-16s %11s %11s %10s %10s\n", "pos", "node", "op", "device", "max abs", "rmse",
               "cosine", "1-cosine");
        if (first) {
            printf("first node crossing the threshold:\n");
            row_text(plan, first);
        } else {
            printf("no node crosses the threshold\n");
        }
        if (n_rows) {
            printf("last node:\n");
            row_text(plan, &last);
        }
        printf("worst %zu:\n", top);
        for (size_t k = 0; k < top; k++)
            row_text(plan, &rows[k]);
    }
done:
    free(rows);
    diag_cmp_free(&res);
    diag_close(&x);
    diag_common_free(&a.c);
    return rc;
}
