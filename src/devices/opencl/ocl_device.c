/* The OpenCL device: discovery, context and queue, device memory, copies,
 * the program and kernel caches, launches with profiling events, and the
 * tdm_device_iface table. The operators live in ocl_ops.c. */
#include "devices/opencl/opencl.h"
#include "core/mem.h"

#include <stdio.h>
#include <string.h>

#ifdef TDM_HAVE_OPENCL

#include "devices/opencl/ocl_internal.h"

#include <stdarg.h>

static const char *const ocl_kernel_names[K_COUNT] = {
    "unary", "binary_flat", "binary_bcast", "batchnorm", "gemm", "gemm_rb8", "gemm_rb1", "conv_igemm", "conv_oc8", "conv_px8",
    "conv_direct", "convt_direct",
    "pool2d", "reduce_gen", "softmax", "layernorm", "resize_lin_tt", "resize_lin_tf", "resize_lin_ff",
    "resize_lin_ft", "copy_strided_1", "copy_strided_2", "copy_strided_4", "copy_strided_8", "gather_1",
    "gather_2", "gather_4", "gather_8", "resize_near_1", "resize_near_2", "resize_near_4", "resize_near_8"};

const char *ocl_strerror(cl_int code)
{
    switch (code) {
    case CL_SUCCESS: return "CL_SUCCESS";
    case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE";
    case CL_COMPILER_NOT_AVAILABLE: return "CL_COMPILER_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
    case CL_PROFILING_INFO_NOT_AVAILABLE: return "CL_PROFILING_INFO_NOT_AVAILABLE";
    case CL_MEM_COPY_OVERLAP: return "CL_MEM_COPY_OVERLAP";
    case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
    case CL_MISALIGNED_SUB_BUFFER_OFFSET: return "CL_MISALIGNED_SUB_BUFFER_OFFSET";
    case CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST: return "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
    case CL_INVALID_DEVICE: return "CL_INVALID_DEVICE";
    case CL_INVALID_CONTEXT: return "CL_INVALID_CONTEXT";
    case CL_INVALID_COMMAND_QUEUE: return "CL_INVALID_COMMAND_QUEUE";
    case CL_INVALID_MEM_OBJECT: return "CL_INVALID_MEM_OBJECT";
    case CL_INVALID_BUILD_OPTIONS: return "CL_INVALID_BUILD_OPTIONS";
    case CL_INVALID_PROGRAM_EXECUTABLE: return "CL_INVALID_PROGRAM_EXECUTABLE";
    case CL_INVALID_KERNEL_NAME: return "CL_INVALID_KERNEL_NAME";
    case CL_INVALID_KERNEL: return "CL_INVALID_KERNEL";
    case CL_INVALID_ARG_INDEX: return "CL_INVALID_ARG_INDEX";
    case CL_INVALID_ARG_VALUE: return "CL_INVALID_ARG_VALUE";
    case CL_INVALID_ARG_SIZE: return "CL_INVALID_ARG_SIZE";
    case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_WORK_DIMENSION: return "CL_INVALID_WORK_DIMENSION";
    case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_WORK_ITEM_SIZE: return "CL_INVALID_WORK_ITEM_SIZE";
    case CL_INVALID_GLOBAL_OFFSET: return "CL_INVALID_GLOBAL_OFFSET";
    case CL_INVALID_EVENT_WAIT_LIST: return "CL_INVALID_EVENT_WAIT_LIST";
    case CL_INVALID_EVENT: return "CL_INVALID_EVENT";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_GLOBAL_WORK_SIZE: return "CL_INVALID_GLOBAL_WORK_SIZE";
    case CL_INVALID_PLATFORM: return "CL_INVALID_PLATFORM";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "an unknown OpenCL error";
    }
}

/* ------------------------------------------------------------- discovery */

typedef struct ocl_found {
    cl_platform_id platform;
    cl_device_id device;
} ocl_found;

