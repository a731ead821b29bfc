/* Run and infer hooks of the tensor ops (shape, index and data movement;
 * see ops.def and tensor.def), and the helpers the tensor_*.c files share. */
#ifndef TDM_OPS_TENSOR_H
#define TDM_OPS_TENSOR_H

#include "ops/op.h"

/* ---- run hooks ---- */

/* tensor_shape.c: shape bookkeeping and constants */
tdm_status op_run_Identity(op_ctx *ctx);
tdm_status op_run_Reshape(op_ctx *ctx);
tdm_status op_run_Flatten(op_ctx *ctx);
tdm_status op_run_Squeeze(op_ctx *ctx);
tdm_status op_run_Unsqueeze(op_ctx *ctx);
tdm_status op_run_Shape(op_ctx *ctx);
tdm_status op_run_Size(op_ctx *ctx);
tdm_status op_run_ConstantOfShape(op_ctx *ctx);
tdm_status op_run_Constant(op_ctx *ctx);
tdm_status op_run_Range(op_ctx *ctx);
tdm_status op_run_EyeLike(op_ctx *ctx);

/* tensor_move.c: data movement */
tdm_status op_run_Transpose(op_ctx *ctx);
tdm_status op_run_Concat(op_ctx *ctx);
tdm_status op_run_Split(op_ctx *ctx);
tdm_status op_run_Slice(op_ctx *ctx);
tdm_status op_run_Expand(op_ctx *ctx);
tdm_status op_run_Tile(op_ctx *ctx);
tdm_status op_run_Pad(op_ctx *ctx);
tdm_status op_run_CenterCropPad(op_ctx *ctx);
tdm_status op_infer_CenterCropPad(op_infer_ctx *ctx);
tdm_status op_run_DepthToSpace(op_ctx *ctx);
tdm_status op_run_SpaceToDepth(op_ctx *ctx);
tdm_status op_run_Trilu(op_ctx *ctx);
tdm_status op_run_ReverseSequence(op_ctx *ctx);
tdm_status op_run_Compress(op_ctx *ctx);

/* tensor_index.c: gather / scatter / index ops */
tdm_status op_run_Gather(op_ctx *ctx);
tdm_status op_run_GatherElements(op_ctx *ctx);
tdm_status op_run_GatherND(op_ctx *ctx);
tdm_status op_run_Scatter(op_ctx *ctx);
tdm_status op_run_ScatterElements(op_ctx *ctx);
tdm_status op_run_ScatterND(op_ctx *ctx);
tdm_status op_run_NonZero(op_ctx *ctx);
tdm_status op_run_OneHot(op_ctx *ctx);
tdm_status op_run_Unique(op_ctx *ctx);

/* tensor_resize.c */
tdm_status op_run_Resize(op_ctx *ctx);
tdm_status op_run_Upsample(op_ctx *ctx);

/* ---- infer hooks (tensor_infer.c) ---- */

tdm_status op_infer_Reshape(op_infer_ctx *ctx);
tdm_status op_infer_Flatten(op_infer_ctx *ctx);
tdm_status op_infer_Squeeze(op_infer_ctx *ctx);
tdm_status op_infer_Unsqueeze(op_infer_ctx *ctx);
tdm_status op_infer_Shape(op_infer_ctx *ctx);
tdm_status op_infer_Size(op_infer_ctx *ctx);
tdm_status op_infer_ConstantOfShape(op_infer_ctx *ctx);
tdm_status op_infer_Constant(op_infer_ctx *ctx);
tdm_status op_infer_Range(op_infer_ctx *ctx);
tdm_status op_infer_EyeLike(op_infer_ctx *ctx);
tdm_status op_infer_Transpose(op_infer_ctx *ctx);
tdm_status op_infer_Concat(op_infer_ctx *ctx);
tdm_status op_infer_Split(op_infer_ctx *ctx);
tdm_status op_infer_Slice(op_infer_ctx *ctx);
tdm_status op_infer_Expand(op_infer_ctx *ctx);
tdm_status op_infer_Tile(op_infer_ctx *ctx);
tdm_status op_infer_Pad(op_infer_ctx *ctx);
tdm_status op_infer_DepthToSpace(op_infer_ctx *ctx);
tdm_status op_infer_SpaceToDepth(op_infer_ctx *ctx);
tdm_status op_infer_ReverseSequence(op_infer_ctx *ctx);
tdm_status op_infer_Compress(op_infer_ctx *ctx);
tdm_status op_infer_Gather(op_infer_ctx *ctx);
tdm_status op_infer_GatherND(op_infer_ctx *ctx);
tdm_status op_infer_GatherElements(op_infer_ctx *ctx);
tdm_status op_infer_NonZero(op_infer_ctx *ctx);
tdm_status op_infer_OneHot(op_infer_ctx *ctx);
tdm_status op_infer_Unique(op_infer_ctx *ctx);
tdm_status op_infer_Resize(op_infer_ctx *ctx);
tdm_status op_infer_Upsample(op_infer_ctx *ctx);

