/* tandem audit MODEL... --devices LIST [RUN OPTIONS] [--shape [MODEL:]NAME=DxD]...
 *              [--top N] [--json]
 *
 * Models x devices before a migration: for every model and every device of
 * LIST but cpu, the plan onto that device (with cpu behind it) says whether
 * the model fits, falls back (nodes on cpu, counted by reason code and
 * grouped by op type) or is blocked (the plan cannot be made, or no node runs
 * there), with the partitions, the modeled cost and a hint per group. Reads
 * the plan through the public API and its ledger (DESIGN.md "The ledger"). */
#include "audit.h"
#include "cli.h"
#include "json.h"
#include "story.h"

#include <cjson/cJSON.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void usage_audit(FILE *f)
{
    fputs("usage: tandem audit MODEL... --devices LIST [RUN OPTIONS] [--shape [MODEL:]NAME=DxD]... [--top N] [--json]\n"
          "\n"
          "Checks every model against every device of LIST (cpu excepted) before you\n"
          "migrate: plans each model onto each device with cpu behind it and says whether\n"
          "it fits (every node on the device), falls back (nodes on cpu, counted by reason\n"
          "code and grouped by op type) or is blocked (no plan, or no node on the device).\n"
          "For each cell: the partitions, the modeled time per run against all-cpu, what\n"
          "the fallback nodes and the copies cost, and per group the first node, the\n"
          "device's sentence and what you can do about it. Then the top blockers per\n"
          "device over all models.\n"
          "\n"
          "  --shape [MODEL:]NAME=DxD  fix the dynamic dimensions of input NAME of every model\n"
          "                      that has one, or of MODEL only (its path as given or its file\n"
          "                      name); '?' keeps a dimension; static-shape devices need it\n"
          "  --top N             groups shown per cell and per device (default 5; 0: all)\n"
          "  --json              print one JSON document instead\n"
          "\n"
          "Exit status: 0 when every plan was made and is within the fallback policy (a\n"
          "fallback under the default --fallback allow is reported, not an error); 3 when a\n"
          "plan violates --fallback deny|deny-compute or a budget (every offending node is\n"
          "listed); 2, 4 or 5 when a model or device could not be loaded (the other cells\n"
          "are still audited).\n"
          "\n",
          f);
    usage_runopts(f);
}

enum { CELL_FITS, CELL_FALLS_BACK, CELL_BLOCKED };
static const char *const verdict_word[] = {"fits", "falls back", "blocked"};
static const char *const verdict_key[] = {"fits", "falls_back", "blocked"};

typedef struct audit_part {
    char *device;
    size_t nodes;
    double ms;
} audit_part;

typedef struct audit_cell {
    size_t model, device;  /* indices into the audit's lists */
    int verdict;
    int rc;                /* exit code of a failed plan, 0 otherwise */
    char *error;           /* why blocked */
    story_tally t;         /* the nodes off the device by reason and op type */
    audit_part *parts;
    size_t n_parts;
    double total_ms, copies_ms, cpu_ms; /* cpu_ms: the same model all on cpu */
    int modeled, complete;
    uint64_t boundary;
    size_t violations;
    char *policy;          /* the plan's verdict sentence when it violates the policy */
    char **offending;      /* every offending node: "NAME (REASON): sentence" */
    story_rescues rescues; /* the rescue pass's attempts (story.h) */
} audit_cell;

/* --shape [MODEL:]NAME=DxD: for every model with an input NAME, or for
 * MODEL only (its path as given, or its file name). */
typedef struct audit_shape {
    cli_kv kv;             /* kv.name: NAME, after any "MODEL:" */
    long model;            /* the model it is scoped to, -1: every model */
    size_t used;           /* models it applied to */
} audit_shape;

typedef struct audit {
    const char **models;
    size_t n_models;
    char **devices;        /* LIST without cpu */
    size_t n_devices;
    char **dyn;            /* per model: its inputs with dynamic dimensions no --shape fixes, or NULL */
    double *cpu_ms;        /* per model: the all-cpu modeled time, < 0 when unknown */
    audit_cell *cells;
    size_t n_cells;
    story_group **blockers; /* per device: its cells' groups merged (device_blockers) */
    size_t *n_blockers;
    size_t top;
} audit;

static void cell_free(audit_cell *c)
{
    free(c->error);
    free(c->policy);
    for (size_t k = 0; c->offending && k < c->violations; k++)
        free(c->offending[k]);
    free(c->offending);
    story_tally_free(&c->t);
    for (size_t k = 0; k < c->n_parts; k++)
        free(c->parts[k].device);
    free(c->parts);
}

