/* Elementwise fusion (fuse.h): the pass that finds the chains and compiles
 * their register programs (interpreted by ops/fuse_prog.c). */
#include "graph/fuse.h"
#include "core/mem.h"
#include "core/tensor.h"
#include "ops/elementwise.h"
#include "ops/nn.h"
#include "ops/qdq.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* The heads whose kernels apply ctx->fuse themselves: they call
 * op_fuse_apply once for every output element. Any other float32 head
 * gets its chain applied in place after it ran. The executor checks the
 * count of elements applied after the kernel: a kernel that applied
 * nothing (a path not yet fused) gets the program applied in place. */
static const int fuse_kernel_ops[] = {OP_Conv, OP_ConvTranspose, OP_Gemm, OP_MatMul, OP_BatchNormalization,
                                      OP_Add, OP_Sub, OP_Mul, OP_Div, OP_Resize};

struct fuse_chain {
    fuse_prog prog;                   /* its program (ops/fuse_prog.h): one step per member; n_lin > 0: one-pass form */
    int head, in_kernel, out_value;
    int members[FUSE_MAX_NODES];      /* prog.n_members of them */
    int opd[FUSE_MAX_OPERANDS];       /* value ids of the program's operands */
    int bn;                           /* a BatchNormalization folded into the Conv head, or -1 */
    tdm_tensor *fold_w, *fold_b;      /* its folded weights and bias (owned by the plan) */
};

struct fuse_plan {
    int n_nodes;
    int *head_of;          /* per node: chain index, or -1 */
    unsigned char *member; /* per node: fused away */
    fuse_chain *chains;
    int n_chains;
    int n_fused;
};

/* ------------------------------------------------------------ queries */

int fuse_plan_chains(const fuse_plan *fp) { return fp ? fp->n_chains : 0; }
int fuse_plan_fused_nodes(const fuse_plan *fp) { return fp ? fp->n_fused : 0; }

const fuse_chain *fuse_head_chain(const fuse_plan *fp, int n)
{
    if (!fp || n < 0 || n >= fp->n_nodes || fp->head_of[n] < 0)
        return NULL;
    return &fp->chains[fp->head_of[n]];
}

int fuse_is_member(const fuse_plan *fp, int n) { return fp && n >= 0 && n < fp->n_nodes && fp->member[n]; }
int fuse_chain_in_kernel(const fuse_chain *c) { return c->in_kernel; }
int fuse_chain_out_value(const fuse_chain *c) { return c->out_value; }
int fuse_chain_n_members(const fuse_chain *c) { return c->prog.n_members + (c->bn >= 0); }
int fuse_chain_member(const fuse_chain *c, int i)
{
    if (c->bn >= 0)
        return i == 0 ? c->bn : c->members[i - 1];
    return c->members[i];
}

int fuse_chain_inputs(const fuse_chain *c, const tdm_tensor **in, int *n_in)
{
    if (!c || c->bn < 0)
        return 0;
    in[1] = c->fold_w;
    in[2] = c->fold_b;
    if (*n_in < 3)
        *n_in = 3;
    return 1;
}
const fuse_prog *fuse_chain_prog(const fuse_chain *c) { return &c->prog; }
int fuse_chain_kernel(const fuse_chain *c)
{
    if (c->prog.n_lin <= 0 || c->prog.n_members < 2)
        return 0;
    return fuse_lin_special(c->prog.lin, c->prog.n_lin) ? 2 : 1;
}

void fuse_plan_free(fuse_plan *fp)
{
    if (!fp)
        return;
    for (int k = 0; k < fp->n_chains; k++) {
        tdm_tensor_destroy(fp->chains[k].fold_w);
        tdm_tensor_destroy(fp->chains[k].fold_b);
    }
    mem_free(fp->head_of);
    mem_free(fp->member);
    mem_free(fp->chains);
    mem_free(fp);
}

/* ------------------------------------------------------------- the pass */

