/* tandem calibrate MODEL --devices LIST --out FILE [--input NAME=FILE]...
 *                  [--random] [--shape NAME=DxD]... [--iterations N] [--plugin PATH]... */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void usage_calibrate(FILE *f)
{
    fputs("usage: tandem calibrate MODEL --devices LIST --out FILE [--input NAME=FILE]... [--random]\n"
          "                        [--shape NAME=DxD]... [--iterations N] [--plugin PATH]...\n"
          "\n"
          "Measures, for every node and device, its time (cpu: the median of N runs; vnpu:\n"
          "modeled) and, on every non-cpu device, its error against the cpu fp32 reference on\n"
          "the given inputs: max |diff|, RMSE and cosine, for the node alone and along the\n"
          "chain of nodes the device runs; and the copy cost per copy and per byte. Writes\n"
          "JSON keyed by a node signature (op, attributes, input shapes and types, weights)\n"
          "that survives renamed nodes, with the machine and devices. `tandem run\n"
          "--calibration FILE` then keeps nodes outside the thresholds on cpu (PRECISION).\n"
          "\n"
          "  --devices LIST      the devices to calibrate (cpu is implied last)\n"
          "  --out FILE          the calibration file to write\n"
          "  --input NAME=FILE   a calibration input (.npy or ONNX .pb)\n"
          "  --random            fill inputs not given with fixed-seed random values\n"
          "  --shape NAME=DxD    fix the dynamic dimensions of input NAME\n"
          "  --iterations N      timed runs per node on real devices (default 5; --repeat N\n"
          "                      is the same)\n"
          "  --plugin PATH       load a device plugin\n"
          "A calibration past two seconds shows its progress on stderr when it is a terminal.\n",
          f);
}

