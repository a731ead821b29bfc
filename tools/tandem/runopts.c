/* RUN OPTIONS shared by the commands that plan: --devices, --granularity,
 * --fallback, --max-fallback-ratio, --max-boundary-bytes, --pin, --plugin,
 * --calibration, --calibration-input, --min-cosine, --max-abs;
 * and the report of a fallback policy violation (exit 3). */
#include "cli.h"
#include "story.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void cli_runopts_init(cli_runopts *o) { memset(o, 0, sizeof *o); }

void cli_runopts_free(cli_runopts *o)
{
    free(o->pins);
    free(o->binds);
    free(o->plugins);
    free(o->cal_inputs);
    memset(o, 0, sizeof *o);
}

int cli_runopts_parse(const char *cmd, int argc, char **argv, int *i, cli_runopts *o, int *rc)
{
    const char *val;
    int r;
    *rc = 0;
    if (strcmp(argv[*i], "--no-fusion") == 0) {
        o->no_fusion = 1;
        return 1;
    }
    if ((r = cli_opt_value(cmd, argc, argv, i, "--devices", &val)) != 0) {
        if (r < 0 || !*val) {
            if (r > 0)
                cli_error("%s: --devices expects a comma-separated list such as 'vnpu:edge-npu,cpu'", cmd);
            *rc = EXIT_USAGE;
            return 1;
        }
        for (const char *q = val;; q++) {
            if ((*q == ',' || *q == '\0') && (q == val || q[-1] == ',')) {
                cli_error("%s: --devices has an empty entry in '%s'", cmd, val);
                *rc = EXIT_USAGE;
                return 1;
            }
            if (!*q)
                break;
        }
        o->devices = val;
        return 1;
    }
    static const char *const choices[] = {"--granularity", "--fallback", "--verify", "--rescue"};
    for (int which = 0; which < 4; which++) {
        if ((r = cli_opt_value(cmd, argc, argv, i, choices[which], &val)) == 0)
            continue;
        /* the words are the library's (tdm_*_parse), and so is the sentence */
        tdm_ctx *c = NULL;
        tdm_status st = r < 0 ? TDM_E_USAGE : tdm_ctx_create(&c);
        if (!st)
            st = which == 0   ? tdm_granularity_parse(c, val, &o->granularity)
                 : which == 1 ? tdm_fallback_mode_parse(c, val, &o->fallback)
                 : which == 3 ? tdm_rescue_mode_parse(c, val, &o->rescue)
                              : tdm_verify_mode_parse(c, val, &o->verify, &o->verify_every);
        if (st) {
            if (r > 0)
                cli_error("%s: %s: %s", cmd, choices[which], c ? tdm_ctx_error(c) : "out of memory");
            *rc = c || r < 0 ? EXIT_USAGE : EXIT_INTERNAL;
        } else if (which == 0) {
            o->has_granularity = 1;
        } else if (which == 3) {
            o->has_rescue = 1;
        } else {
            *(which == 1 ? &o->has_fallback : &o->has_verify) = 1;
        }
        tdm_ctx_destroy(c);
        return 1;
    }
    if ((r = cli_opt_value(cmd, argc, argv, i, "--bucket", &val)) != 0) {
        if (r < 0 || !*val) {
            if (r > 0)
                cli_error("%s: --bucket expects HxW[,HxW...] such as 640x640,960x960, or profile", cmd);
            *rc = EXIT_USAGE;
            return 1;
        }
        o->bucket = val;
        return 1;
    }
    if ((r = cli_opt_value(cmd, argc, argv, i, "--bucket-pad", &val)) != 0) {
        if (r < 0 || (strcmp(val, "zero") != 0 && strcmp(val, "edge") != 0)) {
            if (r > 0)
                cli_error("%s: --bucket-pad expects zero or edge, not '%s'", cmd, val);
            *rc = EXIT_USAGE;
            return 1;
        }
        o->bucket_pad = val;
        return 1;
    }
    if ((r = cli_opt_value(cmd, argc, argv, i, "--max-fallback-ratio", &val)) != 0) {
        char *end = NULL;
        double d = r > 0 ? strtod(val, &end) : 0;
        if (r < 0 || !*val || *end || !(d >= 0 && d <= 1)) {
            if (r > 0)
                cli_error("%s: --max-fallback-ratio expects a number from 0 to 1, not '%s'", cmd, val);
            *rc = EXIT_USAGE;
            return 1;
        }
        o->max_ratio = d;
        o->has_ratio = 1;
        return 1;
    }
    if ((r = cli_opt_value(cmd, argc, argv, i, "--max-boundary-bytes", &val)) != 0) {
        long long b = 0;
        if (r < 0 || cli_parse_i64(val, &b)) {
            if (r > 0)
                cli_error("%s: --max-boundary-bytes expects a number of bytes, not '%s'", cmd, val);
            *rc = EXIT_USAGE;
            return 1;
        }
        o->max_bytes = b;
        o->has_bytes = 1;
        return 1;
    }
    if ((r = cli_opt_value(cmd, argc, argv, i, "--bind", &val)) != 0) {
        const char *eq = r > 0 ? strchr(val, '=') : NULL;
        if (r < 0 || !eq || eq == val || !eq[1]) {
            if (r > 0)
                cli_error("%s: --bind expects NAME=VALUE[,VALUE...] or NAME=FILE.npy, not '%s'", cmd, val);
            *rc = EXIT_USAGE;
            return 1;
        }
        if (cli_push_str(&o->binds, &o->n_binds, val)) {
            cli_error("out of memory");
            *rc = EXIT_INTERNAL;
        }
        return 1;
    }
    if ((r = cli_opt_value(cmd, argc, argv, i, "--pin", &val)) != 0) {
        const char *eq = r > 0 ? strrchr(val, '=') : NULL;
        if (r < 0 || !eq || eq == val || !eq[1]) {
            if (r > 0)
                cli_error("%s: --pin expects OP_OR_NODE=DEVICE, not '%s'", cmd, val);
            *rc = EXIT_USAGE;
            return 1;
        }
        if (cli_push_str(&o->pins, &o->n_pins, val)) {
            cli_error("out of memory");
            *rc = EXIT_INTERNAL;
        }
        return 1;
    }
    if ((r = cli_opt_value(cmd, argc, argv, i, "--calibration", &val)) != 0) {
        if (r < 0 || !*val) {
            if (r > 0)
                cli_error("%s: --calibration expects the path of a file written by `tandem calibrate`", cmd);
            *rc = EXIT_USAGE;
            return 1;
        }
        o->calibration = val;
        return 1;
    }
    if ((r = cli_opt_value(cmd, argc, argv, i, "--calibration-input", &val)) != 0) {
        if (r < 0 || !*val) {
            if (r > 0)
                cli_error("%s: --calibration-input expects NAME=FILE[,NAME=FILE]..., a folder of NAME.npy files, or "
                          "the FILE of a model's only input",
                          cmd);
            *rc = EXIT_USAGE;
            return 1;
        }
        if (cli_push_str(&o->cal_inputs, &o->n_cal_inputs, val)) {
            cli_error("out of memory");
            *rc = EXIT_INTERNAL;
        }
        return 1;
    }
    for (int which = 0; which < 2; which++) {
        const char *opt = which == 0 ? "--min-cosine" : "--max-abs";
        if ((r = cli_opt_value(cmd, argc, argv, i, opt, &val)) == 0)
            continue;
        char *end = NULL;
        double d = r > 0 ? strtod(val, &end) : 0;
        if (r < 0 || !*val || *end || !(d >= 0) || (which == 0 && d > 1)) {
            if (r > 0)
                cli_error("%s: %s expects %s, not '%s'", cmd, opt,
                          which == 0 ? "a number from 0 to 1" : "a non-negative number", val);
            *rc = EXIT_USAGE;
            return 1;
        }
        if (which == 0) {
            o->min_cosine = d;
            o->has_min_cosine = 1;
        } else {
            o->max_abs = d;
            o->has_max_abs = 1;
        }
        return 1;
    }
    if ((r = cli_opt_value(cmd, argc, argv, i, "--plugin", &val)) != 0) {
        if (r < 0 || !*val) {
            if (r > 0)
                cli_error("%s: --plugin expects the path of a shared library", cmd);
            *rc = EXIT_USAGE;
            return 1;
        }
        if (cli_push_str(&o->plugins, &o->n_plugins, val)) {
            cli_error("out of memory");
            *rc = EXIT_INTERNAL;
        }
        return 1;
    }
    return 0;
}

