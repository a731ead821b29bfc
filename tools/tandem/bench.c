/* tandem bench MODEL [--input NAME=FILE]… [--shape NAME=DxD]… [--warmup N]
 *                    [--iterations N] [--threads N] [RUN OPTIONS]
 *                    [--rounds N] [--paced] [--json]
 *
 * Creates one session per shape configuration, runs it --warmup times, then
 * times --iterations runs (times --rounds) of tdm_session_run alone with the
 * monotonic clock. Giving --shape several times for one input sweeps it: one
 * configuration per value, in order. --paced lets a driver (bench/run.sh)
 * interleave rounds with another runtime's: see usage_bench(). */
#define _POSIX_C_SOURCE 200809L

#include "cli.h"
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

typedef cli_kv bench_kv;

typedef struct bench_args {
    const char *model;
    bench_kv *inputs;
    size_t n_inputs;
    bench_kv *shapes;
    size_t n_shapes;
    long long warmup, iterations, rounds, threads;
    const char *threads_arg; /* --threads VALUE, or NULL: TANDEM_THREADS */
    int json, paced;
    cli_runopts ro; /* --devices, --granularity, --fallback, --pin, … */
    cli_adaptopts ao; /* --breaker, --adapt, --plan-cache, --adaptation-json */
    const char *metrics;    /* --metrics FILE: counters of every run (cmd_profile.c) */
    tdm_metrics *metrics_m;
} bench_args;

/* The figures of one configuration. */
typedef struct bench_stats {
    double median, p90, p99, min, max, mean, stddev, throughput;
    size_t n;
} bench_stats;

typedef struct bench_config {
    tdm_tensor **ins;
    bench_stats st;
    int64_t batch; /* dimension 0 of the first (swept) input; 1 when none */
    char emulated[160]; /* the vnpu devices the host emulates ("" when none) */
    double modeled_ms;  /* with them: the plan's modeled estimate, < 0 unknown */
} bench_config;

void usage_bench(FILE *f)
{
    fputs("usage: tandem bench MODEL [--input NAME=FILE]... [--shape NAME=DxDx...]... [--warmup N]\n"
          "                    [--iterations N] [--rounds N] [--threads N] [RUN OPTIONS] [--paced] [--json]\n"
          "\n"
          "Creates a session once, runs it N warm-up times, then times N runs (session run\n"
          "only, monotonic clock) and prints the median, p90, p99, min, mean and max latency,\n"
          "the throughput (runs/s and items/s, an item being one entry of dimension 0) and\n"
          "the peak resident memory of the process.\n"
          "\n"
          "  --input NAME=FILE   the value of input NAME (.npy or ONNX .pb); inputs not given get\n"
          "                      fixed-seed random values (floats uniform in [-1, 1], integers in\n"
          "                      [0, 10), random booleans)\n"
          "  --shape NAME=DxD    fix the dynamic dimensions of input NAME ('?' keeps one). Given\n"
          "                      several times for one input, it sweeps: one session and one\n"
          "                      measurement per value, in order, e.g. --shape x=1x3x224x224\n"
          "                      --shape x=8x3x224x224; inputs swept together take the same count\n"
          "  --warmup N          untimed runs first (default 10)\n"
          "  --iterations N      timed runs per round (default 50, at least 1)\n"
          "  --rounds N          rounds of timed runs (default 1); the figures cover all of them\n"
          "  --threads N         CPU worker threads (0: the default); without it the environment\n"
          "                      variable TANDEM_THREADS is read\n"
          "  --metrics FILE      write the counters of every run (warm-up included) in Prometheus\n"
          "                      text format; the event hook this needs adds a little overhead\n"
          "  --json              print one JSON document on stdout: model, devices, threads,\n"
          "                      warmup, iterations, rounds, shape, median_ms, p90_ms, p99_ms,\n"
          "                      min_ms, mean_ms, max_ms, stddev_ms, throughput_per_s, batch,\n"
          "                      items_per_s, emulated, modeled_ms, device_ms (the device's\n"
          "                      figure: modeled when a vnpu is emulated, else the measured\n"
          "                      median), device_ms_from (modeled|measured), emulation_ms (the\n"
          "                      median when emulated, else null), peak_rss_bytes; with a sweep\n"
          "                      the top level holds the first value and \"sweep\" lists every\n"
          "                      value's figures\n"
          "  --paced             for a driver that alternates runtimes: after the warm-up print\n"
          "                      the line {\"event\": \"ready\"}, then before each round wait for a\n"
          "                      line on stdin and after it print {\"event\": \"round\", \"round\": K,\n"
          "                      \"samples_ms\": [...]} on one line; end of input stops early.\n"
          "                      One shape only.\n"
          "\n"
          "Percentiles are nearest-rank over all timed runs; the median of an even count is\n"
          "the mean of the two middle runs.\n"
          "\n",
          f);
    usage_runopts(f);
    usage_adaptopts(f);
}

