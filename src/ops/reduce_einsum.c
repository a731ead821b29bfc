/* Einsum and Det.
 *
 * Einsum parses the equation into labels (the 52 letters, and one label per
 * broadcast dimension of the ellipsis, right-aligned across operands), then
 * walks every combination of the output labels and, inside, of the summed
 * labels, with one offset per operand (a label repeated in an operand adds
 * its strides: diagonals). Accumulation is in double. */
#include "ops/reduce.h"
#include "core/mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define EIN_MAX_OPS 16
#define EIN_LETTERS 52
#define EIN_LABELS (EIN_LETTERS + TDM_MAX_RANK)

typedef struct ein_plan {
    int n_ops;
    int op_rank[EIN_MAX_OPS];
    int op_lab[EIN_MAX_OPS][TDM_MAX_RANK]; /* label of each operand dim */
    int64_t size[EIN_LABELS];              /* -1 unknown (infer) */
    int used[EIN_LABELS];
    int out_rank;
    int out_lab[EIN_LABELS];
    int n_sum;
    int sum_lab[EIN_LABELS];
} ein_plan;

static int ein_letter(char ch)
{
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a';
    if (ch >= 'A' && ch <= 'Z')
        return 26 + ch - 'A';
    return -1;
}

/* Parses one term (letters and at most one "...") of an operand of rank
 * `rank` (or, for the output, rank < 0) into labels. ell: broadcast rank. */
static int ein_term(const char *s, size_t len, int rank, int ell, int *labs, int *n, int *has_ell, char *why,
                    size_t wsz)
{
    int letters = 0, dots = 0;
    for (size_t k = 0; k < len; k++) {
        if (s[k] == '.') {
            dots++;
        } else if (ein_letter(s[k]) >= 0) {
            letters++;
        } else {
            snprintf(why, wsz, "the equation has an invalid character '%c'", s[k]);
            return -1;
        }
    }
    if (dots != 0 && dots != 3) {
        snprintf(why, wsz, "the equation has a malformed ellipsis");
        return -1;
    }
    *has_ell = dots == 3;
    int e = 0;
    if (rank >= 0) {
        e = rank - letters;
        if (e < 0 || (!dots && e != 0)) {
            snprintf(why, wsz, "a term has %d subscripts for an input of rank %d", letters, rank);
            return -1;
        }
    } else {
        e = dots ? ell : 0;
    }
    int c = 0;
    for (size_t k = 0; k < len; k++) {
        if (s[k] == '.') {
            if (k + 2 >= len || s[k + 1] != '.' || s[k + 2] != '.') {
                snprintf(why, wsz, "the equation has a malformed ellipsis");
                return -1;
            }
            for (int j = 0; j < e; j++)
                labs[c++] = EIN_LETTERS + (ell - e) + j; /* right-aligned */
            k += 2;
        } else {
            labs[c++] = ein_letter(s[k]);
        }
    }
    *n = c;
    return 0;
}

