/* Slicing, stacking and concatenation shared by the control-flow and
 * sequence ops. */
#include "ops/control.h"
#include "ops/tensor.h"
#include "core/mem.h"

#include <string.h>

void ctl_move(tdm_tensor *dst, tdm_tensor *src)
{
    tensor_reset(dst);
    *dst = *src;
    memset(src, 0, sizeof *src);
    mem_free(src);
}

tdm_status ctl_take(op_ctx *ctx, const tdm_tensor *t, int axis, int64_t i, tdm_tensor **out)
{
    int64_t dims[TDM_MAX_RANK];
    int r = 0;
    *out = NULL;
    if (axis < 0 || axis >= t->rank || i < 0 || i >= t->dims[axis])
        return op_fail(ctx, TDM_E_RUNTIME, "slice %lld along axis %d is out of range", (long long)i, axis);
    for (int d = 0; d < t->rank; d++)
        if (d != axis)
            dims[r++] = t->dims[d];
    tdm_tensor *o;
    tdm_status st = tensor_new(ctx->err, t->dtype, r, dims, &o);
    if (st)
        return st;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= (size_t)t->dims[d];
    for (int d = axis + 1; d < t->rank; d++)
        inner *= (size_t)t->dims[d];
    size_t n = (size_t)t->dims[axis];
    for (size_t a = 0; a < outer; a++) {
        if ((st = op_tensor_copy(ctx, o, a * inner, t, (a * n + (size_t)i) * inner, inner)) != TDM_OK) {
            tdm_tensor_destroy(o);
            return st;
        }
    }
    *out = o;
    return TDM_OK;
}

tdm_status ctl_stack(op_ctx *ctx, tdm_tensor *const *items, size_t n, int axis, tdm_tensor *dst)
{
    if (n == 0)
        return op_fail(ctx, TDM_E_RUNTIME, "nothing to stack");
    const tdm_tensor *f = items[0];
    if (axis < 0 || axis > f->rank || f->rank + 1 > TDM_MAX_RANK)
        return op_fail(ctx, TDM_E_RUNTIME, "axis %d is out of range for stacking rank %d", axis, f->rank);
    int64_t dims[TDM_MAX_RANK];
    for (int d = 0, r = 0; d <= f->rank; d++)
        dims[d] = d == axis ? (int64_t)n : f->dims[r++];
    for (size_t k = 0; k < n; k++)
        if (items[k]->kind != TDM_KIND_TENSOR || !shape_equal(items[k]->rank, items[k]->dims, f->rank, f->dims) ||
            items[k]->dtype != f->dtype)
            return op_fail(ctx, TDM_E_RUNTIME, "item %zu differs in shape or element type from item 0", k);
    tdm_status st = tensor_alloc(ctx->err, dst, f->dtype, f->rank + 1, dims);
    if (st)
        return st;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= (size_t)f->dims[d];
    for (int d = axis; d < f->rank; d++)
        inner *= (size_t)f->dims[d];
    size_t off = 0;
    for (size_t a = 0; a < outer; a++)
        for (size_t k = 0; k < n; k++) {
            if ((st = op_tensor_copy(ctx, dst, off, items[k], a * inner, inner)) != TDM_OK)
                return st;
            off += inner;
        }
    return TDM_OK;
}