static double guard_num(const char *json, const char *key)
{
    const char *p = strstr(json, key);
    return p ? strtod(p + strlen(key), NULL) : 0;
}

int cli_guard_figures(tdm_session *s, double *moved, double *extra_ms, char *first, size_t first_size, int *unverified)
{
    char *j = NULL;
    if (tdm_session_guard_json(s, &j) != TDM_OK || !j) {
        tdm_free(j);
        return 0;
    }
    int active = strstr(j, "\"active\":true") != NULL;
    *moved = guard_num(j, "\"moved_nodes\":");
    *extra_ms = strstr(j, "\"first_run_extra_ms\":") ? guard_num(j, "\"first_run_extra_ms\":") : -1;
    *unverified = strstr(j, "\"unverified\"") != NULL ? 1 : strstr(j, "\"fallback_all\":true") != NULL ? 2 : 0;
    const char *f = strstr(j, "\"first_moved\":\"");
    f = f ? f + strlen("\"first_moved\":\"") : "";
    snprintf(first, first_size, "%.*s", (int)strcspn(f, "\""), f);
    tdm_free(j);
    return active;
}

/* The run-time check of kept rescues (the guard's JSON): a dropped rescue,
 * or rescues left unchecked by --verify off. */
static void rescue_note(tdm_session *s)
{
    char *j = NULL;
    if (tdm_session_guard_json(s, &j) != TDM_OK || !j) {
        tdm_free(j);
        return;
    }
    double dropped = guard_num(j, "\"rescues_dropped\":"), unchecked = guard_num(j, "\"rescues_unchecked\":");
    const char *f = strstr(j, "\"rescue_dropped_first\":\"");
    f = f ? f + strlen("\"rescue_dropped_first\":\"") : "";
    if (dropped > 0)
        cli_error("rescue: %.0f rewrite%s dropped before any output was returned: %.*s; the node%s run%s as written "
                  "(see the ledger's \"rescue\")",
                  dropped, dropped == 1 ? "" : "s", (int)strcspn(f, "\""), f, dropped == 1 ? "" : "s",
                  dropped == 1 ? "s" : "");
    else if (unchecked > 0)
        cli_error("rescue: %.0f kept rewrite%s verified on synthetic inputs only, not on this run's (--verify off)",
                  unchecked, unchecked == 1 ? "" : "s");
    tdm_free(j);
}