const char *audit_jstr(const cJSON *o, const char *key)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(x) ? x->valuestring : "";
}

double audit_jnum(const cJSON *o, const char *key, double dflt)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(x) ? x->valuedouble : dflt;
}

/* Fills the cell from the plan's ledger; -1 when out of memory or the
 * ledger cannot be read. */
static int cell_from_ledger(audit_cell *c, const char *device, const char *ledger)
{
    cJSON *root = cJSON_Parse(ledger);
    if (!root)
        return -1;
    int rc = -1;
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(root, "partitions");
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(root, "summary");
    const cJSON *est = cJSON_GetObjectItemCaseSensitive(sum, "estimated_ms");
    if (story_tally_nodes(&c->t, nodes, device, c->model))
        goto done;
    story_rescues_count(&c->rescues, root);
    const cJSON *p;
    cJSON_ArrayForEach(p, parts)
    {
        audit_part *a = realloc(c->parts, (c->n_parts + 1) * sizeof *a);
        if (!a)
            goto done;
        c->parts = a;
        if (!(a[c->n_parts].device = story_strdup(audit_jstr(p, "device"))))
            goto done;
        a[c->n_parts].nodes = (size_t)audit_jnum(p, "nodes", 0);
        a[c->n_parts++].ms = audit_jnum(p, "estimated_ms", -1);
    }
    c->boundary = (uint64_t)audit_jnum(sum, "boundary_bytes", 0);
    c->total_ms = cJSON_IsObject(est) ? audit_jnum(est, "total", -1) : -1;
    c->copies_ms = cJSON_IsObject(est) ? audit_jnum(est, "copies", -1) : -1;
    c->modeled = cJSON_IsObject(est) && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(est, "modeled"));
    c->complete = cJSON_IsObject(est) && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(est, "complete"));
    /* the policy's verdict: its sentence and every offending node */
    const cJSON *pol = cJSON_GetObjectItemCaseSensitive(root, "policy");
    const cJSON *viol = cJSON_GetObjectItemCaseSensitive(pol, "violations");
    size_t nv = cJSON_IsArray(viol) ? (size_t)cJSON_GetArraySize(viol) : 0;
    if (nv) {
        if (!(c->policy = story_strdup(audit_jstr(pol, "error"))) || !(c->offending = calloc(nv, sizeof *c->offending)))
            goto done;
        const cJSON *v;
        cJSON_ArrayForEach(v, viol)
        {
            const char *node = audit_jstr(v, "node");
            size_t len = strlen(node) + strlen(audit_jstr(v, "reason")) + strlen(audit_jstr(v, "detail")) + 32;
            if (!(c->offending[c->violations] = malloc(len)))
                goto done;
            snprintf(c->offending[c->violations++], len, "%s (%s): %s", *node ? node : "(graph output)",
                     audit_jstr(v, "reason"), audit_jstr(v, "detail"));
        }
    }
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

typedef struct shape_scope {
    const audit_shape *shapes;
    size_t n_shapes, model;
} shape_scope;

/* Whether a --shape fixes input name of the scope's model. */
static int shape_fixes(const char *name, void *arg)
{
    const shape_scope *x = arg;
    for (size_t k = 0; k < x->n_shapes; k++)
        if ((x->shapes[k].model < 0 || (size_t)x->shapes[k].model == x->model) &&
            strcmp(x->shapes[k].kv.name, name) == 0)
            return 1;
    return 0;
}

/* What the user can do about a group of fallback nodes: one sentence, from
 * the reason code and the device's sentence. */
