/* tandem plan MODEL [RUN OPTIONS] [--shape NAME=DxD]... [--nodes] [--json]
 * tandem devices [--plugin PATH]... [--json] */
#include "cli.h"
#include "json.h"
#include "story.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void usage_plan(FILE *f)
{
    fputs("usage: tandem plan MODEL [RUN OPTIONS] [--shape NAME=DxD]... [--nodes] [--json]\n"
          "\n"
          "Decides, without running, where every node of the model runs and why. It opens\n"
          "with the story: nodes per device, the fallback nodes counted by reason code and\n"
          "by op type, the partitions, the boundary bytes, the estimated time per run\n"
          "against the same model all on cpu (marked modeled where a device's figures are\n"
          "modeled), the fallback policy's verdict and hints (what to do about the largest\n"
          "groups). A policy violation lists every offending node once, on stderr.\n"
          "\n"
          "  --shape NAME=DxD    fix dynamic dimensions of input NAME, so that devices that\n"
          "                      need static shapes can take the model ('?' keeps one)\n"
          "  --nodes, --verbose  then the details: nodes and time per device, every\n"
          "                      partition, every fallback and pinned node with its reason\n"
          "                      code and sentence, every boundary tensor with its bytes\n"
          "  --json              print the ledger (one JSON document) instead\n"
          "\n",
          f);
    usage_runopts(f);
}

void usage_devices(FILE *f)
{
    fputs("usage: tandem devices [--plugin PATH]... [--json]\n"
          "\n"
          "Lists the devices tandem knows: cpu, the virtual NPU profiles, opencl and the\n"
          "plugins given with --plugin or TANDEM_PLUGINS; for each, whether it is available\n"
          "here and, when it is not, why.\n"
          "\n"
          "  --plugin PATH    load a device plugin (a shared library)\n"
          "  --json           print one JSON document instead\n",
          f);
}

typedef struct shape_arg {
    char *name;
    const char *value;
} shape_arg;

/* Whether a --shape of the list (arg: a shape_list) fixes input name. */
typedef struct shape_list {
    const shape_arg *shapes;
    size_t n;
} shape_list;

static int shape_given(const char *name, void *arg)
{
    const shape_list *l = arg;
    for (size_t k = 0; k < l->n; k++)
        if (strcmp(l->shapes[k].name, name) == 0)
            return 1;
    return 0;
}

/* The story (story_print_plan) under the report's title line, then with
 * nodes the report's details (up to its own summary and policy lines,
 * which the story replaces). Returns 0 or an exit code. */
static int print_story(tdm_ctx *ctx, const tdm_model *m, const tdm_plan *plan, const shape_arg *shapes,
                       size_t n_shapes, const char *report, const char *ledger, int nodes)
{
    shape_list l = {shapes, n_shapes};
    char *dyn = story_dynamic_inputs(m, shape_given, &l, 2), *flags = story_dynamic_inputs(m, shape_given, &l, 1);
    double cpu_ms = -1;
    tdm_session_options *so = NULL;
    int rc = 0;
    if (!dyn || !flags || tdm_session_options_create(&so) != TDM_OK) {
        cli_error("out of memory");
        rc = EXIT_INTERNAL;
        goto done;
    }
    /* the same model all on cpu, with the same --shape values */
    int ok = 1;
    for (size_t k = 0; k < n_shapes && ok; k++) {
        int rank;
        int64_t dims[CLI_MAX_RANK];
        ok = cli_parse_dims("plan", shapes[k].name, shapes[k].value, &rank, dims) == 0 &&
             tdm_session_options_set_shape(so, shapes[k].name, rank, dims) == TDM_OK;
    }
    if (ok && tdm_plan_device_count(plan) > 1)
        cpu_ms = story_all_cpu_ms(ctx, m, so);
    const char *nl = strchr(report, '\n');
    size_t title = nl ? (size_t)(nl - report) + 1 : strlen(report);
    fwrite(report, 1, title, stdout);
    fputc('\n', stdout);
    if (story_print_plan(stdout, ledger, cpu_ms, dyn, flags)) {
        cli_error("out of memory reading the plan's ledger");
        rc = EXIT_INTERNAL;
        goto done;
    }
    if (nodes) {
        const char *body = report + title, *end = strstr(body, "\nsummary: ");
        if (*body == '\n')
            body++;
        fputc('\n', stdout);
        fwrite(body, 1, end ? (size_t)(end - body) + 1 : strlen(body), stdout);
    }
done:
    free(dyn);
    free(flags);
    tdm_session_options_destroy(so);
    return rc;
}

