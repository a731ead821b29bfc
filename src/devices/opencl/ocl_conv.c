/* The OpenCL Conv, ConvTranspose and pooling (MaxPool, AveragePool).
 * Kernels: the "convolution" and "pooling" sections of kernels.cl. */
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

/* ------------------------------------------------------------ convolution */

static int spatial_rank_ok(const onode *o, tdm_verdict *v, const char *what)
{
    int rank = o->d->n_inputs > 0 ? o->d->inputs[0].rank : -1;
    if (rank >= 0 && (rank < 3 || rank > 4)) {
        ocl_verdict(v, TDM_REASON_SHAPE_UNSUPPORTED, "opencl %s supports 1-D and 2-D inputs (rank 3 or 4), not rank %d",
                what, rank);
        return 0;
    }
    return 1;
}

tdm_reason ocl_check_conv(const onode *o, tdm_verdict *v)
{
    if (!spatial_rank_ok(o, v, o->d->op_type))
        return v->reason;
    for (int i = 1; i < 3 && i < o->d->n_inputs; i++)
        if (ocl_desc_present(o->d, i) && o->d->inputs[i].dtype != o->d->inputs[0].dtype)
            return ocl_verdict(v, TDM_REASON_DTYPE_UNSUPPORTED, "opencl %s takes W and B of X's type (%s), not %s",
                           o->d->op_type, tdm_dtype_name(o->d->inputs[0].dtype),
                           tdm_dtype_name(o->d->inputs[i].dtype));
    if (o->d->n_inputs > 1 && o->d->inputs[1].rank >= 0 && o->d->inputs[0].rank >= 0 &&
        o->d->inputs[1].rank != o->d->inputs[0].rank)
        return ocl_verdict(v, TDM_REASON_SHAPE_UNSUPPORTED, "opencl %s needs W of X's rank", o->d->op_type);
    return TDM_REASON_OK;
}

typedef struct conv_g {
    int N, C, H, W, M, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, Cg, Mg, group;
} conv_g;

static int fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

static tdm_status conv_args(orun *r, ocl_args *a, const conv_g *g, cl_mem x, cl_mem w, cl_mem b, cl_mem y)
{
    (void)r;
    ocl_arg_mem(a, x);
    ocl_arg_mem(a, w);
    ocl_arg_mem(a, b ? b : w);
    ocl_arg_mem(a, y);
    ocl_arg_int(a, g->C);
    ocl_arg_int(a, g->H);
    ocl_arg_int(a, g->W);
    ocl_arg_int(a, g->M);
    ocl_arg_int(a, g->OH);
    ocl_arg_int(a, g->OW);
    ocl_arg_int(a, g->KH);
    ocl_arg_int(a, g->KW);
    ocl_arg_int(a, g->sh);
    ocl_arg_int(a, g->sw);
    ocl_arg_int(a, g->ph);
    ocl_arg_int(a, g->pw);
    ocl_arg_int(a, g->dh);
    ocl_arg_int(a, g->dw);
    ocl_arg_int(a, g->Cg);
    ocl_arg_int(a, g->Mg);
    return TDM_OK;
}