/* Every device of every platform, in order; why says why there is none. */
static tdm_status ocl_enumerate(tdm_err *e, ocl_found **out, size_t *n, char *why, size_t why_size)
{
    cl_uint np = 0;
    cl_platform_id *plats = NULL;
    ocl_found *f = NULL;
    size_t nf = 0, cap = 0;
    *out = NULL;
    *n = 0;
    cl_int rc = clGetPlatformIDs(0, NULL, &np);
    if (rc == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (rc == CL_SUCCESS && np == 0)) {
        if (why)
            snprintf(why, why_size, "%s",
                     rc == -1001 ? "no OpenCL runtime found (the ICD loader lists no platform: install an OpenCL "
                                   "driver such as pocl-opencl-icd)"
                                 : "no OpenCL platform");
        return TDM_OK;
    }
    if (rc != CL_SUCCESS) {
        if (why)
            snprintf(why, why_size, "no OpenCL runtime found (clGetPlatformIDs failed with %s)", ocl_strerror(rc));
        return TDM_OK;
    }
    if (!(plats = mem_calloc(np, sizeof *plats)))
        return err_set(e, TDM_E_NOMEM, "out of memory listing OpenCL platforms");
    if ((rc = clGetPlatformIDs(np, plats, NULL)) != CL_SUCCESS) {
        mem_free(plats);
        if (why)
            snprintf(why, why_size, "no OpenCL runtime found (clGetPlatformIDs failed with %s)", ocl_strerror(rc));
        return TDM_OK;
    }
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0)
            continue;
        cl_device_id *devs = mem_calloc(nd, sizeof *devs);
        if (!devs || mem_grow((void **)&f, &cap, nf + nd, sizeof *f)) {
            mem_free(devs);
            mem_free(f);
            mem_free(plats);
            return err_set(e, TDM_E_NOMEM, "out of memory listing OpenCL devices");
        }
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, devs, NULL) == CL_SUCCESS)
            for (cl_uint d = 0; d < nd; d++) {
                f[nf].platform = plats[p];
                f[nf].device = devs[d];
                nf++;
            }
        mem_free(devs);
    }
    mem_free(plats);
    if (nf == 0 && why)
        snprintf(why, why_size, "no OpenCL device on any of the %u OpenCL platform(s)", (unsigned)np);
    *out = f;
    *n = nf;
    return TDM_OK;
}

static void dev_str(cl_device_id d, cl_device_info what, char *buf, size_t size)
{
    buf[0] = 0;
    if (clGetDeviceInfo(d, what, size, buf, NULL) != CL_SUCCESS)
        buf[0] = 0;
    buf[size - 1] = 0;
}

static int dev_has_ext(cl_device_id d, const char *ext)
{
    size_t len = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &len) != CL_SUCCESS || len == 0)
        return 0;
    char *s = mem_alloc(len + 1);
    if (!s)
        return 0;
    int has = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, len, s, NULL) == CL_SUCCESS) {
        s[len] = 0;
        size_t el = strlen(ext);
        for (const char *p = strstr(s, ext); p && !has; p = strstr(p + 1, ext))
            has = (p == s || p[-1] == ' ') && (p[el] == 0 || p[el] == ' ');
    }
    mem_free(s);
    return has;
}