/* ---------------------------------------------------------------- options */

static void args_free(bench_args *a)
{
    for (size_t i = 0; i < a->n_inputs; i++)
        free(a->inputs[i].owned);
    for (size_t i = 0; i < a->n_shapes; i++)
        free(a->shapes[i].owned);
    free(a->inputs);
    free(a->shapes);
    cli_runopts_free(&a->ro);
}

static int parse_count(const char *opt, const char *val, long long lo, long long hi, long long *out)
{
    if (cli_parse_i64(val, out) || *out < lo || *out > hi) {
        cli_error("bench: %s expects a number from %lld to %lld, not '%s'", opt, lo, hi, val);
        return EXIT_USAGE;
    }
    return 0;
}

static const char *const later_opts[] = {"--calibration"};

static int parse_args(int argc, char **argv, bench_args *a)
{
    memset(a, 0, sizeof *a);
    a->warmup = 10;
    a->iterations = 50;
    a->rounds = 1;
    cli_runopts_init(&a->ro);
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
            usage_bench(stdout);
            return -1;
        }
        if ((r = cli_opt_value("bench", argc, argv, &i, "--metrics", &val)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
            a->metrics = val;
            if (!a->metrics_m && tdm_metrics_create(&a->metrics_m) != TDM_OK)
                return cli_fail(TDM_E_NOMEM, NULL, "out of memory");
            continue;
        }
        if (strcmp(arg, "--json") == 0) {
            a->json = 1;
            continue;
        }
        if (strcmp(arg, "--paced") == 0) {
            a->paced = 1;
            continue;
        }
        if ((r = cli_opt_value("bench", argc, argv, &i, "--input", &val)) != 0) {
            if (r < 0 || cli_split_kv("bench", "--input", val, &a->inputs[a->n_inputs]))
                return EXIT_USAGE;
            a->n_inputs++;
            continue;
        }
        if ((r = cli_opt_value("bench", argc, argv, &i, "--shape", &val)) != 0) {
            if (r < 0 || cli_split_kv("bench", "--shape", val, &a->shapes[a->n_shapes]))
                return EXIT_USAGE;
            a->n_shapes++;
            continue;
        }
        if ((r = cli_opt_value("bench", argc, argv, &i, "--warmup", &val)) != 0) {
            if (r < 0 || parse_count("--warmup", val, 0, 1000000, &a->warmup))
                return EXIT_USAGE;
            continue;
        }
        if ((r = cli_opt_value("bench", argc, argv, &i, "--iterations", &val)) != 0) {
            if (r < 0 || parse_count("--iterations", val, 1, 1000000, &a->iterations))
                return EXIT_USAGE;
            continue;
        }
        if ((r = cli_opt_value("bench", argc, argv, &i, "--rounds", &val)) != 0) {
            if (r < 0 || parse_count("--rounds", val, 1, 10000, &a->rounds))
                return EXIT_USAGE;
            continue;
        }
        if ((r = cli_opt_value("bench", argc, argv, &i, "--threads", &val)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
            a->threads_arg = val;
            continue;
        }
        if (cli_runopts_parse("bench", argc, argv, &i, &a->ro, &r)) {
            if (r)
                return r;
            continue;
        }
        if (cli_adaptopts_parse("bench", argc, argv, &i, &a->ao, &r)) {
            if (r)
                return r;
            continue;
        }
        for (size_t k = 0; k < sizeof later_opts / sizeof later_opts[0]; k++) {
            size_t l = strlen(later_opts[k]);
            if (strncmp(arg, later_opts[k], l) == 0 && (arg[l] == '\0' || arg[l] == '=')) {
                cli_error("bench: option '%s' is not implemented yet", later_opts[k]);
                return EXIT_USAGE;
            }
        }
        if (arg[0] == '-' && arg[1] != '\0') {
            cli_error("bench: unknown option '%s'; see `tandem bench --help`", arg);
            return EXIT_USAGE;
        }
        if (a->model) {
            cli_error("bench: one MODEL only ('%s' and '%s' given)", a->model, arg);
            return EXIT_USAGE;
        }
        a->model = arg;
    }
    if (!a->model) {
        cli_error("bench: no MODEL given; see `tandem bench --help`");
        return EXIT_USAGE;
    }
    if (cli_kv_unique("bench", "--input", a->inputs, a->n_inputs))
        return EXIT_USAGE;
    return cli_threads("bench", a->threads_arg, &a->threads) ? EXIT_USAGE : 0;
}

