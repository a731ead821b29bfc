/* The interpreter of the fused elementwise programs (ops/fuse_prog.h):
 * op_fuse_apply, which kernels call per tile, and fuse_apply_all, which the
 * executor calls when the head's kernel did not apply the program. */
#include "ops/fuse_prog.h"
#include "core/pool.h"
#include "ops/elementwise.h"

#include <math.h>
#include <string.h>

/* Elements per block of the interpreter. */
#define FUSE_BLOCK 256
/* Elements per pool task when a program runs over a whole tensor. */
#define FUSE_TASK 16384

/* ---------------------------------------------------------- interpreter */

enum { OG_FULL, OG_SCALAR, OG_BLOCK, OG_GENERAL };

/* Where an operand's elements come from for output flat index i. */
typedef struct fuse_geo {
    int mode;
    const float *d;
    size_t inner, cnt;
    int64_t strides[TDM_MAX_RANK];
} fuse_geo;

static void geo_init(fuse_geo *o, const tdm_tensor *t, const tdm_tensor *y)
{
    o->d = t->data;
    o->cnt = t->count;
    if (t->count == y->count) {
        o->mode = OG_FULL;
        return;
    }
    if (t->count == 1) {
        o->mode = OG_SCALAR;
        return;
    }
    int r = y->rank, lo = -1, hi = -1;
    int64_t dims[TDM_MAX_RANK];
    for (int k = 0; k < r; k++) {
        int j = k - (r - t->rank);
        dims[k] = j >= 0 ? t->dims[j] : 1;
        if (dims[k] != 1) {
            if (lo < 0)
                lo = k;
            hi = k;
        }
    }
    int block = lo >= 0;
    for (int k = lo; block && k <= hi; k++)
        block = dims[k] == y->dims[k];
    if (block) {
        o->mode = OG_BLOCK;
        o->inner = 1;
        for (int k = hi + 1; k < r; k++)
            o->inner *= (size_t)y->dims[k];
        return;
    }
    o->mode = OG_GENERAL;
    op_bcast_strides(r, y->dims, t->rank, t->dims, o->strides);
}

/* The operand's m elements for output indices i0.. (buf when copied). */
static const float *geo_load(const fuse_geo *o, const tdm_tensor *y, size_t i0, size_t m, float *buf)
{
    switch (o->mode) {
    case OG_FULL:
        return o->d + i0;
    case OG_SCALAR:
        for (size_t i = 0; i < m; i++)
            buf[i] = o->d[0];
        return buf;
    case OG_BLOCK:
        for (size_t i = 0; i < m;) {
            size_t idx = i0 + i, j = (idx / o->inner) % o->cnt, run;
            if (o->inner == 1) {
                run = o->cnt - j < m - i ? o->cnt - j : m - i;
                memcpy(buf + i, o->d + j, run * sizeof *buf);
            } else {
                size_t left = o->inner - idx % o->inner;
                run = left < m - i ? left : m - i;
                float v = o->d[j];
                for (size_t k = 0; k < run; k++)
                    buf[i + k] = v;
            }
            i += run;
        }
        return buf;
    default:
        for (size_t i = 0; i < m; i++)
            buf[i] = o->d[op_bcast_offset(i0 + i, y->rank, y->dims, o->strides)];
        return buf;
    }
}

static void run_unary(const fuse_ins *in, int avx2, float *d, const float *a, size_t m)
{
    const float p = in->p, q = in->q;
    size_t i;
    switch (in->kind) {
    case FK_RELU:
        if (avx2) {
            fuse_relu_avx2(d, a, m);
            break;
        }
        for (i = 0; i < m; i++)
            d[i] = a[i] < 0 ? 0.0f : a[i];
        break;
    case FK_CLIP:
        if (avx2) {
            fuse_clip_avx2(d, a, m, p, q);
            break;
        }
        for (i = 0; i < m; i++) {
            float v = a[i];
            v = v < p ? p : v;
            d[i] = v > q ? q : v;
        }
        break;
    case FK_LEAKY:
        for (i = 0; i < m; i++)
            d[i] = a[i] < 0 ? p * a[i] : a[i];
        break;
    case FK_SIGMOID: /* only when avx2 (see try_add) */
        op_ew_sigmoid_avx2(a, d, m);
        break;
    case FK_HSIGMOID:
        for (i = 0; i < m; i++)
            d[i] = fmaxf(0.0f, fminf(1.0f, p * a[i] + q));
        break;
    case FK_HSWISH:
        for (i = 0; i < m; i++) {
            float v = a[i];
            d[i] = v * fmaxf(0.0f, fminf(1.0f, p * v + q));
        }
        break;
    case FK_TANH:
        for (i = 0; i < m; i++)
            d[i] = tanhf(a[i]);
        break;
    case FK_ERF:
        if (avx2)
            op_ew_erf_avx2(a, d, m);
        else
            for (i = 0; i < m; i++)
                d[i] = erff(a[i]);
        break;
    default:
        break;
    }
}

