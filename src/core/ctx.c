#include "core/ctx.h"
#include "core/mem.h"

tdm_status tdm_ctx_create(tdm_ctx **out)
{
    if (!out)
        return TDM_E_USAGE;
    *out = mem_calloc(1, sizeof **out);
    return *out ? TDM_OK : TDM_E_NOMEM;
}

void tdm_ctx_destroy(tdm_ctx *ctx) { mem_free(ctx); }

const char *tdm_ctx_error(const tdm_ctx *ctx) { return ctx ? ctx->err.msg : ""; }
