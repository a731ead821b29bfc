/* The OpenCL device, `opencl[:N]`: a real accelerator through the OpenCL
 * 1.2 ICD loader (PoCL in the tests). It implements the public device ABI
 * (include/tandem/device.h) on real device memory:
 *
 *   buffer_alloc / buffer_free   clCreateBuffer / clReleaseMemObject (void *
 *                                is the cl_mem); fails with TDM_E_DEVICE past
 *                                the device's global memory or its largest
 *                                allocation
 *   copy_to_device / _to_host    blocking clEnqueueWriteBuffer / ReadBuffer
 *   run                          enqueues OpenCL kernels on device buffers
 *                                (in order, on one profiling queue) and
 *                                returns without waiting; output shapes are
 *                                computed from the actual input dims
 *   supports                     honest verdicts: op, dtype, attribute and
 *                                shape combinations without a kernel are
 *                                refused with the reason code and a sentence
 *
 * The kernels (kernels.cl) are built once per device context on first use,
 * for float32 and, when a float16 tensor first appears, float16 (stored as
 * half, computed in float: vload_half/vstore_half are core OpenCL 1.2, so
 * float16 runs on every device; cl_khr_fp16 is reported, not required).
 * Kernel objects are cached per program. A build failure, an allocation
 * failure or a failed enqueue returns TDM_E_DEVICE with one sentence; the
 * library never crashes on them.
 *
 * Without OpenCL at configure time (TDM_HAVE_OPENCL undefined) these
 * functions still exist: ocl_probe reports "tandem was built without
 * OpenCL" and ocl_device_open fails with TDM_E_DEVICE.
 *
 * Thread safety: supports() may be called from several threads; run(),
 * the buffers and the copies are serialised by a per-device lock. */
#ifndef TDM_DEVICES_OPENCL_OPENCL_H
#define TDM_DEVICES_OPENCL_OPENCL_H

#include "tandem/device.h"
#include "core/err.h"

#include <stddef.h>
#include <stdint.h>

/* One OpenCL device as `tandem devices` lists it. */
typedef struct ocl_info {
    int index;               /* N of opencl:N (platforms in order, then their devices) */
    char name[128];          /* CL_DEVICE_NAME ("pthread-haswell-AMD EPYC") */
    char platform[128];      /* CL_PLATFORM_NAME ("Portable Computing Language") */
    char version[128];       /* CL_DEVICE_VERSION ("OpenCL 3.0 PoCL …") */
    char type[16];           /* "gpu", "cpu", "accelerator", "other" */
    uint64_t memory_bytes;   /* CL_DEVICE_GLOBAL_MEM_SIZE */
    uint64_t max_alloc;      /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    int fp16;                /* the device reports cl_khr_fp16 */
} ocl_info;

/* Lists the OpenCL devices. *out receives an array of *n entries (free with
 * mem_free; NULL when *n is 0). When there is none, why (may be NULL)
 * receives one sentence saying why: "tandem was built without OpenCL",
 * "no OpenCL runtime found (no ICD loader platform: install an OpenCL
 * driver such as pocl-opencl-icd)", "no OpenCL platform", "no OpenCL
 * device on any platform". Fails only on out of memory (TDM_E_NOMEM). */
tdm_status ocl_probe(tdm_err *e, ocl_info **out, size_t *n, char *why, size_t why_size);

/* Opens device number index (opencl:N; `opencl` is index 0) into *out
 * (iface + ctx; release with out->iface->destroy(out->ctx)). Its name() is
 * "opencl" for index 0 and "opencl:N" otherwise; description() is one line
 * ("pthread-haswell-AMD EPYC (Portable Computing Language, OpenCL 3.0 PoCL
 * …), 5.96 GiB, no cl_khr_fp16"). An index with no device, or a context or
 * queue that cannot be created → TDM_E_DEVICE with one sentence in e. */
tdm_status ocl_device_open(tdm_err *e, int index, tdm_device *out);

/* ---- internal accessors (take the tdm_device from ocl_device_open) ---- */

/* Non-zero when d is an OpenCL device of this library. */
int ocl_is_device(const tdm_device *d);

/* Device time in milliseconds of the kernels and device-side copies the
 * last run() enqueued (CL_QUEUE_PROFILING_ENABLE events, END - START
 * summed), waiting for them to finish. Returns -1 when unavailable (no
 * run yet, or the device failed while executing them — the failure is then
 * described by ocl_last_error). */
double ocl_last_run_ms(const tdm_device *d);

/* Device time in milliseconds of the last copy_to_device / copy_to_host
 * (the transfer's event), -1 when unavailable. */
double ocl_last_copy_ms(const tdm_device *d);

/* The sentence describing the last failure of buffer_alloc, a copy or a
 * wait (run() writes its own sentence into err); "" when none. */
const char *ocl_last_error(const tdm_device *d);

/* Blocks until every enqueued command has finished; TDM_E_DEVICE with the
 * sentence in ocl_last_error when one failed. */
tdm_status ocl_finish(const tdm_device *d);

/* ---- test hooks (backend-ops) ---- */

/* From now on every buffer_alloc allocates guard extra bytes after the
 * requested size and fills the whole buffer with the byte 0xFF (a NaN
 * pattern for floats, so unwritten outputs show). 0 turns it off. */
void ocl_debug_set_guard(const tdm_device *d, size_t guard);
/* 1 when the guard bytes after bytes in buf still hold 0xFF, 0 when a
 * kernel wrote past the end, -1 when they cannot be read. */
int ocl_debug_guard_ok(const tdm_device *d, void *buf, size_t bytes);
/* Fault injection: the next program build compiles a broken source
 * (what = 1), or the next kernel enqueue fails with CL_OUT_OF_RESOURCES
 * (what = 2). The built program cache is dropped for what = 1. Kernel
 * choice: what = 3 makes GEMM and Conv use the local-memory tiled kernels
 * (the default on GPUs), what = 4 the register-blocked ones (the default
 * elsewhere), so that tests cover both. */
void ocl_debug_inject(const tdm_device *d, int what);

#endif
