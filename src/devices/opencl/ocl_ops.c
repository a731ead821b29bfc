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

#include "devices/opencl/ocl_internal.h"
#include "core/mem.h"
#include "core/tensor.h"
#include "graph/graph.h"
#include "ops/nn.h"
#include "ops/op.h"

#include <float.h>
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Unary codes of un_op in kernels.cl. */
enum ocl_unary {
    U_ABS, U_NEG, U_EXP, U_LOG, U_SQRT, U_RECIP, U_FLOOR, U_CEIL, U_ROUND, U_SIGN, U_ERF, U_SIN, U_COS, U_TAN,
    U_ASIN, U_ACOS, U_ATAN, U_SINH, U_COSH, U_ASINH, U_ACOSH, U_ATANH, U_RELU, U_LEAKY, U_ELU, U_SELU, U_CELU,
    U_SIGMOID, U_HSIGMOID, U_HSWISH, U_SOFTPLUS, U_SOFTSIGN, U_TANH, U_THRELU, U_CLIP, U_MULC, U_DIVC
};

/* Binary codes of bin_op in kernels.cl. */
enum ocl_binary { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN, B_PRELU };

/* ------------------------------------------------------------ node views */

typedef struct onode {
    const tdm_node_desc *d;
    gr_node gn;
    gr_attr *attrs;
    int op, version;
} onode;

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

static int desc_present(const tdm_node_desc *d, int i)
{
    return i < d->n_inputs && d->inputs[i].name && d->inputs[i].name[0] && d->inputs[i].dtype != TDM_UNDEFINED;
}

static int desc_out_present(const tdm_node_desc *d, int i)
{
    return i < d->n_outputs && d->outputs[i].name && d->outputs[i].name[0];
}

/* ------------------------------------------------------------- op table */

/* The kernels follow the ONNX definitions up to opset 17: a node whose op
 * tandem resolves to a newer definition (ReduceMean 18 takes its axes as
 * an input, Resize 18 antialiases, ...) is not theirs to run. */
#define OCL_MAX_SINCE 17

typedef struct orun orun;
typedef struct ocl_opdef ocl_opdef;

enum { KIND_FLOAT, KIND_ANY, KIND_SHAPE };

struct ocl_opdef {
    const char *name;
    int kind;
    int code;
    /* (optional) op-specific verdict beyond op, dtype and rank */
    tdm_reason (*check)(const onode *o, tdm_verdict *v);
    tdm_status (*run)(orun *r);
    int max_rank;  /* ranks above are SHAPE_UNSUPPORTED (0: OCL_MAX_RANK) */
};

struct orun {
    ocl_ctx *c;
    tdm_err *e;
    onode *o;
    const ocl_opdef *def;
    const tdm_device_tensor *in;
    int n_in;
    tdm_device_tensor *out;
    int n_out;
    int prog;
};

static tdm_reason verdict(tdm_verdict *v, tdm_reason r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static tdm_reason verdict(tdm_verdict *v, tdm_reason r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->detail, sizeof v->detail, fmt, ap);
    va_end(ap);
    v->reason = r;
    return r;
}

/* ---------------------------------------------------------- run helpers */

static cl_mem MEM(const tdm_device_tensor *t) { return (cl_mem)t->buf; }

static int in_present(const orun *r, int i) { return i < r->n_in && r->in[i].buf != NULL; }

static int out_wanted(const orun *r, int i) { return i < r->n_out && desc_out_present(r->o->d, i); }

static size_t tcount(const tdm_device_tensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= (size_t)t->dims[i];
    return n;
}

