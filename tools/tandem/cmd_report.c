/* `tandem report`: one self-contained HTML page (no network) — the story
 * `tandem plan` opens with (story.c), the partitions as boxes coloured by
 * device with the boundary bytes on the edges between them (inline SVG
 * drawn here), each partition's nodes with their reasons on demand, the
 * node graph (Graphviz `dot -Tsvg`, small models only), a timeline of one
 * run, the precision table (the compare figures) and the fallback ratio.
 * Times measured on a vnpu are host emulation and say so, with the modeled
 * figure beside them. */
#define _POSIX_C_SOURCE 200809L
#include "audit.h"
#include "cli.h"
#include "story.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void usage_report(FILE *f)
{
    fputs("usage: tandem report MODEL --html FILE [--iterations N] [--min-cosine C] [--max-abs X]\n"
          "                     [--input NAME=FILE]... [--shape NAME=DxD]... [--threads N] [RUN OPTIONS]\n"
          "\n"
          "Profiles the model (N timed runs after 2 warm-up runs, default N = 10), compares\n"
          "it with the cpu fp32 reference, and writes one self-contained HTML page: the\n"
          "summary `tandem plan` opens with, the partitions as boxes coloured by device\n"
          "(node counts, op types, the bytes copied between them), each partition's nodes\n"
          "with device and reason (on demand), the node graph for models of up to 400 nodes\n"
          "(drawn with Graphviz `dot` when installed; otherwise the page says so), the\n"
          "timeline of one run, the precision table and the fallback ratio. Times measured\n"
          "on a vnpu are host emulation and are labelled so, the modeled figure beside them.\n"
          "\n"
          "  --html FILE      the page to write (required)\n"
          "  --iterations N   timed runs of the profile (default 10)\n"
          "  (--min-cosine, default 0.999 here, and --max-abs: see the run options below)\n"
          "\n",
          f);
    usage_runopts(f);
}

static const char *const palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2"};
#define CPU_COLOUR "#9c9c9c"
#define COPY_COLOUR "#e15759"

static const char *dev_colour(const tdm_plan *plan, size_t d)
{
    if (strcmp(tdm_plan_device_name(plan, d), "cpu") == 0)
        return CPU_COLOUR;
    return palette[d % (sizeof palette / sizeof palette[0])];
}

static size_t dev_of(const tdm_plan *plan, const char *name)
{
    size_t n = tdm_plan_device_count(plan);
    for (size_t d = 0; d < n; d++)
        if (strcmp(tdm_plan_device_name(plan, d), name) == 0)
            return d;
    return n ? n - 1 : 0;
}

static void esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* A DOT string literal body. */
static void dot_esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

static int write_dot(const tdm_plan *plan, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    size_t n = tdm_plan_node_count(plan);
    fputs("digraph tandem {\n  rankdir=TB;\n  bgcolor=\"white\";\n"
          "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10, fontcolor=\"white\"];\n"
          "  edge [color=\"#555555\", arrowsize=0.6];\n",
          f);
    for (size_t i = 0; i < n; i++) {
        const char *name = "", *op = "", *dev = "", *reason = "", *detail = "";
        tdm_plan_node(plan, i, &name, &op, &dev, &reason, &detail);
        fprintf(f, "  n%zu [label=\"", i);
        dot_esc(f, op);
        fputs("\\n", f);
        /* the whole name, in lines of at most 28 characters */
        for (size_t l = strlen(name), k = 0; k < l; k += 28) {
            char part[29];
            snprintf(part, sizeof part, "%s", name + k);
            fputs(k ? "\\n" : "", f);
            dot_esc(f, part);
        }
        fprintf(f, "\", fillcolor=\"%s\", tooltip=\"", dev_colour(plan, dev_of(plan, dev)));
        dot_esc(f, name);
        fputs(" on ", f);
        dot_esc(f, dev);
        fputs(": ", f);
        dot_esc(f, reason);
        fprintf(f, "\"%s];\n", strcmp(reason, "OK") != 0 ? ", penwidth=3, color=\"#d62728\"" : "");
    }
    /* edges: a node's input produced by another node */
    for (size_t i = 0; i < n; i++) {
        const char *di = NULL;
        tdm_plan_node(plan, i, NULL, NULL, &di, NULL, NULL);
        for (size_t k = 0; k < tdm_plan_node_input_count(plan, i); k++) {
            const char *v = tdm_plan_node_input(plan, i, k);
            if (!v || !*v)
                continue;
            for (size_t j = 0; j < n; j++) {
                int found = 0;
                for (size_t o = 0; o < tdm_plan_node_output_count(plan, j) && !found; o++)
                    found = strcmp(tdm_plan_node_output(plan, j, o), v) == 0;
                if (!found)
                    continue;
                const char *dj = NULL;
                tdm_plan_node(plan, j, NULL, NULL, &dj, NULL, NULL);
                fprintf(f, "  n%zu -> n%zu%s;\n", j, i,
                        strcmp(di, dj) != 0 ? " [color=\"" COPY_COLOUR "\", penwidth=2.5, style=bold]" : "");
                break;
            }
        }
    }
    fputs("}\n", f);
    return fclose(f) ? -1 : 0;
}

