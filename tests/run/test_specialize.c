/* Shape specialisation works on the model in memory (issue 14 item 3): a
 * session with --shape never reads the model file again.
 *
 *   test_specialize MODEL.onnx X.npy   (PP-OCRv4 det: input x is [?, 3, ?, ?];
 *                                       X the rendered page of the model tests)
 *
 * 1. The model is loaded from a temporary copy, the copy is deleted, and a
 *    session with x fixed to the page's size is still created: before, the
 *    session re-read the file and failed here.
 * 2. The same from memory (tdm_model_load_memory): no file at all.
 * 3. Specialisation matters: on vnpu:rk3588 (static shapes only) the
 *    unspecialised plan sends nodes to cpu for SHAPE_UNSUPPORTED, the
 *    specialised plans send none, and both specialised plans are the same
 *    node for node.
 * 4. The model is not changed: its input is still dynamic after the
 *    sessions, and a second specialisation to another size works.
 * 5. The specialised cpu session's output equals the unspecialised one's on
 *    the rendered page (a probability map with text on it, not noise).
 * 6. tdm_model_specialize gives the specialised model itself: input and
 *    output shapes fixed, FLOPs known; no shapes gives NULL; a name that is
 *    not an input is TDM_E_INPUT naming it.
 * Public API only. */
#define _POSIX_C_SOURCE 200809L
#include <tandem/tandem.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                       \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
            failures++;                                                                                                \
        }                                                                                                              \
    } while (0)

static unsigned char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = n > 0 ? malloc((size_t)n) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *size = b ? (size_t)n : 0;
    return b;
}

static tdm_session_options *options(const char *devices, int64_t h, int64_t w)
{
    tdm_session_options *o = NULL;
    if (tdm_session_options_create(&o) != TDM_OK)
        return NULL;
    if (tdm_session_options_set_devices(o, devices) != TDM_OK) {
        tdm_session_options_destroy(o);
        return NULL;
    }
    if (h > 0) {
        int64_t dims[4] = {1, 3, h, w};
        if (tdm_session_options_set_shape(o, "x", 4, dims) != TDM_OK) {
            tdm_session_options_destroy(o);
            return NULL;
        }
    }
    return o;
}

/* Nodes of the plan with reason `reason`. */
static size_t count_reason(const tdm_plan *p, const char *reason)
{
    size_t n = 0;
    for (size_t i = 0; i < tdm_plan_node_count(p); i++) {
        const char *r = NULL;
        if (tdm_plan_node(p, i, NULL, NULL, NULL, &r, NULL) == TDM_OK && strcmp(r, reason) == 0)
            n++;
    }
    return n;
}

static tdm_plan *plan_of(tdm_ctx *ctx, const tdm_model *m, const char *devices, int64_t h, int64_t w)
{
    tdm_session_options *o = options(devices, h, w);
    tdm_plan *p = NULL;
    tdm_status st = o ? tdm_plan_create(ctx, m, o, &p) : TDM_E_USAGE;
    CHECK(st == TDM_OK, "plan on %s at %lldx%lld: %s", devices, (long long)h, (long long)w, tdm_ctx_error(ctx));
    tdm_session_options_destroy(o);
    return st == TDM_OK ? p : NULL;
}

static int input_dynamic(const tdm_model *m)
{
    tdm_value_info vi;
    if (tdm_model_input(m, 0, &vi) != TDM_OK || vi.rank != 4)
        return 0;
    return vi.dims[2].value < 0 && vi.dims[3].value < 0;
}