static tdm_status fail(orun *r, tdm_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static tdm_status fail(orun *r, tdm_status st, const char *fmt, ...)
{
    char buf[TDM_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return err_set(r->e, st, "%s: %s %s", r->c->name, r->o->d->op_type, buf);
}

/* Output i of the given type and shape, in a new device buffer. */
static tdm_status out_new(orun *r, int i, tdm_dtype dt, int rank, const int64_t *dims)
{
    size_t n, bytes;
    if (i >= r->n_out)
        return fail(r, TDM_E_INTERNAL, "has no output %d", i);
    if (rank < 0 || rank > 16)
        return fail(r, TDM_E_UNSUPPORTED, "output %d would have rank %d", i, rank);
    if (shape_count(rank, dims, &n) || mem_mul(n, tdm_dtype_size(dt), &bytes))
        return fail(r, TDM_E_NOMEM, "output %d is too large", i);
    if (n > (size_t)INT_MAX)
        return fail(r, TDM_E_UNSUPPORTED, "output %d has %zu elements; opencl kernels index at most %d", i, n,
                    INT_MAX);
    cl_mem m;
    tdm_status st = ocl_buf_new(r->c, r->e, bytes, &m);
    if (st)
        return st;
    tdm_device_tensor *t = &r->out[i];
    t->dtype = dt;
    t->rank = rank;
    for (int k = 0; k < rank; k++)
        t->dims[k] = dims[k];
    t->buf = m;
    t->bytes = bytes;
    return TDM_OK;
}

/* The bytes of small input i (cnt values of es bytes): its constant value
 * from the description, or a read of the device buffer. *raw is allocated
 * (mem_free) with 8 spare bytes. */
static tdm_status in_raw(orun *r, int i, size_t cnt, size_t es, void **raw)
{
    *raw = NULL;
    if (cnt > (1u << 20))
        return fail(r, TDM_E_UNSUPPORTED, "input %d has %zu values; at most 1048576 are read back", i, cnt);
    void *buf = mem_alloc(cnt * es + 8);
    if (!buf)
        return fail(r, TDM_E_NOMEM, "out of memory");
    const tdm_tensor_desc *td = &r->o->d->inputs[i];
    tdm_status st = TDM_OK;
    if (td->data)
        memcpy(buf, td->data, cnt * es);
    else
        st = ocl_read(r->c, r->e, MEM(&r->in[i]), 0, buf, cnt * es);
    if (st) {
        mem_free(buf);
        return st;
    }
    *raw = buf;
    return TDM_OK;
}

/* Integer values of a small input (shape, axes, starts …). *v is
 * allocated (mem_free); *n = -1 when the input is omitted. */
static tdm_status in_ints(orun *r, int i, int64_t **v, int64_t *n)
{
    *v = NULL;
    *n = -1;
    if (!in_present(r, i))
        return TDM_OK;
    const tdm_device_tensor *t = &r->in[i];
    size_t cnt = tcount(t);
    if (t->dtype != TDM_INT64 && t->dtype != TDM_INT32)
        return fail(r, TDM_E_RUNTIME, "input %d must be int64 or int32, not %s", i, tdm_dtype_name(t->dtype));
    void *raw;
    tdm_status st = in_raw(r, i, cnt, tdm_dtype_size(t->dtype), &raw);
    if (st)
        return st;
    int64_t *out = mem_calloc(cnt + 1, sizeof *out);
    if (!out) {
        mem_free(raw);
        return fail(r, TDM_E_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < cnt; k++)
        out[k] = t->dtype == TDM_INT64 ? ((const int64_t *)raw)[k] : ((const int32_t *)raw)[k];
    mem_free(raw);
    *v = out;
    *n = (int64_t)cnt;
    return TDM_OK;
}

/* Float values of a small input (Clip bounds, Resize scales), as doubles. */
static tdm_status in_floats(orun *r, int i, double **v, int64_t *n)
{
    *v = NULL;
    *n = -1;
    if (!in_present(r, i))
        return TDM_OK;
    const tdm_device_tensor *t = &r->in[i];
    size_t cnt = tcount(t);
    if (t->dtype != TDM_FLOAT && t->dtype != TDM_FLOAT16 && t->dtype != TDM_DOUBLE)
        return fail(r, TDM_E_RUNTIME, "input %d must be a float tensor, not %s", i, tdm_dtype_name(t->dtype));
    void *raw;
    tdm_status st = in_raw(r, i, cnt, tdm_dtype_size(t->dtype), &raw);
    if (st)
        return st;
    double *out = mem_calloc(cnt + 1, sizeof *out);
    if (!out) {
        mem_free(raw);
        return fail(r, TDM_E_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < cnt; k++)
        out[k] = t->dtype == TDM_FLOAT    ? ((const float *)raw)[k]
                 : t->dtype == TDM_DOUBLE ? ((const double *)raw)[k]
                                          : fp16_to_f32(((const uint16_t *)raw)[k]);
    mem_free(raw);
    *v = out;
    *n = (int64_t)cnt;
    return TDM_OK;
}

static tdm_status kern(orun *r, int prog, ocl_kid k, ocl_args *a)
{
    memset(a, 0, sizeof *a);
    return ocl_kernel(r->c, r->e, prog, k, &a->k);
}

static tdm_status launch1(orun *r, ocl_args *a, const char *what, size_t n)
{
    size_t g[1] = {n};
    return ocl_launch(r->c, r->e, a, what, 1, g, NULL);
}

/* Merges adjacent dims whose every stride array continues (and drops dims
 * of size 1); returns the new rank (at least 1). st holds ns arrays. */
static int coalesce(int rank, int64_t *d, int ns, int64_t st[][TDM_MAX_RANK])
{
    int n = 0;
    for (int k = 0; k < rank; k++) {
        if (d[k] == 1)
            continue;
        int merge = n > 0;
        for (int s = 0; s < ns && merge; s++)
            merge = st[s][n - 1] == st[s][k] * d[k];
        if (merge) {
            d[n - 1] *= d[k];
            for (int s = 0; s < ns; s++)
                st[s][n - 1] = st[s][k];
        } else {
            d[n] = d[k];
            for (int s = 0; s < ns; s++)
                st[s][n] = st[s][k];
            n++;
        }
    }
    if (n == 0) {
        d[0] = 1;
        for (int s = 0; s < ns; s++)
            st[s][0] = 0;
        n = 1;
    }
    return n;
}

static void to_int8(const int64_t *v, int n, int *o)
{
    for (int i = 0; i < 8; i++)
        o[i] = i < n ? (int)v[i] : 1;
}

static ocl_kid by_size(ocl_kid base, size_t es) { return (ocl_kid)(base + (es == 1 ? 0 : es == 2 ? 1 : es == 4 ? 2 : 3)); }

/* y[i] = x[base + sum c_k is_k] over the output dims od (rank <= 16 before
 * coalescing). */
static tdm_status copy_strided(orun *r, cl_mem x, cl_mem y, size_t es, int rank, const int64_t *od,
                               const int64_t *is, int64_t base)
{
    int64_t d[TDM_MAX_RANK], st[1][TDM_MAX_RANK];
    size_t n = 1;
    for (int k = 0; k < rank; k++) {
        d[k] = od[k];
        st[0][k] = is[k];
        n *= (size_t)od[k];
    }
    if (n == 0)
        return TDM_OK;
    int nr = coalesce(rank, d, 1, st);
    if (nr > OCL_MAX_RANK)
        return fail(r, TDM_E_UNSUPPORTED, "needs %d dimensions after merging; opencl kernels take %d", nr,
                    OCL_MAX_RANK);
    int di[8], si[8];
    to_int8(d, nr, di);
    for (int i = 0; i < 8; i++)
        si[i] = i < nr ? (int)st[0][i] : 0;
    ocl_args a;
    tdm_status s = kern(r, OCL_P32, by_size(K_COPY_STRIDED_1, es), &a);
    if (s)
        return s;
    ocl_arg_mem(&a, x);
    ocl_arg_mem(&a, y);
    ocl_arg_int(&a, (int)n);
    ocl_arg_int(&a, nr);
    ocl_arg_int8(&a, di);
    ocl_arg_int8(&a, si);
    ocl_arg_int(&a, (int)base);
    return launch1(r, &a, "copy_strided", n);
}

/* ------------------------------------------------------------ elementwise */

static tdm_status run_unary_code(orun *r, int code, float a_, float b_, float g_)
{
    const tdm_device_tensor *x = &r->in[0];
    tdm_status st = out_new(r, 0, x->dtype, x->rank, x->dims);
    if (st)
        return st;
    size_t n = tcount(x);
    ocl_args a;
    if ((st = kern(r, r->prog, K_UNARY, &a)))
        return st;
    ocl_arg_mem(&a, MEM(x));
    ocl_arg_mem(&a, MEM(&r->out[0]));
    ocl_arg_int(&a, (int)n);
    ocl_arg_int(&a, code);
    ocl_arg_float(&a, a_);
    ocl_arg_float(&a, b_);
    ocl_arg_float(&a, g_);
    return launch1(r, &a, r->o->d->op_type, n);
}

static tdm_status run_unary(orun *r)
{
    const gr_node *n = &r->o->gn;
    float a = 0, b = 0, g = 0;
    switch (r->def->code) {
    case U_LEAKY: a = gr_attr_float(n, "alpha", 0.01f); break;
    case U_ELU: case U_CELU: case U_THRELU: a = gr_attr_float(n, "alpha", 1.0f); break;
    case U_SELU:
        a = gr_attr_float(n, "alpha", 1.67326319217681884765625f);
        g = gr_attr_float(n, "gamma", 1.05070102214813232421875f);
        break;
    case U_HSIGMOID:
        a = gr_attr_float(n, "alpha", 0.2f);
        b = gr_attr_float(n, "beta", 0.5f);
        break;
    case U_HSWISH:
        a = (float)(1.0 / 6);
        b = 0.5f;
        break;
    case U_CLIP:
        if (r->o->version < 11) {
            a = gr_attr_float(n, "min", -FLT_MAX);
            b = gr_attr_float(n, "max", FLT_MAX);
        } else {
            double *v;
            int64_t cnt;
            a = -INFINITY;
            b = INFINITY;
            for (int i = 1; i <= 2; i++) {
                tdm_status st = in_floats(r, i, &v, &cnt);
                if (st)
                    return st;
                if (cnt >= 0 && cnt != 1) {
                    mem_free(v);
                    return fail(r, TDM_E_RUNTIME, "input %d (%s) must be a scalar", i, i == 1 ? "min" : "max");
                }
                if (cnt == 1) {
                    if (i == 1)
                        a = (float)v[0];
                    else
                        b = (float)v[0];
                }
                mem_free(v);
            }
        }
        break;
    default: break;
    }
    if (r->def->code == U_CELU && a == 0)
        return fail(r, TDM_E_MODEL, "attribute 'alpha' must not be 0");
    return run_unary_code(r, r->def->code, a, b, g);
}

/* y (shape od) = a op b with broadcasting. */
static tdm_status binary_launch(orun *r, int op, const tdm_device_tensor *A, const tdm_device_tensor *B, cl_mem y,
                                int orank, const int64_t *od)
{
    size_t n = 1, na = tcount(A), nb = tcount(B);
    for (int k = 0; k < orank; k++)
        n *= (size_t)od[k];
    if (n == 0)
        return TDM_OK;
    ocl_args a;
    tdm_status st;
    int mode = -1;
    if (na == n && nb == n)
        mode = 0;
    else if (na == n && nb == 1)
        mode = 1;
    else if (na == 1 && nb == n)
        mode = 2;
    if (mode >= 0) {
        if ((st = kern(r, r->prog, K_BINARY_FLAT, &a)))
            return st;
        ocl_arg_mem(&a, MEM(A));
        ocl_arg_mem(&a, MEM(B));
        ocl_arg_mem(&a, y);
        ocl_arg_int(&a, (int)n);
        ocl_arg_int(&a, op);
        ocl_arg_int(&a, mode);
        return launch1(r, &a, r->o->d->op_type, n);
    }
    int64_t d[TDM_MAX_RANK], s[2][TDM_MAX_RANK];
    memcpy(d, od, sizeof d[0] * (size_t)orank);
    op_bcast_strides(orank, od, A->rank, A->dims, s[0]);
    op_bcast_strides(orank, od, B->rank, B->dims, s[1]);
    int nr = coalesce(orank, d, 2, s);
    if (nr > OCL_MAX_RANK)
        return fail(r, TDM_E_UNSUPPORTED, "broadcasts over %d dimensions after merging; opencl kernels take %d", nr,
                    OCL_MAX_RANK);
    int di[8], sa[8], sb[8];
    to_int8(d, nr, di);
    for (int i = 0; i < 8; i++) {
        sa[i] = i < nr ? (int)s[0][i] : 0;
        sb[i] = i < nr ? (int)s[1][i] : 0;
    }
    if ((st = kern(r, r->prog, K_BINARY_BCAST, &a)))
        return st;
    ocl_arg_mem(&a, MEM(A));
    ocl_arg_mem(&a, MEM(B));
    ocl_arg_mem(&a, y);
    ocl_arg_int(&a, (int)n);
    ocl_arg_int(&a, op);
    ocl_arg_int(&a, nr);
    ocl_arg_int8(&a, di);
    ocl_arg_int8(&a, sa);
    ocl_arg_int8(&a, sb);
    return launch1(r, &a, r->o->d->op_type, n);
}

/* Add … PRelu, and the variadic Max, Min, Sum, Mean. */
static tdm_status run_binary(orun *r)
{
    const char *opn = r->o->d->op_type;
    int variadic = !strcmp(opn, "Max") || !strcmp(opn, "Min") || !strcmp(opn, "Sum") || !strcmp(opn, "Mean");
    int n_in = 0;
    for (int i = 0; i < r->n_in; i++) {
        if (!in_present(r, i))
            return fail(r, TDM_E_RUNTIME, "input %d is missing", i);
        if (r->in[i].dtype != r->in[0].dtype)
            return fail(r, TDM_E_RUNTIME, "inputs have different element types, %s and %s",
                        tdm_dtype_name(r->in[0].dtype), tdm_dtype_name(r->in[i].dtype));
        n_in++;
    }
    if (n_in < 1 || (!variadic && n_in != 2))
        return fail(r, TDM_E_RUNTIME, "takes %s inputs, not %d", variadic ? "1 or more" : "2", n_in);
    int rank = r->in[0].rank;
    int64_t dims[TDM_MAX_RANK];
    memcpy(dims, r->in[0].dims, sizeof dims[0] * (size_t)rank);
    for (int i = 1; i < n_in; i++) {
        int64_t nd[TDM_MAX_RANK];
        int nr;
        if (op_broadcast(rank, dims, r->in[i].rank, r->in[i].dims, &nr, nd))
            return fail(r, TDM_E_RUNTIME, "input %d does not broadcast with the others", i);
        rank = nr;
        memcpy(dims, nd, sizeof dims[0] * (size_t)nr);
    }
    if (r->def->code == B_PRELU && !shape_equal(rank, dims, r->in[0].rank, r->in[0].dims))
        return fail(r, TDM_E_RUNTIME, "slope does not broadcast to X");
    tdm_status st = out_new(r, 0, r->in[0].dtype, rank, dims);
    if (st)
        return st;
    tdm_device_tensor *y = &r->out[0];
    if (n_in == 1)
        return ocl_copy(r->c, r->e, MEM(&r->in[0]), 0, MEM(y), 0, y->bytes);
    if ((st = binary_launch(r, r->def->code, &r->in[0], &r->in[1], MEM(y), rank, dims)))
        return st;
    for (int i = 2; i < n_in; i++)
        if ((st = binary_launch(r, r->def->code, y, &r->in[i], MEM(y), rank, dims)))
            return st;
    if (!strcmp(opn, "Mean") && n_in > 1) {
        size_t n = tcount(y);
        ocl_args a;
        if ((st = kern(r, r->prog, K_UNARY, &a)))
            return st;
        ocl_arg_mem(&a, MEM(y));
        ocl_arg_mem(&a, MEM(y));
        ocl_arg_int(&a, (int)n);
        ocl_arg_int(&a, U_DIVC);
        ocl_arg_float(&a, (float)n_in);
        ocl_arg_float(&a, 0);
        ocl_arg_float(&a, 0);
        return launch1(r, &a, "Mean", n);
    }
    return TDM_OK;
}

static tdm_reason check_pow(const onode *o, tdm_verdict *v)
{
    const tdm_node_desc *d = o->d;
    if (d->n_inputs >= 2 && d->inputs[1].dtype != d->inputs[0].dtype && d->inputs[1].dtype != TDM_UNDEFINED)
        return verdict(v, TDM_REASON_DTYPE_UNSUPPORTED, "opencl Pow takes an exponent of the base's type (%s), not %s",
                       tdm_dtype_name(d->inputs[0].dtype), tdm_dtype_name(d->inputs[1].dtype));
    return TDM_REASON_OK;
}

static tdm_reason check_celu(const onode *o, tdm_verdict *v)
{
    if (gr_attr_float(&o->gn, "alpha", 1.0f) == 0)
        return verdict(v, TDM_REASON_ATTR_UNSUPPORTED, "opencl Celu needs a non-zero alpha");
    return TDM_REASON_OK;
}

/* BatchNormalization, inference form. */
static tdm_reason check_bn(const onode *o, tdm_verdict *v)
{
    if (o->version >= 14 && gr_attr_int(&o->gn, "training_mode", 0))
        return verdict(v, TDM_REASON_ATTR_UNSUPPORTED, "opencl BatchNormalization runs inference only, not training_mode=1");
    if (o->version < 9 && gr_attr_int(&o->gn, "spatial", 1) == 0)
        return verdict(v, TDM_REASON_ATTR_UNSUPPORTED, "opencl BatchNormalization does not take spatial=0");
    for (int i = 1; i < o->d->n_outputs; i++)
        if (desc_out_present(o->d, i))
            return verdict(v, TDM_REASON_ATTR_UNSUPPORTED,
                           "opencl BatchNormalization does not produce the running mean and variance outputs");
    for (int i = 1; i < 5 && i < o->d->n_inputs; i++)
        if (o->d->inputs[i].dtype != o->d->inputs[0].dtype)
            return verdict(v, TDM_REASON_DTYPE_UNSUPPORTED,
                           "opencl BatchNormalization takes parameters of X's type (%s), not %s",
                           tdm_dtype_name(o->d->inputs[0].dtype), tdm_dtype_name(o->d->inputs[i].dtype));
    return TDM_REASON_OK;
}

static tdm_status run_bn(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    if (r->n_in < 5)
        return fail(r, TDM_E_MODEL, "needs 5 inputs");
    for (int i = 1; i < 5; i++)
        if (!in_present(r, i))
            return fail(r, TDM_E_MODEL, "input %d is missing", i);
    if (x->rank < 2)
        return fail(r, TDM_E_UNSUPPORTED, "takes X of rank 2 or more, not %d", x->rank);
    int64_t C = x->dims[1];
    size_t inner = 1;
    for (int k = 2; k < x->rank; k++)
        inner *= (size_t)x->dims[k];
    for (int i = 1; i < 5; i++)
        if ((int64_t)tcount(&r->in[i]) != C)
            return fail(r, TDM_E_RUNTIME, "input %d has %zu values for %lld channels", i, tcount(&r->in[i]),
                        (long long)C);
    tdm_status st = out_new(r, 0, x->dtype, x->rank, x->dims);
    if (st)
        return st;
    size_t n = tcount(x);
    ocl_args a;
    if ((st = kern(r, r->prog, K_BATCHNORM, &a)))
        return st;
    ocl_arg_mem(&a, MEM(x));
    for (int i = 1; i < 5; i++)
        ocl_arg_mem(&a, MEM(&r->in[i]));
    ocl_arg_mem(&a, MEM(&r->out[0]));
    ocl_arg_int(&a, (int)n);
    ocl_arg_int(&a, (int)C);
    ocl_arg_int(&a, (int)(inner ? inner : 1));
    ocl_arg_float(&a, gr_attr_float(&r->o->gn, "epsilon", 1e-5f));
    return launch1(r, &a, "batchnorm", n);
}

/* ------------------------------------------------------------------ GEMM */

typedef struct gemm_p {
    int M, N, K, sam, sak, sbk, sbn, offa, offb, nb;
    int bd[4], bsa[4], bsb[4];
    float alpha, beta;
    int has_c, scm, scn;
} gemm_p;

static tdm_status gemm_launch(orun *r, cl_mem A, cl_mem B, cl_mem C, cl_mem Y, const gemm_p *p, size_t batch)
{
    ocl_args a;
    int rb = p->M >= 8 ? 8 : 1;
    tdm_status st = kern(r, r->prog, r->c->tiled ? K_GEMM : rb == 8 ? K_GEMM_RB8 : K_GEMM_RB1, &a);
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

static void gemm_init(gemm_p *p)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < 4; i++)
        p->bd[i] = 1;
    p->alpha = 1;
    p->beta = 1;
}

static tdm_status run_gemm(orun *r)
{
    const tdm_device_tensor *A = &r->in[0], *B = &r->in[1];
    if (!in_present(r, 0) || !in_present(r, 1))
        return fail(r, TDM_E_MODEL, "needs inputs A and B");
    if (A->rank != 2 || B->rank != 2)
        return fail(r, TDM_E_RUNTIME, "takes 2-D A and B, not rank %d and %d", A->rank, B->rank);
    const gr_node *n = &r->o->gn;
    int ta = gr_attr_int(n, "transA", 0) != 0, tb = gr_attr_int(n, "transB", 0) != 0;
    int64_t M = ta ? A->dims[1] : A->dims[0], K = ta ? A->dims[0] : A->dims[1];
    int64_t K2 = tb ? B->dims[1] : B->dims[0], N = tb ? B->dims[0] : B->dims[1];
    if (K != K2)
        return fail(r, TDM_E_RUNTIME, "inner dimensions differ (%lld and %lld)", (long long)K, (long long)K2);
    gemm_p p;
    gemm_init(&p);
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
            return fail(r, TDM_E_RUNTIME, "input C does not broadcast to %lldx%lld", (long long)M, (long long)N);
        p.has_c = 1;
        p.scm = c0 == 1 ? 0 : (int)c1;
        p.scn = c1 == 1 ? 0 : 1;
        C = MEM(c);
    }
    int64_t od[2] = {M, N};
    tdm_status st = out_new(r, 0, A->dtype, 2, od);
    if (st)
        return st;
    return gemm_launch(r, MEM(A), MEM(B), C, MEM(&r->out[0]), &p, 1);
}

static tdm_status run_matmul(orun *r)
{
    const tdm_device_tensor *A = &r->in[0], *B = &r->in[1];
    if (!in_present(r, 0) || !in_present(r, 1))
        return fail(r, TDM_E_MODEL, "needs inputs A and B");
    if (A->rank < 1 || B->rank < 1)
        return fail(r, TDM_E_RUNTIME, "takes inputs of rank 1 or more");
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
        return fail(r, TDM_E_RUNTIME, "inner dimensions differ (%lld and %lld)", (long long)K, (long long)K2);
    int64_t batch[TDM_MAX_RANK];
    int nbat;
    if (op_broadcast(ar - 2, ad, br - 2, bd, &nbat, batch))
        return fail(r, TDM_E_RUNTIME, "batch dimensions do not broadcast");
    int64_t od[TDM_MAX_RANK];
    int orank = 0;
    for (int k = 0; k < nbat; k++)
        od[orank++] = batch[k];
    if (A->rank > 1)
        od[orank++] = M;
    if (B->rank > 1)
        od[orank++] = N;
    tdm_status st = out_new(r, 0, A->dtype, orank, od);
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
    gemm_p p;
    gemm_init(&p);
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
            return fail(r, TDM_E_UNSUPPORTED, "is too large for opencl's 32-bit indexing");
        p.M = (int)(M * (int64_t)nbatch);
        return gemm_launch(r, MEM(A), MEM(B), NULL, MEM(&r->out[0]), &p, 1);
    }
    if (nbat > 0) {
        int nr = coalesce(nbat, d, 2, s);
        if (nr > 4)
            return fail(r, TDM_E_UNSUPPORTED, "broadcasts over %d batch dimensions; opencl takes 4", nr);
        p.nb = nr;
        for (int k = 0; k < nr; k++) {
            p.bd[k] = (int)d[k];
            p.bsa[k] = (int)s[0][k];
            p.bsb[k] = (int)s[1][k];
        }
    }
    return gemm_launch(r, MEM(A), MEM(B), NULL, MEM(&r->out[0]), &p, nbatch);
}

static tdm_reason check_matmul(const onode *o, tdm_verdict *v)
{
    for (int i = 0; i < 2 && i < o->d->n_inputs; i++)
        if (o->d->inputs[i].rank > 6)
            return verdict(v, TDM_REASON_SHAPE_UNSUPPORTED, "opencl MatMul takes inputs of rank 6 or less, not %d",
                           o->d->inputs[i].rank);
    return TDM_REASON_OK;
}

/* ------------------------------------------------------------ convolution */

static int spatial_rank_ok(const onode *o, tdm_verdict *v, const char *what)
{
    int rank = o->d->n_inputs > 0 ? o->d->inputs[0].rank : -1;
    if (rank >= 0 && (rank < 3 || rank > 4)) {
        verdict(v, TDM_REASON_SHAPE_UNSUPPORTED, "opencl %s supports 1-D and 2-D inputs (rank 3 or 4), not rank %d",
                what, rank);
        return 0;
    }
    return 1;
}

static tdm_reason check_conv(const onode *o, tdm_verdict *v)
{
    if (!spatial_rank_ok(o, v, o->d->op_type))
        return v->reason;
    for (int i = 1; i < 3 && i < o->d->n_inputs; i++)
        if (desc_present(o->d, i) && o->d->inputs[i].dtype != o->d->inputs[0].dtype)
            return verdict(v, TDM_REASON_DTYPE_UNSUPPORTED, "opencl %s takes W and B of X's type (%s), not %s",
                           o->d->op_type, tdm_dtype_name(o->d->inputs[0].dtype),
                           tdm_dtype_name(o->d->inputs[i].dtype));
    if (o->d->n_inputs > 1 && o->d->inputs[1].rank >= 0 && o->d->inputs[0].rank >= 0 &&
        o->d->inputs[1].rank != o->d->inputs[0].rank)
        return verdict(v, TDM_REASON_SHAPE_UNSUPPORTED, "opencl %s needs W of X's rank", o->d->op_type);
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

static tdm_status run_conv(orun *r)
{
    const tdm_device_tensor *x = &r->in[0], *w = &r->in[1];
    if (!in_present(r, 0) || !in_present(r, 1))
        return fail(r, TDM_E_MODEL, "needs inputs X and W");
    if (x->rank < 3 || x->rank > 4 || w->rank != x->rank)
        return fail(r, TDM_E_UNSUPPORTED, "takes 1-D or 2-D X and W of the same rank, not rank %d and %d", x->rank,
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
        return fail(r, TDM_E_RUNTIME, "has %lld input channels, W %lldx%lld and group %lld, which do not fit",
                    (long long)C, (long long)M, (long long)w->dims[1], (long long)group);
    const tdm_device_tensor *b = in_present(r, 2) ? &r->in[2] : NULL;
    if (b && (int64_t)tcount(b) != M)
        return fail(r, TDM_E_RUNTIME, "input B has %zu values for %lld output channels", tcount(b), (long long)M);
    int64_t od[4] = {x->dims[0], M, geo.out[1], geo.out[2]};
    if (nsp == 1)
        od[2] = geo.out[2];
    if ((st = out_new(r, 0, x->dtype, x->rank, od)))
        return st;
    conv_g g = {(int)x->dims[0], (int)C, (int)geo.in[1], (int)geo.in[2], (int)M, (int)geo.out[1], (int)geo.out[2],
                (int)geo.k[1], (int)geo.k[2], (int)geo.s[1], (int)geo.s[2], (int)geo.pb[1], (int)geo.pb[2],
                (int)geo.d[1], (int)geo.d[2], (int)(C / group), (int)(M / group), (int)group};
    if (!fits_int(geo.k[1] * geo.k[2] * g.Cg) || !fits_int(geo.s[1] * geo.out[1] + geo.k[1] * geo.d[1]) ||
        !fits_int(geo.s[2] * geo.out[2] + geo.k[2] * geo.d[2]))
        return fail(r, TDM_E_UNSUPPORTED, "is too large for opencl's 32-bit indexing");
    size_t P = (size_t)g.OH * (size_t)g.OW;
    if (tcount(&r->out[0]) == 0)
        return TDM_OK;
    cl_mem y = MEM(&r->out[0]);
    ocl_args a;
    if (g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 && group == 1 &&
        geo.pe[1] == 0 && geo.pe[2] == 0) {
        /* pointwise: Y[n] = W (M x C) X[n] (C x HW) + B */
        gemm_p p;
        gemm_init(&p);
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
        return gemm_launch(r, MEM(w), MEM(x), b ? MEM(b) : NULL, y, &p, (size_t)g.N);
    }
    if (g.Mg >= 8 && g.OW < 16 && !r->c->tiled) {
        /* W [M][Cg*KH*KW] transposed on the device into a scratch buffer */
        size_t es = tdm_dtype_size(x->dtype), K = (size_t)g.Cg * (size_t)g.KH * (size_t)g.KW;
        int64_t td[2] = {(int64_t)K, g.M}, ts[2] = {1, (int64_t)K};
        cl_mem wt;
        if ((st = ocl_buf_new(r->c, r->e, (K * (size_t)g.M + 8) * es, &wt)))
            return st;
        st = copy_strided(r, MEM(w), wt, es, 2, td, ts, 0);
        if (!st && !(st = kern(r, r->prog, K_CONV_OC8, &a))) {
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
        if ((st = kern(r, r->prog, K_CONV_PX8, &a)))
            return st;
        conv_args(r, &a, &g, MEM(x), MEM(w), b ? MEM(b) : NULL, y);
        ocl_arg_int(&a, g.group);
        ocl_arg_int(&a, b != NULL);
        size_t gs[3] = {(size_t)g.OH * (((size_t)g.OW + 7) / 8), ((size_t)g.Mg + 3) / 4,
                        (size_t)g.N * (size_t)g.group};
        return ocl_launch(r->c, r->e, &a, "conv_px8", 3, gs, NULL);
    }
    if (g.Mg >= 8) {
        if ((st = kern(r, r->prog, K_CONV_IGEMM, &a)))
            return st;
        conv_args(r, &a, &g, MEM(x), MEM(w), b ? MEM(b) : NULL, y);
        ocl_arg_int(&a, g.group);
        ocl_arg_int(&a, b != NULL);
        size_t ts = (size_t)r->c->ts;
        size_t gs[3] = {P, (size_t)g.Mg, (size_t)g.N * (size_t)g.group}, l[3] = {ts, ts, 1};
        return ocl_launch(r->c, r->e, &a, "conv_igemm", 3, gs, l);
    }
    if ((st = kern(r, r->prog, K_CONV_DIRECT, &a)))
        return st;
    conv_args(r, &a, &g, MEM(x), MEM(w), b ? MEM(b) : NULL, y);
    ocl_arg_int(&a, b != NULL);
    size_t gs[3] = {P, (size_t)g.M, (size_t)g.N};
    return ocl_launch(r->c, r->e, &a, "conv_direct", 3, gs, NULL);
}

static int64_t floor_div2(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

static tdm_status run_convt(orun *r)
{
    const tdm_device_tensor *x = &r->in[0], *w = &r->in[1];
    const gr_node *n = &r->o->gn;
    if (!in_present(r, 0) || !in_present(r, 1))
        return fail(r, TDM_E_MODEL, "needs inputs X and W");
    if (x->rank < 3 || x->rank > 4 || w->rank != x->rank)
        return fail(r, TDM_E_UNSUPPORTED, "takes 1-D or 2-D X and W of the same rank, not rank %d and %d", x->rank,
                    w->rank);
    int nsp = x->rank - 2;
    const int64_t *ks = NULL, *st_ = NULL, *dl = NULL, *pd = NULL, *opd = NULL, *os = NULL;
    int nk = gr_attr_ints(n, "kernel_shape", &ks), ns = gr_attr_ints(n, "strides", &st_);
    int nd = gr_attr_ints(n, "dilations", &dl), np = gr_attr_ints(n, "pads", &pd);
    int nop = gr_attr_ints(n, "output_padding", &opd), nos = gr_attr_ints(n, "output_shape", &os);
    if ((nk >= 0 && nk != nsp) || (ns >= 0 && ns != nsp) || (nd >= 0 && nd != nsp) || (np >= 0 && np != 2 * nsp) ||
        (nop >= 0 && nop != nsp) || (nos >= 0 && nos != nsp && nos != nsp + 2))
        return fail(r, TDM_E_MODEL, "attributes do not match %d spatial dimensions", nsp);
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
            return fail(r, TDM_E_MODEL, "has an invalid kernel_shape, strides, dilations or output_padding");
        int64_t ek = (k[j] - 1) * d[j] + 1, full = s[j] * (in[j] - 1) + opad + ek;
        if (nos >= 0 || same) {
            int64_t o = nos >= 0 ? os[nos - nsp + i] : in[j] * s[j];
            if (o < 0 || o > INT_MAX)
                return fail(r, TDM_E_MODEL, "has an invalid output_shape");
            int64_t total = full - o;
            /* as the CPU kernel: SAME_UPPER puts the odd pad at the end */
            pb[j] = same == 1 ? floor_div2(total) : total - floor_div2(total);
            out[j] = o;
        } else {
            pb[j] = np >= 0 ? pd[i] : 0;
            int64_t pe = np >= 0 ? pd[i + nsp] : 0;
            if (pb[j] < 0 || pe < 0 || pb[j] > INT_MAX / 2 || pe > INT_MAX / 2)
                return fail(r, TDM_E_MODEL, "has an invalid pads attribute");
            out[j] = full - pb[j] - pe;
            if (out[j] < 0)
                return fail(r, TDM_E_RUNTIME, "pads make spatial dimension %d of the output negative", i);
        }
    }
    int64_t group = gr_attr_int(n, "group", 1), C = x->dims[1];
    if (group < 1 || C % group || w->dims[0] != C)
        return fail(r, TDM_E_RUNTIME, "has %lld input channels, W of %lld and group %lld, which do not fit",
                    (long long)C, (long long)w->dims[0], (long long)group);
    int64_t Mg = w->dims[1], M = Mg * group;
    const tdm_device_tensor *b = in_present(r, 2) ? &r->in[2] : NULL;
    if (b && (int64_t)tcount(b) != M)
        return fail(r, TDM_E_RUNTIME, "input B has %zu values for %lld output channels", tcount(b), (long long)M);
    int64_t od[4] = {x->dims[0], M, out[0], out[1]};
    if (nsp == 1)
        od[2] = out[1];
    tdm_status st = out_new(r, 0, x->dtype, x->rank, od);
    if (st)
        return st;
    conv_g g = {(int)x->dims[0], (int)C, (int)in[0], (int)in[1], (int)M, (int)out[0], (int)out[1], (int)k[0],
                (int)k[1], (int)s[0], (int)s[1], (int)pb[0], (int)pb[1], (int)d[0], (int)d[1], (int)(C / group),
                (int)Mg, (int)group};
    ocl_args a;
    if ((st = kern(r, r->prog, K_CONVT_DIRECT, &a)))
        return st;
    conv_args(r, &a, &g, MEM(x), MEM(w), b ? MEM(b) : NULL, MEM(&r->out[0]));
    ocl_arg_int(&a, b != NULL);
    size_t gs[3] = {(size_t)g.OH * (size_t)g.OW, (size_t)g.M, (size_t)g.N};
    return ocl_launch(r->c, r->e, &a, "convt_direct", 3, gs, NULL);
}

/* ---------------------------------------------------------------- pooling */

static tdm_reason check_pool(const onode *o, tdm_verdict *v)
{
    if (!spatial_rank_ok(o, v, o->d->op_type))
        return v->reason;
    if (!strcmp(o->d->op_type, "MaxPool") && desc_out_present(o->d, 1))
        return verdict(v, TDM_REASON_ATTR_UNSUPPORTED, "opencl MaxPool does not produce the Indices output");
    return TDM_REASON_OK;
}

static tdm_status run_pool(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int is_max = !strcmp(r->o->d->op_type, "MaxPool");
    if (x->rank < 3 || x->rank > 4)
        return fail(r, TDM_E_UNSUPPORTED, "takes 1-D or 2-D inputs (rank 3 or 4), not rank %d", x->rank);
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
    if ((st = out_new(r, 0, x->dtype, x->rank, od)))
        return st;
    size_t planes = (size_t)x->dims[0] * (size_t)x->dims[1];
    size_t n = tcount(&r->out[0]);
    int inc = !is_max && gr_attr_int(&r->o->gn, "count_include_pad", 0) != 0;
    ocl_args a;
    if ((st = kern(r, r->prog, K_POOL2D, &a)))
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
    return launch1(r, &a, r->o->d->op_type, n);
}

/* ------------------------------------------------------------- reductions */

/* Reduces x over the marked axes (red[k]) into out 0 with the given
 * output shape: op 0 sum (× 1/count when mean), 1 max, 2 min (a NaN
 * propagates), 3 max keeping a NaN only as the first element. */
static tdm_status reduce_launch(orun *r, const tdm_device_tensor *x, const unsigned char *red, int op, int mean)
{
    int64_t strides[TDM_MAX_RANK], kd[TDM_MAX_RANK], ks[1][TDM_MAX_RANK], rd[TDM_MAX_RANK], rs[1][TDM_MAX_RANK];
    int nk = 0, nr = 0;
    size_t rcount = 1, nout = 1;
    shape_strides(x->rank, x->dims, strides);
    for (int k = 0; k < x->rank; k++) {
        if (red[k]) {
            rd[nr] = x->dims[k];
            rs[0][nr++] = strides[k];
            rcount *= (size_t)x->dims[k];
        } else {
            kd[nk] = x->dims[k];
            ks[0][nk++] = strides[k];
            nout *= (size_t)x->dims[k];
        }
    }
    if (nout == 0)
        return TDM_OK;
    if (rcount == 0)
        return fail(r, TDM_E_UNSUPPORTED, "over an empty axis is not supported on opencl");
    nk = coalesce(nk, kd, 1, ks);
    nr = coalesce(nr, rd, 1, rs);
    if (nk > OCL_MAX_RANK || nr > OCL_MAX_RANK)
        return fail(r, TDM_E_UNSUPPORTED, "needs more than %d dimensions after merging", OCL_MAX_RANK);
    int kdi[8], ksi[8], rdi[8], rsi[8];
    to_int8(kd, nk, kdi);
    to_int8(rd, nr, rdi);
    for (int i = 0; i < 8; i++) {
        ksi[i] = i < nk ? (int)ks[0][i] : 0;
        rsi[i] = i < nr ? (int)rs[0][i] : 0;
    }
    ocl_args a;
    tdm_status st = kern(r, r->prog, K_REDUCE_GEN, &a);
    if (st)
        return st;
    ocl_arg_mem(&a, MEM(x));
    ocl_arg_mem(&a, MEM(&r->out[0]));
    ocl_arg_int(&a, (int)nout);
    ocl_arg_int(&a, op);
    ocl_arg_float(&a, mean ? (float)(1.0 / (double)rcount) : 1.0f);
    ocl_arg_int(&a, nk);
    ocl_arg_int8(&a, kdi);
    ocl_arg_int8(&a, ksi);
    ocl_arg_int(&a, nr);
    ocl_arg_int8(&a, rdi);
    ocl_arg_int8(&a, rsi);
    ocl_arg_int(&a, (int)rcount);
    return launch1(r, &a, r->o->d->op_type, nout);
}

static tdm_status run_global_pool(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    if (x->rank < 2)
        return fail(r, TDM_E_RUNTIME, "takes X of rank 2 or more, not %d", x->rank);
    int64_t od[TDM_MAX_RANK];
    unsigned char red[TDM_MAX_RANK];
    for (int k = 0; k < x->rank; k++) {
        od[k] = k < 2 ? x->dims[k] : 1;
        red[k] = k >= 2;
    }
    tdm_status st = out_new(r, 0, x->dtype, x->rank, od);
    if (st)
        return st;
    if (x->rank == 2)
        return ocl_copy(r->c, r->e, MEM(x), 0, MEM(&r->out[0]), 0, r->out[0].bytes);
    int is_max = !strcmp(r->o->d->op_type, "GlobalMaxPool");
    return reduce_launch(r, x, red, is_max ? 3 : 0, !is_max);
}

static int reduce_axes_from_input(const onode *o)
{
    return !strcmp(o->d->op_type, "ReduceSum") && o->version >= 13;
}

static tdm_status run_reduce(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    const gr_node *n = &r->o->gn;
    const char *opn = r->o->d->op_type;
    int op = !strcmp(opn, "ReduceMax") ? 1 : !strcmp(opn, "ReduceMin") ? 2 : 0;
    int mean = !strcmp(opn, "ReduceMean");
    int64_t *axes = NULL, na = -1;
    const int64_t *aa = NULL;
    tdm_status st;
    if (reduce_axes_from_input(r->o)) {
        if ((st = in_ints(r, 1, &axes, &na)))
            return st;
        aa = axes;
    } else {
        na = gr_attr_ints(n, "axes", &aa);
    }
    unsigned char red[TDM_MAX_RANK];
    int noop = 0;
    memset(red, 0, sizeof red);
    if (na <= 0) {
        if (gr_attr_int(n, "noop_with_empty_axes", 0))
            noop = 1;
        else
            memset(red, 1, sizeof red);
    } else {
        for (int64_t k = 0; k < na; k++) {
            int64_t ax = aa[k] < 0 ? aa[k] + x->rank : aa[k];
            if (ax < 0 || ax >= x->rank) {
                mem_free(axes);
                return fail(r, TDM_E_RUNTIME, "axis %lld is out of range for rank %d", (long long)aa[k], x->rank);
            }
            red[ax] = 1;
        }
    }
    mem_free(axes);
    if (noop) {
        if ((st = out_new(r, 0, x->dtype, x->rank, x->dims)))
            return st;
        return ocl_copy(r->c, r->e, MEM(x), 0, MEM(&r->out[0]), 0, r->out[0].bytes);
    }
    int keep = gr_attr_int(n, "keepdims", 1) != 0;
    int64_t od[TDM_MAX_RANK];
    int orank = 0;
    for (int k = 0; k < x->rank; k++) {
        if (!red[k])
            od[orank++] = x->dims[k];
        else if (keep)
            od[orank++] = 1;
    }
    if ((st = out_new(r, 0, x->dtype, orank, od)))
        return st;
    return reduce_launch(r, x, red, op, mean);
}

static tdm_status run_softmax(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int v13 = r->o->version >= 13;
    int64_t axis = gr_attr_int(&r->o->gn, "axis", v13 ? -1 : 1);
    tdm_status st = out_new(r, 0, x->dtype, x->rank, x->dims);
    if (st)
        return st;
    size_t outer = 1, n = 1, inner = 1;
    if (x->rank > 0) {
        if (axis < 0)
            axis += x->rank;
        if (axis < 0 || axis >= x->rank)
            return fail(r, TDM_E_RUNTIME, "attribute 'axis' is out of range for rank %d", x->rank);
        for (int k = 0; k < axis; k++)
            outer *= (size_t)x->dims[k];
        if (v13) {
            n = (size_t)x->dims[axis];
            for (int k = (int)axis + 1; k < x->rank; k++)
                inner *= (size_t)x->dims[k];
        } else {
            for (int k = (int)axis; k < x->rank; k++)
                n *= (size_t)x->dims[k];
        }
    }
    size_t rows = outer * inner;
    if (rows == 0 || n == 0)
        return TDM_OK;
    ocl_args a;
    if ((st = kern(r, r->prog, K_SOFTMAX, &a)))
        return st;
    ocl_arg_mem(&a, MEM(x));
    ocl_arg_mem(&a, MEM(&r->out[0]));
    ocl_arg_int(&a, (int)rows);
    ocl_arg_int(&a, (int)n);
    ocl_arg_int(&a, (int)inner);
    ocl_arg_int(&a, !strcmp(r->o->d->op_type, "LogSoftmax"));
    return launch1(r, &a, r->o->d->op_type, rows);
}

static tdm_reason check_layernorm(const onode *o, tdm_verdict *v)
{
    for (int i = 1; i < 3; i++)
        if (desc_out_present(o->d, i))
            return verdict(v, TDM_REASON_ATTR_UNSUPPORTED,
                           "opencl LayerNormalization does not produce the Mean and InvStdDev outputs");
    for (int i = 1; i < 3 && i < o->d->n_inputs; i++)
        if (desc_present(o->d, i) && o->d->inputs[i].dtype != o->d->inputs[0].dtype)
            return verdict(v, TDM_REASON_DTYPE_UNSUPPORTED,
                           "opencl LayerNormalization takes Scale and B of X's type (%s), not %s",
                           tdm_dtype_name(o->d->inputs[0].dtype), tdm_dtype_name(o->d->inputs[i].dtype));
    /* Scale and B must hold one value per normalised element, or one */
    const tdm_tensor_desc *x = &o->d->inputs[0];
    if (x->rank > 0) {
        int64_t axis = gr_attr_int(&o->gn, "axis", -1);
        if (axis < 0)
            axis += x->rank;
        int64_t cols = 1;
        for (int k = (int)axis; k >= 0 && k < x->rank; k++)
            cols = x->dims[k] < 0 || cols < 0 ? -1 : cols * x->dims[k];
        for (int i = 1; i < 3 && i < o->d->n_inputs && cols >= 0; i++) {
            const tdm_tensor_desc *p = &o->d->inputs[i];
            if (!desc_present(o->d, i) || p->rank < 0)
                continue;
            int64_t pc = 1;
            for (int k = 0; k < p->rank; k++)
                pc = p->dims[k] < 0 || pc < 0 ? -1 : pc * p->dims[k];
            if (pc >= 0 && pc != cols && pc != 1)
                return verdict(v, TDM_REASON_SHAPE_UNSUPPORTED,
                               "opencl LayerNormalization takes %s with one value per normalised element (%lld) or "
                               "one, not %lld",
                               i == 1 ? "Scale" : "B", (long long)cols, (long long)pc);
        }
    }
    return TDM_REASON_OK;
}

static tdm_status run_layernorm(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    if (!in_present(r, 1))
        return fail(r, TDM_E_MODEL, "input 1 ('Scale') is missing");
    if (x->rank < 1)
        return fail(r, TDM_E_RUNTIME, "takes X of rank 1 or more");
    int64_t axis = gr_attr_int(&r->o->gn, "axis", -1);
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis >= x->rank)
        return fail(r, TDM_E_RUNTIME, "attribute 'axis' is out of range for rank %d", x->rank);
    size_t rows = 1, cols = 1;
    for (int k = 0; k < x->rank; k++) {
        if (k < axis)
            rows *= (size_t)x->dims[k];
        else
            cols *= (size_t)x->dims[k];
    }
    size_t nsc = tcount(&r->in[1]);
    int has_b = in_present(r, 2);
    if ((nsc != cols && nsc != 1) || (has_b && tcount(&r->in[2]) != nsc))
        return fail(r, TDM_E_UNSUPPORTED, "takes Scale and B of %zu values (or one), not %zu", cols, nsc);
    tdm_status st = out_new(r, 0, x->dtype, x->rank, x->dims);
    if (st)
        return st;
    if (rows == 0 || cols == 0)
        return TDM_OK;
    ocl_args a;
    if ((st = kern(r, r->prog, K_LAYERNORM, &a)))
        return st;
    ocl_arg_mem(&a, MEM(x));
    ocl_arg_mem(&a, MEM(&r->in[1]));
    ocl_arg_mem(&a, has_b ? MEM(&r->in[2]) : MEM(&r->in[1]));
    ocl_arg_mem(&a, MEM(&r->out[0]));
    ocl_arg_int(&a, (int)cols);
    ocl_arg_float(&a, gr_attr_float(&r->o->gn, "epsilon", 1e-5f));
    ocl_arg_int(&a, has_b);
    ocl_arg_int(&a, (int)nsc);
    size_t g[1] = {rows * OCL_LN_WG}, l[1] = {OCL_LN_WG};
    return ocl_launch(r->c, r->e, &a, "layernorm", 1, g, l);
}

/* ---------------------------------------------------------- data movement */

static tdm_status copy_out(orun *r, int rank, const int64_t *dims)
{
    const tdm_device_tensor *x = &r->in[0];
    size_t n;
    if (shape_count(rank, dims, &n) || n != tcount(x))
        return fail(r, TDM_E_RUNTIME, "cannot give %zu elements the requested shape", tcount(x));
    tdm_status st = out_new(r, 0, x->dtype, rank, dims);
    if (st)
        return st;
    return ocl_copy(r->c, r->e, MEM(x), 0, MEM(&r->out[0]), 0, r->out[0].bytes);
}

static tdm_status run_identity(orun *r) { return copy_out(r, r->in[0].rank, r->in[0].dims); }

static tdm_status run_reshape(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int64_t *shape, ns;
    tdm_status st = in_ints(r, 1, &shape, &ns);
    if (st)
        return st;
    if (ns < 0 || ns > TDM_MAX_RANK) {
        mem_free(shape);
        return fail(r, TDM_E_RUNTIME, "needs a shape of at most %d values", TDM_MAX_RANK);
    }
    int allowzero = r->o->version >= 14 && gr_attr_int(&r->o->gn, "allowzero", 0) != 0;
    int64_t od[TDM_MAX_RANK];
    int infer = -1;
    size_t known = 1;
    for (int k = 0; k < ns; k++) {
        od[k] = shape[k];
        if (shape[k] == 0 && !allowzero) {
            if (k >= x->rank) {
                mem_free(shape);
                return fail(r, TDM_E_RUNTIME, "shape copies dimension %d of an input of rank %d", k, x->rank);
            }
            od[k] = x->dims[k];
        }
        if (od[k] == -1) {
            if (infer >= 0) {
                mem_free(shape);
                return fail(r, TDM_E_RUNTIME, "shape has more than one -1");
            }
            infer = k;
        } else if (od[k] < 0) {
            mem_free(shape);
            return fail(r, TDM_E_RUNTIME, "shape has the invalid value %lld", (long long)od[k]);
        } else {
            known *= (size_t)od[k];
        }
    }
    mem_free(shape);
    if (infer >= 0) {
        if (known == 0 || tcount(x) % known)
            return fail(r, TDM_E_RUNTIME, "cannot infer the -1 of shape from %zu elements", tcount(x));
        od[infer] = (int64_t)(tcount(x) / known);
    }
    return copy_out(r, (int)ns, od);
}

static tdm_status run_flatten(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int64_t axis = gr_attr_int(&r->o->gn, "axis", 1);
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis > x->rank)
        return fail(r, TDM_E_RUNTIME, "attribute 'axis' is out of range for rank %d", x->rank);
    int64_t od[2] = {1, 1};
    for (int k = 0; k < x->rank; k++)
        od[k < axis ? 0 : 1] *= x->dims[k];
    return copy_out(r, 2, od);
}

/* Axes of Squeeze/Unsqueeze: attribute before opset 13, input 1 after. */
static tdm_status squeeze_axes(orun *r, int64_t **axes, int64_t *na)
{
    if (r->o->version >= 13)
        return in_ints(r, 1, axes, na);
    const int64_t *a;
    int n = gr_attr_ints(&r->o->gn, "axes", &a);
    *axes = NULL;
    *na = n;
    if (n <= 0)
        return TDM_OK;
    if (!(*axes = mem_calloc((size_t)n, sizeof **axes)))
        return fail(r, TDM_E_NOMEM, "out of memory");
    memcpy(*axes, a, sizeof **axes * (size_t)n);
    return TDM_OK;
}

static tdm_status run_squeeze(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int64_t *axes, na;
    tdm_status st = squeeze_axes(r, &axes, &na);
    if (st)
        return st;
    unsigned char drop[TDM_MAX_RANK];
    memset(drop, 0, sizeof drop);
    if (na <= 0) {
        for (int k = 0; k < x->rank; k++)
            drop[k] = x->dims[k] == 1;
    } else {
        for (int64_t i = 0; i < na; i++) {
            int64_t a = axes[i] < 0 ? axes[i] + x->rank : axes[i];
            if (a < 0 || a >= x->rank || x->dims[a] != 1) {
                mem_free(axes);
                return fail(r, TDM_E_RUNTIME, "axis %lld is out of range or not of size 1", (long long)axes[i]);
            }
            drop[a] = 1;
        }
    }
    mem_free(axes);
    int64_t od[TDM_MAX_RANK];
    int orank = 0;
    for (int k = 0; k < x->rank; k++)
        if (!drop[k])
            od[orank++] = x->dims[k];
    return copy_out(r, orank, od);
}

static tdm_status run_unsqueeze(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int64_t *axes, na;
    tdm_status st = squeeze_axes(r, &axes, &na);
    if (st)
        return st;
    if (na <= 0 || x->rank + na > TDM_MAX_RANK) {
        mem_free(axes);
        return fail(r, TDM_E_RUNTIME, "needs 1 to %d axes", TDM_MAX_RANK - x->rank);
    }
    int orank = x->rank + (int)na;
    unsigned char ins[TDM_MAX_RANK];
    memset(ins, 0, sizeof ins);
    for (int64_t i = 0; i < na; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + orank : axes[i];
        if (a < 0 || a >= orank || ins[a]) {
            mem_free(axes);
            return fail(r, TDM_E_RUNTIME, "axis %lld is out of range or repeated", (long long)axes[i]);
        }
        ins[a] = 1;
    }
    mem_free(axes);
    int64_t od[TDM_MAX_RANK];
    for (int k = 0, j = 0; k < orank; k++)
        od[k] = ins[k] ? 1 : x->dims[j++];
    return copy_out(r, orank, od);
}

static tdm_status run_transpose(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    const int64_t *perm = NULL;
    int np = gr_attr_ints(&r->o->gn, "perm", &perm);
    int64_t p[TDM_MAX_RANK], od[TDM_MAX_RANK], is[TDM_MAX_RANK], st_[TDM_MAX_RANK];
    unsigned char seen[TDM_MAX_RANK];
    memset(seen, 0, sizeof seen);
    if (np >= 0 && np != x->rank)
        return fail(r, TDM_E_RUNTIME, "attribute 'perm' has %d values for rank %d", np, x->rank);
    for (int k = 0; k < x->rank; k++) {
        p[k] = np >= 0 ? perm[k] : x->rank - 1 - k;
        if (p[k] < 0)
            p[k] += x->rank;
        if (p[k] < 0 || p[k] >= x->rank || seen[p[k]])
            return fail(r, TDM_E_RUNTIME, "attribute 'perm' is not a permutation");
        seen[p[k]] = 1;
    }
    shape_strides(x->rank, x->dims, st_);
    for (int k = 0; k < x->rank; k++) {
        od[k] = x->dims[p[k]];
        is[k] = st_[p[k]];
    }
    tdm_status st = out_new(r, 0, x->dtype, x->rank, od);
    if (st)
        return st;
    return copy_strided(r, MEM(x), MEM(&r->out[0]), tdm_dtype_size(x->dtype), x->rank, od, is, 0);
}

static tdm_status run_expand(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int64_t *shape, ns;
    tdm_status st = in_ints(r, 1, &shape, &ns);
    if (st)
        return st;
    int64_t od[TDM_MAX_RANK], is[TDM_MAX_RANK];
    int orank;
    if (ns < 0 || ns > TDM_MAX_RANK || op_broadcast(x->rank, x->dims, (int)ns, shape, &orank, od)) {
        mem_free(shape);
        return fail(r, TDM_E_RUNTIME, "shape does not broadcast with the input");
    }
    mem_free(shape);
    op_bcast_strides(orank, od, x->rank, x->dims, is);
    if ((st = out_new(r, 0, x->dtype, orank, od)))
        return st;
    return copy_strided(r, MEM(x), MEM(&r->out[0]), tdm_dtype_size(x->dtype), orank, od, is, 0);
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static tdm_status run_slice(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int64_t *starts = NULL, *ends = NULL, *axes = NULL, *steps = NULL, ns = -1, ne = -1, na = -1, nst = -1;
    tdm_status st = TDM_OK;
    if (r->o->version >= 10) {
        if ((st = in_ints(r, 1, &starts, &ns)) || (st = in_ints(r, 2, &ends, &ne)) ||
            (st = in_ints(r, 3, &axes, &na)) || (st = in_ints(r, 4, &steps, &nst)))
            goto done;
    } else {
        const int64_t *a;
        const char *names[3] = {"starts", "ends", "axes"};
        int64_t **dst[3] = {&starts, &ends, &axes}, *cnt[3] = {&ns, &ne, &na};
        for (int i = 0; i < 3; i++) {
            int n = gr_attr_ints(&r->o->gn, names[i], &a);
            *cnt[i] = n;
            if (n > 0) {
                if (!(*dst[i] = mem_calloc((size_t)n, sizeof(int64_t)))) {
                    st = fail(r, TDM_E_NOMEM, "out of memory");
                    goto done;
                }
                memcpy(*dst[i], a, sizeof(int64_t) * (size_t)n);
            }
        }
    }
    if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (nst >= 0 && nst != ns)) {
        st = fail(r, TDM_E_RUNTIME, "needs starts, ends (and axes, steps) of the same length");
        goto done;
    }
    int64_t start[TDM_MAX_RANK], step[TDM_MAX_RANK], od[TDM_MAX_RANK], strides[TDM_MAX_RANK], is[TDM_MAX_RANK];
    unsigned char seen[TDM_MAX_RANK];
    memset(seen, 0, sizeof seen);
    for (int k = 0; k < x->rank; k++) {
        start[k] = 0;
        step[k] = 1;
        od[k] = x->dims[k];
    }
    for (int64_t i = 0; i < ns; i++) {
        int64_t a = na >= 0 ? axes[i] : i;
        if (a < 0)
            a += x->rank;
        if (a < 0 || a >= x->rank || seen[a]) {
            st = fail(r, TDM_E_RUNTIME, "axis %lld is out of range or repeated", (long long)(na >= 0 ? axes[i] : i));
            goto done;
        }
        seen[a] = 1;
        int64_t dim = x->dims[a], s = starts[i], e = ends[i], p = nst >= 0 ? steps[i] : 1;
        if (p == 0) {
            st = fail(r, TDM_E_RUNTIME, "step must not be 0");
            goto done;
        }
        if (s < 0)
            s += dim;
        if (e < 0)
            e += dim;
        if (p > 0) {
            s = clamp64(s, 0, dim);
            e = clamp64(e, 0, dim);
            od[a] = e > s ? (e - s + p - 1) / p : 0;
        } else {
            s = clamp64(s, 0, dim - 1);
            e = clamp64(e, -1, dim - 1);
            od[a] = s > e ? (s - e + (-p) - 1) / (-p) : 0;
        }
        start[a] = s;
        step[a] = p;
    }
    if ((st = out_new(r, 0, x->dtype, x->rank, od)))
        goto done;
    shape_strides(x->rank, x->dims, strides);
    int64_t base = 0;
    for (int k = 0; k < x->rank; k++) {
        if (od[k] > 0)
            base += start[k] * strides[k];
        is[k] = step[k] * strides[k];
    }
    st = copy_strided(r, MEM(x), MEM(&r->out[0]), tdm_dtype_size(x->dtype), x->rank, od, is, base);
done:
    mem_free(starts);
    mem_free(ends);
    mem_free(axes);
    mem_free(steps);
    return st;
}

static tdm_status run_concat(orun *r)
{
    const tdm_device_tensor *x0 = &r->in[0];
    int64_t axis = gr_attr_int(&r->o->gn, "axis", 0);
    if (axis < 0)
        axis += x0->rank;
    if (axis < 0 || axis >= x0->rank)
        return fail(r, TDM_E_RUNTIME, "attribute 'axis' is out of range for rank %d", x0->rank);
    int64_t od[TDM_MAX_RANK];
    memcpy(od, x0->dims, sizeof od[0] * (size_t)x0->rank);
    od[axis] = 0;
    for (int i = 0; i < r->n_in; i++) {
        const tdm_device_tensor *t = &r->in[i];
        if (!in_present(r, i) || t->rank != x0->rank || t->dtype != x0->dtype)
            return fail(r, TDM_E_RUNTIME, "input %d is missing or differs in rank or element type", i);
        for (int k = 0; k < t->rank; k++)
            if (k != axis && t->dims[k] != x0->dims[k])
                return fail(r, TDM_E_RUNTIME, "input %d differs in dimension %d", i, k);
        od[axis] += t->dims[axis];
    }
    tdm_status st = out_new(r, 0, x0->dtype, x0->rank, od);
    if (st)
        return st;
    size_t es = tdm_dtype_size(x0->dtype), outer = 1, inner = es;
    for (int k = 0; k < axis; k++)
        outer *= (size_t)od[k];
    for (int k = (int)axis + 1; k < x0->rank; k++)
        inner *= (size_t)od[k];
    size_t off = 0, pitch = (size_t)od[axis] * inner;
    for (int i = 0; i < r->n_in; i++) {
        size_t row = (size_t)r->in[i].dims[axis] * inner;
        if ((st = ocl_copy_rows(r->c, r->e, MEM(&r->in[i]), 0, row, MEM(&r->out[0]), off, pitch, row, outer)))
            return st;
        off += row;
    }
    return TDM_OK;
}

static tdm_status run_split(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int64_t axis = gr_attr_int(&r->o->gn, "axis", 0);
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis >= x->rank)
        return fail(r, TDM_E_RUNTIME, "attribute 'axis' is out of range for rank %d", x->rank);
    int64_t *split = NULL, ns = -1;
    tdm_status st;
    if (r->o->version >= 13) {
        if ((st = in_ints(r, 1, &split, &ns)))
            return st;
    } else {
        const int64_t *a;
        int n = gr_attr_ints(&r->o->gn, "split", &a);
        if (n > 0) {
            if (!(split = mem_calloc((size_t)n, sizeof *split)))
                return fail(r, TDM_E_NOMEM, "out of memory");
            memcpy(split, a, sizeof *split * (size_t)n);
            ns = n;
        }
    }
    int nout = r->n_out;
    int64_t dim = x->dims[axis];
    if (ns >= 0 && ns != nout) {
        mem_free(split);
        return fail(r, TDM_E_RUNTIME, "'split' has %lld values for %d outputs", (long long)ns, nout);
    }
    if (ns < 0 && (nout < 1 || dim % nout)) {
        mem_free(split);
        return fail(r, TDM_E_RUNTIME, "cannot split %lld evenly into %d outputs", (long long)dim, nout);
    }
    int64_t sum = 0;
    for (int i = 0; i < nout; i++) {
        int64_t s = ns >= 0 ? split[i] : dim / nout;
        if (s < 0)
            sum = -1 - dim;
        sum += s;
    }
    if (sum != dim) {
        mem_free(split);
        return fail(r, TDM_E_RUNTIME, "'split' does not add up to dimension %lld (%lld)", (long long)axis,
                    (long long)dim);
    }
    size_t es = tdm_dtype_size(x->dtype), outer = 1, inner = es;
    for (int k = 0; k < axis; k++)
        outer *= (size_t)x->dims[k];
    for (int k = (int)axis + 1; k < x->rank; k++)
        inner *= (size_t)x->dims[k];
    size_t off = 0, pitch = (size_t)dim * inner;
    st = TDM_OK;
    for (int i = 0; i < nout && !st; i++) {
        int64_t s = ns >= 0 ? split[i] : dim / nout;
        size_t row = (size_t)s * inner;
        if (out_wanted(r, i)) {
            int64_t od[TDM_MAX_RANK];
            memcpy(od, x->dims, sizeof od[0] * (size_t)x->rank);
            od[axis] = s;
            if (!(st = out_new(r, i, x->dtype, x->rank, od)))
                st = ocl_copy_rows(r->c, r->e, MEM(x), off, pitch, MEM(&r->out[i]), 0, row, row, outer);
        }
        off += row;
    }
    mem_free(split);
    return st;
}

static tdm_status run_gather(orun *r)
{
    const tdm_device_tensor *x = &r->in[0], *ix = &r->in[1];
    if (!in_present(r, 1))
        return fail(r, TDM_E_MODEL, "input 'indices' is missing");
    int64_t axis = gr_attr_int(&r->o->gn, "axis", 0);
    if (x->rank < 1)
        return fail(r, TDM_E_RUNTIME, "takes data of rank 1 or more");
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis >= x->rank || x->rank + ix->rank - 1 > TDM_MAX_RANK)
        return fail(r, TDM_E_RUNTIME, "attribute 'axis' is out of range for rank %d", x->rank);
    int64_t *idx, ni;
    tdm_status st = in_ints(r, 1, &idx, &ni);
    if (st)
        return st;
    int64_t n_ax = x->dims[axis];
    int *tab = mem_calloc((size_t)ni + 1, sizeof *tab);
    if (!tab) {
        mem_free(idx);
        return fail(r, TDM_E_NOMEM, "out of memory");
    }
    for (int64_t i = 0; i < ni; i++) {
        int64_t v = idx[i] < 0 ? idx[i] + n_ax : idx[i];
        if (v < 0 || v >= n_ax) {
            st = fail(r, TDM_E_RUNTIME, "index %lld is out of range for an axis of %lld", (long long)idx[i],
                      (long long)n_ax);
            break;
        }
        tab[i] = (int)v;
    }
    mem_free(idx);
    int64_t od[TDM_MAX_RANK];
    int orank = 0;
    size_t inner = 1;
    for (int k = 0; k < axis; k++)
        od[orank++] = x->dims[k];
    for (int k = 0; k < ix->rank; k++)
        od[orank++] = ix->dims[k];
    for (int k = (int)axis + 1; k < x->rank; k++) {
        od[orank++] = x->dims[k];
        inner *= (size_t)x->dims[k];
    }
    if (!st)
        st = out_new(r, 0, x->dtype, orank, od);
    cl_mem tm = NULL;
    if (!st)
        st = ocl_buf_from_host(r->c, r->e, tab, sizeof *tab * (size_t)ni, &tm);
    mem_free(tab);
    if (st)
        return st;
    size_t n = tcount(&r->out[0]);
    ocl_args a;
    if (!(st = kern(r, OCL_P32, by_size(K_GATHER_1, tdm_dtype_size(x->dtype)), &a))) {
        ocl_arg_mem(&a, MEM(x));
        ocl_arg_mem(&a, tm);
        ocl_arg_mem(&a, MEM(&r->out[0]));
        ocl_arg_int(&a, (int)n);
        ocl_arg_int(&a, (int)ni);
        ocl_arg_int(&a, (int)n_ax);
        ocl_arg_int(&a, (int)inner);
        st = launch1(r, &a, "gather", n);
    }
    clReleaseMemObject(tm);
    return st;
}

