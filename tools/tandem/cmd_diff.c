/* tandem diff A B [--json]
 *
 * The before and after of one optimisation (seed 000 §7.7): two ledgers
 * (`run --ledger`, `plan --json`) or profiles (`profile --json`) of the same
 * model. Which nodes moved between devices and why (the reason code before
 * and after), nodes whose reason changed in place, partitions, fallbacks by
 * reason, nodes per device, and the modeled and measured time, the fallback
 * ratio and the output error before and after where the files carry them. */
#define _POSIX_C_SOURCE 200809L
#include "audit.h"
#include "cli.h"
#include "json.h"
#include "logs.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

void usage_diff(FILE *f)
{
    fputs("usage: tandem diff A B [--json]\n"
          "\n"
          "Compares two ledgers (`run --ledger FILE`, `plan --json`) or profiles\n"
          "(`profile --json`) of the same model, A before and B after a change (devices,\n"
          "--pin, --granularity, a new profile or model export): the nodes that moved\n"
          "between devices with their reason code before and after, the nodes whose reason\n"
          "changed on the same device, nodes present in one only, then before/after figures:\n"
          "nodes per device, fallbacks by reason, partitions, copies, boundary bytes, the\n"
          "fallback ratio, the modeled and measured time and the output cosine (precision\n"
          "guard) where the files carry them.\n"
          "\n"
          "  --json    print one JSON document on stdout instead\n"
          "\n"
          "Two files of different models are refused (exit 2), as is a file that is neither\n"
          "a ledger nor a profile; a missing or unreadable file exits 5.\n",
          f);
}

typedef struct df_node {
    const char *name, *op, *device, *reason, *detail; /* borrowed from the cJSON */
    size_t order;
} df_node;

typedef struct df_doc {
    const char *path, *model, *kind, *first; /* first: the preferred device */
    cJSON *root;
    df_node *nodes;   /* file order */
    df_node **sorted; /* by name */
    size_t n;
} df_doc;

static void doc_free(df_doc *d)
{
    cJSON_Delete(d->root);
    free(d->nodes);
    free(d->sorted);
}

static int node_name_cmp(const void *a, const void *b)
{
    return strcmp((*(df_node *const *)a)->name, (*(df_node *const *)b)->name);
}

static const df_node *doc_find(const df_doc *d, const char *name)
{
    df_node key = {.name = name}, *kp = &key;
    df_node **r = d->n ? bsearch(&kp, d->sorted, d->n, sizeof *d->sorted, node_name_cmp) : NULL;
    return r ? *r : NULL;
}

/* Reads a ledger or profile; 0 or an exit code after one sentence. */
static int doc_load(const char *path, df_doc *d)
{
    memset(d, 0, sizeof *d);
    d->path = path;
    size_t len = 0;
    int rc = 0;
    char *text = logs_read_file(path, &len, &rc);
    if (!text)
        return rc;
    d->root = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(d->root, "nodes");
    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(d->root, "devices");
    if (!cJSON_IsObject(d->root) || !cJSON_IsArray(nodes) || !cJSON_IsArray(devs)) {
        cli_error("diff: '%s' is neither a ledger (run --ledger, plan --json) nor a profile (profile --json)", path);
        return EXIT_INVALID;
    }
    const cJSON *n0 = cJSON_GetArrayItem(nodes, 0), *first = cJSON_GetArrayItem(devs, 0);
    int profile = cJSON_GetObjectItemCaseSensitive(d->root, "iterations") ||
                  cJSON_GetObjectItemCaseSensitive(n0, "fallback");
    d->kind = profile ? "profile" : "ledger";
    d->model = logs_base(audit_jstr(d->root, "model"));
    d->first = cJSON_IsString(first) ? first->valuestring : "";
    size_t n = (size_t)cJSON_GetArraySize(nodes);
    if (n && (!(d->nodes = calloc(n, sizeof *d->nodes)) || !(d->sorted = calloc(n, sizeof *d->sorted))))
        return cli_fail(TDM_E_NOMEM, "diff", NULL);
    const cJSON *x;
    cJSON_ArrayForEach(x, nodes)
    {
        df_node *y = &d->nodes[d->n];
        y->name = audit_jstr(x, profile ? "node" : "name");
        y->op = audit_jstr(x, "op");
        y->device = audit_jstr(x, "device");
        y->reason = audit_jstr(x, "reason");
        y->detail = audit_jstr(x, "detail");
        y->order = d->n;
        d->sorted[d->n] = y;
        d->n++;
    }
    if (d->n > 1)
        qsort(d->sorted, d->n, sizeof *d->sorted, node_name_cmp);
    return 0;
}