int cmd_plan(int argc, char **argv)
{
    cli_runopts ro;
    const char *model = NULL;
    int json = 0, nodes = 0, rc = 0;
    shape_arg *shapes = calloc((size_t)argc + 1, sizeof *shapes);
    size_t n_shapes = 0;
    tdm_ctx *ctx = NULL;
    tdm_model *m = NULL;
    tdm_session_options *so = NULL;
    tdm_plan *plan = NULL;
    tdm_session *sess = NULL;
    char *text = NULL, *ledger = NULL;
    tdm_status st;
    cli_runopts_init(&ro);
    if (!shapes) {
        cli_error("out of memory");
        return EXIT_INTERNAL;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage_plan(stdout);
            goto done;
        }
        if (strcmp(a, "--json") == 0) {
            json = 1;
            continue;
        }
        if (strcmp(a, "--nodes") == 0 || strcmp(a, "--verbose") == 0) {
            nodes = 1;
            continue;
        }
        if (cli_runopts_parse("plan", argc, argv, &i, &ro, &rc)) {
            if (rc)
                goto done;
            continue;
        }
        if (strncmp(a, "--shape", 7) == 0 && (a[7] == '\0' || a[7] == '=')) {
            const char *v = a[7] == '=' ? a + 8 : (i + 1 < argc ? argv[++i] : NULL);
            const char *eq = v ? strrchr(v, '=') : NULL;
            if (!eq || eq == v) {
                cli_error("plan: --shape expects NAME=DxD..., not '%s'", v ? v : "");
                rc = EXIT_USAGE;
                goto done;
            }
            shapes[n_shapes].name = malloc((size_t)(eq - v) + 1);
            if (!shapes[n_shapes].name) {
                cli_error("out of memory");
                rc = EXIT_INTERNAL;
                goto done;
            }
            memcpy(shapes[n_shapes].name, v, (size_t)(eq - v));
            shapes[n_shapes].name[eq - v] = '\0';
            shapes[n_shapes++].value = eq + 1;
            continue;
        }
        if (a[0] == '-' && a[1]) {
            cli_error("plan: unknown option '%s'; see `tandem plan --help`", a);
            rc = EXIT_USAGE;
            goto done;
        }
        if (model) {
            cli_error("plan: one MODEL only ('%s' and '%s' given)", model, a);
            rc = EXIT_USAGE;
            goto done;
        }
        model = a;
    }
    if (!model) {
        cli_error("plan: no MODEL given; see `tandem plan --help`");
        rc = EXIT_USAGE;
        goto done;
    }
    if ((st = tdm_ctx_create(&ctx)) != TDM_OK || (st = tdm_session_options_create(&so)) != TDM_OK) {
        rc = cli_fail(st, NULL, "out of memory");
        goto done;
    }
    if ((st = tdm_model_load(ctx, model, &m)) != TDM_OK) {
        rc = cli_fail(st, NULL, tdm_ctx_error(ctx));
        goto done;
    }
    for (size_t k = 0; k < n_shapes; k++) {
        int rank;
        int64_t dims[CLI_MAX_RANK];
        if (cli_parse_dims("plan", shapes[k].name, shapes[k].value, &rank, dims)) {
            rc = EXIT_USAGE;
            goto done;
        }
        if (cli_find_input(m, shapes[k].name) < 0) {
            char names[180];
            cli_list_inputs(m, names, sizeof names);
            cli_error("--shape names '%s', which is not an input of the model (its inputs: %s)", shapes[k].name,
                      names);
            rc = EXIT_INVALID;
            goto done;
        }
        if ((st = tdm_session_options_set_shape(so, shapes[k].name, rank, dims)) != TDM_OK) {
            rc = cli_fail(st, NULL, "--shape: the value is not accepted");
            goto done;
        }
    }
    if ((rc = cli_runopts_apply(&ro, so)) != 0 ||
        (rc = cli_binds_apply(&ro, m, so)) != 0)
        goto done;
    if ((st = tdm_plan_create(ctx, m, so, &plan)) != TDM_OK) {
        rc = cli_fail(st, NULL, tdm_ctx_error(ctx));
        goto done;
    }
    cli_calibration_note(&ro, plan);
    /* With --calibration-input the precision guard checks the plan on those
     * sets when a session is created (tandem.h): the plan shown is the one
     * a run would start with. */
    const tdm_plan *shown = plan;
    if (ro.n_cal_inputs && tdm_plan_status(plan) != TDM_E_POLICY) {
        if ((st = tdm_session_create(ctx, m, so, &sess)) != TDM_OK) {
            rc = cli_fail(st, NULL, tdm_ctx_error(ctx));
            goto done;
        }
        shown = tdm_session_plan(sess);
    }
    st = json ? tdm_plan_ledger_json(shown, &text) : tdm_plan_report(shown, &text);
    if (st || (!json && (st = tdm_plan_ledger_json(shown, &ledger)) != TDM_OK)) {
        rc = cli_fail(st, NULL, "cannot write the plan");
        goto done;
    }
    if (json) {
        fputs(text, stdout);
        fputc('\n', stdout);
    } else if ((rc = print_story(ctx, m, shown, shapes, n_shapes, text, ledger, nodes)) != 0) {
        goto done;
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("cannot write to standard output");
        rc = EXIT_IO;
        goto done;
    }
    if (tdm_plan_status(plan) == TDM_E_POLICY)
        rc = cli_policy_report(plan);