/* The SVG Graphviz draws of the plan, or NULL (with *why set). */
static char *draw_graph(const tdm_plan *plan, const char **why)
{
    char dir[] = "/tmp/tandem-report.XXXXXX";
    char dot[64], svg[64], cmd[256];
    char *text = NULL;
    *why = "Graphviz is not installed (the `dot` program was not found): the partitioned graph is not drawn. "
           "Install the Debian package graphviz and run tandem report again.";
    if (system("command -v dot >/dev/null 2>&1") != 0)
        return NULL;
    *why = "Graphviz `dot` failed to draw the graph.";
    if (!mkdtemp(dir))
        return NULL;
    snprintf(dot, sizeof dot, "%s/g.dot", dir);
    snprintf(svg, sizeof svg, "%s/g.svg", dir);
    snprintf(cmd, sizeof cmd, "dot -Tsvg '%s' -o '%s' 2>/dev/null", dot, svg);
    if (write_dot(plan, dot) == 0 && system(cmd) == 0) {
        FILE *f = fopen(svg, "rb");
        if (f) {
            size_t cap = 1 << 16, len = 0, r;
            text = malloc(cap + 1);
            while (text && (r = fread(text + len, 1, cap - len, f)) > 0) {
                len += r;
                if (len == cap) {
                    char *t = realloc(text, cap * 2 + 1);
                    if (!t) {
                        free(text);
                        text = NULL;
                        break;
                    }
                    text = t;
                    cap *= 2;
                }
            }
            if (text)
                text[len] = '\0';
            fclose(f);
        }
    }
    remove(dot);
    remove(svg);
    rmdir(dir);
    return text;
}

/* Whether device d's times are host emulation: a device other than the
 * cpu whose events carry a modeled duration (a vnpu). */
static int emulated(const diag_collector *prof, size_t d)
{
    return d < prof->n_devs && prof->devs[d].modeled && strcmp(tdm_plan_device_name(prof->plan, d), "cpu") != 0;
}

static void timeline(FILE *f, const diag_collector *c)
{
    if (!c->n_trace) {
        fputs("<p>No events were recorded.</p>\n", f);
        return;
    }
    uint64_t t0 = c->trace[0].start_ns, t1 = c->trace[0].end_ns;
    for (size_t k = 0; k < c->n_trace; k++) {
        if (c->trace[k].start_ns < t0)
            t0 = c->trace[k].start_ns;
        if (c->trace[k].end_ns > t1)
            t1 = c->trace[k].end_ns;
    }
    double span = t1 > t0 ? (double)(t1 - t0) : 1;
    const double W = 1100, left = 130, rowh = 30;
    size_t rows = c->n_devs + 1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" class=\"timeline\">\n",
            left + W + 10, rowh * (double)rows + 30);
    for (size_t d = 0; d < rows; d++) {
        fprintf(f, "<text x=\"4\" y=\"%.1f\" font-size=\"12\">", rowh * (double)d + 19);
        esc(f, d < c->n_devs ? tdm_plan_device_name(c->plan, d) : "copies");
        fputs("</text>\n", f);
        if (d < c->n_devs ? emulated(c, d) : c->copy_modeled)
            fprintf(f, "<text x=\"4\" y=\"%.1f\" font-size=\"10\" fill=\"#a05a00\">emulated</text>\n",
                    rowh * (double)d + 30);
        fprintf(f, "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"#f4f4f4\"/>\n", left,
                rowh * (double)d + 4, W, rowh - 6);
    }
    for (size_t k = 0; k < c->n_trace; k++) {
        const diag_trace_ev *t = &c->trace[k];
        size_t row = t->copy ? c->n_devs : (size_t)(t->device >= 0 ? t->device : 0);
        double x = left + W * (double)(t->start_ns - t0) / span;
        double w = W * (double)(t->end_ns - t->start_ns) / span;
        if (w < 0.5)
            w = 0.5;
        const char *name = "", *op = "";
        if (!t->copy)
            tdm_plan_node(c->plan, t->node, &name, &op, NULL, NULL, NULL);
        fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"><title>", x,
                rowh * (double)row + 6, w, rowh - 10,
                t->copy ? COPY_COLOUR : dev_colour(c->plan, (size_t)(t->device >= 0 ? t->device : 0)));
        if (t->copy) {
            fputs("copy ", f);
            esc(f, t->tensor);
            fprintf(f, " (%s, %llu bytes)", t->direction, (unsigned long long)t->bytes_in);
        } else {
            esc(f, name);
            fputs(" (", f);
            esc(f, op);
            fputs(")", f);
        }
        fprintf(f, " %.3f ms", (double)(t->end_ns - t->start_ns) / 1e6);
        if (t->modeled_ms >= 0)
            fprintf(f, "%s, %.4f ms modeled",
                    t->copy || emulated(c, (size_t)(t->device >= 0 ? t->device : 0)) ? " emulated" : "", t->modeled_ms);
        fputs("</title></rect>\n", f);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\">0 ms</text>\n", left, rowh * (double)rows + 20);
    fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.3f ms</text>\n", left + W,
            rowh * (double)rows + 20, span / 1e6);
    fputs("</svg>\n", f);
}

/* The node graph is drawn only up to this many nodes: beyond it Graphviz
 * takes minutes and the picture is a wall of boxes. */
#define GRAPH_MAX_NODES 400

/* The partition picture's geometry (px): boxes in one column, execution
 * order top to bottom, host rows above and below. */
