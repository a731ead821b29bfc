/* Fusion of elementwise consumers into the node before them (op_fuse in
 * ops/op.h). The executor does not fuse yet: ctx->fuse is always NULL and
 * this entry point is never reached. */
#include "ops/op.h"

void op_fuse_apply(const op_fuse *f, float *y, size_t at, size_t n)
{
    (void)f;
    (void)y;
    (void)at;
    (void)n;
}