void cli_guard_note(tdm_session *s)
{
    double moved, ms;
    char first[256];
    int unverified;
    rescue_note(s);
    if (!cli_guard_figures(s, &moved, &ms, first, sizeof first, &unverified))
        return;
    if (unverified == 2)
        cli_error("precision guard: the outputs still differed from cpu fp32 after its rounds, so every node left on "
                  "the reduced-precision device moved off it (%.0f node%s, first '%s'); outputs verified against cpu "
                  "fp32; the first run cost %.0f ms more (see the ledger's \"guard\")",
                  moved, moved == 1 ? "" : "s", first, ms);
    else if (moved > 0 && !unverified)
        cli_error("precision guard: %.0f node%s moved off the reduced-precision device (first '%s'), outputs verified "
                  "against cpu fp32; the first run cost %.0f ms more (see the ledger's \"guard\")",
                  moved, moved == 1 ? "" : "s", first, ms);
    else if (unverified)
        cli_error("warning: precision guard: the outputs still differ from cpu fp32 after its rounds (see the "
                  "ledger's \"guard\")");
}

void cli_calibration_note(const cli_runopts *o, const tdm_plan *plan)
{
    size_t entries, matched, missing;
    if (!o->calibration || !plan || tdm_plan_calibration_match(plan, &entries, &matched, &missing) != TDM_OK)
        return;
    if (matched == 0)
        cli_error("warning: calibration '%s': none of its %zu entries match this model's nodes, so none of its "
                  "figures apply; was it made for another model?",
                  o->calibration, entries);
    else if (matched * 2 < entries)
        cli_error("warning: calibration '%s': only %zu of %zu entries match this model's nodes (%zu nodes without "
                  "figures); was it made for another model?",
                  o->calibration, matched, entries, missing);
    else
        cli_error("calibration '%s': %zu of %zu entries match this model's nodes (%zu nodes without figures)",
                  o->calibration, matched, entries, missing);
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Appends (name or NULL, path) to names[] and paths[]; 0, or -1 when out
 * of memory (nothing appended). */
static int cal_push(char ***names, char ***paths, size_t *n, size_t *cap, char *name, char *path)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 8;
        char **nn = realloc(*names, c * sizeof *nn);
        if (nn)
            *names = nn;
        char **pp = nn ? realloc(*paths, c * sizeof *pp) : NULL;
        if (pp)
            *paths = pp;
        if (pp)
            *cap = c;
    }
    if (!path || *n == *cap) {
        free(name);
        free(path);
        return -1;
    }
    (*names)[*n] = name;
    (*paths)[(*n)++] = path;
    return 0;
}