typedef struct fuse_build {
    const gr_graph *g;
    int *pos;              /* position of each node in g->order */
    int *cstart, *cons;    /* consumers of each value (distinct nodes) */
    unsigned char *esc;    /* value read by a subgraph (by name) */
    unsigned char *taken;  /* node already in a chain */
    int avx2;
    int epilogue;          /* heads: only the ops of fuse_epilogue_head */
} fuse_build;

static void mark_outer(const gr_graph *g, const gr_graph *sub, unsigned char *esc)
{
    for (int v = 0; v < sub->n_values; v++) {
        if (!sub->values[v].outer)
            continue;
        int id = gr_value_find(g, sub->values[v].name);
        if (id >= 0)
            esc[id] = 1;
    }
    for (int n = 0; n < sub->n_nodes; n++)
        for (int a = 0; a < sub->nodes[n].n_attrs; a++) {
            const gr_attr *at = &sub->nodes[n].attrs[a];
            if (at->type == GA_GRAPH && at->g)
                mark_outer(g, at->g, esc);
            for (size_t k = 0; at->type == GA_GRAPHS && k < at->n; k++)
                mark_outer(g, at->graphs[k], esc);
        }
}

static int is_f32(const gr_graph *g, int v)
{
    const gr_type *t = &g->values[v].type;
    return t->kind == TDM_KIND_TENSOR && t->dtype == TDM_FLOAT && t->rank >= 0;
}

static int dim_eq(const gr_dim *a, const gr_dim *b)
{
    if (a->v >= 0 || b->v >= 0)
        return a->v == b->v;
    return a->sym && b->sym && strcmp(a->sym, b->sym) == 0;
}

static int same_shape(const gr_type *a, const gr_type *b)
{
    if (a->rank < 0 || a->rank != b->rank)
        return 0;
    for (int k = 0; k < a->rank; k++)
        if (!dim_eq(&a->dims[k], &b->dims[k]))
            return 0;
    return 1;
}

/* w broadcasts to o without growing it. */
static int bcast_into(const gr_type *w, const gr_type *o)
{
    if (w->rank < 0 || o->rank < 0 || w->rank > o->rank)
        return 0;
    for (int k = 0; k < w->rank; k++) {
        const gr_dim *wd = &w->dims[k], *od = &o->dims[o->rank - w->rank + k];
        if (wd->v != 1 && !dim_eq(wd, od))
            return 0;
    }
    return 1;
}

/* A float scalar constant (Clip bound): 1 and *f, or 0. */
static int const_scalar(const gr_graph *g, int v, float *f)
{
    const tdm_tensor *t = v >= 0 ? g->values[v].init : NULL;
    if (!t || t->kind != TDM_KIND_TENSOR || t->dtype != TDM_FLOAT || t->count != 1 || g->values[v].is_input)
        return 0;
    *f = ((const float *)t->data)[0];
    return 1;
}

/* The chain being grown. */
typedef struct fuse_grow {
    fuse_chain c;
    int vals[FUSE_MAX_NODES]; /* chain values: vals[r] is register r */
    int n_vals;
    int head_pos;
} fuse_grow;

static int reg_of(const fuse_grow *w, int v)
{
    for (int r = 0; r < w->n_vals; r++)
        if (w->vals[r] == v)
            return r;
    return -1;
}

/* Source of a binary input: a register, or an operand (added). -100: none. */
static int binary_src(const fuse_build *b, fuse_grow *w, int v)
{
    const gr_graph *g = b->g;
    int r = reg_of(w, v);
    if (r >= 0)
        return r;
    if (v < 0 || !is_f32(g, v))
        return -100;
    const gr_value *val = &g->values[v];
    int ready = val->init || val->is_input || val->outer ||
                (val->producer >= 0 && b->pos[val->producer] < w->head_pos);
    if (!ready || !bcast_into(&val->type, &g->values[w->vals[0]].type))
        return -100;
    for (int k = 0; k < w->c.prog.n_opd; k++)
        if (w->c.opd[k] == v)
            return -1 - k;
    if (w->c.prog.n_opd == FUSE_MAX_OPERANDS)
        return -100;
    w->c.opd[w->c.prog.n_opd] = v;
    return -1 - w->c.prog.n_opd++;
}

