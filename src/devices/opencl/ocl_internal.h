/* Internals of the OpenCL device shared by ocl_device.c (context, memory,
 * programs, launches) and ocl_ops.c (supports and run per operator). Only
 * compiled with TDM_HAVE_OPENCL. */
#ifndef TDM_DEVICES_OPENCL_OCL_INTERNAL_H
#define TDM_DEVICES_OPENCL_OCL_INTERNAL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "devices/opencl/opencl.h"

#include <pthread.h>

/* The kernels of kernels.cl, in the order of ocl_kernel_names. */
typedef enum ocl_kid {
    K_UNARY, K_BINARY_FLAT, K_BINARY_BCAST, K_BATCHNORM, K_GEMM, K_GEMM_RB8, K_GEMM_RB1, K_CONV_IGEMM, K_CONV_OC8, K_CONV_PX8,
    K_CONV_DIRECT, K_CONVT_DIRECT,
    K_POOL2D, K_REDUCE_GEN, K_SOFTMAX, K_LAYERNORM, K_RESIZE_LIN_TT, K_RESIZE_LIN_TF, K_RESIZE_LIN_FF,
    K_RESIZE_LIN_FT, K_COPY_STRIDED_1, K_COPY_STRIDED_2, K_COPY_STRIDED_4, K_COPY_STRIDED_8, K_GATHER_1,
    K_GATHER_2, K_GATHER_4, K_GATHER_8, K_RESIZE_NEAR_1, K_RESIZE_NEAR_2, K_RESIZE_NEAR_4, K_RESIZE_NEAR_8,
    K_COUNT
} ocl_kid;

/* Programs: float32 and float16 builds of kernels.cl. */
enum { OCL_P32 = 0, OCL_P16 = 1, OCL_NPROG = 2 };

/* The tile of the tiled GEMM / implicit-GEMM kernels (TS x TS work-groups)
 * and the LayerNormalization work-group (LN_WG in kernels.cl). */
#define OCL_LN_WG 64

/* Ranks the kernels take (int8 shape vectors). */
#define OCL_MAX_RANK 8

typedef struct ocl_ctx {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    int index;
    char name[32];
    char desc[512];
    uint64_t global_mem, max_alloc, allocated;
    size_t max_wg;
    int ts;                  /* GEMM tile: 16, or 8 / 4 on small work-groups */
    int fp16_ext;            /* cl_khr_fp16 reported */
    int tiled;               /* GEMM/Conv through local-memory tiles (GPUs), else register blocks */
    pthread_mutex_t lock;
    cl_program prog[OCL_NPROG];
    int prog_failed[OCL_NPROG];
    char prog_err[OCL_NPROG][512];
    cl_kernel kern[OCL_NPROG][K_COUNT];
    size_t kern_wg[OCL_NPROG][K_COUNT]; /* CL_KERNEL_WORK_GROUP_SIZE */
    /* events of the last run(), for ocl_last_run_ms */
    cl_event *ev;
    size_t n_ev, cap_ev;
    double last_copy_ms;
    char err[TDM_ERR_MAX];   /* last failure of an allocation, copy or wait */
    /* test hooks */
    size_t guard;
    int inject_build, inject_enqueue;
} ocl_ctx;

/* "CL_OUT_OF_RESOURCES" for an OpenCL error code. */
const char *ocl_strerror(cl_int code);

/* Device buffers of bytes (with the debug guard); TDM_E_DEVICE with a
 * sentence in e past capacity or when the runtime refuses. Caller holds
 * the lock. */
tdm_status ocl_buf_new(ocl_ctx *c, tdm_err *e, size_t bytes, cl_mem *out);
void ocl_buf_release(ocl_ctx *c, cl_mem m);

/* A read-only device buffer initialised from host memory (tables for
 * Resize, Gather indices); released by the caller after the enqueue (the
 * runtime keeps it alive until the commands using it finish). */
tdm_status ocl_buf_from_host(ocl_ctx *c, tdm_err *e, const void *src, size_t bytes, cl_mem *out);

/* Blocking read of bytes at offset of a device buffer (small parameter
 * tensors: shapes, axes, scales). */
tdm_status ocl_read(ocl_ctx *c, tdm_err *e, cl_mem m, size_t offset, void *dst, size_t bytes);

/* The kernel kid of program prog (built on first use, cached). */
tdm_status ocl_kernel(ocl_ctx *c, tdm_err *e, int prog, ocl_kid kid, cl_kernel *out);

/* Kernel argument builder: the first failure sticks and is reported by
 * ocl_launch. */
typedef struct ocl_args {
    cl_kernel k;
    cl_uint i;
    cl_int err;
} ocl_args;
void ocl_arg_mem(ocl_args *a, cl_mem m);
void ocl_arg_int(ocl_args *a, int v);
void ocl_arg_float(ocl_args *a, float v);
void ocl_arg_int4(ocl_args *a, const int *v);
void ocl_arg_int8(ocl_args *a, const int *v);

/* Enqueues a.k over global[dims] work-items (rounded up to the work-group
 * size: local[] when given, else up to 64 along dimension 0) and records
 * its event for timing. TDM_E_DEVICE with a sentence naming what on
 * failure. */
tdm_status ocl_launch(ocl_ctx *c, tdm_err *e, const ocl_args *a, const char *what, int dims, const size_t *global,
                      const size_t *local);

/* Device-side copies, recorded for timing. */
tdm_status ocl_copy(ocl_ctx *c, tdm_err *e, cl_mem src, size_t src_off, cl_mem dst, size_t dst_off, size_t bytes);
/* Copies rows of row_bytes: src row r at src_off + r * src_pitch to dst
 * row r at dst_off + r * dst_pitch. */
tdm_status ocl_copy_rows(ocl_ctx *c, tdm_err *e, cl_mem src, size_t src_off, size_t src_pitch, cl_mem dst,
                         size_t dst_off, size_t dst_pitch, size_t row_bytes, size_t rows);
/* Writes host bytes into a device buffer (blocking). */
tdm_status ocl_write(ocl_ctx *c, tdm_err *e, cl_mem dst, const void *src, size_t bytes);

/* ---- ocl_ops.c ---- */

tdm_reason ocl_op_supports(const ocl_ctx *c, const tdm_node_desc *node, tdm_verdict *out);
tdm_status ocl_op_run(ocl_ctx *c, tdm_err *e, const tdm_node_desc *node, const tdm_device_tensor *in,
                      tdm_device_tensor *out);

/* ---- the embedded source (generated from kernels.cl) ---- */
extern const char ocl_kernels_src[];
extern const size_t ocl_kernels_src_len;

#endif
