/* The story of a plan, told from its ledger: see story.h. */
#include "story.h"
#include "audit.h"
#include "cli.h"

#include <cjson/cJSON.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

char *story_strdup(const char *s)
{
    if (!s)
        s = "";
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int story_count_add(story_count **c, size_t *n, const char *name)
{
    for (size_t k = 0; k < *n; k++)
        if (strcmp((*c)[k].name, name) == 0) {
            (*c)[k].count++;
            return 0;
        }
    story_count *a = realloc(*c, (*n + 1) * sizeof *a);
    if (!a)
        return -1;
    *c = a;
    if (!(a[*n].name = story_strdup(name)))
        return -1;
    a[(*n)++].count = 1;
    return 0;
}

static int count_cmp(const void *a, const void *b)
{
    const story_count *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->name, y->name);
}

int story_add_group(story_group **groups, size_t *n, size_t model, const char *op, const char *reason,
                    const char *node, const char *detail, size_t count, double ms)
{
    for (size_t k = 0; k < *n; k++) {
        story_group *g = &(*groups)[k];
        if (strcmp(g->op, op) == 0 && strcmp(g->reason, reason) == 0) {
            g->count += count;
            g->ms += ms;
            return 0;
        }
    }
    story_group *a = realloc(*groups, (*n + 1) * sizeof *a);
    if (!a)
        return -1;
    *groups = a;
    story_group *g = &a[*n];
    memset(g, 0, sizeof *g);
    g->model = model;
    g->count = count;
    g->ms = ms;
    if (!(g->op = story_strdup(op)) || !(g->reason = story_strdup(reason)) || !(g->node = story_strdup(node)) ||
        !(g->detail = story_strdup(detail))) {
        free(g->op);
        free(g->reason);
        free(g->node);
        free(g->detail);
        return -1;
    }
    (*n)++;
    return 0;
}

static int group_cmp(const void *a, const void *b)
{
    const story_group *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    int r = strcmp(x->reason, y->reason);
    return r ? r : strcmp(x->op, y->op);
}

void story_sort_groups(story_group *groups, size_t n)
{
    if (n)
        qsort(groups, n, sizeof *groups, group_cmp);
}

void story_groups_free(story_group *groups, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        free(groups[k].op);
        free(groups[k].reason);
        free(groups[k].node);
        free(groups[k].detail);
    }
    free(groups);
}

void story_counts_sort(story_count *c, size_t n)
{
    if (n)
        qsort(c, n, sizeof *c, count_cmp);
}

void story_counts_free(story_count *c, size_t n)
{
    for (size_t k = 0; k < n; k++)
        free(c[k].name);
    free(c);
}

void story_tally_free(story_tally *t)
{
    story_counts_free(t->reasons, t->n_reasons);
    story_counts_free(t->ops, t->n_ops);
    story_groups_free(t->groups, t->n_groups);
    memset(t, 0, sizeof *t);
}

int story_tally_nodes(story_tally *t, const cJSON *nodes, const char *device, size_t model)
{
    const cJSON *n;
    cJSON_ArrayForEach(n, nodes)
    {
        const char *dev = audit_jstr(n, "device"), *reason = audit_jstr(n, "reason");
        t->nodes++;
        /* on the device itself (OK, RESCUED), or where the user pinned it */
        if (strcmp(dev, device) == 0 || strcmp(reason, "USER") == 0) {
            t->on_device += strcmp(dev, device) == 0;
            t->pinned += strcmp(reason, "USER") == 0 && strcmp(dev, device) != 0;
            continue;
        }
        t->off_device++;
        double ms = audit_jnum(n, "estimated_ms", 0);
        t->off_ms += ms;
        if (story_count_add(&t->reasons, &t->n_reasons, reason) ||
            story_count_add(&t->ops, &t->n_ops, audit_jstr(n, "op")) ||
            story_add_group(&t->groups, &t->n_groups, model, audit_jstr(n, "op"), reason, audit_jstr(n, "name"),
                            audit_jstr(n, "detail"), 1, ms))
            return -1;
    }
    if (t->n_reasons)
        qsort(t->reasons, t->n_reasons, sizeof *t->reasons, count_cmp);
    if (t->n_ops)
        qsort(t->ops, t->n_ops, sizeof *t->ops, count_cmp);
    story_sort_groups(t->groups, t->n_groups);
    return 0;
}