/* ------------------------------------------------------------------ sweep */

/* The number of --shape values given for name. */
static size_t shape_count(const bench_args *a, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < a->n_shapes; i++)
        n += strcmp(a->shapes[i].name, name) == 0;
    return n;
}

/* The --shape of name for configuration c: its c-th value, or its only one;
 * NULL when none. */
static const bench_kv *shape_for(const bench_args *a, const char *name, size_t c)
{
    const bench_kv *last = NULL;
    size_t k = 0, n = shape_count(a, name);
    for (size_t i = 0; i < a->n_shapes; i++) {
        if (strcmp(a->shapes[i].name, name) != 0)
            continue;
        last = &a->shapes[i];
        if (n > 1 && k++ == c)
            return last;
    }
    return last;
}

/* The number of configurations: 1, or the count of values of the swept
 * inputs (which must agree). Returns 0 after printing an error. */
static size_t config_count(const bench_args *a)
{
    size_t n = 1;
    const char *first = NULL;
    for (size_t i = 0; i < a->n_shapes; i++) {
        size_t k = shape_count(a, a->shapes[i].name);
        if (k <= 1)
            continue;
        if (n > 1 && k != n) {
            cli_error("bench: --shape sweeps '%s' over %zu values and '%s' over %zu; inputs swept together need "
                      "the same count",
                      first, n, a->shapes[i].name, k);
            return 0;
        }
        n = k;
        first = a->shapes[i].name;
    }
    return n;
}

/* -------------------------------------------------------------- measuring */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Nearest rank: the smallest sample with at least p % of samples at or
 * below it. */
static double percentile(const double *sorted, size_t n, double p)
{
    double r = ceil(p / 100.0 * (double)n);
    size_t k = r < 1 ? 1 : (size_t)r;
    return sorted[(k > n ? n : k) - 1];
}

static void compute_stats(double *s, size_t n, bench_stats *st)
{
    memset(st, 0, sizeof *st);
    st->n = n;
    if (n == 0)
        return;
    qsort(s, n, sizeof *s, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += s[i];
    st->mean = sum / (double)n;
    double var = 0;
    for (size_t i = 0; i < n; i++)
        var += (s[i] - st->mean) * (s[i] - st->mean);
    st->stddev = n > 1 ? sqrt(var / (double)(n - 1)) : 0;
    st->median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    st->p90 = percentile(s, n, 90);
    st->p99 = percentile(s, n, 99);
    st->min = s[0];
    st->max = s[n - 1];
    st->throughput = sum > 0 ? 1e3 * (double)n / sum : 0;
}

/* VmHWM from /proc/self/status, else getrusage's ru_maxrss. */
static unsigned long long peak_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        unsigned long long kb = 0;
        int found = 0;
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "VmHWM:", 6) == 0) {
                found = sscanf(line + 6, "%llu", &kb) == 1;
                break;
            }
        fclose(f);
        if (found)
            return kb * 1024ull;
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0 && ru.ru_maxrss > 0)
        return (unsigned long long)ru.ru_maxrss * 1024ull;
    return 0;
}

static void destroy_outputs(tdm_tensor **outs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        tdm_tensor_destroy(outs[i]);
        outs[i] = NULL;
    }
}

/* One timed run into *ms. */
static int timed_run(tdm_session *s, tdm_tensor *const *ins, tdm_tensor **outs, size_t n_out, double *ms)
{
    double t0 = now_ms();
    tdm_status st = tdm_session_run(s, (const tdm_tensor *const *)ins, outs);
    double t1 = now_ms();
    if (st != TDM_OK)
        return cli_fail(st, NULL, tdm_session_error(s));
    destroy_outputs(outs, n_out);
    *ms = t1 - t0;
    return 0;
}