#define PX_LEFT 20.0
#define PX_BOX_W 560.0
#define PX_BOX_H 62.0
#define PX_PITCH 100.0
#define PX_ARC_MAX 20

/* One partition of the ledger. */
typedef struct rep_part {
    const cJSON *j;
    size_t nodes, fallbacks;
    story_count *ops;
    size_t n_ops;
} rep_part;

/* Bytes crossing from row `from` to row `to` (0: the host's inputs, 1 + k:
 * partition k, n + 1: the host's outputs). */
typedef struct rep_edge {
    size_t from, to, tensors;
    double bytes;
    const char *first; /* a tensor's name (the ledger's) */
} rep_edge;

typedef struct rep_parts {
    cJSON *root;
    rep_part *p;
    size_t n;
    rep_edge *e;
    size_t n_e;
    long *node_part; /* per plan node: its partition's index, -1: none */
} rep_parts;

static void parts_free(rep_parts *r)
{
    for (size_t k = 0; k < r->n; k++)
        story_counts_free(r->p[k].ops, r->p[k].n_ops);
    free(r->p);
    free(r->e);
    free(r->node_part);
    cJSON_Delete(r->root);
    memset(r, 0, sizeof *r);
}

static size_t part_index(const rep_parts *r, double id)
{
    for (size_t k = 0; k < r->n; k++)
        if (audit_jnum(r->p[k].j, "id", -1) == id)
            return k;
    return r->n;
}

static int add_edge(rep_parts *r, size_t from, size_t to, double bytes, const char *tensor)
{
    for (size_t k = 0; k < r->n_e; k++)
        if (r->e[k].from == from && r->e[k].to == to) {
            r->e[k].bytes += bytes;
            r->e[k].tensors++;
            return 0;
        }
    rep_edge *e = realloc(r->e, (r->n_e + 1) * sizeof *e);
    if (!e)
        return -1;
    r->e = e;
    e[r->n_e++] = (rep_edge){from, to, 1, bytes, tensor};
    return 0;
}

/* Reads the partitions, their nodes and the boundary tensors from the
 * plan's ledger; 0, or -1 when it cannot be read or out of memory. */
static int parts_read(rep_parts *r, const tdm_plan *plan)
{
    char *ledger = NULL;
    memset(r, 0, sizeof *r);
    if (tdm_plan_ledger_json(plan, &ledger) != TDM_OK)
        return -1;
    r->root = cJSON_Parse(ledger);
    tdm_free(ledger);
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(r->root, "partitions"), *nodes, *x;
    nodes = cJSON_GetObjectItemCaseSensitive(r->root, "nodes");
    size_t nn = tdm_plan_node_count(plan), np = (size_t)cJSON_GetArraySize(parts);
    if (!r->root || !(r->node_part = malloc((nn ? nn : 1) * sizeof *r->node_part)) ||
        !(r->p = calloc(np ? np : 1, sizeof *r->p)))
        return -1;
    cJSON_ArrayForEach(x, parts)
        r->p[r->n++].j = x;
    size_t i = 0;
    cJSON_ArrayForEach(x, nodes)
    {
        if (i == nn)
            break;
        size_t k = part_index(r, audit_jnum(x, "partition", -1));
        r->node_part[i++] = k < r->n ? (long)k : -1;
        if (k == r->n)
            continue;
        r->p[k].nodes++;
        r->p[k].fallbacks += strcmp(audit_jstr(x, "reason"), "OK") != 0;
        if (story_count_add(&r->p[k].ops, &r->p[k].n_ops, audit_jstr(x, "op")))
            return -1;
    }
    for (; i < nn; i++)
        r->node_part[i] = -1;
    for (size_t k = 0; k < r->n; k++) {
        story_counts_sort(r->p[k].ops, r->p[k].n_ops);
        cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r->p[k].j, "inputs"))
        {
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "weight")))
                continue;
            const cJSON *fp = cJSON_GetObjectItemCaseSensitive(x, "from_partition");
            size_t from = cJSON_IsNumber(fp) ? part_index(r, fp->valuedouble) + 1 : 0;
            if (add_edge(r, from, k + 1, audit_jnum(x, "bytes", 0), audit_jstr(x, "tensor")))
                return -1;
        }
        cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r->p[k].j, "outputs"))
            if (add_edge(r, k + 1, r->n + 1, audit_jnum(x, "bytes", 0), audit_jstr(x, "tensor")))
                return -1;
    }
    return 0;
}

static double row_top(size_t row)
{
    return 10.0 + PX_PITCH * (double)row;
}

/* The partitions as boxes (colour: device; text: nodes, fallbacks, top op
 * types, estimate) and the bytes crossing between them on the edges: next
 * partition straight down, further ones by an arc on the right. A box
 * links to its node list. */