static int is_fallback(const df_doc *d, const df_node *n)
{
    return strcmp(n->device, d->first) != 0 && strcmp(n->reason, "USER") != 0;
}

/* A number at a path of object keys (NULL-terminated); NAN when absent. */
static double num_at(const cJSON *o, const char *k1, const char *k2, const char *k3)
{
    const char *keys[] = {k1, k2, k3};
    for (size_t k = 0; k < 3 && keys[k]; k++)
        o = cJSON_GetObjectItemCaseSensitive(o, keys[k]);
    return cJSON_IsNumber(o) ? o->valuedouble : NAN;
}

/* The before/after figures: name, where in a ledger, where in a profile. */
typedef struct df_fig {
    const char *name;
    const char *l1, *l2, *l3; /* ledger path */
    const char *p1, *p2, *p3; /* profile path */
} df_fig;

static const df_fig figs[] = {
    {"partitions", "summary", "partitions", NULL, NULL, NULL, NULL},
    {"copies", "summary", "copies", NULL, "copies", "count_per_run", NULL},
    {"boundary_bytes", "summary", "boundary_bytes", NULL, NULL, NULL, NULL},
    {"copy_bytes_per_run", NULL, NULL, NULL, "copies", "bytes_per_run", NULL},
    {"fallback_ratio_estimated", "summary", "fallback_ratio", NULL, "fallback_ratio_modeled", NULL, NULL},
    {"fallback_ratio_measured", NULL, NULL, NULL, "fallback_ratio", NULL, NULL},
    {"modeled_ms", "summary", "estimated_ms", "total", NULL, NULL, NULL},
    {"modeled_copies_ms", "summary", "estimated_ms", "copies", "copies", "modeled_ms_per_run", NULL},
    {"measured_wall_ms", NULL, NULL, NULL, "wall_ms_per_run", NULL, NULL},
    {"measured_node_ms", NULL, NULL, NULL, "node_ms_per_run", NULL, NULL},
    {"output_cosine", "guard", "output_cosine_after", NULL, NULL, NULL, NULL},
    {"guard_moved_nodes", "guard", "moved_nodes", NULL, "guard_moved_nodes", NULL, NULL},
};
#define N_FIGS (sizeof figs / sizeof figs[0])

static double fig_value(const df_doc *d, const df_fig *f)
{
    if (strcmp(d->kind, "profile") == 0)
        return f->p1 ? num_at(d->root, f->p1, f->p2, f->p3) : NAN;
    return f->l1 ? num_at(d->root, f->l1, f->l2, f->l3) : NAN;
}

/* Counts of a key over both files (nodes per device, fallbacks by reason). */
typedef struct df_count {
    const char *key;
    size_t before, after;
} df_count;

typedef struct df_counts {
    df_count *c;
    size_t n;
} df_counts;

static int count_add(df_counts *cs, const char *key, int after)
{
    size_t k = 0;
    while (k < cs->n && strcmp(cs->c[k].key, key) != 0)
        k++;
    if (k == cs->n) {
        df_count *nc = realloc(cs->c, (cs->n + 1) * sizeof *nc);
        if (!nc)
            return -1;
        cs->c = nc;
        cs->c[cs->n++] = (df_count){key, 0, 0};
    }
    if (after)
        cs->c[k].after++;
    else
        cs->c[k].before++;
    return 0;
}