/* One --calibration-input SET's files: "NAME=FILE[,NAME=FILE]...", a
 * folder (each NAME.npy or NAME.pb in it), or one FILE (no name: the
 * model's only input). names[] and paths[] are malloc'ed strings. */
static int cal_set_files(const char *set, char ***names, char ***paths, size_t *n)
{
    struct stat sb;
    size_t cap = 0;
    *names = *paths = NULL;
    *n = 0;
    if (stat(set, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(set);
        struct dirent *de;
        int oom = 0;
        if (!d) {
            cli_error("--calibration-input: cannot read the folder '%s'", set);
            return EXIT_IO;
        }
        while (!oom && (de = readdir(d)) != NULL) {
            const char *dot = strrchr(de->d_name, '.');
            if (!dot || dot == de->d_name || (strcmp(dot, ".npy") != 0 && strcmp(dot, ".pb") != 0))
                continue;
            size_t len = strlen(set) + strlen(de->d_name) + 2;
            char *path = malloc(len), *name = dup_n(de->d_name, (size_t)(dot - de->d_name));
            if (path)
                snprintf(path, len, "%s/%s", set, de->d_name);
            oom = !name || cal_push(names, paths, n, &cap, name, path);
        }
        closedir(d);
        if (oom) {
            cli_error("out of memory");
            return EXIT_INTERNAL;
        }
        if (!*n) {
            cli_error("--calibration-input: the folder '%s' holds no NAME.npy or NAME.pb file", set);
            return EXIT_INVALID;
        }
        return 0;
    }
    if (!strchr(set, '=')) /* one FILE */
        return cal_push(names, paths, n, &cap, NULL, dup_n(set, strlen(set))) ? cli_fail(TDM_E_NOMEM, NULL, NULL)
                                                                             : 0;
    for (const char *p = set;; p++) {
        size_t len = strcspn(p, ",");
        const char *eq = memchr(p, '=', len);
        if (!eq || eq == p || eq + 1 == p + len) {
            cli_error("--calibration-input: '%.*s' in '%s' is not NAME=FILE", (int)len, p, set);
            return EXIT_USAGE;
        }
        if (cal_push(names, paths, n, &cap, dup_n(p, (size_t)(eq - p)), dup_n(eq + 1, (size_t)(p + len - eq - 1))))
            return cli_fail(TDM_E_NOMEM, NULL, NULL);
        p += len;
        if (!*p)
            return 0;
    }
}

/* Loads each --calibration-input set and adds it to so. */
static int cal_inputs_apply(const cli_runopts *o, tdm_session_options *so)
{
    int rc = 0;
    for (size_t s = 0; !rc && s < o->n_cal_inputs; s++) {
        char **names = NULL, **paths = NULL;
        size_t n = 0;
        tdm_tensor **vals = NULL;
        tdm_ctx *ctx = NULL;
        tdm_status st;
        rc = cal_set_files(o->cal_inputs[s], &names, &paths, &n);
        if (!rc && ((st = tdm_ctx_create(&ctx)) != TDM_OK || !(vals = calloc(n, sizeof *vals))))
            rc = cli_fail(TDM_E_NOMEM, "--calibration-input", NULL);
        for (size_t k = 0; !rc && k < n; k++)
            if ((st = tdm_value_load(ctx, paths[k], NULL, &vals[k])) != TDM_OK)
                rc = cli_fail(st, "--calibration-input", tdm_ctx_error(ctx));
        if (!rc && (st = tdm_session_options_add_calibration_input(so, (const char *const *)names,
                                                                   (const tdm_tensor *const *)vals, n)) != TDM_OK)
            rc = cli_fail(st, "--calibration-input", "the set is not accepted");
        for (size_t k = 0; k < n; k++) {
            free(names[k]);
            free(paths[k]);
            if (vals)
                tdm_tensor_destroy(vals[k]);
        }
        free(names);
        free(paths);
        free(vals);
        tdm_ctx_destroy(ctx);
    }
    return rc;
}

int cli_runopts_apply(const cli_runopts *o, tdm_session_options *so)
{
    int rc;
    if ((rc = cal_inputs_apply(o, so)) != 0)
        return rc;
    tdm_status st = TDM_OK;
    if (o->no_fusion && (st = tdm_session_options_set_fusion(so, TDM_FUSION_OFF)) != TDM_OK)
        return cli_fail(st, NULL, "--no-fusion: not accepted");
    if (o->devices && (st = tdm_session_options_set_devices(so, o->devices)) != TDM_OK)
        return cli_fail(st, NULL, "--devices: the list is not accepted");
    if (o->has_granularity && (st = tdm_session_options_set_granularity(so, o->granularity)) != TDM_OK)
        return cli_fail(st, NULL, "--granularity: the value is not accepted");
    if (o->calibration && (st = tdm_session_options_set_calibration(so, o->calibration)) != TDM_OK)
        return cli_fail(st, NULL, "--calibration: the value is not accepted");
    if ((o->has_min_cosine || o->has_max_abs) &&
        (st = tdm_session_options_set_precision(so, o->has_min_cosine ? o->min_cosine : 0.99,
                                                o->has_max_abs ? o->max_abs : -1)) != TDM_OK)
        return cli_fail(st, NULL, "--min-cosine/--max-abs: the value is not accepted");
    if (o->has_verify && (st = tdm_session_options_set_verify(so, o->verify, o->verify_every)) != TDM_OK)
        return cli_fail(st, NULL, "--verify: the value is not accepted");
    if (o->has_rescue && (st = tdm_session_options_set_rescue(so, o->rescue)) != TDM_OK)
        return cli_fail(st, NULL, "--rescue: the value is not accepted");
    if (o->bucket && (st = tdm_session_options_set_buckets(so, o->bucket, o->bucket_pad)) != TDM_OK)
        return cli_fail(st, NULL, "--bucket: the shapes are not accepted (HxW[,HxW...], sides 1 to 65536)");
    if (o->has_fallback && (st = tdm_session_options_set_fallback(so, o->fallback)) != TDM_OK)
        return cli_fail(st, NULL, "--fallback: the value is not accepted");
    if (o->has_ratio && (st = tdm_session_options_set_max_fallback_ratio(so, o->max_ratio)) != TDM_OK)
        return cli_fail(st, NULL, "--max-fallback-ratio: the value is not accepted");
    if (o->has_bytes && (st = tdm_session_options_set_max_boundary_bytes(so, (int64_t)o->max_bytes)) != TDM_OK)
        return cli_fail(st, NULL, "--max-boundary-bytes: the value is not accepted");
    for (size_t k = 0; k < o->n_pins; k++)
        if ((st = tdm_session_options_add_pin(so, o->pins[k])) != TDM_OK)
            return cli_fail(st, NULL, "--pin: the value is not accepted");
    for (size_t k = 0; k < o->n_plugins; k++)
        if ((st = tdm_session_options_add_plugin(so, o->plugins[k])) != TDM_OK)
            return cli_fail(st, NULL, "--plugin: the path is not accepted");
    return 0;
}

/* The value of one --bind (NAME=VALUE[,VALUE...] or NAME=FILE.npy) in the
 * element type of input k of m: NULL after an error. */
static tdm_tensor *bind_value(const tdm_model *m, size_t k, const char *name, const char *text)
{
    tdm_value_info vi;
    tdm_tensor *t = NULL;
    size_t len = strlen(text), n = 1;
    if (tdm_model_input(m, k, &vi) != TDM_OK)
        return NULL;
    if (len > 4 && strcmp(text + len - 4, ".npy") == 0) {
        tdm_ctx *ctx = NULL;
        tdm_status st = tdm_ctx_create(&ctx);
        if (!st && (st = tdm_value_load(ctx, text, NULL, &t)) != TDM_OK)
            cli_error("--bind %s: %s", name, tdm_ctx_error(ctx));
        tdm_ctx_destroy(ctx);
        return st ? NULL : t;
    }
    for (const char *q = text; *q; q++)
        n += *q == ',';
    /* the input's shape when static with n elements, else [n] (a scalar for one value of a rank-0 input) */
    int64_t dims[CLI_MAX_RANK], count = 1;
    int rank = vi.rank, fixed = vi.rank >= 0;
    for (int d = 0; fixed && d < vi.rank; d++) {
        fixed = vi.dims[d].value >= 0;
        dims[d] = vi.dims[d].value;
        count *= fixed ? dims[d] : 1;
    }
    if (!fixed || count != (int64_t)n) {
        rank = 1;
        dims[0] = (int64_t)n;
    }
    int is_float = vi.dtype == TDM_FLOAT || vi.dtype == TDM_DOUBLE;
    if (!is_float && vi.dtype != TDM_INT64 && vi.dtype != TDM_INT32 && vi.dtype != TDM_INT16 &&
        vi.dtype != TDM_INT8 && vi.dtype != TDM_UINT8 && vi.dtype != TDM_BOOL) {
        cli_error("--bind %s: the input is %s; give a .npy file for that type", name, tdm_dtype_name(vi.dtype));
        return NULL;
    }
    if (tdm_tensor_create(vi.dtype, rank, dims, &t) != TDM_OK) {
        cli_error("out of memory");
        return NULL;
    }
    void *data = tdm_tensor_data(t);
    const char *q = text;
    for (size_t i = 0; i < n; i++) {
        char *end;
        double v = strtod(q, &end);
        if (end == q || (*end && *end != ',') || (!is_float && v != (double)(long long)v)) {
            cli_error("--bind %s: '%s' is not a list of %s values", name, text, tdm_dtype_name(vi.dtype));
            tdm_tensor_destroy(t);
            return NULL;
        }
        switch (vi.dtype) {
        case TDM_FLOAT: ((float *)data)[i] = (float)v; break;
        case TDM_DOUBLE: ((double *)data)[i] = v; break;
        case TDM_INT64: ((int64_t *)data)[i] = (int64_t)v; break;
        case TDM_INT32: ((int32_t *)data)[i] = (int32_t)v; break;
        case TDM_INT16: ((int16_t *)data)[i] = (int16_t)v; break;
        case TDM_INT8: ((int8_t *)data)[i] = (int8_t)v; break;
        case TDM_UINT8: ((uint8_t *)data)[i] = (uint8_t)v; break;
        default: ((uint8_t *)data)[i] = v != 0; break;
        }
        q = *end ? end + 1 : end;
    }
    return t;
}

int cli_binds_apply(const cli_runopts *o, const tdm_model *m, tdm_session_options *so)
{
    for (size_t b = 0; b < o->n_binds; b++) {
        const char *eq = strchr(o->binds[b], '=');
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - o->binds[b]), o->binds[b]);
        int k = cli_find_input(m, name);
        if (k < 0) {
            char names[180];
            cli_list_inputs(m, names, sizeof names);
            cli_error("--bind names '%s', which is not an input of the model (its inputs: %s)", name, names);
            return EXIT_INVALID;
        }
        tdm_tensor *t = bind_value(m, (size_t)k, name, eq + 1);
        if (!t)
            return EXIT_INVALID;
        tdm_status st = tdm_session_options_bind(so, name, t);
        tdm_tensor_destroy(t);
        if (st)
            return cli_fail(st, NULL, "--bind: the value is not accepted");
    }
    return 0;
}