tdm_status ocl_run_conv(orun *r)
{
    const tdm_device_tensor *x = &r->in[0], *w = &r->in[1];
    if (!in_present(r, 0) || !in_present(r, 1))
        return ocl_fail(r, TDM_E_MODEL, "needs inputs X and W");
    if (x->rank < 3 || x->rank > 4 || w->rank != x->rank)
        return ocl_fail(r, TDM_E_UNSUPPORTED, "takes 1-D or 2-D X and W of the same rank, not rank %d and %d", x->rank,
                    w->rank);
    int nsp = x->rank - 2;
    nn_geom geo;
    tdm_status st = op_nn_geom(r->e, &r->o->gn, nsp, x->dims + 2, w->dims + 2, 1, 0, &geo);
    if (st) {
        err_prefix(r->e, "%s: Conv ", r->c->name);
        return st;
    }
    int64_t group = gr_attr_int(&r->o->gn, "group", 1);
    int64_t C = x->dims[1], M = w->dims[0];
    if (group < 1 || C % group || M % group || w->dims[1] * group != C)
        return ocl_fail(r, TDM_E_RUNTIME, "has %lld input channels, W %lldx%lld and group %lld, which do not fit",
                    (long long)C, (long long)M, (long long)w->dims[1], (long long)group);
    const tdm_device_tensor *b = in_present(r, 2) ? &r->in[2] : NULL;
    if (b && (int64_t)tcount(b) != M)
        return ocl_fail(r, TDM_E_RUNTIME, "input B has %zu values for %lld output channels", tcount(b), (long long)M);
    int64_t od[4] = {x->dims[0], M, geo.out[1], geo.out[2]};
    if (nsp == 1)
        od[2] = geo.out[2];
    if ((st = ocl_out_new(r, 0, x->dtype, x->rank, od)))
        return st;
    conv_g g = {(int)x->dims[0], (int)C, (int)geo.in[1], (int)geo.in[2], (int)M, (int)geo.out[1], (int)geo.out[2],
                (int)geo.k[1], (int)geo.k[2], (int)geo.s[1], (int)geo.s[2], (int)geo.pb[1], (int)geo.pb[2],
                (int)geo.d[1], (int)geo.d[2], (int)(C / group), (int)(M / group), (int)group};
    if (!fits_int(geo.k[1] * geo.k[2] * g.Cg) || !fits_int(geo.s[1] * geo.out[1] + geo.k[1] * geo.d[1]) ||
        !fits_int(geo.s[2] * geo.out[2] + geo.k[2] * geo.d[2]))
        return ocl_fail(r, TDM_E_UNSUPPORTED, "is too large for opencl's 32-bit indexing");
    size_t P = (size_t)g.OH * (size_t)g.OW;
    if (tcount(&r->out[0]) == 0)
        return TDM_OK;
    cl_mem y = MEM(&r->out[0]);
    ocl_args a;
    if (g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 && group == 1 &&
        geo.pe[1] == 0 && geo.pe[2] == 0) {
        /* pointwise: Y[n] = W (M x C) X[n] (C x HW) + B */
        ocl_gemm_p p;
        ocl_gemm_init(&p);
        p.M = g.M;
        p.N = (int)P;
        p.K = g.C;
        p.sam = g.C;
        p.sak = 1;
        p.sbk = (int)P;
        p.sbn = 1;
        p.nb = 1;
        p.bd[0] = g.N;
        p.bsa[0] = 0;
        p.bsb[0] = g.C * (int)P;
        p.has_c = b != NULL;
        p.scm = 1;
        p.scn = 0;
        return ocl_gemm_launch(r, MEM(w), MEM(x), b ? MEM(b) : NULL, y, &p, (size_t)g.N);
    }
    if (g.Mg >= 8 && g.OW < 16 && !r->c->tiled) {
        /* W [M][Cg*KH*KW] transposed on the device into a scratch buffer */
        size_t es = tdm_dtype_size(x->dtype), K = (size_t)g.Cg * (size_t)g.KH * (size_t)g.KW;
        int64_t td[2] = {(int64_t)K, g.M}, ts[2] = {1, (int64_t)K};
        cl_mem wt;
        if ((st = ocl_buf_new(r->c, r->e, (K * (size_t)g.M + 8) * es, &wt)))
            return st;
        st = ocl_copy_strided(r, MEM(w), wt, es, 2, td, ts, 0);
        if (!st && !(st = ocl_kern(r, r->prog, K_CONV_OC8, &a))) {
            conv_args(r, &a, &g, MEM(x), wt, b ? MEM(b) : NULL, y);
            ocl_arg_int(&a, g.group);
            ocl_arg_int(&a, b != NULL);
            size_t gs[3] = {P, ((size_t)g.Mg + 7) / 8, (size_t)g.N * (size_t)g.group};
            st = ocl_launch(r->c, r->e, &a, "conv_oc8", 3, gs, NULL);
        }
        ocl_buf_release(r->c, wt); /* freed once the enqueued kernels are done */
        return st;
    }
    if (g.Mg >= 4 && !r->c->tiled) {
        if ((st = ocl_kern(r, r->prog, K_CONV_PX8, &a)))
            return st;
        conv_args(r, &a, &g, MEM(x), MEM(w), b ? MEM(b) : NULL, y);
        ocl_arg_int(&a, g.group);
        ocl_arg_int(&a, b != NULL);
        size_t gs[3] = {(size_t)g.OH * (((size_t)g.OW + 7) / 8), ((size_t)g.Mg + 3) / 4,
                        (size_t)g.N * (size_t)g.group};
        return ocl_launch(r->c, r->e, &a, "conv_px8", 3, gs, NULL);
    }
    if (g.Mg >= 8) {
        if ((st = ocl_kern(r, r->prog, K_CONV_IGEMM, &a)))
            return st;
        conv_args(r, &a, &g, MEM(x), MEM(w), b ? MEM(b) : NULL, y);
        ocl_arg_int(&a, g.group);
        ocl_arg_int(&a, b != NULL);
        size_t ts = (size_t)r->c->ts;
        size_t gs[3] = {P, (size_t)g.Mg, (size_t)g.N * (size_t)g.group}, l[3] = {ts, ts, 1};
        return ocl_launch(r->c, r->e, &a, "conv_igemm", 3, gs, l);
    }
    if ((st = ocl_kern(r, r->prog, K_CONV_DIRECT, &a)))
        return st;
    conv_args(r, &a, &g, MEM(x), MEM(w), b ? MEM(b) : NULL, y);
    ocl_arg_int(&a, b != NULL);
    size_t gs[3] = {P, (size_t)g.M, (size_t)g.N};
    return ocl_launch(r->c, r->e, &a, "conv_direct", 3, gs, NULL);
}