/* Waits for a line on stdin: 1 when one came, 0 at end of input. */
static int wait_line(void)
{
    int c;
    while ((c = getchar()) != EOF)
        if (c == '\n')
            return 1;
    return 0;
}

/* Runs configuration c's warm-up and rounds; samples has room for
 * iterations × rounds values. */
static int measure(const bench_args *a, tdm_session *s, tdm_tensor *const *ins, tdm_tensor **outs, size_t n_out,
                   double *samples, size_t *n_samples)
{
    double ms;
    int rc;
    cli_progress pr;
    size_t done = 0, total = (size_t)(a->warmup + a->rounds * a->iterations);
    *n_samples = 0;
    cli_progress_begin(&pr, "bench");
    for (long long i = 0; i < a->warmup; i++) {
        if ((rc = timed_run(s, ins, outs, n_out, &ms)) != 0)
            goto end;
        cli_progress_step(&pr, ++done, total, "runs (warm-up)");
    }
    if (a->paced) {
        printf("{\"event\": \"ready\"}\n");
        fflush(stdout);
    }
    for (long long r = 0; r < a->rounds; r++) {
        if (a->paced && !wait_line())
            break;
        size_t first = *n_samples;
        for (long long i = 0; i < a->iterations; i++) {
            if ((rc = timed_run(s, ins, outs, n_out, &ms)) != 0)
                goto end;
            samples[(*n_samples)++] = ms;
            cli_progress_step(&pr, ++done, total, "runs");
        }
        if (a->paced) {
            printf("{\"event\": \"round\", \"round\": %lld, \"samples_ms\": [", r);
            for (size_t i = first; i < *n_samples; i++)
                printf("%s%.6f", i > first ? ", " : "", samples[i]);
            printf("]}\n");
            fflush(stdout);
        }
    }
    rc = 0;
end:
    cli_progress_end(&pr);
    return rc;
}

/* ----------------------------------------------------------------- output */

static void json_stats(jw *w, const bench_stats *st, int64_t batch)
{
    jw_key(w, "median_ms");
    jw_num(w, st->median);
    jw_key(w, "p90_ms");
    jw_num(w, st->p90);
    jw_key(w, "p99_ms");
    jw_num(w, st->p99);
    jw_key(w, "min_ms");
    jw_num(w, st->min);
    jw_key(w, "mean_ms");
    jw_num(w, st->mean);
    jw_key(w, "max_ms");
    jw_num(w, st->max);
    jw_key(w, "stddev_ms");
    jw_num(w, st->stddev);
    jw_key(w, "samples");
    jw_uint(w, st->n);
    jw_key(w, "throughput_per_s");
    jw_num(w, st->throughput);
    jw_key(w, "batch");
    jw_int(w, batch);
    jw_key(w, "items_per_s");
    jw_num(w, st->throughput * (double)batch);
}

static void json_shape(jw *w, const tdm_model *m, tdm_tensor *const *ins)
{
    jw_obj_begin(w);
    for (size_t i = 0; i < tdm_model_input_count(m); i++) {
        tdm_value_info vi;
        if (tdm_model_input(m, i, &vi) != TDM_OK || !ins[i] || tdm_tensor_kind(ins[i]) != TDM_KIND_TENSOR)
            continue;
        jw_key(w, vi.name);
        jw_arr_begin_inline(w);
        const int64_t *dims = tdm_tensor_dims(ins[i]);
        for (int d = 0; d < tdm_tensor_rank(ins[i]); d++)
            jw_int(w, dims[d]);
        jw_arr_end(w);
    }
    jw_obj_end(w);
}

static void json_devices(jw *w, const char *list)
{
    int has_cpu = 0;
    jw_arr_begin_inline(w);
    if (!list || !*list) {
        jw_str(w, "cpu");
    } else {
        const char *p = list;
        for (;;) {
            const char *c = strchr(p, ',');
            size_t l = c ? (size_t)(c - p) : strlen(p);
            char buf[256];
            snprintf(buf, sizeof buf, "%.*s", (int)(l < sizeof buf ? l : sizeof buf - 1), p);
            jw_str(w, buf);
            if (strcmp(buf, "cpu") == 0)
                has_cpu = 1;
            if (!c)
                break;
            p = c + 1;
        }
        if (!has_cpu)
            jw_str(w, "cpu"); /* implied last */
    }
    jw_arr_end(w);
}