/* ranks/dims of the operands (dims -1: unknown). Returns 0 or -1 with why. */
static int ein_parse(const char *eq, int n_ops, const int *ranks, const int64_t (*dims)[TDM_MAX_RANK], ein_plan *p,
                     char *why, size_t wsz)
{
    char buf[1024];
    size_t bl = 0;
    memset(p, 0, sizeof *p);
    for (const char *c = eq; *c; c++)
        if (*c != ' ') {
            if (bl + 1 >= sizeof buf) {
                snprintf(why, wsz, "the equation is too long");
                return -1;
            }
            buf[bl++] = *c;
        }
    buf[bl] = 0;
    if (n_ops < 1 || n_ops > EIN_MAX_OPS) {
        snprintf(why, wsz, "Einsum takes 1 to %d inputs, not %d", EIN_MAX_OPS, n_ops);
        return -1;
    }
    p->n_ops = n_ops;
    const char *arrow = strstr(buf, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - buf) : bl;
    /* broadcast rank of the ellipsis */
    int ell = 0;
    {
        size_t start = 0;
        int op = 0;
        for (size_t k = 0; k <= lhs_len; k++) {
            if (k == lhs_len || buf[k] == ',') {
                if (op >= n_ops) {
                    snprintf(why, wsz, "the equation has more terms than the %d inputs", n_ops);
                    return -1;
                }
                int letters = 0;
                for (size_t j = start; j < k; j++)
                    letters += ein_letter(buf[j]) >= 0;
                if (ranks[op] - letters > ell)
                    ell = ranks[op] - letters;
                op++;
                start = k + 1;
            }
        }
        if (op != n_ops) {
            snprintf(why, wsz, "the equation has %d terms for %d inputs", op, n_ops);
            return -1;
        }
    }
    for (int l = 0; l < EIN_LABELS; l++)
        p->size[l] = -2; /* not seen */
    int count[EIN_LABELS] = {0};
    int any_ell = 0;
    size_t start = 0;
    int op = 0;
    for (size_t k = 0; k <= lhs_len; k++) {
        if (k != lhs_len && buf[k] != ',')
            continue;
        int n, has_ell;
        if (ranks[op] > TDM_MAX_RANK ||
            ein_term(buf + start, k - start, ranks[op], ell, p->op_lab[op], &n, &has_ell, why, wsz))
            return -1;
        any_ell |= has_ell;
        p->op_rank[op] = n;
        for (int j = 0; j < n; j++) {
            int l = p->op_lab[op][j];
            int64_t dsz = dims[op][j];
            count[l]++;
            p->used[l] = 1;
            int64_t cur = p->size[l];
            if (cur == -2 || cur == -1 || (l >= EIN_LETTERS && cur == 1)) {
                if (dsz >= 0 || cur == -2)
                    p->size[l] = dsz;
            } else if (dsz >= 0 && dsz != cur && !(l >= EIN_LETTERS && dsz == 1)) {
                snprintf(why, wsz, "subscript '%c' has size %lld in one input and %lld in another",
                         l < 26 ? 'a' + l : l < EIN_LETTERS ? 'A' + l - 26 : '.', (long long)cur, (long long)dsz);
                return -1;
            }
        }
        op++;
        start = k + 1;
    }
    int in_out[EIN_LABELS] = {0};
    if (arrow) {
        int n, has_ell;
        if (ein_term(arrow + 2, strlen(arrow + 2), -1, ell, p->out_lab, &n, &has_ell, why, wsz))
            return -1;
        p->out_rank = n;
        for (int j = 0; j < n; j++) {
            int l = p->out_lab[j];
            if (in_out[l]++ || (!p->used[l] && l < EIN_LETTERS)) {
                snprintf(why, wsz, "the output subscripts repeat a subscript or use one no input has");
                return -1;
            }
            if (!p->used[l]) {
                p->size[l] = 1; /* an ellipsis no input broadcasts */
                p->used[l] = 1;
            }
        }
    } else {
        int n = 0;
        if (any_ell)
            for (int j = 0; j < ell; j++)
                p->out_lab[n++] = EIN_LETTERS + j;
        /* letters used once, in alphabetical (ASCII) order: upper case first */
        for (int l = 26; l < EIN_LETTERS; l++)
            if (count[l] == 1)
                p->out_lab[n++] = l;
        for (int l = 0; l < 26; l++)
            if (count[l] == 1)
                p->out_lab[n++] = l;
        p->out_rank = n;
        for (int j = 0; j < n; j++)
            in_out[p->out_lab[j]] = 1;
    }
    if (p->out_rank > TDM_MAX_RANK) {
        snprintf(why, wsz, "the output would have rank %d, more than %d", p->out_rank, TDM_MAX_RANK);
        return -1;
    }
    for (int l = 0; l < EIN_LABELS; l++)
        if (p->used[l] && !in_out[l])
            p->sum_lab[p->n_sum++] = l;
    return 0;
}

static tdm_status ein_plan_run(op_ctx *ctx, ein_plan *p, char *why, size_t wsz)
{
    int ranks[EIN_MAX_OPS];
    int64_t(*dims)[TDM_MAX_RANK] = mem_calloc(EIN_MAX_OPS, sizeof *dims);
    if (!dims)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    if (ctx->n_in > EIN_MAX_OPS) {
        mem_free(dims);
        return op_fail(ctx, TDM_E_UNSUPPORTED, "Einsum takes at most %d inputs, not %d", EIN_MAX_OPS, ctx->n_in);
    }
    for (int i = 0; i < ctx->n_in; i++) {
        tdm_status st = op_red_check(ctx, i, DT_NUMERIC);
        if (st) {
            mem_free(dims);
            return st;
        }
        ranks[i] = ctx->in[i]->rank;
        memcpy(dims[i], ctx->in[i]->dims, sizeof dims[i]);
    }
    const char *eq = gr_attr_str(ctx->node, "equation", NULL);
    int bad = !eq ? -2 : ein_parse(eq, ctx->n_in, ranks, (const int64_t(*)[TDM_MAX_RANK])dims, p, why, wsz);
    mem_free(dims);
    if (bad == -2)
        return op_fail(ctx, TDM_E_MODEL, "attribute 'equation' is missing");
    if (bad)
        return op_fail(ctx, TDM_E_RUNTIME, "equation '%s': %s", eq, why);
    return TDM_OK;
}

