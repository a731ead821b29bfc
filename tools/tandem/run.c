/* tandem run MODEL [--input NAME=FILE]… [--random] [--shape NAME=DxD]…
 *                  [--output-dir DIR] [--output-format npy|pb] [--overwrite] [--threads N] [--devices LIST] */
#define _POSIX_C_SOURCE 200809L

#include "cli.h"
#include "story.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHAPE_MAX_RANK CLI_MAX_RANK

typedef cli_kv kv;

typedef struct run_args {
    const char *model;
    kv *inputs;
    size_t n_inputs;
    kv *shapes;
    size_t n_shapes;
    int random, overwrite;
    const char *output_dir;
    int output_pb;       /* --output-format pb: one ONNX .pb per output */
    long long threads;
    const char *threads_arg; /* --threads VALUE, or NULL: TANDEM_THREADS */
    const char *devices;
    cli_runopts ro;      /* RUN OPTIONS (runopts.c) */
    const char *ledger;  /* --ledger FILE */
    cli_adaptopts ao;    /* --breaker, --adapt, --plan-cache, --adaptation-json (adaptopts.c) */
    long long repeat;    /* --repeat N: runs (outputs of the last; each compared with the first) */
    diag_flags diag;     /* --trace, --metrics, --fallback-log, --alert-fallback-ratio (cmd_profile.c) */
} run_args;

/* One graph output's place in --output-dir. */
typedef struct out_entry {
    char *base;   /* sanitised, de-duplicated name without ".npy" */
    char *entry;  /* file or folder name in DIR: base + ".npy", or base for a sequence; base + ".pb" */
    int written;  /* in the temporary folder */
    int is_dir;
    int pb;       /* written as the ONNX node tests store the value (tdm_value_save_pb) */
} out_entry;

static void run_args_free(run_args *a)
{
    for (size_t i = 0; i < a->n_inputs; i++)
        free(a->inputs[i].owned);
    for (size_t i = 0; i < a->n_shapes; i++)
        free(a->shapes[i].owned);
    free(a->inputs);
    free(a->shapes);
    cli_runopts_free(&a->ro);
}

static const char *const later_opts[] = {"--trace", "--calibration"};

