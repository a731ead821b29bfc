/* More rewrite rules (rewrite_build.h; the table is in rewrite_rules.c):
 * a Gather with a scalar index, Einsum (contractions, sums, diagonals), Conv or
 * ConvTranspose followed by BatchNormalization, and int64 → int32 Cast
 * insertion where a range proof exists. */
#include "graph/rewrite_build.h"
#include "core/mem.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Refuses the node (returns 0) with a sentence in r->why. */
static int refuse(gr_rw *r, const char *fmt, const char *arg)
{
    snprintf(r->why, sizeof r->why, fmt, arg);
    return 0;
}

void rwb_squeeze(rwb *b, const char *op, const char *x, int64_t axis, const char *out)
{
    gr_rw_node *n;
    if (b->opset >= 13)
        n = rwb_op(b, op, 2, x, rwb_ints(b, 1, &axis), out);
    else if ((n = rwb_op(b, op, 1, x, NULL, out)) != NULL)
        gr_rw_attr_ints(n, "axes", 1, &axis);
}

/* Copies node src's attributes into n (INT, FLOAT, STRING, INTS only):
 * 0, or -1 when one of another type (or too long) is there. */
static int copy_attrs(gr_rw_node *n, const gr_node *src)
{
    if (src->n_attrs > GR_RW_MAX_ATTRS)
        return -1;
    for (int a = 0; a < src->n_attrs; a++) {
        const gr_attr *s = &src->attrs[a];
        switch (s->type) {
        case GA_INT:
            gr_rw_attr_int(n, s->name, s->i);
            break;
        case GA_FLOAT:
            gr_rw_attr_float(n, s->name, s->f);
            break;
        case GA_STRING:
            if (s->s_len >= sizeof n->attrs[0].s)
                return -1;
            gr_rw_attr_str(n, s->name, s->s);
            break;
        case GA_INTS:
            if (s->n > TDM_MAX_RANK)
                return -1;
            gr_rw_attr_ints(n, s->name, (int)s->n, s->ints);
            break;
        default:
            return -1;
        }
        if (strlen(s->name) >= sizeof n->attrs[0].name)
            return -1;
    }
    return 0;
}

/* ---- gather-scalar ---- */

/* Gather(data, i) with i of rank 0 → Squeeze(Gather(data, [i]), axis):
 * devices that take indices of rank 1 or more only. */
int gr_rw_rule_gather_scalar(const gr_graph *g, int node, gr_rw *r)
{
    rwb b;
    rwb_init(&b, r, g, node);
    const gr_type *it = rwb_in_type(&b, 1);
    const tdm_tensor *ic = rwb_in_const(&b, 1);
    if (it->rank != 0 || !*rwb_out_name(&b, 0))
        return 0;
    if (it->dtype != TDM_INT64 && it->dtype != TDM_INT32)
        return 0;
    /* the output's rank equals the data's, so a negative axis names the
     * same position in both */
    int64_t axis = gr_attr_int(b.n, "axis", 0);
    if (b.nt + 2 > RWB_TMPS)
        return -1;
    char *idx = b.tmp[b.nt++];
    const char *gathered = rwb_tmp(&b);
    if (ic) {
        int64_t one[1] = {1};
        double v = (double)tensor_get_i64(ic, 0);
        if (gr_rw_const(r, g, it->dtype, 1, one, &v, idx, RWB_NAME))
            return -1;
    } else {
        gr_rw_tmp(r, g, idx, RWB_NAME);
        rwb_squeeze(&b, "Unsqueeze", rwb_in_name(&b, 1), 0, idx);
    }
    gr_rw_node *n = rwb_op(&b, "Gather", 2, rwb_in_name(&b, 0), idx, gathered);
    if (n)
        gr_rw_attr_int(n, "axis", axis);
    rwb_squeeze(&b, "Squeeze", gathered, axis, rwb_out_name(&b, 0));
    return rwb_done(&b);
}

/* ---- einsum ---- */

#define EIN_MAX 12 /* labels in one term */
#define EIN_OPS 4  /* operands */

typedef struct ein_term {
    char l[EIN_MAX + 1];
    int n;
} ein_term;