void audit_hint(const char *r, const char *op, const char *d, const char *device, const char *dyn, char *out,
                size_t size)
{
    if (strcmp(r, "OP_UNSUPPORTED") == 0)
        snprintf(out, size,
                 "%s has no %s: replace it in the model with ops the device lists, or accept cpu for it "
                 "(--pin %s=cpu keeps --fallback deny quiet about it)",
                 device, op, op);
    else if (strcmp(r, "DTYPE_UNSUPPORTED") == 0)
        snprintf(out, size,
                 "%s lacks this element type: export or quantize the model to a type the device lists, or accept "
                 "cpu for it (--pin %s=cpu)",
                 device, op);
    else if (strcmp(r, "ATTR_UNSUPPORTED") == 0 && strstr(d, "constant"))
        snprintf(out, size,
                 "the device needs that input as a constant: fix the input shapes (--shape) and fold constant "
                 "subgraphs before export, or accept cpu for it (--pin %s=cpu)",
                 op);
    else if (strcmp(r, "ATTR_UNSUPPORTED") == 0)
        snprintf(out, size,
                 "an attribute is outside the device's limit (the sentence names it): re-export with a value it "
                 "allows, or accept cpu for it (--pin %s=cpu)",
                 op);
    else if (strcmp(r, "SHAPE_UNSUPPORTED") == 0 && strstr(d, "image sizes it was compiled for"))
        snprintf(out, size, "the device takes only the image sizes it was compiled for: --bucket profile pads each "
                            "image to the smallest that holds it and crops the outputs (or --shape one of them)");
    else if (strcmp(r, "SHAPE_UNSUPPORTED") == 0 && strstr(d, "static shapes") && (!dyn || *dyn))
        snprintf(out, size, "dynamic dimensions: give --shape for %s", dyn ? dyn : "the models' dynamic inputs");
    else if (strcmp(r, "SHAPE_UNSUPPORTED") == 0 && strstr(d, "static shapes"))
        snprintf(out, size,
                 "a dimension the inputs do not fix (computed from data, or inside control flow): the device "
                 "cannot take it; fix the inputs with --shape where they are dynamic, or accept cpu for it");
    else if (strcmp(r, "SHAPE_UNSUPPORTED") == 0)
        snprintf(out, size,
                 "a rank or dimension above the device's limit: reshape to a lower rank in the model or use a "
                 "smaller --shape, or accept cpu for it (--pin %s=cpu)",
                 op);
    else if (strcmp(r, "MEMORY") == 0)
        snprintf(out, size,
                 "the partition does not fit the device's memory: a smaller --shape, or --granularity op|auto "
                 "to cut smaller partitions");
    else if (strcmp(r, "PRECISION") == 0)
        snprintf(out, size,
                 "kept off the device's narrow type by calibration or the precision guard: the error is "
                 "measured; --min-cosine moves the threshold");
    else if (strcmp(r, "COST") == 0)
        snprintf(out, size, "the planner's choice (cheaper on cpu once copies count): --pin %s=%s forces it",
                 op, device);
    else if (strcmp(r, "GRANULARITY") == 0)
        snprintf(out, size, "moved to keep a partition whole: --granularity op or auto keeps it on %s", device);
    else if (strcmp(r, "DEVICE_FAULT") == 0)
        snprintf(out, size, "the device failed on it: see the device's message");
    else
        out[0] = '\0';
}

/* Sets on so the --shape values that apply to model m (index model),
 * counting each one's use. */
static tdm_status apply_shapes(tdm_session_options *so, const tdm_model *m, size_t model, audit_shape *shapes,
                               size_t n_shapes)
{
    for (size_t k = 0; k < n_shapes; k++) {
        audit_shape *x = &shapes[k];
        if (x->model >= 0 && (size_t)x->model != model)
            continue;
        for (size_t i = 0; i < tdm_model_input_count(m); i++) {
            tdm_value_info vi;
            int rank;
            int64_t dims[CLI_MAX_RANK];
            if (tdm_model_input(m, i, &vi) != TDM_OK || strcmp(vi.name, x->kv.name) != 0 ||
                cli_parse_dims("audit", x->kv.name, x->kv.value, &rank, dims))
                continue;
            tdm_status st = tdm_session_options_set_shape(so, x->kv.name, rank, dims);
            if (st)
                return st;
            x->used++;
        }
    }
    return TDM_OK;
}

/* Plans model m onto device (with cpu behind it); fills the cell. Returns
 * 0, or -1 when out of memory. */
static int audit_cell_plan(tdm_ctx *ctx, const tdm_model *m, size_t model, const cli_runopts *ro,
                           audit_shape *shapes, size_t n_shapes, const char *device, audit_cell *c)
{
    tdm_session_options *so = NULL;
    tdm_plan *plan = NULL;
    char *ledger = NULL;
    char list[1024];
    int rc = -1;
    tdm_status st = tdm_session_options_create(&so);
    if (st)
        goto done;
    if ((c->rc = cli_runopts_apply(ro, so)) != 0) {
        c->verdict = CELL_BLOCKED;
        rc = (c->error = story_strdup("the run options were refused (see above)")) ? 0 : -1;
        goto done;
    }
    if ((st = apply_shapes(so, m, model, shapes, n_shapes)) != TDM_OK)
        goto done;
    snprintf(list, sizeof list, "%s,cpu", device);
    if ((st = tdm_session_options_set_devices(so, list)) != TDM_OK ||
        (st = tdm_plan_create(ctx, m, so, &plan)) != TDM_OK) {
        c->verdict = CELL_BLOCKED;
        c->rc = cli_exit_code(st);
        const char *why = tdm_ctx_error(ctx);
        rc = (c->error = story_strdup(why && *why ? why : tdm_status_str(st))) ? 0 : -1;
        goto done;
    }
    if (tdm_plan_ledger_json(plan, &ledger) != TDM_OK || cell_from_ledger(c, device, ledger))
        goto done;
    c->verdict = c->t.on_device == 0 ? CELL_BLOCKED : c->t.off_device ? CELL_FALLS_BACK : CELL_FITS;
    if (c->t.on_device == 0 && !(c->error = story_strdup("no node of the model runs on the device")))
        goto done;
    rc = 0;
done:
    tdm_free(ledger);
    tdm_plan_destroy(plan);
    tdm_session_options_destroy(so);
    return rc;
}