static int parse_args(int argc, char **argv, run_args *a)
{
    memset(a, 0, sizeof *a);
    a->inputs = calloc((size_t)argc, sizeof *a->inputs);
    a->shapes = calloc((size_t)argc, sizeof *a->shapes);
    if (!a->inputs || !a->shapes) {
        cli_error("out of memory");
        return EXIT_INTERNAL;
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val;
        int r;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage_run(stdout);
            return -1;
        }
        if (strcmp(arg, "--random") == 0) {
            a->random = 1;
            continue;
        }
        if (strcmp(arg, "--overwrite") == 0) {
            a->overwrite = 1;
            continue;
        }
        if (diag_flags_parse("run", argc, argv, &i, &a->diag, &r)) {
            if (r)
                return r;
            continue;
        }
        if ((r = cli_opt_value("run", argc, argv, &i, "--input", &val)) != 0) {
            if (r < 0 || cli_split_kv("run", "--input", val, &a->inputs[a->n_inputs]))
                return EXIT_USAGE;
            a->n_inputs++;
            continue;
        }
        if ((r = cli_opt_value("run", argc, argv, &i, "--shape", &val)) != 0) {
            if (r < 0 || cli_split_kv("run", "--shape", val, &a->shapes[a->n_shapes]))
                return EXIT_USAGE;
            a->n_shapes++;
            continue;
        }
        if ((r = cli_opt_value("run", argc, argv, &i, "--output-dir", &val)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
            if (!*val) {
                cli_error("run: --output-dir needs a folder name");
                return EXIT_USAGE;
            }
            a->output_dir = val;
            continue;
        }
        if ((r = cli_opt_value("run", argc, argv, &i, "--output-format", &val)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
            if (strcmp(val, "npy") != 0 && strcmp(val, "pb") != 0) {
                cli_error("run: --output-format expects npy or pb, not '%s'", val);
                return EXIT_USAGE;
            }
            a->output_pb = val[0] == 'p';
            continue;
        }
        if ((r = cli_opt_value("run", argc, argv, &i, "--threads", &val)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
            a->threads_arg = val;
            continue;
        }
        if (cli_runopts_parse("run", argc, argv, &i, &a->ro, &r)) {
            if (r)
                return r;
            continue;
        }
        if (cli_adaptopts_parse("run", argc, argv, &i, &a->ao, &r)) {
            if (r)
                return r;
            continue;
        }
        if ((r = cli_opt_value("run", argc, argv, &i, "--repeat", &val)) != 0) {
            if (r < 0 || cli_parse_i64(val, &a->repeat) || a->repeat < 1 || a->repeat > 100000000) {
                if (r > 0)
                    cli_error("run: --repeat expects a number of runs >= 1, not '%s'", val);
                return EXIT_USAGE;
            }
            continue;
        }
        if ((r = cli_opt_value("run", argc, argv, &i, "--ledger", &val)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
            if (!*val) {
                cli_error("run: --ledger needs a file name");
                return EXIT_USAGE;
            }
            a->ledger = val;
            continue;
        }
        for (size_t k = 0; k < sizeof later_opts / sizeof later_opts[0]; k++) {
            size_t l = strlen(later_opts[k]);
            if (strncmp(arg, later_opts[k], l) == 0 && (arg[l] == '\0' || arg[l] == '=')) {
                cli_error("run: option '%s' is not implemented yet", later_opts[k]);
                return EXIT_USAGE;
            }
        }
        if (arg[0] == '-' && arg[1] != '\0') {
            cli_error("run: unknown option '%s'; see `tandem run --help`", arg);
            return EXIT_USAGE;
        }
        if (a->model) {
            cli_error("run: one MODEL only ('%s' and '%s' given)", a->model, arg);
            return EXIT_USAGE;
        }
        a->model = arg;
    }
    if (!a->model) {
        cli_error("run: no MODEL given; see `tandem run --help`");
        return EXIT_USAGE;
    }
    if (cli_threads("run", a->threads_arg, &a->threads))
        return EXIT_USAGE;
    if (cli_kv_unique("run", "--input", a->inputs, a->n_inputs))
        return EXIT_USAGE;
    return cli_kv_unique("run", "--shape", a->shapes, a->n_shapes);
}

/* Checks --devices: only "cpu" exists for now. */
static int check_devices(const char *list)
{
    if (!list)
        return 0;
    const char *p = list;
    for (;;) {
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        if (l == 0) {
            cli_error("run: --devices expects a comma-separated list such as 'cpu', not '%s'", list);
            return EXIT_USAGE;
        }
        if (!(l == 3 && strncmp(p, "cpu", 3) == 0)) {
            cli_error("device '%.*s' is not available (this build has only 'cpu')", (int)l, p);
            return EXIT_DEVICE;
        }
        if (!c)
            break;
        p = c + 1;
    }
    return 0;
}

/* "2x3x?" → rank and dims (-1 for '?'); "" is a scalar. */
static int parse_shape(const kv *s, int *rank, int64_t *dims)
{
    return cli_parse_dims("run", s->name, s->value, rank, dims);
}

/* ----------------------------------------------------------- random inputs */

static int make_random(const tdm_value_info *vi, const run_args *a, uint64_t *rng, tdm_tensor **out)
{
    int rank = -1;
    int64_t dims[SHAPE_MAX_RANK];
    *out = NULL;
    for (size_t i = 0; i < a->n_shapes; i++)
        if (strcmp(a->shapes[i].name, vi->name) == 0 && parse_shape(&a->shapes[i], &rank, dims))
            return EXIT_USAGE;
    return cli_random_input(vi, rank, dims, "--random", rng, out);
}

/* ------------------------------------------------------------- statistics */

static void print_stats(const tdm_tensor *t)
{
    char sbuf[512];
    tdm_dtype dt = tdm_tensor_dtype(t);
    size_t n = tdm_tensor_count(t);
    const void *p = tdm_tensor_cdata(t);
    printf("%s  %s", tdm_dtype_name(dt), cli_shape_str(tdm_tensor_rank(t), tdm_tensor_dims(t), sbuf, sizeof sbuf));
    if (n == 0) {
        printf("  (empty)");
        return;
    }
    switch (dt) {
    case TDM_FLOAT:
    case TDM_DOUBLE:
    case TDM_FLOAT16:
    case TDM_BFLOAT16: {
        double mn = INFINITY, mx = -INFINITY, sum = 0;
        size_t nan = 0;
        for (size_t i = 0; i < n; i++) {
            double v = dt == TDM_FLOAT      ? ((const float *)p)[i]
                       : dt == TDM_DOUBLE   ? ((const double *)p)[i]
                       : dt == TDM_FLOAT16  ? cli_f16_to_f32(((const uint16_t *)p)[i])
                                            : cli_bf16_to_f32(((const uint16_t *)p)[i]);
            if (isnan(v)) {
                nan++;
                continue;
            }
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
            sum += v;
        }
        if (nan == n)
            printf("  min=nan  max=nan  mean=nan");
        else
            printf("  min=%.6g  max=%.6g  mean=%.6g", mn, mx, sum / (double)(n - nan));
        if (nan)
            printf("  nan=%zu", nan);
        return;
    }
    case TDM_INT8:
    case TDM_INT16:
    case TDM_INT32:
    case TDM_INT64:
    case TDM_INT4: {
        long long mn = 0, mx = 0;
        double sum = 0;
        for (size_t i = 0; i < n; i++) {
            long long v = dt == TDM_INT8 || dt == TDM_INT4 ? ((const int8_t *)p)[i]
                          : dt == TDM_INT16                ? ((const int16_t *)p)[i]
                          : dt == TDM_INT32                ? ((const int32_t *)p)[i]
                                                           : (long long)((const int64_t *)p)[i];
            if (i == 0 || v < mn)
                mn = v;
            if (i == 0 || v > mx)
                mx = v;
            sum += (double)v;
        }
        printf("  min=%lld  max=%lld  mean=%.6g", mn, mx, sum / (double)n);
        return;
    }
    case TDM_UINT8:
    case TDM_UINT16:
    case TDM_UINT32:
    case TDM_UINT64:
    case TDM_UINT4:
    case TDM_BOOL: {
        unsigned long long mn = 0, mx = 0;
        double sum = 0;
        for (size_t i = 0; i < n; i++) {
            unsigned long long v = dt == TDM_UINT8 || dt == TDM_UINT4 ? ((const uint8_t *)p)[i]
                                   : dt == TDM_BOOL                   ? ((const uint8_t *)p)[i] != 0
                                   : dt == TDM_UINT16                 ? ((const uint16_t *)p)[i]
                                   : dt == TDM_UINT32                 ? ((const uint32_t *)p)[i]
                                                                      : (unsigned long long)((const uint64_t *)p)[i];
            if (i == 0 || v < mn)
                mn = v;
            if (i == 0 || v > mx)
                mx = v;
            sum += (double)v;
        }
        printf("  min=%llu  max=%llu  mean=%.6g", mn, mx, sum / (double)n);
        return;
    }
    case TDM_STRING:
    case TDM_COMPLEX64:
    case TDM_COMPLEX128:
    case TDM_FLOAT8E4M3FN:
    case TDM_FLOAT8E4M3FNUZ:
    case TDM_FLOAT8E5M2:
    case TDM_FLOAT8E5M2FNUZ:
    case TDM_FLOAT4E2M1:
    case TDM_FLOAT8E8M0:
    case TDM_UINT2:
    case TDM_INT2:
    case TDM_UNDEFINED:
        printf("  (no statistics for %s)", tdm_dtype_name(dt));
        return;
    }
}

/* A map of a sequence of maps: its first entries, "{key: value, ...}". */
static void print_map(const tdm_tensor *map)
{
    const tdm_tensor *k = tdm_map_keys(map), *v = tdm_map_values(map);
    size_t n = tdm_tensor_count(k), shown = n < 8 ? n : 8;
    printf("map  %zu entr%s  {", n, n == 1 ? "y" : "ies");
    for (size_t i = 0; i < shown; i++) {
        const char *ks = tdm_tensor_dtype(k) == TDM_STRING ? ((char *const *)tdm_tensor_cdata(k))[i] : NULL;
        if (tdm_tensor_dtype(k) == TDM_STRING)
            printf("%s'%s': ", i ? ", " : "", ks ? ks : "");
        else
            printf("%s%lld: ", i ? ", " : "", (long long)((const int64_t *)tdm_tensor_cdata(k))[i]);
        if (tdm_tensor_dtype(v) == TDM_FLOAT)
            printf("%.6g", ((const float *)tdm_tensor_cdata(v))[i]);
        else
            printf("?");
    }
    printf("%s}", shown < n ? ", ..." : "");
}

/* -------------------------------------------------------------- output dir */

static char *str_cat(const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *s = malloc(la + lb + lc + 1);
    if (!s)
        return NULL;
    memcpy(s, a, la);
    memcpy(s + la, b, lb);
    memcpy(s + la + lb, c, lc + 1);
    return s;
}

static char *path_join(const char *dir, const char *name) { return str_cat(dir, "/", name); }

static int is_safe_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
}

/* Computes the file names of the outputs (DESIGN.md "Command line"). */
static int name_outputs(const tdm_model *m, out_entry *ents, size_t n, int pb)
{
    for (size_t i = 0; i < n; i++) {
        tdm_value_info vi;
        char idx[48];
        if (tdm_model_output(m, i, &vi) != TDM_OK) {
            cli_error("cannot describe output %zu of the model", i);
            return EXIT_INTERNAL;
        }
        if (pb && tdm_model_output_map_key(m, i) != TDM_UNDEFINED) {
            cli_error("output '%s' is a sequence of maps, which --output-format pb does not write; "
                      "the npy form writes NAME/J/keys.npy and NAME/J/values.npy", vi.name);
            return EXIT_INVALID;
        }
        const char *name = vi.name ? vi.name : "";
        char *base;
        if (!*name) {
            snprintf(idx, sizeof idx, "output_%zu", i);
            base = str_cat(idx, "", "");
        } else {
            base = str_cat(name, "", "");
            if (base)
                for (char *c = base; *c; c++)
                    if (!is_safe_char(*c))
                        *c = '_';
            /* "." and ".." are not usable as names. */
            if (base && (strcmp(base, ".") == 0 || strcmp(base, "..") == 0))
                for (char *c = base; *c; c++)
                    *c = '_';
        }
        if (!base)
            goto oom;
        int is_dir = !pb && vi.kind == TDM_KIND_SEQUENCE;
        const char *ext = pb ? ".pb" : is_dir ? "" : ".npy";
        char *cand = str_cat(base, "", "");
        char *entry = cand ? str_cat(cand, ext, "") : NULL;
        for (unsigned k = 1; cand && entry; k++) {
            int clash = 0;
            for (size_t j = 0; j < i && !clash; j++)
                clash = strcmp(ents[j].base, cand) == 0 || strcmp(ents[j].entry, entry) == 0;
            if (!clash)
                break;
            free(cand);
            free(entry);
            snprintf(idx, sizeof idx, "_%u", k);
            cand = str_cat(base, idx, "");
            entry = cand ? str_cat(cand, ext, "") : NULL;
        }
        free(base);
        if (!cand || !entry) {
            free(cand);
            free(entry);
            goto oom;
        }
        ents[i].base = cand;
        ents[i].entry = entry;
        ents[i].is_dir = is_dir;
        ents[i].pb = pb;
    }
    return 0;
oom:
    cli_error("out of memory");
    return EXIT_INTERNAL;
}

/* mkdir -p. */
static int make_dirs(const char *dir)
{
    char *p = str_cat(dir, "", "");
    if (!p) {
        cli_error("out of memory");
        return EXIT_INTERNAL;
    }
    for (char *c = p + 1;; c++) {
        if (*c == '/' || *c == '\0') {
            char save = *c;
            *c = '\0';
            struct stat sb;
            if (stat(p, &sb) != 0) {
                if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                    cli_error("cannot create the output folder '%s': %s", p, strerror(errno));
                    free(p);
                    return EXIT_IO;
                }
            } else if (!S_ISDIR(sb.st_mode)) {
                cli_error("cannot create the output folder '%s': '%s' is not a folder", dir, p);
                free(p);
                return EXIT_IO;
            }
            *c = save;
            if (!save)
                break;
        }
    }
    free(p);
    return 0;
}

/* Before running: refuses outputs whose files exist (without --overwrite). */
static int precheck_outputs(const run_args *a, const out_entry *ents, size_t n)
{
    struct stat sb;
    if (stat(a->output_dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        cli_error("--output-dir '%s' exists and is not a folder", a->output_dir);
        return EXIT_IO;
    }
    for (size_t i = 0; i < n; i++) {
        char *p = path_join(a->output_dir, ents[i].entry);
        if (!p) {
            cli_error("out of memory");
            return EXIT_INTERNAL;
        }
        int exists = lstat(p, &sb) == 0;
        if (exists && !a->overwrite) {
            cli_error("'%s' exists; not overwriting it (give --overwrite to replace it)", p);
            free(p);
            return EXIT_IO;
        }
        if (exists && ents[i].is_dir != !!S_ISDIR(sb.st_mode)) {
            cli_error("'%s' exists and is %s; not replacing it", p, S_ISDIR(sb.st_mode) ? "a folder" : "not a folder");
            free(p);
            return EXIT_IO;
        }
        free(p);
    }
    return 0;
}

/* As .npy, or as a .pb value when pb_vi (its declared type) is given. */
static int save_one(tdm_ctx *ctx, const tdm_tensor *t, const char *path, const char *output,
                    const tdm_value_info *pb_vi)
{
    tdm_status st = pb_vi ? tdm_value_save_pb(ctx, t, pb_vi, path, 1) : tdm_tensor_save_npy(ctx, t, path, 1);
    if (st) {
        cli_error("output '%s': %s", output, tdm_ctx_error(ctx));
        return cli_exit_code(st);
    }
    return 0;
}

/* Item j of a sequence of maps, in the sequence's folder dir: a folder j
 * holding keys.npy (int64 or strings) and values.npy. */
static int save_map(tdm_ctx *ctx, const tdm_tensor *map, const char *dir, size_t j, const char *output)
{
    char item[32];
    snprintf(item, sizeof item, "%zu", j);
    char *d = path_join(dir, item);
    char *kp = d ? path_join(d, "keys.npy") : NULL, *vp = d ? path_join(d, "values.npy") : NULL;
    int rc = 0;
    if (!kp || !vp) {
        cli_error("out of memory");
        rc = EXIT_INTERNAL;
    } else if (mkdir(d, 0777) != 0) {
        cli_error("cannot create '%s': %s", d, strerror(errno));
        rc = EXIT_IO;
    } else if ((rc = save_one(ctx, tdm_map_keys(map), kp, output, NULL)) == 0) {
        rc = save_one(ctx, tdm_map_values(map), vp, output, NULL);
    }
    free(d);
    free(kp);
    free(vp);
    return rc;
}

/* Writes every output into tmp (a fresh folder inside DIR). */
static int write_temp(tdm_ctx *ctx, const tdm_model *m, tdm_tensor **outs, out_entry *ents, size_t n, const char *tmp)
{
    for (size_t i = 0; i < n; i++) {
        tdm_value_info vi;
        tdm_model_output(m, i, &vi);
        tdm_kind k = tdm_tensor_kind(outs[i]);
        if (k == TDM_KIND_NONE && !ents[i].pb)
            continue;
        char *p = path_join(tmp, ents[i].entry);
        if (!p) {
            cli_error("out of memory");
            return EXIT_INTERNAL;
        }
        int rc = 0;
        if (ents[i].pb) {
            rc = save_one(ctx, outs[i], p, vi.name, &vi);
        } else if (k == TDM_KIND_TENSOR) {
            ents[i].is_dir = 0;
            rc = save_one(ctx, outs[i], p, vi.name, NULL);
        } else {
            ents[i].is_dir = 1;
            if (mkdir(p, 0777) != 0) {
                cli_error("cannot create '%s': %s", p, strerror(errno));
                rc = EXIT_IO;
            }
            for (size_t j = 0; !rc && j < tdm_sequence_length(outs[i]); j++) {
                char item[48];
                snprintf(item, sizeof item, "%zu.npy", j);
                char *ip = path_join(p, item);
                if (!ip) {
                    cli_error("out of memory");
                    rc = EXIT_INTERNAL;
                    break;
                }
                const tdm_tensor *it = tdm_sequence_item(outs[i], j);
                if (tdm_tensor_kind(it) == TDM_KIND_MAP) /* J/keys.npy and J/values.npy */
                    rc = save_map(ctx, it, p, j, vi.name);
                else
                    rc = save_one(ctx, it, ip, vi.name, NULL);
                free(ip);
            }
        }
        free(p);
        if (rc)
            return rc;
        ents[i].written = 1;
        if ((rc = cli_interrupted()) != 0)
            return rc;
    }
    return 0;
}

/* Removes "<digits>.npy" files and "<digits>" folders (maps) from an
 * existing sequence folder. */
static int clear_sequence_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *s = de->d_name;
        size_t l = strspn(s, "0123456789");
        if (l == 0 || (s[l] && strcmp(s + l, ".npy") != 0))
            continue;
        char *p = path_join(dir, s);
        if (p && s[l])
            unlink(p);
        else if (p)
            cli_remove_tree(p);
        free(p);
    }
    closedir(d);
    return 0;
}