static int ein_letter(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Parses "ab,bc->ac" (or the implicit "ab,bc") of n_ops operands into
 * t[0..n_ops-1] and the output t[n_ops]; a label may repeat within an
 * operand (a diagonal), not within the output. NULL, or the sentence why
 * not. */
static const char *ein_parse(const char *eq, int n_ops, ein_term *t)
{
    int k = 0, arrow = 0;
    memset(t, 0, (size_t)(n_ops + 1) * sizeof *t);
    for (const char *p = eq; *p; p++) {
        if (*p == ' ')
            continue;
        if (*p == '.')
            return "an ellipsis that is not '...'";
        if (*p == ',') {
            if (arrow || ++k >= n_ops)
                return "the equation has more terms than the node has inputs";
            continue;
        }
        if (*p == '-' && p[1] == '>') {
            if (arrow || k != n_ops - 1)
                return "the equation has fewer terms than the node has inputs";
            arrow = 1;
            k = n_ops;
            p++;
            continue;
        }
        if (!ein_letter(*p))
            return "a label is not a letter";
        if (t[k].n >= EIN_MAX)
            return "a term has too many labels";
        if (k == n_ops && strchr(t[k].l, *p))
            return "a label repeats in the output";
        t[k].l[t[k].n++] = *p;
    }
    if (k < n_ops - 1)
        return "the equation has fewer terms than the node has inputs";
    if (!arrow) {
        /* implicit output: the labels used once in all terms, in alphabetical order */
        for (int c = 'A'; c <= 'z'; c++) {
            int uses = 0;
            for (int i = 0; i < n_ops && ein_letter(c); i++)
                for (int j = 0; j < t[i].n; j++)
                    uses += t[i].l[j] == c;
            if (uses != 1)
                continue;
            if (t[n_ops].n >= EIN_MAX)
                return "the output has too many labels";
            t[n_ops].l[t[n_ops].n++] = (char)c;
        }
    }
    return NULL;
}

static int pos(const ein_term *t, char c)
{
    const char *p = strchr(t->l, c);
    return p && c ? (int)(p - t->l) : -1;
}

/* eq with each "..." written as labels (unused capitals) into out, from
 * the operands' ranks (-1 unknown), numpy's way: the ellipses are
 * right-aligned, so the last dimensions of a shorter one share labels
 * with a longer one's; the output's "..." (or, in the implicit form, the
 * front of the output) takes them all. NULL, or the sentence why not. */
static const char *ein_expand(const char *eq, int n_ops, const int *rank, char *out, size_t size)
{
    char fresh[EIN_MAX + 1];
    int nf = 0, term = 0, dots[EIN_OPS] = {0}, labels[EIN_OPS] = {0}, arrow = 0;
    for (int c = 'A'; c <= 'Z' && nf < EIN_MAX; c++)
        if (!strchr(eq, c))
            fresh[nf++] = (char)c;
    for (const char *p = eq; *p; p++) {
        if (arrow)
            continue;
        if (*p == ',') {
            if (++term >= n_ops)
                return "the equation has more terms than the node has inputs";
        } else if (*p == '-' && p[1] == '>') {
            arrow = 1;
        } else if (*p == '.' && strncmp(p, "...", 3) == 0) {
            dots[term] = 1;
            p += 2;
        } else if (*p != ' ') {
            labels[term]++;
        }
    }
    int k[EIN_OPS], most = 0;
    for (int i = 0; i < n_ops; i++) {
        k[i] = 0;
        if (!dots[i])
            continue;
        if (rank[i] < 0)
            return "an ellipsis over an operand of unknown rank is not handled";
        k[i] = rank[i] - labels[i];
        if (k[i] < 0 || k[i] > nf)
            return "an ellipsis does not fit the operand's rank";
        most = k[i] > most ? k[i] : most;
    }
    size_t n = 0;
    int in_out = 0;
    term = 0;
    for (const char *p = eq; *p; p++) {
        if (n + 2 * EIN_MAX + 8 >= size)
            return "the equation is too long";
        if (*p == ',')
            term++;
        if (*p == '>')
            in_out = 1;
        if (*p == '.' && strncmp(p, "...", 3) == 0) {
            for (int j = in_out ? 0 : most - k[term]; j < most; j++)
                out[n++] = fresh[j];
            p += 2;
            continue;
        }
        out[n++] = *p;
    }
    if (!arrow && most) {
        /* implicit output: the ellipsis' labels, then the labels used once, sorted */
        out[n++] = '-';
        out[n++] = '>';
        for (int j = 0; j < most; j++)
            out[n++] = fresh[j];
        for (int c = 'A'; c <= 'z' && n + 1 < size; c++) {
            const char *f = c ? strchr(eq, c) : NULL;
            if (ein_letter(c) && f && !strchr(f + 1, c))
                out[n++] = (char)c;
        }
    }
    out[n] = '\0';
    return NULL;
}

/* A value of the rewrite with one axis per label (distinct once its
 * diagonals are taken) and the axes' sizes (-1 unknown). */
typedef struct ein_val {
    const char *name;
    ein_term t;
    int64_t d[EIN_MAX];
} ein_val;

/* x permuted by perm (n axes) unless it is the identity. */
static const char *ein_transpose(rwb *b, const char *x, int n, const int64_t *perm)
{
    int id = 1;
    for (int k = 0; k < n; k++)
        id &= perm[k] == k;
    if (id)
        return x;
    const char *out = rwb_tmp(b);
    gr_rw_node *node = rwb_op(b, "Transpose", 1, x, NULL, out);
    if (node)
        gr_rw_attr_ints(node, "perm", n, perm);
    return out;
}

/* v with its axes in the order of labels ls (a permutation of v's). */
static void ein_order(rwb *b, ein_val *v, const char *ls)
{
    int64_t perm[EIN_MAX];
    ein_val w = *v;
    for (int k = 0; k < v->t.n; k++) {
        perm[k] = pos(&v->t, ls[k]);
        w.t.l[k] = ls[k];
        w.d[k] = v->d[perm[k]];
    }
    w.name = ein_transpose(b, v->name, v->t.n, perm);
    *v = w;
}

/* v with one axis for each label it repeats (its diagonal): the two axes
 * of a repeated label moved last (Transpose), merged (Reshape) and every
 * (n+1)-th element of the n·n taken (Slice, exact for any value). 0, or
 * -1 when a repeated label's size is not known. */
static int ein_diagonal(rwb *b, ein_val *v)
{
    for (;;) {
        int p = -1, q = -1, r = v->t.n, k = 0;
        for (int i = 0; i < r && q < 0; i++)
            for (int j = i + 1; j < r && q < 0; j++)
                if (v->t.l[i] == v->t.l[j])
                    p = i, q = j;
        if (q < 0)
            return 0;
        int64_t n = v->d[p] >= 0 ? v->d[p] : v->d[q];
        if (n < 0)
            return -1;
        int64_t perm[EIN_MAX], shape[EIN_MAX];
        ein_val w;
        memset(&w, 0, sizeof w);
        for (int i = 0; i < r; i++)
            if (i != p && i != q) {
                perm[k] = i;
                shape[k] = 0; /* copied from the input */
                w.t.l[k] = v->t.l[i];
                w.d[k++] = v->d[i];
            }
        perm[k] = p;
        perm[k + 1] = q;
        const char *x = ein_transpose(b, v->name, r, perm), *flat = rwb_tmp(b);
        shape[k] = n * n;
        rwb_op(b, "Reshape", 2, x, rwb_ints(b, k + 1, shape), flat);
        int64_t start = 0, end = n * n, axis = k, step = n + 1;
        const char *in[5] = {flat, rwb_ints(b, 1, &start), rwb_ints(b, 1, &end), rwb_ints(b, 1, &axis),
                             rwb_ints(b, 1, &step)};
        w.name = rwb_tmp(b);
        if (!gr_rw_node_add(b->r, "Slice", 5, in, 1, &w.name))
            b->fail = 1;
        w.t.l[k] = v->t.l[p];
        w.d[k] = n;
        w.t.n = k + 1;
        *v = w;
    }
}

/* v without the axes of the labels not in needed: ReduceSum over them,
 * keepdims 0 (axes an input from opset 13, an attribute before). */
static void ein_sum(rwb *b, ein_val *v, const char *needed)
{
    int64_t axes[EIN_MAX];
    int na = 0;
    ein_val w;
    memset(&w, 0, sizeof w);
    for (int i = 0; i < v->t.n; i++) {
        if (strchr(needed, v->t.l[i])) {
            w.t.l[w.t.n] = v->t.l[i];
            w.d[w.t.n++] = v->d[i];
        } else {
            axes[na++] = i;
        }
    }
    if (!na)
        return;
    w.name = rwb_tmp(b);
    gr_rw_node *n;
    if (b->opset >= 13)
        n = rwb_op(b, "ReduceSum", 2, v->name, rwb_ints(b, na, axes), w.name);
    else if ((n = rwb_op(b, "ReduceSum", 1, v->name, NULL, w.name)) != NULL)
        gr_rw_attr_ints(n, "axes", na, axes);
    if (n)
        gr_rw_attr_int(n, "keepdims", 0);
    *v = w;
}

/* The size of label c from A (else B), or -1. */
static int64_t ein_dim(const ein_val *A, const ein_val *B, char c)
{
    int i = pos(&A->t, c), j = pos(&B->t, c);
    int64_t v = i >= 0 ? A->d[i] : -1;
    return v < 0 && j >= 0 ? B->d[j] : v;
}

/* The product of the sizes of labels ls, or -1 when one is unknown; 1 for none. */
static int64_t ein_prod(const ein_val *A, const ein_val *B, const char *ls)
{
    int64_t p = 1;
    for (; *ls; ls++) {
        int64_t d = ein_dim(A, B, *ls);
        if (d < 0)
            return -1;
        p *= d;
    }
    return p;
}

/* perm: the positions in v of the labels of x, then y, then z. */
static void ein_perm(const ein_val *v, int64_t *perm, const char *x, const char *y, const char *z)
{
    const char *groups[3] = {x, y, z};
    int k = 0;
    for (int i = 0; i < 3; i++)
        for (const char *c = groups[i]; *c; c++)
            perm[k++] = pos(&v->t, *c);
}

/* x as [batch (nb dims, copied), rows, cols]: a Reshape; shape has room
 * for nb + 2 entries, its first nb zero. */
static const char *ein_matrix(rwb *b, const char *x, int64_t *shape, int nb, int64_t rows, int64_t cols)
{
    const char *out = rwb_tmp(b);
    shape[nb] = rows;
    shape[nb + 1] = cols;
    rwb_op(b, "Reshape", 2, x, rwb_ints(b, nb + 2, shape), out);
    return out;
}

/* A·B contracted over the labels both have that needed lacks (each label
 * of A or B is in the other or in needed): A as [batch, fa, con], B as
 * [batch, con, fb] (Transpose, and Reshape when a group is not one label),
 * MatMul, Reshape back; *res has the labels batch, fa, fb in needed's
 * order. NULL, or the sentence why not. */
static const char *ein_pair(rwb *b, const ein_val *A, const ein_val *B, const char *needed, ein_val *res)
{
    ein_val o, *out = &o; /* res may be A */
    char batch[EIN_MAX + 1] = "", fa[EIN_MAX + 1] = "", fb[EIN_MAX + 1] = "", con[EIN_MAX + 1] = "";
    int nb = 0, nfa = 0, nfb = 0, nc = 0;
    for (const char *p = needed; *p; p++) {
        int ia = pos(&A->t, *p), ib = pos(&B->t, *p);
        if (ia >= 0 && ib >= 0)
            batch[nb++] = *p;
        else if (ia >= 0)
            fa[nfa++] = *p;
        else if (ib >= 0)
            fb[nfb++] = *p;
    }
    for (int k = 0; k < A->t.n; k++)
        if (!strchr(needed, A->t.l[k]))
            con[nc++] = A->t.l[k];
    if (nb + nfa + nc != A->t.n || nb + nfb + nc != B->t.n || nb + nfa + nfb > EIN_MAX)
        return "a label is in neither the other operand nor the result";
    int64_t pa[EIN_MAX], pb[EIN_MAX];
    ein_perm(A, pa, batch, fa, con);
    ein_perm(B, pb, batch, con, fb);
    /* the merged group sizes a Reshape needs (-1: at most one unknown per shape) */
    int64_t sfa = ein_prod(A, B, fa), sfb = ein_prod(A, B, fb), sc = ein_prod(A, B, con);
    int reshape_a = nfa != 1 || nc != 1, reshape_b = nfb != 1 || nc != 1, reshape_out = nfa != 1 || nfb != 1;
    if ((reshape_a && sfa < 0 && sc < 0) || (reshape_b && sfb < 0 && sc < 0))
        return "the sizes of the labels it merges are not known";
    int64_t shape[EIN_MAX + 2];
    const char *a = ein_transpose(b, A->name, A->t.n, pa);
    const char *bb = ein_transpose(b, B->name, B->t.n, pb);
    for (int k = 0; k < nb; k++)
        shape[k] = 0; /* copied from the input */
    if (reshape_a)
        a = ein_matrix(b, a, shape, nb, sfa, sc);
    if (reshape_b)
        bb = ein_matrix(b, bb, shape, nb, sc, sfb);
    memset(out, 0, sizeof *out);
    for (int k = 0; k < nb; k++) {
        /* a batch label's size: the larger where both are known (MatMul broadcasts a 1) */
        int64_t x = A->d[pos(&A->t, batch[k])], y = B->d[pos(&B->t, batch[k])];
        out->d[k] = x < 0 ? (y > 1 ? y : -1) : y < 0 ? (x > 1 ? x : -1) : (x > y ? x : y);
    }
    int unknown = 0;
    for (int k = 0; k < nfa + nfb; k++) {
        out->d[nb + k] = ein_dim(A, B, k < nfa ? fa[k] : fb[k - nfa]);
        unknown += out->d[nb + k] < 0;
    }
    snprintf(out->t.l, sizeof out->t.l, "%s%s%s", batch, fa, fb);
    out->t.n = nb + nfa + nfb;
    const char *m = rwb_tmp(b);
    rwb_op(b, "MatMul", 2, a, bb, m);
    if (reshape_out) {
        if (unknown > 1)
            return "the sizes of the labels it splits are not known";
        for (int k = 0; k < nfa + nfb; k++)
            shape[nb + k] = out->d[nb + k];
        const char *x = rwb_tmp(b);
        rwb_op(b, "Reshape", 2, m, rwb_ints(b, out->t.n, shape), x);
        m = x;
    }
    out->name = m;
    *res = o;
    return NULL;
}

/* Names x the node's output out: the last node's output renamed when it
 * made x, else an Identity (an operand that is already the result). */
static void ein_finish(rwb *b, const char *x, const char *out)
{
    gr_rw *r = b->r;
    gr_rw_node *last = r->n_nodes ? &r->nodes[r->n_nodes - 1] : NULL;
    if (last && strcmp(last->out[0], x) == 0) {
        char *s = mem_strdup(out);
        if (!s) {
            b->fail = 1;
            return;
        }
        mem_free(last->out[0]);
        last->out[0] = s;
        return;
    }
    rwb_op(b, "Identity", 1, x, NULL, out);
}

/* Appends the labels of ls not yet in set (size EIN_OPS * EIN_MAX + 1). */
static void ein_union(char *set, const char *ls)
{
    size_t n = strlen(set);
    for (; *ls; ls++)
        if (!strchr(set, *ls))
            set[n++] = *ls, set[n] = '\0';
}

/* Einsum of 1 to 4 operands into Transpose, Reshape, Slice, ReduceSum and
 * MatMul: each operand's diagonals taken (ein_diagonal), then the
 * operands contracted pairwise from the left (ein_pair), each first summed
 * over the labels that neither the other, a later operand nor the output
 * has (ein_sum); one operand is summed and transposed. */
int gr_rw_rule_einsum(const gr_graph *g, int node, gr_rw *r)
{
    rwb b;
    rwb_init(&b, r, g, node);
    ein_term t[EIN_OPS + 1];
    ein_val v[EIN_OPS];
    int n_ops = b.n->n_inputs, rank[EIN_OPS], n_diag = 0;
    const char *eq = gr_attr_str(b.n, "equation", NULL), *why;
    if (!eq)
        return refuse(r, "%s has no equation", b.n->name);
    if (n_ops < 1 || n_ops > EIN_OPS)
        return refuse(r, "'%.120s': only 1 to 4 operands are handled", eq);
    for (int i = 0; i < n_ops; i++)
        rank[i] = rwb_in_type(&b, i)->rank;
    char full[256];
    if ((why = ein_expand(eq, n_ops, rank, full, sizeof full)) != NULL || (why = ein_parse(full, n_ops, t)) != NULL) {
        snprintf(r->why, sizeof r->why, "'%.100s': %s", eq, why);
        return 0;
    }
    const ein_term *ot = &t[n_ops];
    for (int i = 0; i < n_ops; i++) {
        const gr_type *ty = rwb_in_type(&b, i);
        if (ty->rank >= 0 && ty->rank != t[i].n)
            return refuse(r, "'%.120s': the operands' ranks do not match the equation", eq);
        v[i].name = rwb_in_name(&b, i);
        v[i].t = t[i];
        for (int k = 0; k < t[i].n; k++) {
            v[i].d[k] = ty->rank >= 0 ? ty->dims[k].v : -1;
            n_diag += pos(&t[i], t[i].l[k]) != k;
        }
    }
    for (int k = 0; k < ot->n; k++) {
        int found = 0;
        for (int i = 0; i < n_ops; i++)
            found |= pos(&t[i], ot->l[k]) >= 0;
        if (!found)
            return refuse(r, "'%.120s': an output label is in no operand", eq);
    }
    /* the intermediate names it may need (ein_diagonal 8 each, ein_sum 2, ein_pair 9, the last Transpose 1) */
    if (8 * n_diag + 2 * (2 * n_ops - 1) + 9 * (n_ops - 1) + 1 > RWB_TMPS)
        return refuse(r, "'%.120s': too many diagonals and operands for one rewrite", eq);
    for (int i = 0; i < n_ops; i++)
        if (ein_diagonal(&b, &v[i]) < 0)
            return refuse(r, "'%.120s': the size of a repeated label (a diagonal) is not known", eq);
    ein_val acc = v[0];
    if (n_ops == 1)
        ein_sum(&b, &acc, ot->l);
    for (int k = 1; k < n_ops; k++) {
        /* what the rest needs: the output and the later operands' labels */
        char needed[EIN_OPS * EIN_MAX + 1], with[EIN_OPS * EIN_MAX + 1];
        snprintf(needed, sizeof needed, "%s", ot->l);
        for (int j = k + 1; j < n_ops; j++)
            ein_union(needed, v[j].t.l);
        snprintf(with, sizeof with, "%s", needed);
        ein_union(with, v[k].t.l);
        ein_sum(&b, &acc, with);
        snprintf(with, sizeof with, "%s", needed);
        ein_union(with, acc.t.l);
        ein_sum(&b, &v[k], with);
        if ((why = ein_pair(&b, &acc, &v[k], needed, &acc)) != NULL) {
            snprintf(r->why, sizeof r->why, "'%.100s': %s", eq, why);
            return 0;
        }
    }
    ein_order(&b, &acc, ot->l);
    ein_finish(&b, acc.name, rwb_out_name(&b, 0));
    return rwb_done(&b);
}

/* ---- conv-bn ---- */

/* c (count co) holds one value per channel of a rank-rank output: every
 * dimension 1 but the one that lines up with axis 1 (right-aligned). */
static int per_channel_const(const tdm_tensor *c, int64_t co, int rank)
{
    if ((int64_t)tdm_tensor_count(c) != co || c->rank > rank)
        return 0;
    for (int d = 0; d < c->rank; d++)
        if (c->dims[d] != 1 && d + rank - c->rank != 1)
            return 0;
    return 1;
}

/* Conv or ConvTranspose (constant weight, constant or no bias; maybe
 * followed by an Add of a constant per-channel bias) whose only
 * reader is BatchNormalization (inference mode, constant parameters) →
 * one Conv/ConvTranspose with W' = W s and b' = (b - mean) s + B, s =
 * scale / sqrt(var + epsilon) per output channel, computed in double. */
int gr_rw_rule_conv_bn(const gr_graph *g, int node, gr_rw *r)
{
    rwb b;
    rwb_init(&b, r, g, node);
    const gr_node *bn = b.n;
    int x = bn->n_inputs > 0 ? bn->inputs[0] : -1;
    if (x < 0 || bn->n_inputs < 5 || !*rwb_out_name(&b, 0))
        return 0;
    int ci = g->values[x].producer, ai = -1;
    const tdm_tensor *addb = NULL;
    if (ci < 0)
        return 0;
    if (strcmp(g->nodes[ci].op_type, "Add") == 0 && !*g->nodes[ci].domain && g->nodes[ci].n_inputs == 2) {
        /* a bias added to the convolution's output: Add(conv, c) or Add(c, conv) */
        const gr_node *an = &g->nodes[ci];
        int cin = g->values[an->inputs[0]].init ? 0 : 1;
        addb = g->values[an->inputs[cin]].init;
        ai = ci;
        ci = an->inputs[1 - cin] >= 0 ? g->values[an->inputs[1 - cin]].producer : -1;
        if (!addb || ci < 0)
            return 0;
        if (g->values[x].is_output || g->values[x].n_consumers != 1)
            return refuse(r, "the output of %.120s has other readers than the BatchNormalization", an->name);
        x = an->inputs[1 - cin];
    }
    const gr_node *cv = &g->nodes[ci];
    int transposed = strcmp(cv->op_type, "ConvTranspose") == 0;
    if ((!transposed && strcmp(cv->op_type, "Conv") != 0) || *cv->domain || cv->n_outputs != 1)
        return 0;
    if (g->values[x].is_output || g->values[x].n_consumers != 1)
        return refuse(r, "the output of %.120s has other readers than the BatchNormalization", cv->name);
    for (int k = 1; k < bn->n_outputs; k++)
        if (rwb_out_used(&b, k))
            return refuse(r, "%.120s's running statistics are read (training mode)", bn->name);
    if (gr_attr_int(bn, "training_mode", 0) != 0 || gr_attr_int(bn, "spatial", 1) != 1)
        return refuse(r, "%.120s is not in inference mode over channels", bn->name);
    const tdm_tensor *w = cv->n_inputs > 1 && cv->inputs[1] >= 0 ? g->values[cv->inputs[1]].init : NULL;
    const tdm_tensor *bias = cv->n_inputs > 2 && cv->inputs[2] >= 0 ? g->values[cv->inputs[2]].init : NULL;
    const tdm_tensor *p[4];
    for (int k = 0; k < 4; k++)
        p[k] = rwb_in_const(&b, k + 1);
    if (!w || (cv->n_inputs > 2 && cv->inputs[2] >= 0 && !bias) || !p[0] || !p[1] || !p[2] || !p[3])
        return refuse(r, "the weights of %.120s or the BatchNormalization's parameters are not constants", cv->name);
    if (!rwb_is_float(w->dtype) || w->rank < 3 || tdm_tensor_count(w) == 0)
        return 0;
    int64_t group = gr_attr_int(cv, "group", 1);
    int64_t co = transposed ? w->dims[1] * group : w->dims[0];
    if (group < 1 || (transposed && w->dims[0] % group) || (!transposed && co % group))
        return 0;
    for (int k = 0; k < 4; k++)
        if ((int64_t)tdm_tensor_count(p[k]) != co)
            return refuse(r, "the BatchNormalization has not one parameter per output channel of %.100s",
                          cv->name);
    if (bias && (int64_t)tdm_tensor_count(bias) != co)
        return 0;
    if (addb && !per_channel_const(addb, co, w->rank))
        return refuse(r, "the Add before the BatchNormalization adds more than one value per channel of %.100s",
                      cv->name);
    double eps = gr_attr_float(bn, "epsilon", 1e-5f);
    size_t nw = tdm_tensor_count(w), inner = nw / (size_t)w->dims[0] / (size_t)w->dims[1];
    double *s = mem_calloc((size_t)co + 1, sizeof *s), *bv = mem_calloc((size_t)co + 1, sizeof *bv),
           *wv = mem_calloc(nw + 1, sizeof *wv);
    int rc = -1;
    if (!s || !bv || !wv)
        goto done;
    for (int64_t c = 0; c < co; c++) {
        s[c] = tensor_get_f64(p[0], (size_t)c) / sqrt(tensor_get_f64(p[3], (size_t)c) + eps);
        double cb = (bias ? tensor_get_f64(bias, (size_t)c) : 0.0) + (addb ? tensor_get_f64(addb, (size_t)c) : 0.0);
        bv[c] = (cb - tensor_get_f64(p[2], (size_t)c)) * s[c] + tensor_get_f64(p[1], (size_t)c);
    }
    /* W[i, j, ...]: output channel i (Conv); (i / (C / group)) * (M / group) + j (ConvTranspose) */
    for (size_t k = 0; k < nw; k++) {
        size_t i = k / inner / (size_t)w->dims[1], j = k / inner % (size_t)w->dims[1];
        size_t o = transposed ? i / (size_t)(w->dims[0] / group) * (size_t)w->dims[1] + j : i;
        wv[k] = tensor_get_f64(w, k) * s[o];
    }
    char wn[RWB_NAME], bname[RWB_NAME];
    int64_t bdim[1] = {co};
    r->orig[r->n_orig++] = ci;
    if (ai >= 0)
        r->orig[r->n_orig++] = ai;
    if (gr_rw_const(r, g, w->dtype, w->rank, w->dims, wv, wn, sizeof wn) ||
        gr_rw_const(r, g, w->dtype, 1, bdim, bv, bname, sizeof bname))
        goto done;
    {
        const char *in[3] = {g->values[cv->inputs[0]].name, wn, bname}, *out = rwb_out_name(&b, 0);
        gr_rw_node *n = gr_rw_node_add(r, cv->op_type, 3, in, 1, &out);
        if (!n)
            goto done;
        rc = copy_attrs(n, cv) ? 0 : 1;
        if (!rc)
            refuse(r, "the attributes of %.120s cannot be copied", cv->name);
    }
done:
    mem_free(s);
    mem_free(bv);
    mem_free(wv);
    return rc;
}

/* ---- cast-insert ---- */

/* Bounds of an integer value: 1 and [*lo, *hi] when proven (a constant,
 * a dimension shape inference knows, or what such values become through
 * the ops below); 0 otherwise. Doubles hold every bound that matters
 * exactly (the int32 range). */
static int int_range(const gr_graph *g, int v, int depth, double *lo, double *hi)
{
    if (v < 0 || depth > 24)
        return 0;
    const gr_value *val = &g->values[v];
    if (val->init) {
        size_t n = tdm_tensor_count(val->init);
        if (val->init->dtype == TDM_FLOAT || val->init->dtype == TDM_FLOAT16 || val->init->dtype == TDM_DOUBLE ||
            val->init->dtype == TDM_BFLOAT16 || val->init->dtype == TDM_STRING)
            return 0;
        *lo = n ? INFINITY : 0;
        *hi = n ? -INFINITY : 0;
        for (size_t k = 0; k < n; k++) {
            double x = (double)tensor_get_i64(val->init, k);
            *lo = x < *lo ? x : *lo;
            *hi = x > *hi ? x : *hi;
        }
        return 1;
    }
    if (val->producer < 0)
        return 0;
    const gr_node *n = &g->nodes[val->producer];
    const char *op = n->op_type;
    double a0, a1, b0, b1;
    if (*n->domain)
        return 0;
    if (strcmp(op, "Shape") == 0) {
        const gr_type *t = n->inputs[0] >= 0 ? &g->values[n->inputs[0]].type : NULL;
        if (!t || t->rank < 0)
            return 0;
        int64_t s = gr_attr_int(n, "start", 0), e = gr_attr_int(n, "end", t->rank);
        s = s < 0 ? s + t->rank : s;
        e = e < 0 ? e + t->rank : e > t->rank ? t->rank : e;
        *lo = 0;
        *hi = 0;
        for (int64_t d = s < 0 ? 0 : s; d < e; d++) {
            if (t->dims[d].v < 0)
                return 0;
            *hi = (double)t->dims[d].v > *hi ? (double)t->dims[d].v : *hi;
        }
        return 1;
    }
    /* the values of input 0 (moved, not computed) */
    static const char *const moves[] = {"Gather", "Slice", "Squeeze", "Unsqueeze", "Reshape", "Identity",
                                        "Expand", "Tile", "Flatten", "Transpose", "Cast", "GatherElements",
                                        "ReduceMax", "ReduceMin", NULL};
    for (int k = 0; moves[k]; k++)
        if (strcmp(op, moves[k]) == 0)
            return int_range(g, n->inputs[0], depth + 1, lo, hi);
    if (strcmp(op, "Concat") == 0 || strcmp(op, "Max") == 0 || strcmp(op, "Min") == 0) {
        for (int i = 0; i < n->n_inputs; i++) {
            if (!int_range(g, n->inputs[i], depth + 1, &a0, &a1))
                return 0;
            *lo = i == 0 || a0 < *lo ? a0 : *lo;
            *hi = i == 0 || a1 > *hi ? a1 : *hi;
        }
        return n->n_inputs > 0;
    }
    if (strcmp(op, "Neg") == 0 || strcmp(op, "Abs") == 0) {
        if (!int_range(g, n->inputs[0], depth + 1, &a0, &a1))
            return 0;
        *lo = strcmp(op, "Neg") == 0 ? -a1 : (a0 <= 0 && a1 >= 0 ? 0 : fmin(fabs(a0), fabs(a1)));
        *hi = strcmp(op, "Neg") == 0 ? -a0 : fmax(fabs(a0), fabs(a1));
        return 1;
    }
    if (n->n_inputs < 2 || !int_range(g, n->inputs[0], depth + 1, &a0, &a1) ||
        !int_range(g, n->inputs[1], depth + 1, &b0, &b1))
        return 0;
    if (strcmp(op, "Add") == 0 || strcmp(op, "Sub") == 0) {
        int add = op[0] == 'A';
        *lo = add ? a0 + b0 : a0 - b1;
        *hi = add ? a1 + b1 : a1 - b0;
        return 1;
    }
    if (strcmp(op, "Mul") == 0 || (strcmp(op, "Div") == 0 && (b0 > 0 || b1 < 0))) {
        double c[4];
        int div = op[0] == 'D';
        c[0] = div ? a0 / b0 : a0 * b0;
        c[1] = div ? a0 / b1 : a0 * b1;
        c[2] = div ? a1 / b0 : a1 * b0;
        c[3] = div ? a1 / b1 : a1 * b1;
        *lo = fmin(fmin(c[0], c[1]), fmin(c[2], c[3]));
        *hi = fmax(fmax(c[0], c[1]), fmax(c[2], c[3]));
        /* integer division truncates toward zero: within the real bounds */
        *lo = floor(*lo);
        *hi = ceil(*hi);
        return 1;
    }
    if (strcmp(op, "Range") == 0) {
        /* start .. limit (exclusive): within [min(start, limit), max(start, limit)] */
        *lo = fmin(a0, b0);
        *hi = fmax(a1, b1);
        return 1;
    }
    return 0;
}

static int fits_i32(double lo, double hi) { return lo >= (double)INT32_MIN && hi <= (double)INT32_MAX; }

/* The range proof cast-insert needs for value v (an input, or an output
 * when out): 1, or 0 with the sentence in r->why. */
static int i32_proof(gr_rw *r, const gr_graph *g, int v, int out)
{
    double lo, hi;
    if (out) {
        if (!int_range(g, v, 0, &lo, &hi) || !fits_i32(lo, hi))
            return refuse(r, "no proof that its int64 output '%.120s' fits int32", g->values[v].name);
        return 1;
    }
    if (!int_range(g, v, 0, &lo, &hi))
        return refuse(r, "no range proof for its int64 input '%.120s' (a constant, a known dimension)",
                      g->values[v].name);
    if (!fits_i32(lo, hi))
        return refuse(r, "its int64 input '%.120s' may not fit int32", g->values[v].name);
    return 1;
}

/* Node n with inputs or outputs of type from → the same node in type to:
 * constants converted, computed inputs through Cast(to), each such output
 * through Cast(from) back. proof (NULL: none) may refuse a value; a node
 * with a subgraph does not apply, one whose attribute names a type is
 * refused when refuse_typed. The two Cast rules below. */
static int retype(const gr_graph *g, int node, gr_rw *r, tdm_dtype from, tdm_dtype to,
                  int (*proof)(gr_rw *, const gr_graph *, int, int), int refuse_typed)
{
    rwb b;
    rwb_init(&b, r, g, node);
    const gr_node *n = b.n;
    const char *in[GR_RW_MAX_IO], *out[GR_RW_MAX_IO];
    int any = 0, back[GR_RW_MAX_IO] = {0};
    if (n->n_inputs > GR_RW_MAX_IO || n->n_outputs > GR_RW_MAX_IO || *n->domain)
        return 0;
    for (int i = 0; i < n->n_attrs; i++) {
        if (n->attrs[i].type == GA_GRAPH || n->attrs[i].type == GA_GRAPHS)
            return 0;
        if (refuse_typed && (strcmp(n->attrs[i].name, "to") == 0 || strcmp(n->attrs[i].name, "dtype") == 0))
            return refuse(r, "its attribute '%.40s' names an element type", n->attrs[i].name);
    }
    for (int i = 0; i < n->n_inputs; i++) {
        int v = n->inputs[i];
        in[i] = rwb_in_name(&b, i);
        if (v < 0 || g->values[v].type.dtype != from)
            continue;
        if (proof && !proof(r, g, v, 0))
            return 0;
        const tdm_tensor *c = g->values[v].init;
        if (b.nt >= RWB_TMPS)
            return -1;
        char *name = b.tmp[b.nt++];
        if (c) {
            size_t cnt = tdm_tensor_count(c);
            double *vals = mem_calloc(cnt + 1, sizeof *vals);
            int bad = !vals;
            for (size_t k = 0; vals && k < cnt; k++)
                vals[k] = tensor_get_f64(c, k);
            bad = bad || gr_rw_const(r, g, to, c->rank, c->dims, vals, name, RWB_NAME);
            mem_free(vals);
            if (bad)
                return -1;
        } else {
            gr_rw_tmp(r, g, name, RWB_NAME);
            gr_rw_node *cn = rwb_op(&b, "Cast", 1, in[i], NULL, name);
            if (cn)
                gr_rw_attr_int(cn, "to", to);
        }
        in[i] = name;
        any = 1;
    }
    for (int o = 0; o < n->n_outputs; o++) {
        int v = n->outputs[o];
        out[o] = rwb_out_name(&b, o);
        if (v < 0 || g->values[v].type.dtype != from)
            continue;
        if (proof && !proof(r, g, v, 1))
            return 0;
        out[o] = rwb_tmp(&b);
        back[o] = any = 1;
    }
    if (!any)
        return 0;
    gr_rw_node *nn = gr_rw_node_add(r, n->op_type, n->n_inputs, in, n->n_outputs, out);
    if (!nn)
        return -1;
    if (copy_attrs(nn, n))
        return refuse(r, "the attributes of %.120s cannot be copied", n->name);
    for (int o = 0; o < n->n_outputs; o++)
        if (back[o]) {
            gr_rw_node *cn = rwb_op(&b, "Cast", 1, out[o], NULL, rwb_out_name(&b, o));
            if (cn)
                gr_rw_attr_int(cn, "to", from);
        }
    return rwb_done(&b);
}

/* Node n with int64 inputs or outputs whose values are proven to fit
 * int32 → the same node in int32: constants narrowed, computed inputs
 * through Cast(to int32), each int64 output through Cast(to int64) back. */
int gr_rw_rule_cast_insert(const gr_graph *g, int node, gr_rw *r)
{
    return retype(g, node, r, TDM_INT64, TDM_INT32, i32_proof, 0);
}

/* ---- cast-fp16 ---- */

/* Node n with float32 inputs or outputs → the same node in float16: float
 * constants converted, computed inputs through Cast(to float16), each
 * float32 output through Cast(to float) back. An approximation (--rescue
 * all): verified like the others, at float16's tolerance. Refused for a
 * node whose attributes name a type (Cast's "to", a "dtype"). */
int gr_rw_rule_cast_fp16(const gr_graph *g, int node, gr_rw *r)
{
    return retype(g, node, r, TDM_FLOAT, TDM_FLOAT16, NULL, 1);
}