void story_counts_str(const story_count *c, size_t n, size_t top, int count_first, char *buf, size_t size)
{
    size_t len = 0, shown = top && top < n ? top : n;
    buf[0] = '\0';
    for (size_t k = 0; k < shown; k++) {
        int w = count_first ? snprintf(buf + len, size - len, "%s%zu %s", k ? ", " : "", c[k].count, c[k].name)
                            : snprintf(buf + len, size - len, "%s%s %zu", k ? ", " : "", c[k].name, c[k].count);
        if (w < 0 || (size_t)w >= size - len)
            return;
        len += (size_t)w;
    }
    if (shown < n)
        snprintf(buf + len, size - len, ", +%zu more", n - shown);
}

char *story_dynamic_inputs(const tdm_model *m, int (*fixed)(const char *name, void *arg), void *arg, int as_flags)
{
    char buf[1024];
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < tdm_model_input_count(m); i++) {
        tdm_value_info vi;
        if (tdm_model_input(m, i, &vi) != TDM_OK)
            continue;
        int dynamic = vi.rank < 0;
        for (int d = 0; d < vi.rank; d++)
            dynamic |= vi.dims[d].value < 0;
        if (!dynamic || (fixed && fixed(vi.name, arg)))
            continue;
        char shape[256];
        int w;
        if (as_flags == 0) {
            w = snprintf(buf + len, sizeof buf - len, "%s%s %s", len ? ", " : "", vi.name,
                         cli_info_shape_str(&vi, shape, sizeof shape));
        } else if (as_flags == 2) {
            size_t sl = 0;
            shape[0] = '\0';
            for (int d = 0; d < vi.rank && sl < sizeof shape; d++) {
                long long v = (long long)vi.dims[d].value;
                int k = v >= 0 ? snprintf(shape + sl, sizeof shape - sl, "%s%lld", d ? "x" : "", v)
                               : snprintf(shape + sl, sizeof shape - sl, "%s?", d ? "x" : "");
                if (k < 0)
                    break;
                sl += (size_t)k;
            }
            w = snprintf(buf + len, sizeof buf - len, "%s'%s' (%s)", len ? ", " : "", vi.name,
                         vi.rank < 0 ? "rank unknown" : shape);
        } else {
            /* an example: a dynamic first dimension is the batch (1), the
             * others keep their symbol or a letter */
            size_t sl = 0;
            shape[0] = '\0';
            for (int d = 0; d < vi.rank && sl < sizeof shape; d++) {
                const tdm_dim *dim = &vi.dims[d];
                int k;
                if (dim->value >= 0)
                    k = snprintf(shape + sl, sizeof shape - sl, "%s%lld", d ? "x" : "", (long long)dim->value);
                else if (d == 0)
                    k = snprintf(shape + sl, sizeof shape - sl, "1");
                else if (vi.rank == 4 && d >= 2)
                    k = snprintf(shape + sl, sizeof shape - sl, "x%s", d == 2 ? "H" : "W");
                else
                    k = snprintf(shape + sl, sizeof shape - sl, "x%c", 'N' + (d % 4));
                if (k < 0)
                    break;
                sl += (size_t)k;
            }
            w = snprintf(buf + len, sizeof buf - len, "%s--shape %s=%s", len ? " " : "", vi.name,
                         vi.rank < 0 ? "DxD..." : shape);
        }
        if (w < 0 || (size_t)w >= sizeof buf - len)
            break;
        len += (size_t)w;
    }
    return story_strdup(buf);
}

double story_all_cpu_ms(tdm_ctx *ctx, const tdm_model *m, tdm_session_options *cpu_so)
{
    tdm_plan *plan = NULL;
    tdm_plan_summary s;
    double ms = -1;
    if (tdm_session_options_set_devices(cpu_so, "cpu") == TDM_OK && tdm_plan_create(ctx, m, cpu_so, &plan) == TDM_OK &&
        tdm_plan_get_summary(plan, &s) == TDM_OK && s.estimates_complete)
        ms = s.estimated_ms;
    tdm_plan_destroy(plan);
    return ms;
}