static void fill_info(const ocl_found *f, int index, ocl_info *o)
{
    memset(o, 0, sizeof *o);
    o->index = index;
    dev_str(f->device, CL_DEVICE_NAME, o->name, sizeof o->name);
    dev_str(f->device, CL_DEVICE_VERSION, o->version, sizeof o->version);
    if (clGetPlatformInfo(f->platform, CL_PLATFORM_NAME, sizeof o->platform, o->platform, NULL) != CL_SUCCESS)
        o->platform[0] = 0;
    o->platform[sizeof o->platform - 1] = 0;
    cl_ulong v = 0;
    if (clGetDeviceInfo(f->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof v, &v, NULL) == CL_SUCCESS)
        o->memory_bytes = v;
    v = 0;
    if (clGetDeviceInfo(f->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof v, &v, NULL) == CL_SUCCESS)
        o->max_alloc = v;
    cl_device_type t = 0;
    if (clGetDeviceInfo(f->device, CL_DEVICE_TYPE, sizeof t, &t, NULL) != CL_SUCCESS)
        t = 0;
    snprintf(o->type, sizeof o->type, "%s",
             (t & CL_DEVICE_TYPE_GPU) ? "gpu" : (t & CL_DEVICE_TYPE_CPU) ? "cpu"
             : (t & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator" : "other");
    o->fp16 = dev_has_ext(f->device, "cl_khr_fp16");
}

tdm_status ocl_probe(tdm_err *e, ocl_info **out, size_t *n, char *why, size_t why_size)
{
    ocl_found *f;
    size_t nf;
    *out = NULL;
    *n = 0;
    if (why && why_size)
        why[0] = 0;
    tdm_status st = ocl_enumerate(e, &f, &nf, why, why_size);
    if (st || nf == 0) {
        mem_free(f);
        return st;
    }
    ocl_info *o = mem_calloc(nf, sizeof *o);
    if (!o) {
        mem_free(f);
        return err_set(e, TDM_E_NOMEM, "out of memory listing OpenCL devices");
    }
    for (size_t i = 0; i < nf; i++)
        fill_info(&f[i], (int)i, &o[i]);
    mem_free(f);
    *out = o;
    *n = nf;
    return TDM_OK;
}

/* ---------------------------------------------------------------- memory */

tdm_status ocl_buf_new(ocl_ctx *c, tdm_err *e, size_t bytes, cl_mem *out)
{
    size_t total;
    *out = NULL;
    if (mem_add(bytes ? bytes : 1, c->guard, &total))
        return err_set(e, TDM_E_DEVICE, "%s: a buffer of %zu bytes is too large", c->name, bytes);
    if ((uint64_t)total > c->max_alloc)
        return err_set(e, TDM_E_DEVICE,
                       "%s is out of memory: a buffer of %zu bytes exceeds the device's largest allocation (%llu bytes)",
                       c->name, bytes, (unsigned long long)c->max_alloc);
    if (c->allocated + (uint64_t)total > c->global_mem)
        return err_set(e, TDM_E_DEVICE, "%s is out of memory: %zu bytes requested, %llu of %llu in use", c->name,
                       bytes, (unsigned long long)c->allocated, (unsigned long long)c->global_mem);
    cl_int rc;
    cl_mem m = clCreateBuffer(c->context, CL_MEM_READ_WRITE, total, NULL, &rc);
    if (!m || rc != CL_SUCCESS)
        return err_set(e, TDM_E_DEVICE, "%s could not allocate %zu bytes: %s", c->name, bytes, ocl_strerror(rc));
    if (c->guard) {
        cl_uchar pat = 0xFF;
        rc = clEnqueueFillBuffer(c->queue, m, &pat, 1, 0, total, 0, NULL, NULL);
        if (rc == CL_SUCCESS)
            rc = clFinish(c->queue);
        if (rc != CL_SUCCESS) {
            clReleaseMemObject(m);
            return err_set(e, TDM_E_DEVICE, "%s could not fill a new buffer: %s", c->name, ocl_strerror(rc));
        }
    }
    c->allocated += total;
    *out = m;
    return TDM_OK;
}

void ocl_buf_release(ocl_ctx *c, cl_mem m)
{
    if (!m)
        return;
    size_t sz = 0;
    if (clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof sz, &sz, NULL) == CL_SUCCESS)
        c->allocated = c->allocated >= sz ? c->allocated - sz : 0;
    clReleaseMemObject(m);
}

tdm_status ocl_buf_from_host(ocl_ctx *c, tdm_err *e, const void *src, size_t bytes, cl_mem *out)
{
    cl_int rc;
    *out = clCreateBuffer(c->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes ? bytes : 1,
                          bytes ? (void *)(uintptr_t)src : (void *)&c->guard, &rc);
    if (!*out || rc != CL_SUCCESS) {
        *out = NULL;
        return err_set(e, TDM_E_DEVICE, "%s could not allocate a parameter table of %zu bytes: %s", c->name, bytes,
                       ocl_strerror(rc));
    }
    return TDM_OK;
}

static tdm_status track_event(ocl_ctx *c, tdm_err *e, cl_event ev)
{
    if (mem_grow((void **)&c->ev, &c->cap_ev, c->n_ev + 1, sizeof *c->ev)) {
        clWaitForEvents(1, &ev);
        clReleaseEvent(ev);
        return err_set(e, TDM_E_NOMEM, "out of memory recording OpenCL events");
    }
    c->ev[c->n_ev++] = ev;
    return TDM_OK;
}

static void drop_events(ocl_ctx *c)
{
    for (size_t i = 0; i < c->n_ev; i++)
        clReleaseEvent(c->ev[i]);
    c->n_ev = 0;
}

static double event_ms(cl_event ev)
{
    cl_ulong t0 = 0, t1 = 0;
    if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) != CL_SUCCESS ||
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) != CL_SUCCESS || t1 < t0)
        return 0;
    return (double)(t1 - t0) * 1e-6;
}

tdm_status ocl_read(ocl_ctx *c, tdm_err *e, cl_mem m, size_t offset, void *dst, size_t bytes)
{
    if (!bytes)
        return TDM_OK;
    cl_int rc = clEnqueueReadBuffer(c->queue, m, CL_TRUE, offset, bytes, dst, 0, NULL, NULL);
    if (rc != CL_SUCCESS)
        return err_set(e, TDM_E_DEVICE, "%s could not read %zu bytes back: %s", c->name, bytes, ocl_strerror(rc));
    return TDM_OK;
}

tdm_status ocl_write(ocl_ctx *c, tdm_err *e, cl_mem dst, const void *src, size_t bytes)
{
    if (!bytes)
        return TDM_OK;
    cl_event ev = NULL;
    cl_int rc = clEnqueueWriteBuffer(c->queue, dst, CL_TRUE, 0, bytes, src, 0, NULL, &ev);
    if (rc != CL_SUCCESS)
        return err_set(e, TDM_E_DEVICE, "%s could not write %zu bytes: %s", c->name, bytes, ocl_strerror(rc));
    return track_event(c, e, ev);
}