/* "emulated": the vnpu devices whose times are this host emulating them
 * (the figures above are not theirs), "modeled_ms": the plan's estimate;
 * both figures by name: "device_ms" the device's (modeled when emulated,
 * else the measured median; "device_ms_from" says which) and
 * "emulation_ms" the host's emulation (the median; null when nothing is
 * emulated). */
static void json_emulated(jw *w, const bench_config *c)
{
    int emu = c->emulated[0] != '\0';
    jw_key(w, "emulated");
    jw_bool(w, emu);
    jw_key(w, "modeled_ms");
    if (emu && c->modeled_ms >= 0)
        jw_num(w, c->modeled_ms);
    else
        jw_null(w);
    jw_key(w, "device_ms");
    if (!emu)
        jw_num(w, c->st.median);
    else if (c->modeled_ms >= 0)
        jw_num(w, c->modeled_ms);
    else
        jw_null(w);
    jw_key(w, "device_ms_from");
    jw_str(w, emu ? "modeled" : "measured");
    jw_key(w, "emulation_ms");
    if (emu)
        jw_num(w, c->st.median);
    else
        jw_null(w);
}

static void print_json(const bench_args *a, const tdm_model *m, const bench_config *cf, size_t n_cf,
                       unsigned long long rss)
{
    jw w;
    jw_init(&w, stdout);
    jw_obj_begin(&w);
    jw_key(&w, "model");
    jw_str(&w, a->model);
    jw_key(&w, "devices");
    json_devices(&w, a->ro.devices);
    jw_key(&w, "threads");
    jw_int(&w, a->threads);
    jw_key(&w, "warmup");
    jw_int(&w, a->warmup);
    jw_key(&w, "iterations");
    jw_int(&w, a->iterations);
    jw_key(&w, "rounds");
    jw_int(&w, a->rounds);
    jw_key(&w, "shape");
    json_shape(&w, m, cf[0].ins);
    json_stats(&w, &cf[0].st, cf[0].batch);
    json_emulated(&w, &cf[0]);
    jw_key(&w, "peak_rss_bytes");
    jw_uint(&w, rss);
    if (n_cf > 1) {
        jw_key(&w, "sweep");
        jw_arr_begin(&w);
        for (size_t c = 0; c < n_cf; c++) {
            jw_obj_begin(&w);
            jw_key(&w, "shape");
            json_shape(&w, m, cf[c].ins);
            json_stats(&w, &cf[c].st, cf[c].batch);
            json_emulated(&w, &cf[c]);
            jw_obj_end(&w);
        }
        jw_arr_end(&w);
    }
    jw_obj_end(&w);
    jw_finish(&w);
}

/* "x=1x3x224x224 y=2" for configuration cf; into buf. */
static const char *shape_line(const tdm_model *m, tdm_tensor *const *ins, char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < tdm_model_input_count(m) && off < size; i++) {
        tdm_value_info vi;
        char sb[256];
        if (tdm_model_input(m, i, &vi) != TDM_OK || !ins[i] || tdm_tensor_kind(ins[i]) != TDM_KIND_TENSOR)
            continue;
        int w = snprintf(buf + off, size - off, "%s%s=%s", off ? " " : "", vi.name,
                         cli_shape_str(tdm_tensor_rank(ins[i]), tdm_tensor_dims(ins[i]), sb, sizeof sb));
        if (w < 0)
            break;
        off += (size_t)w;
    }
    return buf;
}