static int count_doc(const df_doc *d, int after, df_counts *by_dev, df_counts *by_reason)
{
    for (size_t k = 0; k < d->n; k++) {
        const df_node *n = &d->nodes[k];
        if (count_add(by_dev, n->device, after))
            return -1;
        if (is_fallback(d, n) && count_add(by_reason, n->reason, after))
            return -1;
    }
    return 0;
}

typedef struct df_result {
    const df_node **moved, **changed; /* pairs: A's node, B's node */
    size_t n_moved, n_changed;
    const df_node **only_a, **only_b;
    size_t n_only_a, n_only_b;
    df_counts by_dev, by_reason;
} df_result;

static void result_free(df_result *r)
{
    free(r->moved);
    free(r->changed);
    free(r->only_a);
    free(r->only_b);
    free(r->by_dev.c);
    free(r->by_reason.c);
}

static int compare(const df_doc *a, const df_doc *b, df_result *r)
{
    memset(r, 0, sizeof *r);
    size_t na = a->n ? a->n : 1, nb = b->n ? b->n : 1;
    r->moved = calloc(2 * na, sizeof *r->moved);
    r->changed = calloc(2 * na, sizeof *r->changed);
    r->only_a = calloc(na, sizeof *r->only_a);
    r->only_b = calloc(nb, sizeof *r->only_b);
    if (!r->moved || !r->changed || !r->only_a || !r->only_b)
        return -1;
    for (size_t k = 0; k < a->n; k++) {
        const df_node *x = &a->nodes[k], *y = doc_find(b, x->name);
        if (!y) {
            r->only_a[r->n_only_a++] = x;
        } else if (strcmp(x->device, y->device) != 0) {
            r->moved[2 * r->n_moved] = x;
            r->moved[2 * r->n_moved++ + 1] = y;
        } else if (strcmp(x->reason, y->reason) != 0) {
            r->changed[2 * r->n_changed] = x;
            r->changed[2 * r->n_changed++ + 1] = y;
        }
    }
    for (size_t k = 0; k < b->n; k++)
        if (!doc_find(a, b->nodes[k].name))
            r->only_b[r->n_only_b++] = &b->nodes[k];
    if (count_doc(a, 0, &r->by_dev, &r->by_reason) || count_doc(b, 1, &r->by_dev, &r->by_reason))
        return -1;
    return 0;
}

static void devices_str(const df_doc *d, char *buf, size_t size)
{
    size_t used = 0;
    const cJSON *x;
    buf[0] = '\0';
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(d->root, "devices"))
    {
        if (!cJSON_IsString(x) || used + 2 >= size)
            continue;
        int w = snprintf(buf + used, size - used, "%s%s", used ? "," : "", x->valuestring);
        used = w < 0 ? used : used + (size_t)w >= size ? size - 1 : used + (size_t)w;
    }
}

#define LIST_MAX 20

static void print_pairs(const char *title, const df_node **pairs, size_t n)
{
    if (!n)
        return;
    printf("\n%s (%zu):\n", title, n);
    for (size_t k = 0; k < n; k++) {
        const df_node *x = pairs[2 * k], *y = pairs[2 * k + 1];
        printf("  %-40s %-14s %s -> %s   %s -> %s\n", x->name, x->op, x->device, y->device, x->reason, y->reason);
        const char *why = *y->detail ? y->detail : x->detail;
        if (*why)
            printf("    %s\n", why);
    }
}

static void print_value(double v)
{
    if (isnan(v))
        printf(" %14s", "-");
    else if (v == floor(v) && fabs(v) < 1e15)
        printf(" %14.0f", v);
    else
        printf(" %14.9g", v);
}

