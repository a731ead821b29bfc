/* The OpenCL Resize (nearest and linear, the ONNX coordinate modes).
 * Kernels: the "Resize" section of kernels.cl. */
#ifdef TDM_HAVE_OPENCL

#include "devices/opencl/ocl_ops.h"
#include "core/mem.h"
#include "core/tensor.h"
#include "graph/graph.h"
#include "ops/nn.h"
#include "ops/op.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ----------------------------------------------------------------- Resize */

enum { CT_HALF_PIXEL, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC, CT_TF_HALF_PIXEL_FOR_NN, CT_TF_CROP };
enum { NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL, NM_SIMPLE };

static int parse_name(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

static const char *const ctm_names[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                        "tf_half_pixel_for_nn", "tf_crop_and_resize"};
static const char *const nm_names[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

tdm_reason ocl_check_resize(const onode *o, tdm_verdict *v)
{
    const char *mode = gr_attr_str(&o->gn, "mode", "nearest");
    if (strcmp(mode, "nearest") && strcmp(mode, "linear"))
        return ocl_verdict(v, TDM_REASON_ATTR_UNSUPPORTED, "opencl Resize supports modes nearest and linear, not %s", mode);
    if (o->version >= 11) {
        const char *ct = gr_attr_str(&o->gn, "coordinate_transformation_mode", "half_pixel");
        int c = parse_name(ct, ctm_names, 6);
        if (c < 0 || c == CT_TF_CROP)
            return ocl_verdict(v, TDM_REASON_ATTR_UNSUPPORTED,
                           "opencl Resize does not support coordinate_transformation_mode %s", ct);
        const char *nm = gr_attr_str(&o->gn, "nearest_mode", "round_prefer_floor");
        if (parse_name(nm, nm_names, 4) < 0)
            return ocl_verdict(v, TDM_REASON_ATTR_UNSUPPORTED, "opencl Resize does not support nearest_mode %s", nm);
    }
    return TDM_REASON_OK;
}

/* Source coordinate of output index x (the CPU kernel's arithmetic). */
static double rz_coord(int ctm, double x, double scale, int64_t in)
{
    double out_w = scale * (double)in;
    switch (ctm) {
    case CT_ALIGN_CORNERS: return out_w == 1 ? 0.0 : x * (double)(in - 1) / (out_w - 1);
    case CT_ASYMMETRIC: return x / scale;
    case CT_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / scale;
    case CT_PYTORCH_HALF_PIXEL: return out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    default: return (x + 0.5) / scale - 0.5;
    }
}

static int64_t clampi(int64_t v, int64_t n) { return v < 0 ? 0 : v >= n ? n - 1 : v; }

/* Taps of one axis (1 for nearest, 2 for linear): idx and weights per
 * output index; *identity when the axis maps each index to itself. */
static void rz_axis(int linear, int ctm, int nearest, int exclude, int64_t in, int64_t out, double scale, int *idx,
                    float *w, int *identity)
{
    *identity = in == out;
    for (int64_t o = 0; o < out; o++) {
        double x = rz_coord(ctm, (double)o, scale, in);
        if (!isfinite(x))
            x = 0;
        double fl = floor(x);
        int integral = x == fl;
        double ratio = integral ? 1.0 : x - fl;
        int64_t base = (int64_t)fl - (integral ? 1 : 0);
        if (!linear) {
            int64_t k;
            if (integral) {
                k = (int64_t)x;
            } else {
                switch (nearest) {
                case NM_ROUND_PREFER_CEIL: k = (int64_t)fl + (ratio >= 0.5); break;
                case NM_FLOOR: k = (int64_t)fl; break;
                case NM_CEIL: k = (int64_t)fl + 1; break;
                case NM_SIMPLE: k = scale < 1 ? (int64_t)ceil(x) : (int64_t)fl; break;
                default: k = (int64_t)fl + (ratio > 0.5); break;
                }
            }
            idx[o] = (int)clampi(k, in);
            if (idx[o] != o)
                *identity = 0;
        } else {
            double c[2] = {1 - ratio, ratio}, sum = 0;
            for (int t = 0; t < 2; t++) {
                int64_t k = base + t;
                if (exclude && (k < 0 || k >= in))
                    c[t] = 0;
                sum += c[t];
            }
            int one = 0;
            for (int t = 0; t < 2; t++) {
                idx[2 * o + t] = (int)clampi(base + t, in);
                double wt = exclude && sum != 0 ? c[t] / sum : c[t];
                w[2 * o + t] = (float)wt;
                if (wt != 0)
                    one += (wt == 1 && idx[2 * o + t] == o) ? 1 : 2;
            }
            if (one != 1)
                *identity = 0;
        }
    }
}

tdm_status ocl_run_resize(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    const gr_node *n = &r->o->gn;
    int linear = !strcmp(gr_attr_str(n, "mode", "nearest"), "linear");
    int ctm = CT_ASYMMETRIC, nearest = NM_SIMPLE;
    int exclude = (int)gr_attr_int(n, "exclude_outside", 0);
    double *scales = NULL;
    int64_t *sizes = NULL, nsc = -1, nsz = -1;
    tdm_status st;
    if (r->o->version < 11) {
        if ((st = ocl_in_floats(r, 1, &scales, &nsc)))
            return st;
    } else {
        ctm = parse_name(gr_attr_str(n, "coordinate_transformation_mode", "half_pixel"), ctm_names, 6);
        nearest = parse_name(gr_attr_str(n, "nearest_mode", "round_prefer_floor"), nm_names, 4);
        if ((st = ocl_in_floats(r, 2, &scales, &nsc)) || (st = ocl_in_ints(r, 3, &sizes, &nsz))) {
            mem_free(scales);
            return st;
        }
        if (nsc == 0)
            nsc = -1;
        if (nsz == 0)
            nsz = -1;
    }
    int64_t od[TDM_MAX_RANK];
    double sc[TDM_MAX_RANK];
    int rank = x->rank;
    if ((nsc >= 0) == (nsz >= 0) || (nsc >= 0 && nsc != rank) || (nsz >= 0 && nsz != rank)) {
        mem_free(scales);
        mem_free(sizes);
        return ocl_fail(r, TDM_E_RUNTIME, "needs exactly one of 'scales' and 'sizes', with %d values", rank);
    }
    for (int d = 0; d < rank; d++) {
        if (sizes) {
            od[d] = sizes[d];
            sc[d] = x->dims[d] ? (double)sizes[d] / (double)x->dims[d] : 1.0;
        } else {
            sc[d] = scales[d];
            od[d] = (int64_t)(scales[d] * (double)x->dims[d]);
        }
        if (od[d] < 0 || !(sc[d] > 0) || od[d] > INT_MAX || (od[d] > 0 && x->dims[d] == 0)) {
            mem_free(scales);
            mem_free(sizes);
            return ocl_fail(r, TDM_E_RUNTIME, "has an invalid scale or size for axis %d", d);
        }
    }
    mem_free(scales);
    mem_free(sizes);
    if (rank > OCL_MAX_RANK)
        return ocl_fail(r, TDM_E_UNSUPPORTED, "takes inputs of rank %d or less", OCL_MAX_RANK);
    if ((st = ocl_out_new(r, 0, x->dtype, rank, od)))
        return st;
    size_t total_out = tcount(&r->out[0]), tab_n = 0;
    if (total_out == 0)
        return TDM_OK;
    for (int d = 0; d < rank; d++)
        tab_n += (size_t)od[d];
    int *idx = mem_calloc(2 * tab_n + 1, sizeof *idx);
    float *w = mem_calloc(2 * tab_n + 1, sizeof *w);
    int ident[TDM_MAX_RANK];
    size_t start[TDM_MAX_RANK];
    if (!idx || !w) {
        mem_free(idx);
        mem_free(w);
        return ocl_fail(r, TDM_E_NOMEM, "out of memory");
    }
    size_t pos = 0;
    for (int d = 0; d < rank; d++) {
        start[d] = pos;
        rz_axis(linear, ctm, nearest, exclude, x->dims[d], od[d], sc[d], idx + (linear ? 2 : 1) * pos,
                w + 2 * pos, &ident[d]);
        pos += (size_t)od[d];
    }
    ocl_args a;
    cl_mem tm = NULL, wm = NULL;
    if (!linear) {
        /* tables of input offsets */
        int64_t strides[TDM_MAX_RANK];
        shape_strides(rank, x->dims, strides);
        for (int d = 0; d < rank; d++)
            for (int64_t o = 0; o < od[d]; o++)
                idx[start[d] + (size_t)o] *= (int)strides[d];
        int di[8], ts[8];
        to_int8(od, rank, di);
        for (int i = 0; i < 8; i++)
            ts[i] = i < rank ? (int)start[i] : 0;
        if (!(st = ocl_buf_from_host(r->c, r->e, idx, sizeof *idx * (tab_n ? tab_n : 1), &tm)) &&
            !(st = ocl_kern(r, OCL_P32, by_size(K_RESIZE_NEAR_1, tdm_dtype_size(x->dtype)), &a))) {
            ocl_arg_mem(&a, MEM(x));
            ocl_arg_mem(&a, MEM(&r->out[0]));
            ocl_arg_int(&a, (int)total_out);
            ocl_arg_int(&a, rank);
            ocl_arg_int8(&a, di);
            ocl_arg_int8(&a, ts);
            ocl_arg_mem(&a, tm);
            st = ocl_launch1(r, &a, "resize_nearest", total_out);
        }
        if (tm)
            clReleaseMemObject(tm);
        mem_free(idx);
        mem_free(w);
        return st;
    }
    /* linear: one pass per changed axis, last axis first, float in between */
    int passes[TDM_MAX_RANK], np = 0;
    for (int d = rank - 1; d >= 0; d--)
        if (!ident[d])
            passes[np++] = d;
    if (np == 0) {
        mem_free(idx);
        mem_free(w);
        return ocl_copy(r->c, r->e, MEM(x), 0, MEM(&r->out[0]), 0, r->out[0].bytes);
    }
    int64_t cur[TDM_MAX_RANK];
    memcpy(cur, x->dims, sizeof cur[0] * (size_t)rank);
    cl_mem src = MEM(x), tmp = NULL;
    st = TDM_OK;
    for (int p = 0; p < np && !st; p++) {
        int d = passes[p];
        size_t outer = 1, inner = 1;
        for (int k = 0; k < d; k++)
            outer *= (size_t)cur[k];
        for (int k = d + 1; k < rank; k++)
            inner *= (size_t)cur[k];
        size_t total = outer * (size_t)od[d] * inner;
        int first = p == 0, last = p == np - 1;
        cl_mem dst = MEM(&r->out[0]);
        if (!last && (st = ocl_buf_new(r->c, r->e, total * sizeof(float), &dst)))
            break;
        ocl_kid k = first && last ? K_RESIZE_LIN_TT : first ? K_RESIZE_LIN_TF : last ? K_RESIZE_LIN_FT : K_RESIZE_LIN_FF;
        if (!(st = ocl_buf_from_host(r->c, r->e, idx + 2 * start[d], sizeof *idx * 2 * (size_t)od[d], &tm)) &&
            !(st = ocl_buf_from_host(r->c, r->e, w + 2 * start[d], sizeof *w * 2 * (size_t)od[d], &wm)) &&
            !(st = ocl_kern(r, r->prog, k, &a))) {
            ocl_arg_mem(&a, src);
            ocl_arg_mem(&a, dst);
            ocl_arg_int(&a, (int)total);
            ocl_arg_int(&a, (int)cur[d]);
            ocl_arg_int(&a, (int)od[d]);
            ocl_arg_int(&a, (int)inner);
            ocl_arg_mem(&a, tm);
            ocl_arg_mem(&a, wm);
            st = ocl_launch1(r, &a, "resize_linear", total);
        }
        if (tm)
            clReleaseMemObject(tm);
        if (wm)
            clReleaseMemObject(wm);
        tm = wm = NULL;
        if (tmp)
            ocl_buf_release(r->c, tmp);
        tmp = last ? NULL : dst;
        src = dst;
        cur[d] = od[d];
    }
    if (tmp)
        ocl_buf_release(r->c, tmp);
    mem_free(idx);
    mem_free(w);
    return st;
}

#else

typedef int ocl_resize_unused;

#endif