static void print_text(const bench_args *a, const tdm_model *m, const bench_config *cf, size_t n_cf,
                       unsigned long long rss)
{
    char buf[1024];
    printf("model       %s\n", a->model);
    if (a->ro.devices && *a->ro.devices)
        printf("devices     %s%s\n", a->ro.devices, strstr(a->ro.devices, "cpu") ? "" : ",cpu");
    else
        printf("devices     cpu\n");
    if (a->threads)
        printf("threads     %lld\n", a->threads);
    else
        printf("threads     default\n");
    printf("runs        %lld warm-up, %lld timed x %lld round%s\n", a->warmup, a->iterations, a->rounds,
           a->rounds == 1 ? "" : "s");
    if (n_cf == 1) {
        const bench_stats *s = &cf[0].st;
        printf("inputs      %s\n", shape_line(m, cf[0].ins, buf, sizeof buf));
        printf("latency ms  median %.3f  p90 %.3f  p99 %.3f  min %.3f  mean %.3f  max %.3f%s\n", s->median, s->p90,
               s->p99, s->min, s->mean, s->max, cf[0].emulated[0] ? "  (emulated)" : "");
        if (cf[0].emulated[0]) {
            if (cf[0].modeled_ms >= 0)
                printf("modeled ms  %.3f  (the device's figure: the plan's estimate, %s modeled)\n", cf[0].modeled_ms,
                       cf[0].emulated);
            else
                printf("modeled ms  unknown (a node of the plan has no estimate)\n");
            printf("emulated    on this host's cpu: %s; the latency above is the emulation's, not the device's "
                   "speed\n",
                   cf[0].emulated);
        }
        printf("throughput  %.2f runs/s", s->throughput);
        if (cf[0].batch != 1)
            printf("  %.2f items/s (batch %lld)", s->throughput * (double)cf[0].batch, (long long)cf[0].batch);
        printf("\n");
    } else {
        size_t width = 6;
        for (size_t c = 0; c < n_cf; c++) {
            size_t l = strlen(shape_line(m, cf[c].ins, buf, sizeof buf));
            width = l > width ? l : width;
        }
        int emu = 0;
        for (size_t c = 0; c < n_cf; c++)
            emu |= cf[c].emulated[0] != '\0';
        printf("\n%-*s  %10s  %10s  %10s  %10s  %10s  %11s%s\n", (int)width, "inputs", "median ms", "p90 ms",
               "p99 ms", "min ms", "runs/s", "items/s", emu ? "  modeled ms" : "");
        for (size_t c = 0; c < n_cf; c++) {
            const bench_stats *s = &cf[c].st;
            printf("%-*s  %10.3f  %10.3f  %10.3f  %10.3f  %10.2f  %11.2f", (int)width,
                   shape_line(m, cf[c].ins, buf, sizeof buf), s->median, s->p90, s->p99, s->min, s->throughput,
                   s->throughput * (double)cf[c].batch);
            if (cf[c].emulated[0] && cf[c].modeled_ms >= 0)
                printf("  %10.3f", cf[c].modeled_ms);
            else if (emu)
                printf("  %10s", cf[c].emulated[0] ? "unknown" : "-");
            printf("\n");
        }
        if (emu)
            printf("(emulated on this host's cpu: %s; the measured times are the emulation's, 'modeled ms' is "
                   "the plan's estimate for the device)\n",
                   cf[0].emulated[0] ? cf[0].emulated : "vnpu");
        printf("\n");
    }
    printf("peak RSS    %.1f MiB\n", (double)rss / (1024.0 * 1024.0));
}

/* ------------------------------------------------------------------ bench */

static int find_input(const tdm_model *m, const char *name)
{
    for (size_t i = 0; i < tdm_model_input_count(m); i++) {
        tdm_value_info vi;
        if (tdm_model_input(m, i, &vi) == TDM_OK && strcmp(vi.name, name) == 0)
            return (int)i;
    }
    return -1;
}

/* Session options for configuration c. */
static int make_options(const bench_args *a, const tdm_model *m, size_t c, tdm_session_options **out)
{
    tdm_session_options *so = NULL;
    tdm_status st;
    int rc = 0;
    *out = NULL;
    if ((st = tdm_session_options_create(&so)) != TDM_OK)
        return cli_fail(st, NULL, "out of memory");
    if (a->threads && (st = tdm_session_options_set_threads(so, (int)a->threads)) != TDM_OK) {
        rc = cli_fail(st, NULL, "--threads: the value is not accepted");
        goto fail;
    }
    if ((rc = cli_runopts_apply(&a->ro, so)) != 0 || (rc = cli_adaptopts_apply(&a->ao, so)) != 0)
        goto fail;
    for (size_t i = 0; i < tdm_model_input_count(m); i++) {
        tdm_value_info vi;
        if (tdm_model_input(m, i, &vi) != TDM_OK)
            continue;
        const bench_kv *kv = shape_for(a, vi.name, c);
        if (!kv)
            continue;
        int rank;
        int64_t dims[CLI_MAX_RANK];
        if (cli_parse_dims("bench", kv->name, kv->value, &rank, dims)) {
            rc = EXIT_USAGE;
            goto fail;
        }
        if ((st = tdm_session_options_set_shape(so, kv->name, rank, dims)) != TDM_OK) {
            char msg[256];
            snprintf(msg, sizeof msg, "--shape %s=%s is not accepted (%s)", kv->name, kv->value, tdm_status_str(st));
            rc = cli_fail(st == TDM_E_USAGE ? TDM_E_INPUT : st, NULL, msg);
            goto fail;
        }
    }
    *out = so;
    return 0;
fail:
    tdm_session_options_destroy(so);
    return rc;
}