static int64_t floor_div2(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

tdm_status ocl_run_convt(orun *r)
{
    const tdm_device_tensor *x = &r->in[0], *w = &r->in[1];
    const gr_node *n = &r->o->gn;
    if (!in_present(r, 0) || !in_present(r, 1))
        return ocl_fail(r, TDM_E_MODEL, "needs inputs X and W");
    if (x->rank < 3 || x->rank > 4 || w->rank != x->rank)
        return ocl_fail(r, TDM_E_UNSUPPORTED, "takes 1-D or 2-D X and W of the same rank, not rank %d and %d", x->rank,
                    w->rank);
    int nsp = x->rank - 2;
    const int64_t *ks = NULL, *st_ = NULL, *dl = NULL, *pd = NULL, *opd = NULL, *os = NULL;
    int nk = gr_attr_ints(n, "kernel_shape", &ks), ns = gr_attr_ints(n, "strides", &st_);
    int nd = gr_attr_ints(n, "dilations", &dl), np = gr_attr_ints(n, "pads", &pd);
    int nop = gr_attr_ints(n, "output_padding", &opd), nos = gr_attr_ints(n, "output_shape", &os);
    if ((nk >= 0 && nk != nsp) || (ns >= 0 && ns != nsp) || (nd >= 0 && nd != nsp) || (np >= 0 && np != 2 * nsp) ||
        (nop >= 0 && nop != nsp) || (nos >= 0 && nos != nsp && nos != nsp + 2))
        return ocl_fail(r, TDM_E_MODEL, "attributes do not match %d spatial dimensions", nsp);
    const char *ap = gr_attr_str(n, "auto_pad", "NOTSET");
    int same = !strcmp(ap, "SAME_UPPER") ? 1 : !strcmp(ap, "SAME_LOWER") ? 2 : 0;
    int64_t in[2] = {1, 1}, k[2] = {1, 1}, s[2] = {1, 1}, d[2] = {1, 1}, pb[2] = {0, 0}, out[2] = {1, 1};
    for (int i = 0; i < nsp; i++) {
        int j = 2 - nsp + i;
        in[j] = x->dims[2 + i];
        k[j] = nk >= 0 ? ks[i] : w->dims[2 + i];
        s[j] = ns >= 0 ? st_[i] : 1;
        d[j] = nd >= 0 ? dl[i] : 1;
        int64_t opad = nop >= 0 ? opd[i] : 0;
        if (k[j] < 1 || s[j] < 1 || d[j] < 1 || opad < 0 || k[j] > INT_MAX / 2 || s[j] > INT_MAX / 2 ||
            d[j] > INT_MAX / 2 || opad > INT_MAX / 2)
            return ocl_fail(r, TDM_E_MODEL, "has an invalid kernel_shape, strides, dilations or output_padding");
        int64_t ek = (k[j] - 1) * d[j] + 1, full = s[j] * (in[j] - 1) + opad + ek;
        if (nos >= 0 || same) {
            int64_t o = nos >= 0 ? os[nos - nsp + i] : in[j] * s[j];
            if (o < 0 || o > INT_MAX)
                return ocl_fail(r, TDM_E_MODEL, "has an invalid output_shape");
            int64_t total = full - o;
            /* as the CPU kernel: SAME_UPPER puts the odd pad at the end */
            pb[j] = same == 1 ? floor_div2(total) : total - floor_div2(total);
            out[j] = o;
        } else {
            pb[j] = np >= 0 ? pd[i] : 0;
            int64_t pe = np >= 0 ? pd[i + nsp] : 0;
            if (pb[j] < 0 || pe < 0 || pb[j] > INT_MAX / 2 || pe > INT_MAX / 2)
                return ocl_fail(r, TDM_E_MODEL, "has an invalid pads attribute");
            out[j] = full - pb[j] - pe;
            if (out[j] < 0)
                return ocl_fail(r, TDM_E_RUNTIME, "pads make spatial dimension %d of the output negative", i);
        }
    }
    int64_t group = gr_attr_int(n, "group", 1), C = x->dims[1];
    if (group < 1 || C % group || w->dims[0] != C)
        return ocl_fail(r, TDM_E_RUNTIME, "has %lld input channels, W of %lld and group %lld, which do not fit",
                    (long long)C, (long long)w->dims[0], (long long)group);
    int64_t Mg = w->dims[1], M = Mg * group;
    const tdm_device_tensor *b = in_present(r, 2) ? &r->in[2] : NULL;
    if (b && (int64_t)tcount(b) != M)
        return ocl_fail(r, TDM_E_RUNTIME, "input B has %zu values for %lld output channels", tcount(b), (long long)M);
    int64_t od[4] = {x->dims[0], M, out[0], out[1]};
    if (nsp == 1)
        od[2] = out[1];
    tdm_status st = ocl_out_new(r, 0, x->dtype, x->rank, od);
    if (st)
        return st;
    conv_g g = {(int)x->dims[0], (int)C, (int)in[0], (int)in[1], (int)M, (int)out[0], (int)out[1], (int)k[0],
                (int)k[1], (int)s[0], (int)s[1], (int)pb[0], (int)pb[1], (int)d[0], (int)d[1], (int)(C / group),
                (int)Mg, (int)group};
    ocl_args a;
    if ((st = ocl_kern(r, r->prog, K_CONVT_DIRECT, &a)))
        return st;
    conv_args(r, &a, &g, MEM(x), MEM(w), b ? MEM(b) : NULL, MEM(&r->out[0]));
    ocl_arg_int(&a, b != NULL);
    size_t gs[3] = {(size_t)g.OH * (size_t)g.OW, (size_t)g.M, (size_t)g.N};
    return ocl_launch(r->c, r->e, &a, "convt_direct", 3, gs, NULL);
}

/* ---------------------------------------------------------------- pooling */

tdm_reason ocl_check_pool(const onode *o, tdm_verdict *v)
{
    if (!spatial_rank_ok(o, v, o->d->op_type))
        return v->reason;
    if (!strcmp(o->d->op_type, "MaxPool") && ocl_desc_out_present(o->d, 1))
        return ocl_verdict(v, TDM_REASON_ATTR_UNSUPPORTED, "opencl MaxPool does not produce the Indices output");
    return TDM_REASON_OK;
}

tdm_status ocl_run_pool(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int is_max = !strcmp(r->o->d->op_type, "MaxPool");
    if (x->rank < 3 || x->rank > 4)
        return ocl_fail(r, TDM_E_UNSUPPORTED, "takes 1-D or 2-D inputs (rank 3 or 4), not rank %d", x->rank);
    int nsp = x->rank - 2, v10 = r->o->version >= 10;
    nn_geom geo;
    tdm_status st = op_nn_geom(r->e, &r->o->gn, nsp, x->dims + 2, NULL, is_max && v10, v10, &geo);
    if (st) {
        err_prefix(r->e, "%s: %s ", r->c->name, r->o->d->op_type);
        return st;
    }
    int64_t od[4] = {x->dims[0], x->dims[1], geo.out[1], geo.out[2]};
    if (nsp == 1)
        od[2] = geo.out[2];
    if ((st = ocl_out_new(r, 0, x->dtype, x->rank, od)))
        return st;
    size_t planes = (size_t)x->dims[0] * (size_t)x->dims[1];
    size_t n = tcount(&r->out[0]);
    int inc = !is_max && gr_attr_int(&r->o->gn, "count_include_pad", 0) != 0;
    ocl_args a;
    if ((st = ocl_kern(r, r->prog, K_POOL2D, &a)))
        return st;
    ocl_arg_mem(&a, MEM(x));
    ocl_arg_mem(&a, MEM(&r->out[0]));
    ocl_arg_int(&a, (int)planes);
    ocl_arg_int(&a, (int)geo.in[1]);
    ocl_arg_int(&a, (int)geo.in[2]);
    ocl_arg_int(&a, (int)geo.out[1]);
    ocl_arg_int(&a, (int)geo.out[2]);
    ocl_arg_int(&a, (int)geo.k[1]);
    ocl_arg_int(&a, (int)geo.k[2]);
    ocl_arg_int(&a, (int)geo.s[1]);
    ocl_arg_int(&a, (int)geo.s[2]);
    ocl_arg_int(&a, (int)geo.pb[1]);
    ocl_arg_int(&a, (int)geo.pb[2]);
    ocl_arg_int(&a, (int)geo.d[1]);
    ocl_arg_int(&a, (int)geo.d[2]);
    ocl_arg_int(&a, is_max);
    ocl_arg_int(&a, inc);
    ocl_arg_int(&a, (int)(geo.in[1] + geo.pb[1] + geo.pe[1]));
    ocl_arg_int(&a, (int)(geo.in[2] + geo.pb[2] + geo.pe[2]));
    return ocl_launch1(r, &a, r->o->d->op_type, n);
}

#else

typedef int ocl_conv_unused;

#endif
