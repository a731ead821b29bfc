/* The OpenCL device's operators: supports() verdicts and run() per op.
 *
 * supports() answers from the node description alone: op type and opset,
 * element types, attribute values and the ranks/dims that are known.
 * Unknown dims are accepted: run() computes every output shape from the
 * actual input dims (and, for shape-like inputs — Reshape's shape, Slice's
 * starts, Resize's scales — from their constant value in the description
 * or, failing that, a small blocking read of the device buffer).
 *
 * Geometry (Conv and pool output sizes, pads, auto_pad) reuses the CPU
 * kernels' own op_nn_geom through a gr_node view of the description, so the
 * two devices always agree on shapes. */
#ifdef TDM_HAVE_OPENCL

#include "devices/opencl/ocl_ops.h"
#include "core/mem.h"
#include "core/tensor.h"
#include "ops/op.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ node views */

/* A gr_node over the description's attributes (borrowed), and the op's
 * resolved since-version. */
static tdm_status onode_init(tdm_err *e, const tdm_node_desc *d, onode *o)
{
    memset(o, 0, sizeof *o);
    o->d = d;
    o->gn.name = (char *)(uintptr_t)(d->name ? d->name : "");
    o->gn.op_type = (char *)(uintptr_t)d->op_type;
    o->gn.domain = (char *)(uintptr_t)(d->domain ? d->domain : "");
    o->gn.opset = d->opset;
    o->gn.n_attrs = d->n_attrs > 0 ? d->n_attrs : 0;
    if (o->gn.n_attrs) {
        if (!(o->attrs = mem_calloc((size_t)o->gn.n_attrs, sizeof *o->attrs)))
            return err_set(e, TDM_E_NOMEM, "out of memory");
        for (int i = 0; i < o->gn.n_attrs; i++) {
            const tdm_attr_desc *a = &d->attrs[i];
            gr_attr *g = &o->attrs[i];
            g->name = (char *)(uintptr_t)(a->name ? a->name : "");
            g->type = (gr_attr_type)a->type;
            g->f = a->f;
            g->i = a->i;
            g->s = (char *)(uintptr_t)a->s;
            g->s_len = a->s ? strlen(a->s) : 0;
            g->n = a->n;
            g->ints = (int64_t *)(uintptr_t)a->ints;
            g->floats = (float *)(uintptr_t)a->floats;
            if ((g->type == GA_INTS && !a->ints) || (g->type == GA_FLOATS && !a->floats))
                g->n = 0;
        }
    }
    o->gn.attrs = o->attrs;
    o->gn.n_inputs = d->n_inputs;
    o->gn.n_outputs = d->n_outputs;
    const char *dom = d->domain ? d->domain : "";
    if (!strcmp(dom, "ai.onnx"))
        dom = "";
    tdm_status st = op_resolve(e, dom, d->op_type, d->opset, &o->op, &o->version);
    o->gn.op = o->op;
    o->gn.version = o->version;
    return st;
}

static void onode_free(onode *o) { mem_free(o->attrs); }

int ocl_desc_present(const tdm_node_desc *d, int i)
{
    return i < d->n_inputs && d->inputs[i].name && d->inputs[i].name[0] && d->inputs[i].dtype != TDM_UNDEFINED;
}

int ocl_desc_out_present(const tdm_node_desc *d, int i)
{
    return i < d->n_outputs && d->outputs[i].name && d->outputs[i].name[0];
}

/* ------------------------------------------------------------- op table */

/* The kernels follow the ONNX definitions up to opset 17: a node whose op
 * tandem resolves to a newer definition (ReduceMean 18 takes its axes as
 * an input, Resize 18 antialiases, ...) is not theirs to run. */
#define OCL_MAX_SINCE 17

tdm_reason ocl_verdict(tdm_verdict *v, tdm_reason r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->detail, sizeof v->detail, fmt, ap);
    va_end(ap);
    v->reason = r;
    return r;
}

/* ------------------------------------------------------------------ table */

#define UN(name, code) {name, KIND_FLOAT, code, NULL, ocl_run_unary, 0}
#define BIN(name, code, chk) {name, KIND_FLOAT, code, chk, ocl_run_binary, 0}