/* Moves one written entry from tmp into DIR. Returns 0, or an exit code
 * after printing the error. *created says whether the target is new (so
 * that a later failure can take it back). */
static int commit_one(const run_args *a, const out_entry *e, const char *tmp, int *created)
{
    char *src = path_join(tmp, e->entry), *dst = path_join(a->output_dir, e->entry);
    int rc = 0;
    *created = 0;
    if (!src || !dst) {
        cli_error("out of memory");
        rc = EXIT_INTERNAL;
        goto done;
    }
    if (!e->is_dir) {
        if (a->overwrite) {
            struct stat sb;
            *created = lstat(dst, &sb) != 0;
            if (rename(src, dst) != 0) {
                cli_error("cannot write '%s': %s", dst, strerror(errno));
                rc = EXIT_IO;
            }
        } else if (link(src, dst) != 0) {
            int err = errno;
            if (err == EEXIST)
                cli_error("'%s' exists; not overwriting it (give --overwrite to replace it)", dst);
            else
                cli_error("cannot write '%s': %s", dst, strerror(err));
            rc = EXIT_IO;
        } else {
            *created = 1;
            unlink(src);
        }
        goto done;
    }
    /* A sequence folder: a new folder in DIR is claimed with mkdir (which
     * fails when it exists), then the items are moved into it. */
    if (mkdir(dst, 0777) == 0) {
        *created = 1;
    } else if (errno != EEXIST || !a->overwrite) {
        if (errno == EEXIST)
            cli_error("'%s' exists; not overwriting it (give --overwrite to replace it)", dst);
        else
            cli_error("cannot create '%s': %s", dst, strerror(errno));
        rc = EXIT_IO;
        goto done;
    } else if (clear_sequence_dir(dst) != 0) {
        cli_error("cannot replace the items in '%s': %s", dst, strerror(errno));
        rc = EXIT_IO;
        goto done;
    }
    DIR *d = opendir(src);
    if (!d) {
        cli_error("cannot read '%s': %s", src, strerror(errno));
        rc = EXIT_IO;
        goto done;
    }
    struct dirent *de;
    while (!rc && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *s = path_join(src, de->d_name), *t = path_join(dst, de->d_name);
        if (!s || !t) {
            cli_error("out of memory");
            rc = EXIT_INTERNAL;
        } else if (rename(s, t) != 0) {
            cli_error("cannot write '%s': %s", t, strerror(errno));
            rc = EXIT_IO;
        }
        free(s);
        free(t);
    }
    closedir(d);
done:
    free(src);
    free(dst);
    return rc;
}