static tdm_status run_shape(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int64_t start = 0, end = x->rank;
    if (r->o->version >= 15) {
        start = gr_attr_int(&r->o->gn, "start", 0);
        end = gr_attr_int(&r->o->gn, "end", x->rank);
        if (start < 0)
            start += x->rank;
        if (end < 0)
            end += x->rank;
        start = clamp64(start, 0, x->rank);
        end = clamp64(end, 0, x->rank);
    }
    int64_t n = end > start ? end - start : 0;
    tdm_status st = out_new(r, 0, TDM_INT64, 1, &n);
    if (st)
        return st;
    return ocl_write(r->c, r->e, MEM(&r->out[0]), x->dims + start, (size_t)n * sizeof(int64_t));
}

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

static tdm_reason check_resize(const onode *o, tdm_verdict *v)
{
    const char *mode = gr_attr_str(&o->gn, "mode", "nearest");
    if (strcmp(mode, "nearest") && strcmp(mode, "linear"))
        return verdict(v, TDM_REASON_ATTR_UNSUPPORTED, "opencl Resize supports modes nearest and linear, not %s", mode);
    if (o->version >= 11) {
        const char *ct = gr_attr_str(&o->gn, "coordinate_transformation_mode", "half_pixel");
        int c = parse_name(ct, ctm_names, 6);
        if (c < 0 || c == CT_TF_CROP)
            return verdict(v, TDM_REASON_ATTR_UNSUPPORTED,
                           "opencl Resize does not support coordinate_transformation_mode %s", ct);
        const char *nm = gr_attr_str(&o->gn, "nearest_mode", "round_prefer_floor");
        if (parse_name(nm, nm_names, 4) < 0)
            return verdict(v, TDM_REASON_ATTR_UNSUPPORTED, "opencl Resize does not support nearest_mode %s", nm);
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

static tdm_status run_resize(orun *r)
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
        if ((st = in_floats(r, 1, &scales, &nsc)))
            return st;
    } else {
        ctm = parse_name(gr_attr_str(n, "coordinate_transformation_mode", "half_pixel"), ctm_names, 6);
        nearest = parse_name(gr_attr_str(n, "nearest_mode", "round_prefer_floor"), nm_names, 4);
        if ((st = in_floats(r, 2, &scales, &nsc)) || (st = in_ints(r, 3, &sizes, &nsz))) {
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
        return fail(r, TDM_E_RUNTIME, "needs exactly one of 'scales' and 'sizes', with %d values", rank);
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
            return fail(r, TDM_E_RUNTIME, "has an invalid scale or size for axis %d", d);
        }
    }
    mem_free(scales);
    mem_free(sizes);
    if (rank > OCL_MAX_RANK)
        return fail(r, TDM_E_UNSUPPORTED, "takes inputs of rank %d or less", OCL_MAX_RANK);
    if ((st = out_new(r, 0, x->dtype, rank, od)))
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
        return fail(r, TDM_E_NOMEM, "out of memory");
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
            !(st = kern(r, OCL_P32, by_size(K_RESIZE_NEAR_1, tdm_dtype_size(x->dtype)), &a))) {
            ocl_arg_mem(&a, MEM(x));
            ocl_arg_mem(&a, MEM(&r->out[0]));
            ocl_arg_int(&a, (int)total_out);
            ocl_arg_int(&a, rank);
            ocl_arg_int8(&a, di);
            ocl_arg_int8(&a, ts);
            ocl_arg_mem(&a, tm);
            st = launch1(r, &a, "resize_nearest", total_out);
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
            !(st = kern(r, r->prog, k, &a))) {
            ocl_arg_mem(&a, src);
            ocl_arg_mem(&a, dst);
            ocl_arg_int(&a, (int)total);
            ocl_arg_int(&a, (int)cur[d]);
            ocl_arg_int(&a, (int)od[d]);
            ocl_arg_int(&a, (int)inner);
            ocl_arg_mem(&a, tm);
            ocl_arg_mem(&a, wm);
            st = launch1(r, &a, "resize_linear", total);
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

/* ------------------------------------------------------------------ table */

#define UN(name, code) {name, KIND_FLOAT, code, NULL, run_unary, 0}
#define BIN(name, code, chk) {name, KIND_FLOAT, code, chk, run_binary, 0}

static const ocl_opdef ocl_ops[] = {
    UN("Abs", U_ABS), UN("Neg", U_NEG), UN("Exp", U_EXP), UN("Log", U_LOG), UN("Sqrt", U_SQRT),
    UN("Reciprocal", U_RECIP), UN("Floor", U_FLOOR), UN("Ceil", U_CEIL), UN("Round", U_ROUND), UN("Sign", U_SIGN),
    UN("Erf", U_ERF), UN("Sin", U_SIN), UN("Cos", U_COS), UN("Tan", U_TAN), UN("Asin", U_ASIN), UN("Acos", U_ACOS),
    UN("Atan", U_ATAN), UN("Sinh", U_SINH), UN("Cosh", U_COSH), UN("Asinh", U_ASINH), UN("Acosh", U_ACOSH),
    UN("Atanh", U_ATANH), UN("Relu", U_RELU), UN("LeakyRelu", U_LEAKY), UN("Elu", U_ELU), UN("Selu", U_SELU),
    {"Celu", KIND_FLOAT, U_CELU, check_celu, run_unary, 0}, UN("Sigmoid", U_SIGMOID),
    UN("HardSigmoid", U_HSIGMOID), UN("HardSwish", U_HSWISH), UN("Softplus", U_SOFTPLUS),
    UN("Softsign", U_SOFTSIGN), UN("Tanh", U_TANH), UN("ThresholdedRelu", U_THRELU), UN("Clip", U_CLIP),
    BIN("Add", B_ADD, NULL), BIN("Sub", B_SUB, NULL), BIN("Mul", B_MUL, NULL), BIN("Div", B_DIV, NULL),
    BIN("Pow", B_POW, check_pow), BIN("Max", B_MAX, NULL), BIN("Min", B_MIN, NULL), BIN("Sum", B_ADD, NULL),
    BIN("Mean", B_ADD, NULL), BIN("PRelu", B_PRELU, NULL),
    {"BatchNormalization", KIND_FLOAT, 0, check_bn, run_bn, 0},
    {"Gemm", KIND_FLOAT, 0, NULL, run_gemm, 2},
    {"MatMul", KIND_FLOAT, 0, check_matmul, run_matmul, 6},
    {"Conv", KIND_FLOAT, 0, check_conv, run_conv, 4},
    {"ConvTranspose", KIND_FLOAT, 0, check_conv, run_convt, 4},
    {"MaxPool", KIND_FLOAT, 0, check_pool, run_pool, 4},
    {"AveragePool", KIND_FLOAT, 0, check_pool, run_pool, 4},
    {"GlobalAveragePool", KIND_FLOAT, 0, NULL, run_global_pool, 0},
    {"GlobalMaxPool", KIND_FLOAT, 0, NULL, run_global_pool, 0},
    {"ReduceMean", KIND_FLOAT, 0, NULL, run_reduce, 0},
    {"ReduceSum", KIND_FLOAT, 0, NULL, run_reduce, 0},
    {"ReduceMax", KIND_FLOAT, 0, NULL, run_reduce, 0},
    {"ReduceMin", KIND_FLOAT, 0, NULL, run_reduce, 0},
    {"Softmax", KIND_FLOAT, 0, NULL, run_softmax, 0},
    {"LogSoftmax", KIND_FLOAT, 0, NULL, run_softmax, 0},
    {"LayerNormalization", KIND_FLOAT, 0, check_layernorm, run_layernorm, 0},
    {"Resize", KIND_FLOAT, 0, check_resize, run_resize, 0},
    {"Identity", KIND_ANY, 0, NULL, run_identity, 16},
    {"Reshape", KIND_ANY, 0, NULL, run_reshape, 16},
    {"Flatten", KIND_ANY, 0, NULL, run_flatten, 16},
    {"Squeeze", KIND_ANY, 0, NULL, run_squeeze, 16},
    {"Unsqueeze", KIND_ANY, 0, NULL, run_unsqueeze, 16},
    {"Transpose", KIND_ANY, 0, NULL, run_transpose, 0},
    {"Expand", KIND_ANY, 0, NULL, run_expand, 0},
    {"Slice", KIND_ANY, 0, NULL, run_slice, 0},
    {"Concat", KIND_ANY, 0, NULL, run_concat, 16},
    {"Split", KIND_ANY, 0, NULL, run_split, 16},
    {"Gather", KIND_ANY, 0, NULL, run_gather, 16},
    {"Shape", KIND_SHAPE, 0, NULL, run_shape, 16},
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
        return verdict(out, TDM_REASON_OP_UNSUPPORTED, "opencl has no kernel for %s of domain %s", node->op_type, dom);
    const ocl_opdef *def = find_op(node->op_type);
    if (!def)
        return verdict(out, TDM_REASON_OP_UNSUPPORTED, "opencl has no kernel for %s", node->op_type);
    onode o;
    tdm_err e;
    err_clear(&e);
    if (onode_init(&e, node, &o)) {
        onode_free(&o);
        if (e.status == TDM_E_NOMEM)
            return verdict(out, TDM_REASON_OP_UNSUPPORTED, "opencl ran out of memory examining %s", node->op_type);
        return verdict(out, TDM_REASON_OP_UNSUPPORTED, "opencl has no kernel for %s at opset %lld", node->op_type,
                       (long long)node->opset);
    }
    tdm_reason rs = TDM_REASON_OK;
    if (o.version > OCL_MAX_SINCE) {
        rs = verdict(out, TDM_REASON_OP_UNSUPPORTED,
                     "opencl runs %s as defined up to opset %d; at opset %lld it is version %d of its definition",
                     node->op_type, OCL_MAX_SINCE, (long long)node->opset, o.version);
        goto done;
    }
    if (node->n_inputs < 1 || node->n_outputs < 1) {
        rs = verdict(out, TDM_REASON_OP_UNSUPPORTED, "opencl %s needs an input and an output", node->op_type);
        goto done;
    }
    /* element types: input 0 and every output (Shape: int64 output) */
    tdm_dtype dt = node->inputs[0].dtype;
    if (!dtype_ok(def->kind, dt)) {
        rs = verdict(out, TDM_REASON_DTYPE_UNSUPPORTED, "opencl %s takes %s, not %s", node->op_type,
                     def->kind == KIND_FLOAT ? "float32 and float16"
                                             : "tensors of 1-, 2-, 4- or 8-byte elements",
                     dt == TDM_UNDEFINED ? "an unknown element type" : tdm_dtype_name(dt));
        goto done;
    }
    if (def->kind == KIND_FLOAT && def->run == run_binary)
        for (int i = 1; i < node->n_inputs; i++)
            if (desc_present(node, i) && node->inputs[i].dtype != dt && strcmp(node->op_type, "Pow")) {
                rs = verdict(out, TDM_REASON_DTYPE_UNSUPPORTED, "opencl %s takes inputs of one type, not %s and %s",
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
                rs = verdict(out, TDM_REASON_SHAPE_UNSUPPORTED, "opencl %s takes tensors of rank %d or less, not %d",
                             node->op_type, max_rank, t[i].rank);
                goto done;
            }
            int64_t cnt = 1;
            for (int k = 0; k < t[i].rank && cnt >= 0; k++)
                cnt = t[i].dims[k] < 0 ? -1 : (t[i].dims[k] > INT_MAX ? (int64_t)INT_MAX + 1 : cnt * t[i].dims[k]);
            if (cnt > INT_MAX) {
                rs = verdict(out, TDM_REASON_SHAPE_UNSUPPORTED,
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
            st = fail(&r, TDM_E_RUNTIME, "input %d has an invalid shape", i);
        else if (bytes > in[i].bytes)
            st = fail(&r, TDM_E_RUNTIME, "input %d holds %zu bytes, its shape needs %zu", i, in[i].bytes, bytes);
        else if (n > (size_t)INT_MAX)
            st = fail(&r, TDM_E_UNSUPPORTED, "input %d has %zu elements; opencl kernels index at most %d", i, n,
                      INT_MAX);
    }
    if (!st && !in_present(&r, 0))
        st = fail(&r, TDM_E_MODEL, "input 0 is missing");
    if (!st) {
        if (def->kind == KIND_FLOAT) {
            if (in[0].dtype != TDM_FLOAT && in[0].dtype != TDM_FLOAT16)
                st = fail(&r, TDM_E_UNSUPPORTED, "takes float32 and float16, not %s", tdm_dtype_name(in[0].dtype));
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