static const ocl_opdef ocl_ops[] = {
    UN("Abs", U_ABS), UN("Neg", U_NEG), UN("Exp", U_EXP), UN("Log", U_LOG), UN("Sqrt", U_SQRT),
    UN("Reciprocal", U_RECIP), UN("Floor", U_FLOOR), UN("Ceil", U_CEIL), UN("Round", U_ROUND), UN("Sign", U_SIGN),
    UN("Erf", U_ERF), UN("Sin", U_SIN), UN("Cos", U_COS), UN("Tan", U_TAN), UN("Asin", U_ASIN), UN("Acos", U_ACOS),
    UN("Atan", U_ATAN), UN("Sinh", U_SINH), UN("Cosh", U_COSH), UN("Asinh", U_ASINH), UN("Acosh", U_ACOSH),
    UN("Atanh", U_ATANH), UN("Relu", U_RELU), UN("LeakyRelu", U_LEAKY), UN("Elu", U_ELU), UN("Selu", U_SELU),
    {"Celu", KIND_FLOAT, U_CELU, ocl_check_celu, ocl_run_unary, 0}, UN("Sigmoid", U_SIGMOID),
    UN("HardSigmoid", U_HSIGMOID), UN("HardSwish", U_HSWISH), UN("Softplus", U_SOFTPLUS),
    UN("Softsign", U_SOFTSIGN), UN("Tanh", U_TANH), UN("ThresholdedRelu", U_THRELU), UN("Clip", U_CLIP),
    BIN("Add", B_ADD, NULL), BIN("Sub", B_SUB, NULL), BIN("Mul", B_MUL, NULL), BIN("Div", B_DIV, NULL),
    BIN("Pow", B_POW, ocl_check_pow), BIN("Max", B_MAX, NULL), BIN("Min", B_MIN, NULL), BIN("Sum", B_ADD, NULL),
    BIN("Mean", B_ADD, NULL), BIN("PRelu", B_PRELU, NULL),
    {"BatchNormalization", KIND_FLOAT, 0, ocl_check_bn, ocl_run_bn, 0},
    {"Gemm", KIND_FLOAT, 0, NULL, ocl_run_gemm, 2},
    {"MatMul", KIND_FLOAT, 0, ocl_check_matmul, ocl_run_matmul, 6},
    {"Conv", KIND_FLOAT, 0, ocl_check_conv, ocl_run_conv, 4},
    {"ConvTranspose", KIND_FLOAT, 0, ocl_check_conv, ocl_run_convt, 4},
    {"MaxPool", KIND_FLOAT, 0, ocl_check_pool, ocl_run_pool, 4},
    {"AveragePool", KIND_FLOAT, 0, ocl_check_pool, ocl_run_pool, 4},
    {"GlobalAveragePool", KIND_FLOAT, 0, NULL, ocl_run_global_pool, 0},
    {"GlobalMaxPool", KIND_FLOAT, 0, NULL, ocl_run_global_pool, 0},
    {"ReduceMean", KIND_FLOAT, 0, NULL, ocl_run_reduce, 0},
    {"ReduceSum", KIND_FLOAT, 0, NULL, ocl_run_reduce, 0},
    {"ReduceMax", KIND_FLOAT, 0, NULL, ocl_run_reduce, 0},
    {"ReduceMin", KIND_FLOAT, 0, NULL, ocl_run_reduce, 0},
    {"Softmax", KIND_FLOAT, 0, NULL, ocl_run_softmax, 0},
    {"LogSoftmax", KIND_FLOAT, 0, NULL, ocl_run_softmax, 0},
    {"LayerNormalization", KIND_FLOAT, 0, ocl_check_layernorm, ocl_run_layernorm, 0},
    {"Resize", KIND_FLOAT, 0, ocl_check_resize, ocl_run_resize, 0},
    {"Identity", KIND_ANY, 0, NULL, ocl_run_identity, 16},
    {"Reshape", KIND_ANY, 0, NULL, ocl_run_reshape, 16},
    {"Flatten", KIND_ANY, 0, NULL, ocl_run_flatten, 16},
    {"Squeeze", KIND_ANY, 0, NULL, ocl_run_squeeze, 16},
    {"Unsqueeze", KIND_ANY, 0, NULL, ocl_run_unsqueeze, 16},
    {"Transpose", KIND_ANY, 0, NULL, ocl_run_transpose, 0},
    {"Expand", KIND_ANY, 0, NULL, ocl_run_expand, 0},
    {"Slice", KIND_ANY, 0, NULL, ocl_run_slice, 0},
    {"Concat", KIND_ANY, 0, NULL, ocl_run_concat, 16},
    {"Split", KIND_ANY, 0, NULL, ocl_run_split, 16},
    {"Gather", KIND_ANY, 0, NULL, ocl_run_gather, 16},
    {"Shape", KIND_SHAPE, 0, NULL, ocl_run_shape, 16},
};

