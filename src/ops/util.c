/* Utilities shared by the op families. */
#include "ops/op.h"
#include "core/mem.h"

void op_bcast_strides(int r, const int64_t *out_dims, int rin, const int64_t *in_dims, int64_t *strides)
{
    int64_t s = 1;
    for (int d = r - 1; d >= 0; d--) {
        int di = d - (r - rin);
        if (di < 0) {
            strides[d] = 0;
            continue;
        }
        strides[d] = (in_dims[di] == 1 && out_dims[d] != 1) ? 0 : s;
        s *= in_dims[di];
    }
}

int64_t op_bcast_offset(size_t i, int r, const int64_t *out_dims, const int64_t *strides)
{
    int64_t off = 0;
    for (int d = r - 1; d >= 0 && i; d--) {
        int64_t n = out_dims[d];
        off += (int64_t)(i % (size_t)n) * strides[d];
        i /= (size_t)n;
    }
    return off;
}

tdm_status op_axis(op_ctx *ctx, int64_t axis, int rank, const char *what, int *out)
{
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= (rank > 0 ? rank : 1))
        return op_fail(ctx, TDM_E_RUNTIME, "%s %lld is out of range for rank %d", what, (long long)axis, rank);
    *out = (int)a;
    return TDM_OK;
}

tdm_status op_in_ints(op_ctx *ctx, int i, int64_t **vals, size_t *n)
{
    *vals = NULL;
    *n = 0;
    const tdm_tensor *t = i < ctx->n_in ? ctx->in[i] : NULL;
    if (!t)
        return op_fail(ctx, TDM_E_RUNTIME, "input %d is missing", i);
    if (t->kind != TDM_KIND_TENSOR || !dtype_is_int(t->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "input %d must be an integer tensor, not %s", i,
                       tdm_dtype_name(t->dtype));
    int64_t *v = mem_calloc(t->count + 1, sizeof *v);
    if (!v)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    for (size_t k = 0; k < t->count; k++)
        v[k] = tensor_get_i64(t, k);
    *vals = v;
    *n = t->count;
    return TDM_OK;
}

uint64_t op_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