done:
    tdm_free(text);
    tdm_free(ledger);
    tdm_session_destroy(sess);
    tdm_plan_destroy(plan);
    tdm_session_options_destroy(so);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    for (size_t k = 0; k < n_shapes; k++)
        free(shapes[k].name);
    free(shapes);
    cli_runopts_free(&ro);
    return rc;
}

static void human(uint64_t b, char *buf, size_t size)
{
    if (b == UINT64_MAX)
        snprintf(buf, size, "unlimited");
    else if (b == 0)
        snprintf(buf, size, "?");
    else if (b >= (uint64_t)1 << 30)
        snprintf(buf, size, "%.1f GiB", (double)b / 1073741824.0);
    else if (b >= (uint64_t)1 << 20)
        snprintf(buf, size, "%.1f MiB", (double)b / 1048576.0);
    else
        snprintf(buf, size, "%.1f KiB", (double)b / 1024.0);
}

int cmd_devices(int argc, char **argv)
{
    cli_runopts ro;
    int json = 0, rc = 0;
    tdm_ctx *ctx = NULL;
    tdm_device_list *l = NULL;
    tdm_status st;
    cli_runopts_init(&ro);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage_devices(stdout);
            goto done;
        }
        if (strcmp(a, "--json") == 0) {
            json = 1;
            continue;
        }
        if (strncmp(a, "--plugin", 8) == 0 && cli_runopts_parse("devices", argc, argv, &i, &ro, &rc)) {
            if (rc)
                goto done;
            continue;
        }
        cli_error("devices: unknown %s '%s'; see `tandem devices --help`", a[0] == '-' ? "option" : "argument", a);
        rc = EXIT_USAGE;
        goto done;
    }
    if ((st = tdm_ctx_create(&ctx)) != TDM_OK) {
        rc = cli_fail(st, NULL, "out of memory");
        goto done;
    }
    if ((st = tdm_devices_query(ctx, ro.plugins, ro.n_plugins, &l)) != TDM_OK) {
        rc = cli_fail(st, NULL, tdm_ctx_error(ctx));
        goto done;
    }
    size_t n = tdm_device_list_count(l);
    if (json) {
        jw w;
        jw_init(&w, stdout);
        jw_obj_begin(&w);
        jw_key(&w, "devices");
        jw_arr_begin(&w);
        for (size_t k = 0; k < n; k++) {
            tdm_device_info d;
            if (tdm_device_list_get(l, k, &d) != TDM_OK)
                continue;
            jw_obj_begin(&w);
            jw_key(&w, "name");
            jw_str(&w, d.name);
            jw_key(&w, "kind");
            jw_str(&w, d.kind);
            jw_key(&w, "available");
            jw_bool(&w, d.available);
            jw_key(&w, "description");
            jw_str(&w, d.description);
            if (!d.available) {
                jw_key(&w, "why_not");
                jw_str(&w, d.why_not);
            }
            jw_key(&w, "memory_bytes");
            if (d.memory_bytes == UINT64_MAX || d.memory_bytes == 0)
                jw_null(&w);
            else
                jw_uint(&w, d.memory_bytes);
            jw_key(&w, "precision");
            jw_str(&w, d.precision);
            jw_key(&w, "source");
            jw_str(&w, d.source);
            jw_obj_end(&w);
        }
        jw_arr_end(&w);
        jw_obj_end(&w);
        jw_finish(&w);
    } else {
        for (size_t k = 0; k < n; k++) {
            tdm_device_info d;
            char mem[32];
            if (tdm_device_list_get(l, k, &d) != TDM_OK)
                continue;
            human(d.memory_bytes, mem, sizeof mem);
            printf("%-22s %-8s %-13s %-10s %-5s %s\n", d.name, d.kind, d.available ? "available" : "unavailable", mem,
                   d.precision, d.available ? d.description : d.why_not);
        }
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("cannot write to standard output");
        rc = EXIT_IO;
    }
done:
    tdm_device_list_destroy(l);
    tdm_ctx_destroy(ctx);
    cli_runopts_free(&ro);
    return rc;
}