static const ocl_opdef *find_op(const char *name)
{
    for (size_t i = 0; i < sizeof ocl_ops / sizeof ocl_ops[0]; i++)
        if (!strcmp(ocl_ops[i].name, name))
            return &ocl_ops[i];
    return NULL;
}

static int dtype_ok(int kind, tdm_dtype dt)
{
    size_t es = tdm_dtype_size(dt);
    switch (kind) {
    case KIND_FLOAT: return dt == TDM_FLOAT || dt == TDM_FLOAT16;
    case KIND_ANY: return dt != TDM_STRING && dt != TDM_UNDEFINED && (es == 1 || es == 2 || es == 4 || es == 8);
    default: return dt != TDM_STRING && dt != TDM_UNDEFINED;
    }
}

/* ------------------------------------------------------------- supports */

tdm_reason ocl_op_supports(const ocl_ctx *c, const tdm_node_desc *node, tdm_verdict *out)
{
    (void)c;
    out->reason = TDM_REASON_OK;
    out->detail[0] = 0;
    const char *dom = node->domain ? node->domain : "";
    if (*dom && strcmp(dom, "ai.onnx"))
        return ocl_verdict(out, TDM_REASON_OP_UNSUPPORTED, "opencl has no kernel for %s of domain %s", node->op_type, dom);
    const ocl_opdef *def = find_op(node->op_type);
    if (!def)
        return ocl_verdict(out, TDM_REASON_OP_UNSUPPORTED, "opencl has no kernel for %s", node->op_type);
    onode o;
    tdm_err e;
    err_clear(&e);
    if (onode_init(&e, node, &o)) {
        onode_free(&o);
        if (e.status == TDM_E_NOMEM)
            return ocl_verdict(out, TDM_REASON_OP_UNSUPPORTED, "opencl ran out of memory examining %s", node->op_type);
        return ocl_verdict(out, TDM_REASON_OP_UNSUPPORTED, "opencl has no kernel for %s at opset %lld", node->op_type,
                       (long long)node->opset);
    }
    tdm_reason rs = TDM_REASON_OK;
    if (o.version > OCL_MAX_SINCE) {
        rs = ocl_verdict(out, TDM_REASON_OP_UNSUPPORTED,
                     "opencl runs %s as defined up to opset %d; at opset %lld it is version %d of its definition",
                     node->op_type, OCL_MAX_SINCE, (long long)node->opset, o.version);
        goto done;
    }
    if (node->n_inputs < 1 || node->n_outputs < 1) {
        rs = ocl_verdict(out, TDM_REASON_OP_UNSUPPORTED, "opencl %s needs an input and an output", node->op_type);
        goto done;
    }
    /* element types: input 0 and every output (Shape: int64 output) */
    tdm_dtype dt = node->inputs[0].dtype;
    if (!dtype_ok(def->kind, dt)) {
        rs = ocl_verdict(out, TDM_REASON_DTYPE_UNSUPPORTED, "opencl %s takes %s, not %s", node->op_type,
                     def->kind == KIND_FLOAT ? "float32 and float16"
                                             : "tensors of 1-, 2-, 4- or 8-byte elements",
                     dt == TDM_UNDEFINED ? "an unknown element type" : tdm_dtype_name(dt));
        goto done;
    }
    if (def->kind == KIND_FLOAT && def->run == ocl_run_binary)
        for (int i = 1; i < node->n_inputs; i++)
            if (ocl_desc_present(node, i) && node->inputs[i].dtype != dt && strcmp(node->op_type, "Pow")) {
                rs = ocl_verdict(out, TDM_REASON_DTYPE_UNSUPPORTED, "opencl %s takes inputs of one type, not %s and %s",
                             node->op_type, tdm_dtype_name(dt), tdm_dtype_name(node->inputs[i].dtype));
                goto done;
            }
    /* ranks and sizes that are known */
    int max_rank = def->max_rank ? def->max_rank : OCL_MAX_RANK;
    for (int pass = 0; pass < 2; pass++) {
        int n = pass ? node->n_outputs : node->n_inputs;
        const tdm_tensor_desc *t = pass ? node->outputs : node->inputs;
        for (int i = 0; i < n; i++) {
            if (!t[i].name || !t[i].name[0] || t[i].rank < 0)
                continue;
            int is_data = pass == 1 || i == 0 || def->kind == KIND_FLOAT;
            if (is_data && t[i].rank > max_rank && !(pass == 1 && def->kind == KIND_SHAPE)) {
                rs = ocl_verdict(out, TDM_REASON_SHAPE_UNSUPPORTED, "opencl %s takes tensors of rank %d or less, not %d",
                             node->op_type, max_rank, t[i].rank);
                goto done;
            }
            int64_t cnt = 1;
            for (int k = 0; k < t[i].rank && cnt >= 0; k++)
                cnt = t[i].dims[k] < 0 ? -1 : (t[i].dims[k] > INT_MAX ? (int64_t)INT_MAX + 1 : cnt * t[i].dims[k]);
            if (cnt > INT_MAX) {
                rs = ocl_verdict(out, TDM_REASON_SHAPE_UNSUPPORTED,
                             "opencl %s takes tensors of at most %d elements (32-bit indexing)", node->op_type,
                             INT_MAX);
                goto done;
            }
        }
    }
    if (def->check)
        rs = def->check(&o, out);
done:
    onode_free(&o);
    if (rs == TDM_REASON_OK) {
        out->reason = TDM_REASON_OK;
        out->detail[0] = 0;
    }
    return rs;
}

