/* tandem info MODEL [--shape NAME=DxD]... [--json] */
#include "cli.h"
#include "json.h"

#include <stdlib.h>
#include <string.h>

static const char *human_bytes(size_t b, char *buf, size_t size)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%zu B", b);
    else
        snprintf(buf, size, "%.1f %s", v, unit[u]);
    return buf;
}

/* Prints s with control characters escaped, so that one entry stays on
 * one line. */
static void put_text(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\n')
            fputs("\\n", stdout);
        else if (*p == '\t')
            fputs("\\t", stdout);
        else if (*p < 0x20 || *p == 0x7F)
            printf("\\x%02x", *p);
        else
            putchar(*p);
    }
}

static const char *domain_name(const char *d) { return d && *d ? d : "ai.onnx"; }

/* map_key: a sequence of maps' key type (tdm_model_output_map_key), else
 * TDM_UNDEFINED. */
static void json_value_info(jw *w, const tdm_value_info *vi, tdm_dtype map_key)
{
    jw_obj_begin(w);
    jw_key(w, "name");
    jw_str(w, vi->name);
    jw_key(w, "kind");
    jw_str(w, vi->kind == TDM_KIND_SEQUENCE ? "sequence" : vi->kind == TDM_KIND_NONE ? "optional" : "tensor");
    jw_key(w, "dtype");
    jw_str(w, vi->dtype == TDM_UNDEFINED ? NULL : tdm_dtype_name(vi->dtype));
    if (map_key != TDM_UNDEFINED) { /* the items are maps from map_key to dtype */
        jw_key(w, "map_key");
        jw_str(w, tdm_dtype_name(map_key));
    }
    jw_key(w, "shape");
    if (vi->rank < 0) {
        jw_null(w);
    } else {
        jw_arr_begin_inline(w);
        for (int d = 0; d < vi->rank; d++) {
            if (vi->dims[d].value >= 0)
                jw_int(w, (long long)vi->dims[d].value);
            else
                jw_str(w, vi->dims[d].symbol && *vi->dims[d].symbol ? vi->dims[d].symbol : NULL);
        }
        jw_arr_end(w);
    }
    jw_obj_end(w);
}