void cli_list_inputs(const tdm_model *m, char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < tdm_model_input_count(m) && off < size; i++) {
        tdm_value_info vi;
        if (tdm_model_input(m, i, &vi))
            continue;
        int w = snprintf(buf + off, size - off, "%s'%s'", off ? ", " : "", vi.name);
        if (w < 0)
            break;
        off += (size_t)w;
    }
    if (!off)
        snprintf(buf, size, "none");
}

int cli_find_input(const tdm_model *m, const char *name)
{
    for (size_t i = 0; i < tdm_model_input_count(m); i++) {
        tdm_value_info vi;
        if (tdm_model_input(m, i, &vi) == TDM_OK && strcmp(vi.name, name) == 0)
            return (int)i;
    }
    return -1;
}

const char *story_bytes_str(double b, char *buf, size_t size)
{
    if (b < 1024)
        snprintf(buf, size, "%.0f B", b);
    else if (b < 1048576.0)
        snprintf(buf, size, "%.1f KiB", b / 1024.0);
    else if (b < 1073741824.0)
        snprintf(buf, size, "%.1f MiB", b / 1048576.0);
    else
        snprintf(buf, size, "%.2f GiB", b / 1073741824.0);
    return buf;
}

/* A time in ms with three decimals, or three digits below 1 ms. */
static const char *ms_str(double ms, char *buf, size_t size)
{
    snprintf(buf, size, ms >= 1 || ms == 0 ? "%.3f" : "%.3g", ms);
    return buf;
}

static const char *first_device(const cJSON *root)
{
    const cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "devices"), 0);
    if (cJSON_IsString(d))
        return d->valuestring;
    if (cJSON_IsObject(d))
        return audit_jstr(d, "name");
    return "cpu";
}

/* The op types of group reason r, "Conv 100, Mul 50, +3 more". */
static void ops_of_reason(const story_tally *t, const char *r, char *buf, size_t size)
{
    size_t len = 0, shown = 0, more = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < t->n_groups; k++) {
        if (strcmp(t->groups[k].reason, r) != 0)
            continue;
        if (shown == 4) {
            more++;
            continue;
        }
        int w = snprintf(buf + len, size - len, "%s%s %zu", shown ? ", " : "", t->groups[k].op, t->groups[k].count);
        if (w < 0 || (size_t)w >= size - len)
            return;
        len += (size_t)w;
        shown++;
    }
    if (more)
        snprintf(buf + len, size - len, ", +%zu more", more);
}

int story_placement_line(const char *ledger, char *out, size_t size)
{
    cJSON *root = cJSON_Parse(ledger);
    story_tally t;
    memset(&t, 0, sizeof t);
    out[0] = '\0';
    if (!root)
        return -1;
    const char *dev = first_device(root);
    int rc = -1;
    if (story_tally_nodes(&t, cJSON_GetObjectItemCaseSensitive(root, "nodes"), dev, 0))
        goto done;
    rc = 0;
    if (!t.off_device && !t.pinned)
        goto done;
    size_t len = 0;
    int w = snprintf(out, size, "placement: %zu of %zu node%s on %s", t.on_device, t.nodes, t.nodes == 1 ? "" : "s",
                     dev);
    const cJSON *by = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "summary"),
                                                       "nodes_by_device");
    const cJSON *d;
    cJSON_ArrayForEach(d, by)
    {
        if (w < 0 || (size_t)w >= size - len)
            goto done;
        len += (size_t)w;
        w = strcmp(d->string, dev) == 0 ? 0 : snprintf(out + len, size - len, ", %d on %s", d->valueint, d->string);
    }
    for (size_t r = 0; r < t.n_reasons; r++) {
        char ops[256];
        if (w < 0 || (size_t)w >= size - len)
            goto done;
        len += (size_t)w;
        ops_of_reason(&t, t.reasons[r].name, ops, sizeof ops);
        w = snprintf(out + len, size - len, "%s%s %zu (%s)", r ? ", " : " - ", t.reasons[r].name, t.reasons[r].count,
                     ops);
    }
    if (w >= 0 && (size_t)w < size - len) {
        len += (size_t)w;
        if (t.pinned)
            w = snprintf(out + len, size - len, "%s%zu pinned (--pin)", t.n_reasons ? ", " : " - ", t.pinned);
        else
            w = 0;
    }
    if (w >= 0 && (size_t)w < size - len)
        snprintf(out + len + (size_t)w, size - len - (size_t)w, "; `tandem plan` tells why");