/* The first output of a cpu session on x (1x3xHxW), or NULL. */
static tdm_tensor *run_cpu(tdm_ctx *ctx, const tdm_model *m, int64_t h, int64_t w, int specialise, const tdm_tensor *x)
{
    tdm_session_options *o = options("cpu", specialise ? h : 0, w);
    tdm_session *s = NULL;
    tdm_tensor *out[8] = {0};
    if (!o || tdm_session_create(ctx, m, o, &s) != TDM_OK) {
        CHECK(0, "cpu session (specialised %d): %s", specialise, tdm_ctx_error(ctx));
        tdm_session_options_destroy(o);
        return NULL;
    }
    const tdm_tensor *ins[1] = {x};
    tdm_status st = tdm_session_run(s, ins, out);
    CHECK(st == TDM_OK, "cpu run (specialised %d): %s", specialise, tdm_session_error(s));
    for (size_t i = 1; i < tdm_model_output_count(m) && i < 8; i++)
        tdm_tensor_destroy(out[i]);
    tdm_session_destroy(s);
    tdm_session_options_destroy(o);
    return st == TDM_OK ? out[0] : NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_specialize MODEL.onnx X.npy\n");
        return 2;
    }
    size_t size = 0;
    unsigned char *bytes = read_all(argv[1], &size);
    if (!bytes) {
        fprintf(stderr, "test_specialize: cannot read %s\n", argv[1]);
        return 2;
    }
    tdm_ctx *ctx = NULL;
    tdm_tensor *x = NULL;
    if (tdm_ctx_create(&ctx) != TDM_OK)
        return 2;
    if (tdm_value_load(ctx, argv[2], NULL, &x) != TDM_OK || tdm_tensor_rank(x) != 4) {
        fprintf(stderr, "test_specialize: %s: %s\n", argv[2], tdm_ctx_error(ctx));
        return 2;
    }
    const int64_t h = tdm_tensor_dims(x)[2], w = tdm_tensor_dims(x)[3];

    /* 1. from a file that is gone by the time the session specialises */
    char tmp[] = "/tmp/tandem-specialize-XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0) {
        CHECK(write(fd, bytes, size) == (ssize_t)size, "write %s", tmp);
        close(fd);
    }
    tdm_model *from_file = NULL;
    CHECK(tdm_model_load(ctx, tmp, &from_file) == TDM_OK, "load %s: %s", tmp, tdm_ctx_error(ctx));
    unlink(tmp);

    /* 2. from memory */
    tdm_model *from_mem = NULL;
    CHECK(tdm_model_load_memory(ctx, bytes, size, "det-in-memory", &from_mem) == TDM_OK, "load from memory: %s",
          tdm_ctx_error(ctx));
    free(bytes);
    if (!from_file || !from_mem)
        return 1;
    CHECK(input_dynamic(from_file) && input_dynamic(from_mem), "x should be [?, 3, ?, ?] before specialising");

    /* 3. specialisation matters, and is the same for both */
    tdm_plan *dyn = plan_of(ctx, from_mem, "vnpu:rk3588,cpu", 0, 0);
    tdm_plan *pf = plan_of(ctx, from_file, "vnpu:rk3588,cpu", h, w);
    tdm_plan *pm = plan_of(ctx, from_mem, "vnpu:rk3588,cpu", h, w);
    if (dyn && pf && pm) {
        size_t shape_dyn = count_reason(dyn, "SHAPE_UNSUPPORTED");
        CHECK(shape_dyn > 0, "the unspecialised plan should have SHAPE_UNSUPPORTED nodes on a static-shape profile");
        CHECK(count_reason(pf, "SHAPE_UNSUPPORTED") == 0, "file-loaded specialised plan: %zu SHAPE_UNSUPPORTED",
              count_reason(pf, "SHAPE_UNSUPPORTED"));
        CHECK(count_reason(pm, "SHAPE_UNSUPPORTED") == 0, "memory-loaded specialised plan: %zu SHAPE_UNSUPPORTED",
              count_reason(pm, "SHAPE_UNSUPPORTED"));
        CHECK(tdm_plan_node_count(pf) == tdm_plan_node_count(pm), "node counts differ: %zu vs %zu",
              tdm_plan_node_count(pf), tdm_plan_node_count(pm));
        for (size_t i = 0; i < tdm_plan_node_count(pf) && i < tdm_plan_node_count(pm); i++) {
            const char *na, *nb, *da, *db, *ra, *rb;
            tdm_plan_node(pf, i, &na, NULL, &da, &ra, NULL);
            tdm_plan_node(pm, i, &nb, NULL, &db, &rb, NULL);
            CHECK(!strcmp(na, nb) && !strcmp(da, db) && !strcmp(ra, rb), "node %zu: %s on %s (%s) vs %s on %s (%s)",
                  i, na, da, ra, nb, db, rb);
        }
        printf("rk3588: unspecialised %zu SHAPE_UNSUPPORTED; specialised 0 (file gone and memory), %zu nodes on "
               "the device\n",
               shape_dyn, tdm_plan_device_nodes(pm, 0));
    }
    tdm_plan_destroy(dyn);
    tdm_plan_destroy(pf);
    tdm_plan_destroy(pm);

    /* 4. the model is unchanged; another size specialises too */
    CHECK(input_dynamic(from_file) && input_dynamic(from_mem), "specialising changed the model's input");
    tdm_plan *p2 = plan_of(ctx, from_file, "vnpu:rk3588,cpu", 32, 160);
    if (p2)
        CHECK(count_reason(p2, "SHAPE_UNSUPPORTED") == 0, "32x160: SHAPE_UNSUPPORTED nodes left");
    tdm_plan_destroy(p2);

    /* 5. same answer with and without specialisation, on the page */
    tdm_tensor *a = run_cpu(ctx, from_mem, h, w, 0, x);
    tdm_tensor *b = run_cpu(ctx, from_file, h, w, 1, x); /* its file is gone */
    if (a && b) {
        CHECK(tdm_tensor_count(a) == tdm_tensor_count(b), "output sizes differ");
        const float *fa = tdm_tensor_cdata(a), *fb = tdm_tensor_cdata(b);
        double worst = 0, peak = 0;
        size_t text = 0;
        for (size_t i = 0; i < tdm_tensor_count(a) && i < tdm_tensor_count(b); i++) {
            worst = fmax(worst, fabs((double)fa[i] - fb[i]));
            peak = fmax(peak, fabs((double)fa[i]));
            text += fa[i] > 0.3f;
        }
        CHECK(text > 1000, "the page should give text pixels above 0.3, got %zu", text);
        CHECK(worst <= 1e-5 * fmax(peak, 1.0), "specialised output differs by %g (peak %g)", worst, peak);
        printf("cpu at %lldx%lld: %zu text pixels; specialised and dynamic outputs agree within %g\n", (long long)h,
               (long long)w, text, worst);
    }
    tdm_tensor_destroy(a);
    tdm_tensor_destroy(b);

    /* 6. tdm_model_specialize: the model as a session with the shapes sees
     * it (what `tandem info --shape` prints) */
    tdm_session_options *so = options("cpu", h, w);
    tdm_model *sp = NULL;
    tdm_model_info before, after;
    tdm_value_info in, out;
    CHECK(so && tdm_model_specialize(ctx, from_mem, so, &sp) == TDM_OK && sp, "specialize: %s", tdm_ctx_error(ctx));
    if (sp && tdm_model_get_info(from_mem, &before) == TDM_OK && tdm_model_get_info(sp, &after) == TDM_OK &&
        tdm_model_input(sp, 0, &in) == TDM_OK && tdm_model_output(sp, 0, &out) == TDM_OK) {
        CHECK(in.rank == 4 && in.dims[0].value == 1 && in.dims[2].value == h && in.dims[3].value == w,
              "specialised input not [1, 3, %lld, %lld]", (long long)h, (long long)w);
        CHECK(out.rank == 4 && out.dims[2].value == h && out.dims[3].value == w, "specialised output not inferred");
        CHECK(before.flops_unknown > 0 && after.flops_unknown == 0 && after.flops > 0,
              "FLOPs: %zu unknown before, %zu after (%g)", before.flops_unknown, after.flops_unknown, after.flops);
        CHECK(after.node_count == before.node_count, "node count is the file's");
        printf("tdm_model_specialize at %lldx%lld: %.3f GFLOPs (%zu nodes unknown before)\n", (long long)h,
               (long long)w, after.flops / 1e9, before.flops_unknown);
    }
    CHECK(input_dynamic(from_mem), "tdm_model_specialize changed the model");
    tdm_model_destroy(sp);
    tdm_session_options_destroy(so);
    sp = (tdm_model *)1;
    CHECK(tdm_model_specialize(ctx, from_mem, NULL, &sp) == TDM_OK && sp == NULL, "no shapes: OK and NULL");
    so = options("cpu", 0, 0);
    int64_t bad[2] = {1, 2};
    CHECK(so && tdm_session_options_set_shape(so, "nope", 2, bad) == TDM_OK &&
              tdm_model_specialize(ctx, from_mem, so, &sp) == TDM_E_INPUT && sp == NULL &&
              strstr(tdm_ctx_error(ctx), "'nope'"),
          "a name that is not an input: TDM_E_INPUT naming it (%s)", tdm_ctx_error(ctx));
    tdm_session_options_destroy(so);
    CHECK(tdm_model_specialize(ctx, NULL, NULL, &sp) == TDM_E_USAGE, "NULL model: TDM_E_USAGE");
    tdm_tensor_destroy(x);
    tdm_model_destroy(from_file);
    tdm_model_destroy(from_mem);
    tdm_ctx_destroy(ctx);
    if (failures)
        fprintf(stderr, "test_specialize: %d failures\n", failures);
    return failures ? 1 : 0;
}