/* ---- helpers shared by tensor_*.c (tensor_util.c) ---- */

/* Bytes of one element as stored (a char * for strings). */
size_t op_tensor_esize(tdm_dtype dt);

/* Input i if present (NULL when omitted, beyond the node's inputs or an
 * empty optional). */
const tdm_tensor *op_tensor_opt(const op_ctx *ctx, int i);

/* Input i, which must be present and a tensor; fails naming it as `what`. */
tdm_status op_tensor_in(op_ctx *ctx, int i, const char *what, const tdm_tensor **out);

/* Reads an optional integer input (NULL -> *n = -1, *vals NULL). */
tdm_status op_tensor_opt_ints(op_ctx *ctx, int i, int64_t **vals, int64_t *n);

/* Copies n elements of src (from soff) to dst (at doff); strings are
 * duplicated, so dst must hold no strings there yet. */
tdm_status op_tensor_copy(op_ctx *ctx, tdm_tensor *dst, size_t doff, const tdm_tensor *src, size_t soff,
                          size_t n);

/* Concatenates n tensors (all present, same dtype and rank, equal dims off
 * axis) along axis, a normalised axis, into the empty shell dst. */
tdm_status op_tensor_concat(op_ctx *ctx, const tdm_tensor *const *items, size_t n, int axis, tdm_tensor *dst);

/* Replaces the contents of the shell dst with a deep copy of src (tensor,
 * sequence or optional). */
tdm_status op_tensor_clone_into(op_ctx *ctx, tdm_tensor *dst, const tdm_tensor *src);

/* Slice of a dimension of size dim (Slice's rules): normalises *start and
 * *step (nonzero) in place and returns the number of elements taken. */
int64_t op_tensor_slice(int64_t dim, int64_t *start, int64_t end, int64_t *step);

/* The [start, end) range of dimensions Shape returns for a tensor of the
 * given rank (attributes start/end from opset 15), clamped to [0, rank]. */
void op_tensor_shape_range(const gr_node *node, int version, int rank, int64_t *start, int64_t *end);

/* Output i receives a copy of src's elements with the given shape. */
tdm_status op_tensor_reshaped(op_ctx *ctx, int i, const tdm_tensor *src, int rank, const int64_t *dims);

/* Per-dimension offset tables for op_tensor_gather_map: one block holding
 * rank pointers and dims[0] + … + dims[rank-1] entries (free with
 * mem_free). NULL on out of memory. */
int64_t **op_tensor_offs_new(int rank, const int64_t *dims);

/* The generic data mover: out (allocated, shape fixed) receives, at each
 * index (i0, …, ir-1), src's element at offs[0][i0] + … + offs[r-1][ir-1];
 * when any term is negative it receives *fill (an element of src's type,
 * a `const char *` for strings; NULL fill: zero / empty string). */
tdm_status op_tensor_gather_map(op_ctx *ctx, tdm_tensor *out, const tdm_tensor *src, int64_t *const *offs,
                                const void *fill);

/* Output i = src permuted by perm (of src's rank). */
tdm_status op_tensor_transpose(op_ctx *ctx, int i, const tdm_tensor *src, const int *perm);

/* The fast mover for non-string tensors: out (allocated, contiguous, rank
 * out->rank) receives at each index (i0, …, ir-1) src's element at
 * base + i0 * strides[0] + … + ir-1 * strides[r-1] (element strides, any
 * sign, all in range). Dimensions that stay contiguous are merged into long
 * copies, a permutation that moves the stride-1 dimension runs as tiled 2-D
 * transposes, and large copies are split over ctx->threads. Returns 0, or
 * -1 (nothing done) for strings. */
int op_tensor_strided_copy(const op_ctx *ctx, tdm_tensor *out, const tdm_tensor *src, int64_t base,
                           const int64_t *strides);

#endif