static void partition_svg(FILE *f, const tdm_plan *plan, const rep_parts *r, const diag_collector *prof)
{
    size_t rows = r->n + 2, widest = 0;
    for (size_t k = 0; k < r->n_e; k++)
        if (r->e[k].to - r->e[k].from > widest)
            widest = r->e[k].to - r->e[k].from;
    widest = widest > PX_ARC_MAX ? PX_ARC_MAX : widest;
    double arc_x = PX_LEFT + PX_BOX_W, w = arc_x + (widest > 1 ? 24 + 14.0 * (double)widest : 0) + 160;
    char b1[32], b2[32], ops[512];
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"partitions\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"Helvetica,Arial,sans-serif\">\n"
               "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" "
               "markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#555\"/></marker></defs>\n",
            w, row_top(rows) - PX_PITCH + PX_BOX_H + 20);
    for (size_t row = 0; row < rows; row += rows - 1) {
        fprintf(f, "<g class=\"host\"><rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" rx=\"8\" "
                   "fill=\"#eeeeee\" stroke=\"#999\"/><text x=\"%.0f\" y=\"%.0f\" font-size=\"14\">host: the model's "
                   "%s</text></g>\n",
                PX_LEFT, row_top(row), PX_BOX_W, PX_BOX_H, PX_LEFT + 12, row_top(row) + 36,
                row ? "outputs" : "inputs");
    }
    for (size_t k = 0; k < r->n; k++) {
        const rep_part *p = &r->p[k];
        const char *dev = audit_jstr(p->j, "device");
        size_t d = dev_of(plan, dev);
        long id = (long)audit_jnum(p->j, "id", (double)k);
        double y = row_top(k + 1), ms = audit_jnum(p->j, "estimated_ms", -1);
        story_counts_str(p->ops, p->n_ops, 4, 0, ops, sizeof ops);
        fprintf(f, "<a href=\"#nodes-%ld\"><g class=\"part\" id=\"part-%ld\" data-nodes=\"%zu\" data-device=\"", id,
                id, p->nodes);
        esc(f, dev);
        fprintf(f, "\"><title>partition %ld on ", id);
        esc(f, dev);
        fprintf(f, ": %zu node%s; ", p->nodes, p->nodes == 1 ? "" : "s");
        esc(f, ops);
        fprintf(f, " (click: its nodes)</title>\n<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" rx=\"8\" "
                   "fill=\"%s\"/>\n<text x=\"%.0f\" y=\"%.0f\" fill=\"white\" font-size=\"14\" font-weight=\"bold\">"
                   "P%ld &#183; ",
                PX_LEFT, y, PX_BOX_W, PX_BOX_H, dev_colour(plan, d), PX_LEFT + 12, y + 19, id);
        esc(f, dev);
        fprintf(f, " &#183; <tspan class=\"count\">%zu</tspan> node%s", p->nodes, p->nodes == 1 ? "" : "s");
        if (p->fallbacks)
            fprintf(f, " (%zu fell back)", p->fallbacks);
        fprintf(f, "</text>\n<text x=\"%.0f\" y=\"%.0f\" fill=\"white\" font-size=\"12\">", PX_LEFT + 12, y + 37);
        esc(f, ops);
        fprintf(f, "</text>\n<text x=\"%.0f\" y=\"%.0f\" fill=\"white\" font-size=\"12\">", PX_LEFT + 12, y + 54);
        if (ms >= 0)
            fprintf(f, "estimated %.3f ms%s &#183; ", ms, emulated(prof, d) ? " (modeled)" : "");
        fprintf(f, "peak %s</text></g></a>\n", story_bytes_str(audit_jnum(p->j, "peak_bytes", 0), b1, sizeof b1));
    }
    /* consecutive partitions with nothing copied between them: a dashed
     * line keeps the order readable */
    for (size_t row = 0; row + 1 < rows; row++) {
        int copied = 0;
        for (size_t k = 0; k < r->n_e && !copied; k++)
            copied = r->e[k].from == row && r->e[k].to == row + 1;
        if (!copied)
            fprintf(f, "<line class=\"nocopy\" x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#aaa\" "
                       "stroke-dasharray=\"4,4\"><title>nothing copied between these</title></line>\n",
                    PX_LEFT + PX_BOX_W / 2, row_top(row) + PX_BOX_H, PX_LEFT + PX_BOX_W / 2, row_top(row + 1));
    }
    for (size_t k = 0; k < r->n_e; k++) {
        const rep_edge *e = &r->e[k];
        double y1 = row_top(e->from) + PX_BOX_H, y2 = row_top(e->to), cx = PX_LEFT + PX_BOX_W / 2, lx, ly;
        fprintf(f, "<g class=\"edge\" data-from=\"%zu\" data-to=\"%zu\" data-bytes=\"%.0f\"><title>%s, %zu tensor%s (",
                e->from, e->to, e->bytes, story_bytes_str(e->bytes, b1, sizeof b1), e->tensors,
                e->tensors == 1 ? "" : "s");
        esc(f, e->first);
        fputs(e->tensors > 1 ? ", &#8230;)</title>" : ")</title>", f);
        if (e->to == e->from + 1) {
            fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#555\" stroke-width=\"2\" "
                       "marker-end=\"url(#arrow)\"/>",
                    cx, y1, cx, y2);
            lx = cx + 10;
            ly = (y1 + y2) / 2 + 4;
        } else {
            /* further down: out of the right side and back in, wider for longer spans */
            size_t span = e->to - e->from > PX_ARC_MAX ? PX_ARC_MAX : e->to - e->from;
            double x2 = arc_x + 24 + 14.0 * (double)(span - 1) + 4.0 * (double)(e->from % 3);
            y1 -= PX_BOX_H * 0.3;
            y2 += PX_BOX_H * 0.3;
            fprintf(f, "<path d=\"M%.0f,%.0f H%.0f V%.0f H%.0f\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
                       "marker-end=\"url(#arrow)\"/>",
                    arc_x, y1, x2, y2, arc_x + 1, COPY_COLOUR);
            lx = x2 + 4;
            ly = (y1 + y2) / 2;
        }
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\">%s", lx, ly, story_bytes_str(e->bytes, b2, sizeof b2));
        if (e->tensors > 1)
            fprintf(f, " (%zu tensors)", e->tensors);
        fputs("</text></g>\n", f);
    }
    fputs("</svg>\n", f);
}