static void print_text(const df_doc *a, const df_doc *b, const df_result *r)
{
    char da[256], db[256];
    devices_str(a, da, sizeof da);
    devices_str(b, db, sizeof db);
    printf("diff of %s\n  before: %s (%s on %s)\n  after:  %s (%s on %s)\n", a->model, a->path, a->kind, da, b->path,
           b->kind, db);
    if (!r->n_moved && !r->n_changed && !r->n_only_a && !r->n_only_b)
        printf("\nno node moved and no reason changed (%zu nodes)\n", a->n);
    print_pairs("moved between devices", r->moved, r->n_moved);
    print_pairs("reason changed on the same device", r->changed, r->n_changed);
    if (r->n_only_a || r->n_only_b)
        printf("\nnodes only before: %zu, only after: %zu\n", r->n_only_a, r->n_only_b);
    for (size_t k = 0; k < r->n_only_a && k < LIST_MAX; k++)
        printf("  - %s (%s)\n", r->only_a[k]->name, r->only_a[k]->op);
    for (size_t k = 0; k < r->n_only_b && k < LIST_MAX; k++)
        printf("  + %s (%s)\n", r->only_b[k]->name, r->only_b[k]->op);
    printf("\n%-30s %14s %14s\n", "", "before", "after");
    printf("%-30s %14zu %14zu\n", "nodes", a->n, b->n);
    for (size_t k = 0; k < r->by_dev.n; k++) {
        char label[64];
        snprintf(label, sizeof label, "  on %s", r->by_dev.c[k].key);
        printf("%-30s %14zu %14zu\n", label, r->by_dev.c[k].before, r->by_dev.c[k].after);
    }
    size_t fa = 0, fb = 0;
    for (size_t k = 0; k < r->by_reason.n; k++) {
        fa += r->by_reason.c[k].before;
        fb += r->by_reason.c[k].after;
    }
    printf("%-30s %14zu %14zu\n", "fallbacks", fa, fb);
    for (size_t k = 0; k < r->by_reason.n; k++) {
        char label[64];
        snprintf(label, sizeof label, "  %s", r->by_reason.c[k].key);
        printf("%-30s %14zu %14zu\n", label, r->by_reason.c[k].before, r->by_reason.c[k].after);
    }
    for (size_t k = 0; k < N_FIGS; k++) {
        double x = fig_value(a, &figs[k]), y = fig_value(b, &figs[k]);
        if (isnan(x) && isnan(y))
            continue;
        printf("%-30s", figs[k].name);
        print_value(x);
        print_value(y);
        putchar('\n');
    }
}

static void json_side(jw *w, const char *key, const df_doc *d)
{
    jw_key(w, key);
    jw_obj_begin(w);
    jw_kstr(w, "file", d->path);
    jw_kstr(w, "kind", d->kind);
    jw_key(w, "devices");
    jw_arr_begin_inline(w);
    const cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(d->root, "devices"))
        jw_str(w, cJSON_IsString(x) ? x->valuestring : "");
    jw_arr_end(w);
    jw_kuint(w, "nodes", d->n);
    jw_obj_end(w);
}

static void json_pairs(jw *w, const char *key, const df_node **pairs, size_t n)
{
    jw_key(w, key);
    jw_arr_begin(w);
    for (size_t k = 0; k < n; k++) {
        const df_node *x = pairs[2 * k], *y = pairs[2 * k + 1];
        jw_obj_begin(w);
        jw_kstr(w, "node", x->name);
        jw_kstr(w, "op", x->op);
        jw_kstr(w, "device_before", x->device);
        jw_kstr(w, "device_after", y->device);
        jw_kstr(w, "reason_before", x->reason);
        jw_kstr(w, "reason_after", y->reason);
        jw_kstr(w, "detail_before", x->detail);
        jw_kstr(w, "detail_after", y->detail);
        jw_obj_end(w);
    }
    jw_arr_end(w);
}