/* Appends node n to the chain when it is an elementwise step on chain
 * values; 1 if added. */
static int try_add(const fuse_build *b, fuse_grow *w, int n)
{
    const gr_graph *g = b->g;
    const gr_node *node = &g->nodes[n];
    fuse_ins ins;
    memset(&ins, 0, sizeof ins);
    if (node->op < 0 || node->n_outputs != 1 || node->outputs[0] < 0 || node->n_inputs < 1 || *node->domain)
        return 0;
    int out = node->outputs[0];
    if (!is_f32(g, out) || g->values[out].init || !same_shape(&g->values[out].type, &g->values[w->vals[0]].type))
        return 0;
    int unary = 1;
    switch (node->op) {
    case OP_Relu: ins.kind = FK_RELU; break;
    case OP_LeakyRelu:
        ins.kind = FK_LEAKY;
        ins.p = gr_attr_float(node, "alpha", 0.01f);
        break;
    case OP_Sigmoid:
        if (!b->avx2) /* the portable float Sigmoid is private to elementwise_unary.c */
            return 0;
        ins.kind = FK_SIGMOID;
        break;
    case OP_HardSigmoid:
        ins.kind = FK_HSIGMOID;
        ins.p = gr_attr_float(node, "alpha", 0.2f);
        ins.q = gr_attr_float(node, "beta", 0.5f);
        break;
    case OP_HardSwish:
        ins.kind = FK_HSWISH;
        ins.p = (float)(1.0 / 6);
        ins.q = 0.5f;
        break;
    case OP_Tanh: ins.kind = FK_TANH; break;
    case OP_Erf: ins.kind = FK_ERF; break;
    case OP_Clip:
        ins.kind = FK_CLIP;
        if (node->version < 11) {
            ins.p = gr_attr_float(node, "min", -FLT_MAX);
            ins.q = gr_attr_float(node, "max", FLT_MAX);
        } else {
            ins.p = -INFINITY;
            ins.q = INFINITY;
            if (node->n_inputs > 1 && node->inputs[1] >= 0 && !const_scalar(g, node->inputs[1], &ins.p))
                return 0;
            if (node->n_inputs > 2 && node->inputs[2] >= 0 && !const_scalar(g, node->inputs[2], &ins.q))
                return 0;
        }
        break;
    case OP_Add: ins.kind = FK_ADD; unary = 0; break;
    case OP_Sub: ins.kind = FK_SUB; unary = 0; break;
    case OP_Mul: ins.kind = FK_MUL; unary = 0; break;
    case OP_Div: ins.kind = FK_DIV; unary = 0; break;
    case OP_Max: ins.kind = FK_MAX; unary = 0; break;
    case OP_Min: ins.kind = FK_MIN; unary = 0; break;
    default: return 0;
    }
    int n_opd = w->c.prog.n_opd;
    if (unary) {
        if ((ins.a = reg_of(w, node->inputs[0])) < 0)
            return 0;
        if (node->op != OP_Clip && node->n_inputs != 1)
            return 0;
    } else {
        if (node->n_inputs != 2 || (reg_of(w, node->inputs[0]) < 0 && reg_of(w, node->inputs[1]) < 0))
            return 0;
        ins.a = binary_src(b, w, node->inputs[0]);
        ins.b = ins.a == -100 ? -100 : binary_src(b, w, node->inputs[1]);
        if (ins.a == -100 || ins.b == -100) {
            w->c.prog.n_opd = n_opd;
            return 0;
        }
    }
    ins.dst = w->n_vals;
    w->c.prog.ins[w->c.prog.n_members] = ins;
    w->c.members[w->c.prog.n_members++] = n;
    w->vals[w->n_vals++] = out;
    return 1;
}

