/* Minimal reproductions (tandem.h "observation and diagnostics"): one node
 * of a plan as a one-node ModelProto, and host tensors as TensorProto;
 * values as the TensorProto, SequenceProto or OptionalProto files of the
 * ONNX node tests (tdm_value_save_pb). The protobuf is written by
 * src/onnx/write.c; this file maps the public calls onto it. */
#include "core/ctx.h"
#include "core/mem.h"
#include "core/npy.h"
#include "graph/model.h"
#include "onnx/onnx.h"
#include "plan/plan.h"

#include <string.h>

tdm_status tdm_tensor_to_proto(const tdm_tensor *t, const char *name, void **bytes, size_t *size)
{
    tdm_err e;
    if (!t || !bytes || !size)
        return TDM_E_USAGE;
    err_clear(&e);
    return onnx_write_tensor(&e, t, name, bytes, size);
}

tdm_status tdm_value_save_pb(tdm_ctx *ctx, const tdm_tensor *v, const tdm_value_info *vi, const char *path,
                             int overwrite)
{
    tdm_err *e = ctx ? &ctx->err : NULL;
    void *bytes = NULL;
    size_t size = 0;
    err_clear(e);
    if (!v || !vi || !path)
        return err_set(e, TDM_E_USAGE, "tdm_value_save_pb needs a value, its declared type and a path");
    tdm_status st = onnx_write_value(e, v, vi->name, vi->optional, vi->kind, &bytes, &size);
    if (st == TDM_OK)
        st = npy_write_bytes(e, path, bytes, size, overwrite);
    mem_free(bytes);
    return st;
}

int tdm_plan_node_input_is_constant(const tdm_plan *p, size_t i, size_t k)
{
    if (!p || i >= (size_t)p->n_nodes || k >= (size_t)p->g->nodes[i].n_inputs)
        return 0;
    int v = p->g->nodes[i].inputs[k];
    return v >= 0 && p->g->values[v].init != NULL && !p->g->values[v].is_input;
}

tdm_status tdm_plan_extract_node(tdm_ctx *ctx, const tdm_plan *p, size_t i, const tdm_tensor *const *inputs,
                                 void **bytes, size_t *size)
{
    tdm_err local;
    tdm_err *e = ctx ? &ctx->err : &local;
    err_clear(e);
    if (!p || !bytes || !size || i >= (size_t)p->n_nodes)
        return err_set(e, TDM_E_USAGE, "tdm_plan_extract_node needs a plan, a node index below its node count and "
                                      "out pointers");
    *bytes = NULL;
    *size = 0;
    return onnx_write_node_model(e, p->model ? p->model->gm : NULL, p->g, i, inputs, bytes, size);
}