/* One partition's heading: "P3, cpu, 14 nodes (2 fell back), Conv 8, ..." with middle dots. */
static void part_heading(FILE *f, const rep_part *p, long id)
{
    char ops[512];
    story_counts_str(p->ops, p->n_ops, 4, 0, ops, sizeof ops);
    fprintf(f, "P%ld &#183; ", id);
    esc(f, audit_jstr(p->j, "device"));
    fprintf(f, " &#183; %zu node%s", p->nodes, p->nodes == 1 ? "" : "s");
    if (p->fallbacks)
        fprintf(f, " (%zu fell back)", p->fallbacks);
    fputs(" &#183; ", f);
    esc(f, ops);
}

/* Each partition's nodes with reason, detail and times (the device is the
 * partition's; a node in no partition is on the device it names), behind a
 * closed <details> (nodes on demand); names are whole and wrap. */
static void node_lists(FILE *f, const tdm_plan *plan, const rep_parts *r, const diag_collector *prof)
{
    size_t nn = tdm_plan_node_count(plan);
    fputs("<div id=\"ledger\">\n", f);
    for (size_t k = 0; k <= r->n; k++) {
        long want = k < r->n ? (long)k : -1, id = k < r->n ? (long)audit_jnum(r->p[k].j, "id", (double)k) : -1;
        size_t count = 0;
        for (size_t i = 0; i < nn; i++)
            count += r->node_part[i] == want;
        if (!count)
            continue;
        if (k < r->n) {
            fprintf(f, "<details class=\"nodes\" id=\"nodes-%ld\"><summary>", id);
            part_heading(f, &r->p[k], id);
        } else {
            fprintf(f, "<details class=\"nodes\" id=\"nodes-none\"><summary>in no partition (folded or "
                       "skipped): %zu node%s", count, count == 1 ? "" : "s");
        }
        fputs("</summary>\n<table><tr><th>#</th><th>node</th><th>op</th><th>reason</th>"
              "<th>detail</th><th>mean ms</th><th>modeled ms</th></tr>\n",
              f);
        for (size_t i = 0; i < nn; i++) {
            if (r->node_part[i] != want)
                continue;
            const char *name = "", *op = "", *dev = "", *reason = "", *detail = "";
            tdm_plan_node(plan, i, &name, &op, &dev, &reason, &detail);
            const diag_node *x = &prof->nodes[i];
            double calls = x->calls ? (double)x->calls : 1;
            fprintf(f, "<tr%s><td class=\"num\">%zu</td><td class=\"name\">", strcmp(reason, "OK") ? " class=\"bad\"" : "",
                    i);
            esc(f, name);
            fputs("</td><td>", f);
            esc(f, op);
            fputs("</td><td>", f);
            esc(f, reason);
            fputs("</td><td>", f);
            esc(f, detail);
            fprintf(f, "</td><td class=\"num\">%.4f%s</td>", (double)x->ns / 1e6 / calls,
                    emulated(prof, dev_of(plan, dev)) ? " <span class=\"emu\">emulated</span>" : "");
            if (x->modeled)
                fprintf(f, "<td class=\"num\">%.4f</td></tr>\n", x->modeled_ms / calls);
            else
                fputs("<td>-</td></tr>\n", f);
        }
        fputs("</table></details>\n", f);
    }
    fputs("</div>\n", f);
}

/* The story `tandem plan` opens with (story_print_plan), without its last
 * line about plan's flags; NULL when out of memory. free() it. */
static char *plan_story(diag_setup *x, const diag_common *d, const tdm_plan *plan)
{
    char *ledger = NULL, *text = NULL;
    size_t len = 0;
    /* the all-cpu estimate: a cpu session on the same inputs' shapes */
    double cpu_ms = -1;
    tdm_session *cpu = NULL;
    tdm_plan_summary s;
    if (tdm_plan_device_count(plan) > 1 && diag_session("report", x, d, "cpu", &cpu) == 0 &&
        tdm_plan_get_summary(tdm_session_plan(cpu), &s) == TDM_OK && s.estimates_complete)
        cpu_ms = s.estimated_ms;
    tdm_session_destroy(cpu);
    FILE *f = open_memstream(&text, &len);
    if (!f || tdm_plan_ledger_json(plan, &ledger) != TDM_OK || story_print_plan(f, ledger, cpu_ms, "", "")) {
        if (f)
            fclose(f);
        free(text);
        tdm_free(ledger);
        return NULL;
    }
    tdm_free(ledger);
    if (fclose(f)) {
        free(text);
        return NULL;
    }
    char *tail = strstr(text, "\n(--nodes ");
    if (tail)
        tail[1] = '\0';
    return text;
}