static int write_outputs(tdm_ctx *ctx, const run_args *a, const tdm_model *m, tdm_tensor **outs, out_entry *ents,
                         size_t n)
{
    int rc = make_dirs(a->output_dir);
    if (rc)
        return rc;
    char *tmp;
    if ((rc = cli_tmpdir_create(a->output_dir, &tmp)) != 0) /* guards SIGINT/SIGTERM/SIGHUP from here */
        return rc;
    rc = write_temp(ctx, m, outs, ents, n, tmp);
    int *created = calloc(n ? n : 1, sizeof *created);
    if (!rc && !created) {
        cli_error("out of memory");
        rc = EXIT_INTERNAL;
    }
    size_t done = 0;
    for (; !rc && done < n; done++)
        if (ents[done].written && !(rc = cli_interrupted()))
            rc = commit_one(a, &ents[done], tmp, &created[done]);
    cli_remove_tree(tmp);
    if (!rc)
        rc = cli_interrupted(); /* up to here a signal takes everything back */
    if (rc > 128)
        cli_error("interrupted by %s while writing the outputs into '%s'; what this run wrote there is removed",
                  cli_signal_name(rc), a->output_dir);
    if (rc && created) {
        /* Take back what this run added, so that a failure leaves no files. */
        for (size_t i = 0; i < done; i++) {
            if (!created[i])
                continue;
            char *p = path_join(a->output_dir, ents[i].entry);
            if (!p)
                continue;
            if (ents[i].is_dir)
                cli_remove_tree(p);
            else
                unlink(p);
            free(p);
        }
    }
    cli_tmpdir_guard_end();
    free(tmp);
    free(created);
    return rc;
}