int cli_shapes_apply(const char *cmd, const tdm_model *m, const cli_kv *shapes, size_t n, tdm_session_options *so)
{
    if (cli_kv_unique(cmd, "--shape", shapes, n))
        return EXIT_USAGE;
    for (size_t i = 0; i < n; i++) {
        int rank;
        int64_t dims[CLI_MAX_RANK];
        if (cli_parse_dims(cmd, shapes[i].name, shapes[i].value, &rank, dims))
            return EXIT_USAGE;
        if (cli_find_input(m, shapes[i].name) < 0) {
            char names[180];
            cli_list_inputs(m, names, sizeof names);
            cli_error("--shape names '%s', which is not an input of the model (its inputs: %s)", shapes[i].name,
                      names);
            return EXIT_INVALID;
        }
        tdm_status st = tdm_session_options_set_shape(so, shapes[i].name, rank, dims);
        if (st != TDM_OK) {
            char msg[256];
            snprintf(msg, sizeof msg, "--shape %s=%s is not accepted (%s)", shapes[i].name, shapes[i].value,
                     tdm_status_str(st));
            return cli_fail(st == TDM_E_USAGE ? TDM_E_INPUT : st, NULL, msg);
        }
    }
    return 0;
}

int cli_policy_report(const tdm_plan *plan)
{
    cli_error("%s", tdm_plan_error(plan));
    size_t n = tdm_plan_violation_count(plan);
    for (size_t k = 0; k < n; k++) {
        const char *node = NULL, *reason = NULL, *detail = NULL;
        if (tdm_plan_violation(plan, k, &node, &reason, &detail) != TDM_OK)
            continue;
        char line[2048];
        snprintf(line, sizeof line, "  %s: %s: %s", node && *node ? node : "(graph output)", reason, detail);
        cli_print_wrapped("", "      ", line);
    }
    return EXIT_POLICY;
}