tdm_status op_run_Einsum(op_ctx *ctx)
{
    ein_plan p;
    char why[256];
    tdm_status st = ein_plan_run(ctx, &p, why, sizeof why);
    if (st)
        return st;
    const tdm_tensor *x0 = ctx->in[0];
    int64_t odims[TDM_MAX_RANK];
    for (int j = 0; j < p.out_rank; j++)
        odims[j] = p.size[p.out_lab[j]] < 0 ? 1 : p.size[p.out_lab[j]];
    if ((st = op_out(ctx, 0, x0->dtype, p.out_rank, odims)))
        return st;
    tdm_tensor *y = ctx->out[0];
    /* strides per operand and label */
    int64_t str[EIN_MAX_OPS][EIN_LABELS];
    memset(str, 0, sizeof str);
    double *xs[EIN_MAX_OPS] = {0};
    double *acc = NULL;
    for (int i = 0; i < p.n_ops; i++) {
        int64_t s[TDM_MAX_RANK];
        shape_strides(ctx->in[i]->rank, ctx->in[i]->dims, s);
        for (int j = 0; j < p.op_rank[i]; j++) {
            int l = p.op_lab[i][j];
            if (ctx->in[i]->dims[j] == 1 && p.size[l] != 1)
                continue; /* broadcast */
            str[i][l] += s[j];
        }
        if ((st = op_red_load_f64(ctx, ctx->in[i], &xs[i])))
            goto done;
    }
    size_t nsum = 1;
    for (int k = 0; k < p.n_sum; k++) {
        int64_t sz = p.size[p.sum_lab[k]];
        if (sz < 0 || mem_mul(nsum, (size_t)sz, &nsum)) {
            st = op_fail(ctx, TDM_E_NOMEM, "the summation's size overflows");
            goto done;
        }
    }
    if ((st = op_red_alloc_f64(ctx, y->count, &acc)))
        goto done;
    if (nsum > 0) {
        int64_t oidx[EIN_LABELS] = {0}, sidx[EIN_LABELS] = {0};
        int64_t base[EIN_MAX_OPS] = {0}, off[EIN_MAX_OPS];
        int no = p.n_ops;
        int last_sum = p.n_sum - 1;
        for (size_t o = 0; o < y->count; o++) {
            double a = 0;
            memcpy(off, base, sizeof off);
            /* innermost summed label: a tight loop */
            int64_t inner_n = last_sum >= 0 ? p.size[p.sum_lab[last_sum]] : 1;
            size_t outer_n = inner_n > 0 ? nsum / (size_t)inner_n : 0;
            for (size_t so = 0; so < outer_n; so++) {
                for (int64_t t = 0; t < inner_n; t++) {
                    double v = 1;
                    for (int i = 0; i < no; i++)
                        v *= xs[i][off[i] + (last_sum >= 0 ? t * str[i][p.sum_lab[last_sum]] : 0)];
                    a += v;
                }
                /* odometer over the other summed labels */
                for (int k = last_sum - 1; k >= 0; k--) {
                    int l = p.sum_lab[k];
                    for (int i = 0; i < no; i++)
                        off[i] += str[i][l];
                    if (++sidx[k] < p.size[l])
                        break;
                    for (int i = 0; i < no; i++)
                        off[i] -= str[i][l] * p.size[l];
                    sidx[k] = 0;
                }
            }
            acc[o] = a;
            for (int k = p.out_rank - 1; k >= 0; k--) {
                int l = p.out_lab[k];
                for (int i = 0; i < no; i++)
                    base[i] += str[i][l];
                if (++oidx[k] < p.size[l])
                    break;
                for (int i = 0; i < no; i++)
                    base[i] -= str[i][l] * p.size[l];
                oidx[k] = 0;
            }
        }
    }
    op_red_put_f64(y, 0, y->count, acc);
done:
    for (int i = 0; i < p.n_ops; i++)
        mem_free(xs[i]);
    mem_free(acc);
    return st;
}