tdm_status ocl_copy(ocl_ctx *c, tdm_err *e, cl_mem src, size_t src_off, cl_mem dst, size_t dst_off, size_t bytes)
{
    if (!bytes)
        return TDM_OK;
    cl_event ev = NULL;
    cl_int rc = c->inject_enqueue ? CL_OUT_OF_RESOURCES
                                  : clEnqueueCopyBuffer(c->queue, src, dst, src_off, dst_off, bytes, 0, NULL, &ev);
    c->inject_enqueue = 0;
    if (rc != CL_SUCCESS)
        return err_set(e, TDM_E_DEVICE, "%s could not enqueue a copy of %zu bytes: %s", c->name, bytes,
                       ocl_strerror(rc));
    return track_event(c, e, ev);
}

tdm_status ocl_copy_rows(ocl_ctx *c, tdm_err *e, cl_mem src, size_t src_off, size_t src_pitch, cl_mem dst,
                         size_t dst_off, size_t dst_pitch, size_t row_bytes, size_t rows)
{
    if (!row_bytes || !rows)
        return TDM_OK;
    if (rows == 1 || (src_pitch == row_bytes && dst_pitch == row_bytes))
        return ocl_copy(c, e, src, src_off, dst, dst_off, row_bytes * rows);
    size_t so[3] = {src_off, 0, 0}, dof[3] = {dst_off, 0, 0}, region[3] = {row_bytes, rows, 1};
    cl_event ev = NULL;
    cl_int rc = c->inject_enqueue ? CL_OUT_OF_RESOURCES
                                  : clEnqueueCopyBufferRect(c->queue, src, dst, so, dof, region, src_pitch, 0,
                                                            dst_pitch, 0, 0, NULL, &ev);
    c->inject_enqueue = 0;
    if (rc != CL_SUCCESS)
        return err_set(e, TDM_E_DEVICE, "%s could not enqueue a copy of %zu rows of %zu bytes: %s", c->name, rows,
                       row_bytes, ocl_strerror(rc));
    return track_event(c, e, ev);
}

/* -------------------------------------------------------------- programs */

/* The first line of the build log that names an error, or its first line. */
static void log_line(ocl_ctx *c, cl_program p, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = 0;
    if (clGetProgramBuildInfo(p, c->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &len) != CL_SUCCESS || len == 0)
        return;
    char *log = mem_alloc(len + 1);
    if (!log)
        return;
    if (clGetProgramBuildInfo(p, c->device, CL_PROGRAM_BUILD_LOG, len, log, NULL) == CL_SUCCESS) {
        log[len] = 0;
        const char *s = strstr(log, "error");
        if (!s)
            s = log;
        while (*s == '\n' || *s == ' ')
            s++;
        size_t k = 0;
        while (s[k] && s[k] != '\n' && k + 1 < size) {
            buf[k] = s[k];
            k++;
        }
        buf[k] = 0;
    }
    mem_free(log);
}

static tdm_status build_program(ocl_ctx *c, tdm_err *e, int prog)
{
    static const char broken[] = "__kernel void broken(__global float *x) { x[0] = undefined_symbol; }\n";
    const char *what = prog == OCL_P16 ? "float16" : "float32";
    if (c->prog[prog])
        return TDM_OK;
    if (c->prog_failed[prog])
        return err_set(e, TDM_E_DEVICE, "%s", c->prog_err[prog]);
    const char *src = c->inject_build ? broken : ocl_kernels_src;
    size_t len = c->inject_build ? sizeof broken - 1 : ocl_kernels_src_len;
    c->inject_build = 0;
    char opts[160];
    snprintf(opts, sizeof opts, "-cl-std=CL1.2 -DTS=%d%s", c->ts, prog == OCL_P16 ? " -DTDM_FP16=1" : "");
    cl_int rc;
    cl_program p = clCreateProgramWithSource(c->context, 1, &src, &len, &rc);
    if (!p || rc != CL_SUCCESS) {
        snprintf(c->prog_err[prog], sizeof c->prog_err[prog], "%s could not create the %s kernel program: %s",
                 c->name, what, ocl_strerror(rc));
        c->prog_failed[prog] = 1;
        return err_set(e, TDM_E_DEVICE, "%s", c->prog_err[prog]);
    }
    rc = clBuildProgram(p, 1, &c->device, opts, NULL, NULL);
    if (rc != CL_SUCCESS) {
        char line[300];
        log_line(c, p, line, sizeof line);
        snprintf(c->prog_err[prog], sizeof c->prog_err[prog], "%s could not build its %s kernels (%s)%s%s", c->name,
                 what, ocl_strerror(rc), line[0] ? ": " : "", line);
        c->prog_failed[prog] = 1;
        clReleaseProgram(p);
        return err_set(e, TDM_E_DEVICE, "%s", c->prog_err[prog]);
    }
    c->prog[prog] = p;
    return TDM_OK;
}