/* Inputs of configuration c: the files loaded once (borrowed from files[]),
 * random values for the others. *n_random counts those made. */
static int make_inputs(const bench_args *a, const tdm_model *m, size_t c, tdm_tensor *const *files, tdm_tensor **ins,
                       char *random_names, size_t rn_size, size_t *n_random)
{
    uint64_t rng = 42;
    size_t rn_off = strlen(random_names);
    for (size_t i = 0; i < tdm_model_input_count(m); i++) {
        tdm_value_info vi;
        tdm_status st = tdm_model_input(m, i, &vi);
        if (st != TDM_OK)
            return cli_fail(st, NULL, "cannot describe an input of the model");
        if (files[i]) {
            ins[i] = files[i];
            continue;
        }
        if (vi.kind == TDM_KIND_NONE)
            continue; /* an optional input left absent */
        const bench_kv *kv = shape_for(a, vi.name, c);
        int rank = -1;
        int64_t dims[CLI_MAX_RANK];
        if (kv && cli_parse_dims("bench", kv->name, kv->value, &rank, dims))
            return EXIT_USAGE;
        int rc = cli_random_input(&vi, rank, dims, "the random fill", &rng, &ins[i]);
        if (rc)
            return rc;
        if (c == 0 && rn_off < rn_size) {
            int w = snprintf(random_names + rn_off, rn_size - rn_off, "%s'%s'", *n_random ? ", " : "", vi.name);
            if (w > 0)
                rn_off += (size_t)w;
        }
        if (c == 0)
            (*n_random)++;
    }
    return 0;
}

/* Dimension 0 of the first swept input, else of the first tensor input. */
static int64_t batch_of(const bench_args *a, const tdm_model *m, tdm_tensor *const *ins)
{
    int pick = -1;
    for (size_t i = 0; i < tdm_model_input_count(m) && pick < 0; i++) {
        tdm_value_info vi;
        if (tdm_model_input(m, i, &vi) == TDM_OK && ins[i] && shape_count(a, vi.name) > 1)
            pick = (int)i;
    }
    for (size_t i = 0; i < tdm_model_input_count(m) && pick < 0; i++)
        if (ins[i] && tdm_tensor_kind(ins[i]) == TDM_KIND_TENSOR)
            pick = (int)i;
    if (pick < 0 || tdm_tensor_kind(ins[pick]) != TDM_KIND_TENSOR || tdm_tensor_rank(ins[pick]) < 1)
        return 1;
    return tdm_tensor_dims(ins[pick])[0];
}