done:
    story_tally_free(&t);
    cJSON_Delete(root);
    return rc;
}

void story_rescues_count(story_rescues *r, const cJSON *root)
{
    memset(r, 0, sizeof *r);
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(root, "rescue");
    const cJSON *a;
    snprintf(r->mode, sizeof r->mode, "%s", audit_jstr(res, "mode"));
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(res, "attempts"))
    {
        r->tried++;
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "kept")))
            continue;
        r->kept++;
        r->became += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(a, "became"));
        const char *rule = audit_jstr(a, "rule");
        size_t k = 0;
        while (k < r->n_rules && strcmp(r->rules[k], rule) != 0)
            k++;
        if (k == r->n_rules && r->n_rules < STORY_MAX_RULES) {
            snprintf(r->rules[k], sizeof r->rules[k], "%s", rule);
            r->counts[r->n_rules++] = 0;
        }
        if (k < r->n_rules)
            r->counts[k]++;
    }
}

void story_rescues_line(const story_rescues *r, char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
#define PUT(...) n += (size_t)snprintf(out + (n < size ? n : size - 1), n < size ? size - n : 1, __VA_ARGS__)
    if (!r->tried)
        return;
    PUT("%zu of %zu node%s rewritten for the device (--rescue %s)", r->kept, r->tried, r->tried == 1 ? "" : "s",
        r->mode);
    for (size_t k = 0; k < r->n_rules; k++)
        PUT("%s%s %zu", k ? ", " : ": ", r->rules[k], r->counts[k]);
    if (r->kept)
        PUT("; %zu node%s in their place", r->became, r->became == 1 ? "" : "s");
    if (r->kept < r->tried)
        PUT("; %zu refused (plan --nodes says why)", r->tried - r->kept);
#undef PUT
}