/* The model's modeled time all on cpu, < 0 when it cannot be planned. */
static double all_cpu_ms(tdm_ctx *ctx, const tdm_model *m, size_t model, audit_shape *shapes, size_t n_shapes)
{
    tdm_session_options *so = NULL;
    double ms = -1;
    if (tdm_session_options_create(&so) == TDM_OK && apply_shapes(so, m, model, shapes, n_shapes) == TDM_OK)
        ms = story_all_cpu_ms(ctx, m, so);
    tdm_session_options_destroy(so);
    return ms;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static size_t parts_on(const audit_cell *c, const char *device)
{
    size_t n = 0;
    for (size_t k = 0; k < c->n_parts; k++)
        n += strcmp(c->parts[k].device, device) == 0;
    return n;
}

/* Top blockers of device d over every model: the groups of its cells
 * merged by op type and reason, largest first. */
static int device_blockers(const audit *a, size_t d, story_group **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    for (size_t k = 0; k < a->n_cells; k++) {
        const audit_cell *c = &a->cells[k];
        if (c->device != d)
            continue;
        for (size_t g = 0; g < c->t.n_groups; g++)
            if (story_add_group(out, n, c->model, c->t.groups[g].op, c->t.groups[g].reason, c->t.groups[g].node,
                                c->t.groups[g].detail, c->t.groups[g].count, c->t.groups[g].ms))
                return -1;
    }
    story_sort_groups(*out, *n);
    return 0;
}

static size_t shown(const audit *a, size_t n) { return a->top && a->top < n ? a->top : n; }

static void print_ms(double ms)
{
    if (ms < 0)
        fputs("?", stdout);
    else
        printf("%.3f", ms);
}

static int print_text(const audit *a)
{
    char buf[512], h[512];
    size_t wm = 5, wd = 6;
    for (size_t i = 0; i < a->n_models; i++)
        if (strlen(base_name(a->models[i])) > wm)
            wm = strlen(base_name(a->models[i]));
    for (size_t d = 0; d < a->n_devices; d++)
        if (strlen(a->devices[d]) > wd)
            wd = strlen(a->devices[d]);
    printf("audit: %zu model%s x %zu device%s (times are modeled)\n\n", a->n_models, a->n_models == 1 ? "" : "s",
           a->n_devices, a->n_devices == 1 ? "" : "s");
    printf("%-*s  %-*s  %-10s  %9s  %5s  %10s  %10s  %s\n", (int)wm, "model", (int)wd, "device", "verdict",
           "on device", "parts", "ms", "all-cpu ms", "fallbacks by reason");
    for (size_t k = 0; k < a->n_cells; k++) {
        const audit_cell *c = &a->cells[k];
        char on[32], ms[32], cpu[32];
        story_counts_str(c->t.reasons, c->t.n_reasons, 0, 1, buf, sizeof buf);
        if (c->verdict == CELL_BLOCKED && !c->t.nodes)
            snprintf(on, sizeof on, "-");
        else
            snprintf(on, sizeof on, "%zu/%zu", c->t.on_device, c->t.nodes);
        snprintf(ms, sizeof ms, c->total_ms >= 0 && c->t.nodes ? "%.3f" : "-", c->total_ms);
        snprintf(cpu, sizeof cpu, a->cpu_ms[c->model] >= 0 ? "%.3f" : "-", a->cpu_ms[c->model]);
        printf("%-*s  %-*s  %-10s  %9s  %5zu  %10s  %10s  %s\n", (int)wm, base_name(a->models[c->model]), (int)wd,
               a->devices[c->device], verdict_word[c->verdict], on, c->n_parts, ms, cpu,
               c->t.n_reasons ? buf : (c->error ? c->error : "0"));
    }
    for (size_t k = 0; k < a->n_cells; k++) {
        const audit_cell *c = &a->cells[k];
        const char *dev = a->devices[c->device];
        if (c->verdict == CELL_FITS && !c->violations && !c->rescues.tried)
            continue;
        printf("\n%s on %s: %s", base_name(a->models[c->model]), dev, verdict_word[c->verdict]);
        if (c->error) {
            printf(": %s\n", c->error);
            if (!c->t.nodes)
                continue;
        } else {
            printf(": %zu of %zu nodes on %s, %zu elsewhere\n", c->t.on_device, c->t.nodes, dev, c->t.off_device);
        }
        printf("  partitions: %zu (%zu on %s, %zu on cpu)\n", c->n_parts, parts_on(c, dev), dev,
               c->n_parts - parts_on(c, dev));
        printf("  %s: ", c->modeled ? "modeled" : "estimated");
        print_ms(c->total_ms);
        fputs(" ms per run (all-cpu ", stdout);
        print_ms(a->cpu_ms[c->model]);
        printf(" ms); fallback nodes %.3f ms, copies ", c->t.off_ms);
        print_ms(c->copies_ms);
        printf(" ms, %llu boundary bytes%s\n", (unsigned long long)c->boundary,
               c->complete ? "" : " (some nodes had no estimate)");
        if (c->rescues.tried) {
            char line[512];
            story_rescues_line(&c->rescues, line, sizeof line);
            printf("  rescued: %s\n", line);
        }
        if (c->violations) {
            printf("  policy: %s\n", c->policy);
            for (size_t v = 0; v < c->violations; v++)
                printf("    %s\n", c->offending[v]);
        }
        for (size_t g = 0; g < shown(a, c->t.n_groups); g++) {
            const story_group *x = &c->t.groups[g];
            printf("  %5zu  %-20s %-18s e.g. %s: %s\n", x->count, x->op, x->reason, x->node, x->detail);
            audit_hint(x->reason, x->op, x->detail, dev, a->dyn[c->model], h, sizeof h);
            if (h[0])
                printf("         hint: %s\n", h);
        }
        if (shown(a, c->t.n_groups) < c->t.n_groups)
            printf("  ... %zu more groups (--top 0 shows all)\n", c->t.n_groups - shown(a, c->t.n_groups));
    }
    for (size_t d = 0; d < a->n_devices; d++) {
        const story_group *g = a->blockers[d];
        size_t n = a->n_blockers[d];
        if (n) {
            printf("\ntop blockers on %s (all models):\n", a->devices[d]);
            for (size_t k = 0; k < shown(a, n); k++) {
                audit_hint(g[k].reason, g[k].op, g[k].detail, a->devices[d], a->dyn[g[k].model], h, sizeof h);
                printf("  %5zu  %-20s %-18s %s\n", g[k].count, g[k].op, g[k].reason, g[k].detail);
                if (h[0])
                    printf("         hint: %s\n", h);
            }
        }
    }
    return 0;
}

static void json_group(jw *w, const audit *a, const story_group *g, const char *device, const char *dyn)
{
    char h[512];
    audit_hint(g->reason, g->op, g->detail, device, dyn, h, sizeof h);
    jw_obj_begin(w);
    jw_key(w, "model");
    jw_str(w, a->models[g->model]);
    jw_key(w, "op");
    jw_str(w, g->op);
    jw_key(w, "reason");
    jw_str(w, g->reason);
    jw_key(w, "count");
    jw_uint(w, g->count);
    jw_key(w, "first_node");
    jw_str(w, g->node);
    jw_key(w, "detail");
    jw_str(w, g->detail);
    jw_key(w, "estimated_ms");
    jw_num(w, g->ms);
    jw_key(w, "hint");
    jw_str(w, h[0] ? h : NULL);
    jw_obj_end(w);
}

static int print_json(const audit *a)
{
    jw w;
    jw_init(&w, stdout);
    jw_obj_begin(&w);
    jw_key(&w, "models");
    jw_arr_begin_inline(&w);
    for (size_t i = 0; i < a->n_models; i++)
        jw_str(&w, a->models[i]);
    jw_arr_end(&w);
    jw_key(&w, "devices");
    jw_arr_begin_inline(&w);
    for (size_t d = 0; d < a->n_devices; d++)
        jw_str(&w, a->devices[d]);
    jw_arr_end(&w);
    jw_key(&w, "cells");
    jw_arr_begin(&w);
    for (size_t k = 0; k < a->n_cells; k++) {
        const audit_cell *c = &a->cells[k];
        const char *dev = a->devices[c->device];
        jw_obj_begin(&w);
        jw_key(&w, "model");
        jw_str(&w, a->models[c->model]);
        jw_key(&w, "device");
        jw_str(&w, dev);
        jw_key(&w, "verdict");
        jw_str(&w, verdict_key[c->verdict]);
        if (c->error) {
            jw_key(&w, "error");
            jw_str(&w, c->error);
        }
        jw_key(&w, "nodes");
        jw_uint(&w, c->t.nodes);
        jw_key(&w, "on_device");
        jw_uint(&w, c->t.on_device);
        jw_key(&w, "fallback_nodes");
        jw_uint(&w, c->t.off_device);
        jw_key(&w, "by_reason");
        jw_obj_begin(&w);
        for (size_t r = 0; r < c->t.n_reasons; r++) {
            jw_key(&w, c->t.reasons[r].name);
            jw_uint(&w, c->t.reasons[r].count);
        }
        jw_obj_end(&w);
        jw_key(&w, "rescued");
        jw_obj_begin(&w);
        jw_key(&w, "tried");
        jw_uint(&w, c->rescues.tried);
        jw_key(&w, "kept");
        jw_uint(&w, c->rescues.kept);
        jw_key(&w, "nodes");
        jw_uint(&w, c->rescues.became);
        jw_key(&w, "by_rule");
        jw_obj_begin(&w);
        for (size_t r = 0; r < c->rescues.n_rules; r++) {
            jw_key(&w, c->rescues.rules[r]);
            jw_uint(&w, c->rescues.counts[r]);
        }
        jw_obj_end(&w);
        jw_obj_end(&w);
        jw_key(&w, "groups");
        jw_arr_begin(&w);
        for (size_t g = 0; g < c->t.n_groups; g++)
            json_group(&w, a, &c->t.groups[g], dev, a->dyn[c->model]);
        jw_arr_end(&w);
        jw_key(&w, "partitions");
        jw_arr_begin(&w);
        for (size_t p = 0; p < c->n_parts; p++) {
            jw_obj_begin(&w);
            jw_key(&w, "device");
            jw_str(&w, c->parts[p].device);
            jw_key(&w, "nodes");
            jw_uint(&w, c->parts[p].nodes);
            jw_key(&w, "estimated_ms");
            if (c->parts[p].ms >= 0)
                jw_num(&w, c->parts[p].ms);
            else
                jw_null(&w);
            jw_obj_end(&w);
        }
        jw_arr_end(&w);
        jw_key(&w, "estimated_ms");
        jw_obj_begin(&w);
        jw_key(&w, "total");
        if (c->t.nodes && c->total_ms >= 0)
            jw_num(&w, c->total_ms);
        else
            jw_null(&w);
        jw_key(&w, "fallback_nodes");
        jw_num(&w, c->t.off_ms);
        jw_key(&w, "copies");
        if (c->t.nodes && c->copies_ms >= 0)
            jw_num(&w, c->copies_ms);
        else
            jw_null(&w);
        jw_key(&w, "all_cpu");
        if (a->cpu_ms[c->model] >= 0)
            jw_num(&w, a->cpu_ms[c->model]);
        else
            jw_null(&w);
        jw_key(&w, "modeled");
        jw_bool(&w, c->modeled);
        jw_key(&w, "complete");
        jw_bool(&w, c->complete);
        jw_obj_end(&w);
        jw_key(&w, "boundary_bytes");
        jw_uint(&w, c->boundary);
        jw_key(&w, "policy");
        jw_obj_begin(&w);
        jw_key(&w, "violations");
        jw_uint(&w, c->violations);
        jw_key(&w, "error");
        jw_str(&w, c->policy);
        jw_key(&w, "offending");
        jw_arr_begin(&w);
        for (size_t v = 0; v < c->violations; v++)
            jw_str(&w, c->offending[v]);
        jw_arr_end(&w);
        jw_obj_end(&w);
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_key(&w, "top_blockers");
    jw_obj_begin(&w);
    for (size_t d = 0; d < a->n_devices; d++) {
        jw_key(&w, a->devices[d]);
        jw_arr_begin(&w);
        for (size_t k = 0; k < shown(a, a->n_blockers[d]); k++)
            json_group(&w, a, &a->blockers[d][k], a->devices[d], a->dyn[a->blockers[d][k].model]);
        jw_arr_end(&w);
    }
    jw_obj_end(&w);
    jw_obj_end(&w);
    jw_finish(&w);
    return 0;
}

/* Splits LIST into its entries other than cpu; -1 when out of memory. */
static int split_devices(const char *list, audit *a)
{
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (!(len == 3 && strncmp(p, "cpu", 3) == 0)) {
            char **d = realloc(a->devices, (a->n_devices + 1) * sizeof *d);
            if (!d)
                return -1;
            a->devices = d;
            if (!(d[a->n_devices] = malloc(len + 1)))
                return -1;
            memcpy(d[a->n_devices], p, len);
            d[a->n_devices++][len] = '\0';
        }
        p = e ? e + 1 : p + len;
    }
    return 0;
}

int cmd_audit(int argc, char **argv)
{
    cli_runopts ro;
    audit a;
    int json = 0, rc = 0;
    audit_shape *shapes = calloc((size_t)argc + 1, sizeof *shapes);
    size_t n_shapes = 0;
    int hard = 0; /* the exit code of the first model or device that failed */
    tdm_ctx *ctx = NULL;
    tdm_status st;
    memset(&a, 0, sizeof a);
    a.top = 5;
    cli_runopts_init(&ro);
    a.models = calloc((size_t)argc + 1, sizeof *a.models);
    if (!shapes || !a.models) {
        cli_error("out of memory");
        rc = EXIT_INTERNAL;
        goto done;
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val;
        int r;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage_audit(stdout);
            goto done;
        }
        if (strcmp(arg, "--json") == 0) {
            json = 1;
            continue;
        }
        if (cli_runopts_parse("audit", argc, argv, &i, &ro, &rc)) {
            if (rc)
                goto done;
            continue;
        }
        if ((r = cli_opt_value("audit", argc, argv, &i, "--shape", &val)) != 0) {
            if (r < 0 || cli_split_kv("audit", "--shape", val, &shapes[n_shapes].kv)) {
                rc = EXIT_USAGE;
                goto done;
            }
            n_shapes++;
            continue;
        }
        if ((r = cli_opt_value("audit", argc, argv, &i, "--top", &val)) != 0) {
            long long t;
            if (r < 0 || cli_parse_i64(val, &t) || t > 1000000) {
                if (r > 0)
                    cli_error("audit: --top expects a count from 0 to 1000000, not '%s'", val);
                rc = EXIT_USAGE;
                goto done;
            }
            a.top = (size_t)t;
            continue;
        }
        if (arg[0] == '-' && arg[1]) {
            cli_error("audit: unknown option '%s'; see `tandem audit --help`", arg);
            rc = EXIT_USAGE;
            goto done;
        }
        a.models[a.n_models++] = arg;
    }
    if (!a.n_models) {
        cli_error("audit: no MODEL given; see `tandem audit --help`");
        rc = EXIT_USAGE;
        goto done;
    }
    for (size_t k = 0; k < n_shapes; k++) {
        audit_shape *x = &shapes[k];
        int rank;
        int64_t dims[CLI_MAX_RANK];
        x->model = -1;
        const char *colon = strchr(x->kv.name, ':');
        for (size_t i = 0; colon && x->model < 0 && i < a.n_models; i++) {
            size_t len = (size_t)(colon - x->kv.name);
            const char *path = a.models[i], *base = base_name(path);
            if ((strlen(path) == len && strncmp(path, x->kv.name, len) == 0) ||
                (strlen(base) == len && strncmp(base, x->kv.name, len) == 0)) {
                x->model = (long)i;
                x->kv.name = colon + 1;
            }
        }
        for (size_t j = 0; j < k; j++)
            if (shapes[j].model == x->model && strcmp(shapes[j].kv.name, x->kv.name) == 0) {
                cli_error("audit: input '%s' is given twice with --shape", x->kv.name);
                rc = EXIT_USAGE;
                goto done;
            }
        if (cli_parse_dims("audit", x->kv.name, x->kv.value, &rank, dims)) {
            rc = EXIT_USAGE;
            goto done;
        }
    }
    if (!ro.devices) {
        cli_error("audit: --devices LIST is required (the devices to audit the models against, e.g. "
                  "'vnpu:rk3588,vnpu:qnn-htp')");
        rc = EXIT_USAGE;
        goto done;
    }
    if (split_devices(ro.devices, &a)) {
        cli_error("out of memory");
        rc = EXIT_INTERNAL;
        goto done;
    }
    if (!a.n_devices) {
        cli_error("audit: --devices '%s' names no device but cpu, which runs every node", ro.devices);
        rc = EXIT_USAGE;
        goto done;
    }
    a.dyn = calloc(a.n_models, sizeof *a.dyn);
    a.cpu_ms = calloc(a.n_models, sizeof *a.cpu_ms);
    a.cells = calloc(a.n_models * a.n_devices, sizeof *a.cells);
    if (!a.dyn || !a.cpu_ms || !a.cells) {
        cli_error("out of memory");
        rc = EXIT_INTERNAL;
        goto done;
    }
    if ((st = tdm_ctx_create(&ctx)) != TDM_OK) {
        rc = cli_fail(st, NULL, "out of memory");
        goto done;
    }
    cli_progress pr;
    cli_progress_begin(&pr, "audit");
    for (size_t i = 0; i < a.n_models; i++) {
        tdm_model *m = NULL;
        a.cpu_ms[i] = -1;
        if ((st = tdm_model_load(ctx, a.models[i], &m)) != TDM_OK) {
            const char *why = tdm_ctx_error(ctx);
            cli_progress_end(&pr); /* an error line never lands on the progress line */
            rc = cli_fail(st, NULL, why);
            if (!hard)
                hard = rc;
            for (size_t d = 0; d < a.n_devices; d++) {
                audit_cell *c = &a.cells[a.n_cells++];
                c->model = i;
                c->device = d;
                c->verdict = CELL_BLOCKED;
                c->rc = rc;
                c->error = story_strdup(why && *why ? why : tdm_status_str(st));
            }
            continue;
        }
        shape_scope scope = {shapes, n_shapes, i};
        a.dyn[i] = story_dynamic_inputs(m, shape_fixes, &scope, 0);
        a.cpu_ms[i] = all_cpu_ms(ctx, m, i, shapes, n_shapes);
        for (size_t d = 0; d < a.n_devices; d++) {
            audit_cell *c = &a.cells[a.n_cells++];
            c->model = i;
            c->device = d;
            if (audit_cell_plan(ctx, m, i, &ro, shapes, n_shapes, a.devices[d], c)) {
                tdm_model_destroy(m);
                cli_progress_end(&pr);
                cli_error("out of memory");
                rc = EXIT_INTERNAL;
                goto done;
            }
            if (c->rc && !hard) {
                hard = c->rc;
                cli_progress_end(&pr);
                cli_error("%s on %s: %s", a.models[i], a.devices[d], c->error);
            }
            cli_progress_step(&pr, a.n_cells, a.n_models * a.n_devices, "cells");
        }
        tdm_model_destroy(m);
    }
    cli_progress_end(&pr);
    for (size_t k = 0; k < n_shapes; k++)
        if (!shapes[k].used && !hard) {
            cli_error("audit: --shape names '%s', which is an input of %s", shapes[k].kv.name,
                      shapes[k].model < 0 ? "none of the models" : a.models[shapes[k].model]);
            rc = EXIT_USAGE;
            goto done;
        }
    if (!(a.blockers = calloc(a.n_devices, sizeof *a.blockers)) ||
        !(a.n_blockers = calloc(a.n_devices, sizeof *a.n_blockers))) {
        cli_error("out of memory");
        rc = EXIT_INTERNAL;
        goto done;
    }
    for (size_t d = 0; d < a.n_devices; d++)
        if (device_blockers(&a, d, &a.blockers[d], &a.n_blockers[d])) {
            cli_error("out of memory");
            rc = EXIT_INTERNAL;
            goto done;
        }
    if ((rc = json ? print_json(&a) : print_text(&a)) != 0)
        goto done;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("cannot write to standard output");
        rc = EXIT_IO;
        goto done;
    }
    size_t violating = 0;
    for (size_t k = 0; k < a.n_cells; k++)
        violating += a.cells[k].violations > 0;
    if (hard)
        rc = hard;
    else if (violating) {
        cli_error("audit: %zu of %zu plans violate the fallback policy (every offending node is in the output)",
                  violating, a.n_cells);
        rc = EXIT_POLICY;
    }
done:
    for (size_t d = 0; a.blockers && d < a.n_devices; d++)
        story_groups_free(a.blockers[d], a.n_blockers[d]);
    free(a.blockers);
    free(a.n_blockers);
    for (size_t k = 0; k < a.n_cells; k++)
        cell_free(&a.cells[k]);
    free(a.cells);
    for (size_t d = 0; d < a.n_devices; d++)
        free(a.devices[d]);
    free(a.devices);
    for (size_t i = 0; a.dyn && i < a.n_models; i++)
        free(a.dyn[i]);
    free(a.dyn);
    free(a.cpu_ms);
    free(a.models);
    for (size_t k = 0; k < n_shapes; k++)
        free(shapes[k].kv.owned);
    free(shapes);
    tdm_ctx_destroy(ctx);
    cli_runopts_free(&ro);
    return rc;
}
