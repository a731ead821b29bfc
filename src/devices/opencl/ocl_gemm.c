/* The OpenCL Gemm and MatMul, and the GEMM launch that Conv uses.
 * Kernels: the "GEMM" section of kernels.cl. */
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

/* ------------------------------------------------------------------ GEMM */

tdm_status ocl_gemm_launch(orun *r, cl_mem A, cl_mem B, cl_mem C, cl_mem Y, const ocl_gemm_p *p, size_t batch)
{
    ocl_args a;
    int rb = p->M >= 8 ? 8 : 1;
    tdm_status st = ocl_kern(r, r->prog, r->c->tiled ? K_GEMM : rb == 8 ? K_GEMM_RB8 : K_GEMM_RB1, &a);
    if (st)
        return st;
    ocl_arg_mem(&a, A);
    ocl_arg_mem(&a, B);
    ocl_arg_mem(&a, C ? C : A);
    ocl_arg_mem(&a, Y);
    ocl_arg_int(&a, p->M);
    ocl_arg_int(&a, p->N);
    ocl_arg_int(&a, p->K);
    ocl_arg_int(&a, p->sam);
    ocl_arg_int(&a, p->sak);
    ocl_arg_int(&a, p->sbk);
    ocl_arg_int(&a, p->sbn);
    ocl_arg_int(&a, p->offa);
    ocl_arg_int(&a, p->offb);
    ocl_arg_int(&a, p->nb);
    ocl_arg_int4(&a, p->bd);
    ocl_arg_int4(&a, p->bsa);
    ocl_arg_int4(&a, p->bsb);
    ocl_arg_float(&a, p->alpha);
    ocl_arg_float(&a, p->beta);
    ocl_arg_int(&a, p->has_c);
    ocl_arg_int(&a, p->scm);
    ocl_arg_int(&a, p->scn);
    if (!r->c->tiled) {
        size_t g[3] = {(size_t)p->N, ((size_t)p->M + (size_t)rb - 1) / (size_t)rb, batch};
        return ocl_launch(r->c, r->e, &a, "gemm", 3, g, NULL);
    }
    size_t ts = (size_t)r->c->ts;
    size_t g[3] = {(size_t)p->N, (size_t)p->M, batch}, l[3] = {ts, ts, 1};
    return ocl_launch(r->c, r->e, &a, "gemm", 3, g, l);
}

void ocl_gemm_init(ocl_gemm_p *p)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < 4; i++)
        p->bd[i] = 1;
    p->alpha = 1;
    p->beta = 1;
}

tdm_status ocl_run_gemm(orun *r)
{
    const tdm_device_tensor *A = &r->in[0], *B = &r->in[1];
    if (!in_present(r, 0) || !in_present(r, 1))
        return ocl_fail(r, TDM_E_MODEL, "needs inputs A and B");
    if (A->rank != 2 || B->rank != 2)
        return ocl_fail(r, TDM_E_RUNTIME, "takes 2-D A and B, not rank %d and %d", A->rank, B->rank);
    const gr_node *n = &r->o->gn;
    int ta = gr_attr_int(n, "transA", 0) != 0, tb = gr_attr_int(n, "transB", 0) != 0;
    int64_t M = ta ? A->dims[1] : A->dims[0], K = ta ? A->dims[0] : A->dims[1];
    int64_t K2 = tb ? B->dims[1] : B->dims[0], N = tb ? B->dims[0] : B->dims[1];
    if (K != K2)
        return ocl_fail(r, TDM_E_RUNTIME, "inner dimensions differ (%lld and %lld)", (long long)K, (long long)K2);
    ocl_gemm_p p;
    ocl_gemm_init(&p);
    p.M = (int)M;
    p.N = (int)N;
    p.K = (int)K;
    p.sam = ta ? 1 : (int)K;
    p.sak = ta ? (int)M : 1;
    p.sbk = tb ? 1 : (int)N;
    p.sbn = tb ? (int)K : 1;
    p.alpha = gr_attr_float(n, "alpha", 1.0f);
    p.beta = gr_attr_float(n, "beta", 1.0f);
    cl_mem C = NULL;
    if (in_present(r, 2) && p.beta != 0) {
        const tdm_device_tensor *c = &r->in[2];
        int64_t c0 = c->rank == 2 ? c->dims[0] : 1, c1 = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
        if (c->rank > 2 || (c0 != 1 && c0 != M) || (c1 != 1 && c1 != N))
            return ocl_fail(r, TDM_E_RUNTIME, "input C does not broadcast to %lldx%lld", (long long)M, (long long)N);
        p.has_c = 1;
        p.scm = c0 == 1 ? 0 : (int)c1;
        p.scn = c1 == 1 ? 0 : 1;
        C = MEM(c);
    }
    int64_t od[2] = {M, N};
    tdm_status st = ocl_out_new(r, 0, A->dtype, 2, od);
    if (st)
        return st;
    return ocl_gemm_launch(r, MEM(A), MEM(B), C, MEM(&r->out[0]), &p, 1);
}