tdm_status ocl_kernel(ocl_ctx *c, tdm_err *e, int prog, ocl_kid kid, cl_kernel *out)
{
    if (c->kern[prog][kid]) {
        *out = c->kern[prog][kid];
        return TDM_OK;
    }
    tdm_status st = build_program(c, e, prog);
    if (st)
        return st;
    cl_int rc;
    cl_kernel k = clCreateKernel(c->prog[prog], ocl_kernel_names[kid], &rc);
    if (!k || rc != CL_SUCCESS)
        return err_set(e, TDM_E_DEVICE, "%s could not create kernel %s: %s", c->name, ocl_kernel_names[kid],
                       ocl_strerror(rc));
    size_t wg = 0;
    if (clGetKernelWorkGroupInfo(k, c->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL) != CL_SUCCESS ||
        wg == 0)
        wg = 1;
    c->kern[prog][kid] = k;
    c->kern_wg[prog][kid] = wg;
    *out = k;
    return TDM_OK;
}

/* Sets the next argument; the first error sticks (ocl_args). */
static void arg_set(ocl_args *a, size_t size, const void *v)
{
    if (!a->err)
        a->err = clSetKernelArg(a->k, a->i, size, v);
    a->i++;
}

void ocl_arg_mem(ocl_args *a, cl_mem m) { arg_set(a, sizeof m, &m); }

void ocl_arg_int(ocl_args *a, int v)
{
    cl_int x = v;
    arg_set(a, sizeof x, &x);
}

void ocl_arg_float(ocl_args *a, float v)
{
    cl_float x = v;
    arg_set(a, sizeof x, &x);
}

void ocl_arg_int4(ocl_args *a, const int *v)
{
    cl_int4 x;
    for (int i = 0; i < 4; i++)
        x.s[i] = v[i];
    arg_set(a, sizeof x, &x);
}

void ocl_arg_int8(ocl_args *a, const int *v)
{
    cl_int8 x;
    for (int i = 0; i < 8; i++)
        x.s[i] = v[i];
    arg_set(a, sizeof x, &x);
}

static size_t kernel_wg(ocl_ctx *c, cl_kernel k)
{
    for (int p = 0; p < OCL_NPROG; p++)
        for (int i = 0; i < K_COUNT; i++)
            if (c->kern[p][i] == k)
                return c->kern_wg[p][i];
    return 1;
}

tdm_status ocl_launch(ocl_ctx *c, tdm_err *e, const ocl_args *a, const char *what, int dims, const size_t *global,
                      const size_t *local)
{
    size_t g[3], l[3];
    if (a->err)
        return err_set(e, TDM_E_DEVICE, "%s could not set the arguments of the %s kernel: %s", c->name, what,
                       ocl_strerror(a->err));
    for (int i = 0; i < dims; i++)
        if (global[i] == 0)
            return TDM_OK; /* nothing to compute */
    size_t wg = kernel_wg(c, a->k);
    if (local) {
        size_t prod = 1;
        for (int i = 0; i < dims; i++)
            prod *= local[i];
        if (prod > wg)
            return err_set(e, TDM_E_DEVICE,
                           "%s: the %s kernel needs work-groups of %zu work-items, the device allows %zu", c->name,
                           what, prod, wg);
        for (int i = 0; i < dims; i++)
            l[i] = local[i];
    } else {
        size_t l0 = 64;
        while (l0 > wg)
            l0 >>= 1;
        l[0] = l0;
        for (int i = 1; i < dims; i++)
            l[i] = 1;
    }
    for (int i = 0; i < dims; i++) {
        if (global[i] > (size_t)INT32_MAX)
            return err_set(e, TDM_E_DEVICE, "%s: the %s kernel would need %zu work-items", c->name, what, global[i]);
        g[i] = (global[i] + l[i] - 1) / l[i] * l[i];
    }
    cl_event ev = NULL;
    cl_int rc = c->inject_enqueue ? CL_OUT_OF_RESOURCES
                                  : clEnqueueNDRangeKernel(c->queue, a->k, (cl_uint)dims, NULL, g, l, 0, NULL, &ev);
    c->inject_enqueue = 0;
    if (rc != CL_SUCCESS)
        return err_set(e, TDM_E_DEVICE, "%s could not enqueue the %s kernel: %s", c->name, what, ocl_strerror(rc));
    return track_event(c, e, ev);
}

/* ----------------------------------------------------------------- iface */

static const char *ocl_name(void *ctx) { return ((ocl_ctx *)ctx)->name; }

static const char *ocl_description(void *ctx) { return ((ocl_ctx *)ctx)->desc; }

