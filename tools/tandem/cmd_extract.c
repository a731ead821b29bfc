/* `tandem extract`: a minimal reproduction of one node — a one-node ONNX
 * model with the node's attributes, shapes and dtypes, the real input
 * tensors it received in a run (captured by the session observer) as
 * input_N.pb, the outputs the plan produced as output_N.pb, and README.txt
 * stating the device, the reason and the commands that reproduce it. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void usage_extract(FILE *f)
{
    fputs("usage: tandem extract MODEL --node NAME --out DIR [--input NAME=FILE]... [--shape NAME=DxD]...\n"
          "                      [--threads N] [RUN OPTIONS]\n"
          "\n"
          "Runs the model once (inputs not given are fixed-seed random) and writes into DIR\n"
          "(created if missing) a minimal reproduction of node NAME: model.onnx, a one-node\n"
          "ONNX model with the node's exact attributes, shapes and element types (its\n"
          "constant inputs inside); input_N.pb, the real tensors the node received in the run\n"
          "(ONNX TensorProto, in the order of the model's graph inputs); output_N.pb, what it\n"
          "produced on its device; and README.txt: the device, the reason of the placement\n"
          "(why it fell back) and the commands that reproduce it. Existing files are replaced.\n"
          "--output-dir DIR is the same as --out DIR (run's spelling).\n"
          "\n",
          f);
    usage_runopts(f);
}

typedef struct grab {
    size_t node;
    int seen, oom;
    int n_in, n_out;
    tdm_tensor **in, **out;
} grab;

static tdm_tensor **clone_all(const tdm_tensor *const *src, int n, int *oom)
{
    tdm_tensor **d = calloc((size_t)n + 1, sizeof *d);
    if (!d) {
        *oom = 1;
        return NULL;
    }
    for (int k = 0; src && k < n; k++)
        if (src[k] && tdm_tensor_clone(src[k], &d[k]) != TDM_OK)
            *oom = 1;
    return d;
}

static void grab_observe(void *user, const tdm_event *ev)
{
    grab *g = user;
    if (ev->kind != TDM_EVENT_NODE || ev->node_index != g->node || g->seen)
        return;
    g->seen = 1;
    g->n_in = ev->n_inputs;
    g->n_out = ev->n_outputs;
    g->in = clone_all(ev->inputs, ev->n_inputs, &g->oom);
    g->out = clone_all(ev->outputs, ev->n_outputs, &g->oom);
}

static void grab_free(grab *g)
{
    for (int k = 0; g->in && k < g->n_in; k++)
        tdm_tensor_destroy(g->in[k]);
    for (int k = 0; g->out && k < g->n_out; k++)
        tdm_tensor_destroy(g->out[k]);
    free(g->in);
    free(g->out);
}

static int write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        cli_error("extract: cannot write '%s': %s", path, strerror(errno));
        return EXIT_IO;
    }
    int bad = size && fwrite(data, 1, size, f) != size;
    bad |= fclose(f) != 0;
    if (bad) {
        cli_error("extract: cannot write '%s'", path);
        return EXIT_IO;
    }
    return 0;
}

static int write_pb(const char *dir, const char *stem, int k, const tdm_tensor *t, const char *name, char *path,
                    size_t size)
{
    void *bytes = NULL;
    size_t n = 0;
    snprintf(path, size, "%s/%s_%d.pb", dir, stem, k);
    tdm_status st = tdm_tensor_to_proto(t, name, &bytes, &n);
    if (st)
        return cli_fail(st, NULL, "extract: a captured value cannot be written as a TensorProto");
    int rc = write_file(path, bytes, n);
    tdm_free(bytes);
    return rc;
}

int cmd_extract(int argc, char **argv)
{
    diag_common c;
    diag_common_init(&c);
    diag_setup x;
    memset(&x, 0, sizeof x);
    grab g;
    memset(&g, 0, sizeof g);
    const char *node = NULL, *out = NULL, *val;
    void *model = NULL;
    size_t model_size = 0;
    FILE *rd = NULL;
    char path[4096];
    int rc = 0, r;
    for (int i = 1; i < argc && !rc; i++) {
        if ((r = cli_opt_value("extract", argc, argv, &i, "--node", &val)) != 0) {
            node = val;
            rc = r < 0 ? EXIT_USAGE : 0;
        } else if ((r = cli_opt_value("extract", argc, argv, &i, "--output-dir", &val)) != 0 ||
                   (r = cli_opt_value("extract", argc, argv, &i, "--out", &val)) != 0) {
            out = val;
            rc = r < 0 ? EXIT_USAGE : 0;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage_extract(stdout);
            diag_common_free(&c);
            return 0;
        } else if (diag_common_opt("extract", argc, argv, &i, &c, &rc)) {
            continue;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("extract: unknown option '%s'; `tandem extract --help` lists the options", argv[i]);
            rc = EXIT_USAGE;
        } else if (!c.model) {
            c.model = argv[i];
        } else {
            cli_error("extract: one model only ('%s' and '%s')", c.model, argv[i]);
            rc = EXIT_USAGE;
        }
    }
    if (!rc && (!c.model || !node || !*node || !out || !*out)) {
        cli_error("extract: %s; usage: tandem extract MODEL --node NAME --out DIR",
                  !c.model ? "no model given" : !node || !*node ? "--node NAME is required" : "--out DIR is required");
        rc = EXIT_USAGE;
    }
    if (rc || (rc = diag_open("extract", &c, &x)) != 0)
        goto done;
    const tdm_plan *plan = tdm_session_plan(x.s);
    size_t nn = tdm_plan_node_count(plan), idx;
    const char *name = "", *op = "", *dev = "", *reason = "", *detail = "";
    for (idx = 0; idx < nn; idx++)
        if (tdm_plan_node(plan, idx, &name, &op, &dev, &reason, &detail) == TDM_OK && strcmp(name, node) == 0)
            break;
    if (idx == nn) {
        cli_error("extract: the model has no node named '%s'; `tandem plan %s --json` lists the nodes", node, c.model);
        rc = EXIT_USAGE;
        goto done;
    }
    g.node = idx;
    tdm_session_set_observer(x.s, grab_observe, &g);
    rc = diag_run(&x, x.s);
    tdm_session_set_observer(x.s, NULL, NULL);
    if (rc)
        goto done;
    if (g.oom || !g.seen) {
        rc = cli_fail(g.oom ? TDM_E_NOMEM : TDM_E_INTERNAL, NULL,
                      g.oom ? "out of memory" : "extract: the node did not run");
        goto done;
    }
    tdm_status st = tdm_plan_extract_node(x.ctx, plan, idx, (const tdm_tensor *const *)g.in, &model, &model_size);
    if (st) {
        rc = cli_fail(st, NULL, tdm_ctx_error(x.ctx));
        goto done;
    }
    if (mkdir(out, 0777) != 0 && errno != EEXIST) {
        cli_error("extract: cannot create '%s': %s", out, strerror(errno));
        rc = EXIT_IO;
        goto done;
    }
    snprintf(path, sizeof path, "%s/model.onnx", out);
    if ((rc = write_file(path, model, model_size)) != 0)
        goto done;
    /* inputs: the non-constant ones, in the order of the model's graph inputs */
    char cmd_inputs[4096] = "";
    size_t ci = 0;
    int n_pb = 0;
    for (int k = 0; k < g.n_in; k++) {
        const char *in = tdm_plan_node_input(plan, idx, (size_t)k);
        int dup = 0;
        for (int j = 0; j < k; j++)
            dup |= strcmp(tdm_plan_node_input(plan, idx, (size_t)j), in) == 0;
        if (!in || !*in || dup || tdm_plan_node_input_is_constant(plan, idx, (size_t)k))
            continue;
        if (!g.in[k]) {
            cli_error("extract: input '%s' of node %s is not visible on the host (it stays on device %s)", in, node,
                      dev);
            rc = EXIT_DEVICE;
            goto done;
        }
        if ((rc = write_pb(out, "input", n_pb, g.in[k], in, path, sizeof path)) != 0)
            goto done;
        int w = snprintf(cmd_inputs + ci, sizeof cmd_inputs - ci, " --input '%s=%s'", in, path);
        if (w > 0 && (size_t)w < sizeof cmd_inputs - ci)
            ci += (size_t)w;
        n_pb++;
    }
    for (int k = 0, n_out = 0; k < g.n_out; k++) {
        const char *o = tdm_plan_node_output(plan, idx, (size_t)k);
        if (!o || !*o || !g.out[k])
            continue;
        if ((rc = write_pb(out, "output", n_out++, g.out[k], o, path, sizeof path)) != 0)
            goto done;
    }
    snprintf(path, sizeof path, "%s/README.txt", out);
    if (!(rd = fopen(path, "w"))) {
        cli_error("extract: cannot write '%s': %s", path, strerror(errno));
        rc = EXIT_IO;
        goto done;
    }
    char devs[1024] = "";
    size_t dl = 0;
    for (size_t d = 0; d < tdm_plan_device_count(plan); d++) {
        int w = snprintf(devs + dl, sizeof devs - dl, "%s%s", d ? "," : "", tdm_plan_device_name(plan, d));
        if (w > 0 && (size_t)w < sizeof devs - dl)
            dl += (size_t)w;
    }
    fprintf(rd, "tandem extract: a minimal reproduction of one node\n\n");
    fprintf(rd, "model:    %s\nnode:     %s\nop:       %s\n", c.model, name, op);
    fprintf(rd, "device:   %s (devices in priority order: %s)\n", dev, devs);
    fprintf(rd, "reason:   %s%s%s\n", reason, *detail ? ": " : "", detail);
    if (strcmp(dev, tdm_plan_device_name(plan, 0)) != 0)
        fprintf(rd, "          it fell back from %s to %s for that reason\n", tdm_plan_device_name(plan, 0), dev);
    fprintf(rd, "\nfiles:\n  model.onnx    the node alone, with its attributes, shapes, element types and constant inputs\n");
    for (int k = 0, n = 0; k < g.n_in; k++) {
        const char *in = tdm_plan_node_input(plan, idx, (size_t)k);
        int dup = 0;
        for (int j = 0; j < k; j++)
            dup |= strcmp(tdm_plan_node_input(plan, idx, (size_t)j), in) == 0;
        if (!in || !*in || dup || tdm_plan_node_input_is_constant(plan, idx, (size_t)k) || !g.in[k])
            continue;
        char sh[256];
        fprintf(rd, "  input_%d.pb    '%s': %s %s, captured in the run\n", n++, in, tdm_dtype_name(tdm_tensor_dtype(g.in[k])),
                cli_shape_str(tdm_tensor_rank(g.in[k]), tdm_tensor_dims(g.in[k]), sh, sizeof sh));
    }
    for (int k = 0, n = 0; k < g.n_out; k++) {
        const char *o = tdm_plan_node_output(plan, idx, (size_t)k);
        if (!o || !*o || !g.out[k])
            continue;
        char sh[256];
        fprintf(rd, "  output_%d.pb   '%s': %s %s, as %s produced it\n", n++, o, tdm_dtype_name(tdm_tensor_dtype(g.out[k])),
                cli_shape_str(tdm_tensor_rank(g.out[k]), tdm_tensor_dims(g.out[k]), sh, sizeof sh), dev);
    }
    fprintf(rd, "\nreproduce:\n  tandem plan '%s/model.onnx' --devices %s\n", out, devs);
    fprintf(rd, "  tandem run '%s/model.onnx'%s --devices %s\n", out, cmd_inputs, devs);
    fprintf(rd, "  tandem compare '%s/model.onnx'%s --devices %s\n", out, cmd_inputs, devs);
    int bad = ferror(rd);
    bad |= fclose(rd) != 0;
    rd = NULL;
    if (bad) {
        cli_error("extract: cannot write '%s'", path);
        rc = EXIT_IO;
        goto done;
    }
    printf("node %s (%s on %s, %s) extracted to %s: model.onnx, %d input file%s, README.txt\n", name, op, dev, reason,
           out, n_pb, n_pb == 1 ? "" : "s");
done:
    if (rd)
        fclose(rd);
    tdm_free(model);
    grab_free(&g);
    diag_close(&x);
    diag_common_free(&c);
    return rc;
}