/* ------------------------------------------------------------------- run */

/* The dynamic dimensions the given inputs fix (and --shape does not) are
 * set on the options, and the session planned again with them, so that
 * devices that need static shapes can take the model. */
static int plan_for_inputs(tdm_ctx *ctx, const tdm_model *m, tdm_session_options *so, const run_args *a,
                           tdm_tensor *const *ins, tdm_session **s)
{
    int changed = 0;
    tdm_status st;
    if (a->ro.bucket) /* the session plans each bucket shape itself (the plan cache) */
        return 0;
    for (size_t i = 0; i < tdm_model_input_count(m); i++) {
        tdm_value_info vi;
        int fixed = 0, dynamic = 0;
        if (!ins[i] || tdm_model_input(m, i, &vi) != TDM_OK || tdm_tensor_kind(ins[i]) != TDM_KIND_TENSOR)
            continue;
        for (size_t k = 0; k < a->n_shapes; k++)
            fixed |= strcmp(a->shapes[k].name, vi.name) == 0;
        for (int d = 0; d < vi.rank; d++)
            dynamic |= vi.dims[d].value < 0;
        if (fixed || !dynamic || tdm_tensor_rank(ins[i]) != vi.rank)
            continue;
        if ((st = tdm_session_options_set_shape(so, vi.name, vi.rank, tdm_tensor_dims(ins[i]))) != TDM_OK)
            return cli_fail(st, NULL, "out of memory");
        changed = 1;
    }
    if (!changed)
        return 0;
    tdm_session_destroy(*s);
    *s = NULL;
    if ((st = tdm_session_create(ctx, m, so, s)) != TDM_OK)
        return cli_session_fail(ctx, m, so, st);
    return 0;
}