static tdm_reason ocl_supports(void *ctx, const tdm_node_desc *node, tdm_verdict *out)
{
    return ocl_op_supports(ctx, node, out);
}

static uint64_t ocl_memory_capacity(void *ctx) { return ((ocl_ctx *)ctx)->global_mem; }

static void set_err(ocl_ctx *c, const tdm_err *e) { snprintf(c->err, sizeof c->err, "%s", e->msg); }

static tdm_status ocl_buffer_alloc(void *ctx, size_t bytes, void **buf)
{
    ocl_ctx *c = ctx;
    tdm_err e;
    cl_mem m;
    err_clear(&e);
    pthread_mutex_lock(&c->lock);
    tdm_status st = ocl_buf_new(c, &e, bytes, &m);
    if (st)
        set_err(c, &e);
    pthread_mutex_unlock(&c->lock);
    *buf = st ? NULL : (void *)m;
    return st;
}

static void ocl_buffer_free(void *ctx, void *buf)
{
    ocl_ctx *c = ctx;
    if (!buf)
        return;
    pthread_mutex_lock(&c->lock);
    ocl_buf_release(c, (cl_mem)buf);
    pthread_mutex_unlock(&c->lock);
}

static tdm_status host_copy(ocl_ctx *c, void *dst, const void *src, size_t bytes, int to_device)
{
    if (!bytes)
        return TDM_OK;
    cl_event ev = NULL;
    pthread_mutex_lock(&c->lock);
    cl_int rc = to_device ? clEnqueueWriteBuffer(c->queue, (cl_mem)dst, CL_TRUE, 0, bytes, src, 0, NULL, &ev)
                          : clEnqueueReadBuffer(c->queue, (cl_mem)(uintptr_t)src, CL_TRUE, 0, bytes, dst, 0, NULL,
                                                &ev);
    tdm_status st = TDM_OK;
    if (rc != CL_SUCCESS) {
        snprintf(c->err, sizeof c->err, "%s could not copy %zu bytes %s: %s", c->name, bytes,
                 to_device ? "to the device" : "to the host", ocl_strerror(rc));
        c->last_copy_ms = -1;
        st = TDM_E_DEVICE;
    } else {
        c->last_copy_ms = event_ms(ev);
    }
    if (ev)
        clReleaseEvent(ev);
    pthread_mutex_unlock(&c->lock);
    return st;
}

static tdm_status ocl_copy_to_device(void *ctx, void *dst, const void *src, size_t bytes)
{
    return host_copy(ctx, dst, src, bytes, 1);
}

static tdm_status ocl_copy_to_host(void *ctx, void *dst, const void *src, size_t bytes)
{
    return host_copy(ctx, dst, src, bytes, 0);
}

static tdm_status ocl_run(void *ctx, const tdm_node_desc *node, const tdm_device_tensor *inputs,
                          tdm_device_tensor *outputs, char *err, size_t err_size)
{
    ocl_ctx *c = ctx;
    tdm_err e;
    err_clear(&e);
    pthread_mutex_lock(&c->lock);
    drop_events(c);
    tdm_status st = ocl_op_run(c, &e, node, inputs, outputs);
    pthread_mutex_unlock(&c->lock);
    if (st && err && err_size)
        snprintf(err, err_size, "%s", e.msg);
    return st;
}

static void ocl_destroy(void *ctx)
{
    ocl_ctx *c = ctx;
    if (!c)
        return;
    if (c->queue)
        clFinish(c->queue);
    drop_events(c);
    mem_free(c->ev);
    for (int p = 0; p < OCL_NPROG; p++) {
        for (int k = 0; k < K_COUNT; k++)
            if (c->kern[p][k])
                clReleaseKernel(c->kern[p][k]);
        if (c->prog[p])
            clReleaseProgram(c->prog[p]);
    }
    if (c->queue)
        clReleaseCommandQueue(c->queue);
    if (c->context)
        clReleaseContext(c->context);
    pthread_mutex_destroy(&c->lock);
    mem_free(c);
}

static double ocl_run_ms(void *ctx);

static const tdm_device_iface ocl_iface = {
    .api_version = TDM_DEVICE_API_VERSION,
    .name = ocl_name,
    .description = ocl_description,
    .supports = ocl_supports,
    .memory_capacity = ocl_memory_capacity,
    .buffer_alloc = ocl_buffer_alloc,
    .buffer_free = ocl_buffer_free,
    .copy_to_device = ocl_copy_to_device,
    .copy_to_host = ocl_copy_to_host,
    .run = ocl_run,
    .estimate_ms = NULL,
    .copy_ms = NULL,
    .take_fallbacks = NULL,
    .destroy = ocl_destroy,
    .last_run_ms = ocl_run_ms,
};