typedef struct rep_args {
    diag_common c;
    const char *html;
    long long iterations;
    int has_abs;
    double min_cos, max_abs;
} rep_args;

static int rep_parse(int argc, char **argv, rep_args *a)
{
    const char *cmd = "report", *val;
    int rc, r;
    a->iterations = 10;
    a->min_cos = 0.999;
    for (int i = 1; i < argc; i++) {
        if ((r = cli_opt_value(cmd, argc, argv, &i, "--html", &val)) != 0) {
            if (r < 0 || !*val) {
                if (r > 0)
                    cli_error("report: --html expects a file name");
                return EXIT_USAGE;
            }
            a->html = val;
        } else if ((r = cli_opt_value(cmd, argc, argv, &i, "--iterations", &val)) != 0) {
            if (r < 0 || cli_parse_i64(val, &a->iterations) || a->iterations < 1 || a->iterations > 1000000) {
                if (r > 0)
                    cli_error("report: --iterations expects a whole number of at least 1, not '%s'", val);
                return EXIT_USAGE;
            }
        } else if (diag_threshold_opt(cmd, argc, argv, &i, &a->c, &a->min_cos, &a->has_abs, &a->max_abs, &rc)) {
            if (rc)
                return rc;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage_report(stdout);
            return -1;
        } else if (diag_common_opt(cmd, argc, argv, &i, &a->c, &rc)) {
            if (rc)
                return rc;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("report: unknown option '%s'; `tandem report --help` lists the options", argv[i]);
            return EXIT_USAGE;
        } else if (!a->c.model) {
            a->c.model = argv[i];
        } else {
            cli_error("report: one model only ('%s' and '%s')", a->c.model, argv[i]);
            return EXIT_USAGE;
        }
    }
    if (!a->c.model || !a->html) {
        cli_error("report: %s; usage: tandem report MODEL --devices LIST --html FILE",
                  !a->c.model ? "no model given" : "--html FILE is required");
        return EXIT_USAGE;
    }
    return 0;
}