/* Every chain value but the last has no consumer outside the chain. */
static int chain_closed(const fuse_build *b, const fuse_grow *w)
{
    const gr_graph *g = b->g;
    for (int r = 0; r < w->n_vals - 1; r++) {
        int v = w->vals[r];
        if (g->values[v].is_output || b->esc[v])
            return 0;
        for (int k = b->cstart[v]; k < b->cstart[v + 1]; k++) {
            int c = b->cons[k], in = 0;
            for (int m = 0; m < w->c.prog.n_members && !in; m++)
                in = w->c.members[m] == c;
            if (!in)
                return 0;
        }
    }
    return 1;
}

/* The one-pass program of chain c (fuse_lin), or 0 when its steps do not
 * fit one: each step reads the previous step's value and at most one
 * other value, saved earlier, a scalar operand or a full-size one. */
static int compile_lin(const gr_graph *g, const fuse_chain *cc, fuse_lin *lin)
{
    const gr_type *yt = &g->values[g->nodes[cc->head].outputs[0]].type;
    int src[FUSE_MAX_OPERANDS]; /* 1 scalar, 2 full-size */
    for (int k = 0; k < cc->prog.n_opd; k++) {
        const gr_type *t = &g->values[cc->opd[k]].type;
        int one = t->rank >= 0;
        for (int d = 0; d < t->rank; d++)
            one &= t->dims[d].v == 1;
        src[k] = one ? 1 : same_shape(t, yt) ? 2 : 0;
        if (!src[k])
            return 0;
    }
    /* last step reading each register */
    int last_use[FUSE_MAX_NODES];
    for (int r = 0; r < FUSE_MAX_NODES; r++)
        last_use[r] = -1;
    for (int t = 0; t < cc->prog.n_members; t++) {
        const fuse_ins *in = &cc->prog.ins[t];
        if (in->a >= 0)
            last_use[in->a] = t;
        if (in->kind >= FK_ADD && in->b >= 0)
            last_use[in->b] = t;
    }
    int n = 0, cur = 0, saved = -1;
    for (int t = 0; t < cc->prog.n_members; t++) {
        const fuse_ins *in = &cc->prog.ins[t];
        if (last_use[cur] > t) { /* cur is read after this step: save it */
            if (saved >= 0 && last_use[saved] >= t)
                return 0;
            lin[n++] = (fuse_lin){FL_SAVE, 0, 0, 0.0f, 0.0f};
            saved = cur;
        }
        fuse_lin st = {0, 0, 0, in->p, in->q};
        if (in->kind < FK_ADD) {
            if (in->a != cur || (in->kind != FK_RELU && in->kind != FK_CLIP && in->kind != FK_SIGMOID))
                return 0;
            st.op = in->kind == FK_RELU ? FL_RELU : in->kind == FK_CLIP ? FL_CLIP : FL_SIGMOID;
        } else {
            int rev, other;
            if (in->a == cur && in->b != cur) {
                rev = 0;
                other = in->b;
            } else if (in->b == cur && in->a != cur) {
                rev = 1;
                other = in->a;
            } else {
                return 0;
            }
            if (other >= 0) {
                if (other != saved)
                    return 0;
                st.src = 0;
            } else {
                st.opd = -1 - other;
                st.src = src[st.opd];
            }
            st.op = (rev ? FL_RADD : FL_ADD) + (in->kind - FK_ADD);
        }
        lin[n++] = st;
        cur = in->dst;
    }
    return n;
}

/* BatchNormalization folding (fuse_plan_fold_bn): on by default. */
static atomic_int fuse_fold_bn = 1;

void fuse_plan_fold_bn(int on) { atomic_store(&fuse_fold_bn, on != 0); }

/* A float32 initializer of count elements (count 0: any), or NULL. */
static const tdm_tensor *f32_init(const gr_graph *g, int v, size_t count)
{
    const tdm_tensor *t = v >= 0 && v < g->n_values && !g->values[v].is_input ? g->values[v].init : NULL;
    if (!t || t->kind != TDM_KIND_TENSOR || t->dtype != TDM_FLOAT || (count && t->count != count))
        return NULL;
    return t;
}