int story_print_plan(FILE *f, const char *ledger, double cpu_ms, const char *dyn, const char *shape_flags)
{
    cJSON *root = cJSON_Parse(ledger);
    story_tally t;
    char buf[1024], b1[32];
    memset(&t, 0, sizeof t);
    if (!root)
        return -1;
    const char *dev = first_device(root);
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(root, "summary");
    const cJSON *est = cJSON_GetObjectItemCaseSensitive(sum, "estimated_ms");
    const cJSON *pol = cJSON_GetObjectItemCaseSensitive(root, "policy");
    int rc = -1;
    if (story_tally_nodes(&t, cJSON_GetObjectItemCaseSensitive(root, "nodes"), dev, 0))
        goto done;
    /* placement */
    fprintf(f, "placement: %zu of %zu node%s on %s", t.on_device, t.nodes, t.nodes == 1 ? "" : "s", dev);
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(sum, "nodes_by_device"))
        if (strcmp(d->string, dev) != 0)
            fprintf(f, ", %d on %s", d->valueint, d->string);
    fputc('\n', f);
    if (t.off_device) {
        story_counts_str(t.reasons, t.n_reasons, 0, 0, buf, sizeof buf);
        fprintf(f, "fallbacks: %zu node%s off %s by reason: %s\n", t.off_device, t.off_device == 1 ? "" : "s", dev,
                buf);
        story_counts_str(t.ops, t.n_ops, 8, 0, buf, sizeof buf);
        fprintf(f, "           by op type: %s\n", buf);
    } else if (strcmp(dev, "cpu") != 0) {
        fprintf(f, "fallbacks: none\n");
    }
    if (t.pinned)
        fprintf(f, "pinned:    %zu node%s (--pin)\n", t.pinned, t.pinned == 1 ? "" : "s");
    story_rescues rs;
    story_rescues_count(&rs, root);
    story_rescues_line(&rs, buf, sizeof buf);
    if (buf[0])
        fprintf(f, "rescued:  %s\n", buf);
    /* partitions and copies */
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(root, "partitions");
    size_t np = (size_t)cJSON_GetArraySize(parts), np_dev = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, parts)
        np_dev += strcmp(audit_jstr(p, "device"), dev) == 0;
    fprintf(f, "partitions: %zu", np);
    if (np && np_dev != np)
        fprintf(f, " (%zu on %s, %zu elsewhere)", np_dev, dev, np - np_dev);
    double bb = audit_jnum(sum, "boundary_bytes", 0), unknown = audit_jnum(sum, "boundary_unknown", 0);
    fprintf(f, "; boundary: %s per run%s", story_bytes_str(bb, b1, sizeof b1),
            unknown > 0 ? " (+ tensors of unknown size)" : "");
    if (audit_jnum(sum, "weight_bytes", 0) > 0)
        fprintf(f, ", weights uploaded %s", story_bytes_str(audit_jnum(sum, "weight_bytes", 0), b1, sizeof b1));
    fputc('\n', f);
    /* time against all-cpu */
    if (cJSON_IsObject(est)) {
        int modeled = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(est, "modeled"));
        int complete = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(est, "complete"));
        double total = audit_jnum(est, "total", -1);
        fprintf(f, "estimated: %s ms per run%s%s", ms_str(total, b1, sizeof b1), modeled ? " (modeled)" : "",
                complete ? "" : " (incomplete: some nodes have no estimate)");
        fprintf(f, "; copies %s ms", ms_str(audit_jnum(est, "copies", 0), b1, sizeof b1));
        if (cpu_ms >= 0 && strcmp(dev, "cpu") != 0) {
            fprintf(f, "; all on cpu %s ms (modeled)", ms_str(cpu_ms, b1, sizeof b1));
            double r = total < cpu_ms ? cpu_ms / total : total / cpu_ms;
            if (complete && total > 0 && cpu_ms > 0 && r < 1.005)
                fprintf(f, ", the same");
            else if (complete && total > 0 && cpu_ms > 0)
                fprintf(f, ", %.2fx %s", r, total < cpu_ms ? "faster" : "slower");
        }
        fputc('\n', f);
    }
    /* the verdict */
    const cJSON *viol = cJSON_GetObjectItemCaseSensitive(pol, "violations");
    if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(pol, "ok"))) {
        int nv = cJSON_GetArraySize(viol);
        if (nv)
            fprintf(f, "policy: %s; the %d offending node%s %s listed on stderr\n", audit_jstr(pol, "error"), nv,
                    nv == 1 ? "" : "s", nv == 1 ? "is" : "are");
        else
            fprintf(f, "policy: %s\n", audit_jstr(pol, "error"));
    } else {
        fprintf(f, "policy: within the fallback policy (%s)\n", audit_jstr(pol, "fallback"));
    }
    /* hints, one per sentence, for the largest groups */
    char seen[6][512];
    size_t n_seen = 0;
    for (size_t g = 0; g < t.n_groups && n_seen < 6; g++) {
        const story_group *x = &t.groups[g];
        char h[512];
        if (strcmp(x->reason, "SHAPE_UNSUPPORTED") == 0 && strstr(x->detail, "static shapes") && shape_flags &&
            *shape_flags)
            snprintf(h, sizeof h, "dynamic input%s %s: give %s (%s takes static shapes only)",
                     strstr(shape_flags + 1, "--shape") ? "s" : "", dyn ? dyn : "", shape_flags, dev);
        else
            audit_hint(x->reason, x->op, x->detail, dev, dyn, h, sizeof h);
        int dup = !h[0];
        for (size_t k = 0; k < n_seen && !dup; k++)
            dup = strcmp(seen[k], h) == 0;
        if (dup)
            continue;
        if (!n_seen)
            fprintf(f, "hints:\n");
        snprintf(seen[n_seen++], sizeof seen[0], "%s", h);
        fprintf(f, "  - %s\n", h);
    }
    if (t.off_device || t.pinned)
        fprintf(f, "(--nodes lists every node off %s with its reason, --json the ledger)\n", dev);
    rc = 0;
done:
    story_tally_free(&t);
    cJSON_Delete(root);
    return rc;
}

void story_placement_note(const tdm_plan *plan)
{
    char *ledger = NULL, line[1024];
    /* one device (cpu): nothing can fall back; the ledger's JSON is not
     * worth building (15 % of a small model's run at 3 repeats) */
    if (!plan || tdm_plan_device_count(plan) < 2)
        return;
    if (tdm_plan_ledger_json(plan, &ledger) == TDM_OK && story_placement_line(ledger, line, sizeof line) == 0 &&
        line[0])
        cli_error("%s", line);
    tdm_free(ledger);
}