tdm_status ocl_device_open(tdm_err *e, int index, tdm_device *out)
{
    ocl_found *f;
    size_t nf;
    char why[256];
    out->iface = NULL;
    out->ctx = NULL;
    tdm_status st = ocl_enumerate(e, &f, &nf, why, sizeof why);
    if (st)
        return st;
    if (nf == 0) {
        mem_free(f);
        return err_set(e, TDM_E_DEVICE, "opencl is not available: %s", why);
    }
    if (index < 0 || (size_t)index >= nf) {
        mem_free(f);
        return err_set(e, TDM_E_DEVICE, "opencl:%d does not exist: %zu OpenCL device%s found (opencl:0 to opencl:%zu)",
                       index, nf, nf == 1 ? "" : "s", nf - 1);
    }
    ocl_info info;
    fill_info(&f[index], index, &info);
    ocl_ctx *c = mem_calloc(1, sizeof *c);
    if (!c) {
        mem_free(f);
        return err_set(e, TDM_E_NOMEM, "out of memory opening opencl:%d", index);
    }
    c->platform = f[index].platform;
    c->device = f[index].device;
    mem_free(f);
    c->index = index;
    if (index == 0)
        snprintf(c->name, sizeof c->name, "opencl");
    else
        snprintf(c->name, sizeof c->name, "opencl:%d", index);
    if (pthread_mutex_init(&c->lock, NULL)) {
        mem_free(c);
        return err_set(e, TDM_E_DEVICE, "%s: could not create a lock", index ? "opencl:N" : "opencl");
    }
    cl_int rc;
    cl_context_properties props[3] = {CL_CONTEXT_PLATFORM, (cl_context_properties)c->platform, 0};
    c->context = clCreateContext(props, 1, &c->device, NULL, NULL, &rc);
    if (!c->context || rc != CL_SUCCESS) {
        c->context = NULL;
        st = err_set(e, TDM_E_DEVICE, "%s (%s) is not usable: clCreateContext failed with %s", c->name, info.name,
                     ocl_strerror(rc));
        ocl_destroy(c);
        return st;
    }
    c->queue = clCreateCommandQueue(c->context, c->device, CL_QUEUE_PROFILING_ENABLE, &rc);
    if (!c->queue || rc != CL_SUCCESS) {
        c->queue = NULL;
        st = err_set(e, TDM_E_DEVICE, "%s (%s) is not usable: clCreateCommandQueue failed with %s", c->name,
                     info.name, ocl_strerror(rc));
        ocl_destroy(c);
        return st;
    }
    c->global_mem = info.memory_bytes;
    c->max_alloc = info.max_alloc ? info.max_alloc : info.memory_bytes;
    c->fp16_ext = info.fp16;
    size_t wg = 0;
    if (clGetDeviceInfo(c->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL) != CL_SUCCESS || wg == 0)
        wg = 1;
    c->max_wg = wg;
    c->ts = wg >= 256 ? 16 : wg >= 64 ? 8 : 4;
    /* local-memory tiles pay off on GPUs; CPU devices (PoCL) run the
     * barrier-free register-blocked kernels far faster */
    c->tiled = strcmp(info.type, "gpu") == 0;
    c->last_copy_ms = -1;
    snprintf(c->desc, sizeof c->desc, "%s (%s, %s), %.2f GiB, %s", info.name, info.platform, info.version,
             (double)info.memory_bytes / (1024.0 * 1024.0 * 1024.0),
             info.fp16 ? "cl_khr_fp16" : "no cl_khr_fp16 (float16 stored as half, computed in float)");
    out->iface = &ocl_iface;
    out->ctx = c;
    return TDM_OK;
}

/* ------------------------------------------------------------- accessors */

int ocl_is_device(const tdm_device *d) { return d && d->iface == &ocl_iface && d->ctx; }

/* The ABI's last_run_ms (version 2): the device time of what the last run()
 * enqueued, waiting for it. */
static double ocl_run_ms(void *ctx)
{
    ocl_ctx *c = ctx;
    double ms = -1;
    pthread_mutex_lock(&c->lock);
    if (c->n_ev) {
        cl_int rc = clWaitForEvents((cl_uint)c->n_ev, c->ev);
        if (rc != CL_SUCCESS) {
            snprintf(c->err, sizeof c->err, "%s failed while running a node: %s", c->name, ocl_strerror(rc));
        } else {
            ms = 0;
            for (size_t i = 0; i < c->n_ev; i++)
                ms += event_ms(c->ev[i]);
        }
    } else {
        ms = 0;
    }
    pthread_mutex_unlock(&c->lock);
    return ms;
}

double ocl_last_run_ms(const tdm_device *d) { return ocl_is_device(d) ? ocl_run_ms(d->ctx) : -1; }