int cli_session_fail(tdm_ctx *ctx, const tdm_model *m, const tdm_session_options *so, tdm_status st)
{
    if (st != TDM_E_POLICY)
        return cli_fail(st, NULL, tdm_ctx_error(ctx));
    /* the session's sentence holds what fits; the plan lists every offender */
    tdm_plan *plan = NULL;
    if (tdm_plan_create(ctx, m, so, &plan) != TDM_OK || tdm_plan_status(plan) != TDM_E_POLICY) {
        tdm_plan_destroy(plan);
        return cli_fail(st, NULL, tdm_ctx_error(ctx));
    }
    int rc = cli_policy_report(plan);
    tdm_plan_destroy(plan);
    return rc;
}

void usage_runopts(FILE *f)
{
    fputs("run options (planning):\n"
          "  --devices LIST         devices in priority order, comma-separated: opencl[:N],\n"
          "                         vnpu:PROFILE (rk3588, qnn-htp, coreml-ane, intel-npu,\n"
          "                         edge-npu, server-npu, fp32-all or a .json path), a plugin's\n"
          "                         name, cpu; cpu is implied last (`tandem devices` lists them)\n"
          "  --granularity G        op (each node on its first able device), subgraph (the\n"
          "                         default: small islands join their neighbours), graph (all\n"
          "                         on the first device that runs every node), auto (the\n"
          "                         placement of least estimated time, copies included),\n"
          "                         greedy (the baseline: each device claims every node it\n"
          "                         supports, in priority order, as onnxruntime's EPs do)\n"
          "  --fallback P           allow (default), deny (any node off the first device is an\n"
          "                         error), deny-compute (only shape bookkeeping ops may fall\n"
          "                         back); the environment variable TANDEM_FALLBACK when absent\n"
          "  --max-fallback-ratio R fail when the fallback nodes take more than R (0..1) of the\n"
          "                         estimated time (of the node count without estimates)\n"
          "  --max-boundary-bytes B fail when copies between devices move more than B bytes\n"
          "  --bind NAME=VALUE      fix input NAME for deployment (a scalar, a comma list, or a\n"
          "                         FILE.npy): constant at plan time, so an If on it becomes the\n"
          "                         branch it takes; a run that gives another value is refused\n"
          "  --pin OP_OR_NODE=DEV   run that node (or every node of that op type) on DEV\n"
          "  --plugin PATH          load a device plugin (also: TANDEM_PLUGINS=PATH:PATH)\n"
          "  --calibration FILE     a file of `tandem calibrate`: nodes whose error on a device\n"
          "                         is outside the thresholds run on cpu (PRECISION), also where\n"
          "                         error accumulated along a chain crosses them\n"
          "  --calibration-input SET  inputs for the precision guard, checked when the session is\n"
          "                         made (probe and verification; several allowed: a node is\n"
          "                         kept off the narrow device when any set shows a problem;\n"
          "                         the first run is still verified): NAME=FILE[,NAME=FILE]...,\n"
          "                         a folder of NAME.npy files, or the FILE of a one-input model\n"
          "  --min-cosine C         the cosine threshold (default 0.99; compare and report:\n"
          "                         0.999, also the threshold their tables mark)\n"
          "  --verify MODE          the precision guard: off, first (default when a device\n"
          "                         computes in fp16/bf16: the first run is probed and checked\n"
          "                         against cpu fp32 and re-planned until its outputs agree;\n"
          "                         and when a rescue is kept: it is checked against the\n"
          "                         original node on the values the first run sends it, and\n"
          "                         dropped if it misses), every:N (then one run in N is\n"
          "                         checked too)\n"
          "  --max-abs A            also refuse a node whose max |diff| exceeds A (compare and\n"
          "                         report: also mark it)\n"
          "  --rescue MODE          rewrite what a device rejects into ops it runs, when the\n"
          "                         rewrite matches the original on cpu fp32 (RESCUED; on\n"
          "                         synthetic inputs, then on the first run's: --verify): safe\n"
          "                         (default: exact rewrites), all (also approximations), off\n"
          "  --bucket HxW[,HxW...]  pad an image input (bottom/right) to the smallest of these\n"
          "                         shapes that holds it, run that shape's plan, crop the\n"
          "                         outputs back; refused (SHAPE_UNSUPPORTED) for a model that\n"
          "                         is not fully convolutional; --bucket profile: the image\n"
          "                         sizes the device's profile lists (\"image_sizes\")\n"
          "  --bucket-pad MODE      zero (default) or edge (repeat the last row and column)\n"
          "  --no-fusion            run every elementwise node on its own (by default, on cpu,\n"
          "                         those after a node run inside it)\n"
          "A policy violation exits 3 and lists every offending node on stderr.\n",
          f);
}