/* The inference BatchNormalization that only reads Conv node n's output
 * and can be folded into its weights, or -1. */
static int bn_after_conv(const fuse_build *b, int n)
{
    const gr_graph *g = b->g;
    const gr_node *cn = &g->nodes[n];
    if (cn->op != OP_Conv || *cn->domain || cn->n_inputs < 2 || cn->n_outputs != 1 || cn->outputs[0] < 0)
        return -1;
    int hv = cn->outputs[0];
    if (!is_f32(g, hv) || g->values[hv].is_output || b->esc[hv] || b->cstart[hv + 1] - b->cstart[hv] != 1)
        return -1;
    const tdm_tensor *w = f32_init(g, cn->inputs[1], 0);
    if (!w || w->rank < 3 || w->dims[0] < 1)
        return -1;
    size_t co = (size_t)w->dims[0];
    if (cn->n_inputs > 2 && cn->inputs[2] >= 0 && !f32_init(g, cn->inputs[2], co))
        return -1;
    int bn = b->cons[b->cstart[hv]];
    const gr_node *bnode = &g->nodes[bn];
    if (bnode->op != OP_BatchNormalization || *bnode->domain || b->taken[bn] || bnode->n_inputs != 5 ||
        bnode->inputs[0] != hv || bnode->n_outputs < 1 || bnode->outputs[0] < 0 || !is_f32(g, bnode->outputs[0]))
        return -1;
    for (int o = 1; o < bnode->n_outputs; o++)
        if (bnode->outputs[o] >= 0)
            return -1;
    if (bnode->version >= 14 && gr_attr_int(bnode, "training_mode", 0) != 0)
        return -1;
    if (bnode->version < 9 && gr_attr_int(bnode, "spatial", 1) == 0)
        return -1;
    for (int i = 1; i < 5; i++)
        if (!f32_init(g, bnode->inputs[i], co))
            return -1;
    const gr_type *ht = &g->values[hv].type;
    if (ht->rank < 2 || (ht->dims[1].v >= 0 && ht->dims[1].v != (int64_t)co))
        return -1;
    return bn;
}

/* The folded weights and bias of Conv n and BatchNormalization bn:
 * W' = W * a, b' = b_conv * a + (B - mean * a), a = scale / sqrt(var + eps)
 * per output channel, in double as the BatchNormalization kernel
 * computes a and its offset. */
static int bn_fold(const gr_graph *g, int n, int bn, fuse_chain *c)
{
    const gr_node *cn = &g->nodes[n], *bnode = &g->nodes[bn];
    const tdm_tensor *w = g->values[cn->inputs[1]].init;
    const tdm_tensor *cb = cn->n_inputs > 2 && cn->inputs[2] >= 0 ? g->values[cn->inputs[2]].init : NULL;
    /* read aligned (a temporary copy of what lies misaligned in the file) */
    const tdm_tensor *src[6] = {w, g->values[bnode->inputs[1]].init, g->values[bnode->inputs[2]].init,
                                g->values[bnode->inputs[3]].init, g->values[bnode->inputs[4]].init, cb};
    const float *rd[6] = {NULL};
    void *tmp[6] = {NULL};
    int bad = 0;
    for (int k = 0; k < 6; k++)
        if (src[k] && !(rd[k] = tensor_read_aligned(src[k], &tmp[k])))
            bad = 1;
    const float *wd = rd[0], *sc = rd[1], *bi = rd[2], *mn = rd[3], *vr = rd[4], *cbd = rd[5];
    size_t co = (size_t)w->dims[0], per = w->count / co;
    int64_t bd[1] = {(int64_t)co};
    tdm_err e;
    if (bad || tensor_new(&e, TDM_FLOAT, w->rank, w->dims, &c->fold_w) || tensor_new(&e, TDM_FLOAT, 1, bd, &c->fold_b)) {
        for (int k = 0; k < 6; k++)
            mem_free(tmp[k]);
        return -1;
    }
    c->fold_w->immutable = c->fold_b->immutable = 1; /* the GEMM may keep them packed */
    double eps = gr_attr_float(bnode, "epsilon", 1e-5f);
    float *fw = c->fold_w->data, *fb = c->fold_b->data;
    for (size_t o = 0; o < co; o++) {
        double a = sc[o] / sqrt(vr[o] + eps), off = bi[o] - mn[o] * a;
        for (size_t k = 0; k < per; k++)
            fw[o * per + k] = (float)(wd[o * per + k] * a);
        fb[o] = (float)((cbd ? cbd[o] * a : 0.0) + off);
    }
    for (int k = 0; k < 6; k++)
        mem_free(tmp[k]);
    tensor_drop_pages(w); /* the folded copy is what runs */
    c->bn = bn;
    return 0;
}

