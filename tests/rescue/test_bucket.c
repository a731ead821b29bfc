/* Shape bucketing units (ctest rescue.bucket_units; src/run/bucket.c,
 * bucket_mask.c): parsing and picking bucket shapes, padding (zero, edge),
 * cropping by the output's stride, the safety check on ppocr_det (10
 * channel gates, accepted) and resnet18 (refused at Flatten after
 * GlobalAveragePool), and the masked model's extra input.
 *
 *   test_bucket PPOCR_DET.onnx RESNET18.onnx   (exit 77 when absent) */
#include "core/ctx.h"
#include "core/mem.h"
#include "core/tensor.h"
#include "graph/model.h"
#include "run/bucket.h"
#include "tandem/tandem.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int failures;

static void check(int cond, const char *what, const char *detail)
{
    printf("%s %s%s%s\n", cond ? "ok  " : "FAIL", what, detail ? ": " : "", detail ? detail : "");
    failures += !cond;
}

static tdm_tensor *ramp(int64_t h, int64_t w)
{
    int64_t dims[4] = {1, 1, h, w};
    tdm_tensor *t = NULL;
    if (tensor_new(NULL, TDM_FLOAT, 4, dims, &t))
        return NULL;
    for (size_t i = 0; i < t->count; i++)
        ((float *)t->data)[i] = (float)(i + 1);
    return t;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    tdm_err e;
    err_clear(&e);
    bucket_shape *b = NULL;
    size_t n = 0;
    /* parsing: sorted by area; bad specs refused with a sentence */
    check(bucket_parse(&e, "640x640,320x480,960x960", &b, &n) == TDM_OK && n == 3 && b[0].h == 320 &&
              b[0].w == 480 && b[1].h == 640 && b[2].w == 960,
          "parse sorts by area", NULL);
    check(bucket_pick(b, n, 300, 480) == 0 && bucket_pick(b, n, 321, 10) == 1 && bucket_pick(b, n, 640, 641) == 2 &&
              bucket_pick(b, n, 961, 1) == -1,
          "pick: the smallest holding the image", NULL);
    mem_free(b);
    static const char *const bad[] = {"", "640", "0x5", "5x", "1x2,", "x3", "70000x1", "3x3;4x4"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err_clear(&e);
        tdm_status st = bucket_parse(&e, bad[i], &b, &n);
        check(st == TDM_E_USAGE && b == NULL && strstr(e.msg, "HxW"), "bad spec refused", bad[i]);
    }
    /* padding 2x3 to 3x4 */
    tdm_tensor *x = ramp(2, 3), *p = NULL, *c = NULL;
    check(x && bucket_pad(&e, x, 3, 4, BUCKET_PAD_ZERO, &p) == TDM_OK && p->dims[2] == 3 && p->dims[3] == 4,
          "pad zero to 3x4", NULL);
    static const float zero[12] = {1, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0, 0};
    static const float edge[12] = {1, 2, 3, 3, 4, 5, 6, 6, 4, 5, 6, 6};
    check(p && memcmp(p->data, zero, sizeof zero) == 0, "zero padding bottom/right", NULL);
    tdm_tensor_destroy(p);
    p = NULL;
    check(bucket_pad(&e, x, 3, 4, BUCKET_PAD_EDGE, &p) == TDM_OK && memcmp(p->data, edge, sizeof edge) == 0,
          "edge padding repeats the last row and column", NULL);
    /* cropping: the 3x4 padded map back to 2x3; a stride-2 map 2x2 of bucket 4x4 for a 3x3 image stays 2x2 */
    check(bucket_crop(&e, p, 3, 4, 2, 3, &c) == TDM_OK && c->dims[2] == 2 && c->dims[3] == 3 &&
              memcmp(c->data, x->data, 6 * sizeof(float)) == 0,
          "crop to the image", NULL);
    tdm_tensor_destroy(c);
    c = NULL;
    tdm_tensor *s2 = ramp(2, 2);
    check(bucket_crop(&e, s2, 4, 4, 3, 3, &c) == TDM_OK && c->dims[2] == 2 && c->dims[3] == 2,
          "stride 2: ceil(3/2) = 2", NULL);
    tdm_tensor_destroy(c);
    c = NULL;
    err_clear(&e);
    check(bucket_crop(&e, s2, 4, 6, 3, 3, &c) == TDM_E_RUNTIME && c == NULL && strstr(e.msg, "does not follow"),
          "a map that does not follow the bucket is refused", e.msg);
    tdm_tensor_destroy(s2);
    tdm_tensor_destroy(p);
    tdm_tensor_destroy(x);

    if (access(argv[1], R_OK) != 0 || access(argv[2], R_OK) != 0) {
        printf("skip: the model set is absent\n");
        return failures ? 1 : 77;
    }
    tdm_ctx *ctx = NULL;
    tdm_model *det = NULL, *res = NULL, *masked = NULL;
    if (tdm_ctx_create(&ctx) || tdm_model_load(ctx, argv[1], &det) || tdm_model_load(ctx, argv[2], &res)) {
        printf("FAIL load: %s\n", ctx ? tdm_ctx_error(ctx) : "no ctx");
        return 1;
    }
    int gates = -1;
    err_clear(&e);
    check(bucket_check(&e, det->gm->main, &gates) == TDM_OK && gates == 10, "ppocr_det accepted, 10 channel gates",
          e.msg);
    err_clear(&e);
    check(bucket_check(&e, res->gm->main, &gates) == TDM_E_UNSUPPORTED && strstr(e.msg, "SHAPE_UNSUPPORTED") &&
              strstr(e.msg, "Flatten") && strstr(e.msg, "GlobalAveragePool"),
          "resnet18 refused", e.msg);
    err_clear(&e);
    check(bucket_mask_model(&e, det, &masked) == TDM_OK && masked && masked->n_inputs == det->n_inputs + 1 &&
              strcmp(masked->inputs[masked->n_inputs - 1].info.name, "bucket_mask") == 0 &&
              masked->gm->main->n_nodes > det->gm->main->n_nodes,
          "ppocr_det masked: one more input (bucket_mask), more nodes", e.msg);
    if (masked)
        printf("     nodes %d -> %d\n", det->gm->main->n_nodes, masked->gm->main->n_nodes);
    tdm_model_destroy(masked);
    tdm_model_destroy(res);
    tdm_model_destroy(det);
    tdm_ctx_destroy(ctx);
    return failures ? 1 : 0;
}