/* --repeat N: runs 2..N, each output compared with the first run's (which
 * outs holds; it keeps the last run's at the end). Prints one summary line
 * on stderr; a failed run or different outputs exit EXIT_INVALID. */
static int run_repeat(tdm_session *s, const run_args *a, tdm_tensor **ins, tdm_tensor **outs, size_t n_out)
{
    tdm_tensor **cur = calloc(n_out ? n_out : 1, sizeof *cur);
    long long failed = 0, differ = 0;
    double maxdiff = 0;
    if (!cur) {
        cli_error("out of memory");
        return EXIT_INTERNAL;
    }
    for (long long r = 1; r < a->repeat; r++) {
        tdm_status st = tdm_session_run(s, (const tdm_tensor *const *)ins, cur);
        if (st) {
            if (!failed)
                cli_error("run %lld of %lld failed: %s", r + 1, a->repeat, tdm_session_error(s));
            failed++;
            continue;
        }
        int same = 1;
        for (size_t k = 0; k < n_out; k++) {
            const tdm_tensor *x = outs[k], *y = cur[k];
            if (!x || !y || tdm_tensor_kind(x) != tdm_tensor_kind(y)) {
                same = same && !x && !y;
                continue;
            }
            if (tdm_tensor_kind(x) != TDM_KIND_TENSOR)
                continue;
            size_t n = tdm_tensor_count(x);
            if (n != tdm_tensor_count(y) || tdm_tensor_dtype(x) != tdm_tensor_dtype(y)) {
                same = 0;
                continue;
            }
            if (tdm_tensor_dtype(x) == TDM_FLOAT) {
                const float *p = tdm_tensor_cdata(x), *q = tdm_tensor_cdata(y);
                for (size_t i = 0; i < n; i++) {
                    double d = (double)p[i] - (double)q[i];
                    d = d < 0 ? -d : d;
                    if (!(d <= maxdiff))
                        maxdiff = d;
                    if (!(d == 0) && !(p[i] != p[i] && q[i] != q[i]))
                        same = 0;
                }
            } else if (tdm_tensor_dtype(x) != TDM_STRING) {
                size_t bytes = tdm_tensor_nbytes(x);
                if (bytes != tdm_tensor_nbytes(y) || memcmp(tdm_tensor_cdata(x), tdm_tensor_cdata(y), bytes) != 0)
                    same = 0;
            }
        }
        differ += !same;
        for (size_t k = 0; k < n_out; k++) {
            if (r + 1 == a->repeat) {
                tdm_tensor_destroy(outs[k]);
                outs[k] = cur[k];
            } else {
                tdm_tensor_destroy(cur[k]);
            }
            cur[k] = NULL;
        }
    }
    free(cur);
    fprintf(stderr, "repeat: %lld runs, %lld failed, %lld with outputs different from run 1 (max |diff| %g)\n",
            a->repeat, failed, differ, maxdiff);
    return failed || differ ? EXIT_INVALID : 0;
}

