/* tdm_model_load and tdm_model_load_memory: the ONNX loader, then
 * model_build (graph/model.c). Here, above the graph layer, so that the
 * graph layer does not depend on the loader. */
#include "core/ctx.h"
#include "graph/model.h"
#include "onnx/onnx.h"

tdm_status tdm_model_load(tdm_ctx *ctx, const char *path, tdm_model **out)
{
    tdm_err *e = ctx ? &ctx->err : NULL;
    gr_model *gm = NULL;
    if (!out)
        return err_set(e, TDM_E_USAGE, "tdm_model_load needs an out pointer");
    *out = NULL;
    if (!path)
        return err_set(e, TDM_E_USAGE, "tdm_model_load needs a path");
    err_clear(e);
    tdm_status st = onnx_load_file(e, path, &gm);
    if (st) {
        model_err_prefix(e, path);
        return st;
    }
    return model_build(e, gm, path, out);
}

tdm_status tdm_model_load_memory(tdm_ctx *ctx, const void *data, size_t size, const char *name, tdm_model **out)
{
    tdm_err *e = ctx ? &ctx->err : NULL;
    gr_model *gm = NULL;
    if (!out)
        return err_set(e, TDM_E_USAGE, "tdm_model_load_memory needs an out pointer");
    *out = NULL;
    if (!data && size)
        return err_set(e, TDM_E_USAGE, "tdm_model_load_memory needs data");
    if (!name)
        name = "<memory>";
    err_clear(e);
    tdm_status st = onnx_load_memory(e, data, size, name, &gm);
    if (st) {
        model_err_prefix(e, name);
        return st;
    }
    return model_build(e, gm, name, out);
}
