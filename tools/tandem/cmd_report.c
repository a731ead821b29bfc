/* `tandem report`: one self-contained HTML page (no network) — the
 * partitioned graph coloured by device (Graphviz `dot -Tsvg` when it is
 * installed, embedded as SVG), the ledger with reasons, a timeline of one
 * run (inline SVG from the session's events), the precision table (the
 * compare figures) and the fallback ratio. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

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
          "partitioned graph coloured by device (drawn with Graphviz `dot` when installed;\n"
          "otherwise the page says so), the ledger with every node's device and reason,\n"
          "the timeline of one run, the precision table and the fallback ratio.\n"
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
        size_t l = strlen(name);
        dot_esc(f, l > 28 ? name + l - 28 : name);
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
        fprintf(f, " %.3f ms</title></rect>\n", (double)(t->end_ns - t->start_ns) / 1e6);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\">0 ms</text>\n", left, rowh * (double)rows + 20);
    fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.3f ms</text>\n", left + W,
            rowh * (double)rows + 20, span / 1e6);
    fputs("</svg>\n", f);
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
                       const diag_collector *one, const diag_cmp *cmp, const char *svg, const char *why)
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
    fputs("<div id=\"summary\">", f);
    fprintf(f, "<div class=\"kpi\"><b id=\"fallback-ratio\">%.1f %%</b>fallback ratio (measured: cpu time of nodes "
               "that fell back / node time)</div>",
            100.0 * diag_fallback_ratio(prof));
    fprintf(f, "<div class=\"kpi\"><b>%.1f %%</b>planned fallback ratio%s</div>", 100.0 * sum.fallback_ratio,
            sum.modeled ? " (modeled)" : "");
    fprintf(f, "<div class=\"kpi\"><b>%zu / %zu</b>nodes fall back</div>", sum.fallback_nodes, sum.nodes);
    fprintf(f, "<div class=\"kpi\"><b>%zu</b>partition%s</div>", sum.partitions, sum.partitions == 1 ? "" : "s");
    fprintf(f, "<div class=\"kpi\"><b>%.3f ms</b>wall per run (%llu runs)</div>", (double)prof->wall_ns / 1e6 / it,
            (unsigned long long)prof->runs);
    fprintf(f, "<div class=\"kpi\"><b>%.1f %%</b>copy share</div>",
            prof->wall_ns ? 100.0 * (double)prof->copy_ns / (double)prof->wall_ns : 0.0);
    fputs("</div>\n", f);

    fputs("<h2>Partitioned graph</h2>\n", f);
    if (svg) {
        const char *s = strstr(svg, "<svg");
        fputs("<div class=\"graph\" id=\"graph\">\n", f);
        fputs(s ? s : svg, f);
        fputs("</div>\n<p>Nodes are coloured by device; a red frame marks a node that is not on its first "
              "device; red edges cross devices (a copy).</p>\n",
              f);
    } else {
        fputs("<div class=\"missing\" id=\"graph-missing\">", f);
        esc(f, why);
        fputs("</div>\n", f);
    }

    fputs("<h2>Devices</h2>\n<table><tr><th>device</th><th>nodes</th><th>busy ms/run</th><th>utilisation</th>"
          "<th>modeled ms/run</th></tr>\n",
          f);
    for (size_t d = 0; d < nd; d++) {
        const diag_dev *x = &prof->devs[d];
        fprintf(f, "<tr><td><span class=\"swatch\" style=\"background:%s\"></span>", dev_colour(plan, d));
        esc(f, tdm_plan_device_name(plan, d));
        fprintf(f, "</td><td class=\"num\">%zu</td><td class=\"num\">%.3f</td><td class=\"num\">%.1f %%</td>",
                tdm_plan_device_nodes(plan, d), (double)x->ns / 1e6 / it,
                prof->wall_ns ? 100.0 * (double)x->ns / (double)prof->wall_ns : 0.0);
        if (x->modeled)
            fprintf(f, "<td class=\"num\">%.4f (modeled)</td></tr>\n", x->modeled_ms / it);
        else
            fputs("<td>-</td></tr>\n", f);
    }
    fprintf(f, "<tr><td>copies</td><td class=\"num\">%.0f</td><td class=\"num\">%.3f</td><td>%.0f bytes/run</td>"
               "<td class=\"num\">%s</td></tr>\n</table>\n",
            (double)prof->copies / it, (double)prof->copy_ns / 1e6 / it, (double)prof->copy_bytes / it,
            prof->copy_modeled ? "modeled" : "-");

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

    fputs("<h2>Ledger</h2>\n<table id=\"ledger\"><tr><th>#</th><th>node</th><th>op</th><th>device</th><th>reason</th>"
          "<th>detail</th><th>mean ms</th></tr>\n",
          f);
    for (size_t i = 0; i < nn; i++) {
        const char *name = "", *op = "", *dev = "", *reason = "", *detail = "";
        tdm_plan_node(plan, i, &name, &op, &dev, &reason, &detail);
        const diag_node *x = &prof->nodes[i];
        fprintf(f, "<tr%s><td class=\"num\">%zu</td><td>", strcmp(reason, "OK") ? " class=\"bad\"" : "", i);
        esc(f, name);
        fputs("</td><td>", f);
        esc(f, op);
        fprintf(f, "</td><td><span class=\"swatch\" style=\"background:%s\"></span>", dev_colour(plan, dev_of(plan, dev)));
        esc(f, dev);
        fputs("</td><td>", f);
        esc(f, reason);
        fputs("</td><td>", f);
        esc(f, detail);
        fprintf(f, "</td><td class=\"num\">%.4f</td></tr>\n", x->calls ? (double)x->ns / 1e6 / (double)x->calls : 0.0);
    }
    fputs("</table>\n<p>Written by tandem " TDM_VERSION_STRING "; this page needs no network.</p>\n</body></html>\n",
          f);
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
    char *svg = NULL;
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
    for (int k = 0; k < 2 && !rc; k++)
        rc = diag_run(&x, x.s);
    prof.recording = 1;
    for (long long k = 0; k < a.iterations && !rc; k++)
        rc = diag_run(&x, x.s);
    one.recording = 1;
    tdm_session_set_observer(x.s, diag_collect, &one);
    if (!rc)
        rc = diag_run(&x, x.s);
    tdm_session_set_observer(x.s, NULL, NULL);
    if (rc || (rc = diag_compare("report", &x, &a.c, a.min_cos, a.has_abs, a.max_abs, &cmp)) != 0)
        goto done;
    const char *why = "";
    svg = draw_graph(plan, &why);
    FILE *f = fopen(a.html, "w");
    if (!f) {
        cli_error("cannot write the report to '%s': %s", a.html, strerror(errno));
        rc = EXIT_IO;
        goto done;
    }
    write_page(f, &a, plan, &prof, &one, &cmp, svg, why);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad) {
        cli_error("cannot write the report to '%s'", a.html);
        rc = EXIT_IO;
        goto done;
    }
    if (!svg)
        fprintf(stderr, "tandem: note: %s\n", why);
    printf("report written to %s\n", a.html);
done:
    free(svg);
    diag_cmp_free(&cmp);
    diag_collector_free(&prof);
    diag_collector_free(&one);
    diag_close(&x);
    diag_common_free(&a.c);
    return rc;
}