/* Every operand of the chain is a scalar initializer (a chain after a
 * folded BatchNormalization must always run fused: its head's output
 * is not the Conv's). */
static int opds_static(const gr_graph *g, const fuse_chain *c)
{
    for (int m = 0; m < c->prog.n_members; m++) {
        const fuse_ins *in = &c->prog.ins[m];
        int k = in->a < 0 ? -1 - in->a : in->kind >= FK_ADD && in->b < 0 ? -1 - in->b : -1;
        if (k >= 0) {
            const tdm_tensor *t = f32_init(g, c->opd[k], 1);
            if (!t || t->rank > 1)
                return 0;
        }
    }
    return 1;
}

static int grow_chain(fuse_build *b, int head, fuse_chain *out)
{
    const gr_graph *g = b->g;
    const gr_node *hn = &g->nodes[head];
    if (hn->op < 0 || hn->n_outputs != 1 || hn->outputs[0] < 0 || b->taken[head])
        return 0;
    if (op_table[hn->op].flags & (OPF_SHAPE | OPF_SUBGRAPH | OPF_SEQUENCE | OPF_RANDOM))
        return 0;
    if (b->epilogue && !fuse_epilogue_head(hn->op))
        return 0;
    if (hn->qdq && !hn->qdq->wrapped)
        return 0; /* a QDQ group runs in integer arithmetic (ops/qdq.h), nothing fused into it */
    int hv = hn->outputs[0];
    if (!is_f32(g, hv) || g->values[hv].init)
        return 0;
    fuse_grow w;
    memset(&w, 0, sizeof w);
    w.c.head = head;
    w.c.bn = -1;
    w.vals[0] = hv;
    w.n_vals = 1;
    w.head_pos = b->pos[head];
    fuse_chain best;
    int have = 0;
    int bn = atomic_load(&fuse_fold_bn) ? bn_after_conv(b, head) : -1;
    if (bn >= 0) { /* the chain starts at the BatchNormalization's output */
        w.vals[0] = g->nodes[bn].outputs[0];
        w.c.bn = bn;
        best = w.c;
        best.out_value = w.vals[0];
        have = 1;
    }
    while (w.n_vals < FUSE_MAX_NODES) {
        /* the earliest consumer of a chain value not yet in the chain */
        int next = -1;
        for (int r = 0; r < w.n_vals; r++) {
            int v = w.vals[r];
            for (int k = b->cstart[v]; k < b->cstart[v + 1]; k++) {
                int c = b->cons[k], in = 0;
                for (int m = 0; m < w.c.prog.n_members && !in; m++)
                    in = w.c.members[m] == c;
                if (!in && (next < 0 || b->pos[c] < b->pos[next]))
                    next = c;
            }
        }
        if (next < 0 || b->taken[next] || !try_add(b, &w, next))
            break;
        if (chain_closed(b, &w) && (bn < 0 || opds_static(g, &w.c))) {
            best = w.c;
            best.out_value = w.vals[w.n_vals - 1];
            have = 1;
        }
    }
    if (!have)
        return 0;
    /* operands of the kept prefix only */
    int n_opd = 0;
    for (int k = 0; k < best.prog.n_opd; k++) {
        int used = 0;
        for (int m = 0; m < best.prog.n_members; m++)
            used |= best.prog.ins[m].a == -1 - k || best.prog.ins[m].b == -1 - k;
        if (used)
            n_opd = k + 1;
    }
    best.prog.n_opd = n_opd;
    best.prog.avx2 = b->avx2;
    best.prog.n_lin = b->avx2 ? compile_lin(g, &best, best.prog.lin) : 0;
    /* the general one-pass loop dispatches per step and block of 32: for
     * long programs the step-per-pass interpreter is faster */
    if (best.prog.n_lin > 3 && !fuse_lin_special(best.prog.lin, best.prog.n_lin))
        best.prog.n_lin = 0;
    best.in_kernel = 0;
    for (size_t k = 0; k < sizeof fuse_kernel_ops / sizeof fuse_kernel_ops[0]; k++)
        best.in_kernel |= hn->op == fuse_kernel_ops[k];
    *out = best;
    return 1;
}