int cmd_calibrate(int argc, char **argv)
{
    const char *model = NULL, *out = NULL, *devices = NULL;
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    const char **shapes = calloc((size_t)argc + 1, sizeof *shapes);
    const char **plugins = calloc((size_t)argc + 1, sizeof *plugins);
    size_t n_inputs = 0, n_shapes = 0, n_plugins = 0;
    int random = 0, rc = EXIT_OK;
    long long repeat = 5;
    tdm_ctx *ctx = NULL;
    tdm_model *m = NULL;
    tdm_session_options *so = NULL;
    tdm_tensor **in = NULL;
    char *json = NULL;
    tdm_status st;
    if (!inputs || !shapes || !plugins) {
        cli_error("out of memory");
        rc = EXIT_INTERNAL;
        goto done;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage_calibrate(stdout);
            goto done;
        }
        if (strcmp(a, "--random") == 0) {
            random = 1;
            continue;
        }
        if (strcmp(a, "--devices") == 0)
            slot = &devices;
        else if (strcmp(a, "--out") == 0)
            slot = &out;
        else if (strcmp(a, "--input") == 0)
            slot = &inputs[n_inputs++];
        else if (strcmp(a, "--shape") == 0)
            slot = &shapes[n_shapes++];
        else if (strcmp(a, "--plugin") == 0)
            slot = &plugins[n_plugins++];
        else if (strcmp(a, "--iterations") == 0 || strcmp(a, "--repeat") == 0) {
            if (i + 1 >= argc || cli_parse_i64(argv[i + 1], &repeat) || repeat < 1 || repeat > 1000) {
                cli_error("calibrate: %s expects a number from 1 to 1000", a);
                rc = EXIT_USAGE;
                goto done;
            }
            i++;
            continue;
        } else if (a[0] == '-' && a[1]) {
            cli_error("calibrate: unknown option '%s'; see `tandem calibrate --help`", a);
            rc = EXIT_USAGE;
            goto done;
        } else if (model) {
            cli_error("calibrate: more than one model given ('%s' and '%s')", model, a);
            rc = EXIT_USAGE;
            goto done;
        } else {
            model = a;
            continue;
        }
        if (i + 1 >= argc) {
            cli_error("calibrate: '%s' needs a value", a);
            rc = EXIT_USAGE;
            goto done;
        }
        *slot = argv[++i];
    }
    if (!model || !devices || !out) {
        cli_error("calibrate: a model, --devices and --out are required; see `tandem calibrate --help`");
        rc = EXIT_USAGE;
        goto done;
    }
    if ((st = tdm_ctx_create(&ctx)) != TDM_OK || (st = tdm_session_options_create(&so)) != TDM_OK) {
        rc = cli_fail(st, NULL, "");
        goto done;
    }
    if ((st = tdm_model_load(ctx, model, &m)) != TDM_OK) {
        rc = cli_fail(st, model, tdm_ctx_error(ctx));
        goto done;
    }
    if ((st = tdm_session_options_set_devices(so, devices)) != TDM_OK) {
        rc = cli_fail(st, "--devices", "the list is not accepted");
        goto done;
    }
    for (size_t k = 0; k < n_plugins; k++)
        if ((st = tdm_session_options_add_plugin(so, plugins[k])) != TDM_OK) {
            rc = cli_fail(st, "--plugin", "not accepted");
            goto done;
        }
    size_t nin = tdm_model_input_count(m);
    in = calloc(nin + 1, sizeof *in);
    if (!in) {
        rc = EXIT_INTERNAL;
        goto done;
    }
    uint64_t rng = 42;
    for (size_t k = 0; k < nin; k++) {
        tdm_value_info vi;
        int srank = -1;
        int64_t sdims[CLI_MAX_RANK];
        tdm_model_input(m, k, &vi);
        for (size_t j = 0; j < n_shapes; j++) {
            const char *eq = strrchr(shapes[j], '=');
            if (!eq) {
                cli_error("calibrate: --shape expects NAME=DxD, not '%s'", shapes[j]);
                rc = EXIT_USAGE;
                goto done;
            }
            if ((size_t)(eq - shapes[j]) == strlen(vi.name) && strncmp(shapes[j], vi.name, strlen(vi.name)) == 0 &&
                cli_parse_dims("calibrate", vi.name, eq + 1, &srank, sdims)) {
                rc = EXIT_USAGE;
                goto done;
            }
        }
        for (size_t j = 0; j < n_inputs; j++) {
            const char *eq = strchr(inputs[j], '=');
            if (!eq) {
                cli_error("calibrate: --input expects NAME=FILE, not '%s'", inputs[j]);
                rc = EXIT_USAGE;
                goto done;
            }
            if ((size_t)(eq - inputs[j]) == strlen(vi.name) && strncmp(inputs[j], vi.name, strlen(vi.name)) == 0 &&
                (st = tdm_value_load(ctx, eq + 1, NULL, &in[k])) != TDM_OK) {
                rc = cli_fail(st, eq + 1, tdm_ctx_error(ctx));
                goto done;
            }
        }
        if (!in[k] && random && (rc = cli_random_input(&vi, srank, sdims, "--random", &rng, &in[k])) != 0)
            goto done;
        if (!in[k]) {
            cli_error("calibrate: input '%s' is not given (--input %s=FILE, or --random)", vi.name, vi.name);
            rc = EXIT_USAGE;
            goto done;
        }
        if (tdm_tensor_kind(in[k]) == TDM_KIND_TENSOR &&
            (st = tdm_session_options_set_shape(so, vi.name, tdm_tensor_rank(in[k]), tdm_tensor_dims(in[k]))) != TDM_OK) {
            rc = cli_fail(st, vi.name, "the shape is not accepted");
            goto done;
        }
    }
    cli_progress pr;
    cli_progress_begin(&pr, "calibrate");
    st = tdm_calibrate(ctx, m, so, (const tdm_tensor *const *)in, (int)repeat, cli_progress_fn, &pr, &json);
    cli_progress_end(&pr);
    if (st != TDM_OK) {
        rc = cli_fail(st, "calibrate", tdm_ctx_error(ctx));
        goto done;
    }
    FILE *f = fopen(out, "w");
    if (!f || fputs(json, f) < 0 || fputc('\n', f) == EOF) {
        if (f)
            fclose(f);
        cli_error("calibrate: cannot write %s", out);
        rc = EXIT_IO;
        goto done;
    }
    if (fclose(f)) {
        cli_error("calibrate: cannot write %s", out);
        rc = EXIT_IO;
        goto done;
    }
    fprintf(stderr, "calibrate: wrote %s\n", out);
done:
    for (size_t k = 0; in && m && k < tdm_model_input_count(m); k++)
        tdm_tensor_destroy(in[k]);
    free(in);
    tdm_free(json);
    tdm_session_options_destroy(so);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    free(inputs);
    free(shapes);
    free(plugins);
    return rc;
}