static void write_page(FILE *f, const rep_args *a, const tdm_plan *plan, const diag_collector *prof,
                       const diag_collector *one, const diag_cmp *cmp, const rep_parts *parts, const char *story,
                       const char *svg, const char *why)
{
    tdm_plan_summary sum;
    memset(&sum, 0, sizeof sum);
    tdm_plan_get_summary(plan, &sum);
    double it = prof->runs ? (double)prof->runs : 1;
    size_t nd = tdm_plan_device_count(plan), nn = tdm_plan_node_count(plan);
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>tandem report: ", f);
    esc(f, a->c.model);
    fputs("</title>\n<style>\n"
          "body{font-family:Helvetica,Arial,sans-serif;margin:20px;color:#222}\n"
          "h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:28px}\n"
          "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left}\n"
          "th{background:#f0f0f0}.num{text-align:right}.bad{background:#fde0e0}.swatch{display:inline-block;width:12px;"
          "height:12px;margin-right:4px;vertical-align:middle}\n"
          ".missing{border:2px solid #d62728;background:#fff3f3;padding:10px;max-width:900px}\n"
          ".kpi{display:inline-block;margin-right:28px;font-size:14px}.kpi b{font-size:20px;display:block}\n"
          ".graph{overflow:auto;max-height:900px;border:1px solid #ddd}\n"
          "#story{background:#f7f7f7;border:1px solid #ddd;padding:10px;white-space:pre-wrap;max-width:1200px;"
          "font-size:13px}\n.parts{overflow:auto;max-height:900px;border:1px solid #ddd;display:inline-block}\n"
          "details.nodes{margin:3px 0;font-size:13px}details.nodes summary{cursor:pointer}\n"
          "td.name{overflow-wrap:anywhere;max-width:560px}.emu{color:#a05a00;font-size:11px}\n"
          "</style></head><body>\n<h1>tandem report: ",
          f);
    esc(f, a->c.model);
    fputs("</h1>\n<p>Devices in priority order: ", f);
    for (size_t d = 0; d < nd; d++) {
        fprintf(f, "<span class=\"swatch\" style=\"background:%s\"></span>", dev_colour(plan, d));
        esc(f, tdm_plan_device_name(plan, d));
        fputs(d + 1 < nd ? ", " : "", f);
    }
    fprintf(f, "; <span class=\"swatch\" style=\"background:%s\"></span>copies.</p>\n", COPY_COLOUR);
    fputs("<h2>Summary</h2>\n<pre id=\"story\">", f);
    esc(f, story);
    fputs("</pre>\n", f);
    int any_emu = 0;
    for (size_t d = 0; d < nd; d++)
        any_emu |= emulated(prof, d);
    fputs("<div id=\"summary\">", f);
    fprintf(f, "<div class=\"kpi\"><b id=\"fallback-ratio\">%.1f %%</b>fallback ratio (measured: cpu time of nodes "
               "that fell back / node time)</div>",
            100.0 * diag_fallback_ratio(prof));
    fprintf(f, "<div class=\"kpi\"><b>%.1f %%</b>planned fallback ratio%s</div>", 100.0 * sum.fallback_ratio,
            sum.modeled ? " (modeled)" : "");
    fprintf(f, "<div class=\"kpi\"><b>%zu / %zu</b>nodes fall back</div>", sum.fallback_nodes, sum.nodes);
    fprintf(f, "<div class=\"kpi\"><b>%zu</b>partition%s</div>", sum.partitions, sum.partitions == 1 ? "" : "s");
    fprintf(f, "<div class=\"kpi\"><b>%.3f ms</b>wall per run (%llu runs)%s</div>", (double)prof->wall_ns / 1e6 / it,
            (unsigned long long)prof->runs,
            any_emu ? ", <span class=\"emu\">emulated</span>: virtual devices run as host emulation; the modeled "
                      "estimate is in the summary"
                    : "");
    fprintf(f, "<div class=\"kpi\"><b>%.1f %%</b>copy share</div>",
            prof->wall_ns ? 100.0 * (double)prof->copy_ns / (double)prof->wall_ns : 0.0);
    fputs("</div>\n", f);

    char b1[32];
    fprintf(f, "<h2>Partitions</h2>\n<p>%zu partition%s in execution order, coloured by device; the edges carry the "
               "bytes copied between them per run (%s in all, the ledger's boundary bytes; red: to a later "
               "partition than the next; the cpu reads and writes host memory without a copy). Click a partition "
               "for its nodes.</p>\n<div class=\"parts\">\n",
            parts->n, parts->n == 1 ? "" : "s", story_bytes_str((double)sum.boundary_bytes, b1, sizeof b1));
    partition_svg(f, plan, parts, prof);
    fputs("</div>\n<h2>Nodes by partition</h2>\n", f);
    node_lists(f, plan, parts, prof);
    fputs("<h2>Node graph</h2>\n", f);
    if (nn > GRAPH_MAX_NODES) {
        fprintf(f, "<p id=\"graph-too-large\">The node graph is not drawn: %zu nodes is more than the %d a readable "
                   "drawing holds. The partitions above list every node.</p>\n",
                nn, GRAPH_MAX_NODES);
    } else if (svg) {
        const char *s = strstr(svg, "<svg");
        fprintf(f, "<details id=\"graph-toggle\"><summary>Show the %zu nodes (Graphviz)</summary>\n"
                   "<div class=\"graph\" id=\"graph\">\n", nn);
        fputs(s ? s : svg, f);
        fputs("</div>\n<p>Nodes are coloured by device; a red frame marks a node that is not on its first "
              "device; red edges cross devices (a copy).</p></details>\n",
              f);
    } else {
        fputs("<div class=\"missing\" id=\"graph-missing\">", f);
        esc(f, why);
        fputs("</div>\n", f);
    }

    fputs("<h2>Devices</h2>\n<table><tr><th>device</th><th>nodes</th><th>busy ms/run (measured)</th><th>utilisation</th>"
          "<th>modeled ms/run</th></tr>\n",
          f);
    for (size_t d = 0; d < nd; d++) {
        const diag_dev *x = &prof->devs[d];
        fprintf(f, "<tr><td><span class=\"swatch\" style=\"background:%s\"></span>", dev_colour(plan, d));
        esc(f, tdm_plan_device_name(plan, d));
        fprintf(f, "</td><td class=\"num\">%zu</td><td class=\"num\">%.3f%s</td><td class=\"num\">%.1f %%</td>",
                tdm_plan_device_nodes(plan, d), (double)x->ns / 1e6 / it,
                emulated(prof, d) ? " <span class=\"emu\">emulated</span>" : "",
                prof->wall_ns ? 100.0 * (double)x->ns / (double)prof->wall_ns : 0.0);
        if (x->modeled)
            fprintf(f, "<td class=\"num\">%.4f (modeled)</td></tr>\n", x->modeled_ms / it);
        else
            fputs("<td>-</td></tr>\n", f);
    }
    fprintf(f, "<tr><td>copies</td><td class=\"num\">%.0f</td><td class=\"num\">%.3f%s</td><td>%.0f bytes/run</td>",
            (double)prof->copies / it, (double)prof->copy_ns / 1e6 / it,
            prof->copy_modeled ? " <span class=\"emu\">emulated</span>" : "", (double)prof->copy_bytes / it);
    if (prof->copy_modeled)
        fprintf(f, "<td class=\"num\">%.4f (modeled)</td></tr>\n</table>\n", prof->copy_modeled_ms / it);
    else
        fputs("<td>-</td></tr>\n</table>\n", f);

    fputs("<h2>Timeline of one run</h2>\n", f);
    timeline(f, one);

    fputs("<h2>Precision against the cpu fp32 reference</h2>\n", f);
    fprintf(f, "<p>%zu nodes compared, %zu skipped, %zu crossing the threshold (cosine &lt; %g%s).", cmp->n_rows,
            cmp->skipped, cmp->crossing, a->min_cos, a->has_abs ? " or max abs above the limit" : "");
    if (cmp->first >= 0) {
        const char *name = "";
        tdm_plan_node(plan, cmp->rows[cmp->first].node, &name, NULL, NULL, NULL, NULL);
        fputs(" First node crossing it: <b>", f);
        esc(f, name);
        fputs("</b>.", f);
    }
    fputs("</p>\n<table id=\"precision\"><tr><th>pos</th><th>node</th><th>op</th><th>device</th><th>max abs</th>"
          "<th>RMSE</th><th>cosine</th><th>1 &minus; cosine</th></tr>\n",
          f);
    diag_cmp_row *worst = diag_cmp_worst(cmp);
    size_t show = cmp->n_rows < 20 ? cmp->n_rows : 20;
    for (size_t k = 0; worst && k < show; k++) {
        const diag_cmp_row *r = &worst[k];
        const char *name = "", *op = "", *dev = "";
        tdm_plan_node(plan, r->node, &name, &op, &dev, NULL, NULL);
        fprintf(f, "<tr%s><td class=\"num\">%zu</td><td>", r->crosses ? " class=\"bad\"" : "", r->order);
        esc(f, name);
        fputs("</td><td>", f);
        esc(f, op);
        fputs("</td><td>", f);
        esc(f, dev);
        fprintf(f,
                "</td><td class=\"num\">%.4g</td><td class=\"num\">%.4g</td><td class=\"num\">%.6f%s</td>"
                "<td class=\"num\">%.3e</td></tr>\n",
                r->max_abs, r->rmse, r->cosine, r->nonfinite ? " NaN/Inf" : "", 1.0 - r->cosine);
    }
    free(worst);
    fprintf(f, "</table>\n<p>The %zu worst nodes, lowest cosine first.</p>\n", show);

    fputs("<script>\n/* a link to a partition's node list opens it */\nfunction openHash() {\n"
          "  var e = document.getElementById(decodeURIComponent(location.hash.slice(1)));\n"
          "  if (e && e.tagName === 'DETAILS') e.open = true;\n}\n"
          "window.addEventListener('hashchange', openHash);\nopenHash();\n</script>\n",
          f);
    fputs("<p>Written by tandem " TDM_VERSION_STRING "; this page needs no network.</p>\n</body></html>\n", f);
}