static void json_names(jw *w, const char *key, const df_node **n, size_t count)
{
    jw_key(w, key);
    jw_arr_begin(w);
    for (size_t k = 0; k < count; k++)
        jw_str(w, n[k]->name);
    jw_arr_end(w);
}

static void json_counts(jw *w, const char *key, const char *name, const df_counts *cs)
{
    jw_key(w, key);
    jw_arr_begin(w);
    for (size_t k = 0; k < cs->n; k++) {
        jw_obj_begin(w);
        jw_key(w, name);
        jw_str(w, cs->c[k].key);
        jw_kuint(w, "before", cs->c[k].before);
        jw_kuint(w, "after", cs->c[k].after);
        jw_obj_end(w);
    }
    jw_arr_end(w);
}

static void print_json(const df_doc *a, const df_doc *b, const df_result *r)
{
    jw w;
    jw_init(&w, stdout);
    jw_obj_begin(&w);
    jw_kstr(&w, "model", a->model);
    json_side(&w, "before", a);
    json_side(&w, "after", b);
    json_pairs(&w, "moved", r->moved, r->n_moved);
    json_pairs(&w, "reason_changed", r->changed, r->n_changed);
    json_names(&w, "only_before", r->only_a, r->n_only_a);
    json_names(&w, "only_after", r->only_b, r->n_only_b);
    json_counts(&w, "nodes_by_device", "device", &r->by_dev);
    json_counts(&w, "fallbacks_by_reason", "reason", &r->by_reason);
    jw_key(&w, "figures");
    jw_obj_begin(&w);
    for (size_t k = 0; k < N_FIGS; k++) {
        double x = fig_value(a, &figs[k]), y = fig_value(b, &figs[k]);
        if (isnan(x) && isnan(y))
            continue;
        jw_key(&w, figs[k].name);
        jw_obj_begin(&w);
        jw_knum(&w, "before", x);
        jw_knum(&w, "after", y);
        jw_obj_end(&w);
    }
    jw_obj_end(&w);
    jw_obj_end(&w);
    jw_finish(&w);
}

int cmd_diff(int argc, char **argv)
{
    const char *files[2] = {NULL, NULL};
    int json = 0, nf = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage_diff(stdout);
            return EXIT_OK;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            cli_error("diff: unknown option '%s'; `tandem diff --help` lists them", argv[i]);
            return EXIT_USAGE;
        } else if (nf == 2) {
            cli_error("diff: compares two files; '%s' is a third", argv[i]);
            return EXIT_USAGE;
        } else {
            files[nf++] = argv[i];
        }
    }
    if (nf < 2) {
        cli_error("diff: two files are needed, A (before) and B (after); `tandem diff --help` describes them");
        return EXIT_USAGE;
    }
    df_doc a, b;
    df_result r;
    memset(&r, 0, sizeof r);
    memset(&b, 0, sizeof b);
    int rc = doc_load(files[0], &a);
    if (!rc)
        rc = doc_load(files[1], &b);
    if (!rc && strcmp(a.model, b.model) != 0) {
        cli_error("diff: '%s' is of model '%s' and '%s' of model '%s'; diff compares two files of the same model",
                  a.path, a.model, b.path, b.model);
        rc = EXIT_INVALID;
    }
    if (!rc && compare(&a, &b, &r) != 0)
        rc = cli_fail(TDM_E_NOMEM, "diff", NULL);
    if (!rc && a.n && b.n && r.n_only_a == a.n) {
        cli_error("diff: '%s' and '%s' share no node name; they are not of the same model '%s'", a.path, b.path,
                  a.model);
        rc = EXIT_INVALID;
    }
    if (!rc) {
        if (json)
            print_json(&a, &b, &r);
        else
            print_text(&a, &b, &r);
    }
    result_free(&r);
    doc_free(&a);
    doc_free(&b);
    return rc;
}