int cmd_bench(int argc, char **argv)
{
    bench_args a;
    tdm_ctx *ctx = NULL;
    tdm_model *m = NULL;
    tdm_session_options *so = NULL;
    tdm_session *s = NULL;
    tdm_tensor **files = NULL, **outs = NULL;
    bench_config *cf = NULL;
    double *samples = NULL;
    size_t n_in = 0, n_out = 0, n_cf = 0;
    tdm_status st;
    int rc = parse_args(argc, argv, &a);
    if (rc < 0) {
        rc = EXIT_OK; /* --help */
        goto done;
    }
    if (rc)
        goto done;
    if ((n_cf = config_count(&a)) == 0) {
        rc = EXIT_USAGE;
        goto done;
    }
    if (a.paced && n_cf > 1) {
        cli_error("bench: --paced takes one shape per input, not a sweep");
        rc = EXIT_USAGE;
        goto done;
    }
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
    for (size_t i = 0; i < a.n_inputs + a.n_shapes; i++) {
        const bench_kv *kv = i < a.n_inputs ? &a.inputs[i] : &a.shapes[i - a.n_inputs];
        if (find_input(m, kv->name) < 0) {
            cli_error("%s names '%s', which is not an input of the model", i < a.n_inputs ? "--input" : "--shape",
                      kv->name);
            rc = EXIT_INVALID;
            goto done;
        }
    }
    for (size_t i = 0; i < a.n_inputs; i++)
        if (shape_count(&a, a.inputs[i].name) > 1) {
            cli_error("bench: input '%s' comes from a file, so --shape cannot sweep it; drop --input %s to sweep "
                      "random values",
                      a.inputs[i].name, a.inputs[i].name);
            rc = EXIT_USAGE;
            goto done;
        }
    if (a.iterations * a.rounds > 10000000) {
        cli_error("bench: --iterations times --rounds is %lld; at most 10000000 timed runs are kept",
                  a.iterations * a.rounds);
        rc = EXIT_USAGE;
        goto done;
    }
    size_t n_samples_max = (size_t)a.iterations * (size_t)a.rounds;
    files = calloc(n_in ? n_in : 1, sizeof *files);
    outs = calloc(n_out ? n_out : 1, sizeof *outs);
    cf = calloc(n_cf, sizeof *cf);
    samples = calloc(n_samples_max, sizeof *samples);
    if (!files || !outs || !cf || !samples) {
        cli_error("out of memory");
        rc = EXIT_INTERNAL;
        goto done;
    }
    for (size_t c = 0; c < n_cf; c++) {
        cf[c].ins = calloc(n_in ? n_in : 1, sizeof *cf[c].ins);
        if (!cf[c].ins) {
            cli_error("out of memory");
            rc = EXIT_INTERNAL;
            goto done;
        }
    }
    for (size_t k = 0; k < a.n_inputs; k++) {
        int i = find_input(m, a.inputs[k].name);
        tdm_value_info vi;
        tdm_model_input(m, (size_t)i, &vi);
        if ((st = tdm_value_load_for(ctx, a.inputs[k].value, &vi, &files[i])) != TDM_OK) {
            char what[300];
            snprintf(what, sizeof what, "input '%s'", vi.name);
            rc = cli_fail(st, what, tdm_ctx_error(ctx));
            goto done;
        }
    }

    char random_names[160] = "";
    size_t n_random = 0;
    for (size_t c = 0; c < n_cf; c++) {
        if ((rc = make_options(&a, m, c, &so)) != 0)
            goto done;
        if ((st = tdm_session_create(ctx, m, so, &s)) != TDM_OK) {
            rc = cli_session_fail(ctx, m, so, st);
            goto done;
        }
        if (c == 0)
            cli_calibration_note(&a.ro, tdm_session_plan(s));
        cli_emulated(tdm_session_plan(s), cf[c].emulated, sizeof cf[c].emulated, &cf[c].modeled_ms);
        if (a.metrics_m)
            tdm_session_set_observer(s, tdm_metrics_observe, a.metrics_m);
        if ((rc = make_inputs(&a, m, c, files, cf[c].ins, random_names, sizeof random_names, &n_random)) != 0)
            goto done;
        if (c == 0 && n_random)
            cli_error("using fixed-seed random values for input%s %s (floats uniform in [-1, 1], integers in "
                      "[0, 10), random booleans)",
                      n_random == 1 ? "" : "s", random_names);
        size_t n_samples;
        if ((rc = measure(&a, s, cf[c].ins, outs, n_out, samples, &n_samples)) != 0)
            goto done;
        compute_stats(samples, n_samples, &cf[c].st);
        cf[c].batch = batch_of(&a, m, cf[c].ins);
        if ((rc = cli_adaptopts_write(&a.ao, s)) != 0)
            goto done;
        tdm_session_destroy(s);
        s = NULL;
        tdm_session_options_destroy(so);
        so = NULL;
    }
    unsigned long long rss = peak_rss_bytes();
    if (a.json)
        print_json(&a, m, cf, n_cf, rss);
    else
        print_text(&a, m, cf, n_cf, rss);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("cannot write to standard output");
        rc = EXIT_IO;
    }
    if (!rc && a.metrics)
        rc = diag_write_metrics(a.metrics_m, a.metrics);
done:
    tdm_metrics_destroy(a.metrics_m);
    destroy_outputs(outs, outs ? n_out : 0);
    for (size_t c = 0; cf && c < n_cf; c++) {
        for (size_t i = 0; cf[c].ins && i < n_in; i++)
            if (!files || cf[c].ins[i] != files[i])
                tdm_tensor_destroy(cf[c].ins[i]);
        free(cf[c].ins);
    }
    for (size_t i = 0; files && i < n_in; i++)
        tdm_tensor_destroy(files[i]);
    free(files);
    free(outs);
    free(cf);
    free(samples);
    tdm_session_destroy(s);
    tdm_session_options_destroy(so);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    args_free(&a);
    return rc;
}