int cmd_report(int argc, char **argv)
{
    rep_args a;
    memset(&a, 0, sizeof a);
    diag_common_init(&a.c);
    diag_setup x;
    memset(&x, 0, sizeof x);
    diag_collector prof, one;
    memset(&prof, 0, sizeof prof);
    memset(&one, 0, sizeof one);
    diag_cmp cmp;
    memset(&cmp, 0, sizeof cmp);
    char *svg = NULL, *story = NULL;
    rep_parts parts;
    memset(&parts, 0, sizeof parts);
    int rc = rep_parse(argc, argv, &a);
    if (rc) {
        diag_common_free(&a.c);
        return rc < 0 ? 0 : rc;
    }
    if ((rc = diag_open("report", &a.c, &x)) != 0)
        goto done;
    const tdm_plan *plan = tdm_session_plan(x.s);
    if (diag_collector_init(&prof, plan, 0) || diag_collector_init(&one, plan, 1)) {
        rc = cli_fail(TDM_E_NOMEM, NULL, "out of memory");
        goto done;
    }
    tdm_session_set_observer(x.s, diag_collect, &prof);
    cli_progress pr;
    size_t total = (size_t)a.iterations + 3;
    cli_progress_begin(&pr, "report");
    for (int k = 0; k < 2 && !rc; k++) {
        rc = diag_run(&x, x.s);
        cli_progress_step(&pr, (size_t)k + 1, total, "runs (warm-up)");
    }
    /* the plan that answers: the precision guard may re-plan in the first run */
    plan = tdm_session_plan(x.s);
    if (!rc && (diag_collector_rebind(&prof, plan) || diag_collector_rebind(&one, plan)))
        rc = cli_fail(TDM_E_NOMEM, NULL, "out of memory");
    prof.recording = 1;
    for (long long k = 0; k < a.iterations && !rc; k++) {
        rc = diag_run(&x, x.s);
        cli_progress_step(&pr, (size_t)k + 3, total, "runs");
    }
    one.recording = 1;
    tdm_session_set_observer(x.s, diag_collect, &one);
    if (!rc)
        rc = diag_run(&x, x.s);
    cli_progress_end(&pr);
    tdm_session_set_observer(x.s, NULL, NULL);
    if (rc || (rc = diag_compare("report", &x, &a.c, a.min_cos, a.has_abs, a.max_abs, &cmp)) != 0)
        goto done;
    if (parts_read(&parts, plan) || !(story = plan_story(&x, &a.c, plan))) {
        rc = cli_fail(TDM_E_NOMEM, NULL, "out of memory reading the plan's ledger");
        goto done;
    }
    const char *why = "";
    if (tdm_plan_node_count(plan) <= GRAPH_MAX_NODES)
        svg = draw_graph(plan, &why);
    FILE *f = fopen(a.html, "w");
    if (!f) {
        cli_error("cannot write the report to '%s': %s", a.html, strerror(errno));
        rc = EXIT_IO;
        goto done;
    }
    write_page(f, &a, plan, &prof, &one, &cmp, &parts, story, svg, why);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad) {
        cli_error("cannot write the report to '%s'", a.html);
        rc = EXIT_IO;
        goto done;
    }
    if (!svg && tdm_plan_node_count(plan) <= GRAPH_MAX_NODES)
        fprintf(stderr, "tandem: note: %s\n", why);
    printf("report written to %s\n", a.html);
done:
    free(svg);
    free(story);
    parts_free(&parts);
    diag_cmp_free(&cmp);
    diag_collector_free(&prof);
    diag_collector_free(&one);
    diag_close(&x);
    diag_common_free(&a.c);
    return rc;
}