tdm_status fuse_plan_build(tdm_err *e, const gr_graph *g, fuse_plan **out)
{
    return fuse_plan_build_in(e, g, g->order, g->order ? g->n_nodes : 0, NULL, 1, out);
}

int fuse_epilogue_head(int op) { return op == OP_Conv || op == OP_ConvTranspose || op == OP_Gemm || op == OP_MatMul; }

tdm_status fuse_plan_build_in(tdm_err *e, const gr_graph *g, const int *order, int n_order,
                              const unsigned char *escapes, int fold, fuse_plan **out)
{
    return fuse_plan_build_heads(e, g, order, n_order, escapes, fold, 0, out);
}

tdm_status fuse_plan_build_heads(tdm_err *e, const gr_graph *g, const int *order, int n_order,
                                 const unsigned char *escapes, int fold, int epilogue, fuse_plan **out)
{
    *out = NULL;
    int N = g->n_nodes, V = g->n_values;
    fuse_build b;
    memset(&b, 0, sizeof b);
    b.g = g;
    b.avx2 = gemm_avx2_usable();
    b.epilogue = epilogue != 0;
    fuse_plan *fp = mem_calloc(1, sizeof *fp);
    b.pos = mem_calloc((size_t)N + 1, sizeof *b.pos);
    b.cstart = mem_calloc((size_t)V + 2, sizeof *b.cstart);
    b.esc = mem_calloc((size_t)V + 1, 1);
    b.taken = mem_calloc((size_t)N + 1, 1);
    if (!fp || !b.pos || !b.cstart || !b.esc || !b.taken)
        goto nomem;
    fp->n_nodes = N;
    fp->head_of = mem_alloc(((size_t)N + 1) * sizeof *fp->head_of);
    fp->member = mem_calloc((size_t)N + 1, 1);
    if (!fp->head_of || !fp->member)
        goto nomem;
    for (int n = 0; n < N; n++)
        fp->head_of[n] = -1;
    if (!order || n_order <= 0) {
        *out = fp;
        goto done;
    }
    /* nodes outside order[] are another program's: position -1 (their
     * values are ready before any head), no consumers, never heads */
    for (int n = 0; n < N; n++)
        b.pos[n] = -1;
    for (int p = 0; p < n_order; p++)
        b.pos[order[p]] = p;
    for (int v = 0; escapes && v < V; v++)
        b.esc[v] = escapes[v] != 0;
    /* consumers, distinct per node */
    for (int p = 0; p < n_order; p++) {
        const gr_node *node = &g->nodes[order[p]];
        for (int i = 0; i < node->n_inputs; i++) {
            int v = node->inputs[i], dup = 0;
            for (int j = 0; j < i && !dup; j++)
                dup = node->inputs[j] == v;
            if (v >= 0 && !dup)
                b.cstart[v + 1]++;
        }
        for (int a = 0; a < node->n_attrs; a++) {
            const gr_attr *at = &node->attrs[a];
            if (at->type == GA_GRAPH && at->g)
                mark_outer(g, at->g, b.esc);
            for (size_t k = 0; at->type == GA_GRAPHS && k < at->n; k++)
                mark_outer(g, at->graphs[k], b.esc);
        }
    }
    for (int v = 0; v < V; v++)
        b.cstart[v + 1] += b.cstart[v];
    b.cons = mem_alloc(((size_t)b.cstart[V] + 1) * sizeof *b.cons);
    int *fill = mem_calloc((size_t)V + 1, sizeof *fill);
    if (!b.cons || !fill) {
        mem_free(fill);
        goto nomem;
    }
    for (int p = 0; p < n_order; p++) {
        int n = order[p];
        const gr_node *node = &g->nodes[n];
        for (int i = 0; i < node->n_inputs; i++) {
            int v = node->inputs[i], dup = 0;
            for (int j = 0; j < i && !dup; j++)
                dup = node->inputs[j] == v;
            if (v >= 0 && !dup)
                b.cons[b.cstart[v] + fill[v]++] = n;
        }
    }
    mem_free(fill);
    size_t cap = 0;
    for (int p = 0; p < n_order; p++) {
        int n = order[p];
        fuse_chain c;
        if (!grow_chain(&b, n, &c))
            continue;
        if (mem_grow((void **)&fp->chains, &cap, (size_t)fp->n_chains + 1, sizeof *fp->chains))
            goto nomem;
        c.fold_w = c.fold_b = NULL;
        if (c.bn >= 0 && fold && bn_fold(g, n, c.bn, &c)) {
            tdm_tensor_destroy(c.fold_w);
            goto nomem;
        }
        fp->head_of[n] = fp->n_chains;
        b.taken[n] = 1;
        if (c.bn >= 0) {
            fp->member[c.bn] = 1;
            b.taken[c.bn] = 1;
            fp->n_fused++;
        }
        for (int m = 0; m < c.prog.n_members; m++) {
            fp->member[c.members[m]] = 1;
            b.taken[c.members[m]] = 1;
        }
        fp->n_fused += c.prog.n_members;
        fp->chains[fp->n_chains++] = c;
    }
    *out = fp;
    goto done;
nomem:
    fuse_plan_free(fp);
    err_set(e, TDM_E_NOMEM, "out of memory");
done:
    mem_free(b.pos);
    mem_free(b.cstart);
    mem_free(b.cons);
    mem_free(b.esc);
    mem_free(b.taken);
    return *out ? TDM_OK : TDM_E_NOMEM;
}

