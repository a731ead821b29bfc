/* The cpu device: the op table behind the device ABI. It supports every op
 * tandem knows at the model's opset for the element types of its kernels,
 * has unlimited memory in host buffers, and runs nodes through the
 * executor's host path (ext.run_host = the op's run hook). Its public run()
 * returns TDM_E_UNSUPPORTED: nodes placed on cpu never go through it.
 * Its estimates are a rough model (CPU_GFLOPS, CPU_GBPS), labelled modeled;
 * as a fused program runs a node (ext.estimate_fused_ms), a convolution the
 * kernel runs by Winograd takes 1/CPU_WINO43 (F(4x4, 3x3)) or 1/CPU_WINO23
 * (F(2x2, 3x3)) of the direct time: measured, not the multiplies' 4x and
 * 2.25x (README "Speed": 1.5-2.5x the im2col path on the models' shapes,
 * `test_perf_wino bench`; the transforms and their memory traffic). */
#include "devices/device_internal.h"
#include "core/mem.h"
#include "ops/nn.h"

#include <stdio.h>
#include <string.h>

#define CPU_GFLOPS 20.0 /* modeled sustained throughput */
#define CPU_GBPS 10.0   /* modeled memory bandwidth */
#define CPU_WINO43 2.0  /* Winograd F(4x4, 3x3) against im2col, the middle of the measured range */
#define CPU_WINO23 1.5  /* F(2x2, 3x3), a little over half F(4x4)'s multiply saving */

static const char *cpu_name(void *ctx)
{
    (void)ctx;
    return "cpu";
}

static const char *cpu_description(void *ctx)
{
    (void)ctx;
    return "host CPU: every operator tandem knows, in fp32 and the other ONNX element types";
}

static tdm_reason cpu_supports(void *ctx, const tdm_node_desc *n, tdm_verdict *out)
{
    (void)ctx;
    tdm_err e;
    int op, ver;
    err_clear(&e);
    if (op_resolve(&e, n->domain, n->op_type, n->opset, &op, &ver) != TDM_OK)
        return dev_verdict(out, TDM_REASON_OP_UNSUPPORTED, "cpu has no kernel for %s: %s", n->op_type, e.msg);
    if (n->n_inputs > 0 && n->inputs[0].dtype != TDM_UNDEFINED) {
        tdm_dtype dt = n->inputs[0].dtype;
        if ((int)dt < 0 || (int)dt >= 32 || !(op_table[op].dtypes & DT_BIT(dt)))
            return dev_verdict(out, TDM_REASON_DTYPE_UNSUPPORTED, "cpu has no %s kernel for %s (input '%s')",
                               tdm_dtype_name(dt), n->op_type, n->inputs[0].name ? n->inputs[0].name : "");
    }
    return dev_verdict(out, TDM_REASON_OK, "cpu runs %s", n->op_type);
}

static uint64_t cpu_memory_capacity(void *ctx)
{
    (void)ctx;
    return UINT64_MAX;
}

static tdm_status cpu_buffer_alloc(void *ctx, size_t bytes, void **buf)
{
    (void)ctx;
    *buf = mem_alloc(bytes);
    return *buf ? TDM_OK : TDM_E_NOMEM;
}

static void cpu_buffer_free(void *ctx, void *buf)
{
    (void)ctx;
    mem_free(buf);
}

static tdm_status cpu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes)
        memcpy(dst, src, bytes);
    return TDM_OK;
}

static tdm_status cpu_run(void *ctx, const tdm_node_desc *node, const tdm_device_tensor *inputs,
                          tdm_device_tensor *outputs, char *err, size_t err_size)
{
    (void)ctx;
    (void)inputs;
    (void)outputs;
    if (err && err_size)
        snprintf(err, err_size, "cpu runs %s through tandem's host path (run_host), not the device run() entry",
                 node && node->op_type ? node->op_type : "nodes");
    return TDM_E_UNSUPPORTED;
}

/* The model; fused: as a fused program runs the node (Winograd). */
static double cpu_model_ms(const tdm_node_desc *node, int fused, int *modeled)
{
    if (modeled)
        *modeled = 1;
    double f = dev_node_flops(node);
    int m = fused ? dev_conv_winograd_tile(node) : 0;
    if (m > 0)
        f /= m == 4 ? CPU_WINO43 : CPU_WINO23;
    return f / (CPU_GFLOPS * 1e6) + dev_node_bytes(node) / (CPU_GBPS * 1e6);
}

static double cpu_estimate_ms(void *ctx, const tdm_node_desc *node, int *modeled)
{
    (void)ctx;
    return cpu_model_ms(node, 0, modeled);
}

static double cpu_estimate_fused_ms(void *ctx, const tdm_node_desc *node, int *modeled)
{
    (void)ctx;
    return cpu_model_ms(node, 1, modeled);
}

static double cpu_copy_ms(void *ctx, size_t bytes, int to_device, int *modeled)
{
    (void)ctx;
    (void)bytes;
    (void)to_device;
    if (modeled)
        *modeled = 0;
    return 0;
}

static tdm_status cpu_run_host(void *ctx, op_ctx *op)
{
    (void)ctx;
    if (op->node->op < 0 || op->node->op >= OP_COUNT)
        return err_set(op->err, TDM_E_UNSUPPORTED, "cpu has no kernel for %s", op->node->op_type);
    return op_run(op); /* a QDQ group in integer arithmetic (ops/qdq.h) */
}

static tdm_status cpu_reserve(void *ctx, size_t bytes, tdm_err *e)
{
    (void)ctx;
    (void)bytes;
    (void)e;
    return TDM_OK;
}

static void cpu_release(void *ctx, size_t bytes)
{
    (void)ctx;
    (void)bytes;
}

static const tdm_device_iface cpu_iface = {
    .api_version = TDM_DEVICE_API_VERSION,
    .name = cpu_name,
    .description = cpu_description,
    .supports = cpu_supports,
    .memory_capacity = cpu_memory_capacity,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .copy_to_device = cpu_copy,
    .copy_to_host = cpu_copy,
    .run = cpu_run,
    .estimate_ms = cpu_estimate_ms,
    .copy_ms = cpu_copy_ms,
    .take_fallbacks = NULL,
    .destroy = NULL,
};

static const dev_ext cpu_ext = {
    .run_host = cpu_run_host,
    .reserve = cpu_reserve,
    .release = cpu_release,
    .precision = TDM_FLOAT,
    .estimate_fused_ms = cpu_estimate_fused_ms,
};

tdm_status dev_cpu_open(tdm_err *e, dev_instance *out)
{
    memset(out, 0, sizeof *out);
    /* TANDEM_ISA names the instruction set of the kernels behind it (ops/isa.c) */
    const char *isa_err = op_isa_error();
    if (isa_err)
        return err_set(e, TDM_E_USAGE, "%s", isa_err);
    if (!(out->name = mem_strdup("cpu")))
        return err_set(e, TDM_E_NOMEM, "out of memory");
    out->dev.iface = &cpu_iface;
    out->dev.ctx = NULL;
    out->kind = DEV_KIND_CPU;
    out->ext = &cpu_ext;
    return TDM_OK;
}
