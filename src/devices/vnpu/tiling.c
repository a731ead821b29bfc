/* A vnpu profile's on-chip memory and row tiling (vnpu.h "onchip_bytes").
 *
 * A profile with "onchip_bytes" has two memories: memory_bytes, the device
 * memory (DRAM) the planner places tensors in, and the small on-chip memory
 * a node computes in. A node whose weights and tensors (at the device's
 * storage type) fit on chip runs as one piece. A larger one runs in row
 * tiles, as NPU compilers tile a layer through their SRAM: its weights stay
 * on chip and its inputs and outputs stream through the rest, T tiles of
 * the output's rows (the second-last dimension: H of NCHW, the rows of a
 * MatMul), each a dispatch of its own. A node is refused with MEMORY when
 * its weights alone fill the on-chip memory, or when it has fewer rows than
 * tiles, or when its op mixes rows (a global pool, a reduction, a reshape),
 * so that no row tile can be computed alone. */
#include "devices/vnpu/vnpu.h"

#include <math.h>
#include <string.h>

/* Ops whose output rows depend on a bounded band of input rows: they can
 * be computed one row tile at a time. */
static const char *const row_local[] = {
    "Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "BatchNormalization", "Resize", "Upsample",
    "MatMul", "Gemm", "Relu", "LeakyRelu", "PRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Elu",
    "Selu", "Softplus", "Mish", "Gelu", "Erf", "Exp", "Log", "Sqrt", "Abs", "Neg", "Reciprocal", "Add", "Sub", "Mul",
    "Div", "Pow", "Max", "Min", "Sum", "Mean", "Where", "Cast", "QuantizeLinear", "DequantizeLinear", "Identity",
    "Dropout", NULL};

/* Reductions over the rows that stream: each input row tile adds to the
 * output kept on chip (a partial sum, maximum or minimum). */
static const char *const row_reduce[] = {"GlobalAveragePool", "GlobalMaxPool", "ReduceMean", "ReduceSum", "ReduceMax",
                                         "ReduceMin", NULL};

static int listed(const char *const *list, const char *op)
{
    for (int k = 0; list[k]; k++)
        if (strcmp(list[k], op) == 0)
            return 1;
    return 0;
}

/* The rows node n can be tiled over: the output's second-last dimension
 * for a row-local op (a Concat only across another axis), the first
 * input's for a streaming reduction; 0 when its op mixes rows. */
static int64_t tile_rows(const tdm_node_desc *n)
{
    const tdm_tensor_desc *y = n->n_outputs ? &n->outputs[0] : NULL;
    const tdm_tensor_desc *x = n->n_inputs ? &n->inputs[0] : NULL;
    if (listed(row_reduce, n->op_type))
        return x && x->rank >= 2 ? x->dims[x->rank - 2] : 0;
    if (!y || y->rank < 2)
        return 0;
    if (strcmp(n->op_type, "Concat") == 0) {
        for (int a = 0; a < n->n_attrs; a++)
            if (strcmp(n->attrs[a].name, "axis") == 0 &&
                (n->attrs[a].i == y->rank - 2 || n->attrs[a].i == -2))
                return 0;
        return y->dims[y->rank - 2];
    }
    return listed(row_local, n->op_type) ? y->dims[y->rank - 2] : 0;
}

/* Bytes of t at the device's storage type; -1 when its size is unknown. */
static double stored(const struct vnpu_ctx *c, const tdm_tensor_desc *t)
{
    if (t->dtype == TDM_UNDEFINED)
        return 0;
    if (t->rank < 0)
        return -1;
    double n = 1;
    for (int d = 0; d < t->rank; d++) {
        if (t->dims[d] < 0)
            return -1;
        n *= (double)t->dims[d];
    }
    size_t sz = tdm_dtype_size(t->dtype);
    double b = n * (double)(sz ? sz : sizeof(void *));
    if ((t->dtype == TDM_FLOAT || t->dtype == TDM_DOUBLE) &&
        (c->storage == TDM_FLOAT16 || c->storage == TDM_BFLOAT16))
        b = b / (double)sz * 2.0;
    return b;
}

int vnpu_tiles(const struct vnpu_ctx *c, const tdm_node_desc *n, tdm_verdict *out)
{
    if (!c->onchip_bytes)
        return 1;
    double w = 0, io = 0;
    for (int i = 0; i < n->n_inputs + n->n_outputs; i++) {
        const tdm_tensor_desc *t = i < n->n_inputs ? &n->inputs[i] : &n->outputs[i - n->n_inputs];
        double b = stored(c, t);
        if (b < 0)
            return 1; /* unknown sizes: the planner's memory rule decides */
        if (i < n->n_inputs && t->data)
            w += b;
        else
            io += b;
    }
    double chip = (double)c->onchip_bytes;
    if (w + io <= chip)
        return 1;
    if (w >= chip) {
        if (out)
            dev_verdict(out, TDM_REASON_MEMORY, "its weights (%.0f bytes) do not fit the %llu bytes of on-chip memory of %s",
                        w, (unsigned long long)c->onchip_bytes, c->dev_name);
        return 0;
    }
    double tiles = ceil(io / (chip - w));
    int64_t rows = tile_rows(n);
    if (!rows || (double)rows < tiles) {
        if (out)
            dev_verdict(out, TDM_REASON_MEMORY,
                        "its tensors and weights (%.0f bytes) exceed the %llu bytes of on-chip memory of %s and %s",
                        w + io, (unsigned long long)c->onchip_bytes, c->dev_name,
                        rows ? "it has fewer rows than the tiles it would need"
                             : "its op mixes rows, so it cannot run in row tiles");
        return 0;
    }
    return (int)tiles;
}