tdm_status op_infer_Einsum(op_infer_ctx *ctx)
{
    if (ctx->n_out < 1 || ctx->n_in < 1 || ctx->n_in > EIN_MAX_OPS || !ctx->in[0])
        return TDM_OK;
    ctx->out[0].kind = TDM_KIND_TENSOR;
    ctx->out[0].dtype = ctx->in[0]->dtype;
    const char *eq = gr_attr_str(ctx->node, "equation", NULL);
    if (!eq)
        return TDM_OK;
    int ranks[EIN_MAX_OPS];
    int64_t(*dims)[TDM_MAX_RANK] = mem_calloc(EIN_MAX_OPS, sizeof *dims);
    ein_plan *p = mem_alloc(sizeof *p);
    if (!dims || !p)
        goto done;
    for (int i = 0; i < ctx->n_in; i++) {
        if (!ctx->in[i] || ctx->in[i]->rank < 0)
            goto done;
        ranks[i] = ctx->in[i]->rank;
        for (int j = 0; j < ranks[i]; j++)
            dims[i][j] = ctx->in[i]->dims[j].v;
    }
    char why[256];
    if (ein_parse(eq, ctx->n_in, ranks, (const int64_t(*)[TDM_MAX_RANK])dims, p, why, sizeof why) == 0) {
        ctx->out[0].rank = p->out_rank;
        for (int j = 0; j < p->out_rank; j++) {
            int64_t v = p->size[p->out_lab[j]];
            ctx->out[0].dims[j] = (gr_dim){v >= 0 ? v : -1, NULL};
        }
    }
done:
    mem_free(dims);
    mem_free(p);
    return TDM_OK;
}

/* ---- Det ---- */

tdm_status op_run_Det(op_ctx *ctx)
{
    tdm_status st = op_red_check(ctx, 0, DT_FLOATS);
    if (st)
        return st;
    const tdm_tensor *x = ctx->in[0];
    if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must be a batch of square matrices [..., M, M]");
    size_t m = (size_t)x->dims[x->rank - 1], batch;
    if ((st = op_red_prod(ctx, x->dims, 0, x->rank - 2, &batch)))
        return st;
    if ((st = op_out(ctx, 0, x->dtype, x->rank - 2, x->dims)))
        return st;
    double *a = NULL, *det = NULL;
    if ((st = op_red_load_f64(ctx, x, &a)) || (st = op_red_alloc_f64(ctx, batch, &det)))
        goto done;
    for (size_t b = 0; b < batch; b++) {
        double *mat = a + b * m * m, d = 1;
        for (size_t c = 0; c < m && d != 0; c++) {
            size_t piv = c;
            for (size_t r = c + 1; r < m; r++)
                if (fabs(mat[r * m + c]) > fabs(mat[piv * m + c]))
                    piv = r;
            if (mat[piv * m + c] == 0) {
                d = 0;
                break;
            }
            if (piv != c) {
                for (size_t k = 0; k < m; k++) {
                    double t = mat[c * m + k];
                    mat[c * m + k] = mat[piv * m + k];
                    mat[piv * m + k] = t;
                }
                d = -d;
            }
            double pv = mat[c * m + c];
            d *= pv;
            for (size_t r = c + 1; r < m; r++) {
                double f = mat[r * m + c] / pv;
                if (f == 0)
                    continue;
                for (size_t k = c; k < m; k++)
                    mat[r * m + k] -= f * mat[c * m + k];
            }
        }
        det[b] = d;
    }
    op_red_put_f64(ctx->out[0], 0, batch, det);
done:
    mem_free(a);
    mem_free(det);
    return st;
}

tdm_status op_infer_Det(op_infer_ctx *ctx)
{
    const gr_type *t = ctx->n_in > 0 ? ctx->in[0] : NULL;
    if (!t || ctx->n_out < 1)
        return TDM_OK;
    ctx->out[0].kind = TDM_KIND_TENSOR;
    ctx->out[0].dtype = t->dtype;
    if (t->rank >= 2) {
        ctx->out[0].rank = t->rank - 2;
        memcpy(ctx->out[0].dims, t->dims, sizeof(gr_dim) * (size_t)(t->rank - 2));
    }
    return TDM_OK;
}