static int print_json(const tdm_model *m, const tdm_model_info *info)
{
    jw w;
    jw_init(&w, stdout);
    jw_obj_begin(&w);
    jw_key(&w, "model");
    jw_str(&w, info->path);
    jw_key(&w, "producer");
    jw_obj_begin(&w);
    jw_key(&w, "name");
    jw_str(&w, info->producer_name ? info->producer_name : "");
    jw_key(&w, "version");
    jw_str(&w, info->producer_version ? info->producer_version : "");
    jw_obj_end(&w);
    jw_key(&w, "ir_version");
    jw_int(&w, (long long)info->ir_version);
    jw_key(&w, "domain");
    jw_str(&w, info->domain ? info->domain : "");
    jw_key(&w, "model_version");
    jw_int(&w, (long long)info->model_version);
    jw_key(&w, "graph_name");
    jw_str(&w, info->graph_name ? info->graph_name : "");

    jw_key(&w, "opsets");
    jw_arr_begin(&w);
    for (size_t i = 0; i < tdm_model_opset_count(m); i++) {
        const char *dom;
        int64_t ver;
        if (tdm_model_opset(m, i, &dom, &ver))
            continue;
        jw_obj_begin(&w);
        jw_key(&w, "domain");
        jw_str(&w, domain_name(dom));
        jw_key(&w, "version");
        jw_int(&w, (long long)ver);
        jw_obj_end(&w);
    }
    jw_arr_end(&w);

    jw_key(&w, "metadata");
    jw_obj_begin(&w);
    for (size_t i = 0; i < tdm_model_metadata_count(m); i++) {
        const char *k, *v;
        if (tdm_model_metadata(m, i, &k, &v))
            continue;
        jw_key(&w, k);
        jw_str(&w, v);
    }
    jw_obj_end(&w);

    jw_key(&w, "inputs");
    jw_arr_begin(&w);
    for (size_t i = 0; i < tdm_model_input_count(m); i++) {
        tdm_value_info vi;
        if (tdm_model_input(m, i, &vi) == TDM_OK)
            json_value_info(&w, &vi, TDM_UNDEFINED);
    }
    jw_arr_end(&w);
    jw_key(&w, "outputs");
    jw_arr_begin(&w);
    for (size_t i = 0; i < tdm_model_output_count(m); i++) {
        tdm_value_info vi;
        if (tdm_model_output(m, i, &vi) == TDM_OK)
            json_value_info(&w, &vi, tdm_model_output_map_key(m, i));
    }
    jw_arr_end(&w);

    jw_key(&w, "nodes");
    jw_uint(&w, (unsigned long long)info->node_count);
    jw_key(&w, "op_types");
    jw_arr_begin(&w);
    for (size_t i = 0; i < tdm_model_op_type_count(m); i++) {
        const char *dom, *op;
        size_t n;
        if (tdm_model_op_type(m, i, &dom, &op, &n))
            continue;
        jw_obj_begin(&w);
        jw_key(&w, "op");
        jw_str(&w, op);
        jw_key(&w, "domain");
        jw_str(&w, domain_name(dom));
        jw_key(&w, "count");
        jw_uint(&w, (unsigned long long)n);
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_key(&w, "params");
    jw_obj_begin(&w);
    jw_key(&w, "count");
    jw_uint(&w, (unsigned long long)info->param_count);
    jw_key(&w, "bytes");
    jw_uint(&w, (unsigned long long)info->param_bytes);
    jw_obj_end(&w);
    jw_key(&w, "flops");
    jw_num(&w, info->flops);
    jw_key(&w, "gflops");
    jw_num(&w, info->flops / 1e9);
    jw_key(&w, "flops_unknown_nodes");
    jw_uint(&w, (unsigned long long)info->flops_unknown);
    jw_obj_end(&w);
    jw_finish(&w);
    return EXIT_OK;
}

static void print_ios(const tdm_model *m, int outputs)
{
    size_t n = outputs ? tdm_model_output_count(m) : tdm_model_input_count(m);
    size_t width = 0;
    for (size_t i = 0; i < n; i++) {
        tdm_value_info vi;
        if ((outputs ? tdm_model_output(m, i, &vi) : tdm_model_input(m, i, &vi)) == TDM_OK && strlen(vi.name) > width)
            width = strlen(vi.name);
    }
    printf("%-12s%zu\n", outputs ? "outputs" : "inputs", n);
    for (size_t i = 0; i < n; i++) {
        tdm_value_info vi;
        char tbuf[64], sbuf[512];
        if ((outputs ? tdm_model_output(m, i, &vi) : tdm_model_input(m, i, &vi)) != TDM_OK)
            continue;
        tdm_dtype key = outputs ? tdm_model_output_map_key(m, i) : TDM_UNDEFINED;
        if (key != TDM_UNDEFINED)
            printf("  %-*s  sequence<map<%s,%s>>\n", (int)width, vi.name, tdm_dtype_name(key),
                   tdm_dtype_name(vi.dtype));
        else
            printf("  %-*s  %s %s\n", (int)width, vi.name, cli_type_str(vi.kind, vi.dtype, tbuf, sizeof tbuf),
                   cli_info_shape_str(&vi, sbuf, sizeof sbuf));
    }
}

static int print_text(const tdm_model *m, const tdm_model_info *info)
{
    char buf[64];
    printf("%-12s%s\n", "model", info->path ? info->path : "");
    printf("%-12s%s%s%s\n", "producer", info->producer_name && *info->producer_name ? info->producer_name : "(none)",
           info->producer_version && *info->producer_version ? " " : "",
           info->producer_version ? info->producer_version : "");
    printf("%-12s%lld\n", "ir version", (long long)info->ir_version);
    printf("%-12s", "opsets");
    for (size_t i = 0; i < tdm_model_opset_count(m); i++) {
        const char *dom;
        int64_t ver;
        if (tdm_model_opset(m, i, &dom, &ver) == TDM_OK)
            printf("%s%s %lld", i ? ", " : "", domain_name(dom), (long long)ver);
    }
    printf("\n");
    if (info->domain && *info->domain)
        printf("%-12s%s\n", "domain", info->domain);
    if (info->model_version)
        printf("%-12s%lld\n", "version", (long long)info->model_version);
    if (info->graph_name && *info->graph_name)
        printf("%-12s%s\n", "graph", info->graph_name);
    for (size_t i = 0; i < tdm_model_metadata_count(m); i++) {
        const char *k, *v;
        if (tdm_model_metadata(m, i, &k, &v) != TDM_OK)
            continue;
        printf("%-12s", i ? "" : "metadata");
        put_text(k);
        fputs(" = ", stdout);
        put_text(v);
        putchar('\n');
    }
    print_ios(m, 0);
    print_ios(m, 1);
    printf("%-12s%zu\n", "nodes", info->node_count);
    size_t nops = tdm_model_op_type_count(m), width = 0;
    for (size_t i = 0; i < nops; i++) {
        const char *dom, *op;
        size_t n;
        if (tdm_model_op_type(m, i, &dom, &op, &n) == TDM_OK) {
            size_t l = strlen(op) + (dom && *dom ? strlen(dom) + 1 : 0);
            if (l > width)
                width = l;
        }
    }
    printf("%-12s%zu types\n", "ops", nops);
    for (size_t i = 0; i < nops; i++) {
        const char *dom, *op;
        size_t n;
        char name[256];
        if (tdm_model_op_type(m, i, &dom, &op, &n) != TDM_OK)
            continue;
        snprintf(name, sizeof name, "%s%s%s", dom && *dom ? dom : "", dom && *dom ? "." : "", op);
        printf("  %-*s  %zu\n", (int)width, name, n);
    }
    if (info->param_count >= 1000000)
        printf("%-12s%zu (%.2f M, %s)\n", "params", info->param_count, (double)info->param_count / 1e6,
               human_bytes(info->param_bytes, buf, sizeof buf));
    else
        printf("%-12s%zu (%s)\n", "params", info->param_count, human_bytes(info->param_bytes, buf, sizeof buf));
    printf("%-12s%.3f GFLOPs", "flops", info->flops / 1e9);
    if (info->flops_unknown)
        printf(" (+ %zu node%s with unknown shapes)", info->flops_unknown, info->flops_unknown == 1 ? "" : "s");
    printf("\n");
    return EXIT_OK;
}

static void free_shapes(cli_kv *shapes, size_t n)
{
    for (size_t k = 0; k < n; k++)
        free(shapes[k].owned);
    free(shapes);
}

/* With --shape: *spec becomes m specialised to the shapes (the library
 * re-infers the graph and counts FLOPs with them); 0 or an exit code. */
static int specialise(tdm_ctx *ctx, const tdm_model *m, const cli_kv *shapes, size_t n, tdm_model **spec)
{
    tdm_session_options *so = NULL;
    tdm_status st = tdm_session_options_create(&so);
    if (st)
        return cli_fail(st, NULL, "out of memory");
    int rc = cli_shapes_apply("info", m, shapes, n, so);
    if (!rc && (st = tdm_model_specialize(ctx, m, so, spec)) != TDM_OK)
        rc = cli_fail(st, NULL, tdm_ctx_error(ctx));
    tdm_session_options_destroy(so);
    return rc;
}

int cmd_info(int argc, char **argv)
{
    const char *path = NULL;
    int json = 0, rc = EXIT_OK;
    cli_kv *shapes = NULL;
    size_t n_shapes = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        int r;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage_info(stdout);
            free_shapes(shapes, n_shapes);
            return EXIT_OK;
        }
        if ((r = cli_opt_value("info", argc, argv, &i, "--shape", &val)) != 0) {
            cli_kv *grown = NULL;
            if (r < 0) {
                rc = EXIT_USAGE;
            } else if (!(grown = realloc(shapes, (n_shapes + 1) * sizeof *shapes))) {
                cli_error("out of memory");
                rc = EXIT_INTERNAL;
            } else {
                shapes = grown;
                if (cli_split_kv("info", "--shape", val, &shapes[n_shapes]))
                    rc = EXIT_USAGE;
                else
                    n_shapes++;
            }
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            cli_error("info: unknown option '%s'; see `tandem info --help`", a);
            rc = EXIT_USAGE;
        } else if (path) {
            cli_error("info: one MODEL only ('%s' and '%s' given)", path, a);
            rc = EXIT_USAGE;
        } else {
            path = a;
        }
        if (rc) {
            free_shapes(shapes, n_shapes);
            return rc;
        }
    }
    if (!path) {
        cli_error("info: no MODEL given; usage: tandem info MODEL [--shape NAME=DxD]... [--json]");
        free_shapes(shapes, n_shapes);
        return EXIT_USAGE;
    }
    tdm_ctx *ctx = NULL;
    tdm_model *m = NULL, *spec = NULL;
    tdm_model_info info;
    tdm_status st = tdm_ctx_create(&ctx);
    if (st) {
        free_shapes(shapes, n_shapes);
        return cli_fail(st, NULL, "cannot create a context (out of memory)");
    }
    if ((st = tdm_model_load(ctx, path, &m)) != TDM_OK) {
        rc = cli_fail(st, NULL, tdm_ctx_error(ctx));
        goto done;
    }
    if (n_shapes && (rc = specialise(ctx, m, shapes, n_shapes, &spec)) != 0)
        goto done;
    const tdm_model *shown = spec ? spec : m;
    if ((st = tdm_model_get_info(shown, &info)) != TDM_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "cannot describe '%s' (%s)", path, tdm_status_str(st));
        rc = cli_fail(st, NULL, msg);
    } else {
        if (!info.path)
            info.path = path;
        rc = json ? print_json(shown, &info) : print_text(shown, &info);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            cli_error("cannot write to standard output");
            rc = EXIT_IO;
        }
    }
done:
    tdm_model_destroy(spec);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    free_shapes(shapes, n_shapes);
    return rc;
}