double ocl_last_copy_ms(const tdm_device *d)
{
    return ocl_is_device(d) ? ((ocl_ctx *)d->ctx)->last_copy_ms : -1;
}

const char *ocl_last_error(const tdm_device *d) { return ocl_is_device(d) ? ((ocl_ctx *)d->ctx)->err : ""; }

tdm_status ocl_finish(const tdm_device *d)
{
    if (!ocl_is_device(d))
        return TDM_E_DEVICE;
    ocl_ctx *c = d->ctx;
    pthread_mutex_lock(&c->lock);
    cl_int rc = clFinish(c->queue);
    if (rc != CL_SUCCESS)
        snprintf(c->err, sizeof c->err, "%s failed while finishing its queue: %s", c->name, ocl_strerror(rc));
    pthread_mutex_unlock(&c->lock);
    return rc == CL_SUCCESS ? TDM_OK : TDM_E_DEVICE;
}

void ocl_debug_set_guard(const tdm_device *d, size_t guard)
{
    if (ocl_is_device(d))
        ((ocl_ctx *)d->ctx)->guard = guard;
}

int ocl_debug_guard_ok(const tdm_device *d, void *buf, size_t bytes)
{
    if (!ocl_is_device(d) || !buf)
        return -1;
    ocl_ctx *c = d->ctx;
    size_t g = c->guard, sz = 0;
    if (!g)
        return 1;
    if (clGetMemObjectInfo((cl_mem)buf, CL_MEM_SIZE, sizeof sz, &sz, NULL) != CL_SUCCESS || sz < bytes + g)
        return -1;
    unsigned char *h = mem_alloc(g);
    if (!h)
        return -1;
    int ok = -1;
    pthread_mutex_lock(&c->lock);
    if (clEnqueueReadBuffer(c->queue, (cl_mem)buf, CL_TRUE, bytes, g, h, 0, NULL, NULL) == CL_SUCCESS) {
        ok = 1;
        for (size_t i = 0; i < g; i++)
            if (h[i] != 0xFF)
                ok = 0;
    }
    pthread_mutex_unlock(&c->lock);
    mem_free(h);
    return ok;
}

void ocl_debug_inject(const tdm_device *d, int what)
{
    if (!ocl_is_device(d))
        return;
    ocl_ctx *c = d->ctx;
    pthread_mutex_lock(&c->lock);
    if (what == 1) {
        clFinish(c->queue);
        for (int p = 0; p < OCL_NPROG; p++) {
            for (int k = 0; k < K_COUNT; k++)
                if (c->kern[p][k]) {
                    clReleaseKernel(c->kern[p][k]);
                    c->kern[p][k] = NULL;
                }
            if (c->prog[p]) {
                clReleaseProgram(c->prog[p]);
                c->prog[p] = NULL;
            }
            c->prog_failed[p] = 0;
        }
        c->inject_build = 1;
    } else if (what == 2) {
        c->inject_enqueue = 1;
    } else if (what == 3 || what == 4) {
        c->tiled = what == 3;
    }
    pthread_mutex_unlock(&c->lock);
}

#else /* !TDM_HAVE_OPENCL: the device exists in name only */

tdm_status ocl_probe(tdm_err *e, ocl_info **out, size_t *n, char *why, size_t why_size)
{
    (void)e;
    *out = NULL;
    *n = 0;
    if (why && why_size)
        snprintf(why, why_size, "tandem was built without OpenCL (no OpenCL headers or ICD loader at configure time)");
    return TDM_OK;
}

tdm_status ocl_device_open(tdm_err *e, int index, tdm_device *out)
{
    (void)index;
    out->iface = NULL;
    out->ctx = NULL;
    return err_set(e, TDM_E_DEVICE,
                   "opencl is not available: tandem was built without OpenCL (no OpenCL headers or ICD loader at "
                   "configure time)");
}

int ocl_is_device(const tdm_device *d)
{
    (void)d;
    return 0;
}

double ocl_last_run_ms(const tdm_device *d)
{
    (void)d;
    return -1;
}

double ocl_last_copy_ms(const tdm_device *d)
{
    (void)d;
    return -1;
}

const char *ocl_last_error(const tdm_device *d)
{
    (void)d;
    return "";
}

tdm_status ocl_finish(const tdm_device *d)
{
    (void)d;
    return TDM_E_DEVICE;
}

void ocl_debug_set_guard(const tdm_device *d, size_t guard)
{
    (void)d;
    (void)guard;
}

int ocl_debug_guard_ok(const tdm_device *d, void *buf, size_t bytes)
{
    (void)d;
    (void)buf;
    (void)bytes;
    return -1;
}

void ocl_debug_inject(const tdm_device *d, int what)
{
    (void)d;
    (void)what;
}

#endif