static void run_binary(int kind, int avx2, float *d, const float *a, const float *b, size_t m)
{
    size_t i;
    if (avx2) {
        fuse_bin_avx2(kind - FK_ADD, d, a, b, m);
        return;
    }
    switch (kind) {
    case FK_ADD:
        for (i = 0; i < m; i++)
            d[i] = a[i] + b[i];
        break;
    case FK_SUB:
        for (i = 0; i < m; i++)
            d[i] = a[i] - b[i];
        break;
    case FK_MUL:
        for (i = 0; i < m; i++)
            d[i] = a[i] * b[i];
        break;
    case FK_DIV:
        for (i = 0; i < m; i++)
            d[i] = a[i] / b[i];
        break;
    case FK_MAX:
        for (i = 0; i < m; i++)
            d[i] = (a[i] != a[i] || a[i] > b[i]) ? a[i] : b[i];
        break;
    case FK_MIN:
        for (i = 0; i < m; i++)
            d[i] = (a[i] != a[i] || a[i] < b[i]) ? a[i] : b[i];
        break;
    default:
        break;
    }
}

/* d = a op s (s_first: s op a). */
static void run_binary_s(int kind, int avx2, float *d, const float *a, float s, int s_first, size_t m)
{
    size_t i;
    if (avx2) {
        fuse_bin_scalar_avx2(kind - FK_ADD, d, a, s, s_first, m);
        return;
    }
    switch (kind * 2 + (s_first != 0)) {
    case FK_ADD * 2: for (i = 0; i < m; i++) d[i] = a[i] + s; break;
    case FK_ADD * 2 + 1: for (i = 0; i < m; i++) d[i] = s + a[i]; break;
    case FK_SUB * 2: for (i = 0; i < m; i++) d[i] = a[i] - s; break;
    case FK_SUB * 2 + 1: for (i = 0; i < m; i++) d[i] = s - a[i]; break;
    case FK_MUL * 2: for (i = 0; i < m; i++) d[i] = a[i] * s; break;
    case FK_MUL * 2 + 1: for (i = 0; i < m; i++) d[i] = s * a[i]; break;
    case FK_DIV * 2: for (i = 0; i < m; i++) d[i] = a[i] / s; break;
    case FK_DIV * 2 + 1: for (i = 0; i < m; i++) d[i] = s / a[i]; break;
    default:
        for (i = 0; i < m; i++) {
            float x = s_first ? s : a[i], z = s_first ? a[i] : s;
            d[i] = kind == FK_MAX ? ((x != x || x > z) ? x : z) : ((x != x || x < z) ? x : z);
        }
        break;
    }
}