static int write_ledger(tdm_session *s, const char *path)
{
    char *json = NULL;
    tdm_status st = tdm_session_ledger_json(s, &json);
    if (st)
        return cli_fail(st, NULL, "cannot write the ledger");
    FILE *f = fopen(path, "w");
    if (!f) {
        tdm_free(json);
        cli_error("cannot write the ledger to '%s': %s", path, strerror(errno));
        return EXIT_IO;
    }
    int bad = fputs(json, f) < 0 || fputc('\n', f) == EOF;
    bad |= fclose(f) != 0;
    tdm_free(json);
    if (bad) {
        cli_error("cannot write the ledger to '%s'", path);
        return EXIT_IO;
    }
    return 0;
}

int cmd_run(int argc, char **argv)
{
    run_args a;
    tdm_ctx *ctx = NULL;
    tdm_model *m = NULL;
    tdm_session_options *so = NULL;
    tdm_session *s = NULL;
    tdm_tensor **ins = NULL, **outs = NULL;
    out_entry *ents = NULL;
    size_t n_in = 0, n_out = 0;
    tdm_status st;
    int rc = parse_args(argc, argv, &a);
    if (rc < 0) {
        rc = EXIT_OK; /* --help */
        goto done;
    }
    if (rc || (rc = check_devices(a.devices)) != 0)
        goto done;
    if ((st = tdm_ctx_create(&ctx)) != TDM_OK) {
        rc = cli_fail(st, NULL, "cannot create a context (out of memory)");
        goto done;
    }
    if ((st = tdm_model_load(ctx, a.model, &m)) != TDM_OK) {
        rc = cli_fail(st, NULL, tdm_ctx_error(ctx));
        goto done;
    }
    n_in = tdm_model_input_count(m);
    n_out = tdm_model_output_count(m);
    char names[180];
    for (size_t i = 0; i < a.n_inputs; i++) {
        if (cli_find_input(m, a.inputs[i].name) < 0) {
            cli_list_inputs(m, names, sizeof names);
            cli_error("--input names '%s', which is not an input of the model (its inputs: %s)", a.inputs[i].name,
                      names);
            rc = EXIT_INVALID;
            goto done;
        }
    }
    if ((st = tdm_session_options_create(&so)) != TDM_OK) {
        rc = cli_fail(st, NULL, "out of memory");
        goto done;
    }
    if (a.threads && (st = tdm_session_options_set_threads(so, (int)a.threads)) != TDM_OK) {
        rc = cli_fail(st, NULL, "--threads: the value is not accepted");
        goto done;
    }
    if ((rc = cli_shapes_apply("run", m, a.shapes, a.n_shapes, so)) != 0)
        goto done;
    if ((rc = cli_runopts_apply(&a.ro, so)) != 0 || (rc = cli_adaptopts_apply(&a.ao, so)) != 0 ||
        (rc = cli_binds_apply(&a.ro, m, so)) != 0)
        goto done;
    if ((st = tdm_session_create(ctx, m, so, &s)) != TDM_OK) {
        rc = cli_session_fail(ctx, m, so, st);
        goto done;
    }
    cli_calibration_note(&a.ro, tdm_session_plan(s));

    /* Inputs: from files, or random with --random. */
    ins = calloc(n_in ? n_in : 1, sizeof *ins);
    outs = calloc(n_out ? n_out : 1, sizeof *outs);
    ents = calloc(n_out ? n_out : 1, sizeof *ents);
    if (!ins || !outs || !ents) {
        cli_error("out of memory");
        rc = EXIT_INTERNAL;
        goto done;
    }
    char random_names[160];
    size_t n_random = 0, rn_off = 0, n_missing = 0;
    const char *first_missing = NULL;
    random_names[0] = '\0';
    uint64_t rng = 42;
    for (size_t i = 0; i < n_in; i++) {
        tdm_value_info vi;
        if ((st = tdm_model_input(m, i, &vi)) != TDM_OK) {
            rc = cli_fail(st, NULL, "cannot describe an input of the model");
            goto done;
        }
        const kv *given = NULL;
        for (size_t k = 0; k < a.n_inputs; k++)
            if (strcmp(a.inputs[k].name, vi.name) == 0)
                given = &a.inputs[k];
        if (given) {
            if ((st = tdm_value_load_for(ctx, given->value, &vi, &ins[i])) != TDM_OK) {
                char what[300];
                snprintf(what, sizeof what, "input '%s'", vi.name);
                rc = cli_fail(st, what, tdm_ctx_error(ctx));
                goto done;
            }
            if ((rc = cli_bf16_from_bits(&vi, &ins[i])) != 0)
                goto done;
            continue;
        }
        if (vi.kind == TDM_KIND_NONE || vi.optional)
            continue; /* an optional input left absent */
        if (!a.random) {
            if (!first_missing)
                first_missing = vi.name;
            n_missing++;
            continue;
        }
        if ((rc = make_random(&vi, &a, &rng, &ins[i])) != 0)
            goto done;
        if (rn_off < sizeof random_names) {
            int w = snprintf(random_names + rn_off, sizeof random_names - rn_off, "%s'%s'", n_random ? ", " : "",
                             vi.name);
            if (w > 0)
                rn_off += (size_t)w;
        }
        n_random++;
    }
    if (n_missing) {
        if (n_missing == 1)
            cli_error("input '%s' is missing: give --input %s=FILE, or --random for random values", first_missing,
                      first_missing);
        else
            cli_error("input '%s' and %zu more are missing: give --input NAME=FILE for each, or --random",
                      first_missing, n_missing - 1);
        rc = EXIT_INVALID;
        goto done;
    }
    if (n_random)
        cli_error("using fixed-seed random values for input%s %s (floats uniform in [-1, 1], integers in [0, 10), "
                  "random booleans)",
                  n_random == 1 ? "" : "s", random_names);

    if (a.ro.devices && !(a.ao.has_cache && a.ao.cache > 0) && (rc = plan_for_inputs(ctx, m, so, &a, ins, &s)) != 0)
        goto done;
    if (a.output_dir) {
        if ((rc = name_outputs(m, ents, n_out, a.output_pb)) != 0 || (rc = precheck_outputs(&a, ents, n_out)) != 0)
            goto done;
    }
    if ((rc = diag_flags_begin(&a.diag, s)) != 0)
        goto done;
    if ((st = tdm_session_run(s, (const tdm_tensor *const *)ins, outs)) != TDM_OK) {
        rc = cli_fail(st, NULL, tdm_session_error(s));
        goto done;
    }
    cli_guard_note(s);
    story_placement_note(tdm_session_plan(s));
    if (a.repeat > 1 && (rc = run_repeat(s, &a, ins, outs, n_out)) != 0)
        goto done;
    if ((rc = cli_adaptopts_write(&a.ao, s)) != 0)
        goto done;
    if (a.output_dir && (rc = write_outputs(ctx, &a, m, outs, ents, n_out)) != 0)
        goto done;
    if (a.ledger && (rc = write_ledger(s, a.ledger)) != 0)
        goto done;

    /* One line per output. */
    size_t width = 0;
    for (size_t i = 0; i < n_out; i++) {
        tdm_value_info vi;
        if (tdm_model_output(m, i, &vi) == TDM_OK && strlen(vi.name) > width)
            width = strlen(vi.name);
    }
    for (size_t i = 0; i < n_out; i++) {
        tdm_value_info vi;
        tdm_model_output(m, i, &vi);
        printf("%-*s  ", (int)width, vi.name);
        const tdm_tensor *t = outs[i];
        tdm_kind k = tdm_tensor_kind(t);
        if (k == TDM_KIND_NONE) {
            printf("(absent)");
        } else if (k == TDM_KIND_SEQUENCE && tdm_model_output_map_key(m, i) != TDM_UNDEFINED) {
            size_t len = tdm_sequence_length(t);
            printf("sequence<map<%s,%s>>  %zu map%s", tdm_dtype_name(tdm_model_output_map_key(m, i)),
                   tdm_dtype_name(tdm_tensor_dtype(t)), len, len == 1 ? "" : "s");
        } else if (k == TDM_KIND_SEQUENCE) {
            size_t len = tdm_sequence_length(t);
            printf("sequence<%s>  %zu item%s", tdm_dtype_name(tdm_tensor_dtype(t)), len, len == 1 ? "" : "s");
        } else {
            print_stats(t);
        }
        if (a.output_dir && ents[i].written)
            printf("  -> %s/%s", a.output_dir, ents[i].entry);
        printf("\n");
        for (size_t j = 0; k == TDM_KIND_SEQUENCE && j < tdm_sequence_length(t); j++) {
            const tdm_tensor *it = tdm_sequence_item(t, j);
            printf("%-*s  [%zu] ", (int)width, "", j);
            if (tdm_tensor_kind(it) == TDM_KIND_MAP)
                print_map(it);
            else
                print_stats(it);
            printf("\n");
        }
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("cannot write to standard output");
        rc = EXIT_IO;
    }
    if (!rc)
        rc = diag_flags_end(&a.diag, a.model);
done:
    diag_flags_free(&a.diag, s);
    for (size_t i = 0; ins && i < n_in; i++)
        tdm_tensor_destroy(ins[i]);
    for (size_t i = 0; outs && i < n_out; i++)
        tdm_tensor_destroy(outs[i]);
    for (size_t i = 0; ents && i < n_out; i++) {
        free(ents[i].base);
        free(ents[i].entry);
    }
    free(ins);
    free(outs);
    free(ents);
    tdm_session_destroy(s);
    tdm_session_options_destroy(so);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    run_args_free(&a);
    return rc;
}