/* ------------------------------------------------------------------- run */

tdm_status ocl_op_run(ocl_ctx *c, tdm_err *e, const tdm_node_desc *node, const tdm_device_tensor *in,
                      tdm_device_tensor *out)
{
    for (int i = 0; i < node->n_outputs; i++) {
        out[i].buf = NULL;
        out[i].bytes = 0;
        out[i].rank = 0;
        out[i].dtype = TDM_UNDEFINED;
    }
    tdm_verdict v;
    if (ocl_op_supports(c, node, &v) != TDM_REASON_OK)
        return err_set(e, TDM_E_UNSUPPORTED, "%s", v.detail);
    const ocl_opdef *def = find_op(node->op_type);
    onode o;
    tdm_status st = onode_init(e, node, &o);
    if (st) {
        onode_free(&o);
        return st;
    }
    orun r = {c, e, &o, def, in, node->n_inputs, out, node->n_outputs, OCL_P32};
    /* the input buffers must hold what their shapes say */
    for (int i = 0; i < node->n_inputs && !st; i++) {
        if (!in_present(&r, i))
            continue;
        size_t n, bytes;
        if (in[i].rank < 0 || in[i].rank > 16 || shape_count(in[i].rank, in[i].dims, &n) ||
            mem_mul(n, tdm_dtype_size(in[i].dtype), &bytes))
            st = ocl_fail(&r, TDM_E_RUNTIME, "input %d has an invalid shape", i);
        else if (bytes > in[i].bytes)
            st = ocl_fail(&r, TDM_E_RUNTIME, "input %d holds %zu bytes, its shape needs %zu", i, in[i].bytes, bytes);
        else if (n > (size_t)INT_MAX)
            st = ocl_fail(&r, TDM_E_UNSUPPORTED, "input %d has %zu elements; opencl kernels index at most %d", i, n,
                      INT_MAX);
    }
    if (!st && !in_present(&r, 0))
        st = ocl_fail(&r, TDM_E_MODEL, "input 0 is missing");
    if (!st) {
        if (def->kind == KIND_FLOAT) {
            if (in[0].dtype != TDM_FLOAT && in[0].dtype != TDM_FLOAT16)
                st = ocl_fail(&r, TDM_E_UNSUPPORTED, "takes float32 and float16, not %s", tdm_dtype_name(in[0].dtype));
            r.prog = in[0].dtype == TDM_FLOAT16 ? OCL_P16 : OCL_P32;
        }
    }
    if (!st)
        st = def->run(&r);
    if (st) {
        for (int i = 0; i < node->n_outputs; i++)
            if (out[i].buf) {
                ocl_buf_release(c, (cl_mem)out[i].buf);
                out[i].buf = NULL;
                out[i].bytes = 0;
            }
    }
    onode_free(&o);
    return st;
}

#else

/* Built without OpenCL: ocl_device.c provides the stubs. */
typedef int ocl_ops_unused;

#endif