/* ------------------------------------------------------------ binding */

tdm_status fuse_bind(tdm_err *e, const fuse_chain *c, tdm_tensor *const *vals, const tdm_tensor *y, op_fuse *f)
{
    f->prog = &c->prog;
    f->y = y;
    atomic_init(&f->done, 0);
    for (int k = 0; k < c->prog.n_opd; k++) {
        f->opd[k] = vals[c->opd[k]];
        if (!f->opd[k])
            return err_set(e, TDM_E_INTERNAL, "a fused operand has no value");
        if (tensor_misaligned(f->opd[k]) && !tensor_align(f->opd[k])) /* the programs load its elements */
            return err_set(e, TDM_E_NOMEM, "out of memory aligning a fused operand");
    }
    return TDM_OK;
}

int fuse_shapes_ok(const op_fuse *f)
{
    const tdm_tensor *y = f->y;
    if (!y || y->kind != TDM_KIND_TENSOR || y->dtype != TDM_FLOAT)
        return 0;
    for (int k = 0; k < f->prog->n_opd; k++) {
        const tdm_tensor *t = f->opd[k];
        if (t->kind != TDM_KIND_TENSOR || t->dtype != TDM_FLOAT || t->rank > y->rank)
            return 0;
        for (int d = 0; d < t->rank; d++) {
            int64_t td = t->dims[d], yd = y->dims[y->rank - t->rank + d];
            if (td != 1 && td != yd)
                return 0;
        }
    }
    return 1;
}
