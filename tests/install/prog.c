/* A program built against an installed tandem (pkg-config, find_package):
 * checks the header's version against the library's, reads a granularity
 * word through the library's parser (a refused one keeps its sentence on
 * the ctx), then plans and runs the model given on the command line on
 * vnpu:edge-npu,cpu and reads the plan's verdict. */
#include <stdio.h>
#include <string.h>

#include <tandem/tandem.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL\n", argv[0]);
        return 1;
    }
    printf("tandem %s (header %s)\n", tdm_version(), TDM_VERSION_STRING);
    if (strcmp(tdm_version(), TDM_VERSION_STRING) != 0 || tdm_version_number() != TDM_VERSION_NUMBER)
        return 1;
    tdm_ctx *ctx = NULL;
    tdm_model *model = NULL;
    tdm_session_options *opts = NULL;
    tdm_session *session = NULL;
    tdm_tensor *in = NULL, *out = NULL;
    int rc = 1;
    if (tdm_ctx_create(&ctx) != TDM_OK)
        return 1;
    tdm_granularity g = TDM_GRANULARITY_OP;
    if (tdm_granularity_parse(ctx, "sub-graph", &g) != TDM_E_USAGE || g != TDM_GRANULARITY_OP ||
        !strstr(tdm_ctx_error(ctx), "'sub-graph' is not a granularity")) {
        fprintf(stderr, "a refused word: %s\n", tdm_ctx_error(ctx));
        goto fail;
    }
    if (tdm_granularity_parse(ctx, "subgraph", &g) != TDM_OK || strcmp(tdm_granularity_name(g), "subgraph") != 0)
        goto fail;
    if (tdm_model_load(ctx, argv[1], &model) != TDM_OK || tdm_session_options_create(&opts) != TDM_OK ||
        tdm_session_options_set_devices(opts, "vnpu:edge-npu,cpu") != TDM_OK ||
        tdm_session_options_set_granularity(opts, g) != TDM_OK ||
        tdm_session_options_set_fallback(opts, TDM_FALLBACK_ALLOW) != TDM_OK ||
        tdm_session_create(ctx, model, opts, &session) != TDM_OK) {
        fprintf(stderr, "%s\n", tdm_ctx_error(ctx));
        goto fail;
    }
    int64_t dims[2] = {1, 4};
    if (tdm_tensor_create(TDM_FLOAT, 2, dims, &in) != TDM_OK)
        goto fail;
    const float x[4] = {-1.0f, 0.5f, 2.0f, -3.0f};
    memcpy(tdm_tensor_data(in), x, sizeof x);
    const tdm_tensor *ins[1] = {in};
    if (tdm_session_run(session, ins, &out) != TDM_OK) {
        fprintf(stderr, "%s\n", tdm_session_error(session));
        goto fail;
    }
    const float *y = tdm_tensor_cdata(out);
    printf("y = %g %g %g %g\n", y[0], y[1], y[2], y[3]);
    tdm_plan_summary sum;
    if (tdm_plan_get_summary(tdm_session_plan(session), &sum) != TDM_OK)
        goto fail;
    printf("%zu nodes, %zu fallback\n", sum.nodes, sum.fallback_nodes);
    if (tdm_plan_status(tdm_session_plan(session)) != TDM_OK || tdm_plan_error(tdm_session_plan(session))[0])
        goto fail;
    rc = (y[0] == 0.0f && y[1] == 1.0f && y[2] == 4.0f && y[3] == 0.0f) ? 0 : 1;
fail:
    tdm_tensor_destroy(out);
    tdm_tensor_destroy(in);
    tdm_session_destroy(session);
    tdm_session_options_destroy(opts);
    tdm_model_destroy(model);
    tdm_ctx_destroy(ctx);
    return rc;
}