tdm_status ocl_run_matmul(orun *r)
{
    const tdm_device_tensor *A = &r->in[0], *B = &r->in[1];
    if (!in_present(r, 0) || !in_present(r, 1))
        return ocl_fail(r, TDM_E_MODEL, "needs inputs A and B");
    if (A->rank < 1 || B->rank < 1)
        return ocl_fail(r, TDM_E_RUNTIME, "takes inputs of rank 1 or more");
    int64_t ad[TDM_MAX_RANK], bd[TDM_MAX_RANK];
    int ar = A->rank, br = B->rank;
    memcpy(ad, A->dims, sizeof ad[0] * (size_t)ar);
    memcpy(bd, B->dims, sizeof bd[0] * (size_t)br);
    if (ar == 1) {
        ad[1] = ad[0];
        ad[0] = 1;
        ar = 2;
    }
    if (br == 1) {
        bd[1] = 1;
        br = 2;
    }
    int64_t M = ad[ar - 2], K = ad[ar - 1], K2 = bd[br - 2], N = bd[br - 1];
    if (K != K2)
        return ocl_fail(r, TDM_E_RUNTIME, "inner dimensions differ (%lld and %lld)", (long long)K, (long long)K2);
    int64_t batch[TDM_MAX_RANK];
    int nbat;
    if (op_broadcast(ar - 2, ad, br - 2, bd, &nbat, batch))
        return ocl_fail(r, TDM_E_RUNTIME, "batch dimensions do not broadcast");
    int64_t od[TDM_MAX_RANK];
    int orank = 0;
    for (int k = 0; k < nbat; k++)
        od[orank++] = batch[k];
    if (A->rank > 1)
        od[orank++] = M;
    if (B->rank > 1)
        od[orank++] = N;
    tdm_status st = ocl_out_new(r, 0, A->dtype, orank, od);
    if (st)
        return st;
    /* batch strides (elements) of A and B per output batch dim */
    int64_t s[2][TDM_MAX_RANK], d[TDM_MAX_RANK];
    size_t nbatch = 1;
    for (int k = 0; k < nbat; k++) {
        int ka = k - (nbat - (ar - 2)), kb = k - (nbat - (br - 2));
        int64_t sa = M * K, sb = K * N;
        for (int j = ka + 1; j < ar - 2; j++)
            sa *= ad[j];
        for (int j = kb + 1; j < br - 2; j++)
            sb *= bd[j];
        s[0][k] = ka >= 0 && ad[ka] != 1 ? sa : 0;
        s[1][k] = kb >= 0 && bd[kb] != 1 ? sb : 0;
        d[k] = batch[k];
        nbatch *= (size_t)batch[k];
    }
    ocl_gemm_p p;
    ocl_gemm_init(&p);
    p.M = (int)M;
    p.N = (int)N;
    p.K = (int)K;
    p.sam = (int)K;
    p.sak = 1;
    p.sbk = (int)N;
    p.sbn = 1;
    p.beta = 0;
    int bzero = 1;
    for (int k = 0; k < nbat; k++)
        bzero &= s[1][k] == 0 && (s[0][k] != 0 || batch[k] == 1);
    if (nbat > 0 && bzero) {
        /* B shared by every batch and A contiguous: one GEMM of batch*M rows */
        if ((size_t)M * nbatch > (size_t)INT_MAX)
            return ocl_fail(r, TDM_E_UNSUPPORTED, "is too large for opencl's 32-bit indexing");
        p.M = (int)(M * (int64_t)nbatch);
        return ocl_gemm_launch(r, MEM(A), MEM(B), NULL, MEM(&r->out[0]), &p, 1);
    }
    if (nbat > 0) {
        int nr = ocl_coalesce(nbat, d, 2, s);
        if (nr > 4)
            return ocl_fail(r, TDM_E_UNSUPPORTED, "broadcasts over %d batch dimensions; opencl takes 4", nr);
        p.nb = nr;
        for (int k = 0; k < nr; k++) {
            p.bd[k] = (int)d[k];
            p.bsa[k] = (int)s[0][k];
            p.bsb[k] = (int)s[1][k];
        }
    }
    return ocl_gemm_launch(r, MEM(A), MEM(B), NULL, MEM(&r->out[0]), &p, nbatch);
}

tdm_reason ocl_check_matmul(const onode *o, tdm_verdict *v)
{
    for (int i = 0; i < 2 && i < o->d->n_inputs; i++)
        if (o->d->inputs[i].rank > 6)
            return ocl_verdict(v, TDM_REASON_SHAPE_UNSUPPORTED, "opencl MatMul takes inputs of rank 6 or less, not %d",
                           o->d->inputs[i].rank);
    return TDM_REASON_OK;
}

#else

typedef int ocl_gemm_unused;

#endif
