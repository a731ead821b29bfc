/* tdm_value_load and tdm_value_load_for (include/tandem/tandem.h): a value
 * from a NumPy .npy file (core/npy.h) or an ONNX .pb file (the loader's
 * onnx_read_value). Above both, so that core does not depend on the
 * loader. */
#include "core/ctx.h"
#include "core/npy.h"
#include "onnx/onnx.h"

#include <string.h>

static int ends_with(const char *s, const char *suffix)
{
    size_t ls = strlen(s), lx = strlen(suffix);
    if (ls < lx)
        return 0;
    for (size_t i = 0; i < lx; i++) {
        char a = s[ls - lx + i], c = suffix[i];
        if (a >= 'A' && a <= 'Z')
            a = (char)(a - 'A' + 'a');
        if (a != c)
            return 0;
    }
    return 1;
}

/* optional: the value is declared optional(*expect) (tdm_value_load_for). */
static tdm_status value_load(tdm_ctx *ctx, const char *path, const tdm_kind *expect, int optional, tdm_tensor **out)
{
    tdm_err *e = ctx ? &ctx->err : NULL;
    tdm_status st;
    err_clear(e);
    if (!out)
        return err_set(e, TDM_E_USAGE, "tdm_value_load needs an out pointer");
    *out = NULL;
    if (!path)
        return err_set(e, TDM_E_USAGE, "tdm_value_load needs a path");
    int npy = ends_with(path, ".npy");
    /* neither extension: sniff the magic */
    if (!npy && !ends_with(path, ".pb") && (st = npy_sniff_file(e, path, &npy)) != TDM_OK)
        return st;
    if (!npy)
        return optional ? onnx_read_optional(e, path, *expect, out) : onnx_read_value(e, path, expect, out);
    if (expect && *expect == TDM_KIND_SEQUENCE)
        return err_set(e, TDM_E_INPUT, "'%s' is a .npy file, which holds one tensor, but a sequence is expected",
                       path);
    return npy_load_file(e, path, out);
}

tdm_status tdm_value_load(tdm_ctx *ctx, const char *path, const tdm_kind *expect, tdm_tensor **out)
{
    return value_load(ctx, path, expect, 0, out);
}

tdm_status tdm_value_load_for(tdm_ctx *ctx, const char *path, const tdm_value_info *vi, tdm_tensor **out)
{
    if (!vi) {
        if (ctx)
            err_set(&ctx->err, TDM_E_USAGE, "tdm_value_load_for needs the declared type");
        return TDM_E_USAGE;
    }
    return value_load(ctx, path, &vi->kind, vi->optional && vi->kind != TDM_KIND_NONE, out);
}