void op_fuse_apply(const op_fuse *f, float *y, size_t at, size_t n)
{
    const fuse_prog *c = f->prog;
    const int last = c->n_members - 1;
    int lin = c->n_lin > 0 && last > 0;
    float sv[FUSE_LIN_MAX];
    const float *pv[FUSE_LIN_MAX];
    for (int s = 0; lin && s < c->n_lin; s++) {
        const fuse_lin *st = &c->lin[s];
        if (st->op == FL_SAVE || st->op == FL_RELU || st->op == FL_CLIP || st->op == FL_SIGMOID || st->src == 0)
            continue;
        const tdm_tensor *t = f->opd[st->opd];
        if (st->src == 1 && t->count == 1)
            sv[s] = ((const float *)t->data)[0];
        else if (st->src == 2 && t->count == f->y->count)
            pv[s] = (const float *)t->data + at;
        else
            lin = 0;
    }
    if (last < 0) {
        /* no step: a folded BatchNormalization alone */
    } else if (lin) {
        fuse_lin_avx2(c->lin, c->n_lin, sv, pv, y, n);
    } else if (last == 0 && c->ins[0].kind < FK_ADD) {
        /* one activation: in place (every loop reads an element before
         * writing it; the AVX2 Sigmoid / Erf allow x == y) */
        run_unary(&c->ins[0], c->avx2, y, y, n);
    } else {
        /* registers 1 .. last (the last step writes y itself) */
        float regs[FUSE_MAX_NODES - 1][FUSE_BLOCK];
        float obuf[FUSE_BLOCK];
        fuse_geo geo[FUSE_MAX_OPERANDS];
        for (int k = 0; k < c->n_opd; k++)
            geo_init(&geo[k], f->opd[k], f->y);
        for (size_t off = 0; off < n; off += FUSE_BLOCK) {
            size_t m = n - off < FUSE_BLOCK ? n - off : FUSE_BLOCK, i0 = at + off;
            float *y0 = y + off;
            for (int s = 0; s <= last; s++) {
                const fuse_ins *in = &c->ins[s];
                float *d = s == last ? y0 : regs[in->dst - 1];
                if (in->kind < FK_ADD) { /* the source of a unary step is a register */
                    run_unary(in, c->avx2, d, in->a == 0 ? y0 : regs[in->a - 1], m);
                    continue;
                }
                const int op_first = in->a < 0, ok = op_first ? -1 - in->a : in->b < 0 ? -1 - in->b : -1;
                const int r = op_first ? in->b : in->a; /* a register */
                const float *x = r == 0 ? y0 : regs[r - 1];
                if (ok < 0) {
                    run_binary(in->kind, c->avx2, d, x, in->b == 0 ? y0 : regs[in->b - 1], m);
                    continue;
                }
                const fuse_geo *o = &geo[ok];
                if (o->mode == OG_SCALAR) {
                    run_binary_s(in->kind, c->avx2, d, x, o->d[0], op_first, m);
                } else if (o->mode == OG_BLOCK && o->inner > 1) { /* runs of one operand value */
                    for (size_t i = 0; i < m;) {
                        size_t idx = i0 + i, j = (idx / o->inner) % o->cnt, left = o->inner - idx % o->inner;
                        size_t run = left < m - i ? left : m - i;
                        run_binary_s(in->kind, c->avx2, d + i, x + i, o->d[j], op_first, run);
                        i += run;
                    }
                } else {
                    const float *v = geo_load(o, f->y, i0, m, obuf);
                    if (op_first)
                        run_binary(in->kind, c->avx2, d, v, x, m);
                    else
                        run_binary(in->kind, c->avx2, d, x, v, m);
                }
            }
        }
    }
    /* The executor's check that the kernel applied the program: the
     * count of the whole output once any part of it was applied (a load
     * and, the first time, a store: no read-modify-write per call). */
    atomic_size_t *done = &((op_fuse *)f)->done;
    if (atomic_load_explicit(done, memory_order_relaxed) == 0)
        atomic_store_explicit(done, f->y->count, memory_order_relaxed);
}

int op_fuse_clamp(const op_fuse *f, float *lo, float *hi)
{
    const fuse_prog *c = f ? f->prog : NULL;
    if (!c || c->n_members != 1)
        return 0;
    if (c->ins[0].kind == FK_RELU) {
        *lo = 0.0f;
        *hi = INFINITY;
        return 1;
    }
    if (c->ins[0].kind == FK_CLIP) {
        *lo = c->ins[0].p;
        *hi = c->ins[0].q;
        return 1;
    }
    return 0;
}

void op_fuse_applied(const op_fuse *f) { atomic_store(&((op_fuse *)f)->done, f->y->count); }

typedef struct fuse_job {
    const op_fuse *f;
    float *y;
    size_t n, per;
} fuse_job;

static void fuse_task(void *arg, size_t t)
{
    const fuse_job *j = arg;
    size_t i0 = t * j->per, m = j->n - i0 < j->per ? j->n - i0 : j->per;
    op_fuse_apply(j->f, j->y + i0, i0, m);
}

void fuse_apply_all(const op_fuse *f, int threads)
{
    fuse_job j;
    j.f = f;
    j.y = f->y->data;
    j.n = f->y->count;
    if (!j.n)
        return;
    size_t tasks = pool_tasks(threads, j.n, FUSE_TASK);
    j.per = (j.n + tasks - 1) / tasks;
    j.per = (j.per + 15) / 16 * 16;
    pool_run(threads, (j.n + j.per - 1) / j.per, fuse_task, &j);
}
